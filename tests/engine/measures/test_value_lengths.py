"""Lengths (engine/measures/value_lengths.py): avg_len and max_len against DuckDB's
``length`` (characters) and ``octet_length`` (bytes) over the same rows, and their place
in the files kept from before the registry (docs/FORMAT.md)."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from engine import measures
from engine.files import layout, partial_state
from engine.measures.value_lengths import Lengths, LengthsMeasure
from engine.stats import columnwise
from engine.stats.profile import ColumnProfile
from engine.subset.merge import merge_measures

WORDS = ["", "a", "bb", "äöü", "日本語", "mixed ß text", "x" * 40]
TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]


def _parts(t: pa.DataType, seed: int) -> list[pa.Array]:
    """Partitions with nulls, ASCII only and not, one all null."""
    rng = np.random.default_rng(seed)
    parts = []
    for n, words in ((800, WORDS), (1, WORDS[:3]), (300, WORDS[:3]), (50, WORDS)):
        values = [None if rng.random() < 0.1 else words[int(rng.integers(0, len(words)))] + str(int(rng.integers(0, 99))) for _ in range(n)]
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            parts.append(pa.array([None if v is None else v.encode() for v in values], t))
        else:
            parts.append(pa.array(values, t))
    parts.append(pa.array([None] * 5, t))
    return parts


def _duckdb(values: pa.Array) -> tuple:
    con = duckdb.connect()
    try:
        con.register("t", pa.table({"x": values}))
        fn = "octet_length" if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type) else "length"
        return con.execute(f"SELECT avg({fn}(x)), max({fn}(x)) FROM t").fetchone()
    finally:
        con.close()


def _check(row: dict, values: pa.Array) -> None:
    want_avg, want_max = _duckdb(values)
    assert row["max_len"] == want_max
    assert (row["avg_len"] is None) == (want_avg is None)
    if want_avg is not None:
        assert row["avg_len"] == pytest.approx(want_avg, rel=1e-12)


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_table_and_partition_lengths_are_duckdbs(t: pa.DataType) -> None:
    parts = _parts(t, 3)
    profile = ColumnProfile("x", t)
    # one part through update (batches), the others whole (strings: from their value counts)
    states = [profile.update(profile.zero(), parts[0])]
    for p in parts[1:]:
        state, row, _ = profile.profile_column(p)
        states.append(state)
        _check(row, p)
    merged = profile.merge_all(states)
    _check(profile.finalize_table(merged, None), pa.concat_arrays(parts))
    cols = columnwise.StateColumns.of(profile, states)
    assert columnwise.merge(profile, cols, [s.theta for s in states]).measures == merged.measures


def test_dictionary_chunks_count_lengths_from_codes() -> None:
    """A string column read as dictionaries is counted from its codes: the lengths too."""
    parts = _parts(pa.string(), 9)
    profile = ColumnProfile("x", pa.string())
    assert profile.counts_strings
    chunks = [p.dictionary_encode() for p in parts]
    _, row, _, _ = profile.profile_chunks(chunks)
    _check(row, pa.concat_arrays(parts))


@pytest.mark.parametrize("t", [pa.string(), pa.binary()], ids=str)
def test_subset_of_partitions_merges_their_stored_rows(t: pa.DataType) -> None:
    parts = _parts(t, 5)
    profile = ColumnProfile("x", t)
    rows = [profile.profile_column(p)[1] for p in parts]
    picked = [0, 2, 4]
    _check(merge_measures(t, [rows[i] for i in picked]), pa.concat_arrays([parts[i] for i in picked]))


def test_places_in_the_files_are_those_from_before_the_registry() -> None:
    names = layout.STATISTICS_SCHEMA.names
    assert names[names.index("stddev") + 1 : names.index("stddev") + 3] == ["avg_len", "max_len"]
    state = partial_state.STATE_SCHEMA.names
    assert state[state.index("moments_sum") + 1 : state.index("moments_sum") + 4] == ["lengths_n", "lengths_total", "lengths_max"]
    assert "lengths" in measures.names() and "lengths" not in measures.configured()
    # the previews show them last among the registered statistics, as before the registry
    assert [d[0] for d in measures.display()][-2:] == ["avg_len", "max_len"]
    acc = LengthsMeasure(pa.string())
    assert acc.decode(acc.encode(Lengths(3, 7, 4))) == Lengths(3, 7, 4)
