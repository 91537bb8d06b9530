"""The replay of a table's catalog log: its states, history and time travel, and its commits.

Layout (docs/reference/CATALOG.md)::

    <store>/<table>/runs/<job_id>/...                                       statistics files (immutable)
    <store>/<table>/catalog/transactions/<20-digit id>.<uuid8>.transaction  one per commit
    <store>/<table>/catalog/transactions/<20-digit id>.<uuid8>.checkpoint   full state, every N commits

A commit is one create-if-absent write of the next transaction file
(engine/catalog/transaction.py); readers list ``transactions/`` once, read the newest
checkpoint and replay the transactions after it (:class:`CatalogLog`).
"""

from __future__ import annotations

import bisect
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Self, overload

from engine import fileio
from engine.catalog import codec
from engine.catalog.codec import CHECKPOINT, TRANSACTION, FormatError, Name
from engine.catalog.io import CatalogIO, io_for
from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL, TRANSACTIONS_DIR, LogIndex, check_table
from engine.catalog.model import (
    FORMAT_VERSION,
    Action,
    ActionError,
    CatalogState,
    TransactionRecord,
    apply,
)
from engine.catalog.paths import CATALOG_DIR
from engine.exceptions import (
    CatalogCorruptError,
    InvalidArgumentError,
    StatisticsExpiredError,
    StatisticsNotFoundError,
    UnsupportedCatalogVersionError,
)

if TYPE_CHECKING:  # a reader replays the log: the writers' builder and the expiry records load when used
    from engine.catalog.transaction import TransactionBuilder

#: A checkpoint is also written once the transactions since the last one add up to the state's
#: own size (estimated from the last checkpoint's bytes per entry), but never for less than
#: this: opening then reads a checkpoint and at most about as many bytes of transactions again,
#: whatever the table's history (with the count rule alone, a table of many partitions replayed
#: up to 99 full transactions at every open: docs/PERFORMANCE.md, "Scaling").
CHECKPOINT_MIN_BYTES = 1 << 20
_ENTRY_BYTES_GUESS = 400  # a partition's bytes in a checkpoint before one was read or written (measured ~383)

__all__ = ["CHECKPOINT_MIN_BYTES", "CatalogLog", "TransactionHeader", "TransactionInfo"]


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
    def timestamp(self) -> datetime:
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


class CatalogLog:
    """The log of one table's catalog: its states, read by replaying its files, and its commits.
    Open it with :meth:`open`; the state is cached and moved on by :meth:`refresh` (one LIST,
    then only the new transactions) and by commits. Maintenance (engine/catalog/maintenance.py,
    engine/catalog/gc.py) and verification (engine/catalog/verification.py) work on it through
    its public methods; :class:`engine.catalog.catalog.Catalog` gathers them all."""

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
        self.table = check_table(table)
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
    ) -> Self:
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

    def file_uri(self, name: str) -> str:
        return fileio.join(self.transactions_uri, name)

    def corrupt_error(self, name: str, why: str) -> CatalogCorruptError:
        uri = self.file_uri(name)
        return CatalogCorruptError(f"catalog of table {self.table!r}: {uri}: {why}", uri=uri)

    # ------------------------------------------------------------------ reading files

    def decode_checkpoint(self, n: Name, data: bytes | BaseException) -> CatalogState:
        st = self._checked_checkpoint(n, data, full=True)
        assert isinstance(st, CatalogState)
        return st

    def check_checkpoint(self, n: Name, data: bytes | BaseException) -> codec.CheckpointHeader:
        """:meth:`decode_checkpoint`'s checks without building the state (the whole message is parsed)."""
        head = self._checked_checkpoint(n, data, full=False)
        assert isinstance(head, codec.CheckpointHeader)
        return head

    def _checked_checkpoint(self, n: Name, data: bytes | BaseException, full: bool) -> CatalogState | codec.CheckpointHeader:
        if isinstance(data, FileNotFoundError):
            raise self.corrupt_error(n.name, "checkpoint file missing (listed, then gone)")
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
            raise self.corrupt_error(n.name, f"damaged checkpoint: {exc}") from None
        if head.format_version > FORMAT_VERSION or head.state_format_version > FORMAT_VERSION:
            raise UnsupportedCatalogVersionError(
                f"{self.file_uri(n.name)}: catalog format version {max(head.format_version, head.state_format_version)}; "
                f"this Metastore reads up to {FORMAT_VERSION}"
            )
        if (
            head.txn_id != n.txn_id
            or head.txn_uuid != codec.txn_uuid(head.timeline, head.txn_id)
            or not head.txn_uuid.replace("-", "").startswith(n.uuid8)
        ):
            raise self.corrupt_error(n.name, f"checkpoint content (transaction {head.txn_id}, uuid {head.txn_uuid}) does not match its name")
        self._checkpoint_sizes[head.txn_id] = (len(data), head.entries)
        return st if st is not None else head

    def read_record(self, name: str, data: bytes | BaseException) -> TransactionRecord:
        """A transaction file's record, or a CatalogCorruptError naming the file (a read's error is re-raised)."""
        return self._read_transaction(name, data, full=True)

    @overload
    def _read_transaction(self, name: str, data: bytes | BaseException, full: Literal[True]) -> TransactionRecord: ...

    @overload
    def _read_transaction(self, name: str, data: bytes | BaseException, full: Literal[False]) -> codec.Header: ...

    def _read_transaction(self, name: str, data: bytes | BaseException, full: bool) -> TransactionRecord | codec.Header:
        """The record (``full``) or the header of a transaction file, or a CatalogCorruptError naming it."""
        if isinstance(data, FileNotFoundError):
            raise self.corrupt_error(name, "transaction file missing (listed, then gone)")
        if isinstance(data, BaseException):
            raise data
        try:
            return codec.decode_transaction(data) if full else codec.decode_header(data)
        except FormatError as exc:
            raise self.corrupt_error(name, f"damaged transaction: {exc}") from None

    def _decode_txn(self, name: str, data: bytes | BaseException, state: CatalogState) -> TransactionRecord:
        """Decode and check transaction ``state.txn_id + 1`` against the state before it."""
        rec = self.read_record(name, data)
        if rec.format_version > FORMAT_VERSION:
            raise UnsupportedCatalogVersionError(
                f"{self.file_uri(name)}: catalog format version {rec.format_version}; this Metastore reads up to {FORMAT_VERSION}"
            )
        txn_id = state.txn_id + 1
        if txn_id == 1:
            try:
                uuid.UUID(rec.timeline)
            except ValueError:
                raise self.corrupt_error(name, f"invalid timeline {rec.timeline!r}") from None
            timeline, parent = rec.timeline, ""
        else:
            timeline, parent = state.timeline, state.txn_uuid
        if rec.id != txn_id or rec.uuid != codec.txn_uuid(timeline, txn_id) or rec.timeline != timeline:
            raise self.corrupt_error(name, f"content (transaction {rec.id}, uuid {rec.uuid}) does not continue the log at transaction {txn_id}")
        if rec.parent_uuid != parent:
            raise self.corrupt_error(name, f"parent uuid {rec.parent_uuid!r} is not the uuid of transaction {txn_id - 1} ({parent!r})")
        return rec

    def apply_record(self, name: str, state: CatalogState, rec: TransactionRecord) -> CatalogState:
        try:
            return apply(state, rec)
        except ActionError as exc:
            raise self.corrupt_error(name, f"does not apply to the state before it: {exc}") from None

    def _replay(
        self, state: CatalogState, index: LogIndex, goal: int, up_to_last_good: bool
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
            return exc.state, exc  # type: ignore[union-attr]  # set by _replay_range: the last good state rides on the error

    def _replay_range(self, state: CatalogState, index: LogIndex, first: int, last: int) -> CatalogState:
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
                    problem = self.corrupt_error(expected, f"transaction {txn_id} is missing (the log goes on to {index.head})")
                elif expected in present:
                    others = ", ".join(p for p in present if p != expected)
                    problem = self.corrupt_error(
                        others, f"a second transaction {txn_id} (fork: written by a writer that was not on this log; the log's is {expected})"
                    )
                else:
                    problem = self.corrupt_error(
                        present[0], f"transaction {txn_id} does not belong to this log (expected {expected}: a fork or a foreign file)"
                    )
                break
            datas = self.io.read_many([self.file_uri(n) for n in names]) if names else []
            for name, data in zip(names, datas):
                try:
                    rec = self._decode_txn(name, data, state)
                    state = self.apply_record(name, state, rec)
                    self._headers[rec.id] = codec.header_of(rec, len(data))  # type: ignore[arg-type]  # data is bytes here: _decode_txn raised a read error
                except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
                    exc.state = state  # type: ignore[union-attr]  # the last good state, for _replay's up_to_last_good
                    raise
            if problem is not None:
                problem.state = state  # type: ignore[attr-defined]  # the last good state rides on the error (_replay)
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
            index = LogIndex.tail(names) if self.use_checkpoints else LogIndex(names)
            index.complete = False  # only the names after the known head
        else:
            all_names = names if names is not None else io.list_names(self.transactions_uri)
            names = all_names
            if target is not None:  # names sort by id: only those up to the target matter
                cut = bisect.bisect_right(all_names, codec.after_id(target))
                names = all_names[:cut]
                later_checkpoint = any(n.endswith(CHECKPOINT) for n in all_names[cut:])
                listed_head = LogIndex.last_id(all_names)
            index = LogIndex.tail(names) if (self.use_checkpoints and not full) else LogIndex(names)
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
                    state = self.decode_checkpoint(base, io.read_many([self.file_uri(base.name)])[0])
                    if known is not None and state.timeline != known.timeline:
                        raise self.corrupt_error(base.name, "checkpoint of another log (timeline differs)")
                except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
                    if not up_to_last_good:
                        raise
                    problems.append(exc)  # type: ignore[arg-type]  # a version error is reported with the corrupt files
                    continue
            state, problem = self._replay(state, index, goal, up_to_last_good)
            if problem is not None:
                problems.append(problem)  # type: ignore[arg-type]  # a version error is reported with the corrupt files
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
            missing = self.missing_checkpoint_name(index, oldest)
            error = self.corrupt_error(
                missing,
                f"checkpoint missing or unreadable: the transaction files start at {oldest} "
                f"(history before them was pruned) and no readable checkpoint holds the state they build on",
            )
            if problems:
                raise error from problems[-1]
            raise error
        state, problem = self._replay(CatalogState(table=self.table), index, goal, up_to_last_good)
        if problem is not None:
            problems.append(problem)  # type: ignore[arg-type]  # a version error is reported with the corrupt files
        if state.txn_id == 0 and problems:
            raise problems[-1]
        return state, problems

    def missing_checkpoint_name(self, index: LogIndex, oldest: int | None) -> str:
        if oldest is None:
            return "<no transaction files>"
        try:
            rec = codec.decode_transaction(self.io.read(self.file_uri(index.txns[oldest][0].name)))
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
        from engine.catalog.transaction import TransactionBuilder

        return TransactionBuilder(self, self._state, job_id, snapshot)

    def advance(self, base: CatalogState, new: CatalogState, rec: TransactionRecord, size: int) -> None:
        with self._lock:
            self._records[rec.id] = rec
            self._headers[rec.id] = codec.header_of(rec, size)
            if self._state.txn_id == base.txn_id and self._state.txn_uuid == base.txn_uuid:
                self._state = new

    def write_checkpoint_of(self, state: CatalogState, parent_uuid: str) -> None:
        name = codec.file_name(state.txn_id, state.txn_uuid, CHECKPOINT)
        data = codec.encode_checkpoint(state, parent_uuid, FORMAT_VERSION)
        self.io.create(self.file_uri(name), data)
        self._checkpoint_sizes[state.txn_id] = (len(data), len(state.entries))

    def checkpoint_due(self, state: CatalogState) -> bool:
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
            self.write_checkpoint_of(st, parent)
        except FileExistsError:
            return None
        return codec.file_name(st.txn_id, st.txn_uuid, CHECKPOINT)

    # ------------------------------------------------------------------ caches (maintenance)

    def cached_record(self, txn_id: int) -> TransactionRecord | None:
        """Transaction ``txn_id``'s record if this catalog has decoded it (no I/O)."""
        return self._records.get(txn_id)

    def remember_header(self, txn_id: int, header: codec.Header) -> None:
        """Keep a header read elsewhere (a header already known stays)."""
        self._headers.setdefault(txn_id, header)

    def forget_before(self, txn_id: int) -> None:
        """Drop what is cached of the transactions and checkpoints before ``txn_id`` (pruned)."""
        with self._lock:
            for cache in (self._records, self._headers, self._checkpoint_sizes):
                for i in [i for i in cache if i < txn_id]:
                    del cache[i]

    # ------------------------------------------------------------------ history and time travel

    def full_index(self) -> LogIndex:
        return LogIndex(self.io.list_names(self.transactions_uri))

    def transaction_ids(self) -> list[int]:
        """The ids of the transaction files in the catalog, oldest first: one listing, no file
        read and no check (:meth:`headers` checks the chain). What a count-only retention
        rule needs."""
        return self.log_ids()[0]

    def log_ids(self) -> tuple[list[int], list[int]]:
        """(the transaction ids, the checkpoint ids), oldest first, from one listing (unchecked)."""
        index = self.full_index()
        return sorted(index.txns), sorted(index.checkpoints)

    def _decoded_for(self, index: LogIndex, ids: Sequence[int], full: bool) -> dict[int, Any]:
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
        datas = self.io.read_many([self.file_uri(n) for _, n in todo])
        for (i, name), data in zip(todo, datas):
            got = self.read_record(name, data) if full else self._read_header(name, data)
            if got.id != i:
                raise self.corrupt_error(name, f"content is transaction {got.id}")
            out[i] = got
            if full:
                self._headers[i] = codec.header_of(got, len(data))  # type: ignore[arg-type]  # data is bytes here: read_record raised a read error
        if not full:
            with self._lock:
                self._headers.update(out)
        return out

    def records_for(self, index: LogIndex, ids: Sequence[int]) -> dict[int, TransactionRecord]:
        """Decode transactions by id (cached); checks each file's own consistency only."""
        return self._decoded_for(index, ids, full=True)

    def _read_header(self, name: str, data: bytes | BaseException) -> codec.Header:
        """:meth:`read_record` without the actions."""
        return self._read_transaction(name, data, full=False)

    def _headers_for(self, index: LogIndex, ids: Sequence[int]) -> dict[int, codec.Header]:
        """Transactions' headers by id (cached; the open's replay and commits fill the cache):
        the file is read and checked as by :meth:`records_for`, its actions are not built."""
        return self._decoded_for(index, ids, full=False)

    def _chain(self, index: LogIndex, first: int, last: int, heads: Mapping[int, Any]) -> list[str]:
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
                raise self.corrupt_error(expected or f"{i:020d}.*.{TRANSACTION}", f"transaction {i} is missing (history goes from {first} to {last})")
            if len(names) > 1 or names[0] != expected:
                bad = [n for n in names if n != expected] or names
                raise self.corrupt_error(bad[0], f"transaction {i} does not belong to this log (expected {expected}): a fork or a foreign file")
            rec = heads[i]
            if rec.uuid != codec.txn_uuid(timeline, i) or rec.parent_uuid != prev_uuid or rec.timeline != timeline:
                raise self.corrupt_error(names[0], f"does not continue the log (uuid {rec.uuid}, parent {rec.parent_uuid})")
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
        index = self.full_index()
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
                    "uri": self.file_uri(name),
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
            from engine.catalog import retention_records

            record = retention_records.expiry_of(self, txn_id)
            if record is not None:  # say when and by what, not only that it is gone
                raise retention_records.expired_error(self, txn_id, record) from None
            raise
        return state

    def state_at_snapshot(self, snapshot_id: str) -> CatalogState:
        """The state after the newest transaction that describes table snapshot ``snapshot_id``."""
        st = self._state
        if not st.empty and st.snapshot_id == snapshot_id:
            return st
        names = self.io.list_names(self.transactions_uri)
        index = LogIndex(names)
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
        from engine.catalog import retention_records

        record = retention_records.expiry_of(self, first - 1) if first > 1 else None
        if record is not None:
            raise StatisticsExpiredError(
                f"no kept transaction of table {self.table!r} describes snapshot {snapshot_id!r} (searched {first}..{last}); "
                f"the states before transaction {first} were expired (the last time on {record.expired_at[:19].replace('T', ' ')} UTC by {record.by})"
            )
        pruned = f"; the history before transaction {first} was pruned" if first > 1 else ""
        raise StatisticsNotFoundError(
            f"no transaction of table {self.table!r} describes snapshot {snapshot_id!r} (searched transactions {first}..{last}{pruned})"
        )
