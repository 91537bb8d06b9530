"""What the analyze job and the lookups need from the catalog.

- :func:`publish_job`: commit one transaction for a finished analyze job's
  typed output (engine/catalog/job_output.py).
- :func:`current_state`, :func:`state_at`: what ``engine.lookup`` reads (a typed
  :class:`~engine.catalog.published.PublishedState`), built from the catalog's
  current (or an earlier) state; ``current_manifest`` / ``manifest_at``: its JSON form.
"""

from __future__ import annotations

import json
from typing import Any

from engine import fileio
from engine.catalog import retention
from engine.catalog.cache import catalog_for, forget_catalog
from engine.catalog.io import CatalogIO, ListingMemoIO, io_for
from engine.catalog.job_output import JobOutput
from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL
from engine.catalog.model import CatalogState, StatisticsFiles
from engine.catalog.paths import RUNS_DIR, files_run
from engine.catalog.precommit import FileCheck
from engine.catalog.published import CatalogPosition, PublishedPartition, PublishedState
from engine.catalog.replay import CatalogLog
from engine.catalog.transaction import CommitInfo, TransactionBuilder, commit_with_retry
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError, StatisticsNotFoundError
from engine.files import layout

__all__ = ["current_manifest", "current_state", "forget_catalog", "manifest_at", "output_state", "publish_job", "state_at"]


def publish_job(
    store_uri: str,
    output: JobOutput,
    *,
    tombstone_missing: bool = True,
    attempts: int = 5,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    io: CatalogIO | None = None,
    check_files: bool = False,
) -> CommitInfo:
    """Commit one transaction that publishes a finished analyze job.

    Every partition of ``output`` is added with its files, except inherited ones,
    which keep the entry the catalog has (refused with IncompatibleSchemaError if
    it was computed for another schema). An inherited partition that names its
    files too is kept only if the catalog still names those files; if a
    concurrent commit replaced them, it is added again with its files, so the
    transaction describes exactly what the job merged into its table level.

    Partitions live in the catalog but absent from ``output`` are tombstoned
    (their data was dropped upstream) unless ``tombstone_missing`` is False. A
    concurrent commit is resolved by rebuilding the transaction on the newer
    state (``attempts`` times): the last job to publish wins.

    ``check_files`` (``Store.publish``): every file the transaction adds must exist with
    its recorded size, or StatisticsFileCorruptError names it and nothing is committed
    (engine/catalog/precommit.py).
    """
    # the publish and its retention pass list each catalog directory once (ListingMemoIO): on S3
    # every listing is a LIST round trip; the commit and the gc ask the store where they must
    io = ListingMemoIO(io if io is not None else io_for(store_uri))
    catalog = CatalogLog.open(store_uri, output.table, io=io, checkpoint_interval=checkpoint_interval)
    fp = output.schema_fingerprint
    keys = {p.key for p in output.partitions}
    properties = {k: json.dumps(v, separators=(",", ":")) for k, v in output.properties.items()}

    def build(txn: TransactionBuilder, state: CatalogState) -> None:
        rows = 0
        for p in output.partitions:
            old = state.partitions.get(p.key) if p.inherited else None
            if p.inherited and old is None and p.files is None:
                raise InvalidArgumentError(f"partition {p.key!r} is marked inherited but has no statistics in the catalog")
            # kept as it is: no action (unless a concurrent commit replaced the files the job merged)
            if old is not None and (p.files is None or old.files.paths() == p.files.paths()):
                if old.schema_fingerprint != fp:
                    raise IncompatibleSchemaError(
                        f"partition {p.key!r}: its statistics were computed for schema {old.schema_fingerprint or '(unknown)'}, "
                        f"not {fp}; they cannot be inherited"
                    )
                rows += old.row_count
                continue
            assert p.files is not None
            txn.add_partition(
                p.key,
                p.files,
                p.row_count,
                snapshot_id=p.snapshot_id or output.snapshot_id,
                schema_fingerprint=fp,
                job_id=p.job_id or output.job_id,
                data_fingerprint=p.data_fingerprint,
            )
            rows += p.row_count
        if tombstone_missing:
            for key in state.partitions:
                if key not in keys:
                    txn.tombstone_partition(key)
        txn.set_table_statistics(
            output.table_files,
            output.row_count if output.row_count is not None else rows,
            schema_fingerprint=fp,
            properties=properties,
        )

    check = FileCheck(io, catalog.table_uri, output.table, output.job_id) if check_files else None

    def checked(txn: TransactionBuilder, state: CatalogState) -> None:
        build(txn, state)
        if check is not None:
            check(txn.actions)

    info = commit_with_retry(catalog, output.job_id, output.snapshot_id, checked, attempts=attempts)
    # RETENTION HOOK (issue #20): the table's retention policy after every publish; never raises
    retention.apply_after_publish(catalog)
    return info


# --------------------------------------------------------------------------- reading
# this process's catalog per table: engine/catalog/cache.py (``forget_catalog`` is imported from here too)


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
    return _state(cat, table, st)


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
    if st.empty or st.table_statistics is None:
        raise StatisticsNotFoundError(f"table {table!r} has no table statistics at {what}")
    return _state(cat, table, st)


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


def _state(cat: CatalogLog, table: str, st: Any) -> PublishedState:
    ts = st.table_statistics
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
