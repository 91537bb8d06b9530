"""The matching rows of each partition the predicate cuts, as an interval with an estimate
(docs/SUBSETS.md, step 3), and the subset's row count from them.

Every other estimate of a partial subset starts here: null counts, sums and top frequencies
take a partition's share of matching rows, bounds take its interval. The rules, cheapest
exact source first: the evaluators (none or every row), null and NaN counts, the stored
exact frequencies, the histogram's bins, the table's value partitions; AND and OR combine
the leaves' intervals (engine/subset/counts.py), and the file index narrows the result.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine import expressions as ex
from engine import types as mt
from engine.exceptions import MetastoreError
from engine.expressions.strict import StrictMetricsEvaluator
from engine.expressions.tree import ORDER, BoundLiteral, BoundReference, Op, Predicate
from engine.stats.histograms import to_domain
from engine.subset import counts as cnt
from engine.subset.counts import Count, Interval
from engine.subset.mask import mask
from engine.subset.model import AT_MOST_ONCE, UNIFORM_VALUES, Answer, Method
from engine.subset.partitions import Split
from engine.subset.predicates import domain, is_nan, nan_matches, narrow
from engine.subset.stored import Freq, StoredInputs


class RowCounts:
    """The matching rows of a subset's partitions, each partition's counted once."""

    def __init__(self, stored: StoredInputs, split: Split, expr: ex.Expression, nf: ex.Expression) -> None:
        """``expr``: the bound predicate; ``nf``: the same with NOT pushed into the predicates
        (what the counting rules read)."""
        self.stored = stored
        self.split = split
        self.expr = expr
        self.nf = nf
        self._counts: dict[str, Count] = {}
        self._files: dict[str, tuple[int, int]] | None = None
        self._total: Answer | None = None

    def total(self) -> Answer:
        """The subset's row count: the whole partitions' rows plus the others' intervals."""
        if self._total is None:
            partitions = self.split.partitions
            if not partitions.some:
                self._total = Answer("*", "row_count", self.split.exact_rows, Method.STORED)
            else:
                self._total = count_answer("*", "row_count", self.split.exact_rows, self._some_rows())
        return self._total

    def _some_rows(self) -> Count:
        low, est, high = 0, 0.0, 0
        assumptions: set[str] = set()
        for key in self.split.partitions.some:
            c = self.partition(key)
            low, est, high = low + c.low, est + c.estimate, high + c.high
            assumptions |= c.assumptions
        return Count(low, est, high, frozenset(assumptions))

    def partition(self, key: str) -> Count:
        """The matching rows of one partition, as an interval; narrowed by the file index where
        it proves whole files in (every row matches) or out (none can)."""
        if key not in self._counts:
            c = self.of(self.nf, key).clamp(self.split.rows[key])
            files = self._file_bounds().get(key) if not c.exact else None
            if files is not None:
                low, high = max(c.low, files[0]), min(c.high, files[1])
                if low <= high:
                    c = Count(low, min(max(c.estimate, low), high), high, frozenset() if low == high else c.assumptions)
            self._counts[key] = c
        return self._counts[key]

    def share(self, key: str) -> float:
        """The estimated share of a partition's rows that match (what a proportional estimate
        of any other count of the partition multiplies by)."""
        n = self.split.rows[key]
        return self.partition(key).estimate / n if n else 0.0

    def _file_bounds(self) -> dict[str, tuple[int, int]]:
        """Per partition in part: (rows of its files whose every row matches, rows of its files
        that might hold a match), from the table's file index (docs/FORMAT.md); {} without one."""
        if self._files is None:
            self._files = {}
            some = self.split.partitions.some
            if some:
                try:
                    self._files = self.stored.file_bounds(self.expr, {k: self.split.metrics.get(k, {}) for k in some})
                except MetastoreError:
                    self._files = {}  # no index (or an unreadable one): partition statistics alone
        return self._files

    # ------------------------------------------------------------ the counting rules
    def of(self, e: ex.Expression, key: str) -> Count:
        """The rows of partition ``key`` matching ``e`` (NOT pushed in): ranges on one
        histogrammed column are first made one interval, then AND/OR combine the parts."""
        n = self.split.rows[key]
        if isinstance(e, ex.AlwaysTrue):
            return Count.of(n)
        if isinstance(e, ex.AlwaysFalse):
            return cnt.ZERO
        if isinstance(e, ex.Or):
            return cnt.or_(self.of(e.left, key), self.of(e.right, key), n)
        if isinstance(e, ex.And):
            groups: dict[str, list[Predicate]] = {}
            rest: list[ex.Expression] = []
            for c in ex.conjuncts(e):
                if isinstance(c, Predicate) and (c.op in ORDER or c.op is Op.EQ) and domain(c) is not None and self.stored.histogrammed(c.term):
                    groups.setdefault(c.term.name, []).append(c)
                else:
                    rest.append(c)
            out = Count.of(n)
            for preds in groups.values():
                one = self._conjunction(preds, key)
                out = cnt.and_(out, one, n)
            for c in rest:
                out = cnt.and_(out, self.of(c, key), n)
            return out
        assert isinstance(e, Predicate)
        return self._predicate(e, key)

    def _metrics(self, ref: BoundReference, key: str) -> ex.ColumnMetrics | None:
        return self.split.metrics.get(key, {}).get(ref.name)

    def _conjunction(self, preds: list[Predicate], key: str) -> Count:
        """Range predicates (non-NaN literals) on one histogrammed column: one interval of the
        non-NaN values, plus the NaN rows when NaN satisfies every predicate (DuckDB's order)."""
        ref = preds[0].term
        assert isinstance(ref, BoundReference)
        m = self._metrics(ref, key)
        n = self.split.rows[key]
        if m is None or m.nulls is None:
            return cnt.default(n)
        e = ex.and_(*preds)
        if not ex.InclusiveMetricsEvaluator(e).eval(lambda r: m, n):
            return cnt.ZERO
        if StrictMetricsEvaluator(e).eval(lambda r: m, n):
            return Count.of(n)
        floating = mt.is_floating(ref.type)
        if floating and m.nans is None:
            return cnt.default(n - m.nulls)
        nans = (m.nans or 0) if floating else 0
        nan_part = nans if all(nan_matches(p.op, [lit.value for lit in p.literals]) for p in preds) else 0
        freq = self.stored.freq(ref, key)
        if freq is not None and freq.complete:
            return Count.of(int(freq.counts[np.asarray(mask(freq.values, e))].sum()))
        r: Interval | None = Interval()
        for p in preds:
            v = domain(p)
            if v is None:
                return cnt.default(n - m.nulls)
            r = narrow(r, p.op, v)
        counts = self.stored.hist(ref, key)
        spec = self.stored.spec(ref.name)  # a stored histogram has its spec
        if r is None or counts is None or spec is None:
            return cnt.default(n - m.nulls)
        c = cnt.range_count(spec, counts, r)
        return Count(c.low + nan_part, c.estimate + nan_part, c.high + nan_part, c.assumptions)

    def _predicate(self, p: Predicate, key: str) -> Count:
        ref = p.term
        assert isinstance(ref, BoundReference)
        n = self.split.rows[key]
        m = self._metrics(ref, key)
        if m is None or m.rows is None or m.nulls is None:
            return cnt.default(n)
        of = lambda r: m  # noqa: E731
        if not ex.InclusiveMetricsEvaluator(p).eval(of, n):
            return cnt.ZERO
        if StrictMetricsEvaluator(p).eval(of, n):
            return Count.of(n)
        floating = mt.is_floating(ref.type)
        nulls = m.nulls
        op = p.op
        if op is Op.IS_NULL:
            return Count.of(nulls)
        if op is Op.NOT_NULL:
            return Count.of(n - nulls)
        if m.nans is None and floating:
            return cnt.default(n - nulls)
        nans = (m.nans or 0) if floating else 0
        if op is Op.IS_NAN:
            return Count.of(nans)
        if op is Op.NOT_NAN:
            return Count.of(n - nulls - nans)
        freq = self.stored.freq(ref, key)
        if freq is not None and freq.complete:  # discrete columns: no NaN
            return Count.of(int(freq.counts[np.asarray(mask(freq.values, p))].sum()))
        if op in ORDER and domain(p) is not None and self.stored.histogrammed(ref):
            return self._conjunction([p], key)
        # NaN rows (DuckDB's order: NaN equals NaN and sorts above every value) apart from the others
        literal_values = [lit.value for lit in p.literals]
        nan_part = nans if nan_matches(op, literal_values) else 0
        candidates = n - nulls - nans
        nan_literal = any(is_nan(v) for v in literal_values)
        values = [lit for lit in p.literals if not is_nan(lit.value)]
        if op in ORDER and nan_literal:  # x < NaN, x <= NaN: every other value; x > NaN, x >= NaN: none
            rest = Count.of(candidates if op in (Op.LT, Op.LE) else 0)
        elif op in (Op.EQ, Op.IN, Op.NE, Op.NOT_IN):
            eq = self._equal(ref, key, m, values, freq)
            rest = eq if op in (Op.EQ, Op.IN) else cnt.complement(eq, candidates)
        elif freq is not None:  # values seen more than once stored, the rest once each
            rest = stored_and_singles(freq, p, candidates)
        else:
            rest = cnt.default(candidates)
        return Count(rest.low + nan_part, rest.estimate + nan_part, rest.high + nan_part, rest.assumptions)

    def _equal(self, ref: BoundReference, key: str, m: ex.ColumnMetrics, lits: list[BoundLiteral], freq: Freq | None) -> Count:
        """Rows equal to one of ``lits`` (non-NaN, distinct) in a partition."""
        if not lits:
            return cnt.ZERO
        candidates = _candidates(m, self.split.rows[key])
        admitted = [lit for lit in lits if _within(lit.value, m)]
        if not admitted:
            return cnt.ZERO
        if freq is not None:  # duplicates_only / all_distinct: a stored value's count is exact, others 0 or 1
            e = ex.Predicate(Op.IN, ref, tuple(admitted))
            hit = np.asarray(mask(freq.values, e))
            stored = int(freq.counts[hit].sum())
            found = {v.as_py() for v in freq.values.filter(pa.array(hit))} if hit.any() else set()
            missing = 0
            for lit in admitted:
                if lit.scalar.as_py() in found:
                    continue
                known = self.stored.value_partition_count(ref, lit, key)
                if known is None:
                    missing += 1
                else:
                    stored += known
            return Count(stored, stored + missing / 2, stored + missing, frozenset({AT_MOST_ONCE} if missing else ())).clamp(candidates)
        per_value = candidates / self.stored.distinct_count(ref, key)
        if self.stored.histogrammed(ref):
            counts = self.stored.hist(ref, key)
            spec = self.stored.spec(ref.name)  # a stored histogram has its spec
            if counts is not None and spec is not None:
                doms = [to_domain(lit.scalar) for lit in admitted]
                low = high = 0
                est = 0.0
                assumptions = {UNIFORM_VALUES}
                for d in doms:
                    c = cnt.range_count(spec, counts, Interval(d, d))
                    low, high = low + c.low, high + c.high
                    est += c.estimate if c.exact or spec.domain == "integer" else min(c.high, per_value)
                    assumptions |= c.assumptions
                return Count(low, est, high, frozenset(assumptions)).clamp(candidates)
        return Count(0, per_value * len(admitted), candidates, frozenset({UNIFORM_VALUES})).clamp(candidates)


def count_answer(column: str, statistic: str, exact_part: int, c: Count) -> Answer:
    """A count answer: ``exact_part`` known rows plus the interval ``c``; stored when ``c`` is
    one number, else estimated with the interval's bounds and assumptions."""
    value = int(round(exact_part + c.estimate))
    if c.exact:
        return Answer(column, statistic, exact_part + c.low, Method.STORED)
    low, high = exact_part + c.low, exact_part + c.high
    value = min(max(value, low), high)
    return Answer(column, statistic, value, Method.ESTIMATED, low, high, "; ".join(sorted(c.assumptions)) or None)


def stored_and_singles(freq: Freq, p: Predicate, candidates: int) -> Count:
    """A predicate over a partition whose frequencies keep only repeated values: the stored
    values' rows exactly, plus 0..all of the values seen once."""
    hit = np.asarray(mask(freq.values, p))
    stored = int(freq.counts[hit].sum())
    singles = max(0, candidates - int(freq.counts.sum()))
    return Count(stored, stored + singles / 2, stored + singles, frozenset({AT_MOST_ONCE} if singles else ())).clamp(candidates)


def _candidates(m: ex.ColumnMetrics, n: int) -> int:
    return n - (m.nulls or 0) - (m.nans or 0)


def _within(value: object, m: ex.ColumnMetrics) -> bool:
    """Whether ``value`` lies in the unit's stored range (unorderable: assume it may)."""
    try:
        return (m.lower is None or m.lower <= value) and (m.upper is None or value <= m.upper)
    except TypeError:
        return True
