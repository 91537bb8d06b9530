"""Some columns of an Iceberg snapshot's partition, read straight from its Parquet data files.

Publish hashes every value of the columns whose distinct values the store does not hold.
The source's reader (engine.sources.iceberg ``read_batches``: pyiceberg's ``ArrowScan``)
applies deletes and converts every batch to the table's schema, and took 3-5 times as long
as pyarrow reading the same columns of the same files. A partition whose files are all
Parquet, none with a delete file that applies to it, each holding every wanted column in
the table's own Arrow type (matched by field id, or by the table's name mapping for a file
written without ids), has nothing to delete or convert: :func:`direct_files` plans it and
:func:`read_file` reads each file with pyarrow alone, only those columns (files apart, so
that several can be read at once). Any other partition: None (read it through the
source), so the values are those the source gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from engine.sources.base import Partition
from engine.sources.iceberg import IcebergSource

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.name_mapping import NameMapping

#: rows a batch holds at most
BATCH_ROWS = 1 << 17


@dataclass(frozen=True)
class DirectFile:
    """A data file to read directly: its path and its own names of the wanted columns."""

    path: str
    names: tuple[str, ...]


def direct_files(
    source: IcebergSource,
    partition: Partition,
    columns: list[str],
    name_mapping: NameMapping | None,
    by_schema: dict[str, dict[int, str]] | None = None,
) -> list[DirectFile] | None:
    """The partition's data files, each with its names of ``columns`` (named as the table
    names them), or None when a file needs the source's reader (a delete applies, not
    Parquet, a column missing, renamed out of reach or of another type). ``by_schema``: the
    file schemas met so far (kept across calls: pyiceberg converts each schema once)."""
    if any(f.num_rows is None for f in partition.files):  # a delete applies to the file
        return None
    schema, iceberg_schema = source.schema(), source.iceberg_schema
    ids = {c: iceberg_schema.find_field(c).field_id for c in columns}
    plan = []
    by_schema = {} if by_schema is None else by_schema
    for task in source.scan_tasks(partition):
        names = _file_names(source, task, ids, schema, name_mapping, by_schema)
        if names is None:
            return None
        plan.append(DirectFile(task.file.file_path, tuple(names)))
    return plan


def direct_batches(
    source: IcebergSource, partition: Partition, columns: list[str], name_mapping: NameMapping | None
) -> Iterator[pa.RecordBatch] | None:
    """The partition's rows of ``columns`` read with pyarrow from its data files, or None
    (:func:`direct_files`)."""
    plan = direct_files(source, partition, columns, name_mapping)
    return None if plan is None else (batch for f in plan for batch in read_file(source, f, columns))


def _file_names(
    source: IcebergSource,
    task: FileScanTask,
    ids: dict[str, int],
    schema: pa.Schema,
    name_mapping: NameMapping | None,
    by_schema: dict[str, dict[int, str]],
) -> list[str] | None:
    """The file's names of the wanted columns (in their order), None when it cannot be read
    directly. ``by_schema``: field id -> name of each file schema met (its text with the
    field ids), filled here."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.manifest import FileFormat

    if task.delete_files or task.file.file_format != FileFormat.PARQUET:
        return None
    try:
        with source.open_data_file(task.file.file_path) as handle:
            arrow = pq.ParquetFile(handle).schema_arrow
        key = arrow.to_string(show_field_metadata=True, show_schema_metadata=False)
        if key not in by_schema:
            by_schema[key] = {f.field_id: f.name for f in pyarrow_to_schema(arrow, name_mapping=name_mapping).fields}
        by_id = by_schema[key]
    except (ValueError, KeyError, TypeError, NotImplementedError, OSError):
        # no ids and no mapping, a type pyiceberg refuses, or a file missing or unreadable
        # (the source's reader says so in its own words)
        return None
    names = []
    for column, field_id in ids.items():
        name = by_id.get(field_id)
        if name is None or arrow.field(name).type != schema.field(column).type:
            return None
        names.append(name)
    return names


def read_file(source: IcebergSource, file: DirectFile, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """A direct file's rows of ``columns`` (its own names read, the table's given)."""
    with source.open_data_file(file.path) as handle:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=BATCH_ROWS, columns=list(file.names)):
            yield pa.RecordBatch.from_arrays([batch.column(n) for n in file.names], names=columns)
