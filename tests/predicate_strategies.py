"""Hypothesis strategies for predicate trees: one leaf rule and one tree shape for every
property test of the predicate language (the evaluators, the row filter, the file index,
subset statistics), each test giving its own columns and value pools.

A leaf is any operator the language applies to the column's type, with literals drawn from
the column's pool; a tree combines leaves by AND, OR and NOT. Sharing them keeps every
test's coverage the same when the language grows: a new operator reaches them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from engine import expressions as ex
from engine.expressions import Op

# Value pools with the edges the evaluators must get right: extreme integers, NaN, -0.0 and
# infinities, decimals at their precision, timestamps beyond Python's years, strings with
# shared prefixes and a multi-byte character.
I64 = st.one_of(st.sampled_from([-(2**63), 2**63 - 1, -1, 0, 1]), st.integers(-(2**63), 2**63 - 1))
U64 = st.one_of(st.sampled_from([0, 1, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
F64 = st.one_of(st.sampled_from([math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, -1.5]), st.floats(allow_nan=True, width=64))
F32 = st.one_of(st.sampled_from([math.nan, -0.0, 0.0, 2.5]), st.floats(allow_nan=True, width=32))
DEC = st.decimals(min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2, allow_nan=False)  # decimal128(10, 2)
TS = st.integers(-(2**50), 2**50)  # microseconds since the epoch (arrow_array makes them timestamps)
STR = st.text(alphabet="abé", max_size=4)

#: a column's name -> (its Arrow type, the values its literals are drawn from)
Columns = Mapping[str, tuple[pa.DataType, SearchStrategy[Any]]]


def ops_for(t: pa.DataType) -> list[Op]:
    """Every operator the predicate language applies to a column of type ``t``: comparisons,
    sets and null tests for all; order for all but booleans; NaN tests for floats; prefixes
    for strings."""
    ops = [Op.EQ, Op.NE]
    if not pa.types.is_boolean(t):
        ops += [Op.LT, Op.LE, Op.GT, Op.GE]
    ops += [Op.IN, Op.NOT_IN, Op.IS_NULL, Op.NOT_NULL]
    if pa.types.is_floating(t):
        ops += [Op.IS_NAN, Op.NOT_NAN]
    if pa.types.is_string(t):
        ops += [Op.STARTS_WITH, Op.NOT_STARTS_WITH]
    return ops


def arrow_array(t: pa.DataType, raw: list[Any]) -> pa.Array:
    """``raw`` as an array of ``t``; timestamps given as integers (storage units since the
    epoch), which reach every year Arrow can hold, not only Python's."""
    if pa.types.is_timestamp(t) and all(v is None or isinstance(v, int) for v in raw):
        return pa.array(raw, pa.int64()).view(t)
    return pa.array(raw, t)


def leaves(columns: Columns, *, typed: bool = True, prefixes: SearchStrategy[str] | None = None) -> SearchStrategy[ex.Expression]:
    """One predicate on one of ``columns``.

    ``typed``: literals as Arrow scalars of the column's type (the tree is bound as built);
    else the pool's values as they are, for the binder to type. ``prefixes``: the pool of
    ``STARTS WITH`` literals where the column's own values would rarely share a prefix."""

    @st.composite
    def leaf(draw: st.DrawFn) -> ex.Expression:
        name = draw(st.sampled_from(list(columns)))
        t, values = columns[name]
        op = draw(st.sampled_from(ops_for(t)))
        if op in ex.tree.UNARY:
            args: tuple[Any, ...] = ()
        elif op in ex.tree.SET:
            args = tuple(draw(st.lists(values, min_size=1, max_size=3)))
        elif op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH) and prefixes is not None:
            args = (draw(prefixes),)
        else:
            args = (draw(values),)
        if typed:
            args = tuple(arrow_array(t, [v])[0] for v in args)
        return ex.predicate(name, op, *args)

    return leaf()


def trees(leaf: SearchStrategy[ex.Expression], max_leaves: int, long_chains: bool = True) -> SearchStrategy[ex.Expression]:
    """AND, OR and NOT over ``leaf``, up to ``max_leaves`` leaves; with ``long_chains``, one tree
    in ten is instead a long chain (:func:`chains`: hundreds to thousands of terms, built as
    deep as an API caller would)."""
    small = st.recursive(
        leaf,
        lambda children: st.one_of(st.builds(ex.And, children, children), st.builds(ex.Or, children, children), st.builds(ex.Not, children)),
        max_leaves=max_leaves,
    )
    if not long_chains:
        return small
    chain = chains(small)
    return st.integers(0, 9).flatmap(lambda k: chain if k == 9 else small)


def chains(term: SearchStrategy[ex.Expression], lengths: tuple[int, ...] = (300, 1500)) -> SearchStrategy[ex.Expression]:
    """One long AND or OR chain of terms drawn from a few ``term`` s, built the way that is
    deepest for a recursive visitor: left-deep (as ``a OR b OR c ...`` parses naively),
    right-deep, or each term under a double NOT, the whole maybe under 1,001 NOTs. The binder
    must flatten it (docs/PREDICATES.md, Limits), not recurse into a RecursionError."""

    @st.composite
    def chain(draw: st.DrawFn) -> ex.Expression:
        pool = draw(st.lists(term, min_size=1, max_size=4))
        widest = max(ex.tree.fold(t, lambda _: 1, lambda _, counts: sum(counts)) for t in pool)
        n = min(draw(st.sampled_from(lengths)), ex.tree.MAX_TERMS // widest)  # within the limit on predicates
        kind = draw(st.sampled_from([ex.And, ex.Or]))
        shape = draw(st.sampled_from(["left", "right", "double not"]))
        items = [pool[i % len(pool)] for i in range(n)]
        if shape == "double not":
            items = [ex.Not(ex.Not(x)) for x in items]
        out = items[0]
        for x in items[1:]:
            out = kind(x, out) if shape == "right" else kind(out, x)
        if draw(st.booleans()):
            for _ in range(1001):
                out = ex.Not(out)
        return out

    return chain()
