"""Maintenance of a table's catalog log: pruning old transaction files, expiring states and
the entries no kept state needs, and telling which statistics files the kept states reference
(what engine/catalog/gc.py keeps).

Each function works on a :class:`~engine.catalog.replay.CatalogLog` (the
:class:`~engine.catalog.catalog.Catalog` methods of the same names call them);
engine/catalog/retention.py decides, by the table's policy, what to expire.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from engine.catalog import codec, retention_records
from engine.catalog.codec import PRUNED, TRANSACTION, FormatError
from engine.catalog.model import AddPartition, CatalogState, PartitionEntry, SetTableStatistics, extra_files
from engine.catalog.replay import CatalogLog
from engine.catalog.transaction import CommitInfo
from engine.exceptions import CatalogCorruptError, CommitConflictError, InvalidArgumentError, StatisticsNotFoundError

log = logging.getLogger("engine.catalog")

__all__ = ["PruneResult", "expire", "expire_before", "expire_tombstones", "prune", "referenced_paths"]


@dataclass(frozen=True)
class PruneResult:
    deleted: list[str]  # file names in catalog/transactions/, oldest first


def prune(cat: CatalogLog, before_checkpoint_id: int) -> PruneResult:
    """Delete the transaction and checkpoint files older than checkpoint ``before_checkpoint_id``.

    The checkpoint itself and everything after it stay; the state and the
    time travel to transactions from that id on are unaffected. Files are
    deleted oldest first, so an interrupted prune leaves a shorter history,
    never a hole. The checkpoint is read and checked first (every message parsed, its
    state not built).
    """
    index = cat.full_index()
    names = index.checkpoints.get(before_checkpoint_id)
    if not names:
        raise InvalidArgumentError(f"table {cat.table!r} has no checkpoint {before_checkpoint_id} to prune before")
    good = None
    for n in names:  # the checkpoint must be readable, or pruning would lose the state
        good = cat.check_checkpoint(n, cat.io.read_many([cat.file_uri(n.name)])[0])
    assert good is not None
    if not cat.state().empty and good.timeline != cat.state().timeline:
        raise cat.corrupt_error(names[0].name, "checkpoint of another log (timeline differs)")
    # the prune's record first: transactions missing before this checkpoint are then known
    # to be pruned, not lost (verify and gc tell the two apart, docs/reference/CATALOG.md)
    try:
        cat.io.create(cat.file_uri(codec.file_name(before_checkpoint_id, good.txn_uuid, PRUNED)), codec.frame(b""))
    except FileExistsError:
        pass
    doomed: list[str] = []
    for i in sorted(set(index.txns) | set(index.checkpoints) | set(index.prunes)):
        if i >= before_checkpoint_id:
            break
        doomed.extend(n.name for n in index.txns.get(i, ()))
        doomed.extend(n.name for n in index.checkpoints.get(i, ()))
        doomed.extend(n.name for n in index.prunes.get(i, ()))
    deleted = []
    for name in doomed:
        cat.io.delete(cat.file_uri(name))
        deleted.append(name)
    cat.forget_before(before_checkpoint_id)
    return PruneResult(deleted)


def referenced_paths(cat: CatalogLog, tolerate_missing: bool = False) -> set[str]:
    """Statistics files (relative paths) referenced by any state from the oldest kept transaction on.

    ``tolerate_missing``: skip missing transactions instead of refusing (gc's ``force``)."""
    index = cat.full_index()
    if not index.txns and not index.checkpoints:
        return set()
    head = index.head
    oldest = min(index.txns) if index.txns else head
    refs: set[str] = set()
    if oldest > 1:
        usable = sorted(c for c in index.checkpoints if c >= oldest - 1)
        base = None
        for cid in usable:
            try:
                base = cat.decode_checkpoint(index.checkpoints[cid][0], cat.io.read_many([cat.file_uri(index.checkpoints[cid][0].name)])[0])
                break
            except CatalogCorruptError:
                continue
        if base is None:
            raise cat.corrupt_error(
                cat.missing_checkpoint_name(index, oldest),
                "no readable checkpoint holds the state the oldest kept transaction builds on; cannot tell which statistics files are referenced",
            )
        refs |= base.referenced_paths()
    missing = [i for i in range(oldest, head + 1) if i not in index.txns and i not in index.checkpoints]
    if missing and not tolerate_missing:
        raise cat.corrupt_error(
            f"{missing[0]:020d}.*.{TRANSACTION}", f"transaction {missing[0]} is missing; cannot tell which statistics files are referenced"
        )
    # the paths only: decoded records when this catalog has them, else read from the parsed
    # message without building the actions (decode_paths)
    todo = []
    for i in range(oldest, head + 1):
        rec = cat.cached_record(i)
        if rec is not None:
            for a in rec.actions:
                if isinstance(a, (AddPartition, SetTableStatistics)):
                    refs.update(a.files.paths())
                if isinstance(a, SetTableStatistics):
                    refs.update(ref.path for ref in extra_files(a.properties))
        elif index.txns.get(i):
            todo.append((i, index.txns[i][0].name))
    for (i, name), data in zip(todo, cat.io.read_many([cat.file_uri(n) for _, n in todo])):
        if isinstance(data, BaseException):
            cat.read_record(name, data)  # raises as a full read would
            continue
        try:
            header, paths, properties = codec.decode_paths(data)
        except FormatError as exc:
            raise cat.corrupt_error(name, f"damaged transaction: {exc}") from None
        if header.id != i:
            raise cat.corrupt_error(name, f"content is transaction {header.id}")
        refs |= paths
        for props in properties:
            refs.update(ref.path for ref in extra_files(props))
        cat.remember_header(i, header)
    try:
        refs |= cat.refresh().referenced_paths()
    except CatalogCorruptError:
        if not tolerate_missing:
            raise
        refs |= cat.state().referenced_paths()  # forced past a hole: the state before it
    return refs


def expire(cat: CatalogLog, keep_snapshots: Iterable[str], job_id: str = "expire") -> CommitInfo | None:
    """Commit a transaction removing the statistics no snapshot of interest references.

    The snapshots of interest are ``keep_snapshots`` and the current one. A
    partition entry is referenced by a snapshot if it is live in the state
    of that snapshot (:meth:`state_at_snapshot`); entries of the current state
    that none references (tombstones kept for older snapshots) are removed.
    Returns None when there is nothing to remove.
    """
    current = cat.refresh()
    if current.empty:
        return None
    if len(current.entries) == len(current.partitions):
        return None  # only tombstones can be unreferenced (live partitions are the current snapshot's)
    keep = set(keep_snapshots) | {current.snapshot_id}
    referenced = {(k, e.files) for k, e in current.partitions.items()}
    for snap in keep - {current.snapshot_id}:
        try:
            st = cat.state_at_snapshot(snap)
        except StatisticsNotFoundError:
            continue  # not in the kept history: references nothing
        referenced |= {(k, e.files) for k, e in st.partitions.items()}
    doomed = [k for k, e in current.entries.items() if (k, e.files) not in referenced]
    if not doomed:
        return None
    txn = cat.begin(job_id, current.snapshot_id)
    for k in doomed:
        txn.remove_partition(k)
    return txn.commit()


def expire_tombstones(cat: CatalogLog, oldest_kept: CatalogState, job_id: str = "expire") -> CommitInfo | None:
    """Commit a transaction removing the tombstones that no state from ``oldest_kept`` to the
    current one holds live (retention's expiry); None when there is none.

    The log is linear: the entry a transaction A adds (``added_in``) is live from state A
    until it is tombstoned, and never again (adding the partition back makes a new entry).
    So a tombstone is held by a kept state if it was added at or after ``oldest_kept``, or
    is live in ``oldest_kept`` itself: no other state is built (:meth:`expire`, by snapshot,
    builds the state of every kept snapshot: at every expiry of a table with tombstones,
    up to the policy's 100 states). An entry of unknown ``added_in`` (0) is kept."""
    for attempt in range(3):  # the first on the state as the pass knows it (a publish's: no listing)
        current = cat.refresh(fresh=attempt > 0)
        if current.empty or len(current.entries) == len(current.partitions):
            return None
        try:
            return _expire_tombstones(cat, current, oldest_kept, job_id)
        except CommitConflictError:
            if attempt == 2:
                raise
    return None


def _expire_tombstones(cat: CatalogLog, current: CatalogState, oldest_kept: CatalogState, job_id: str) -> CommitInfo | None:
    since = oldest_kept.txn_id

    def held(key: str, e: PartitionEntry) -> bool:
        if e.added_in == 0 or e.added_in >= since:
            return True
        then = oldest_kept.entries.get(key)
        return then is not None and not then.tombstoned and then.added_in == e.added_in and then.files == e.files

    doomed = [k for k, e in current.entries.items() if e.tombstoned and not held(k, e)]
    if not doomed:
        return None
    txn = cat.begin(job_id, current.snapshot_id)
    for k in doomed:
        txn.remove_partition(k)
    return txn.commit()


def expire_before(cat: CatalogLog, txn_id: int, by: str) -> tuple[int, int]:
    """Expire the states before transaction ``txn_id``; (transaction files deleted, entries removed).

    The kept states answer exactly as before: the oldest gets a checkpoint before
    anything is deleted (and the expiry is recorded: engine/catalog/retention_records.py),
    and the entries removed are the ones no kept state holds."""
    current = cat.refresh(fresh=False)  # after a publish: the state it committed (no listing)
    if current.empty or txn_id <= 1:
        return 0, 0
    if txn_id > current.txn_id:
        raise InvalidArgumentError(f"table {cat.table!r} has no transaction {txn_id} (the newest is {current.txn_id})")
    ids, checkpoints = cat.log_ids()  # one listing: no transaction is read for the decision
    if not ids or ids[0] >= txn_id:
        return 0, 0
    if len(ids) != ids[-1] - ids[0] + 1:
        cat.headers()  # a hole: raises CatalogCorruptError naming it (nothing is expired past it)
    oldest: CatalogState | None = None
    if txn_id not in checkpoints:  # (a table republished in full has one at most ids: by size)
        oldest = cat.state_at(txn_id)  # checks the log from its checkpoint up to txn_id
        try:
            cat.write_checkpoint_of(oldest, codec.txn_uuid(oldest.timeline, txn_id - 1))
        except FileExistsError:
            pass
    retention_records.record_expiry(cat, txn_id, by, ids[0])
    pruned = prune(cat, txn_id)  # checks the checkpoint first
    retention_records.compact_expiry_records(cat)
    current = cat.state()
    entries = len(current.entries)
    if entries != len(current.partitions):  # tombstones: those no kept state holds go
        expire_tombstones(cat, oldest or cat.state_at(txn_id), job_id="retention")
    removed = entries - len(cat.state().entries)
    log.info("table %s: expired the states before transaction %d (%s)", cat.table, txn_id, by)
    return len(pruned.deleted), removed
