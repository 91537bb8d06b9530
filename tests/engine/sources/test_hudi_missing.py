"""A Hudi table whose newest files are missing (issue #33): hudi-rs builds file slices from the
files present, so without a check the previous slice's rows were published under the newest
instant's name (3 rows served where the table has 4). The commits' own metadata says which
files each wrote: a missing one is one line naming it, through open_table and the CLI, and
nothing is published; an older instant, whose files are all there, still reads. Real tables
written by Spark (../shared/lake-tables/hudi, as tests/engine/sources/test_hudi.py)."""

from __future__ import annotations

import json
from pathlib import Path

import hudi
import pyarrow as pa
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore
from engine.exceptions import InvalidTableLayoutError
from engine.sources import open_table
from tests.engine.sources.test_hudi import _find, _unzip

pytestmark = pytest.mark.usefixtures("ray_runtime")


def _rows(path: Path, instant: str | None = None) -> int:
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    options = hudi.HudiReadOptions() if instant is None else hudi.HudiReadOptions().with_as_of_timestamp(instant)
    return sum(b.num_rows for b in table.read(options))


def _served(path: Path, instant: str | None = None) -> int:
    source = open_table(str(path), at_snapshot=instant)
    return sum(b.num_rows for p in source.partitions() for b in source.read_batches(p, []))


@pytest.mark.ray
def test_a_missing_newest_base_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = _unzip(_find("cow/v6_nonpartitioned"), tmp_path)
    first, newest = sorted(i.timestamp for i in hudi.HudiTableBuilder.from_base_uri(str(path)).build().get_timeline().get_completed_commits())
    assert _served(path) == _rows(path) == 4  # intact: every row of the newest instant
    (base,) = path.glob(f"*_{newest}.parquet")
    base.unlink()
    assert _rows(path) == 3  # hudi-rs alone: the previous slice, under the newest instant
    with pytest.raises(
        InvalidTableLayoutError, match=rf"^{path}/{base.name}: written by Hudi commit {newest} \(at or before instant {newest}\) but missing"
    ):
        open_table(str(path))
    assert _served(path, first) == _rows(path, first) == 3  # the first instant's files are all there

    store = tmp_path / "store"
    result = CliRunner().invoke(metastore, ["--store", str(store), "analyze", str(path)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{base.name}: written by Hudi commit {newest}" in lines[0], result.stderr
    assert not (store / path.name).exists()  # nothing published


def test_a_missing_log_file_of_the_latest_slice_is_named(tmp_path: Path) -> None:
    """Merge-on-read: a delta commit's log file after the slice's base file (its deletes). A
    v6 table's slices come from the files listed, so without the check its 3 deletes were lost
    (8 rows served, 5 live); a v8 table's slices name the file, and reading it fails."""
    path = _unzip(_find("avro/v6_trips_8i3d"), tmp_path / "v6")
    assert _served(path) == 5
    (log,) = path.glob("*/.*.log.*")
    log.unlink()
    assert _rows(path) == 8  # hudi-rs alone: the deletes are gone
    with pytest.raises(
        InvalidTableLayoutError, match=rf"^{path}/{log.parent.name}/{log.name}: written by Hudi commit \d+ .* but missing from the table$"
    ):
        open_table(str(path))

    path = _unzip(_find("avro/v8_trips_8i3u1d"), tmp_path / "v8")
    source = open_table(str(path))
    (key, log_path), *_ = [(key, log) for key, slices in source._slices.items() for _, files in slices for log in files]
    (path / log_path).unlink()
    source = open_table(str(path))
    (part,) = [p for p in source.partitions() if p.key == key]
    with pytest.raises(InvalidTableLayoutError, match=rf"Hudi file slice unreadable: .*{log_path.rsplit('/', 1)[-1]} not found"):
        list(source.read_batches(part, ["uuid"]))


def test_a_replaced_file_group_is_not_expected(tmp_path: Path) -> None:
    """insert_overwrite_table replaced every earlier file group: their files may go (a cleaner
    removes them) without the table missing anything."""
    path = _unzip(_find("cow/v6_simplekeygen_nonhivestyle_overwritetable"), tmp_path)
    table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    timeline = table.get_timeline()
    (replace,) = timeline.get_completed_replacecommits()
    replaced = json.loads(timeline.get_instant_metadata_in_json(replace))["partitionToReplaceFileIds"]
    gone = [f for partition, ids in replaced.items() for i in ids for f in (path / partition).glob(f"{i}_*.parquet")]
    assert gone
    for f in gone:
        f.unlink()
    assert _served(path) == _rows(path) == pa.Table.from_batches(table.read()).num_rows
