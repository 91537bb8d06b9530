"""The shape of a registered statistic (engine/measures): a mergeable accumulator that
declares everything the rest of the engine needs to carry it.

``zero``/``update``/``merge``/``finalize`` as every accumulator (engine/stats/accumulator.py,
the shape of Ray Data's ``AggregateFn``); beside them the statistic declares its
statistics.parquet columns (what ``finalize`` returns), its partial-state fields (what
``encode`` returns and ``decode`` takes: a partition's ``partial_state.arrow``), how the
previews show it, and how a stored statistics row becomes its state again (merging the
stored partitions of a subset), when it can.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

import pyarrow as pa

S = TypeVar("S")


class Measure(ABC, Generic[S]):
    """One statistic of a column. Instances are made per column type and are stateless."""

    #: the statistic's name (its module's), the prefix of its partial-state fields
    name: ClassVar[str]
    #: statistics.parquet columns it fills, after the built-in ones (docs/FORMAT.md)
    columns: ClassVar[tuple[pa.Field, ...]]
    #: its state in a partition's partial_state.arrow, as columns ``<name>_<field>``
    state_fields: ClassVar[tuple[pa.Field, ...]]
    #: (statistics column, label) rows of the previews
    display: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_

    @staticmethod
    @abstractmethod
    def applies_to(type_: pa.DataType) -> bool:
        """Whether columns of (work) type ``type_`` have this statistic."""

    @abstractmethod
    def zero(self) -> S:
        """The state of no rows; the identity of ``merge``."""

    @abstractmethod
    def update(self, state: S, batch: pa.Array) -> S:
        """Fold one batch (in the column's work type) into ``state``."""

    @abstractmethod
    def merge(self, a: S, b: S) -> S:
        """Combine two states; associative and commutative."""

    @abstractmethod
    def finalize(self, state: S) -> dict[str, Any]:
        """``columns`` name -> value."""

    @abstractmethod
    def encode(self, state: S) -> dict[str, Any]:
        """``state_fields`` name -> value (no prefix)."""

    @abstractmethod
    def decode(self, fields: Mapping[str, Any]) -> S:
        """The state ``encode`` gave ``fields``."""

    def from_statistics(self, row: Mapping[str, Any]) -> S | None:
        """The state behind a stored statistics row (a partition's), or None when the row
        does not hold enough to rebuild it (a subset's merge then leaves it out)."""
        return None
