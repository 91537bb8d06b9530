"""Iceberg equality delete files: which apply to a data file, and the rows they delete.

pyiceberg 0.12 plans and applies positional deletes but refuses equality deletes
(its planner raises on them). ``IcebergSource`` lets pyiceberg plan without them
(a manifest entry filter takes them out, :class:`EqualityDeletes` keeps them) and
applies them here, per the Iceberg spec (v2, "Scan planning" and "Equality Delete
Files"):

- an equality delete file applies to a data file when the data file's data sequence
  number is strictly less than the delete file's, and the delete file has the data
  file's partition spec and partition, or its spec is unpartitioned (a global delete);
- a row is deleted when its values of the delete file's equality columns
  (``equality_ids``, field ids) equal those of some row of the delete file, a null
  equal to a null.

The keys are read with pyarrow (columns found by their Parquet field ids, cast to
the data's types), and the rows matched by dictionary codes of data and keys
together (nulls encoded as a value), so any number of columns of any type is one
integer membership test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.exceptions import InvalidTableLayoutError, UnsupportedTableFeatureError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.schema import Schema

_FIELD_ID = b"PARQUET:field_id"


@dataclass(frozen=True)
class EqualityDelete:
    """One live equality delete file of a snapshot, as its manifest entry says."""

    path: str
    size: int
    sequence_number: int  # the entry's data sequence number
    equality_ids: tuple[int, ...]
    spec_id: int
    partition: tuple[object, ...]
    global_: bool  # written with an unpartitioned spec: applies to every partition


@dataclass
class EqualityDeletes:
    """What a scan plan's manifest entry filter saw: the equality delete files (taken out
    of pyiceberg's plan) and each data file's data sequence number."""

    deletes: list[EqualityDelete] = field(default_factory=list)
    data_sequence: dict[str, int] = field(default_factory=dict)
    _by_partition: dict[tuple[int, tuple[object, ...]] | None, list[EqualityDelete]] | None = None

    def entry_filter(self, unpartitioned_specs: set[int]) -> Callable[[ManifestEntry], bool]:
        """A ``manifest_entry_filter`` for pyiceberg's ``ManifestGroupPlanner.plan_files``:
        keeps data and positional delete entries, collects equality delete entries."""
        from pyiceberg.manifest import DataFileContent

        def keep(entry: ManifestEntry) -> bool:
            f = entry.data_file
            if f.content == DataFileContent.EQUALITY_DELETES:
                ids = tuple(int(i) for i in (f.equality_ids or ()))
                if not ids:
                    raise InvalidTableLayoutError(f"Iceberg equality delete file {f.file_path} has no equality field ids")
                self.deletes.append(
                    EqualityDelete(
                        path=f.file_path,
                        size=int(f.file_size_in_bytes),
                        sequence_number=int(entry.sequence_number or 0),
                        equality_ids=ids,
                        spec_id=int(f.spec_id or 0),
                        partition=tuple(cast("Iterable[object]", f.partition)),  # a Record iterates its values
                        global_=int(f.spec_id or 0) in unpartitioned_specs,
                    )
                )
                return False
            if f.content == DataFileContent.DATA:
                self.data_sequence[f.file_path] = int(entry.sequence_number or 0)
            return True

        return keep

    def for_data_file(self, data_file: DataFile) -> tuple[EqualityDelete, ...]:
        """The equality delete files that apply to one data file (sequence numbers, partition)."""
        if not self.deletes:
            return ()
        if self._by_partition is None:  # indexed once: a plan has many data files
            self._by_partition = {}
            for d in self.deletes:
                self._by_partition.setdefault(None if d.global_ else (d.spec_id, d.partition), []).append(d)
        seq = self.data_sequence.get(data_file.file_path, 0)
        candidates = self._by_partition.get(
            (int(data_file.spec_id or 0), tuple(cast("Iterable[object]", data_file.partition))), []
        ) + self._by_partition.get(None, [])
        return tuple(sorted((d for d in candidates if seq < d.sequence_number), key=lambda d: d.path))


def field_names(deletes: Iterable[EqualityDelete], schema: Schema, table: str) -> list[str]:
    """The (top-level) column names of the equality fields in ``schema`` (a pyiceberg schema)."""
    names: list[str] = []
    for d in deletes:
        for fid in d.equality_ids:
            try:
                name = schema.find_column_name(fid)
            except ValueError:
                name = None
            if name is None or "." in name:
                raise UnsupportedTableFeatureError(
                    f"{table}: Iceberg equality delete file {d.path}: equality field id {fid} is "
                    + ("not a column of the snapshot's schema" if name is None else f"a nested field ({name}), not supported")
                )
            if name not in names:
                names.append(name)
    return names


def read_keys(io: FileIO, delete: EqualityDelete, schema: Schema, types: dict[str, pa.DataType], table: str) -> pa.Table:
    """A delete file's key rows: its equality columns (found by field id), named and typed as
    the data's columns (``types``: column name -> Arrow type as the reader returns it)."""
    try:
        with io.new_input(delete.path).open(seekable=True) as stream:
            got = pq.read_table(stream)
    except FileNotFoundError:
        raise InvalidTableLayoutError(f"{table}: Iceberg equality delete file {delete.path} is missing") from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file: one line naming it
        raise InvalidTableLayoutError(f"{table}: Iceberg equality delete file {delete.path} unreadable: {type(exc).__name__}: {exc}") from None
    by_id = {int(f.metadata[_FIELD_ID]): i for i, f in enumerate(got.schema) if f.metadata and _FIELD_ID in f.metadata}
    columns, names = [], []
    for fid in delete.equality_ids:
        if fid not in by_id:
            raise InvalidTableLayoutError(f"{table}: Iceberg equality delete file {delete.path} has no column with field id {fid}")
        name = cast(str, schema.find_column_name(fid))  # a column: field_names checked the ids
        columns.append(got.column(by_id[fid]).cast(types[name]))
        names.append(name)
    return pa.table(columns, names=names)


def _codes(data: Sequence[pa.ChunkedArray | pa.Array], keys: Sequence[pa.ChunkedArray | pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """One integer per row of ``data`` and of ``keys``, equal exactly when every column's
    values are (a null equal to a null): dictionary codes of both together, combined."""
    n = len(data[0])
    combined: np.ndarray | None = None
    for d, k in zip(data, keys):
        chunks = [*(d.chunks if isinstance(d, pa.ChunkedArray) else [d]), *(k.chunks if isinstance(k, pa.ChunkedArray) else [k])]
        both = pa.chunked_array(chunks, type=d.type).combine_chunks()
        encoded = pc.dictionary_encode(both, null_encoding="encode")
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if combined is None:
            combined = codes
        else:
            combined = combined * len(encoded.dictionary) + codes
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64).reshape(-1)  # dense again: no overflow
    assert combined is not None
    return combined[:n], combined[n:]


def deleted_mask(batch: pa.RecordBatch | pa.Table, keys: pa.Table) -> np.ndarray:
    """Which rows of ``batch`` some key row of ``keys`` deletes (``keys``' columns by name)."""
    if batch.num_rows == 0 or keys.num_rows == 0:
        return np.zeros(batch.num_rows, bool)
    names = keys.column_names
    data_codes, key_codes = _codes([batch.column(n) for n in names], [keys.column(n) for n in names])
    return np.isin(data_codes, key_codes)


def apply(batch: pa.RecordBatch, key_tables: Sequence[pa.Table]) -> pa.RecordBatch:
    """``batch`` without the rows any of ``key_tables`` deletes."""
    if not key_tables or batch.num_rows == 0:
        return batch
    gone = np.zeros(batch.num_rows, bool)
    for keys in key_tables:
        gone |= deleted_mask(batch, keys)
    return batch.filter(pa.array(~gone)) if gone.any() else batch
