"""A transactional catalog of statistics files, kept in the object store itself.

Layout (docs/CATALOG.md)::

    <store>/<table>/runs/<job_id>/...                                       statistics files (immutable)
    <store>/<table>/catalog/transactions/<20-digit id>.<uuid8>.transaction  one per commit
    <store>/<table>/catalog/transactions/<20-digit id>.<uuid8>.checkpoint   full state, every N commits

A commit is one create-if-absent write of the next transaction file; readers
list ``transactions/`` once, read the newest checkpoint and replay the
transactions after it.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from engine import fileio
from engine.catalog import codec, lease, retention
from engine.catalog.codec import CHECKPOINT, PRUNED, TRANSACTION, FormatError, Name
from engine.catalog.io import CatalogIO, io_for, local_prune_empty_dirs
from engine.catalog.model import (
    FORMAT_VERSION,
    KINDS,
    Action,
    ActionError,
    AddPartition,
    CatalogState,
    FileRef,
    PartitionEntry,
    RemovePartition,
    SetTableStatistics,
    StatisticsFiles,
    TombstonePartition,
    TransactionRecord,
    Upgrade,
    apply,
    apply_action,
    extra_files,
)
from engine.catalog.paths import CATALOG_DIR, RUNS_DIR
from engine.exceptions import (
    CatalogCorruptError,
    CommitConflictError,
    CommitFailedError,
    InvalidArgumentError,
    StatisticsExpiredError,
    StatisticsNotFoundError,
    UnsupportedCatalogVersionError,
)
from engine.files import checksum

log = logging.getLogger("engine.catalog")

TRANSACTIONS_DIR = "transactions"
DEFAULT_CHECKPOINT_INTERVAL = 100
#: A checkpoint is also written once the transactions since the last one add up to the state's
#: own size (estimated from the last checkpoint's bytes per entry), but never for less than
#: this: opening then reads a checkpoint and at most about as many bytes of transactions again,
#: whatever the table's history (with the count rule alone, a table of many partitions replayed
#: up to 99 full transactions at every open: docs/PERFORMANCE.md, "Scaling").
CHECKPOINT_MIN_BYTES = 1 << 20
_ENTRY_BYTES_GUESS = 400  # a partition's bytes in a checkpoint before one was read or written (measured ~383)

__all__ = [
    "Catalog",
    "CommitInfo",
    "GcResult",
    "PruneResult",
    "TransactionBuilder",
    "TransactionHeader",
    "TransactionInfo",
    "as_files",
]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class CommitInfo:
    txn_id: int
    uuid: str
    uri: str
    checkpoint_written: bool
    state: CatalogState


@dataclass(frozen=True)
class _KeptTransaction:
    """What :meth:`Catalog.history` and :meth:`Catalog.headers` both say of a kept transaction."""

    id: int
    uuid: str
    parent_uuid: str
    snapshot_id: str
    job_id: str
    timestamp_us: int
    uri: str
    has_checkpoint: bool

    @property
    def timestamp(self):  # noqa: ANN201 - datetime
        from datetime import datetime

        return datetime.fromtimestamp(self.timestamp_us / 1e6, tz=UTC)


@dataclass(frozen=True)
class TransactionInfo(_KeptTransaction):
    """One entry of :meth:`Catalog.history`."""

    actions: tuple[Action, ...]


@dataclass(frozen=True)
class TransactionHeader(_KeptTransaction):
    """One entry of :meth:`Catalog.headers`: :class:`TransactionInfo` without the actions
    (reading it does not build them), and the transaction file's size."""

    size: int


@dataclass(frozen=True)
class PruneResult:
    deleted: list[str]  # file names in catalog/transactions/, oldest first


@dataclass(frozen=True)
class MissingTransactions:
    """Transactions ``first .. last`` should be in the catalog and are not (docs/CATALOG.md)."""

    first: int
    last: int | None  # None: open-ended (some transaction after ``first - 1``; the evidence does not say how many)
    file: str  # the expected file name of ``first`` (a pattern when its uuid is unknown)
    evidence: str  # why they must exist

    @property
    def ids(self) -> str:
        if self.last is None:
            return f"{self.first} (or later)"
        return str(self.first) if self.first == self.last else f"{self.first}..{self.last}"

    def message(self, table: str) -> str:
        what = "transaction" if self.last == self.first else "transactions"
        return f"catalog of table {table!r}: {what} {self.ids} missing ({self.file}): {self.evidence}"


@dataclass(frozen=True)
class GcResult:
    deleted: list[str]  # paths relative to the table directory (would be deleted, with dry_run)
    referenced: int  # files kept because a kept transaction references them
    recent: int  # unreferenced files kept because they are younger than the grace period
    dry_run: bool
    leased: int = 0  # unreferenced files kept because their run's job holds a fresh lease (engine/catalog/lease.py)


# --------------------------------------------------------------------------- helpers


def _check_relative(path: str) -> str:
    # string searches instead of splitting (a publish checks three paths a partition): an empty,
    # "." or ".." component is "//", "/./" or "/../" once the path is framed by slashes
    framed = f"/{path}/"
    if not path or path[0] == "/" or "//" in framed or "/./" in framed or "/../" in framed or "://" in path or "\\" in path:
        raise InvalidArgumentError(f"a statistics file path must be relative to the table directory, got {path!r}")
    return path


def _as_ref(value: Any) -> FileRef:
    if isinstance(value, FileRef):  # the common case first: no Mapping ABC check
        ref = value
    elif isinstance(value, Mapping):
        ref = FileRef(str(value["path"]), int(value["size"]), str(value.get("checksum") or ""))
    elif isinstance(value, (tuple, list)) and len(value) in (2, 3):
        ref = FileRef(str(value[0]), int(value[1]), str(value[2]) if len(value) == 3 else "")
    else:
        raise InvalidArgumentError(f"a statistics file must be a FileRef, (path, size[, checksum]) or {{'path', 'size', 'checksum'}}, got {value!r}")
    if ref.size < 0:
        raise InvalidArgumentError(f"negative file size for {ref.path!r}")
    if ref.checksum:
        checksum.parse(ref.checksum, ref.path)
    _check_relative(ref.path)
    return ref


def as_files(files: StatisticsFiles | Mapping[str, Any]) -> StatisticsFiles:
    """StatisticsFiles from a mapping keyed by kind (``statistics``) or file name (``statistics.parquet``)."""
    if isinstance(files, StatisticsFiles):
        for ref in files.refs():
            _as_ref(ref)
        return files
    if not isinstance(files, Mapping):
        raise InvalidArgumentError(f"statistics files must be a mapping of the three files, got {files!r}")
    refs = {}
    for kind in KINDS:
        value = files.get(kind, files.get(f"{kind}.parquet"))
        if value is None:
            raise InvalidArgumentError(f"statistics files lack the {kind} file: {dict(files)!r}")
        refs[kind] = _as_ref(value)
    return StatisticsFiles(**refs)


_RUNS_PREFIX = RUNS_DIR + "/"


def _run_of(path: str) -> str:
    """``runs/<job>`` of ``runs/<job>/...`` (the first two components)."""
    cut = path.find("/", len(_RUNS_PREFIX))
    return path if cut < 0 else path[:cut]


def _check_table(table: str) -> str:
    if not table or "/" in table or table in (".", ".."):
        raise InvalidArgumentError(f"invalid table name {table!r}")
    return table


class _Index:
    """Catalog file names of one listing, by transaction id."""

    def __init__(self, names: Iterable[str], complete: bool = True) -> None:
        self.complete = complete  # holds every name of the listing
        self.txns: dict[int, list[Name]] = {}
        self.checkpoints: dict[int, list[Name]] = {}
        self.prunes: dict[int, list[Name]] = {}  # prune records, by the checkpoint id pruned before
        for raw in names:
            n = codec.parse_name(raw)
            if n is None:
                continue
            kinds = {TRANSACTION: self.txns, CHECKPOINT: self.checkpoints, PRUNED: self.prunes}
            kinds[n.kind].setdefault(n.txn_id, []).append(n)

    @classmethod
    def tail(cls, names: list[str]) -> _Index:
        """Only the names from the newest checkpoint on (``names`` sorted): what opening needs."""
        cut = 0
        for i in range(len(names) - 1, -1, -1):
            n = codec.parse_name(names[i])
            if n is not None and n.kind == CHECKPOINT:
                prefix = names[i][:20]
                cut = i
                while cut > 0 and names[cut - 1].startswith(prefix):
                    cut -= 1
                break
        return cls(names[cut:], complete=cut == 0)

    @staticmethod
    def last_id(names: list[str]) -> int:
        """The highest id in a sorted listing (0 if none)."""
        for i in range(len(names) - 1, -1, -1):
            n = codec.parse_name(names[i])
            if n is not None and n.kind != PRUNED:
                return n.txn_id
        return 0

    @property
    def head(self) -> int:
        return max([0, *self.txns, *self.checkpoints])


# --------------------------------------------------------------------------- the catalog


class Catalog:
    """The catalog of one table. Open it with :meth:`open`; the state is cached and
    moved on by :meth:`refresh` (one LIST, then only the new transactions) and by commits."""

    def __init__(
        self,
        store_uri: str,
        table: str,
        *,
        io: CatalogIO | None = None,
        checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
        use_checkpoints: bool = True,
    ) -> None:
        if checkpoint_interval < 0:
            raise InvalidArgumentError("checkpoint_interval must be >= 0 (0: never write checkpoints)")
        self.store_uri = store_uri
        self.table = _check_table(table)
        self.table_uri = fileio.join(store_uri, table)
        self.catalog_uri = fileio.join(self.table_uri, CATALOG_DIR)
        self.transactions_uri = fileio.join(self.catalog_uri, TRANSACTIONS_DIR)
        self.io = io if io is not None else io_for(store_uri)
        self.checkpoint_interval = checkpoint_interval
        self.use_checkpoints = use_checkpoints
        self.problems: list[CatalogCorruptError] = []  # what open(up_to_last_good=True) skipped
        self.checkpoint_failures = 0
        self._state = CatalogState(table=table)
        self._lock = threading.RLock()
        self._records: dict[int, TransactionRecord] = {}  # immutable files: cached by id (same timeline)
        # what every read of a transaction learnt, kept like _records but small: the open's
        # replay fills it, so the retention pass after a commit re-reads only older headers
        self._headers: dict[int, codec.Header] = {}
        self._checkpoint_sizes: dict[int, tuple[int, int]] = {}  # checkpoint id -> (bytes, entries)

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        store_uri: str,
        table: str,
        *,
        up_to_last_good: bool = False,
        checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
        io: CatalogIO | None = None,
        use_checkpoints: bool = True,
    ) -> Catalog:
        """Open the catalog of ``table`` (an empty catalog if none exists yet).

        Reads one listing, the newest checkpoint and the transactions after it.
        A damaged or missing file raises :class:`CatalogCorruptError` naming it;
        with ``up_to_last_good`` the state of the last good transaction is opened
        instead and ``catalog.problems`` says what was skipped.
        """
        cat = cls(store_uri, table, io=io, checkpoint_interval=checkpoint_interval, use_checkpoints=use_checkpoints)
        cat._state, cat.problems = cat._load(None, known=None, up_to_last_good=up_to_last_good)
        return cat

    def state(self) -> CatalogState:
        """The state as of the last open, refresh or commit (no I/O)."""
        return self._state

    def refresh(self, *, fresh: bool = True) -> CatalogState:
        """Move on to the newest committed state (lists only names after the known head).

        ``fresh=False``: a listing the catalog's I/O remembers will do (a publish's retention
        pass, :class:`~engine.catalog.io.ListingMemoIO`: it works on the state the publish just
        committed; a concurrent commit makes its own commit conflict, and it refreshes from the
        store then). A plain I/O remembers nothing: the store is asked either way."""
        with self._lock:
            if fresh:
                self.io.relist(self.transactions_uri)
            known = self._state if not self._state.empty and not self.problems else None
            try:
                state, problems = self._load(None, known=known, up_to_last_good=False)
            except CatalogCorruptError:
                if known is None:
                    raise
                # the log may have been replaced (rebuild) under us: start over
                self._forget()
                self.io.relist(self.transactions_uri)
                state, problems = self._load(None, known=None, up_to_last_good=False)
            self._state, self.problems = state, problems
            return state

    def _forget(self) -> None:
        """Drop what was cached of the log's files (it was replaced)."""
        with self._lock:
            self._records.clear()
            self._headers.clear()
            self._checkpoint_sizes.clear()

    # ------------------------------------------------------------------ names

    def _uri(self, name: str) -> str:
        return fileio.join(self.transactions_uri, name)

    def _corrupt(self, name: str, why: str) -> CatalogCorruptError:
        uri = self._uri(name)
        return CatalogCorruptError(f"catalog of table {self.table!r}: {uri}: {why}", uri=uri)

    # ------------------------------------------------------------------ reading files

    def _decode_checkpoint(self, n: Name, data: bytes | BaseException) -> CatalogState:
        st = self._checked_checkpoint(n, data, full=True)
        assert isinstance(st, CatalogState)
        return st

    def _check_checkpoint(self, n: Name, data: bytes | BaseException) -> codec.CheckpointHeader:
        """:meth:`_decode_checkpoint`'s checks without building the state (the whole message is parsed)."""
        head = self._checked_checkpoint(n, data, full=False)
        assert isinstance(head, codec.CheckpointHeader)
        return head

    def _checked_checkpoint(self, n: Name, data: bytes | BaseException, full: bool) -> CatalogState | codec.CheckpointHeader:
        if isinstance(data, FileNotFoundError):
            raise self._corrupt(n.name, "checkpoint file missing (listed, then gone)")
        if isinstance(data, BaseException):
            raise data
        st: CatalogState | None = None
        try:
            if full:
                rec = codec.decode_checkpoint(data, self.table)
                st = rec.state
                head = codec.CheckpointHeader(st.txn_id, st.txn_uuid, st.timeline, rec.format_version, st.format_version, len(st.entries))
            else:
                head = codec.check_checkpoint(data)
            uuid.UUID(head.timeline)
        except (FormatError, ValueError) as exc:
            raise self._corrupt(n.name, f"damaged checkpoint: {exc}") from None
        if head.format_version > FORMAT_VERSION or head.state_format_version > FORMAT_VERSION:
            raise UnsupportedCatalogVersionError(
                f"{self._uri(n.name)}: catalog format version {max(head.format_version, head.state_format_version)}; "
                f"this Metastore reads up to {FORMAT_VERSION}"
            )
        if (
            head.txn_id != n.txn_id
            or head.txn_uuid != codec.txn_uuid(head.timeline, head.txn_id)
            or not head.txn_uuid.replace("-", "").startswith(n.uuid8)
        ):
            raise self._corrupt(n.name, f"checkpoint content (transaction {head.txn_id}, uuid {head.txn_uuid}) does not match its name")
        self._checkpoint_sizes[head.txn_id] = (len(data), head.entries)
        return st if st is not None else head

    def _read_record(self, name: str, data: bytes | BaseException) -> TransactionRecord:
        """A transaction file's record, or a CatalogCorruptError naming the file (a read's error is re-raised)."""
        return self._read_transaction(name, data, full=True)

    def _read_transaction(self, name: str, data: bytes | BaseException, full: bool) -> Any:
        """The record (``full``) or the header of a transaction file, or a CatalogCorruptError naming it."""
        if isinstance(data, FileNotFoundError):
            raise self._corrupt(name, "transaction file missing (listed, then gone)")
        if isinstance(data, BaseException):
            raise data
        try:
            return codec.decode_transaction(data) if full else codec.decode_header(data)
        except FormatError as exc:
            raise self._corrupt(name, f"damaged transaction: {exc}") from None

    def _decode_txn(self, name: str, data: bytes | BaseException, state: CatalogState) -> TransactionRecord:
        """Decode and check transaction ``state.txn_id + 1`` against the state before it."""
        rec = self._read_record(name, data)
        if rec.format_version > FORMAT_VERSION:
            raise UnsupportedCatalogVersionError(
                f"{self._uri(name)}: catalog format version {rec.format_version}; this Metastore reads up to {FORMAT_VERSION}"
            )
        txn_id = state.txn_id + 1
        if txn_id == 1:
            try:
                uuid.UUID(rec.timeline)
            except ValueError:
                raise self._corrupt(name, f"invalid timeline {rec.timeline!r}") from None
            timeline, parent = rec.timeline, ""
        else:
            timeline, parent = state.timeline, state.txn_uuid
        if rec.id != txn_id or rec.uuid != codec.txn_uuid(timeline, txn_id) or rec.timeline != timeline:
            raise self._corrupt(name, f"content (transaction {rec.id}, uuid {rec.uuid}) does not continue the log at transaction {txn_id}")
        if rec.parent_uuid != parent:
            raise self._corrupt(name, f"parent uuid {rec.parent_uuid!r} is not the uuid of transaction {txn_id - 1} ({parent!r})")
        return rec

    def _apply(self, name: str, state: CatalogState, rec: TransactionRecord) -> CatalogState:
        try:
            return apply(state, rec)
        except ActionError as exc:
            raise self._corrupt(name, f"does not apply to the state before it: {exc}") from None

    def _replay(
        self, state: CatalogState, index: _Index, goal: int, up_to_last_good: bool
    ) -> tuple[CatalogState, CatalogCorruptError | UnsupportedCatalogVersionError | None]:
        """Apply transactions ``state.txn_id + 1 .. goal``; stop at the first bad one if up_to_last_good."""
        try:
            if state.txn_id >= goal:
                return state, None
            if state.txn_id == 0:  # the first transaction names the timeline
                state = self._replay_range(state, index, 1, 1)
            return self._replay_range(state, index, state.txn_id + 1, goal), None
        except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
            if not up_to_last_good:
                raise
            return exc.state, exc  # type: ignore[attr-defined]

    def _replay_range(self, state: CatalogState, index: _Index, first: int, last: int) -> CatalogState:
        batch = 256 if self.io.remote else 4096
        for lo in range(first, last + 1, batch):
            hi = min(last, lo + batch - 1)
            names: list[str] = []
            problem: Exception | None = None
            for txn_id in range(lo, hi + 1):
                expected = codec.file_name(txn_id, codec.txn_uuid(state.timeline, txn_id) if txn_id > 1 else codec.ROOT_UUID, TRANSACTION)
                present = [n.name for n in index.txns.get(txn_id, ())]
                if expected in present and len(present) == 1:
                    names.append(expected)
                    continue
                if not present:
                    problem = self._corrupt(expected, f"transaction {txn_id} is missing (the log goes on to {index.head})")
                elif expected in present:
                    others = ", ".join(p for p in present if p != expected)
                    problem = self._corrupt(
                        others, f"a second transaction {txn_id} (fork: written by a writer that was not on this log; the log's is {expected})"
                    )
                else:
                    problem = self._corrupt(
                        present[0], f"transaction {txn_id} does not belong to this log (expected {expected}: a fork or a foreign file)"
                    )
                break
            datas = self.io.read_many([self._uri(n) for n in names]) if names else []
            for name, data in zip(names, datas):
                try:
                    rec = self._decode_txn(name, data, state)
                    state = self._apply(name, state, rec)
                    self._headers[rec.id] = codec.header_of(rec, len(data))  # type: ignore[arg-type]
                except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
                    exc.state = state  # type: ignore[attr-defined]
                    raise
            if problem is not None:
                problem.state = state  # type: ignore[attr-defined]
                raise problem
        return state

    def _load(
        self,
        target: int | None,
        known: CatalogState | None,
        up_to_last_good: bool,
        full: bool = False,
        skip: frozenset[str] = frozenset(),
        names: list[str] | None = None,
    ) -> tuple[CatalogState, list[CatalogCorruptError]]:
        """The state at ``target`` (None: the head) and the problems skipped on the way.

        ``names``: a sorted listing of transactions/ already made (else one LIST).
        """
        io = self.io
        later_checkpoint = False
        listed_head = 0
        if known is not None and target is None and not full:
            names = io.list_names(self.transactions_uri, start_after=codec.after_id(known.txn_id))
            index = _Index.tail(names) if self.use_checkpoints else _Index(names)
            index.complete = False  # only the names after the known head
        else:
            all_names = names if names is not None else io.list_names(self.transactions_uri)
            names = all_names
            if target is not None:  # names sort by id: only those up to the target matter
                cut = bisect.bisect_right(all_names, codec.after_id(target))
                names = all_names[:cut]
                later_checkpoint = any(n.endswith(CHECKPOINT) for n in all_names[cut:])
                listed_head = _Index.last_id(all_names)
            index = _Index.tail(names) if (self.use_checkpoints and not full) else _Index(names)
            full = full or index.complete
        head = max(index.head, listed_head, known.txn_id if known else 0)
        goal = head if target is None else target
        if target is not None and target > head:
            raise StatisticsNotFoundError(f"table {self.table!r} has no transaction {target} (the newest is {head})")
        if goal == 0:
            return CatalogState(table=self.table), []

        problems: list[CatalogCorruptError] = []
        bases: list[tuple[int, Any]] = []
        if self.use_checkpoints:
            for cid in sorted((c for c in index.checkpoints if c <= goal), reverse=True):
                for n in index.checkpoints[cid]:
                    if n.name not in skip:
                        bases.append((cid, n))
        if known is not None and known.txn_id <= goal:
            bases.append((known.txn_id, known))
            bases.sort(key=lambda b: b[0], reverse=True)
        for _cid, base in bases:
            if isinstance(base, CatalogState):
                state = base
            else:
                try:
                    state = self._decode_checkpoint(base, io.read_many([self._uri(base.name)])[0])
                    if known is not None and state.timeline != known.timeline:
                        raise self._corrupt(base.name, "checkpoint of another log (timeline differs)")
                except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
                    if not up_to_last_good:
                        raise
                    problems.append(exc)  # type: ignore[arg-type]
                    continue
            state, problem = self._replay(state, index, goal, up_to_last_good)
            if problem is not None:
                problems.append(problem)  # type: ignore[arg-type]
            return state, problems
        # no usable checkpoint: replay from the first transaction (needs every name)
        if not full:
            bad = skip | {getattr(p, "uri", "").rsplit("/", 1)[-1] for p in problems}
            state, more = self._load(target, None, up_to_last_good, full=True, skip=frozenset(bad), names=None if known is not None else all_names)
            return state, problems + more
        if 1 not in index.txns:
            oldest = min(index.txns) if index.txns else None
            if not self.use_checkpoints and index.checkpoints:
                raise StatisticsNotFoundError(
                    f"table {self.table!r} cannot be replayed from its transactions alone: "
                    f"history before transaction {oldest} was pruned (open it with checkpoints)"
                )
            if target is not None and (later_checkpoint or oldest is None or target < oldest):
                raise StatisticsNotFoundError(
                    f"transaction {target} of table {self.table!r} is no longer in the catalog: the history before it was pruned"
                )
            missing = self._missing_checkpoint_name(index, oldest)
            exc = self._corrupt(
                missing,
                f"checkpoint missing or unreadable: the transaction files start at {oldest} "
                f"(history before them was pruned) and no readable checkpoint holds the state they build on",
            )
            if problems:
                raise exc from problems[-1]
            raise exc
        state, problem = self._replay(CatalogState(table=self.table), index, goal, up_to_last_good)
        if problem is not None:
            problems.append(problem)  # type: ignore[arg-type]
        if state.txn_id == 0 and problems:
            raise problems[-1]
        return state, problems

    def _missing_checkpoint_name(self, index: _Index, oldest: int | None) -> str:
        if oldest is None:
            return "<no transaction files>"
        try:
            rec = codec.decode_transaction(self.io.read(self._uri(index.txns[oldest][0].name)))
            return codec.file_name(oldest, codec.txn_uuid(rec.timeline, oldest), CHECKPOINT)
        except Exception:  # noqa: BLE001 - only for the message
            return f"{oldest:020d}.*.{CHECKPOINT}"

    # ------------------------------------------------------------------ writing

    def begin(self, job_id: str, snapshot: str) -> TransactionBuilder:
        """A transaction on top of the current state (commit it with ``commit()``)."""
        if self.problems:
            raise InvalidArgumentError(
                f"catalog of table {self.table!r} was opened up to its last good transaction "
                f"({self._state.txn_id}); repair it (engine.catalog.rebuild) before writing"
            )
        return TransactionBuilder(self, self._state, job_id, snapshot)

    def _advance(self, base: CatalogState, new: CatalogState, rec: TransactionRecord, size: int) -> None:
        with self._lock:
            self._records[rec.id] = rec
            self._headers[rec.id] = codec.header_of(rec, size)
            if self._state.txn_id == base.txn_id and self._state.txn_uuid == base.txn_uuid:
                self._state = new

    def _write_checkpoint(self, state: CatalogState, parent_uuid: str) -> None:
        name = codec.file_name(state.txn_id, state.txn_uuid, CHECKPOINT)
        data = codec.encode_checkpoint(state, parent_uuid, FORMAT_VERSION)
        self.io.create(self._uri(name), data)
        self._checkpoint_sizes[state.txn_id] = (len(data), len(state.entries))

    def _checkpoint_due(self, state: CatalogState) -> bool:
        """Whether the commit that made ``state`` should write a checkpoint: every
        ``checkpoint_interval`` commits, or once the transactions since the last checkpoint
        add up to the state's own size (:data:`CHECKPOINT_MIN_BYTES` at least). Sizes this
        catalog has not seen (an open that did not replay them) leave the count rule alone."""
        if not self.checkpoint_interval:
            return False
        if state.txn_id % self.checkpoint_interval == 0:
            return True
        last = max((c for c in self._checkpoint_sizes if c < state.txn_id), default=0)
        since = 0
        for i in range(last + 1, state.txn_id + 1):
            h = self._headers.get(i)
            if h is None:
                return False
            since += h.size
        if last:
            size, entries = self._checkpoint_sizes[last]
            per_entry = size / max(1, entries)
        else:
            per_entry = _ENTRY_BYTES_GUESS
        return since >= max(CHECKPOINT_MIN_BYTES, int(per_entry * len(state.entries)))

    def write_checkpoint(self) -> str | None:
        """Write a checkpoint of the current state now (None if one exists already)."""
        st = self._state
        if st.empty:
            raise InvalidArgumentError("an empty catalog has nothing to checkpoint")
        parent = codec.txn_uuid(st.timeline, st.txn_id - 1) if st.txn_id > 1 else ""
        try:
            self._write_checkpoint(st, parent)
        except FileExistsError:
            return None
        return codec.file_name(st.txn_id, st.txn_uuid, CHECKPOINT)

    # ------------------------------------------------------------------ history and time travel

    def _full_index(self) -> _Index:
        return _Index(self.io.list_names(self.transactions_uri))

    def transaction_ids(self) -> list[int]:
        """The ids of the transaction files in the catalog, oldest first: one listing, no file
        read and no check (:meth:`headers` checks the chain). What a count-only retention
        rule needs."""
        return self.log_ids()[0]

    def log_ids(self) -> tuple[list[int], list[int]]:
        """(the transaction ids, the checkpoint ids), oldest first, from one listing (unchecked)."""
        index = self._full_index()
        return sorted(index.txns), sorted(index.checkpoints)

    def _decoded_for(self, index: _Index, ids: Sequence[int], full: bool) -> dict[int, Any]:
        """Transactions by id, decoded in full (``full``: records, every action built) or their
        headers only (the actions left unparsed); cached either way, and each file's own
        consistency checked (its content is the id its name says). The open's replay and the
        commits fill both caches; a full decode also learns the header."""
        cache: dict[int, Any] = self._records if full else self._headers
        out: dict[int, Any] = {}
        todo = []
        for i in ids:
            got = cache.get(i)
            if got is not None:
                out[i] = got
            elif index.txns.get(i):
                todo.append((i, index.txns[i][0].name))
        datas = self.io.read_many([self._uri(n) for _, n in todo])
        for (i, name), data in zip(todo, datas):
            got = self._read_record(name, data) if full else self._read_header(name, data)
            if got.id != i:
                raise self._corrupt(name, f"content is transaction {got.id}")
            out[i] = got
            if full:
                self._headers[i] = codec.header_of(got, len(data))  # type: ignore[arg-type]
        if not full:
            with self._lock:
                self._headers.update(out)
        return out

    def _records_for(self, index: _Index, ids: Sequence[int]) -> dict[int, TransactionRecord]:
        """Decode transactions by id (cached); checks each file's own consistency only."""
        return self._decoded_for(index, ids, full=True)

    def _read_header(self, name: str, data: bytes | BaseException) -> codec.Header:
        """:meth:`_read_record` without the actions."""
        return self._read_transaction(name, data, full=False)

    def _headers_for(self, index: _Index, ids: Sequence[int]) -> dict[int, codec.Header]:
        """Transactions' headers by id (cached; the open's replay and commits fill the cache):
        the file is read and checked as by :meth:`_records_for`, its actions are not built."""
        return self._decoded_for(index, ids, full=False)

    def _chain(self, index: _Index, first: int, last: int, heads: Mapping[int, Any]) -> list[str]:
        """Check that transactions ``first .. last`` form one log (each file where its id and the
        log's timeline put it, each continuing the one before); their file names, in order.
        ``heads``: records or headers by id (both have uuid, parent_uuid and timeline)."""
        timeline = heads[first].timeline if first in heads else ""
        prev_uuid = codec.txn_uuid(timeline, first - 1) if first > 1 else ""
        out: list[str] = []
        for i in range(first, last + 1):
            expected = codec.file_name(i, codec.txn_uuid(timeline, i), TRANSACTION) if timeline else None
            names = [n.name for n in index.txns.get(i, ())]
            if not names:
                raise self._corrupt(expected or f"{i:020d}.*.{TRANSACTION}", f"transaction {i} is missing (history goes from {first} to {last})")
            if len(names) > 1 or names[0] != expected:
                bad = [n for n in names if n != expected] or names
                raise self._corrupt(bad[0], f"transaction {i} does not belong to this log (expected {expected}): a fork or a foreign file")
            rec = heads[i]
            if rec.uuid != codec.txn_uuid(timeline, i) or rec.parent_uuid != prev_uuid or rec.timeline != timeline:
                raise self._corrupt(names[0], f"does not continue the log (uuid {rec.uuid}, parent {rec.parent_uuid})")
            prev_uuid = rec.uuid
            out.append(names[0])
        return out

    def history(self) -> list[TransactionInfo]:
        """Every transaction still in the catalog, oldest first (after a prune: from the prune point).

        Reads every transaction file (cached afterwards) and builds every action; raises
        CatalogCorruptError on a gap, a fork or a damaged file. :meth:`headers` answers the
        same without the actions, for a fraction of the cost.
        """
        kept = self._kept(full=True)
        with self._lock:
            self._records.update((fields["id"], rec) for fields, rec in kept)
        return [TransactionInfo(**fields, actions=rec.actions) for fields, rec in kept]

    def headers(self) -> list[TransactionHeader]:
        """:meth:`history` without the actions: every kept transaction's id, uuids, snapshot, job
        and timestamp, checked the same way (a gap, a fork or a damaged file raises
        CatalogCorruptError). Reads only the headers the catalog has not seen yet (the open
        replayed the transactions since the last checkpoint, commits add theirs); what the
        retention pass after every publish reads."""
        return [TransactionHeader(**fields, size=head.size) for fields, head in self._kept(full=False)]

    def _kept(self, full: bool) -> list[tuple[dict[str, Any], Any]]:
        """Every kept transaction, oldest first, checked as one log: the fields
        :class:`_KeptTransaction` holds, and its record (``full``) or header."""
        index = self._full_index()
        if not index.txns:
            return []
        first, last = min(index.txns), max(index.txns)
        heads = self._decoded_for(index, range(first, last + 1), full)
        names = self._chain(index, first, last, heads)
        return [
            (
                {
                    "id": i,
                    "uuid": heads[i].uuid,
                    "parent_uuid": heads[i].parent_uuid,
                    "snapshot_id": heads[i].snapshot_id,
                    "job_id": heads[i].job_id,
                    "timestamp_us": heads[i].timestamp_us,
                    "uri": self._uri(name),
                    "has_checkpoint": i in index.checkpoints,
                },
                heads[i],
            )
            for i, name in zip(range(first, last + 1), names)
        ]

    def state_at(self, txn_id: int, _names: list[str] | None = None) -> CatalogState:
        """The state right after transaction ``txn_id`` (time travel; 0: the empty catalog).

        Reads one listing, the newest checkpoint at or before ``txn_id`` and the transactions up to it.
        """
        if txn_id < 0:
            raise InvalidArgumentError("a transaction id is >= 0")
        st = self._state
        if txn_id == st.txn_id:
            return st
        if txn_id == 0:
            return CatalogState(table=self.table)
        known = st if (not st.empty and st.txn_id < txn_id and not self.problems) else None
        try:
            state, _ = self._load(txn_id, known=known, up_to_last_good=False, names=_names)
        except StatisticsNotFoundError:
            record = retention.expiry_of(self, txn_id)
            if record is not None:  # say when and by what, not only that it is gone
                raise retention.expired_error(self, txn_id, record) from None
            raise
        return state

    def state_at_snapshot(self, snapshot_id: str) -> CatalogState:
        """The state after the newest transaction that describes table snapshot ``snapshot_id``."""
        st = self._state
        if not st.empty and st.snapshot_id == snapshot_id:
            return st
        names = self.io.list_names(self.transactions_uri)
        index = _Index(names)
        if not index.txns:
            raise StatisticsNotFoundError(f"table {self.table!r} has no transactions")
        first, last = min(index.txns), min(max(index.txns), st.txn_id if not st.empty else max(index.txns))
        step = 64 if self.io.remote else 512
        hi = last
        while hi >= first:
            lo = max(first, hi - step + 1)
            ids = list(range(lo, hi + 1))
            heads = self._headers_for(index, ids)  # the snapshot id is in the header: no actions built
            for i in reversed(ids):
                h = heads.get(i)
                if h is not None and h.snapshot_id == snapshot_id:
                    return self.state_at(i, _names=names)
            hi = lo - 1
        record = retention.expiry_of(self, first - 1) if first > 1 else None
        if record is not None:
            raise StatisticsExpiredError(
                f"no kept transaction of table {self.table!r} describes snapshot {snapshot_id!r} (searched {first}..{last}); "
                f"the states before transaction {first} were expired (the last time on {record.expired_at[:19].replace('T', ' ')} UTC by {record.by})"
            )
        pruned = f"; the history before transaction {first} was pruned" if first > 1 else ""
        raise StatisticsNotFoundError(
            f"no transaction of table {self.table!r} describes snapshot {snapshot_id!r} (searched transactions {first}..{last}{pruned})"
        )

    # ------------------------------------------------------------------ maintenance

    def prune(self, before_checkpoint_id: int) -> PruneResult:
        """Delete the transaction and checkpoint files older than checkpoint ``before_checkpoint_id``.

        The checkpoint itself and everything after it stay; the state and the
        time travel to transactions from that id on are unaffected. Files are
        deleted oldest first, so an interrupted prune leaves a shorter history,
        never a hole. The checkpoint is read and checked first (every message parsed, its
        state not built).
        """
        index = self._full_index()
        names = index.checkpoints.get(before_checkpoint_id)
        if not names:
            raise InvalidArgumentError(f"table {self.table!r} has no checkpoint {before_checkpoint_id} to prune before")
        good = None
        for n in names:  # the checkpoint must be readable, or pruning would lose the state
            good = self._check_checkpoint(n, self.io.read_many([self._uri(n.name)])[0])
        assert good is not None
        if not self._state.empty and good.timeline != self._state.timeline:
            raise self._corrupt(names[0].name, "checkpoint of another log (timeline differs)")
        # the prune's record first: transactions missing before this checkpoint are then known
        # to be pruned, not lost (verify and gc tell the two apart, docs/CATALOG.md)
        try:
            self.io.create(self._uri(codec.file_name(before_checkpoint_id, good.txn_uuid, PRUNED)), codec.frame(b""))
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
            self.io.delete(self._uri(name))
            deleted.append(name)
        with self._lock:
            for cache in (self._records, self._headers, self._checkpoint_sizes):
                for i in [i for i in cache if i < before_checkpoint_id]:
                    del cache[i]
        return PruneResult(deleted)

    def referenced_paths(self, tolerate_missing: bool = False) -> set[str]:
        """Statistics files (relative paths) referenced by any state from the oldest kept transaction on.

        ``tolerate_missing``: skip missing transactions instead of refusing (gc's ``force``)."""
        index = self._full_index()
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
                    base = self._decode_checkpoint(index.checkpoints[cid][0], self.io.read_many([self._uri(index.checkpoints[cid][0].name)])[0])
                    break
                except CatalogCorruptError:
                    continue
            if base is None:
                raise self._corrupt(
                    self._missing_checkpoint_name(index, oldest),
                    "no readable checkpoint holds the state the oldest kept transaction builds on; cannot tell which statistics files are referenced",
                )
            refs |= base.referenced_paths()
        missing = [i for i in range(oldest, head + 1) if i not in index.txns and i not in index.checkpoints]
        if missing and not tolerate_missing:
            raise self._corrupt(
                f"{missing[0]:020d}.*.{TRANSACTION}", f"transaction {missing[0]} is missing; cannot tell which statistics files are referenced"
            )
        # the paths only: decoded records when this catalog has them, else read from the parsed
        # message without building the actions (decode_paths)
        todo = []
        for i in range(oldest, head + 1):
            rec = self._records.get(i)
            if rec is not None:
                for a in rec.actions:
                    if isinstance(a, (AddPartition, SetTableStatistics)):
                        refs.update(a.files.paths())
                    if isinstance(a, SetTableStatistics):
                        refs.update(ref.path for ref in extra_files(a.properties))
            elif index.txns.get(i):
                todo.append((i, index.txns[i][0].name))
        for (i, name), data in zip(todo, self.io.read_many([self._uri(n) for _, n in todo])):
            if isinstance(data, BaseException):
                self._read_record(name, data)  # raises as a full read would
            try:
                header, paths, properties = codec.decode_paths(data)  # type: ignore[arg-type]
            except FormatError as exc:
                raise self._corrupt(name, f"damaged transaction: {exc}") from None
            if header.id != i:
                raise self._corrupt(name, f"content is transaction {header.id}")
            refs |= paths
            for props in properties:
                refs.update(ref.path for ref in extra_files(props))
            self._headers.setdefault(i, header)
        try:
            refs |= self.refresh().referenced_paths()
        except CatalogCorruptError:
            if not tolerate_missing:
                raise
            refs |= self._state.referenced_paths()  # forced past a hole: the state before it
        return refs

    def gc(self, grace_period_s: float, *, dry_run: bool = False, now: float | None = None, force: bool = False) -> GcResult:
        """Delete statistics files below ``runs/`` that no kept transaction references.

        Only files older than ``grace_period_s`` (by their modification time) go:
        an analyze job still running has written files that no transaction
        references yet; the files of a run whose job holds a fresh lease
        (engine/catalog/lease.py) stay whatever their age. Other files
        of a run (its manifest.json) stay while the run has referenced files or its
        job made a kept transaction.

        Refused (CatalogCorruptError, nothing deleted) while a transaction is missing
        (engine.catalog.integrity: the catalog's files, ``CURRENT``, the runs' manifests):
        a missing transaction may reference any run, even an old one (a republish names
        an old run's files). ``rebuild`` repairs the catalog; ``force`` deletes what the
        remaining transactions do not reference.

        Every gc that is not a dry run records when it started and what it saw
        (``catalog/retention/gc-*.json``): the gc after a publish runs only when
        :func:`engine.catalog.retention.gc_due` says it can find something new.
        """
        if grace_period_s < 0:
            raise InvalidArgumentError("grace_period_s must be >= 0")
        started = time.time() if now is None else now
        expiry_seen = retention.newest_expiry(self)  # before the listing: a later expiry is news to the next gc
        runs_uri = fileio.join(self.table_uri, RUNS_DIR)
        files = self.io.list_files(runs_uri)  # list first: files written after this are not candidates
        # then the catalog, from the store (not a listing remembered from before the runs'): one
        # listing that the hole check and the references share
        self.io.relist(self.transactions_uri)
        if not force:
            from engine.catalog.integrity import missing_transactions

            missing = missing_transactions(self, runs_listing=files)
            if missing:
                m = missing[0]
                raise CatalogCorruptError(
                    f"gc refused: {m.message(self.table)}; a missing transaction may reference any run, so nothing "
                    f"is deleted until the catalog is rebuilt (metastore rebuild {self.table}) or gc is forced (--force)",
                    uri=self._uri(m.file),
                )
        refs = self.referenced_paths(tolerate_missing=force)
        root = fileio.resolve(self.table_uri)[1].rstrip("/") + "/"
        cutoff_ns = int(((time.time() if now is None else now) - grace_period_s) * 1e9)
        listed = [(entry, entry.path[len(root) :] if entry.path.startswith(root) else entry.path) for entry in files]
        # a run with a referenced file keeps its other files (manifest.json): the runs of the listed
        # referenced files answer that for nearly every run; the runs of every reference (one pass
        # over all of them) only when a run's referenced files are all gone
        live_runs = {_run_of(rel) for _, rel in listed if rel in refs and rel.startswith(_RUNS_PREFIX)}
        # a kept transaction's run keeps its manifest.json (a republish reads it) even when it has no
        # referenced file: a job that carried an unchanged table over wrote nothing else
        try:
            live_runs.update(f"{RUNS_DIR}/{h.job_id}" for h in self.headers())
        except CatalogCorruptError:  # forced past a missing transaction: the references decide alone
            pass
        all_live: set[str] | None = None
        held = {f"{RUNS_DIR}/{job}" for job, info in lease.leases(files, now).items() if info.fresh}  # running jobs' runs
        doomed, referenced, recent, leased = [], 0, 0, 0
        for entry, rel in listed:
            if rel in refs:
                referenced += 1
                continue
            if held and _run_of(rel) in held:
                leased += 1
                continue
            if not rel.endswith(".parquet"):
                run = "/".join(rel.split("/")[:2])
                if run not in live_runs and all_live is None:
                    all_live = {_run_of(p) for p in refs if p.startswith(_RUNS_PREFIX)}
                if run in live_runs or (all_live is not None and run in all_live):
                    referenced += 1
                    continue
            if entry.mtime_ns is None or entry.mtime_ns > cutoff_ns:
                recent += 1
                continue
            doomed.append((rel, entry.uri))
        if not dry_run:
            for _rel, uri in doomed:
                self.io.delete(uri)
            if doomed:
                local_prune_empty_dirs(runs_uri)
        # the table's derived statistics (computed subsets) of states no longer kept go too
        from engine.catalog.derived import collect

        derived = collect(self, grace_period_s, dry_run=dry_run, now=now)
        if not dry_run:  # when it ran and what it saw: the after-publish gc is paced by it (retention.gc_due)
            retention.record_gc(self, started, expiry_seen, recent, len(doomed))
        return GcResult([rel for rel, _ in doomed] + derived, referenced, recent, dry_run, leased)

    def expire(self, keep_snapshots: Iterable[str], job_id: str = "expire") -> CommitInfo | None:
        """Commit a transaction removing the statistics no snapshot of interest references.

        The snapshots of interest are ``keep_snapshots`` and the current one. A
        partition entry is referenced by a snapshot if it is live in the state
        of that snapshot (:meth:`state_at_snapshot`); entries of the current state
        that none references (tombstones kept for older snapshots) are removed.
        Returns None when there is nothing to remove.
        """
        current = self.refresh()
        if current.empty:
            return None
        if len(current.entries) == len(current.partitions):
            return None  # only tombstones can be unreferenced (live partitions are the current snapshot's)
        keep = set(keep_snapshots) | {current.snapshot_id}
        referenced = {(k, e.files) for k, e in current.partitions.items()}
        for snap in keep - {current.snapshot_id}:
            try:
                st = self.state_at_snapshot(snap)
            except StatisticsNotFoundError:
                continue  # not in the kept history: references nothing
            referenced |= {(k, e.files) for k, e in st.partitions.items()}
        doomed = [k for k, e in current.entries.items() if (k, e.files) not in referenced]
        if not doomed:
            return None
        txn = self.begin(job_id, current.snapshot_id)
        for k in doomed:
            txn.remove_partition(k)
        return txn.commit()

    def expire_tombstones(self, oldest_kept: CatalogState, job_id: str = "expire") -> CommitInfo | None:
        """Commit a transaction removing the tombstones that no state from ``oldest_kept`` to the
        current one holds live (retention's expiry); None when there is none.

        The log is linear: the entry a transaction A adds (``added_in``) is live from state A
        until it is tombstoned, and never again (adding the partition back makes a new entry).
        So a tombstone is held by a kept state if it was added at or after ``oldest_kept``, or
        is live in ``oldest_kept`` itself: no other state is built (:meth:`expire`, by snapshot,
        builds the state of every kept snapshot: at every expiry of a table with tombstones,
        up to the policy's 100 states). An entry of unknown ``added_in`` (0) is kept."""
        for attempt in range(3):  # the first on the state as the pass knows it (a publish's: no listing)
            current = self.refresh(fresh=attempt > 0)
            if current.empty or len(current.entries) == len(current.partitions):
                return None
            try:
                return self._expire_tombstones(current, oldest_kept, job_id)
            except CommitConflictError:
                if attempt == 2:
                    raise
        return None

    def _expire_tombstones(self, current: CatalogState, oldest_kept: CatalogState, job_id: str) -> CommitInfo | None:
        since = oldest_kept.txn_id

        def held(key: str, e: PartitionEntry) -> bool:
            if e.added_in == 0 or e.added_in >= since:
                return True
            then = oldest_kept.entries.get(key)
            return then is not None and not then.tombstoned and then.added_in == e.added_in and then.files == e.files

        doomed = [k for k, e in current.entries.items() if e.tombstoned and not held(k, e)]
        if not doomed:
            return None
        txn = self.begin(job_id, current.snapshot_id)
        for k in doomed:
            txn.remove_partition(k)
        return txn.commit()

    def missing_transactions(self, index: _Index | None = None) -> list[MissingTransactions]:
        """Transactions the catalog's own files show to be missing (one listing; reads at most one file).

        - a hole: an id between the oldest kept transaction and the newest transaction or
          checkpoint without a transaction file (a checkpoint records the id it follows, so
          a deleted newest transaction that had a checkpoint shows);
        - ids before the oldest kept transaction that no prune recorded (prune writes
          ``<checkpoint id>.<uuid8>.pruned`` before it deletes anything): a lost first
          transaction is not a prune.
        The evidence outside the catalog (``CURRENT``, the runs) is in engine.catalog.integrity.
        """
        index = index if index is not None else self._full_index()
        if not index.txns and not index.checkpoints:
            return []
        timeline = self._state.timeline
        if not timeline:
            for i in sorted(index.txns):
                try:
                    timeline = codec.decode_transaction(self.io.read(self._uri(index.txns[i][0].name))).timeline
                    break
                except Exception:  # noqa: BLE001 - a damaged file is reported elsewhere
                    continue
        if not timeline and index.checkpoints:
            try:
                cid = max(index.checkpoints)
                timeline = self._decode_checkpoint(index.checkpoints[cid][0], self.io.read(self._uri(index.checkpoints[cid][0].name))).timeline
            except Exception:  # noqa: BLE001
                timeline = ""

        def name(i: int) -> str:
            if i == 1:
                return codec.file_name(1, codec.ROOT_UUID, TRANSACTION)
            return codec.file_name(i, codec.txn_uuid(timeline, i), TRANSACTION) if timeline else f"{i:020d}.*.{TRANSACTION}"

        out: list[MissingTransactions] = []
        head = index.head
        first = min(index.txns) if index.txns else head
        if first > 1:
            recorded = [
                m for m, names in index.prunes.items()
                if timeline and any(n.uuid8 == codec.txn_uuid(timeline, m).replace("-", "")[:8] for n in names)
            ]  # fmt: skip
            pruned_to = max(recorded, default=0)
            if first > pruned_to:
                lo = pruned_to if pruned_to else 1
                if lo < first:
                    why = (
                        f"the oldest kept transaction is {first} and no prune recorded deleting them"
                        if not pruned_to
                        else f"the last prune deleted up to before {pruned_to}, but the oldest kept transaction is {first}"
                    )
                    out.append(MissingTransactions(lo, first - 1, name(lo), why))
        gap: list[int] = [i for i in range(first, head + 1) if i not in index.txns]
        runs: list[list[int]] = []
        for i in gap:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        for r in runs:
            after = [i for i in index.txns if i > r[-1]]
            if after:
                why = f"the log goes on to {max(index.txns)}"
            else:
                why = f"checkpoint {head} records the state after transaction {head}"
            out.append(MissingTransactions(r[0], r[-1], name(r[0]), why))
        return out

    def verify(self) -> dict[str, int]:
        """Check the whole catalog: the chain of every transaction, every checkpoint against the
        state its transactions build, and that no transaction is missing (:meth:`missing_transactions`).
        Raises CatalogCorruptError on the first problem."""
        missing = self.missing_transactions()
        if missing:
            m = missing[0]
            raise CatalogCorruptError(m.message(self.table), uri=self._uri(m.file))
        history = self.history()
        index = self._full_index()
        if not history:
            return {"transactions": 0, "checkpoints": len(index.checkpoints), "checkpoints_checked": 0}
        first = history[0].id
        checkpoints = {}
        for cid, names in index.checkpoints.items():
            for n in names:
                checkpoints.setdefault(cid, []).append((n, self._decode_checkpoint(n, self.io.read_many([self._uri(n.name)])[0])))
        if first == 1:
            state = CatalogState(table=self.table)
        else:
            # after a prune (possibly interrupted): replay from the oldest checkpoint at or after the
            # state the oldest kept transaction builds on; transactions before it are checked as a chain only
            usable = sorted(c for c in checkpoints if c >= first - 1)
            if not usable:
                raise self._corrupt(
                    self._missing_checkpoint_name(index, first), "no checkpoint holds the state the oldest kept transaction builds on"
                )
            state = checkpoints[usable[0]][0][1]
        checked = 0
        for info in history:
            if info.id <= state.txn_id:
                if info.id == state.txn_id:
                    for n, cp in checkpoints.get(info.id, ()):
                        if cp != state:
                            raise self._corrupt(n.name, "checkpoint differs from the state its transactions build")
                        checked += 1
                continue
            if info.id > state.txn_id:
                rec = self._records[info.id]
                state = self._apply(info.uri.rsplit("/", 1)[-1], state, rec)
            for n, cp in checkpoints.get(info.id, ()):
                if cp != state:
                    raise self._corrupt(n.name, "checkpoint differs from the state its transactions build")
                checked += 1
        return {"transactions": len(history), "checkpoints": len(index.checkpoints), "checkpoints_checked": checked}


# --------------------------------------------------------------------------- transactions


class TransactionBuilder:
    """The actions of one transaction; every action is checked against the state as it is built."""

    def __init__(self, catalog: Catalog, base: CatalogState, job_id: str, snapshot: str) -> None:
        if not job_id:
            raise InvalidArgumentError("a transaction needs a job id")
        self.catalog = catalog
        self.base = base
        self.job_id = job_id
        self.snapshot = snapshot
        self.actions: list[Action] = []
        self._entries = dict(base.entries)
        self._table = [base.table_statistics]
        self._version = [base.format_version]
        self._done = False
        if base.format_version == 0:  # a new catalog starts with its format version
            self._add(Upgrade(FORMAT_VERSION))

    @property
    def txn_id(self) -> int:
        return self.base.txn_id + 1

    def _add(self, action: Action) -> TransactionBuilder:
        if self._done:
            raise InvalidArgumentError("this transaction was already committed")
        try:
            apply_action(self._entries, self._table, self._version, action, self.txn_id)
        except ActionError as exc:
            raise InvalidArgumentError(f"table {self.catalog.table!r}: {exc}") from None
        self.actions.append(action)
        return self

    def add(self, action: Action) -> TransactionBuilder:
        return self._add(action)

    def add_partition(
        self,
        key: str,
        files: StatisticsFiles | Mapping[str, Any],
        row_count: int,
        *,
        snapshot_id: str | None = None,
        schema_fingerprint: str = "",
        job_id: str | None = None,
        data_fingerprint: str = "",
    ) -> TransactionBuilder:
        if row_count < 0:
            raise InvalidArgumentError("row_count must be >= 0")
        return self._add(
            AddPartition(
                key=key,
                files=as_files(files),
                row_count=int(row_count),
                snapshot_id=self.snapshot if snapshot_id is None else snapshot_id,
                schema_fingerprint=schema_fingerprint,
                job_id=self.job_id if job_id is None else job_id,
                data_fingerprint=data_fingerprint,
            )
        )

    def remove_partition(self, key: str) -> TransactionBuilder:
        return self._add(RemovePartition(key))

    def tombstone_partition(self, key: str) -> TransactionBuilder:
        return self._add(TombstonePartition(key))

    def set_table_statistics(
        self,
        files: StatisticsFiles | Mapping[str, Any],
        row_count: int,
        *,
        snapshot_id: str | None = None,
        schema_fingerprint: str = "",
        job_id: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> TransactionBuilder:
        props = dict(properties or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
            raise InvalidArgumentError("table statistics properties map strings to strings (JSON-encode values)")
        return self._add(
            SetTableStatistics(
                files=as_files(files),
                snapshot_id=self.snapshot if snapshot_id is None else snapshot_id,
                row_count=int(row_count),
                schema_fingerprint=schema_fingerprint,
                job_id=self.job_id if job_id is None else job_id,
                properties=props,
            )
        )

    def upgrade(self, format_version: int) -> TransactionBuilder:
        return self._add(Upgrade(int(format_version)))

    def commit(self) -> CommitInfo:
        """Write the transaction with create-if-absent; CommitConflictError if its id is taken."""
        if self._done:
            raise InvalidArgumentError("this transaction was already committed")
        cat, base = self.catalog, self.base
        txn_id = base.txn_id + 1
        timeline = base.timeline or codec.new_timeline()
        rec = TransactionRecord(
            id=txn_id,
            uuid=codec.txn_uuid(timeline, txn_id),
            parent_uuid=base.txn_uuid,
            timeline=timeline,
            table=cat.table,
            snapshot_id=self.snapshot,
            timestamp_us=time.time_ns() // 1000,
            job_id=self.job_id,
            commit_token=uuid.uuid4().hex,
            actions=tuple(self.actions),
        )
        new_state = apply(base, rec)
        name = codec.file_name(txn_id, rec.uuid, TRANSACTION)
        uri = cat._uri(name)
        data = codec.encode_transaction(rec)
        try:
            cat.io.create(uri, data)
        except FileExistsError:
            self._done = True
            raise CommitConflictError(
                f"commit conflict on table {cat.table!r}: transaction {txn_id} ({name}) was already committed "
                f"by another writer; refresh the catalog and build the transaction again",
                txn_id=txn_id,
            ) from None
        except Exception as exc:
            outcome = self._outcome(uri, rec.commit_token)
            if outcome == "other":
                self._done = True
                raise CommitConflictError(
                    f"commit conflict on table {cat.table!r}: transaction {txn_id} ({name}) was committed by another writer",
                    txn_id=txn_id,
                ) from exc
            if outcome == "absent":
                raise CommitFailedError(
                    f"commit of transaction {txn_id} on table {cat.table!r} failed, nothing was committed: {type(exc).__name__}: {exc}",
                    txn_id=txn_id,
                ) from exc
            if outcome == "unknown":
                raise CommitFailedError(
                    f"commit of transaction {txn_id} on table {cat.table!r} failed and its outcome is unknown "
                    f"({type(exc).__name__}: {exc}); refresh the catalog to see whether {name} exists",
                    txn_id=txn_id,
                    maybe_committed=True,
                ) from exc
            # "ours": the write went through although the call failed
        self._done = True
        cat._advance(base, new_state, rec, len(data))
        written = False
        if cat._checkpoint_due(new_state):
            try:
                cat._write_checkpoint(new_state, base.txn_uuid)
                written = True
            except FileExistsError:
                pass
            except Exception as exc:  # noqa: BLE001 - a checkpoint is only an optimisation
                cat.checkpoint_failures += 1
                log.warning(
                    "checkpoint %d of table %r not written (%s: %s); readers replay more transactions", txn_id, cat.table, type(exc).__name__, exc
                )
        return CommitInfo(txn_id=txn_id, uuid=rec.uuid, uri=uri, checkpoint_written=written, state=new_state)

    def _outcome(self, uri: str, token: str) -> str:
        """After a failed write: is the transaction file ours, another writer's, absent, or unknown?"""
        try:
            data = self.catalog.io.read(uri)
        except FileNotFoundError:
            return "absent"
        except Exception:  # noqa: BLE001
            return "unknown"
        try:
            return "ours" if codec.decode_transaction(data).commit_token == token else "other"
        except FormatError:
            return "unknown"


def commit_with_retry(
    catalog: Catalog,
    job_id: str,
    snapshot: str,
    build: Any,
    attempts: int = 5,
) -> CommitInfo:
    """Build and commit a transaction, rebuilding it on a newer state after a conflict.

    ``build(txn, state)`` adds the actions to ``txn`` given the current ``state``;
    it is called again after each conflict, once the catalog is refreshed.
    """
    last: Exception | None = None
    for attempt in range(max(1, attempts)):
        if attempt:
            catalog.refresh()
        txn = catalog.begin(job_id, snapshot)
        build(txn, catalog.state())
        try:
            return txn.commit()
        except CommitConflictError as exc:
            last = exc
            time.sleep(min(0.2, 0.005 * 2**attempt))
    assert last is not None
    raise last
