"""Helpers of the table-format tests: data, the DuckDB oracle over what the format's own
reader returns, and a source that records which partitions were read (in Ray workers too:
the class is pickled by value, and each read appends a line to a file)."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from statistics_oracle import PCTS, decode, oracle_row, q, stat_rows  # noqa: F401 - q, stat_rows: re-exported

from engine import types as mt
from engine.api import analyze, open_statistics
from engine.exceptions import InvalidTableLayoutError, SnapshotNotFoundError, TableNotFoundError
from engine.files import layout
from engine.sources import open_table


def batch(rows: int, seed: int, parts: int = 4, start: int = 0, id_type: pa.DataType = pa.int32()) -> pa.Table:
    """Rows of every kind of column the statistics treat differently."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + rows)
    price = rng.normal(100, 30, rows).round(2)
    price[rng.random(rows) < 0.05] = np.nan
    city = rng.choice(["Berlin", "Paris", "Rome", "Oslo", "Lima"], rows).astype(object)
    city[rng.random(rows) < 0.1] = None
    base = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    ts = (base + rng.integers(0, 86400 * 30, rows)) * 1_000_000
    return pa.table(
        {
            "id": pa.array(ids, id_type),
            "part": pa.array(ids % parts, pa.int64()),
            "price": pa.array(price, pa.float64()),
            "city": pa.array(city, pa.string()),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "day": pa.array([date(2024, 1, 1 + int(i) % 28) for i in rng.integers(0, 28, rows)], pa.date32()),
        }
    )


def check_statistics(ts: Any, data: pa.Table, partition: str | None = None) -> int:
    """Every statistic of every column of one statistics.parquet against DuckDB over ``data``
    (what the format's own reader returns); returns the number of columns checked."""
    import pytest

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    flat = data.flatten()  # struct leaves as "parent.child", as statistics name them
    con.register("t", flat)
    rows = stat_rows(ts, partition)
    level = "table" if partition is None else "partition"
    checked = 0
    for name, row in rows.items():
        t = ts.column_type(name)
        if row["unsupported"] is not None or name not in flat.column_names:
            assert row["row_count"] == flat.num_rows, (level, name)
            continue
        ref = oracle_row(con, "t", name, t)
        ctx = (level, partition, name)
        assert row["row_count"] == ref["row_count"], ctx
        assert row["null_count"] == ref["null_count"], ctx
        assert row["nan_count"] == ref.get("nan_count"), ctx
        if mt.is_orderable(t):
            assert decode(row["min"], t) == _py(ref["min"]), ctx
            assert decode(row["max"], t) == _py(ref["max"]), ctx
            if row["distinct_count_exact"]:
                assert row["distinct_count"] == ref["distinct_count"], ctx
            else:
                assert row["distinct_count"] == pytest.approx(ref["distinct_count"], rel=0.05), ctx
        if mt.is_numeric(t) and ref["mean"] is not None:
            if pa.types.is_integer(t):
                assert int(row["sum"]) == int(ref["sum"]), ctx
            elif not pa.types.is_decimal(t):
                assert float(row["sum"]) == pytest.approx(ref["sum"], rel=1e-9), ctx
            assert row["mean"] == pytest.approx(ref["mean"], rel=1e-9), ctx
            if ref["stddev"] is not None:
                assert row["stddev"] == pytest.approx(ref["stddev"], rel=1e-7), ctx
        if mt.has_length(t) and ref["avg_len"] is not None:
            assert row["avg_len"] == pytest.approx(ref["avg_len"], rel=1e-12), ctx
            assert row["max_len"] == ref["max_len"], ctx
        if mt.has_percentiles(t) and row["percentiles_exact"]:
            assert [decode(row[k], t) for k in PCTS] == [_py(v) for v in ref["percentiles"]], ctx
        checked += 1
    con.close()
    return checked


def _py(v: Any) -> Any:
    # DuckDB returns naive UTC datetimes for TIMESTAMPTZ only with the UTC zone set; it gives aware ones
    return v


def check_table(store: str, table: str, data: pa.Table, partitions: dict[str, pa.Table] | None = None) -> None:
    """Table statistics (and those of ``partitions``) against DuckDB; the row counts add up."""
    ts = open_statistics(store, table)
    assert ts.manifest["rows"] == data.num_rows
    assert check_statistics(ts, data) > 0
    for key, part in (partitions or {}).items():
        check_statistics(ts, part, key)


# ---------------------------------------------------------------- read counting
def counting(source: Any, log: Path) -> Any:
    """``source`` as an instance of a subclass whose read_batches appends the partition key
    to ``log`` (one line a read, from whichever process reads)."""
    from ray import cloudpickle

    import tests.engine.sources.lake_helpers as me

    cloudpickle.register_pickle_by_value(me)
    cls = type(source)
    counted = me._COUNTED.get(cls)
    if counted is None:

        def read_batches(self, partition, columns, *args, **kwargs):
            with open(self._read_log, "a", encoding="utf-8") as f:
                f.write(partition.key + "\n")
            yield from cls.read_batches(self, partition, columns, *args, **kwargs)

        counted = type(f"Counting{cls.__name__}", (cls,), {"read_batches": read_batches, "__module__": me.__name__})
        me._COUNTED[cls] = counted
    out = counted.__new__(counted)
    out.__dict__.update(source.__dict__)
    out._read_log = str(log)
    return out


_COUNTED: dict[type, type] = {}


def reads(log: Path) -> set[str]:
    return set(log.read_text(encoding="utf-8").split("\n")) - {""} if log.exists() else set()


def analyze_source(source: Any, store: str, **options: Any) -> Any:
    """engine.runtime.job.driver.run_job on a source object (what api.analyze does after open_table)."""
    from engine.columns import leaf_columns
    from engine.options import AnalyzeOptions
    from engine.runtime.job.driver import run_job
    from engine.runtime.ray_runtime import ensure_ray
    from engine.store import Store

    ensure_ray()
    return run_job(source, Store(store), leaf_columns(source.schema()), [], AnalyzeOptions(**options))


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


# ---------------------------------------------------------------- bad input
def assert_bad_input_refused(location: str, fmt: str, missing_snapshot: int, missing_message: str, tmp_path: Path) -> None:
    """What every table format refuses alike, each with its one error: a snapshot that does not
    exist (``missing_message``), a time before the table's first commit, and no table at a path."""
    import pytest

    with pytest.raises(SnapshotNotFoundError, match=missing_message):
        open_table(location, at_snapshot=missing_snapshot)
    with pytest.raises(SnapshotNotFoundError):
        open_table(location, as_of="2001-01-01")
    with pytest.raises(TableNotFoundError):
        open_table(str(tmp_path / "nothing"), format=fmt)


def assert_analyze_refused(table: Path, store: Path) -> None:
    """A damaged table: analyze fails with InvalidTableLayoutError and publishes nothing of it."""
    import pytest

    with pytest.raises(InvalidTableLayoutError):
        analyze(str(table), store=str(store))
    assert not (store / table.name).exists()


# ---------------------------------------------------------------- incremental = full
def assert_same_statistics(store: str, full: str, table: str) -> None:
    """The table-level statistics of ``store`` (a re-analyze with inheritance) equal those of the
    full analyze in ``full``; sums and means up to float rounding (the merge order differs)."""
    import pytest

    got, want = stat_rows(open_statistics(store, table)), stat_rows(open_statistics(full, table))
    for name in got:
        for key in ("row_count", "null_count", "nan_count", "min", "max", "distinct_count", "sum", "mean"):
            a, b = got[name][key], want[name][key]
            assert a == b or (a is not None and b is not None and float(a) == pytest.approx(float(b), rel=1e-12)), (name, key)


def _comparable_rows(uri: str) -> list[dict]:
    """A statistics file's rows without what KLL sketches decide (nondeterministic run to run):
    the sketch, and the percentiles of columns whose percentiles are approximate. NaN == NaN."""
    t = pq.read_table(uri).drop_columns(["kll_sketch"])
    rows = []
    for r in t.to_pylist():
        if r.get("percentiles_exact") is False:
            for name in PCTS:
                r.pop(name, None)
        rows.append({k: "nan" if isinstance(v, float) and v != v else v for k, v in r.items()})
    return rows


def assert_same_files(store: str, full: str, table: str) -> None:
    """Every statistics file of ``store``'s current state (a re-analyze with inheritance)
    equals the full analyze's in ``full``, table level and per partition, except KLL's."""
    got, want = open_statistics(store, table), open_statistics(full, table)
    assert [(p.key, p.rows) for p in got.partitions()] == [(p.key, p.rows) for p in want.partitions()]
    for partition in [None, *(p.key for p in got.partitions())]:
        assert _comparable_rows(got.file_uri(layout.STATISTICS_FILE, partition)) == _comparable_rows(
            want.file_uri(layout.STATISTICS_FILE, partition)
        ), partition
        for name in (layout.FREQUENCIES_FILE, layout.HISTOGRAMS_FILE):
            assert pq.read_table(got.file_uri(name, partition)).equals(pq.read_table(want.file_uri(name, partition))), (partition, name)
