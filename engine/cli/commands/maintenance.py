"""Catalog maintenance of a table: gc, expire, prune, config (its retention policy), rebuild, verify."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from engine.cli.command import Settings, command, common_options
from engine.cli.opening import catalog_of
from engine.cli.options import DURATION_HELP, Duration
from engine.exceptions import StatisticsNotFoundError

if TYPE_CHECKING:
    from engine.catalog import Catalog
    from engine.catalog.retention import RetentionResult


@command(short_help="Delete statistics files no catalog transaction references.")
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
    cat = catalog_of(settings.store, table, up_to_last_good=True)
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


def _retention_doc(table: str, store: str, result: RetentionResult) -> dict[str, Any]:
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


def _forget(cat: Catalog, deleted: list[str]) -> None:
    from engine import lookup

    for rel in deleted:
        lookup.forget(cat.table_uri.rstrip("/") + "/" + rel)


@command(short_help="Expire old states of a table and delete the files only they used.")
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
    cat = catalog_of(settings.store, table)
    older = f"--older-than {format_duration(older_than)}" if older_than is not None else ""
    opts = " ".join(o for o in (f"--keep-last {keep_last}" if keep_last else "", older) if o)
    result = apply_policy(cat, policy, by=f"metastore expire {opts}")
    if result.gc:
        _forget(cat, result.gc.deleted)
    settings.out().retention(_retention_doc(table, settings.store, result))


@command(short_help="Delete the catalog history of a table before a transaction.")
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

    cat = catalog_of(settings.store, table)
    deleted, removed = expire_before(cat, before, by=f"metastore prune --before {before}")
    settings.out().retention(
        {
            "table": table, "store": settings.store, "policy": None, "kept_from_txn": cat.history()[0].id,
            "expired_before_txn": before if deleted else None, "transaction_files_deleted": deleted,
            "entries_removed": removed, "files_deleted": [], "files_referenced": None, "files_too_recent": None,
        }
    )  # fmt: skip


@command(short_help="Show or set the retention policy of a table.")
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

    cat = catalog_of(settings.store, table)
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


@command(short_help="Re-create the catalog of a table from its statistics files.")
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


@command(short_help="Check a table's catalog and statistics files; exit 1 on any problem.")
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
