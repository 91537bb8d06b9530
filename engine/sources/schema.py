"""Schema unification across the data files of one table.

Files of a table are written over months by different jobs, so their schemas
drift. Statistics are only meaningful per column if every file's values can be
read as one type, so this module decides - with Iceberg's type-promotion rules,
the rules readers of data lakes already expect - which drifts are harmless
widenings and which are real conflicts:

- integers widen within their signedness (int8 -> int16 -> int32 -> int64,
  uint8 -> ... -> uint64), and an unsigned integer widens to a strictly wider
  signed one (uint32 -> int64);
- floats widen (float16 -> float32 -> float64);
- decimal(P, S) widens to decimal(P', S) with P' > P (never a scale change);
- string, large_string and string_view are one logical type, and binary,
  large_binary and binary_view another: mixed, the large variant wins;
- an extension type (arrow.uuid, ...) and its storage type are the extension
  (a writer that does not know the extension writes the bare storage);
- a string_view or binary_view column alone (delta-rs may write them) is read as string or binary;
- the null type (a column that was all-null when written) becomes any type;
- a column missing from some files is nullable in the table.

Two files that widen to different types get their least common widening
(int32 and uint32 -> int64): every file's values are representable, which is
all the promotion rules guarantee anyway. Everything else - int vs string, a
changed decimal scale, a timestamp unit or time zone change, unequal nested
types - is a SchemaDriftError naming the column, both types and the first file
that introduced each.

Dictionary-encoded columns are read as their value type: whether a writer
dictionary-encoded a column is a storage detail, not a schema change.

All functions here are pure (no I/O) so they can be tested exhaustively.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from engine import types as mt
from engine.exceptions import InvalidFileError, SchemaDriftError

__all__ = [
    "conform_array",
    "conform_batch",
    "conform_dictionary",
    "is_promotable",
    "normalize_type",
    "promote",
    "unify_schemas",
]

_SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}
_UNSIGNED = {8: pa.uint8(), 16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}
_FLOATS = {16: pa.float16(), 32: pa.float32(), 64: pa.float64()}
_DECIMALS = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The type a column of type ``t`` is read as (dictionaries are decoded; string and
    binary views, which delta-rs writes into Parquet's Arrow schema, are read as their
    plain types: a view is a layout, not a schema change)."""
    if mt.is_dictionary(t):
        return normalize_type(t.value_type)
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    return t


def _int_promote(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    a_signed, b_signed = mt.is_signed_integer(a), mt.is_signed_integer(b)
    if a_signed == b_signed:
        return a if a.bit_width >= b.bit_width else b
    signed, unsigned = (a, b) if a_signed else (b, a)
    width = max(signed.bit_width, 2 * unsigned.bit_width)
    return _SIGNED.get(width)


def _decimal_promote(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if a.scale != b.scale:
        return None
    width = max(a.bit_width, b.bit_width)
    return _DECIMALS[width](max(a.precision, b.precision), a.scale)


def promote(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The narrowest type both ``a`` and ``b`` widen to, or None if they conflict.

    Symmetric; ``promote(a, a) == a``. Dictionary types are compared by value type.
    """
    a, b = normalize_type(a), normalize_type(b)
    if a.equals(b):
        return a
    if mt.is_null(a):
        return b
    if mt.is_null(b):
        return a
    if mt.is_integer(a) and mt.is_integer(b):
        return _int_promote(a, b)
    if mt.is_floating(a) and mt.is_floating(b):
        return a if a.bit_width >= b.bit_width else b
    if mt.is_decimal(a) and mt.is_decimal(b):
        return _decimal_promote(a, b)
    # one logical type, three layouts: writers pick string, large_string or string_view
    # (binary likewise) as they please; mixed, they are read as the large variant
    strings = (pa.string(), pa.large_string(), pa.string_view())
    if a in strings and b in strings:
        return pa.large_string()
    binaries = (pa.binary(), pa.large_binary(), pa.binary_view())
    if a in binaries and b in binaries:
        return pa.large_binary()
    # an extension type and its bare storage (a writer, or a reader, that does not know the extension)
    for ext, other in ((a, b), (b, a)):
        if isinstance(ext, pa.BaseExtensionType) and not isinstance(other, pa.BaseExtensionType) and ext.storage_type.equals(other):
            return ext
    return None


def is_promotable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` can be read as ``target`` without loss."""
    result = promote(source, target)
    return result is not None and result.equals(normalize_type(target))


@dataclass
class _Column:
    field: pa.Field  # name, metadata and nullability of the first appearance
    type: pa.DataType  # unified so far
    nullable: bool
    files: int = 0
    introduced: list[tuple[pa.DataType, str]] = field(default_factory=list)  # (type, first file)


def unify_schemas(file_schemas: Sequence[tuple[str, pa.Schema]] | Sequence[tuple[str, pa.Schema, int]]) -> pa.Schema:
    """One schema every file can be read as, from ``(file name, file schema)`` pairs, or
    ``(first file's name, schema, files)`` triples: runs of consecutive files of one schema
    (a listing of 100,000 files of one schema is then one item, not 100,000).

    Columns appear in order of first appearance (files in the given order). A
    field keeps the metadata of its first appearance; it is nullable if any file
    declares it nullable or does not have it. Schema-level metadata (for example
    the pandas metadata of one writer) is dropped: it describes one file, not the
    table. Raises SchemaDriftError on a conflict and InvalidFileError if one
    file has the same column name twice.
    """
    columns: dict[str, _Column] = {}
    # most tables' files share one schema: a schema met before (equal fields, metadata aside)
    # only adds its file to its columns' counts, instead of promoting every type again
    # (0.3 ms a file: a third of listing a 10,000-partition table on the driver); the last
    # one met is compared first (Schema.equals: ~0.05 us, where hashing one is ~6 us)
    met: dict[pa.Schema, int] = {}  # schema -> its position in ``more``
    more: list[int] = []  # per schema met: its files after the first
    last, at, total = None, -1, 0
    for item in file_schemas:
        file_name, schema = item[0], item[1]
        files = item[2] if len(item) > 2 else 1
        total += files
        if last is not None and (schema is last or schema.equals(last)):
            more[at] += files
            continue
        last, at = schema, met.get(schema, -1)
        if at >= 0:
            more[at] += files
            continue
        at = met[schema] = len(more)
        more.append(files - 1)
        seen: set[str] = set()
        for f in schema:
            if f.name in seen:
                raise InvalidFileError(f"{file_name}: column name {f.name!r} appears more than once")
            seen.add(f.name)
            t = normalize_type(f.type)
            column = columns.get(f.name)
            if column is None:
                columns[f.name] = _Column(field=f, type=t, nullable=f.nullable, files=1, introduced=[(t, file_name)])
                continue
            unified = promote(column.type, t)
            if unified is None:
                raise _drift_error(f.name, column, t, file_name)
            column.type = unified
            column.nullable = column.nullable or f.nullable
            column.files += 1
            if not any(t.equals(known) for known, _ in column.introduced):
                column.introduced.append((t, file_name))
    for schema, at in met.items():
        if more[at]:
            for f in schema:
                columns[f.name].files += more[at]
    return pa.schema(
        [
            pa.field(name, c.type, nullable=c.nullable or c.files < total or mt.is_null(c.type), metadata=c.field.metadata)
            for name, c in columns.items()
        ]
    )


def _drift_error(name: str, column: _Column, t: pa.DataType, file_name: str) -> SchemaDriftError:
    # Name the first type that conflicts on its own; a pairwise conflict always exists
    # for these rules, the fallback only guards against future rule changes.
    other, other_file = next(
        ((known, f) for known, f in column.introduced if promote(known, t) is None),
        (column.type, column.introduced[0][1]),
    )
    return SchemaDriftError(f"column {name!r}: type {other} (first in {other_file}) cannot be unified with type {t} (first in {file_name})")


def conform_array(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``array`` read as ``target`` (a type it promotes to)."""
    if array.type.equals(target):
        return array
    if mt.is_null(array.type):
        return pa.nulls(len(array), target)
    if isinstance(target, pa.BaseExtensionType):  # the bare storage of the extension
        storage = conform_array(array, target.storage_type)
        if isinstance(storage, pa.ChunkedArray):
            return pa.chunked_array([pa.ExtensionArray.from_storage(target, c) for c in storage.chunks], target)
        return pa.ExtensionArray.from_storage(target, storage)
    return array.cast(target, safe=True)


def conform_dictionary(array: pa.DictionaryArray, target: pa.DataType) -> pa.DictionaryArray:
    """A dictionary-encoded ``array`` left encoded, its dictionary read as ``target``: a
    reader asked for codes (``TableSource.read_batches``'s ``dictionary``) keeps them."""
    if array.type.value_type.equals(target):
        return array
    return pa.DictionaryArray.from_arrays(array.indices, array.dictionary.cast(target, safe=True))


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with exactly the fields of ``target``: cast, and null-filled where missing.

    Columns of ``batch`` that ``target`` does not name are dropped.
    """
    names = set(batch.schema.names)
    arrays = [conform_array(batch.column(f.name), f.type) if f.name in names else pa.nulls(batch.num_rows, f.type) for f in target]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
