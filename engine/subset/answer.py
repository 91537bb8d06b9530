"""Statistics of the rows of a table matching a predicate, from its stored statistics
(``stored`` or ``estimated``) or, when asked, computed (docs/SUBSETS.md): ``Subset``, the
entry point the lookups (``where=``), Flight, the CLI and Spark call.

``Subset(ts, where, exact)`` first splits the partitions with the two metrics evaluators
(partitions.py). With no partition cut, the subset is a union of whole partitions and its
statistics are a merge of theirs: exact (merge.py). Otherwise each cut partition's matching
rows are an interval (rowcounts.py) and every statistic says its bounds and assumption
(estimates.py, distributions.py). The answers are the lookups' own tables with the methods
in their metadata (tables.py); ``exact=True`` computes them instead (computed.py).

``ts`` is any object with ``TableStatistics``'s lookups (engine.lookup delegates here, so
this package cannot import it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from engine import expressions as ex
from engine.exceptions import InvalidArgumentError
from engine.subset import tables
from engine.subset.computed import Computed, SubsetRunner
from engine.subset.counts import Count
from engine.subset.distributions import bins, top_values
from engine.subset.model import Answer, Header, Partitions
from engine.subset.partitions import split
from engine.subset.rowcounts import RowCounts
from engine.subset.stored import StoredInputs


class Subset:
    """The rows of ``ts``'s table matching ``where``; ``exact``: compute what is not stored."""

    def __init__(
        self, ts: Any, where: ex.Where, exact: bool = False, columns: Sequence[str] | None = None, runner: SubsetRunner | None = None
    ) -> None:
        """``columns``: the columns the caller will ask for (read with the predicate's, one
        read per partition), None: not known yet; ``runner``: computes the subset (``exact``)."""
        self.ts = ts
        self.expr = ts.bind(where)
        self.nf = ex.rewrite_not(self.expr)
        self.exact = exact
        self.where = str(self.expr)
        self._stored = StoredInputs(ts, columns)
        self._split = split(self.expr, self._stored)
        self.partitions: Partitions = self._split.partitions
        self._counts = RowCounts(self._stored, self._split, self.expr, self.nf)
        self._header = Header(self.where, exact, self.partitions)
        self._computed = Computed(ts, self.expr, self.where, self.partitions, runner)

    def __repr__(self) -> str:
        """The predicate and how it splits the partitions (nothing read): each answer's table has
        its methods in its schema metadata (``methods_of``), estimates with their bounds."""
        p = self.partitions
        how = "computed on the data" if self.exact else "stored or estimated (methods_of(answer))"
        return (
            f"<Subset of {self.ts.table!r} where {self.where}: partitions {len(p.all)} whole, {len(p.some)} in part, "
            f"{len(p.none)} without a matching row; {how}>"
        )

    @property
    def whole_partitions(self) -> bool:
        """Whether the subset is a union of whole partitions (its merged statistics are exact)."""
        return self._split.whole_partitions

    def row_count(self) -> Answer:
        """The subset's row count: stored when every cut partition's count is one number."""
        return self._counts.total()

    def partition_count(self, key: str) -> Count:
        """The matching rows of one partition, as an interval (rowcounts.py)."""
        return self._counts.partition(key)

    def statistics(self, columns: Sequence[str] | None = None, statistics: Sequence[str] | None = None) -> pa.Table:
        """The statistics table of today's lookup (same columns, same types) for the subset, its
        methods in the schema metadata (``engine.subset.methods_of``)."""
        ts = self.ts
        names = [ts.resolve_column(c) for c in columns] if columns is not None else ts.statistics_columns()
        schema = ts.statistics_schema(None, list(statistics) if statistics is not None else None)
        if self.exact:
            return self._computed.statistics(names, schema)
        base = ts.statistics(names, None, [f.name for f in schema if f.name != "column"])
        asked = set(statistics) if statistics is not None else set()
        return tables.statistics_table(names, base, schema, asked, self._counts, self._header)

    def top_frequencies(self, column: str, k: int = 10, typed: bool = False) -> pa.Table:
        """The subset's ``k`` most frequent values of ``column``, as the table-level lookup
        returns them; every partition the rows can come from must store all its values."""
        ts = self.ts
        column = ts.resolve_column(column)
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        if self.exact:
            return self._computed.top_frequencies(column, k, typed)
        if column not in ts.frequency_index(None):
            ts.column_type(column)
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        if self._split.whole_table:
            return tables.stored_top_table(ts.top_frequencies(column, k, None, typed=typed), column, [], self._header)
        items, exact = top_values(column, k, self._counts, self.where)
        return tables.top_table(items, exact, column, ts.column_type(column), typed, self._header)

    def histogram(self, column: str) -> pa.Table:
        """The subset's counts on the table's bins of ``column`` (the same bins, so the
        subset's histogram compares with the table's bin by bin)."""
        ts = self.ts
        column = ts.resolve_column(column)
        if self.exact:
            return self._computed.histogram(column)
        spec = ts.histogram_spec(column)
        base = ts.histogram(column)
        if spec is None or self._split.whole_table:
            return tables.stored_histogram_table(base, column, self._header)
        return tables.histogram_table(base, column, bins(column, spec, self._counts), self._header)

    def computed(self, columns: Sequence[str] | None = None) -> Any:
        """The subset's statistics computed on the data (``engine.runtime.subset.compute_subset``)."""
        return self._computed.statistics_of(columns)
