"""The analyze job's tasks on Ray: submission, tracking and waiting, in one object.

:class:`Executor` (an engine/runtime/job/runner.py ``TaskRunner``) is the one place the
stages (engine/runtime/job/) reach Ray: ``submit(fn, *args)`` runs a plain task body
(engine/runtime/tasks/, engine/runtime/inheritance.py) as a Ray task and returns its object
ref(s); ``wait_all`` fetches them with progress; a task lost with its worker or node becomes
one :class:`NodeLostError` naming its partitions. engine/runtime/job/local_executor.py runs
the same bodies in this process.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray

from engine import config
from engine.exceptions import AnalyzeError, MetastoreError, NodeLostError
from engine.progress import ProgressCallback
from engine.runtime import abort, batching
from engine.runtime.ray_runtime import environment_for_tasks

#: a Ray object ref (the typed outputs of the stages hold these, never positional lists)
ObjectRef = ray.ObjectRef

#: how many of the oldest pending refs the driver waits on at a time (Executor.wait_all)
WAIT_WINDOW = 32

#: what Ray raises when a task's worker or node died and its retries are spent, or an
#: object it made was lost with its node and could not be made again
LOST = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.ObjectLostError,
)

#: each task body as a Ray remote function, made once per process
_REMOTES: dict[Callable[..., Any], Any] = {}


def _task_options(**options: Any) -> dict[str, Any]:
    env = environment_for_tasks(config.FORWARDED_PREFIXES)
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


class Executor:
    """The tasks of one job: every ref it launched (to stop them on failure) and the partitions each works for."""

    def __init__(self, source_uri: str, task_retries: int, progress: ProgressCallback | None) -> None:
        self.source_uri, self.task_retries, self.progress = source_uri, task_retries, progress
        self.launched: list[ObjectRef[Any]] = []  # every task ref, to stop on failure
        #: (a task's refs, the partitions it works for): a failure names them (looked up only then)
        self.owners: list[tuple[list[ObjectRef[Any]], tuple[str, ...]]] = []
        #: the remote functions with this job's task options, by (function, number of returns)
        self._remotes: dict[tuple[Callable[..., Any], int], Any] = {}
        self.nodes_at_start = {n["NodeID"]: n.get("NodeManagerAddress", "") for n in ray.nodes() if n.get("Alive")}

    @staticmethod
    def cpus() -> int:
        """The cluster's CPUs (the batching budget's parallelism)."""
        return int(ray.cluster_resources().get("CPU", 1) or 1)

    @staticmethod
    def put(value: Any) -> ObjectRef[Any]:
        """A cheap, explicit reference for every task instead of re-pickling per call."""
        return ray.put(value)

    @staticmethod
    def get(refs: Any) -> Any:
        return ray.get(refs)

    def submit(self, fn: Callable[..., Any], *args: Any, num_returns: int = 1, owner: Sequence[str] | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` as a task: its ref, or a list of ``num_returns`` refs when more than one."""
        # the options (and the environment they forward) are the same for every task of the
        # job: built once per function, not per task (Ray validates them at each .options())
        function = self._remotes.get((fn, num_returns))
        if function is None:
            remote = _REMOTES.get(fn)
            if remote is None:
                remote = _REMOTES[fn] = ray.remote(fn)
            function = remote.options(**_task_options(num_returns=num_returns, max_retries=self.task_retries))
            self._remotes[(fn, num_returns)] = function
        refs = function.remote(*args, **kwargs)
        listed = list(refs) if num_returns > 1 else [refs]
        self.launched.extend(listed)
        if owner is not None:  # the partitions the task works for
            self.owners.append((listed, tuple(owner)))
        return listed if num_returns > 1 else refs

    def stop(self, job_id: str) -> None:
        """Stop every task of the failed job (engine/runtime/abort.py)."""
        abort.stop_tasks(job_id, self.launched)

    def raise_failure(self, exc: BaseException) -> None:
        """A lost task as one line naming its partitions; a task's own Metastore error as
        itself; any other error of a task as an AnalyzeError naming the source."""
        if isinstance(exc, LOST):
            raise self.lost(exc) from exc
        if isinstance(exc, ray.exceptions.RayTaskError):
            inner = _unwrap(exc)
            if isinstance(inner, MetastoreError):
                raise type(inner)(str(inner)) from None
            raise AnalyzeError(f"analyze of {self.source_uri} failed: {type(inner).__name__}: {inner}") from exc

    def lost(self, exc: BaseException, ref: ObjectRef[Any] | None = None) -> NodeLostError:
        """One line for a task lost with its worker or node: which partition (and how many
        others shared its task), which node."""
        hexes = [h for h in (ref.hex() if ref is not None else None, getattr(exc, "object_ref_hex", None)) if h]
        owners = {r.hex(): keys for refs, keys in self.owners for r in refs}
        keys = next((owners[h] for h in hexes if h in owners), None)
        what = batching.describe(keys) if keys is not None else "a table-level task"
        # Ray's error names the node it lost (NodeDiedError, a lost object's locations) ...
        named = set(re.findall(r"[0-9a-f]{56}", str(exc)))
        gone = [f"{node} ({ip})" for node, ip in self.nodes_at_start.items() if node in named]
        # ... else the node that left: Ray's control store marks it dead within seconds
        # (on one node there is no other to leave: a worker died, not its node)
        deadline = time.monotonic() + (10.0 if len(self.nodes_at_start) > 1 else 0.0)
        while not gone and time.monotonic() < deadline:
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
            gone = [f"{node} ({ip})" for node, ip in self.nodes_at_start.items() if node not in alive]
            if not gone:
                time.sleep(0.5)
        where = f"with Ray node {', '.join(gone)}, which left the cluster" if gone else f"with its worker ({type(exc).__name__})"
        return NodeLostError(
            f"analyze of {self.source_uri} failed: {what}: its task was lost {where}, after {self.task_retries} retries; nothing was published"
        )

    def wait_all(
        self, refs: Sequence[ObjectRef[Any]], phase: str, weights: Sequence[int] | None = None, fetch: Sequence[bool] | None = None
    ) -> list[Any]:
        """ray.get with progress; a failing task fails the job with its own message.

        The driver's cost here must grow linearly with the tasks: ``ray.wait`` costs time
        in the length of the list it is given (~0.2 us a pending ref), so it is given a
        window of the ``WAIT_WINDOW`` oldest pending refs (Ray starts tasks in submission
        order: the oldest end first); every ref of the window that is ready is taken at
        once and fetched (deserialized) once, with one ``ray.get`` for all of them.
        ``weights``: the partitions each ref stands for (a batch's), which the progress
        counts (default one each), so the bar means the same whatever the batches.
        ``fetch``: False for a ref only waited for (its place in the result is None; its
        failure shows in the refs that depend on it).
        """
        queue, taken = list(refs), 0
        window: list[ObjectRef[Any]] = []
        results: dict[ObjectRef[Any], Any] = {}
        weight = dict(zip(refs, weights, strict=True)) if weights is not None else {}
        skip = {r for r, f in zip(refs, fetch, strict=True) if not f} if fetch is not None else set()
        total, done = sum(weight.values()) if weights is not None else len(refs), 0
        if self.progress:
            self.progress(phase, 0, total)
        while window or taken < len(queue):
            room = WAIT_WINDOW - len(window)
            if room > 0 and taken < len(queue):
                window.extend(queue[taken : taken + room])
                taken = min(len(queue), taken + room)
            ready, window = ray.wait(window, num_returns=1, timeout=None)
            if window:
                more, window = ray.wait(window, num_returns=len(window), timeout=0)
                ready = ready + more
            try:
                wanted = [r for r in ready if r not in skip] if skip else ready
                results.update(zip(wanted, ray.get(wanted)))  # raises early on failure
                done += sum(weight.get(r, 1) for r in ready)
            except LOST:
                for r in ready:  # which task was lost: its partition is named
                    try:
                        ray.get(r)
                    except LOST as exc:
                        raise self.lost(exc, r) from exc
                raise
            if self.progress:
                self.progress(phase, done, total)
        return [results.get(r) for r in refs]


def _unwrap(exc: Exception) -> Exception:
    """The user's error inside a Ray task error."""
    cause = getattr(exc, "cause", None)
    while isinstance(cause, ray.exceptions.RayTaskError):
        cause = getattr(cause, "cause", None)
    return cause if isinstance(cause, Exception) else exc
