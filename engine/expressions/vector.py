"""The inclusive metrics evaluator over many units at once (the files of a file index): the rules
of ``metrics.InclusiveMetricsEvaluator``, one vectorised pass per predicate instead of one
visit per unit. tests/engine/expressions/test_predicate_soundness.py checks that both give
the same answer on every generated unit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.expressions.metrics import BoundExpressionVisitor, visit
from engine.expressions.tree import (
    BoundReference,
    Expression,
    Op,
    Predicate,
    conjuncts,
    rewrite_not,
)


@dataclass(frozen=True)
class ColumnVectors:
    """One column's statistics in n units: -1 marks an unknown count; a null bound is unknown
    or absent (no non-null, non-NaN value); ``known`` False where the unit has no statistics."""

    rows: np.ndarray  # int64
    nulls: np.ndarray  # int64, -1 unknown
    nans: np.ndarray  # int64, -1 unknown
    lower: pa.Array  # of the column's type
    upper: pa.Array
    known: np.ndarray  # bool
    #: per unit, a Bloom filter's ``might_contain(scalar)`` or None (only = and IN use it)
    bloom: Callable[[int, pa.Scalar], bool] | None = None
    bloom_units: np.ndarray | None = None  # bool: which units have a filter


VectorsOf = Callable[[BoundReference], "ColumnVectors | None"]


class VectorMetricsEvaluator(BoundExpressionVisitor[np.ndarray]):
    """``eval(vectors_of, n)``: a bool array, False where the unit provably holds no match."""

    def __init__(self, expr: Expression) -> None:
        self.expr = rewrite_not(expr)
        self.conjuncts = conjuncts(self.expr)
        self._of: VectorsOf = lambda ref: None
        self._n = 0
        self._cache: dict[str, ColumnVectors | None] = {}

    def eval(self, vectors_of: VectorsOf, n: int, rows: np.ndarray | None = None) -> np.ndarray:
        self._of, self._n, self._cache = vectors_of, n, {}
        out = visit(self.expr, self)
        return out if rows is None else out & (rows != 0)

    def refuting_conjuncts(self, vectors_of: VectorsOf, n: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Per unit, the index of the first conjunct proved empty (-1: might match;
        ``len(conjuncts)``: the unit has no rows)."""
        self._of, self._n, self._cache = vectors_of, n, {}
        out = np.full(n, -1, np.int64)
        if rows is not None:
            out[rows == 0] = len(self.conjuncts)
        for i, c in enumerate(self.conjuncts):
            undecided = out == -1
            if not undecided.any():
                break
            out[undecided & ~visit(c, self)] = i
        return out

    def _v(self, ref: BoundReference) -> ColumnVectors | None:
        if ref.name not in self._cache:
            self._cache[ref.name] = self._of(ref)
        return self._cache[ref.name]

    def visit_true(self) -> np.ndarray:
        return np.ones(self._n, bool)

    def visit_false(self) -> np.ndarray:
        return np.zeros(self._n, bool)

    def visit_not(self, child: np.ndarray) -> np.ndarray:
        raise TypeError("NOT should have been rewritten into the predicates")

    def visit_and(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return left & right

    def visit_or(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return left | right

    def visit_predicate(self, p: Predicate) -> np.ndarray:
        ref = p.term
        assert isinstance(ref, BoundReference)
        v = self._v(ref)
        if v is None:
            return np.ones(self._n, bool)
        unknown = ~v.known
        empty = v.known & (v.rows == 0)
        op = p.op
        nulls_known = v.known & (v.nulls >= 0)
        if op is Op.IS_NULL:
            return unknown | ~nulls_known | (v.nulls > 0)
        all_null = nulls_known & (v.nulls >= v.rows)
        alive = ~empty & ~all_null  # the unit has non-null values (or might)
        if op is Op.NOT_NULL:
            return unknown | alive
        nans_known = v.known & (v.nans >= 0)
        if op is Op.IS_NAN:
            return unknown | (alive & (~nans_known | (v.nans > 0)))
        if op is Op.NOT_NAN:
            definite = nulls_known & nans_known
            return unknown | (alive & (~definite | (v.rows - v.nulls - v.nans > 0)))
        floating = mt.is_floating(ref.type)
        may_hold_nan = (~nans_known | (v.nans > 0)) if floating else np.zeros(self._n, bool)
        values = [lit.value for lit in p.literals]
        scalars = [lit.scalar for lit in p.literals]
        nan_literal = any(isinstance(x, float) and math.isnan(x) for x in values)
        no_bounds = _nulls(v.lower) | _nulls(v.upper)
        lower, upper = _comparable(v.lower), _comparable(v.upper)
        if op in (Op.EQ, Op.IN):
            if nan_literal:
                return unknown | alive
            all_nan = nulls_known & nans_known & (v.rows - v.nulls - v.nans <= 0)
            inside = np.zeros(self._n, bool)
            for s in scalars:
                hit = _cmp(pc.less_equal, lower, s, reverse=False) & _cmp(pc.greater_equal, upper, s, reverse=False)
                if v.bloom is not None and v.bloom_units is not None:
                    probe = hit & v.bloom_units
                    for i in np.flatnonzero(probe):
                        if not v.bloom(int(i), s):
                            hit[i] = False
                inside |= hit
            return unknown | (alive & ((no_bounds & ~all_nan) | (~no_bounds & inside)))
        if op in (Op.NE, Op.NOT_IN):
            if nan_literal:
                return unknown | alive
            single = _cmp(pc.equal, lower, None, other=upper)
            excluded = np.zeros(self._n, bool)
            for s in scalars:
                excluded |= _cmp(pc.equal, lower, s)
            return unknown | (alive & (may_hold_nan | no_bounds | ~(single & excluded)))
        if op in (Op.LT, Op.LE, Op.GT, Op.GE):
            if nan_literal:
                return unknown | alive
            s = scalars[0]
            if op is Op.LT:
                ok = _cmp(pc.less, lower, s)
            elif op is Op.LE:
                ok = _cmp(pc.less_equal, lower, s)
            elif op is Op.GT:
                ok = _cmp(pc.greater, upper, s)
            else:
                ok = _cmp(pc.greater_equal, upper, s)
            return unknown | (alive & (may_hold_nan | no_bounds | ok))
        if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
            prefix = values[0]
            lo, hi = _prefix(v.lower, len(prefix)), _prefix(v.upper, len(prefix))
            ps = pa.scalar(prefix, lo.type)
            if op is Op.STARTS_WITH:
                ok = ~(_cmp(pc.less, hi, ps) | _cmp(pc.greater, lo, ps))
            else:
                ok = ~(_cmp(pc.equal, lo, ps) & _cmp(pc.equal, hi, ps))
            return unknown | (alive & (no_bounds | ok))
        return np.ones(self._n, bool)


def _nulls(a: pa.Array) -> np.ndarray:
    return a.is_null().to_numpy(zero_copy_only=False)


def _comparable(a: pa.Array) -> pa.Array:
    """Arrays Arrow compares in the column's order (float16 has no comparison kernels)."""
    if mt.is_float16(a.type):
        return a.cast(pa.float32())
    if mt.is_dictionary(a.type):
        return a.cast(a.type.value_type)
    return a


def _cmp(fn: Callable[..., pa.Array], a: pa.Array, s: pa.Scalar | None, reverse: bool = False, other: pa.Array | None = None) -> np.ndarray:
    """``fn(a, s)`` as bools, null (unknown bound) as False (callers combine with ``no_bounds``)."""
    if other is not None:
        r = fn(a, other)
    else:
        if s is not None and mt.is_float16(s.type):
            s = s.cast(pa.float32())
        r = fn(a, s)
    return pc.fill_null(r, False).to_numpy(zero_copy_only=False)


def _prefix(a: pa.Array, n: int) -> pa.Array:
    if mt.is_string_like(a.type):
        return pc.utf8_slice_codeunits(a.cast(pa.string()), 0, n)
    return pc.binary_slice(a.cast(pa.binary()), 0, n)
