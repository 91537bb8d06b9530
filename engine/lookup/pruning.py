"""Which partitions (and data files) might hold a row matching a predicate, from each
partition's stored statistics (``TableStatistics.prune_partitions`` and ``plan_files``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import expressions as ex
from engine import fileio
from engine.exceptions import StatisticsNotFoundError
from engine.files import layout
from engine.lookup.reader import StatisticsReader

if TYPE_CHECKING:  # the file index is loaded when a plan is asked for
    from engine.fileindex.plan import FilePlan


@dataclass(frozen=True)
class PartitionMatch:
    """One partition under a predicate: whether it might hold a matching row and, if
    not, the conjunct its statistics proved empty (in the NOT-free form)."""

    partition: str
    rows: int
    might_match: bool
    refuted_by: str | None  # the conjunct's text when pruned
    #: the pruning statistics read (row_count, null_count, nan_count, min, max as text) per column
    statistics: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PartitionPruning:
    """``TableStatistics.prune_partitions``: every partition in table order, with its verdict."""

    table: str
    predicate: str  # the bound predicate as text
    columns: tuple[str, ...]  # the columns it names (statistics names)
    partitions: tuple[PartitionMatch, ...]

    @property
    def matching(self) -> list[str]:
        return [p.partition for p in self.partitions if p.might_match]

    @property
    def pruned(self) -> list[tuple[str, str]]:
        return [(p.partition, p.refuted_by or "") for p in self.partitions if not p.might_match]


def prune_partitions(ts: StatisticsReader, where: ex.Where) -> PartitionPruning:
    """Which partitions might hold a row matching ``where``, from each partition's
    statistics (row count, null and NaN counts, min, max of the columns it names):
    a partition is pruned only when its statistics prove no row can match, and the
    conjunct that proved it is named. Reads the named columns' rows of every
    partition's statistics file (footers cached)."""
    from engine.expressions.statistics import metrics_from_row

    expr = ts.bind(where)
    evaluator = ex.InclusiveMetricsEvaluator(expr)
    refs = [r for r in ex.references(expr) if isinstance(r, ex.BoundReference)]
    names = list(dict.fromkeys(r.name for r in refs))
    out = []
    for p in ts.state.partitions:
        key, rows = p.key, p.rows
        stats = _pruning_rows(ts, names, key)
        metrics = {r.name: metrics_from_row(stats[r.name], r.type) for r in refs if r.name in stats}
        refuted = evaluator.refuting_conjunct(lambda ref: metrics.get(ref.name), rows=rows)
        out.append(PartitionMatch(key, rows, refuted is None, None if refuted is None else str(refuted), stats))
    return PartitionPruning(ts.table, str(expr), tuple(names), tuple(out))


def file_index_directory(ts: StatisticsReader) -> str:
    """Where this state's file index lives (docs/FORMAT.md, "File index"); StatisticsNotFoundError if none."""
    from engine.fileindex.store import FILES_FILE

    named = (ts.state.properties.get("file_index") or {}).get(FILES_FILE)
    uri = fileio.join(ts.store.root, ts.table, named["path"]) if named else ts.file_uri(FILES_FILE)
    if not fileio.exists(uri):
        raise StatisticsNotFoundError(
            f"table {ts.table!r} (job {ts.job_id}) has no file index: it was analyzed with --no-file-index, or from a "
            f"source whose data files the index cannot describe (a DataFrame); analyze it again without --no-file-index, "
            f"or name an index directory (metastore files --index DIR; plan_files(where, index=DIR))"
        )
    return uri.rsplit("/", 1)[0]


def plan_files(ts: StatisticsReader, where: ex.Where, index: str | None = None) -> FilePlan:
    """The data files that might hold rows matching ``where`` (``FilePlan``: candidates with
    path, partition, rows, size; each pruned file with the conjunct that proved it empty).
    Partitions are pruned first from their statistics; then the remaining files from the file
    index (``index``: its directory; default: the one this state names). A file the index has
    no statistics for is a candidate."""
    from engine.fileindex.plan import open_file_index

    expr = ts.bind(where)
    pruning = prune_partitions(ts, expr)
    gone = {p.partition: p.refuted_by or "" for p in pruning.partitions if not p.might_match}
    return open_file_index(index or file_index_directory(ts)).plan(expr, gone)


def _pruning_rows(ts: StatisticsReader, names: list[str], partition: str) -> dict[str, dict[str, Any]]:
    """The pruning statistics of those ``names`` the partition's statistics file describes."""
    from engine.expressions.statistics import PRUNING_STATISTICS

    if not names:
        return {}
    f = ts.stored_file(layout.STATISTICS_FILE, partition)
    known = set(f.meta_json("metastore.columns"))
    present = [n for n in names if n in known]
    if not present:
        return {}
    rows = ts.statistics(present, partition, list(PRUNING_STATISTICS)).to_pylist()
    return {n: row for n, row in zip(present, rows)}
