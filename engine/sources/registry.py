"""The table formats by name: what reads each one and how a location shows it is one.

One registry, as a file system registry by scheme: every consumer that lists or picks
a table format reads it from here (the console's ``--format`` choices, the Flight
server's ``format`` option, ``open_table``, ``snapshots_since``, detection). A new
format is its reader module plus one entry. This module imports nothing heavy: the
console reads the names at start-up, and a format's module loads only when a table of
it is opened (``implementation``).

A format's module provides ``open_source(uri, name, selector, catalog, footers,
data_roots) -> TableSource`` and ``snapshots_since(uri, snapshot_id) -> int | None``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

__all__ = ["FALLBACK", "FORMATS", "NAMES", "WITH_HISTORY", "FormatEntry", "detected", "implementation", "listed"]


@dataclass(frozen=True)
class FormatEntry:
    """One table format.

    ``marker``: the directory at a table's root that shows the format (None: the format
    detection falls back to); ``marker_text``: how messages name it; ``metadata_file``:
    the marker directory must also hold a table metadata file (Iceberg's
    ``metadata/*.metadata.json``); ``history``: the format keeps snapshots
    (``at_snapshot``/``as_of`` apply); ``detect_rank``: the order detection checks
    and names the formats with a marker in.
    """

    name: str
    module: str
    marker: str | None = None
    marker_text: str = ""
    metadata_file: bool = False
    history: bool = True
    detect_rank: int = 0

    @property
    def title(self) -> str:
        return self.name.capitalize()


#: the formats in the order the console and messages list them; detection checks the
#: formats with a marker (by ``detect_rank``) and falls back to ``FALLBACK``
FORMATS: dict[str, FormatEntry] = {
    e.name: e
    for e in (
        FormatEntry("parquet", "engine.sources.parquet", history=False),
        FormatEntry("iceberg", "engine.sources.iceberg", "metadata", "metadata/*.metadata.json", metadata_file=True, detect_rank=2),
        FormatEntry("delta", "engine.sources.delta", "_delta_log", "_delta_log/", detect_rank=0),
        FormatEntry("hudi", "engine.sources.hudi", ".hoodie", ".hoodie/", detect_rank=1),
    )
}
NAMES: tuple[str, ...] = tuple(FORMATS)
FALLBACK = "parquet"
#: the formats with a history of snapshots (a catalog's provider names them: spark_bridge)
WITH_HISTORY: tuple[str, ...] = tuple(n for n, e in FORMATS.items() if e.history)


def listed(conjunction: str = "or") -> str:
    """The names for a message: ``parquet, iceberg, delta or hudi``."""
    return f"{', '.join(NAMES[:-1])} {conjunction} {NAMES[-1]}"


def detected() -> tuple[FormatEntry, ...]:
    """The formats a location's markers show, in the order detection checks them."""
    return tuple(sorted((e for e in FORMATS.values() if e.marker is not None), key=lambda e: e.detect_rank))


def implementation(name: str) -> ModuleType:
    """The module that reads format ``name`` (imported on first use)."""
    return importlib.import_module(FORMATS[name].module)
