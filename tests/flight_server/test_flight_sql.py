"""The Flight SQL face of ``metastore serve`` through a real Flight SQL client (ADBC 1.13).

A store of two tables other tools wrote (pandas, partitioned; DuckDB), analyzed once; a
server on loopback with a token; the ADBC Flight SQL driver (Go) connects, browses the
catalog, runs SELECTs and prepared statements. Oracles: the Flight API's answers
(MetastoreClient), the lookups (engine.lookup), DuckDB over the data, the statistics
files' own schema (pyarrow.parquet). Every hostile statement is refused with a clear
error and the server answers afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from flight_testkit import GOOD_TOKEN, running_server, self_signed_cert, serve_process
from hypothesis import given, settings
from hypothesis import strategies as st

adbc = pytest.importorskip("adbc_driver_flightsql.dbapi")

TIMEOUT_S = 2.0
MAX_ROWS = 50_000
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SqlData:
    store: str
    shop: str  # pandas, hive-partitioned by region
    events: str  # DuckDB COPY


@pytest.fixture(scope="module")
def sql_data(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> SqlData:
    from engine.api import analyze

    root = tmp_path_factory.mktemp("flight_sql")
    shop, events, store = root / "shop", root / "events", root / "store"
    rng = np.random.default_rng(7)
    for region, n in (("north", 700), ("south", 300)):
        (shop / f"region={region}").mkdir(parents=True)
        price = rng.normal(20, 5, n)
        price[rng.random(n) < 0.05] = np.nan
        pd.DataFrame(
            {
                "id": np.arange(n, dtype=np.int64),
                "color": rng.choice(["red", "green", "blue", "teal"], n),
                "price": pd.array(price, dtype="Float64"),
                "day": pd.date_range("2024-01-01", periods=n, freq="h"),
            }
        ).to_parquet(shop / f"region={region}" / "part-0.parquet", index=False)
    events.mkdir()
    duck(
        "COPY (SELECT i AS user_id, ['view', 'buy', 'ship'][1 + i % 3] AS kind, (i * 37 % 1000)::DECIMAL(9, 2) AS amount "
        f"FROM range(2000) t(i)) TO '{events}/data.parquet' (FORMAT parquet)"
    )
    analyze(str(shop), store=str(store), user_statistics=[])
    analyze(str(events), store=str(store), user_statistics=[])
    return SqlData(store=str(store), shop=str(shop), events=str(events))


@pytest.fixture(scope="module")
def sql_server(sql_data: SqlData) -> Iterator:
    from engine.tokens import Token

    with running_server(sql_data.store, tokens=[Token.of(GOOD_TOKEN)], sql_timeout=TIMEOUT_S, sql_max_rows=MAX_ROWS, allow_analyze=False) as server:
        yield server


def _connect(server, token: str | None = GOOD_TOKEN):  # noqa: ANN001, ANN202
    import adbc_driver_flightsql as fs

    kwargs = {fs.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {token}"} if token else {}
    return adbc.connect(server.location.replace("grpc+tcp://", "grpc://"), db_kwargs=kwargs, autocommit=True)


@pytest.fixture(scope="module")
def conn(sql_server) -> Iterator:  # noqa: ANN001
    with _connect(sql_server) as c:
        yield c


def query(conn, sql: str, parameters: tuple | None = None) -> pa.Table:  # noqa: ANN001
    with conn.cursor() as cur:
        cur.execute(sql, parameters)
        return cur.fetch_arrow_table()


def duck(sql: str) -> list[tuple]:
    """DuckDB's answer over the data (a connection of its own: results of another stay unfinished)."""
    with duckdb.connect() as con:
        return con.execute(sql).fetchall()


def data(path: str) -> str:
    return f"read_parquet('{path}/**/*.parquet', hive_partitioning = true)"


# ================================================================ connect, catalog browsing
def test_connect_reads_the_server_info(conn) -> None:  # noqa: ANN001
    info = conn.adbc_get_info()
    assert info["vendor_name"] == "metastore"
    assert info["vendor_arrow_version"] == pa.__version__


def test_get_objects_lists_the_system_tables_with_their_columns(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    from engine.lookup import open_statistics
    from flight_server.sql.tables import NAMES

    objects = conn.adbc_get_objects().read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["metastore"]
    schemas = objects[0]["catalog_db_schemas"]
    assert [s["db_schema_name"] for s in schemas] == ["main"]
    tables = {t["table_name"]: t for t in schemas[0]["db_schema_tables"]}
    assert sorted(tables) == sorted(NAMES)
    # statistics: the key columns, then every column of the statistics files but `column` and the sketches
    file_columns: list[str] = []
    for table in ("shop", "events"):
        st = open_statistics(sql_data.store, table)
        for name in pq.read_schema(st.file_uri("statistics.parquet")).names:
            if name not in file_columns and name not in ("column", "theta_sketch", "kll_sketch"):
                file_columns.append(name)
    got = [c["column_name"] for c in tables["statistics"]["table_columns"]]
    assert got == ["table_name", "partition", "column_name", *file_columns]
    assert [c["column_name"] for c in tables["frequencies"]["table_columns"]] == ["table_name", "partition", "column_name", "value", "frequency"]
    histogram_columns = ["table_name", "partition", "column_name", "bin", "lower", "upper", "count"]
    assert [c["column_name"] for c in tables["histograms"]["table_columns"]] == histogram_columns
    # a pattern narrows the tables (GetTables' table_name_filter_pattern)
    narrowed = conn.adbc_get_objects(table_name_filter="hist_g%").read_all().to_pylist()
    assert [t["table_name"] for t in narrowed[0]["catalog_db_schemas"][0]["db_schema_tables"]] == ["histograms"]
    assert conn.adbc_get_table_types() == ["TABLE"]


# ================================================================ statements
def test_statistics_equal_the_flight_api_answer(conn, sql_server) -> None:  # noqa: ANN001
    from flight_server.client import MetastoreClient

    with MetastoreClient(sql_server.location, token=GOOD_TOKEN) as client:
        api = client.statistics("shop").to_pylist() + client.statistics("shop", partitions="*").to_pylist()
    got = query(conn, "SELECT * FROM statistics WHERE table_name = 'shop'").to_pylist()
    key = lambda r: (r["partition"] or "", r["column"])  # noqa: E731
    expected = sorted(api, key=key)
    rows = sorted(({**r, "column": r["column_name"]} for r in got), key=key)
    assert len(rows) == len(expected) == 5 * 3  # 5 columns (region too) at table level and in 2 partitions
    for want, have in zip(expected, rows, strict=True):
        for name, value in want.items():
            if name in ("theta_sketch", "kll_sketch"):
                continue
            assert have[name] == value or (value != value and have[name] != have[name]), (name, want, have)


def test_statistics_agree_with_duckdb_over_the_data(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    got = query(
        conn,
        "SELECT column_name, row_count, null_count, distinct_count, min, max FROM statistics "
        "WHERE table_name = 'events' AND partition IS NULL ORDER BY column_name",
    ).to_pylist()
    by = {r["column_name"]: r for r in got}
    [(n, users, amin, amax, kinds)] = duck(
        f"SELECT count(*), count(DISTINCT user_id), min(amount)::VARCHAR, max(amount)::VARCHAR, count(DISTINCT kind) FROM {data(sql_data.events)}"
    )
    assert by["user_id"]["row_count"] == n == 2000 and by["user_id"]["distinct_count"] == users
    assert (by["user_id"]["min"], by["user_id"]["max"]) == ("0", "1999")  # text columns
    assert (by["amount"]["min"], by["amount"]["max"]) == (amin, amax)
    assert by["kind"]["distinct_count"] == kinds and by["kind"]["null_count"] == 0


def test_partition_rows_agree_with_duckdb(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    sql = "SELECT partition, row_count FROM statistics WHERE table_name = 'shop' AND column_name = 'price' AND partition IS NOT NULL"
    got = {r["partition"]: r["row_count"] for r in query(conn, sql).to_pylist()}
    want = {f"region={r}": c for r, c in duck(f"SELECT region, count(*) FROM {data(sql_data.shop)} GROUP BY region")}
    assert got == want


def test_frequencies_agree_with_duckdb(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    got = query(
        conn, "SELECT value, frequency FROM frequencies WHERE table_name = 'shop' AND partition IS NULL AND column_name = 'color' ORDER BY value"
    ).to_pylist()
    want = duck(f"SELECT color, count(*) FROM {data(sql_data.shop)} GROUP BY color ORDER BY color")
    assert [(r["value"], r["frequency"]) for r in got] == want


def test_histograms_agree_with_the_lookup_and_count_every_value(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    from engine import values
    from engine.lookup import open_statistics

    got = query(
        conn, "SELECT bin, lower, upper, count FROM histograms WHERE table_name = 'shop' AND partition IS NULL AND column_name = 'price' ORDER BY bin"
    )
    oracle = open_statistics(sql_data.store, "shop").histogram("price")
    assert got.column("bin").to_pylist() == oracle.column("bin").to_pylist()
    assert got.column("lower").to_pylist() == values.encode(oracle.column("lower")).to_pylist()
    assert got.column("count").to_pylist() == oracle.column("count").to_pylist()
    [(valid,)] = duck(f"SELECT count(price) FROM {data(sql_data.shop)} WHERE NOT isnan(price)")
    assert sum(got.column("count").to_pylist()) == valid


def test_tables_history_and_files(conn, sql_data: SqlData) -> None:  # noqa: ANN001
    from engine.lookup import open_statistics

    tables = {r["table_name"]: r for r in query(conn, "SELECT * FROM tables").to_pylist()}
    assert sorted(tables) == ["events", "shop"]
    shop = open_statistics(sql_data.store, "shop")
    assert (tables["shop"]["rows"], tables["shop"]["partitions"], tables["shop"]["job_id"]) == (1000, 2, shop.job_id)
    history = query(conn, "SELECT table_name, job_id, current FROM history ORDER BY table_name").to_pylist()
    assert [(h["table_name"], h["current"]) for h in history] == [("events", True), ("shop", True)]
    files = query(conn, "SELECT path, rows FROM files WHERE table_name = 'shop' ORDER BY path").to_pylist()
    on_disk = sorted(str(p) for p in Path(sql_data.shop).rglob("*.parquet"))
    assert [Path(f["path"]).name for f in files] == [Path(p).name for p in on_disk]
    assert [f["rows"] for f in files] == [pq.ParquetFile(p).metadata.num_rows for p in on_disk]


def test_joins_aggregates_and_qualified_names(conn) -> None:  # noqa: ANN001
    got = query(
        conn,
        'SELECT t.table_name, t."rows", count(*) AS columns FROM metastore.main.tables t JOIN statistics s '
        "ON s.table_name = t.table_name AND s.partition IS NULL GROUP BY ALL ORDER BY 1",
    ).to_pylist()
    assert got == [{"table_name": "events", "rows": 2000, "columns": 3}, {"table_name": "shop", "rows": 1000, "columns": 5}]


# ================================================================ prepared statements
def test_prepared_statement_with_parameters(conn) -> None:  # noqa: ANN001
    sql = "SELECT column_name, row_count FROM statistics WHERE table_name = ? AND partition IS NULL ORDER BY column_name"
    with conn.cursor() as cur:
        cur.execute(sql, ("events",))
        first = cur.fetch_arrow_table().to_pylist()
        cur.execute(sql, ("shop",))
        second = cur.fetch_arrow_table().to_pylist()
    assert [r["column_name"] for r in first] == ["amount", "kind", "user_id"]
    assert {r["row_count"] for r in first} == {2000}
    assert [r["column_name"] for r in second] == ["color", "day", "id", "price", "region"]
    assert {r["row_count"] for r in second} == {1000}


def _raw_client(server):  # noqa: ANN001, ANN202
    client = flight.FlightClient(server.location)
    return client, flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {GOOD_TOKEN}".encode())])


def test_the_protocol_create_bind_execute_close(sql_server) -> None:  # noqa: ANN001
    """The Flight SQL messages themselves (pyarrow's Flight client): CreatePreparedStatement,
    DoPut of the parameters, GetFlightInfo + DoGet, ClosePreparedStatement."""
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack, unpack

    client, options = _raw_client(sql_server)
    with client:
        body = pack(pb.ActionCreatePreparedStatementRequest(query="SELECT column_name FROM statistics WHERE table_name = ? AND partition IS NULL"))
        [result] = list(client.do_action(flight.Action("CreatePreparedStatement", body), options))
        created = unpack(result.body.to_pybytes())
        assert isinstance(created, pb.ActionCreatePreparedStatementResult)
        assert pa.ipc.read_schema(pa.py_buffer(created.dataset_schema)).names == ["column_name"]
        assert len(pa.ipc.read_schema(pa.py_buffer(created.parameter_schema))) == 1
        handle = created.prepared_statement_handle
        descriptor = flight.FlightDescriptor.for_command(pack(pb.CommandPreparedStatementQuery(prepared_statement_handle=handle)))
        writer, reader = client.do_put(descriptor, pa.schema([("p", pa.string())]), options)
        writer.write_table(pa.table({"p": ["events"]}))
        writer.done_writing()
        ack = pb.DoPutPreparedStatementResult.FromString(reader.read().to_pybytes())
        writer.close()
        assert ack.prepared_statement_handle == handle
        info = client.get_flight_info(descriptor, options)
        got = client.do_get(info.endpoints[0].ticket, options).read_all()
        assert sorted(got.column("column_name").to_pylist()) == ["amount", "kind", "user_id"]
        with pytest.raises(flight.FlightError, match="already read"):  # a result is read once
            client.do_get(info.endpoints[0].ticket, options).read_all()
        close = pack(pb.ActionClosePreparedStatementRequest(prepared_statement_handle=handle))
        assert list(client.do_action(flight.Action("ClosePreparedStatement", close), options)) == []
        with pytest.raises(flight.FlightError, match="unknown prepared statement"):
            client.get_flight_info(descriptor, options)


def test_several_bound_rows_run_once_each(sql_server) -> None:  # noqa: ANN001
    """DoPut of two parameter rows: the statement runs once per row, the results in order;
    more rows than the server binds at once are refused."""
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack, unpack
    from flight_server.sql.service import MAX_BOUND_ROWS

    client, options = _raw_client(sql_server)
    with client:
        sql = "SELECT table_name, count(*) AS n FROM statistics WHERE table_name = ? AND partition IS NULL GROUP BY ALL"
        [result] = list(client.do_action(flight.Action("CreatePreparedStatement", pack(pb.ActionCreatePreparedStatementRequest(query=sql))), options))
        handle = unpack(result.body.to_pybytes()).prepared_statement_handle
        descriptor = flight.FlightDescriptor.for_command(pack(pb.CommandPreparedStatementQuery(prepared_statement_handle=handle)))
        for rows, refused in ((["shop", "events"], False), (["shop"] * (MAX_BOUND_ROWS + 1), True)):
            writer, reader = client.do_put(descriptor, pa.schema([("p", pa.string())]), options)
            if refused:
                with pytest.raises(flight.FlightError, match="parameter rows"):
                    writer.write_table(pa.table({"p": rows}), max_chunksize=100)
                    writer.done_writing()
                    reader.read()
                    writer.close()
                continue
            writer.write_table(pa.table({"p": rows}))
            writer.done_writing()
            reader.read()
            writer.close()
        info = client.get_flight_info(descriptor, options)  # the two rows bound first
        got = client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist()
    assert got == [{"table_name": "shop", "n": 5}, {"table_name": "events", "n": 3}]


def test_statement_ticket_and_schema(sql_server) -> None:  # noqa: ANN001
    """CommandStatementQuery: GetSchema, and GetFlightInfo whose ticket is a TicketStatementQuery."""
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack, unpack

    client, options = _raw_client(sql_server)
    with client:
        descriptor = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query='SELECT table_name, "rows" FROM tables ORDER BY 1')))
        assert client.get_schema(descriptor, options).schema.names == ["table_name", "rows"]
        info = client.get_flight_info(descriptor, options)
        assert isinstance(unpack(info.endpoints[0].ticket.ticket), pb.TicketStatementQuery)
        assert client.do_get(info.endpoints[0].ticket, options).read_all().to_pylist() == [
            {"table_name": "events", "rows": 2000},
            {"table_name": "shop", "rows": 1000},
        ]


def test_keys_are_empty_and_other_commands_refused_clearly(sql_server) -> None:  # noqa: ANN001
    from google.protobuf import any_pb2

    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack

    client, options = _raw_client(sql_server)
    with client:
        for message, first in (
            (pb.CommandGetPrimaryKeys(table="statistics"), "catalog_name"),
            (pb.CommandGetExportedKeys(table="statistics"), "pk_catalog_name"),
            (pb.CommandGetImportedKeys(table="statistics"), "pk_catalog_name"),
        ):
            info = client.get_flight_info(flight.FlightDescriptor.for_command(pack(message)), options)
            got = client.do_get(info.endpoints[0].ticket, options).read_all()
            assert got.num_rows == 0 and got.schema.names[0] == first
        unknown = any_pb2.Any(type_url="type.googleapis.com/arrow.flight.protocol.sql.CommandGetXdbcTypeInfo", value=b"")
        with pytest.raises(flight.FlightError, match="CommandGetXdbcTypeInfo is not supported"):
            client.get_flight_info(flight.FlightDescriptor.for_command(unknown.SerializeToString()), options)
        with pytest.raises(flight.FlightError, match="read-only"):
            client.get_flight_info(flight.FlightDescriptor.for_command(pack(pb.CommandStatementUpdate(query="DELETE FROM tables"))), options)


# ================================================================ security
def test_a_token_is_required(sql_server) -> None:  # noqa: ANN001
    for token in (None, "wrong-token-0123456789"):
        with pytest.raises(Exception, match="(?i)unauthenticated") as caught:
            with _connect(sql_server, token) as c:
                query(c, "SELECT * FROM tables")
        assert "Traceback" not in str(caught.value)


def test_tls_and_tokens_as_the_flight_api(sql_data: SqlData) -> None:
    """The SQL face is behind the server's TLS: ADBC trusting the certificate gets answers."""
    import adbc_driver_flightsql as fs

    from engine.tokens import Token

    cert, key = self_signed_cert("localhost")
    with running_server(sql_data.store, tls_cert=cert, tls_key=key, tokens=[Token.of(GOOD_TOKEN)], allow_analyze=False) as server:
        assert server.location.startswith("grpc+tls://")
        options = {
            fs.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {GOOD_TOKEN}",
            fs.DatabaseOptions.TLS_ROOT_CERTS.value: cert.decode(),
        }
        with adbc.connect(server.location, db_kwargs=options, autocommit=True) as c:
            assert query(c, "SELECT count(*) AS n FROM tables").to_pylist() == [{"n": 2}]
        plain = server.location.replace("grpc+tls://", "grpc://")
        with pytest.raises(adbc.Error), adbc.connect(plain, db_kwargs=options, autocommit=True) as c:  # plain text: no connection
            query(c, "SELECT count(*) FROM tables")


HOSTILE = [
    "CREATE TABLE t (a INT)",
    "CREATE VIEW v AS SELECT 1",
    "INSERT INTO statistics (table_name) VALUES ('x')",
    "UPDATE statistics SET row_count = 0",
    "DELETE FROM statistics",
    "DROP TABLE statistics",
    "CALL pragma_version()",
    "PRAGMA threads = 8",
    "SET threads = 8",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "EXPORT DATABASE '/tmp/flightsql-hostile-export'",
    "COPY (SELECT 1) TO '/tmp/flightsql-hostile-copy.csv'",
    "COPY statistics TO '/tmp/flightsql-hostile-copy.csv'",
    "ATTACH '/tmp/flightsql-hostile.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('/tmp/*.parquet')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM glob('/*')",
    "SELECT (SELECT count(*) FROM glob('/*'))",
    "WITH x AS (SELECT * FROM read_csv('/etc/passwd')) SELECT * FROM x",
    "SELECT * FROM tables UNION ALL SELECT * FROM read_csv('/etc/passwd')",
    "SELECT getenv('HOME')",
    "SELECT current_setting('home_directory')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM duckdb_settings",
    "SELECT * FROM duckdb_extensions()",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM query('SELECT 1')",
    "SELECT 1; SELECT 2",
    "DESCRIBE statistics",
    "EXPLAIN SELECT 1",
    "SELECT length(repeat('x', 2000000000))",  # one 2 GB value: beyond DuckDB's memory limit and interrupt()
    "SELECT length(lpad('x', 2000000000, 'y'))",
    "SELECT len(range(1000000000))",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_statements_are_refused(conn, sql: str) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match="refused") as caught:
        query(conn, sql)
    message = str(caught.value)
    assert "\n" not in message.strip() and "Traceback" not in message
    assert not list(Path("/tmp").glob("flightsql-hostile*"))  # nothing written
    assert query(conn, "SELECT count(*) AS n FROM tables").to_pylist() == [{"n": 2}]  # the server still answers


def test_a_query_past_the_time_limit_is_stopped(conn, sql_server) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match="time limit") as caught:
        query(conn, "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3")  # ~100 s
    assert "TIMEOUT" in str(caught.value)
    assert query(conn, "SELECT count(*) AS n FROM tables").to_pylist() == [{"n": 2}]


def test_concurrent_queries_do_not_interfere(sql_server) -> None:  # noqa: ANN001
    """Clients on their own connections at once, one of them stopped by the time limit:
    each gets its own answer (one DuckDB connection per query)."""
    from concurrent.futures import ThreadPoolExecutor

    expected = {
        "events": ["amount", "kind", "user_id"],
        "shop": ["color", "day", "id", "price", "region"],
    }

    def ask(i: int) -> object:
        with _connect(sql_server) as c:
            if i == 0:
                with pytest.raises(adbc.Error, match="time limit"):
                    query(c, "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3")
                return "stopped"
            table = ("events", "shop")[i % 2]
            answers = []
            for _ in range(5):
                sql = f"SELECT column_name FROM statistics WHERE table_name = '{table}' AND partition IS NULL AND {i} = {i} ORDER BY 1"
                answers.append(query(c, sql).column("column_name").to_pylist())
            return table, answers

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(ask, range(6)))
    assert results[0] == "stopped"
    for table, answers in results[1:]:
        assert answers == [expected[table]] * 5


def test_a_result_past_the_row_limit_is_refused(conn) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match=f"more than {MAX_ROWS:,} rows"):
        query(conn, f"SELECT * FROM range({MAX_ROWS + 1})")
    assert len(query(conn, f"SELECT * FROM range({MAX_ROWS})")) == MAX_ROWS


def test_bad_sql_is_a_clear_error(conn) -> None:  # noqa: ANN001
    with pytest.raises(Exception, match="bad request") as caught:
        query(conn, "SELECT nonsense FROM statistics")
    assert "nonsense" in str(caught.value)
    with pytest.raises(Exception, match="unknown table 'nope'"):
        query(conn, "SELECT * FROM nope")


# ================================================================ pushdown by table
def test_a_query_on_one_table_reads_only_that_tables_files(sql_data: SqlData, tmp_path: Path) -> None:
    """The events table's statistics files are damaged in a copy of the store: queries
    restricted to shop (a literal, an IN list, a bound parameter) never read them."""
    from engine.tokens import Token

    store = tmp_path / "store"
    shutil.copytree(sql_data.store, store)
    for name in ("statistics.parquet", "frequencies.parquet"):
        for f in (store / "events").rglob(name):
            f.write_bytes(b"damaged")
    with running_server(str(store), tokens=[Token.of(GOOD_TOKEN)], allow_analyze=False) as server, _connect(server) as c:
        for sql, params in [
            ("SELECT count(*) AS n FROM statistics WHERE table_name = 'shop'", None),
            ("SELECT count(*) AS n FROM statistics s WHERE s.table_name IN ('shop') AND s.partition IS NULL", None),
            ("SELECT count(*) AS n FROM frequencies WHERE column_name = 'color' AND table_name = ?", ("shop",)),
        ]:
            assert query(c, sql, params).column("n")[0].as_py() > 0
        with pytest.raises(Exception, match="damaged"):
            query(c, "SELECT count(*) FROM statistics")
        with pytest.raises(Exception, match="damaged"):  # an OR may need every table
            query(c, "SELECT count(*) FROM statistics WHERE table_name = 'shop' OR row_count > 0")


@settings(max_examples=25, deadline=None)
@given(
    system=st.sampled_from(["statistics", "frequencies", "histograms", "files"]),
    names=st.lists(st.sampled_from(["shop", "events", "nope", "o'hare"]), min_size=1, max_size=3),
    form=st.sampled_from(["in", "qualified", "param"]),
)
def test_restricting_by_table_name_equals_filtering_everything(conn, system: str, names: list[str], form: str) -> None:  # noqa: ANN001
    """Law: a query built only from the tables its table_name predicate names answers what
    the query over every table, filtered afterwards, answers."""
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    everything = query(conn, f"SELECT * FROM {system}").to_pylist()
    if form == "param":
        got = query(conn, f"SELECT * FROM {system} WHERE table_name = ?", (names[0],)).to_pylist()
        wanted = {names[0]}
    elif form == "in":
        got = query(conn, f"SELECT * FROM {system} WHERE table_name IN ({quoted})").to_pylist()
        wanted = set(names)
    else:
        first = "'" + names[0].replace("'", "''") + "'"
        got = query(conn, f"SELECT * FROM {system} WHERE {system}.table_name = {first} AND 1 = 1").to_pylist()
        wanted = {names[0]}
    assert sorted(map(repr, got)) == sorted(repr(r) for r in everything if r["table_name"] in wanted)


def test_table_filters_are_conservative() -> None:
    """Which metastore tables a query can need (pure: DuckDB's parse tree)."""
    from flight_server.sql.engine import _database
    from flight_server.sql.guard import check, table_filters

    con = _database()
    cases = {
        "SELECT * FROM statistics WHERE table_name = 'a'": {"statistics": {"a"}},
        "SELECT * FROM statistics WHERE 'a' = table_name AND row_count > 1": {"statistics": {"a"}},
        "SELECT * FROM statistics s WHERE s.table_name IN ('a', 'b')": {"statistics": {"a", "b"}},
        "SELECT * FROM statistics WHERE table_name = ?": {"statistics": {"p"}},
        "SELECT * FROM statistics WHERE table_name = 'a' OR table_name = 'b'": {"statistics": None},
        "SELECT * FROM statistics WHERE upper(table_name) = 'A'": {"statistics": None},
        "SELECT * FROM statistics WHERE table_name LIKE 'a%'": {"statistics": None},
        "SELECT * FROM statistics s JOIN tables t USING (table_name) WHERE t.table_name = 'a'": {"statistics": None, "tables": None},
        "SELECT * FROM tables WHERE table_name = 'a' UNION ALL SELECT * FROM tables": {"tables": None},
        "SELECT * FROM tables WHERE table_name = 'a' UNION ALL SELECT * FROM tables WHERE table_name = 'b'": {"tables": {"a", "b"}},
        "WITH x AS (SELECT * FROM frequencies WHERE table_name = 'a') SELECT * FROM x": {"frequencies": {"a"}},
        "SELECT * FROM histograms h WHERE x.table_name = 'a'": {"histograms": None},
    }
    for sql, want in cases.items():
        got = table_filters(check(sql, con), ("p",))
        assert {k: (None if v is None else set(v)) for k, v in got.items()} == want, sql


# ================================================================ the serve command, generated code
def test_serve_options_reach_the_server(sql_data: SqlData) -> None:
    args = ["--store", sql_data.store, "--poll-interval", "0", "--sql-timeout", "7.5", "--sql-max-rows", "123"]
    with serve_process(args) as (_, location, _lines):
        from flight_server.client import MetastoreClient

        with MetastoreClient(location) as client:
            assert client.health()["sql"] == {"enabled": True, "timeout_s": 7.5, "max_rows": 123}
    with serve_process(["--store", sql_data.store, "--poll-interval", "0", "--no-sql"]) as (_, location, _lines):
        from flight_server.sql import flight_sql_pb2 as pb
        from flight_server.sql.protocol import pack

        client = flight.FlightClient(location)
        with client, pytest.raises(flight.FlightError, match="SQL is disabled"):
            client.get_flight_info(flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query="SELECT 1"))))


def test_serve_help_names_the_sql_options() -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    out = CliRunner().invoke(metastore, ["serve", "--help"]).output
    for option in ("--no-sql", "--sql-timeout", "--sql-max-rows", "FLIGHT_SQL.md"):
        assert option in out


def test_generated_code_is_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    proto = "flight_server/sql/flight_sql.proto"
    (tmp_path / "flight_server" / "sql").mkdir(parents=True)
    shutil.copy(ROOT / proto, tmp_path / proto)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", proto], cwd=tmp_path, check=True)
    fresh = "# ruff: noqa\n" + (tmp_path / "flight_server" / "sql" / "flight_sql_pb2.py").read_text()
    assert (ROOT / "flight_server" / "sql" / "flight_sql_pb2.py").read_text() == fresh, "stale: run scripts/gen_proto.sh"


def test_only_results_fixed_by_the_published_states_are_kept() -> None:
    """Results are kept per resolver generation only when the published states fix them."""
    from flight_server.sql.engine import _database
    from flight_server.sql.guard import check

    con = _database()
    assert check("SELECT * FROM statistics WHERE table_name = ?", con).cacheable
    assert check("SELECT count(*) FROM frequencies f JOIN histograms h USING (table_name)", con).cacheable
    for sql in (
        "SELECT * FROM tables",  # stale_by changes with the source, not the store
        "SELECT * FROM history",  # a pruned catalog
        "SELECT now(), * FROM statistics",
        "SELECT random() FROM statistics",
        "SELECT * FROM statistics WHERE current_date > DATE '2020-01-01'",
        "SELECT gen_random_uuid() FROM files",
    ):
        assert not check(sql, con).cacheable, sql
