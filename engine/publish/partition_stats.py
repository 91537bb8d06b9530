"""An Iceberg partition statistics file (the spec's "Partition Statistics"), from a snapshot's manifests.

One row per partition (partition tuple and spec id) of the snapshot's live files, with the
spec's field ids: ``partition`` (1: a struct of the table's unified partition type, every
partition field of every spec by its field id, null where a spec lacks it), ``spec_id`` (2),
``data_record_count`` (3), ``data_file_count`` (4), ``total_data_file_size_in_bytes`` (5),
``position_delete_record_count`` (6), ``position_delete_file_count`` (7),
``equality_delete_record_count`` (8), ``equality_delete_file_count`` (9),
``total_record_count`` (10: left null, it needs the deletes applied), ``last_updated_at``
(11: milliseconds, the commit time of the newest snapshot that added a file of the partition)
and ``last_updated_snapshot_id`` (12). Written as Parquet with those field ids.

:func:`aggregate` is pure (file entries in, rows out); :func:`file_entries` reads the manifests.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.types import IcebergType

DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2


@dataclass(frozen=True)
class FileEntry:
    """What a partition's statistics need of one live file of a manifest."""

    spec_id: int
    partition: tuple[tuple[int, Any], ...]  # (partition field id, value) of its spec
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    record_count: int
    file_size_in_bytes: int
    snapshot_id: int | None  # the snapshot that added it


def _id(name: str, type_: pa.DataType, field_id: int, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={b"PARQUET:field_id": str(field_id).encode()})


def stats_schema(partition_type: pa.StructType) -> pa.Schema:
    return pa.schema(
        [
            _id("partition", partition_type, 1, nullable=False),
            _id("spec_id", pa.int32(), 2, nullable=False),
            _id("data_record_count", pa.int64(), 3, nullable=False),
            _id("data_file_count", pa.int32(), 4, nullable=False),
            _id("total_data_file_size_in_bytes", pa.int64(), 5, nullable=False),
            _id("position_delete_record_count", pa.int64(), 6),
            _id("position_delete_file_count", pa.int32(), 7),
            _id("equality_delete_record_count", pa.int64(), 8),
            _id("equality_delete_file_count", pa.int32(), 9),
            _id("total_record_count", pa.int64(), 10),
            _id("last_updated_at", pa.int64(), 11),
            _id("last_updated_snapshot_id", pa.int64(), 12),
        ]
    )


_COUNTS = (
    "data_record_count",
    "data_file_count",
    "total_data_file_size_in_bytes",
    "position_delete_record_count",
    "position_delete_file_count",
    "equality_delete_record_count",
    "equality_delete_file_count",
)


def aggregate(entries: Iterable[FileEntry], partition_type: pa.StructType, commit_ms: Mapping[int, int]) -> pa.Table:
    """The partition statistics rows of ``entries`` (``commit_ms``: snapshot id -> its commit
    time in milliseconds), ordered by spec id and partition."""
    names = {int((f.metadata or {})[b"PARQUET:field_id"]): f.name for f in partition_type}
    rows: dict[tuple[int, tuple[tuple[int, Any], ...]], dict[str, Any]] = {}
    for e in entries:
        row = rows.setdefault((e.spec_id, e.partition), {c: 0 for c in _COUNTS} | {"last_updated_at": None, "last_updated_snapshot_id": None})
        if e.content == DATA:
            row["data_record_count"] += e.record_count
            row["data_file_count"] += 1
            row["total_data_file_size_in_bytes"] += e.file_size_in_bytes
        elif e.content == POSITION_DELETES:
            row["position_delete_record_count"] += e.record_count
            row["position_delete_file_count"] += 1
        else:
            row["equality_delete_record_count"] += e.record_count
            row["equality_delete_file_count"] += 1
        at = commit_ms.get(e.snapshot_id) if e.snapshot_id is not None else None
        if at is not None and (row["last_updated_at"] is None or at > row["last_updated_at"]):
            row["last_updated_at"], row["last_updated_snapshot_id"] = at, e.snapshot_id
    out = []
    for (spec_id, partition), row in sorted(rows.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
        values = dict(partition)
        out.append({"partition": {names[i]: values.get(i) for i in names}, "spec_id": spec_id, "total_record_count": None, **row})
    schema = stats_schema(partition_type)
    return pa.Table.from_pylist(out, schema=schema)


def parquet_bytes(rows: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(rows, sink)
    return sink.getvalue()


def partition_type(table: Table) -> pa.StructType:
    """The table's unified partition type (every spec's fields by field id, in id order) as an
    Arrow struct whose fields carry their Iceberg field ids."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    schemas = list(table.schemas().values())
    fields: dict[int, NestedField] = {}
    for spec in table.specs().values():
        for f in spec.fields:
            if f.field_id in fields:
                continue
            source = next((t for s in reversed(schemas) if (t := _find_type(s, f.source_id)) is not None), None)
            if source is None:
                continue
            fields[f.field_id] = NestedField(f.field_id, f.name, f.transform.result_type(source), required=False)
    arrow = schema_to_pyarrow(Schema(*[fields[i] for i in sorted(fields)]))
    return pa.struct(list(arrow))


def _find_type(schema: Schema, field_id: int) -> IcebergType | None:
    try:
        return schema.find_type(field_id)
    except ValueError:  # a dropped source column
        return None


def file_entries(table: Table, snapshot: Snapshot) -> list[FileEntry]:
    """The live data and delete files of ``snapshot`` (its manifests, as pyiceberg reads them)."""
    specs = table.specs()
    out = []
    for manifest in snapshot.manifests(table.io):
        spec = specs[manifest.partition_spec_id]
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            partition = tuple((pf.field_id, f.partition[i]) for i, pf in enumerate(spec.fields))
            out.append(
                FileEntry(manifest.partition_spec_id, partition, int(f.content), int(f.record_count), int(f.file_size_in_bytes), entry.snapshot_id)
            )
    return out
