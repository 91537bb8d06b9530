"""A directory table's footers read in Ray tasks when it is listed for a job (issue #18).

Listing a table reads every data file's footer (row count and schema: the job needs the
unified schema before its first task). On the driver that cost ~0.13 ms of CPU a file: a
table of 10,000 partitions of 10 files spent 1.3 ms of the driver a partition on it. As
Ray Data's Parquet datasource fetches metadata in parallel tasks for many files, a table
of at least :data:`MIN_FILES` files has its footers read here in a few tasks (at most
:data:`TASKS_PER_CPU` a CPU, none under :data:`MIN_FILES_PER_TASK` files); each answers
its chunk compactly (engine.sources.footers.FooterChunk), and the driver unifies the
schemas as before, so a bad or incompatible file still fails the listing before any job
starts, with the same error (the first bad file in path order).

``engine.api.analyze`` passes :class:`InTasks` to ``open_table``; everything else lists
tables without Ray (footers read in the caller's process).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from engine import config
from engine.exceptions import MetastoreError
from engine.runtime.ray_runtime import ensure_ray, environment_for_tasks
from engine.sources.footers import Footer, FooterChunk, FooterReader

__all__ = ["MIN_FILES", "InTasks"]

#: fewer files than this are read in the caller's process (a task costs more than ~100 footers)
MIN_FILES = 1_000
MIN_FILES_PER_TASK = 256
TASKS_PER_CPU = 2
#: threads a task reads footers with where the file system is slow (an object store)
THREADS_PER_TASK = 32


def read_chunk(reader: FooterReader, paths: Sequence[str]) -> FooterChunk:
    """The task's body: the footers of ``paths`` in order (the first bad file raises)."""
    return reader.read_chunk(paths, max_threads=THREADS_PER_TASK)


#: read_chunk as a Ray remote function, made once per process (Ray is imported only for a
#: table of at least MIN_FILES files: a smaller one's footers are read without it)
_REMOTE: list[Any] = []


class InTasks:
    """An ``engine.sources.footers.FetchFooters`` reading in Ray tasks (Ray started if it is
    not: the job would start it next); ``ray_start_s``: the seconds that took."""

    def __init__(self, min_files: int | None = None) -> None:
        self.min_files = MIN_FILES if min_files is None else min_files
        self.ray_start_s = 0.0

    def __call__(self, reader: FooterReader, paths: Sequence[str]) -> list[Footer] | None:
        if len(paths) < self.min_files:
            return None
        import ray

        self.ray_start_s += ensure_ray()
        if not _REMOTE:
            _REMOTE.append(ray.remote(read_chunk))
        _read_task = _REMOTE[0]
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        tasks = max(1, min(math.ceil(len(paths) / MIN_FILES_PER_TASK), TASKS_PER_CPU * cpus))
        bounds = [len(paths) * i // tasks for i in range(tasks + 1)]
        options: dict[str, Any] = {}
        env = environment_for_tasks(config.FORWARDED_PREFIXES)
        if env:
            options["runtime_env"] = {"env_vars": env}
        remote = _read_task.options(**options) if options else _read_task
        refs = [remote.remote(reader, list(paths[a:b])) for a, b in zip(bounds, bounds[1:])]
        out: list[Footer] = []
        try:
            for ref in refs:  # in path order: the first bad file is the one reading here would name
                out.extend(ray.get(ref).footers())
        except ray.exceptions.RayTaskError as exc:
            # the other chunks end on their own (a few hundred footers each) and are waited for,
            # not cancelled: ray.cancel racing a task that is finishing aborts the driver (a
            # Ray check failure, seen in a full test run; engine/runtime/abort.py avoids it too)
            ray.wait(refs, num_returns=len(refs), fetch_local=False)
            cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else None
            if isinstance(cause, MetastoreError):
                raise type(cause)(str(cause)) from None
            raise
        return out
