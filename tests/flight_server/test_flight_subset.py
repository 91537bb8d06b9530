"""Subset statistics (#16) over Flight and the CLI: the same numbers and methods as the API
(engine.lookup on the same store), the methods in the stream's schema metadata, one-line
``bad_request`` errors."""

from __future__ import annotations

import json

import pyarrow.flight as flight
import pytest
from click.testing import CliRunner
from flight_testkit import GOOD_TOKEN, first_line, raw_client

from engine.cli.console import metastore
from engine.subset import Method, methods_of

pytestmark = pytest.mark.ray

WHERES = ["city = 'Berlin' and price > 100", "part >= 2", "quantity between 100 and 20000 or flag = true", "price is null"]


@pytest.mark.parametrize("where", WHERES)
def test_statistics_where_equal_the_api(client, oracle_sales, where: str) -> None:
    got = client.statistics("sales", ["price", "city", "quantity"], where=where)
    want = oracle_sales.statistics(["price", "city", "quantity"], where=where)
    assert got.column("partition").null_count == got.num_rows
    assert got.drop_columns(["partition"]).to_pylist() == want.to_pylist()
    g, w = methods_of(got), methods_of(want)
    assert g is not None and g.answers == w.answers and g.partitions == w.partitions
    # get_flight_info announces the same schema, methods included
    c, opts = raw_client(client_location(client), GOOD_TOKEN)
    cmd = json.dumps({"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city", "quantity"], "where": where}).encode()
    info = c.get_flight_info(flight.FlightDescriptor.for_command(cmd), opts)
    assert methods_of(info.schema) == g


def client_location(client) -> str:
    return client.location if hasattr(client, "location") else client._location


def test_top_frequencies_and_histogram_where_equal_the_api(client, oracle_sales) -> None:
    where = "city in ('Berlin', 'Rome') and quantity < 10000"
    got = client.top_frequencies("sales", "city", 5, where=where)
    want = oracle_sales.top_frequencies("city", 5, where=where)
    assert got.to_pylist() == want.to_pylist()
    assert methods_of(got).answers == methods_of(want).answers
    got = client.histogram("sales", "quantity", where=where)
    want = oracle_sales.histogram("quantity", where=where)
    assert got.select(["bin", "count"]).to_pylist() == want.select(["bin", "count"]).to_pylist()
    assert methods_of(got).answers == methods_of(want).answers
    assert any(a.method is Method.ESTIMATED for a in methods_of(got).answers.values())
    part = client.histogram("sales", "quantity", bins=(0, 10), where=where)
    assert part.column("bin").to_pylist() == list(range(10))


def test_requests_without_where_keep_their_tickets() -> None:
    from flight_server.protocol import StatisticsRequest, encode

    assert b"exact" not in encode(StatisticsRequest(table="sales")) and b"where" not in encode(StatisticsRequest(table="sales"))


BAD = [
    ({"kind": "statistics", "where": "pricee > 1"}, "unknown column 'pricee'"),
    ({"kind": "statistics", "where": "price > (1"}, "price > (1"),
    ({"kind": "statistics", "where": ""}, '"where" must be a predicate'),
    ({"kind": "statistics", "exact": True}, '"exact" needs "where"'),
    ({"kind": "statistics", "exact": "yes", "where": "price > 1"}, '"exact" must be true or false'),
    ({"kind": "statistics", "where": "price > 1", "partition": "part=00"}, 'give no "partition"'),
    ({"kind": "statistics", "where": "price > 1", "columns": ["price"], "statistics": ["p50"]}, "statistic 'p50' of column 'price'"),
    ({"kind": "top_frequencies", "column": "comment", "where": "price > 1"}, "exact=True (--exact) computes"),
    ({"kind": "histogram", "column": "city", "where": "price > 1"}, "has no histogram"),
]


@pytest.mark.parametrize("doc,words", BAD)
def test_bad_subset_requests_are_one_line_bad_requests(flight_server, doc: dict, words: str) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    ticket = json.dumps({"v": 1, "table": "sales", **doc}).encode()
    with pytest.raises(flight.FlightServerError) as info:
        c.do_get(flight.Ticket(ticket), opts).read_all()
    text = first_line(info.value)
    assert words in text, text
    assert "\n" not in text and "Traceback" not in str(info.value)
    assert json.loads(info.value.extra_info)["code"] == "bad_request"


# ------------------------------------------------------------------ the CLI
def test_cli_json_equals_the_api(flight_data, oracle_sales) -> None:
    where = "city = 'Berlin' and price > 100"
    result = CliRunner().invoke(
        metastore, ["--store", flight_data.store, "show", "sales", "--where", where, "-c", "price", "-c", "city", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    want = oracle_sales.statistics(["price", "city"], where=where)
    m = methods_of(want)
    assert doc["partitions"] == m.partitions
    assert doc["row_count"]["value"] == want.column("row_count")[0].as_py()
    for col, row in zip(doc["columns"], want.to_pylist()):
        for stat, entry in col["statistics"].items():
            a = m.of(row["column"], stat)
            assert entry["method"] == a.method.value
            if stat not in ("min", "max"):
                assert entry["value"] == row[stat] or (stat == "sum" and entry["value"] == row[stat])
            if a.method is Method.ESTIMATED:
                assert entry["assumption"] == a.assumption
                if stat not in ("min", "max"):
                    assert (entry["low"], entry["high"]) == (a.low, a.high)
    top = {v["value"]: v["frequency"] for v in doc["columns"][1]["top_frequencies"]["values"]}
    assert top == dict(zip(*oracle_sales.top_frequencies("city", 10, where=where).to_pydict().values()))


def test_cli_text_shows_methods_and_bounds(flight_data) -> None:
    result = CliRunner().invoke(metastore, ["--store", flight_data.store, "show", "sales", "--where", "price > 100", "-c", "price"])
    assert result.exit_code == 0, result.output
    assert "estimated" in result.output and "Bounds of the estimates" in result.output and "~" in result.output
    result = CliRunner().invoke(metastore, ["--store", flight_data.store, "show", "sales", "--where", "part = 1"])
    assert result.exit_code == 0 and "(stored)" in result.output, result.output


def test_cli_bad_input_is_one_line(flight_data) -> None:
    for args, words in (
        (["--where", "pricee > 1"], "unknown column 'pricee'"),
        (["--exact"], "--exact needs --where"),
        (["--where", "price > 1", "--partition", "part=00"], "give no --partition"),
    ):
        result = CliRunner().invoke(metastore, ["--store", flight_data.store, "show", "sales", *args])
        assert result.exit_code != 0 and words in result.output, result.output
