"""The Ray objects of a job's phase 1, by name: what the stages pass each other instead of lists of refs."""

from __future__ import annotations

from dataclasses import dataclass

from engine.runtime.job.plan import JobPlan
from engine.runtime.job.runner import ObjectRef, TaskRunner
from engine.runtime.tasks.values import JobContext, PartitionTask


@dataclass(frozen=True)
class JobRefs:
    """What every task of a job shares, put in the object store once (a ref per task, not a pickle)."""

    context: ObjectRef  # JobContext
    leaves: ObjectRef  # list[LeafColumn]
    user: ObjectRef  # list[UserStatistic]

    @staticmethod
    def of(plan: JobPlan, executor: TaskRunner) -> JobRefs:
        return JobRefs(
            leaves=executor.put(plan.leaves),
            user=executor.put(plan.user),
            context=executor.put(JobContext(plan.source, plan.leaves, plan.user, plan.options, plan.job_id)),
        )


@dataclass(frozen=True)
class BatchRefs:
    """The Ray objects of one task's partitions (a batch: engine/runtime/batching.py), by
    name: each object is a list with one item per partition of ``keys``, in that order."""

    keys: tuple[str, ...]
    #: the PartitionTask of each, passed by value to the profile, second-wave and bin tasks (a few KB
    #: a batch, inlined in the task's spec: a ray.put cost the driver ~1.6 ms of CPU an object)
    tasks: list[PartitionTask] | None
    #: SummaryBatch (the first wave's: a list of PartitionSummary), or the LoadedPartition / LoadFailure of each inherited one
    summaries: ObjectRef
    groups: tuple[ObjectRef, ...]  # per column group: {column: value counts} each (what each reduction fetches)
    phase_two: ObjectRef | None = None  # PhaseTwoInputs each: phase 2's statistics rows and binning inputs (profiled only)
    loaded: bool = False  # the batch's partitions are inherited (loaded, not profiled)
    first: ObjectRef | None = None  # with two waves: the first wave's (partial) summaries
    guessed: ObjectRef | None = None  # with edges guessed from metadata: the second wave's Binned each

    @staticmethod
    def of_profile(keys: tuple[str, ...], tasks: list[PartitionTask], refs: list[ObjectRef]) -> BatchRefs:
        """profile_batch's returns: the summaries, one object per group, phase 2's inputs."""
        summaries, *groups, phase_two = refs
        return BatchRefs(keys, tasks, summaries, tuple(groups), phase_two)

    @staticmethod
    def of_load(keys: tuple[str, ...], refs: ObjectRef | list[ObjectRef]) -> BatchRefs:
        """load_batch's returns (one object when there are no groups)."""
        summaries, *groups = refs if isinstance(refs, list) else [refs]
        return BatchRefs(keys, None, summaries, tuple(groups), loaded=True)
