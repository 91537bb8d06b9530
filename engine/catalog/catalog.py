"""The catalog of one table: the log's replay and commits, its maintenance and its checks, as
one object (docs/CATALOG.md)::

    cat = Catalog.open(store_uri, table)
    txn = cat.begin(job_id, snapshot); ...; txn.commit()
    cat.state(); cat.state_at(12); cat.state_at_snapshot(snap); cat.history()
    cat.prune(before_checkpoint_id); cat.gc(grace_period_s); cat.expire(keep_snapshots)
    cat.missing_transactions(); cat.verify()

The work is done below it, each part in its own module, none of which imports this one:

- engine/catalog/replay.py (:class:`~engine.catalog.replay.CatalogLog`): opening, replay,
  history, time travel, checkpoints; engine/catalog/transaction.py: a transaction and its commit;
- engine/catalog/maintenance.py: prune, expire, tombstones, the referenced files;
  engine/catalog/gc.py: gc; engine/catalog/retention.py: the retention policy;
- engine/catalog/verification.py: missing transactions, the check of the whole log.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.catalog import gc as gc_module
from engine.catalog import maintenance, verification
from engine.catalog.codec import TRANSACTION
from engine.catalog.gc import GcResult
from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL, TRANSACTIONS_DIR, LogIndex, MissingTransactions
from engine.catalog.maintenance import PruneResult
from engine.catalog.model import CatalogState
from engine.catalog.paths import RUNS_DIR
from engine.catalog.replay import CHECKPOINT_MIN_BYTES, CatalogLog, TransactionHeader, TransactionInfo
from engine.catalog.transaction import CommitInfo, TransactionBuilder, as_files, commit_with_retry

__all__ = [
    "CHECKPOINT_MIN_BYTES",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "RUNS_DIR",
    "TRANSACTION",
    "TRANSACTIONS_DIR",
    "Catalog",
    "CommitInfo",
    "GcResult",
    "MissingTransactions",
    "PruneResult",
    "TransactionBuilder",
    "TransactionHeader",
    "TransactionInfo",
    "as_files",
    "commit_with_retry",
]


class Catalog(CatalogLog):
    """The catalog of one table. Open it with :meth:`open`; the state is cached and
    moved on by :meth:`refresh` (one LIST, then only the new transactions) and by commits.
    Reading and committing are :class:`~engine.catalog.replay.CatalogLog`'s; the methods
    below are the maintenance and the checks, each its module's function of the same name."""

    # ------------------------------------------------------------------ maintenance

    def prune(self, before_checkpoint_id: int) -> PruneResult:
        """Delete the transaction and checkpoint files older than checkpoint ``before_checkpoint_id``
        (:func:`engine.catalog.maintenance.prune`)."""
        return maintenance.prune(self, before_checkpoint_id)

    def referenced_paths(self, tolerate_missing: bool = False) -> set[str]:
        """Statistics files (relative paths) referenced by any state from the oldest kept transaction on
        (:func:`engine.catalog.maintenance.referenced_paths`)."""
        return maintenance.referenced_paths(self, tolerate_missing)

    def gc(self, grace_period_s: float, *, dry_run: bool = False, now: float | None = None, force: bool = False) -> GcResult:
        """Delete statistics files below ``runs/`` that no kept transaction references, once older
        than ``grace_period_s`` (:func:`engine.catalog.gc.gc`)."""
        return gc_module.gc(self, grace_period_s, dry_run=dry_run, now=now, force=force)

    def expire(self, keep_snapshots: Iterable[str], job_id: str = "expire") -> CommitInfo | None:
        """Commit a transaction removing the statistics no snapshot of interest references
        (:func:`engine.catalog.maintenance.expire`)."""
        return maintenance.expire(self, keep_snapshots, job_id)

    def expire_tombstones(self, oldest_kept: CatalogState, job_id: str = "expire") -> CommitInfo | None:
        """Commit a transaction removing the tombstones no state from ``oldest_kept`` on holds live
        (:func:`engine.catalog.maintenance.expire_tombstones`)."""
        return maintenance.expire_tombstones(self, oldest_kept, job_id)

    # ------------------------------------------------------------------ checks

    def missing_transactions(self, index: LogIndex | None = None) -> list[MissingTransactions]:
        """Transactions the catalog's own files show to be missing
        (:func:`engine.catalog.verification.missing_in_log`)."""
        return verification.missing_in_log(self, index)

    def verify(self) -> dict[str, int]:
        """Check the whole catalog; raises CatalogCorruptError on the first problem
        (:func:`engine.catalog.verification.verify_log`)."""
        return verification.verify_log(self)
