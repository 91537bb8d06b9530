"""The conformance matrix's oracle: the table as its format's own reader returns it, and each
leaf column's reference statistics computed by pyarrow.compute (rows, nulls, NaN, distinct,
min, max) and by DuckDB (subsets, frequencies, quantiles) over that table.

The reader is independent of Metastore's sources: a Parquet directory is read file by file
with ``pyarrow.parquet`` and its ``key=value`` folders parsed here; Delta through ``deltalake``;
Iceberg through ``pyiceberg``.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests.conformance.writers import Written


def _folder_value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def read_parquet_directory(root: str) -> pa.Table:
    """Every ``*.parquet`` file below ``root``, with the Hive folders' ``key=value`` as columns
    (where a file lacks them; a file that has the column keeps its own values)."""
    pieces = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.parquet"), recursive=True)):
        t = pq.read_table(path, partitioning=None)
        rel = os.path.relpath(os.path.dirname(path), root)
        for part in [] if rel == "." else rel.split(os.sep):
            key, _, value = part.partition("=")
            if key not in t.schema.names:
                v = _folder_value(value)
                t = t.append_column(key, pa.array([v] * t.num_rows, pa.int64() if isinstance(v, int) else pa.string()))
        pieces.append(t)
    return pa.concat_tables(pieces, promote_options="permissive")


def read_iceberg(location: str) -> pa.Table:
    from pyiceberg.table import StaticTable

    metadata = sorted(glob.glob(os.path.join(location, "metadata", "*.metadata.json")))[-1]
    return StaticTable.from_metadata(metadata).scan().to_arrow()


def read_table(w: Written) -> pa.Table:
    if w.format == "delta":
        from deltalake import DeltaTable

        return DeltaTable(w.path).to_pyarrow_table()
    if w.format == "iceberg":
        return read_iceberg(w.path)
    if w.format == "hudi":
        import hudi

        table = hudi.HudiTableBuilder.from_base_uri(w.path).build()
        return pa.Table.from_batches(table.read())
    return read_parquet_directory(w.path)


def leaves(table: pa.Table) -> dict[tuple[str, ...], pa.ChunkedArray]:
    """Each leaf column by its path: a struct's fields as their own leaves, depth first."""
    out: dict[tuple[str, ...], pa.ChunkedArray] = {}

    def walk(path: tuple[str, ...], column: pa.ChunkedArray) -> None:
        if pa.types.is_struct(column.type):
            for i in range(column.type.num_fields):
                child = pa.chunked_array([c.field(i) for c in column.chunks], column.type.field(i).type)
                walk(path + (column.type.field(i).name,), child)
        else:
            out[path] = column

    for name, column in zip(table.column_names, table.columns):
        walk((name,), column)
    return out


def _comparable(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column pyarrow.compute can take min/max/distinct of (dictionaries decoded, views and
    half floats widened)."""
    t = column.type
    if hasattr(t, "storage_type"):  # an extension type (arrow.uuid): its storage
        column = pa.chunked_array([c.storage for c in column.chunks], t.storage_type)
        t = t.storage_type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = t.value_type
    if pa.types.is_string_view(t):
        return column.cast(pa.string())
    if pa.types.is_binary_view(t):
        return column.cast(pa.binary())
    if pa.types.is_float16(t):
        return column.cast(pa.float32())
    return column


@dataclass(frozen=True)
class Reference:
    rows: int
    nulls: int
    nans: int | None
    distinct: int | None
    min: pa.Scalar | None
    max: pa.Scalar | None


def reference(column: pa.ChunkedArray) -> Reference:
    """Rows, nulls, NaN; and over the non-null, non-NaN values: distinct count, min, max."""
    c = _comparable(column)
    rows, nulls = len(c), c.null_count
    nans = None
    valid = pc.drop_null(c)
    if pa.types.is_floating(c.type):
        is_nan = pc.is_nan(valid)
        nans = pc.sum(is_nan).as_py() or 0
        valid = pc.filter(valid, pc.invert(is_nan))
    if pa.types.is_list(c.type) or pa.types.is_large_list(c.type) or pa.types.is_map(c.type):
        return Reference(rows, nulls, nans, None, None, None)
    distinct = pc.count_distinct(valid).as_py() if len(valid) else 0
    if not len(valid):
        return Reference(rows, nulls, nans, distinct, None, None)
    if pa.types.is_duration(valid.type):  # no min_max kernel: their int64 counts of the unit
        mm = pc.min_max(valid.cast(pa.int64()))
        return Reference(rows, nulls, nans, distinct, mm["min"].cast(valid.type), mm["max"].cast(valid.type))
    mm = pc.min_max(valid)
    return Reference(rows, nulls, nans, distinct, mm["min"], mm["max"])


def same_scalar(ours: pa.Scalar, theirs: pa.Scalar) -> bool:
    """Two scalars hold the same value (the oracle's cast to our type where the readers' types
    differ, e.g. half floats widened); floats by value, NaN never equal."""
    if not ours.type.equals(theirs.type):
        try:
            theirs = theirs.cast(ours.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            ours = ours.cast(theirs.type)
    if pa.types.is_floating(ours.type):
        a, b = ours.as_py(), theirs.as_py()
        return a == b or (math.isinf(a) and a == b)
    return ours.equals(theirs)


def _for_duckdb(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """DuckDB takes no decimal256: its text (the matrix's DuckDB checks count and group)."""
    return column.cast(pa.string()) if pa.types.is_decimal256(column.type) else column


def duckdb_connection(table: pa.Table) -> tuple[Any, dict[tuple[str, ...], str]]:
    """DuckDB over the oracle table with leaf columns renamed ``c0``, ``c1`` ... (DuckDB's
    identifiers ignore case, so ``Name`` and ``name`` could not both be named); the names by path."""
    import duckdb

    flat = leaves(table)
    names = {path: f"c{i}" for i, path in enumerate(flat)}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    arrays = {names[p]: _for_duckdb(_comparable(c)) for p, c in flat.items()}
    con.register("t", pa.table(arrays))
    return con, names
