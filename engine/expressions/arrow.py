"""A bound predicate as a ``pyarrow.compute.Expression``: the row filter of computed subsets.

``to_arrow(expr)`` is true for exactly the rows where the predicate is TRUE under SQL's
three-valued logic (a null compares unknown, and a filter keeps only TRUE rows), with
the float semantics of DuckDB, Spark and Iceberg rather than IEEE's: NaN equals NaN and
sorts above every other value, and ``-0.0 = 0.0``. So ``price > 10`` keeps NaN prices,
``price < 10`` does not, ``price = nan`` keeps NaN, ``price != 10`` and ``price NOT IN
(...)`` keep NaN. Arrow's kernels are IEEE's; the difference is spelled out per operator
below with ``is_nan``.

The expression is written for both of its uses:

- a row filter (``Table.filter``, ``Dataset.to_batches(filter=)``): exact;
- row-group pruning from Parquet statistics (``ParquetFileFragment.subset``): Parquet
  min/max exclude NaN and carry no NaN count, so every float comparison NaN could satisfy
  (``>``, ``>=``, ``!=``, ``NOT IN``) carries an ``OR is_nan(x)`` that statistics cannot
  decide: such a row group is never pruned by a bound that ignored its NaN.

NOT is pushed into the predicates first (``rewrite_not``): the result is then monotone
in its leaves, and each leaf need only be TRUE exactly where SQL says TRUE (a leaf may be
FALSE where SQL says unknown). Negating the result is therefore not the negated predicate:
translate ``Not(expr)`` instead.

``path_of`` maps a bound column to its path in the data (default: the reference's own
path); ``constants`` gives columns that are one value in the unit being read (partition
columns, a column the file lacks: null), whose predicates are decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundReference,
    Expression,
    Not,
    Op,
    Or,
    Predicate,
    rewrite_not,
)

__all__ = ["to_arrow"]

PathOf = Callable[[BoundReference], tuple[str, ...]]

_TRUE = pc.scalar(True)
_FALSE = pc.scalar(False)


def to_arrow(expr: Expression, path_of: PathOf | None = None, constants: Mapping[str, pa.Scalar] | None = None) -> pc.Expression:
    """The row filter of a bound ``expr`` (see the module's docstring for its semantics).

    ``constants``: column name (the bound reference's ``name``) -> its one value in the data
    the filter runs on; predicates on them become true or false here."""
    return _Translator(path_of or (lambda ref: ref.path), constants or {}).walk(rewrite_not(expr))


class _Translator:
    def __init__(self, path_of: PathOf, constants: Mapping[str, pa.Scalar]) -> None:
        self.path_of = path_of
        self.constants = constants

    def walk(self, e: Expression) -> pc.Expression:
        if isinstance(e, And):
            return _and(self.walk(e.left), self.walk(e.right))
        if isinstance(e, Or):
            return _or(self.walk(e.left), self.walk(e.right))
        if isinstance(e, AlwaysTrue):
            return _TRUE
        if isinstance(e, AlwaysFalse):
            return _FALSE
        if isinstance(e, Not):  # rewrite_not leaves none
            raise TypeError("NOT should have been rewritten")
        if isinstance(e, Predicate):
            ref = e.term
            assert isinstance(ref, BoundReference), "to_arrow takes a bound expression"
            if ref.name in self.constants:
                return _TRUE if _constant_truth(e, self.constants[ref.name]) else _FALSE
            return _leaf(e, pc.field(*self.path_of(ref)))
        raise TypeError(f"not an expression: {e!r}")


def _and(a: pc.Expression, b: pc.Expression) -> pc.Expression:
    if a.equals(_FALSE) or b.equals(_FALSE):
        return _FALSE
    if a.equals(_TRUE):
        return b
    if b.equals(_TRUE):
        return a
    return a & b


def _or(a: pc.Expression, b: pc.Expression) -> pc.Expression:
    if a.equals(_TRUE) or b.equals(_TRUE):
        return _TRUE
    if a.equals(_FALSE):
        return b
    if b.equals(_FALSE):
        return a
    return a | b


def _any(items: list[pc.Expression]) -> pc.Expression:
    out = _FALSE
    for item in items:
        out = _or(out, item)
    return out


def _all(items: list[pc.Expression]) -> pc.Expression:
    out = _TRUE
    for item in items:
        out = _and(out, item)
    return out


def _work_type(t: pa.DataType) -> pa.DataType | None:
    """The type the kernels compare ``t`` as, when Arrow has no kernels for it (float16)."""
    return pa.float32() if mt.is_float16(t) else None


def _leaf(p: Predicate, x: pc.Expression) -> pc.Expression:
    t = p.term.type  # type: ignore[union-attr]  # a bound predicate's term is a BoundReference
    work = _work_type(t)
    if work is not None:
        x = x.cast(work)
    lits = [lit.scalar if work is None else lit.scalar.cast(work) for lit in p.literals]
    op = p.op
    if op is Op.IS_NULL:
        return x.is_null()
    if op is Op.NOT_NULL:
        return x.is_valid()
    if op is Op.IS_NAN:
        return pc.is_nan(x)
    if op is Op.NOT_NAN:
        return x.is_valid() & ~pc.is_nan(x)
    if op is Op.STARTS_WITH:
        return _starts_with(x, lits[0])
    if op is Op.NOT_STARTS_WITH:
        return x.is_valid() & ~_starts_with(x, lits[0])
    if mt.is_floating(t):
        return _float(op, x, lits)
    if op is Op.IN:
        return x.isin(pa.array(lits, lits[0].type)) if len(lits) > 1 else x == lits[0]
    if op is Op.NOT_IN:
        return x.is_valid() & ~x.isin(pa.array(lits, lits[0].type))
    return _compare(op, x, lits[0])


def _compare(op: Op, x: pc.Expression, lit: pa.Scalar) -> pc.Expression:
    if op is Op.EQ:
        return x == lit
    if op is Op.NE:
        return x != lit
    if op is Op.LT:
        return x < lit
    if op is Op.LE:
        return x <= lit
    if op is Op.GT:
        return x > lit
    if op is Op.GE:
        return x >= lit
    raise ValueError(f"not a comparison: {op}")


def _is_nan_literal(lit: pa.Scalar) -> bool:
    v = lit.as_py()
    return v != v


def _float(op: Op, x: pc.Expression, lits: list[pa.Scalar]) -> pc.Expression:
    """Float comparisons with NaN equal to itself and above every value; ``-0.0 = 0.0``
    (IEEE's equality already). ``is_in`` is not used: its hashing tells -0.0 from 0.0."""
    nan = pc.is_nan(x)
    if op in (Op.IN, Op.NOT_IN):
        eq = _any([_float(Op.EQ, x, [lit]) for lit in lits])
        if op is Op.IN:
            return eq
        # x NOT IN (a, b) = x != a AND x != b
        return _all([_float(Op.NE, x, [lit]) for lit in lits])
    lit = lits[0]
    if _is_nan_literal(lit):
        # x = NaN: NaN; x < NaN, x != NaN: every other value; x <= NaN: every value; x > NaN: none
        if op is Op.EQ or op is Op.GE:
            return nan
        if op is Op.NE or op is Op.LT:
            return x.is_valid() & ~nan
        if op is Op.LE:
            return x.is_valid()
        return _FALSE  # GT
    if op in (Op.GT, Op.GE, Op.NE):
        return _compare(op, x, lit) | nan  # NaN is above every value and differs from each
    return _compare(op, x, lit)  # =, <, <=: false for NaN under IEEE already


def _starts_with(x: pc.Expression, prefix: pa.Scalar) -> pc.Expression:
    """Prefix of strings or bytes, compared on the bytes. For strings, also the range
    ``prefix <= x``: the same rows, and a bound row-group statistics can decide."""
    value = prefix.as_py()
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if not raw:
        return x.is_valid()
    head = pc.binary_slice(x.cast(pa.large_binary()), 0, len(raw)) if not isinstance(value, str) else None
    if head is not None:
        return head == pa.scalar(raw, pa.large_binary())
    return (x >= prefix) & pc.starts_with(x, value)


def _constant_truth(p: Predicate, value: pa.Scalar) -> bool:
    """Whether ``p`` is TRUE for a column whose every value is ``value`` (null: never, but IS NULL)."""
    t = p.term.type  # type: ignore[union-attr]  # a bound predicate's term is a BoundReference
    arr = pa.array([value], value.type)
    arr = arr if arr.type == t else arr.cast(t)
    got = pa.table({"x": arr}).filter(_leaf(Predicate(p.op, BoundReference("x", ("x",), t), p.literals), pc.field("x")))
    return got.num_rows == 1
