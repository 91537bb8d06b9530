"""What a client is told of the server's file system: tables by name, never absolute paths.

Error texts of the engine name the files they are about (``/srv/stats/sales/runs/<job>/table/
statistics.parquet: truncated``): useful to an operator, a map of the server to anyone else.
``StorePaths`` rewrites the store's location out of a text (any spelling: as configured,
absolute, resolved, ``file://``), leaving the path inside the store, which starts with the
table's name (``sales/runs/<job>/table/statistics.parquet: truncated``); the server logs the
original. The sources' locations are not in these texts; the ``staleness`` action names a
table's source only to authenticated callers (as ``health`` names the store).
"""

from __future__ import annotations

import logging
import os
import re

import pyarrow.flight as flight

from engine import fileio

log = logging.getLogger("metastore.flight")


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

    def error(self, exc: flight.FlightError) -> flight.FlightError:
        """``exc`` with the store's location taken out of its message (logged in full when it held one)."""
        text = str(exc)
        public = self(text)
        if public == text:
            return exc
        log.warning("answered with the store's location removed: %s", text)
        try:
            return type(exc)(public, exc.extra_info)
        except TypeError:  # a FlightError subclass with another signature
            return flight.FlightServerError(public, exc.extra_info)
