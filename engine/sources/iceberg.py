"""An Iceberg table, as pyiceberg's scan plan of one snapshot says it is.

The table comes from a catalog (``catalog=NAME``: pyiceberg's own configuration,
``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__NAME__...`` variables, so REST, Glue,
Hive and SQL catalogs all work, with ``uri`` the table identifier ``db.table``) or
from a metadata file / table location (pyiceberg ``StaticTable``; a location means
its newest ``metadata/*.metadata.json``).

The files are those of the chosen snapshot's scan plan (``plan_files``), so a
file an overwrite replaced or a snapshot expired is never read. Rows are read
through pyiceberg's own reader (``ArrowScan``) one partition's tasks at a time,
so positional delete files are applied exactly as pyiceberg applies them.
Equality delete files, which pyiceberg's planner refuses, are taken out of its plan
and applied here (engine/sources/iceberg_deletes.py: the spec's sequence-number and
partition rules, null equal to null). Each
Iceberg partition (identity or transform, of any partition spec: partition
evolution gives the files of an older spec their own partitions) is one of our
partitions, keyed by Iceberg's partition path (``category=a/ts_day=2024-01-05``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine.exceptions import (
    InvalidArgumentError,
    InvalidTableLayoutError,
    SnapshotNotFoundError,
    TableNotFoundError,
    UnsupportedTableFeatureError,
    first_line,
)
from engine.sources import iceberg_deletes
from engine.sources.base import (
    DEFAULT_BATCH_SIZE,
    DataFile,
    Partition,
    TableSource,
    default_table_name,
    projected_schema,
)
from engine.sources.fingerprints import partition_fingerprint
from engine.sources.footers import FetchFooters
from engine.sources.formats import SnapshotSelector, newest_metadata_file
from engine.sources.locations import Locations
from engine.sources.parquet import exact_footer_bounds, small_dictionary_codes
from engine.sources.schema import conform_array, conform_dictionary

if TYPE_CHECKING:
    from pyiceberg.io import InputStream
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.types import PrimitiveType

__all__ = ["IcebergSource", "load_table", "open_source", "snapshots_since"]


class _DictionaryNotice(logging.Filter):
    """pyiceberg warns, for every file read with ``dictionary_columns``, that Iceberg has no
    dictionary type: asked for on purpose here (the values are the same), so no line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "does not have a dictionary type" not in record.getMessage()


_DICTIONARY_NOTICE = _DictionaryNotice()


def load_table(uri: str, catalog: str | None = None) -> Table:
    """The pyiceberg table: ``catalog`` + identifier, or a metadata file or table location."""
    from pyiceberg.exceptions import NoSuchTableError

    if catalog is not None:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.utils.config import Config

        try:
            # pyiceberg's configuration read now (it caches the one of its import time), so a
            # changed .pyiceberg.yaml or PYICEBERG_CATALOG__* variable is seen
            # Any: pyiceberg's catalog settings nest (RecursiveDict); load_catalog takes them as they are
            properties: dict[str, Any] = Config().get_catalog_config(catalog) or {}
            return load_catalog(catalog, **properties).load_table(uri)
        except NoSuchTableError:
            raise TableNotFoundError(f"Iceberg catalog {catalog!r}: no table {uri!r}") from None
        except (ValueError, OSError, KeyError) as exc:
            raise InvalidArgumentError(f"Iceberg catalog {catalog!r}: cannot load {uri!r}: {first_line(exc)}") from None
    from pyiceberg.table import StaticTable

    metadata = uri if uri.endswith(".metadata.json") else newest_metadata_file(uri)
    if metadata is None:
        raise TableNotFoundError(f"{uri}: no Iceberg metadata (metadata/*.metadata.json) here")
    try:
        return StaticTable.from_metadata(_pyiceberg_location(metadata), properties=fileio.pyiceberg_properties(uri))
    except FileNotFoundError:
        raise TableNotFoundError(f"{uri}: Iceberg metadata file {metadata} does not exist") from None
    except Exception as exc:  # noqa: BLE001 - pydantic, JSON and I/O errors alike: the metadata is damaged
        raise InvalidTableLayoutError(f"{uri}: Iceberg metadata {metadata} unreadable: {first_line(exc)}") from None


def _pyiceberg_location(uri: str) -> str:
    if fileio.is_local(uri):
        return "file://" + fileio.resolve(uri)[1]
    return "s3://" + uri.split("://", 1)[1] if uri.startswith(("s3a://", "s3n://")) else uri


def _snapshot(table: Table, uri: str, selector: SnapshotSelector) -> Snapshot | None:
    if selector.at_snapshot is not None:
        try:
            snapshot = table.snapshot_by_id(int(selector.at_snapshot))
        except ValueError:
            snapshot = None
        if snapshot is None:
            raise SnapshotNotFoundError(f"{uri}: Iceberg snapshot {selector.at_snapshot} does not exist")
        return snapshot
    if selector.as_of_ms is not None:
        snapshot = table.snapshot_as_of_timestamp(selector.as_of_ms)
        if snapshot is None:
            raise SnapshotNotFoundError(f"{uri}: no Iceberg snapshot at or before {selector.as_of_ms} ms")
        return snapshot
    return table.current_snapshot()


def _to_table_type(t: pa.DataType) -> pa.DataType:
    """pyiceberg reads strings and binaries as their large variants; statistics keep the
    plain ones (what a Parquet directory of the same data gives)."""
    if t == pa.large_string():
        return pa.string()
    if t == pa.large_binary():
        return pa.binary()
    return t


def snapshots_since(uri: str, snapshot_id: str, catalog: str | None = None) -> int | None:
    """Snapshots in the current snapshot's lineage after ``snapshot_id`` (metadata only)."""
    from pyiceberg.table.snapshots import ancestors_of

    latest = load_table(uri, catalog)
    count = 0
    for snapshot in ancestors_of(latest.current_snapshot(), latest.metadata):
        if str(snapshot.snapshot_id) == snapshot_id:
            return count
        count += 1
    return None


class IcebergSource(TableSource):
    """The live rows of one snapshot of an Iceberg table (local or ``s3://``)."""

    def __init__(
        self, uri: str, name: str | None = None, selector: SnapshotSelector | None = None, catalog: str | None = None, data_roots: Sequence[str] = ()
    ) -> None:
        """``data_roots``: where data and delete files may lie besides the table's location (engine/sources/locations.py)."""
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        selector = selector or SnapshotSelector()
        table = load_table(uri, catalog)
        self._catalog = catalog
        self._identifier = uri
        # a catalog's table is recorded by its location: show and the server reopen it by that
        # (its newest metadata file) to tell how stale the statistics are
        self.uri = str(table.location()).rstrip("/") if catalog is not None else uri.rstrip("/")
        self.name = name or (
            uri.rsplit(".", 1)[-1] if catalog is not None else default_table_name(self.uri.removesuffix(".metadata.json").split("/metadata/")[0])
        )
        snapshot = _snapshot(table, self.uri, selector)
        # a snapshot's own schema: an older snapshot is read as it was written
        schema = table.schemas().get(snapshot.schema_id) if snapshot is not None and snapshot.schema_id is not None else None
        self._iceberg_schema = schema or table.schema()
        arrow = schema_to_pyarrow(self._iceberg_schema, include_field_ids=False)
        self._schema = pa.schema([pa.field(f.name, _to_table_type(f.type), nullable=f.nullable) for f in arrow])
        self._partition_fields = []
        self._metadata = table.metadata
        self._io = table.io
        self._snapshot_id = "" if snapshot is None else str(snapshot.snapshot_id)
        self._tasks: dict[str, list[FileScanTask]] = {}
        #: data file path -> the equality delete files that apply to it (only files with some)
        self._equality: dict[str, tuple[iceberg_deletes.EqualityDelete, ...]] = {}
        #: data file path -> its string columns stored as small dictionary codes, field id ->
        #: the file's name of it (filled as files are read)
        self._small_codes: dict[str, dict[int, str]] = {}
        partitions: dict[str, tuple[tuple[str, str | None], ...]] = {}
        if snapshot is not None:
            specs = table.specs()
            tasks, seen = self._plan(table, snapshot, specs)
            self._check_locations(tasks, seen, data_roots)
            for task in tasks:
                spec = specs[task.file.spec_id]
                key = spec.partition_to_path(task.file.partition, self._iceberg_schema) if spec.fields else ""
                self._tasks.setdefault(key, []).append(task)
                if deletes := seen.for_data_file(task.file):
                    self._equality[task.file.file_path] = deletes
                partitions[key] = tuple(
                    (f.name, None if v is None else str(v)) for f, v in zip(spec.fields, cast("Iterable[object]", task.file.partition))
                )  # a Record iterates its values
        self._partitions = [
            Partition(
                key=key,
                values=partitions[key],
                files=tuple(
                    DataFile(
                        path=t.file.file_path,
                        size=int(t.file.file_size_in_bytes),
                        mtime_ns=None,
                        num_rows=None if t.delete_files or t.file.file_path in self._equality else int(t.file.record_count),
                    )
                    for t in sorted(self._tasks[key], key=lambda t: t.file.file_path)
                ),
            )
            for key in sorted(self._tasks)
        ]

    def _check_locations(self, tasks: list[FileScanTask], seen: iceberg_deletes.EqualityDeletes, data_roots: Sequence[str]) -> None:
        """Every data and delete file the manifests name inside the table (or a data root), before any is read."""
        locations = Locations(self.uri.removesuffix(".metadata.json").split("/metadata/")[0], data_roots)
        for task in tasks:
            locations.check(task.file.file_path, f"Iceberg manifest entry (data file) {task.file.file_path!r}")
            for d in task.delete_files:
                locations.check(d.file_path, f"Iceberg manifest entry (delete file) {d.file_path!r}")
        for e in seen.deletes:
            locations.check(e.path, f"Iceberg manifest entry (equality delete file) {e.path!r}")

    def _plan(self, table: Table, snapshot: Snapshot, specs: dict[int, PartitionSpec]) -> tuple[list[FileScanTask], iceberg_deletes.EqualityDeletes]:
        """pyiceberg's scan plan of the snapshot, without its equality delete files, and
        those (with every data file's data sequence number) to apply here."""
        seen = iceberg_deletes.EqualityDeletes()
        scan = table.scan(snapshot_id=snapshot.snapshot_id)
        try:
            if scan._should_use_server_side_planning():  # a REST catalog plans: it has no entry filter
                return list(scan.plan_files()), seen
            # pyiceberg 0.12's planner (DataScan._manifest_planner): its entry filter is the one
            # way to plan without the equality deletes it refuses
            unpartitioned = {spec_id for spec_id, spec in specs.items() if not spec.fields}
            planned = scan._manifest_planner.plan_files(snapshot.manifests(table.io), manifest_entry_filter=seen.entry_filter(unpartitioned))
            return list(planned), seen
        except NotImplementedError as exc:
            raise UnsupportedTableFeatureError(f"{self.uri}: Iceberg equality delete files in a server-side scan plan: {first_line(exc)}") from None
        except ValueError as exc:
            raise InvalidTableLayoutError(f"{self.uri}: Iceberg scan plan failed: {first_line(exc)}") from None
        except FileNotFoundError as exc:
            raise InvalidTableLayoutError(f"{self.uri}: Iceberg manifest missing: {first_line(exc)}") from None

    # ------------------------------------------------------------------ interface

    def partition_fingerprints(self) -> dict[str, str]:
        """Each partition's live data files with their delete files: an append, a rewrite,
        a removal or a new delete file in the partition changes it."""
        out = {}
        for key, tasks in self._tasks.items():
            out[key] = partition_fingerprint(
                (
                    t.file.file_path,
                    int(t.file.file_size_in_bytes),
                    None,
                    int(t.file.record_count),
                    sorted(
                        [f"{d.file_path}:{d.file_size_in_bytes}" for d in t.delete_files]
                        + [f"{d.path}:{d.size}" for d in self._equality.get(t.file.file_path, ())]
                    ),
                )
                for t in tasks
            )
        return out

    def snapshots_since(self, snapshot_id: str) -> int | None:
        return snapshots_since(self._identifier, snapshot_id, self._catalog)

    def column_bounds(self, partition: Partition, columns: list[str]) -> dict[str, tuple[pa.Scalar, pa.Scalar] | None]:
        """From the manifests' lower and upper bounds of the partition's data files (no file
        opened). Not for a partition with delete files (the bounds would include deleted
        rows), nor for a column some file has no bounds for (or bounds of a narrower type
        from before a promotion): those are unknown."""
        from pyiceberg.conversions import from_bytes

        tasks = self._tasks.get(partition.key, [])
        if not tasks or any(t.delete_files or t.file.file_path in self._equality for t in tasks):
            return {}
        by_name = {f.name: f for f in self._iceberg_schema.fields}
        out: dict[str, tuple[pa.Scalar, pa.Scalar] | None] = {}
        for name in columns:
            field = by_name.get(name)
            if field is None or name not in self._schema.names or not exact_footer_bounds(self._schema.field(name).type):
                continue
            target = self._schema.field(name).type
            values: list[Any] = []
            try:
                for task in tasks:
                    f = task.file
                    nulls = (f.null_value_counts or {}).get(field.field_id)
                    if nulls is not None and nulls == f.record_count:
                        continue  # only nulls in this file
                    lo, hi = (f.lower_bounds or {}).get(field.field_id), (f.upper_bounds or {}).get(field.field_id)
                    if lo is None or hi is None:
                        raise KeyError(name)
                    ptype = cast("PrimitiveType", field.field_type)  # bounds are kept for primitive fields only
                    values += [from_bytes(ptype, lo), from_bytes(ptype, hi)]
                if not values:
                    out[name] = None
                    continue
                if mt.is_date(target):
                    arr = pa.array(values, pa.int32()).cast(target)
                elif mt.is_timestamp(target) or mt.is_time(target):
                    arr = pa.array(values, pa.int64()).cast(target)
                else:
                    arr = pa.array(values, target)
                lo_s, hi_s = pc.min_max(arr).values()
            except Exception:  # noqa: BLE001 - a guess only: unknown
                continue
            out[name] = (lo_s, hi_s)
        return out

    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        """``dictionary``: string columns a data file (without deletes) stores as small
        dictionary codes come as Arrow dictionaries, as from a Parquet directory (pyiceberg's
        ``dictionary_columns``; without them a profile hashes every string again)."""
        target = projected_schema(self.uri, self._schema, columns)
        tasks = self._tasks.get(partition.key, [])
        if not tasks:
            return
        wanted = [c for c in dictionary if c in target.names and mt.is_string(target.field(c).type)]
        plain = [t for t in tasks if t.file.file_path not in self._equality]
        try:
            # consecutive files with the same coded columns share one reader: file order kept
            for coded, run in itertools.groupby(plain, key=lambda t: self._coded(t, wanted)):
                for batch in self._scan(columns, [], coded).to_record_batches(list(run)):
                    yield from self._pieces(batch, columns, target, batch_size)
            keys: dict[tuple[str, tuple[pa.DataType, ...]], pa.Table] = {}  # a delete file's keys, read once per call
            for task in tasks:
                deletes = self._equality.get(task.file.file_path)
                if not deletes:
                    continue
                names = iceberg_deletes.field_names(deletes, self._iceberg_schema, self.uri)
                for batch in self._scan(columns, names).to_record_batches([task]):
                    types = {n: batch.schema.field(n).type for n in names}
                    tables = []
                    for d in deletes:
                        at = (d.path, tuple(types[cast(str, self._iceberg_schema.find_column_name(i))] for i in d.equality_ids))  # ids of the schema
                        if at not in keys:
                            keys[at] = iceberg_deletes.read_keys(self._io, d, self._iceberg_schema, types, self.uri)
                        tables.append(keys[at])
                    yield from self._pieces(iceberg_deletes.apply(batch, tables), columns, target, batch_size)
        except FileNotFoundError as exc:
            raise InvalidTableLayoutError(f"{self.uri}: an Iceberg data or delete file is missing: {first_line(exc)}") from None

    def _coded(self, task: FileScanTask, wanted: list[str]) -> tuple[str, ...]:
        """The file's own names of the ``wanted`` columns that ``task``'s file stores as small
        dictionary codes in every row group, matched by field id (a renamed column's old
        name, not another column's). Its footer is read once per file and process, here and
        again by pyiceberg (a small read beside the file's; on S3 one more request a file). A
        file with positional deletes or without field ids, or not Parquet, reads decoded."""
        from pyiceberg.manifest import FileFormat

        if not wanted or task.delete_files or task.file.file_format != FileFormat.PARQUET:
            return ()
        path = task.file.file_path
        small = self._small_codes.get(path)
        if small is None:
            with self._io.new_input(path).open() as handle:
                metadata = pq.ParquetFile(handle).metadata
            small = {}
            for f in metadata.schema.to_arrow_schema():
                field_id = (f.metadata or {}).get(b"PARQUET:field_id")
                if field_id is not None and mt.is_offset_string(f.type) and small_dictionary_codes(metadata, f.name):
                    small[int(field_id)] = f.name
            self._small_codes[path] = small
        ids = (self._iceberg_schema.find_field(c).field_id for c in wanted)
        return tuple(small[i] for i in ids if i in small)

    def _scan(self, columns: list[str], more: list[str], coded: tuple[str, ...] = ()) -> ArrowScan:
        """pyiceberg's reader of ``columns`` (and ``more``, the equality delete columns),
        ``coded`` read as dictionaries."""
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan

        names = list(dict.fromkeys([*columns, *more])) or [self._iceberg_schema.fields[0].name]
        if coded:
            logging.getLogger("pyiceberg.io.pyarrow").addFilter(_DICTIONARY_NOTICE)  # the same filter once
        return ArrowScan(self._metadata, self._io, self._iceberg_schema.select(*names), AlwaysTrue(), dictionary_columns=coded)

    @staticmethod
    def _pieces(batch: pa.RecordBatch, columns: list[str], target: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
        """A reader's batch as ``batch_size`` pieces of the source's schema (extra columns
        dropped; a column read as dictionary codes stays so, its values in the schema's type)."""
        for offset in range(0, max(batch.num_rows, 1), batch_size):
            piece = batch.slice(offset, batch_size)
            if not columns:
                yield piece.select([])
                continue
            arrays = [
                conform_dictionary(piece.column(f.name), f.type)
                if mt.is_dictionary(piece.schema.field(f.name).type)
                else conform_array(piece.column(f.name), f.type)
                for f in target
            ]
            coded = any(mt.is_dictionary(a.type) for a in arrays)
            schema = pa.schema([f.with_type(a.type) for f, a in zip(target, arrays)], target.metadata) if coded else target
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    # ------------------------------------------------------------------ for the file index
    # (engine/fileindex/iceberg.py: per-file metrics from the manifests, values of Bloom columns)

    @property
    def iceberg_schema(self) -> Schema:
        """The pyiceberg schema of the analyzed snapshot."""
        return self._iceberg_schema

    def scan_tasks(self, partition: Partition) -> list[FileScanTask]:
        """pyiceberg's scan tasks of ``partition``'s data files, in the order of ``partition.files``
        (each ``task.file`` with its manifest metrics: counts, sizes, bounds by field id)."""
        return sorted(self._tasks.get(partition.key, []), key=lambda t: t.file.file_path)

    def open_data_file(self, path: str) -> InputStream:
        """A data file, open for reading through the table's FileIO (its footer)."""
        return self._io.new_input(path).open()

    def file_batches(self, task: FileScanTask, columns: list[str]) -> Iterator[pa.RecordBatch]:
        """The rows of one scan task's data file in the table's types (positional deletes
        applied; equality deletes not: a superset of its live rows)."""
        target = projected_schema(self.uri, self._schema, columns)
        for batch in self._scan(columns, []).to_record_batches([task]):
            yield from self._pieces(batch, columns, target, DEFAULT_BATCH_SIZE)


def open_source(
    uri: str, name: str | None, selector: SnapshotSelector, catalog: str | None, footers: FetchFooters | None, data_roots: Sequence[str]
) -> IcebergSource:
    """The table at ``uri`` (the table format registry's opener: engine/sources/registry.py)."""
    return IcebergSource(uri, name, selector, catalog, data_roots)
