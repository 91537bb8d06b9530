"""metastore query asks every request and read action of the Flight API (issue #31 part 4):
files (plan_files), --where/--exact subsets with their estimates marked, --at time travel,
staleness; and its text output is formatted (key/value lines and tables), never raw JSON.

The oracle is engine.lookup read directly (``oracle_sales``) and the JSON output."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from flight_testkit import GOOD_TOKEN

from engine.cli.console import metastore
from engine.subset import Method, methods_of

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def query(flight_server):
    def run(*args: str, width: int = 80, code: int = 0):
        result = CliRunner(env={"COLUMNS": str(width)}).invoke(metastore, ["query", *args, "--server", flight_server.location, "--token", GOOD_TOKEN])
        assert result.exit_code == code, result.output
        return result

    return run


def _formatted(text: str, width: int = 80) -> None:
    """Not a JSON document: no line opens an object, every line fits the terminal."""
    assert not text.lstrip().startswith("{") and '": ' not in text, text
    for line in text.splitlines():
        assert len(line.rstrip()) <= width, line


@pytest.mark.parametrize("kind", [["health"], ["history", "sales"], ["staleness", "sales"], ["refresh"]], ids=" ".join)
def test_actions_print_formatted_text(query, kind: list[str]) -> None:
    # before: query health/history/refresh printed the raw JSON document in text mode; staleness did not exist
    doc = json.loads(query(*kind, "-o", "json").stdout)["document"]
    text = query(*kind).stdout
    after = json.loads(query(*kind, "-o", "json").stdout)["document"]
    _formatted(text)
    for key, value in doc.items():
        if isinstance(value, (str, int)) and not isinstance(value, bool) and len(str(value)) < 40:
            assert key in text, (key, text)
            if after.get(key) == value:  # health's counters (calls, uptime_s) move with every call
                assert str(value) in text, (key, value, text)


def test_history_rows_newest_first_as_a_table(query, oracle_sales) -> None:
    doc = json.loads(query("history", "sales", "-o", "json").stdout)["document"]
    text = query("history", "sales").stdout
    assert doc["history"][0]["job_id"] == oracle_sales.job_id and doc["history"][0]["current"]
    assert oracle_sales.job_id in text and "txn_id" in text


def test_staleness_names_the_snapshot(query, oracle_sales) -> None:
    doc = json.loads(query("staleness", "sales", "-o", "json").stdout)["document"]
    assert doc["snapshot"] == oracle_sales.snapshot and doc["table"] == "sales"
    assert oracle_sales.snapshot in query("staleness", "sales").stdout


def test_files_equal_plan_files_of_the_library(query, oracle_sales) -> None:
    where = "event_date >= 2024-10-01 and id < 5000"
    doc = json.loads(query("files", "sales", "-w", where, "-o", "json").stdout)
    want = oracle_sales.plan_files(where)
    assert [r["path"] for r in doc["rows"]] == want.paths()
    assert [r["rows"] for r in doc["rows"]] == want.candidates.column("rows").to_pylist()
    text = query("files", "sales", "--where", where, width=200).stdout
    assert all(p in text for p in want.paths())


def test_statistics_where_equal_the_api_with_estimates_marked(query, oracle_sales) -> None:
    where = "city = 'Berlin' and price > 100"
    doc = json.loads(query("statistics", "sales", "-c", "price,city", "--where", where, "-o", "json").stdout)
    want = oracle_sales.statistics(["price", "city"], where=where)
    assert [r["min"] for r in doc["rows"]] == want.column("min").to_pylist()
    methods = methods_of(want)
    assert methods is not None and json.loads(doc["metadata"]["metastore.subset"])["where"] == methods.where
    estimated = [a for a in methods.answers.values() if a.method is Method.ESTIMATED and a.statistic == "row_count"]
    text = query("statistics", "sales", "-c", "price,city", "--where", where, width=100).stdout
    assert "subset answers:" in text
    if estimated:  # each estimated value shows with ~ (the row count of a subset is an estimate unless computed)
        assert "~ marks an estimate" in text and "~" in text.split("subset answers:")[0]


def test_top_at_a_transaction_equals_the_api(query, oracle_sales) -> None:
    doc = json.loads(query("top", "sales", "-c", "city", "-k", "3", "--at", "1", "-o", "json").stdout)
    assert [r["value"] for r in doc["rows"]] == oracle_sales.top_frequencies("city", 3)["value"].to_pylist()


def test_bad_combinations_are_one_line(query) -> None:
    for args, words in [
        (["statistics", "sales", "--exact"], "--exact needs --where"),
        (["files", "sales"], "needs --where"),
        (["statistics", "sales", "-w", "price > 1", "-p", "part=01"], "whole table"),
    ]:
        result = query(*args, code=1)
        assert result.stderr.startswith("error: ") and words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert query("top", "sales", "-c", "city", "--at", "1", "--at-snapshot", "x", code=2).exit_code == 2


def test_query_kinds_are_the_flight_modules() -> None:
    from engine.cli import flight

    kind = next(p for p in metastore.commands["query"].params if p.name == "kind")
    assert tuple(kind.type.choices) == flight.QUERY_KINDS


def test_top_typed_values_are_the_columns_type(query, oracle_sales) -> None:
    plain = json.loads(query("top", "sales", "-c", "quantity", "-k", "3", "-o", "json").stdout)
    typed = json.loads(query("top", "sales", "-c", "quantity", "-k", "3", "--typed", "-o", "json").stdout)
    want = oracle_sales.top_frequencies("quantity", 3, typed=True)["value"].to_pylist()
    assert [r["value"] for r in typed["rows"]] == want and all(isinstance(v, int) for v in want)
    assert [r["value"] for r in plain["rows"]] == [str(v) for v in want]


def test_analyze_and_its_status_through_query(flight_data, tmp_path) -> None:
    from pathlib import Path

    from flight_testkit import running_server

    from engine.lookup import open_statistics

    store = str(tmp_path / "store")
    with running_server(store, poll_interval=0, analyze_roots=(str(Path(flight_data.sales_path).parent),)) as server:

        def run(*args: str):
            result = CliRunner(env={"COLUMNS": "80"}).invoke(metastore, ["query", *args, "--server", server.location])
            assert result.exit_code == 0, result.output
            return result

        done = json.loads(run("analyze", flight_data.sales_path, "--name", "copy", "--wait", "-o", "json").stdout)["document"]
        assert done["state"] == "succeeded", done
        assert open_statistics(store, "copy").job_id == done["result"]["job_id"]
        status = json.loads(run("analyze-status", done["job"], "-o", "json").stdout)["document"]
        assert status["state"] == "succeeded"
        text = run("analyze-status", done["job"]).stdout
        _formatted(text)
        assert re.search(r"started_at +20\d\d-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?Z", text), text  # epoch seconds as a time
        assert "succeeded" in text and done["result"]["job_id"] in text
        bad = CliRunner().invoke(metastore, ["query", "analyze", "--server", server.location])
        assert bad.exit_code == 1 and "needs the table's location" in bad.stderr
