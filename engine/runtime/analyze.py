"""The analyze job's one entry: :func:`analyze_source`, which the API, the CLI, Spark and the Flight
``analyze`` action start a job through. It checks what can fail before any task starts (the
table's name, the Bloom columns, the Redis server), chooses where the tasks run (Ray, or this
process for a small table: engine/runtime/placement.py), starts Ray if they run there and runs
the job (engine/runtime/job/driver.py: a plan, then stages; task bodies in engine/runtime/tasks/).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine import config, fileio, redis_server
from engine.columns import leaf_columns, select
from engine.exceptions import AccessDeniedError, InvalidArgumentError
from engine.names import check_table_name
from engine.options import AnalyzeOptions, FrequencyStrategy, Runtime
from engine.progress import ProgressCallback
from engine.runtime import placement
from engine.runtime.job.driver import run_job
from engine.runtime.job.local_executor import LocalExecutor
from engine.runtime.job.result import AnalyzeResult
from engine.runtime.ray_runtime import ensure_ray
from engine.sources.base import TableSource
from engine.stats.user import UserStatistic, default_statistics
from engine.store import Store


# ---------------------------------------------------------------- the one entry
def analyze_source(
    source: TableSource,
    store: str | Store,
    options: AnalyzeOptions | None = None,
    *,
    columns: Sequence[str] | None = None,
    user_statistics: Sequence[UserStatistic] | None = None,
    progress: ProgressCallback | None = None,
) -> AnalyzeResult:
    """Compute and publish the statistics of ``source``: the job every entry point runs.

    ``columns``: top-level columns or dotted struct leaves (None: all).
    ``user_statistics``: None takes the defaults (engine.stats.user.default_statistics:
    the shipped examples and any registered statistic), the same whichever entry
    point started the job, so a table analyzed by one and re-analyzed by another
    keeps its columns and inherits its unchanged partitions.
    Its tasks run where ``options.runtime`` says (else ``METASTORE_RUNTIME``): on Ray, started
    (or attached to, via RAY_ADDRESS) if this process has not; or in this process, without Ray,
    for a small table under ``auto`` (engine/runtime/placement.py). The files are the same.
    """
    options = options or AnalyzeOptions()
    check_table_name(source.name)  # the store's directory of the table: nothing is written under a bad name
    if options.bloom_columns:
        known = {l.name for l in leaf_columns(source.schema())}
        unknown = [c for c in options.bloom_columns if c not in known]
        if unknown:
            raise InvalidArgumentError(f"--bloom-columns: table {source.name!r} has no column(s) {', '.join(map(repr, unknown))}")
    if options.frequencies is FrequencyStrategy.REDIS:
        # --redis (redis_url) wins; else REDIS_URL; else the coordinator starts its own server
        named = "--redis"
        if options.redis_url is None and config.get(config.REDIS_URL):
            options, named = dataclasses.replace(options, redis_url=config.get(config.REDIS_URL)), config.REDIS_URL.name
        if options.redis_url is not None:
            # an unusable server fails the job here, in one line, before any task starts
            redis_server.check_reachable(options.redis_url, named)
    leaves = select(leaf_columns(source.schema()), list(columns) if columns is not None else None)
    user = default_statistics() if user_statistics is None else list(user_statistics)
    runtime = placement.choose(options.runtime, source.partitions(), needs_ray=options.frequencies is FrequencyStrategy.REDIS)
    if runtime is Runtime.LOCAL and options.frequencies is FrequencyStrategy.REDIS:
        options = dataclasses.replace(options, runtime=Runtime.LOCAL)  # refused by AnalyzeOptions, in one line
    ray_s = ensure_ray() if runtime is Runtime.RAY else 0.0
    store = store if isinstance(store, Store) else Store(store)
    try:
        result = run_job(source, store, leaves, user, options, progress, executor=LocalExecutor if runtime is Runtime.LOCAL else None)
    except Exception as exc:
        # the store's catalog read or commit refused (or unsigned): one line naming the store
        problem = fileio.access_problem(store.root) if fileio.is_io_error(exc) else None
        if problem is None:
            raise
        raise AccessDeniedError(f"store {store.root}: {problem}") from None
    result.timings["ray_start_s"] = ray_s
    result.runtime = runtime.value
    return result
