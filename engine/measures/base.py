"""The shape of every statistic: an ``Accumulator`` (zero / update(batch) / merge /
finalize), and the ``Measure`` a registered statistic (engine/measures) is, which also
declares everything the rest of the engine needs to carry it.

Partition tasks fold batches into a state, ship the (small) state to the driver, and the
driver merges states of many partitions into the table's state without rescanning data
(the shape of Ray Data's ``AggregateFn``). Keeping states plain, picklable Python values
is what lets partitions roll up to tables. The sketches and value counts of
engine/stats are accumulators; a ``Measure`` beside ``zero``/``update``/``merge``/
``finalize`` declares its statistics.parquet columns (what ``finalize`` returns), its
partial-state fields (what ``encode`` returns and ``decode`` takes: a partition's
``partial_state.arrow``), how the previews show it, and how a stored statistics row
becomes its state again (merging the stored partitions of a subset), when it can.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from functools import reduce
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import pyarrow as pa

S = TypeVar("S")


class Accumulator(ABC, Generic[S]):
    """A mergeable statistic. Implementations are stateless; the state is a value."""

    @abstractmethod
    def zero(self) -> S:
        """The state of no rows; the identity of ``merge``."""

    @abstractmethod
    def update(self, state: S, batch: pa.Array) -> S:
        """Fold one batch of a column into ``state``."""

    @abstractmethod
    def merge(self, a: S, b: S) -> S:
        """Combine two states; associative and commutative."""

    @abstractmethod
    def finalize(self, state: S) -> dict[str, Any]:
        """Statistic name -> value, as written to statistics.parquet."""

    def fold(self, batches: Iterable[pa.Array]) -> S:
        state = self.zero()
        for batch in batches:
            state = self.update(state, batch)
        return state

    def merge_all(self, states: Iterable[S]) -> S:
        """``merge`` folded left from ``zero`` over ``states`` in their order."""
        return reduce(self.merge, states, self.zero())


class Measure(Accumulator[S]):
    """One statistic of a column. Instances are made per column type and are stateless;
    ``update`` takes batches in the column's work type."""

    #: the statistic's name (its module's), the prefix of its partial-state fields
    name: ClassVar[str]
    #: statistics.parquet columns it fills, after the built-in ones (docs/FORMAT.md)
    columns: ClassVar[tuple[pa.Field, ...]]
    #: its state in a partition's partial_state.arrow, as columns ``<name>_<field>``
    state_fields: ClassVar[tuple[pa.Field, ...]]
    #: (statistics column, label) rows of the previews
    display: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: statistics column -> how the previews write it: a format spec (``".2f"``) or
    #: ``"count"`` (a count's grouping); unnamed columns take the previews' number form
    formats: ClassVar[Mapping[str, str]] = {}
    #: whether ``from_counts`` gives the state (a string column counted from its dictionary
    #: codes, never decoded row by row, needs every statistic of it to)
    counted: ClassVar[bool] = False
    #: the statistics.parquet column its columns follow; None: after the built-in ones, in
    #: name order. Set for a statistic from before the registry, whose columns keep their place.
    column_after: ClassVar[str | None] = None
    #: the partial_state.arrow column its state fields follow; None: at the end, in name
    #: order. Set for a statistic from before the registry: its state is then in every
    #: partial state of version 1, so the partial-state config does not name it (a new
    #: statistic's name changes the config, and older partial states are recomputed).
    state_after: ClassVar[str | None] = None

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_

    @staticmethod
    @abstractmethod
    def applies_to(type_: pa.DataType) -> bool:
        """Whether columns of (work) type ``type_`` have this statistic."""

    @abstractmethod
    def encode(self, state: S) -> dict[str, Any]:
        """``state_fields`` name -> value (no prefix)."""

    @abstractmethod
    def decode(self, fields: Mapping[str, Any]) -> S:
        """The state ``encode`` gave ``fields``."""

    def from_sorted(self, values: np.ndarray, distinct: np.ndarray, floats: np.ndarray | None) -> S | None:
        """The state of a whole column from its shared sorted view (engine/stats/sortedvalues.py:
        ``values`` its non-null non-NaN values in column order in storage form, decimals
        unscaled; ``distinct`` their sorted distinct values; ``floats`` a decimal column's
        values as float64, in column order), or None to fold the column with ``update``."""
        return None

    def from_counts(self, values: pa.Array, counts: np.ndarray, valid: int) -> S | None:
        """The state of a whole string column from its distinct non-null ``values`` and their
        ``counts`` (``valid``: its non-null rows), or None to fold the column with ``update``."""
        return None

    def from_statistics(self, row: Mapping[str, Any]) -> S | None:
        """The state behind a stored statistics row (a partition's), or None when the row
        does not hold enough to rebuild it (a subset's merge then leaves it out)."""
        return None


def nonnull(row: Mapping[str, Any]) -> int:
    """A statistics row's values that are neither null nor NaN (what sums, means and lengths
    count): what ``from_statistics`` rebuilds a state of."""
    return (row.get("row_count") or 0) - (row.get("null_count") or 0) - (row.get("nan_count") or 0)
