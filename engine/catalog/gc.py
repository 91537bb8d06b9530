"""gc: deleting the statistics files no kept state of a table references, and the table's
derived statistics (computed subsets) no kept state needs.

:func:`gc` lists the table's runs, refuses while a transaction is missing
(engine/catalog/integrity.py), keeps what the kept states reference
(engine/catalog/maintenance.py) and what running jobs hold (engine/catalog/lease.py), and
records what it saw (engine/catalog/retention_records.py). :func:`collect` is its part for
the derived tables (engine/catalog/derived.py says where they live): it expires their
states and runs their own gc, so the two are one module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from engine import fileio
from engine.catalog import lease, retention_records
from engine.catalog.cache import forget_catalog
from engine.catalog.derived import PREDICATE_FILE, DerivedTable, derived_tables, subsets_root
from engine.catalog.integrity import missing_transactions
from engine.catalog.io import local_prune_empty_dirs
from engine.catalog.logindex import RUNS_PREFIX, run_of
from engine.catalog.maintenance import expire_before, referenced_paths
from engine.catalog.paths import RUNS_DIR
from engine.catalog.replay import CatalogLog
from engine.exceptions import CatalogCorruptError, InvalidArgumentError

log = logging.getLogger("engine.catalog")

__all__ = ["GcResult", "collect", "gc"]


@dataclass(frozen=True)
class GcResult:
    deleted: list[str]  # paths relative to the table directory (would be deleted, with dry_run)
    referenced: int  # files kept because a kept transaction references them
    recent: int  # unreferenced files kept because they are younger than the grace period
    dry_run: bool
    leased: int = 0  # unreferenced files kept because their run's job holds a fresh lease (engine/catalog/lease.py)


def gc(cat: CatalogLog, grace_period_s: float, *, dry_run: bool = False, now: float | None = None, force: bool = False) -> GcResult:
    """Delete statistics files below ``runs/`` that no kept transaction references.

    Only files older than ``grace_period_s`` (by their modification time) go:
    an analyze job still running has written files that no transaction
    references yet; the files of a run whose job holds a fresh lease
    (engine/catalog/lease.py) stay whatever their age. Other files
    of a run (its manifest.json) stay while the run has referenced files or its
    job made a kept transaction.

    Refused (CatalogCorruptError, nothing deleted) while a transaction is missing
    (engine.catalog.integrity: the catalog's files, ``CURRENT``, the runs' manifests):
    a missing transaction may reference any run, even an old one (a republish names
    an old run's files). ``rebuild`` repairs the catalog; ``force`` deletes what the
    remaining transactions do not reference.

    Every gc that is not a dry run records when it started and what it saw
    (``catalog/retention/gc-*.json``): the gc after a publish runs only when
    :func:`engine.catalog.retention.gc_due` says it can find something new.
    """
    if grace_period_s < 0:
        raise InvalidArgumentError("grace_period_s must be >= 0")
    started = time.time() if now is None else now
    expiry_seen = retention_records.newest_expiry(cat)  # before the listing: a later expiry is news to the next gc
    runs_uri = fileio.join(cat.table_uri, RUNS_DIR)
    files = cat.io.list_files(runs_uri)  # list first: files written after this are not candidates
    # then the catalog, from the store (not a listing remembered from before the runs'): one
    # listing that the hole check and the references share
    cat.io.relist(cat.transactions_uri)
    if not force:
        missing = missing_transactions(cat, runs_listing=files)
        if missing:
            m = missing[0]
            raise CatalogCorruptError(
                f"gc refused: {m.message(cat.table)}; a missing transaction may reference any run, so nothing "
                f"is deleted until the catalog is rebuilt (metastore rebuild {cat.table}) or gc is forced (--force)",
                uri=cat.file_uri(m.file),
            )
    refs = referenced_paths(cat, tolerate_missing=force)
    root = fileio.resolve(cat.table_uri)[1].rstrip("/") + "/"
    cutoff_ns = int(((time.time() if now is None else now) - grace_period_s) * 1e9)
    listed = [(entry, entry.path[len(root) :] if entry.path.startswith(root) else entry.path) for entry in files]
    # a run with a referenced file keeps its other files (manifest.json): the runs of the listed
    # referenced files answer that for nearly every run; the runs of every reference (one pass
    # over all of them) only when a run's referenced files are all gone
    live_runs = {run_of(rel) for _, rel in listed if rel in refs and rel.startswith(RUNS_PREFIX)}
    # a kept transaction's run keeps its manifest.json (a republish reads it) even when it has no
    # referenced file: a job that carried an unchanged table over wrote nothing else
    try:
        live_runs.update(f"{RUNS_DIR}/{h.job_id}" for h in cat.headers())
    except CatalogCorruptError:  # forced past a missing transaction: the references decide alone
        pass
    all_live: set[str] | None = None
    held = {f"{RUNS_DIR}/{job}" for job, info in lease.leases(files, now).items() if info.fresh}  # running jobs' runs
    doomed, referenced, recent, leased = [], 0, 0, 0
    for entry, rel in listed:
        if rel in refs:
            referenced += 1
            continue
        if held and run_of(rel) in held:
            leased += 1
            continue
        if not rel.endswith(".parquet"):
            run = "/".join(rel.split("/")[:2])
            if run not in live_runs and all_live is None:
                all_live = {run_of(p) for p in refs if p.startswith(RUNS_PREFIX)}
            if run in live_runs or (all_live is not None and run in all_live):
                referenced += 1
                continue
        if entry.mtime_ns is None or entry.mtime_ns > cutoff_ns:
            recent += 1
            continue
        doomed.append((rel, entry.uri))
    if not dry_run:
        for _rel, uri in doomed:
            cat.io.delete(uri)
        if doomed:
            local_prune_empty_dirs(runs_uri)
    # the table's derived statistics (computed subsets) of states no longer kept go too
    derived = collect(cat, grace_period_s, dry_run=dry_run, now=now)
    if not dry_run:  # when it ran and what it saw: the after-publish gc is paced by it (retention.gc_due)
        retention_records.record_gc(cat, started, expiry_seen, recent, len(doomed))
    return GcResult([rel for rel, _ in doomed] + derived, referenced, recent, dry_run, leased)


# --------------------------------------------------------------------------- derived statistics


def collect(catalog: CatalogLog, grace_period_s: float, *, dry_run: bool = False, now: float | None = None) -> list[str]:
    """The table's gc of its derived tables: what no kept state of the table needs goes
    (see the module's docstring). Returns the deleted files' paths relative to the table's
    directory. A derived table that cannot be read is left alone (logged): gc of the table
    itself never fails on its cache."""
    try:
        derived = derived_tables(catalog.store_uri, catalog.table)
        if not derived:
            return []
        kept = {h.snapshot_id for h in catalog.headers()}
    except Exception as exc:  # noqa: BLE001 - the cache must not fail the table's gc
        log.warning("table %s: derived statistics not collected: %s: %s", catalog.table, type(exc).__name__, exc)
        return []
    cutoff_s = (time.time() if now is None else now) - grace_period_s
    table_prefix = fileio.resolve(catalog.table_uri)[1].rstrip("/") + "/"
    deleted: list[str] = []
    for d in derived:
        try:
            deleted += _collect_one(d, kept, cutoff_s, grace_period_s, dry_run, now, table_prefix)
        except Exception as exc:  # noqa: BLE001 - the cache must not fail the table's gc
            log.warning("table %s: derived statistics %s/%s not collected: %s: %s", catalog.table, d.store_root, d.name, type(exc).__name__, exc)
    if not dry_run and deleted:
        _drop_empty_predicates(subsets_root(catalog.store_uri, catalog.table))
    return deleted


def _relative(entries: Iterable[fileio.FileEntry], prefix: str) -> list[str]:
    return [e.path[len(prefix) :] if e.path.startswith(prefix) else e.path for e in entries]


def _collect_one(d: DerivedTable, kept: set[str], cutoff_s: float, grace_s: float, dry_run: bool, now: float | None, prefix: str) -> list[str]:
    cat = CatalogLog.open(d.store_root, d.name)
    history = cat.headers()
    if not history:
        return []
    live = [h.id for h in history if h.snapshot_id in kept]
    if not live:
        if history[-1].timestamp_us / 1e6 > cutoff_s:
            return []  # young: a subset of a snapshot being published right now, perhaps
        files = fileio.list_files(d.uri)
        if not dry_run:
            fileio.delete_dir(d.uri)
            forget_catalog(d.store_root, d.name)
        return _relative(files, prefix)
    if not dry_run and min(live) > history[0].id:
        expire_before(cat, min(live), by="the table's retention (derived statistics of expired table states)")
    result = gc(cat, grace_s, dry_run=dry_run, now=now)
    base = fileio.resolve(d.uri)[1].rstrip("/") + "/"
    return [(base + rel)[len(prefix) :] if (base + rel).startswith(prefix) else base + rel for rel in result.deleted]


def _drop_empty_predicates(root: str) -> None:
    """A predicate's directory left with only its PREDICATE file goes too."""
    try:
        entries = fileio.list_files(root)
    except FileNotFoundError:
        return
    prefix = fileio.resolve(root)[1].rstrip("/") + "/"
    by_predicate: dict[str, list[str]] = {}
    for e in entries:
        rel = e.path[len(prefix) :] if e.path.startswith(prefix) else e.path
        head, _, rest = rel.partition("/")
        by_predicate.setdefault(head, []).append(rest)
    for head, rests in by_predicate.items():
        if rests == [PREDICATE_FILE]:
            fileio.delete_dir(fileio.join(root, head))
