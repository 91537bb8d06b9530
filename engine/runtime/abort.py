"""Stopping a failed job's tasks without ``ray.cancel`` where it can be helped.

A failed analyze must not leave a task running that would write into the run
directory it deletes. ``ray.cancel`` on a task whose completion is already on
its way races in Ray's core worker (``task_manager.cc``: "Tried to complete task
that was not pending", ray-project/ray#54846) and aborts the driver process:
the bad-input tests hit it in about one run in three once the tasks got faster.
So a failed job raises a flag in Ray's GCS key-value store instead; a task that
has not started yet sees it and returns at once, the driver waits for the tasks
already running, and cancels only those still running after a grace period.

Ray is imported where it is used: a task body checks the flag in a job that runs in this
process too (engine/runtime/job/local_executor.py), where Ray is never loaded.
"""

from __future__ import annotations

import sys
from typing import Any

_NAMESPACE = "metastore"


def _key(job_id: str) -> bytes:
    return f"abort:{job_id}".encode()


def requested(job_id: str) -> bool:
    """Whether the job's driver asked its tasks to stop (one GCS read, ~1 ms; False without
    Ray in this process: a job run in process stops by its own exception)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False
    from ray.experimental import internal_kv

    try:
        return bool(internal_kv._internal_kv_exists(_key(job_id), namespace=_NAMESPACE))
    except Exception:  # noqa: BLE001 - no GCS to ask: run the task
        return False


def stop_tasks(job_id: str, refs: list[Any], grace_s: float = 30.0, cancel_wait_s: float = 60.0) -> None:
    """Raise the job's stop flag, wait for its tasks to end, cancel the stragglers, clear the flag."""
    import ray
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(_key(job_id), b"1", namespace=_NAMESPACE)
    try:
        if not refs:
            return
        _, running = ray.wait(refs, num_returns=len(refs), timeout=grace_s, fetch_local=False)
        if not running:
            return
        for ref in {r.task_id(): r for r in running}.values():  # once per task, not per return value
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - already finished
                pass
        ray.wait(running, num_returns=len(running), timeout=cancel_wait_s, fetch_local=False)
    finally:
        internal_kv._internal_kv_del(_key(job_id), namespace=_NAMESPACE)
