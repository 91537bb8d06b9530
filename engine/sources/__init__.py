"""Table formats behind one interface (:class:`TableSource`).

``open_table`` (engine/sources/opening.py) is the single place that decides which
implementation reads a location, so callers never branch on the format: a Delta table
(``_delta_log/``), a Hudi table (``.hoodie/``) or an Iceberg table location
(``metadata/*.metadata.json``) is recognised by its markers (engine/sources/formats.py),
``format=`` overrides, and anything else is a Parquet directory; the formats, their
readers and markers are one registry (engine/sources/registry.py). docs/FORMATS.md says
what each format supports and refuses.

The names load on first use (PEP 562): the console reads the registry's format names
at start-up without pyarrow, and the read commands' "stale by" check (``snapshots_since``)
needs the formats, not the Parquet reader and the pyarrow.compute it imports (issue #20).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.sources.base import DataFile, Partition, TableSource
    from engine.sources.formats import SnapshotSelector, TableFormat, detect_format
    from engine.sources.opening import open_table, snapshots_since
    from engine.sources.parquet import ParquetDirectorySource

#: where each exported name lives
_EXPORTS = {
    "DataFile": "engine.sources.base",
    "Partition": "engine.sources.base",
    "TableSource": "engine.sources.base",
    "SnapshotSelector": "engine.sources.formats",
    "TableFormat": "engine.sources.formats",
    "detect_format": "engine.sources.formats",
    "open_table": "engine.sources.opening",
    "snapshots_since": "engine.sources.opening",
    "ParquetDirectorySource": "engine.sources.parquet",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "DataFile",
    "ParquetDirectorySource",
    "Partition",
    "SnapshotSelector",
    "TableFormat",
    "TableSource",
    "detect_format",
    "open_table",
    "snapshots_since",
]
