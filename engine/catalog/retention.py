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
   transaction and checkpoint files (:meth:`Catalog.prune`) and removes the entries
   no kept state needs (:meth:`Catalog.expire_tombstones`: tombstones kept for time travel);
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

Records are create-if-absent files (local link, S3 conditional put), like the
transactions: two writers never overwrite each other's.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING

from engine import fileio
from engine.exceptions import InvalidArgumentError, StatisticsExpiredError

if TYPE_CHECKING:
    from engine.catalog.catalog import Catalog, GcResult
    from engine.catalog.model import CatalogState

log = logging.getLogger("engine.catalog")

RETENTION_DIR = "retention"
_POLICY = re.compile(r"policy-(\d{20})\.json$")
_EXPIRED = re.compile(r"expired-(\d{20})\.json$")
_GC = re.compile(r"gc-(\d{20})\.json$")

__all__ = [
    "DEFAULT_POLICY",
    "ExpiryRecord",
    "GcRecord",
    "GcWhen",
    "RetentionPolicy",
    "RetentionResult",
    "StatisticsExpiredError",
    "apply_after_publish",
    "apply_policy",
    "expire_before",
    "expiry_of",
    "format_duration",
    "gc_due",
    "last_gc",
    "newest_expiry",
    "parse_duration",
    "read_policy",
    "record_gc",
    "write_policy",
]


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep the last ``retain_last`` states (up to a tenth more: :data:`SLACK`) and every state
    younger than ``retain_for_s`` (None: no such rule; both None keeps everything); delete
    unreferenced files older than ``gc_grace_s`` (it must exceed the longest analyze job)."""

    retain_last: int | None = None
    retain_for_s: float | None = None
    gc_grace_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.retain_last is not None and self.retain_last < 1:
            raise InvalidArgumentError("retain_last must be >= 1 (the current state is always kept)")
        if self.retain_for_s is not None and self.retain_for_s < 0:
            raise InvalidArgumentError("retain_for must be >= 0")
        if self.gc_grace_s < 0:
            raise InvalidArgumentError("gc_grace must be >= 0")

    def describe(self) -> str:
        rules = []
        if self.retain_last is not None:
            rules.append(f"retain-last {self.retain_last}")
        if self.retain_for_s is not None:
            rules.append(f"retain-for {format_duration(self.retain_for_s)}")
        return (" + ".join(rules) or "keep everything") + f", gc grace {format_duration(self.gc_grace_s)}"


#: A table without a policy of its own: its last 100 states (a bounded store whatever the
#: rate of analyses), unreferenced files deleted an hour after they were last written.
DEFAULT_POLICY = RetentionPolicy(retain_last=100, retain_for_s=None, gc_grace_s=3600.0)


@dataclass(frozen=True)
class ExpiryRecord:
    before_txn: int  # the states before this transaction were expired
    expired_at: str  # ISO 8601, UTC
    by: str  # the policy or command
    from_txn: int = 1  # the oldest state this expiry let go of (older ones went earlier)


#: Expiry records kept (one per expiry that deleted anything): older ones are deleted, so
#: a state expired before them is reported as expired "on or before" the oldest record.
KEEP_EXPIRY_RECORDS = 16


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
class GcRecord:
    """What the last gc of a table recorded (``catalog/retention/gc-<start, ms>.json``)."""

    at_s: float  # when it started (its listing: files written after it were not candidates)
    expiry_seen: int  # the newest expiry record then (its ``before_txn``; 0: none)
    recent: int  # unreferenced files it kept because they were younger than the grace period
    deleted: int


#: gc records kept (the newest is the one read; one more for a concurrent writer's)
KEEP_GC_RECORDS = 2


@dataclass(frozen=True)
class RetentionResult:
    policy: str
    kept_from: int | None  # the oldest kept transaction (None: the table has none)
    expired_before: int | None  # states before this id were expired now (None: nothing to expire)
    transaction_files_deleted: int
    entries_removed: int  # partition entries (tombstones) no kept state needs
    gc: GcResult | None  # None: no gc ran (after a publish: none was due)
    gc_reason: str | None = None  # why the gc ran (None: it did not)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``12h``, ``7d``, ``2w`` (or a bare number of seconds) in seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not m:
        raise InvalidArgumentError(f"duration {text!r}: write a number and a unit, e.g. 90s, 15m, 12h, 7d, 2w")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def format_duration(seconds: float) -> str:
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


# --------------------------------------------------------------------------- records
def _dir(catalog: Catalog) -> str:
    return fileio.join(catalog.catalog_uri, RETENTION_DIR)


def _names(catalog: Catalog, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        names = catalog.io.list_names(_dir(catalog))
    except FileNotFoundError:
        return []
    return sorted((int(m.group(1)), n) for n in names if (m := pattern.search(n.rsplit("/", 1)[-1])))


def _create_next(catalog: Catalog, prefix: str, pattern: re.Pattern[str], doc: dict, seq: int | None = None) -> None:
    data = json.dumps(doc, sort_keys=True).encode()
    for _ in range(10):
        n = seq if seq is not None else (max((i for i, _ in _names(catalog, pattern)), default=0) + 1)
        try:
            catalog.io.create(fileio.join(_dir(catalog), f"{prefix}-{n:020d}.json"), data)
            return
        except FileExistsError:
            if seq is not None:
                return  # the same expiry recorded already (an earlier, interrupted run)
            continue  # another writer took this number: the next one
    raise InvalidArgumentError(f"could not record the retention {prefix} of table {catalog.table!r}: too many concurrent writers")


def read_policy(catalog: Catalog) -> tuple[RetentionPolicy, bool]:
    """(the table's policy, whether it was set) - :data:`DEFAULT_POLICY` when none was."""
    names = _names(catalog, _POLICY)
    if not names:
        return DEFAULT_POLICY, False
    doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), names[-1][1].rsplit("/", 1)[-1])))
    return RetentionPolicy(doc.get("retain_last"), doc.get("retain_for_s"), float(doc.get("gc_grace_s", DEFAULT_POLICY.gc_grace_s))), True


def write_policy(catalog: Catalog, policy: RetentionPolicy) -> None:
    """Store ``policy`` as the table's (a new record; the newest wins)."""
    _create_next(catalog, "policy", _POLICY, {**asdict(policy), "set_at": _now_iso()})


def _records(catalog: Catalog) -> list[ExpiryRecord]:
    out = []
    for _, name in _names(catalog, _EXPIRED):
        doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), name.rsplit("/", 1)[-1])))
        out.append(ExpiryRecord(int(doc["before_txn"]), str(doc["expired_at"]), str(doc["by"]), int(doc.get("from_txn", 1))))
    return out


def expiry_of(catalog: Catalog, txn_id: int) -> ExpiryRecord | None:
    """The expiry that let go of the state after transaction ``txn_id`` (None: not expired)."""
    return next((r for r in sorted(_records(catalog), key=lambda r: r.before_txn) if txn_id < r.before_txn), None)


def expired_error(catalog: Catalog, txn_id: int, record: ExpiryRecord) -> StatisticsExpiredError:
    when = record.expired_at[:19].replace("T", " ")
    if txn_id >= record.from_txn:
        how = f"was expired on {when} UTC by {record.by}"
    else:  # its own record was compacted away
        how = f"was expired on or before {when} UTC (the oldest expiry on record, by {record.by})"
    return StatisticsExpiredError(
        f"transaction {txn_id} of table {catalog.table!r} {how} (the states before transaction {record.before_txn} are no longer kept)"
    )


def _compact(catalog: Catalog) -> None:
    """Delete all but the newest :data:`KEEP_EXPIRY_RECORDS` expiry records (a bounded catalog)."""
    for _, name in _names(catalog, _EXPIRED)[:-KEEP_EXPIRY_RECORDS]:
        catalog.io.delete(fileio.join(_dir(catalog), name.rsplit("/", 1)[-1]))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _listing(catalog: Catalog) -> list[str]:
    try:
        return catalog.io.list_names(_dir(catalog))
    except FileNotFoundError:
        return []


def _numbered(names: list[str], pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    return sorted((int(m.group(1)), n.rsplit("/", 1)[-1]) for n in names if (m := pattern.search(n.rsplit("/", 1)[-1])))


def newest_expiry(catalog: Catalog, names: list[str] | None = None) -> int:
    """The ``before_txn`` of the newest expiry record (0: none), from the record names alone."""
    found = _numbered(_listing(catalog) if names is None else names, _EXPIRED)
    return found[-1][0] if found else 0


def last_gc(catalog: Catalog, names: list[str] | None = None) -> GcRecord | None:
    """The newest gc record of the table (None: no gc recorded, or it cannot be read)."""
    found = _numbered(_listing(catalog) if names is None else names, _GC)
    if not found:
        return None
    try:
        doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), found[-1][1])))
        return GcRecord(float(doc["at_s"]), int(doc["expiry_seen"]), int(doc["recent"]), int(doc["deleted"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None  # compacted by a concurrent gc, or damaged: as if none (a gc is then due)


def record_gc(catalog: Catalog, at_s: float, expiry_seen: int, recent: int, deleted: int) -> None:
    """Record a finished gc that started at ``at_s`` (called by :meth:`Catalog.gc`), and delete
    all but the newest :data:`KEEP_GC_RECORDS` records. A create-if-absent file like the other
    records, through the table's FileIO (works on s3:// as on a local store); never raises:
    without its record the next publish runs a gc again, nothing is lost."""
    doc = {"at_s": at_s, "at": datetime.fromtimestamp(at_s, UTC).isoformat(), "expiry_seen": expiry_seen, "recent": recent, "deleted": deleted}
    try:
        try:
            catalog.io.create(fileio.join(_dir(catalog), f"gc-{int(at_s * 1000):020d}.json"), json.dumps(doc, sort_keys=True).encode())
        except FileExistsError:
            pass  # a concurrent gc that started in the same millisecond recorded the same
        for _, name in _numbered(_listing(catalog), _GC)[:-KEEP_GC_RECORDS]:
            catalog.io.delete(fileio.join(_dir(catalog), name))
    except Exception as exc:  # noqa: BLE001 - the gc itself is done; its record is an optimisation
        log.warning("table %s: could not record the gc: %s: %s", catalog.table, type(exc).__name__, exc)


def gc_due(catalog: Catalog, policy: RetentionPolicy, now: float | None = None) -> str | None:
    """Why a gc after a publish would find something new (None: it would not, skip it).

    Files become garbage only when a state is expired (or a job fails and leaves its run),
    and a file may be deleted only once older than the grace period: so a gc is due when
    the last one (:func:`last_gc`) started at least a grace period ago and since then a
    state was expired (an expiry record newer than the one it saw), or it left unreferenced
    files that were too young, or it is older than :data:`GC_SWEEP_S` (the runs of failed
    jobs); and when no gc is on record (a new table records a baseline at its first publish instead: :func:`apply_policy`). One listing of ``catalog/retention/`` and one
    small read: no transaction, no listing of the runs."""
    names = _listing(catalog)
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
def kept_from(catalog: Catalog, policy: RetentionPolicy, now: float | None = None) -> int | None:
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


def expire_before(catalog: Catalog, txn_id: int, by: str) -> tuple[int, int]:
    """Expire the states before transaction ``txn_id``; (transaction files deleted, entries removed).

    The kept states answer exactly as before: the oldest gets a checkpoint before
    anything is deleted, and the entries removed are the ones no kept state holds."""
    from engine.catalog import codec

    current = catalog.refresh(fresh=False)  # after a publish: the state it committed (no listing)
    if current.empty or txn_id <= 1:
        return 0, 0
    if txn_id > current.txn_id:
        raise InvalidArgumentError(f"table {catalog.table!r} has no transaction {txn_id} (the newest is {current.txn_id})")
    ids, checkpoints = catalog.log_ids()  # one listing: no transaction is read for the decision
    if not ids or ids[0] >= txn_id:
        return 0, 0
    if len(ids) != ids[-1] - ids[0] + 1:
        catalog.headers()  # a hole: raises CatalogCorruptError naming it (nothing is expired past it)
    oldest: CatalogState | None = None
    if txn_id not in checkpoints:  # (a table republished in full has one at most ids: by size)
        oldest = catalog.state_at(txn_id)  # checks the log from its checkpoint up to txn_id
        try:
            catalog._write_checkpoint(oldest, codec.txn_uuid(oldest.timeline, txn_id - 1))
        except FileExistsError:
            pass
    record = {"before_txn": txn_id, "expired_at": _now_iso(), "by": by, "from_txn": ids[0]}
    _create_next(catalog, "expired", _EXPIRED, record, seq=txn_id)
    pruned = catalog.prune(txn_id)  # checks the checkpoint first
    _compact(catalog)
    current = catalog.state()
    entries = len(current.entries)
    if entries != len(current.partitions):  # tombstones: those no kept state holds go
        catalog.expire_tombstones(oldest or catalog.state_at(txn_id), job_id="retention")
    removed = entries - len(catalog.state().entries)
    log.info("table %s: expired the states before transaction %d (%s)", catalog.table, txn_id, by)
    return len(pruned.deleted), removed


#: After a publish, a count rule keeps at least ``retain_last`` states and up to ``retain_last // SLACK`` more
#: (none below 10): an expiry stops at a checkpoint that close instead of writing one. Expiring
#: before a state needs a checkpoint of it (a full state: ~2 opens' CPU to build and write at
#: 10,000 partitions); a table re-analyzed a few partitions at a time has few checkpoints of
#: its own, and would write one at every publish once at its bound: one in ``SLACK + 1`` now.
#: The table formats count the same way (Iceberg's ``min-snapshots-to-keep``: at least).
SLACK = 10


def _cut(catalog: Catalog, policy: RetentionPolicy, start: int) -> int:
    """Where to expire before: ``start``, or the newest checkpoint at most the slack before it."""
    slack = (policy.retain_last or 0) // SLACK
    if slack == 0:
        return start
    _, checkpoints = catalog.log_ids()
    return max((c for c in checkpoints if start - slack <= c <= start), default=start)


def apply_policy(
    catalog: Catalog,
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
    gc = catalog.gc(policy.gc_grace_s, now=now) if reason else None
    return RetentionResult(policy.describe(), start, start if deleted else None, deleted, removed, gc, reason)


def apply_after_publish(catalog: Catalog) -> RetentionResult | None:
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
