"""``metastore analyze`` and ``metastore publish``: compute a table's statistics, write them into its Iceberg metadata."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.documents import analyze_doc
from engine.cli.options import runtime_option, split_columns
from engine.exceptions import InvalidArgumentError
from engine.options import ALLOWED_BINS, AnalyzeOptions, FrequencyStrategy
from engine.sources import registry as formats

#: the table formats ``metastore analyze --format`` names (default: detected from the files)
TABLE_FORMATS = formats.NAMES


@command(short_help="Compute and publish the statistics of a table.")
@click.argument("table")
@click.option("--name", help="Table name in the store (default: the last component of TABLE).")
@click.option(
    "--bins", type=click.Choice([str(b) for b in ALLOWED_BINS]), default=str(AnalyzeOptions.bins), show_default=True,
    help="Histogram bins per column.",
)  # fmt: skip
@click.option("--columns", "-c", "columns", multiple=True, metavar="A,B,...", help="Only these columns (repeat or comma-separate).")
@click.option("--no-user-stats", is_flag=True, help="Do not compute the shipped example user statistics (zero_count, top1_share).")
@click.option("--no-inherit", is_flag=True, help="Recompute every partition, even those unchanged since the last analyze.")
@click.option("--tdigest", is_flag=True, help="Also keep a t-digest per numeric/time column (better approximate quantiles near the tails).")
@click.option(
    "--frequencies",
    type=click.Choice([s.value for s in FrequencyStrategy]),
    default=AnalyzeOptions.frequencies.value,
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
    type=click.Choice(TABLE_FORMATS),
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
@runtime_option(
    "Where the tasks run: auto runs a table of at most 64 MiB and 2,000,000 rows in this process (no Ray start) "
    "unless Ray already runs here or RAY_ADDRESS is set, else on Ray; ray always; local never starts Ray "
    "(default: $METASTORE_RUNTIME, else auto; docs/SCALING.md). The files are the same either way."
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
    runtime: str = AnalyzeOptions.runtime.value,
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
        columns=split_columns(columns),
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
        runtime=runtime,
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


@command(short_help="Write a table's statistics into its Iceberg metadata (Puffin, partition statistics).")
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
    if done.partition_statistics_path:
        click.echo(f"  partition statistics  {done.partition_statistics_path}")
    else:
        click.echo("  partition statistics  none (the table is unpartitioned)")
