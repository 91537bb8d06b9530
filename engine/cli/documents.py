"""The plain documents the read commands build from a table's statistics (show, demo, analyze):
what ``--output json`` prints and the text output draws.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from engine.display import SKETCH_STATISTICS, regroup
from engine.exceptions import MetastoreError

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.lookup import TableStatistics
    from engine.runtime.job.result import AnalyzeResult

_OVERVIEW_STATISTICS = [
    "type", "unsupported", "row_count", "null_count", "nan_count",
    "distinct_count", "distinct_count_exact", "min", "max", "mean",
]  # fmt: skip


def analyze_doc(result: AnalyzeResult) -> dict[str, Any]:

    doc = asdict(result)
    doc["ray_start_s"] = result.timings.get("ray_start_s", 0.0)
    doc["files"] = result.run_uri
    return doc


def _decode(text: str | None, type_: pa.DataType) -> Any:
    """A stored text form as a Python value, exact (engine/pyvalues.py: nanoseconds, far dates)."""
    from engine import values
    from engine.pyvalues import python_value

    if text is None:
        return None
    try:
        return python_value(values.decode_scalar(text, type_))
    except MetastoreError:
        return text


def overview_doc(ts: TableStatistics, partition: str | None = None) -> dict[str, Any]:
    from engine.columns import display_name, display_path

    table = ts.statistics(partition=partition, statistics=_OVERVIEW_STATISTICS)
    rows = ts.state.rows if partition is None else next(p.rows for p in ts.partitions() if p.key == partition)
    columns = []
    for r in table.to_pylist():
        t = ts.column_type(r["column"])
        columns.append(
            {
                "column": display_name(r["column"]),  # as in the data (struct leaves: "s > x")
                "path": display_path(r["column"]),
                "type": r["type"] or str(t),
                "unsupported": r["unsupported"],
                "rows": r["row_count"],
                "nulls": r["null_count"],
                "nans": r["nan_count"],
                "distinct": r["distinct_count"],
                "distinct_exact": r["distinct_count_exact"],
                "min": _decode(r["min"], t),
                "max": _decode(r["max"], t),
                "mean": r["mean"],
            }
        )
    return {
        "table": ts.table,
        "job_id": ts.job_id,
        "snapshot": ts.snapshot,
        "partition": partition,
        "partitions": len(ts.state.partitions),
        "rows": rows,
        "columns": columns,
    }


def column_doc(ts: TableStatistics, column: str, partition: str | None = None, top: int = 10, bins_shown: int = 20) -> dict[str, Any]:
    """Full statistics (sketch sizes instead of bytes), top-k frequencies and a regrouped histogram."""
    from engine.columns import display_name, display_path
    from engine.files.layout import VALUE_STATISTICS
    from engine.pyvalues import python_value, python_values
    from engine.stats.histograms import HistogramDomain

    stored = ts.resolve_column(column)
    stats = ts.column_statistics(column, partition)
    # min, max and percentiles exactly, from their stored text (as_py() needs pandas for nanoseconds)
    present = [k for k in VALUE_STATISTICS if stats.get(k) is not None]
    if present:
        texts = ts.statistics([stored], partition, statistics=present).to_pylist()[0]
        t = ts.column_type(stored)
        stats.update({k: _decode(texts[k], t) for k in present})
    stats = {k: python_value(v) for k, v in stats.items()}
    if "column" in stats:
        stats["column"] = display_name(stored)
    sketches = ts.statistics([column], partition, statistics=list(SKETCH_STATISTICS)).to_pylist()[0]
    for name in SKETCH_STATISTICS:
        stats[name] = None if sketches.get(name) is None else len(sketches[name])
    doc: dict[str, Any] = {
        "column": display_name(stored),
        "path": display_path(stored),
        "type": stats.get("type"),
        "partition": partition,
        "statistics": stats,
        "top_frequencies": None,
        "histogram": None,
    }
    if stats.get("frequencies") is not None and top > 0:
        t = ts.top_frequencies(column, top, partition, typed=True)
        md = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
        kind, stored_rows = md.get("kind", stats["frequencies"]), int(md.get("stored_rows", "0"))
        non_null = (stats.get("row_count") or 0) - (stats.get("null_count") or 0)
        values = [
            {"value": v, "frequency": f, "share": (f / non_null) if non_null else None}
            for v, f in zip(python_values(t.column("value")), t.column("frequency").to_pylist())
        ]
        note = None
        if kind == "all_distinct":
            note = "every value occurs exactly once: no frequencies are stored"
        elif kind == "duplicates_only":
            singles = (stats.get("distinct_count") or 0) - stored_rows
            note = (
                f"only values that occur more than once are stored ({stored_rows:,}); "
                f"{singles:,} other distinct value{'s occur' if singles != 1 else ' occurs'} once"
            )
        doc["top_frequencies"] = {"kind": kind, "k": top, "stored": stored_rows, "values": values, "note": note}
    if stats.get("histogram_bins"):
        spec = ts.histogram_spec(column, partition)
        h = ts.histogram(column, partition)
        bins = [
            {"lower": lo, "upper": hi, "count": n}
            for lo, hi, n in zip(python_values(h.column("lower")), python_values(h.column("upper")), h.column("count").to_pylist())
        ]
        integer = spec is not None and spec.domain == HistogramDomain.INTEGER.value
        doc["histogram"] = {
            "bins": len(bins),
            "domain": spec.domain if spec else None,
            "counted": sum(b["count"] for b in bins),
            "upper_edges": "inclusive" if integer else "exclusive (the last one inclusive)",
            "buckets": regroup(bins, bins_shown),
        }
    return doc


def source_doc(ts: TableStatistics) -> dict[str, Any]:
    """Which source snapshot the statistics describe and how many snapshots the table has
    committed since (the format's history only; None when unknown: a Parquet directory,
    an unreachable table, a snapshot no longer in the history)."""
    try:
        stale_by = ts.stale_by()
    except MetastoreError:
        stale_by = None  # the table moved or is unreachable: the statistics are still shown
    return {"table_uri": ts.state.properties.get("table_uri"), "snapshot": ts.snapshot, "stale_by": stale_by}


def at_doc(ts: TableStatistics) -> dict[str, Any] | None:
    """Which catalog transaction a time-travelling lookup reads (None for the current state)."""
    if not ts.time_travel:
        return None
    return asdict(ts.state.catalog) if ts.state.catalog is not None else {}
