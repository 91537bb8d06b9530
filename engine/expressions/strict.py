"""Whether every row of a unit (a partition, a file) must match a bound expression, from its
column statistics alone: the counterpart of ``metrics.InclusiveMetricsEvaluator``.

pyiceberg's ``_StrictMetricsEvaluator`` in shape and in its one rule: "rows must match"
only when the statistics prove it, anything unknown "might not". A unit proved TRUE by
this evaluator and the other units proved FALSE by the inclusive one make a subset whose
statistics are a merge of stored partition statistics (docs/SUBSETS.md).

NaN is judged both ways engines order it: an order comparison, ``=`` or ``IN`` is proved
only for a unit without NaN (IEEE says NaN matches none of them, DuckDB and Spark that
it is the largest value); ``!=`` / ``NOT IN`` likewise, so the proof holds in both.
Nulls match nothing but ``IS NULL``. A unit with no rows matches vacuously.
"""

from __future__ import annotations

import math
from typing import Any

from engine import types as mt
from engine.expressions.metrics import MetricsEvaluator, MetricsOf, visit
from engine.expressions.tree import BoundReference, Expression, Op, Predicate

ROWS_MUST_MATCH = True
ROWS_MIGHT_NOT_MATCH = False


class StrictMetricsEvaluator(MetricsEvaluator):
    """``eval(metrics_of, rows)``: True only if every row of the unit matches the expression."""

    def eval(self, metrics_of: MetricsOf, rows: int | None = None) -> bool:
        if rows == 0:
            return ROWS_MUST_MATCH
        self._bind(metrics_of)
        return visit(self.expr, self)

    def visit_true(self) -> bool:
        return ROWS_MUST_MATCH

    def visit_false(self) -> bool:
        return ROWS_MIGHT_NOT_MATCH

    def visit_predicate(self, p: Predicate) -> bool:
        ref = p.term
        assert isinstance(ref, BoundReference)
        m = self._m(ref)
        if m is None or m.rows is None:
            return ROWS_MIGHT_NOT_MATCH
        if m.rows == 0:
            return ROWS_MUST_MATCH
        if m.nulls is None:
            return ROWS_MIGHT_NOT_MATCH
        floating = mt.is_floating(ref.type)
        nans = m.nans if floating else 0
        op = p.op
        if op is Op.IS_NULL:
            return m.nulls >= m.rows
        if op is Op.NOT_NULL:
            return m.nulls == 0
        if nans is None:
            return ROWS_MIGHT_NOT_MATCH
        if op is Op.IS_NAN:
            return floating and m.nulls == 0 and nans >= m.rows
        if op is Op.NOT_NAN:
            return m.nulls == 0 and nans == 0
        # every other predicate: no row may be null or NaN, and the bounds must decide
        if m.nulls > 0 or nans > 0:
            return ROWS_MIGHT_NOT_MATCH
        lo, hi = m.lower, m.upper
        if lo is None or hi is None:
            return ROWS_MIGHT_NOT_MATCH
        values = [lit.value for lit in p.literals]
        if any(isinstance(v, float) and math.isnan(v) for v in values):
            return ROWS_MIGHT_NOT_MATCH
        try:
            return _decide(op, lo, hi, values)
        except TypeError:
            return ROWS_MIGHT_NOT_MATCH


def _decide(op: Op, lo: Any, hi: Any, values: list[Any]) -> bool:
    if op is Op.LT:
        return bool(hi < values[0])
    if op is Op.LE:
        return bool(hi <= values[0])
    if op is Op.GT:
        return bool(lo > values[0])
    if op is Op.GE:
        return bool(lo >= values[0])
    if op in (Op.EQ, Op.IN):
        return bool(lo == hi) and any(lo == v for v in values)
    if op in (Op.NE, Op.NOT_IN):
        return all(v < lo or v > hi for v in values)
    if op is Op.STARTS_WITH:
        # the values with a prefix form one interval of the order: both bounds inside it, all are
        n = len(values[0])
        return bool(lo[:n] == values[0] and hi[:n] == values[0])
    if op is Op.NOT_STARTS_WITH:
        n = len(values[0])
        return bool(hi[:n] < values[0] or lo[:n] > values[0])
    return ROWS_MIGHT_NOT_MATCH


def must_match(expr: Expression, metrics_of: MetricsOf, rows: int | None = None) -> bool:
    """One-shot ``StrictMetricsEvaluator(expr).eval(metrics_of, rows)``."""
    return StrictMetricsEvaluator(expr).eval(metrics_of, rows)
