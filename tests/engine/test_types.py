"""Every Arrow primitive type Parquet can hold goes through analyze and back, checked against pyarrow."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine.api import analyze, open_statistics
from engine.files import layout

pytestmark = pytest.mark.ray

N = 500


def _columns() -> dict[str, pa.Array]:
    rng = np.random.default_rng(3)
    ints = rng.integers(-1000, 1000, N)
    mask = rng.random(N) < 0.1

    def with_nulls(values: list, t: pa.DataType) -> pa.Array:
        return pa.array([None if m else v for v, m in zip(values, mask)], type=t)

    big = [int(v) for v in rng.integers(-(2**62), 2**62, N)]
    big[0], big[1] = -(2**63), 2**63 - 1
    ubig = [int(v) for v in rng.integers(0, 2**63, N, dtype=np.uint64)]
    ubig[0] = 2**64 - 1
    base = dt.datetime(2024, 1, 1)
    return {
        "b": with_nulls([bool(v % 2) for v in ints], pa.bool_()),
        "i8": with_nulls([int(v % 100) for v in ints], pa.int8()),
        "i16": with_nulls(ints.tolist(), pa.int16()),
        "i32": with_nulls(ints.tolist(), pa.int32()),
        "i64": pa.array(big, pa.int64()),
        "u8": with_nulls([abs(int(v)) % 200 for v in ints], pa.uint8()),
        "u32": with_nulls([abs(int(v)) for v in ints], pa.uint32()),
        "u64": pa.array(ubig, pa.uint64()),
        "f16": pa.array(rng.random(N).astype(np.float16)),
        "f32": with_nulls(rng.random(N).astype(np.float32).tolist(), pa.float32()),
        "f64": pa.array(np.concatenate([[np.nan, np.inf, -np.inf], rng.normal(size=N - 3)])),
        "dec": with_nulls([Decimal(int(v)) / 100 for v in ints], pa.decimal128(10, 2)),
        "dec256": pa.array([Decimal(10**60 + int(v)) for v in ints], pa.decimal256(70, 0)),
        "d32": with_nulls([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in ints], pa.date32()),
        "t32": with_nulls([dt.time(abs(int(v)) % 24, 5, 6) for v in ints], pa.time32("s")),
        "t64": with_nulls([dt.time(abs(int(v)) % 24, 5, 6, 123) for v in ints], pa.time64("us")),
        "ts_s": with_nulls([base + dt.timedelta(seconds=int(v)) for v in ints], pa.timestamp("s")),
        "ts_ms": with_nulls([base + dt.timedelta(milliseconds=int(v)) for v in ints], pa.timestamp("ms")),
        "ts_ns_tz": pa.array(rng.integers(0, 2**62, N), pa.int64()).view(pa.timestamp("ns", tz="Europe/Paris")),
        "dur": with_nulls(ints.tolist(), pa.duration("ms")),
        "s": with_nulls([f"v{v % 37}é" for v in ints], pa.string()),
        "ls": with_nulls([f"w{v}" for v in ints], pa.large_string()),
        "bin": with_nulls([bytes([abs(int(v)) % 256, 0xFF]) for v in ints], pa.binary()),
        "lbin": with_nulls([bytes([abs(int(v)) % 7]) * 3 for v in ints], pa.large_binary()),
        "fsb": with_nulls([int(v % 50).to_bytes(2, "little", signed=True) for v in ints], pa.binary(2)),
        "nul": pa.nulls(N),
    }


def test_every_primitive_type(ray_runtime: None, tmp_path) -> None:
    table = pa.table(_columns())
    (tmp_path / "t").mkdir()
    pq.write_table(table, tmp_path / "t" / "part-0.parquet")
    read_back = pq.read_table(tmp_path / "t" / "part-0.parquet")  # what Parquet keeps (e.g. date64 -> date32)

    result = analyze(str(tmp_path / "t"), store=str(tmp_path / "store"), user_statistics=[])
    stats = open_statistics(str(tmp_path / "store"), result.table)

    for name in table.column_names:
        col = read_back[name]
        row = stats.column_statistics(name)
        assert row["row_count"] == N, name
        assert row["null_count"] == col.null_count, name
        assert row["unsupported"] is None, name
        if name == "nul":
            assert row["min"] is None and row["distinct_count"] is None
            continue
        valid = col.drop_null()
        if pa.types.is_float16(col.type):  # Arrow has no min/max or hashing kernels for half floats
            valid = valid.cast(pa.float32())
        if pa.types.is_floating(col.type):
            valid = valid.filter(pc.invert(pc.is_nan(valid)))
        ordered = sorted(valid.to_pylist())
        assert row["min"] == ordered[0], name
        assert row["max"] == ordered[-1], name
        assert row["distinct_count"] == len(set(ordered)), name
        if row["frequencies"] is not None:  # discrete: the table frequencies sum to the non-null count
            top = stats.top_frequencies(name, k=10**6, typed=True)
            kind = top.schema.metadata[b"kind"].decode()
            if kind == layout.FREQ_COMPLETE:
                assert sum(top["frequency"].to_pylist()) == len(valid), name
                vc = {v: ordered.count(v) for v in set(ordered)}
                assert dict(zip(top["value"].to_pylist(), top["frequency"].to_pylist())) == vc, name
        if row["histogram_bins"]:
            h = stats.histogram(name)
            assert sum(h["count"].to_pylist()) == len(valid), name
    # uint64 and int64 extremes survive exactly (beyond 2^53)
    assert stats.column_statistics("u64")["max"] == 2**64 - 1
    assert stats.column_statistics("i64")["min"] == -(2**63)
    assert stats.column_statistics("i64")["sum"] == sum(table["i64"].to_pylist())
