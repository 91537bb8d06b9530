"""The one shape every statistic has: zero / update(batch) / merge / finalize.

Partition tasks fold batches into a state, ship the (small) state to the driver,
and the driver merges states of many partitions into the table's state without
rescanning data (the shape of Ray Data's ``AggregateFn``). Keeping states plain,
picklable Python values is what lets partitions roll up to tables.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from functools import reduce
from typing import Any, Generic, TypeVar

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
        return reduce(self.merge, states, self.zero())
