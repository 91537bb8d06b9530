"""A failed job's stop flag (engine.runtime.abort) on the session's real Ray runtime."""

from __future__ import annotations

import time

import pytest
import ray

from engine.runtime import abort


@ray.remote(num_cpus=1)
def _sees_flag_after(job_id: str, seconds: float) -> bool:
    time.sleep(seconds)
    return abort.requested(job_id)


@ray.remote(num_cpus=1, max_retries=0)
def _ignores_flag(seconds: float, started: str = "") -> str:
    if started:  # say it runs (the test cancels a running straggler, not a task still queued)
        from ray.experimental import internal_kv

        internal_kv._internal_kv_put(started, b"1", namespace="test-abort")
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # back in Python often, as the profile tasks are: cancellable
        time.sleep(0.05)
    return "finished"


def test_running_tasks_see_the_flag_and_are_waited_for(ray_runtime):
    job = "test-abort-wait"
    assert not abort.requested(job)
    ref = _sees_flag_after.remote(job, 1.0)
    t0 = time.monotonic()
    abort.stop_tasks(job, [ref], grace_s=30)
    assert ray.get(ref) is True  # it ran to its end (not cancelled) and saw the flag
    assert time.monotonic() - t0 < 25
    assert not abort.requested(job)  # cleared once the job's tasks are done


def test_stragglers_are_cancelled_after_the_grace_period(ray_runtime):
    from ray.experimental import internal_kv

    job = "test-abort-cancel"
    ref = _ignores_flag.remote(300.0, job)
    deadline = time.monotonic() + 120  # after a long suite a worker may take a while to start
    while not internal_kv._internal_kv_exists(job, namespace="test-abort") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert internal_kv._internal_kv_exists(job, namespace="test-abort"), "the task never started"
    internal_kv._internal_kv_del(job, namespace="test-abort")
    t0 = time.monotonic()
    # generous bounds (a loaded 2-core machine took 20.7 s once): what matters is that the
    # task ends cancelled long before its own 300 s
    abort.stop_tasks(job, [ref], grace_s=0.5, cancel_wait_s=60)
    assert time.monotonic() - t0 < 120
    with pytest.raises((ray.exceptions.TaskCancelledError, ray.exceptions.RayTaskError)):
        ray.get(ref, timeout=60)
    assert not abort.requested(job)


def test_a_profile_task_of_a_stopped_job_reads_nothing(ray_runtime, tmp_path):
    """A partition task that starts after its job failed returns empty results at once."""
    import pyarrow as pa
    from ray.experimental import internal_kv

    from engine.columns import leaf_columns
    from engine.files.layout import FileIdentity
    from engine.options import AnalyzeOptions
    from engine.runtime.tasks.profile import profile_partition
    from engine.runtime.tasks.values import JobContext, PartitionTask
    from engine.sources.base import DataFile, Partition

    class Unreadable:
        def read_batches(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
            raise AssertionError("a stopped job's task must not read")

    leaves = leaf_columns(pa.schema([("x", pa.int64())]))
    context = JobContext(Unreadable(), leaves, [], AnalyzeOptions(), "test-abort-profile")  # type: ignore[arg-type]
    internal_kv._internal_kv_put(abort._key("test-abort-profile"), b"1", namespace=abort._NAMESPACE)
    try:
        partition = Partition("p=1", (("p", "1"),), (DataFile("/nowhere.parquet", 1, 0),))
        ident = FileIdentity("t", "/t", "partition", "p=1", "s", "j", FileIdentity.now())
        got = profile_partition(context, PartitionTask(partition, str(tmp_path / "out"), ident), [["x"]], discrete_only=True)
        assert got == (None, None, None)
        assert not (tmp_path / "out").exists()
    finally:
        internal_kv._internal_kv_del(abort._key("test-abort-profile"), namespace=abort._NAMESPACE)
