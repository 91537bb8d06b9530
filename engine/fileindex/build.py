"""The per-file column index of one partition, as a value: row count, null count, NaN count,
min, max (lossless text forms) and byte size per data file and column, and Bloom filters
of chosen columns (docs/FORMAT.md, "File index").

Pure functions of a file's Parquet footer (``footer_column_stats``) and of its values
(``value_column_stats``, ``bloom_of``), and ``build_file_index``, which reads one
partition's footers (and, for Bloom columns, those columns' values) through its
TableSource's file system. Everything here is a bound, never a guess: a statistic the
footer does not give is unknown (None), and the evaluators then keep the file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import types as mt
from engine import values as value_forms
from engine.columns import LeafColumn, leaf_columns
from engine.exceptions import InvalidArgumentError
from engine.expressions.binding import comparable
from engine.frequencies.bloom import BlockedBloom, words_for
from engine.frequencies.hashing import value_hashes
from engine.types import integer_storage, is_binary_like, is_numeric, is_string_like

if TYPE_CHECKING:
    from engine.sources.base import Partition, TableSource

#: the false-positive rate a file's Bloom filter is sized for, by default
DEFAULT_BLOOM_FPR = 0.01
#: at most this many bytes per file and column (beyond it the false-positive rate grows)
MAX_BLOOM_BYTES = 1 << 20
#: a column is "high-cardinality" (gets a Bloom filter by default) when at least this
#: share of a partition's non-null values is distinct, and at least MIN_BLOOM_DISTINCT are
HIGH_CARDINALITY_RATIO = 0.5
MIN_BLOOM_DISTINCT = 64

_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_PARQUET_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


@dataclass(frozen=True)
class FileColumnStats:
    """One column of one data file. ``lower`` / ``upper``: text forms of bounds of the non-null,
    non-NaN values (None: no such value, or unknown; ``bounded`` tells which)."""

    column: str
    nulls: int | None
    nans: int | None
    lower: str | None
    upper: str | None
    bytes: int | None
    bounded: bool  # False: min/max unknown (a row group without statistics, a type without them)


@dataclass(frozen=True)
class FileBloom:
    """A Bloom filter of one column's distinct non-null values in one file (engine.frequencies.bloom,
    keyed by engine.frequencies.hashing.value_hashes; floats with -0.0 as 0.0)."""

    column: str
    words: bytes  # the filter's uint64 words, little-endian
    values: int  # distinct values added
    fpr: float  # the rate it was sized for


@dataclass(frozen=True)
class IndexedFile:
    path: str  # as the TableSource names it
    rows: int | None  # None: unknown (a file the index has no statistics of)
    size: int
    columns: tuple[FileColumnStats, ...]
    blooms: tuple[FileBloom, ...] = ()


@dataclass(frozen=True)
class PartitionFileIndex:
    """The index of one partition's data files: what ``build_file_index`` returns and the
    table-level writer assembles (engine.fileindex.store)."""

    partition: str
    files: tuple[IndexedFile, ...]
    columns: tuple[str, ...]  # the indexed columns, in table order
    bloom_columns: tuple[str, ...] = ()
    bloom_fpr: float = DEFAULT_BLOOM_FPR
    meta: Mapping[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ footers
def footer_column_stats(md: pq.FileMetaData, leaves: Sequence[LeafColumn]) -> dict[str, FileColumnStats]:
    """Per leaf column, what the footer proves: null counts summed over row groups, bounds from
    the row-group statistics (converted to the leaf's table type: units rounded outwards), and
    compressed bytes. A leaf the file does not hold is left out (unknown)."""
    index = _leaf_indices(md)
    out: dict[str, FileColumnStats] = {}
    bounds: list[pa.Scalar | None] = []  # each column's lower and upper bound, encoded together at the end
    for leaf in leaves:
        i = index.get(leaf.full_path)
        if i is None:
            continue
        t = mt.without_dictionary(leaf.type)
        nulls: int | None = 0
        size = 0
        lows: list[Any] = []
        highs: list[Any] = []
        bounded = value_forms.has_text_form(t)
        for rg in range(md.num_row_groups):
            chunk = md.row_group(rg).column(i)
            size += chunk.total_compressed_size
            st = chunk.statistics
            if st is None or not st.has_null_count:
                nulls = None
            elif nulls is not None:
                nulls += st.null_count
            if not bounded:
                continue
            if st is not None and st.has_null_count and st.null_count == chunk.num_values:
                continue  # only nulls in this row group
            if st is None or not st.has_min_max:
                bounded = False
                continue
            try:
                lo, hi = _footer_bound(st, t, low=True), _footer_bound(st, t, low=False)
            except (pa.ArrowException, TypeError, ValueError, OverflowError, InvalidArgumentError):
                bounded = False
                continue
            if lo is None or hi is None:
                bounded = False
                continue
            lows.append(lo)
            highs.append(hi)
        known = bounded and bool(lows)
        bounds += [min(lows, key=comparable), max(highs, key=comparable)] if known else [None, None]
        out[leaf.name] = FileColumnStats(leaf.name, nulls, 0 if not mt.is_floating(t) else None, None, None, size, bounded)
    texts = value_forms.encode_scalars(bounds)
    return {
        name: dataclasses.replace(stats, lower=texts[2 * i], upper=texts[2 * i + 1]) if bounds[2 * i] is not None else stats
        for i, (name, stats) in enumerate(out.items())
    }


def _leaf_indices(md: pq.FileMetaData) -> dict[tuple[str, ...], int]:
    """The Parquet column index of each leaf path outside lists. Found by walking the file's
    Arrow schema depth-first (Parquet's column order), not by the footer's dotted path text,
    which is one string for field ``x`` of struct ``s`` and for a column named ``s.x``."""
    out: dict[tuple[str, ...], int] = {}
    count = 0

    def walk(path: tuple[str, ...], t: pa.DataType, repeated: bool) -> None:
        nonlocal count
        if mt.is_extension(t):
            t = t.storage_type
        if mt.is_struct(t):
            for k in range(t.num_fields):
                walk(path + (t.field(k).name,), t.field(k).type, repeated)
        elif mt.is_map(t):
            walk(path + ("key",), t.key_type, True)
            walk(path + ("value",), t.item_type, True)
        elif mt.is_list_like(t):
            walk(path + ("element",), t.value_type, True)
        else:
            if not repeated:
                out[path] = count
            count += 1

    try:
        schema = md.schema.to_arrow_schema()
    except (pa.ArrowException, ValueError):
        return {}
    for f in schema:
        walk((f.name,), f.type, False)
    return out if count == md.num_columns else {}  # a layout not understood: no footer statistics (unknown)


def _text(s: pa.Scalar) -> str:
    text = value_forms.encode_scalar(s)
    assert text is not None
    return text


def _footer_bound(st: Any, t: pa.DataType, low: bool) -> pa.Scalar | None:
    """One row group's min (``low``) or max as a scalar of the table type ``t``, or None if unusable."""
    raw = st.min_raw if low else st.max_raw
    physical = st.physical_type
    if mt.is_timestamp(t) or mt.is_time(t):
        unit = _parquet_unit(st.logical_type) or (t.unit if physical == "INT64" or mt.is_time32(t) else None)
        if physical not in ("INT32", "INT64") or unit is None:
            return None
        return _rescaled(int(raw), unit, t, low)
    if mt.is_float16(t):
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != 2:
            return None
        half = float(np.frombuffer(raw, np.float16)[0])
        return None if math.isnan(half) else pa.scalar(np.float16(half), t)
    if mt.is_duration(t):
        return pa.array([int(raw)], pa.int64()).view(t)[0] if physical == "INT64" else None
    value = st.min if low else st.max
    if isinstance(value, float) and math.isnan(value):
        return None  # a writer that counted NaN in min/max: no bound
    if is_binary_like(t) and isinstance(value, str):
        value = value.encode()
    if mt.is_fixed_size_binary(t) and isinstance(value, (bytes, bytearray)) and len(value) != t.byte_width:
        return None
    if mt.is_integer(t) and isinstance(value, int):
        return pa.scalar(value, t)
    scalar = pa.scalar(value)
    return scalar if scalar.type == t else scalar.cast(t)


def _parquet_unit(logical: Any) -> str | None:
    text = str(logical)
    for name, unit in _PARQUET_UNITS.items():
        if f"timeUnit={name}" in text:
            return unit
    return None


def _rescaled(count: int, unit: str, t: pa.DataType, low: bool) -> pa.Scalar:
    """A count in ``unit`` as a scalar of ``t``'s unit, floored for a lower bound, ceiled for an upper."""
    src, dst = _UNIT_PER_SECOND[unit], _UNIT_PER_SECOND[t.unit]
    if dst >= src:
        value = count * (dst // src)
    else:
        factor = src // dst
        value = count // factor if low else -((-count) // factor)
    storage = pa.int32() if mt.is_time32(t) else pa.int64()
    return pa.array([value], storage).view(t)[0]


# ------------------------------------------------------------------ values
def value_column_stats(values: pa.Array | pa.ChunkedArray, column: str, size: int | None = None) -> FileColumnStats:
    """Exact statistics of one column of one file from its values (NaN counted)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if mt.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    valid = pc.drop_null(arr)
    nans = 0
    if mt.is_floating(arr.type):
        is_nan = pc.is_nan(valid)
        nans = int(pc.sum(is_nan).as_py() or 0)
        valid = pc.filter(valid, pc.invert(is_nan))
    lower = upper = None
    bounded = value_forms.has_text_form(arr.type)
    if bounded and len(valid):
        lo, hi = _min_max(valid)
        lower, upper = _text(lo), _text(hi)
    return FileColumnStats(column, arr.null_count, nans, lower, upper, size, bounded)


def _min_max(valid: pa.Array) -> tuple[pa.Scalar, pa.Scalar]:
    t = valid.type
    if mt.is_duration(t):
        mm = pc.min_max(valid.view(pa.int64()))
        return pa.scalar(mm["min"].as_py(), pa.int64()).cast(t), pa.scalar(mm["max"].as_py(), pa.int64()).cast(t)
    try:
        mm = pc.min_max(valid)
        return mm["min"], mm["max"]
    except pa.ArrowNotImplementedError:
        ordered = sorted((valid[i] for i in range(len(valid))), key=comparable)
        return ordered[0], ordered[-1]


def bloom_of(values: pa.Array | pa.ChunkedArray, column: str, fpr: float = DEFAULT_BLOOM_FPR, max_bytes: int = MAX_BLOOM_BYTES) -> FileBloom:
    """A Bloom filter of the distinct non-null (non-NaN) values, sized for ``fpr``."""
    hashes = bloom_hashes(values)
    distinct = np.unique(hashes)
    bloom = BlockedBloom.create(words_for(len(distinct), fpr, max_bytes))
    bloom.test_and_add(distinct, distinct=True)
    return FileBloom(column, bloom.words.astype("<u8").tobytes(), len(distinct), fpr)


def bloom_hashes(values: pa.Array | pa.ChunkedArray | pa.Scalar) -> np.ndarray:
    """The hashes a Bloom filter is keyed by: values of the column's type, -0.0 as 0.0, no NaN or null."""
    if isinstance(values, pa.Scalar):
        values = pa.array([values.as_py()], values.type) if not mt.is_temporal(values.type) else pa.array([values], values.type)
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if mt.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if mt.is_large_string(arr.type) or mt.is_string_view(arr.type):
        arr = arr.cast(pa.string())
    if mt.is_large_binary(arr.type) or mt.is_binary_view(arr.type):
        arr = arr.cast(pa.binary())
    arr = pc.drop_null(arr)
    storage = integer_storage(arr.type)
    if storage is not None and not mt.is_integer(arr.type):
        arr = arr.view(storage)  # times, timestamps, durations (and dates) by their storage integer
    if mt.is_floating(arr.type):
        arr = pc.filter(arr, pc.invert(pc.is_nan(arr)))
        arr = pc.if_else(pc.equal(arr, pa.scalar(0, arr.type)), pa.scalar(0, arr.type), arr)  # -0.0 -> 0.0
        arr = arr.cast(pa.float64()).view(pa.int64())  # hashed by their (float64) bits
    if len(arr) == 0:
        return np.empty(0, np.uint64)
    return value_hashes(arr)


def bloom_supported(t: pa.DataType) -> bool:
    t = mt.without_dictionary(t)
    return is_numeric(t) or mt.is_integer_temporal(t) or is_string_like(t) or is_binary_like(t)


class BloomProbe:
    """A stored filter as the evaluators' MembershipFilter (``might_contain(scalar)``)."""

    def __init__(self, words: bytes | np.ndarray) -> None:
        w = np.frombuffer(words, "<u8") if isinstance(words, (bytes, bytearray, memoryview)) else words
        self.bloom = BlockedBloom(w.astype(np.uint64, copy=False))

    def might_contain(self, value: pa.Scalar) -> bool:
        hashes = bloom_hashes(value)
        return True if len(hashes) == 0 else bool(self.bloom.contains(hashes).all())


def choose_bloom_columns(
    statistics: Sequence[Mapping[str, Any]],
    schema: pa.Schema,
    ratio: float = HIGH_CARDINALITY_RATIO,
    min_distinct: int = MIN_BLOOM_DISTINCT,
) -> tuple[str, ...]:
    """The high-cardinality columns of a partition (the default Bloom columns), from its
    statistics rows (``column``, ``row_count``, ``null_count``, ``distinct_count``): at least
    ``min_distinct`` distinct values and ``ratio`` of the non-null values distinct; floats
    excluded (equality on floats is rare), booleans have too few values."""
    types = {leaf.name: leaf.type for leaf in leaf_columns(schema)}
    out: list[str] = []
    for row in statistics:
        name = row.get("column")
        t = types.get(name) if isinstance(name, str) else None
        if name is None or t is None or not bloom_supported(t) or mt.is_floating(mt.without_dictionary(t)):
            continue
        distinct, rows, nulls = row.get("distinct_count"), row.get("row_count"), row.get("null_count") or 0
        if distinct is None or rows is None:
            continue
        non_null = rows - nulls
        if distinct >= min_distinct and non_null > 0 and distinct >= ratio * non_null:
            out.append(name)
    return tuple(out)


# ------------------------------------------------------------------ one partition
@dataclass(frozen=True)
class IndexColumns:
    """What a partition's index covers: the leaves (partition columns left out), the Bloom
    columns and the leaves whose values are read (Bloom and "exact" columns)."""

    leaves: tuple[LeafColumn, ...]
    bloom_columns: tuple[str, ...]
    read_values: tuple[LeafColumn, ...]


def index_columns(
    source: TableSource, columns: Sequence[str] | None = None, bloom_columns: Sequence[str] = (), exact_columns: Sequence[str] = ()
) -> IndexColumns:
    """The leaves of ``source`` an index of ``columns`` (all by default) covers; refuses an
    unknown column or a Bloom column of a type without filters (one line)."""
    schema: pa.Schema = source.schema()
    partition_names = {f.name for f in source.partition_fields()}
    leaves = [leaf for leaf in leaf_columns(schema) if leaf.top not in partition_names]
    if columns is not None:
        wanted = set(columns)
        unknown = wanted - {leaf.name for leaf in leaves} - {leaf.top for leaf in leaves}
        if unknown:
            raise InvalidArgumentError(f"file index: unknown column(s) {sorted(unknown)}")
        leaves = [leaf for leaf in leaves if leaf.name in wanted or leaf.top in wanted]
    by_name = {leaf.name: leaf for leaf in leaves}
    for name in bloom_columns:
        if name not in by_name:
            raise InvalidArgumentError(f"--bloom-columns: unknown column {name!r}")
        if not bloom_supported(by_name[name].type):
            raise InvalidArgumentError(f"--bloom-columns: column {name!r} ({by_name[name].type}) cannot have a Bloom filter")
    read_values = tuple(by_name[n] for n in dict.fromkeys([*bloom_columns, *exact_columns]) if n in by_name)
    return IndexColumns(tuple(leaves), tuple(bloom_columns), read_values)


def index_parquet_file(handle: Any, path: str, size: int, cols: IndexColumns, bloom_fpr: float = DEFAULT_BLOOM_FPR) -> IndexedFile:
    """One Parquet data file's entry (``handle``: the open file): its footer's statistics and,
    for ``cols.read_values``, statistics and Bloom filters from its values."""
    pf = pq.ParquetFile(handle)
    md = pf.metadata
    stats = footer_column_stats(md, cols.leaves)
    blooms = []
    present = [leaf for leaf in cols.read_values if leaf.top in pf.schema_arrow.names]
    if present:
        table = pf.read(columns=list(dict.fromkeys(leaf.top for leaf in present)))
        for leaf in present:
            arr = leaf.extract(table.column(leaf.top).combine_chunks())
            if leaf.type != arr.type and not mt.is_dictionary(arr.type):
                arr = arr.cast(mt.without_dictionary(leaf.type))
            known = stats[leaf.name].bytes if leaf.name in stats else None
            stats[leaf.name] = value_column_stats(arr, leaf.name, known)
            if leaf.name in cols.bloom_columns:
                blooms.append(bloom_of(arr, leaf.name, bloom_fpr))
    return IndexedFile(
        path=path,
        rows=md.num_rows,
        size=size,
        columns=tuple(stats[leaf.name] for leaf in cols.leaves if leaf.name in stats),
        blooms=tuple(blooms),
    )


def unindexed_file(path: str, size: int) -> IndexedFile:
    """A data file the index knows nothing of but its name (rows unknown): always a candidate."""
    return IndexedFile(path=path, rows=None, size=size, columns=())


def unindexed_partition(partition: Partition, columns: Sequence[str] = ()) -> PartitionFileIndex:
    """A partition whose index could not be built: its files listed, each always a candidate
    (a file missing from the index would be missing from every plan)."""
    return PartitionFileIndex(partition.key, tuple(unindexed_file(f.path, f.size) for f in partition.files), tuple(columns))


def build_file_index(
    source: Any,  # a ParquetDirectorySource (a directory, Delta): its file_system opens the files
    partition: Partition,
    *,
    columns: Sequence[str] | None = None,
    bloom_columns: Sequence[str] = (),
    bloom_fpr: float = DEFAULT_BLOOM_FPR,
    exact_columns: Sequence[str] = (),
) -> PartitionFileIndex:
    """The file index of one partition of a ``TableSource`` of Parquet files on a file system
    (a directory or a Delta table: ``source.file_system`` opens ``partition.files``' paths).

    Reads every data file's footer; for ``bloom_columns`` and ``exact_columns`` also those
    columns' values of each file (Bloom filters; exact NaN counts and bounds, which footers
    lack). ``columns``: the leaf columns to index (all by default). Partition columns are
    constant per partition: their bounds come from the partition's statistics, not here.
    """
    check_fpr(bloom_fpr)
    cols = index_columns(source, columns, bloom_columns, exact_columns)
    fs = source.file_system
    files = []
    for data_file in partition.files:
        with fs.open_input_file(data_file.path) as handle:
            files.append(index_parquet_file(handle, data_file.path, data_file.size, cols, bloom_fpr))
    return partition_index(partition.key, files, cols, bloom_fpr)


def check_fpr(bloom_fpr: float) -> None:
    if not 0 < bloom_fpr < 1:
        raise InvalidArgumentError(f"the Bloom filter false-positive rate must be in (0, 1), not {bloom_fpr}")


def partition_index(key: str, files: Sequence[IndexedFile], cols: IndexColumns, bloom_fpr: float) -> PartitionFileIndex:
    return PartitionFileIndex(
        partition=key,
        files=tuple(files),
        columns=tuple(leaf.name for leaf in cols.leaves),
        bloom_columns=cols.bloom_columns,
        bloom_fpr=bloom_fpr,
    )


def without_blooms(part: PartitionFileIndex, keep: Collection[str]) -> PartitionFileIndex:
    """``part`` with only the Bloom filters of the columns ``keep``."""
    files = tuple(dataclasses.replace(f, blooms=tuple(b for b in f.blooms if b.column in keep)) for f in part.files)
    return dataclasses.replace(part, files=files, bloom_columns=tuple(c for c in part.bloom_columns if c in keep))
