"""Retention's records, kept with the table in its catalog (``catalog/retention/``): the
policy (``policy-*.json``, newest wins), the expiries (``expired-*.json``: when, up to which
transaction, by what) and the gcs (``gc-*.json``: when each started and what it saw).

Reading and writing them needs only the table's catalog I/O and directory
(:class:`TableFiles`): the catalog's replay (engine/catalog/replay.py) reads the expiries to
say why a state is gone, maintenance (engine/catalog/maintenance.py) writes them, and the
policy's application (engine/catalog/retention.py) reads them all. See retention.py for the
whole story. Records are create-if-absent files (local link, S3 conditional put), like the
transactions: two writers never overwrite each other's.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Protocol

from engine import fileio
from engine.catalog.io import CatalogIO
from engine.exceptions import InvalidArgumentError, StatisticsExpiredError

log = logging.getLogger("engine.catalog")

RETENTION_DIR = "retention"
_POLICY = re.compile(r"policy-(\d{20})\.json$")
_EXPIRED = re.compile(r"expired-(\d{20})\.json$")
_GC = re.compile(r"gc-(\d{20})\.json$")

__all__ = [
    "DEFAULT_POLICY",
    "KEEP_EXPIRY_RECORDS",
    "KEEP_GC_RECORDS",
    "ExpiryRecord",
    "GcRecord",
    "RetentionPolicy",
    "TableFiles",
    "compact_expiry_records",
    "expired_error",
    "expiry_of",
    "format_duration",
    "last_gc",
    "listing",
    "newest_expiry",
    "parse_duration",
    "read_policy",
    "record_expiry",
    "record_gc",
    "write_policy",
]


class TableFiles(Protocol):
    """What the records need of a table's catalog (a :class:`~engine.catalog.replay.CatalogLog` is one)."""

    @property
    def io(self) -> CatalogIO: ...

    @property
    def catalog_uri(self) -> str: ...

    @property
    def table(self) -> str: ...


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


@dataclass(frozen=True)
class GcRecord:
    """What the last gc of a table recorded (``catalog/retention/gc-<start, ms>.json``)."""

    at_s: float  # when it started (its listing: files written after it were not candidates)
    expiry_seen: int  # the newest expiry record then (its ``before_txn``; 0: none)
    recent: int  # unreferenced files it kept because they were younger than the grace period
    deleted: int


#: gc records kept (the newest is the one read; one more for a concurrent writer's)
KEEP_GC_RECORDS = 2


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
def _dir(catalog: TableFiles) -> str:
    return fileio.join(catalog.catalog_uri, RETENTION_DIR)


def _names(catalog: TableFiles, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        names = catalog.io.list_names(_dir(catalog))
    except FileNotFoundError:
        return []
    return sorted((int(m.group(1)), n) for n in names if (m := pattern.search(n.rsplit("/", 1)[-1])))


def _create_next(catalog: TableFiles, prefix: str, pattern: re.Pattern[str], doc: dict[str, object], seq: int | None = None) -> None:
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


def read_policy(catalog: TableFiles) -> tuple[RetentionPolicy, bool]:
    """(the table's policy, whether it was set) - :data:`DEFAULT_POLICY` when none was."""
    names = _names(catalog, _POLICY)
    if not names:
        return DEFAULT_POLICY, False
    doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), names[-1][1].rsplit("/", 1)[-1])))
    return RetentionPolicy(doc.get("retain_last"), doc.get("retain_for_s"), float(doc.get("gc_grace_s", DEFAULT_POLICY.gc_grace_s))), True


def write_policy(catalog: TableFiles, policy: RetentionPolicy) -> None:
    """Store ``policy`` as the table's (a new record; the newest wins)."""
    _create_next(catalog, "policy", _POLICY, {**asdict(policy), "set_at": _now_iso()})


def _records(catalog: TableFiles) -> list[ExpiryRecord]:
    out = []
    for _, name in _names(catalog, _EXPIRED):
        doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), name.rsplit("/", 1)[-1])))
        out.append(ExpiryRecord(int(doc["before_txn"]), str(doc["expired_at"]), str(doc["by"]), int(doc.get("from_txn", 1))))
    return out


def expiry_of(catalog: TableFiles, txn_id: int) -> ExpiryRecord | None:
    """The expiry that let go of the state after transaction ``txn_id`` (None: not expired)."""
    return next((r for r in sorted(_records(catalog), key=lambda r: r.before_txn) if txn_id < r.before_txn), None)


def expired_error(catalog: TableFiles, txn_id: int, record: ExpiryRecord) -> StatisticsExpiredError:
    when = record.expired_at[:19].replace("T", " ")
    if txn_id >= record.from_txn:
        how = f"was expired on {when} UTC by {record.by}"
    else:  # its own record was compacted away
        how = f"was expired on or before {when} UTC (the oldest expiry on record, by {record.by})"
    return StatisticsExpiredError(
        f"transaction {txn_id} of table {catalog.table!r} {how} (the states before transaction {record.before_txn} are no longer kept)"
    )


def record_expiry(catalog: TableFiles, before_txn: int, by: str, from_txn: int) -> None:
    """Record that the states ``from_txn .. before_txn - 1`` are expired (by ``by``), before any
    of them is deleted; a record of the same expiry (an earlier, interrupted run) stands."""
    record = {"before_txn": before_txn, "expired_at": _now_iso(), "by": by, "from_txn": from_txn}
    _create_next(catalog, "expired", _EXPIRED, record, seq=before_txn)


def compact_expiry_records(catalog: TableFiles) -> None:
    """Delete all but the newest :data:`KEEP_EXPIRY_RECORDS` expiry records (a bounded catalog)."""
    for _, name in _names(catalog, _EXPIRED)[:-KEEP_EXPIRY_RECORDS]:
        catalog.io.delete(fileio.join(_dir(catalog), name.rsplit("/", 1)[-1]))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def listing(catalog: TableFiles) -> list[str]:
    """The names in ``catalog/retention/`` (one listing; none when it does not exist)."""
    try:
        return catalog.io.list_names(_dir(catalog))
    except FileNotFoundError:
        return []


def _numbered(names: list[str], pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    return sorted((int(m.group(1)), n.rsplit("/", 1)[-1]) for n in names if (m := pattern.search(n.rsplit("/", 1)[-1])))


def newest_expiry(catalog: TableFiles, names: list[str] | None = None) -> int:
    """The ``before_txn`` of the newest expiry record (0: none), from the record names alone."""
    found = _numbered(listing(catalog) if names is None else names, _EXPIRED)
    return found[-1][0] if found else 0


def last_gc(catalog: TableFiles, names: list[str] | None = None) -> GcRecord | None:
    """The newest gc record of the table (None: no gc recorded, or it cannot be read)."""
    found = _numbered(listing(catalog) if names is None else names, _GC)
    if not found:
        return None
    try:
        doc = json.loads(catalog.io.read(fileio.join(_dir(catalog), found[-1][1])))
        return GcRecord(float(doc["at_s"]), int(doc["expiry_seen"]), int(doc["recent"]), int(doc["deleted"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None  # compacted by a concurrent gc, or damaged: as if none (a gc is then due)


def record_gc(catalog: TableFiles, at_s: float, expiry_seen: int, recent: int, deleted: int) -> None:
    """Record a finished gc that started at ``at_s`` (called by engine.catalog.gc), and delete
    all but the newest :data:`KEEP_GC_RECORDS` records. A create-if-absent file like the other
    records, through the table's FileIO (works on s3:// as on a local store); never raises:
    without its record the next publish runs a gc again, nothing is lost."""
    doc = {"at_s": at_s, "at": datetime.fromtimestamp(at_s, UTC).isoformat(), "expiry_seen": expiry_seen, "recent": recent, "deleted": deleted}
    try:
        try:
            catalog.io.create(fileio.join(_dir(catalog), f"gc-{int(at_s * 1000):020d}.json"), json.dumps(doc, sort_keys=True).encode())
        except FileExistsError:
            pass  # a concurrent gc that started in the same millisecond recorded the same
        for _, name in _numbered(listing(catalog), _GC)[:-KEEP_GC_RECORDS]:
            catalog.io.delete(fileio.join(_dir(catalog), name))
    except Exception as exc:  # noqa: BLE001 - the gc itself is done; its record is an optimisation
        log.warning("table %s: could not record the gc: %s: %s", catalog.table, type(exc).__name__, exc)
