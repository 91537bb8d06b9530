"""Derived statistics of a table: the cache of computed subsets (engine/runtime/subset.py),
where it lives and how the table's retention lets go of it (docs/reference/CATALOG.md, "Derived
statistics: computed subsets").

A computed subset is published like any table's statistics, by the analyze job, into a
store of its own below the table's directory::

    <store>/<table>/subsets/<predicate digest>/PREDICATE              the canonical predicate (text)
    <store>/<table>/subsets/<predicate digest>/<columns>/catalog/...  its catalog (one state per table snapshot)
    <store>/<table>/subsets/<predicate digest>/<columns>/runs/...     its statistics files

``<columns>`` is ``all`` (every column) or ``c-<digest of the sorted column names>``. Each
state's snapshot is the table's snapshot it was computed from: an entry answers only for
that snapshot (``TableStatistics(..., at_snapshot=)``).

Retention (engine/catalog/gc.py, ``collect``): the table's ``gc`` (and so every expiry and the retention after each publish)
also collects the derived tables. A derived state is kept while some kept state of the
table describes its snapshot; a derived table none of whose states is kept is deleted
whole (catalog and files) once its newest transaction is older than the grace period;
otherwise its states before the oldest kept one are expired and its own gc runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import fileio
from engine.catalog.paths import CATALOG_DIR

SUBSETS_DIR = "subsets"
PREDICATE_FILE = "PREDICATE"
ALL_COLUMNS = "all"

__all__ = [
    "ALL_COLUMNS",
    "PREDICATE_FILE",
    "SUBSETS_DIR",
    "DerivedTable",
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
