"""Every valid Parquet file is analyzed: values beyond Python's datetime, extension types,
and one logical string/binary type written in different layouts.

Files are written by pyarrow with those types and values and analyzed on Ray; the
statistics are checked against numpy over the values' storage integers or bytes
(the oracle), at partition and table level, and a re-analyze inherits them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.files import layout

pytestmark = pytest.mark.ray

TABLE = "t"
# year 10000-01-01 and -1000-01-01 (astronomical) as days since the epoch
DAY_10000 = 2_932_897
DAY_MINUS_1000 = -1_084_441


def _write(data: Path, key: str, name: str, table: pa.Table) -> None:
    (data / key).mkdir(parents=True, exist_ok=True)
    pq.write_table(table, data / key / name)


def _storage(arr: pa.Array) -> np.ndarray:
    """The oracle's view of temporal values: their storage integers (nulls dropped)."""
    arr = arr.drop_null()
    return arr.view(pa.int32() if arr.type.bit_width == 32 else pa.int64()).to_numpy()


def _oracle(arr: pa.Array, read_as: pa.DataType) -> np.ndarray:
    """Storage integers in the type the table reads (Parquet stores date64 as date32: days)."""
    x = _storage(arr)
    return x // 86_400_000 if pa.types.is_date64(arr.type) and pa.types.is_date32(read_as) else x


def _stats(s, column: str, partition: str | None = None) -> dict:  # noqa: ANN001
    return next(r for r in s.statistics(partition=partition).to_pylist() if r["column"] == column)


def _decoded(row: dict, key: str, t: pa.DataType) -> int:
    return _storage(value_forms.decode(pa.array([row[key]]), t))[0].item()


@pytest.fixture(scope="module")
def extreme(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, dict[str, pa.Array]]]:
    """Two partitions of dates and timestamps from year -1000 to 10000 and beyond."""
    root = tmp_path_factory.mktemp("extreme")
    data, store = root / "data" / TABLE, root / "store"
    rng = np.random.default_rng(7)
    written: dict[str, dict[str, pa.Array]] = {}
    for i, key in enumerate(["p=0", "p=1"]):
        n = 1500
        days = rng.integers(DAY_MINUS_1000 - 5000, DAY_10000 + 5000, n).astype(np.int32)
        days[:3] = [DAY_10000, DAY_MINUS_1000, 0]
        days[10:400] = days[10]  # a frequent value
        mask = rng.random(n) < 0.05
        us = rng.integers(-(2**62), 2**62, n)  # +-146,000 years
        cols = {
            "d": pa.array(days, pa.date32(), mask=mask),
            "ts": pa.array(us, pa.int64(), mask=mask).view(pa.timestamp("us")),
            "tsz": pa.array(us // 1000 * (i + 1), pa.int64()).view(pa.timestamp("ms", tz="UTC")),
            "d64": pa.array(days.astype(np.int64) * 86_400_000, pa.int64()).view(pa.date64()),
            "dur": pa.array(us, pa.int64()).view(pa.duration("s")),
        }
        written[key] = cols
        _write(data, key, "a.parquet", pa.table(cols))
    return data, store, written


def test_dates_and_timestamps_beyond_pythons_datetime(extreme) -> None:  # noqa: ANN001
    data, store, written = extreme
    first = analyze(str(data), store=str(store))
    s = open_statistics(str(store), TABLE)
    for name in ["d", "ts", "tsz", "d64", "dur"]:
        t = s.column_type(name)
        for key, cols in written.items():
            x = _oracle(cols[name], t)
            row = _stats(s, name, key)
            assert (row["row_count"], row["null_count"]) == (len(cols[name]), cols[name].null_count), (name, key)
            assert (_decoded(row, "min", t), _decoded(row, "max", t)) == (x.min(), x.max()), (name, key)
            assert row["distinct_count"] == len(np.unique(x)), (name, key)
            srt = np.sort(x)
            assert _decoded(row, "p50", t) == srt[int(np.floor(0.5 * (len(x) - 1)))], (name, key)
        x = np.concatenate([_oracle(c[name], t) for c in written.values()])
        row = _stats(s, name)
        assert (_decoded(row, "min", t), _decoded(row, "max", t)) == (x.min(), x.max()), name
    # date32 is discrete: exact table distinct count, percentiles and frequencies
    x = np.concatenate([_storage(c["d"]) for c in written.values()])
    row = _stats(s, "d")
    assert row["distinct_count"] == len(np.unique(x)) and row["distinct_count_exact"]
    assert _decoded(row, "p99", pa.date32()) == np.sort(x)[int(np.floor(0.99 * (len(x) - 1)))]
    top = s.top_frequencies("d", 1, typed=True)
    values, counts = np.unique(x, return_counts=True)
    assert _storage(top["value"].combine_chunks())[0] == values[counts.argmax()] and top["frequency"][0].as_py() == counts.max()
    # the lookups API: beyond Python's range a value stays an Arrow scalar, lossless
    got = s.column_statistics("d")
    assert isinstance(got["max"], pa.Scalar) and _storage(pa.array([got["max"]]))[0] == x.max()
    # the partial states keep them too: a re-analyze inherits every partition, same files
    again = analyze(str(data), store=str(store))
    assert (again.inherited, again.recomputed, again.warnings) == (2, 0, [])
    assert first.job_id != again.job_id
    s2 = open_statistics(str(store), TABLE)
    for key in written:
        assert s2.file_uri(layout.STATISTICS_FILE, key) == s.file_uri(layout.STATISTICS_FILE, key)
    same = ["column", "type", "row_count", "null_count", "min", "max", "distinct_count"]  # (KLL merges compact at random)
    assert s2.statistics().select(same).equals(s.statistics().select(same))


#: "any extension": an opaque type over int64 (a vendor's type pyarrow knows only by name)
CENTS = pa.opaque(pa.int64(), "cents", "test.vendor")


def test_extension_types_get_their_storage_types_statistics(ray_runtime: None, tmp_path: Path) -> None:
    data = tmp_path / "data" / TABLE
    rng = np.random.default_rng(3)
    written = {}
    for key in ["p=0", "p=1"]:
        n = 800
        ids = [uuid.UUID(int=int(v)).bytes for v in rng.integers(0, 2**63, n)]
        ids[5] = ids[6] = ids[7]  # repeats
        written[key] = {
            "u": pa.ExtensionArray.from_storage(pa.uuid(), pa.array(ids, pa.binary(16), mask=rng.random(n) < 0.1)),
            "c": pa.ExtensionArray.from_storage(CENTS, pa.array(rng.integers(-(10**6), 10**6, n), pa.int64())),
            "j": pa.ExtensionArray.from_storage(pa.json_(), pa.array([f'{{"k": {v}}}' for v in rng.integers(0, 50, n)])),
        }
        _write(data, key, "a.parquet", pa.table(written[key]))
    store = tmp_path / "store"
    analyze(str(data), store=str(store))
    s = open_statistics(str(store), TABLE)
    assert (s.column_type("u"), s.column_type("c"), s.column_type("j")) == (pa.uuid(), CENTS, pa.json_())
    for key in [*written, None]:
        parts = list(written.values()) if key is None else [written[key]]
        u = pa.concat_arrays([p["u"].storage for p in parts])
        c = pa.concat_arrays([p["c"].storage for p in parts]).to_numpy()
        j = pa.concat_arrays([p["j"].storage for p in parts])
        row = _stats(s, "u", key)
        assert row["type"] == "extension<arrow.uuid>"
        assert (row["row_count"], row["null_count"]) == (len(u), u.null_count)
        mm = pc.min_max(u)
        assert value_forms.decode_scalar(row["min"], pa.uuid()).value == mm["min"]
        assert value_forms.decode_scalar(row["max"], pa.uuid()).value == mm["max"]
        assert row["distinct_count"] == pc.count_distinct(u).as_py()
        assert row["max_len"] == 16
        row = _stats(s, "c", key)
        assert row["type"] == str(CENTS)
        assert (int(row["min"]), int(row["max"]), int(row["sum"])) == (c.min(), c.max(), int(c.sum()))
        assert row["distinct_count"] == len(np.unique(c)) and row["mean"] == pytest.approx(c.mean())
        row = _stats(s, "j", key)
        assert row["type"] == "extension<arrow.json>"
        assert (row["min"], row["max"]) == (pc.min(j).as_py(), pc.max(j).as_py())
        assert row["distinct_count"] == pc.count_distinct(j).as_py()
    got = s.column_statistics("u", partition="p=0")
    assert uuid.UUID(bytes=got["min"].bytes if isinstance(got["min"], uuid.UUID) else got["min"]) == min(
        uuid.UUID(bytes=b) for b in written["p=0"]["u"].storage.drop_null().to_pylist()
    )


def test_string_and_binary_layouts_of_different_writers_unify(ray_runtime: None, tmp_path: Path) -> None:
    data = tmp_path / "data" / TABLE
    rng = np.random.default_rng(5)
    words = np.array([f"w{i:03d}-é" for i in range(300)], dtype=object)
    layouts = [(pa.string(), pa.binary()), (pa.large_string(), pa.large_binary()), (pa.string_view(), pa.binary_view())]
    written = []
    for i, (st, bt) in enumerate(layouts):
        n = 700
        s = words[rng.integers(0, 300 if i else 40, n)]
        b = [w.encode()[::-1] if rng.random() > 0.1 else None for w in s]
        t = pa.table({"s": pa.array(s, st), "b": pa.array(b, bt)})
        written.append(t)
        _write(data, "p=0" if i < 2 else "p=1", f"f{i}.parquet", t)
    store = tmp_path / "store"
    analyze(str(data), store=str(store))
    s = open_statistics(str(store), TABLE)
    assert (s.column_type("s"), s.column_type("b")) == (pa.large_string(), pa.large_binary())
    for key, tables in (("p=0", written[:2]), ("p=1", written[2:]), (None, written)):
        for name, kind in (("s", pa.large_string()), ("b", pa.large_binary())):
            col = pa.chunked_array([t[name].cast(kind) for t in tables]).combine_chunks()
            row = _stats(s, name, key)
            mm = pc.min_max(col)
            assert row["type"] == str(kind)
            assert (row["row_count"], row["null_count"]) == (len(col), col.null_count)
            assert value_forms.decode_scalar(row["min"], kind) == mm["min"] and value_forms.decode_scalar(row["max"], kind) == mm["max"]
            assert row["distinct_count"] == pc.count_distinct(col).as_py()
            vc = pc.value_counts(col.drop_null())
            top = s.top_frequencies(name, 1, partition=key, typed=True)
            assert top["frequency"][0].as_py() == max(vc.field("counts").to_pylist()), (name, key)
