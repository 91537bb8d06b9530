"""The job's typed output (engine/catalog/job_output.py), published in one catalog transaction:
every partition with its files and their sizes, the table files and the table's properties."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from engine.catalog import FileRef, JobOutput, JobPartition, StatisticsFiles, schema_fingerprint
from engine.catalog.model import FILE_INDEX_PROPERTY, FREQUENCY_SEGMENTS_PROPERTY, TABLE_COUNTS_PROPERTY
from engine.files import layout
from engine.runtime import inheritance
from engine.runtime.job.bins import Binning
from engine.runtime.job.plan import TABLE_FILES_JOB_PROPERTY, TABLE_OPTIONS_PROPERTY, TABLE_STATE_KEY, JobPlan
from engine.runtime.job.profile import Profiles
from engine.runtime.job.write import files
from engine.stats.userdefs import PROPERTY as USER_DEFINITIONS_PROPERTY
from engine.stats.userdefs import reference_of


def output(
    plan: JobPlan,
    profiles: Profiles,
    binning: Binning,
    table_files: StatisticsFiles,
    file_index: dict[str, dict[str, Any]],
    exact: dict[str, dict[str, Any]],
    counts_files: list[dict[str, Any]],
    state: dict[str, Any] | None = None,
) -> JobOutput:
    """The merged job's output: every partition with its files and their sizes (``state``: the
    table's merged state written, named in the table counts property)."""
    inherit, run = plan.inheritance, plan.run_layout
    partitions = []
    for s in profiles.summaries:
        fingerprint = inherit.fingerprints.get(s.key, "")
        if s.key in profiles.computed:
            written = {**s.files, **binning.binned[s.key].files}
            partitions.append(JobPartition(s.key, s.rows, files(functools.partial(run.partition_file, s.key), written), fingerprint))
            continue
        inh = inherit.inherited[s.key]
        own = binning.binned[s.key].files  # re-binned: new histograms (and statistics) of this job
        given = {n: r for n, r in binning.inherited_files[s.key].items() if n not in own}
        rebinned = bool(own)
        # kept as they are: the catalog's entry carries over; re-binned: a new entry naming old and new files
        partitions.append(
            JobPartition(
                s.key,
                s.rows,
                files(functools.partial(run.partition_file, s.key), own, given),
                fingerprint,
                inherited=not rebinned,
                job_id=inh.job_id if not rebinned else "",
                snapshot_id=inh.snapshot if not rebinned else "",
            )  # fmt: skip
        )
    properties: dict[str, Any] = {
        "format_version": layout.FORMAT_VERSION,
        "table_uri": plan.source.uri,
        "created_at": plan.created,
        "rows": sum(s.rows for s in profiles.summaries),
        "bins": plan.options.bins,
        "columns": inheritance.manifest_columns(plan.leaves),
        "schema": plan.schema_text(),
        "user_statistics": [u.name for u in plan.user],
        TABLE_OPTIONS_PROPERTY: plan.table_options(),
    }
    definitions = {u.name: ref for u in plan.user if (ref := reference_of(u)) is not None}
    if definitions:  # where each user statistic's definition lives: subsets computed elsewhere load them
        properties[USER_DEFINITIONS_PROPERTY] = definitions
    if inherit.write_partial_state:
        properties[inheritance.CONFIG_PROPERTY] = inherit.config
    if file_index:
        properties[FILE_INDEX_PROPERTY] = file_index
    properties.update(_counts_properties(plan, exact, counts_files))
    if TABLE_COUNTS_PROPERTY in properties:
        counts = {k: v for k, v in properties[TABLE_COUNTS_PROPERTY].items() if k != TABLE_STATE_KEY}
        properties[TABLE_COUNTS_PROPERTY] = {**counts, TABLE_STATE_KEY: state} if state is not None else counts
    return _job_output(plan, partitions, table_files, properties)


def _counts_properties(plan: JobPlan, exact: dict[str, dict[str, Any]], counts_files: list[dict[str, Any]]) -> dict[str, Any]:
    """The table counts property (and, after an append, the older frequency segments)."""
    distinct = {name: {"distinct": int(exact[name]["distinct_count"])} for name in plan.discrete if name in exact}
    a = plan.append
    if a is not None:
        counts = {**a.counts, "appended": [*a.counts.get("appended", []), *a.new], "columns": distinct}
        return {TABLE_COUNTS_PROPERTY: counts, FREQUENCY_SEGMENTS_PROPERTY: a.segments}
    if not counts_files or {c for f in counts_files for c in f["columns"]} != {c for g in plan.groups for c in g}:
        return {}  # none written (value partitions, the redis strategy, no partial states)
    base = [p.key for p in plan.partitions]
    return {TABLE_COUNTS_PROPERTY: {"files": counts_files, "base_partitions": base, "appended": [], "columns": distinct}}


def carried_output(plan: JobPlan, carried: inheritance.CarriedTable) -> JobOutput:
    """The unchanged table's output: every partition inherited, the table files named again."""
    inherit = plan.inheritance
    partitions = []
    for part in plan.partitions:
        inh = inherit.inherited[part.key]
        refs = {name: FileRef(f["path"], int(f["size"]), f.get("checksum", "")) for name, f in inh.files.items()}
        partitions.append(
            JobPartition(
                part.key,
                inh.rows,
                files(lambda name: name, {}, refs),
                inherit.fingerprints.get(part.key, ""),
                inherited=True,
                job_id=inh.job_id,
                snapshot_id=inh.snapshot,
            )  # fmt: skip
        )
    properties = dict(carried.properties)
    properties[TABLE_FILES_JOB_PROPERTY] = carried.properties.get(TABLE_FILES_JOB_PROPERTY) or carried.job_id
    properties["created_at"] = plan.created  # the state's (its files keep their own, in their metadata)
    return _job_output(plan, partitions, carried.files, properties, carried.row_count)


def _job_output(
    plan: JobPlan, partitions: Sequence[JobPartition], table_files: StatisticsFiles, properties: dict[str, Any], row_count: int | None = None
) -> JobOutput:
    return JobOutput(
        table=plan.table,
        job_id=plan.job_id,
        snapshot_id=plan.snapshot,
        schema_fingerprint=schema_fingerprint(properties["columns"]),
        partitions=tuple(partitions),
        table_files=table_files,
        properties=properties,
        row_count=row_count,
    )
