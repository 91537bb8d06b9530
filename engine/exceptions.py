"""Every error Metastore raises on purpose derives from MetastoreError.

The CLI turns a MetastoreError into one clear line and a non-zero exit; anything
else is a bug and keeps its traceback.
"""
from __future__ import annotations


class MetastoreError(Exception):
    """Base class of all errors Metastore raises deliberately."""


class TableNotFoundError(MetastoreError):
    """The table location does not exist or holds no data files."""


class InvalidFileError(MetastoreError):
    """A data file is not Parquet, is truncated or cannot be decoded.

    The message always names the file.
    """


class SchemaDriftError(MetastoreError):
    """Two data files disagree on a column's type in a way that cannot be unified.

    The message names the column and both files.
    """


class InvalidTableLayoutError(MetastoreError):
    """The directory layout is not a flat or Hive-style partitioned table."""


class StatisticsNotFoundError(MetastoreError):
    """No published statistics exist for the requested table, partition or column."""


class InvalidArgumentError(MetastoreError):
    """A caller passed a value the API cannot act on (unknown column, bad bin range, ...)."""


class AnalyzeError(MetastoreError):
    """An analyze job failed; nothing it wrote was published."""


class ServiceError(MetastoreError):
    """An external service (Ray, redis-server) could not be started or reached."""
