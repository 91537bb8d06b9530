"""The Python entry points: analyze a table, then read its statistics back.

    from engine.api import analyze, open_statistics
    result = analyze("data/sales", store=".metastore")
    stats = open_statistics(".metastore", result.table)
    stats.statistics(["price", "city"])

Ranks and quantiles (docs/QUANTILES.md): ``exact_quantiles`` and ``sort_column``
sort a column of the table on Ray; ``approximate_quantiles`` reads sketches.
"""
from __future__ import annotations

from engine.columns import leaf_columns, select
from engine.exceptions import InvalidArgumentError
from engine.files.layout import FREQUENCIES_FILE, HISTOGRAMS_FILE, STATISTICS_FILE  # noqa: F401 (re-export)
from engine.lookup import TableStatistics, ValuePartitions, open_statistics, value_partitions  # noqa: F401 (re-export)
from engine.quantiles import Quantiles, approximate_quantiles, exact_quantiles, sort_column  # noqa: F401 (re-export)
from engine.runtime.analyze import AnalyzeOptions, AnalyzeResult, ProgressCallback
from engine.stats.histograms import ALLOWED_BINS
from engine.stats.user import UserStatistic, registered
from engine.store import Store

DEFAULT_STORE = ".metastore"


def analyze(
    table_uri: str,
    store: str = DEFAULT_STORE,
    *,
    bins: int = 1000,
    columns: list[str] | None = None,
    name: str | None = None,
    progress: bool | ProgressCallback = False,
    user_statistics: list[UserStatistic] | None = None,
    mostly_distinct_ratio: float = 0.5,
    frequencies: str = "reduce",
    redis_url: str | None = None,
    inherit: bool = True,
    value_partitions: bool = False,
    format: str | None = None,  # noqa: A002
    at_snapshot: str | int | None = None,
    as_of: str | int | None = None,
    catalog: str | None = None,
) -> AnalyzeResult:
    """Compute and publish the statistics files of a table, per partition and for the table.

    Starts (or attaches to, via RAY_ADDRESS) Ray if this process has not.
    Nothing becomes visible in the store unless the whole job succeeds.
    ``frequencies``: ``reduce`` (Ray tasks merge value counts) or ``redis`` (the
    Bloom/Redis algorithm; ``redis_url`` names an existing server, else the job
    starts its own), see docs/FREQUENCIES.md.
    Partitions unchanged since the table's current statistics keep theirs without
    being read again (``result.inherited``; docs/CATALOG.md); ``inherit=False``
    recomputes every partition.
    ``value_partitions``: the table-level frequencies also keep, per stored value,
    which partitions hold it and how often (``value_partitions()`` reads it back;
    docs/FREQUENCIES.md); the ``reduce`` strategy only (``UnsupportedOptionsError``
    otherwise, before any work).
    ``format``, ``at_snapshot``, ``as_of``, ``catalog``: which table and snapshot is read
    (``engine.sources.open_table``; docs/FORMATS.md).
    """
    from engine.runtime import analyze as job
    from engine.runtime.ray_runtime import ensure_ray
    from engine.sources import open_table

    if bins not in ALLOWED_BINS:
        raise InvalidArgumentError(f"bins must be one of {', '.join(map(str, ALLOWED_BINS))}, not {bins}")
    if not 0 < mostly_distinct_ratio <= 1:
        raise InvalidArgumentError("mostly_distinct_ratio must be in (0, 1]")
    if frequencies not in job.frequency_strategy.STRATEGIES:
        raise InvalidArgumentError(f"frequencies must be one of {', '.join(job.frequency_strategy.STRATEGIES)}, not {frequencies!r}")
    # built before the table is opened: AnalyzeOptions refuses option combinations up front
    options = AnalyzeOptions(
        bins=bins, mostly_distinct_ratio=mostly_distinct_ratio, inherit=inherit, frequencies=frequencies, redis_url=redis_url,
        value_partitions=value_partitions,
    )  # fmt: skip
    source = open_table(table_uri, name=name, format=format, at_snapshot=at_snapshot, as_of=as_of, catalog=catalog)
    leaves = select(leaf_columns(source.schema()), columns)
    user = registered() if user_statistics is None else list(user_statistics)
    ray_s = ensure_ray()
    callback = _rich_progress() if progress is True else (progress or None)
    try:
        result = job.run(
            source,
            Store(store),
            leaves,
            user,
            options,
            callback,
        )
    finally:
        if progress is True and callback is not None:
            callback.close()  # type: ignore[attr-defined]
    result.timings["ray_start_s"] = ray_s
    return result


class _RichProgress:
    """A progress bar per phase, over partitions."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(), TextColumn("partitions"), TimeElapsedColumn(),
            transient=False,
        )
        self._tasks: dict[str, int] = {}
        self._progress.start()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase not in self._tasks:
            self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(self._tasks[phase], completed=done)

    def close(self) -> None:
        self._progress.stop()


def _rich_progress() -> _RichProgress:
    return _RichProgress()
