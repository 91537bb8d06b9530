"""Derived statistics of a table: the cache of computed subsets (engine/runtime/subset.py),
where it lives and how the table's retention lets go of it (docs/CATALOG.md, "Derived
statistics: computed subsets").

A computed subset is published like any table's statistics, by the analyze job, into a
store of its own below the table's directory::

    <store>/<table>/subsets/<predicate digest>/PREDICATE              the canonical predicate (text)
    <store>/<table>/subsets/<predicate digest>/<columns>/catalog/...  its catalog (one state per table snapshot)
    <store>/<table>/subsets/<predicate digest>/<columns>/runs/...     its statistics files

``<columns>`` is ``all`` (every column) or ``c-<digest of the sorted column names>``. Each
state's snapshot is the table's snapshot it was computed from: an entry answers only for
that snapshot (``TableStatistics(..., at_snapshot=)``).

Retention: the table's ``gc`` (and so every expiry and the retention after each publish)
also collects the derived tables. A derived state is kept while some kept state of the
table describes its snapshot; a derived table none of whose states is kept is deleted
whole (catalog and files) once its newest transaction is older than the grace period;
otherwise its states before the oldest kept one are expired and its own gc runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import fileio
from engine.catalog.paths import CATALOG_DIR

if TYPE_CHECKING:
    from engine.catalog.catalog import Catalog

log = logging.getLogger("engine.catalog")

SUBSETS_DIR = "subsets"
PREDICATE_FILE = "PREDICATE"
ALL_COLUMNS = "all"

__all__ = [
    "ALL_COLUMNS",
    "PREDICATE_FILE",
    "SUBSETS_DIR",
    "DerivedTable",
    "collect",
    "derived_tables",
    "derived_tables_in",
    "predicate_root",
    "subsets_root",
]


def subsets_root(store_root: str, table: str) -> str:
    return fileio.join(store_root, table, SUBSETS_DIR)


def predicate_root(store_root: str, table: str, predicate_digest: str) -> str:
    """The store root of one predicate's subsets (its tables are column sets)."""
    return fileio.join(subsets_root(store_root, table), predicate_digest)


@dataclass(frozen=True)
class DerivedTable:
    store_root: str  # the predicate's root
    name: str  # the column set

    @property
    def uri(self) -> str:
        return fileio.join(self.store_root, self.name)


def derived_tables_in(predicate_root: str) -> list[str]:
    """The column sets (table names) of one predicate's subsets (one listing, not recursive)."""
    import pyarrow.fs as pafs

    fs, path = fileio.resolve(predicate_root)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=False, allow_not_found=True))
    except OSError:
        return []
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)


def derived_tables(store_root: str, table: str) -> list[DerivedTable]:
    """Every derived table of ``table`` that has a catalog (one listing of the subsets directory)."""
    root = subsets_root(store_root, table)
    try:
        entries = fileio.list_files(root)
    except FileNotFoundError:
        return []
    prefix = fileio.resolve(root)[1].rstrip("/") + "/"
    found: set[tuple[str, str]] = set()
    for e in entries:
        parts = e.path[len(prefix) :].split("/") if e.path.startswith(prefix) else []
        if len(parts) > 3 and parts[2] == CATALOG_DIR:
            found.add((parts[0], parts[1]))
    return [DerivedTable(fileio.join(root, d), name) for d, name in sorted(found)]


def collect(catalog: Catalog, grace_period_s: float, *, dry_run: bool = False, now: float | None = None) -> list[str]:
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
    from engine.catalog.catalog import Catalog
    from engine.catalog.retention import expire_before

    cat = Catalog.open(d.store_root, d.name)
    history = cat.headers()
    if not history:
        return []
    live = [h.id for h in history if h.snapshot_id in kept]
    if not live:
        if history[-1].timestamp_us / 1e6 > cutoff_s:
            return []  # young: a subset of a snapshot being published right now, perhaps
        files = fileio.list_files(d.uri)
        if not dry_run:
            from engine.catalog.publish import forget_catalog

            fileio.delete_dir(d.uri)
            forget_catalog(d.store_root, d.name)
        return _relative(files, prefix)
    if not dry_run and min(live) > history[0].id:
        expire_before(cat, min(live), by="the table's retention (derived statistics of expired table states)")
    result = cat.gc(grace_s, dry_run=dry_run, now=now)
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
