"""What a client of a server is told of its file system: tables by name, never absolute paths.

Error texts of the engine name the files they are about (``/srv/stats/sales/runs/<job>/table/
statistics.parquet: truncated``): useful to an operator, a map of the server to anyone else.
``StorePaths`` rewrites the store's location out of a text (any spelling: as configured,
absolute, resolved, ``file://``), leaving the path inside the store, which starts with the
table's name (``sales/runs/<job>/table/statistics.parquet: truncated``). The Flight server
(flight_server/disclosure.py) and the web app (engine/ui) send texts through it;
``store_label`` is the name a page shows for the store (its last path component).
"""

from __future__ import annotations

import functools
import os
import re

from engine import fileio


class StorePaths:
    """Removes the store's location from texts sent to clients (see the module docstring)."""

    def __init__(self, store: str) -> None:
        spellings = {store}
        try:
            spellings.add(fileio.canonical(store))
        except Exception:  # noqa: BLE001 - an unusual spelling: the others still apply
            pass
        if fileio.is_local(store):
            local = store.removeprefix("file://").removeprefix("file:")
            spellings.update({os.path.abspath(local), os.path.realpath(local)})
        roots = sorted({s.rstrip("/") for s in spellings if s.rstrip("/")}, key=len, reverse=True)
        alternatives = "|".join(re.escape(r) for r in roots)
        # a root (optionally as a file URI) followed by a path separator or the end of a path
        self._pattern = re.compile(rf"(?:file://)?(?:{alternatives})(?:/+|(?![^\s'\",:;)\]]))") if roots else None

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: "" if m.group(0).endswith("/") else "<store>", text)


@functools.lru_cache(maxsize=32)
def store_paths(store: str) -> StorePaths:
    """The StorePaths of ``store`` (one per store: its pattern is compiled once)."""
    return StorePaths(store)


def store_label(store: str) -> str:
    """The name a page shows for ``store``: its last path component (``.metastore``, ``stats`` of
    ``s3://bucket/stats``), never where it is."""
    return store.rstrip("/").rsplit("/", 1)[-1] or "store"
