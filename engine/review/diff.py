"""The difference between two published states of a table (or two partitions, or a partition
and the table): statistics side by side, drift per column, columns and partitions added and
removed (docs/DIFF.md).

Reads only stored statistics (statistics.parquet, histograms.parquet, frequencies.parquet of
both sides) through two ``engine.lookup.TableStatistics`` (passed in: this module sits
below the lookups); the numbers come from the pure kernels of engine/stats/drift.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import values as value_forms
from engine.display import to_jsonable
from engine.exceptions import InvalidArgumentError, MetastoreError, StatisticsNotFoundError
from engine.files import layout
from engine.stats import drift
from engine.stats.histograms import HistogramDomain

if TYPE_CHECKING:
    from engine.review.reading import Statistics

#: the statistics each side of a column shows (statistics.parquet names -> result names)
SIDE_STATISTICS = {
    "row_count": "rows", "null_count": "nulls", "nan_count": "nans", "distinct_count": "distinct",
    "distinct_count_exact": "distinct_exact", "min": "min", "max": "max", "mean": "mean", "stddev": "stddev",
    **{p: p for p in layout.PERCENTILE_COLUMNS},
}  # fmt: skip
#: a complete frequencies list longer than this is not read for a discrete column's drift
MAX_DISCRETE_VALUES = 1_000_000
DEFAULT_TOP = 10


@dataclass(frozen=True)
class Side:
    """One side of a diff: which state (catalog transaction) and which level."""

    txn_id: int | None
    committed_at: str | None
    job_id: str
    snapshot: str
    partition: str | None  # None: the table level
    rows: int


@dataclass(frozen=True)
class Drift:
    """How a column's distribution moved: KS distance and PSI (None: not measurable, see ``note``)."""

    method: str | None  # "histogram", "histogram_rebinned", "frequencies" or None
    ks: float | None = None
    ks_exact: bool = False
    psi: float | None = None
    top_values: drift.TopChanges | None = None
    note: str | None = None


@dataclass(frozen=True)
class ColumnDiff:
    column: str
    from_type: str
    to_type: str
    from_stats: dict[str, Any]
    to_stats: dict[str, Any]
    drift: Drift
    changed: bool  # any statistic differs


@dataclass(frozen=True)
class PartitionChange:
    key: str
    from_rows: int | None  # None: added
    to_rows: int | None  # None: removed


@dataclass(frozen=True)
class TableDiff:
    """``TableStatistics.diff``'s result; ``as_dict()`` is the JSON form ``metastore diff -o json`` prints."""

    table: str
    from_side: Side
    to_side: Side
    columns: tuple[ColumnDiff, ...]
    columns_added: tuple[tuple[str, str], ...]  # (column, type)
    columns_removed: tuple[tuple[str, str], ...]
    partitions_added: tuple[PartitionChange, ...] = ()
    partitions_removed: tuple[PartitionChange, ...] = ()
    partitions_changed: tuple[PartitionChange, ...] = ()
    partitions_compared: bool = False  # both sides are table levels
    notes: tuple[str, ...] = field(default_factory=tuple)

    def column(self, name: str) -> ColumnDiff:
        for c in self.columns:
            if c.column == name:
                return c
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        def side(s: Side) -> dict[str, Any]:
            return {
                "txn_id": s.txn_id,
                "committed_at": s.committed_at,
                "job_id": s.job_id,
                "snapshot": s.snapshot,
                "partition": s.partition,
                "rows": s.rows,
            }

        def part(p: PartitionChange) -> dict[str, Any]:
            return {"key": p.key, "from_rows": p.from_rows, "to_rows": p.to_rows}

        doc: dict[str, Any] = {
            "table": self.table,
            "from": side(self.from_side),
            "to": side(self.to_side),
            "rows": {"from": self.from_side.rows, "to": self.to_side.rows, "change": self.to_side.rows - self.from_side.rows},
            "columns_added": [{"column": c, "type": t} for c, t in self.columns_added],
            "columns_removed": [{"column": c, "type": t} for c, t in self.columns_removed],
            "partitions": None,
            "columns": [_column_dict(c) for c in self.columns],
            "notes": list(self.notes),
        }
        if self.partitions_compared:
            doc["partitions"] = {
                "added": [{"key": p.key, "rows": p.to_rows} for p in self.partitions_added],
                "removed": [{"key": p.key, "rows": p.from_rows} for p in self.partitions_removed],
                "changed": [part(p) for p in self.partitions_changed],
            }
        return doc

    def to_json(self) -> dict[str, Any]:
        """``as_dict()`` with every value JSON can hold (Decimal, datetime, ... as text)."""
        return to_jsonable(self.as_dict())


def _column_dict(c: ColumnDiff) -> dict[str, Any]:
    d = c.drift
    top = None
    if d.top_values is not None:

        def rc(r: drift.RankChange) -> dict[str, Any]:
            return {"value": r.value, "from_rank": r.from_rank, "to_rank": r.to_rank, "from_count": r.from_count, "to_count": r.to_count}

        top = {k: [rc(r) for r in getattr(d.top_values, k)] for k in ("gained", "lost", "changed_rank")}
    return {
        "column": c.column,
        "type": c.to_type,
        "from_type": c.from_type,
        "changed": c.changed,
        "from": c.from_stats,
        "to": c.to_stats,
        "drift": {"method": d.method, "ks": d.ks, "ks_exact": d.ks_exact, "psi": d.psi, "note": d.note, "top_values": top},
    }


# ============================================================== which states
def _transactions(store: str, table: str) -> list[int]:
    """The ids of the table's kept catalog transactions, oldest first (empty without a catalog)."""
    from engine.catalog import Catalog

    cat = Catalog.open(store, table)
    if cat.state().empty:
        return []
    return [info.id for info in cat.history()]


def resolve_sides(
    store: str, table: str, from_txn: int | None, to_txn: int | None, from_partition: str | None, to_partition: str | None
) -> tuple[int | None, int | None]:
    """The two transactions to compare (None: the current state)."""
    if from_txn is not None and to_txn is not None:
        return from_txn, to_txn
    partitions = from_partition is not None or to_partition is not None
    if partitions and from_txn is None and to_txn is None:
        return None, None  # two levels of the newest state
    ids = _transactions(store, table)
    if not ids:
        raise StatisticsNotFoundError(
            f"table {table!r} in store {store} has no catalog: diff compares catalog states "
            "(give --from-partition/--to-partition to compare levels of the one state)"
        )
    if to_txn is None:
        to_txn = ids[-1]
    if from_txn is None:
        before = [i for i in ids if i < to_txn]
        if not before:
            raise InvalidArgumentError(
                f"table {table!r} has no state before transaction {to_txn} (metastore history {table}); "
                "give --from, or --from-partition/--to-partition to compare levels of one state"
            )
        from_txn = before[-1]
    return from_txn, to_txn


# ============================================================== gathering
def side_of(ts: Statistics, partition: str | None) -> Side:
    cat = ts.state.catalog
    rows = ts.state.rows if partition is None else next(p.rows for p in ts.partitions() if p.key == partition)
    return Side(
        txn_id=cat.txn_id if cat is not None else None,
        committed_at=cat.committed_at if cat is not None else None,
        job_id=ts.job_id,
        snapshot=ts.snapshot,
        partition=partition,
        rows=rows,
    )


def _decode(text: str | None, t: Any) -> Any:
    if text is None:
        return None
    try:
        v = value_forms.decode_scalar(text, t).as_py()
    except (MetastoreError, OverflowError, ValueError):
        return text
    return v


def _side_stats(ts: Statistics, columns: list[str], partition: str | None) -> dict[str, dict[str, Any]]:
    """Per column the statistics of ``SIDE_STATISTICS``, values decoded to the column's type."""
    if not columns:
        return {}
    rows = ts.statistics(columns, partition, statistics=list(SIDE_STATISTICS)).to_pylist()
    out = {}
    for r in rows:
        values = _decode_all([r.get(k) for k in layout.VALUE_STATISTICS], ts.column_type(r["column"]))
        doc = {}
        for stored, name in SIDE_STATISTICS.items():
            doc[name] = values.pop(0) if stored in layout.VALUE_STATISTICS else r.get(stored)
        out[r["column"]] = doc
    return out


def _decode_all(texts: list[str | None], t: Any) -> list[Any]:
    """A column's value statistics decoded in one call (one by one when a value has no Python form)."""
    import pyarrow as pa

    try:
        return value_forms.decode(pa.array(texts, pa.string()), t).to_pylist()
    except (MetastoreError, OverflowError, ValueError, pa.ArrowException):
        return [_decode(v, t) for v in texts]


def _histogram(ts: Statistics, column: str, partition: str | None) -> drift.Histogram | None:
    try:
        spec = ts.histogram_spec(column, partition)
    except MetastoreError:
        return None  # no histogram for this column
    if spec is None:
        return None
    lows, ups = spec.edges()
    counts = np.asarray(ts.histogram(column, partition).column("count").to_numpy(zero_copy_only=False), dtype=np.int64)
    return drift.Histogram.of(lows, ups, counts, spec.domain == HistogramDomain.INTEGER.value)


def _frequencies(ts: Statistics, column: str, partition: str | None, k: int) -> tuple[str, list[tuple[Any, int]]] | None:
    """(kind, [(value text, count)]) of a discrete column's k most frequent values (None: no frequencies)."""
    try:
        t = ts.top_frequencies(column, k, partition)
    except MetastoreError:
        return None
    kind = (t.schema.metadata or {}).get(b"kind", b"").decode()
    return kind, list(zip(t.column("value").to_pylist(), t.column("frequency").to_pylist()))


def _stored(ts: Statistics, column: str, partition: str | None) -> tuple[str, int] | None:
    index = ts.frequency_index(partition)
    if column not in index:
        return None
    _, _, rows, kind = index[column]
    return kind, rows


def _ordered(ts: Statistics, column: str, pairs: list[tuple[str, int]]) -> list[tuple[Any, int]]:
    """Value texts decoded for their order (text order when a value has no Python form)."""
    try:
        import pyarrow as pa

        typed = value_forms.decode(pa.array([v for v, _ in pairs], pa.string()), ts.column_type(column)).to_pylist()
        sorted(set(typed))  # comparable?
        return list(zip(typed, (c for _, c in pairs)))
    except (MetastoreError, OverflowError, ValueError, TypeError):
        return pairs


def _discrete_drift(a: Statistics, b: Statistics, column: str, pa_: str | None, pb: str | None) -> Drift:
    sa, sb = _stored(a, column, pa_), _stored(b, column, pb)
    if sa is None or sb is None:
        return Drift(None, note="no histogram and no frequencies on both sides")
    if sa[0] != "complete" or sb[0] != "complete":
        kinds = sorted({sa[0], sb[0]} - {"complete"})
        return Drift(None, note=f"no histogram; frequencies not complete ({', '.join(kinds)}): KS and PSI need every value's count")
    if max(sa[1], sb[1]) > MAX_DISCRETE_VALUES:
        return Drift(None, note=f"more than {MAX_DISCRETE_VALUES:,} distinct values: KS and PSI not computed")
    fa, fb = _frequencies(a, column, pa_, sa[1]), _frequencies(b, column, pb, sb[1])
    assert fa is not None and fb is not None
    ks, psi = drift.discrete_drift(_ordered(a, column, fa[1]), _ordered(b, column, fb[1]))
    return Drift("frequencies", ks=ks.value, ks_exact=True, psi=psi.value)


def column_drift(a: Statistics, b: Statistics, column: str, pa_: str | None, pb: str | None, top: int) -> Drift:
    """KS and PSI of one column between two sides, and its top values' changes."""
    ha, hb = _histogram(a, column, pa_), _histogram(b, column, pb)
    if ha is not None and hb is not None:
        shared = ha.same_edges(hb)
        ks, psi = drift.ks_histograms(ha, hb), drift.psi_histograms(ha, hb)
        note = None if shared else "the bins moved between the two sides: CDFs interpolated within bins (approximate)"
        if ks.value is None:
            note = "one side has no values"
        d = Drift("histogram" if shared else "histogram_rebinned", ks=ks.value, ks_exact=ks.exact, psi=psi.value, note=note)
    else:
        d = _discrete_drift(a, b, column, pa_, pb)
    if top > 0:
        fa, fb = _frequencies(a, column, pa_, top), _frequencies(b, column, pb, top)
        if fa is not None and fb is not None:
            d = Drift(d.method, d.ks, d.ks_exact, d.psi, drift.top_value_changes(fa[1], fb[1]), d.note)
    return d


def _changed(a: Any, b: Any) -> bool:
    """Whether a partition's data changed: its rows, or its data files' fingerprint (when both
    states know it; else the job that computed its statistics)."""
    if a.rows != b.rows:
        return True
    fa, fb = getattr(a, "data_fingerprint", ""), getattr(b, "data_fingerprint", "")
    if fa and fb:
        return bool(fa != fb)
    return bool(a.job_id != b.job_id)


def _partition_changes(a: Statistics, b: Statistics) -> tuple[tuple[PartitionChange, ...], ...]:
    pa_ = {p.key: p for p in a.state.partitions}
    pb = {p.key: p for p in b.state.partitions}
    added = tuple(PartitionChange(k, None, p.rows) for k, p in pb.items() if k not in pa_)
    removed = tuple(PartitionChange(k, p.rows, None) for k, p in pa_.items() if k not in pb)
    changed = tuple(PartitionChange(k, pa_[k].rows, p.rows) for k, p in pb.items() if k in pa_ and _changed(pa_[k], p))
    return added, removed, changed


def diff_states(
    a: Statistics,
    b: Statistics,
    partition: str | None = None,
    other_partition: str | None = None,
    columns: list[str] | None = None,
    top: int = DEFAULT_TOP,
) -> TableDiff:
    """From ``a`` (a ``TableStatistics``; its ``partition`` or its table level) to ``b`` (its
    ``other_partition`` or table level)."""
    for ts, p in ((a, partition), (b, other_partition)):
        if p is not None and p not in {x.key for x in ts.partitions()}:
            raise InvalidArgumentError(f"table {ts.table!r} has no partition {p!r} in transaction {ts.txn_id}")
    ca = {n: str(a.schema.field(n).type) for n in a.statistics_columns(partition)}
    cb = {n: str(b.schema.field(n).type) for n in b.statistics_columns(other_partition)}
    common = [n for n in cb if n in ca]
    if columns is not None:
        unknown = [c for c in columns if b.resolve_column(c) not in cb and a.resolve_column(c) not in ca]
        if unknown:
            raise InvalidArgumentError(f"table {b.table!r} has no column {unknown[0]!r} on either side")
        wanted = {b.resolve_column(c) for c in columns} | {a.resolve_column(c) for c in columns}
        common = [n for n in common if n in wanted]
    sa, sb = _side_stats(a, common, partition), _side_stats(b, common, other_partition)
    diffs = []
    for name in common:
        d = column_drift(a, b, name, partition, other_partition, top)
        diffs.append(ColumnDiff(name, ca[name], cb[name], sa[name], sb[name], d, sa[name] != sb[name] or ca[name] != cb[name]))
    both_tables = partition is None and other_partition is None
    added, removed, changed = _partition_changes(a, b) if both_tables else ((), (), ())
    return TableDiff(
        table=b.table,
        from_side=side_of(a, partition),
        to_side=side_of(b, other_partition),
        columns=tuple(diffs),
        columns_added=tuple((n, t) for n, t in cb.items() if n not in ca),
        columns_removed=tuple((n, t) for n, t in ca.items() if n not in cb),
        partitions_added=added,
        partitions_removed=removed,
        partitions_changed=changed,
        partitions_compared=both_tables,
    )
