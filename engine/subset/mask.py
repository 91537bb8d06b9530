"""A one-column predicate over an array of that column's values (IEEE semantics: NaN fails
every comparison but ``!=``; nulls fail every predicate but ``IS NULL``).

Used on the stored exact frequencies of a partition: their values are distinct, so the
matching rows of a predicate on the column are the sum of the matching values' counts.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.expressions.tree import AlwaysFalse, AlwaysTrue, And, Expression, Not, Op, Or, Predicate

_COMPARE = {Op.EQ: pc.equal, Op.NE: pc.not_equal, Op.LT: pc.less, Op.LE: pc.less_equal, Op.GT: pc.greater, Op.GE: pc.greater_equal}


def mask(values: pa.Array, e: Expression) -> pa.Array:
    """Whether each value matches ``e`` (every predicate of ``e`` on this one column), nulls false."""
    return pc.fill_null(_kleene(values, e), False)


def _kleene(values: pa.Array, e: Expression) -> pa.Array:
    if isinstance(e, And):
        return pc.and_kleene(_kleene(values, e.left), _kleene(values, e.right))
    if isinstance(e, Or):
        return pc.or_kleene(_kleene(values, e.left), _kleene(values, e.right))
    if isinstance(e, Not):
        return pc.invert(_kleene(values, e.child))
    if isinstance(e, AlwaysTrue):
        return pa.array([True] * len(values))
    if isinstance(e, AlwaysFalse):
        return pa.array([False] * len(values))
    assert isinstance(e, Predicate)
    op = e.op
    lits = [lit.scalar for lit in e.literals]
    if op is Op.IS_NULL:
        return pc.is_null(values)
    if op is Op.NOT_NULL:
        return pc.is_valid(values)
    if op in (Op.IS_NAN, Op.NOT_NAN):
        nan = pc.is_nan(values) if mt.is_floating(values.type) else pc.if_else(pc.is_valid(values), False, None)
        return nan if op is Op.IS_NAN else pc.invert(nan)
    if op in (Op.IN, Op.NOT_IN):
        any_eq = pc.equal(values, lits[0])
        for s in lits[1:]:
            any_eq = pc.or_kleene(any_eq, pc.equal(values, s))
        return any_eq if op is Op.IN else pc.invert(any_eq)
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        prefix = lits[0].as_py()
        if isinstance(prefix, bytes):
            n = len(prefix)
            hit = pc.equal(pc.binary_slice(values, 0, n), pa.scalar(prefix, values.type))
        else:
            hit = pc.starts_with(values, prefix)
        return hit if op is Op.STARTS_WITH else pc.invert(hit)
    return _COMPARE[op](values, lits[0])
