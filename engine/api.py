"""The Python entry points: analyze a table, then read its statistics back.

    from engine.api import analyze, open_statistics
    result = analyze("data/sales", store=".metastore")
    stats = open_statistics(".metastore", result.table)
    stats.statistics(["price", "city"])

Ranks and quantiles (docs/QUANTILES.md): ``exact_quantiles`` and ``sort_column``
sort a column of the table on Ray; ``approximate_quantiles`` reads sketches.

Importing this module registers what the lookups (a layer below) cannot import themselves:
the Ray job that computes ``exact=True`` subsets (engine/runtime/exact.py) and the notebook
view of ``TableStatistics`` (engine/ui/notebook.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.files.layout import FREQUENCIES_FILE, HISTOGRAMS_FILE, STATISTICS_FILE
from engine.lookup import TableStatistics, ValuePartitions, open_statistics, use_notebook_view, value_partitions
from engine.names import check_table_name
from engine.options import ALLOWED_BINS, AnalyzeOptions, FrequencyStrategy, Runtime
from engine.progress import ProgressCallback, progress_callback
from engine.quantiles import Quantiles, approximate_quantiles, exact_quantiles, sort_column
from engine.runtime import exact as _exact_subsets  # noqa: F401 - registers the exact=True subsets' job
from engine.stats.user import UserStatistic, default_statistics, register, registered
from engine.ui.notebook import NOTEBOOK

if TYPE_CHECKING:  # the job imports Ray: loaded when analyze is called, not for lookups
    from engine.runtime.job.result import AnalyzeResult

__all__ = [
    "ALLOWED_BINS",
    "DEFAULT_STORE",
    "FREQUENCIES_FILE",
    "HISTOGRAMS_FILE",
    "STATISTICS_FILE",
    "AnalyzeOptions",
    "AnalyzeResult",
    "FrequencyStrategy",
    "ProgressCallback",
    "Quantiles",
    "TableStatistics",
    "UserStatistic",
    "ValuePartitions",
    "analyze",
    "approximate_quantiles",
    "default_statistics",
    "exact_quantiles",
    "open_statistics",
    "register",
    "registered",
    "sort_column",
    "value_partitions",
]

DEFAULT_STORE = ".metastore"


def analyze(
    table_uri: str,
    store: str = DEFAULT_STORE,
    *,
    bins: int = AnalyzeOptions.bins,
    columns: list[str] | None = None,
    name: str | None = None,
    progress: bool | ProgressCallback = False,
    user_statistics: list[UserStatistic] | None = None,
    mostly_distinct_ratio: float = AnalyzeOptions.mostly_distinct_ratio,
    frequencies: str | FrequencyStrategy = AnalyzeOptions.frequencies,
    redis_url: str | None = None,
    inherit: bool = AnalyzeOptions.inherit,
    value_partitions: bool = AnalyzeOptions.value_partitions,
    file_index: bool = AnalyzeOptions.file_index,
    bloom_columns: Sequence[str] | None = AnalyzeOptions.bloom_columns,
    format: str | None = None,  # noqa: A002
    at_snapshot: str | int | None = None,
    as_of: str | int | None = None,
    catalog: str | None = None,
    options: AnalyzeOptions | None = None,
    data_roots: Sequence[str] = (),
    runtime: str | Runtime = Runtime.AUTO,
) -> AnalyzeResult:
    """Compute and publish the statistics files of a table, per partition and for the table.

    ``runtime``: where the tasks run: ``"ray"`` starts (or attaches to, via RAY_ADDRESS) Ray
    if this process has not; ``"local"`` runs them in this process without Ray; ``"auto"``
    (default; else ``METASTORE_RUNTIME``) runs a small table in this process unless Ray
    already runs here (engine/runtime/placement.py, docs/SCALING.md). The files are the same.
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
    ``user_statistics``: None takes :func:`default_statistics` (the shipped
    examples and the registered ones), as every other entry point does.
    ``file_index``: also write the per-data-file column index planners prune files with
    (``TableStatistics.plan_files``); ``bloom_columns``: its Bloom-filtered columns (default:
    none; None: each partition's high-cardinality columns).
    ``options``: an :class:`AnalyzeOptions` instead of the keyword options above.
    ``format``, ``at_snapshot``, ``as_of``, ``catalog``: which table and snapshot is read
    (``engine.sources.open_table``; docs/FORMATS.md). ``data_roots``: where the files a
    table format's metadata names may lie besides the table's location (a file elsewhere
    refuses the table).
    """
    from engine.runtime.analyze import analyze_source
    from engine.sources import open_table

    # validated before the table is opened: a bad name or options fail before any work
    if name is not None:
        check_table_name(name)
    options = options or AnalyzeOptions(
        bins=bins, mostly_distinct_ratio=mostly_distinct_ratio, inherit=inherit, frequencies=frequencies, redis_url=redis_url,
        value_partitions=value_partitions, file_index=file_index, bloom_columns=tuple(bloom_columns) if bloom_columns is not None else None,
        runtime=runtime,
    )  # fmt: skip
    from engine.runtime.footers import InTasks

    # a table of many files has its footers read in Ray tasks, off this process (issue #18)
    footers = InTasks()
    source = open_table(
        table_uri, name=name, format=format, at_snapshot=at_snapshot, as_of=as_of, catalog=catalog, footers=footers, data_roots=data_roots
    )
    with progress_callback(progress) as callback:
        result = analyze_source(source, store, options, columns=columns, user_statistics=user_statistics, progress=callback)
    result.timings["ray_start_s"] = result.timings.get("ray_start_s", 0.0) + footers.ray_start_s
    return result


use_notebook_view(NOTEBOOK)


def __getattr__(name: str):  # noqa: ANN202 - a lazy re-export: the job module imports Ray
    if name == "AnalyzeResult":
        from engine.runtime.job.result import AnalyzeResult

        return AnalyzeResult
    raise AttributeError(f"module 'engine.api' has no attribute {name!r}")
