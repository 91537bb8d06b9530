"""File names, framing and Protocol Buffers encoding of transactions and checkpoints.

Names: ``<20-digit zero-padded id>.<first 8 hex digits of the uuid>.transaction``
and ``... .checkpoint``. Zero padding makes the lexicographic order of a listing
the numeric order, so the newest checkpoint and the transactions after it are
at the end of a sorted listing.

Uuids are *derived*, not drawn: transaction 1 has a fixed uuid and draws the
log's random ``timeline``; transaction ``n > 1`` has ``uuid5(timeline, n)``.
Every writer that wants id ``n`` of a log therefore computes the same file name,
and create-if-absent on that name lets exactly one of them win. (A random uuid
per writer would give two writers two names, and both creates would succeed.)
A file whose uuid does not follow from the log's timeline belongs to another
log (a fork, a copy): readers refuse it with :class:`CatalogCorruptError`.

Frame (so that a damaged or truncated file is detected, never half-read)::

    b"MSCATLG1" | payload length (8 bytes, little endian) | payload | CRC-32 of payload (4 bytes, little endian)
"""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from engine.catalog import catalog_pb2 as pb
from engine.catalog.model import (
    Action,
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

MAGIC = b"MSCATLG1"
_HEADER = struct.Struct("<8sQ")
_TRAILER = struct.Struct("<I")

TRANSACTION = "transaction"
CHECKPOINT = "checkpoint"
#: a prune's record: ``<checkpoint id>.<its uuid8>.pruned`` (empty frame), written before the prune
#: deletes anything, so that transactions missing before that checkpoint are told from damage
PRUNED = "pruned"

#: namespace of the fixed uuid of transaction 1
_ROOT_NAMESPACE = uuid.UUID("6d657461-7374-6f72-6563-6174616c6f67")  # "metastorecatalog"
ROOT_UUID = str(uuid.uuid5(_ROOT_NAMESPACE, "metastore.catalog.v1/transaction/1"))

_NAME = re.compile(r"(\d{20})\.([0-9a-f]{8})\.(transaction|checkpoint|pruned)")


class FormatError(ValueError):
    """A file is not a valid frame or message (the caller names the file)."""


def new_timeline() -> str:
    return str(uuid.uuid4())


def txn_uuid(timeline: str, txn_id: int) -> str:
    """The uuid of transaction ``txn_id`` in the log with ``timeline``."""
    if txn_id == 1:
        return ROOT_UUID
    return str(uuid.uuid5(uuid.UUID(timeline), str(txn_id)))


def file_name(txn_id: int, uuid_: str, kind: str) -> str:
    return f"{txn_id:020d}.{uuid_.replace('-', '')[:8]}.{kind}"


@dataclass(frozen=True, order=True)
class Name:
    txn_id: int
    uuid8: str
    kind: str  # TRANSACTION, CHECKPOINT or PRUNED
    name: str


def parse_name(name: str) -> Name | None:
    """A catalog file name, or None for anything else (temporary files, strays)."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return Name(int(m.group(1)), m.group(2), m.group(3), name)


def after_id(txn_id: int) -> str:
    """A string that sorts after every name of ``txn_id`` and before every name of ``txn_id + 1``."""
    return f"{txn_id:020d}.~"


# --------------------------------------------------------------------------- frame


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, len(payload)) + payload + _TRAILER.pack(zlib.crc32(payload))


def unframe(data: bytes) -> bytes:
    if len(data) < _HEADER.size + _TRAILER.size:
        raise FormatError(f"truncated ({len(data)} bytes)")
    magic, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FormatError("not a catalog file (bad magic bytes)")
    if len(data) != _HEADER.size + length + _TRAILER.size:
        raise FormatError(f"truncated or extended: {len(data)} bytes, the header announces {_HEADER.size + length + _TRAILER.size}")
    payload = data[_HEADER.size : _HEADER.size + length]
    (crc,) = _TRAILER.unpack_from(data, _HEADER.size + length)
    if zlib.crc32(payload) != crc:
        raise FormatError("checksum mismatch (damaged content)")
    return payload


# --------------------------------------------------------------------------- messages <-> values


def _files_to_pb(files: StatisticsFiles, out: pb.StatisticsFiles) -> None:
    for kind, ref in (("statistics", files.statistics), ("frequencies", files.frequencies), ("histograms", files.histograms)):
        target = getattr(out, kind)
        target.path = ref.path
        target.size = ref.size
        target.checksum = ref.checksum


def _files_from_pb(msg: pb.StatisticsFiles) -> StatisticsFiles:
    return StatisticsFiles(
        FileRef(msg.statistics.path, msg.statistics.size, msg.statistics.checksum),
        FileRef(msg.frequencies.path, msg.frequencies.size, msg.frequencies.checksum),
        FileRef(msg.histograms.path, msg.histograms.size, msg.histograms.checksum),
    )


def _add_to_pb(a: AddPartition | PartitionEntry, out: pb.AddPartition) -> None:
    out.key = a.key
    _files_to_pb(a.files, out.files)
    out.row_count = a.row_count
    out.snapshot_id = a.snapshot_id
    out.schema_fingerprint = a.schema_fingerprint
    out.job_id = a.job_id
    out.data_fingerprint = a.data_fingerprint


def _table_to_pb(t: SetTableStatistics | TableEntry, out: pb.SetTableStatistics) -> None:
    _files_to_pb(t.files, out.files)
    out.snapshot_id = t.snapshot_id
    out.row_count = t.row_count
    out.schema_fingerprint = t.schema_fingerprint
    out.job_id = t.job_id
    for k, v in t.properties.items():
        out.properties[k] = v


def _table_fields(msg: pb.SetTableStatistics) -> dict[str, Any]:
    return dict(
        files=_files_from_pb(msg.files),
        snapshot_id=msg.snapshot_id,
        row_count=msg.row_count,
        schema_fingerprint=msg.schema_fingerprint,
        job_id=msg.job_id,
        properties=dict(msg.properties),
    )


def _action_to_pb(action: Action, out: pb.Action) -> None:
    if isinstance(action, AddPartition):
        _add_to_pb(action, out.add_partition)
    elif isinstance(action, RemovePartition):
        out.remove_partition.key = action.key
    elif isinstance(action, TombstonePartition):
        out.tombstone_partition.key = action.key
    elif isinstance(action, SetTableStatistics):
        _table_to_pb(action, out.set_table_statistics)
    elif isinstance(action, Upgrade):
        out.upgrade.format_version = action.format_version
    else:
        raise TypeError(f"not a catalog action: {action!r}")


def _action_from_pb(msg: pb.Action) -> Action:
    which = msg.WhichOneof("action")
    if which == "add_partition":
        a = msg.add_partition
        return AddPartition(
            key=a.key,
            files=_files_from_pb(a.files),
            row_count=a.row_count,
            snapshot_id=a.snapshot_id,
            schema_fingerprint=a.schema_fingerprint,
            job_id=a.job_id,
            data_fingerprint=a.data_fingerprint,
        )
    if which == "remove_partition":
        return RemovePartition(msg.remove_partition.key)
    if which == "tombstone_partition":
        return TombstonePartition(msg.tombstone_partition.key)
    if which == "set_table_statistics":
        return SetTableStatistics(**_table_fields(msg.set_table_statistics))
    if which == "upgrade":
        return Upgrade(msg.upgrade.format_version)
    raise FormatError("an action of an unknown kind (written by a newer Metastore?)")


def encode_transaction(txn: TransactionRecord) -> bytes:
    msg = pb.Transaction(
        format_version=txn.format_version,
        id=txn.id,
        uuid=txn.uuid,
        parent_uuid=txn.parent_uuid,
        timeline=txn.timeline,
        table=txn.table,
        snapshot_id=txn.snapshot_id,
        timestamp_us=txn.timestamp_us,
        job_id=txn.job_id,
        commit_token=txn.commit_token,
    )
    for action in txn.actions:
        _action_to_pb(action, msg.actions.add())
    return frame(msg.SerializeToString(deterministic=True))


def decode_transaction(data: bytes) -> TransactionRecord:
    msg = pb.Transaction()
    try:
        msg.ParseFromString(unframe(data))
    except DecodeError as exc:
        raise FormatError(f"not a Transaction message ({exc})") from None
    return TransactionRecord(
        id=msg.id,
        uuid=msg.uuid,
        parent_uuid=msg.parent_uuid,
        timeline=msg.timeline,
        table=msg.table,
        snapshot_id=msg.snapshot_id,
        timestamp_us=msg.timestamp_us,
        job_id=msg.job_id,
        commit_token=msg.commit_token,
        actions=tuple(_action_from_pb(a) for a in msg.actions),
        format_version=msg.format_version,
    )


@dataclass(frozen=True)
class Header:
    """A transaction's header: every field but the actions, and the file's size in bytes.

    History and retention need only these (ids, uuids, timestamps, snapshot ids); reading
    them costs a parse of the header fields (:func:`decode_header`), not the building of
    one action object per partition (:func:`decode_transaction`), which is what made a
    retention pass over the kept transactions grow with their partitions."""

    id: int
    uuid: str
    parent_uuid: str
    timeline: str
    snapshot_id: str
    timestamp_us: int
    job_id: str
    commit_token: str
    format_version: int
    size: int  # bytes of the transaction file (checkpoint policy: bytes since the last checkpoint)


def header_of(rec: TransactionRecord, size: int) -> Header:
    """The header of a record already decoded (or just written) whose file is ``size`` bytes."""
    return Header(
        rec.id, rec.uuid, rec.parent_uuid, rec.timeline, rec.snapshot_id, rec.timestamp_us, rec.job_id, rec.commit_token, rec.format_version, size
    )


def decode_header(data: bytes) -> Header:
    """The header of a transaction file without its actions (the frame and its CRC checked as
    by :func:`decode_transaction`: a damaged file is refused the same way)."""
    msg = pb.TransactionHeader()
    try:
        msg.ParseFromString(unframe(data))  # the actions (field 11) stay unparsed bytes
    except DecodeError as exc:
        raise FormatError(f"not a Transaction message ({exc})") from None
    return _header(msg, len(data))


def _header(msg: pb.Transaction | pb.TransactionHeader, size: int) -> Header:
    """The header fields of a parsed Transaction or TransactionHeader message."""
    return Header(
        msg.id, msg.uuid, msg.parent_uuid, msg.timeline, msg.snapshot_id, msg.timestamp_us, msg.job_id, msg.commit_token, msg.format_version, size
    )


def decode_paths(data: bytes) -> tuple[Header, set[str], list[dict[str, str]]]:
    """A transaction's header, the statistics file paths its actions name, and the properties of
    its SetTableStatistics actions (they may name more files), read from the parsed message
    without building the actions (gc needs only the paths: ~5x cheaper than decode_transaction)."""
    msg = pb.Transaction()
    try:
        msg.ParseFromString(unframe(data))
    except DecodeError as exc:
        raise FormatError(f"not a Transaction message ({exc})") from None
    paths: set[str] = set()
    properties: list[dict[str, str]] = []
    add = paths.add
    for a in msg.actions:
        which = a.WhichOneof("action")
        if which == "add_partition":
            files = a.add_partition.files
        elif which == "set_table_statistics":
            files = a.set_table_statistics.files
            properties.append(dict(a.set_table_statistics.properties))
        elif which is None:
            raise FormatError("an action of an unknown kind (written by a newer Metastore?)")
        else:
            continue
        add(files.statistics.path)
        add(files.frequencies.path)
        add(files.histograms.path)
    header = _header(msg, len(data))
    return header, paths, properties


def encode_checkpoint(state: CatalogState, parent_uuid: str, format_version: int) -> bytes:
    msg = pb.Checkpoint(
        format_version=format_version,
        id=state.txn_id,
        uuid=state.txn_uuid,
        parent_uuid=parent_uuid,
        timeline=state.timeline,
        table=state.table,
        snapshot_id=state.snapshot_id,
        timestamp_us=state.timestamp_us,
        job_id=state.job_id,
        state_format_version=state.format_version,
    )
    for entry in state.entries.values():
        p = msg.partitions.add()
        _add_to_pb(entry, p.partition)
        p.tombstoned = entry.tombstoned
        p.added_in = entry.added_in
    if state.table_statistics is not None:
        msg.has_table_statistics = True
        _table_to_pb(state.table_statistics, msg.table_statistics)
    return frame(msg.SerializeToString(deterministic=True))


@dataclass(frozen=True)
class CheckpointRecord:
    state: CatalogState
    parent_uuid: str
    format_version: int


@dataclass(frozen=True)
class CheckpointHeader:
    """What :func:`check_checkpoint` reads of a checkpoint: its identity and format versions."""

    txn_id: int
    txn_uuid: str
    timeline: str
    format_version: int
    state_format_version: int
    entries: int


def check_checkpoint(data: bytes) -> CheckpointHeader:
    """Check a checkpoint file as :func:`decode_checkpoint` does (frame, CRC, the whole message
    parsed, nested messages included) without building its entries: ~30x cheaper, what a
    prune needs to trust the checkpoint it keeps."""
    msg = pb.Checkpoint()
    try:
        msg.ParseFromString(unframe(data))
    except DecodeError as exc:
        raise FormatError(f"not a Checkpoint message ({exc})") from None
    return CheckpointHeader(msg.id, msg.uuid, msg.timeline, msg.format_version, msg.state_format_version, len(msg.partitions))


def decode_checkpoint(data: bytes, table: str) -> CheckpointRecord:
    msg = pb.Checkpoint()
    try:
        msg.ParseFromString(unframe(data))
    except DecodeError as exc:
        raise FormatError(f"not a Checkpoint message ({exc})") from None
    entries = {}
    for p in msg.partitions:
        a = p.partition
        entries[a.key] = PartitionEntry(
            key=a.key,
            files=_files_from_pb(a.files),
            row_count=a.row_count,
            snapshot_id=a.snapshot_id,
            schema_fingerprint=a.schema_fingerprint,
            job_id=a.job_id,
            data_fingerprint=a.data_fingerprint,
            tombstoned=p.tombstoned,
            added_in=p.added_in,
        )
    ts = TableEntry(**_table_fields(msg.table_statistics)) if msg.has_table_statistics else None
    state = CatalogState(
        table=table,
        txn_id=msg.id,
        txn_uuid=msg.uuid,
        timeline=msg.timeline,
        snapshot_id=msg.snapshot_id,
        job_id=msg.job_id,
        timestamp_us=msg.timestamp_us,
        format_version=msg.state_format_version,
        entries=entries,
        table_statistics=ts,
    )
    return CheckpointRecord(state=state, parent_uuid=msg.parent_uuid, format_version=msg.format_version)
