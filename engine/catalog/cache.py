"""This process's catalog of each table the lookups read: opened once, refreshed on each use
(one LIST of the names after its head)."""

from __future__ import annotations

import threading

from engine.catalog.replay import CatalogLog

__all__ = ["catalog_for", "forget_catalog"]

_catalogs: dict[tuple[str, str], CatalogLog] = {}
_catalogs_lock = threading.Lock()


def catalog_for(store_uri: str, table: str) -> CatalogLog:
    """A per-process catalog per table, refreshed on each use (one LIST of new names)."""
    key = (store_uri, table)
    with _catalogs_lock:
        cat = _catalogs.get(key)
    if cat is None:
        cat = CatalogLog.open(store_uri, table)
        with _catalogs_lock:
            _catalogs[key] = cat
    else:
        cat.refresh()
    return cat


def forget_catalog(store_uri: str, table: str) -> None:
    """Drop this process's catalog of ``table``: its log was deleted (a derived table that gc
    collected, engine/catalog/gc.py) and may be written anew, which a refresh of the
    cached state, listing only names after its head, would not see."""
    with _catalogs_lock:
        _catalogs.pop((store_uri, table), None)
