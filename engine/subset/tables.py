"""A subset's answers as the tables today's lookups return (same columns, same types), each
statistic's method in the schema metadata (engine/subset/model.py): which source answers a
column's statistics, and nothing silent where none can.

The sources, most exact first: the whole table's own row, one partition's own row (every
statistic, percentiles included), the merge of whole partitions (merge.py), the estimate
of a cut subset (estimates.py). A statistic none of them gives is null and ``unavailable``,
or an error when asked for by name (docs/SUBSETS.md, step 5).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.exceptions import InvalidArgumentError, SubsetStatisticError
from engine.subset.distributions import SHARE, Bins, ValueCount, round_keeping_total
from engine.subset.estimates import estimated
from engine.subset.merge import merged
from engine.subset.model import Answer, Header, Method
from engine.subset.rowcounts import RowCounts

#: statistics that are the same for any subset (describe the column, not its rows)
INVARIANT = ("column", "type", "unsupported", "histogram_bins")


def statistics_table(names: list[str], base: pa.Table, schema: pa.Schema, asked: set[str], counts: RowCounts, header: Header) -> pa.Table:
    """The subset's statistics table of the columns ``names`` from ``base``, the table's rows of
    them (in the lookup's ``schema``); ``asked``: the statistics named by the caller (an error
    where one is unavailable)."""
    stored, split = counts.stored, counts.split
    if not split.whole_table:
        for key in split.contributing:
            stored.rows_of(key, names)  # one read per partition for every column asked
    rows, answers = [], []
    for row in base.to_pylist():
        out, col_answers = _column(row, [f.name for f in schema], counts)
        missing = [a.statistic for a in col_answers if a.method is Method.UNAVAILABLE and a.statistic in asked]
        if missing:
            raise SubsetStatisticError(
                f"statistic {missing[0]!r} of column {row['column']!r} is not stored for the subset where {header.where} "
                f"and cannot be estimated: exact=True (--exact) computes it"
            )
        rows.append(out)
        answers.extend(col_answers)
    rc = counts.total()
    t = pa.Table.from_pylist(rows, schema=pa.schema([f for f in schema]))
    return header.attach(t, [rc, *answers], "statistics")


def _column(table_row: dict[str, Any], wanted: list[str], counts: RowCounts) -> tuple[dict[str, Any], list[Answer]]:
    """One column's row of the subset's statistics table, and an answer per statistic."""
    stored, split = counts.stored, counts.split
    column = table_row["column"]
    t = stored.ts.column_type(column)
    if split.whole_table:
        return table_row, [Answer(column, s, table_row.get(s), Method.STORED) for s in wanted if s != "column"]
    nonempty = [k for k in split.partitions.all if split.rows[k] > 0]
    if split.whole_partitions and len(nonempty) == 1:
        try:
            row = stored.ts.statistics([column], nonempty[0], [s for s in wanted if s != "column"]).to_pylist()[0]
            return row, [Answer(column, s, row.get(s), Method.STORED) for s in wanted if s != "column"]
        except InvalidArgumentError:
            pass  # a statistic the partition's file lacks (a table-level user statistic): merged below
    parts = {k: stored.row(column, k) for k in split.contributing}
    if split.whole_partitions:
        values, answers = merged(column, t, [parts[k] for k in split.partitions.all], nonempty, stored)
    else:
        values, answers = estimated(column, t, parts, counts)
    out: dict[str, Any] = {}
    result: list[Answer] = []
    for s in wanted:
        if s in INVARIANT or (table_row.get(s) is None and s not in ("row_count", "null_count")):
            # describes the column, or does not apply to it (null for the whole table: null for any subset)
            out[s] = table_row.get(s)
            if s != "column":
                result.append(Answer(column, s, out[s], Method.STORED))
        elif s in answers:
            out[s] = values.get(s)
            result.append(answers[s])
        elif s == "distinct_count_exact":
            a = answers.get("distinct_count")
            out[s] = a.exact if a is not None and values.get("distinct_count") is not None else None
            result.append(Answer(column, s, out[s], Method.STORED if a is not None else Method.UNAVAILABLE))
        else:
            out[s] = None
            result.append(Answer(column, s, None, Method.UNAVAILABLE))
    return out, result


def top_table(items: list[ValueCount], exact: bool, column: str, value_type: pa.DataType, typed: bool, header: Header) -> pa.Table:
    """The top frequencies table of ``items`` (the values with the most matching rows, in
    order): the estimates rounded, stored where ``exact`` or a value's count is one number."""
    arr = pa.array([it.value for it in items], type=value_type)
    value_col = arr if typed else value_forms.encode(arr)
    t = pa.table({"value": value_col, "frequency": pa.array([int(round(it.estimate)) for it in items], pa.int64())})
    answers = []
    for it, text in zip(items, value_forms.encode(arr).to_pylist()):
        lo, est, hi = int(it.low), int(round(it.estimate)), int(it.high)
        answers.append(Answer(column, text, est, Method.STORED) if exact or lo == hi else Answer(column, text, est, Method.ESTIMATED, lo, hi, SHARE))
    return stored_top_table(t, column, answers, header)


def stored_top_table(t: pa.Table, column: str, answers: list[Answer], header: Header) -> pa.Table:
    """``t`` (value, frequency) as a subset's answer; no ``answers``: every row is stored."""
    if not answers:
        texts = t.column("value").to_pylist() if mt.is_string(t.schema.field("value").type) else value_forms.encode(t.column("value")).to_pylist()
        answers = [Answer(column, str(v), f, Method.STORED) for v, f in zip(texts, t.column("frequency").to_pylist())]
    md = {b"kind": b"subset", b"stored_rows": str(t.num_rows).encode()}
    return header.attach(t.replace_schema_metadata(md), answers, "top_frequencies")


def stored_histogram_table(base: pa.Table, column: str, header: Header) -> pa.Table:
    """The table's (or whole partitions') histogram ``base`` as the subset's, every bin stored."""
    answers = [Answer(column, f"bin:{b}", c, Method.STORED) for b, c in zip(base["bin"].to_pylist(), base["count"].to_pylist())]
    return header.attach(base, answers, "histogram")


def histogram_table(base: pa.Table, column: str, b: Bins, header: Header) -> pa.Table:
    """The table's histogram ``base`` with the subset's bin counts: the estimates rounded so
    that they keep the subset's total, within each bin's bounds."""
    counts_out = np.clip(round_keeping_total(b.estimate), b.low, b.high).astype(np.int64)
    t = base.set_column(base.schema.get_field_index("count"), "count", pa.array(counts_out, pa.int64()))
    answers = [
        Answer(column, f"bin:{i}", int(c), Method.STORED)
        if b.low[i] == b.high[i]
        else Answer(column, f"bin:{i}", int(c), Method.ESTIMATED, int(b.low[i]), int(b.high[i]), b.assumption)
        for i, c in enumerate(counts_out)
    ]
    return header.attach(t, answers, "histogram")
