"""read_statistics(kind="frequencies") and register_views of a table whose frequencies are kept in
segments (docs/FORMAT.md, "Segments"): Spark reads the segments' files and merges them; the rows
must be those of one whole file of the same counts (tests/frequency_segments.py builds both)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.frequency_segments import build_segmented_table

pytestmark = [pytest.mark.spark, pytest.mark.ray]


def _rows(frame) -> list[tuple[str, str, int]]:  # noqa: ANN001 - a Spark DataFrame
    return sorted((r["column"], r["value"], r["frequency"]) for r in frame.select("column", "value", "frequency").collect())


def test_the_merged_frequencies_are_the_whole_files_rows(spark, tmp_path: Path) -> None:
    from engine.lookup import open_statistics
    from spark_bridge.api import read_statistics, register_views

    built = build_segmented_table(str(tmp_path / "store"))
    whole = read_statistics(spark, built.store, built.oracles[-1], kind="frequencies")
    expected = _rows(whole)
    assert len(expected) == sum(n for _, _, n, _ in open_statistics(built.store, built.oracles[-1]).frequency_index().values())
    merged = read_statistics(spark, built.store, built.table, kind="frequencies")
    assert merged.columns == ["column", "value", "frequency"]
    assert _rows(merged) == expected
    # the newest segment alone is not the merged view (the test could fail)
    newest = spark.read.parquet(open_statistics(built.store, built.table).file_uri("frequencies.parquet"))
    assert _rows(newest) != expected

    views = register_views(spark, built.store, built.table)
    assert views["metastore_frequencies"] == open_statistics(built.store, built.table).file_uri("frequencies.parquet")
    assert _rows(spark.sql("SELECT column, value, frequency FROM metastore_frequencies")) == expected
    assert spark.sql("SELECT count(*) AS n FROM metastore_statistics").collect()[0]["n"] == 4

    # one segment (the base state): the file as it is
    first = read_statistics(spark, built.store, built.oracles[0], kind="frequencies")
    base = spark.read.parquet(open_statistics(built.store, built.table, at_transaction=built.jobs[0].txn_id).file_uri("frequencies.parquet"))
    assert _rows(first) == _rows(base)
