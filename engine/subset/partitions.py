"""Which partitions a predicate takes whole, leaves out, or cuts: the first step of every
subset answer (docs/SUBSETS.md, "How an answer is found").

Only the partitions it cuts (``some``) need estimates: the rows of the others are known
exactly, so a subset of whole partitions is answered by merging their stored statistics.
Two evaluators decide it from the stored metrics of the predicate's columns: the inclusive
one (no row can match: ``none``) and the strict one (every row must match: ``all``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine import expressions as ex
from engine.expressions.strict import StrictMetricsEvaluator
from engine.expressions.tree import BoundReference
from engine.subset.model import Partitions
from engine.subset.stored import StoredInputs


@dataclass(frozen=True)
class Split:
    """The partitions as the predicate splits them, with what the split was decided on."""

    partitions: Partitions
    #: partition key -> its rows
    rows: Mapping[str, int]
    #: partition key -> column -> the evaluators' metrics of the predicate's columns
    metrics: Mapping[str, Mapping[str, ex.ColumnMetrics]]

    @property
    def whole_partitions(self) -> bool:
        """Whether the subset is a union of whole partitions (its merged statistics are exact)."""
        return not self.partitions.some

    @property
    def whole_table(self) -> bool:
        """Whether the subset is every row (the table's own statistics answer)."""
        return self.whole_partitions and sum(self.rows[k] for k in self.partitions.all) == sum(self.rows.values())

    @property
    def exact_rows(self) -> int:
        """The rows of the partitions taken whole."""
        return sum(self.rows[k] for k in self.partitions.all)

    @property
    def contributing(self) -> tuple[str, ...]:
        """The partitions the subset's rows can come from."""
        return (*self.partitions.all, *self.partitions.some)


def split(expr: ex.Expression, stored: StoredInputs) -> Split:
    """The partitions of ``stored``'s table split by ``expr`` (bound); an empty partition
    holds no matching row."""
    refs = [r for r in ex.references(expr) if isinstance(r, BoundReference)]
    inclusive = ex.InclusiveMetricsEvaluator(expr)
    strict = StrictMetricsEvaluator(expr)
    all_, some, none = [], [], []
    metrics: dict[str, dict[str, ex.ColumnMetrics]] = {}
    for key, rows in stored.rows.items():
        m = metrics[key] = stored.column_metrics(key, refs)
        of = m.get
        if rows == 0 or not inclusive.eval(lambda ref: of(ref.name), rows):
            none.append(key)
        elif strict.eval(lambda ref: of(ref.name), rows):
            all_.append(key)
        else:
            some.append(key)
    return Split(Partitions(tuple(all_), tuple(some), tuple(none)), stored.rows, metrics)
