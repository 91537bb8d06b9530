"""A Delta Lake table, as delta-rs (``deltalake``) says it is at one version.

The live files of the chosen version come from delta-rs's log replay
(``get_add_actions``): a file an overwrite or delete removed is never read. Each
distinct combination of partition values is one of our partitions (keyed by the
Hive path Delta itself writes, ``a=1/b=x``); partition values are typed by the
table schema and added to every row, because Delta's data files do not hold them.

The data files are plain Parquet, so they are read - and their footers give
column bounds - exactly as :class:`ParquetDirectorySource` reads its files.

Deletion vectors are applied: delta-rs (its Delta kernel) reads each live file's
vector, whichever way it is stored (inline, a file by UUID or by path), and returns it
as a keep mask (``DeltaTable.deletion_vectors``); the rows it deletes (positions in
the file) are dropped as the file is read, and they are part of the partition's
fingerprint (a delete by vector leaves the file's path, size and time as they were).

Refused (one line naming the feature, before anything is read): column mapping
(physical names differ from the schema's) and any reader feature this module does
not know.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import fileio
from engine.exceptions import (
    InvalidTableLayoutError,
    SnapshotNotFoundError,
    TableNotFoundError,
    UnsupportedTableFeatureError,
    first_line,
)
from engine.sources.base import DataFile, Partition, default_table_name
from engine.sources.fingerprints import partition_fingerprint
from engine.sources.footers import FetchFooters
from engine.sources.formats import SnapshotSelector
from engine.sources.locations import Locations
from engine.sources.parquet import HIVE_DEFAULT_PARTITION, ParquetDirectorySource
from engine.sources.schema import normalize_type

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["DeltaSource", "library_uri", "open_source", "snapshots_since"]

#: reader features whose tables read correctly through the add actions and plain Parquet
#: (deletionVectors applied as the files are read; columnMapping only in mode none)
_READABLE_FEATURES = frozenset(
    {"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "typeWidening", "typeWidening-preview", "columnMapping"}
)


def library_uri(uri: str) -> str:
    """``uri`` as the Rust table libraries take it: absolute local paths, ``s3://``."""
    if fileio.is_local(uri):
        return fileio.resolve(uri)[1]
    for prefix in ("s3a://", "s3n://"):
        if uri.startswith(prefix):
            return "s3://" + uri[len(prefix) :]
    return uri


def _hive_value(value: object) -> str:
    if value is None:
        return HIVE_DEFAULT_PARTITION
    text = value.isoformat(sep=" ") if isinstance(value, datetime) else str(value)
    return quote(text, safe=" -_.:+,@")


def _load(uri: str, selector: SnapshotSelector, without_files: bool = False) -> DeltaTable:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError
    from deltalake.exceptions import TableNotFoundError as DeltaNotFound

    options = fileio.object_store_options(uri)
    try:
        version = None
        if selector.at_snapshot is not None:
            try:
                version = int(selector.at_snapshot)
            except ValueError:
                raise SnapshotNotFoundError(f"{uri}: Delta version {selector.at_snapshot!r} is not a version number") from None
        dt = DeltaTable(library_uri(uri), version=version, storage_options=options or None, without_files=without_files)
        if selector.as_of_ms is not None:
            when = datetime.fromtimestamp(selector.as_of_ms / 1000, tz=UTC)
            # the commit times from the newest version's history: a table loaded at an older version
            # labels its history with the wrong versions (delta-rs 1.6: the newest commits, numbered down from it)
            committed_at = {h.get("version"): h.get("timestamp") for h in dt.history()}
            dt.load_as_version(when)
            # delta-rs loads version 0 for a time before the table existed
            committed = committed_at.get(dt.version())
            if committed is not None and int(committed) > selector.as_of_ms:
                raise SnapshotNotFoundError(f"{uri}: no Delta version at or before {when.isoformat()} (version {dt.version()} is newer)")
        return dt
    except DeltaNotFound as exc:
        raise TableNotFoundError(f"{uri}: no Delta table here ({first_line(exc)})") from None
    except DeltaError as exc:
        text = first_line(exc)
        if selector.at_snapshot is not None and "version" in text.lower():
            raise SnapshotNotFoundError(f"{uri}: Delta version {selector.at_snapshot} does not exist ({text})") from None
        if selector.as_of_ms is not None and ("timestamp" in text.lower() or "version" in text.lower()):
            when_text = datetime.fromtimestamp(selector.as_of_ms / 1000, tz=UTC).isoformat()
            raise SnapshotNotFoundError(f"{uri}: no Delta version at or before {when_text} ({text})") from None
        raise InvalidTableLayoutError(f"{uri}: Delta log unreadable: {text}") from None
    except OSError as exc:
        raise InvalidTableLayoutError(f"{uri}: Delta log unreadable: {first_line(exc)}") from None


def snapshots_since(uri: str, snapshot_id: str) -> int | None:
    """Versions committed after version ``snapshot_id`` (the log only, no file list)."""
    try:
        old = int(snapshot_id)
    except ValueError:
        return None
    latest = int(_load(uri, SnapshotSelector(), without_files=True).version())
    return latest - old if 0 <= old <= latest else None


def _vector_paths(uri: str) -> list[str]:
    """The absolute paths (storage type ``p``) of the deletion vectors the log's commits and
    checkpoints name, at any version (delta-rs gives the vectors' rows, not where they are)."""
    out: list[str] = []
    try:
        entries = fileio.list_files(fileio.join(uri, "_delta_log"), recursive=True)
    except (FileNotFoundError, OSError):
        return out
    for entry in entries:
        name = entry.path.rsplit("/", 1)[-1]
        if name.endswith(".json") and name.split(".", 1)[0].isdigit():
            text = fileio.read_bytes(entry.uri).decode("utf-8", "replace")
            if '"p"' not in text:  # a cheap test before parsing
                continue
            for line in text.splitlines():
                vector = (json.loads(line).get("add") or {}).get("deletionVector") if '"deletionVector"' in line else None
                if vector and vector.get("storageType") == "p":
                    out.append(str(vector.get("pathOrInlineDv")))
        elif name.endswith(".parquet"):  # checkpoints and their sidecars
            try:
                adds = pq.read_table(fileio.open_input(entry.uri), columns=["add"]).column("add")
            except (KeyError, pa.ArrowException):
                continue
            if "deletionVector" not in {f.name for f in adds.type}:
                continue
            vectors = pc.struct_field(adds, "deletionVector")
            paths = pc.filter(pc.struct_field(vectors, "pathOrInlineDv"), pc.equal(pc.struct_field(vectors, "storageType"), "p"))
            out += [str(p) for p in paths.to_pylist()]
    return out


class DeltaSource(ParquetDirectorySource):
    """The live files of one version of a Delta table (local or ``s3://``)."""

    def __init__(self, uri: str, name: str | None = None, selector: SnapshotSelector | None = None, data_roots: Sequence[str] = ()) -> None:
        """``data_roots``: where data files may lie besides the table's location (engine/sources/locations.py)."""
        selector = selector or SnapshotSelector()
        self.uri = uri.rstrip("/")
        self.name = name or default_table_name(uri)
        self._fs, self._root = fileio.resolve(self.uri)
        dt = _load(self.uri, selector)
        self._version = int(dt.version())
        self._check_features(dt)
        arrow_schema = pa.schema(dt.schema().to_arrow())
        schema = pa.schema([pa.field(f.name, normalize_type(f.type), nullable=f.nullable) for f in arrow_schema])
        partition_names = list(dt.metadata().partition_columns)
        self._partition_fields = [schema.field(n) for n in partition_names]
        self._schema = schema
        self._partition_values: dict[str, dict[str, Any]] = {}
        actions = pa.table(dt.get_add_actions(flatten=True))
        self._check_locations(actions.column("path").to_pylist(), data_roots)
        if "deletionVectors" in (dt.protocol().reader_features or ()):
            for path in _vector_paths(self.uri):
                Locations(self.uri, data_roots).check(path, f"Delta deletion vector {path!r}")
        #: file path (as DataFile.path) -> the row positions its deletion vector deletes, sorted
        self._deleted: dict[str, np.ndarray] = self._deletion_vectors(dt)
        by_key: dict[str, list[DataFile]] = {}
        values_by_key: dict[str, tuple[tuple[str, str | None], ...]] = {}
        for row in actions.to_pylist():
            values = {n: row.get(f"partition.{n}") for n in partition_names}
            key = "/".join(f"{quote(n, safe='')}={_hive_value(values[n])}" for n in partition_names)
            path = str(row["path"])
            full = fileio.resolve(path)[1] if "://" in path else f"{self._root}/{unquote(path)}"
            deleted = self._deleted.get(full)
            # the add action's record count includes the rows a deletion vector deletes
            num_rows = row.get("num_records") if deleted is None or row.get("num_records") is None else int(row["num_records"]) - len(deleted)
            by_key.setdefault(key, []).append(
                DataFile(path=full, size=int(row["size_bytes"]), mtime_ns=int(row["modification_time"]) * 1_000_000, num_rows=num_rows)
            )
            self._partition_values[key] = values
            values_by_key[key] = tuple((n, None if values[n] is None else str(values[n])) for n in partition_names)
        self._partitions = [Partition(key=k, values=values_by_key[k], files=tuple(sorted(by_key[k], key=lambda f: f.path))) for k in sorted(by_key)]
        self._snapshot_id = str(self._version)

    def _check_locations(self, paths: list[str], data_roots: Sequence[str]) -> None:
        """Every add action's file inside the table (or a data root), before anything is read."""
        locations = Locations(self.uri, data_roots)
        for path in paths:
            locations.check_relative(path if "://" in path else unquote(path), f"Delta add action {path!r} (version {self._version})")

    def _deletion_vectors(self, dt: DeltaTable) -> dict[str, np.ndarray]:
        """The deleted row positions of every live file with a deletion vector, as delta-rs
        reads them (``deletion_vectors()``: only files that have one, each with a keep mask;
        rows beyond the mask's end are kept)."""
        if "deletionVectors" not in (dt.protocol().reader_features or ()):
            return {}
        out: dict[str, np.ndarray] = {}
        try:
            for batch in pa.RecordBatchReader.from_stream(dt.deletion_vectors()):
                masks = batch.column("selection_vector")
                offsets = masks.offsets.to_numpy()
                keep = masks.values.to_numpy(zero_copy_only=False)
                for i, url in enumerate(batch.column("filepath").to_pylist()):
                    path = unquote(fileio.resolve(url)[1]) if "://" in url else f"{self._root}/{unquote(url)}"
                    out[path] = np.flatnonzero(~keep[offsets[i] : offsets[i + 1]]).astype(np.int64)
        except Exception as exc:  # noqa: BLE001 - I/O, Arrow and delta-rs's own errors (a missing or damaged vector file)
            raise InvalidTableLayoutError(f"{self.uri}: Delta deletion vectors of version {self._version} unreadable: {first_line(exc)}") from None
        return out

    def _check_features(self, dt: DeltaTable) -> None:
        protocol = dt.protocol()
        features = set(protocol.reader_features or ())
        if '"variant"' not in dt.schema().to_json():
            # delta-rs declares the variant feature on tables it enables deletion vectors on;
            # it matters only where a column is a variant
            features -= {"variantType", "variantType-preview"}
        unknown = sorted(features - _READABLE_FEATURES)
        if unknown:
            raise UnsupportedTableFeatureError(f"{self.uri}: Delta reader feature(s) {', '.join(unknown)} not supported")
        if protocol.min_reader_version > 3:
            raise UnsupportedTableFeatureError(f"{self.uri}: Delta reader version {protocol.min_reader_version} not supported (at most 3)")
        mode = dt.metadata().configuration.get("delta.columnMapping.mode", "none")
        if mode and mode != "none":
            raise UnsupportedTableFeatureError(
                f"{self.uri}: Delta reader feature columnMapping (mode {mode}) not supported: physical column names differ from the schema's"
            )

    # ------------------------------------------------------------------ interface

    def partition_fingerprints(self) -> dict[str, str]:
        """Each partition's live files (path, size, modification time, and the rows a deletion
        vector deletes): an append, a rewrite, a removal or a new deletion vector in the
        partition changes it, a commit elsewhere does not."""
        prefix = self._root.rstrip("/") + "/"
        return {
            p.key: partition_fingerprint((f.path.removeprefix(prefix), f.size, f.mtime_ns, *self._vector_digest(f.path)) for f in p.files)
            for p in self._partitions
        }

    def _vector_digest(self, path: str) -> tuple[str, ...]:
        deleted = self._deleted.get(path)
        return () if deleted is None else (f"dv:{len(deleted)}:{hashlib.sha256(deleted.tobytes()).hexdigest()[:32]}",)

    def column_bounds(self, partition: Partition, columns: list[str]) -> dict[str, tuple[pa.Scalar, pa.Scalar] | None]:
        """As a directory's, but not for a partition with deletion vectors (its footers'
        bounds would include deleted rows)."""
        if any(f.path in self._deleted for f in partition.files):
            return {}
        return super().column_bounds(partition, columns)

    def _read_file(self, data_file: DataFile, data_columns: list[str], *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """The file's rows but those its deletion vector deletes (by position in the file)."""
        deleted = self._deleted.get(data_file.path)
        if deleted is None:
            yield from super()._read_file(data_file, data_columns, *args, **kwargs)
            return
        offset = 0
        for batch in super()._read_file(data_file, data_columns, *args, **kwargs):
            n = batch.num_rows
            lo, hi = np.searchsorted(deleted, [offset, offset + n])
            offset += n
            if hi > lo:
                keep = np.ones(n, bool)
                keep[deleted[lo:hi] - (offset - n)] = False
                batch = batch.filter(pa.array(keep)) if batch.num_columns else batch.slice(0, int(keep.sum()))
            yield batch

    def snapshots_since(self, snapshot_id: str) -> int | None:
        return snapshots_since(self.uri, snapshot_id)

    def _partition_constants(self, partition: Partition, target: pa.Schema) -> dict[str, pa.Scalar]:
        values = self._partition_values.get(partition.key, {})
        return {f.name: pa.scalar(values.get(f.name), type=f.type) for f in self._partition_fields if f.name in target.names}

    def _display(self, path: str) -> str:
        return fileio.join(self.uri, self._relative(path))


def open_source(
    uri: str, name: str | None, selector: SnapshotSelector, catalog: str | None, footers: FetchFooters | None, data_roots: Sequence[str]
) -> DeltaSource:
    """The table at ``uri`` (the table format registry's opener: engine/sources/registry.py)."""
    return DeltaSource(uri, name, selector, data_roots)
