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

import sys
import types
from typing import TYPE_CHECKING

from engine.lazy import attribute_loader

# Names load on first use (PEP 562): a read command (`metastore show`) needs the catalog
# and its codec, not rebuild, inheritance or the table sources they import (issue #20,
# start-up). Type checkers and import-linter see the imports below.
if TYPE_CHECKING:
    from engine.catalog.catalog import Catalog
    from engine.catalog.gc import GcResult
    from engine.catalog.io import CatalogIO, LocalCatalogIO, S3CatalogIO, io_for
    from engine.catalog.job_output import JobOutput, JobPartition
    from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL
    from engine.catalog.maintenance import PruneResult
    from engine.catalog.model import (
        FORMAT_VERSION,
        AddPartition,
        CatalogState,
        FileRef,
        PartitionEntry,
        RemovePartition,
        SetTableStatistics,
        StatisticsFiles,
        TableEntry,
        TombstonePartition,
        TransactionRecord,
        Upgrade,
    )
    from engine.catalog.paths import RunLayout, TableLayout
    from engine.catalog.publish import publish_job
    from engine.catalog.published import CatalogPosition, PublishedPartition, PublishedState
    from engine.catalog.reading import current_manifest, current_state, manifest_at, state_at
    from engine.catalog.rebuild import RebuildResult, rebuild
    from engine.catalog.replay import TransactionHeader, TransactionInfo
    from engine.catalog.snapshots import (
        InheritPlan,
        inherit,
        partition_fingerprint,
        schema_fingerprint,
        source_partition_fingerprints,
    )
    from engine.catalog.transaction import CommitInfo, TransactionBuilder, as_files, commit_with_retry

_LAZY = {
    "DEFAULT_CHECKPOINT_INTERVAL": "engine.catalog.logindex",
    "Catalog": "engine.catalog.catalog",
    "CommitInfo": "engine.catalog.transaction",
    "GcResult": "engine.catalog.gc",
    "PruneResult": "engine.catalog.maintenance",
    "TransactionBuilder": "engine.catalog.transaction",
    "TransactionHeader": "engine.catalog.replay",
    "TransactionInfo": "engine.catalog.replay",
    "as_files": "engine.catalog.transaction",
    "commit_with_retry": "engine.catalog.transaction",
    "CatalogIO": "engine.catalog.io",
    "LocalCatalogIO": "engine.catalog.io",
    "S3CatalogIO": "engine.catalog.io",
    "io_for": "engine.catalog.io",
    "JobOutput": "engine.catalog.job_output",
    "JobPartition": "engine.catalog.job_output",
    "FORMAT_VERSION": "engine.catalog.model",
    "AddPartition": "engine.catalog.model",
    "CatalogState": "engine.catalog.model",
    "FileRef": "engine.catalog.model",
    "PartitionEntry": "engine.catalog.model",
    "RemovePartition": "engine.catalog.model",
    "SetTableStatistics": "engine.catalog.model",
    "StatisticsFiles": "engine.catalog.model",
    "TableEntry": "engine.catalog.model",
    "TombstonePartition": "engine.catalog.model",
    "TransactionRecord": "engine.catalog.model",
    "Upgrade": "engine.catalog.model",
    "RunLayout": "engine.catalog.paths",
    "TableLayout": "engine.catalog.paths",
    "current_manifest": "engine.catalog.reading",
    "current_state": "engine.catalog.reading",
    "manifest_at": "engine.catalog.reading",
    "publish_job": "engine.catalog.publish",
    "state_at": "engine.catalog.reading",
    "CatalogPosition": "engine.catalog.published",
    "PublishedPartition": "engine.catalog.published",
    "PublishedState": "engine.catalog.published",
    "RebuildResult": "engine.catalog.rebuild",
    "rebuild": "engine.catalog.rebuild",
    "InheritPlan": "engine.catalog.snapshots",
    "inherit": "engine.catalog.snapshots",
    "partition_fingerprint": "engine.catalog.snapshots",
    "schema_fingerprint": "engine.catalog.snapshots",
    "source_partition_fingerprints": "engine.catalog.snapshots",
}


__getattr__ = attribute_loader(__name__, _LAZY, globals())


class _Package(types.ModuleType):
    """The package's ``rebuild`` is the function: the import system sets a submodule it has
    just loaded as an attribute of its package, which would make it the module
    ``engine.catalog.rebuild`` (the eager imports used to rebind the name after it)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "rebuild" and isinstance(value, types.ModuleType):
            value = value.rebuild
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __dir__() -> list[str]:
    return sorted(__all__)


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
    "TableEntry",
    "TombstonePartition",
    "TransactionBuilder",
    "TransactionHeader",
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
