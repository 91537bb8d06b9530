"""What the analyze job's stages ask of the place their tasks run: :class:`TaskRunner`.

Two implementations: engine/runtime/job/executor.py (``Executor``: Ray tasks, the only
module of the job that imports Ray) and engine/runtime/job/local_executor.py
(``LocalExecutor``: the same task functions called in this process, in submission
order). The stages (plan, profile, reduce, append, bins, write) and the driver see only
this protocol, so the job imports Ray only when it runs on Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeAlias

from engine.progress import ProgressCallback

#: a task's result: a ``ray.ObjectRef`` on Ray, an ``engine.runtime.job.local_executor.LocalRef``
#: in this process (the typed outputs of the stages hold these, never positional lists)
ObjectRef: TypeAlias = Any


class TaskRunner(Protocol):
    """Submission, tracking and waiting of one job's tasks."""

    source_uri: str
    task_retries: int
    progress: ProgressCallback | None
    #: every task ref the job launched (to stop them on failure)
    launched: list[ObjectRef]

    def cpus(self) -> int:
        """The CPUs the tasks share (the batching budget's parallelism)."""
        ...

    def put(self, value: Any) -> ObjectRef:
        """A reference every task gets instead of its own copy of ``value``."""
        ...

    def get(self, refs: Any) -> Any:
        """The value of a ref, or the values of a list of refs."""
        ...

    def submit(self, fn: Callable[..., Any], *args: Any, num_returns: int = 1, owner: Sequence[str] | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` as a task (refs among ``args`` stand for their values): its
        ref, or a list of ``num_returns`` refs when more than one."""
        ...

    def wait_all(self, refs: Sequence[ObjectRef], phase: str, weights: Sequence[int] | None = None, fetch: Sequence[bool] | None = None) -> list[Any]:
        """The refs' values in order, with progress (``weights``: partitions a ref stands for;
        ``fetch`` False: only waited for, None in the result)."""
        ...

    def stop(self, job_id: str) -> None:
        """Stop every task of the failed job ``job_id`` before its run directory goes."""
        ...

    def raise_failure(self, exc: BaseException) -> None:
        """Raise what the user sees for a task's failure ``exc`` (one line naming the task or
        the user's own error); return when ``exc`` is to be raised as it is."""
        ...


#: makes the executor of each attempt: (source uri, task retries, progress) -> a TaskRunner
ExecutorFactory = Callable[[str, int, "ProgressCallback | None"], TaskRunner]
