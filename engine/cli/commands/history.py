"""A table's states over time: ``metastore history`` (its catalog transactions) and ``metastore diff`` (two states compared)."""

from __future__ import annotations

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.opening import catalog_of
from engine.cli.options import split_columns


@command(short_help="List the catalog transactions of a table.")
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

    cat = catalog_of(settings.store, table)
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


@command(short_help="What changed between two states of a table's statistics (drift, partitions, columns).")
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
        columns=split_columns(columns), top=top, html=html,
    )  # fmt: skip
