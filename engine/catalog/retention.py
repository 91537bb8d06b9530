"""Retention: which states of a table's catalog are kept, and letting go of the rest.

A table's catalog keeps every state it ever had (time travel), and every state
keeps its statistics files: without retention a store only grows. Retention works
as the table formats' snapshot expiry does (Iceberg's ``expire_snapshots``):

1. a **policy** stored with the table in its catalog (``catalog/retention/policy-*.json``,
   newest wins; :data:`DEFAULT_POLICY` when none was set) says which states to keep:
   the last ``retain_last`` ones, and any younger than ``retain_for_s``;
2. **expiring** the states before the oldest kept one writes a checkpoint of that
   state (if there is none), records the expiry (``catalog/retention/expired-*.json``:
   when, up to which transaction, by which policy or command), deletes the older
   transaction and checkpoint files (engine.catalog.maintenance.prune) and removes the entries
   no kept state needs (engine.catalog.maintenance.expire_tombstones: tombstones kept for time travel);
3. **gc** deletes the statistics files no kept state references, once they are older
   than the policy's grace period (a running analyze job's files are referenced by
   nothing yet).

``apply_policy`` does all three; the publish of every analyze calls it (the
``RETENTION HOOK`` in engine/catalog/publish.py) with the gc **paced**
(:attr:`GcWhen.DUE`): a gc must read the file paths of every kept transaction and list
the table's runs, a cost that grows with the kept history, while files only become
garbage when a state is expired (or a job fails) and may only go once older than the
grace period anyway. So after a publish the gc runs only when it can find something
new and at most once per grace period (:func:`gc_due`); every gc records when it ran
(``catalog/retention/gc-*.json``). Time travel to an expired state raises
:class:`StatisticsExpiredError` saying when it was expired and by what.

The records live in engine/catalog/retention_records.py (their names are imported from here
too), the expiry itself in engine/catalog/maintenance.py (``expire_before``: checkpoint,
record, prune, tombstones) and the gc in engine/catalog/gc.py; this module decides by the
policy when each runs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import Enum

from engine.catalog.gc import GcResult
from engine.catalog.gc import gc as run_gc
from engine.catalog.maintenance import expire_before
from engine.catalog.replay import CatalogLog
from engine.catalog.retention_records import (
    DEFAULT_POLICY,
    KEEP_EXPIRY_RECORDS,
    KEEP_GC_RECORDS,
    RETENTION_DIR,
    ExpiryRecord,
    GcRecord,
    RetentionPolicy,
    expired_error,
    expiry_of,
    format_duration,
    last_gc,
    listing,
    newest_expiry,
    parse_duration,
    read_policy,
    record_gc,
    write_policy,
)
from engine.exceptions import StatisticsExpiredError

log = logging.getLogger("engine.catalog")

__all__ = [
    "DEFAULT_POLICY",
    "KEEP_EXPIRY_RECORDS",
    "KEEP_GC_RECORDS",
    "RETENTION_DIR",
    "ExpiryRecord",
    "GcRecord",
    "GcWhen",
    "RetentionPolicy",
    "RetentionResult",
    "StatisticsExpiredError",
    "apply_after_publish",
    "apply_policy",
    "expire_before",
    "expired_error",
    "expiry_of",
    "format_duration",
    "gc_due",
    "kept_from",
    "last_gc",
    "newest_expiry",
    "parse_duration",
    "read_policy",
    "record_gc",
    "write_policy",
]


class GcWhen(Enum):
    """When :func:`apply_policy` runs the gc after expiring."""

    ALWAYS = "always"  # metastore expire: the caller asked for it
    DUE = "due"  # after a publish: only when :func:`gc_due` says it can find something new


#: The after-publish gc also runs when the last one is older than this (and the grace period),
#: whatever else: the runs of failed jobs are garbage no expiry announces.
GC_SWEEP_S = 86400.0

#: why a gc is due when no gc of the table is on record (a table from before the records, or
#: one whose records were lost; a new table records a baseline at its first publish instead)
NO_GC_RECORD = "no gc on record"


@dataclass(frozen=True)
class RetentionResult:
    policy: str
    kept_from: int | None  # the oldest kept transaction (None: the table has none)
    expired_before: int | None  # states before this id were expired now (None: nothing to expire)
    transaction_files_deleted: int
    entries_removed: int  # partition entries (tombstones) no kept state needs
    gc: GcResult | None  # None: no gc ran (after a publish: none was due)
    gc_reason: str | None = None  # why the gc ran (None: it did not)


def gc_due(catalog: CatalogLog, policy: RetentionPolicy, now: float | None = None) -> str | None:
    """Why a gc after a publish would find something new (None: it would not, skip it).

    Files become garbage only when a state is expired (or a job fails and leaves its run),
    and a file may be deleted only once older than the grace period: so a gc is due when
    the last one (:func:`last_gc`) started at least a grace period ago and since then a
    state was expired (an expiry record newer than the one it saw), or it left unreferenced
    files that were too young, or it is older than :data:`GC_SWEEP_S` (the runs of failed
    jobs); and when no gc is on record (a new table records a baseline at its first publish instead: :func:`apply_policy`). One listing of ``catalog/retention/`` and one
    small read: no transaction, no listing of the runs."""
    names = listing(catalog)
    last = last_gc(catalog, names)
    if last is None:
        return NO_GC_RECORD
    age = (time.time() if now is None else now) - last.at_s
    if age < 0:
        return "the last gc's record is from the future (clock skew)"
    if age < policy.gc_grace_s:
        return None
    if newest_expiry(catalog, names) != last.expiry_seen:
        return "states were expired since the last gc"
    if last.recent:
        return f"the last gc kept {last.recent} unreferenced files younger than the grace period"
    if age >= GC_SWEEP_S:
        return f"the last gc is older than {format_duration(GC_SWEEP_S)}"
    return None


# --------------------------------------------------------------------------- expiring
def kept_from(catalog: CatalogLog, policy: RetentionPolicy, now: float | None = None) -> int | None:
    """The oldest transaction ``policy`` keeps (None: the catalog is empty).

    A count rule alone (the default policy) needs only the transactions' ids: one listing,
    no file read. A duration rule reads the kept transactions' headers (timestamps;
    :meth:`Catalog.headers`), most of them cached by the open and the commit before it: a
    retention pass after every publish must not rebuild every kept transaction's actions."""
    if policy.retain_for_s is None:
        ids = catalog.transaction_ids()
        if not ids:
            return None
        if policy.retain_last is None:
            return ids[0]
        return max(ids[0], ids[-1] - policy.retain_last + 1)
    history = catalog.headers()
    if not history:
        return None
    now = time.time() if now is None else now
    keep = {history[-1].id}  # the current state, always
    if policy.retain_last is not None:
        keep.update(h.id for h in history[-policy.retain_last :])
    keep.update(h.id for h in history if h.timestamp_us / 1e6 >= now - policy.retain_for_s)
    return min(keep)


#: After a publish, a count rule keeps at least ``retain_last`` states and up to ``retain_last // SLACK`` more
#: (none below 10): an expiry stops at a checkpoint that close instead of writing one. Expiring
#: before a state needs a checkpoint of it (a full state: ~2 opens' CPU to build and write at
#: 10,000 partitions); a table re-analyzed a few partitions at a time has few checkpoints of
#: its own, and would write one at every publish once at its bound: one in ``SLACK + 1`` now.
#: The table formats count the same way (Iceberg's ``min-snapshots-to-keep``: at least).
SLACK = 10


def _cut(catalog: CatalogLog, policy: RetentionPolicy, start: int) -> int:
    """Where to expire before: ``start``, or the newest checkpoint at most the slack before it."""
    slack = (policy.retain_last or 0) // SLACK
    if slack == 0:
        return start
    _, checkpoints = catalog.log_ids()
    return max((c for c in checkpoints if start - slack <= c <= start), default=start)


def apply_policy(
    catalog: CatalogLog,
    policy: RetentionPolicy | None = None,
    *,
    by: str | None = None,
    now: float | None = None,
    gc_when: GcWhen = GcWhen.ALWAYS,
    slack: bool = False,
) -> RetentionResult:
    """Expire what ``policy`` (default: the table's) does not keep, then gc what no kept
    state references: always, or with :attr:`GcWhen.DUE` only when :func:`gc_due` says so.
    ``slack``: keep up to a tenth more than ``retain_last`` (:data:`SLACK`; after a publish)
    rather than write a checkpoint (``metastore expire`` keeps exactly what it was asked)."""
    if policy is None:
        policy, was_set = read_policy(catalog)
        by = by or (f"policy {policy.describe()}" if was_set else f"the default policy {policy.describe()}")
    by = by or f"policy {policy.describe()}"
    now = time.time() if now is None else now
    start = kept_from(catalog, policy, now)
    if start is None:
        return RetentionResult(policy.describe(), None, None, 0, 0, None)
    if slack:
        start = _cut(catalog, policy, start)
    deleted, removed = expire_before(catalog, start, by)
    reason = "requested" if gc_when is GcWhen.ALWAYS else gc_due(catalog, policy, now)
    if reason == NO_GC_RECORD and catalog.state().txn_id == 1:
        # a table's first publish (transaction 1): its only state references every file its job wrote, so a
        # gc would list the whole table (2 s of CPU at 10,000 partitions) to find nothing but
        # the runs of jobs killed before it; record the baseline instead, and the daily sweep
        # (GC_SWEEP_S) or the first expiry makes the next gc due
        record_gc(catalog, now, newest_expiry(catalog), 0, 0)
        reason = None
    gc = run_gc(catalog, policy.gc_grace_s, now=now) if reason else None
    return RetentionResult(policy.describe(), start, start if deleted else None, deleted, removed, gc, reason)


def apply_after_publish(catalog: CatalogLog) -> RetentionResult | None:
    """The table's policy after a publish, with its slack and the gc paced (:attr:`GcWhen.DUE`). The publish has
    committed already: a failure here is logged, not raised (the next publish, or
    ``metastore expire``, tries again)."""
    try:
        result = apply_policy(catalog, gc_when=GcWhen.DUE, slack=True)
        if result.gc_reason:
            log.debug("table %s: gc after publish (%s)", catalog.table, result.gc_reason)
        return result
    except Exception as exc:  # noqa: BLE001 - retention must not fail a committed publish
        log.warning("table %s: retention after publish failed: %s: %s", catalog.table, type(exc).__name__, exc)
        return None
