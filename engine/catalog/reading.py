"""What the lookups read from the catalog: a table's published state, current or earlier.

- :func:`current_state`, :func:`state_at`: a typed
  :class:`~engine.catalog.published.PublishedState` built from the catalog's current (or an
  earlier) state; :func:`current_manifest` / :func:`manifest_at`: its JSON form;
- :func:`output_state`: a job's output as readers see a state (a table published before
  the catalog existed).

Apart from engine/catalog/publish.py (the analyze job's commit) so that a reader loads the
log's replay and nothing of the writers': publish_job's retention pass imports gc,
maintenance and the integrity checks, 15 modules a ``metastore show`` does not use
(start-up, issue #30 target 5). This process's catalog per table: engine/catalog/cache.py.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine import fileio
from engine.catalog.cache import catalog_for
from engine.catalog.paths import RUNS_DIR, files_run
from engine.catalog.published import CatalogPosition, PublishedPartition, PublishedState
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError
from engine.files import layout

if TYPE_CHECKING:
    from engine.catalog.job_output import JobOutput
    from engine.catalog.model import CatalogState, StatisticsFiles, TableEntry
    from engine.catalog.replay import CatalogLog

__all__ = ["current_manifest", "current_state", "manifest_at", "output_state", "state_at"]


def current_state(store_uri: str, table: str) -> PublishedState:
    """The current statistics of ``table``: every file by URI (with inherited statistics,
    partitions live in different runs, so a lookup takes a partition's URIs from its
    entry, not from ``run_uri``), tombstoned partitions (dropped upstream, not counted),
    and the catalog transaction the state is."""
    cat = catalog_for(store_uri, table)
    st = cat.state()
    ts = st.table_statistics
    if st.empty or ts is None:
        raise StatisticsNotFoundError(f"no published statistics for table {table!r} in store {store_uri}")
    return _state(cat, table, st, ts)


def state_at(store_uri: str, table: str, txn_id: int | None = None, snapshot: str | None = None) -> PublishedState:
    """An earlier state of ``table`` (time travel).

    ``txn_id``: the state right after that catalog transaction; ``snapshot``: the
    state after the newest transaction describing that table snapshot (give one,
    or neither for the current state). ``catalog.txn_id`` of the result says which
    transaction the state is. Raises StatisticsNotFoundError for an id beyond the
    head, a pruned or unknown id or snapshot, a state without table statistics,
    or a table without a catalog.
    """
    if txn_id is not None and snapshot is not None:
        raise InvalidArgumentError("give a transaction id or a snapshot, not both")
    if txn_id is None and snapshot is None:
        return current_state(store_uri, table)
    cat = catalog_for(store_uri, table)
    head = cat.state()
    if head.empty:
        raise StatisticsNotFoundError(f"table {table!r} in store {store_uri} has no catalog: no earlier states to read")
    if txn_id is not None:
        if isinstance(txn_id, bool) or not isinstance(txn_id, int) or txn_id < 1:
            raise InvalidArgumentError(f"a transaction id is a whole number >= 1, not {txn_id!r}")
        if txn_id > head.txn_id:
            raise StatisticsNotFoundError(f"table {table!r} has no transaction {txn_id} (the newest is {head.txn_id})")
        st = cat.state_at(txn_id)
        what = f"transaction {txn_id}"
    else:
        st = cat.state_at_snapshot(str(snapshot))
        what = f"snapshot {snapshot!r}"
    ts = st.table_statistics
    if st.empty or ts is None:
        raise StatisticsNotFoundError(f"table {table!r} has no table statistics at {what}")
    return _state(cat, table, st, ts)


def _uris(table_uri: str, files: StatisticsFiles) -> dict[str, str]:
    return {name: fileio.join(table_uri, ref.path) for name, ref in files.by_name().items()}


def _checksums(table_uri: str, groups: list[StatisticsFiles]) -> dict[str, str]:
    """{file URI: checksum} of every file that has one (the lookups check them on first read)."""
    return {fileio.join(table_uri, ref.path): ref.checksum for files in groups for ref in files.refs() if ref.checksum}


def output_state(table_uri: str, output: JobOutput) -> PublishedState:
    """A job's output as readers see a state (a table published before the catalog
    existed: its ``CURRENT`` pointer names a job, no transaction)."""
    properties = dict(output.properties)
    properties.setdefault("format_version", layout.FORMAT_VERSION)
    rows = properties.pop("rows", None)
    return PublishedState(
        table=output.table,
        job_id=output.job_id,
        snapshot_id=output.snapshot_id,
        run_uri=fileio.join(table_uri, RUNS_DIR, output.job_id),
        schema_fingerprint=output.schema_fingerprint,
        rows=int(rows if rows is not None else output.row_count if output.row_count is not None else sum(p.row_count for p in output.partitions)),
        columns=tuple(properties.pop("columns", ())),
        table_files=_uris(table_uri, output.table_files),
        partitions=tuple(
            PublishedPartition(p.key, p.row_count, p.job_id or output.job_id, p.snapshot_id or output.snapshot_id, _uris(table_uri, p.files))
            for p in output.partitions
            if p.files is not None
        ),
        checksums=_checksums(table_uri, [output.table_files, *(p.files for p in output.partitions if p.files is not None)]),
        properties=properties,
    )


def _state(cat: CatalogLog, table: str, st: CatalogState, ts: TableEntry) -> PublishedState:
    """The published state ``st``; ``ts``: its table statistics (the callers check it has them)."""
    properties: dict[str, Any] = {k: json.loads(v) for k, v in ts.properties.items()}
    table_uri = cat.table_uri
    run_uri = fileio.join(table_uri, files_run(ts.files.statistics.path, ts.job_id))
    properties.setdefault("format_version", layout.FORMAT_VERSION)
    rows = properties.pop("rows", None)
    for derived in (
        "table",
        "job_id",
        "snapshot",
        "run_uri",
        "schema_fingerprint",
        "table_files",
        "partitions",
        "tombstones",
        "catalog",
        "checksums",
    ):
        properties.pop(derived, None)
    return PublishedState(
        table=table,
        job_id=ts.job_id,
        snapshot_id=st.snapshot_id,
        run_uri=run_uri,
        schema_fingerprint=ts.schema_fingerprint,
        rows=int(rows if rows is not None else ts.row_count),
        columns=tuple(properties.pop("columns", ())),
        table_files=_uris(table_uri, ts.files),
        partitions=tuple(
            PublishedPartition(e.key, e.row_count, e.job_id, e.snapshot_id, _uris(table_uri, e.files), e.data_fingerprint)
            for e in st.partitions.values()
        ),
        tombstones=tuple(sorted(st.tombstones)),
        catalog=CatalogPosition(st.txn_id, st.txn_uuid, st.timestamp.isoformat()),
        checksums=_checksums(table_uri, [ts.files, *(e.files for e in st.partitions.values())]),
        properties=properties,
    )


def current_manifest(store_uri: str, table: str) -> dict[str, Any]:
    """:func:`current_state` in its JSON form."""
    return current_state(store_uri, table).as_manifest()


def manifest_at(store_uri: str, table: str, txn_id: int | None = None, snapshot: str | None = None) -> dict[str, Any]:
    """:func:`state_at` in its JSON form."""
    return state_at(store_uri, table, txn_id, snapshot).as_manifest()
