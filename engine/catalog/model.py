"""The catalog's state and actions as plain Python values, and how actions apply.

A state is what one transaction leaves: the partitions with their statistics
files (live or tombstoned), the table-level files, the snapshot the state
describes and the format version. Transactions are pure functions of the state
before them: :func:`apply` is the only place where actions take effect, for
writers (validating a transaction before committing it) and for readers
(replaying the log) alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Union

from engine.files import layout

#: the newest catalog format version this code reads and writes
FORMAT_VERSION = 1

KINDS = ("statistics", "frequencies", "histograms")
#: the table property naming the per-file column index's files (engine/fileindex)
FILE_INDEX_PROPERTY = "file_index"
#: the table property naming the older segments of the table's frequencies (docs/FORMAT.md,
#: "Segments"): a JSON list of ``{"path", "size", "checksum"}``, oldest (the base) first; the
#: triple's frequencies file is the newest segment. Absent or ``[]``: one segment
FREQUENCY_SEGMENTS_PROPERTY = "frequency_segments"
#: the job's own state of a table reduced in full (its exact value counts, the base of append
#: re-analyzes): JSON ``{"files": [{"path", "size", "checksum", "columns"}], ...}``; readers ignore
#: it, gc keeps its files
TABLE_COUNTS_PROPERTY = "table_counts"
FILE_NAMES = dict(zip(KINDS, layout.FILES))  # kind -> file name


@dataclass(frozen=True)
class FileRef:
    """A statistics file: path relative to the table's directory in the store, size in bytes,
    and the content checksum taken when it was written (engine/files/checksum.py; "": none
    recorded, not checked)."""

    path: str
    size: int
    checksum: str = ""


def _ref(f: Mapping[str, Any]) -> FileRef:  # a JSON object
    return FileRef(str(f["path"]), int(f["size"]), str(f.get("checksum") or ""))


def frequency_segments(properties: Mapping[str, str]) -> list[FileRef]:
    """The older segments of the table's frequencies, oldest (the base) first (``[]``: one
    segment, the triple's file). ``properties``: as the catalog stores them (JSON text)."""
    import json

    raw = properties.get(FREQUENCY_SEGMENTS_PROPERTY)
    return [_ref(f) for f in json.loads(raw)] if raw else []


def extra_files(properties: Mapping[str, str]) -> list[FileRef]:
    """Files of the table level beyond the three, named in its properties: the per-file column
    index (``file_index``, ``{name: {"path", "size", "checksum"}}``), the older segments of the
    table's frequencies (``frequency_segments``) and the job's table counts (``table_counts``'
    ``files`` and ``state``). gc keeps them like the three while a state names them; verify checks them."""
    import json

    out: list[FileRef] = []
    raw = properties.get(FILE_INDEX_PROPERTY)
    if raw:
        out.extend(_ref(f) for f in json.loads(raw).values())
    out.extend(frequency_segments(properties))
    raw = properties.get(TABLE_COUNTS_PROPERTY)
    if raw:
        counts = json.loads(raw)
        if isinstance(counts, dict):
            out.extend(_ref(f) for f in counts.get("files") or [] if isinstance(f, dict))
            if isinstance(counts.get("state"), dict):  # the table's merged state (engine/runtime/job/plan.py)
                out.append(_ref(counts["state"]))
    return out


@dataclass(frozen=True)
class StatisticsFiles:
    """The three files of one partition or of the table."""

    statistics: FileRef
    frequencies: FileRef
    histograms: FileRef

    def refs(self) -> tuple[FileRef, FileRef, FileRef]:
        return (self.statistics, self.frequencies, self.histograms)

    def paths(self) -> tuple[str, str, str]:
        statistics, frequencies, histograms = self.refs()
        return statistics.path, frequencies.path, histograms.path

    def by_name(self) -> dict[str, FileRef]:
        """``{"statistics.parquet": ref, "frequencies.parquet": ref, "histograms.parquet": ref}``."""
        return {FILE_NAMES[k]: getattr(self, k) for k in KINDS}


@dataclass(frozen=True)
class PartitionEntry:
    key: str
    files: StatisticsFiles
    row_count: int
    snapshot_id: str
    schema_fingerprint: str
    job_id: str = ""
    data_fingerprint: str = ""
    tombstoned: bool = False
    added_in: int = 0  # the transaction that added (or last replaced) it


@dataclass(frozen=True)
class TableEntry:
    """The table-level statistics of a catalog state (``CatalogState.table_statistics``; the
    lookups' reader of a table is ``engine.lookup.TableStatistics``)."""

    files: StatisticsFiles
    snapshot_id: str
    row_count: int
    schema_fingerprint: str
    job_id: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))

    def __hash__(self) -> int:  # properties is a dict
        return hash((self.files, self.snapshot_id, self.row_count, self.schema_fingerprint, self.job_id))

    def extra_files(self) -> list[FileRef]:
        return extra_files(self.properties)


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class AddPartition:
    key: str
    files: StatisticsFiles
    row_count: int
    snapshot_id: str
    schema_fingerprint: str
    job_id: str = ""
    data_fingerprint: str = ""


@dataclass(frozen=True)
class RemovePartition:
    key: str


@dataclass(frozen=True)
class TombstonePartition:
    key: str


@dataclass(frozen=True)
class SetTableStatistics:
    files: StatisticsFiles
    snapshot_id: str
    row_count: int
    schema_fingerprint: str
    job_id: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", dict(self.properties))

    def __hash__(self) -> int:
        return hash((self.files, self.snapshot_id, self.row_count, self.schema_fingerprint, self.job_id))


@dataclass(frozen=True)
class Upgrade:
    format_version: int


Action = Union[AddPartition, RemovePartition, TombstonePartition, SetTableStatistics, Upgrade]


@dataclass(frozen=True)
class TransactionRecord:
    """A transaction as stored (decoded from its file)."""

    id: int
    uuid: str
    parent_uuid: str
    timeline: str
    table: str
    snapshot_id: str
    timestamp_us: int
    job_id: str
    commit_token: str
    actions: tuple[Action, ...]
    format_version: int = FORMAT_VERSION

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_us / 1e6, tz=UTC)


# --------------------------------------------------------------------------- state


@dataclass(frozen=True)
class CatalogState:
    """The statistics of a table as of one transaction (``txn_id`` 0: the empty catalog)."""

    table: str
    txn_id: int = 0
    txn_uuid: str = ""
    timeline: str = ""
    snapshot_id: str = ""
    job_id: str = ""
    timestamp_us: int = 0
    format_version: int = 0
    entries: Mapping[str, PartitionEntry] = field(default_factory=dict)  # live and tombstoned, by key
    table_statistics: TableEntry | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", dict(sorted(self.entries.items())))

    __hash__ = None  # type: ignore[assignment]  # unhashable (mutable dicts inside): the idiom typeshed's object.__hash__ does not allow

    @property
    def empty(self) -> bool:
        return self.txn_id == 0

    @property
    def partitions(self) -> dict[str, PartitionEntry]:
        """Live partitions (their statistics count), by key."""
        return {k: e for k, e in self.entries.items() if not e.tombstoned}

    @property
    def tombstones(self) -> dict[str, PartitionEntry]:
        """Partitions dropped upstream whose files are kept, by key."""
        return {k: e for k, e in self.entries.items() if e.tombstoned}

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_us / 1e6, tz=UTC)

    def referenced_paths(self) -> set[str]:
        """Every statistics file (relative path) this state references, tombstones included."""
        out = {p for e in self.entries.values() for p in e.files.paths()}
        if self.table_statistics is not None:
            out.update(self.table_statistics.files.paths())
            out.update(ref.path for ref in self.table_statistics.extra_files())
        return out


class ActionError(ValueError):
    """An action does not apply to the state (raised by :func:`apply`)."""


def apply_action(entries: dict[str, PartitionEntry], table: list[TableEntry | None], version: list[int], action: Action, txn_id: int) -> None:
    """Apply one action in place (``table`` and ``version`` are one-element boxes)."""
    if isinstance(action, AddPartition):
        entries[action.key] = PartitionEntry(
            key=action.key,
            files=action.files,
            row_count=action.row_count,
            snapshot_id=action.snapshot_id,
            schema_fingerprint=action.schema_fingerprint,
            job_id=action.job_id,
            data_fingerprint=action.data_fingerprint,
            tombstoned=False,
            added_in=txn_id,
        )
    elif isinstance(action, RemovePartition):
        if action.key not in entries:
            raise ActionError(f"RemovePartition: no partition {action.key!r}")
        del entries[action.key]
    elif isinstance(action, TombstonePartition):
        entry = entries.get(action.key)
        if entry is None:
            raise ActionError(f"TombstonePartition: no partition {action.key!r}")
        if entry.tombstoned:
            raise ActionError(f"TombstonePartition: partition {action.key!r} is already tombstoned")
        entries[action.key] = replace(entry, tombstoned=True)
    elif isinstance(action, SetTableStatistics):
        table[0] = TableEntry(
            files=action.files,
            snapshot_id=action.snapshot_id,
            row_count=action.row_count,
            schema_fingerprint=action.schema_fingerprint,
            job_id=action.job_id,
            properties=action.properties,
        )
    elif isinstance(action, Upgrade):
        if action.format_version < version[0]:
            raise ActionError(f"Upgrade: format version {action.format_version} is older than the catalog's {version[0]}")
        if action.format_version > FORMAT_VERSION:
            raise ActionError(f"Upgrade: format version {action.format_version} is newer than this Metastore supports ({FORMAT_VERSION})")
        version[0] = action.format_version
    else:  # pragma: no cover - the decoder only produces the types above
        raise ActionError(f"unknown action {action!r}")


def apply(state: CatalogState, txn: TransactionRecord) -> CatalogState:
    """The state after ``txn`` (raises ActionError if an action does not apply)."""
    entries = dict(state.entries)
    table = [state.table_statistics]
    version = [state.format_version]
    for action in txn.actions:
        apply_action(entries, table, version, action, txn.id)
    return CatalogState(
        table=state.table or txn.table,
        txn_id=txn.id,
        txn_uuid=txn.uuid,
        timeline=txn.timeline,
        snapshot_id=txn.snapshot_id,
        job_id=txn.job_id,
        timestamp_us=txn.timestamp_us,
        format_version=version[0],
        entries=entries,
        table_statistics=table[0],
    )
