"""What a bound predicate says about one column, read off its tree without any statistics
(pure): whether NaN satisfies a comparison, a conjunction of ranges as one interval of
histogram-domain values, what the top-level conjuncts pin down (nulls, NaN, bounds, values),
and which conjuncts name only one column.

Estimation needs these facts in several places (row counts, null and NaN counts, min/max,
top frequencies, histogram bins); reading them in one place keeps NaN's order the same
everywhere: DuckDB's (and Spark's, Iceberg's), where NaN equals NaN and sorts above every
other value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import expressions as ex
from engine.expressions.tree import ORDER, BoundReference, Op, Predicate
from engine.stats.histograms import to_domain
from engine.subset.counts import Interval


def is_nan(v: object) -> bool:
    """Whether a literal's value is NaN (literals of other types are never NaN)."""
    return isinstance(v, float) and math.isnan(v)


def nan_matches(op: Op, values: list[Any]) -> bool:
    """Whether a NaN value satisfies ``NaN op values``: IEEE would say no to all but ``!=``,
    the engines whose rows we describe order NaN as the largest value equal to itself."""
    nan_literal = any(is_nan(v) for v in values)
    if op in (Op.EQ, Op.IN, Op.LE):
        return nan_literal
    if op in (Op.NE, Op.NOT_IN, Op.GT):
        return not nan_literal
    return op is Op.GE


def domain(p: Predicate) -> float | int | None:
    """The first literal on the histogram's number line; None where bins cannot place it (a
    NaN, which lies in no bin, or a type with no domain)."""
    v = p.literals[0]
    if is_nan(v.value):
        return None
    try:
        return to_domain(v.scalar)
    except (pa.ArrowException, TypeError, ValueError):
        return None


def narrow(r: Interval | None, op: Op, v: float | int) -> Interval | None:
    """``r`` cut by ``column op v`` (a range or ``=``); None stays None (no interval known)."""
    if r is None:
        return None
    lo, hi, lo_open, hi_open = r.lo, r.hi, r.lo_open, r.hi_open
    if op in (Op.GT, Op.GE, Op.EQ):
        o = op is Op.GT
        if lo is None or v > lo or (v == lo and o):
            lo, lo_open = v, o
    if op in (Op.LT, Op.LE, Op.EQ):
        o = op is Op.LT
        if hi is None or v < hi or (v == hi and o):
            hi, hi_open = v, o
    return Interval(lo, hi, lo_open, hi_open)


def interval_of(e: ex.Expression) -> Interval | None:
    """The predicate as one interval of domain values, when it is a conjunction of ranges (else
    None): then the histogram's bins inside it count whole and those outside not at all."""
    r: Interval | None = Interval()
    for c in ex.conjuncts(e):
        if isinstance(c, Predicate) and c.op in (Op.NOT_NULL, Op.NOT_NAN):
            continue  # nulls and NaN are in no bin
        if not (isinstance(c, Predicate) and (c.op in ORDER or c.op is Op.EQ)):
            return None
        v = domain(c)
        if v is None:
            return None
        r = narrow(r, c.op, v)
    return r


@dataclass(frozen=True)
class Pins:
    """What the predicate's top-level conjuncts on one column say about its matching rows:
    facts that hold for every row, so the answers they give are exact, not estimates."""

    no_nulls: bool = False
    no_nans: bool = False
    only_nulls: bool = False
    lo: str | None = None  # text forms of the tightest bounds it sets
    hi: str | None = None
    values: int | None = None  # at most this many distinct values (= / IN)


def pins(nf: ex.Expression, column: str) -> Pins:
    """The ``Pins`` of ``column`` in ``nf`` (NOT already pushed into the predicates: only
    then is a top-level conjunct a fact about every matching row)."""
    no_nulls = no_nans = only_nulls = False
    lo: tuple[Any, str] | None = None
    hi: tuple[Any, str] | None = None
    values: int | None = None
    for c in ex.conjuncts(nf):
        if not isinstance(c, Predicate) or not isinstance(c.term, BoundReference) or c.term.name != column:
            continue
        op = c.op
        if op is Op.IS_NULL:
            only_nulls = True
            continue
        no_nulls = True
        if op is Op.NOT_NAN or (op in (Op.EQ, Op.IN, Op.NE, Op.NOT_IN, *ORDER) and not nan_matches(op, [lit.value for lit in c.literals])):
            no_nans = True
        lits = [lit for lit in c.literals if not is_nan(lit.value)]
        if op in (Op.EQ, Op.IN):
            values = len(lits) if values is None else min(values, len(lits))
        if not lits or op not in (Op.EQ, Op.IN, *ORDER):
            continue
        try:
            low = min(lits, key=lambda lit: lit.value)
            high = max(lits, key=lambda lit: lit.value)
            if op in (Op.GT, Op.GE, Op.EQ, Op.IN) and (lo is None or low.value > lo[0]):
                lo = (low.value, low.text)
            if op in (Op.LT, Op.LE, Op.EQ, Op.IN) and (hi is None or high.value < hi[0]):
                hi = (high.value, high.text)
        except TypeError:
            continue
    return Pins(no_nulls, no_nans, only_nulls, lo[1] if lo else None, hi[1] if hi else None, values)


def split_for(nf: ex.Expression, column: str) -> tuple[ex.Expression | None, ex.Expression | None]:
    """The top-level conjuncts naming only ``column`` and the others (None when there are
    none): the first apply exactly to the column's stored values or bins, the others only
    as a share of the rows."""
    own: list[ex.Expression] = []
    rest: list[ex.Expression] = []
    for c in ex.conjuncts(nf):
        refs = [r for r in ex.references(c) if isinstance(r, BoundReference)]
        (own if refs and all(r.name == column for r in refs) else rest).append(c)
    return (ex.and_(*own) if own else None), (ex.and_(*rest) if rest else None)
