"""Every request kind of the Flight server against engine.lookup read directly (the oracle),
and partitions_matching against per-partition min/max computed by pyarrow from the data."""

from __future__ import annotations

import datetime as dt
import json
import math
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
from flight_testkit import (
    GOOD_TOKEN,
    SALES_PARTITIONS,
    WIDE_COLUMNS,
    raw_client,
    same,
    strip,
)

pytestmark = pytest.mark.ray

SALES_COLUMNS = ["id", "category", "city", "quantity", "price", "score", "comment", "flag", "event_time", "event_date", "amount", "user_id"]
KEYS = [f"part={i:02d}" for i in range(SALES_PARTITIONS)]


# ============================================================== tables and metadata
def test_tables_lists_every_table_with_its_current_job(client, oracle_sales, oracle_wide) -> None:
    t = client.tables()
    rows = {r["table"]: r for r in t.to_pylist()}
    assert set(rows) == {"sales", "wide"}
    assert rows["sales"]["job_id"] == oracle_sales.job_id
    assert rows["sales"]["snapshot"] == oracle_sales.snapshot
    assert rows["sales"]["rows"] == oracle_sales.manifest["rows"]
    assert rows["sales"]["partitions"] == SALES_PARTITIONS
    assert rows["wide"]["job_id"] == oracle_wide.job_id
    assert rows["wide"]["columns"] == WIDE_COLUMNS + 1  # and the partition column


def test_list_flights_describes_each_table(flight_server, oracle_sales) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    infos = {json.loads(i.app_metadata)["table"]: i for i in c.list_flights(b"", opts)}
    info = infos["sales"]
    meta = json.loads(info.app_metadata)
    assert meta["partition_keys"] == KEYS
    assert meta["column_names"][:12] == SALES_COLUMNS
    assert info.descriptor.path == [b"sales"]
    assert info.total_records == len(oracle_sales.manifest["columns"])
    got = c.do_get(info.endpoints[0].ticket, opts).read_all()
    assert same(strip(got), oracle_sales.statistics())
    assert [json.loads(i.app_metadata)["table"] for i in c.list_flights(b"wi", opts)] == ["wide"]


# ============================================================== statistics
def test_statistics_table_level(client, oracle_sales) -> None:
    cols = ["price", "city", "event_time", "amount", "id"]
    got = client.statistics("sales", cols)
    assert got.column("partition").null_count == got.num_rows == len(cols)
    assert same(strip(got), oracle_sales.statistics(cols))
    md = got.schema.metadata
    assert md[b"metastore.job_id"] == oracle_sales.job_id.encode()
    assert md[b"metastore.table"] == b"sales"
    assert md[b"metastore.request_kind"] == b"statistics"


def test_statistics_of_every_column(client, oracle_sales) -> None:
    assert same(strip(client.statistics("sales")), oracle_sales.statistics())


@pytest.mark.parametrize("key", KEYS)
def test_statistics_of_a_partition(client, oracle_sales, key: str) -> None:
    cols = ["quantity", "comment", "flag", "event_date"]
    got = client.statistics("sales", cols, partition=key)
    assert got.column("partition").to_pylist() == [key] * len(cols)
    assert same(strip(got), oracle_sales.statistics(cols, key))


def test_statistics_of_several_partitions_stream_in_order(client, oracle_sales) -> None:
    cols = ["price", "category"]
    got = client.statistics("sales", cols, partitions=["part=03", "part=01"])
    assert got.column("partition").to_pylist() == ["part=03"] * 2 + ["part=01"] * 2
    expected = pa.concat_tables([oracle_sales.statistics(cols, "part=03"), oracle_sales.statistics(cols, "part=01")])
    assert same(strip(got), expected)
    every = client.statistics("sales", cols, partitions="*")
    assert every.column("partition").to_pylist() == [k for k in KEYS for _ in cols]
    assert same(strip(every), pa.concat_tables([oracle_sales.statistics(cols, k) for k in KEYS]))


def test_statistics_projection_and_sketches(client, oracle_sales) -> None:
    got = client.statistics("sales", ["price", "city"], statistics=["min", "max", "null_count", "theta_sketch"])
    assert got.schema.names == ["partition", "column", "min", "max", "null_count", "theta_sketch"]
    assert same(strip(got), oracle_sales.statistics(["price", "city"], statistics=["min", "max", "null_count", "theta_sketch"]))
    assert got.column("theta_sketch")[0].as_py()  # the sketch bytes travel whole


def test_statistics_of_ten_columns_of_the_wide_table(client, oracle_wide) -> None:
    rng = random.Random(6)
    for _ in range(20):
        cols = [f"c{rng.randrange(WIDE_COLUMNS):04d}" for _ in range(10)]
        assert same(strip(client.statistics("wide", cols)), oracle_wide.statistics(cols))
        key = rng.choice(["part=00", "part=01"])
        assert same(strip(client.statistics("wide", cols, partition=key)), oracle_wide.statistics(cols, key))


# ============================================================== top frequencies
@pytest.mark.parametrize("column", ["category", "city", "quantity", "flag", "event_date", "amount", "id", "comment", "user_id"])
@pytest.mark.parametrize("k", [0, 1, 20, 5000, 1_000_000])
def test_top_frequencies(client, oracle_sales, column: str, k: int) -> None:
    got = client.top_frequencies("sales", column, k=k)
    expected = oracle_sales.top_frequencies(column, k)
    assert same(got.select(["value", "frequency"]), expected)
    for key in (b"kind", b"stored_rows"):
        assert got.schema.metadata[key] == expected.schema.metadata[key]


def test_top_frequencies_typed_and_per_partition(client, oracle_sales) -> None:
    for column in ("event_date", "amount", "quantity", "flag"):
        got = client.top_frequencies("sales", column, k=20, typed=True)
        expected = oracle_sales.top_frequencies(column, 20, typed=True)
        assert got.schema.field("value").type == oracle_sales.column_type(column)
        assert same(got, expected)
    for key in KEYS:
        assert same(client.top_frequencies("sales", "city", 7, partition=key), oracle_sales.top_frequencies("city", 7, key))


def test_top_frequencies_of_an_all_distinct_column_is_empty_with_its_kind(client) -> None:
    got = client.top_frequencies("sales", "id", k=20)
    assert got.num_rows == 0
    assert got.schema.metadata[b"kind"] == b"all_distinct"


# ============================================================== histograms
HIST_COLUMNS = ["price", "score", "quantity", "event_time", "event_date", "amount", "id", "user_id"]


@pytest.mark.parametrize("column", HIST_COLUMNS)
def test_histogram_all_bins_and_bin_ranges(client, oracle_sales, column: str) -> None:
    assert same(client.histogram("sales", column), oracle_sales.histogram(column))
    for bins in [(0, 1), (10, 110), (990, 5000), (5, 5), (4000, 5000)]:
        assert same(client.histogram("sales", column, bins=bins), oracle_sales.histogram(column, bins=bins)), bins
    for key in KEYS[:2]:
        assert same(client.histogram("sales", column, partition=key), oracle_sales.histogram(column, partition=key))


def test_histogram_value_ranges(client, oracle_sales) -> None:
    cases = [
        ("price", (10.0, 20.0), (10.0, 20.0)),
        ("price", (None, 5), (None, 5)),
        ("price", (500, None), (500, None)),
        ("price", (-100.0, -50.0), (-100.0, -50.0)),  # below the range: no bins
        ("quantity", (100, 200), (100, 200)),
        ("amount", ("10.00", "20.50"), (__import__("decimal").Decimal("10.00"), __import__("decimal").Decimal("20.50"))),
        (
            "event_time",
            ("2024-03-01T00:00:00Z", "2024-03-02T12:00:00.5Z"),
            (dt.datetime(2024, 3, 1, tzinfo=dt.UTC), dt.datetime(2024, 3, 2, 12, 0, 0, 500000, tzinfo=dt.UTC)),
        ),
        ("event_date", ("2024-06-01", "2024-06-30"), (dt.date(2024, 6, 1), dt.date(2024, 6, 30))),
    ]
    for column, sent, python in cases:
        got = client.histogram("sales", column, value_range=sent)
        assert same(got, oracle_sales.histogram(column, value_range=python)), (column, sent)
    # Python values are sent in their text form by the client
    start = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    got = client.histogram("sales", "event_time", value_range=(start, start + dt.timedelta(days=3)))
    assert same(got, oracle_sales.histogram("event_time", value_range=(start, start + dt.timedelta(days=3))))
    assert got.num_rows > 0


@pytest.mark.parametrize("column", ["price", "score", "quantity"])
def test_histogram_value_ranges_far_outside_the_column_range(client, column: str) -> None:
    """Bounds near the float64 limits (or the type's) select bins by their stored edges: 1e308 on a
    float64 column used to overflow the bin arithmetic into an internal error."""
    full = client.histogram("sales", column)
    lower, upper = full.column("lower").cast(pa.float64()), full.column("upper").cast(pa.float64())
    big = {"price": 1.7976931348623157e308, "score": 3.4e38, "quantity": 2**31 - 1}[column]  # float64 max: overflows (big - lower) / width
    mid = pc.min(lower).as_py() + (pc.max(upper).as_py() - pc.min(lower).as_py()) * 0.4371
    for value_range in [(big, None), (None, -big), (-big, big), (mid, big), (-big, mid)]:
        lo = -math.inf if value_range[0] is None else value_range[0]
        hi = math.inf if value_range[1] is None else value_range[1]
        if column == "quantity":  # whole numbers only (a fractional bound is refused)
            value_range = (None if value_range[0] is None else math.ceil(lo), None if value_range[1] is None else math.floor(hi))
        # the oracle: bins whose [lower, upper] meet [lo, hi] (integer bins hold lower..upper inclusive);
        # for floats an open side also reaches its end bin, which holds that side's infinities
        overlap = pc.and_(pc.greater_equal(upper, lo) if column == "quantity" else pc.greater(upper, lo), pc.less_equal(lower, hi))
        expected = set(full.filter(overlap).column("bin").to_pylist())
        if column != "quantity":
            expected |= ({0} if value_range[0] is None else set()) | ({full.num_rows - 1} if value_range[1] is None else set())
        expected = sorted(expected)
        got = client.histogram("sales", column, value_range=value_range)
        assert got.column("bin").to_pylist() == expected, (column, value_range)


# ============================================================== partitions matching
def _text(scalar: pa.Scalar) -> str:
    from engine import values

    return values.encode_scalar(scalar)


def _expected_matching(parts: dict[str, pa.Table], column: str, op: str, value: pa.Scalar | None) -> tuple[set[str], set[str]]:
    """(partitions the documented min/max rule keeps, partitions holding a matching row), from the data."""
    keep, hold = set(), set()
    for key, t in parts.items():
        arr = t.column(column).combine_chunks()
        nulls, rows = arr.null_count, len(arr)
        is_float = pa.types.is_floating(arr.type)
        nans = pc.sum(pc.is_nan(arr)).as_py() or 0 if is_float else 0
        if op == "is_null":
            kept, held = nulls > 0, nulls > 0
        elif op == "not_null":
            kept, held = rows - nulls > 0, rows - nulls > 0
        else:
            fn = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal, "==": pc.equal, "!=": pc.not_equal}[op]
            held = bool(pc.any(fn(arr, value)).as_py())
            mm = pc.min_max(arr)  # NaN ignored, as in the statistics
            lo, hi, v = mm["min"], mm["max"], value
            if rows - nulls == 0:
                kept = False
            elif not lo.is_valid:  # only NaN: NaN equals no value, engines disagree on its order
                kept = op != "=="
            elif nans > 0 and op != "==":
                kept = True
            else:
                kept = {
                    "<": pc.less(lo, v),
                    "<=": pc.less_equal(lo, v),
                    ">": pc.greater(hi, v),
                    ">=": pc.greater_equal(hi, v),
                    "==": pc.and_(pc.less_equal(lo, v), pc.less_equal(v, hi)),
                    "!=": pc.invert(pc.and_(pc.equal(lo, hi), pc.equal(lo, v))),
                }[op].as_py()
        if kept:
            keep.add(key)
        if held:
            hold.add(key)
    return keep, hold


def _candidates(parts: dict[str, pa.Table], column: str) -> list[pa.Scalar]:
    out = []
    for t in parts.values():
        mm = pc.min_max(t.column(column))
        out += [mm["min"], mm["max"]]
    typ = out[0].type
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        lo = min(s.as_py() for s in out)
        hi = max(s.as_py() for s in out)
        out += [pa.scalar(lo - 1, typ), pa.scalar(hi + 1, typ), pa.scalar((lo + hi) // 2 if pa.types.is_integer(typ) else (lo + hi) / 2, typ)]
    if pa.types.is_string(typ):
        out += [pa.scalar("", typ), pa.scalar("zzzz", typ), pa.scalar("M", typ)]
    return [s for s in out if s.is_valid]


@pytest.mark.parametrize("column", ["id", "category", "city", "quantity", "price", "score", "flag", "event_time", "event_date", "amount", "user_id"])
def test_partitions_matching_against_pyarrow_min_max(client, sales_partitions, column: str) -> None:
    ops = ["<", "<=", ">", ">=", "==", "!="]
    sizes = set()
    for value in _candidates(sales_partitions, column):
        for op in ops:
            got = client.partitions_matching("sales", column, op, _text(value))
            kept = set(got.column("partition").to_pylist())
            expected, holding = _expected_matching(sales_partitions, column, op, value)
            assert kept == expected, (column, op, value)
            assert holding <= kept, (column, op, value)  # never prunes a partition with a matching row
            sizes.add(len(kept))
    if column in ("event_time", "event_date"):  # partitions hold disjoint slices of the year: pruning happens
        assert {0, 1, SALES_PARTITIONS} <= sizes
    for op in ("is_null", "not_null"):
        got = client.partitions_matching("sales", column, op)
        expected, holding = _expected_matching(sales_partitions, column, op, None)
        assert set(got.column("partition").to_pylist()) == expected
        assert holding <= expected


def test_partitions_matching_rows_carry_the_statistics(client, oracle_sales) -> None:
    got = client.partitions_matching("sales", "event_time", ">=", "2024-10-01T00:00:00Z")
    keys = got.column("partition").to_pylist()
    assert keys and keys == sorted(keys)
    for row in got.to_pylist():
        s = oracle_sales.statistics(["event_time"], row["partition"]).to_pylist()[0]
        assert (row["rows"], row["null_count"], row["min"], row["max"]) == (s["row_count"], s["null_count"], s["min"], s["max"])


def test_partitions_matching_takes_json_numbers_and_python_values(client) -> None:
    a = client.partitions_matching("sales", "quantity", ">", 25_000)
    b = client.partitions_matching("sales", "quantity", ">", "25000")
    assert same(a, b)
    c = client.partitions_matching("sales", "event_date", "<", dt.date(2024, 4, 1))
    assert c.column("partition").to_pylist() == ["part=00"]
    d = client.partitions_matching("sales", "price", "<", "nan")
    assert d.num_rows == SALES_PARTITIONS  # a NaN value cannot be pruned on


PREDICATES = [  # (predicate, whether the sales table's statistics must prune some partition)
    ("city == Berlin and price > 5", False),  # the CLI case: a bare word is a string
    ("event_date between 2024-04-01 and 2024-06-30", True),
    ("not event_date < 2024-10-01 and flag = true", True),
    ("event_time >= '2024-10-01T00:00:00Z' or quantity < -5", True),
    ("category in ('category_0001', 'category_0002') and amount >= 100.5", True),  # outside part=02's range
    ("city like 'B%' and quantity != 3", False),
    ("price is nan or price is null", False),
    ("event_date > 2030-01-01", True),
    ("part = 2 or part in (3)", True),
    ("not (part < 3 and event_date <= 2024-12-31)", True),
]


@pytest.mark.parametrize("where,prunes", PREDICATES)
def test_partitions_matching_takes_a_full_predicate(client, oracle_sales, sales_partitions, where: str, prunes: bool) -> None:
    import duckdb
    from predicate_oracle import arrow_matches, duckdb_matches

    got = client.partitions_matching("sales", where)
    kept = got.column("partition").to_pylist()
    pruning = oracle_sales.prune_partitions(where)
    assert kept == pruning.matching  # the one evaluator, in the library
    assert all(why for _, why in pruning.pruned)
    expr = oracle_sales.bind(where)
    con = duckdb.connect()
    try:
        for key, t in sales_partitions.items():
            t = t.append_column("part", pa.array([int(key.split("=")[1])] * len(t), pa.int32()))
            if arrow_matches(t, expr) or duckdb_matches(con, t, expr):
                assert key in kept, (where, key)  # never prunes a partition holding a matching row
    finally:
        con.close()
    assert (len(kept) < SALES_PARTITIONS) == prunes, (where, kept, pruning.pruned)
    if len(pruning.columns) > 1:  # several columns: the rows carry no one column's statistics
        assert got.column("min").null_count == got.num_rows


def test_partitions_matching_names_the_refuting_conjunct(oracle_sales) -> None:
    pruning = oracle_sales.prune_partitions("price > 0 and event_date >= 2024-10-01")
    assert pruning.matching and pruning.pruned
    assert {why for _, why in pruning.pruned} == {"event_date >= '2024-10-01'"}
    assert pruning.predicate == "price > 0 AND event_date >= '2024-10-01'"


# ============================================================== flight info, schema, tickets
REQUESTS = [
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city"]},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"], "partitions": "*", "statistics": ["min", "max"]},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 20},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "amount", "k": 5, "typed": True, "partition": "part=02"},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [100, 200]},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "event_time"},
    {"v": 1, "kind": "partitions_matching", "table": "sales", "filter": {"column": "price", "op": ">=", "value": 1000}},
]


@pytest.mark.parametrize("request_doc", REQUESTS, ids=lambda d: d["kind"])
def test_flight_info_schema_estimate_and_endpoint(flight_server, client, request_doc: dict) -> None:
    info = client.flight_info(request_doc)
    got = client.get(request_doc)
    assert info.schema.equals(got.schema, check_metadata=False)
    assert info.schema.metadata[b"metastore.job_id"] == got.schema.metadata[b"metastore.job_id"]
    if request_doc["kind"] == "partitions_matching":
        assert info.total_records >= got.num_rows
    else:
        assert info.total_records == got.num_rows
    assert json.loads(info.app_metadata)["kind"] == request_doc["kind"]
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    assert all(e.locations == [] for e in info.endpoints)  # served by this server
    parts = [c.do_get(e.ticket, opts).read_all() for e in info.endpoints]
    if request_doc.get("partitions") == "*":  # one endpoint per partition, in order
        assert len(info.endpoints) == SALES_PARTITIONS
        assert [p.column("partition")[0].as_py() for p in parts] == KEYS
    else:
        assert len(info.endpoints) == 1
    assert same(pa.concat_tables(parts), got)
    schema = c.get_schema(flight.FlightDescriptor.for_command(json.dumps(request_doc)), opts).schema
    assert schema.equals(got.schema, check_metadata=False)


def test_path_descriptor_is_every_statistic_of_the_table(flight_server, oracle_sales) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    info = c.get_flight_info(flight.FlightDescriptor.for_path("sales"), opts)
    assert info.total_records == len(oracle_sales.manifest["columns"])
    assert same(strip(c.do_get(info.endpoints[0].ticket, opts).read_all()), oracle_sales.statistics())


# ============================================================== actions
def test_actions(flight_server, client, oracle_sales) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    assert {a.type for a in c.list_actions(opts)} == {"health", "history", "refresh", "staleness", "analyze", "analyze_status", "diff", "alerts"}
    health = client.health()
    assert health["status"] == "ok" and health["tables"] == 2 and health["auth"] is True and health["protocol"] == 1
    history = client.history("sales")
    assert [h["job_id"] for h in history["history"]] == [oracle_sales.job_id]
    assert history["history"][0]["current"] is True
    refreshed = client.refresh()
    assert refreshed["changed"] == [] and refreshed["tables"]["sales"] == oracle_sales.job_id
    assert client.refresh("sales")["tables"] == {"sales": oracle_sales.job_id}
    with pytest.raises(flight.FlightServerError, match="analyze is disabled"):
        client.analyze("/nowhere")


def test_time_travel_is_served_from_the_catalog(client, oracle_sales) -> None:
    # the session store's tables have a catalog (one transaction each); more in test_flight_time_travel.py
    from flight_server.protocol import At

    for at in (At(transaction=3), At(snapshot="abc")):
        with pytest.raises(flight.FlightServerError, match="has no state at") as info:
            client.statistics("sales", ["price"], at=at)
        assert json.loads(info.value.extra_info)["code"] == "not_found"
    assert client.flight_info({"v": 1, "kind": "histogram", "table": "sales", "column": "price", "at_transaction": 1}).total_records > 0
    for at in (At(transaction=1), At(snapshot=oracle_sales.snapshot)):
        assert same(strip(client.statistics("sales", ["price"], at=at)), oracle_sales.statistics(["price"]))
    assert not math.isnan(client.statistics("sales", ["price"]).column("mean")[0].as_py())


def test_empty_selections_return_empty_tables_with_the_schema(client) -> None:
    full = client.statistics("sales", ["price"])
    for got in (client.statistics("sales", []), client.statistics("sales", ["price"], partitions=[])):
        assert got.num_rows == 0
        assert got.schema.equals(full.schema, check_metadata=False)
    assert client.histogram("sales", "price", bins=(7, 7)).num_rows == 0
    assert client.top_frequencies("sales", "city", k=0).num_rows == 0


# ============================================================== plan files
@pytest.fixture(scope="module")
def sales_index(flight_data, oracle_sales):
    """The sales table's file index, written where its analyze run keeps table files (as analyze
    will: beside table/statistics.parquet), removed afterwards."""
    import os

    from engine import fileio
    from engine.fileindex import store
    from engine.fileindex.build import build_file_index
    from engine.sources.parquet import ParquetDirectorySource

    source = ParquetDirectorySource(flight_data.sales_path)
    parts = [build_file_index(source, p, bloom_columns=["id"]) for p in source.partitions()]
    directory = oracle_sales.file_uri("statistics.parquet").rsplit("/", 1)[0]
    written = store.write_file_index(store.assemble(parts, source.schema()), directory)
    try:
        yield directory
    finally:
        for uri, _ in written.values():
            os.remove(fileio.resolve(uri)[1])


@pytest.mark.parametrize("where", ["event_date >= 2024-10-01 and id < 5000", "id in (7, 12345)", "city = 'Nowhere'", "price is null"])
def test_plan_files_streams_the_candidates_of_the_library(client, oracle_sales, sales_index, sales_partitions, where: str) -> None:
    from predicate_oracle import arrow_matches

    got = client.plan_files("sales", where)
    want = oracle_sales.plan_files(where)
    assert got.column_names == ["path", "partition", "rows", "size"]
    assert got.column("path").to_pylist() == want.paths()
    assert got.column("rows").to_pylist() == want.candidates.column("rows").to_pylist()
    expr = oracle_sales.bind(where)
    holding = {
        key for key, t in sales_partitions.items() if arrow_matches(t.append_column("part", pa.array([int(key[-2:])] * len(t), pa.int32())), expr)
    }
    assert holding <= set(got.column("partition").to_pylist())
    info = client.flight_info({"v": 1, "kind": "plan_files", "table": "sales", "filter": where})
    assert info.total_records >= got.num_rows


def test_plan_files_errors_are_one_line(client, sales_index) -> None:
    cases = [
        ("sales", "id <", "at character 5"),
        ("sales", "nosuch = 1", "unknown column 'nosuch'"),
        ("sales", "", "must be a predicate"),
    ]  # a table without a file index: tests/engine/test_file_index_job.py
    for table, where, words in cases:
        with pytest.raises(flight.FlightError) as info:
            client.plan_files(table, where)
        text = str(info.value).splitlines()[0]
        assert words in text, text
