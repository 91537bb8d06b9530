"""One transaction of a table's catalog: its actions, checked as they are added, and its commit.

A commit is one create-if-absent write of the next transaction file
(``catalog/transactions/<20-digit id>.<uuid8>.transaction``, docs/reference/CATALOG.md); a writer
that lost the race gets :class:`~engine.exceptions.CommitConflictError`
(:func:`commit_with_retry` builds the transaction again on the newer state). The log the
transaction is committed to (:class:`engine.catalog.replay.CatalogLog`) is seen through
:class:`CommitTarget`: what a commit needs of it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.catalog import codec
from engine.catalog.codec import TRANSACTION, FormatError
from engine.catalog.io import CatalogIO
from engine.catalog.model import (
    FORMAT_VERSION,
    KINDS,
    Action,
    ActionError,
    AddPartition,
    CatalogState,
    FileRef,
    RemovePartition,
    SetTableStatistics,
    StatisticsFiles,
    TombstonePartition,
    TransactionRecord,
    Upgrade,
    apply,
    apply_action,
)
from engine.exceptions import CommitConflictError, CommitFailedError, InvalidArgumentError
from engine.files import checksum

log = logging.getLogger("engine.catalog")

__all__ = ["CommitInfo", "CommitTarget", "RetryTarget", "TransactionBuilder", "as_files", "commit_with_retry"]


@dataclass(frozen=True)
class CommitInfo:
    txn_id: int
    uuid: str
    uri: str
    checkpoint_written: bool
    state: CatalogState


class CommitTarget(Protocol):
    """What a commit needs of the log it is committed to (a :class:`~engine.catalog.replay.CatalogLog`)."""

    table: str
    io: CatalogIO
    checkpoint_failures: int

    def file_uri(self, name: str) -> str: ...

    def advance(self, base: CatalogState, new: CatalogState, rec: TransactionRecord, size: int) -> None: ...

    def checkpoint_due(self, state: CatalogState) -> bool: ...

    def write_checkpoint_of(self, state: CatalogState, parent_uuid: str) -> None: ...


class RetryTarget(Protocol):
    """What :func:`commit_with_retry` needs of a log: a transaction on its state, and a refresh."""

    def refresh(self, *, fresh: bool = True) -> CatalogState: ...

    def begin(self, job_id: str, snapshot: str) -> TransactionBuilder: ...

    def state(self) -> CatalogState: ...


# --------------------------------------------------------------------------- statistics files


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


# --------------------------------------------------------------------------- transactions


class TransactionBuilder:
    """The actions of one transaction; every action is checked against the state as it is built."""

    def __init__(self, catalog: CommitTarget, base: CatalogState, job_id: str, snapshot: str) -> None:
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
        uri = cat.file_uri(name)
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
        cat.advance(base, new_state, rec, len(data))
        written = False
        if cat.checkpoint_due(new_state):
            try:
                cat.write_checkpoint_of(new_state, base.txn_uuid)
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
    catalog: RetryTarget,
    job_id: str,
    snapshot: str,
    build: Callable[[TransactionBuilder, CatalogState], None],
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
