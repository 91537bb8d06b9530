"""The file index of an Iceberg partition: per data file, what its manifest entry records
(record count, and by field id null counts, NaN counts, column sizes, lower and upper
bounds), without opening the file; the footer (columns matched by field id) for columns
the manifest has no bounds of (metrics mode ``counts`` or ``none``, a bound that does not
decode); the values of Bloom columns read through pyiceberg (positional deletes applied).

Manifest bounds are bounds, as the index needs: a truncated string's lower bound is a
prefix, its upper bound a prefix with the last character incremented (Iceberg's
``truncate``). A file with delete files keeps its manifest counts and bounds (those of
the rows it was written with: a superset of its live rows), as a Delta file with a
deletion vector keeps its footer's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq

from engine import types as mt
from engine import values as value_forms
from engine.columns import LeafColumn
from engine.fileindex.build import (
    DEFAULT_BLOOM_FPR,
    FileColumnStats,
    IndexColumns,
    IndexedFile,
    PartitionFileIndex,
    bloom_of,
    footer_column_stats,
    partition_index,
    value_column_stats,
)

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask
    from pyiceberg.types import IcebergType, PrimitiveType

    from engine.sources.base import Partition
    from engine.sources.iceberg import IcebergSource


V = TypeVar("V")


def build_iceberg_index(source: IcebergSource, partition: Partition, cols: IndexColumns, bloom_fpr: float = DEFAULT_BLOOM_FPR) -> PartitionFileIndex:
    """The index of one partition of an ``IcebergSource`` (engine/sources/iceberg.py)."""
    schema = source.iceberg_schema
    ids = {leaf.name: _field_id(schema, leaf) for leaf in cols.leaves}
    files = [_indexed(source, task, cols, ids, bloom_fpr) for task in source.scan_tasks(partition)]
    return partition_index(partition.key, files, cols, bloom_fpr)


def _field_id(schema: Schema, leaf: LeafColumn) -> int | None:
    """The Iceberg field id of a leaf of primitive type outside lists and maps (None: no metrics)."""
    try:
        field = schema.find_field(".".join(leaf.full_path))
    except ValueError:
        return None
    return field.field_id if field.field_type.is_primitive else None


def _indexed(source: IcebergSource, task: FileScanTask, cols: IndexColumns, ids: dict[str, int | None], bloom_fpr: float) -> IndexedFile:
    f = task.file
    stats: dict[str, FileColumnStats] = {}
    lacking: list[LeafColumn] = []
    for leaf in cols.leaves:
        fid = ids[leaf.name]
        if fid is None:
            continue
        got = manifest_column_stats(f, leaf, fid, source.iceberg_schema.find_field(fid).field_type)
        if got is None or not got.bounded:
            lacking.append(leaf)
        if got is not None:
            stats[leaf.name] = got
    if lacking:
        stats.update(_footer_stats(source, f.file_path, lacking, ids, stats, int(f.record_count)))
    blooms = []
    wanted = list(cols.read_values)
    if wanted:
        tops = list(dict.fromkeys(leaf.top for leaf in wanted))
        batches = list(source.file_batches(task, tops))
        table = pa.Table.from_batches(batches) if batches else None
        for leaf in wanted:
            if table is None:
                continue
            arr = leaf.extract(table.column(leaf.top).combine_chunks())
            stats[leaf.name] = value_column_stats(arr, leaf.name, stats[leaf.name].bytes if leaf.name in stats else None)
            if leaf.name in cols.bloom_columns:
                blooms.append(bloom_of(arr, leaf.name, bloom_fpr))
    return IndexedFile(
        path=f.file_path,
        rows=int(f.record_count),
        size=int(f.file_size_in_bytes),
        columns=tuple(stats[leaf.name] for leaf in cols.leaves if leaf.name in stats),
        blooms=tuple(blooms),
    )


def manifest_column_stats(f: DataFile, leaf: LeafColumn, fid: int, iceberg_type: IcebergType) -> FileColumnStats | None:
    """One column of one data file from its manifest entry ``f`` (None: the entry has nothing
    of it; ``bounded`` False: counts without usable bounds)."""
    t = mt.without_dictionary(leaf.type)
    nulls = _get(f.null_value_counts, fid)
    nans = _get(f.nan_value_counts, fid) if mt.is_floating(t) else 0
    size = _get(f.column_sizes, fid)
    lo, hi = _get(f.lower_bounds, fid), _get(f.upper_bounds, fid)
    lower = upper = None
    bounded = value_forms.has_text_form(t)
    if bounded:
        if lo is not None and hi is not None:
            lower, upper = _bound(iceberg_type, lo, t), _bound(iceberg_type, hi, t)
            bounded = lower is not None and upper is not None
            if not bounded:
                lower = upper = None
        elif not (nulls is not None and nulls + (nans or 0) >= int(f.record_count)):
            bounded = False  # no bounds, and not because the file has no such value
    if nulls is None and size is None and not bounded and lo is None:
        return None
    return FileColumnStats(leaf.name, nulls, nans, lower, upper, size, bounded)


def _get(counts: Mapping[int, V] | None, fid: int) -> V | None:
    if not counts:
        return None
    value = counts.get(fid)
    return None if value is None else value


def _bound(iceberg_type: IcebergType, raw: bytes, t: pa.DataType) -> str | None:
    """A manifest bound (Iceberg's single-value serialization) as the text form of a value of
    the column's Arrow type ``t``; None when it does not convert exactly."""
    from pyiceberg.conversions import from_bytes

    try:  # pyiceberg reads a 4-byte bound of a long (double) as the int (float) it was before a promotion
        value = from_bytes(cast("PrimitiveType", iceberg_type), raw)  # fields with metrics are primitive (_field_id)
        scalar = _scalar(value, t)
    except Exception:  # noqa: BLE001 - a bound that does not convert is unknown, never wrong
        return None
    return None if scalar is None else value_forms.encode_scalar(scalar)


def _scalar(value: Any, t: pa.DataType) -> pa.Scalar | None:
    if isinstance(value, float) and math.isnan(value):
        return None
    if mt.is_date32(t) and isinstance(value, int):
        return pa.array([value], pa.int32()).view(t)[0]
    if (mt.is_timestamp(t) or mt.is_time64(t)) and isinstance(value, int):
        if t.unit not in ("us", "ns"):
            return None  # Iceberg's are micro- or nanoseconds; the type says which
        return pa.array([value], pa.int64()).view(t)[0]
    if mt.is_fixed_size_binary(t) and (not isinstance(value, (bytes, bytearray)) or len(value) != t.byte_width):
        return None  # a truncated bound of a fixed-width value
    if mt.is_temporal(t):
        return None
    if mt.is_offset_string(t):
        return pa.scalar(value, pa.string()) if isinstance(value, str) else None
    if mt.is_offset_binary(t) or mt.is_fixed_size_binary(t):
        return pa.scalar(bytes(value), t) if isinstance(value, (bytes, bytearray)) else None
    return pa.scalar(value, t)


def _footer_stats(
    source: IcebergSource, path: str, leaves: Sequence[LeafColumn], ids: dict[str, int | None], known: dict[str, FileColumnStats], rows: int
) -> dict[str, FileColumnStats]:
    """Stats of ``leaves`` from the file's footer, its columns matched by field id (a renamed
    column by its id, not its name); the manifest's counts kept where the footer has none. A
    column the manifest has nothing of and the file does not hold (added to the table after
    the file was written, without an initial default) is null in every row of it. A file that
    is not Parquet, or without field ids, gives nothing."""
    out = {}
    try:
        with source.open_data_file(path) as handle:
            pf = pq.ParquetFile(handle)
            by_id = _paths_by_field_id(pf.schema_arrow)
            every_id = all(b"PARQUET:field_id" in (f.metadata or {}) for f in pf.schema_arrow)
            for leaf in leaves:
                fid = ids[leaf.name]
                if every_id and fid not in by_id and leaf.name not in known and _no_default(source, fid):
                    out[leaf.name] = FileColumnStats(leaf.name, rows, 0, None, None, 0, True)  # absent: all null
            renamed = {}
            for leaf in leaves:
                fid = ids[leaf.name]
                name = by_id.get(fid) if fid is not None else None
                if name is not None:
                    renamed[name] = leaf
            found = footer_column_stats(pf.metadata, [dataclasses.replace(leaf, name=name) for name, leaf in renamed.items()])
    except Exception:  # noqa: BLE001 - ORC / Avro data files, unreadable footers: the manifest's counts only
        return {}
    for name, st in found.items():
        leaf = renamed[name]
        manifest = known.get(leaf.name)
        nulls = manifest.nulls if manifest is not None and manifest.nulls is not None else st.nulls
        nans = manifest.nans if manifest is not None and manifest.nans is not None else st.nans
        out[leaf.name] = dataclasses.replace(st, column=leaf.name, nulls=nulls, nans=nans)
    return out


def _no_default(source: IcebergSource, fid: int | None) -> bool:
    field = source.iceberg_schema.find_field(cast(int, fid))  # None raises ValueError, like an unknown id (caught by the caller)
    return getattr(field, "initial_default", None) is None


def _paths_by_field_id(schema: pa.Schema) -> dict[int, str]:
    """Field id -> the Parquet column path (dotted) of every leaf outside lists and maps."""
    out: dict[int, str] = {}

    def walk(field: pa.Field, prefix: str) -> None:
        path = f"{prefix}{field.name}"
        if mt.is_struct(field.type):
            for i in range(field.type.num_fields):
                walk(field.type.field(i), path + ".")
            return
        fid = (field.metadata or {}).get(b"PARQUET:field_id")
        if fid is not None:
            out[int(fid)] = path

    for f in schema:
        walk(f, "")
    return out
