"""What the review reads of a table's statistics: the part of ``engine.lookup``'s
``TableStatistics`` that the diff and the alerts call (a Protocol: this package sits below the
lookups and does not import them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.catalog.published import PublishedState
    from engine.stats.histograms import HistogramSpec


class PartitionRows(Protocol):
    """A partition of a published state: its key and rows."""

    @property
    def key(self) -> str: ...

    @property
    def rows(self) -> int: ...


class Statistics(Protocol):
    """One published state's statistics of a table (``engine.lookup.TableStatistics``)."""

    table: str
    state: PublishedState
    schema: pa.Schema

    @property
    def txn_id(self) -> int | None: ...

    @property
    def job_id(self) -> str: ...

    @property
    def snapshot(self) -> str: ...

    def stale_by(self) -> int | None: ...

    def partitions(self) -> Sequence[PartitionRows]: ...

    def resolve_column(self, column: str | Sequence[str]) -> str: ...

    def column_type(self, column: str) -> pa.DataType: ...

    def statistics(self, columns: Sequence[str] | None = None, partition: str | None = None, statistics: Sequence[str] | None = None) -> pa.Table: ...

    def statistics_columns(self, partition: str | None = None) -> list[str]: ...

    def frequency_index(self, partition: str | None = None) -> dict[str, tuple[int, int, int, str]]: ...

    def top_frequencies(self, column: str, k: int = 10, partition: str | None = None) -> pa.Table: ...

    def top_counts(self, partition: str | None = None) -> dict[str, int | None]: ...

    def histogram_spec(self, column: str, partition: str | None = None) -> HistogramSpec | None: ...

    def histogram(self, column: str, partition: str | None = None) -> pa.Table: ...
