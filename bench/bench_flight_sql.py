#!/usr/bin/env python
"""The Flight SQL face against the Flight API: one table's statistics, sequential calls.

One server in this process on 127.0.0.1 (port 0, a bearer token), then, each
``--calls`` times in a row after ``--warmup`` calls (both warm: the lookups' caches, the
server's result cache and the SQL face's built parts are what a server in service has):

- ``flight_api``: ``MetastoreClient.statistics(table)`` (the table-level statistics);
- ``adbc``: the same rows through the ADBC Flight SQL driver, as a BI tool or notebook
  sends them: ``cursor.execute("SELECT * FROM statistics WHERE table_name = ? AND
  partition IS NULL", (table,))`` + ``fetch_arrow_table()`` (the driver prepares, binds
  with DoPut, executes and reads);
- ``adbc_literal``: the same with the table name inline (no parameter: the driver keeps the
  statement prepared for the same text, so a call is GetFlightInfo + DoGet);
- ``flight_sql_statement``: the Flight SQL statement calls alone (pyarrow's Flight client:
  GetFlightInfo of a CommandStatementQuery with the table name inline, then DoGet);
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


def timed(fn: Callable[[], Any], calls: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times) * 1e3, 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3, 3),
        "calls": calls,
    }


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
    import pyarrow.flight as flight

    from engine.tokens import Token
    from flight_server.client import MetastoreClient
    from flight_server.server import MetastoreFlightServer, ServerConfig
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack

    server = MetastoreFlightServer(ServerConfig(store=store, port=0, tokens=[Token.of(TOKEN)], poll_interval=0, allow_analyze=False))
    results: dict[str, Any] = {"table": table, "calls": args.calls}
    try:
        sql = "SELECT * FROM statistics WHERE table_name = ? AND partition IS NULL"
        with MetastoreClient(server.location, token=TOKEN) as client:
            rows = client.statistics(table).num_rows
            results["flight_api"] = timed(lambda: client.statistics(table), args.calls, args.warmup)
        uri = server.location.replace("grpc+tcp://", "grpc://")
        with flight_sql.connect(uri, db_kwargs={fs.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {TOKEN}"}, autocommit=True) as conn:
            cur = conn.cursor()

            def adbc_call() -> None:
                cur.execute(sql, (table,))
                assert cur.fetch_arrow_table().num_rows == rows

            results["adbc"] = timed(adbc_call, args.calls, args.warmup)
            literal = sql.replace("?", "'" + table.replace("'", "''") + "'")

            def adbc_literal() -> None:
                cur.execute(literal)
                assert cur.fetch_arrow_table().num_rows == rows

            results["adbc_literal"] = timed(adbc_literal, args.calls, args.warmup)
            cur.close()
        raw = flight.FlightClient(server.location)
        options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
        descriptor = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query=literal)))

        def statement() -> None:
            info = raw.get_flight_info(descriptor, options)
            assert raw.do_get(info.endpoints[0].ticket, options).read_all().num_rows == rows

        results["flight_sql_statement"] = timed(statement, args.calls, args.warmup)
        counter = iter(range(10**9))

        def fresh() -> None:
            text = f"{literal} AND row_count > -{next(counter) + 1}"  # a new text: checked and run by DuckDB
            d = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query=text)))
            info = raw.get_flight_info(d, options)
            assert raw.do_get(info.endpoints[0].ticket, options).read_all().num_rows == rows

        results["flight_sql_statement_fresh"] = timed(fresh, args.calls, args.warmup)
        raw.close()
    finally:
        server.shutdown()
    base = results["flight_api"]["p50_ms"]
    for kind in ("adbc", "adbc_literal", "flight_sql_statement", "flight_sql_statement_fresh"):
        results[kind]["ratio_to_flight_api_p50"] = round(results[kind]["p50_ms"] / base, 2)
    results["statistics_rows"] = rows
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
