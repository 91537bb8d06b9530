"""Opening a table: ``open_table`` picks the format's reader from the registry
(engine/sources/registry.py) by detection or ``format=``; ``snapshots_since`` asks the
format's history. Callers import both from ``engine.sources``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from engine import fileio
from engine.exceptions import AccessDeniedError, InvalidArgumentError, InvalidTableLayoutError, MetastoreError, first_line
from engine.sources import registry
from engine.sources.formats import SnapshotSelector, TableFormat, detect_format, parse_as_of

if TYPE_CHECKING:  # annotations only: the read commands' stale check loads no Parquet reader (issue #20) nor base.py
    from engine.sources.base import TableSource
    from engine.sources.footers import FetchFooters

__all__ = ["open_table", "snapshots_since"]


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
            raise InvalidTableLayoutError(f"{uri}: cannot be read: {first_line(exc)}") from None
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
    return registry.implementation(chosen.value).open_source(uri, name, selector, catalog, footers, data_roots)


def snapshots_since(uri: str, snapshot_id: str, *, format: str | TableFormat | None = None) -> int | None:
    """How many snapshots the table at ``uri`` has committed after ``snapshot_id`` (the
    statistics' source snapshot): "stale by N snapshots". The format's history only, no
    data read; None for a Parquet directory (no history) or a snapshot not in the history."""
    chosen = detect_format(uri) if format is None else TableFormat.parse(format)
    if not registry.FORMATS[chosen.value].history:  # no reader loaded for no history (issue #20)
        return None
    return registry.implementation(chosen.value).snapshots_since(uri, snapshot_id)
