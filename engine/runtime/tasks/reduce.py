"""Reduction task bodies: a column group's exact table statistics from every partition's value
counts, the table's frequencies file and its counts files (kept for append re-analyzes).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.files import partial_state, writer
from engine.files.layout import FileIdentity
from engine.runtime.tasks.values import TaskResult
from engine.stats import stringsort, valuepartitions
from engine.stats.valuecounts import (
    counts_hashed,
    exact_of_merged,
    exact_statistics,
    hashed_frequencies,
    merge_counts,
    sorted_counts,
    widen_counts,
)


@dataclass(frozen=True)
class TableCountsOut:
    """Where a full reduction writes its group's exact table counts (the base of later append
    re-analyzes, engine/stats/appendcounts.py), and what the file's metadata says."""

    uri: str
    path: str  # relative to the table's directory (what the catalog names)
    identity: FileIdentity
    rows: int  # the table's
    cfg: dict[str, Any]  # engine.files.partial_state.config


def reduce_counts(
    columns: list[tuple[str, pa.DataType, int | None]],
    mostly_distinct_ratio: float,
    *partition_groups: dict[str, pa.Table],
    value_partitions: bool = False,
    keep_counts: bool = False,
    counted: Collection[str] = (),
) -> tuple[TaskResult[dict[str, dict[str, Any]]], list[tuple[str, str, pa.Table]], dict[str, pa.Table]]:
    """Exact table-level value counts of a group of reduced columns.

    ``columns``: (name, type, non-null count at table level, or None: the sum of
    the counts, which cover every non-null value of a discrete column). Returns
    the exact statistics per column (with the task's CPU time) and its frequency
    rows for the table file, as two Ray objects (the table file's writer fetches
    only the rows). ``partition_groups`` are in the table's partition order; with ``value_partitions``
    the rows also carry each stored value's distribution over them. With ``keep_counts`` the
    third value holds the merged counts (:func:`reduce_batches` writes them in the same task);
    else it is empty.
    ``counted``: the columns among them whose frequencies are not stored (floats, times:
    ColumnProfile.counted): their exact distinct count and percentiles only, no rows.
    """
    cpu0 = time.process_time()
    exact: dict[str, dict[str, Any]] = {}
    freq: list[tuple[str, str, pa.Table]] = []
    keep: dict[str, pa.Table] | None = {} if keep_counts else None
    for name, type_, non_null in columns:
        narrow = [g[name] for g in partition_groups]
        if stringsort.supports(type_) and name not in counted and all(counts_hashed(p) for p in narrow):
            # strings counted in hash order: merged and stored without copying the column (nor
            # widening its counts: the merge sums them as int64)
            rows = non_null if non_null is not None else sum(int(pc.sum(p["count"]).as_py() or 0) for p in narrow)
            out: list[pa.Table] | None = [] if keep is not None else None
            got = hashed_frequencies(narrow, type_, lambda d: writer.frequency_kind(d, rows, mostly_distinct_ratio), out)
            if got is not None:
                distinct, kind, stored = got
                exact[name] = {"distinct_count": distinct, "frequencies": kind}
                if keep is not None and out:
                    keep[name] = out[0]
                # hashed: no two values of the parts share a hash (hashed_frequencies checked it)
                wide = [widen_counts(p) for p in narrow] if value_partitions else None
                freq.append((name, kind, _frequency_rows(name, stored, wide, hashed=True)))
                continue
        parts = narrow  # merge_counts widens what it sums: a unique column's counts of 1 are not
        if non_null is None:
            non_null = sum(int(pc.sum(p["count"]).as_py() or 0) for p in parts)
        if name in counted:
            merged = sorted_counts(merge_counts(parts, type_))
            # as many values as counted rows: every count is 1 (no cumulative counts to sum)
            exact[name] = exact_statistics(merged, type_, distinct=merged.num_rows == non_null)
            if keep is not None:
                keep[name] = merged
            continue
        merged = merge_counts(parts, type_)
        if keep is not None:
            keep[name] = merged
        exact[name], stored = exact_of_merged(merged, type_, non_null, mostly_distinct_ratio)
        kind = exact[name]["frequencies"]
        freq.append((name, kind, _frequency_rows(name, stored, [widen_counts(p) for p in parts] if value_partitions else None)))
    return TaskResult(exact, time.process_time() - cpu0), freq, keep or {}


def write_table_counts(
    outs: list[TableCountsOut], columns: list[list[tuple[str, pa.DataType, int | None]]], *counts: dict[str, pa.Table]
) -> TaskResult[list[dict[str, Any]]]:
    """The reductions' merged counts as the table's counts files, one a reduction (one task for
    all: they are written while the table's frequencies are): ``{"path", "size", "checksum",
    "columns"}`` each, as the ``table_counts`` property names them (engine/stats/appendcounts.py)."""
    cpu0 = time.process_time()
    refs = []
    for out, cols, got in zip(outs, columns, counts, strict=True):
        named = [NamedColumn(name, type_) for name, type_, _ in cols]
        written = partial_state.write_counts(out.uri, out.identity, out.rows, named, got, out.cfg, kind=TABLE_COUNTS_KIND)  # type: ignore[arg-type]  # NamedColumn has the name and type write_counts reads of a profile
        refs.append({"path": out.path, "size": written.size, "checksum": written.checksum, "columns": [name for name, _, _ in cols]})
    return TaskResult(refs, time.process_time() - cpu0)


#: the kind of a table counts file (engine.files.partial_state.write_counts)
TABLE_COUNTS_KIND = "table_counts"


@dataclass(frozen=True)
class NamedColumn:
    """What a counts file's metadata needs of a column."""

    name: str
    type: pa.DataType


def _frequency_rows(name: str, stored: pa.Table, parts: list[pa.Table] | None, hashed: bool = False) -> pa.Table:
    """A column's rows of the table file; with ``parts`` (partition value counts) each
    stored value's partition distribution too."""
    rows = writer.frequency_rows(name, stored)
    if parts is None:
        return rows
    return rows.append_column(valuepartitions.FIELD, valuepartitions.distributions(parts, stored["value"], hashed))


def write_table_frequencies(
    uri: str,
    identity: FileIdentity,
    order: list[str],
    *groups: list[tuple[str, str, pa.Table]],
    partitions: list[str] | None = None,
    stored_rows: dict[str, int] | None = None,
    full: list[str] | tuple[str, ...] = (),
) -> TaskResult[writer.WrittenFile]:
    """Returns the file's size and checksum, and the task's CPU. ``partitions``: the table's partition
    keys (in the order of the reductions' inputs) when the rows carry value partitions;
    ``stored_rows`` and ``full``: a delta segment's (writer.write_frequencies)."""
    cpu0 = time.process_time()
    pos = {n: i for i, n in enumerate(order)}
    per_column = sorted((f for g in groups for f in g), key=lambda f: pos[f[0]])
    written = writer.write_frequencies(uri, per_column, identity, partitions=partitions, stored_rows=stored_rows, full=full)
    return TaskResult(written, time.process_time() - cpu0)


def reduce_batches(
    columns: list[tuple[str, pa.DataType, int | None]],
    mostly_distinct_ratio: float,
    order: list[tuple[int, int]],
    *batch_groups: list[dict[str, pa.Table]],
    value_partitions: bool = False,
    counts_out: TableCountsOut | None = None,
    counted: Collection[str] = (),
) -> tuple[TaskResult[dict[str, dict[str, Any]]], list[tuple[str, str, pa.Table]], list[dict[str, Any]]]:
    """:func:`reduce_counts` over batches' group objects: ``order`` names, for each partition
    of the table in its order, (which of ``batch_groups``, which position in it).

    With ``counts_out`` the merged counts are written here, as the table's counts file of the
    group (:func:`write_table_counts`; its CPU counted with the reduction's), and the third
    value names it; else it is empty. Written where they were merged: as a Ray object for a
    writer task of their own, the counts (a table's every distinct value: 240 MB of the bench
    table's 5,000,000 rows) were copied into the object store first."""
    groups = (batch_groups[b][i] for b, i in order)
    exact, rows, counts = reduce_counts(
        columns, mostly_distinct_ratio, *groups, value_partitions=value_partitions, keep_counts=counts_out is not None, counted=counted
    )
    if counts_out is None:
        return exact, rows, []
    written = write_table_counts([counts_out], [columns], counts)
    return TaskResult(exact.value, exact.cpu_s + written.cpu_s), rows, written.value


def unbatch(items: list[Any]) -> Any:
    """A batch's list as one Ray object per partition (the Redis strategy takes a partition's
    value counts as an object of their own): the items as a tuple, or the one item."""
    return items[0] if len(items) == 1 else tuple(items)
