"""Real Hudi tables written by Spark (../shared/lake-tables/hudi, zipped, with the SQL that
wrote each), analyzed end to end on Ray.

The oracle is DuckDB over hudi-rs's own snapshot read (``HudiTable.read()``: the latest
file slice of each file group, merge-on-read slices merged with their log files): every
statistic of every column. The shared folder is found beside the repository root
(``../shared``, as CI mounts it; ``METASTORE_SHARED`` overrides); without it these tests
are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import hudi
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.api import analyze, open_statistics
from engine.exceptions import SnapshotNotFoundError
from engine.sources import TableFormat, detect_format, open_table, snapshots_since
from tests.engine.sources.lake_helpers import assert_analyze_refused, check_statistics

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]

REPO = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("METASTORE_SHARED") or REPO.parent / "shared")
HUDI = SHARED / "lake-tables" / "hudi"
ZIPS = sorted(HUDI.rglob("*.zip")) if HUDI.is_dir() else []
#: run by default (the others with -m slow): COW v6/v8/v9, partitioned both ways, overwritten,
#: updated and deleted; MOR with Parquet and Avro log files, a rollback; an empty table
DEFAULT = {
    "cow/v6_nonpartitioned",
    "cow/v6_simplekeygen_nonhivestyle_overwritetable",
    "cow/v8_complexkeygen_hivestyle",
    "cow/v9_txns_simple_overwrite",
    "cow/v9_txns_complex_meta",
    "cow/v9_timebasedkeygen_nonhivestyle",
    "cow/v8_empty",
    "parquet/v6_nonpartitioned_rollback",
    "parquet/v6_simplekeygen_nonhivestyle",
    "avro/v6_trips_8i3d",
    "avro/v8_trips_8i3u1d",
}

if not ZIPS:
    pytestmark = [
        pytest.mark.ray,
        pytest.mark.usefixtures("ray_runtime"),
        pytest.mark.skip(reason=f"the shared Hudi tables are not at {HUDI} (../shared beside the repository, or METASTORE_SHARED)"),
    ]


def _id(z: Path) -> str:
    return f"{z.parent.name}/{z.stem}"


def _unzip(z: Path, into: Path) -> Path:
    with zipfile.ZipFile(z) as f:
        f.extractall(into)
    shutil.rmtree(into / "__MACOSX", ignore_errors=True)
    return into / z.stem


def _hudi_rows(path: Path) -> pa.Table:
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    batches = table.read()
    schema = table.get_schema_with_meta_fields()
    return pa.Table.from_batches(batches) if batches else schema.empty_table()


@pytest.mark.parametrize(
    "zipped", [z if _id(z) in DEFAULT else pytest.param(z, marks=pytest.mark.slow) for z in ZIPS] or [None], ids=_id if ZIPS else None
)
def test_statistics_equal_duckdb_over_the_hudi_snapshot(zipped: Path, tmp_path: Path) -> None:
    path = _unzip(zipped, tmp_path)
    assert detect_format(str(path)) is TableFormat.HUDI
    data = _hudi_rows(path)
    source = open_table(str(path))
    assert sum(sum(b.num_rows for b in source.read_batches(p, [])) for p in source.partitions()) == data.num_rows
    if not source.partitions():  # an empty table: nothing to analyze
        assert data.num_rows == 0 and source.snapshot_id() == ""
        return
    store = str(tmp_path / "store")
    result = analyze(str(path), store=store, user_statistics=[])
    assert result.rows == data.num_rows and result.snapshot == source.snapshot_id()
    ts = open_statistics(store, path.name)
    # the columns hudi-rs reads (meta columns where populated); statistics name struct leaves a.b
    assert list(dict.fromkeys(n.split(".")[0] for n in ts.schema.names)) == data.column_names
    assert check_statistics(ts, data) > 0
    # partitions are Hudi's partition paths, with the rows of their latest slices
    assert {p.key for p in ts.partitions()} == {p.key for p in source.partitions()}
    # per partition, where the meta column says which partition a row is in
    paths = data["_hoodie_partition_path"] if "_hoodie_partition_path" in data.column_names else pa.nulls(1)
    if paths.null_count == 0 and set(paths.to_pylist()) == {p.key for p in ts.partitions()}:
        for p in ts.partitions():
            assert check_statistics(ts, data.filter(pc.equal(paths, p.key)), p.key) > 0
    assert snapshots_since(str(path), result.snapshot) == 0


def _find(name: str) -> Path:
    match = [z for z in ZIPS if _id(z) == name]
    if not match:
        pytest.skip(f"{name}.zip is not in {HUDI}")
    return match[0]


def test_an_older_instant_is_the_hudi_snapshot_as_of_it(tmp_path: Path) -> None:
    """The overwritten table at its first commit: the rows Spark wrote before the overwrite."""
    path = _unzip(_find("cow/v6_simplekeygen_nonhivestyle_overwritetable"), tmp_path)
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    first = sorted(i.timestamp for i in table.get_timeline().get_completed_commits())[0]
    before = pa.Table.from_batches(table.read(hudi.HudiReadOptions().with_as_of_timestamp(first)))
    latest = _hudi_rows(path)
    assert before.num_rows > latest.num_rows  # the overwrite replaced them
    store = str(tmp_path / "store")
    result = analyze(str(path), store=store, user_statistics=[], at_snapshot=first)
    assert result.snapshot == first and result.rows == before.num_rows
    assert check_statistics(open_statistics(store, path.name), before) > 0
    assert snapshots_since(str(path), first) == 2  # a commit and the replacecommit since
    with pytest.raises(SnapshotNotFoundError, match="20990101000000000"):
        open_table(str(path), at_snapshot="20990101000000000")
    with pytest.raises(SnapshotNotFoundError):
        open_table(str(path), as_of="2001-01-01")


def test_merge_on_read_deletes_are_not_counted(tmp_path: Path) -> None:
    """v6_trips_8i3d: 8 inserts, then 3 deletes in a log file; 5 rows are live."""
    path = _unzip(_find("avro/v6_trips_8i3d"), tmp_path)
    source = open_table(str(path))
    assert any(logs for slices in source._slices.values() for _, logs in slices)  # a log file is merged
    uuids = [u for p in source.partitions() for b in source.read_batches(p, ["uuid"]) for u in b.column(0).to_pylist()]
    assert len(uuids) == 5 == _hudi_rows(path).num_rows


def test_damaged_or_missing_hudi_metadata_is_one_clear_error(tmp_path: Path) -> None:
    from engine.exceptions import InvalidTableLayoutError, TableNotFoundError

    path = _unzip(_find("cow/v6_nonpartitioned"), tmp_path)
    (path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.type=NOT_A_TYPE\n")
    with pytest.raises(InvalidTableLayoutError, match="Hudi metadata unreadable"):
        open_table(str(path))
    assert_analyze_refused(path, tmp_path / "store")
    with pytest.raises(TableNotFoundError, match="no Hudi table here"):
        open_table(str(tmp_path / "nothing"), format="hudi")
