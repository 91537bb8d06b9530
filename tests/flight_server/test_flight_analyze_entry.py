"""One analyze entry: a table analyzed by the CLI and then by Flight's analyze action is the
same job with the same defaults, so the second run inherits every unchanged partition and
keeps every column, user statistics included."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from flight_testkit import running_server

pytestmark = pytest.mark.ray


def test_cli_then_flight_analyze_inherits_everything_and_keeps_the_columns(flight_data, tmp_path: Path) -> None:
    from engine.cli.console import metastore
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    store = str(tmp_path / "store")
    cli = CliRunner().invoke(metastore, ["--store", store, "--output", "json", "analyze", flight_data.sales_path, "--name", "sales"])
    assert cli.exit_code == 0, cli.output
    first = open_statistics(store, "sales")
    first_columns = pq.read_schema(first.manifest["table_files"]["statistics.parquet"]).names
    assert {"zero_count", "top1_share"} <= set(first_columns)  # the shipped user statistics, by default

    with running_server(store, poll_interval=0, analyze_roots=(str(Path(flight_data.sales_path).parent),)) as server:
        with MetastoreClient(server.location) as c:
            status = c.wait_analyze(c.analyze(flight_data.sales_path, name="sales"), timeout=300)
    assert status["state"] == "succeeded", status
    result = status["result"]
    assert (result["inherited"], result["recomputed"]) == (len(first.partitions()), 0)
    second = open_statistics(store, "sales")
    assert second.job_id == result["job_id"] != first.job_id
    assert pq.read_schema(second.manifest["table_files"]["statistics.parquet"]).names == first_columns
    columns = [c["name"] for c in first.manifest["columns"]]
    a, b = first.statistics(columns), second.statistics(columns)
    # the table level's KLL merges draw random bits (DataSketches): approximate percentiles may differ
    exact = [n for n in a.column_names if not re.fullmatch(r"p\d\d|.*sketch.*", n)]
    assert b.select(exact).equals(a.select(exact))
