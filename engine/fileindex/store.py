"""The file index on disk: three Parquet files laid out for partial reads (docs/FORMAT.md, "File index").

- ``file_index.parquet``: one row per data file (``file`` id, ``partition``, ``path``,
  ``rows``, ``size``): the only place a path is stored;
- ``file_ranges.parquet``: one row per (column, file), sorted by column (table order)
  then file: ``null_count``, ``nan_count``, ``min``, ``max`` (text forms), ``bytes``,
  ``bounded``. Row groups hold whole columns (consecutive columns packed up to
  ``RANGE_ROW_GROUP_ROWS`` rows), and the footer's ``metastore.file_index.columns`` maps
  each column to (row group, offset, count): a predicate on k columns reads at most k
  row groups, and of those only the columns it needs;
- ``file_blooms.parquet``: one row per (column, file) with a Bloom filter, same order and
  row-group rule; range-only planning never opens it.

``assemble`` turns partitions' ``PartitionFileIndex`` values into these three tables
(pure); ``write_file_index`` writes them into a directory; ``read_file_index`` reads
them back into partition values (for inheritance: the job re-assembles the table's index
from the new partitions and the inherited ones).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.types as pt

from engine import fileio
from engine import values as value_forms
from engine.columns import leaf_columns
from engine.fileindex.build import (
    FileBloom,
    FileColumnStats,
    IndexedFile,
    PartitionFileIndex,
)
from engine.files.writer import WrittenFile, write_parquet

FILES_FILE = "file_index.parquet"
RANGES_FILE = "file_ranges.parquet"
BLOOMS_FILE = "file_blooms.parquet"
INDEX_FILES = (FILES_FILE, RANGES_FILE, BLOOMS_FILE)
FORMAT_VERSION = 1

#: rows of a ranges / blooms row group (whole columns packed up to this; a larger column is one group)
RANGE_ROW_GROUP_ROWS = 16_384
BLOOM_ROW_GROUP_ROWS = 4_096
FILES_ROW_GROUP_ROWS = 4_096  # candidates' paths are read by row group

COLUMNS_KEY = "metastore.file_index.columns"  # {column: [row group, offset, count, form]}
PARTITIONS_KEY = "metastore.file_index.partitions"  # [[partition, first file id, files], ...]
VERSION_KEY = "metastore.file_index.version"
META_KEY = "metastore.file_index.meta"  # {"bloom_fpr":..., "bloom_columns": [...], "columns": [...]}

FILES_SCHEMA = pa.schema([("file", pa.int32()), ("partition", pa.string()), ("path", pa.string()), ("rows", pa.int64()), ("size", pa.int64())])
RANGES_SCHEMA = pa.schema(
    [
        ("column", pa.string()),
        ("file", pa.int32()),
        ("null_count", pa.int64()),
        ("nan_count", pa.int64()),
        ("min", pa.string()),
        ("max", pa.string()),
        ("min_int", pa.int64()),
        ("max_int", pa.int64()),
        ("min_float", pa.float64()),
        ("max_float", pa.float64()),
        ("bytes", pa.int64()),
        ("bounded", pa.bool_()),
    ]
)
#: how a column's bounds are stored: "int" (storage integer in min_int / max_int: integers
#: that fit int64, dates, times, timestamps, durations), "float" (min_float / max_float), or
#: "text" (the lossless text form in min / max: everything else)
INT, FLOAT, TEXT = "int", "float", "text"
BLOOMS_SCHEMA = pa.schema([("column", pa.string()), ("file", pa.int32()), ("values", pa.int64()), ("fpr", pa.float64()), ("words", pa.binary())])


@dataclass(frozen=True)
class FileIndexTables:
    """The three tables of a file index, sorted, with the footers' column maps."""

    files: pa.Table
    ranges: pa.Table
    blooms: pa.Table
    range_groups: list[int]  # rows per row group of ranges
    bloom_groups: list[int]
    range_columns: dict[str, tuple[int, int, int]]
    bloom_columns: dict[str, tuple[int, int, int]]
    meta: dict[str, object]


def assemble(parts: Sequence[PartitionFileIndex], schema: pa.Schema | None = None, columns: Sequence[str] | None = None) -> FileIndexTables:
    """The table's file index from its partitions' (in partition order; file ids in that order).
    ``schema``: the table's schema: bounds of integer-like and float columns are then stored
    as numbers (smaller, no text to decode when planning); without it, as text.
    ``columns``: the column order of the ranges (table order; default: first appearance)."""
    parts = sorted(parts, key=lambda p: p.partition)
    order = list(columns) if columns is not None else list(dict.fromkeys(c for p in parts for c in p.columns))
    files: dict[str, list] = {name: [] for name in FILES_SCHEMA.names}
    per_column: dict[str, list[tuple[int, FileColumnStats]]] = {c: [] for c in order}
    per_bloom: dict[str, list[tuple[int, FileBloom]]] = {c: [] for c in order}
    file_id = 0
    for part in parts:
        for f in part.files:
            files["file"].append(file_id)
            files["partition"].append(part.partition)
            files["path"].append(f.path)
            files["rows"].append(f.rows)
            files["size"].append(f.size)
            for s in f.columns:
                if s.column in per_column:
                    per_column[s.column].append((file_id, s))
            for b in f.blooms:
                if b.column in per_bloom:
                    per_bloom[b.column].append((file_id, b))
            file_id += 1
    types = {leaf.name: leaf.type for leaf in leaf_columns(schema)} if schema is not None else {}
    forms = {c: bound_form(types[c]) if c in types else TEXT for c in order}
    sections = []
    range_sizes = {}
    for c in order:
        range_sizes[c] = len(per_column[c])
        if not per_column[c]:
            continue
        section = {
            "column": [c] * len(per_column[c]),
            "file": [fid for fid, _ in per_column[c]],
            "null_count": [st.nulls for _, st in per_column[c]],
            "nan_count": [st.nans for _, st in per_column[c]],
            "bytes": [st.bytes for _, st in per_column[c]],
            "bounded": [st.bounded for _, st in per_column[c]],
        }
        lows = pa.array([st.lower for _, st in per_column[c]], pa.string())
        highs = pa.array([st.upper for _, st in per_column[c]], pa.string())
        n = len(lows)
        if forms[c] == TEXT:
            section.update(min=lows, max=highs, min_int=pa.nulls(n, pa.int64()), max_int=pa.nulls(n, pa.int64()))
            section.update(min_float=pa.nulls(n, pa.float64()), max_float=pa.nulls(n, pa.float64()))
        else:
            lo, hi = (to_number(value_forms.decode(a, types[c]), forms[c]) for a in (lows, highs))
            section.update(min=pa.nulls(n, pa.string()), max=pa.nulls(n, pa.string()))
            if forms[c] == INT:
                section.update(min_int=lo, max_int=hi, min_float=pa.nulls(n, pa.float64()), max_float=pa.nulls(n, pa.float64()))
            else:
                section.update(min_float=lo, max_float=hi, min_int=pa.nulls(n, pa.int64()), max_int=pa.nulls(n, pa.int64()))
        sections.append(pa.table(section, schema=RANGES_SCHEMA))
    blooms: dict[str, list] = {name: [] for name in BLOOMS_SCHEMA.names}
    bloom_sizes = {}
    for c in order:
        if not per_bloom[c]:
            continue
        bloom_sizes[c] = len(per_bloom[c])
        for fid, b in per_bloom[c]:
            blooms["column"].append(c)
            blooms["file"].append(fid)
            blooms["values"].append(b.values)
            blooms["fpr"].append(b.fpr)
            blooms["words"].append(b.words)
    range_groups, range_columns = _groups(range_sizes, RANGE_ROW_GROUP_ROWS)
    bloom_groups, bloom_columns = _groups(bloom_sizes, BLOOM_ROW_GROUP_ROWS)
    fprs = sorted({p.bloom_fpr for p in parts if p.bloom_columns})
    spans, first = [], 0
    for part in parts:
        spans.append([part.partition, first, len(part.files)])
        first += len(part.files)
    meta = {
        "columns": order,
        "bloom_columns": sorted({c for p in parts for c in p.bloom_columns}, key=lambda c: order.index(c) if c in order else len(order)),
        "bloom_fpr": fprs[0] if len(fprs) == 1 else fprs,
        "partitions": [p.partition for p in parts],
        "partition_files": spans,  # [partition, first file id, files]: a partition's files are consecutive
        "forms": {c: forms[c] for c in order},
        "schema": base64.b64encode(pa.schema([(c, types[c]) for c in order if c in types]).serialize().to_pybytes()).decode(),
    }
    return FileIndexTables(
        files=pa.table(files, schema=FILES_SCHEMA),
        ranges=pa.concat_tables(sections) if sections else RANGES_SCHEMA.empty_table(),
        blooms=pa.table(blooms, schema=BLOOMS_SCHEMA),
        range_groups=range_groups,
        bloom_groups=bloom_groups,
        range_columns=range_columns,
        bloom_columns=bloom_columns,
        meta=meta,
    )


def bound_form(t: pa.DataType) -> str:
    """How bounds of a column of type ``t`` are stored (INT, FLOAT or TEXT)."""
    t = t.value_type if pt.is_dictionary(t) else t
    if (pt.is_integer(t) and t != pa.uint64()) or pt.is_temporal(t) and not pt.is_interval(t):
        return INT
    if pt.is_floating(t):
        return FLOAT
    return TEXT


def to_number(values: pa.Array, form: str) -> pa.Array:
    """Bounds of a column as stored: storage integers or float64 (exact for every float width)."""
    t = values.type
    if form == FLOAT:
        return values.cast(pa.float64())
    if pt.is_integer(t):
        return values.cast(pa.int64())
    storage = pa.int32() if pt.is_date32(t) or pt.is_time32(t) else pa.int64()
    return values.view(storage).cast(pa.int64())


def from_number(values: pa.Array, t: pa.DataType) -> pa.Array:
    """Stored bounds back as values of the column's type ``t``."""
    t = t.value_type if pt.is_dictionary(t) else t
    if pt.is_floating(t) or pt.is_integer(t):
        return values.cast(t)
    storage = pa.int32() if pt.is_date32(t) or pt.is_time32(t) else pa.int64()
    return values.cast(storage).view(t)


def _groups(sizes: dict[str, int], target: int) -> tuple[list[int], dict[str, tuple[int, int, int]]]:
    """Row groups of whole columns: consecutive columns packed until a group reaches ``target`` rows."""
    groups: list[int] = []
    where: dict[str, tuple[int, int, int]] = {}
    current = 0
    for column, n in sizes.items():
        if n == 0:
            continue  # no file has statistics for it: not in the index (unknown)
        if current and current + n > target:
            groups.append(current)
            current = 0
        where[column] = (len(groups), current, n)
        current += n
    if current or not groups:
        groups.append(current)
    return groups, where


def write_file_index(tables: FileIndexTables, directory: str) -> dict[str, tuple[str, WrittenFile]]:
    """Write the three files into ``directory`` (a job's staging directory: they become
    visible only through the catalog commit that names them); returns ``{name: (uri,
    WrittenFile)}``: each file's size and checksum, taken from the bytes written (the
    catalog records them; nothing is read back)."""
    meta = json.dumps(tables.meta, separators=(",", ":"))
    out = {}
    spans = json.dumps(tables.meta.get("partition_files", []), separators=(",", ":"))
    forms = tables.meta.get("forms", {})
    out[FILES_FILE] = _write(
        tables.files,
        fileio.join(directory, FILES_FILE),
        _chunks(tables.files.num_rows, FILES_ROW_GROUP_ROWS),
        {META_KEY: meta, PARTITIONS_KEY: spans},
    )
    # the planner parses only the column map of the ranges and blooms footers (no schema, no lists)
    ranges_map = {c: [*where, forms.get(c, TEXT)] for c, where in tables.range_columns.items()}
    out[RANGES_FILE] = _write(
        tables.ranges, fileio.join(directory, RANGES_FILE), tables.range_groups, {COLUMNS_KEY: json.dumps(ranges_map, separators=(",", ":"))}
    )
    out[BLOOMS_FILE] = _write(
        tables.blooms,
        fileio.join(directory, BLOOMS_FILE),
        tables.bloom_groups,
        {COLUMNS_KEY: json.dumps(tables.bloom_columns, separators=(",", ":"))},
    )
    return out


def _chunks(n: int, size: int) -> list[int]:
    return [min(size, n - i) for i in range(0, n, size)] or [0]


#: Integer columns stored DELTA_BINARY_PACKED: ids and bounds (sorted or near-sorted by file),
#: and the counts and sizes (per file, of similar magnitude from file to file: deltas take
#: fewer bits than the values; `bytes` of the 65,536 x 100 synthetic index 19.3 -> 16.4 MiB).
#: The small, repetitive counts stay dictionary-encoded.
_DELTA = ("file", "min_int", "max_int", "bytes", "rows", "size", "values")
_DICTIONARY = ("column", "partition", "null_count", "nan_count", "bounded")


def _write(t: pa.Table, uri: str, groups: list[int], metadata: dict[str, str]) -> tuple[str, WrittenFile]:
    t = t.replace_schema_metadata({VERSION_KEY: str(FORMAT_VERSION), **metadata})
    names = t.schema.names
    chunks, start = [], 0
    for n in groups:
        chunks.append(t.slice(start, n))
        start += n
    written = write_parquet(
        uri,
        chunks,
        t.schema,
        dictionary=[n for n in _DICTIONARY if n in names],
        statistics=["column", "file"],
        encoding=dict.fromkeys([n for n in _DELTA if n in names], "DELTA_BINARY_PACKED"),
    )
    return uri, written


def read_file_index(directory: str) -> list[PartitionFileIndex]:
    """The partitions' values back from the three files (what ``assemble`` was given, files in order)."""
    files = pq.read_table(fileio.open_input(fileio.join(directory, FILES_FILE)))
    ranges = pq.read_table(fileio.open_input(fileio.join(directory, RANGES_FILE)))
    blooms = pq.read_table(fileio.open_input(fileio.join(directory, BLOOMS_FILE)))
    meta = json.loads(files.schema.metadata[META_KEY.encode()])
    types = {f.name: f.type for f in pa.ipc.read_schema(pa.py_buffer(base64.b64decode(meta["schema"])))}
    stats: dict[int, list[FileColumnStats]] = {}
    for r in ranges.to_pylist():
        lo, hi = r["min"], r["max"]
        form = meta["forms"].get(r["column"], TEXT)
        if form != TEXT:
            key = "int" if form == INT else "float"
            lo, hi = (
                None if v is None else value_forms.encode_scalar(from_number(pa.array([v]), types[r["column"]])[0])
                for v in (r[f"min_{key}"], r[f"max_{key}"])
            )
        stats.setdefault(r["file"], []).append(FileColumnStats(r["column"], r["null_count"], r["nan_count"], lo, hi, r["bytes"], r["bounded"]))
    filters: dict[int, list[FileBloom]] = {}
    for r in blooms.to_pylist():
        filters.setdefault(r["file"], []).append(FileBloom(r["column"], r["words"], r["values"], r["fpr"]))
    order = {c: i for i, c in enumerate(meta["columns"])}
    by_partition: dict[str, list[IndexedFile]] = {}
    for r in files.to_pylist():
        cols = sorted(stats.get(r["file"], []), key=lambda s: order.get(s.column, len(order)))
        by_partition.setdefault(r["partition"], []).append(
            IndexedFile(r["path"], r["rows"], r["size"], tuple(cols), tuple(filters.get(r["file"], [])))
        )
    fpr = meta["bloom_fpr"]
    fpr = fpr if isinstance(fpr, float) else (fpr[0] if fpr else 0.01)
    return [
        PartitionFileIndex(
            partition=key,
            files=tuple(fs),
            columns=tuple(meta["columns"]),
            bloom_columns=tuple(c for c in meta["bloom_columns"] if any(b.column == c for f in fs for b in f.blooms)),
            bloom_fpr=fpr,
        )
        for key, fs in by_partition.items()
    ]
