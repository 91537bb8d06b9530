"""Infinity counts (engine/measures/infinities.py) against numpy and DuckDB over the same rows:
through the column profile, the partial state, the subset merge and a real analyze."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.files import layout, partial_state
from engine.measures.infinities import Infinities, InfinityCounts
from engine.stats import columnwise
from engine.stats.profile import ColumnProfile


def _values(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n float64 values with NaN, +inf and -inf mixed in, and a null mask."""
    x = rng.normal(0, 100, n)
    kind = rng.random(n)
    x[kind < 0.05] = np.inf
    x[(kind >= 0.05) & (kind < 0.08)] = -np.inf
    x[(kind >= 0.08) & (kind < 0.1)] = np.nan
    return x, rng.random(n) < 0.1


def _parts(t: pa.DataType, seed: int) -> list[pa.Array]:
    """Partitions of values with nulls, NaN and ±inf (one all null, one empty, one without infinities)."""
    rng = np.random.default_rng(seed)
    parts = []
    for n in (1500, 3, 700, 0):
        x, nulls = _values(rng, n)
        parts.append(pa.array(x, pa.float64(), mask=nulls).cast(t))
    parts.append(pa.array(rng.normal(size=50), pa.float64()).cast(t))
    parts.append(pa.nulls(4, t))
    return parts


def _numpy_counts(values: pa.Array) -> dict[str, int]:
    x = values.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
    return {"posinf_count": int(np.isposinf(x).sum()), "neginf_count": int(np.isneginf(x).sum())}


@pytest.mark.parametrize("t", [pa.float16(), pa.float32(), pa.float64()], ids=str)
def test_table_counts_are_numpys(t: pa.DataType) -> None:
    parts = _parts(t, 5)
    profile = ColumnProfile("x", t)
    # one part through update (batches), the others through the whole-column path
    states = [profile.update(profile.zero(), parts[0])] + [profile.profile_column(p)[0] for p in parts[1:]]
    merged = profile.merge_all(states)
    expected = _numpy_counts(pa.concat_arrays(parts))
    assert expected["posinf_count"] > 0 and expected["neginf_count"] > 0
    row = profile.finalize_table(merged, None)
    assert {k: row[k] for k in expected} == expected
    # the driver's field-by-field merge gives the same counts
    cols = columnwise.StateColumns.of(profile, states)
    by_fields = columnwise.merge(profile, cols, [s.theta for s in states])
    assert by_fields.measures["infinities"] == merged.measures["infinities"]
    for p in parts:  # each partition's own row
        got = profile.profile_column(p)[1]
        assert {k: got[k] for k in expected} == _numpy_counts(p)


def test_no_counts_for_other_types() -> None:
    for t in (pa.int64(), pa.decimal128(12, 3), pa.string(), pa.timestamp("us")):
        assert not Infinities.applies_to(t)
        assert "posinf_count" not in ColumnProfile("c", t).finalize_table(ColumnProfile("c", t).zero(), None)


def test_state_in_the_files() -> None:
    assert layout.STATISTICS_SCHEMA.field("posinf_count").type == pa.int64()
    assert layout.STATISTICS_SCHEMA.field("neginf_count").type == pa.int64()
    names = partial_state.STATE_SCHEMA.names
    assert [n for n in names if n.startswith("infinities_")] == ["infinities_pos", "infinities_neg"]
    acc = Infinities(pa.float64())
    state = InfinityCounts(7, 3)
    assert acc.decode(acc.encode(state)) == state
    assert acc.merge(acc.zero(), state) == state == acc.merge(state, acc.zero())


def test_subset_of_partitions_merges_their_stored_rows() -> None:
    from engine.subset.merge import merge_measures

    t = pa.float64()
    parts = _parts(t, 11)
    profile = ColumnProfile("x", t)
    rows = [profile.profile_column(p)[1] for p in parts]
    picked = [0, 2, 4]
    got = merge_measures(t, [rows[i] for i in picked])
    expected = _numpy_counts(pa.concat_arrays([parts[i] for i in picked]))
    assert {k: got[k] for k in expected} == expected
    # a row written before the counts were stored cannot be rebuilt: no answer
    old = {k: v for k, v in rows[0].items() if k not in expected}
    assert "posinf_count" not in merge_measures(t, [old, rows[2]])


@pytest.mark.ray
def test_analyze_stores_duckdbs_counts(ray_runtime: None, tmp_path: Path) -> None:
    from engine.api import analyze
    from engine.lookup import open_statistics

    rng = np.random.default_rng(3)
    data = tmp_path / "inf"
    for part, n in enumerate((800, 5, 1200)):
        x, nulls = _values(rng, n)
        y, ynulls = _values(rng, n)
        (data / f"part={part}").mkdir(parents=True)
        table = pa.table(
            {"v": pa.array(x, pa.float64(), mask=nulls), "f": pa.array(y, pa.float64(), mask=ynulls).cast(pa.float32()), "i": pa.array(np.arange(n))}
        )
        pq.write_table(table, data / f"part={part}" / "data.parquet")
    store = str(tmp_path / "store")
    analyze(str(data), store=store, user_statistics=[])
    ts = open_statistics(store, "inf")
    con = duckdb.connect()
    try:
        src = f"read_parquet('{data}/*/*.parquet', hive_partitioning = true)"

        def duck(column: str, where: str = "true") -> dict[str, int]:
            pos, neg = con.execute(
                f"SELECT count(*) FILTER (WHERE {column} = 'inf'::DOUBLE), count(*) FILTER (WHERE {column} = '-inf'::DOUBLE) FROM {src} WHERE {where}"
            ).fetchone()
            return {"posinf_count": pos, "neginf_count": neg}

        got = {r["column"]: r for r in ts.statistics(["v", "f", "i"], statistics=["posinf_count", "neginf_count"]).to_pylist()}
        for c in ("v", "f"):
            assert {k: got[c][k] for k in ("posinf_count", "neginf_count")} == duck(c), c
        assert got["i"]["posinf_count"] is None and got["i"]["neginf_count"] is None
        partitions = ts.partitions()
        assert len(partitions) == 3
        for p in partitions:
            rows = {r["column"]: r for r in ts.statistics(["v", "f"], partition=p.key).to_pylist()}
            value = p.key.split("=")[1]
            for c in ("v", "f"):
                assert {k: rows[c][k] for k in ("posinf_count", "neginf_count")} == duck(c, f"part = {value}"), (p.key, c)
    finally:
        con.close()


def test_files_written_before_read_without_the_counts(tmp_path: Path) -> None:
    """A statistics row without the columns (a file written before them): the lookups leave them out."""
    from engine.subset.merge import merge_measures

    t = pa.float64()
    row = ColumnProfile("x", t).profile_column(_parts(t, 2)[0])[1]
    old = {k: v for k, v in row.items() if k not in ("posinf_count", "neginf_count")}
    assert Infinities(t).from_statistics(old) is None
    assert "neginf_count" not in merge_measures(t, [old])
