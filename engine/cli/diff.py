"""``metastore diff TABLE [--from TXN] [--to TXN] [--from-partition KEY] [--to-partition KEY]``:
what changed between two states of a table's statistics (docs/DIFF.md).

``diff_doc`` resolves the two sides (defaults: the state before the newest, and the newest;
with partitions only: both in the newest state) and builds the document ``-o json`` prints
(``engine.review.diff.TableDiff.as_dict``); ``print_diff`` draws it for people.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from engine.cli.layout import natural_width, print_records
from engine.cli.opening import open_table
from engine.cli.plain import Console, Table, Text, box
from engine.cli.reports import write_html
from engine.display import dumps, fmt_count, fmt_float, fmt_value, plural, to_jsonable

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.catalog import Catalog
    from engine.catalog.replay import TransactionInfo
    from engine.cli.command import Settings


def diff_doc(
    store: str,
    table: str,
    from_txn: int | None,
    to_txn: int | None,
    from_partition: str | None,
    to_partition: str | None,
    columns: list[str] | None,
    top: int,
) -> dict[str, Any]:
    from engine.review.diff import resolve_sides

    a_txn, b_txn = resolve_sides(store, table, from_txn, to_txn, from_partition, to_partition)
    a = open_table(store, table, at_transaction=a_txn)
    b = a if b_txn == a_txn else open_table(store, table, at_transaction=b_txn)
    return a.diff(b, partition=from_partition, other_partition=to_partition, columns=columns, top=top).as_dict()


def run(settings: Settings, table: str, html: str | None = None, **options: Any) -> None:
    doc = diff_doc(settings.store, table, **options)
    if html is not None:
        from engine.ui import render

        page = render.diff_report(to_jsonable(doc))
        target = write_html(html, page, ".metastore-diff-")
        summary = {"table": table, "file": target, "columns": len(doc["columns"]), "bytes": len(page.encode())}
        click.echo(dumps(summary) if settings.json else f"wrote {target}: the diff of {table} ({plural(len(doc['columns']), 'column')})")
        return
    if settings.json:
        click.echo(dumps(doc))
    else:
        print_diff(Console(highlight=False), doc)


# ============================================================== text
def _side_text(s: dict[str, Any]) -> str:
    where = f"partition {s['partition']}" if s["partition"] else "table"
    txn = f"transaction {s['txn_id']}" if s["txn_id"] is not None else f"job {s['job_id']}"
    when = f" ({str(s['committed_at'])[:19].replace('T', ' ')})" if s.get("committed_at") else ""
    return f"{where}, {txn}{when}"


def _change(a: object, b: object, fmt: Callable[[Any], str] = fmt_value) -> str:
    """``a → b``, or ``a`` when both are the same."""
    ta = "" if a is None else fmt(a)
    tb = "" if b is None else fmt(b)
    return ta if ta == tb else f"{ta or '-'} → {tb or '-'}"


def _count(n: int | None) -> str:
    return fmt_count(n) if n is not None else ""


def _number(x: Any) -> str:
    return "" if x is None else fmt_float(float(x))


def _key(key: str) -> str:
    return key or "(the unpartitioned table's files)"


def _rows_line(rows: dict[str, Any]) -> str:
    change = rows["change"]
    sign = "+" if change >= 0 else "-"
    return f"rows {fmt_count(rows['from'])} → {fmt_count(rows['to'])} ({sign}{abs(change):,})"


def print_diff(console: Console, doc: dict[str, Any]) -> None:
    console.print(Text(f"{doc['table']}: {_side_text(doc['from'])} → {_side_text(doc['to'])}", style="bold"))
    console.print(Text(_rows_line(doc["rows"]), style="dim"))
    parts = doc.get("partitions")
    if parts is not None:
        for label, key in (("added", "added"), ("removed", "removed")):
            if parts[key]:
                listed = ", ".join(f"{_key(p['key'])} ({fmt_count(p['rows'])} rows)" for p in parts[key][:10])
                more = f", ... ({len(parts[key])} in all)" if len(parts[key]) > 10 else ""
                console.print(Text(f"partitions {label}: {listed}{more}"))
        if parts["changed"]:
            listed = ", ".join(f"{_key(p['key'])} ({_change(p['from_rows'], p['to_rows'], fmt_count)} rows)" for p in parts["changed"][:10])
            console.print(Text(f"partitions changed: {listed}"))
        if not (parts["added"] or parts["removed"] or parts["changed"]):
            console.print(Text("partitions: none added, removed or changed"))
    for label, key in (("added", "columns_added"), ("removed", "columns_removed")):
        if doc[key]:
            console.print(Text(f"columns {label}: " + ", ".join(f"{c['column']} ({c['type']})" for c in doc[key])))
    cols = doc["columns"]
    if not cols:
        console.print(Text("no column on both sides"))
        return
    headers = ["column", "rows", "nulls", "distinct", "min", "max", "mean", "KS", "PSI"]
    cells = []
    for c in cols:
        a, b, d = c["from"], c["to"], c["drift"]
        ks = "" if d["ks"] is None else f"{d['ks']:.4f}" + ("" if d["ks_exact"] else "~")
        psi = "" if d["psi"] is None else f"{d['psi']:.4f}"
        cells.append(
            [c["column"] + ("" if c["changed"] else " ="), _change(a["rows"], b["rows"], fmt_count), _change(a["nulls"], b["nulls"], fmt_count),
             _change(a["distinct"], b["distinct"], fmt_count), _change(a["min"], b["min"]), _change(a["max"], b["max"]),
             _change(a["mean"], b["mean"], _number), ks, psi]
        )  # fmt: skip
    if natural_width(headers, cells) > console.width:  # too wide: one block per column, values never cut
        print_records(console, headers, cells)
    else:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for h in headers:
            t.add_column(h, justify="left" if h in ("column", "min", "max") else "right", no_wrap=True)
        for row in cells:
            t.add_row(*(Text(v) for v in row))
        console.print(t)
    console.print(
        Text(
            "= unchanged · KS: Kolmogorov-Smirnov distance at the bin edges (~ bins moved: interpolated) · PSI: population stability index",
            style="dim",
        )
    )
    _print_top_changes(console, cols)


def _print_top_changes(console: Console, cols: list[dict[str, Any]]) -> None:
    for c in cols:
        top = c["drift"]["top_values"]
        if not top or not (top["gained"] or top["lost"] or top["changed_rank"]):
            continue
        lines = []
        if top["gained"]:
            lines.append("gained " + ", ".join(f"{fmt_value(r['value'])} (#{r['to_rank']}, {fmt_count(r['to_count'])})" for r in top["gained"]))
        if top["lost"]:
            lines.append("lost " + ", ".join(f"{fmt_value(r['value'])} (was #{r['from_rank']})" for r in top["lost"]))
        if top["changed_rank"]:
            lines.append("moved " + ", ".join(f"{fmt_value(r['value'])} #{r['from_rank']} → #{r['to_rank']}" for r in top["changed_rank"]))
        console.print(Text(f"{c['column']}: top values " + "; ".join(lines)))
    notes = {c["drift"]["note"] for c in cols if c["drift"]["note"]}
    for note in sorted(notes):
        console.print(Text(f"note: {note} ({plural(sum(c['drift']['note'] == note for c in cols), 'column')})", style="dim"))


# ============================================================== history
def history_changes(cat: Catalog, infos: list[TransactionInfo]) -> list[dict[str, Any]]:
    """What each transaction changed in the live partitions, by replaying their actions from the
    state before the first: ``partitions_new`` / ``_changed`` / ``_gone`` (a re-added partition
    whose data fingerprint (else row count) is the same is unchanged: an analyze re-names every
    partition), ``rows_added`` / ``rows_removed`` (a changed partition: its new rows added and
    its old ones removed) and ``rows`` (the live partitions' rows after it)."""
    from engine.catalog import AddPartition, RemovePartition, TombstonePartition

    live: dict[str, tuple[int, str]] = {}
    if infos and infos[0].id > 1:
        try:
            live = {k: (e.row_count, e.data_fingerprint) for k, e in cat.state_at(infos[0].id - 1).partitions.items()}
        except Exception:  # noqa: BLE001 - pruned history: count from the first kept transaction
            live = {}
    out = []
    for info in infos:
        new = changed = gone = added_rows = removed_rows = 0
        for a in info.actions:
            if isinstance(a, AddPartition):
                old = live.get(a.key)
                if old is None:
                    new, added_rows = new + 1, added_rows + a.row_count
                elif old[0] != a.row_count or (old[1] and a.data_fingerprint and old[1] != a.data_fingerprint):
                    changed, added_rows, removed_rows = changed + 1, added_rows + a.row_count, removed_rows + old[0]
                live[a.key] = (a.row_count, a.data_fingerprint)
            elif isinstance(a, (RemovePartition, TombstonePartition)) and a.key in live:
                gone, removed_rows = gone + 1, removed_rows + live.pop(a.key)[0]
        out.append(
            {
                "partitions_new": new, "partitions_changed": changed, "partitions_gone": gone,
                "rows_added": added_rows, "rows_removed": removed_rows, "rows": sum(r for r, _ in live.values()),
            }
        )  # fmt: skip
    return out
