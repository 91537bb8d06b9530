"""Table formats behind one interface (:class:`TableSource`).

``open_table`` is the single place that decides which implementation reads a
location, so callers never branch on the format: a Delta table (``_delta_log/``),
a Hudi table (``.hoodie/``) or an Iceberg table location (``metadata/*.metadata.json``)
is recognised by its markers (engine/sources/formats.py), ``format=`` overrides,
and anything else is a Parquet directory. docs/FORMATS.md says what each format
supports and refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine import fileio
from engine.exceptions import AccessDeniedError, InvalidArgumentError, InvalidTableLayoutError, MetastoreError
from engine.sources.base import DataFile, Partition, TableSource
from engine.sources.formats import (
    SnapshotSelector,
    TableFormat,
    detect_format,
    parse_as_of,
)

if TYPE_CHECKING:
    from engine.sources.footers import FetchFooters
    from engine.sources.parquet import ParquetDirectorySource


def __getattr__(name: str) -> Any:
    """``ParquetDirectorySource`` loads on first use (PEP 562): the read commands' "stale by"
    check (``snapshots_since``) needs the formats, not the Parquet reader and the
    pyarrow.compute it imports (issue #20, start-up)."""
    if name == "ParquetDirectorySource":
        from engine.sources.parquet import ParquetDirectorySource

        return ParquetDirectorySource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def open_table(
    uri: str,
    name: str | None = None,
    *,
    format: str | TableFormat | None = None,
    at_snapshot: str | int | None = None,
    as_of: str | int | datetime | None = None,
    catalog: str | None = None,
    footers: FetchFooters | None = None,
    data_roots: Sequence[str] = (),
) -> TableSource:
    """The table at ``uri`` (local path, ``file://`` or ``s3://``), listed and schema-checked.

    ``name`` defaults to the last path component of ``uri``. ``format`` (parquet,
    iceberg, delta, hudi) overrides detection. ``at_snapshot`` (Iceberg snapshot id,
    Delta version, Hudi instant) or ``as_of`` (a timestamp: the newest snapshot
    committed at or before it) choose an older snapshot of a table format.
    ``catalog`` names a pyiceberg catalog; ``uri`` is then the table identifier
    (``db.table``) and the format is Iceberg. ``footers``: reads a Parquet directory's
    footers elsewhere (Ray tasks: engine/runtime/footers.py) when it takes them; the
    table formats take row counts and schemas from their metadata and read no footer.
    ``data_roots``: where the files a table format's metadata names may lie besides the
    table's location (engine/sources/locations.py: a file elsewhere refuses the table).
    """
    selector = SnapshotSelector(None if at_snapshot is None else str(at_snapshot), parse_as_of(as_of))
    try:
        return _open(uri, name, format, selector, catalog, footers, tuple(data_roots))
    except Exception as exc:
        if not (isinstance(exc, MetastoreError) or fileio.is_io_error(exc)):
            raise
        # a refused or unsigned request surfaces in each library's own words (a listing's
        # OSError, delta-rs's "Generic S3 error", a missing log): named plainly when it is that
        problem = None if catalog is not None or isinstance(exc, (InvalidArgumentError, AccessDeniedError)) else fileio.access_problem(uri)
        if problem is not None:
            raise AccessDeniedError(f"{uri}: {problem}") from None
        if not isinstance(exc, MetastoreError):
            raise InvalidTableLayoutError(f"{uri}: cannot be read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        raise


def _open(
    uri: str,
    name: str | None,
    format: str | TableFormat | None,
    selector: SnapshotSelector,
    catalog: str | None,
    footers: FetchFooters | None,
    data_roots: tuple[str, ...] = (),
) -> TableSource:
    if catalog is not None:
        chosen = TableFormat.ICEBERG if format is None else TableFormat.parse(format)
        if chosen is not TableFormat.ICEBERG:
            raise InvalidArgumentError(f"catalog= names an Iceberg catalog; format {chosen.value} cannot be read from one")
    else:
        chosen = detect_format(uri) if format is None else TableFormat.parse(format)
    if chosen is TableFormat.ICEBERG:
        from engine.sources.iceberg import IcebergSource

        return IcebergSource(uri, name, selector, catalog, data_roots)
    if chosen is TableFormat.DELTA:
        from engine.sources.delta import DeltaSource

        return DeltaSource(uri, name, selector, data_roots)
    if chosen is TableFormat.HUDI:
        from engine.sources.hudi import HudiSource

        return HudiSource(uri, name, selector, data_roots)
    if not selector.latest:
        raise InvalidArgumentError(f"{uri}: a Parquet directory has no snapshots: at_snapshot/as_of need an Iceberg, Delta or Hudi table")
    from engine.sources.parquet import ParquetDirectorySource

    return ParquetDirectorySource(uri, name, footers=footers)


def snapshots_since(uri: str, snapshot_id: str, *, format: str | TableFormat | None = None) -> int | None:
    """How many snapshots the table at ``uri`` has committed after ``snapshot_id`` (the
    statistics' source snapshot): "stale by N snapshots". The format's history only, no
    data read; None for a Parquet directory (no history) or a snapshot not in the history."""
    chosen = detect_format(uri) if format is None else TableFormat.parse(format)
    if chosen is TableFormat.ICEBERG:
        from engine.sources import iceberg

        return iceberg.snapshots_since(uri, snapshot_id)
    if chosen is TableFormat.DELTA:
        from engine.sources import delta

        return delta.snapshots_since(uri, snapshot_id)
    if chosen is TableFormat.HUDI:
        from engine.sources import hudi

        return hudi.snapshots_since(uri, snapshot_id)
    return None
