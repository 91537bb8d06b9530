"""A table stored as a directory of Parquet files, flat or Hive-partitioned.

The layout rules follow what Hive and Spark write and read:

- Partition folders are ``key=value`` at any depth (``a=1/b=x/part-0.parquet``);
  keys and values are percent-decoded as Hive escapes them, and the value
  ``__HIVE_DEFAULT_PARTITION__`` means null. Every partition path has the same
  keys in the same order; data files live only in the deepest folders.
- Names starting with ``.`` or ``_`` (``_SUCCESS``, ``.part-0.crc``,
  ``_delta_log``, ``_temporary``) are metadata or in-progress output and are
  ignored at every level, as are Hadoop's ``*._COPYING_`` files. As in Spark, a
  ``_``-prefixed name that contains ``=`` is still a partition folder.
- A partition folder at full depth without files is a partition with no files;
  folders holding no files that stop short of the partition depth are
  leftovers of failed writes and are ignored.
- Partition column types are inferred like Spark's (reduced to two types):
  int64 if every non-null value is an integer that fits, else string. Only two
  types, because a value like ``2024-01-05`` is ambiguous (date, string) and a
  wrong guess is worse than a string.
- A partition column the files hold too (polars and DuckDB can write them so) has the
  files' type instead, is read from the files, and each value read must equal its
  folder's (one error line naming the file otherwise).

Everything found is checked when the source is opened - each footer is read
(engine/sources/footers.py: here, in a thread pool where the file system is slow such
as S3, or in Ray tasks for an analyze of many files) - so a bad file fails the listing
on the driver, not a task hours later.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine.exceptions import (
    InvalidArgumentError,
    InvalidFileError,
    InvalidTableLayoutError,
    SchemaDriftError,
    TableNotFoundError,
)
from engine.sources.base import DEFAULT_BATCH_SIZE, DataFile, Partition, TableSource, default_table_name, projected_schema
from engine.sources.fingerprints import source_partition_fingerprints
from engine.sources.footers import FetchFooters, Footer, FooterReader, read_footers
from engine.sources.formats import SnapshotSelector
from engine.sources.schema import conform_array, conform_dictionary, is_promotable, normalize_type, unify_schemas
from engine.types import is_numeric

__all__ = ["HIVE_DEFAULT_PARTITION", "ParquetDirectorySource", "RowGroupSelector", "open_source", "small_dictionary_codes", "snapshots_since"]


def open_source(
    uri: str, name: str | None, selector: SnapshotSelector, catalog: str | None, footers: FetchFooters | None, data_roots: Sequence[str]
) -> ParquetDirectorySource:
    """A Parquet directory (the table format registry's opener: engine/sources/registry.py)."""
    if not selector.latest:
        raise InvalidArgumentError(f"{uri}: a Parquet directory has no snapshots: at_snapshot/as_of need an Iceberg, Delta or Hudi table")
    return ParquetDirectorySource(uri, name, footers=footers)


def snapshots_since(uri: str, snapshot_id: str) -> int | None:
    """None: a Parquet directory has no history."""
    return None


#: a filtered read's choice of row groups: (the file's open handle, its footer) -> indices, None: all
RowGroupSelector = Callable[[Any, pq.FileMetaData], "Sequence[int] | None"]

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_MAX_FOOTER_THREADS = 64
#: Footers (rows, schema) of local files, by (path, size, modification time in
#: ns): a rewrite changes the size or the time, so an unchanged key is an
#: unchanged footer. Reopening a table then reads no footer (for a 24-file table
#: ~7 ms of a ~10 ms listing; a thread pool is started only for the new files).
#: Object stores are not cached (their times are coarser).
_FOOTERS: dict[tuple[str, int, int], Footer] = {}
_FOOTERS_LOCK = threading.Lock()
_FOOTER_CACHE_SIZE = 100_000


def is_hidden(name: str) -> bool:
    return name.startswith(".") or (name.startswith("_") and "=" not in name) or name.endswith("._COPYING_")


@dataclass(frozen=True)
class Listing:
    """What the directory walk found, before any footer is read."""

    keys: tuple[str, ...]  # partition column names, in path order
    partitions: dict[str, list[DataFile]]  # partition key -> files (sorted by path)


class ParquetDirectorySource(TableSource):
    """A flat or Hive-partitioned directory of Parquet files (local, file:// or s3://)."""

    #: partition columns the data files hold too (their folder's values are checked as they are read)
    _in_file_keys: frozenset[str] = frozenset()
    _folder_values: dict[str, dict[str, pa.Scalar]] = {}  # noqa: RUF012 - never mutated: the instance's own replaces it

    def __init__(self, uri: str, name: str | None = None, *, max_threads: int = _MAX_FOOTER_THREADS, footers: FetchFooters | None = None) -> None:
        """``footers``: reads footers elsewhere (Ray tasks: engine/runtime/footers.py) when it
        takes them; else they are read here (engine/sources/footers.py)."""
        self.uri = uri
        self.name = name or default_table_name(uri)
        self._fs, self._root = fileio.resolve(uri)
        listing = self._list()
        # Partition-key then path order: "first appearance" of a column is deterministic.
        keys = sorted(listing.partitions)
        files = [f for key in keys for f in listing.partitions[key]]
        read = self._read_footers(files, max_threads, footers)
        # runs of consecutive files of one schema (most tables have one): a name each, not a name a file
        runs: list[list[Any]] = []  # [first file's path, schema, files]
        for f, (_, schema) in zip(files, read):
            if runs and (schema is runs[-1][1] or schema.equals(runs[-1][1])):
                runs[-1][2] += 1
            else:
                runs.append([f.path, schema, 1])
        data_schema = unify_schemas([(self._display(path), schema, n) for path, schema, n in runs])

        decoded = {key: _decode_partition_key(key, self._display_dir(key)) for key in listing.partitions}
        fields = _infer_partition_fields(listing.keys, decoded.values())
        # a partition column the files hold too (polars, DuckDB's write_partition_columns): the
        # files' type; their values are checked against the folder's as they are read
        self._in_file_keys = frozenset(f.name for f in fields if f.name in data_schema.names)
        fields = [data_schema.field(f.name).with_nullable(True) if f.name in self._in_file_keys else f for f in fields]
        self._partition_fields = fields
        self._schema = pa.schema(list(data_schema) + [f for f in fields if f.name not in self._in_file_keys])
        self._folder_values = self._typed_folder_values(decoded)
        counted = iter([DataFile(f.path, f.size, f.mtime_ns, num_rows, f.etag) for f, (num_rows, _) in zip(files, read)])
        self._partitions = [Partition(key=key, values=decoded[key], files=tuple(next(counted) for _ in listing.partitions[key])) for key in keys]
        self._snapshot_id = self._fingerprint()

    def _typed_folder_values(self, decoded: dict[str, tuple[tuple[str, str | None], ...]]) -> dict[str, dict[str, pa.Scalar]]:
        """``{partition key: {column: its folder value as the files' type}}`` of the partition
        columns the files hold too; one line naming the folder for a value that is not one."""
        out: dict[str, dict[str, pa.Scalar]] = {}
        fields = [f for f in self._partition_fields if f.name in self._in_file_keys]
        for key, values in decoded.items() if fields else ():
            raw = dict(values)
            out[key] = {f.name: _folder_scalar(raw.get(f.name), f, self._display_dir(key)) for f in fields}
        return out

    # ------------------------------------------------------------------ pickling

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        # A pickled filesystem arrives as a new client; share one per worker process.
        self._fs = fileio.share(self._fs)

    # ------------------------------------------------------------------ interface

    @property
    def file_system(self) -> pafs.FileSystem:
        """The file system the table's files open on (engine.fileio's shared one): ``DataFile.path`` is a path on it."""
        return self._fs

    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),
        row_groups: RowGroupSelector | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """``dictionary``: string columns a file stores with small dictionary codes in every
        row group come as Arrow dictionaries (see :func:`_small_codes`). ``row_groups``: which
        row groups of each file to read (a filtered read's pruning, engine/sources/filtered.py):
        called with the file's open handle and footer, it returns their indices (None: all)."""
        target = self._projection(columns)
        if batch_size <= 0:
            raise InvalidArgumentError(f"batch_size must be positive, got {batch_size}")
        constants = self._partition_constants(partition, target)
        # partition columns the files hold are read from them and checked against the folder's value
        checks = {name: constants.pop(name) for name in list(constants) if name in self._in_file_keys}
        data_columns = [f.name for f in target if f.name not in constants]
        # a dotted name would be taken for a nested path by Parquet's column selection
        wanted = [c for c in dictionary if c in data_columns and c not in checks and "." not in c and _is_string(target.field(c).type)]
        for data_file in partition.files:
            yield from self._read_file(data_file, data_columns, target, constants, batch_size, wanted, row_groups, checks=checks)

    def partition_fingerprints(self) -> dict[str, str]:
        """Each partition's files as (path relative to the table, size, mtime): any rewrite changes it.

        A partition with a file of unknown modification time gets "" (unknown: recomputed).
        """
        out = source_partition_fingerprints(self)
        for part in self._partitions:
            if any(f.mtime_ns is None for f in part.files):
                out[part.key] = ""
        return out

    # ------------------------------------------------------------------ listing

    def _display(self, path: str) -> str:
        """A file's name in the caller's terms (the table URI plus the relative path)."""
        return fileio.join(self.uri, self._relative(path))

    def _display_dir(self, key: str) -> str:
        return fileio.join(self.uri, key) if key else self.uri

    def _relative(self, path: str) -> str:
        prefix = self._root.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else path

    def _list(self) -> Listing:
        root_info = self._fs.get_file_info(self._root)
        if root_info.type == pafs.FileType.NotFound:
            raise TableNotFoundError(f"table not found: {self.uri} does not exist")
        if root_info.type != pafs.FileType.Directory:
            raise InvalidTableLayoutError(f"{self.uri} is a file; a table is a directory of Parquet files")
        infos = self._fs.get_file_info(pafs.FileSelector(self._root, recursive=True))
        etags = _s3_etags(self._root) if isinstance(self._fs, pafs.S3FileSystem) else {}

        subdirs: dict[str, set[str]] = {"": set()}
        files: dict[str, list[DataFile]] = {}
        prefix = self._root.rstrip("/") + "/"
        hidden_dirs: dict[str, bool] = {"": False}  # folder -> whether a component of its path is hidden
        registered = {""}

        def hidden(directory: str) -> bool:
            found = hidden_dirs.get(directory)
            if found is None:
                parent, _, name = directory.rpartition("/")
                found = hidden_dirs[directory] = hidden(parent) or is_hidden(name)
            return found

        def register(directory: str) -> None:
            # Object stores may not report every intermediate "directory": derive them.
            if directory not in registered:
                parent = directory.rpartition("/")[0]
                register(parent)
                subdirs[parent].add(directory)
                subdirs.setdefault(directory, set())
                registered.add(directory)

        # per entry only what differs from its folder's (a folder's path is looked at once)
        for info in infos:
            path = info.path
            rel = (path[len(prefix) :] if path.startswith(prefix) else path).strip("/")
            if not rel:
                continue
            if info.is_file:
                directory, _, name = rel.rpartition("/")
                if is_hidden(name) or hidden_dirs.get(directory, None) is not False and hidden(directory):
                    continue
                if directory not in registered:
                    register(directory)
                files.setdefault(directory, []).append(DataFile(path=path, size=int(info.size or 0), mtime_ns=info.mtime_ns, etag=etags.get(path)))
            elif not hidden(rel):  # a folder (or a link, not followed: its folder)
                register(rel if info.type == pafs.FileType.Directory else rel.rpartition("/")[0])

        keys_by_depth: dict[int, tuple[str, str]] = {}  # depth -> (raw key, first folder with it)
        for directory in sorted(subdirs):
            if subdirs[directory] and directory in files:
                raise InvalidTableLayoutError(
                    f"{self._display_dir(directory)} holds both data files and subfolders; data files must be only in the deepest partition folders"
                )
            if not directory:
                continue
            parts = directory.split("/")
            raw_key, eq, _ = parts[-1].partition("=")
            if not eq or not raw_key:
                raise InvalidTableLayoutError(f"{self._display_dir(directory)} is not a Hive partition folder (key=value)")
            depth = len(parts)
            known = keys_by_depth.setdefault(depth, (raw_key, directory))
            if unquote(known[0]) != unquote(raw_key):
                raise InvalidTableLayoutError(
                    f"inconsistent partition keys at depth {depth}: {self._display_dir(known[1])} and {self._display_dir(directory)}"
                )

        if not files:
            raise TableNotFoundError(f"table not found: no data files under {self.uri}")
        first_at_depth: dict[int, str] = {}  # depth -> first folder (sorted) holding files there
        for directory in sorted(files):
            first_at_depth.setdefault(len(directory.split("/")) if directory else 0, directory)
        if len(first_at_depth) > 1:
            (d1, p1), (d2, p2) = sorted(first_at_depth.items())[:2]
            raise InvalidTableLayoutError(
                f"inconsistent partition depth: {self._display_dir(p1)} has {d1} partition level(s), {self._display_dir(p2)} has {d2}"
            )
        depth = next(iter(first_at_depth))
        keys = tuple(unquote(keys_by_depth[d][0]) for d in range(1, depth + 1))
        if len(set(keys)) != len(keys):
            raise InvalidTableLayoutError(f"partition key repeated in the folder path: {'/'.join(keys)}")

        partitions: dict[str, list[DataFile]] = {}
        for directory, children in subdirs.items():
            at_depth = (len(directory.split("/")) if directory else 0) == depth
            if at_depth and not children:
                partitions[directory] = sorted(files.get(directory, []), key=lambda f: f.path)
        return Listing(keys=keys, partitions=partitions)

    def _read_footers(self, files: list[DataFile], max_threads: int, fetch: FetchFooters | None = None) -> list[Footer]:
        """(rows, schema) of every file: from the footer cache for local files
        unchanged since they were last read (same path, size and nanosecond
        modification time), else read (by ``fetch`` if it takes them, else here)."""
        cacheable = isinstance(self._fs, pafs.LocalFileSystem)
        keys = [(f.path, f.size, f.mtime_ns) if cacheable and f.mtime_ns is not None else None for f in files]
        found = [_FOOTERS.get(k) if k is not None else None for k in keys]
        missing = [f for f, hit in zip(files, found) if hit is None]
        got = fetch(self._footer_reader(), [f.path for f in missing]) if fetch is not None and missing else None
        if got is None:
            got = read_footers(missing, self._read_footer, local=cacheable, max_threads=max_threads)
        read = iter(got)
        out = [hit if hit is not None else next(read) for hit in found]
        with _FOOTERS_LOCK:  # sources may be opened from several threads (the Flight server)
            for k, hit, footer in zip(keys, found, out):
                if k is not None and hit is None:
                    _FOOTERS[k] = footer
            while len(_FOOTERS) > _FOOTER_CACHE_SIZE:
                del _FOOTERS[next(iter(_FOOTERS))]  # the oldest entry
        return out

    def _footer_reader(self) -> FooterReader:
        return FooterReader(self._fs, self.uri, self._root)

    def _read_footer(self, data_file: DataFile) -> Footer:
        return self._footer_reader().read(data_file.path)

    def _fingerprint(self) -> str:
        entries: list[tuple[Any, ...]] = []
        for partition in self._partitions:
            if not partition.files:
                # An empty partition is still a partition: adding one changes the result.
                entries.append((partition.key + "/", 0, None))
            entries.extend(file_entry(self._relative(f.path), f) for f in partition.files)
        entries.sort(key=lambda e: e[0])
        digest = hashlib.sha256(json.dumps(entries, separators=(",", ":")).encode("utf-8"))
        return digest.hexdigest()[:32]

    # ------------------------------------------------------------------ reading

    def _projection(self, columns: list[str]) -> pa.Schema:
        return projected_schema(self.uri, self._schema, columns)

    def column_bounds(self, partition: Partition, columns: list[str]) -> dict[str, tuple[pa.Scalar, pa.Scalar] | None]:
        """From the row-group statistics of the partition's footers (and its key for
        partition columns); a column some row group has no statistics for is unknown."""
        target = self._projection(columns)
        out: dict[str, tuple[pa.Scalar, pa.Scalar] | None] = {}
        for name, scalar in self._partition_constants(partition, target).items():
            out[name] = None if not scalar.is_valid else (scalar, scalar)
        # top-level columns only ("a.b" could also name field b of a struct a)
        wanted = {f.name: f.type for f in target if f.name not in out and exact_footer_bounds(f.type) and "." not in f.name}
        found: dict[str, list[Any]] = {name: [] for name in wanted}  # per column: min/max Python values
        try:
            for data_file in partition.files:
                with self._fs.open_input_file(data_file.path) as handle:
                    md = pq.ParquetFile(handle).metadata
                paths = {md.schema.column(i).path: i for i in range(md.num_columns) if md.schema.column(i).max_repetition_level == 0}
                for name in list(found):
                    i = paths.get(name)
                    for rg in range(md.num_row_groups if i is not None else 0):
                        chunk = md.row_group(rg).column(i)
                        st = chunk.statistics
                        if st is not None and st.has_null_count and st.null_count == chunk.num_values:
                            continue  # only nulls here
                        if st is None or not st.has_min_max:
                            del found[name]  # unknown
                            break
                        found[name] += [st.min, st.max]
        except (OSError, pa.ArrowException):
            return out  # a guess only: reading the data reports the problem
        for name, values in found.items():
            if not values:
                out[name] = None
                continue
            try:
                arr = pa.array(values, type=wanted[name])
                if mt.is_floating(arr.type) and pc.any(pc.is_nan(arr)).as_py():
                    continue
                if mt.is_duration(arr.type):  # min_max has no duration kernel
                    lo, hi = (pa.scalar(v, arr.type) for v in pc.min_max(arr.cast(pa.int64())).values())
                else:
                    lo, hi = pc.min_max(arr).values()
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                continue
            out[name] = (lo, hi)
        return out

    def _partition_constants(self, partition: Partition, target: pa.Schema) -> dict[str, pa.Scalar]:
        values = dict(partition.values)
        constants: dict[str, pa.Scalar] = {}
        for f in self._partition_fields:
            if f.name not in target.names:
                continue
            if f.name in self._in_file_keys:
                constants[f.name] = self._folder_values[partition.key][f.name]
                continue
            raw = values.get(f.name)
            value = None if raw is None else (int(raw) if mt.is_integer(f.type) else raw)
            constants[f.name] = pa.scalar(value, type=f.type)
        return constants

    def _read_file(
        self,
        data_file: DataFile,
        data_columns: list[str],
        target: pa.Schema,
        constants: dict[str, pa.Scalar],
        batch_size: int,
        dictionary: list[str] = [],  # noqa: B006 - never mutated
        row_groups: RowGroupSelector | None = None,
        *,
        checks: dict[str, pa.Scalar] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """``checks``: partition columns the files hold, with their folder's value: read from a
        file that has the column and checked against it (an InvalidFileError naming the file
        where a row disagrees), that value for a file without it."""
        display = self._display(data_file.path)
        try:
            with self._fs.open_input_file(data_file.path) as handle:
                # pre-buffering coalesces a row group's column reads into few large
                # requests (object stores); on a local disk it is one more copy (~10% of
                # reading a float column)
                pre_buffer = not isinstance(self._fs, pafs.LocalFileSystem)
                parquet_file = pq.ParquetFile(handle, pre_buffer=pre_buffer)
                file_schema = parquet_file.schema_arrow
                present = [c for c in data_columns if c in file_schema.names]
                checked = {n: v for n, v in (checks or {}).items() if n in present}
                if checks and len(checked) < len(checks):  # a file without the column: the folder's value
                    constants = {**constants, **{n: v for n, v in checks.items() if n not in checked}}
                coded = [
                    c
                    for c in dictionary
                    if c in present and _is_string(file_schema.field(c).type) and small_dictionary_codes(parquet_file.metadata, c)
                ]
                if coded:  # the footer is parsed already: reopen with it
                    parquet_file = pq.ParquetFile(handle, pre_buffer=pre_buffer, read_dictionary=coded, metadata=parquet_file.metadata)
                for name in present:
                    file_type = normalize_type(file_schema.field(name).type)
                    if not is_promotable(file_type, target.field(name).type):
                        raise SchemaDriftError(
                            f"column {name!r}: type {file_type} in {display} cannot be read as "
                            f"{target.field(name).type} (the file changed after the table was listed)"
                        )
                # Selecting by name may bring extra columns when a top-level name containing
                # dots shadows a nested path ("a.b" vs struct a.b); they are dropped below.
                groups = row_groups(handle, parquet_file.metadata) if row_groups is not None else None
                if groups is not None and not groups:
                    return
                offset = 0
                for batch in read_batches_of(parquet_file, batch_size, present, groups):
                    assembled = self._assemble(batch, target, constants, coded)
                    for name, expected in checked.items():
                        _check_partition_values(display, name, assembled.column(name), expected, offset)
                    offset += batch.num_rows
                    yield assembled
        except FileNotFoundError as exc:
            raise InvalidFileError(f"{display}: vanished since the table was listed") from exc
        except (pa.ArrowException, OSError) as exc:
            raise InvalidFileError(f"{display}: cannot be read: {exc}") from exc

    @staticmethod
    def _assemble(
        batch: pa.RecordBatch,
        target: pa.Schema,
        constants: dict[str, pa.Scalar],
        coded: list[str] = [],  # noqa: B006
    ) -> pa.RecordBatch:
        rows = batch.num_rows
        if not target:
            return batch.select([])  # no columns, but the row count survives (from_arrays would lose it)
        names = set(batch.schema.names)
        arrays: list[pa.Array] = []
        fields: list[pa.Field] = []
        for f in target:
            if f.name in constants:
                scalar = constants[f.name]
                arrays.append(pa.nulls(rows, f.type) if not scalar.is_valid else pa.repeat(scalar, rows))
            elif f.name in coded and mt.is_dictionary(batch.schema.field(f.name).type):
                array = conform_dictionary(batch.column(f.name), f.type)
                arrays.append(array)
                fields.append(f.with_type(array.type))
                continue
            elif f.name in names:
                arrays.append(conform_array(batch.column(f.name), f.type))
            else:  # a column added after this file was written
                arrays.append(pa.nulls(rows, f.type))
            fields.append(f)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, target.metadata) if coded else target)


#: pyarrow's words when a batch of a nested column would need more than 2 GiB of one buffer
_CHUNKED_NESTED = "Nested data conversions not implemented for chunked array outputs"
#: the bytes of a batch read after that error (the rows of one are chosen from the row groups' sizes)
_FALLBACK_BATCH_BYTES = 1 << 30


def read_batches_of(parquet_file: pq.ParquetFile, batch_size: int, columns: list[str], row_groups: Sequence[int] | None) -> Iterator[pa.RecordBatch]:
    """``parquet_file.iter_batches``, in smaller batches where a batch of ``batch_size`` rows
    cannot be read: pyarrow reads a nested column (a list, a map) of more than 2 GiB of
    strings only as chunks, which it cannot turn into one array ("Nested data conversions
    not implemented for chunked array outputs"). The read then starts again with batches of
    about 1 GiB (from the row groups' sizes; halved while it still fails, down to one row),
    skipping the rows already yielded."""
    done, size = 0, batch_size
    while True:
        skip = done
        try:
            for batch in parquet_file.iter_batches(batch_size=size, columns=columns, row_groups=row_groups):
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                if skip:
                    batch, skip = batch.slice(skip), 0
                done += batch.num_rows
                yield batch
            return
        except pa.ArrowNotImplementedError as exc:
            if _CHUNKED_NESTED not in str(exc) or size <= 1:
                raise
            size = max(1, min(size // 2, _rows_in(parquet_file.metadata, _FALLBACK_BATCH_BYTES)))


def _rows_in(metadata: pq.FileMetaData, nbytes: int) -> int:
    """About how many rows of the file's largest rows (by row group) take ``nbytes`` uncompressed."""
    widest = max((rg.total_byte_size / rg.num_rows for rg in map(metadata.row_group, range(metadata.num_row_groups)) if rg.num_rows), default=0.0)
    return max(1, int(nbytes // widest)) if widest else 1


def _folder_scalar(raw: str | None, field: pa.Field, folder: str) -> pa.Scalar:
    """A partition folder's value as the type the files give its column."""
    if raw is None:
        return pa.scalar(None, field.type)
    try:
        return pa.array([raw], pa.string()).cast(field.type)[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InvalidTableLayoutError(
            f"{folder}: partition value {raw!r} of column {field.name!r} is not a {field.type} (its type in the data files)"
        ) from None


def _check_partition_values(display: str, name: str, values: pa.Array, expected: pa.Scalar, offset: int) -> None:
    """An InvalidFileError naming the file and row where a partition column the file holds
    differs from its folder's value (null and the folder's ``__HIVE_DEFAULT_PARTITION__`` agree; NaN and NaN too)."""
    if not expected.is_valid:
        bad = pc.is_valid(values)
    else:
        same = pc.equal(values, expected)
        if mt.is_floating(values.type) and expected.as_py() != expected.as_py():
            same = pc.is_nan(values)
        bad = pc.invert(pc.fill_null(same, False))
    if not pc.any(bad).as_py():
        return
    row = pc.index(bad, True).as_py()
    found, folder = _short(values[row].as_py()), _short(expected.as_py())
    raise InvalidFileError(f"{display}: partition column {name!r} holds {found} (row {offset + row}), its folder says {folder}")


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_string(t: pa.DataType) -> bool:
    return mt.is_offset_string(t)


#: Data bytes per value (uncompressed) up to which a column chunk is taken to hold only
#: dictionary codes: a PLAIN string takes at least 4 (its length). Only a guess for
#: speed: either way the values read are the same.
SMALL_CODES_BYTES_PER_VALUE = 3.0


def small_dictionary_codes(metadata: pq.FileMetaData, column: str) -> bool:
    """Whether every row group stores ``column`` (a top-level leaf) as a dictionary with
    small codes: reading it as an Arrow dictionary then skips decoding every row (1.7
    against 5.2 ms for a partition of the bench table's 1,000 categories), and counting
    its values is a bincount of the codes. A chunk that fell back to plain pages
    (high cardinality) is several bytes a value, and is read decoded: Arrow would
    otherwise build a dictionary of it by hashing every value."""
    try:
        index = metadata.schema.names.index(column)
    except ValueError:
        return False
    for r in range(metadata.num_row_groups):
        chunk = metadata.row_group(r).column(index)
        if chunk.path_in_schema != column or not chunk.has_dictionary_page:
            return False
        # the dictionary page's stored size stands in for its own (larger) uncompressed size
        dictionary_page = max(0, (chunk.data_page_offset or 0) - (chunk.dictionary_page_offset or 0))
        if chunk.total_uncompressed_size - dictionary_page > SMALL_CODES_BYTES_PER_VALUE * max(chunk.num_values, 1):
            return False
    return metadata.num_row_groups > 0


def _decode_partition_key(key: str, display: str) -> tuple[tuple[str, str | None], ...]:
    if not key:
        return ()
    values: list[tuple[str, str | None]] = []
    for part in key.split("/"):
        raw_key, _, raw_value = part.partition("=")
        if not raw_value:
            raise InvalidTableLayoutError(f"{display}: empty partition value in {part!r}")
        values.append((unquote(raw_key), None if raw_value == HIVE_DEFAULT_PARTITION else unquote(raw_value)))
    return tuple(values)


def _is_int64(value: str) -> bool:
    return _INT_RE.fullmatch(value) is not None and _INT64_MIN <= int(value) <= _INT64_MAX


def _infer_partition_fields(keys: tuple[str, ...], decoded: Iterable[tuple[tuple[str, str | None], ...]]) -> list[pa.Field]:
    all_values = list(decoded)
    fields: list[pa.Field] = []
    for i, key in enumerate(keys):
        values = [v[i][1] for v in all_values if v]
        non_null = [v for v in values if v is not None]
        is_int = bool(non_null) and all(_is_int64(v) for v in non_null)
        fields.append(pa.field(key, pa.int64() if is_int else pa.string(), nullable=True))
    return fields


def exact_footer_bounds(t: pa.DataType) -> bool:
    """Types whose footer statistics convert exactly (nanosecond timestamps do not: the
    statistics come back as Python datetimes, which hold microseconds)."""
    if mt.is_timestamp(t) or mt.is_time(t) or mt.is_duration(t):
        return t.unit != "ns"
    return is_numeric(t) or mt.is_date(t)


def file_entry(relative_path: str, f: DataFile) -> tuple[Any, ...]:
    """What identifies a data file's content in snapshot ids and partition fingerprints:
    (path, size, mtime_ns), plus the ETag where the store gives one (files of local
    tables keep their three-element entries, so their identities are unchanged)."""
    return (relative_path, f.size, f.mtime_ns) if f.etag is None else (relative_path, f.size, f.mtime_ns, f.etag)


log = logging.getLogger("engine.sources")


def _s3_etags(root: str) -> dict[str, str]:
    """``{pyarrow path ("bucket/key"): ETag}`` of every object under ``root`` (one paginated
    listing). Without them a change is still seen by size or time; a listing that fails
    leaves them out (the pyarrow listing, which needs the same permission, succeeded)."""
    bucket, _, prefix = root.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    out: dict[str, str] = {}
    try:
        pages = fileio.s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                out[f"{bucket}/{obj['Key']}"] = str(obj.get("ETag", "")).strip('"')
    except Exception as exc:  # noqa: BLE001 - boto3 raises many types
        log.warning("s3://%s: no ETags for the table's files (%s); changes are detected by size and time only", root, exc)
        return {}
    return out
