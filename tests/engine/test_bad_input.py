"""Bad and awkward input: errors that name the file and publish nothing, and edge cases that must just work."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.exceptions import InvalidFileError, MetastoreError, StatisticsNotFoundError
from engine.files import layout
from engine.store import Store
from tests.damaged_files import DAMAGES, write_damaged

pytestmark = pytest.mark.ray


# ---------------------------------------------------------------- helpers
def write(root: Path, files: dict[str, pa.Table], **kwargs) -> str:
    for rel, table in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path, **kwargs)
    return str(root)


def run(root: str, store: Path, **kwargs):
    result = analyze(root, store=str(store), user_statistics=[], **kwargs)
    return result, open_statistics(str(store), result.table)


def stats(ts, partition: str | None = None) -> dict[str, dict]:
    return {r["column"]: r for r in ts.statistics(partition=partition).to_pylist()}


def assert_nothing_published(store: Path, table: str, settle: float = 0.0) -> None:
    """No CURRENT and no run directory; ``settle``: seconds to watch for late writes of other tasks."""
    with pytest.raises(StatisticsNotFoundError):
        Store(str(store)).current(table)
    runs = store / table / "runs"
    deadline = time.monotonic() + settle
    while True:
        assert not runs.exists() or not any(runs.iterdir()), sorted(str(p.relative_to(store)) for p in runs.rglob("*"))
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)


def good_table(n: int = 2_000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "x": pa.array(rng.integers(0, 100, n), pa.int64()),
            "y": pa.array(rng.random(n), pa.float64()),
            "s": pa.array([f"v{i % 37}" for i in range(n)], pa.string()),
        }
    )


# ---------------------------------------------------------------- files that are not (valid) Parquet
@pytest.mark.parametrize("damage", DAMAGES)
def test_corrupt_or_foreign_file_fails_and_publishes_nothing(ray_runtime, tmp_path, damage):
    root = tmp_path / "t"
    write(root, {f"p={i}/data.parquet": good_table(seed=i) for i in range(3)})
    write_damaged(root / "p=1" / "bad.parquet", (root / "p=1" / "data.parquet").read_bytes(), damage)
    store = tmp_path / "store"
    with pytest.raises(MetastoreError) as info:
        analyze(str(root), store=str(store), user_statistics=[])
    assert "bad.parquet" in str(info.value)
    assert isinstance(info.value, InvalidFileError)
    assert_nothing_published(store, "t")


def corrupt_pages(path: Path) -> None:
    """Overwrite the middle of the first column chunk's pages; the footer stays valid."""
    md = pq.read_metadata(path)
    col = md.row_group(0).column(0)
    start = col.dictionary_page_offset or col.data_page_offset
    data = bytearray(path.read_bytes())
    for i in range(start + 4, start + col.total_compressed_size - 4):
        data[i] = 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture()
def failed_in_a_task(ray_runtime, tmp_path):
    """A table whose first partition has corrupt data pages (valid footer): the failure
    happens in a Ray task while the tasks of the other (large) partitions still run."""
    root = tmp_path / "t"
    files = {"p=0/bad.parquet": good_table(5_000)}
    files.update({f"p={i}/data.parquet": good_table(200_000, seed=i) for i in range(1, 6)})
    write(root, files, compression="snappy")
    corrupt_pages(root / "p=0" / "bad.parquet")
    store = tmp_path / "store"
    with pytest.raises(MetastoreError) as info:
        analyze(str(root), store=str(store), user_statistics=[])
    return store, info.value


def test_corrupt_data_pages_fail_in_a_task_and_publish_nothing(failed_in_a_task):
    store, error = failed_in_a_task
    assert "bad.parquet" in str(error)
    with pytest.raises(StatisticsNotFoundError):
        Store(str(store)).current("t")


def test_failed_task_leaves_no_run_directory(failed_in_a_task):
    store, _ = failed_in_a_task
    assert_nothing_published(store, "t", settle=3.0)


# ---------------------------------------------------------------- empty things
def test_empty_partition_folder(ray_runtime, tmp_path):
    root = tmp_path / "t"
    write(root, {"p=0/a.parquet": good_table(100), "p=2/a.parquet": good_table(50, seed=2)})
    (root / "p=1").mkdir()
    result, ts = run(str(root), tmp_path / "store")
    assert [(p.key, p.rows) for p in ts.partitions()] == [("p=0", 100), ("p=1", 0), ("p=2", 50)]
    empty = stats(ts, "p=1")
    assert empty["x"]["row_count"] == 0 and empty["x"]["min"] is None and empty["x"]["distinct_count"] == 0
    assert stats(ts)["x"]["row_count"] == 150
    assert ts.histogram("x", "p=1")["count"].to_pylist() == [0] * ts.histogram_spec("x").bins
    assert ts.top_frequencies("s", 5, partition="p=1").num_rows == 0


def test_files_with_zero_rows(ray_runtime, tmp_path):
    empty = good_table(0)
    root = write(tmp_path / "t", {"p=0/a.parquet": empty, "p=1/a.parquet": empty, "p=1/b.parquet": empty})
    result, ts = run(root, tmp_path / "store")
    assert result.rows == 0 and result.partitions == 2
    rows = stats(ts)
    for name in ("x", "y", "s"):
        r = rows[name]
        assert (r["row_count"], r["null_count"]) == (0, 0)
        assert r["min"] is None and r["max"] is None and r["mean"] is None
        assert r["distinct_count"] == 0
    assert ts.histogram_spec("x") is None and ts.histogram("x").num_rows == 0
    assert ts.top_frequencies("s", 10).num_rows == 0


def test_all_null_columns(ray_runtime, tmp_path):
    n = 500
    t = pa.table(
        {
            "null_typed": pa.nulls(n),
            "int_nulls": pa.array([None] * n, pa.int64()),
            "str_nulls": pa.array([None] * n, pa.string()),
            "float_nulls": pa.array([None] * n, pa.float64()),
            "x": pa.array(range(n)),
        }
    )
    root = write(tmp_path / "t", {"p=0/a.parquet": t, "p=1/a.parquet": t})
    result, ts = run(root, tmp_path / "store")
    rows = stats(ts)
    assert rows["null_typed"]["type"] == "null"
    for name in ("null_typed", "int_nulls", "str_nulls", "float_nulls"):
        r = rows[name]
        assert (r["row_count"], r["null_count"]) == (2 * n, 2 * n), name
        assert r["min"] is None and r["max"] is None and r["mean"] is None and r["p50"] is None, name
    assert rows["int_nulls"]["distinct_count"] == 0 and rows["int_nulls"]["frequencies"] == layout.FREQ_COMPLETE
    assert rows["float_nulls"]["nan_count"] == 0
    assert ts.histogram_spec("int_nulls") is None and ts.histogram_spec("float_nulls") is None
    assert ts.top_frequencies("str_nulls", 3).num_rows == 0
    assert rows["x"]["max"] == str(n - 1)


def test_nan_and_infinities(ray_runtime, tmp_path):
    a = pa.table({"f": pa.array([1.0, np.nan, np.inf, None, 2.0])})
    b = pa.table({"f": pa.array([-np.inf, np.nan, 3.0])})
    c = pa.table({"f": pa.array([np.nan, np.nan], pa.float64())})
    root = write(tmp_path / "t", {"p=0/a.parquet": a, "p=1/a.parquet": b, "p=2/a.parquet": c})
    result, ts = run(root, tmp_path / "store")
    r = stats(ts)["f"]
    assert (r["row_count"], r["null_count"], r["nan_count"]) == (10, 1, 4)
    assert (r["min"], r["max"]) == ("-inf", "inf")
    assert r["sum"] == "nan" and np.isnan(r["mean"])  # inf + -inf
    assert r["distinct_count"] == 5
    only_nan = stats(ts, "p=2")["f"]
    assert only_nan["nan_count"] == 2 and only_nan["min"] is None and only_nan["max"] is None
    inf_part = stats(ts, "p=0")["f"]
    assert inf_part["mean"] == np.inf and inf_part["sum"] == "inf"
    spec = ts.histogram_spec("f")
    assert (spec.lower, spec.upper) == (1.0, 3.0)  # the finite range
    counts = ts.histogram("f")["count"].to_pylist()
    assert sum(counts) == 5 and counts[0] == 2 and counts[-1] == 2  # -inf first, +inf last


# ---------------------------------------------------------------- awkward values and names
def test_very_long_strings(ray_runtime, tmp_path):
    big = "é" * 500_000 + "x" * 24_288  # 1 MB of UTF-8, 524,288 characters
    t = pa.table({"s": pa.array([big, big, "short", None, big + "!"])})
    root = write(tmp_path / "t", {"p=0/a.parquet": t})
    result, ts = run(root, tmp_path / "store")
    r = stats(ts)["s"]
    assert r["max_len"] == len(big) + 1 and r["max"] == big + "!" and r["min"] == "short"
    assert r["avg_len"] == pytest.approx((3 * len(big) + 1 + 5) / 4)
    top = ts.top_frequencies("s", 1, typed=True)
    assert top["value"].to_pylist() == [big] and top["frequency"].to_pylist() == [2]


def test_invalid_utf8_in_binary(ray_runtime, tmp_path):
    values = [b"\xff\xfe\xfd", b"\xc3\x28", b"", b"\x00\x00", b"\xff\xfe\xfd", None]
    root = write(tmp_path / "t", {"p=0/a.parquet": pa.table({"b": pa.array(values, pa.binary())})})
    result, ts = run(root, tmp_path / "store")
    r = ts.column_statistics("b")
    assert r["min"] == b"" and r["max"] == b"\xff\xfe\xfd"
    assert r["max_len"] == 3 and r["distinct_count"] == 4
    top = ts.top_frequencies("b", 10, typed=True)
    assert top["value"].to_pylist() == [b"\xff\xfe\xfd", b"", b"\x00\x00", b"\xc3\x28"]
    assert ts.top_frequencies("b", 1)["value"].to_pylist() == ["fffefd"]  # text form: hex


def test_column_names_with_dots_spaces_and_non_ascii(ray_runtime, tmp_path):
    names = ["a.b", "with space", "ünïcödé", "日本語", "x"]
    t = pa.table({n: pa.array([i, i + 1, None, i], pa.int64()) for i, n in enumerate(names)})
    root = write(tmp_path / "t", {"p=0/a.parquet": t})
    result, ts = run(root, tmp_path / "store")
    # stored names are column paths' text forms (engine/columns.py): the dot of a top-level name is escaped
    assert ts.statistics()["column"].to_pylist() == ["a\\.b", *names[1:], "p"]
    for i, n in enumerate(names):
        r = ts.column_statistics(n)
        assert (r["min"], r["max"], r["null_count"]) == (i, i + 1, 1), n
    got = ts.statistics(["日本語", "a.b"])
    assert got["column"].to_pylist() == ["日本語", "a\\.b"] and got["min"].to_pylist() == ["3", "0"]
    assert ts.top_frequencies("with space", 1)["frequency"].to_pylist() == [2]
    assert ts.histogram("ünïcödé")["count"].to_pylist() == [2, 1]


def test_wide_table_and_a_ten_column_lookup(ray_runtime, tmp_path):
    from engine.sample import generate_wide_table

    root = tmp_path / "wide"
    # 300 columns: the statistics files hold STATISTICS_ROW_GROUP (64) columns a row group, so
    # the lookup reaches across five row groups (the last one partial) and their edges;
    # the 1,000-column table of tests/flight_server is analyzed and looked up there too
    assert layout.STATISTICS_ROW_GROUP == 64
    schema = generate_wide_table(str(root), columns=300, rows=60, partitions=2)
    result, ts = run(str(root), tmp_path / "store")
    assert result.columns == 301
    wanted = [f"c{i:04d}" for i in (299, 0, 64, 63, 128, 250, 1, 177, 298, 65)]
    got = ts.statistics(wanted)
    assert got["column"].to_pylist() == wanted
    data = pq.read_table(root, columns=wanted)  # the partition folders are read as a dataset
    for name, row in zip(wanted, got.to_pylist()):
        col = data[name]
        assert row["row_count"] == 60 and row["null_count"] == col.null_count
        t = schema.field(name).type
        assert value_forms.decode_scalar(row["min"], t) == pc.min(col)
        assert value_forms.decode_scalar(row["max"], t) == pc.max(col)
    part = ts.statistics(wanted[:3], partition="part=01", statistics=["row_count"])
    assert part.to_pylist() == [{"column": n, "row_count": 30} for n in wanted[:3]]


# ---------------------------------------------------------------- schema drift
def test_schema_drift_widening_and_new_column(ray_runtime, tmp_path):
    old = pa.table({"n": pa.array([1, 2, 2**31 - 1], pa.int32()), "s": pa.array(["a", "b", "c"])})
    new = pa.table(
        {
            "n": pa.array([2**40, -5, None], pa.int64()),
            "s": pa.array(["c", None, "d"]),
            "added": pa.array([1.5, None, 2.5]),
        }
    )
    root = write(tmp_path / "t", {"p=0/old.parquet": old, "p=1/old.parquet": old, "p=1/new.parquet": new})
    result, ts = run(root, tmp_path / "store")
    assert ts.column_type("n") == pa.int64() and ts.column_type("added") == pa.float64()
    n = ts.column_statistics("n")
    assert (n["min"], n["max"], n["null_count"], n["row_count"]) == (-5, 2**40, 1, 9)
    assert int(n["sum"]) == 2 * (1 + 2 + 2**31 - 1) + 2**40 - 5
    added = ts.column_statistics("added")
    assert (added["row_count"], added["null_count"], added["min"], added["max"]) == (9, 7, 1.5, 2.5)
    assert ts.column_statistics("added", partition="p=0")["null_count"] == 3
    assert ts.top_frequencies("s", 1).to_pylist() == [{"value": "c", "frequency": 3}]


# ---------------------------------------------------------------- nested columns
def test_nested_columns(ray_runtime, tmp_path):
    t = pa.table(
        {
            "s": pa.array(
                [{"a": 1, "b": {"c": "x"}}, None, {"a": None, "b": {"c": "y"}}, {"a": 4, "b": None}],
                pa.struct([("a", pa.int64()), ("b", pa.struct([("c", pa.string())]))]),
            ),
            "l": pa.array([[1, 2], None, [], [3]], pa.list_(pa.int64())),
            "m": pa.array([[("k", 1)], None, [], [("j", 2), ("k", 3)]], pa.map_(pa.string(), pa.int64())),
            "x": pa.array([1, 2, 3, 4]),
        }
    )
    root = write(tmp_path / "t", {"p=0/a.parquet": t, "p=1/a.parquet": t})
    result, ts = run(root, tmp_path / "store")
    rows = stats(ts)
    assert list(rows) == ["s.a", "s.b.c", "l", "m", "x", "p"]
    a = ts.column_statistics("s.a")
    # a null struct makes its leaves null
    assert (a["row_count"], a["null_count"], a["min"], a["max"], int(a["sum"])) == (8, 4, 1, 4, 10)
    c = ts.column_statistics("s.b.c")
    assert (c["null_count"], c["min"], c["max"], c["distinct_count"]) == (4, "x", "y", 2)
    for name, word in (("l", "list"), ("m", "map")):
        r = rows[name]
        assert r["unsupported"] and word in r["unsupported"], name
        assert (r["row_count"], r["null_count"]) == (8, 2), name
        assert r["min"] is None and r["distinct_count"] is None and r["frequencies"] is None, name
    assert rows["x"]["unsupported"] is None
    assert ts.top_frequencies("s.b.c", 5).to_pylist() == [{"value": "x", "frequency": 2}, {"value": "y", "frequency": 2}]
    assert ts.histogram("s.a")["count"].to_pylist() == [2, 0, 0, 2]


# ---------------------------------------------------------------- re-analyze
def test_second_analyze_publishes_a_new_job_and_lookups_follow(ray_runtime, tmp_path):
    root = tmp_path / "t"
    write(root, {"p=0/a.parquet": pa.table({"x": pa.array([1, 2, 3])})})
    store = tmp_path / "store"
    first, ts1 = run(str(root), store)
    assert ts1.column_statistics("x")["max"] == 3
    write(root, {"p=1/a.parquet": pa.table({"x": pa.array([10, 10])})})
    second, ts2 = run(str(root), store)
    assert second.job_id != first.job_id and second.snapshot != first.snapshot
    assert Store(str(store)).current("t")["job_id"] == second.job_id
    assert ts2.job_id == second.job_id
    assert ts2.column_statistics("x")["max"] == 10 and ts2.column_statistics("x")["row_count"] == 5
    assert ts2.top_frequencies("x", 1).to_pylist() == [{"value": "10", "frequency": 2}]
    # a handle opened before stays on its job until refreshed
    assert ts1.job_id == first.job_id and ts1.column_statistics("x")["max"] == 3
    ts1.refresh()
    assert ts1.job_id == second.job_id and ts1.column_statistics("x")["max"] == 10
    assert [p.key for p in ts1.partitions()] == ["p=0", "p=1"]
    assert open_statistics(str(store), "t").statistics(["x"])["max"].to_pylist() == ["10"]


@pytest.mark.parametrize("retries", [-1, True, 1.5, "3"])
def test_task_retries_must_be_a_whole_number(retries: object) -> None:
    from engine.exceptions import InvalidArgumentError
    from engine.options import AnalyzeOptions

    with pytest.raises(InvalidArgumentError, match="task_retries must be a whole number >= 0"):
        AnalyzeOptions(task_retries=retries)  # type: ignore[arg-type]
    assert AnalyzeOptions(task_retries=0).task_retries == 0 and AnalyzeOptions().task_retries == 3
