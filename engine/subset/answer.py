"""Statistics of the rows of a table matching a predicate, from its stored statistics
(``stored`` or ``estimated``) or, when asked or needed, computed (docs/SUBSETS.md).

``Subset(ts, where, exact)`` first splits the partitions with the two metrics evaluators:
those whose every row matches (strict), those with no matching row (inclusive), the rest.
With no partition in the rest, the subset is a union of whole partitions and its
statistics are a merge of theirs: exact. Otherwise the rest's share is estimated per
partition (counts.py) and every statistic says its bounds and assumption.

``ts`` is any object with ``TableStatistics``'s lookups (engine.lookup delegates here, so
this package cannot import it); the computed path is ``engine.runtime.subset.compute_subset``,
imported lazily where it is used (an upward import named in .importlinter: computing is a Ray
job, and the lookups must stay importable without Ray).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from engine import expressions as ex
from engine import values as value_forms
from engine.exceptions import InvalidArgumentError, MetastoreError, SubsetStatisticError
from engine.expressions.binding import comparable
from engine.expressions.statistics import PRUNING_STATISTICS, metrics_from_row
from engine.expressions.strict import StrictMetricsEvaluator
from engine.expressions.tree import ORDER, BoundReference, Op, Predicate
from engine.files import layout
from engine.stats import sketches
from engine.stats.histograms import HistogramSpec, to_domain
from engine.stats.moments import Moments, MomentsAccumulator
from engine.subset import counts as cnt
from engine.subset.counts import Count, Interval
from engine.subset.mask import mask
from engine.subset.model import (
    AT_MOST_ONCE,
    CARDENAS,
    INDEPENDENCE,
    PROPORTIONAL,
    SUBSET_SPANS_RANGE,
    THETA,
    UNIFORM_BIN,
    UNIFORM_VALUES,
    Answer,
    Method,
    Partitions,
    with_methods,
)

#: the statistics a subset answers from stored files (others: computed, or the whole
#: table's / one partition's when the subset is exactly that)
MERGEABLE = ("row_count", "null_count", "nan_count", "distinct_count", "min", "max", "sum", "mean", "stddev", "avg_len", "max_len")
#: statistics that are the same for any subset (describe the column, not its rows)
INVARIANT = ("column", "type", "unsupported", "histogram_bins")
ESTIMABLE = ("row_count", "null_count", "nan_count", "distinct_count", "min", "max", "sum", "mean", "max_len")


@dataclass(frozen=True)
class _Freq:
    """A partition's stored frequencies of one column: kind, typed distinct values, their counts."""

    kind: str
    values: pa.Array
    counts: np.ndarray

    @property
    def complete(self) -> bool:
        return self.kind == layout.FREQ_COMPLETE


class Subset:
    """The rows of ``ts``'s table matching ``where``; ``exact``: compute what is not stored."""

    def __init__(self, ts: Any, where: Any, exact: bool = False, columns: Sequence[str] | None = None) -> None:
        """``columns``: the columns the caller will ask for (read with the predicate's, one
        read per partition), None: not known yet."""
        self.ts = ts
        self.expr = ts.bind(where)
        self.nf = ex.rewrite_not(self.expr)
        self.exact = exact
        self.where = str(self.expr)
        self._rows = {p.key: p.rows for p in ts.partitions()}
        self._metrics: dict[str, dict[str, Any]] = {}
        self._part_rows: dict[str, dict[str, dict[str, Any] | None]] = {}
        self._freqs: dict[tuple[str, str], _Freq | None] = {}
        self._hists: dict[tuple[str, str], np.ndarray | None] = {}
        self._counts: dict[str, Count] = {}
        self._computed: Any = None
        self._row_count: Answer | None = None
        self._files: dict[str, tuple[int, int]] | None = None
        self._hint = [ts.resolve_column(c) for c in columns] if columns is not None else []
        self.partitions = self._split()

    # ------------------------------------------------------------ partitions
    def _split(self) -> Partitions:
        refs = [r for r in ex.references(self.expr) if isinstance(r, BoundReference)]
        names = list(dict.fromkeys(r.name for r in refs))
        inclusive = ex.InclusiveMetricsEvaluator(self.expr)
        strict = StrictMetricsEvaluator(self.expr)
        all_, some, none = [], [], []
        for key, rows in self._rows.items():
            stats = self._pruning(names, key)
            uri = self.ts.file_uri(layout.STATISTICS_FILE, key) if stats else ""
            metrics = {r.name: _metrics(uri, r, stats[r.name]) for r in refs if r.name in stats}
            self._metrics[key] = metrics
            of = metrics.get
            if rows == 0 or not inclusive.eval(lambda ref, of=of: of(ref.name), rows):
                none.append(key)
            elif strict.eval(lambda ref, of=of: of(ref.name), rows):
                all_.append(key)
            else:
                some.append(key)
        return Partitions(tuple(all_), tuple(some), tuple(none))

    def _pruning(self, names: list[str], partition: str) -> dict[str, dict[str, Any]]:
        rows = self._rows_of(partition, [*names, *self._hint])
        return {n: rows[n] for n in names if rows.get(n) is not None}

    def _rows_of(self, partition: str, names: Sequence[str]) -> dict[str, dict[str, Any] | None]:
        """A partition's statistics rows of ``names`` (None: not in its file), read once for
        all the names not read yet (one partial read per partition)."""
        cache = self._part_rows.setdefault(partition, {})
        missing = [n for n in dict.fromkeys(names) if n not in cache]
        if missing:
            known = _known_columns(self.ts, partition)
            present = [n for n in missing if n in known]
            if present:
                for n, row in zip(present, self.ts.statistics(present, partition, list(ROW_STATISTICS)).to_pylist()):
                    cache[n] = row
            for n in missing:
                cache.setdefault(n, None)
        return cache

    @property
    def whole_partitions(self) -> bool:
        """Whether the subset is a union of whole partitions (its merged statistics are exact)."""
        return not self.partitions.some

    def _is_whole_table(self) -> bool:
        return self.whole_partitions and sum(self._rows[k] for k in self.partitions.all) == sum(self._rows.values())

    # ------------------------------------------------------------ row counts
    def row_count(self) -> Answer:
        if self._row_count is None:
            exact_rows = sum(self._rows[k] for k in self.partitions.all)
            if not self.partitions.some:
                self._row_count = Answer("*", "row_count", exact_rows, Method.STORED)
            else:
                self._row_count = _count_answer("*", "row_count", exact_rows, self._some_rows())
        return self._row_count

    def _some_rows(self) -> Count:
        low, est, high = 0, 0.0, 0
        assumptions: set[str] = set()
        for key in self.partitions.some:
            c = self.partition_count(key)
            low, est, high = low + c.low, est + c.estimate, high + c.high
            assumptions |= c.assumptions
        return Count(low, est, high, frozenset(assumptions))

    def partition_count(self, key: str) -> Count:
        """The matching rows of one partition, as an interval; narrowed by the file index where
        it proves whole files in (every row matches) or out (none can)."""
        if key not in self._counts:
            c = self._count(self.nf, key).clamp(self._rows[key])
            files = self._file_bounds().get(key)
            if files is not None and not c.exact:
                low, high = max(c.low, files[0]), min(c.high, files[1])
                if low <= high:
                    c = Count(low, min(max(c.estimate, low), high), high, frozenset() if low == high else c.assumptions)
            self._counts[key] = c
        return self._counts[key]

    def _file_bounds(self) -> dict[str, tuple[int, int]]:
        """Per partition in part: (rows of its files whose every row matches, rows of its files
        that might hold a match), from the table's file index (docs/FORMAT.md); {} without one."""
        if self._files is None:
            self._files = {}
            if self.partitions.some:
                try:
                    self._files = _file_bounds(self.ts, self.expr, {k: self._metrics.get(k, {}) for k in self.partitions.some})
                except MetastoreError:
                    self._files = {}  # no index (or an unreadable one): partition statistics alone
        return self._files

    def _count(self, e: ex.Expression, key: str) -> Count:
        n = self._rows[key]
        if isinstance(e, ex.AlwaysTrue):
            return Count.of(n)
        if isinstance(e, ex.AlwaysFalse):
            return cnt.ZERO
        if isinstance(e, ex.Or):
            return cnt.or_(self._count(e.left, key), self._count(e.right, key), n)
        if isinstance(e, ex.And):
            groups: dict[str, list[Predicate]] = {}
            rest: list[ex.Expression] = []
            for c in ex.conjuncts(e):
                if isinstance(c, Predicate) and (c.op in ORDER or c.op is Op.EQ) and _domain(c) is not None and self._histogrammed(c.term):
                    groups.setdefault(c.term.name, []).append(c)
                else:
                    rest.append(c)
            out = Count.of(n)
            for preds in groups.values():
                one = self._conjunction_count(preds, key)
                out = cnt.and_(out, one, n)
            for c in rest:
                out = cnt.and_(out, self._count(c, key), n)
            return out
        assert isinstance(e, Predicate)
        return self._predicate_count(e, key)

    def _m(self, ref: BoundReference, key: str) -> Any:
        return self._metrics.get(key, {}).get(ref.name)

    def _conjunction_count(self, preds: list[Predicate], key: str) -> Count:
        """Range predicates (non-NaN literals) on one histogrammed column: one interval of the
        non-NaN values, plus the NaN rows when NaN satisfies every predicate (DuckDB's order)."""
        ref = preds[0].term
        assert isinstance(ref, BoundReference)
        m = self._m(ref, key)
        n = self._rows[key]
        if m is None or m.nulls is None:
            return cnt.default(n)
        e: ex.Expression = preds[0]
        for p in preds[1:]:
            e = ex.And(e, p)
        if not ex.InclusiveMetricsEvaluator(e).eval(lambda r: m, n):
            return cnt.ZERO
        if StrictMetricsEvaluator(e).eval(lambda r: m, n):
            return Count.of(n)
        floating = pt.is_floating(ref.type)
        if floating and m.nans is None:
            return cnt.default(n - m.nulls)
        nans = (m.nans or 0) if floating else 0
        nan_part = nans if all(_nan_matches(p.op, [lit.value for lit in p.literals]) for p in preds) else 0
        freq = self._freq(ref, key)
        if freq is not None and freq.complete:
            return Count.of(int(freq.counts[np.asarray(mask(freq.values, e))].sum()))
        r: Interval | None = Interval()
        for p in preds:
            v = _domain(p)
            if v is None:
                return cnt.default(n - m.nulls)
            r = _narrow(r, p.op, v)
        counts = self._hist(ref, key)
        if r is None or counts is None:
            return cnt.default(n - m.nulls)
        c = cnt.range_count(self.ts.histogram_spec(ref.name), counts, r)
        return Count(c.low + nan_part, c.estimate + nan_part, c.high + nan_part, c.assumptions)

    def _predicate_count(self, p: Predicate, key: str) -> Count:
        ref = p.term
        assert isinstance(ref, BoundReference)
        n = self._rows[key]
        m = self._m(ref, key)
        if m is None or m.rows is None or m.nulls is None:
            return cnt.default(n)
        of = lambda r: m  # noqa: E731
        if not ex.InclusiveMetricsEvaluator(p).eval(of, n):
            return cnt.ZERO
        if StrictMetricsEvaluator(p).eval(of, n):
            return Count.of(n)
        floating = pt.is_floating(ref.type)
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
        freq = self._freq(ref, key)
        if freq is not None and freq.complete:  # discrete columns: no NaN
            return Count.of(int(freq.counts[np.asarray(mask(freq.values, p))].sum()))
        if op in ORDER and _domain(p) is not None and self._histogrammed(ref):
            return self._conjunction_count([p], key)
        # NaN rows (DuckDB's order: NaN equals NaN and sorts above every value) apart from the others
        literal_values = [lit.value for lit in p.literals]
        nan_part = nans if _nan_matches(op, literal_values) else 0
        candidates = n - nulls - nans
        nan_literal = any(_is_nan(v) for v in literal_values)
        values = [lit for lit in p.literals if not _is_nan(lit.value)]
        if op in ORDER and nan_literal:  # x < NaN, x <= NaN: every other value; x > NaN, x >= NaN: none
            rest = Count.of(candidates if op in (Op.LT, Op.LE) else 0)
        elif op in (Op.EQ, Op.IN, Op.NE, Op.NOT_IN):
            eq = self._equal_count(ref, key, m, values, freq)
            rest = eq if op in (Op.EQ, Op.IN) else cnt.complement(eq, candidates)
        elif freq is not None:  # values seen more than once stored, the rest once each
            rest = _stored_and_singles(freq, p, candidates)
        else:
            rest = cnt.default(candidates)
        return Count(rest.low + nan_part, rest.estimate + nan_part, rest.high + nan_part, rest.assumptions)

    def _equal_count(self, ref: BoundReference, key: str, m: Any, lits: list[Any], freq: _Freq | None) -> Count:
        """Rows equal to one of ``lits`` (non-NaN, distinct) in a partition."""
        if not lits:
            return cnt.ZERO
        candidates = _candidates(m, self._rows[key])
        admitted = [lit for lit in lits if _within(lit.value, m)]
        if not admitted:
            return cnt.ZERO
        if freq is not None:  # duplicates_only / all_distinct: a stored value's count is exact, others 0 or 1
            e = ex.Predicate(Op.IN, ref, tuple(admitted))
            hit = np.asarray(mask(freq.values, e))
            stored = int(freq.counts[hit].sum())
            found = {v.as_py() for v in freq.values.filter(pa.array(hit))} if hit.any() else set()
            missing = sum(1 for lit in admitted if lit.scalar.as_py() not in found)
            return Count(stored, stored + missing / 2, stored + missing, frozenset({AT_MOST_ONCE} if missing else ())).clamp(candidates)
        per_value = candidates / m_distinct(self, ref, key)
        if self._histogrammed(ref):
            counts = self._hist(ref, key)
            if counts is not None:
                spec = self.ts.histogram_spec(ref.name)
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

    # ------------------------------------------------------------ stored inputs
    def _histogrammed(self, ref: Any) -> bool:
        if not isinstance(ref, BoundReference):
            return False
        try:
            return self.ts.histogram_spec(ref.name) is not None
        except InvalidArgumentError:
            return False

    def _hist(self, ref: BoundReference, key: str) -> np.ndarray | None:
        k = (ref.name, key)
        if k not in self._hists:
            uri = (self.ts.file_uri(layout.HISTOGRAMS_FILE, key), ref.name)
            hit = _decoded.get(uri, _MISSING)
            if hit is _MISSING:
                try:
                    t = self.ts.histogram(ref.name, key)
                    hit = t.column("count").to_numpy(zero_copy_only=False).astype(np.int64)
                except InvalidArgumentError:
                    hit = None
                _remember(uri, hit)
            self._hists[k] = hit
        return self._hists[k]

    def _freq(self, ref: BoundReference, key: str | None) -> _Freq | None:
        k = (ref.name, key or "")
        if k not in self._freqs:
            uri = (self.ts.file_uri(layout.FREQUENCIES_FILE, key), ref.name)
            hit = _decoded.get(uri, _MISSING)
            if hit is _MISSING:
                index = self.ts.frequency_index(key)
                if ref.name not in index:
                    hit = None
                else:
                    _, _, n_rows, kind = index[ref.name]
                    t = self.ts.top_frequencies(ref.name, n_rows, key, typed=True)
                    values = t.column("value").combine_chunks()
                    hit = _Freq(kind, values, t.column("frequency").to_numpy(zero_copy_only=False).astype(np.int64))
                _remember(uri, hit)
            self._freqs[k] = hit
        return self._freqs[k]

    # ------------------------------------------------------------ statistics
    def statistics(self, columns: Sequence[str] | None = None, statistics: Sequence[str] | None = None) -> pa.Table:
        """The statistics table of today's lookup (same columns, same types) for the subset, its
        methods in the schema metadata (``engine.subset.methods_of``)."""
        ts = self.ts
        names = [ts.resolve_column(c) for c in columns] if columns is not None else ts.statistics_columns()
        schema = ts.statistics_schema(None, list(statistics) if statistics is not None else None)
        asked = set(statistics) if statistics is not None else set()
        if self.exact:
            return self._computed_statistics(names, statistics, schema)
        base = ts.statistics(names, None, [f.name for f in schema if f.name != "column"])
        if not self._is_whole_table():
            for key in (*self.partitions.all, *self.partitions.some):
                self._rows_of(key, names)  # one read per partition for every column asked
        rows, answers = [], []
        for row in base.to_pylist():
            out, col_answers = self._column(row, [f.name for f in schema])
            missing = [a.statistic for a in col_answers if a.method is Method.UNAVAILABLE and a.statistic in asked]
            if missing:
                raise SubsetStatisticError(
                    f"statistic {missing[0]!r} of column {row['column']!r} is not stored for the subset where {self.where} "
                    f"and cannot be estimated: exact=True (--exact) computes it"
                )
            rows.append(out)
            answers.extend(col_answers)
        rc = self.row_count()
        t = pa.Table.from_pylist(rows, schema=pa.schema([f for f in schema]))
        return with_methods(t, self.where, self.exact, self.partitions, [rc, *answers], "statistics")

    def _column(self, table_row: dict[str, Any], wanted: list[str]) -> tuple[dict[str, Any], list[Answer]]:
        column = table_row["column"]
        t = self.ts.column_type(column)
        if self._is_whole_table():
            return table_row, [Answer(column, s, table_row.get(s), Method.STORED) for s in wanted if s != "column"]
        nonempty = [k for k in self.partitions.all if self._rows[k] > 0]
        if self.whole_partitions and len(nonempty) == 1:
            row = self.ts.statistics([column], nonempty[0], [s for s in wanted if s != "column"]).to_pylist()[0]
            return row, [Answer(column, s, row.get(s), Method.STORED) for s in wanted if s != "column"]
        parts = {k: self._row(column, k) for k in (*self.partitions.all, *self.partitions.some)}
        if self.whole_partitions:
            values, answers = self._merged(column, t, [parts[k] for k in self.partitions.all], nonempty)
        else:
            values, answers = self._estimated(column, t, parts)
        out: dict[str, Any] = {}
        result: list[Answer] = []
        for s in wanted:
            if s in INVARIANT or (table_row.get(s) is None and s not in ("row_count", "null_count")):
                # describes the column, or does not apply to it (null for the whole table: null for any subset)
                out[s] = table_row.get(s)
                if s != "column":
                    result.append(Answer(column, s, out[s], Method.STORED))
            elif s in answers:
                out[s] = values.get(s)
                result.append(answers[s])
            elif s == "distinct_count_exact":
                a = answers.get("distinct_count")
                out[s] = a.exact if a is not None and values.get("distinct_count") is not None else None
                result.append(Answer(column, s, out[s], Method.STORED if a is not None else Method.UNAVAILABLE))
            else:
                out[s] = None
                result.append(Answer(column, s, None, Method.UNAVAILABLE))
        return out, result

    def _row(self, column: str, key: str) -> dict[str, Any]:
        row = self._rows_of(key, [column]).get(column)
        if row is None:
            raise InvalidArgumentError(f"table {self.ts.table!r} has no statistics for column {column!r} in partition {key!r}")
        return row

    # ------------------------------------------------------------ exact merge of whole partitions
    def _merged(self, column: str, t: pa.DataType, rows: list[dict[str, Any]], keys: list[str]) -> tuple[dict[str, Any], dict[str, Answer]]:
        values: dict[str, Any] = {}
        values["row_count"] = sum(r["row_count"] or 0 for r in rows)
        values["null_count"] = sum(r["null_count"] or 0 for r in rows)
        values["nan_count"] = _sum_or_none([r["nan_count"] for r in rows]) if pt.is_floating(t) else None
        lo, hi = _extreme([r["min"] for r in rows], t, min), _extreme([r["max"] for r in rows], t, max)
        values["min"], values["max"] = lo, hi
        moments = _merge_moments(t, rows)
        if moments is not None:
            values.update(moments)
        lens = [(r["avg_len"], _nonnull(r)) for r in rows if r.get("avg_len") is not None]
        if lens and sum(w for _, w in lens):
            values["avg_len"] = sum(a * w for a, w in lens) / sum(w for _, w in lens)
        values["max_len"] = max((r["max_len"] for r in rows if r.get("max_len") is not None), default=None)
        answers = {s: Answer(column, s, values.get(s), Method.STORED) for s in values}
        answers.update(self._merged_distinct(column, rows, keys, values))
        return values, answers

    def _merged_distinct(self, column: str, rows: list[dict[str, Any]], keys: list[str], values: dict[str, Any]) -> dict[str, Answer]:
        ds = [r["distinct_count"] for r in rows if r["row_count"]]
        if not keys:
            values["distinct_count"] = 0
            return {"distinct_count": Answer(column, "distinct_count", 0, Method.STORED)}
        if any(d is None for d in ds):
            return {}
        ref = BoundReference(column, (column,), self.ts.column_type(column))
        freqs = [self._freq(ref, k) for k in keys]
        if all(f is not None and f.complete for f in freqs):
            merged = pa.chunked_array([f.values for f in freqs if f is not None and len(f.values)], type=ref.type)
            d = len(pc.unique(merged)) if merged.length() else 0
            values["distinct_count"] = d
            return {"distinct_count": Answer(column, "distinct_count", d, Method.STORED)}
        low, high = max(ds), min(sum(ds), sum(_nonnull(r) for r in rows))
        blobs = [self.ts.statistics([column], k, ["theta_sketch"]).column("theta_sketch")[0].as_py() for k in keys]
        est = sketches.theta_estimate(sketches.merge_theta(blobs)) if all(b is not None for b in blobs) else None
        d = int(round(min(max(est[0], low), high))) if est is not None else high
        values["distinct_count"] = d
        return {"distinct_count": Answer(column, "distinct_count", d, Method.ESTIMATED, low, high, THETA if est is not None else "at most the sum")}

    # ------------------------------------------------------------ estimates
    def _estimated(self, column: str, t: pa.DataType, parts: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Answer]]:
        values: dict[str, Any] = {}
        answers: dict[str, Answer] = {}
        full = [parts[k] for k in self.partitions.all]
        rc = self.row_count()
        rows_lo, rows_hi = int(rc.low if rc.low is not None else rc.value), int(rc.high if rc.high is not None else rc.value)
        pins = _pins(self.nf, column)
        exact_rows = sum(r["row_count"] or 0 for r in full)

        def share(key: str) -> float:
            n = self._rows[key]
            return self.partition_count(key).estimate / n if n else 0.0

        def part(stat: str, key: str) -> int:
            return parts[key].get(stat) or 0

        # nulls and NaN: zero when the predicate rejects them on this column; else the whole
        # partitions' exactly plus a bounded share of the others'
        for stat, rejected in (("null_count", pins.no_nulls), ("nan_count", pins.no_nans or not pt.is_floating(t))):
            if rejected:
                values[stat] = None if stat == "nan_count" and not pt.is_floating(t) else 0
                answers[stat] = Answer(column, stat, values[stat], Method.STORED)
                continue
            if stat == "null_count" and pins.only_nulls:
                values[stat] = rc.value
                answers[stat] = _count_answer(column, stat, rows_lo, Count(0, float(rc.value) - rows_lo, rows_hi - rows_lo))
                continue
            base = sum(r.get(stat) or 0 for r in full)
            some = [(part(stat, k), self.partition_count(k)) for k in self.partitions.some]
            c = Count(
                0,
                sum(x * share(k) for (x, _), k in zip(some, self.partitions.some)),
                sum(min(x, pc_.high) for x, pc_ in some),
                frozenset({INDEPENDENCE}),
            )
            answers[stat] = _count_answer(column, stat, base, c)
            values[stat] = answers[stat].value
        # the range of the subset's values: within the stored range of the partitions it can
        # come from, within the predicate's range on this column
        contributing = [*self.partitions.all, *self.partitions.some]
        lo_text = _extreme([parts[k]["min"] for k in contributing], t, min)
        hi_text = _extreme([parts[k]["max"] for k in contributing], t, max)
        full_lo = _extreme([r["min"] for r in full], t, min)
        full_hi = _extreme([r["max"] for r in full], t, max)
        if lo_text is not None and hi_text is not None and value_forms.has_text_form(t) and _orderable(t):
            low_min = _tighter(lo_text, pins.lo, t, max)
            high_max = _tighter(hi_text, pins.hi, t, min)
            high_min = _tighter(high_max, full_lo, t, min)
            low_max = _tighter(low_min, full_hi, t, max)
            values["min"], values["max"] = low_min, high_max
            answers["min"] = Answer(column, "min", low_min, Method.ESTIMATED, low_min, high_min, SUBSET_SPANS_RANGE)
            answers["max"] = Answer(column, "max", high_max, Method.ESTIMATED, low_max, high_max, SUBSET_SPANS_RANGE)
        # distinct values: at most the values the predicate allows and the subset's non-null rows
        dist = [parts[k].get("distinct_count") for k in contributing]
        table_d = self.ts.statistics([column], None, ["distinct_count"]).column("distinct_count")[0].as_py()
        if all(d is not None for d in dist) and table_d is not None:
            nonnull_hi = rows_hi - (values.get("null_count") or 0 if answers.get("null_count") and answers["null_count"].exact else 0)
            high = min(table_d, sum(dist), max(0, nonnull_hi))
            if pins.values is not None:
                high = min(high, pins.values)
            full_d = [r["distinct_count"] for r in full if r["row_count"]]
            low = min(max(full_d, default=0), high)
            n_all = sum(_nonnull(parts[k]) for k in contributing)
            est_rows = max(0.0, rc.value - (values.get("null_count") or 0) - (values.get("nan_count") or 0))
            D = min(table_d, sum(dist))
            est = D * (1 - (1 - min(1.0, est_rows / n_all)) ** (n_all / D)) if D and n_all else 0.0
            d = int(round(min(max(est, low), high)))
            values["distinct_count"] = d
            answers["distinct_count"] = (
                Answer(column, "distinct_count", d, Method.STORED)
                if low == high
                else Answer(column, "distinct_count", d, Method.ESTIMATED, low, high, CARDENAS)
            )
        # sum and mean: the whole partitions' exactly, the others' in proportion; bounded by
        # the value range times the possible counts
        if pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t):
            self._estimated_moments(column, t, parts, full, values, answers, share)
        lens = [parts[k].get("max_len") for k in contributing]
        if lens and all(x is not None for x in lens):
            hi_len, lo_len = max(lens), max((r.get("max_len") or 0 for r in full), default=0)
            values["max_len"] = hi_len
            answers["max_len"] = Answer(
                column, "max_len", hi_len, Method.STORED if hi_len == lo_len else Method.ESTIMATED, lo_len, hi_len, SUBSET_SPANS_RANGE
            )
        values["row_count"] = rc.value
        answers["row_count"] = Answer(column, "row_count", rc.value, rc.method, rc.low, rc.high, rc.assumption)
        del exact_rows
        return values, answers

    def _estimated_moments(self, column, t, parts, full, values, answers, share) -> None:
        exact = _merge_moments(t, full) if full else None
        sum_all = _decode_sum(exact["sum"], t) if exact and exact.get("sum") is not None else 0
        n_all = sum(_finite_count(r) for r in full)
        est_sum: Any = sum_all
        est_n = float(n_all)
        hi_n = 0
        for k in self.partitions.some:
            r = parts[k]
            if r.get("sum") is None:
                continue
            s = _decode_sum(r["sum"], t)
            f = share(k)
            est_sum = est_sum + (s * Decimal(repr(f)) if isinstance(s, Decimal) else s * f)
            est_n += _finite_count(r) * f
            hi_n += min(_finite_count(r), self.partition_count(k).high)
        assumption = f"{PROPORTIONAL} ({INDEPENDENCE})"
        spec = self.ts.histogram_spec(column) if self._histogrammed(BoundReference(column, (column,), t)) else None
        if spec is not None and spec.bins and self._split_for(column)[0] is not None:
            # the predicate cuts this column's values: their estimated bins say more than a share
            _, bin_est, _, how = self._bins(column, spec)
            mids = np.array([sum(cnt._edges(spec, b)) / 2 for b in range(spec.bins)], np.float64)
            if bin_est.sum() > 0:
                est_n = float(bin_est.sum())
                est_sum = float((mids * bin_est).sum())
                est_sum = Decimal(repr(est_sum)) if pt.is_decimal(t) else est_sum
                assumption = f"bin midpoints ({how})" if how else "bin midpoints"
        lo_v = _as_number(answers["min"].low, t) if "min" in answers else None
        hi_v = _as_number(answers["max"].high, t) if "max" in answers else None
        if lo_v is not None and hi_v is not None and all(math.isfinite(float(x)) for x in (lo_v, hi_v)):
            lo_v_some = lo_v
            low = sum_all + min(0, hi_n * lo_v_some)
            high = sum_all + max(0, hi_n * hi_v)
            if pt.is_floating(t):
                low, high = _widen(float(low), -1), _widen(float(high), 1)
            s_val = _clip(est_sum, low, high)
            values["sum"] = _sum_text(s_val, t)
            answers["sum"] = Answer(column, "sum", values["sum"], Method.ESTIMATED, _sum_text(low, t), _sum_text(high, t), assumption)
            mean = float(est_sum) / est_n if est_n > 0 else None
            if mean is not None:
                mean = min(max(mean, float(lo_v)), float(hi_v))
            values["mean"] = mean
            answers["mean"] = Answer(column, "mean", mean, Method.ESTIMATED, float(lo_v), float(hi_v), assumption)

    # ------------------------------------------------------------ top frequencies and histograms
    def top_frequencies(self, column: str, k: int = 10, typed: bool = False) -> pa.Table:
        ts = self.ts
        column = ts.resolve_column(column)
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        if self.exact:
            return self._computed_top(column, k, typed)
        if column not in ts.frequency_index(None):
            ts.column_type(column)
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        if self._is_whole_table():
            t = ts.top_frequencies(column, k, None, typed=typed)
            return self._top_result(t, column, [], stored=True)
        ref = BoundReference(column, (column,), ts.column_type(column))
        totals: dict[Any, list[float]] = {}  # value -> [low, estimate, high]
        exact = True
        for key in (*self.partitions.all, *self.partitions.some):
            f = self._freq(ref, key)
            if f is None or not f.complete:
                raise SubsetStatisticError(
                    f"top frequencies of column {column!r} are not stored for the subset where {self.where} (partition {key!r} "
                    f"keeps only repeated values): exact=True (--exact) computes them"
                )
            vals, cnts = f.values, f.counts
            if key in self.partitions.all:
                lo = est = hi = cnts.astype(float)
            else:
                own, rest = self._split_for(column)
                kept = np.where(np.asarray(mask(vals, own)), cnts, 0) if own is not None else cnts
                if rest is None:  # the predicate names only this column: exact on the stored values
                    lo = est = hi = kept.astype(float)
                else:  # the other columns' conjuncts: a share of the kept rows, Fréchet bounds
                    exact = False
                    n = self._rows[key]
                    c = self._count(rest, key).clamp(n)
                    est = kept * (c.estimate / n if n else 0.0)
                    hi = np.minimum(kept, c.high).astype(float)
                    lo = np.maximum(0, kept - (n - c.low)).astype(float)
            for v, a, b, c_ in zip(vals.to_pylist(), lo, est, hi):
                acc = totals.setdefault(v, [0.0, 0.0, 0.0])
                acc[0] += a
                acc[1] += b
                acc[2] += c_
        items = [(v, x) for v, x in totals.items() if x[2] > 0]
        items.sort(key=lambda it: (-it[1][1], str(it[0])))
        items = items[:k]
        value_type = ts.column_type(column)
        arr = pa.array([v for v, _ in items], type=value_type)
        value_col = arr if typed else value_forms.encode(arr)
        t = pa.table({"value": value_col, "frequency": pa.array([int(round(x[1])) for _, x in items], pa.int64())})
        answers = []
        for (v, x), text in zip(items, value_forms.encode(arr).to_pylist()):
            lo, est, hi = int(x[0]), int(round(x[1])), int(x[2])
            answers.append(
                Answer(column, text, est, Method.STORED)
                if exact or lo == hi
                else Answer(column, text, est, Method.ESTIMATED, lo, hi, f"{PROPORTIONAL} ({INDEPENDENCE})")
            )
        return self._top_result(t, column, answers, stored=exact)

    def _top_result(self, t: pa.Table, column: str, answers: list[Answer], stored: bool) -> pa.Table:
        if not answers:
            texts = (
                t.column("value").to_pylist()
                if pa.types.is_string(t.schema.field("value").type)
                else value_forms.encode(t.column("value")).to_pylist()
            )
            answers = [Answer(column, str(v), f, Method.STORED) for v, f in zip(texts, t.column("frequency").to_pylist())]
        md = {b"kind": b"subset", b"stored_rows": str(t.num_rows).encode()}
        return with_methods(t.replace_schema_metadata(md), self.where, self.exact, self.partitions, answers, "top_frequencies")

    def _split_for(self, column: str) -> tuple[ex.Expression | None, ex.Expression | None]:
        """The predicate's top-level conjuncts naming only ``column`` (applied exactly to its
        stored values or bins), and the others (None when there are none)."""
        own: list[ex.Expression] = []
        rest: list[ex.Expression] = []
        for c in ex.conjuncts(self.nf):
            refs = [r for r in ex.references(c) if isinstance(r, BoundReference)]
            (own if refs and all(r.name == column for r in refs) else rest).append(c)
        return (ex.and_(*own) if own else None), (ex.and_(*rest) if rest else None)

    def histogram(self, column: str) -> pa.Table:
        ts = self.ts
        column = ts.resolve_column(column)
        if self.exact:
            return self._computed_histogram(column)
        spec = ts.histogram_spec(column)
        base = ts.histogram(column)
        if spec is None or self._is_whole_table():
            answers = [Answer(column, f"bin:{b}", c, Method.STORED) for b, c in zip(base["bin"].to_pylist(), base["count"].to_pylist())]
            return with_methods(base, self.where, self.exact, self.partitions, answers, "histogram")
        lo, est, hi, assumption = self._bins(column, spec)
        counts_out = np.clip(_round_keeping_total(est), lo, hi).astype(np.int64)
        t = base.set_column(base.schema.get_field_index("count"), "count", pa.array(counts_out, pa.int64()))
        answers = [
            Answer(column, f"bin:{b}", int(c), Method.STORED)
            if lo[b] == hi[b]
            else Answer(column, f"bin:{b}", int(c), Method.ESTIMATED, int(lo[b]), int(hi[b]), assumption)
            for b, c in enumerate(counts_out)
        ]
        return with_methods(t, self.where, self.exact, self.partitions, answers, "histogram")

    def _bins(self, column: str, spec: HistogramSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
        """Per bin of the table's edges: (surely, estimated, possibly) matching values of the subset."""
        ref = BoundReference(column, (column,), self.ts.column_type(column))
        lo = np.zeros(spec.bins, np.int64)
        hi = np.zeros(spec.bins, np.int64)
        est = np.zeros(spec.bins, np.float64)
        for key in self.partitions.all:
            counts = self._hist(ref, key)
            if counts is not None:
                lo += counts
                hi += counts
                est += counts
        own, rest = self._split_for(column)
        r = _interval_of(own) if own is not None else None
        assumptions: set[str] = set()
        for key in self.partitions.some:
            counts = self._hist(ref, key)
            if counts is None:
                continue
            n = self._rows[key]
            if own is None:
                b_lo, b_est, b_hi = counts, counts.astype(np.float64), counts
            elif r is not None:  # ranges on this column: bins inside count whole, outside not at all
                b_lo, b_est, b_hi = cnt.range_bins(spec, counts, r)
                if not np.array_equal(b_lo, b_hi):
                    assumptions.add(UNIFORM_BIN)
            else:
                c = self._count(own, key).clamp(n)
                b_lo, b_est, b_hi = np.zeros_like(counts), counts * (c.estimate / n if n else 0.0), counts
                assumptions.add(f"{PROPORTIONAL} ({INDEPENDENCE})")
            if rest is not None:
                c = self._count(rest, key).clamp(n)
                b_est = b_est * (c.estimate / n if n else 0.0)
                b_hi = np.minimum(b_hi, c.high)
                b_lo = np.maximum(0, b_lo - (n - c.low))
                assumptions.add(f"{PROPORTIONAL} ({INDEPENDENCE})")
            lo += b_lo
            hi += b_hi
            est += b_est
        return lo, est, hi, "; ".join(sorted(assumptions)) or None  # type: ignore[return-value]

    # ------------------------------------------------------------ computed
    def computed(self, columns: Sequence[str] | None = None) -> Any:
        """The subset's statistics computed on the data (``engine.runtime.subset.compute_subset``)."""
        key = tuple(columns) if columns is not None else None
        if self._computed is None or (self._computed[0] is not None and self._computed[0] != key):
            from engine.runtime.subset import compute_subset

            self._computed = (key, compute_subset(self.ts, self.expr, list(columns) if columns is not None else None))
        return self._computed[1]

    def _computed_statistics(self, names: list[str], statistics: Sequence[str] | None, schema: pa.Schema) -> pa.Table:
        sub = self.computed(names)
        t = sub.statistics(names, None, [f.name for f in schema if f.name != "column"])
        answers = [Answer(r["column"], s, r.get(s), Method.COMPUTED) for r in t.to_pylist() for s in t.schema.names if s != "column"]
        rc = t.column("row_count")[0].as_py() if t.num_rows else sum(p.rows for p in sub.partitions())
        return with_methods(t, self.where, True, self.partitions, [Answer("*", "row_count", rc, Method.COMPUTED), *answers], "statistics")

    def _computed_top(self, column: str, k: int, typed: bool) -> pa.Table:
        t = self.computed([column]).top_frequencies(column, k, None, typed=typed)
        texts = t.column("value").to_pylist() if not typed else value_forms.encode(t.column("value")).to_pylist()
        answers = [Answer(column, str(v), f, Method.COMPUTED) for v, f in zip(texts, t.column("frequency").to_pylist())]
        return with_methods(t, self.where, True, self.partitions, answers, "top_frequencies")

    def _computed_histogram(self, column: str) -> pa.Table:
        t = self.computed([column]).histogram(column)
        answers = [Answer(column, f"bin:{b}", c, Method.COMPUTED) for b, c in zip(t["bin"].to_pylist(), t["count"].to_pylist())]
        return with_methods(t, self.where, True, self.partitions, answers, "histogram")


# ------------------------------------------------------------------ per-process caches
# Statistics files are immutable (unique paths per job): a partition's decoded frequencies and
# bin counts stay valid for as long as they are kept (a few MB at most: bounded by entries).
_MISSING = object()
_DECODED_ENTRIES = 512
_decoded: OrderedDict[tuple[str, str], Any] = OrderedDict()
_lock = threading.Lock()
_known: OrderedDict[str, frozenset[str]] = OrderedDict()


def _remember(key: tuple[str, str], value: Any) -> None:
    with _lock:
        _decoded[key] = value
        while len(_decoded) > _DECODED_ENTRIES:
            _decoded.popitem(last=False)


def _known_columns(ts: Any, partition: str) -> frozenset[str]:
    uri = ts.file_uri(layout.STATISTICS_FILE, partition)
    hit = _known.get(uri)
    if hit is None:
        hit = frozenset(ts.statistics_columns(partition))
        with _lock:
            _known[uri] = hit
            while len(_known) > _DECODED_ENTRIES:
                _known.popitem(last=False)
    return hit


_metrics_cache: OrderedDict[tuple[str, str, str], Any] = OrderedDict()


def _metrics(uri: str, ref: BoundReference, row: dict[str, Any]) -> Any:
    """``metrics_from_row`` of a partition's column, kept per file (immutable) and type."""
    key = (uri, ref.name, str(ref.type))
    hit = _metrics_cache.get(key)
    if hit is None:
        hit = metrics_from_row(row, ref.type)
        with _lock:
            _metrics_cache[key] = hit
            while len(_metrics_cache) > 4 * _DECODED_ENTRIES:
                _metrics_cache.popitem(last=False)
    return hit


def _file_bounds(ts: Any, expr: ex.Expression, partitions: dict[str, dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """(surely matching rows, possibly matching rows) of ``partitions`` from their files' index
    statistics: the inclusive evaluator over all files at once, the strict one per file. A column
    the index does not hold (a partition column) takes the partition's metrics: they bound
    every row of its files too."""
    from engine.expressions.vector import VectorMetricsEvaluator
    from engine.fileindex.plan import open_file_index

    index = open_file_index(ts.file_index_directory())
    refs = {r.name: r for r in ex.references(expr) if isinstance(r, BoundReference)}
    vectors = {name: index.vectors(ref) for name, ref in refs.items()}
    might = VectorMetricsEvaluator(expr).eval(lambda ref: vectors.get(ref.name), index.n, index.rows)
    strict = StrictMetricsEvaluator(expr)
    out: dict[str, tuple[int, int]] = {}
    for key, first, count in index.partition_files:
        if key not in partitions:
            continue
        low = high = 0
        for i in range(first, first + count):
            rows = int(index.rows[i])
            if not might[i]:
                continue
            high += rows
            part = partitions[key]
            if strict.eval(lambda ref, i=i, part=part: _file_metrics(vectors.get(ref.name), i) or part.get(ref.name), rows):
                low += rows
        out[key] = (low, high)
    return out


def _file_metrics(v: Any, i: int) -> Any:
    """One file's ColumnMetrics from the index's vectors (None: the file has none)."""
    if v is None or not v.known[i]:
        return None
    lower, upper = v.lower[i], v.upper[i]
    return ex.ColumnMetrics(
        rows=int(v.rows[i]),
        nulls=int(v.nulls[i]) if v.nulls[i] >= 0 else None,
        nans=int(v.nans[i]) if v.nans[i] >= 0 else None,
        lower=comparable(lower) if lower.is_valid else None,
        upper=comparable(upper) if upper.is_valid else None,
    )


#: the partition statistics a subset reads (pruning and merging), in one read per partition
ROW_STATISTICS = tuple(dict.fromkeys([*PRUNING_STATISTICS, *MERGEABLE]))


# ------------------------------------------------------------------ helpers (pure)
def m_distinct(sub: Subset, ref: BoundReference, key: str) -> float:
    row = sub.ts.statistics([ref.name], key, ["distinct_count"]).column("distinct_count")[0].as_py()
    return float(row) if row else 1.0


def _count_answer(column: str, statistic: str, exact_part: int, c: Count) -> Answer:
    value = int(round(exact_part + c.estimate))
    if c.exact:
        return Answer(column, statistic, exact_part + c.low, Method.STORED)
    low, high = exact_part + c.low, exact_part + c.high
    value = min(max(value, low), high)
    return Answer(column, statistic, value, Method.ESTIMATED, low, high, "; ".join(sorted(c.assumptions)) or None)


def _candidates(m: Any, n: int) -> int:
    return n - (m.nulls or 0) - (m.nans or 0)


def _within(value: Any, m: Any) -> bool:
    try:
        return (m.lower is None or m.lower <= value) and (m.upper is None or value <= m.upper)
    except TypeError:
        return True


def _stored_and_singles(freq: _Freq, p: Predicate, candidates: int) -> Count:
    """A predicate over a partition whose frequencies keep only repeated values: the stored
    values' rows exactly, plus 0..all of the values seen once."""
    hit = np.asarray(mask(freq.values, p))
    stored = int(freq.counts[hit].sum())
    singles = max(0, candidates - int(freq.counts.sum()))
    return Count(stored, stored + singles / 2, stored + singles, frozenset({AT_MOST_ONCE} if singles else ())).clamp(candidates)


def _round_keeping_total(est: np.ndarray) -> np.ndarray:
    """Whole counts whose running sums are the rounded running sums of ``est`` (many bins
    under one half would each round to 0 and lose the subset's rows)."""
    cum = np.round(np.cumsum(est))
    return np.diff(np.concatenate([[0.0], cum]))


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _nan_matches(op: Op, values: list[Any]) -> bool:
    """Whether a NaN value satisfies ``NaN op values`` in DuckDB's (and Spark's, Iceberg's) order:
    NaN equals NaN and is larger than every other value."""
    nan_literal = any(_is_nan(v) for v in values)
    if op in (Op.EQ, Op.IN, Op.LE):
        return nan_literal
    if op in (Op.NE, Op.NOT_IN, Op.GT):
        return not nan_literal
    return op is Op.GE


def _domain(p: Predicate) -> float | int | None:
    v = p.literals[0]
    if isinstance(v.value, float) and math.isnan(v.value):
        return None
    try:
        return to_domain(v.scalar)
    except (pa.ArrowException, TypeError, ValueError):
        return None


def _narrow(r: Interval | None, op: Op, v: float | int) -> Interval | None:
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


def _interval_of(e: ex.Expression) -> Interval | None:
    """The predicate as one interval of domain values, when it is a conjunction of ranges (else None)."""
    r: Interval | None = Interval()
    for c in ex.conjuncts(e):
        if isinstance(c, Predicate) and c.op in (Op.NOT_NULL, Op.NOT_NAN):
            continue  # nulls and NaN are in no bin
        if not (isinstance(c, Predicate) and (c.op in ORDER or c.op is Op.EQ)):
            return None
        v = _domain(c)
        if v is None:
            return None
        r = _narrow(r, c.op, v)
    return r


@dataclass(frozen=True)
class _Pins:
    """What the predicate's top-level conjuncts on one column say about its matching rows."""

    no_nulls: bool = False
    no_nans: bool = False
    only_nulls: bool = False
    lo: str | None = None  # text forms of the tightest bounds it sets
    hi: str | None = None
    values: int | None = None  # at most this many distinct values (= / IN)


def _pins(nf: ex.Expression, column: str) -> _Pins:
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
        if op is Op.NOT_NAN or (op in (Op.EQ, Op.IN, Op.NE, Op.NOT_IN, *ORDER) and not _nan_matches(op, [lit.value for lit in c.literals])):
            no_nans = True
        lits = [lit for lit in c.literals if not (isinstance(lit.value, float) and math.isnan(lit.value))]
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
    return _Pins(no_nulls, no_nans, only_nulls, lo[1] if lo else None, hi[1] if hi else None, values)


def _orderable(t: pa.DataType) -> bool:
    return not (pt.is_nested(t) or pt.is_dictionary(t))


def _key(text: str, t: pa.DataType) -> Any:
    return comparable(value_forms.decode_scalar(text, t))


def _extreme(texts: list[str | None], t: pa.DataType, pick: Any) -> str | None:
    """The smallest (``pick=min``) or largest text form of ``texts`` in the column's order."""
    present = [x for x in texts if x is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    if not value_forms.has_text_form(t):
        return None
    if pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t) or pt.is_temporal(t) or pt.is_string(t) or pt.is_large_string(t):
        try:  # one vectorised decode instead of one per text
            arr = value_forms.decode(pa.array(present, pa.string()), t)
            target = pc.min_max(arr)["min" if pick is min else "max"]
            return present[pc.index(arr, target).as_py()]
        except (pa.ArrowException, InvalidArgumentError):
            pass
    try:
        return pick(present, key=lambda x: _key(x, t))
    except (TypeError, InvalidArgumentError):
        return None


def _tighter(a: str | None, b: str | None, t: pa.DataType, pick: Any) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return pick([a, b], key=lambda x: _key(x, t))


def _nonnull(r: dict[str, Any]) -> int:
    return (r.get("row_count") or 0) - (r.get("null_count") or 0) - (r.get("nan_count") or 0)


def _finite_count(r: dict[str, Any]) -> int:
    return _nonnull(r)


def _sum_or_none(xs: list[int | None]) -> int | None:
    return None if any(x is None for x in xs) else sum(x for x in xs if x is not None)


def _decode_sum(text: str, t: pa.DataType) -> int | float | Decimal:
    if pt.is_integer(t):
        return int(text)
    if pt.is_decimal(t):
        return Decimal(text)
    return float(text)


def _sum_text(v: Any, t: pa.DataType) -> str | None:
    if v is None:
        return None
    if pt.is_integer(t):
        return str(int(v) if not isinstance(v, float) else int(round(v)))
    if pt.is_decimal(t):
        d = v if isinstance(v, Decimal) else Decimal(repr(float(v)))
        return format(d.quantize(Decimal(1).scaleb(-t.scale)), "f")
    return repr(float(v))


def _as_number(text: Any, t: pa.DataType) -> Any:
    if text is None:
        return None
    scalar = value_forms.decode_scalar(str(text), t)
    if pt.is_decimal(t):
        return scalar.as_py()
    if pt.is_integer(t):
        return int(scalar.as_py())
    return float(scalar.as_py())


def _widen(x: float, direction: int) -> float:
    return x + direction * (abs(x) * 1e-9 + 1e-300)


def _clip(v: Any, low: Any, high: Any) -> Any:
    return min(max(v, low), high)


def _merge_moments(t: pa.DataType, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not (pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t)):
        return None
    acc = MomentsAccumulator(t)
    state = acc.zero()
    for r in rows:
        n = _nonnull(r)
        if n <= 0 or r.get("sum") is None:
            continue
        sd = r.get("stddev")
        m2 = (sd * sd * (n - 1)) if sd is not None and n > 1 and math.isfinite(sd) else (0.0 if n == 1 else math.nan)
        state = acc.merge(state, Moments(n, float(r["mean"]), m2, _decode_sum(r["sum"], t)))
    out = acc.finalize(state)
    return {"sum": _sum_text(out["sum"], t) if out["sum"] is not None else None, "mean": out["mean"], "stddev": out["stddev"]}
