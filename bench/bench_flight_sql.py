#!/usr/bin/env python
"""The Flight SQL face against the Flight API: one table's statistics, sequential calls.

One server in this process on 127.0.0.1 (port 0, a bearer token), then ``--calls`` calls of
each kind after ``--warmup`` (both warm: the lookups' caches, the server's result cache and
the SQL face's built parts are what a server in service has), the kinds interleaved - one
call of each in turn - so the ratios hold on a loaded machine:

- ``flight_api``: ``MetastoreClient.statistics(table)`` (the table-level statistics);
- ``adbc``: the same rows through the ADBC Flight SQL driver, as a BI tool or notebook
  sends them: ``cursor.execute("SELECT * FROM statistics WHERE table_name = ? AND
  partition IS NULL", (table,))`` + ``fetch_arrow_table()`` (the driver prepares, binds
  with DoPut, executes and reads);
- ``adbc_literal``: the same with the table name inline (no parameter: the driver keeps the
  statement prepared for the same text, so a call is GetFlightInfo + DoGet);
- ``flight_sql_statement``: the Flight SQL statement calls alone (pyarrow's Flight client:
  GetFlightInfo of a CommandStatementQuery with the table name inline, then DoGet);
- ``flight_sql_prepared``: the three calls the ADBC driver makes for ``adbc`` (DoPut binding
  the parameter, GetFlightInfo, DoGet) through pyarrow's Flight client, on a statement
  prepared once: ``adbc`` minus this is the ADBC client's own cost;
- ``flight_sql_statement_fresh``: the same with a new query text each call (an extra
  predicate), so nothing is answered from the SQL face's caches of checked queries and
  results: parse, check, DuckDB run (the built system-table parts stay warm).

Reports p50 / p99 per kind and the ratio of each SQL p50 to the Flight API's (issue #29's
target: within 3x). The data: ``--store DIR --table NAME``, else the sample table
(engine.sample, 20,000 rows, 4 partitions) analyzed on a local Ray under ``--work``.

Usage: python bench/bench_flight_sql.py [--calls 200] [--warmup 20] [--store DIR --table NAME] [--work DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKEN = "bench-token-0123456789"


def prepare(work: Path) -> tuple[str, str]:
    from engine.api import analyze
    from engine.sample import generate_table

    store, table = work / "store", work / "sales"
    if not (store / "sales").exists():
        generate_table(str(table), rows=20_000, partitions=4, seed=0)
        analyze(str(table), store=str(store), user_statistics=[])
        import ray

        ray.shutdown()
    return str(store), "sales"


def interleaved(kinds: dict[str, Callable[[], Any]], calls: int, warmup: int) -> dict[str, dict[str, float]]:
    """p50 / p99 per kind, the kinds' calls interleaved (one of each in turn), so a change in
    the machine's load moves every kind alike."""
    for _ in range(warmup):
        for fn in kinds.values():
            fn()
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(calls):
        for kind, fn in kinds.items():
            t0 = time.perf_counter()
            fn()
            times[kind].append(time.perf_counter() - t0)
    out = {}
    for kind, ts in times.items():
        ts.sort()
        out[kind] = {
            "p50_ms": round(statistics.median(ts) * 1e3, 3),
            "p99_ms": round(ts[min(len(ts) - 1, int(len(ts) * 0.99))] * 1e3, 3),
            "calls": calls,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--store")
    ap.add_argument("--table")
    ap.add_argument("--work", default="/tmp/metastore-bench-flight-sql")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.store:
        store, table = args.store, args.table
    else:
        Path(args.work).mkdir(parents=True, exist_ok=True)
        store, table = prepare(Path(args.work))

    import adbc_driver_flightsql as fs
    import adbc_driver_flightsql.dbapi as flight_sql
    import pyarrow as pa
    import pyarrow.flight as flight

    from engine.tokens import Token
    from flight_server.client import MetastoreClient
    from flight_server.server import MetastoreFlightServer, ServerConfig
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack, unpack

    server = MetastoreFlightServer(ServerConfig(store=store, port=0, tokens=[Token.of(TOKEN)], poll_interval=0, allow_analyze=False))
    results: dict[str, Any] = {"table": table, "calls": args.calls, "interleaved": True}
    sql = "SELECT * FROM statistics WHERE table_name = ? AND partition IS NULL"
    literal = sql.replace("?", "'" + table.replace("'", "''") + "'")
    try:
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(MetastoreClient(server.location, token=TOKEN))
            rows = client.statistics(table).num_rows
            uri = server.location.replace("grpc+tcp://", "grpc://")
            conn = stack.enter_context(
                flight_sql.connect(uri, db_kwargs={fs.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {TOKEN}"}, autocommit=True)
            )
            bound_cursor, literal_cursor = stack.enter_context(conn.cursor()), stack.enter_context(conn.cursor())  # one statement each
            raw = flight.FlightClient(server.location)
            stack.callback(raw.close)
            options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
            descriptor = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query=literal)))
            created = list(raw.do_action(flight.Action("CreatePreparedStatement", pack(pb.ActionCreatePreparedStatementRequest(query=sql))), options))
            handle = unpack(created[0].body.to_pybytes()).prepared_statement_handle
            prepared = flight.FlightDescriptor.for_command(pack(pb.CommandPreparedStatementQuery(prepared_statement_handle=handle)))
            bound = pa.table({"parameter_1": [table]})
            counter = iter(range(10**9))

            def flight_api() -> None:
                assert client.statistics(table).num_rows == rows

            def adbc_call() -> None:
                bound_cursor.execute(sql, (table,))
                assert bound_cursor.fetch_arrow_table().num_rows == rows

            def adbc_literal() -> None:
                literal_cursor.execute(literal)
                assert literal_cursor.fetch_arrow_table().num_rows == rows

            def statement() -> None:
                info = raw.get_flight_info(descriptor, options)
                assert raw.do_get(info.endpoints[0].ticket, options).read_all().num_rows == rows

            def prepared_call() -> None:
                writer, reader = raw.do_put(prepared, bound.schema, options)
                writer.write_table(bound)
                writer.done_writing()
                reader.read()
                writer.close()
                info = raw.get_flight_info(prepared, options)
                assert raw.do_get(info.endpoints[0].ticket, options).read_all().num_rows == rows

            def fresh() -> None:
                text = f"{literal} AND row_count > -{next(counter) + 1}"  # a new text: checked and run by DuckDB
                d = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query=text)))
                info = raw.get_flight_info(d, options)
                assert raw.do_get(info.endpoints[0].ticket, options).read_all().num_rows == rows

            kinds = {
                "flight_api": flight_api,
                "adbc": adbc_call,
                "adbc_literal": adbc_literal,
                "flight_sql_statement": statement,
                "flight_sql_prepared": prepared_call,
                "flight_sql_statement_fresh": fresh,
            }
            results.update(interleaved(kinds, args.calls, args.warmup))
    finally:
        server.shutdown()
    base = results["flight_api"]["p50_ms"]
    for kind in ("adbc", "adbc_literal", "flight_sql_statement", "flight_sql_prepared", "flight_sql_statement_fresh"):
        results[kind]["ratio_to_flight_api_p50"] = round(results[kind]["p50_ms"] / base, 2)
    results["statistics_rows"] = rows
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
