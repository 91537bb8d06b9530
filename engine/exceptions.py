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


class UnsupportedOptionsError(InvalidArgumentError):
    """Analysis options that cannot go together (refused before any work starts),
    e.g. value partitions with the Redis frequency strategy."""


class AnalyzeError(MetastoreError):
    """An analyze job failed; nothing it wrote was published."""


class NodeLostError(AnalyzeError):
    """A task of an analyze job was lost with its Ray worker or node, and Ray's retries
    were spent: the message names the partition and the node; nothing was published."""


class ServiceError(MetastoreError):
    """An external service (Ray, redis-server) could not be started or reached."""


# --------------------------------------------------------------------------- catalog (engine/catalog)


class CatalogError(MetastoreError):
    """Base class of the statistics catalog's errors (docs/CATALOG.md)."""


class CatalogCorruptError(CatalogError):
    """A transaction or checkpoint file is damaged, missing or does not belong to the log.

    The message names the file; ``uri`` holds it. ``Catalog.open(..., up_to_last_good=True)``
    opens the state of the last good transaction, ``engine.catalog.rebuild`` recovers
    from the statistics files.
    """

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri


class CommitConflictError(CatalogError):
    """Another writer committed the transaction id this commit was for; nothing was written.

    ``txn_id`` holds the id. Refresh the catalog and build the transaction again.
    """

    def __init__(self, message: str, txn_id: int = 0) -> None:
        super().__init__(message)
        self.txn_id = txn_id


class CommitFailedError(CatalogError):
    """A commit could not be completed (an I/O error).

    ``maybe_committed`` is False when the transaction is known not to be in the log
    (retrying is safe), True when it could not be determined (refresh and look).
    """

    def __init__(self, message: str, txn_id: int = 0, maybe_committed: bool = False) -> None:
        super().__init__(message)
        self.txn_id = txn_id
        self.maybe_committed = maybe_committed


class UnsupportedCatalogVersionError(CatalogError):
    """The catalog was written in a format version this Metastore does not know."""


class IncompatibleSchemaError(CatalogError):
    """Statistics computed for one schema cannot stand for data of another (no inheritance)."""
