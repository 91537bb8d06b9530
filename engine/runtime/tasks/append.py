"""Append re-analyze task bodies: the table's discrete columns from its counts at the base plus
the appended partitions' (engine/stats/appendcounts.py), and the delta segment of its frequencies.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.exceptions import MetastoreError
from engine.files import checksum, layout, partial_state, writer
from engine.files.layout import FileIdentity
from engine.runtime.tasks.reduce import TABLE_COUNTS_KIND, NamedColumn, write_table_frequencies
from engine.runtime.tasks.values import TaskResult
from engine.stats.valuecounts import (
    widen_counts,
)


# ---------------------------------------------------------------- append re-analyze
@dataclass(frozen=True)
class AppendInputs:
    """What the append task reads besides the new partitions' counts (engine/stats/appendcounts.py)."""

    base: list[tuple[str, str, list[tuple[str, pa.DataType]]]]  # table counts files: (uri, checksum, their columns)
    earlier: list[Any]  # inheritance.InheritedPartition: the partitions appended since the base
    head_uri: str  # the newest segment of the table's frequencies (its head row groups)
    head_checksum: str
    distinct: dict[str, int]  # each column's exact table distinct count now (the catalog's)
    cfg: dict[str, Any]


@dataclass(frozen=True)
class AppendedTable:
    """The append task's result: per column, its exact statistics and its merged stored rows."""

    exact: dict[str, dict[str, Any]]
    stored_rows: dict[str, int]
    full: list[str]  # columns the segment holds in full (small, or their kind changed)


def _segment_heads(uri: str, expected_checksum: str, types: dict[str, pa.DataType]) -> dict[str, tuple[str, int, pa.Table]]:
    """{column: (kind, stored rows of the merged read, head as (value typed, count))} of a segment."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(pa.BufferReader(checksum.read_checked(uri, expected_checksum)))
    kv = layout.decode_metadata(pf.metadata.metadata)
    index = json.loads(kv["metastore.frequencies"])
    merged_rows = json.loads(kv[layout.SEGMENT_KEY])["stored_rows"] if layout.SEGMENT_KEY in kv else {}
    out = {}
    for name, type_ in types.items():
        first, groups, rows, kind = index[name]
        if groups:
            t = pf.read_row_group(first, columns=["value", "frequency"])
            head = pa.table({"value": value_forms.decode(contiguous(t["value"]), type_), "count": contiguous(t["frequency"])})
        else:
            head = pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())})
        out[name] = (kind, int(merged_rows.get(name, rows)), head)
    return out


def append_table(
    columns: list[tuple[str, pa.DataType]],
    mostly_distinct_ratio: float,
    inputs: AppendInputs,
    new: list[list[tuple[int, int]]],
    group_of: dict[str, int],
    *group_objects: list[dict[str, pa.Table]],
) -> tuple[TaskResult[AppendedTable | str], list[tuple[str, str, pa.Table]]]:
    """The table's discrete columns after an append, from their counts at the base, the earlier
    appends' and the new partitions' (``new``: per new partition, per column group, (which of
    ``group_objects``, position in it); a group object is a batch's list of per-partition counts
    by column; ``group_of``: each column's group). Returns the exact statistics and the delta segment's
    rows; or, when a file it reads is missing or damaged, why (a str: the job then reduces in full)."""
    from engine.runtime import inheritance
    from engine.stats import appendcounts

    cpu0 = time.process_time()
    types = dict(columns)
    base: dict[str, pa.Table] = {}
    try:
        for uri, expected, file_columns in inputs.base:
            named = [NamedColumn(n, t) for n, t in file_columns]
            base.update(partial_state.read_counts(uri, named, inputs.cfg, expected, kind=TABLE_COUNTS_KIND, widen=False))  # type: ignore[arg-type]
        discrete = [NamedColumn(n, t) for n, t in columns]
        earlier = []
        for inh in inputs.earlier:
            expected = inheritance.partial_state_checksums(inh).get(partial_state.PARTIAL_COUNTS_FILE, "")
            earlier.append(partial_state.read_counts(inh.counts_uri, discrete, inputs.cfg, expected, widen=False))  # type: ignore[arg-type]
        heads = _segment_heads(inputs.head_uri, inputs.head_checksum, types)
    except (MetastoreError, OSError, pa.ArrowException, KeyError, ValueError) as exc:  # the job reduces the table in full instead
        return TaskResult(f"{type(exc).__name__}: {exc}" if not isinstance(exc, MetastoreError) else str(exc), time.process_time() - cpu0), []
    exact: dict[str, dict[str, Any]] = {}
    stored: dict[str, int] = {}
    full: list[str] = []
    rows: list[tuple[str, str, pa.Table]] = []
    for name, type_ in columns:
        kind, stored_rows, head = heads[name]
        added = [widen_counts(group_objects[per_group[group_of[name]][0]][per_group[group_of[name]][1]][name]) for per_group in new]
        previous = appendcounts.Previous(inputs.distinct[name], kind, stored_rows, head)
        got = appendcounts.append(type_, base[name], [e[name] for e in earlier], added, previous, mostly_distinct_ratio)
        if got.full:
            full.append(name)
        exact[name] = got.exact
        stored[name] = got.stored_rows
        rows.append((name, got.exact["frequencies"], writer.frequency_rows(name, got.rows)))
    return TaskResult(AppendedTable(exact, stored, full), time.process_time() - cpu0), rows


def write_segment(
    uri: str, identity: FileIdentity, order: list[str], appended: TaskResult[AppendedTable | str], rows: list[tuple[str, str, pa.Table]]
) -> TaskResult[writer.WrittenFile | None]:
    """The delta segment of the table's frequencies (docs/FORMAT.md), columns in table order;
    nothing when the append task found it cannot append."""
    if not isinstance(appended.value, AppendedTable):
        return TaskResult(None, 0.0)
    return write_table_frequencies(uri, identity, order, rows, stored_rows=appended.value.stored_rows, full=appended.value.full)
