"""Table formats behind one interface (:class:`TableSource`).

``open_table`` is the single place that decides which implementation reads a
location, so callers never branch on the format. Only Hive-style Parquet
directories exist today; Iceberg, Delta and Hudi will be detected here (by their
metadata folders) and served behind the same interface.
"""
from __future__ import annotations

from engine.sources.base import DataFile, Partition, TableSource
from engine.sources.parquet import ParquetDirectorySource

__all__ = ["DataFile", "ParquetDirectorySource", "Partition", "TableSource", "open_table"]


def open_table(uri: str, name: str | None = None) -> TableSource:
    """The table at ``uri`` (local path, ``file://`` or ``s3://``), listed and schema-checked.

    ``name`` defaults to the last path component of ``uri``.
    """
    return ParquetDirectorySource(uri, name)
