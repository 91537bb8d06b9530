"""Computed subsets: the exact statistics of the rows of a table matching a predicate,
computed on demand by the analyze job and kept as derived statistics (docs/SUBSETS.md,
"Computed answers and their cache").

:func:`compute_subset` answers from the cache when it can (no data read): an entry of the
same table snapshot, the same predicate (in its canonical form, engine/expressions/normal.py)
and the same or more columns. Otherwise it reopens the table's data as analyzed (its
location and snapshot from the catalog; a table that moved or changed refuses in one
line), keeps only the candidate files (partitions pruned by their statistics, files by the
file index when the table has one), and runs the ordinary analyze job over a
:class:`~engine.sources.filtered.FilteredSource` (the predicate pushed into the Parquet
reads) into the derived store of the predicate (engine/catalog/derived.py): the same
kernels, the same three files per partition and for the table, one atomic catalog commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import fileio
from engine.catalog import derived
from engine.catalog.cache import forget_catalog
from engine.exceptions import (
    InvalidArgumentError,
    InvalidFileError,
    InvalidTableLayoutError,
    MetastoreError,
    SourceChangedError,
    StatisticsNotFoundError,
)
from engine.expressions import normal
from engine.expressions.tree import Expression, Where
from engine.fileindex.rowgroups import matching_row_groups
from engine.files import layout
from engine.lookup import TableStatistics
from engine.options import AnalyzeOptions
from engine.progress import ProgressCallback
from engine.runtime import inheritance
from engine.runtime.analyze import analyze_source
from engine.sources import TableFormat, detect_format, open_table
from engine.sources.base import TableSource
from engine.sources.filtered import FilteredSource
from engine.stats import userdefs
from engine.stats.user import UserStatistic
from engine.store import Store
from engine.subset import guard as subset_guard

__all__ = ["SubsetOrigin", "compute_subset", "subset_location"]

log = logging.getLogger("engine.subset")


@dataclass(frozen=True)
class SubsetOrigin:
    """How a computed subset was obtained (``TableStatistics.subset`` of the returned object)."""

    table: str
    snapshot: str  # the table snapshot it describes
    predicate: str  # the canonical predicate
    columns: tuple[str, ...]  # the columns asked for (the entry may hold more)
    cached: bool  # answered from the cache: no data read
    location: str  # the derived table's directory
    candidate_files: int | None = None  # data files read (None: from the cache)
    candidate_partitions: int | None = None
    job_id: str = ""
    #: the table's user statistics the entry lacks: name -> why this process cannot compute them
    unavailable: dict[str, str] = field(default_factory=dict)


def compute_subset(
    ts: TableStatistics,
    where: Expression,
    columns: Sequence[str] | None = None,
    *,
    progress: ProgressCallback | None = None,
    cache: bool = True,
) -> TableStatistics:
    """The statistics of the rows of ts's table matching ``where`` (bound to ts.schema), for ``columns`` (None: all):
    a derived state in the store's cache (keyed by the table's snapshot, the normalised predicate and the columns),
    computed by a Ray job over the candidate files only when not cached. The returned TableStatistics reads like any
    table's (statistics/top_frequencies/histogram, table level).

    ``where`` may also be text or an unbound tree (bound here; ExpressionError if it does not
    bind). ``cache=False`` computes from the data even when an entry exists (no partition
    inherited from an earlier computation) and publishes the new one.
    The job computes the table's own user statistics, loaded from the definitions its analyze
    recorded (engine/stats/userdefs.py); those that cannot be had here are left out, each
    with its reason in ``subset.unavailable``. The guard of the current context
    (engine/subset/guard.py: a server's permission and limits) is asked before a job runs.
    The result's ``subset`` attribute is a :class:`SubsetOrigin`.
    """
    expr = normal.normalise(ts.bind(where))
    names = _columns(ts, columns)
    canonical = str(expr)
    root = derived.predicate_root(ts.store.root, ts.table, normal.digest(expr, 32))
    key = _columns_key(ts, names)
    user = _user_statistics(ts)
    guard = subset_guard.current()
    if cache:
        hit = _cached(root, key, names, ts.snapshot, [u.name for u in user.statistics])
        if hit is not None:
            if guard is not None:
                guard.used(ts.table, root)
            lacking = set(_table_user_names(ts)) - set(hit.state.properties.get("user_statistics") or [])
            hit.subset = SubsetOrigin(  # type: ignore[method-assign, assignment]  # the origin shadows the method on this object (documented)
                ts.table, ts.snapshot, canonical, tuple(names), True, fileio.join(root, hit.table),
                unavailable={n: r for n, r in user.unavailable.items() if n in lacking},
            )  # fmt: skip
            return hit
    with guard.computing(ts.table, root) if guard is not None else contextlib.nullcontext():
        source = reopen(ts)
        files = candidate_files(ts, expr, source)
        filtered = FilteredSource(source, expr, files, name=key, row_groups=matching_row_groups)
        options = _options(ts, inherit=cache, partitions=len(files))
        result = _run(filtered, root, key, canonical, options, names, user.statistics, progress)
    forget_catalog(root, key)  # this process may hold the log of an entry gc has deleted since
    out = TableStatistics(Store(root), key, at_snapshot=ts.snapshot)
    out.subset = SubsetOrigin(  # type: ignore[method-assign, assignment]  # the origin shadows the method on this object (documented)
        ts.table,
        ts.snapshot,
        canonical,
        tuple(names),
        False,
        fileio.join(root, key),
        sum(len(f) for f in files.values()),
        len(files),
        result.job_id,
        dict(user.unavailable),
    )
    return out


def _run(
    filtered: FilteredSource,
    root: str,
    key: str,
    canonical: str,
    options: AnalyzeOptions,
    names: list[str],
    user: list[UserStatistic],
    progress: ProgressCallback | None,
) -> Any:
    """The job, publishing into the predicate's store; a job that fails leaves no entry behind
    (a column set never published and a predicate directory left empty are deleted)."""
    fresh = not fileio.exists(fileio.join(root, key, "catalog"))
    try:
        _write_predicate(root, canonical)
        return analyze_source(filtered, Store(root), options, columns=names, user_statistics=user, progress=progress)
    except BaseException:
        if fresh:
            _discard(root, key)
        raise


def _discard(root: str, key: str) -> None:
    """The files of a failed first computation of ``key``, and the predicate's directory when
    nothing else is left in it."""
    try:
        if not fileio.exists(fileio.join(root, key, "catalog")):
            fileio.delete_dir(fileio.join(root, key))
        if not derived.derived_tables_in(root):
            fileio.delete_dir(root)
    except OSError as exc:  # the job's own error is the one to report
        log.warning("computed subset %s/%s: the failed job's files were not deleted: %s", root, key, exc)


def subset_location(ts: TableStatistics, where: Where) -> str:
    """The directory of a predicate's computed subsets of ts's table (whether or not any exists)."""
    return derived.predicate_root(ts.store.root, ts.table, normal.digest(normal.normalise(ts.bind(where)), 32))


# ---------------------------------------------------------------- the cache
def _columns(ts: TableStatistics, columns: Sequence[str] | None) -> list[str]:
    """The statistics names asked for, in table order (all of the table's when None)."""
    names = list(ts.schema.names)
    if columns is None:
        return names
    if isinstance(columns, str):
        raise InvalidArgumentError("columns must be a list of column names, not a string")
    wanted = [ts.resolve_column(c) for c in columns]
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise InvalidArgumentError(f"table {ts.table!r} has no statistics for column(s): {', '.join(map(repr, unknown))}")
    chosen = set(wanted)
    return [n for n in names if n in chosen]


def _columns_key(ts: TableStatistics, names: list[str]) -> str:
    if names == list(ts.schema.names):
        return derived.ALL_COLUMNS
    return "c-" + hashlib.sha256("\x00".join(sorted(names)).encode()).hexdigest()[:16]


def _cached(root: str, key: str, names: list[str], snapshot: str, user: list[str]) -> TableStatistics | None:
    """A published subset of this snapshot holding every column in ``names`` and every user
    statistic in ``user`` (an entry computed without one this process can compute now is a
    miss: computed again): the entry of exactly these columns, else any entry of the predicate
    with more."""
    if not fileio.exists(root):
        return None
    wanted, statistics = set(names), set(user)

    def complete(got: TableStatistics | None) -> bool:
        return got is not None and statistics <= set(got.state.properties.get("user_statistics") or [])

    got = _open(root, key, snapshot)
    if complete(got):
        return got
    for d in derived.derived_tables_in(root):
        if d == key:
            continue
        got = _open(root, d, snapshot)
        if got is not None and complete(got) and wanted <= {c["name"] for c in got.state.columns}:
            return got
    return None


def _open(root: str, name: str, snapshot: str) -> TableStatistics | None:
    if not fileio.exists(fileio.join(root, name, "catalog")):
        return None
    try:
        got = TableStatistics(Store(root), name, at_snapshot=snapshot)
        if not fileio.exists(got.file_uri(layout.STATISTICS_FILE)):
            # a state of a log gc deleted (and perhaps wrote anew) that this process still holds
            forget_catalog(root, name)
            got = TableStatistics(Store(root), name, at_snapshot=snapshot)
        return got
    except StatisticsNotFoundError:
        return None
    except MetastoreError as exc:  # a damaged entry is a miss: computed again, published anew
        log.warning("computed subset %s/%s unreadable (%s); computing it again", root, name, exc)
        return None


def _write_predicate(root: str, canonical: str) -> None:
    uri = fileio.join(root, derived.PREDICATE_FILE)
    if not fileio.exists(uri):
        fileio.write_bytes_atomic(uri, (canonical + "\n").encode())


# ---------------------------------------------------------------- the data
def reopen(ts: TableStatistics) -> TableSource:
    """ts's table as it was analyzed: its recorded location, at the recorded snapshot (a
    table format: that snapshot; a Parquet directory: it must not have changed).
    SourceChangedError, one line, when that data cannot be had."""
    uri = ts.state.table_uri
    if not uri:
        raise SourceChangedError(f"table {ts.table!r}: its statistics do not record where its data is: no subset can be computed from it")
    try:
        fmt = detect_format(uri)
        source = open_table(uri, ts.table, at_snapshot=None if fmt is TableFormat.PARQUET else ts.snapshot)
    except (InvalidFileError, InvalidTableLayoutError, StatisticsNotFoundError, MetastoreError, OSError) as exc:
        detail = " ".join(str(exc).split())
        raise SourceChangedError(f"table {ts.table!r}: its data at {uri} cannot be read as analyzed (snapshot {ts.snapshot}): {detail}") from None
    if source.snapshot_id() != ts.snapshot:
        raise SourceChangedError(
            f"table {ts.table!r}: its data at {uri} changed since it was analyzed (snapshot {ts.snapshot}, now "
            f"{source.snapshot_id()}): analyze it again to compute subsets of the new data"
        )
    return source


def candidate_files(ts: TableStatistics, expr: Expression, source: TableSource) -> dict[str, set[str]]:
    """Partition key -> the data files that might hold a matching row: partitions pruned by
    their statistics, then files by the file index when the table has one (a file the index
    does not name stays a candidate)."""
    try:
        plan = ts.plan_files(expr)
    except StatisticsNotFoundError:
        plan = None
    if plan is None:
        matching = set(ts.prune_partitions(expr).matching)
        return {p.key: {f.path for f in p.files} for p in source.partitions() if p.key in matching}
    gone = set(plan.pruned_partitions)
    chosen: dict[str, set[str]] = {}
    for part, path in zip(plan.candidates.column("partition").to_pylist(), plan.candidates.column("path").to_pylist()):
        chosen.setdefault(part, set()).add(path)
    pruned = set(plan.pruned.column("path").to_pylist()) if plan.pruned.num_rows else set()
    out: dict[str, set[str]] = {}
    for p in source.partitions():
        if p.key in gone:
            continue
        keep = {f.path for f in p.files if f.path in chosen.get(p.key, ()) or f.path not in pruned}
        if keep:
            out[p.key] = keep
    return out


#: candidate partitions from which the job runs phase 1 in two waves (engine/runtime/analyze.py): the
#: split lets the reductions overlap the second wave, which pays only with many partitions; a subset
#: localised to a few partitions is quicker in one wave (0.12-0.20 s against 0.27-0.65 s for the
#: bench table's 1% subset in one partition, on a busy machine)
TWO_WAVES_FROM = 8


def _options(ts: TableStatistics, *, inherit: bool = True, partitions: int = 0) -> AnalyzeOptions:
    """The table's own analysis options where they shape the statistics (bins, the mostly
    distinct ratio); no file index (a subset is not planned over). ``inherit``: partitions
    unchanged since the derived table's previous state are inherited (off: everything is
    read again, as ``compute_subset(cache=False)`` promises)."""
    props = ts.state.properties
    cfg = props.get(inheritance.CONFIG_PROPERTY) or {}
    kwargs: dict[str, Any] = {"file_index": False, "inherit": inherit, "two_waves": partitions >= TWO_WAVES_FROM}
    if props.get("bins"):
        kwargs["bins"] = int(props["bins"])
    if isinstance(cfg, dict) and cfg.get("mostly_distinct_ratio") is not None:
        kwargs["mostly_distinct_ratio"] = float(cfg["mostly_distinct_ratio"])
    return AnalyzeOptions(**kwargs)


def _table_user_names(ts: TableStatistics) -> list[str]:
    return list(ts.state.properties.get("user_statistics") or [])


def _user_statistics(ts: TableStatistics) -> userdefs.Resolved:
    """The table's own user statistics, loaded from the definitions its analyze recorded (else as
    this process registered them); the ones that cannot be had here, with the reason."""
    refs = ts.state.properties.get(userdefs.PROPERTY)
    return userdefs.resolve(_table_user_names(ts), refs if isinstance(refs, dict) else None)
