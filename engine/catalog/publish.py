"""What the analyze job needs from the catalog.

- :func:`publish_job`: commit one transaction for a finished analyze job's
  typed output (engine/catalog/job_output.py).

What the lookups read (``current_state``, ``state_at``, ...) is engine/catalog/reading.py:
a reader imports that module, not this one (the retention pass below imports gc and
maintenance).
"""

from __future__ import annotations

import json

from engine.catalog import retention
from engine.catalog.io import CatalogIO, ListingMemoIO, io_for
from engine.catalog.job_output import JobOutput
from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL
from engine.catalog.model import CatalogState
from engine.catalog.precommit import FileCheck
from engine.catalog.replay import CatalogLog
from engine.catalog.transaction import CommitInfo, TransactionBuilder, commit_with_retry
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError

__all__ = ["publish_job"]


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
