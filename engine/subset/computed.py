"""A subset's answers computed on its rows (``exact=True``; docs/SUBSETS.md, "Computed answers
and their cache"): the analyze job over the matching rows, answered as ``computed``.

Computing is a Ray job (``engine.runtime.subset.compute_subset``), a layer above: it comes in
as the ``runner`` (``engine.lookup.use_subset_runner``, registered by engine/runtime/exact.py), so
the lookups and subsets import no runtime and stay importable (and fast to import) without Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from engine import expressions as ex
from engine import values as value_forms
from engine.exceptions import MetastoreError
from engine.subset.model import Answer, Header, Method, Partitions

#: computes a subset: (the table's TableStatistics, the bound predicate, the columns or None for
#: all) -> the subset's statistics as an analyzed table (a TableStatistics)
SubsetRunner = Callable[[Any, ex.Expression, list[str] | None], Any]


class Computed:
    """The computed statistics of one subset, computed once per set of columns asked."""

    def __init__(self, ts: Any, expr: ex.Expression, where: str, partitions: Partitions, runner: SubsetRunner | None = None) -> None:
        self.ts = ts
        self.runner = runner
        self.expr = expr
        self.header = Header(where, True, partitions)
        self._result: tuple[tuple[str, ...] | None, Any] | None = None

    def statistics_of(self, columns: Sequence[str] | None = None) -> Any:
        """The subset as an analyzed table (``compute_subset``'s lookups); computed again only
        when other columns are asked than the ones it was computed for (None: all columns)."""
        key = tuple(columns) if columns is not None else None
        if self._result is None or (self._result[0] is not None and self._result[0] != key):
            if self.runner is None:
                raise MetastoreError(
                    "computing a subset (exact=True) runs a Ray job, which engine.api registers with the lookups: import engine.api first"
                )
            self._result = (key, self.runner(self.ts, self.expr, list(columns) if columns is not None else None))
        return self._result[1]

    def statistics(self, names: list[str], schema: pa.Schema) -> pa.Table:
        """The computed rows of ``names`` in the lookup's ``schema``, every answer computed; a
        statistic the computed subset lacks (a user statistic this process cannot load) is null
        and ``unavailable``, with the reason."""
        sub = self.statistics_of(names)
        held = set(sub.statistics_schema(None).names)
        wanted = [f.name for f in schema if f.name != "column"]
        t = sub.statistics(names, None, [s for s in wanted if s in held])
        missing = [f for f in schema if f.name != "column" and f.name not in held]
        for f in missing:
            t = t.append_column(f, pa.nulls(t.num_rows, f.type))
        t = t.select([f.name for f in schema])
        why = getattr(getattr(sub, "subset", None), "unavailable", None) or {}
        gone = {f.name for f in missing}
        answers = [
            Answer(r["column"], s, None, Method.UNAVAILABLE, reason=why.get(s, "the computed subset does not hold it"))
            if s in gone
            else Answer(r["column"], s, r.get(s), Method.COMPUTED)
            for r in t.to_pylist()
            for s in wanted
        ]
        rc = sum(p.rows for p in sub.partitions())
        return self.header.attach(t, [Answer("*", "row_count", rc, Method.COMPUTED), *answers], "statistics")

    def top_frequencies(self, column: str, k: int, typed: bool) -> pa.Table:
        """Answers keyed by the value's text form, whether or not the values are ``typed``."""
        t = self.statistics_of([column]).top_frequencies(column, k, None, typed=typed)
        texts = t.column("value").to_pylist() if not typed else value_forms.encode(t.column("value")).to_pylist()
        answers = [Answer(column, str(v), f, Method.COMPUTED) for v, f in zip(texts, t.column("frequency").to_pylist())]
        return self.header.attach(t, answers, "top_frequencies")

    def histogram(self, column: str) -> pa.Table:
        """On the subset's own edges (its range in the table's number of bins), as analyze bins."""
        t = self.statistics_of([column]).histogram(column)
        answers = [Answer(column, f"bin:{b}", c, Method.COMPUTED) for b, c in zip(t["bin"].to_pylist(), t["count"].to_pylist())]
        return self.header.attach(t, answers, "histogram")
