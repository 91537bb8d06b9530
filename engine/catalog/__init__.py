"""The statistics catalog: a transaction log of statistics files, kept in the object store.

See docs/CATALOG.md. The entry points::

    from engine.catalog import Catalog
    cat = Catalog.open(store_uri, table)
    txn = cat.begin(job_id, snapshot)
    txn.add_partition("part=03", files, row_count, schema_fingerprint=fp)
    txn.set_table_statistics(table_files, rows, schema_fingerprint=fp)
    txn.commit()                      # CommitConflictError if another writer took the id
    cat.state(); cat.state_at(12); cat.state_at_snapshot(snap); cat.history()
    cat.prune(before_checkpoint_id); cat.gc(grace_period_s); cat.expire(keep_snapshots)
    rebuild(store_uri, table, replace=True)

and, for the analyze job and the lookups, :func:`publish_job` and :func:`current_manifest`.
"""

from __future__ import annotations

from engine.catalog.catalog import (
    DEFAULT_CHECKPOINT_INTERVAL,
    Catalog,
    CommitInfo,
    GcResult,
    PruneResult,
    TransactionBuilder,
    TransactionInfo,
    as_files,
    commit_with_retry,
)
from engine.catalog.io import CatalogIO, LocalCatalogIO, S3CatalogIO, io_for
from engine.catalog.job_output import JobOutput, JobPartition
from engine.catalog.model import (
    FORMAT_VERSION,
    AddPartition,
    CatalogState,
    FileRef,
    PartitionEntry,
    RemovePartition,
    SetTableStatistics,
    StatisticsFiles,
    TableStatistics,
    TombstonePartition,
    TransactionRecord,
    Upgrade,
)
from engine.catalog.paths import RunLayout, TableLayout
from engine.catalog.publish import current_manifest, current_state, manifest_at, publish_job, state_at
from engine.catalog.published import CatalogPosition, PublishedPartition, PublishedState
from engine.catalog.rebuild import RebuildResult, rebuild
from engine.catalog.snapshots import (
    InheritPlan,
    inherit,
    partition_fingerprint,
    schema_fingerprint,
    source_partition_fingerprints,
)

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "FORMAT_VERSION",
    "AddPartition",
    "Catalog",
    "CatalogIO",
    "CatalogPosition",
    "CatalogState",
    "CommitInfo",
    "FileRef",
    "GcResult",
    "InheritPlan",
    "JobOutput",
    "JobPartition",
    "LocalCatalogIO",
    "PartitionEntry",
    "PruneResult",
    "PublishedPartition",
    "PublishedState",
    "RebuildResult",
    "RemovePartition",
    "RunLayout",
    "S3CatalogIO",
    "SetTableStatistics",
    "StatisticsFiles",
    "TableLayout",
    "TableStatistics",
    "TombstonePartition",
    "TransactionBuilder",
    "TransactionInfo",
    "TransactionRecord",
    "Upgrade",
    "as_files",
    "commit_with_retry",
    "current_manifest",
    "current_state",
    "inherit",
    "io_for",
    "manifest_at",
    "partition_fingerprint",
    "publish_job",
    "rebuild",
    "schema_fingerprint",
    "source_partition_fingerprints",
    "state_at",
]
