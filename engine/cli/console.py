"""The ``metastore`` command line: analyze tables, look at their statistics.

A click group modelled on pyiceberg's CLI: global options on the group (also
accepted after the command name), every command builds a plain document and an
:class:`engine.cli.output.Output` prints it as rich text or JSON. Errors
Metastore raises on purpose (and missing files / permissions) become one line
on stderr and exit code 1; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import json
import shlex
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from engine import config
from engine.cli.options import DURATION_HELP, Duration, columns_option, partition_option, where_option
from engine.cli.output import SKETCH_STATISTICS, Output, make_output, regroup
from engine.exceptions import InvalidArgumentError, MetastoreError
from engine.sources import registry as formats

#: metastore query's kinds (engine.cli.flight.QUERY_KINDS: not imported here, keeps --help fast)
QUERY_KINDS = (
    "tables", "health", "statistics", "top", "histogram", "partitions", "files", "history", "staleness", "refresh",
    "analyze", "analyze-status",
)  # fmt: skip
DEFAULT_STORE = ".metastore"  # engine.api.DEFAULT_STORE (not imported here: keeps --help fast)
STORE_ENV = config.STORE.name
DEMO_TABLE = "sample"

#: Errors shown as one line (exit 1) instead of a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (MetastoreError, FileNotFoundError, PermissionError)

_OVERVIEW_STATISTICS = [
    "type", "unsupported", "row_count", "null_count", "nan_count",
    "distinct_count", "distinct_count_exact", "min", "max", "mean",
]  # fmt: skip


# ============================================================== settings and group
@dataclass
class Settings:
    store: str = DEFAULT_STORE
    output: str = "text"
    debug: bool = False

    @property
    def json(self) -> bool:
        return self.output == "json"

    def out(self) -> Output:
        return make_output(self.output)


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines) if lines else type(exc).__name__


#: commands whose TABLE argument is a table's location, not a name in the store
#: (quantiles: a location, or a name of the store it checks itself when it is one)
#: (query: a name, checked in engine/cli/flight.py, except query analyze's location)
TABLE_IS_A_LOCATION = frozenset({"analyze", "publish", "quantiles", "query"})


class MetastoreCommand(click.Command):
    """A command whose TABLE argument, a name in the store, is checked before it runs (engine/names.py):
    a name no file system takes is one line, not a traceback from the first path built of it."""

    def invoke(self, ctx: click.Context) -> Any:
        table = ctx.params.get("table")
        location = self.name in TABLE_IS_A_LOCATION and not (self.name == "quantiles" and ctx.params.get("approximate"))
        if isinstance(table, str) and not location:
            from engine.names import check_table_name

            check_table_name(table)
        return super().invoke(ctx)


class MetastoreGroup(click.Group):
    """Turns deliberate errors into ``error: ...`` on stderr and exit code 1."""

    command_class = MetastoreCommand

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            settings = ctx.find_object(Settings)
            if settings is not None and settings.debug:
                traceback.print_exception(exc, file=sys.stderr)
            click.echo(f"error: {one_line(exc)}", err=True)
            ctx.exit(1)


def _override(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """Callback of a command-level copy of a global option: overrides the group's value when given."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None and value is not False:
            setattr(ctx.ensure_object(Settings), name, value)

    return callback


def common_options(store: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--store/--output/--debug, also accepted after the command name (``metastore show t --output json``)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("--debug", is_flag=True, default=False, expose_value=False, callback=_override("debug"), help="Show tracebacks of errors.")(
            f
        )
        f = click.option(
            "--output", "-o", type=click.Choice(["text", "json"]), default=None, expose_value=False,
            callback=_override("output"), help="Output format (default: the global --output).",
        )(f)  # fmt: skip
        if store:
            f = click.option(
                "--store", "-s", metavar="DIR_OR_URI", default=None, expose_value=False,
                callback=_override("store"), help="Statistics store (default: the global --store).",
            )(f)  # fmt: skip
        return f

    return decorate


@click.group(cls=MetastoreGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--store", "-s", metavar="DIR_OR_URI", envvar=STORE_ENV, default=DEFAULT_STORE, show_default=True,
    help=f"Statistics store: a directory or an s3:// prefix [env: {STORE_ENV}].",
)  # fmt: skip
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Rich text for people or JSON for programs."
)
@click.option("--debug", is_flag=True, default=False, help="Show tracebacks of errors.")
@click.pass_context
def metastore(ctx: click.Context, store: str, output: str, debug: bool) -> None:
    """Metastore: column statistics of data-lake tables, computed on Ray.

    Analyze a table once; then read its statistics, top frequencies and
    histograms back per table or per partition.

    \b
    Examples:
      metastore demo                                 generate a sample table, analyze it, show it
      metastore analyze data/sales                   analyze a table into ./.metastore
      metastore analyze s3://bucket/sales --bins 10000 --columns price,city
      metastore tables                               tables with published statistics
      metastore show sales                           one row of statistics per column
      metastore show sales --column price --column city --top 5
      metastore show sales --partition part=03 --output json
      metastore show sales --at 2                    an earlier state (ids: metastore history sales)
      metastore history sales                        catalog transactions of a table, newest first
      metastore gc sales --dry-run                   statistics files no state references
      metastore config sales --retain-last 10 --retain-for 7d    the table's retention policy
      metastore expire sales --keep-last 5           let go of older states (and gc their files)
      metastore prune sales --before 12              drop the history before transaction 12
      metastore rebuild sales                        re-create the catalog from the files
      metastore verify sales                         check the catalog and every file (exit 1 on a problem)
      metastore quantiles data/sales price -q 0.5    exact quantiles by a distributed sort
      metastore partitions-of sales city Berlin      partitions holding a value (analyze --value-partitions)
      metastore ui                                   a web app over the store (http://127.0.0.1:8816/)
      metastore preview sales --html sales.html      one self-contained HTML page of a table
      metastore files sales --where "city = 'Berlin'"   data files that might hold matching rows
      metastore --store s3://bucket/stats show sales

    \b
    One meaning per short option in every command: -c column, -p partition,
    -k top, -w where, -q quantile (a probability; was -p in quantiles),
    -s store, -o output. Durations: 30s, 15m, 1h, 7d, 2w or seconds.
    """
    ctx.obj = Settings(store=store, output=output, debug=debug)


# ============================================================== documents
def analyze_doc(result: Any) -> dict[str, Any]:

    doc = asdict(result)
    doc["ray_start_s"] = result.timings.get("ray_start_s", 0.0)
    doc["files"] = result.run_uri
    return doc


def _decode(text: str | None, type_: Any) -> Any:
    """A stored text form as a Python value, exact (engine/pyvalues.py: nanoseconds, far dates)."""
    from engine import values
    from engine.pyvalues import python_value

    if text is None:
        return None
    try:
        return python_value(values.decode_scalar(text, type_))
    except MetastoreError:
        return text


def overview_doc(ts: Any, partition: str | None = None) -> dict[str, Any]:
    from engine.columns import display_name, display_path

    table = ts.statistics(partition=partition, statistics=_OVERVIEW_STATISTICS)
    rows = ts.state.rows if partition is None else next(p.rows for p in ts.partitions() if p.key == partition)
    columns = []
    for r in table.to_pylist():
        t = ts.column_type(r["column"])
        columns.append(
            {
                "column": display_name(r["column"]),  # as in the data (struct leaves: "s > x")
                "path": display_path(r["column"]),
                "type": r["type"] or str(t),
                "unsupported": r["unsupported"],
                "rows": r["row_count"],
                "nulls": r["null_count"],
                "nans": r["nan_count"],
                "distinct": r["distinct_count"],
                "distinct_exact": r["distinct_count_exact"],
                "min": _decode(r["min"], t),
                "max": _decode(r["max"], t),
                "mean": r["mean"],
            }
        )
    return {
        "table": ts.table,
        "job_id": ts.job_id,
        "snapshot": ts.snapshot,
        "partition": partition,
        "partitions": len(ts.state.partitions),
        "rows": rows,
        "columns": columns,
    }


def column_doc(ts: Any, column: str, partition: str | None = None, top: int = 10, bins_shown: int = 20) -> dict[str, Any]:
    """Full statistics (sketch sizes instead of bytes), top-k frequencies and a regrouped histogram."""
    from engine.columns import display_name, display_path
    from engine.files.layout import VALUE_STATISTICS
    from engine.pyvalues import python_value, python_values
    from engine.stats.histograms import HistogramDomain

    stored = ts.resolve_column(column)
    stats = ts.column_statistics(column, partition)
    # min, max and percentiles exactly, from their stored text (as_py() needs pandas for nanoseconds)
    present = [k for k in VALUE_STATISTICS if stats.get(k) is not None]
    if present:
        texts = ts.statistics([stored], partition, statistics=present).to_pylist()[0]
        t = ts.column_type(stored)
        stats.update({k: _decode(texts[k], t) for k in present})
    stats = {k: python_value(v) for k, v in stats.items()}
    if "column" in stats:
        stats["column"] = display_name(stored)
    sketches = ts.statistics([column], partition, statistics=list(SKETCH_STATISTICS)).to_pylist()[0]
    for name in SKETCH_STATISTICS:
        stats[name] = None if sketches.get(name) is None else len(sketches[name])
    doc: dict[str, Any] = {
        "column": display_name(stored),
        "path": display_path(stored),
        "type": stats.get("type"),
        "partition": partition,
        "statistics": stats,
        "top_frequencies": None,
        "histogram": None,
    }
    if stats.get("frequencies") is not None and top > 0:
        t = ts.top_frequencies(column, top, partition, typed=True)
        md = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
        kind, stored = md.get("kind", stats["frequencies"]), int(md.get("stored_rows", "0"))
        non_null = (stats.get("row_count") or 0) - (stats.get("null_count") or 0)
        values = [
            {"value": v, "frequency": f, "share": (f / non_null) if non_null else None}
            for v, f in zip(python_values(t.column("value")), t.column("frequency").to_pylist())
        ]
        note = None
        if kind == "all_distinct":
            note = "every value occurs exactly once: no frequencies are stored"
        elif kind == "duplicates_only":
            singles = (stats.get("distinct_count") or 0) - stored
            note = (
                f"only values that occur more than once are stored ({stored:,}); "
                f"{singles:,} other distinct value{'s occur' if singles != 1 else ' occurs'} once"
            )
        doc["top_frequencies"] = {"kind": kind, "k": top, "stored": stored, "values": values, "note": note}
    if stats.get("histogram_bins"):
        spec = ts.histogram_spec(column, partition)
        h = ts.histogram(column, partition)
        bins = [
            {"lower": lo, "upper": hi, "count": n}
            for lo, hi, n in zip(python_values(h.column("lower")), python_values(h.column("upper")), h.column("count").to_pylist())
        ]
        integer = spec is not None and spec.domain == HistogramDomain.INTEGER.value
        doc["histogram"] = {
            "bins": len(bins),
            "domain": spec.domain if spec else None,
            "counted": sum(b["count"] for b in bins),
            "upper_edges": "inclusive" if integer else "exclusive (the last one inclusive)",
            "buckets": regroup(bins, bins_shown),
        }
    return doc


# ============================================================== commands
def _open_table(store: str, table: str, at_transaction: int | None = None, at_snapshot: str | None = None) -> Any:
    """The table's statistics (an earlier state with ``at_*``); an unknown table's error names the tables the store has."""
    from engine.exceptions import StatisticsNotFoundError
    from engine.lookup import open_statistics
    from engine.store import Store

    try:
        return open_statistics(store, table, at_transaction=at_transaction, at_snapshot=at_snapshot)
    except StatisticsNotFoundError as exc:
        try:
            known = Store(store).tables()
        except Exception:  # noqa: BLE001 - only a hint
            known = []
        if table in known:
            raise
        hint = f"; tables in the store: {', '.join(known[:10])}" if known else "; the store has no tables (run metastore analyze first)"
        raise StatisticsNotFoundError(f"{exc}{hint}") from exc


def _columns_option(values: tuple[str, ...]) -> list[str] | None:
    names = [c.strip() for v in values for c in v.split(",") if c.strip()]
    return names or None


@metastore.command(short_help="Compute and publish the statistics of a table.")
@click.argument("table")
@click.option("--name", help="Table name in the store (default: the last component of TABLE).")
@click.option("--bins", type=click.Choice(["1000", "10000"]), default="1000", show_default=True, help="Histogram bins per column.")
@click.option("--columns", "-c", "columns", multiple=True, metavar="A,B,...", help="Only these columns (repeat or comma-separate).")
@click.option("--no-user-stats", is_flag=True, help="Do not compute the shipped example user statistics (zero_count, top1_share).")
@click.option("--no-inherit", is_flag=True, help="Recompute every partition, even those unchanged since the last analyze.")
@click.option("--tdigest", is_flag=True, help="Also keep a t-digest per numeric/time column (better approximate quantiles near the tails).")
@click.option(
    "--frequencies",
    type=click.Choice(["reduce", "redis"]),
    default="reduce",
    show_default=True,
    help="Table-level frequencies by Ray tasks merging value counts, or by the Bloom/Redis algorithm (docs/FREQUENCIES.md).",
)
@click.option(
    "--redis",
    "redis_url",
    metavar="URL",
    help="An existing Redis for --frequencies redis, e.g. rediss://:PASSWORD@HOST:6380/0 (default: $REDIS_URL, else start a private redis-server).",
)
@click.option(
    "--value-partitions", is_flag=True,
    help="Table-level frequencies also keep which partitions hold each value (metastore partitions-of); --frequencies reduce only.",
)  # fmt: skip
@click.option("--no-file-index", is_flag=True, help="Do not write the per-data-file column index (metastore files prunes with it).")
@click.option(
    "--bloom-columns",
    metavar="C1,C2|auto",
    help="Columns with per-file Bloom filters in the file index (equality and IN prune by them); 'auto': each partition's high-cardinality columns. Default: none.",
)
@click.option(
    "--format",
    "table_format",
    type=click.Choice(formats.NAMES),
    help="The table format (default: detected: _delta_log/, .hoodie/, metadata/*.metadata.json, else Parquet files).",
)
@click.option("--at-snapshot", metavar="ID", help="Analyze this snapshot: Iceberg snapshot id, Delta version, Hudi instant.")
@click.option("--as-of", metavar="TIME", help="Analyze the newest snapshot committed at or before TIME (ISO 8601, or epoch milliseconds).")
@click.option("--catalog", metavar="NAME", help="Load TABLE (db.table) from this pyiceberg catalog (.pyiceberg.yaml / PYICEBERG_CATALOG__NAME__*).")
@click.option(
    "--data-root",
    "data_roots",
    multiple=True,
    metavar="DIR_OR_URI",
    help="Files an Iceberg, Delta or Hudi table's metadata names may also lie here (default: only inside the table's location). Repeatable.",
)
@click.option(
    "--publish",
    "publish_to_table",
    is_flag=True,
    help="Then write the statistics into the Iceberg table's metadata (metastore publish; needs --catalog).",
)
@common_options()
@click.pass_obj
def analyze(
    settings: Settings,
    table: str,
    name: str | None,
    bins: str,
    columns: tuple[str, ...],
    no_user_stats: bool,
    no_inherit: bool,
    tdigest: bool,
    frequencies: str,
    redis_url: str | None,
    value_partitions: bool,
    no_file_index: bool,
    bloom_columns: str | None,
    table_format: str | None,
    at_snapshot: str | None,
    as_of: str | None,
    catalog: str | None,
    data_roots: tuple[str, ...],
    publish_to_table: bool = False,
) -> None:
    """Compute and publish the statistics of TABLE: a Parquet directory, an Iceberg, Delta or
    Hudi table (local or s3://), or with --catalog an Iceberg catalog's table.

    \b
    Examples:
      metastore analyze data/sales
      metastore analyze data/sales --name sales --columns price,city --bins 10000
      metastore analyze data/sales --tdigest         t-digests for metastore quantiles --approximate
      metastore analyze data/sales --frequencies redis --redis redis://127.0.0.1:6379/0
      metastore analyze data/sales --no-inherit      # recompute unchanged partitions too
      metastore analyze data/sales --value-partitions   # then: metastore partitions-of sales city Berlin
      metastore analyze warehouse/db/events          an Iceberg, Delta or Hudi table (detected)
      metastore analyze lake/orders --at-snapshot 3  Delta version 3 (Iceberg: snapshot id, Hudi: instant)
      metastore analyze db.events --catalog prod     an Iceberg table of a pyiceberg catalog
      metastore analyze db.events --catalog prod --publish   and into its metadata (docs/PLANNERS.md)
    """
    from engine import api
    from engine.names import check_table_name
    from engine.stats.user import default_statistics

    if name is not None:
        check_table_name(name)  # before anything is printed or started
    if publish_to_table and catalog is None:
        from engine.publish.commit import how_to_publish

        raise InvalidArgumentError(how_to_publish(table))
    out = settings.out()
    user = [] if no_user_stats else default_statistics()
    if tdigest:
        from engine.stats.tdigest import TDIGEST

        user = [u for u in user if u.name != TDIGEST.name] + [TDIGEST]
    out.status(f"analyzing {table} into {settings.store}")
    result = api.analyze(
        table,
        settings.store,
        bins=int(bins),
        columns=_columns_option(columns),
        name=name,
        progress=not settings.json,
        user_statistics=user,
        frequencies=frequencies,
        redis_url=redis_url,
        inherit=not no_inherit,
        value_partitions=value_partitions,
        file_index=not no_file_index,
        bloom_columns=None if bloom_columns == "auto" else [c.strip() for c in (bloom_columns or "").split(",") if c.strip()],
        format=table_format,
        at_snapshot=at_snapshot,
        as_of=as_of,
        catalog=catalog,
        data_roots=data_roots,
    )
    if not publish_to_table:
        out.analyze_result(analyze_doc(result))
        return
    from engine.publish.commit import publish as publish_statistics

    done = publish_statistics(settings.store, table, catalog, result.table)
    doc = analyze_doc(result)
    if settings.json:  # one document: the analyze's, with what was published
        doc["published"] = asdict(done)
    out.analyze_result(doc)
    if not settings.json:
        _published_text(done)


@metastore.command(short_help="Write a table's statistics into its Iceberg metadata (Puffin, partition statistics).")
@click.argument("table")
@click.option("--catalog", metavar="NAME", help="The pyiceberg catalog of TABLE (db.table): the statistics are committed through it.")
@click.option("--name", metavar="NAME", help="The table's name in the store (default: TABLE's last part, as analyze names it).")
@common_options()
@click.pass_obj
def publish(settings: Settings, table: str, catalog: str | None, name: str | None) -> None:
    """Write the newest statistics of TABLE, an Iceberg table of a pyiceberg catalog, into the
    table's own metadata for the snapshot they describe: a Puffin file of theta sketches (the
    `ndv` Trino, Spark, StarRocks and Impala read) and our own blobs, and a partition
    statistics file, committed through the catalog (no snapshot created). docs/PLANNERS.md.

    \b
    Examples:
      metastore publish db.events --catalog prod
      metastore publish db.events --catalog prod --name events_stats
    """
    if name is not None:
        from engine.names import check_table_name

        check_table_name(name)
    from engine.publish.commit import publish as publish_statistics

    done = publish_statistics(settings.store, table, catalog, name)
    if settings.json:
        click.echo(json.dumps(asdict(done)))
    else:
        _published_text(done)


def _published_text(done: Any) -> None:
    click.echo(
        f"published the statistics of {done.table!r} into {done.identifier} (snapshot {done.snapshot_id}): "
        f"{len(done.ndv)} theta sketches, {done.blobs} blobs"
    )
    click.echo(f"  statistics            {done.statistics_path}")
    click.echo(f"  partition statistics  {done.partition_statistics_path}")


@metastore.command(short_help="Show statistics, top values and histograms of a table.")
@click.argument("table")
@click.option("--column", "-c", "columns", multiple=True, metavar="C", help="Details of this column (repeatable): statistics, top values, histogram.")
@click.option("--partition", "-p", metavar="KEY", help="A partition's statistics (e.g. part=03) instead of the table's.")
@click.option("--top", "-k", type=click.IntRange(min=0), default=10, show_default=True, help="Top-K frequent values shown.")
@click.option("--bins-shown", "-b", type=click.IntRange(min=1), default=20, show_default=True, help="Display buckets of the text histogram.")
@click.option(
    "--at", "at_transaction", type=click.IntRange(min=1), metavar="TXN", help="The state right after catalog transaction TXN (see metastore history)."
)
@click.option("--at-snapshot", metavar="SNAP", help="The state of table snapshot SNAP (the newest transaction describing it).")
@click.option(
    "--where",
    "-w",
    metavar="EXPR",
    help="Statistics of the rows matching this predicate (docs/PREDICATES.md), each with its method (docs/SUBSETS.md).",
)
@click.option(
    "--exact", is_flag=True, default=False, help="With --where: compute the subset's statistics on the data (a Ray job) instead of stored/estimated."
)
@click.option(
    "--alert-threshold", "alert_thresholds", multiple=True, metavar="NAME=VALUE",
    help="Set an alert's threshold (repeatable): high_nulls, skewed, high_cardinality, imbalanced, stale_snapshots, stale_age_s (docs/DIFF.md).",
)  # fmt: skip
@common_options()
@click.pass_obj
def show(
    settings: Settings, table: str, columns: tuple[str, ...], partition: str | None, top: int, bins_shown: int,
    at_transaction: int | None, at_snapshot: str | None, where: str | None = None, exact: bool = False,
    alert_thresholds: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Show the statistics of TABLE: an overview, or details of some columns.

    \b
    Examples:
      metastore show sales
      metastore show sales --column price --column city --top 5 --bins-shown 30
      metastore show sales --partition part=03 --column price --output json
      metastore show sales --at 3                    the state after transaction 3
      metastore show sales --at-snapshot 9f2c0e...   the state of a table snapshot
      metastore show sales --where "city = 'Berlin' and price > 100"   a subset's statistics
      metastore show sales --where "part = 3" --column price --exact   computed on the data
    """
    if at_transaction is not None and at_snapshot is not None:
        raise click.UsageError("give --at or --at-snapshot, not both")
    if exact and where is None:
        raise click.UsageError("--exact needs --where")
    if where is not None and partition is not None:
        raise click.UsageError("--where describes rows of the whole table: give no --partition with it")
    out = settings.out()
    ts = _open_table(settings.store, table, at_transaction, at_snapshot)
    _warn_integrity(settings.store, table)
    at = _at_doc(ts)
    if where is not None:
        from engine.cli.subset import subset_doc

        out.subset(subset_doc(ts, where, exact, _columns_option(columns) or None, top, bins_shown))
        return
    if partition is not None and partition not in {p.key for p in ts.partitions()}:
        keys = [p.key for p in ts.partitions()]
        shown = ", ".join(keys[:5]) + (f", ... ({len(keys)} in all)" if len(keys) > 5 else "")
        raise InvalidArgumentError(f"table {table!r} has no partition {partition!r}; its partitions: {shown or '(none)'}")
    from engine.cli.alerts import add_alerts, thresholds_of

    thresholds = thresholds_of(alert_thresholds)
    names = _columns_option(columns)
    if not names:
        doc = overview_doc(ts, partition)
        if at is not None:
            doc["at"] = at
        doc["source"] = source_doc(ts)
        add_alerts(doc, ts, partition, thresholds, doc["source"]["stale_by"])
        out.overview(doc)
        return
    doc = {
        "table": ts.table,
        "job_id": ts.job_id,
        "snapshot": ts.snapshot,
        "partition": partition,
        "columns": [column_doc(ts, c, partition, top, bins_shown) for c in names],
    }
    if at is not None:
        doc["at"] = at
    add_alerts(doc, ts, partition, thresholds, source_doc(ts)["stale_by"])
    out.column_details(doc)


def _warn_integrity(store: str, table: str) -> None:
    """One ``warning:`` line on stderr per missing transaction the cheap checks find (#21)."""
    from engine.catalog.integrity import quick_check

    for message in quick_check(store, table):
        click.echo(f"warning: {message}; run metastore verify {table}", err=True)


def source_doc(ts: Any) -> dict[str, Any]:
    """Which source snapshot the statistics describe and how many snapshots the table has
    committed since (the format's history only; None when unknown: a Parquet directory,
    an unreachable table, a snapshot no longer in the history)."""
    try:
        stale_by = ts.stale_by()
    except MetastoreError:
        stale_by = None  # the table moved or is unreachable: the statistics are still shown
    return {"table_uri": ts.state.properties.get("table_uri"), "snapshot": ts.snapshot, "stale_by": stale_by}


def _at_doc(ts: Any) -> dict[str, Any] | None:
    """Which catalog transaction a time-travelling lookup reads (None for the current state)."""
    if not ts.time_travel:
        return None
    return asdict(ts.state.catalog) if ts.state.catalog is not None else {}


def _catalog_of(store: str, table: str, up_to_last_good: bool = False) -> Any:
    """The table's catalog; a table without one is an error naming what to do."""
    from engine.catalog import Catalog
    from engine.exceptions import StatisticsNotFoundError

    cat = Catalog.open(store, table, up_to_last_good=up_to_last_good)
    if cat.state().empty:
        raise StatisticsNotFoundError(
            f"table {table!r} in store {store} has no catalog (no transactions); "
            f"analyze it, or re-create the catalog from its files with metastore rebuild {table}"
        )
    return cat


@metastore.command(short_help="List the catalog transactions of a table.")
@click.argument("table")
@common_options()
@click.pass_obj
def history(settings: Settings, table: str) -> None:
    """List the catalog transactions of TABLE, newest first (as query history): id, uuid, commit time,
    job, snapshot, the partitions each added, changed and removed (an unchanged partition
    an analyze names again is not counted) and the rows they added and removed.

    Any id can be shown with metastore show TABLE --at ID.

    \b
    Examples:
      metastore history sales
      metastore history sales --output json
    """
    from engine.catalog import AddPartition, RemovePartition, TombstonePartition
    from engine.cli.diff import history_changes

    cat = _catalog_of(settings.store, table)
    head = cat.state().txn_id
    rows = []
    infos = cat.history()
    for info, changes in reversed(list(zip(infos, history_changes(cat, infos)))):  # newest first, as the Flight history action
        rows.append(
            {
                "txn_id": info.id,
                "uuid": info.uuid,
                "committed_at": info.timestamp,
                "job_id": info.job_id,
                "snapshot": info.snapshot_id,
                "partitions_added": sum(isinstance(a, AddPartition) for a in info.actions),
                "partitions_removed": sum(isinstance(a, RemovePartition) for a in info.actions),
                "partitions_tombstoned": sum(isinstance(a, TombstonePartition) for a in info.actions),
                "checkpoint": info.has_checkpoint,
                "current": info.id == head,
                **changes,
            }
        )
    settings.out().history({"table": table, "store": settings.store, "current_txn_id": head, "transactions": rows})


@metastore.command(short_help="What changed between two states of a table's statistics (drift, partitions, columns).")
@click.argument("table")
@click.option("--from", "from_txn", type=click.IntRange(min=1), metavar="TXN", help="The older state (default: the one before --to).")
@click.option("--to", "to_txn", type=click.IntRange(min=1), metavar="TXN", help="The newer state (default: the newest).")
@click.option("--from-partition", metavar="KEY", help="This partition of the older state instead of its table level.")
@click.option("--to-partition", metavar="KEY", help="This partition of the newer state instead of its table level.")
@click.option("--column", "-c", "columns", multiple=True, metavar="A,B,...", help="Only these columns (repeat or comma-separate).")
@click.option("--top", "-k", type=click.IntRange(min=0), default=10, show_default=True, help="Top-K values compared (gained, lost, moved).")
@click.option("--html", metavar="OUT.html", help="Write the diff as one self-contained HTML page instead.")
@common_options()
@click.pass_obj
def diff(
    settings: Settings, table: str, from_txn: int | None, to_txn: int | None, from_partition: str | None, to_partition: str | None,
    columns: tuple[str, ...], top: int, html: str | None,
) -> None:  # fmt: skip
    """Compare two states of TABLE: each column's statistics on both sides, its drift
    (Kolmogorov-Smirnov distance and population stability index from the exact
    histograms, top values gained, lost and moved), columns and partitions added and removed.

    Without --from/--to: the state before the newest against the newest (metastore history
    lists them). With only partitions: two levels of the newest state (docs/DIFF.md).

    \b
    Examples:
      metastore diff sales                                  the last analyze's changes
      metastore diff sales --from 3 --to 7 -o json
      metastore diff sales --from-partition day=01 --to-partition day=02
      metastore diff sales --from-partition day=02          a partition against the table
      metastore diff sales --html diff.html                 one self-contained HTML page
    """
    from engine.cli import diff as diff_cli

    diff_cli.run(
        settings, table, from_txn=from_txn, to_txn=to_txn, from_partition=from_partition, to_partition=to_partition,
        columns=_columns_option(columns), top=top, html=html,
    )  # fmt: skip


@metastore.command(short_help="Delete statistics files no catalog transaction references.")
@click.argument("table")
@click.option(
    "--grace-period", type=Duration(), default="1h", show_default=True,
    help=f"Only delete files older than this ({DURATION_HELP}; must exceed the longest analyze job).",
)  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Only list the files that would be deleted.")
@click.option("--force", is_flag=True, help="Delete even while a catalog transaction is missing (see metastore verify); prefer metastore rebuild.")
@common_options()
@click.pass_obj
def gc(settings: Settings, table: str, grace_period: float, dry_run: bool, force: bool) -> None:
    """Delete the statistics files of TABLE below runs/ that no kept catalog
    transaction references and that are older than the grace period.

    Files of a running analyze job are not referenced yet: its lease (renewed while it
    runs) keeps them, whatever the grace period; a crashed job's lease goes stale and its
    files go once older than the grace period. Prune the catalog first to let go of old states.

    Refused while a catalog transaction is missing (metastore verify TABLE says which):
    it may reference any run. Rebuild the catalog, or pass --force.

    \b
    Examples:
      metastore gc sales --dry-run
      metastore gc sales --grace-period 1d
    """
    # opened up to its last good transaction: gc itself refuses (or, forced, goes on) past a missing one
    cat = _catalog_of(settings.store, table, up_to_last_good=True)
    result = cat.gc(grace_period, dry_run=dry_run, force=force)
    if not dry_run and result.deleted:
        from engine import lookup

        for rel in result.deleted:
            lookup.forget(cat.table_uri.rstrip("/") + "/" + rel)
    settings.out().gc(
        {
            "table": table,
            "store": settings.store,
            "dry_run": result.dry_run,
            "grace_period_s": grace_period,
            "files": result.deleted,
            "referenced": result.referenced,
            "recent": result.recent,
            "running_jobs": result.leased,
        }
    )


def _retention_doc(table: str, store: str, result: Any) -> dict[str, Any]:
    gc = result.gc
    return {
        "table": table,
        "store": store,
        "policy": result.policy,
        "kept_from_txn": result.kept_from,
        "expired_before_txn": result.expired_before,
        "transaction_files_deleted": result.transaction_files_deleted,
        "entries_removed": result.entries_removed,
        "files_deleted": list(gc.deleted) if gc else [],
        "files_referenced": gc.referenced if gc else 0,
        "files_too_recent": gc.recent if gc else 0,
    }


def _forget(cat: Any, deleted: list[str]) -> None:
    from engine import lookup

    for rel in deleted:
        lookup.forget(cat.table_uri.rstrip("/") + "/" + rel)


@metastore.command(short_help="Expire old states of a table and delete the files only they used.")
@click.argument("table")
@click.option("--keep-last", type=click.IntRange(min=1), metavar="N", help="Keep the newest N states.")
@click.option("--older-than", type=Duration(), help=f"Expire the states older than this ({DURATION_HELP}); the current one stays.")
@click.option(
    "--grace-period",
    type=Duration(),
    default="1h",
    show_default=True,
    help=f"gc: only delete files older than this ({DURATION_HELP}; must exceed the longest analyze job).",
)
@common_options()
@click.pass_obj
def expire(settings: Settings, table: str, keep_last: int | None, older_than: float | None, grace_period: float) -> None:
    """Expire the states of TABLE that --keep-last / --older-than do not keep, once (the
    table's stored policy, metastore config, is applied after every analyze).

    Expiring writes a checkpoint of the oldest kept state, deletes the older
    transactions (time travel to them then says when and by what they were
    expired), removes the entries no kept state holds, and deletes the statistics
    files no kept state references once they are older than the grace period.
    Every kept state answers exactly as before. With both options, a state is
    kept if either keeps it.

    \b
    Examples:
      metastore expire sales --keep-last 5
      metastore expire sales --older-than 7d --grace-period 0
    """
    from engine.catalog.retention import RetentionPolicy, apply_policy, format_duration

    if keep_last is None and older_than is None:
        raise click.UsageError("give --keep-last N, --older-than DURATION, or both")
    policy = RetentionPolicy(retain_last=keep_last, retain_for_s=older_than, gc_grace_s=grace_period)
    cat = _catalog_of(settings.store, table)
    older = f"--older-than {format_duration(older_than)}" if older_than is not None else ""
    opts = " ".join(o for o in (f"--keep-last {keep_last}" if keep_last else "", older) if o)
    result = apply_policy(cat, policy, by=f"metastore expire {opts}")
    if result.gc:
        _forget(cat, result.gc.deleted)
    settings.out().retention(_retention_doc(table, settings.store, result))


@metastore.command(short_help="Delete the catalog history of a table before a transaction.")
@click.argument("table")
@click.option(
    "--before", "before", type=click.IntRange(min=1), required=True, metavar="TXN", help="The oldest transaction to keep (ids: metastore history)."
)
@common_options()
@click.pass_obj
def prune(settings: Settings, table: str, before: int) -> None:
    """Delete the transactions of TABLE before transaction TXN (a checkpoint of
    TXN's state is written first), so time travel starts at TXN; earlier states
    say when and by what they were expired. Their files stay until metastore gc
    (or the next analyze's retention) deletes them.

    \b
    Examples:
      metastore prune sales --before 12
    """
    from engine.catalog.retention import expire_before

    cat = _catalog_of(settings.store, table)
    deleted, removed = expire_before(cat, before, by=f"metastore prune --before {before}")
    settings.out().retention(
        {
            "table": table, "store": settings.store, "policy": None, "kept_from_txn": cat.history()[0].id,
            "expired_before_txn": before if deleted else None, "transaction_files_deleted": deleted,
            "entries_removed": removed, "files_deleted": [], "files_referenced": None, "files_too_recent": None,
        }
    )  # fmt: skip


@metastore.command(short_help="Show or set the retention policy of a table.")
@click.argument("table")
@click.option("--retain-last", type=click.IntRange(min=1), metavar="N", help="Keep the newest N states.")
@click.option("--retain-for", type=Duration(), help=f"Keep every state younger than this ({DURATION_HELP}).")
@click.option("--gc-grace", type=Duration(), help=f"Delete unreferenced files only once older than this ({DURATION_HELP}; default 1h).")
@click.option("--keep-everything", is_flag=True, help="No retention: keep every state (the store grows with every analyze).")
@common_options()
@click.pass_obj
def config(settings: Settings, table: str, retain_last: int | None, retain_for: float | None, gc_grace: float | None, keep_everything: bool) -> None:
    """Show the retention policy of TABLE, or set it. The policy is stored with the
    table in its catalog and applied after every analyze: a state is kept if it
    is one of the newest --retain-last (up to a tenth more), or younger than
    --retain-for; older ones are expired (metastore expire describes what that
    does) and the files only they used are deleted once older than --gc-grace, by
    a gc that runs after an analyze at most once per --gc-grace (metastore gc
    runs one now). Options not given keep their values.

    Without a policy of its own a table keeps its newest 100 states (a bounded
    store whatever the rate of analyses) with a gc grace of 1h.

    \b
    Examples:
      metastore config sales
      metastore config sales --retain-last 10 --retain-for 7d
      metastore config sales --keep-everything
    """
    from engine.catalog.retention import RetentionPolicy, format_duration, read_policy, write_policy

    cat = _catalog_of(settings.store, table)
    policy, was_set = read_policy(cat)
    changed = keep_everything or retain_last is not None or retain_for is not None or gc_grace is not None
    if changed:
        policy = RetentionPolicy(
            retain_last=None if keep_everything else (retain_last if retain_last is not None else policy.retain_last),
            retain_for_s=None if keep_everything else (retain_for if retain_for is not None else policy.retain_for_s),
            gc_grace_s=gc_grace if gc_grace is not None else policy.gc_grace_s,
        )
        write_policy(cat, policy)
        was_set = True
    settings.out().retention_policy(
        {
            "table": table, "store": settings.store, "default": not was_set, "changed": changed,
            "retain_last": policy.retain_last, "retain_for_s": policy.retain_for_s, "gc_grace_s": policy.gc_grace_s,
            "retain_for": None if policy.retain_for_s is None else format_duration(policy.retain_for_s),
            "gc_grace": format_duration(policy.gc_grace_s), "description": policy.describe(),
        }
    )  # fmt: skip


@metastore.command(short_help="Re-create the catalog of a table from its statistics files.")
@click.argument("table")
@click.option(
    "--replace/--no-replace",
    default=True,
    show_default=True,
    help="Replace an existing catalog (its files are first copied to catalog/backup/<time>/).",
)
@common_options()
@click.pass_obj
def rebuild(settings: Settings, table: str, replace: bool) -> None:
    """Re-create the catalog of TABLE from the statistics files below runs/:
    one transaction per complete job, oldest first, so the newest job wins.

    Nothing may analyze the table while this runs. A replaced catalog is backed
    up to catalog/backup/<time>/ first.

    \b
    Examples:
      metastore rebuild sales
      metastore rebuild sales --output json
    """
    from engine import fileio
    from engine.catalog import Catalog
    from engine.catalog import rebuild as rebuild_catalog
    from engine.exceptions import StatisticsNotFoundError
    from engine.store import Store

    table_uri = Store(settings.store).table_uri(table)
    if not fileio.exists(fileio.join(table_uri, "runs")):
        raise StatisticsNotFoundError(f"table {table!r} has no statistics files in store {settings.store} (no {fileio.join(table_uri, 'runs')})")
    result = rebuild_catalog(settings.store, table, replace=replace)
    state = Catalog.open(settings.store, table).state()
    current = None
    if not state.empty and state.table_statistics is not None:
        current = {
            "txn_id": state.txn_id,
            "job_id": state.table_statistics.job_id,
            "snapshot": state.snapshot_id,
            "partitions": len(state.partitions),
            "rows": state.table_statistics.row_count,
        }
    settings.out().rebuild(
        {
            "table": table,
            "store": settings.store,
            "transactions": result.transactions,
            "jobs": result.jobs,
            "skipped": result.skipped,
            "backup_uri": result.backup_uri,
            "current": current,
        }
    )


@metastore.command(short_help="Check a table's catalog and statistics files; exit 1 on any problem.")
@click.argument("table")
@click.option("--no-files", is_flag=True, help="Check only the catalog, not the statistics files' checksums.")
@click.option("--repair", is_flag=True, help="Rewrite CURRENT when it does not signal the current state (a publish stopped before it).")
@common_options()
@click.pass_obj
def verify(settings: Settings, table: str, no_files: bool, repair: bool) -> None:
    """Check TABLE: every catalog transaction and checkpoint, that no transaction is
    missing (the catalog's files, CURRENT and the runs' manifests are the evidence), that
    CURRENT signals the current state, and every statistics file a kept state references,
    read whole against the checksum recorded when it was written. Prints every problem;
    exits 1 if there is any. The runs of jobs that stopped before their commit are
    warnings (exit 0): gc collects them after the grace period.

    \b
    Examples:
      metastore verify sales
      metastore verify sales --no-files --output json
      metastore verify sales --repair
    """
    from engine import fileio
    from engine.catalog import signal
    from engine.catalog.integrity import verify as verify_table
    from engine.exceptions import StatisticsNotFoundError
    from engine.store import Store

    table_uri = Store(settings.store).table_uri(table)
    if not fileio.exists(fileio.join(table_uri, "catalog")) and not fileio.exists(fileio.join(table_uri, "CURRENT")):
        raise StatisticsNotFoundError(f"table {table!r} has no statistics in store {settings.store}")
    repaired = signal.repair(settings.store, table) if repair else None
    report = verify_table(settings.store, table, files=not no_files)
    settings.out().verify(
        {
            "table": table,
            "store": settings.store,
            "ok": report.ok,
            "transactions": report.transactions,
            "checkpoints": report.checkpoints,
            "checkpoints_checked": report.checkpoints_checked,
            "files_checked": report.files_checked,
            "files_unchecked": report.files_unchecked,
            "problems": [{"kind": p.kind.value, "message": p.message, "uri": p.uri} for p in report.problems],
            "warnings": [{"kind": p.kind.value, "message": p.message, "uri": p.uri} for p in report.warnings],
            "repaired": [repaired] if repaired else [],
        }
    )
    if not report.ok:
        click.get_current_context().exit(1)


@metastore.command(short_help="List the tables with published statistics.")
@common_options()
@click.pass_obj
def tables(settings: Settings) -> None:
    """List the tables with published statistics in the store."""
    from engine.lookup import TableStatistics
    from engine.store import Store

    store = Store(settings.store)
    rows = []
    for name in store.tables():
        try:
            ts = TableStatistics(store, name)
        except USER_ERRORS as exc:  # one damaged table does not hide the others (#21)
            rows.append({"table": name, "error": one_line(exc)})
            continue
        rows.append(
            {
                "table": name,
                "job_id": ts.job_id,
                "snapshot": ts.snapshot,
                "rows": ts.state.rows,
                "partitions": len(ts.state.partitions),
                "created_at": ts.state.created_at,
            }
        )
    settings.out().tables({"store": settings.store, "tables": rows})


class _Count(click.ParamType):
    """An integer that may be written with separators: 1,000,000 or 1_000_000."""

    name = "N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            n = int(str(value).replace(",", "").replace("_", ""))
        except ValueError:
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if n < 1:
            self.fail(f"{value} must be at least 1", param, ctx)
        return n


def _stamp_matches(path: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads(path.read_text()) == stamp
    except (OSError, ValueError):
        return False


@metastore.command(short_help="Generate a sample table, analyze it, show the result.")
@click.option("--rows", type=_Count(), default="1,000,000", show_default=True, help="Rows of the sample table.")
@click.option("--partitions", type=click.IntRange(min=1), default=8, show_default=True, help="Partitions of the sample table.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".demo",
    show_default=True,
    help="Where the table (DIR/table) and the store (DIR/store) go.",
)
@common_options(store=False)
@click.pass_obj
def demo(settings: Settings, rows: int, partitions: int, directory: str) -> None:
    """Generate a sample table, analyze it and show what Metastore knows about it.

    The table is generated once per --rows/--partitions (a stamp file records
    them); the analyze runs every time. The statistics go to DIR/store.

    \b
    Examples:
      metastore demo
      metastore demo --rows 5,000,000 --partitions 16 --dir /tmp/demo
    """
    from engine import api
    from engine.lookup import open_statistics
    from engine.sample import SAMPLE_VERSION, generate_table

    out = settings.out()
    root = Path(directory)
    table_dir, store_dir, stamp_path = root / "table", root / "store", root / "table.stamp.json"
    stamp = {"rows": rows, "partitions": partitions, "seed": 0, "sample_version": SAMPLE_VERSION}
    generated = False
    if table_dir.is_dir() and _stamp_matches(stamp_path, stamp):
        out.status(f"sample table {table_dir} already generated ({rows:,} rows, {partitions} partitions)")
    else:
        out.status(f"generating the sample table: {rows:,} rows in {partitions} partitions under {table_dir}")
        root.mkdir(parents=True, exist_ok=True)
        stamp_path.unlink(missing_ok=True)
        generate_table(table_dir, rows=rows, partitions=partitions, seed=0)
        stamp_path.write_text(json.dumps(stamp) + "\n")
        generated = True
    out.status(f"analyzing {table_dir} into {store_dir}")
    result = api.analyze(str(table_dir), str(store_dir), name=DEMO_TABLE, progress=not settings.json)
    ts = open_statistics(str(store_dir), result.table)
    store_arg = shlex.quote(str(store_dir))
    out.demo(
        {
            "table_dir": str(table_dir),
            "generated": generated,
            "analyze": analyze_doc(result),
            "overview": overview_doc(ts),
            "columns": [column_doc(ts, "category", top=10), column_doc(ts, "price", top=10)],
            "next": [
                f"metastore --store {store_arg} show {DEMO_TABLE} --column price --column city",
                f"metastore --store {store_arg} show {DEMO_TABLE} --partition part=00",
                f"metastore --store {store_arg} show {DEMO_TABLE} --column amount --output json",
            ],
        }
    )


@metastore.command("partitions-of", short_help="Which partitions hold a value of a column, and how often.")
@click.argument("table")
@click.argument("column")
@click.argument("value")
@click.option("--candidates", is_flag=True, help="For a value stored only implicitly (occurs at most once): the partitions whose min/max admit it.")
@click.option(
    "--at", "at_transaction", type=click.IntRange(min=1), metavar="TXN", help="The state right after catalog transaction TXN (see metastore history)."
)
@click.option("--at-snapshot", metavar="SNAP", help="The state of table snapshot SNAP (the newest transaction describing it).")
@common_options()
@click.pass_obj
def partitions_of(
    settings: Settings, table: str, column: str, value: str, candidates: bool, at_transaction: int | None, at_snapshot: str | None
) -> None:
    """The partitions of TABLE whose COLUMN holds VALUE, with the count in each,
    from the table-level frequencies (TABLE analyzed with --value-partitions).

    VALUE is in the column's text form (docs/VALUE_FORMS.md): 42, 2024-02-29,
    12.50, a string as it is, binary as hex. A value of a mostly or all
    distinct column that is not stored occurs at most once; the answer says so
    (its partition is not recorded; --candidates narrows it by min/max).

    \b
    Examples:
      metastore partitions-of sales city Berlin
      metastore partitions-of sales customer_id 1234567 --candidates
      metastore partitions-of sales event_date 2024-10-01 --output json
    """
    if at_transaction is not None and at_snapshot is not None:
        raise click.UsageError("give --at or --at-snapshot, not both")
    from engine.columns import display_name
    from engine.pyvalues import python_value

    ts = _open_table(settings.store, table, at_transaction, at_snapshot)
    got = ts.value_partitions(column, value, candidates=candidates)
    doc: dict[str, Any] = {
        "table": got.table,
        "job_id": ts.job_id,
        "snapshot": ts.snapshot,
        "column": display_name(got.column),
        "value": python_value(got.value),
        "text": got.text,
        "kind": got.kind,
        "status": got.status,
        "frequency": got.frequency,
        "table_partitions": got.table_partitions,
        "partitions": [{"partition": k, "count": c} for k, c in got.partitions],
        "candidates": list(got.candidates) if got.candidates is not None else None,
        "note": got.note,
    }
    at = _at_doc(ts)
    if at is not None:
        doc["at"] = at
    settings.out().value_partitions(doc)


@metastore.command("files", short_help="The data files that might hold rows matching a predicate (file pruning).")
@click.argument("table")
@where_option("e.g. \"city = 'Berlin' and price > 5\" (docs/PREDICATES.md).", required=True)
@click.option("--index", metavar="DIR", help="The file index's directory (default: the one the table's state names).")
@click.option("--pruned", "show_pruned", is_flag=True, help="Also list the pruned files and the conjunct that proved each empty.")
@click.option("--at", "at_transaction", type=click.IntRange(min=1), metavar="TXN", help="The state right after catalog transaction TXN.")
@click.option("--at-snapshot", metavar="SNAP", help="The state of table snapshot SNAP.")
@common_options()
@click.pass_obj
def files(
    settings: Settings, table: str, where: str, index: str | None, show_pruned: bool, at_transaction: int | None, at_snapshot: str | None
) -> None:
    """The data files of TABLE that might hold rows matching PREDICATE: partitions are pruned
    from their statistics, then files from the per-file column index (ranges, null and NaN
    counts, Bloom filters). A planner reads only these (``spark.read.parquet(*files)``).

    \b
    Examples:
      metastore files sales --where "event_date >= 2024-10-01 and city = 'Berlin'"
      metastore files sales --where 'id between 100 and 200' -o json
    """
    if at_transaction is not None and at_snapshot is not None:
        raise click.UsageError("give --at or --at-snapshot, not both")
    ts = _open_table(settings.store, table, at_transaction, at_snapshot)
    plan = ts.plan_files(where, index=index)
    doc: dict[str, Any] = {
        "table": table,
        "job_id": ts.job_id,
        "predicate": plan.predicate,
        "files_indexed": plan.files,
        "files": plan.candidates.select(["path", "partition", "rows", "size"]).to_pylist(),
        "pruned_partitions": list(plan.pruned_partitions),
    }
    if show_pruned or settings.json:
        doc["pruned"] = plan.pruned.to_pylist()
    if settings.json:
        from engine.cli.output import dumps

        click.echo(dumps(doc))
        return
    _print_files(doc, table, plan, show_pruned)


def _print_files(doc: dict[str, Any], table: str, plan: Any, show_pruned: bool) -> None:
    """The candidate (and pruned) files; paths break only after a ``/``, never inside a name."""
    from engine.cli.output import files_table
    from engine.cli.plain import Console

    console = Console()
    title = f"{table}: {len(doc['files']):,} candidate files of {plan.files:,}  ({plan.predicate})"
    rows = [(f["path"], [f["partition"] or "", "?" if f["rows"] is None else f"{f['rows']:,}"]) for f in doc["files"]]
    files_table(console, title, ["partition", "rows"], rows)
    if show_pruned:
        files_table(console, "pruned", ["partition", "reason"], [(f["path"], [f["partition"] or "", f["reason"]]) for f in doc["pruned"]])


# ============================================================== ranks and quantiles (docs/QUANTILES.md)
DEFAULT_PROBABILITIES = ("0.01", "0.05", "0.25", "0.5", "0.75", "0.95", "0.99")


def _probability_option(values: tuple[str, ...]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _data_location(store: str, table: str) -> tuple[str, str | None]:
    """Where the exact path reads TABLE: ``(location, name)``. A location as given (a URI, or a
    path that exists), or a table of the store: the location its statistics were analyzed from."""
    from engine.exceptions import StatisticsNotFoundError
    from engine.names import table_name_problem

    if "://" in table or Path(table).exists():
        return table, None
    accepts = (
        f"TABLE {table!r} is neither a table's location (a Parquet, Iceberg, Delta or Hudi directory, local or s3://) "
        f"nor a table with statistics in store {store}"
    )
    if table_name_problem(table) is not None:
        raise InvalidArgumentError(f"{accepts} (no such path)")
    try:
        ts = _open_table(store, table)
    except StatisticsNotFoundError as exc:
        raise InvalidArgumentError(f"{accepts}: {one_line(exc)}") from None
    uri = ts.state.properties.get("table_uri")
    if not uri:
        raise InvalidArgumentError(
            f"table {table!r} in store {store} records no data location: give the table's location, or use --approximate (its sketches)"
        )
    return str(uri), table


def quantiles_doc(q: Any, partition: str | None = None, elapsed_s: float | None = None) -> dict[str, Any]:
    """The result of metastore quantiles; ``elapsed_s`` leaves out starting Ray (``ray_start_s``)."""
    from engine.pyvalues import python_value

    return {
        "table": q.table,
        "column": q.column,
        "type": q.type,
        "exact": q.exact,
        "partition": partition,
        "count": q.count,
        "null_count": q.null_count,
        "nan_count": q.nan_count,
        "elapsed_s": elapsed_s,
        "ray_start_s": q.timings.get("ray_start_s"),
        "quantiles": [
            {"p": float(p), "value": python_value(v), "rank": r, "method": m, "rank_error": e}
            for p, v, r, m, e in zip(q.probabilities, q.values, q.ranks, q.methods, q.rank_errors)
        ],
    }


@metastore.command(short_help="Exact (distributed sort) or approximate (sketches) quantiles and ranks of a column.")
@click.argument("table")
@click.argument("column")
@click.option(
    "--quantile",
    "-q",
    "--probability",
    "probabilities",
    multiple=True,
    metavar="P",
    help="A probability in [0, 1] (repeat or comma-separate; default 0.01,0.05,0.25,0.5,0.75,0.95,0.99). "
    "-q, not -p: -p is --partition in every command.",
)
@click.option(
    "--rank-of", "rank_of", multiple=True, metavar="VALUE", help="Exact: how many values lie below VALUE, in the column's text form (repeatable)."
)
@click.option(
    "--value-at", "value_at", multiple=True, type=click.IntRange(min=0), metavar="RANK", help="Exact: the value at 0-based RANK (repeatable)."
)
@click.option(
    "--approximate", "-a", is_flag=True, help="Answer from the sketches of the published statistics of table TABLE in --store (reads no data)."
)
@click.option(
    "--method",
    type=click.Choice(["auto", "kll", "tdigest"]),
    default="auto",
    show_default=True,
    help="--approximate: the sketch (auto: per p the one with the smaller error bound).",
)
@partition_option("--approximate: a partition's sketches (e.g. part=03).")
@click.option("--ranges", type=click.IntRange(min=1), help="Exact: sorted ranges (default: two per CPU).")
@common_options()
@click.pass_obj
def quantiles(
    settings: Settings, table: str, column: str, probabilities: tuple[str, ...], rank_of: tuple[str, ...],
    value_at: tuple[int, ...], approximate: bool, method: str, partition: str | None, ranges: int | None,
) -> None:  # fmt: skip
    """Quantiles of COLUMN: exact, by sorting the column of the table on Ray; or
    with --approximate, from the KLL / t-digest sketches of table TABLE's
    statistics in the store (no data read).

    TABLE is a table's location (a Parquet, Iceberg, Delta or Hudi directory,
    local or s3://) or the name of a table in the store: the exact path then
    sorts the data at the location its statistics were analyzed from.

    Exact quantiles are DuckDB's quantile_disc: the value at 0-based rank
    max(ceil(n*p), 1) - 1 of the n non-null values (NaN ranks after every number).

    Probabilities are -q/--quantile (--probability also works); -p is --partition,
    as in every command.

    \b
    Examples:
      metastore quantiles data/sales price -q 0.5 -q 0.99
      metastore quantiles sales price -q 0.5           the data sales was analyzed from
      metastore quantiles data/sales city --rank-of Berlin --value-at 0
      metastore quantiles sales price -q 0.001,0.5,0.999 --approximate --output json
      metastore quantiles sales price --approximate -p part=03
    """
    import time

    from engine import quantiles as q_api

    ps = _probability_option(probabilities)
    if approximate:
        from engine.names import check_table_name

        check_table_name(table)
        if rank_of or value_at:
            raise click.UsageError("--rank-of and --value-at need the exact path (drop --approximate)")
        if ranges is not None:
            raise click.UsageError("--ranges applies to the exact path only")
        t0 = time.perf_counter()
        q = q_api.approximate_quantiles(settings.store, table, column, ps or list(DEFAULT_PROBABILITIES), method=method, partition=partition)
        settings.out().quantiles(quantiles_doc(q, partition, time.perf_counter() - t0))
        return
    if partition is not None or method != "auto":
        hint = "; probabilities are -q/--quantile (-p is --partition)" if partition is not None and _is_number(partition) else ""
        raise click.UsageError(f"--partition and --method apply to --approximate only{hint}")
    table, name = _data_location(settings.store, table)
    if not ps and not rank_of and not value_at:
        ps = list(DEFAULT_PROBABILITIES)
    t0 = time.perf_counter()
    if not rank_of and not value_at:
        q = q_api.exact_quantiles(table, column, ps, ranges=ranges, name=name)
        settings.out().quantiles(quantiles_doc(q, None, time.perf_counter() - t0 - q.timings.get("ray_start_s", 0.0)))
        return
    from engine import values as value_forms
    from engine.sources.base import default_table_name

    q_api._check_probabilities(ps)
    with q_api.sort_column(table, column, ranges=ranges, name=name) as sc:
        probes = [value_forms.decode_scalar(text, sc.type).as_py() for text in rank_of]
        rank_list = sc.quantile_ranks(ps)
        values = sc.quantiles(ps)
        q = q_api.Quantiles(
            table=name or default_table_name(table), column=column, type=str(sc.type), probabilities=tuple(ps),
            values=tuple(values), exact=True, count=sc.count, null_count=sc.null_count, nan_count=sc.nan_count,
            ranks=tuple(rank_list), methods=("sort",) * len(ps), rank_errors=(0.0,) * len(ps), timings=dict(sc.timings),
        )  # fmt: skip
        doc = quantiles_doc(q)
        doc["rank_of"] = [{"value": v, "below": sc.rank_of(v), "at_most": sc.rank_of(v, inclusive=True)} for v in probes]
        doc["value_at"] = [{"rank": r, "value": v} for r, v in zip(value_at, sc.values_at_ranks(list(value_at)))] if value_at else []
        doc["elapsed_s"] = time.perf_counter() - t0 - sc.timings.get("ray_start_s", 0.0)
    settings.out().quantiles(doc)


# ============================================================== Flight server (flight_server/, docs/FLIGHT.md)
@metastore.command(short_help="Serve the statistics of a store over Arrow Flight.")
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
@common_options()
@click.pass_obj
def serve(
    settings: Settings, host: str, port: int, tokens: tuple[str, ...], token_file: str | None, tls_cert: str | None,
    tls_key: str | None, no_auth: bool, poll_interval: float, analyze_roots: tuple[str, ...], no_analyze: bool,
    no_exact: bool, max_exact_jobs: int, exact_rate: int, exact_cache_mb: int, allow_source_change: bool, health_store: bool,
    no_sql: bool, sql_timeout: float, sql_max_rows: int,
) -> None:  # fmt: skip
    """Serve the published statistics of every table in the store over Arrow Flight.

    \b
    Tokens: METASTORE_FLIGHT_TOKEN=... or --token-file FILE keep them out of the
    process list; --token shows them to every local user (`ps`).
    The analyze action is off unless --analyze-root names what it may read; so are
    exact subsets (--where ... --exact over Flight: they disclose rows).
    docs/FLIGHT.md#security-model says who may do what.

    \b
    Examples:
      metastore serve --store .metastore
      METASTORE_FLIGHT_TOKEN=... metastore serve --store .metastore --analyze-root /data/lake
      metastore serve --host 0.0.0.0 --token-file tokens.txt --tls-cert cert.pem --tls-key key.pem
    """
    from engine.cli import flight as flight_cli

    flight_cli.serve(
        settings.store, host, port, tokens, token_file, tls_cert, tls_key, no_auth, poll_interval,
        not no_analyze, analyze_roots, allow_source_change=allow_source_change, health_store=health_store,
        exact={"allow_exact": not no_exact, "max_exact_jobs": max_exact_jobs, "exact_rate": exact_rate,
               "exact_cache_bytes": exact_cache_mb * 1024 * 1024},
        sql={"sql": not no_sql, "sql_timeout": sql_timeout, "sql_max_rows": sql_max_rows},
        echo=lambda line: click.echo(line, err=True),
    )  # fmt: skip


@metastore.command(short_help="Ask a Metastore Flight server (tables, statistics, top, histogram, partitions, files, ...).")
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
        columns=_columns_option(columns), partition=partition, partitions=partitions, statistics=list(statistics) or None,
        k=top, bins=bins, lo=lo, hi=hi, where=where, exact=exact, at_transaction=at_transaction, at_snapshot=at_snapshot,
        typed=typed, name=name, wait=wait,
    )  # fmt: skip
    doc = flight_cli.query(server, token, token_file, tls_root_cert, kind, table, options, timeout)
    flight_cli.print_query(doc, settings.json)


#: Commands that only read a store or a server: they need neither Ray, numba nor pandas.
READ_COMMANDS = frozenset({"show", "tables", "history", "query", "partitions-of", "config"})


def _command_of(argv: list[str]) -> str | None:
    """The subcommand of a command line (the first argument that is one; options may precede it)."""
    return next((a for a in argv if a in metastore.commands), None)


def _without_pandas() -> None:
    """pyarrow imports pandas on its first ``pa.array``/``pa.scalar`` call, only to ask whether
    an argument is a pandas object: 0.6-0.9 s of a read command's 1 s start-up. A read
    command's process never holds one, so it tells the import system pandas is absent
    (pyarrow then skips the check). Only in the console script's own process, before any
    pyarrow call, and never when pandas is loaded already."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """An import finder under which ``import pandas`` raises ImportError (see _without_pandas)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not loaded by metastore's read commands", name=name)
        return None


@metastore.command(short_help="A local web app previewing the statistics of a store's tables (read-only).")
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


@metastore.command(short_help="Write a table's statistics as one self-contained HTML page.")
@click.argument("table")
@click.option("--html", "out", required=True, type=click.Path(dir_okay=False, writable=True), metavar="OUT.html", help="The file to write.")
@click.option("--partition", "-p", metavar="KEY", help="Show this partition's statistics beside the table's.")
@click.option("--column", "-c", "columns", multiple=True, metavar="C", help="Only these columns (repeat or comma-separate; default: all).")
@click.option("--bars", type=click.IntRange(1, 1000), default=50, show_default=True, help="Bars of each histogram.")
@click.option("--top", "-k", type=click.IntRange(min=0), default=10, show_default=True, help="Top-K frequent values shown.")
@click.option(
    "--at", "at_transaction", type=click.IntRange(min=1), metavar="TXN", help="The state right after catalog transaction TXN (see metastore history)."
)
@common_options()
@click.pass_obj
def preview(
    settings: Settings, table: str, out: str, partition: str | None, columns: tuple[str, ...], bars: int, top: int,
    at_transaction: int | None,
) -> None:  # fmt: skip
    """Write the page of TABLE (every column's card) to OUT.html: one file with its
    CSS, charts and script inline, which opens without any network access.

    \b
    Examples:
      metastore preview sales --html sales.html
      metastore preview sales --html part03.html --partition part=03 --column price,city
    """
    from engine.cli.reports import write_html
    from engine.ui import render
    from engine.ui import viewmodel as vm

    ts = _open_table(settings.store, table, at_transaction)
    names = _columns_option(columns)
    if names:
        names = [vm.check_column(ts, name) for name in names]  # stored names (given as in the data, or "s > x")
    vm.check_partition(ts, partition)
    page = vm.table_page(ts, partition=partition, page_size=0, bars=bars, top=top, cards=False)
    shown = names or list(page.columns)
    from dataclasses import replace

    page = replace(page, columns=tuple(shown), cards=tuple(vm.column_cards(ts, shown, partition, bars, top)), matched=len(shown))
    html = render.report(page)
    target = write_html(out, html, ".metastore-preview-")
    errors = sum(len(c.errors) > 0 for c in page.cards)
    doc = {"table": table, "file": target, "columns": len(shown), "bytes": len(html.encode()), "cards_with_errors": errors}
    if settings.json:
        click.echo(json.dumps(doc))
    else:
        click.echo(
            f"wrote {target}: {len(shown):,} column card{'s' if len(shown) != 1 else ''} of {table}" + (f" ({errors} with errors)" if errors else "")
        )


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``metastore`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if _command_of(args) in READ_COMMANDS:
        _without_pandas()
    metastore.main(args=args, prog_name="metastore")


if __name__ == "__main__":
    main()
