"""The text views of the catalog commands: history, gc, verify, expire/prune (retention),
config (the retention policy) and rebuild (engine/cli/output.py's TextOutput draws them here)."""

from __future__ import annotations

from typing import Any

from engine.cli.layout import heading, kv_grid, natural_width, print_records
from engine.cli.plain import Console, Table, Text, box
from engine.display import fmt_count, plural


def print_history(console: Console, doc: dict[str, Any]) -> None:
    rows = doc["transactions"]
    if not rows:
        console.print(Text(f"table {doc['table']} has no catalog transactions"))
        return
    title = f"History of {doc['table']} (newest first)"
    note = Text(
        "* current · parts: partitions +new ~changed -removed · rows: rows +added -removed (a changed partition: new and old) · "
        "--output json has the ids in full",
        style="dim",
    )
    headers = ["txn", "uuid", "committed (UTC)", "job id", "snapshot", "parts", "rows"]
    cells = [
        [f"{r['txn_id']}{'*' if r.get('current') else ' '}", r["uuid"][:8], str(r["committed_at"])[:19].replace("T", " "), r["job_id"],
         (r["snapshot"] or "")[:8], _history_parts(r), _history_rows(r)]
        for r in rows
    ]  # fmt: skip
    if natural_width(headers, cells, gap=1) > console.width:
        print_records(console, headers, cells, title=title)
        console.print(note)
        return
    t = Table(
        box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0),
        title=Text(title, style="table.title"), title_justify="left",
    )  # fmt: skip
    # the ids and the time never wrap; on a narrow terminal the snapshot gives way
    t.add_column("txn", justify="right", no_wrap=True, min_width=max(3, *(len(str(r["txn_id"])) + 1 for r in rows)))
    t.add_column("uuid", no_wrap=True, min_width=8)
    t.add_column("committed (UTC)", no_wrap=True, min_width=19)
    t.add_column("job id", no_wrap=True, min_width=max(len(r["job_id"]) for r in rows))
    t.add_column("snapshot", overflow="ellipsis", no_wrap=True, min_width=4, max_width=8)
    t.add_column("parts", no_wrap=True, min_width=max(8, *(len(_history_parts(r)) for r in rows)))
    t.add_column("rows", no_wrap=True, min_width=max(5, *(len(_history_rows(r)) for r in rows)))
    for r in rows:
        mark = "*" if r.get("current") else " "
        t.add_row(
            f"{r['txn_id']}{mark}", r["uuid"][:8], str(r["committed_at"])[:19].replace("T", " "), r["job_id"],
            (r["snapshot"] or "")[:8], _history_parts(r), _history_rows(r),
        )  # fmt: skip
    console.print(t)
    console.print(note)


def print_gc(console: Console, doc: dict[str, Any]) -> None:
    files = doc["files"]
    verb = "would delete" if doc["dry_run"] else "deleted"
    heading(console, f"Garbage collection of {doc['table']}{' (dry run)' if doc['dry_run'] else ''}")
    for path in files:
        console.print(Text(f"  {path}"))
    console.print(
        kv_grid(
            [
                (verb, plural(len(files), "file")),
                ("referenced", plural(doc["referenced"], "file")),
                ("too recent", f"{plural(doc['recent'], 'file')} (younger than {doc['grace_period_s']:g} s)"),
            ]
            + ([("running jobs", f"{plural(doc['running_jobs'], 'file')} (their job holds its lease)")] if doc.get("running_jobs") else [])
        )
    )


def print_verify(console: Console, doc: dict[str, Any]) -> None:
    ok = not doc["problems"]
    heading(console, f"Verify {doc['table']}: {'ok' if ok else plural(len(doc['problems']), 'problem')}")
    for p in doc["problems"]:
        console.print(Text(f"  {p['kind']}: {p['message']}", style="red"), soft_wrap=True)
    for p in doc.get("warnings", []):
        console.print(Text(f"  warning: {p['kind']}: {p['message']}", style="yellow"), soft_wrap=True)
    for line in doc.get("repaired", []):
        console.print(Text(f"  repaired: {line}"), soft_wrap=True)
    console.print(
        kv_grid(
            [
                ("transactions", fmt_count(doc["transactions"])),
                ("checkpoints", f"{fmt_count(doc['checkpoints'])} ({fmt_count(doc['checkpoints_checked'])} checked against their transactions)"),
                (
                    "files",
                    f"{fmt_count(doc['files_checked'])} read against their checksums"
                    + (f", {fmt_count(doc['files_unchecked'])} without one (size only)" if doc["files_unchecked"] else ""),
                ),
            ]
        )
    )


def print_retention(console: Console, doc: dict[str, Any]) -> None:
    heading(console, f"Retention of {doc['table']}")
    expired = doc["expired_before_txn"]
    pairs = []
    if doc.get("policy"):
        pairs.append(("policy", doc["policy"]))
    pairs += [
        ("expired", f"the states before transaction {expired}" if expired else "nothing (every state is kept)"),
        ("kept from", f"transaction {doc['kept_from_txn']}" if doc["kept_from_txn"] else "(no transactions)"),
        ("transaction files", f"{fmt_count(doc['transaction_files_deleted'])} deleted"),
        ("entries removed", fmt_count(doc["entries_removed"])),
    ]
    if doc.get("files_referenced") is not None:
        pairs.append(
            (
                "statistics files",
                f"{fmt_count(len(doc['files_deleted']))} deleted, {fmt_count(doc['files_referenced'])} referenced, {fmt_count(doc['files_too_recent'])} too recent",
            )
        )
    console.print(kv_grid(pairs))


def print_retention_policy(console: Console, doc: dict[str, Any]) -> None:
    how = "set" if doc["changed"] else ("the default (none set)" if doc["default"] else "stored")
    heading(console, f"Retention policy of {doc['table']} ({how})")
    pairs = [
        ("retain last", "-" if doc["retain_last"] is None else f"{doc['retain_last']} states"),
        ("retain for", doc["retain_for"] or "-"),
        ("gc grace", doc["gc_grace"]),
    ]
    console.print(kv_grid(pairs))
    console.print(Text("applied after every analyze; a state is kept if one rule keeps it (metastore config --help)", style="dim"))


def print_rebuild(console: Console, doc: dict[str, Any]) -> None:
    heading(console, f"Rebuilt the catalog of {doc['table']}")
    pairs = [
        ("transactions", fmt_count(doc["transactions"])),
        ("jobs", ", ".join(doc["jobs"]) or "(none)"),
    ]
    if doc.get("backup_uri"):
        pairs.append(("backup", doc["backup_uri"]))
    if doc.get("current"):
        c = doc["current"]
        pairs.append(
            ("current", f"transaction {c['txn_id']}, job {c['job_id']}, {plural(c['partitions'], 'partition')}, {fmt_count(c['rows'])} rows")
        )
    console.print(kv_grid(pairs))
    if doc["skipped"]:
        console.print(Text(f"skipped ({len(doc['skipped'])}):", style="bold"))
        for line in doc["skipped"]:
            console.print(Text(f"  {line}"))


def _history_parts(r: dict[str, Any]) -> str:
    """A transaction's partitions: +new ~changed -removed (engine.cli.diff.history_changes)."""
    return f"+{r['partitions_new']} ~{r['partitions_changed']} -{r['partitions_gone']}"


def _history_rows(r: dict[str, Any]) -> str:
    return f"+{r['rows_added']:,} -{r['rows_removed']:,}"
