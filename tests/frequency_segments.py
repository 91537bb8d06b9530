"""Tables whose frequencies are kept in segments (docs/FORMAT.md, "Segments"), built by hand:
value counts of generated partitions, a base segment of the first partitions and delta segments
as the spec defines them after each appended partition, written with the writer and published
as catalog states; and the oracle, a whole frequencies file of the same counts.

Used by tests/engine/test_frequency_segments.py, tests/engine/stats/test_segments.py and
tests/spark_bridge/test_spark_frequency_segments.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import fileio
from engine.catalog import schema_fingerprint
from engine.catalog.job_output import JobOutput
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY, TABLE_COUNTS_PROPERTY, FileRef, StatisticsFiles
from engine.files import layout, writer
from engine.files.checksum import WrittenFile
from engine.files.layout import FileIdentity
from engine.stats.valuecounts import frequency_order
from engine.store import Store

HEAD = layout.FREQUENCIES_HEAD_ROWS


# --------------------------------------------------------------------------- counts and rows (the oracle)


def value_counts(values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """(value, count) of the non-null values, in no particular order (pyarrow's hash group-by)."""
    t = pa.table({"value": values}).filter(pc.is_valid(pa.table({"value": values})["value"]))
    out = t.group_by("value").aggregate([("value", "count")])
    return pa.table({"value": out["value"], "count": out["value_count"].cast(pa.int64())})


def full_rows(counts: pa.Table, kind: str) -> pa.Table:
    """What a whole frequencies file keeps of exact counts (value, count), in its order."""
    if kind == layout.FREQ_ALL_DISTINCT:
        return counts.slice(0, 0)
    if kind == layout.FREQ_DUPLICATES_ONLY:
        counts = counts.filter(pc.greater(counts["count"], 1))
    return frequency_order(counts)


def delta_rows(previous: pa.Table, now: pa.Table, head: int = HEAD) -> pa.Table:
    """A delta segment's rows of one column (the spec): the head of the whole rows ``now``, then
    every row of ``now`` whose frequency changed since ``previous`` (the merged rows before the
    append) and is not in the head, in the whole file's order (``now``'s)."""
    before = dict(zip(previous["value"].to_pylist(), previous["count"].to_pylist()))
    values, counts = now["value"].to_pylist(), now["count"].to_pylist()
    h = min(head, now.num_rows)
    keep = list(range(h)) + [i for i in range(h, now.num_rows) if before.get(values[i]) != counts[i]]
    return now.take(pa.array(keep, pa.int64()))


@dataclass(frozen=True)
class Segments:
    """One column's segments after ``len(rows) - 1`` appends: each segment's rows (typed value,
    count; oldest first), its stored rows (None for the base) and the whole rows after each step."""

    rows: tuple[pa.Table, ...]
    stored: tuple[int | None, ...]
    whole: tuple[pa.Table, ...]


def segments_of(steps: Sequence[pa.Array], kind: str, head: int = HEAD) -> Segments:
    """``steps``: the column's values of the base, then of each append (all rows of the step)."""
    rows, stored, whole = [], [], []
    seen: list[pa.Array] = []
    for i, values in enumerate(steps):
        seen.append(pa.array(values) if not isinstance(values, (pa.Array, pa.ChunkedArray)) else values)
        all_values = pa.chunked_array(seen, type=seen[0].type)
        now = full_rows(value_counts(all_values), kind)
        if i == 0:
            rows.append(now)
            stored.append(None)
        else:
            rows.append(delta_rows(whole[-1], now, head))
            stored.append(now.num_rows)
        whole.append(now)
    return Segments(tuple(rows), tuple(stored), tuple(whole))


# --------------------------------------------------------------------------- generated data


def generated_partitions(n: int, rows: int = 8000, seed: int = 7) -> tuple[pa.Schema, list[pa.Table]]:
    """``n`` partitions of a table with a column of each kind:

    - ``cat`` int64, complete: ~3,000 values of -1,500..1,500 (skewed: many ties, whose order is
      the integers', not their text's), some nulls;
    - ``day`` date32, complete, 40 days (fewer stored rows than a head);
    - ``name`` string, duplicates only: mostly unique names, and names of a shared pool that a
      later partition repeats (first seen once, then again);
    - ``uid`` int64, all distinct over the whole table.
    """
    rng = np.random.default_rng(seed)
    schema = pa.schema([("cat", pa.int64()), ("day", pa.date32()), ("name", pa.string()), ("uid", pa.int64())])
    parts = []
    for p in range(n):
        cat = np.clip(np.round(rng.standard_t(3, rows) * 300), -1500, 1500).astype(np.int64)
        cat_mask = rng.random(rows) < 0.02
        days = np.datetime64("2024-01-01") + rng.integers(0, 40, rows).astype("timedelta64[D]")
        unique = [f"n{p}-{i}" for i in range(rows - rows // 8)]
        pool = [f"s{j:05d}" for j in rng.integers(0, 2 * rows // 3, rows // 8)]
        names = unique + pool
        rng.shuffle(names)
        uid = np.arange(p * rows, (p + 1) * rows, dtype=np.int64) * 7 - 1000
        parts.append(
            pa.table(
                {
                    "cat": pa.array(cat, mask=cat_mask),
                    "day": pa.array(days, pa.date32()),
                    "name": pa.array(names, pa.string()),
                    "uid": pa.array(uid),
                },
                schema=schema,
            )
        )
    return schema, parts


# --------------------------------------------------------------------------- files and states


@dataclass(frozen=True)
class Published:
    job: str
    files: StatisticsFiles
    txn_id: int


def _properties(schema: pa.Schema, rows: int, created: str, table_uri: str) -> dict[str, Any]:
    return {
        "format_version": layout.FORMAT_VERSION,
        "table_uri": table_uri,
        "created_at": created,
        "bins": 1000,
        "columns": [{"name": f.name, "type": str(f.type)} for f in schema],
        "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
        "user_statistics": [],
    }


def publish_table_job(
    store: str,
    table: str,
    job: str,
    created: str,
    schema: pa.Schema,
    data: pa.Table,
    per_column: Sequence[tuple[str, str, pa.Table]],
    *,
    stored_rows: Mapping[str, int] | None = None,
    older: Sequence[FileRef] = (),
    table_counts: FileRef | None = None,
) -> Published:
    """Write a job's three table-level files (``per_column``: (column, kind, typed counts in file
    order) of its frequencies: a base, or with ``stored_rows`` a delta) and publish them; ``older``:
    the older segments its state names (oldest first)."""
    st = Store(store)
    run = f"runs/{job}/table"
    table_dir = st.table_uri(table)
    identity = FileIdentity(table, "/data/" + table, "table", "", f"snap-{job}", job, created)
    kinds = {c: k for c, k, _ in per_column}
    stat_rows = [
        {
            "column": f.name,
            "type": str(f.type),
            "row_count": data.num_rows,
            "null_count": data[f.name].null_count,
            "frequencies": kinds.get(f.name),
        }
        for f in schema
    ]
    written: dict[str, WrittenFile] = {}
    written["statistics"] = writer.write_statistics(fileio.join(table_dir, run, layout.STATISTICS_FILE), stat_rows, [], identity)
    rows = [(c, k, writer.frequency_rows(c, t)) for c, k, t in per_column]
    written["frequencies"] = writer.write_frequencies(fileio.join(table_dir, run, layout.FREQUENCIES_FILE), rows, identity, stored_rows=stored_rows)
    written["histograms"] = writer.write_histograms(fileio.join(table_dir, run, layout.HISTOGRAMS_FILE), [("cat", pa.int64(), None, [])], identity)
    files = StatisticsFiles(
        **{k: FileRef(f"{run}/{name}", w.size, w.checksum) for (k, w), name in zip(written.items(), layout.FILES)}  # type: ignore[arg-type]
    )
    properties = _properties(schema, data.num_rows, created, "/data/" + table)
    if older:
        properties[FREQUENCY_SEGMENTS_PROPERTY] = [{"path": r.path, "size": r.size, "checksum": r.checksum} for r in older]
    if table_counts is not None:
        properties[TABLE_COUNTS_PROPERTY] = {
            "files": [{"path": table_counts.path, "size": table_counts.size, "checksum": table_counts.checksum, "columns": []}]
        }
    output = JobOutput(
        table=table,
        job_id=job,
        snapshot_id=f"snap-{job}",
        schema_fingerprint=schema_fingerprint(schema),
        partitions=(),
        table_files=files,
        properties=properties,
        row_count=data.num_rows,
    )
    st.publish(output)
    return Published(job, files, st.state(table).catalog.txn_id)  # type: ignore[union-attr]


def write_table_counts(store: str, table: str, job: str, data: pa.Table) -> FileRef:
    """An Arrow IPC file standing for the job's table counts (readers ignore its content)."""
    from engine.files.checksum import of_bytes

    sink = pa.BufferOutputStream()
    counts = value_counts(data["cat"])
    with pa.ipc.new_file(sink, counts.schema) as w:
        w.write_table(counts)
    body = sink.getvalue().to_pybytes()
    path = f"runs/{job}/table/table_counts.arrow"
    fileio.write_bytes(fileio.join(Store(store).table_uri(table), path), body)
    return FileRef(path, len(body), of_bytes(body))


KINDS = {"cat": layout.FREQ_COMPLETE, "day": layout.FREQ_COMPLETE, "name": layout.FREQ_DUPLICATES_ONLY, "uid": layout.FREQ_ALL_DISTINCT}


@dataclass(frozen=True)
class SegmentedTable:
    """A table analyzed once over its first ``base`` partitions and then after each appended
    partition (one delta each), and for every step the oracle table (one whole file)."""

    store: str
    table: str
    schema: pa.Schema
    partitions: tuple[pa.Table, ...]
    base: int
    jobs: tuple[Published, ...]  # the base, then one per append
    oracles: tuple[str, ...]  # per step: a table of the same store with the whole file
    table_counts: FileRef


def build_segmented_table(store: str, table: str = "t", base: int = 3, appends: int = 2, rows: int = 8000) -> SegmentedTable:
    schema, parts = generated_partitions(base + appends, rows)
    steps = [pa.concat_tables(parts[:base])] + list(parts[base:])
    segs = {c: segments_of([s[c] for s in steps], k) for c, k in KINDS.items()}
    jobs: list[Published] = []
    oracles = []
    counts_ref = write_table_counts(store, table, "job0", steps[0])
    for i in range(len(steps)):
        data = pa.concat_tables(parts[: base + i])
        created = f"2026-01-0{i + 1}T00:00:00.000+00:00"
        per_column = [(c, KINDS[c], segs[c].rows[i]) for c in KINDS]
        stored = None if i == 0 else {c: segs[c].stored[i] for c in KINDS}
        older = [j.files.frequencies for j in jobs]
        jobs.append(
            publish_table_job(store, table, f"job{i}", created, schema, data, per_column, stored_rows=stored, older=older, table_counts=counts_ref)
        )
        whole = f"{table}_whole{i}"
        publish_table_job(store, whole, f"whole{i}", created, schema, data, [(c, KINDS[c], segs[c].whole[i]) for c in KINDS])
        oracles.append(whole)
    return SegmentedTable(store, table, schema, tuple(parts), base, tuple(jobs), tuple(oracles), counts_ref)


def segments_property(state_properties: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``frequency_segments`` property of a published state (decoded JSON), [] when absent."""
    value = state_properties.get(FREQUENCY_SEGMENTS_PROPERTY) or []
    return json.loads(value) if isinstance(value, str) else list(value)
