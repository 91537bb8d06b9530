"""Delta Lake tables written with deltalake (delta-rs), analyzed end to end on Ray.

The oracle is DuckDB over what delta-rs itself returns for the same version
(``DeltaTable(uri, version).to_pyarrow_table()``): every statistic of every column,
at table level and per partition, for the latest and an older version.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api import analyze, open_statistics
from engine.exceptions import (
    InvalidTableLayoutError,
    UnsupportedTableFeatureError,
)
from engine.sources import TableFormat, detect_format, open_table, snapshots_since
from engine.sources.delta import DeltaSource
from tests.engine.sources.lake_helpers import (
    analyze_source,
    assert_analyze_refused,
    assert_bad_input_refused,
    assert_same_files,
    assert_same_statistics,
    batch,
    check_table,
    counting,
    reads,
)

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]


def _rows_of(uri: str, version: int | None = None) -> pa.Table:
    return DeltaTable(uri, version=version).to_pyarrow_table()


def _partitions(data: pa.Table) -> dict[str, pa.Table]:
    return {f"part={p}": data.filter(pc.equal(data["part"], p)) for p in pc.unique(data["part"]).to_pylist()}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Versions: 0 create, 1 append, 2 overwrite of part=1, 3 delete, 4 append with an added column."""
    uri = str(tmp_path_factory.mktemp("delta") / "orders")
    write_deltalake(uri, batch(3_000, seed=1), partition_by=["part"])
    write_deltalake(uri, batch(2_000, seed=2, start=3_000), partition_by=["part"], mode="append")
    part1 = batch(800, seed=3, start=10_000, parts=1).set_column(1, "part", pa.array([1] * 800, pa.int64()))
    write_deltalake(uri, part1, partition_by=["part"], mode="overwrite", predicate="part = 1")
    DeltaTable(uri).delete("id % 7 = 0")
    extra = batch(1_000, seed=4, start=20_000).append_column("note", pa.array([f"n{i % 13}" for i in range(1_000)], pa.string()))
    write_deltalake(uri, extra, partition_by=["part"], mode="append", schema_mode="merge")
    return uri


def test_latest_version_statistics_equal_duckdb_over_delta_rs(history: str, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert detect_format(history) is TableFormat.DELTA
    result = analyze(history, store=store, user_statistics=[])
    data = _rows_of(history)
    assert result.snapshot == "4" and result.rows == data.num_rows
    check_table(store, "orders", data, _partitions(data))
    ts = open_statistics(store, "orders")
    assert "note" in ts.schema.names  # the added column, null in older files


def test_older_version_statistics_equal_duckdb_over_that_version(history: str, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    result = analyze(history, store=store, user_statistics=[], at_snapshot=1)
    data = _rows_of(history, 1)
    assert result.snapshot == "1" and result.rows == 5_000 == data.num_rows
    check_table(store, "orders", data, _partitions(data))
    assert snapshots_since(history, "1") == 3 and snapshots_since(history, "4") == 0
    assert open_statistics(store, "orders").stale_by() == 3  # the API's view of the same


def test_removed_rows_are_never_counted(history: str) -> None:
    """Overwrite and delete: the files they removed are not read (their rows would be)."""
    source = open_table(history)
    rows = sum(sum(b.num_rows for b in source.read_batches(p, ["id"])) for p in source.partitions())
    data = _rows_of(history)
    assert rows == data.num_rows
    ids = pa.concat_arrays([b.column(0) for p in source.partitions() for b in source.read_batches(p, ["id"])])
    assert sorted(ids.to_pylist()) == sorted(data["id"].to_pylist())
    assert not any(i % 7 == 0 and i < 20_000 for i in ids.to_pylist())  # deleted (version 4 appended after the delete)
    assert not any(3_000 <= i < 10_000 and i % 4 == 1 for i in ids.to_pylist())  # part=1 of versions 0-1, overwritten


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "overwrite", "delete"]), st.integers(0, 3), st.integers(1, 200)), min_size=1, max_size=5))
def test_property_overwrite_and_delete_leave_no_removed_rows(tmp_path_factory: pytest.TempPathFactory, ops) -> None:
    uri = str(tmp_path_factory.mktemp("dprop") / "t")
    write_deltalake(uri, batch(400, seed=0), partition_by=["part"])
    start = 1_000
    for op, part, n in ops:
        if op == "append":
            write_deltalake(uri, batch(n, seed=start, start=start), partition_by=["part"], mode="append")
        elif op == "overwrite":
            data = batch(n, seed=start, start=start, parts=1).set_column(1, "part", pa.array([part] * n, pa.int64()))
            write_deltalake(uri, data, partition_by=["part"], mode="overwrite", predicate=f"part = {part}")
        else:
            DeltaTable(uri).delete(f"id % {n + 1} = 0")
        start += 1_000
    source = open_table(uri)
    live = _rows_of(uri)
    got = {p.key: sum(b.num_rows for b in source.read_batches(p, [])) for p in source.partitions()}
    want = {k: v.num_rows for k, v in _partitions(live).items()}
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}
    ids = [i for p in source.partitions() for b in source.read_batches(p, ["id"]) for i in b.column(0).to_pylist()]
    assert sorted(ids) == sorted(live["id"].to_pylist())


def test_reanalyze_after_an_append_reads_only_the_changed_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "wide")
    write_deltalake(uri, batch(16_000, seed=5, parts=16), partition_by=["part"])
    store = str(tmp_path / "store")
    first_log = tmp_path / "reads-1"
    first = analyze_source(counting(DeltaSource(uri), first_log), store)
    assert first.partitions == 16 and reads(first_log) == {f"part={i}" for i in range(16)}
    # rows inside the table's ranges: no histogram edge moves, so no inherited partition is re-binned
    # (re-binning reads the histogrammed columns of the partitions it touches)
    original = _rows_of(uri)
    added = original.filter(pc.equal(original["part"], 5)).slice(0, 300)
    write_deltalake(uri, added, partition_by=["part"], mode="append")
    log = tmp_path / "reads-2"
    second = analyze_source(counting(DeltaSource(uri), log), store)
    assert reads(log) == {"part=5"}
    assert (second.inherited, second.recomputed, second.rebinned) == (15, 1, 0)
    # equal to a full analyze of the same version
    full = str(tmp_path / "full")
    analyze_source(DeltaSource(uri), full, inherit=False)
    assert_same_statistics(store, full, "wide")
    # every file, table level and per partition (but KLL's)
    assert_same_files(store, full, "wide")
    check_table(store, "wide", _rows_of(uri))


def test_bad_input_is_one_clear_error(history: str, tmp_path: Path) -> None:
    assert_bad_input_refused(history, "delta", 99, "version 99", tmp_path)
    # a damaged log: the newest commit is not JSON
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(history, broken)
    log = sorted((broken / "_delta_log").glob("*.json"))[-1]
    log.write_text("{not json")
    with pytest.raises(InvalidTableLayoutError, match="Delta log unreadable"):
        open_table(str(broken))
    # both Delta and Hudi markers
    (broken / ".hoodie").mkdir()
    with pytest.raises(InvalidTableLayoutError, match="both a Delta and Hudi table"):
        open_table(str(broken))
    # nothing published by a failed analyze
    assert_analyze_refused(broken, tmp_path / "store")


def test_column_mapping_is_refused_naming_the_feature(tmp_path: Path) -> None:
    uri = str(tmp_path / "mapped")
    write_deltalake(uri, batch(100, seed=1), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(UnsupportedTableFeatureError, match="columnMapping"):
        open_table(uri)


def test_deletion_vectors_enabled_but_unused_is_read(tmp_path: Path) -> None:
    """The deletionVectors reader feature with no vector written (delta-rs's delete rewrites
    files instead of writing vectors): read as any table (vectors: test_delta_dv.py)."""
    uri = str(tmp_path / "dv")
    write_deltalake(uri, batch(300, seed=1), partition_by=["part"], configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(uri).delete("id < 50")
    assert "deletionVectors" in DeltaTable(uri).protocol().reader_features
    source = open_table(uri)
    assert sum(b.num_rows for p in source.partitions() for b in source.read_batches(p, ["id"])) == 250
