"""What a client is told of the server's file system: tables by name, never absolute paths.

Error texts of the engine name the files they are about (``/srv/stats/sales/runs/<job>/table/
statistics.parquet: truncated``): useful to an operator, a map of the server to anyone else.
``StorePaths`` rewrites the store's location out of a text (any spelling: as configured,
absolute, resolved, ``file://``), leaving the path inside the store, which starts with the
table's name (``sales/runs/<job>/table/statistics.parquet: truncated``); the server logs the
original. The text part is engine.disclosure's (the web app uses it too); ``error`` here is Flight's. The sources' locations are not in these texts; the ``staleness`` action names a
table's source only to authenticated callers (as ``health`` names the store).
"""

from __future__ import annotations

import logging

import pyarrow.flight as flight

from engine import disclosure as engine_disclosure

log = logging.getLogger("metastore.flight")


class StorePaths(engine_disclosure.StorePaths):
    """Removes the store's location from texts sent to clients (see the module docstring);
    ``error``: the same for a Flight error."""

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
