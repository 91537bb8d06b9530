"""A table's rows matching a predicate, as a table of its own: the source a computed subset
(engine/runtime/subset.py) runs the ordinary analyze job over.

:class:`FilteredSource` wraps the table's source. Its partitions are the table's that hold
candidate files, each listing only those files (what the file index and the partition
statistics could not rule out); ``read_batches`` reads the projected columns and the
predicate's, keeps the rows where the predicate is TRUE (engine/expressions/arrow.py:
SQL's three-valued logic, NaN above every value and equal to itself) and drops the
predicate's extra columns. Over a Parquet directory the predicate is also pushed into
the reads: each file's row groups whose Parquet statistics prove no row matches are
not read (the metrics evaluator over each row group's statistics, given as ``row_groups``:
engine/fileindex/rowgroups.py; not pyarrow's own pruning, see ``_pruner``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.columns import LeafColumn, leaf_columns
from engine.exceptions import InvalidArgumentError
from engine.expressions.arrow import to_arrow
from engine.expressions.tree import BoundReference, Expression, references
from engine.sources.base import DEFAULT_BATCH_SIZE, Partition, TableSource
from engine.sources.parquet import ParquetDirectorySource

__all__ = ["FilteredSource", "RowGroupPruner"]

#: (bound predicate, a file's footer, the predicate's leaf columns, row groups still in question or
#: None: all) -> the row groups that might hold a matching row (engine.fileindex.rowgroups)
RowGroupPruner = Callable[[Expression, pq.FileMetaData, list[LeafColumn], "Sequence[int] | None"], "list[int]"]

log = logging.getLogger("engine.sources")


class FilteredSource(TableSource):
    """The rows of ``base`` matching ``where`` (bound to the table's statistics schema), read
    from ``files`` only (partition key -> candidate data file paths; None: every file).

    ``name``: the table name the subset is published under; ``snapshot_id`` is the base's
    (the subset describes that snapshot of the table)."""

    def __init__(
        self,
        base: TableSource,
        where: Expression,
        files: Mapping[str, Collection[str]] | None,
        *,
        name: str,
        row_groups: RowGroupPruner | None = None,
    ) -> None:
        self.base = base
        self._prune = row_groups
        self.uri = base.uri
        self.name = name
        self.where = where
        leaves = {l.name: l for l in leaf_columns(base.schema())}
        self._leaves: dict[str, LeafColumn] = {}
        for ref in references(where):
            assert isinstance(ref, BoundReference), "FilteredSource takes a bound predicate"
            leaf = leaves.get(ref.name)
            if leaf is None:
                raise InvalidArgumentError(f"{base.uri}: the predicate's column {ref.name!r} is not a column of the table's source")
            self._leaves[ref.name] = leaf
        self._tops = list(dict.fromkeys(l.top for l in self._leaves.values()))
        self._filter = to_arrow(where, self._path)
        chosen = []
        for p in base.partitions():
            if files is None:
                chosen.append(p)
            elif p.key in files:
                keep = set(files[p.key])
                chosen.append(Partition(p.key, p.values, tuple(f for f in p.files if f.path in keep)))
        self._partitions = chosen
        self._schema = base.schema()
        self._partition_fields = base.partition_fields()
        self._snapshot_id = base.snapshot_id()

    def _path(self, ref: BoundReference) -> tuple[str, ...]:
        return self._leaves[ref.name].full_path

    def partition_fingerprints(self) -> dict[str, str] | None:
        """The base's, with the predicate: an unchanged partition has the same matching rows
        (the files left out hold none), so a later subset of the same predicate inherits it."""
        base = self.base.partition_fingerprints()
        if base is None:
            return None
        salt = str(self.where)
        return {p.key: (hashlib.sha256(f"{base[p.key]}\x00{salt}".encode()).hexdigest()[:32] if base.get(p.key) else "") for p in self._partitions}

    def read_batches(
        self,
        partition: Partition,
        columns: list[str],
        batch_size: int = DEFAULT_BATCH_SIZE,
        *,
        dictionary: Collection[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        extra = [t for t in self._tops if t not in columns]
        read = list(columns) + extra
        # the predicate's columns are read decoded: the kernels have no dictionary forms of all its operators
        dictionary = [c for c in dictionary if c not in self._tops]
        if isinstance(self.base, ParquetDirectorySource):
            batches = self.base.read_batches(partition, read, batch_size, dictionary=dictionary, row_groups=self._pruner())
        else:
            batches = self.base.read_batches(partition, read, batch_size, dictionary=dictionary)
        for batch in batches:
            kept = pa.Table.from_batches([batch]).filter(self._filter)
            if extra:
                kept = kept.select(list(range(len(columns))))
            yield from kept.to_batches()

    # ------------------------------------------------------------------ pushdown
    def _pruner(self) -> Any:
        """The row groups of a file that might hold a matching row, by our metrics evaluator over
        its row groups' footer statistics (engine/fileindex/rowgroups.py).

        Not pyarrow's own pruning (``ParquetFileFragment.subset``): Parquet's min/max leave NaN
        out and pyarrow 26 takes them as the range of every non-null value, so a row group of
        ``[nan, nan, 1.5]`` is dropped for ``is_nan(f)`` and ``f > 2`` (NaN above every value)
        though two of its rows match (found by tests/engine/expressions/test_arrow_filter.py)."""
        prune = self._prune
        if prune is None:
            return None
        leaves = list(self._leaves.values())

        def select(handle: Any, metadata: pq.FileMetaData) -> Sequence[int] | None:
            try:
                return prune(self.where, metadata, leaves, None)
            except Exception as exc:  # noqa: BLE001 - pruning is an optimisation: read them all
                log.debug("no row-group pruning by statistics (%s)", exc)
                return None

        return select
