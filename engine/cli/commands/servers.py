"""The long-running servers over a store: ``metastore serve`` (Arrow Flight, flight_server/, docs/FLIGHT.md) and ``metastore ui`` (the web app, docs/UI.md)."""

from __future__ import annotations

from typing import Any

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.options import DURATION_HELP, Duration


@command(short_help="Serve the statistics of a store over Arrow Flight.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: tokens required).")
@click.option("--port", type=click.IntRange(0, 65535), default=8815, show_default=True, help="Port (0: any free port).")
@click.option(
    "--token", "tokens", multiple=True, metavar="TOKEN",
    help="A bearer token clients must send (repeatable). Visible to every local user in `ps`: "
    "prefer METASTORE_FLIGHT_TOKEN or --token-file.",
)  # fmt: skip
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="Tokens, one a line, optionally with an ISO 8601 expiry; re-read when it changes; unreadable or invalid: every call refused.",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="PEM certificate chain: serve grpc+tls.")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="PEM private key of --tls-cert.")
@click.option("--no-auth", is_flag=True, help="Allow a non-loopback address without tokens.")
@click.option(
    "--poll-interval",
    type=Duration(),
    default="2s",
    show_default=True,
    help=f"Time between checks for newly published statistics ({DURATION_HELP}; 0: only on refresh).",
)
@click.option(
    "--analyze-root", "analyze_roots", multiple=True, metavar="DIR_OR_URI",
    help="Enable the analyze action for tables under this location (repeatable); without one the action is refused.",
)  # fmt: skip
@click.option("--no-analyze", is_flag=True, help="Refuse the analyze action (and exact subsets) even with --analyze-root.")
@click.option(
    "--no-exact", is_flag=True,
    help="Refuse exact subsets (\"exact\": true, computed on the data: they disclose rows) even with --analyze-root.",
)  # fmt: skip
@click.option(
    "--max-exact-jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Exact subsets computed at once (more: refused, busy)."
)
@click.option(
    "--exact-rate", type=click.IntRange(min=1), default=10, show_default=True,
    help="Exact subsets computed per client address per minute (answers already computed do not count).",
)  # fmt: skip
@click.option(
    "--exact-cache-mb", type=click.IntRange(min=0), default=256, show_default=True,
    help="MiB of computed subsets kept under the store; the least recently used are deleted.",
)  # fmt: skip
@click.option("--allow-source-change", is_flag=True, help="Let analyze publish over a table whose statistics came from another location.")
@click.option("--health-store", is_flag=True, help="Name the store and analyze roots in health on a server without tokens too.")
@click.option("--no-sql", is_flag=True, help="Turn off the Flight SQL face (SELECT over the statistics; docs/FLIGHT_SQL.md).")
@click.option("--sql-timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds per SQL query (then stopped).")
@click.option("--sql-max-rows", type=click.IntRange(min=1), default=1_000_000, show_default=True, help="Rows per SQL result (more: refused).")
@click.option(
    "--processes", type=click.IntRange(min=1), default=1, show_default=True,
    help="Server processes, one port each from --port (Arrow Flight cannot share a port: spread clients or put a gRPC balancer "
    "in front); limits and caches are per process; not with the analyze action.",
)  # fmt: skip
@common_options()
@click.pass_obj
def serve(
    settings: Settings, host: str, port: int, tokens: tuple[str, ...], token_file: str | None, tls_cert: str | None,
    tls_key: str | None, no_auth: bool, poll_interval: float, analyze_roots: tuple[str, ...], no_analyze: bool,
    no_exact: bool, max_exact_jobs: int, exact_rate: int, exact_cache_mb: int, allow_source_change: bool, health_store: bool,
    no_sql: bool, sql_timeout: float, sql_max_rows: int, processes: int,
) -> None:  # fmt: skip
    """Serve the published statistics of every table in the store over Arrow Flight.

    \b
    Tokens: METASTORE_FLIGHT_TOKEN=... or --token-file FILE keep them out of the
    process list; --token shows them to every local user (`ps`).
    The analyze action is off unless --analyze-root names what it may read; so are
    exact subsets (--where ... --exact over Flight: they disclose rows).
    docs/reference/FLIGHT.md#security-model says who may do what.

    \b
    Examples:
      metastore serve --store .metastore
      METASTORE_FLIGHT_TOKEN=... metastore serve --store .metastore --analyze-root /data/lake
      metastore serve --host 0.0.0.0 --token-file tokens.txt --tls-cert cert.pem --tls-key key.pem
      metastore serve --store .metastore --port 8815 --processes 2    # ports 8815 and 8816
    """
    from engine.cli import flight as flight_cli

    arguments: dict[str, Any] = dict(
        store=settings.store, host=host, tokens=tokens, token_file=token_file, tls_cert=tls_cert, tls_key=tls_key,
        no_auth=no_auth, poll_interval=poll_interval, allow_analyze=not no_analyze, analyze_roots=analyze_roots,
        allow_source_change=allow_source_change, health_store=health_store,
        exact={"allow_exact": not no_exact, "max_exact_jobs": max_exact_jobs, "exact_rate": exact_rate,
               "exact_cache_bytes": exact_cache_mb * 1024 * 1024},
        sql={"sql": not no_sql, "sql_timeout": sql_timeout, "sql_max_rows": sql_max_rows},
    )  # fmt: skip

    def echo(line: str) -> None:
        click.echo(line, err=True)

    if processes > 1:
        from engine.cli.processes import serve_processes

        serve_processes(processes, port, arguments, echo)
    else:
        flight_cli.serve(port=port, echo=echo, **arguments)


@command(short_help="A local web app previewing the statistics of a store's tables (read-only).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: tokens required, as for serve).")
@click.option("--port", type=click.IntRange(0, 65535), default=8816, show_default=True, help="Port (0: any free port).")
@click.option(
    "--token", "tokens", multiple=True, metavar="TOKEN", help="A bearer token clients must send (repeatable) [env: METASTORE_FLIGHT_TOKEN]."
)
@click.option(
    "--token-file", type=click.Path(dir_okay=False), help="Tokens, one a line, optionally with an ISO 8601 expiry; re-read when it changes."
)
@click.option("--no-auth", is_flag=True, help="Allow a non-loopback address without tokens.")
@common_options()
@click.pass_obj
def ui(settings: Settings, host: str, port: int, tokens: tuple[str, ...], token_file: str | None, no_auth: bool) -> None:
    """Serve a read-only web app over the store: the table list, a page per table
    with one card per column (histograms, top values, percentiles), a partition
    beside the table, earlier catalog states, and JSON endpoints (docs/UI.md).

    \b
    Examples:
      metastore ui --store .metastore                open http://127.0.0.1:8816/
      metastore ui --store s3://bucket/stats --port 0
      metastore ui --host 0.0.0.0 --token-file tokens.txt
    """
    from engine.ui import app

    app.serve(settings.store, host, port, list(tokens), token_file, no_auth, echo=lambda line: click.echo(line, err=True))
