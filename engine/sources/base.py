"""The interface between Metastore and a table format.

Statistics are computed per partition, in parallel Ray tasks, so a source must
(1) list its partitions and files once on the driver, (2) know one unified
schema so every task reads the same types, and (3) pickle cheaply into a task
and read a projection of one partition there. Parquet directories implement it
today; Iceberg, Delta and Hudi tables will come behind the same interface, with
their manifests replacing the directory listing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine.exceptions import InvalidArgumentError

__all__ = ["DEFAULT_BATCH_SIZE", "DataFile", "Partition", "TableSource", "default_table_name"]

DEFAULT_BATCH_SIZE = 131072


@dataclass(frozen=True)
class DataFile:
    """One data file of a table.

    ``num_rows`` comes from the footer when the source has already read it
    (it is free then, and saves reopening every file to count rows).
    """

    path: str  # filesystem path as understood by the source's filesystem
    size: int
    mtime_ns: int | None
    num_rows: int | None = None
    #: the object store's content tag (S3 ETag), None on file systems: S3 times have
    #: 1 s resolution, so a same-size rewrite within a second changes only the tag
    etag: str | None = None


@dataclass(frozen=True)
class Partition:
    """The unit statistics are computed and published for."""

    key: str  # "" for an unpartitioned table, else "a=1/b=x" (Hive path, as on disk)
    values: tuple[tuple[str, str | None], ...]  # decoded partition values, None for __HIVE_DEFAULT_PARTITION__
    files: tuple[DataFile, ...]

    @property
    def row_count(self) -> int | None:
        """Rows in the partition if every file's count is known, else None."""
        total = 0
        for f in self.files:
            if f.num_rows is None:
                return None
            total += f.num_rows
        return total

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as columns (a tuple per field of its files), not as a DataFile object a file:
        # the job pickles every partition into its context and its tasks' arguments, and
        # Ray's pickler calls back into Python for each object (~2.5 us a DataFile:
        # 27 ms of the driver for a table of 10,000 files, half of it for 1,000 of 10 files)
        files = self.files
        return _partition, (
            self.key,
            self.values,
            tuple(f.path for f in files),
            tuple(f.size for f in files),
            tuple(f.mtime_ns for f in files),
            tuple(f.num_rows for f in files),
            tuple(f.etag for f in files),
        )


def _partition(
    key: str,
    values: tuple[tuple[str, str | None], ...],
    paths: tuple[str, ...],
    sizes: tuple[int, ...],
    mtimes: tuple[int | None, ...],
    rows: tuple[int | None, ...],
    etags: tuple[str | None, ...],
) -> Partition:
    return Partition(key, values, tuple(map(DataFile, paths, sizes, mtimes, rows, etags)))


def default_table_name(uri: str) -> str:
    """The last path component of ``uri`` (``s3://b/warehouse/sales/`` -> ``sales``)."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return name or uri


def projected_schema(uri: str, schema: pa.Schema, columns: list[str]) -> pa.Schema:
    """The schema of ``columns`` of a source (one error line for a string, an unknown or a repeated column)."""
    if isinstance(columns, str):
        raise InvalidArgumentError("columns must be a list of column names, not a string")
    names = set(schema.names)
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise InvalidArgumentError(f"{uri}: unknown column(s) {unknown}")
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"{uri}: a column is requested twice in {list(columns)}")
    return pa.schema([schema.field(c) for c in columns])


class TableSource(ABC):
    """A table whose partitions can be listed on the driver and read in workers.

    Implementations must pickle cheaply: no open file handles; the listing and
    the unified schema travel with the object so workers never list again.
    """

    uri: str
    name: str
    # set by implementations when they list the table (on the driver); they travel with the object
    _partitions: list[Partition]
    _schema: pa.Schema
    _partition_fields: list[pa.Field]
    _snapshot_id: str

    def partitions(self) -> list[Partition]:
        """All partitions, ordered by key."""
        return list(self._partitions)

    def schema(self) -> pa.Schema:
        """The unified schema: data columns, then partition columns."""
        return self._schema

    def partition_fields(self) -> list[pa.Field]:
        """The partition columns, in path order (empty for an unpartitioned table)."""
        return list(self._partition_fields)

    def snapshot_id(self) -> str:
        """A fingerprint of the table's content; it changes whenever a data file does."""
        return self._snapshot_id

    def partition_fingerprints(self) -> dict[str, str] | None:
        """``{partition key: fingerprint of its data}``, or None if this source cannot tell.

        An analyze inherits the statistics of partitions whose fingerprint did not
        change (docs/CATALOG.md), so a fingerprint must change whenever the
        partition's data may have. The default is None: every partition is
        recomputed on every analyze.
        """
        return None

    def snapshots_since(self, snapshot_id: str) -> int | None:
        """How many snapshots the table has committed after ``snapshot_id`` (0: it is the
        latest), from the format's history alone (no data read); None when the source has
        no history (plain Parquet directories) or ``snapshot_id`` is not in it."""
        return None

    def column_bounds(self, partition: Partition, columns: list[str]) -> dict[str, tuple[pa.Scalar, pa.Scalar] | None]:
        """Min and max of top-level ``columns`` in ``partition`` from metadata alone (file
        footers, manifests), without reading data.

        ``{name: (min, max)}`` (scalars of the column's table type, nulls and NaN
        excluded), ``{name: None}`` when the partition holds no such value; a column
        left out is unknown. Analyze uses them only as a guess it checks (histogram
        edges decided before the data is read); the default knows nothing.
        """
        return {}

    @abstractmethod
    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        """The rows of ``partition``, projected to ``columns``.

        Every batch's schema is exactly ``columns`` of :meth:`schema`, in that order,
        except that a column named in ``dictionary`` may come dictionary-encoded (a
        dictionary of its type's values) where the storage holds it so: a reader
        that counts values can then count codes instead of decoding every row. A
        source may ignore ``dictionary``.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(uri={self.uri!r}, name={self.name!r})"
