"""The commands that read a table's statistics: show, tables, partitions-of, files, preview."""

from __future__ import annotations

import json
from typing import Any

import click

from engine.cli.command import USER_ERRORS, Settings, command, common_options, one_line
from engine.cli.documents import at_doc, column_doc, overview_doc, source_doc
from engine.cli.layout import files_table
from engine.cli.opening import open_table, warn_integrity
from engine.cli.options import split_columns, where_option
from engine.cli.output import dumps
from engine.cli.plain import Console
from engine.exceptions import InvalidArgumentError


@command(short_help="Show statistics, top values and histograms of a table.")
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
    ts = open_table(settings.store, table, at_transaction, at_snapshot, exact=exact)
    warn_integrity(settings.store, table)
    at = at_doc(ts)
    if where is not None:
        from engine.cli.subset import subset_doc

        out.subset(subset_doc(ts, where, exact, split_columns(columns) or None, top, bins_shown))
        return
    if partition is not None and partition not in {p.key for p in ts.partitions()}:
        keys = [p.key for p in ts.partitions()]
        shown = ", ".join(keys[:5]) + (f", ... ({len(keys)} in all)" if len(keys) > 5 else "")
        raise InvalidArgumentError(f"table {table!r} has no partition {partition!r}; its partitions: {shown or '(none)'}")
    from engine.cli.alerts import add_alerts, thresholds_of

    thresholds = thresholds_of(alert_thresholds)
    names = split_columns(columns)
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


@command(short_help="List the tables with published statistics.")
@common_options()
@click.pass_obj
def tables(settings: Settings) -> None:
    """List the tables with published statistics in the store."""
    from engine.store import Store  # each table's published state: the lookups are not loaded (start-up, issue #30)

    store = Store(settings.store)
    rows: list[dict[str, Any]] = []
    for name in store.tables():
        try:
            state = store.state(name)
            _ = state.schema  # decoded as a lookup would: a state published without one is listed as damaged
        except USER_ERRORS as exc:  # one damaged table does not hide the others (#21)
            rows.append({"table": name, "error": one_line(exc)})
            continue
        rows.append(
            {
                "table": name,
                "job_id": state.job_id,
                "snapshot": state.snapshot_id,
                "rows": state.rows,
                "partitions": len(state.partitions),
                "created_at": state.created_at,
            }
        )
    settings.out().tables({"store": settings.store, "tables": rows})


@command("partitions-of", short_help="Which partitions hold a value of a column, and how often.")
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

    ts = open_table(settings.store, table, at_transaction, at_snapshot)
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
    at = at_doc(ts)
    if at is not None:
        doc["at"] = at
    settings.out().value_partitions(doc)


@command("files", short_help="The data files that might hold rows matching a predicate (file pruning).")
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
    ts = open_table(settings.store, table, at_transaction, at_snapshot)
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
        click.echo(dumps(doc))
        return
    _print_files(doc, table, plan, show_pruned)


def _print_files(doc: dict[str, Any], table: str, plan: Any, show_pruned: bool) -> None:
    """The candidate (and pruned) files; paths break only after a ``/``, never inside a name."""
    console = Console()
    title = f"{table}: {len(doc['files']):,} candidate files of {plan.files:,}  ({plan.predicate})"
    rows = [(f["path"], [f["partition"] or "", "?" if f["rows"] is None else f"{f['rows']:,}"]) for f in doc["files"]]
    files_table(console, title, ["partition", "rows"], rows)
    if show_pruned:
        files_table(console, "pruned", ["partition", "reason"], [(f["path"], [f["partition"] or "", f["reason"]]) for f in doc["pruned"]])


@command(short_help="Write a table's statistics as one self-contained HTML page.")
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

    ts = open_table(settings.store, table, at_transaction)
    names = split_columns(columns)
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
