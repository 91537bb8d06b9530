"""Format detection, the newest Iceberg metadata file, and the snapshot options (no Ray)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.exceptions import InvalidArgumentError, InvalidTableLayoutError, SnapshotNotFoundError
from engine.sources import TableFormat, detect_format, open_table
from engine.sources.formats import SnapshotSelector, newest_metadata_file, parse_as_of


def test_markers_decide_the_format(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert detect_format(str(tmp_path / "plain")) is TableFormat.PARQUET
    (tmp_path / "d" / "_delta_log").mkdir(parents=True)
    assert detect_format(str(tmp_path / "d")) is TableFormat.DELTA
    (tmp_path / "h" / ".hoodie").mkdir(parents=True)
    assert detect_format(str(tmp_path / "h")) is TableFormat.HUDI
    (tmp_path / "i" / "metadata").mkdir(parents=True)
    assert detect_format(str(tmp_path / "i")) is TableFormat.PARQUET  # a metadata folder without metadata files
    (tmp_path / "i" / "metadata" / "v1.metadata.json").write_text("{}")
    assert detect_format(str(tmp_path / "i")) is TableFormat.ICEBERG
    assert detect_format(str(tmp_path / "missing")) is TableFormat.PARQUET  # open_table then says it is missing


def test_delta_and_hudi_markers_together_are_refused(tmp_path: Path) -> None:
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / ".hoodie").mkdir()
    with pytest.raises(InvalidTableLayoutError, match=r"both a Delta and Hudi table \(_delta_log/, \.hoodie/\)"):
        detect_format(str(tmp_path))
    with pytest.raises(InvalidTableLayoutError):
        open_table(str(tmp_path))


def test_newest_metadata_file_by_version(tmp_path: Path) -> None:
    meta = tmp_path / "metadata"
    meta.mkdir()
    for name in ("00002-b.metadata.json", "00010-a.metadata.json", "00009-c.metadata.json", "snap-1.avro"):
        (meta / name).write_text("{}")
    assert newest_metadata_file(str(tmp_path)) == str(meta / "00010-a.metadata.json")
    (meta / "v11.metadata.json").write_text("{}")
    assert newest_metadata_file(str(tmp_path)) == str(meta / "v11.metadata.json")
    (meta / "version-hint.text").write_text("9\n")
    (meta / "v9.metadata.json").write_text("{}")
    assert newest_metadata_file(str(tmp_path)) == str(meta / "v9.metadata.json")  # the hint wins


def test_as_of_forms() -> None:
    ms = int(datetime(2024, 5, 1, tzinfo=UTC).timestamp() * 1000)
    assert parse_as_of("2024-05-01") == ms
    assert parse_as_of("2024-05-01T00:00:00Z") == ms
    assert parse_as_of("2024-05-01T02:00:00+02:00") == ms
    assert parse_as_of(datetime(2024, 5, 1)) == ms  # naive: UTC
    assert parse_as_of(str(ms)) == ms and parse_as_of(ms) == ms
    assert parse_as_of(None) is None
    for bad in ("yesterday", "2024-13-01", ""):
        with pytest.raises(InvalidArgumentError, match="as_of"):
            parse_as_of(bad)


def test_options_are_checked() -> None:
    assert TableFormat.parse("Delta") is TableFormat.DELTA
    with pytest.raises(InvalidArgumentError, match="parquet, iceberg, delta, hudi"):
        TableFormat.parse("orc")
    with pytest.raises(InvalidArgumentError, match="exclusive"):
        SnapshotSelector("1", 5)
    assert SnapshotSelector().latest and not SnapshotSelector("3").latest


def test_a_parquet_directory_has_no_snapshots(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no snapshots"):
        open_table(str(tmp_path), at_snapshot=1)
    with pytest.raises(InvalidArgumentError, match="cannot be read from one"):
        open_table("db.t", catalog="x", format="delta")


def test_delta_as_of_picks_the_newest_version_at_or_before_the_time(tmp_path: Path) -> None:
    """--as-of on a Delta table with newer versions (was refused: delta-rs labels the history of a
    table loaded at an older version with the newest commits' times). Oracle: the dates written."""
    from tests.docs.lakes import write_dated_delta

    first = datetime(2024, 4, 18, 12, tzinfo=UTC)
    write_dated_delta(str(tmp_path / "d"), 5, first, timedelta(days=1))  # versions 0..4: 04-18 .. 04-22, 12:00
    for as_of, version in (("2024-04-20T12:00:00Z", 2), ("2024-04-21T00:00:00Z", 2), ("2024-04-22T11:59:59Z", 3), ("2025-01-01", 4)):
        assert open_table(str(tmp_path / "d"), as_of=as_of).snapshot_id() == str(version), as_of
    with pytest.raises(SnapshotNotFoundError, match="no Delta version at or before"):
        open_table(str(tmp_path / "d"), as_of="2024-04-18T00:00:00Z")
