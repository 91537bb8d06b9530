"""The table-level files: statistics.parquet and histograms.parquet (the frequencies file is the
reductions' or the append's), and the per-file column index (engine/fileindex) from the
partitions' parts, profiled now or inherited."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.catalog import FileRef, StatisticsFiles
from engine.catalog.model import FILE_NAMES, KINDS
from engine.fileindex import store as fileindex_store
from engine.files import layout, partial_state, writer
from engine.files.writer import WrittenFile
from engine.options import FrequencyStrategy
from engine.runtime.job.bins import Binning, Merged
from engine.runtime.job.plan import JobPlan, partitions_digest
from engine.runtime.job.profile import Profiles, Wave
from engine.runtime.job.runner import TaskRunner


@dataclass(frozen=True)
class FileIndex:
    refs: dict[str, dict[str, Any]]  # the table property naming its files ({}: none written)
    timings: dict[str, float] = field(default_factory=dict)


def files(path: Callable[[str], str], written: dict[str, WrittenFile], given: dict[str, FileRef] | None = None) -> StatisticsFiles:
    """The three files: ``given`` refs where named, else this job's files by ``path``, with the
    sizes and checksums taken when they were ``written``."""
    given = given or {}
    refs = {}
    for kind in KINDS:
        name = FILE_NAMES[kind]
        refs[kind] = given.get(name) or FileRef(path(name), written[name].size, written[name].checksum)
    return StatisticsFiles(**refs)


def table_files(plan: JobPlan, merged: Merged, exact: dict[str, dict[str, Any]], binning: Binning, frequencies: WrittenFile) -> StatisticsFiles:
    """The table-level statistics and histograms files (and the frequencies file already written)."""
    rows = []
    specs = merged.specs
    for leaf in plan.leaves:
        p = plan.probes[leaf.name]
        # a counted column has none after an append (its counts are not reduced then): sketches
        row = p.finalize_table(merged.states[leaf.name], exact.get(leaf.name) if p.reduced else None)
        if p.discrete:
            row["frequencies"] = exact[leaf.name]["frequencies"]
        spec = specs.get(leaf.name)
        row["histogram_bins"] = spec.bins if spec else None
        rows.append(row)
    # partitions standing in the table's merged state have no counts: the table's stand for theirs (base)
    bin_counts = [c for p in plan.partitions if (c := binning.binned[p.key].counts)]
    base = [binning.base] if binning.base else []
    table_counts = {
        l.name: (np.sum([c[l.name] for c in [*base, *bin_counts]], axis=0) if base or bin_counts else np.zeros(spec.bins, np.int64))
        for l in plan.hist_leaves
        if (spec := specs[l.name]) is not None
    }
    where, run = plan.store.layout(plan.table), plan.run_layout
    ident = plan.identity("table", "")
    written = {
        layout.STATISTICS_FILE: writer.write_statistics(where.absolute(run.table_file(layout.STATISTICS_FILE)), rows, plan.user, ident),
        layout.HISTOGRAMS_FILE: writer.write_histograms(
            where.absolute(run.table_file(layout.HISTOGRAMS_FILE)),
            [(l.name, l.type, specs[l.name], table_counts.get(l.name)) for l in plan.hist_leaves],
            ident,
        ),
        layout.FREQUENCIES_FILE: frequencies,
    }
    return files(run.table_file, written)


def file_index(plan: JobPlan, executor: TaskRunner, wave: Wave, profiles: Profiles) -> FileIndex:
    """The table's per-file column index from its partitions' parts (profiled now or
    inherited), beside the table files; named in the table's properties (gc keeps it)."""
    t0 = time.perf_counter()
    rebuilt: dict[str, Any] = {}
    if wave.index:
        got = executor.wait_all([r for _, r in wave.index], "file index", [len(k) for k, _ in wave.index])
        for (keys, _), batch in zip(wave.index, got):
            rebuilt.update((k, part) for k, part in zip(keys, batch) if part is not None)
    parts: list[fileindex_store.PartitionFileIndex | fileindex_store.StoredPart]
    parts = [s.file_index for s in profiles.computed.values() if s.file_index is not None]
    inherited = plan.inherited_index
    parts += [rebuilt.get(k) or inherited[k] for k in wave.loaded if k in rebuilt or k in inherited]
    if not plan.options.file_index or not parts:
        return FileIndex({})
    tables = fileindex_store.assemble(parts, schema=plan.source.schema(), columns=[l.name for l in plan.leaves])
    where = plan.store.layout(plan.table)
    written = fileindex_store.write_file_index(tables, where.absolute(plan.run_layout.table_dir))
    refs = {name: f.ref(plan.run_layout.table_file(name)) for name, (_, f) in written.items()}
    return FileIndex(refs, {"file_index_s": time.perf_counter() - t0})


def table_state(plan: JobPlan, merged: Merged, rows: int) -> dict[str, Any] | None:
    """The table's merged state (engine/files/partial_state.py, TABLE_STATE_FILE) of every
    partition, which the next append merges its new partitions into instead of loading each
    inherited partition's state (plan.Append.state): written where the table's counts are kept
    for appends (a full reduction keeping them, an append); its ref as the table counts property
    names it, or None. Written here, on the driver, which holds the merged states."""
    o, inherit = plan.options, plan.inheritance
    if not plan.discrete or o.value_partitions or o.frequencies is not FrequencyStrategy.REDUCE or not inherit.write_partial_state:
        return None
    where, path = plan.store.layout(plan.table), plan.run_layout.table_file(partial_state.TABLE_STATE_FILE)
    profiles = [plan.probes[l.name] for l in plan.leaves]
    written = partial_state.write_table_state(
        where.absolute(path), plan.identity("table", ""), rows, profiles, merged.states, merged.kll_parts, plan.user, inherit.config
    )  # fmt: skip
    digest = partitions_digest([p.key for p in plan.partitions])
    return {"path": path, "size": written.size, "checksum": written.checksum, "partitions": digest}
