"""A Parquet table of Spark's catalog read straight from its files: the catalog's partitions, typed.

:class:`CatalogParquetSource` is :class:`engine.sources.parquet.ParquetDirectorySource`
(the same footer checks, schema unification, reads and content fingerprint) with
two things taken from the catalog instead of guessed from folder names:

- *which* partitions: those registered in the catalog, each a folder
  ``<table location>/<key>`` (what Spark reads; a folder that is on disk but not
  registered is not part of the table for Spark, and is not read). Tables whose
  partitions are not tracked in the catalog are discovered from the folders, as
  Spark does.
- the partition columns' *types* (``part INT``, ``day DATE``, ...) instead of the
  int64-or-string inference; values are parsed with Arrow's cast from the text
  Spark stores.

Only "plain" tables qualify: every partition folder is below the table location
at the Hive path of its values. :func:`plan_files` says whether a table is plain
and, if not, why (the caller then reads the table through Spark).
"""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs

from engine import fileio
from engine.exceptions import InvalidTableLayoutError, TableNotFoundError
from engine.sources.base import DataFile, Partition
from engine.sources.parquet import Listing, ParquetDirectorySource, is_hidden
from spark_bridge.catalog import CatalogPartition, CatalogTableInfo, arrow_type
from spark_bridge.source import hive_escape, value_text

__all__ = ["CatalogParquetSource", "catalog_partition_key", "catalog_partition_keys", "check_registered", "partition_key", "plan_files"]

#: location schemes whose files engine.fileio reads
_READABLE_SCHEMES = ("", "file", "s3", "s3a", "s3n")


def partition_key(values: tuple[tuple[str, str | None], ...]) -> str:
    """The Hive path of partition values (``a=1/b=x%2Fy``; null is ``__HIVE_DEFAULT_PARTITION__``)."""
    return "/".join(f"{hive_escape(c)}={'__HIVE_DEFAULT_PARTITION__' if v is None else hive_escape(v)}" for c, v in values)


def _scheme(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def catalog_partition_keys(info: CatalogTableInfo) -> dict[tuple[str | None, ...], str]:
    """For the DataFrame path: the canonical value texts of each registered partition -> its key.

    The key is the partition's folder below the table location (``part=00`` for
    the int value 0), or the Hive path of its values when it lives elsewhere, so
    both paths key a table's partitions alike.
    """
    if not info.partitions:
        return {}
    types = [arrow_type(info.spark_type(c)) for c in info.partition_columns]
    out: dict[tuple[str | None, ...], str] = {}
    for p in info.partitions:
        texts: list[str | None] = []
        for (_, raw), t in zip(p.values, types):
            if raw is None:
                texts.append(None)
                continue
            try:
                texts.append(value_text(pa.array([raw], pa.string()).cast(t)[0].as_py()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                break
        else:
            out[tuple(texts)] = catalog_partition_key(info, p)
    return out


def catalog_partition_key(info: CatalogTableInfo, partition: CatalogPartition) -> str:
    """A registered partition's key in the store: its folder below the table location, else the Hive path of its values."""
    root = (info.location or "").rstrip("/") + "/"
    location = partition.location
    if location is not None and info.location is not None and location.startswith(root):
        return location[len(root) :].strip("/")
    return partition_key(partition.values)


def check_registered(info: CatalogTableInfo) -> None:
    """Raise TableNotFoundError if a partitioned table has no partition registered (Spark reads no rows)."""
    if info.partition_columns and info.tracks_partitions and not info.partitions:
        raise TableNotFoundError(
            f"table {info.name} has partition columns {list(info.partition_columns)} but no partition is "
            f"registered in the catalog, so Spark reads no rows from it; if {info.location} holds key=value "
            f"folders, register them with MSCK REPAIR TABLE {info.name}"
        )


def plan_files(info: CatalogTableInfo) -> tuple[dict[str, tuple[tuple[str, str | None], ...]] | None, str]:
    """``(registered partitions by key, "")`` if the table's files can be read directly, else ``(None, why not)``.

    For an unpartitioned table, or one whose partitions Spark discovers from the
    folders, the first element is ``{}`` (list the directory). Raises
    TableNotFoundError when a partitioned table has no partitions registered.
    """
    if info.provider != "parquet":
        return None, f"provider {info.provider!r} (a Hive serde table): read through Spark"
    if not info.location:
        return None, "the catalog gives no location"
    if _scheme(info.location) not in _READABLE_SCHEMES:
        return None, f"location scheme {_scheme(info.location)!r} is not one Metastore reads (local, s3)"
    if not info.partition_columns or not info.tracks_partitions:
        return {}, ""
    check_registered(info)
    assert info.partitions is not None
    root = info.location.rstrip("/") + "/"
    keyed: dict[str, tuple[tuple[str, str | None], ...]] = {}
    for p in info.partitions:
        key = partition_key(p.values)
        if p.location is None:
            return None, f"partition {key} has no location in the catalog"
        if not p.location.startswith(root):
            return None, f"partition {key} is at {p.location}, outside the table location {info.location}"
        relative = p.location[len(root) :].strip("/")
        decoded = tuple(
            (unquote(k), None if v == "__HIVE_DEFAULT_PARTITION__" else unquote(v))
            for k, _, v in (part.partition("=") for part in relative.split("/"))
        )
        if decoded != p.values:
            return None, f"partition {key} is in folder {relative!r}, not at the Hive path of its values"
        keyed[relative] = p.values
    return keyed, ""


class CatalogParquetSource(ParquetDirectorySource):
    """The Parquet files of a catalog table, partitioned as the catalog says."""

    def __init__(
        self,
        info: CatalogTableInfo,
        name: str,
        registered: dict[str, tuple[tuple[str, str | None], ...]] | None = None,
    ) -> None:
        assert info.location is not None
        self.table = info.name
        self._registered = registered or None  # key (folder relative to the location) -> values
        self._catalog_columns = info.partition_columns
        fields = [pa.field(c, arrow_type(info.spark_type(c)), nullable=True) for c in info.partition_columns]
        super().__init__(info.location, name)
        # the catalog's partition types replace the folder-name inference
        data = [f for f in self._schema if f.name not in info.partition_columns]
        self._partition_fields = fields
        self._schema = pa.schema(data + fields)
        if self._registered is not None:
            self._partitions = [Partition(p.key, self._registered[p.key], p.files) for p in self._partitions]
        self._typed = {p.key: self._parse_values(p) for p in self._partitions}
        missing = _missing_columns(info, [f.name for f in data])
        if missing:
            raise InvalidTableLayoutError(f"{self.uri}: {missing}")

    def _parse_values(self, partition: Partition) -> dict[str, pa.Scalar]:
        values = dict(partition.values)
        out = {}
        for f in self._partition_fields:
            raw = values.get(f.name)
            if raw is None:
                out[f.name] = pa.scalar(None, f.type)
                continue
            try:
                out[f.name] = pa.array([raw], pa.string()).cast(f.type)[0]
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InvalidTableLayoutError(
                    f"{self._display_dir(partition.key)}: partition value {raw!r} of column {f.name!r} is not a {f.type} ({exc})"
                ) from exc
        return out

    # ------------------------------------------------------------ ParquetDirectorySource hooks
    def _list(self) -> Listing:
        if self._registered is None:
            listing = super()._list()
            if tuple(k.lower() for k in listing.keys) != tuple(c.lower() for c in self._catalog_columns):
                raise InvalidTableLayoutError(
                    f"{self.uri}: partition folders are keyed {list(listing.keys)}, the catalog's partition columns are {list(self._catalog_columns)}"
                )
            return listing
        partitions: dict[str, list[DataFile]] = {}
        for key in sorted(self._registered):
            directory = fileio.join(self._root, key)
            infos = self._fs.get_file_info(pafs.FileSelector(directory, recursive=False, allow_not_found=True))
            files = []
            for info in infos:
                base = info.path.rstrip("/").rsplit("/", 1)[-1]
                if is_hidden(base):
                    continue
                if info.type == pafs.FileType.Directory:
                    raise InvalidTableLayoutError(f"{self._display_dir(key)} holds a folder {base!r}; partition folders must hold only data files")
                if info.type == pafs.FileType.File:
                    files.append(DataFile(path=info.path, size=int(info.size or 0), mtime_ns=info.mtime_ns))
            partitions[key] = sorted(files, key=lambda f: f.path)
        if not any(partitions.values()):
            raise TableNotFoundError(f"table {self.table}: no data files in its {len(partitions)} registered partition(s) under {self.uri}")
        return Listing(keys=tuple(self._catalog_columns), partitions=partitions)

    def _partition_constants(self, partition: Partition, target: pa.Schema) -> dict[str, pa.Scalar]:
        typed = self._typed[partition.key]
        return {f.name: typed[f.name] for f in self._partition_fields if f.name in target.names}


def _missing_columns(info: CatalogTableInfo, file_columns: list[str]) -> str:
    """Why the files' columns are not the catalog's data columns ('' if they are; names compare case-insensitively)."""
    catalog = {c.lower() for c in info.data_columns}
    files = {c.lower() for c in file_columns}
    if catalog == files:
        return ""
    parts = []
    if catalog - files:
        parts.append(f"the catalog's column(s) {sorted(catalog - files)} are in no data file")
    if files - catalog:
        parts.append(f"the data files' column(s) {sorted(files - catalog)} are not in the catalog's schema")
    return "; ".join(parts) + " (Spark reads the catalog's columns)"
