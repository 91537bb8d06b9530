"""The CLI on a Hive-partitioned table polars wrote: polars keeps the partition columns inside
the files as well as in the folder names (issue #28). Analyzed, then shown, against DuckDB's
reading of the same table (``hive_partitioning=true``); a file whose in-file value disagrees
with its folder is one error line naming it, and nothing is published."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]


def run(*args: str):
    return CliRunner().invoke(metastore, list(args))


@pytest.fixture(scope="module")
def polars_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    n = 600
    frame = pl.DataFrame(
        {
            "part": [i % 3 if i % 50 else None for i in range(n)],
            "city": [["Rome", "São Paulo", "a/b c"][(i // 7) % 3] for i in range(n)],
            "day": [dt.date(2024, 5, 1 + i % 4) for i in range(n)],
            "x": [float(i) * 0.5 for i in range(n)],
            "s": [f"v{i % 37}" for i in range(n)],
        }
    )
    root = tmp_path_factory.mktemp("polars") / "events"
    frame.write_parquet(root, partition_by=["part", "city"])
    files = list(root.rglob("*.parquet"))
    assert files and all("part" in pq.read_schema(f).names for f in files)  # polars keeps them in the files
    return str(root)


def duckdb_column(root: str, name: str) -> dict:
    c = f'"{name}"'
    row = (
        duckdb.connect()
        .sql(
            f"SELECT count(*), count(*) - count({c}), count(DISTINCT {c}), min({c}), max({c}) "
            f"FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
        )
        .fetchall()[0]
    )
    return dict(zip(["rows", "nulls", "distinct", "min", "max"], row))


def text(value: object) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def test_a_polars_table_analyzes_like_duckdb_reads_it(polars_table: str, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    result = run("--store", store, "--output", "json", "analyze", polars_table, "--no-user-stats")
    assert result.exit_code == 0, result.output
    combinations = duckdb.connect().sql(
        f"SELECT count(DISTINCT (part, city)) FROM read_parquet('{polars_table}/**/*.parquet', hive_partitioning=true)"
    )
    assert json.loads(result.stdout)["partitions"] == combinations.fetchall()[0][0] == 12
    shown = json.loads(run("--store", store, "--output", "json", "show", "events").stdout)
    columns = {c["column"]: c for c in shown["columns"]}
    assert set(columns) == {"part", "city", "day", "x", "s"}
    assert columns["day"]["type"] == "date32[day]"  # the files' type, not a folder-name guess
    for name, ours in columns.items():
        ref = duckdb_column(polars_table, name)
        got = {"rows": ours["rows"], "nulls": ours["nulls"], "distinct": ours["distinct"], "min": text(ours["min"]), "max": text(ours["max"])}
        assert got == {**ref, "min": text(ref["min"]), "max": text(ref["max"])}, name


def test_a_file_disagreeing_with_its_folder_is_one_line_naming_it(polars_table: str, tmp_path: Path) -> None:
    root = tmp_path / "events"
    pl.read_parquet(f"{polars_table}/**/*.parquet", hive_partitioning=False).write_parquet(root, partition_by=["part", "city"])
    liar = root / "part=1" / "city=Rome" / "zz-moved.parquet"
    pq.write_table(
        pa.table(
            {"part": pa.array([1, 2], pa.int64()), "city": ["Rome", "Rome"], "day": [dt.date(2024, 5, 1)] * 2, "x": [0.0, 1.0], "s": ["a", "b"]}
        ),
        liar,
    )
    store = str(tmp_path / "store")
    result = run("--store", store, "analyze", str(root), "--no-user-stats")
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{liar}: partition column 'part' holds 2 (row 1), its folder says 1" in lines[0]
    shown = run("--store", store, "show", "events")
    assert shown.exit_code != 0  # nothing published
