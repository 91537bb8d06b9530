"""``metastore query``: ask a Metastore Flight server (the body is engine/cli/flight.py)."""

from __future__ import annotations

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.options import DURATION_HELP, Duration, columns_option, partition_option, split_columns, where_option
from flight_server.requests import CLI_NAMES

#: what ``metastore query`` asks: the requests of flight_server/requests.py with a CLI name (the choices of its KIND
#: argument; engine/cli/flight.py answers each). That module imports neither pyarrow nor the engine: --help stays fast.
QUERY_KINDS = CLI_NAMES


@command(short_help="Ask a Metastore Flight server (tables, statistics, top, histogram, partitions, files, ...).")
@click.argument("kind", type=click.Choice(QUERY_KINDS))
@click.argument("table", required=False)
@click.option("--server", metavar="URI", help="Flight server [env: METASTORE_FLIGHT; default grpc://127.0.0.1:8815].")
@click.option("--token", help="Bearer token; `ps` shows it to other local users: prefer METASTORE_FLIGHT_TOKEN or --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False), help="A file whose first token is sent.")
@click.option("--tls-root-cert", type=click.Path(dir_okay=False), help="PEM root certificate for a grpc+tls server.")
@columns_option("Column(s) (repeat or comma-separate).")
@partition_option("One partition (e.g. part=03).")
@click.option("--partitions", metavar="K1,K2|*", help="statistics: several partitions, or * for all.")
@click.option("--statistic", "statistics", multiple=True, metavar="S", help="statistics: only these statistics (repeatable).")
@click.option("--top", "-k", type=click.IntRange(min=0), default=20, show_default=True, help="top: how many values.")
@click.option("--bins", metavar="START:STOP", help="histogram: a bin range.")
@click.option("--lo", metavar="VALUE", help="histogram: bins overlapping values >= VALUE.")
@click.option("--hi", metavar="VALUE", help="histogram: bins overlapping values <= VALUE.")
@where_option(
    "partitions, files: the predicate (e.g. \"city = 'Berlin' and price > 5\", docs/PREDICATES.md); "
    "statistics, top, histogram: of the rows matching it (estimates marked ~, docs/SUBSETS.md)."
)
@click.option("--exact", is_flag=True, help="With --where: computed on the data (the server must allow it).")
@click.option("--at", "at_transaction", type=click.IntRange(min=1), metavar="TXN", help="The state right after catalog transaction TXN.")
@click.option("--at-snapshot", metavar="SNAP", help="The state of table snapshot SNAP.")
@click.option("--typed", is_flag=True, help="top: values in the column's type (--output json), not their text form.")
@click.option("--name", metavar="NAME", help="analyze: the table's name in the server's store (default: the location's last component).")
@click.option("--wait", is_flag=True, help="analyze: wait for the job and print its final status.")
@click.option("--timeout", type=Duration(minimum=0.1), default="30s", show_default=True, help=f"Per call ({DURATION_HELP}).")
@common_options(store=False)
@click.pass_obj
def query(
    settings: Settings, kind: str, table: str | None, server: str | None, token: str | None, token_file: str | None,
    tls_root_cert: str | None, columns: tuple[str, ...], partition: str | None, partitions: str | None,
    statistics: tuple[str, ...], top: int, bins: str | None, lo: str | None, hi: str | None, where: str | None,
    exact: bool, at_transaction: int | None, at_snapshot: str | None, typed: bool, name: str | None, wait: bool, timeout: float,
) -> None:  # fmt: skip
    """Ask a Metastore Flight server (see `metastore serve`): every request of the
    protocol (statistics, top, histogram, partitions, files) and every action
    (health, history, staleness, refresh, analyze, analyze-status); docs/FLIGHT.md.

    \b
    Examples:
      metastore query tables
      metastore query statistics sales -c price,city
      metastore query statistics sales -c price --partitions '*' --statistic min --statistic max
      metastore query statistics sales -c price --where "city = 'Berlin'"     a subset (~: estimates)
      metastore query top sales -c city -k 5 --at 3
      metastore query histogram sales -c price --lo 10 --hi 20
      metastore query partitions sales --where 'event_date >= 2024-10-01'
      metastore query files sales --where "city in ('Berlin', 'Paris') and price between 10 and 20"
      metastore query history sales                  newest first, as metastore history
      metastore query staleness sales
      metastore query analyze /data/lake/sales --name sales --wait    (a server with --analyze-root)
      metastore query analyze-status JOB
    """
    from engine.cli import flight as flight_cli

    if at_transaction is not None and at_snapshot is not None:
        raise click.UsageError("give --at or --at-snapshot, not both")
    options = flight_cli.QueryOptions(
        columns=split_columns(columns), partition=partition, partitions=partitions, statistics=list(statistics) or None,
        k=top, bins=bins, lo=lo, hi=hi, where=where, exact=exact, at_transaction=at_transaction, at_snapshot=at_snapshot,
        typed=typed, name=name, wait=wait,
    )  # fmt: skip
    doc = flight_cli.query(server, token, token_file, tls_root_cert, kind, table, options, timeout)
    flight_cli.print_query(doc, settings.json)
