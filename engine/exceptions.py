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


class UnsupportedTableFeatureError(MetastoreError):
    """A table format feature Metastore cannot read correctly (a Delta reader feature,
    column mapping, ...): refused rather than counting rows that are not live.

    The message names the table and the feature.
    """


class AccessDeniedError(MetastoreError):
    """The object store refused to serve the table (no credentials found, or credentials it
    rejects or that lack the permission). The message names the location and says which."""


class SnapshotNotFoundError(MetastoreError):
    """The snapshot, version or instant asked for (``at_snapshot`` / ``as_of``) does not
    exist in the table's history."""


class SourceChangedError(MetastoreError):
    """The table's data is no longer what its statistics describe (moved, or at another
    snapshot): an answer computed from the data now would not be one of those statistics.
    The message names the table's location and both snapshots."""


class StatisticsNotFoundError(MetastoreError):
    """No published statistics exist for the requested table, partition or column."""


class StatisticsFileCorruptError(MetastoreError):
    """A statistics file in the store is damaged: its content differs from the checksum the
    catalog recorded when it was written, or it is not a readable Parquet file (truncated).

    The message names the file; ``uri`` holds it. Answers are refused rather than read
    from it: analyze the table again, or roll back (docs/CATALOG.md).
    """

    def __init__(self, message: str, uri: str = "") -> None:
        super().__init__(message)
        self.uri = uri


class StatisticsExpiredError(StatisticsNotFoundError):
    """A time travel to a state that retention expired; the message says when and by what
    (engine/catalog/retention.py)."""


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


# --------------------------------------------------------------------------- predicates (engine/expressions)


class ExpressionError(InvalidArgumentError):
    """A predicate expression that cannot be parsed or bound to the table's schema
    (unbalanced parentheses, unknown operator, unknown column, a literal that does
    not fit the column's type).

    One line that names the problem and where it is; ``position`` holds the
    0-based character offset in ``text`` (-1 when the expression was not text).
    """

    def __init__(self, message: str, position: int = -1, text: str | None = None) -> None:
        self.problem = message
        self.position = position
        self.text = text
        if text is not None and position >= 0:
            message = f"{message} at character {position + 1} in {_window(text, position)}"
        elif text is not None:
            message = f"{message} in {_window(text, 0)}"
        super().__init__(message)


def _window(text: str, position: int, width: int = 160) -> str:
    """The expression on one line (newlines as spaces, so positions still count), cut around ``position``."""
    flat = "".join(" " if c in "\r\n\t" else c for c in text)
    if len(flat) <= width:
        return repr(flat)
    start = max(0, min(position - width // 2, len(flat) - width))
    return ("…" if start else "") + repr(flat[start : start + width]) + ("…" if start + width < len(flat) else "")


# --------------------------------------------------------------------------- subsets (engine/subset)


class SubsetStatisticError(InvalidArgumentError):
    """A statistic of a filtered subset that the stored statistics neither give nor bound
    (percentiles of part of a partition, top frequencies of a column whose partitions keep
    only repeated values, ...): the message names the statistic and column and says that
    ``exact=True`` (``--exact``) computes it."""


def first_line(exc: BaseException) -> str:
    """The first line of a library's error (its name when it has no message), for our one-line errors."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
