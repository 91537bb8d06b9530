"""``TableStatistics``: the reader core (engine/lookup/reader.py) with its views: pruning and
the file plan (pruning.py), value partitions (valueparts.py), the review (engine/review: diff,
alerts) and the notebook view, drawn by the view a layer above registers (``use_notebook_view``:
engine.api registers engine.ui's cards, so the lookups import no UI)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from engine import fileio
from engine.exceptions import AccessDeniedError, MetastoreError
from engine.lookup.reader import StatisticsReader
from engine.store import Store

if TYPE_CHECKING:  # the file index, pruning.py and valueparts.py load when first asked (`metastore show` asks none)
    from engine import expressions as ex
    from engine.fileindex.plan import FilePlan
    from engine.lookup.pruning import PartitionPruning
    from engine.lookup.valueparts import ValuePartitions
    from engine.review.diff import TableDiff
    from engine.stats.alerts import Alert, AlertThresholds


class Drawn(Protocol):
    """What a notebook draws: an object with its HTML (``_repr_html_``, engine/ui/drawn.py)."""

    def _repr_html_(self) -> str: ...


class NotebookView(Protocol):
    """What draws ``TableStatistics`` in a notebook (engine/ui/notebook.py): a column's card, a
    table's page; each returned object draws itself (``_repr_html_``)."""

    def card(self, ts: TableStatistics, column: str, partition: str | None, bars: int, top: int) -> Drawn: ...

    def preview(self, ts: TableStatistics, columns: Sequence[str] | None, partition: str | None, bars: int, top: int, max_columns: int) -> Drawn: ...


_notebook: list[NotebookView] = []  # the registered view (one)


def use_notebook_view(view: NotebookView) -> None:
    """Draw ``TableStatistics`` in notebooks with ``view`` (engine.api registers engine.ui's)."""
    _notebook[:] = [view]


def _notebook_view() -> NotebookView | None:
    return _notebook[0] if _notebook else None


class TableStatistics(StatisticsReader):
    """The published statistics of one table (the state at open time; ``refresh()`` to move on).

    ``at_transaction`` / ``at_snapshot``: an earlier state from the table's catalog
    (time travel, docs/CATALOG.md): the state right after that transaction, or after
    the newest transaction describing that table snapshot. Such a state is pinned:
    ``refresh()`` reads the same state again.
    """

    # ------------------------------------------------------------ notebook view
    def card(self, column: str, partition: str | None = None, bars: int = 50, top: int = 10) -> Drawn:
        """One column's card (``engine.ui.viewmodel.ColumnCard``): Jupyter draws it (``_repr_html_``)
        as ``metastore ui`` does; ``partition``: that partition's statistics beside the table's."""
        return self._view().card(self, column, partition, bars, top)

    def preview(
        self, columns: Sequence[str] | None = None, partition: str | None = None, bars: int = 50, top: int = 10, max_columns: int = 20
    ) -> Drawn:
        """The table's page (``engine.ui.viewmodel.TablePage``) with the cards of ``columns``
        (default: the first ``max_columns``); Jupyter draws it (``_repr_html_``)."""
        return self._view().preview(self, columns, partition, bars, top, max_columns)

    def _repr_html_(self) -> str | None:
        """The page's HTML; None (Jupyter shows ``repr``) when no notebook view is registered."""
        if _notebook_view() is None:
            return None
        return self.preview()._repr_html_()

    def _view(self) -> NotebookView:
        view = _notebook_view()
        if view is None:
            raise MetastoreError("the notebook view comes with engine.api: open the statistics with engine.api.open_statistics")
        return view

    # ------------------------------------------------------------ review (docs/DIFF.md)
    def diff(
        self,
        other: TableStatistics,
        partition: str | None = None,
        other_partition: str | None = None,
        columns: Sequence[str] | None = None,
        top: int = 10,
    ) -> TableDiff:
        """From this state (its ``partition``, or the table level) to ``other`` (its
        ``other_partition``, or table level): each common column's statistics on both sides,
        its drift (KS distance, PSI, top values gained, lost and moved), columns and
        partitions added and removed (``engine.review.diff.TableDiff``; ``.as_dict()``)."""
        from engine.review.diff import diff_states

        return diff_states(self, other, partition, other_partition, list(columns) if columns is not None else None, top)

    def alerts(
        self, partition: str | None = None, columns: Sequence[str] | None = None, thresholds: AlertThresholds | None = None
    ) -> dict[str, list[Alert]]:
        """``{column: [Alert(kind, detail), ...]}`` from the stored statistics (no data read;
        ``thresholds``: an ``engine.stats.alerts.AlertThresholds``; docs/DIFF.md)."""
        from engine.review.alerts import column_alerts_of

        return column_alerts_of(self, partition, list(columns) if columns is not None else None, thresholds)

    def __repr__(self) -> str:
        """What is loaded already (no file read): the table, its rows, columns and partitions,
        the job and snapshot, the store, and the catalog transaction when time travelling."""
        state = self.state
        n = len(state.partitions)
        parts = [
            f"{state.rows:,} rows" if isinstance(state.rows, int) else "rows unknown",
            f"{len(self.schema.names):,} column{'s' if len(self.schema.names) != 1 else ''}",
            f"{n:,} partition{'s' if n != 1 else ''}",
        ]
        at = f", at transaction {self.txn_id}" if self.time_travel else ""
        return f"<TableStatistics {self.table!r}: {', '.join(parts)}; job {state.job_id}, snapshot {state.snapshot_id}{at}; store {self.store.root}>"

    # ------------------------------------------------------------ predicates (pruning.py)
    def prune_partitions(self, where: ex.Where) -> PartitionPruning:
        """Which partitions might hold a row matching ``where``, from each partition's
        statistics (row count, null and NaN counts, min, max of the columns it names):
        a partition is pruned only when its statistics prove no row can match, and the
        conjunct that proved it is named. Reads the named columns' rows of every
        partition's statistics file (footers cached)."""
        from engine.lookup import pruning

        return pruning.prune_partitions(self, where)

    def file_index_directory(self) -> str:
        """Where this state's file index lives (docs/FORMAT.md, "File index"); StatisticsNotFoundError if none."""
        from engine.lookup import pruning

        return pruning.file_index_directory(self)

    def plan_files(self, where: ex.Where, index: str | None = None) -> FilePlan:
        """The data files that might hold rows matching ``where`` (``FilePlan``: candidates with
        path, partition, rows, size; each pruned file with the conjunct that proved it empty).
        Partitions are pruned first from their statistics; then the remaining files from the file
        index (``index``: its directory; default: the one this state names). A file the index has
        no statistics for is a candidate."""
        from engine.lookup import pruning

        return pruning.plan_files(self, where, index)

    # ------------------------------------------------------------ value partitions (valueparts.py)
    def value_partitions(self, column: str, value: object, candidates: bool = False) -> ValuePartitions:
        """The partitions holding ``value`` in ``column``, with its count in each (tables analyzed
        with ``analyze(value_partitions=True)``): :func:`engine.lookup.valueparts.value_partitions`
        says what it reads and what FOUND, ABSENT and AT_MOST_ONCE mean."""
        from engine.lookup import valueparts

        return valueparts.value_partitions(self, column, value, candidates)


def value_partitions(
    store: str,
    table: str,
    column: str,
    value: object,
    *,
    candidates: bool = False,
    at_transaction: int | None = None,
    at_snapshot: str | None = None,
) -> ValuePartitions:
    """Which partitions of ``table`` hold ``value`` in ``column``, and how often
    (``TableStatistics.value_partitions``; ``result.partitions`` is the list of
    (partition key, count))."""
    return open_statistics(store, table, at_transaction=at_transaction, at_snapshot=at_snapshot).value_partitions(
        column, value, candidates=candidates
    )


def open_statistics(store: str, table: str, at_transaction: int | None = None, at_snapshot: str | None = None) -> TableStatistics:
    """The statistics of ``table``: the current state, or an earlier one (``at_transaction`` / ``at_snapshot``)."""
    try:
        return TableStatistics(Store(store), table, at_transaction=at_transaction, at_snapshot=at_snapshot)
    except Exception as exc:
        problem = fileio.access_problem(store) if fileio.is_io_error(exc) else None
        if problem is None:
            raise
        raise AccessDeniedError(f"store {store}: {problem}") from None
