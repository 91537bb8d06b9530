"""The analyze job's tasks in this process: :class:`LocalExecutor`, a ``TaskRunner``
(engine/runtime/job/runner.py) for small tables (engine/runtime/placement.py).

The same task bodies (engine/runtime/tasks/, engine/runtime/inheritance.py) the Ray
executor runs, called at submission, one after the other in submission order (the order
Ray starts ready tasks in); a ref among a task's arguments stands for its value, as Ray
resolves them. Nothing here imports Ray: a small table analyzed from a fresh process
never starts or loads it. A task's own error fails the job as it does on Ray: a Metastore
error as itself, any other as an AnalyzeError naming the source.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from engine.exceptions import AnalyzeError, MetastoreError
from engine.progress import ProgressCallback


class LocalRef:
    """A task's result (or a put value), already computed."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class TaskFailed(Exception):
    """A task body's own error (not a Metastore one), raised as the job's AnalyzeError by ``raise_failure``."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


def _value(arg: Any) -> Any:
    return arg.value if isinstance(arg, LocalRef) else arg


class LocalExecutor:
    """The tasks of one job, run in this process."""

    def __init__(self, source_uri: str, task_retries: int, progress: ProgressCallback | None) -> None:
        self.source_uri, self.task_retries, self.progress = source_uri, task_retries, progress
        self.launched: list[LocalRef] = []  # nothing to stop: every task ended when submitted

    @staticmethod
    def cpus() -> int:
        """This machine's CPUs, as a local Ray would have: the same batches as Ray on this machine."""
        return os.cpu_count() or 1

    @staticmethod
    def put(value: Any) -> LocalRef:
        return LocalRef(value)

    @staticmethod
    def get(refs: Any) -> Any:
        return [_value(r) for r in refs] if isinstance(refs, list) else _value(refs)

    def submit(self, fn: Callable[..., Any], *args: Any, num_returns: int = 1, owner: Sequence[str] | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` now (refs among the arguments resolved, as Ray resolves a
        task's top-level arguments); its ref, or a list of ``num_returns`` refs."""
        try:
            out = fn(*[_value(a) for a in args], **{k: _value(v) for k, v in kwargs.items()})
        except MetastoreError:
            raise
        except Exception as exc:
            raise TaskFailed(exc) from exc
        if num_returns == 1:
            return LocalRef(out)
        values = list(out)
        if len(values) != num_returns:
            raise TaskFailed(ValueError(f"{fn.__name__} returned {len(values)} values, not {num_returns}"))
        return [LocalRef(v) for v in values]

    def wait_all(self, refs: Sequence[LocalRef], phase: str, weights: Sequence[int] | None = None, fetch: Sequence[bool] | None = None) -> list[Any]:
        """The refs' values in order (every task has ended), with the progress Ray's executor reports."""
        counts = list(weights) if weights is not None else [1] * len(refs)
        if self.progress:
            self.progress(phase, 0, sum(counts))
            self.progress(phase, sum(counts), sum(counts))
        if fetch is None:
            return [r.value for r in refs]
        return [r.value if f else None for r, f in zip(refs, fetch, strict=True)]

    def stop(self, job_id: str) -> None:
        """Nothing runs: each task ended when it was submitted."""

    def raise_failure(self, exc: BaseException) -> None:
        if isinstance(exc, TaskFailed):
            raise AnalyzeError(f"analyze of {self.source_uri} failed: {exc}") from exc.cause
