"""Small partitions batched into one Ray task (engine/runtime/batching.py, engine/runtime/job/).

The planner is pure (a property test); the job is run on the session's Ray: a table of
many tiny partitions takes far fewer tasks than partitions, and writes the same files
as one task per partition, inherited or recomputed; a task lost with its worker names
its batch.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime import batching
from engine.runtime.batching import PARTITION_COST_BYTES
from tests.engine.test_inherit import TABLE, USER, _analyze, _rewrite, assert_same_as_oracle

MB = 1024 * 1024


# ---------------------------------------------------------------- the planner (pure)
@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.integers(0, 64 * 1024), st.integers(0, 40 * MB)), max_size=200),
    budget=st.one_of(st.just(0), st.integers(1, 64 * MB)),
)
def test_batches_are_a_partition_of_the_partitions_in_order(sizes: list[int], budget: int) -> None:
    batches = batching.plan(sizes, budget)
    # each partition exactly once, order preserved, no empty batch
    assert [i for b in batches for i in b] == list(range(len(sizes)))
    assert all(len(b) >= 1 and b.step == 1 for b in batches)
    cost = [s + PARTITION_COST_BYTES for s in sizes]
    for n, b in enumerate(batches):
        if budget <= 0:
            assert len(b) == 1
            continue
        # within the budget, unless it is one partition as large as the budget
        assert len(b) == 1 or sum(cost[i] for i in b) <= budget
        # greedy: the next partition did not fit
        if n + 1 < len(batches):
            assert sum(cost[i] for i in b) + cost[batches[n + 1][0]] > budget


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40 * MB), min_size=1, max_size=300),
    task_bytes=st.integers(0, 256 * MB),
    cpus=st.integers(1, 64),
    per_cpu=st.integers(0, 4),
)
def test_the_budget_never_exceeds_task_bytes_and_spreads_equal_partitions(sizes: list[int], task_bytes: int, cpus: int, per_cpu: int) -> None:
    got = batching.budget(sizes, task_bytes, cpus, per_cpu)
    if task_bytes == 0:
        assert got == 0
        return
    assert PARTITION_COST_BYTES <= got <= max(task_bytes, PARTITION_COST_BYTES)
    if per_cpu == 0:
        assert got == max(PARTITION_COST_BYTES, min(task_bytes, sum(sizes) + len(sizes) * PARTITION_COST_BYTES))
    # partitions of one size fill at least half the tasks the CPUs want (greedy packing of the mean)
    same = [sizes[0]] * len(sizes)
    wanted = cpus * per_cpu
    assert len(batching.plan(same, batching.budget(same, task_bytes, cpus, per_cpu))) >= min(len(same), -(-wanted // 2))


def test_a_bench_sized_partition_keeps_a_task_of_its_own_and_tiny_ones_share() -> None:
    # the 16 partitions of bench/bench_analyze.py (17 MB each) stay 16 tasks at the defaults
    big = [17 * MB] * 16
    assert len(batching.plan(big, batching.budget(big, 16 * MB, cpus=2))) == 16
    # 1,024 partitions of 10 KB on 2 CPUs: 64 a task at most (16 MiB / 256 KiB)
    tiny = [10 * 1024] * 1024
    batches = batching.plan(tiny, batching.budget(tiny, 16 * MB, cpus=2))
    assert 16 <= len(batches) <= 20 and max(len(b) for b in batches) <= 64


def test_a_batch_is_named_by_a_partition_and_how_many_shared_its_task() -> None:
    assert batching.describe(("a=1",)) == "partition a=1"
    assert batching.describe(("a=1", "a=2")) == "partition a=1 (with 1 other in its task)"
    assert batching.describe(tuple(f"a={i}" for i in range(64))) == "partition a=0 (with 63 others in its task)"
    assert batching.describe(("",)) == "partition (unpartitioned)"


# ---------------------------------------------------------------- the job
@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 partitions of 50 rows (a few KB each)."""
    from engine.sample import generate_table

    data = tmp_path_factory.mktemp("tiny") / TABLE
    generate_table(str(data), rows=2_000, partitions=40, seed=5)
    return data


def _job(data: Path, store: Path, **options: Any) -> Any:
    """Run the job on ``data`` (no inheritance unless asked); returns (what it submitted, AnalyzeResult):
    every task ref it launched, the partitions of each phase-1 profile task, the table's partitions."""
    from engine.columns import leaf_columns
    from engine.options import AnalyzeOptions
    from engine.runtime.job.driver import run_job
    from engine.runtime.job.executor import Executor
    from engine.runtime.tasks.profile import profile_batch
    from engine.sources import open_table
    from engine.store import Store

    class Recording(Executor):
        def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
            if fn is profile_batch:
                submitted.batches.append(kwargs.get("owner"))
            refs = super().submit(fn, *args, **kwargs)
            submitted.launched.extend(refs if isinstance(refs, list) else [refs])
            return refs

    options.setdefault("inherit", False)
    source = open_table(str(data), name=TABLE)
    submitted = SimpleNamespace(launched=[], batches=[], partitions=source.partitions())
    result = run_job(source, Store(str(store)), leaf_columns(source.schema()), USER, AnalyzeOptions(**options), executor=Recording)
    return submitted, result


def _tasks(job: Any) -> int:
    return len({ref.task_id() for ref in job.launched})


def test_tiny_partitions_take_far_fewer_tasks_and_write_the_same_files(ray_runtime: None, tiny_table: Path, tmp_path: Path) -> None:
    from engine.files import partial_state

    batched, got = _job(tiny_table, tmp_path / "batched")
    single, want = _job(tiny_table, tmp_path / "single", task_bytes=0)
    assert got.partitions == want.partitions == 40 and got.rows == want.rows == 2_000
    # one task per partition and wave (and the table's few) against one batch of all 40
    assert _tasks(single) >= 2 * 40
    assert len(batched.batches) == 1 and _tasks(batched) < 40 // 2, _tasks(batched)
    assert got.histograms_guessed == want.histograms_guessed
    assert_same_as_oracle(tmp_path / "batched", tmp_path / "single", tiny_table)
    # the partial states too, KLL sketches included (deterministic: issue #28)
    for key in [p.key for p in batched.partitions]:
        for name in (partial_state.PARTIAL_STATE_FILE, partial_state.PARTIAL_COUNTS_FILE):
            a = partial_state._read_ipc(f"{got.run_uri}/partitions/{key}/{name}")
            b = partial_state._read_ipc(f"{want.run_uri}/partitions/{key}/{name}")
            assert a.replace_schema_metadata(None).equals(b.replace_schema_metadata(None)), (key, name)


def test_progress_counts_partitions_whatever_the_batches(ray_runtime: None, tiny_table: Path, tmp_path: Path) -> None:
    from engine.api import analyze

    seen: dict[str, tuple[int, int]] = {}
    analyze(str(tiny_table), store=str(tmp_path / "s"), inherit=False, progress=lambda phase, done, total: seen.__setitem__(phase, (done, total)))
    assert seen["profile"] == (40, 40)  # 40 partitions (two waves each, counted once)
    assert seen["histograms"] == (40, 40)


def test_batches_mixing_inherited_changed_and_damaged_partitions_equal_a_full_analyze(ray_runtime: None, tiny_table: Path, tmp_path: Path) -> None:
    """Several batches (a budget of ~4 partitions), then a second job where some partitions
    changed (a rewrite that moves the price edges: every inherited one is re-binned), one
    is new, one is gone and one's partial state is damaged (recomputed in a batch of its own)."""
    from engine.catalog import Catalog
    from engine.files import partial_state
    from engine.options import AnalyzeOptions

    data = tmp_path / "data" / TABLE
    shutil.copytree(tiny_table, data)
    budget = 4 * (max(f.stat().st_size for f in data.rglob("*.parquet")) + PARTITION_COST_BYTES)
    store = tmp_path / "store"
    first = _analyze(data, store, options=AnalyzeOptions(task_bytes=budget))
    assert (first.recomputed, first.inherited) == (40, 0)
    entries = Catalog.open(str(store), TABLE).state().partitions

    _rewrite(data / "part=03" / "data-0.parquet", lambda t: t.set_column(t.schema.get_field_index("price"), "price", pc.multiply(t["price"], 1000.0)))
    _rewrite(data / "part=17" / "data-0.parquet", lambda t: t.slice(0, t.num_rows - 5))
    shutil.rmtree(data / "part=30")
    (data / "part=40").mkdir()
    pq.write_table(pq.read_table(data / "part=00" / "data-0.parquet").slice(0, 20), data / "part=40" / "data-0.parquet")
    damaged = (store / TABLE / entries["part=21"].files.frequencies.path).parent / partial_state.PARTIAL_STATE_FILE
    damaged.write_bytes(damaged.read_bytes()[:100])

    second = _analyze(data, store, options=AnalyzeOptions(task_bytes=budget))
    assert (second.inherited, second.recomputed) == (36, 4)
    assert set(second.recompute_reasons) == {"part=03", "part=17", "part=21", "part=40"}
    assert second.rebinned == 36 and len(second.warnings) == 1 and "part=21" in second.warnings[0]
    oracle = tmp_path / "oracle"  # one task per partition, nothing inherited
    assert _analyze(data, oracle, options=AnalyzeOptions(inherit=False, task_bytes=0)).recomputed == 40
    assert_same_as_oracle(store, oracle, data)


def test_a_task_lost_with_its_worker_names_its_batch_and_publishes_nothing(ray_runtime: None, tiny_table: Path, tmp_path: Path) -> None:
    """A worker that dies in a batch of 40 partitions, with no retry left: one line naming a
    partition of the batch and how many shared its task."""
    import ray

    from engine.exceptions import NodeLostError
    from engine.options import AnalyzeOptions
    from engine.runtime.analyze import analyze_source
    from engine.sources import open_table

    source = open_table(str(tiny_table), name=TABLE)

    class DiesOnPart7(type(source)):  # pickled by value into the tasks
        def read_batches(self, partition, columns, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
            if partition.key == "part=07" and ray.get_runtime_context().get_task_id() is not None:
                os._exit(1)
            return super().read_batches(partition, columns, *args, **kwargs)

    dying = copy.copy(source)
    dying.__class__ = DiesOnPart7
    store = tmp_path / "store"
    with pytest.raises(NodeLostError) as info:
        analyze_source(dying, str(store), AnalyzeOptions(inherit=False, task_retries=0), user_statistics=USER)
    text = str(info.value)
    assert "\n" not in text and "(with 39 others in its task)" in text and "with its worker" in text and "after 0 retries" in text, text
    assert not (store / TABLE / "catalog").exists(), "nothing published"
    runs = store / TABLE / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "the failed job's run directory is removed"


def test_a_batch_task_of_a_stopped_job_reads_nothing(ray_runtime: None, tmp_path: Path) -> None:
    import pyarrow as pa
    from ray.experimental import internal_kv

    from engine.columns import leaf_columns
    from engine.files.layout import FileIdentity
    from engine.options import AnalyzeOptions
    from engine.runtime import abort
    from engine.runtime.tasks.bins import bin_batch
    from engine.runtime.tasks.profile import profile_batch
    from engine.runtime.tasks.values import JobContext, PartitionTask, PhaseTwoInputs
    from engine.sources.base import DataFile, Partition

    class Unreadable:
        def read_batches(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
            raise AssertionError("a stopped job's task must not read")

    leaves = leaf_columns(pa.schema([("x", pa.int64())]))
    context = JobContext(Unreadable(), leaves, [], AnalyzeOptions(), "test-abort-batch")  # type: ignore[arg-type]
    internal_kv._internal_kv_put(abort._key("test-abort-batch"), b"1", namespace=abort._NAMESPACE)
    try:
        tasks = []
        for i in range(3):
            partition = Partition(f"p={i}", (("p", str(i)),), (DataFile("/nowhere.parquet", 1, 0),))
            ident = FileIdentity("t", "/t", "partition", f"p={i}", "s", "j", FileIdentity.now())
            tasks.append(PartitionTask(partition, str(tmp_path / f"out{i}"), ident))
        assert profile_batch(context, tasks, [["x"]], discrete_only=True) == (None, None, None)
        assert bin_batch(context, tasks, {}, [PhaseTwoInputs([])] * 3, [{}] * 3) is None
        assert not any(tmp_path.iterdir())
    finally:
        internal_kv._internal_kv_del(abort._key("test-abort-batch"), namespace=abort._NAMESPACE)
