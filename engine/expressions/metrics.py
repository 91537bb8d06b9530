"""Whether a unit of data (a partition, a file) might hold a row matching a bound expression,
from its column statistics alone.

The visitor is pyiceberg's ``_InclusiveMetricsEvaluator`` in shape and in its one
rule: "cannot match" only when the statistics prove it, anything unknown "might
match". NOTs are first pushed into the predicates (``tree.rewrite_not``), so the
visitor never negates a "might".

Statistics are bounds, not necessarily values: ``lower <= every non-null, non-NaN
value <= upper`` is all the evaluator assumes (a truncated Parquet footer string is
still a bound). NaN is not null and is outside the bounds; an order comparison
(< <= > >=) or ``!=`` / ``NOT IN`` on a unit that may hold NaN might match, since
engines disagree on where NaN sorts (IEEE: unordered; Spark, DuckDB, Iceberg: the
largest value), while ``=`` and ``IN`` never match NaN unless the literal is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

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
    conjuncts,
    rewrite_not,
)

T = TypeVar("T")

ROWS_MIGHT_MATCH = True
ROWS_CANNOT_MATCH = False


class MembershipFilter(Protocol):
    """A Bloom filter of a unit's values: ``might_contain`` is False only for values never added."""

    def might_contain(self, value: Any) -> bool: ...


@dataclass(frozen=True)
class ColumnMetrics:
    """What is known of one column in one unit; None means unknown.

    ``lower`` / ``upper`` bound the non-null, non-NaN values, in the comparable form
    of ``binding.comparable`` (None: no such value, or unknown).
    """

    rows: int | None = None
    nulls: int | None = None
    nans: int | None = None
    lower: Any = None
    upper: Any = None
    bloom: MembershipFilter | None = None


#: how an evaluator gets a column's metrics in the unit at hand (None: nothing known)
MetricsOf = Callable[[BoundReference], "ColumnMetrics | None"]


class BoundExpressionVisitor(Generic[T]):
    """Visits a bound expression bottom-up (pyiceberg's ``BoundBooleanExpressionVisitor``)."""

    def visit_true(self) -> T:
        raise NotImplementedError

    def visit_false(self) -> T:
        raise NotImplementedError

    def visit_not(self, child: T) -> T:
        raise NotImplementedError

    def visit_and(self, left: T, right: T) -> T:
        raise NotImplementedError

    def visit_or(self, left: T, right: T) -> T:
        raise NotImplementedError

    def visit_predicate(self, p: Predicate) -> T:
        raise NotImplementedError


def visit(expr: Expression, visitor: BoundExpressionVisitor[T]) -> T:
    if isinstance(expr, And):
        return visitor.visit_and(visit(expr.left, visitor), visit(expr.right, visitor))
    if isinstance(expr, Or):
        return visitor.visit_or(visit(expr.left, visitor), visit(expr.right, visitor))
    if isinstance(expr, Not):
        return visitor.visit_not(visit(expr.child, visitor))
    if isinstance(expr, AlwaysTrue):
        return visitor.visit_true()
    if isinstance(expr, AlwaysFalse):
        return visitor.visit_false()
    if isinstance(expr, Predicate):
        if not expr.bound:
            raise TypeError(f"unbound predicate {expr}: bind it to the table's schema first")
        return visitor.visit_predicate(expr)
    raise TypeError(f"not an expression: {expr!r}")


class MetricsEvaluator(BoundExpressionVisitor[bool]):
    """What the inclusive and the strict evaluators share: the NOT-free form of the
    expression, one unit's metrics fetched once per column, AND and OR as booleans."""

    def __init__(self, expr: Expression) -> None:
        self.expr = rewrite_not(expr)
        self._metrics_of: MetricsOf = lambda ref: None
        self._cache: dict[str, ColumnMetrics | None] = {}

    def _bind(self, metrics_of: MetricsOf) -> None:
        self._metrics_of = metrics_of
        self._cache = {}

    def _m(self, ref: BoundReference) -> ColumnMetrics | None:
        if ref.name not in self._cache:
            self._cache[ref.name] = self._metrics_of(ref)
        return self._cache[ref.name]

    def visit_not(self, child: bool) -> bool:
        raise TypeError("NOT should have been rewritten into the predicates")

    def visit_and(self, left: bool, right: bool) -> bool:
        return left and right

    def visit_or(self, left: bool, right: bool) -> bool:
        return left or right


class InclusiveMetricsEvaluator(MetricsEvaluator):
    """``eval(metrics_of)``: False only if no row of the unit can match the expression.

    ``rows``: the unit's row count if known (a unit with no rows cannot match).
    """

    def __init__(self, expr: Expression) -> None:
        super().__init__(expr)
        self.conjuncts = conjuncts(self.expr)

    def eval(self, metrics_of: MetricsOf, rows: int | None = None) -> bool:
        if rows == 0:
            return ROWS_CANNOT_MATCH
        self._bind(metrics_of)
        return visit(self.expr, self)

    def refuting_conjunct(self, metrics_of: MetricsOf, rows: int | None = None) -> Expression | None:
        """The first top-level conjunct (of the NOT-free form) proved empty, or None
        if the unit might match. A unit with no rows is refuted by the whole expression."""
        if rows == 0:
            return self.expr
        self._bind(metrics_of)
        for c in self.conjuncts:
            if not visit(c, self):
                return c
        return None

    # ------------------------------------------------------------ boolean structure
    def visit_true(self) -> bool:
        return ROWS_MIGHT_MATCH

    def visit_false(self) -> bool:
        return ROWS_CANNOT_MATCH

    # ------------------------------------------------------------ predicates
    def visit_predicate(self, p: Predicate) -> bool:
        ref = p.term
        assert isinstance(ref, BoundReference)
        m = self._m(ref)
        if m is None:
            return ROWS_MIGHT_MATCH
        if m.rows == 0:
            return ROWS_CANNOT_MATCH
        op = p.op
        if op is Op.IS_NULL:
            return m.nulls is None or m.nulls > 0
        if _all_null(m):
            return ROWS_CANNOT_MATCH  # nothing but nulls: only IS NULL could match
        if op is Op.NOT_NULL:
            return ROWS_MIGHT_MATCH
        floating = mt.is_floating(ref.type)
        may_hold_nan = floating and (m.nans is None or m.nans > 0)
        if op is Op.IS_NAN:
            return m.nans is None or m.nans > 0
        if op is Op.NOT_NAN:
            if m.nans is not None and m.rows is not None and m.nulls is not None:
                return m.rows - m.nulls - m.nans > 0
            return ROWS_MIGHT_MATCH
        values = [lit.value for lit in p.literals]
        nan_literal = any(isinstance(v, float) and math.isnan(v) for v in values)
        lo, hi = m.lower, m.upper
        if op in (Op.EQ, Op.IN):
            if nan_literal:
                return ROWS_MIGHT_MATCH
            if lo is None or hi is None:
                return _all_nan(m) is not True  # only NaN there (known): no finite value can be equal
            candidates = [v for v in values if _le(lo, v) and _le(v, hi)]
            if not candidates:
                return ROWS_CANNOT_MATCH
            if m.bloom is not None and not any(_bloom_might_contain(m.bloom, v) for v in candidates):
                return ROWS_CANNOT_MATCH
            return ROWS_MIGHT_MATCH
        if op in (Op.NE, Op.NOT_IN):
            if may_hold_nan or nan_literal or lo is None or hi is None:
                return ROWS_MIGHT_MATCH
            return not (_eq(lo, hi) and any(_eq(lo, v) for v in values))
        if op in (Op.LT, Op.LE, Op.GT, Op.GE):
            if may_hold_nan or nan_literal or lo is None or hi is None:
                return ROWS_MIGHT_MATCH
            v = values[0]
            try:
                if op is Op.LT:
                    return lo < v
                if op is Op.LE:
                    return lo <= v
                if op is Op.GT:
                    return hi > v
                return hi >= v
            except TypeError:
                return ROWS_MIGHT_MATCH
        if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
            if lo is None or hi is None:
                return ROWS_MIGHT_MATCH
            prefix = values[0]
            n = len(prefix)
            if op is Op.STARTS_WITH:
                # every value starting with the prefix lies in [prefix, the first value past it)
                return not (hi[:n] < prefix or lo[:n] > prefix)
            return not (lo[:n] == prefix and hi[:n] == prefix)  # both bounds start with it: every value does
        return ROWS_MIGHT_MATCH


def _all_null(m: ColumnMetrics) -> bool:
    return m.rows is not None and m.nulls is not None and m.nulls >= m.rows


def _all_nan(m: ColumnMetrics) -> bool | None:
    if m.rows is None or m.nulls is None or m.nans is None:
        return None
    return m.rows - m.nulls - m.nans <= 0


def _le(a: Any, b: Any) -> bool:
    try:
        return bool(a <= b)
    except TypeError:
        return True


def _eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def _bloom_might_contain(bloom: MembershipFilter, value: Any) -> bool:
    try:
        return bool(bloom.might_contain(value))
    except Exception:  # noqa: BLE001 -- a filter that cannot take this value proves nothing
        return True


def might_match(expr: Expression, metrics_of: MetricsOf, rows: int | None = None) -> bool:
    """One-shot ``InclusiveMetricsEvaluator(expr).eval(metrics_of, rows)``."""
    return InclusiveMetricsEvaluator(expr).eval(metrics_of, rows)
