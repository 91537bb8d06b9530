"""The metastore CLI: help, error paths, rendering helpers, and one end-to-end run on Ray."""

from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.cli.console import metastore
from engine.cli.output import bar, dumps, regroup, to_jsonable

REPO = Path(__file__).resolve().parents[3]


def run(*args: str):
    return CliRunner().invoke(metastore, list(args))


# ---------------------------------------------------------------- help
def test_group_help_lists_commands_and_examples() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("analyze", "show", "tables", "demo"):
        assert command in result.stdout
    assert "Examples:" in result.stdout
    assert "METASTORE_STORE" in result.stdout


@pytest.mark.parametrize("command", ["analyze", "show", "tables", "demo"])
def test_command_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert f"Usage: metastore {command}" in result.stdout


# ---------------------------------------------------------------- errors
def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_show_unknown_table_is_one_line(tmp_path: Path) -> None:
    result = run("--store", str(tmp_path / "store"), "show", "nosuch")
    assert result.exit_code == 1
    assert "nosuch" in _one_error_line(result)


def test_store_option_after_the_command(tmp_path: Path) -> None:
    result = run("show", "nosuch", "--store", str(tmp_path / "other"), "--output", "json")
    assert result.exit_code == 1
    assert str(tmp_path / "other") in _one_error_line(result)


def test_analyze_missing_table_path_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "table"
    result = run("--store", str(tmp_path / "store"), "analyze", str(missing))
    assert result.exit_code == 1
    assert str(missing) in _one_error_line(result)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run("--debug", "--store", str(tmp_path / "store"), "show", "nosuch")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize(
    "args",
    [
        ["show"],  # missing TABLE
        ["analyze", "t", "--bins", "7"],
        ["show", "t", "--top", "-1"],
        ["no-such-command"],
        ["demo", "--rows", "many"],
    ],
)
def test_usage_errors_keep_exit_code_2(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_tables_of_an_empty_store(tmp_path: Path) -> None:
    result = run("--store", str(tmp_path / "empty"), "--output", "json", "tables")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["tables"] == []


def test_python_dash_m_engine(tmp_path: Path) -> None:
    """The real entry point: ``python -m engine`` with the process's own exit code and stderr."""
    ok = subprocess.run([sys.executable, "-m", "engine", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "metastore" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "engine", "--store", str(tmp_path), "show", "nosuch"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


# ---------------------------------------------------------------- rendering helpers
def test_json_values_that_are_not_numbers_become_strings() -> None:
    doc = {
        "d": Decimal("1.50"),
        "t": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "day": dt.date(2024, 2, 29),
        "b": b"\x00\x01\x02",
        "nan": math.nan,
        "inf": -math.inf,
        "n": [1, 2.5, None, True],
    }
    assert to_jsonable(doc) == {
        "d": "1.50",
        "t": "2024-01-02T03:04:05+00:00",
        "day": "2024-02-29",
        "b": 3,
        "nan": "nan",
        "inf": "-inf",
        "n": [1, 2.5, None, True],
    }
    json.loads(dumps(doc))  # strict JSON (no NaN literal)


def test_regroup_sums_consecutive_bins() -> None:
    bins = [{"lower": i, "upper": i + 1, "count": i} for i in range(10)]
    shown = regroup(bins, 3)
    assert [b["count"] for b in shown] == [0 + 1 + 2, 3 + 4 + 5, 6 + 7 + 8 + 9]
    assert (shown[0]["lower"], shown[-1]["upper"]) == (0, 10)
    assert sum(b["count"] for b in regroup(bins, 7)) == sum(range(10))
    assert regroup(bins, 20) == bins  # fewer bins than buckets: unchanged


def test_bars() -> None:
    assert bar(0, 10) == ""
    assert bar(10, 10, width=5) == "█████"
    assert bar(1, 1000, width=5) == "▏"  # a non-zero count is never invisible
    assert len(bar(5, 10, width=8)) == 4


# ---------------------------------------------------------------- end to end (Ray)
@pytest.mark.ray
def test_analyze_then_show_json(tmp_path: Path) -> None:
    from engine.runtime.ray_runtime import ensure_ray
    from engine.sample import generate_table

    ensure_ray()
    table = tmp_path / "sales"
    store = str(tmp_path / "store")
    generate_table(table, rows=20_000, partitions=4)

    analyzed = run("--store", store, "analyze", str(table))
    assert analyzed.exit_code == 0, analyzed.output
    assert "20,000" in analyzed.stdout and "sales" in analyzed.stdout, analyzed.output

    shown = run("--store", store, "show", "sales", "--column", "category", "--output", "json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    (category,) = doc["columns"]
    assert category["statistics"]["row_count"] == 20_000
    top = category["top_frequencies"]
    counts = [v["frequency"] for v in top["values"]]
    assert len(counts) == 10
    assert counts == sorted(counts, reverse=True)
    assert counts[0] > counts[-1]

    overview = json.loads(run("--store", store, "--output", "json", "show", "sales").stdout)
    assert overview["rows"] == 20_000
    assert {c["column"] for c in overview["columns"]} >= {"id", "category", "price"}
    assert [t["table"] for t in json.loads(run("--store", store, "-o", "json", "tables").stdout)["tables"]] == ["sales"]

    text = run("--store", store, "show", "sales", "--column", "price", "--bins-shown", "10")
    assert text.exit_code == 0, text.output
    assert "Histogram" in text.stdout and "█" in text.stdout


def test_a_state_published_without_a_schema_is_one_line(tmp_path: Path) -> None:
    """A state published through the catalog API with a manifest that lacks ``schema``: tables
    lists it as damaged beside a good table, show says so in one line (was: a KeyError traceback)."""
    import base64

    import pyarrow as pa

    from engine.catalog import publish_job, schema_fingerprint
    from tests.engine.catalog.catalog_testkit import job_output, write_job

    store = str(tmp_path / "store")
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    for table, extra in (("bare", None), ("good", {"schema": base64.b64encode(schema.serialize().to_pybytes()).decode()})):
        written = write_job(store, table, "j1", "s1", "2026-01-01T00:00:00.000+00:00", {"p=0": 10, "p=1": 20})
        publish_job(store, job_output(store, table, "j1", "s1", written["partitions"], {}, schema_fingerprint(schema), extra=extra))
    listed = run("--store", store, "--output", "json", "tables")
    assert listed.exit_code == 0 and "Traceback" not in listed.output
    rows = {row["table"]: row for row in json.loads(listed.stdout)["tables"]}
    assert "record no schema" in rows["bare"]["error"] and "'bare'" in rows["bare"]["error"]
    assert (rows["good"]["rows"], rows["good"]["partitions"]) == (10 + 20, 2)
    text = run("--store", store, "tables")
    assert text.exit_code == 0 and "Traceback" not in text.output and "record no schema" in text.output
    shown = run("--store", store, "show", "bare")
    assert shown.exit_code == 1
    assert "record no schema" in _one_error_line(shown)
