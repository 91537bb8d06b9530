"""engine.stats.segments: the merged rows of a table's frequency segments equal the rows of one
whole file of the same counts, in the same order (docs/FORMAT.md, "Segments").

The segments are built as the spec defines them (tests/frequency_segments.py: the head of the
whole rows, then the rows whose frequency changed since the previous segment), with a small head
so that deltas leave most values to older segments; the oracle is the whole file's rows of the
value counts of all the data, and its order is checked against Python's sort of the typed values.
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import values as value_forms
from engine.files import layout
from engine.stats import segments
from tests.frequency_segments import segments_of

TYPES = {
    "int64": (pa.int64(), lambda i: i * 7 - 40),  # negatives; 9 < 10 but "10" < "9"
    "string": (pa.string(), lambda i: f"v{i % 13}" + "x" * (i % 3)),
    "date32": (pa.date32(), lambda i: datetime.date(1999, 12, 25) + datetime.timedelta(days=i)),
    "decimal": (pa.decimal128(7, 2), lambda i: Decimal(i * 37 - 500) / 100),
    "binary": (pa.binary(), lambda i: bytes([i % 7, i % 5]) * (1 + i % 2)),
    "bool": (pa.bool_(), lambda i: i % 3 == 0),
}
KINDS = (layout.FREQ_COMPLETE, layout.FREQ_DUPLICATES_ONLY, layout.FREQ_ALL_DISTINCT)


def _texts(rows: pa.Table) -> pa.Table:
    """A segment's rows as the file stores them: (value text, frequency)."""
    return pa.table({"value": value_forms.encode(rows["value"]), "frequency": rows["count"].cast(pa.int64())}, schema=segments.ROWS_SCHEMA)


@st.composite
def appended(draw: st.DrawFn) -> tuple[pa.DataType, str, list[pa.Array], int]:
    """A column type, a kind, the values of a base and of 1..4 appends, and a head size."""
    name = draw(st.sampled_from(sorted(TYPES)))
    kind = draw(st.sampled_from(KINDS))
    t, make = TYPES[name]
    n_steps = draw(st.integers(2, 5))
    if kind == layout.FREQ_ALL_DISTINCT:  # every value once over the whole table
        sizes = draw(st.lists(st.integers(0, 12), min_size=n_steps, max_size=n_steps))
        codes = draw(st.permutations(range(sum(sizes))))
        steps, at = [], 0
        for n in sizes:
            steps.append(codes[at : at + n])
            at += n
        t, make = (pa.int64(), TYPES["int64"][1]) if name == "bool" else (t, make)
    else:
        pool = draw(st.integers(1, 40))
        steps = [draw(st.lists(st.integers(0, pool - 1), max_size=30)) for _ in range(n_steps)]
    arrays = [pa.array([make(i) for i in s], t) for s in steps]
    return t, kind, arrays, draw(st.integers(1, 8))


@settings(max_examples=200, deadline=None)
@given(appended())
def test_the_merge_of_base_and_deltas_is_the_whole_file(case: tuple[pa.DataType, str, list[pa.Array], int]) -> None:
    t, kind, steps, head = case
    segs = segments_of(steps, kind, head)
    for n in range(1, len(steps) + 1):  # after every append
        merged = segments.merge([_texts(r) for r in segs.rows[:n]], t)
        whole = _texts(segs.whole[n - 1])
        assert merged.equals(whole), (n, merged.to_pylist(), whole.to_pylist())
    # the whole file's order, independently: decreasing frequency, then the typed value
    rows = list(zip(segs.whole[-1]["value"].to_pylist(), segs.whole[-1]["count"].to_pylist()))
    assert rows == sorted(rows, key=lambda r: (-r[1], r[0]))
    if kind == layout.FREQ_ALL_DISTINCT:
        assert merged.num_rows == 0


def test_the_newest_row_of_a_value_wins() -> None:
    base = pa.table({"value": ["a", "b", "c", "d"], "frequency": [5, 3, 2, 1]})
    first = pa.table({"value": ["c", "a"], "frequency": [6, 5]})  # c grew; a repeated unchanged (head)
    second = pa.table({"value": ["d", "e"], "frequency": [7, 2]})  # d grew, e is new
    merged = segments.merge([base, first, second], pa.string())
    assert merged.to_pylist() == [
        {"value": "d", "frequency": 7},
        {"value": "c", "frequency": 6},
        {"value": "a", "frequency": 5},
        {"value": "b", "frequency": 3},
        {"value": "e", "frequency": 2},
    ]
    assert sorted(segments.newest_rows([base, first, second]).to_pylist(), key=lambda r: r["value"]) == sorted(
        merged.to_pylist(), key=lambda r: r["value"]
    )


def test_ties_order_by_the_typed_value_not_the_text() -> None:
    base = pa.table({"value": ["9", "10", "-1"], "frequency": [1, 1, 1]})
    delta = pa.table({"value": ["100"], "frequency": [1]})
    assert segments.merge([base, delta], pa.int64())["value"].to_pylist() == ["-1", "9", "10", "100"]
    assert segments.merge([base, delta], pa.string())["value"].to_pylist() == ["-1", "10", "100", "9"]


def test_one_segment_is_returned_as_it_is_and_none_is_empty() -> None:
    base = pa.table({"value": ["b", "a"], "frequency": [2, 2]})  # (not re-sorted: a whole file is in order)
    assert segments.merge([base], pa.string()).to_pylist() == base.to_pylist()
    assert segments.merge([], pa.string()).num_rows == 0


def test_a_text_that_is_not_of_the_column_type_is_an_error() -> None:
    from engine.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        segments.merge([pa.table({"value": ["1"], "frequency": [1]}), pa.table({"value": ["x"], "frequency": [2]})], pa.int64())
