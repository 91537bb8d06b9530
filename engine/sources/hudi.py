"""A Hudi table, as hudi-rs (``hudi``) says it is at one commit instant.

The file slices come from hudi-rs's timeline and file-system view
(``get_file_slices``): for each file group only its latest slice at the chosen
instant, so older file versions (cleaned or not) and file groups replaced by an
overwrite (``replacecommit``) are never read. Rows are read through hudi-rs's file
group reader, which for a merge-on-read slice merges its base file with its log
files (updates and deletes applied), as Hudi's snapshot query does. Each partition
path (``city=chennai``, or ``2024/01/05`` for non-Hive-style tables) is one of our
partitions; the partition columns are data columns in Hudi files, so there are no
extra partition constants.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from engine import fileio
from engine.exceptions import (
    InvalidTableLayoutError,
    SnapshotNotFoundError,
    TableNotFoundError,
    first_line,
)
from engine.sources.base import (
    DEFAULT_BATCH_SIZE,
    DataFile,
    Partition,
    TableSource,
    default_table_name,
    projected_schema,
)
from engine.sources.delta import library_uri
from engine.sources.fingerprints import partition_fingerprint
from engine.sources.footers import FetchFooters
from engine.sources.formats import SnapshotSelector
from engine.sources.locations import Locations
from engine.sources.schema import conform_array, normalize_type

if TYPE_CHECKING:
    from types import ModuleType

    from hudi import HudiFileSlice, HudiReadOptions, HudiTable, HudiTimeline

__all__ = ["HudiSource", "open_source", "snapshots_since"]


def _build(uri: str) -> HudiTable:
    import hudi

    builder = hudi.HudiTableBuilder.from_base_uri(library_uri(uri))
    options = fileio.object_store_options(uri)
    if options:
        builder = builder.with_storage_options(options)
    try:
        return builder.build()
    except Exception as exc:  # noqa: BLE001 - hudi raises HudiCoreError for any problem
        if not fileio.exists(fileio.join(uri, ".hoodie")):
            raise TableNotFoundError(f"{uri}: no Hudi table here (no .hoodie/)") from None
        raise InvalidTableLayoutError(f"{uri}: Hudi metadata unreadable: {first_line(exc)}") from None


def _instants(table: HudiTable) -> list[str]:
    """Completed instants that change the table's data, oldest first."""
    timeline = table.get_timeline()
    found = timeline.get_completed_commits() + timeline.get_completed_deltacommits() + timeline.get_completed_replacecommits()
    return sorted({i.timestamp for i in found})


def _hudi_time(ms: int) -> str:
    """Hudi's instant format (``yyyyMMddHHmmssSSS``) of an epoch-millisecond time, UTC."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y%m%d%H%M%S") + f"{dt.microsecond // 1000:03d}"


def _partition_values(path: str) -> tuple[tuple[str, str | None], ...]:
    if not path:
        return ()
    parts = path.split("/")
    if all("=" in p for p in parts):
        return tuple((unquote(p.partition("=")[0]), unquote(p.partition("=")[2])) for p in parts)
    return (("partition_path", path),)


@dataclass(frozen=True)
class WrittenFiles:
    """What the completed commits up to an instant say they wrote (from their metadata)."""

    #: (partition path, file id) -> (commit, path) of the newest base file written
    bases: dict[tuple[str, str], tuple[str, str]]
    #: (commit, partition path, file id, path) of every log file written
    logs: list[tuple[str, str, str, str]]
    #: (partition path, file id) of the file groups a replace commit replaced
    replaced: set[tuple[str, str]]


def _written_files(timeline: HudiTimeline, instant: str) -> WrittenFiles:
    found = WrittenFiles({}, [], set())
    commits = timeline.get_completed_commits() + timeline.get_completed_deltacommits() + timeline.get_completed_replacecommits()
    for commit in sorted((c for c in commits if c.timestamp <= instant), key=lambda c: c.timestamp):
        try:
            metadata = json.loads(timeline.get_instant_metadata_in_json(commit))
        except Exception:  # noqa: BLE001 - an unreadable commit is hudi-rs's to report; nothing to compare here
            continue
        for partition, file_ids in (metadata.get("partitionToReplaceFileIds") or {}).items():
            found.replaced.update((partition, f) for f in file_ids or ())
        for partition, stats in (metadata.get("partitionToWriteStats") or {}).items():
            for stat in stats or ():
                path, file_id = stat.get("path"), stat.get("fileId")
                if not path or not file_id:
                    continue
                if path.rsplit("/", 1)[-1].startswith("."):
                    found.logs.append((commit.timestamp, partition, file_id, path))
                else:
                    found.bases[(partition, file_id)] = (commit.timestamp, path)
    return found


def missing_written_file(written: WrittenFiles, slices: list[Any]) -> tuple[str, str] | None:
    """``(path, commit)`` of a file the commits wrote that the latest slices should hold and do
    not: a file group's newest base file (its slice older or absent, the group not replaced),
    or a log file a delta commit after the slice's base wrote into it; None when none is missing."""
    by_group = {(s.partition_path, s.file_id): s for s in slices}
    for group, (commit, path) in sorted(written.bases.items()):
        current = by_group.get(group)
        if group not in written.replaced and (current is None or current.creation_instant_time < commit):
            return path, commit
    for commit, partition, file_id, path in written.logs:
        current = by_group.get((partition, file_id))
        if current is not None and commit > current.creation_instant_time and path.rsplit("/", 1)[-1] not in current.log_file_names:
            return path, commit
    return None


def snapshots_since(uri: str, snapshot_id: str) -> int | None:
    """Completed commits after instant ``snapshot_id`` (the timeline only)."""
    instants = _instants(_build(uri))
    if snapshot_id not in instants:
        return None
    return len(instants) - 1 - instants.index(snapshot_id)


class HudiSource(TableSource):
    """The latest file slice of every file group at one instant of a Hudi table."""

    def __init__(self, uri: str, name: str | None = None, selector: SnapshotSelector | None = None, data_roots: Sequence[str] = ()) -> None:
        """``data_roots``: where files may lie besides the table's location (engine/sources/locations.py)."""
        import hudi

        selector = selector or SnapshotSelector()
        self.uri = uri.rstrip("/")
        self.name = name or default_table_name(self.uri)
        table = _build(self.uri)
        self._hudi_options = dict(table.hudi_options())
        instants = _instants(table)
        if selector.at_snapshot is not None:
            if selector.at_snapshot not in instants:
                raise SnapshotNotFoundError(f"{self.uri}: Hudi instant {selector.at_snapshot} is not a completed commit of the table")
            instant: str | None = selector.at_snapshot
        elif selector.as_of_ms is not None:
            bound = _hudi_time(selector.as_of_ms)
            earlier = [i for i in instants if i <= bound]
            if not earlier:
                raise SnapshotNotFoundError(f"{self.uri}: no Hudi commit at or before {bound}")
            instant = earlier[-1]
        else:
            instant = instants[-1] if instants else None
        self._instant = instant
        self._snapshot_id = instant or ""
        try:
            # the meta columns (_hoodie_commit_time, ...) are columns of the table as hudi-rs reads
            # it, unless the table does not populate them
            populated = self._hudi_options.get("hoodie.populate.meta.fields", "true").lower() != "false"
            arrow = table.get_schema_with_meta_fields() if populated else table.get_schema()
        except Exception as exc:  # noqa: BLE001
            if instant is None:
                arrow = pa.schema([])
            else:
                raise InvalidTableLayoutError(f"{self.uri}: Hudi schema unreadable: {first_line(exc)}") from None
        self._schema = pa.schema([pa.field(f.name, normalize_type(f.type), nullable=True) for f in arrow])
        self._partition_fields = []
        self._slices: dict[str, list[tuple[str, tuple[str, ...]]]] = {}  # key -> (base file, log files), relative paths
        by_key: dict[str, list[DataFile]] = {}
        fingerprints: dict[str, list[tuple[Any, ...]]] = {}
        if instant is not None:
            try:
                slices = table.get_file_slices(self._read_options(hudi))
            except Exception as exc:  # noqa: BLE001
                raise InvalidTableLayoutError(f"{self.uri}: Hudi file slices unreadable at {instant}: {first_line(exc)}") from None
            root = fileio.resolve(self.uri)[1]
            self._check_locations(slices, data_roots)
            self._check_complete(table, instant, slices)
            for s in slices:
                key = s.partition_path
                logs = tuple(s.log_files_relative_paths())
                self._slices.setdefault(key, []).append((s.base_file_relative_path(), logs))
                by_key.setdefault(key, []).append(
                    DataFile(path=f"{root}/{s.base_file_relative_path()}", size=int(s.total_size_bytes()), mtime_ns=None)
                )
                fingerprints.setdefault(key, []).append(
                    (s.base_file_relative_path(), int(s.base_file_size), None, [f"{n}:{z}" for n, z in zip(logs, s.log_file_sizes)])
                )
        self._fingerprints = {k: partition_fingerprint(v) for k, v in fingerprints.items()}
        self._partitions = [
            Partition(key=k, values=_partition_values(k), files=tuple(sorted(by_key[k], key=lambda f: f.path))) for k in sorted(by_key)
        ]

    def _check_locations(self, slices: list[Any], data_roots: Sequence[str]) -> None:
        """Every file slice's base and log files inside the table (or a data root), before any is read."""
        locations = Locations(self.uri, data_roots)
        for s in slices:
            for path in (s.base_file_relative_path(), *s.log_files_relative_paths()):
                locations.check_relative(path, f"Hudi file slice {path!r} (instant {self._instant})")

    def _check_complete(self, table: HudiTable, instant: str, slices: list[HudiFileSlice]) -> None:
        """One line naming a file the timeline's commits wrote that the chosen instant's file
        slices lack: hudi-rs builds the slices from the files present, so a missing newest base
        file would otherwise give the file group's previous slice (older rows) under the newest
        instant's name."""
        missing = missing_written_file(_written_files(table.get_timeline(), instant), slices)
        if missing is not None:
            path, commit = missing
            raise InvalidTableLayoutError(
                f"{fileio.join(self.uri, path)}: written by Hudi commit {commit} (at or before instant {instant}) but missing from the table"
            )

    @property
    def instant(self) -> str | None:
        return self._instant

    def _read_options(self, hudi: ModuleType, columns: list[str] | None = None) -> HudiReadOptions:
        options = hudi.HudiReadOptions()
        if self._instant is not None:
            options = options.with_as_of_timestamp(self._instant)
        if columns is not None:
            options = options.with_projection(columns)
        return options

    # ------------------------------------------------------------------ interface

    def partition_fingerprints(self) -> dict[str, str]:
        """Each partition's latest slices (base file and log files, with sizes): a new slice,
        a new log file or a replaced file group in the partition changes it."""
        return dict(self._fingerprints)

    def snapshots_since(self, snapshot_id: str) -> int | None:
        return snapshots_since(self.uri, snapshot_id)

    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        import hudi

        target = projected_schema(self.uri, self._schema, columns)
        slices = self._slices.get(partition.key, [])
        if not slices:
            return
        table = _build(self.uri)
        # the record key is always read: hudi-rs merges log records by it
        wanted = list(columns) or [self._schema.names[0]]
        options = self._read_options(hudi, wanted)
        reader = table.create_file_group_reader_with_options(options)
        for base, logs in slices:
            try:
                stream = reader.read_file_slice_from_paths_stream(base, list(logs), options)
                for batch in stream:
                    for offset in range(0, max(batch.num_rows, 1), batch_size):
                        piece = batch.slice(offset, batch_size)
                        if not columns:
                            yield piece.select([])
                            continue
                        arrays = [conform_array(piece.column(f.name), f.type) for f in target]
                        yield pa.RecordBatch.from_arrays(arrays, schema=target)
            except (OSError, ValueError, RuntimeError) as exc:
                raise InvalidTableLayoutError(f"{fileio.join(self.uri, base)}: Hudi file slice unreadable: {first_line(exc)}") from None
            except Exception as exc:
                if type(exc).__name__ != "HudiCoreError":
                    raise
                raise InvalidTableLayoutError(f"{fileio.join(self.uri, base)}: Hudi file slice unreadable: {first_line(exc)}") from None

    def slice_log_files(self, partition: Partition) -> dict[str, tuple[str, ...]]:
        """For the file index (engine/fileindex/hudi.py): each data file of ``partition`` (its
        slice's base file, as ``partition.files`` names it) and the slice's log files."""
        root = fileio.resolve(self.uri)[1]
        return {f"{root}/{base}": logs for base, logs in self._slices.get(partition.key, [])}


def open_source(
    uri: str, name: str | None, selector: SnapshotSelector, catalog: str | None, footers: FetchFooters | None, data_roots: Sequence[str]
) -> HudiSource:
    """The table at ``uri`` (the table format registry's opener: engine/sources/registry.py)."""
    return HudiSource(uri, name, selector, data_roots)
