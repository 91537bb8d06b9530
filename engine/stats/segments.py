"""The merged view of a table's frequencies kept in segments (docs/FORMAT.md, "Segments").

An append re-analyze writes a small delta segment instead of the table's whole
frequencies.parquet; a reader that needs more than the newest segment's head merges
them: per value the newest segment's row wins (frequencies only grow from one segment
to the next), and the rows are ordered as a whole file orders them, by decreasing
frequency then increasing value in the column's own type (``frequency_order``, the
writer's order), so a merged read equals the whole file's rows.

Pure kernels: the lookups (engine/lookup/) read the segments and cache the result.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.stats.valuecounts import frequency_order

#: the merged rows' schema: a column's (value text, frequency), as frequencies.parquet stores them
ROWS_SCHEMA = pa.schema([("value", pa.string()), ("frequency", pa.int64())])


def newest_rows(parts: Sequence[pa.Table]) -> pa.Table:
    """One column's rows of every segment (``value``, ``frequency``; oldest first) with one row
    per value: the newest segment's. Unordered.

    Walks from the newest segment back, keeping an older segment's rows whose value no newer
    segment holds: the set looked up in is the newer segments' values, small next to the base
    (deltas hold a head and the changed values), so the base is filtered, never hashed."""
    if not parts:
        return ROWS_SCHEMA.empty_table()
    kept: list[pa.Table] = []
    seen: list[pa.Array] = []
    for i in range(len(parts) - 1, -1, -1):
        part = pa.table({"value": parts[i]["value"], "frequency": parts[i]["frequency"]}).cast(ROWS_SCHEMA)
        if seen and part.num_rows:
            newer = pa.concat_arrays(seen) if len(seen) > 1 else seen[0]
            part = part.filter(pc.invert(pc.is_in(part["value"], value_set=newer)))
        kept.append(part)
        if i > 0:  # the oldest's values are looked up in by nothing older
            seen.append(contiguous(part["value"]))
    return pa.concat_tables(kept[::-1]).combine_chunks() if len(kept) > 1 else kept[0].combine_chunks()


def merge(parts: Sequence[pa.Table], type: pa.DataType) -> pa.Table:
    """The merged rows of one column (``value`` text, ``frequency``) of its segments' rows
    (oldest first): newest per value, by decreasing frequency, ties by increasing value in
    ``type`` (the values' text forms decoded for the order, engine.values)."""
    rows = newest_rows(parts)
    if len(parts) == 1 or rows.num_rows < 2:
        return rows  # one segment: already in order (a whole file)
    typed = value_forms.decode(contiguous(rows["value"]), type)
    ordered = frequency_order(pa.table({"value": typed, "count": rows["frequency"], "text": rows["value"]}))
    return pa.table({"value": ordered["text"], "frequency": ordered["count"]}, schema=ROWS_SCHEMA)
