"""Splitting a table into partitions does not change its table-level statistics (hypothesis, on Ray).

A small generated table is written once as one partition and once spread over
k random Hive partitions (some possibly empty, some with two files); both are
analyzed and their table-level statistics, frequencies and histograms compared.
"""

from __future__ import annotations

import math
import os
import tempfile

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api import analyze, open_statistics

pytestmark = pytest.mark.ray

COLUMNS = ["i", "f", "s"]
EXACT = [
    "row_count",
    "null_count",
    "nan_count",
    "min",
    "max",
    "distinct_count",
    "distinct_count_exact",
    "avg_len",
    "max_len",
    "frequencies",
    "histogram_bins",
    "zero_count",
    "p01",
    "p05",
    "p25",
    "p50",
    "p75",
    "p95",
    "p99",
    "percentiles_exact",
]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

ints = st.one_of(st.integers(-50, 50), st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX]))
floats = st.one_of(
    st.floats(-1e3, 1e3).map(lambda x: round(x, 2)),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5]),
)
strings = st.one_of(st.sampled_from(["a", "b", "é", "日本", "", "zz"]), st.text(max_size=5))


@st.composite
def tables(draw):
    n = draw(st.integers(0, 300))

    # weights make some columns mostly null, some never
    def column(values):
        null_share = draw(st.sampled_from([0.0, 0.1, 0.9]))
        cells = draw(st.lists(st.tuples(st.floats(0, 1), values), min_size=n, max_size=n))
        return [None if u < null_share else v for u, v in cells]

    table = pa.table(
        {
            "i": pa.array(column(ints), pa.int64()),
            "f": pa.array(column(floats), pa.float64()),
            "s": pa.array(column(strings), pa.string()),
        }
    )
    k = draw(st.integers(2, 5))
    assign = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    two_files = draw(st.lists(st.booleans(), min_size=k, max_size=k))
    empty_folder = draw(st.lists(st.booleans(), min_size=k, max_size=k))
    return table, k, assign, two_files, empty_folder


def write_one_partition(root: str, table: pa.Table) -> None:
    os.makedirs(f"{root}/p=0")
    pq.write_table(table, f"{root}/p=0/data-0.parquet")


def write_split(root: str, table: pa.Table, k: int, assign: list[int], two_files: list[bool], empty_folder: list[bool]) -> None:
    part = pa.array(assign, pa.int64())
    for p in range(k):
        os.makedirs(f"{root}/p={p}")
        rows = table.filter(pc.equal(part, p)) if len(table) else table
        no_file_at_all = table.num_rows == 0 and all(empty_folder)  # a table without files is not found
        if rows.num_rows == 0 and empty_folder[p] and not (p == 0 and no_file_at_all):
            continue  # a partition folder with no files
        if two_files[p] and rows.num_rows >= 2:
            half = rows.num_rows // 2
            pq.write_table(rows.slice(0, half), f"{root}/p={p}/data-0.parquet")
            pq.write_table(rows.slice(half), f"{root}/p={p}/data-1.parquet")
        else:
            pq.write_table(rows, f"{root}/p={p}/data-0.parquet")


def table_level(store: str, table: str) -> tuple[dict, dict, dict]:
    ts = open_statistics(store, table)
    stats = {r["column"]: r for r in ts.statistics().to_pylist()}
    freq = {c: ts.top_frequencies(c, 10**9).to_pylist() for c in ("i", "s")}
    hist = {c: (ts.histogram_spec(c), ts.histogram(c).to_pylist()) for c in ("i", "f")}
    return stats, freq, hist


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == pytest.approx(b, rel=1e-9, abs=1e-9)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=tables())
def test_table_statistics_do_not_depend_on_the_split(ray_runtime, spec):
    table, k, assign, two_files, empty_folder = spec
    with tempfile.TemporaryDirectory() as tmp:
        one, split, store = f"{tmp}/one/t", f"{tmp}/split/t", f"{tmp}/store"
        write_one_partition(one, table)
        write_split(split, table, k, assign, two_files, empty_folder)
        r1 = analyze(one, store=f"{store}1", columns=COLUMNS, user_statistics=[])
        r2 = analyze(split, store=f"{store}2", columns=COLUMNS, user_statistics=[])
        assert (r1.partitions, r2.partitions) == (1, k)
        assert r1.rows == r2.rows == table.num_rows
        s1, f1, h1 = table_level(f"{store}1", "t")
        s2, f2, h2 = table_level(f"{store}2", "t")

    assert list(s1) == list(s2) == COLUMNS
    for c in COLUMNS:
        a, b = s1[c], s2[c]
        for key in EXACT:
            if c == "f" and key.startswith("p") and key[1:].isdigit():
                continue  # float percentiles at table level come from KLL sketches
            if c == "f" and key in ("min", "max"):
                # 0.0 == -0.0: which zero is the extreme depends on the order of the partitions
                assert close(*(None if r[key] is None else float(r[key]) for r in (a, b))), (c, key, a[key], b[key])
                continue
            assert a.get(key) == b.get(key), (c, key, a.get(key), b.get(key))
        if c == "i":
            assert a["sum"] == b["sum"]  # exact integer text
        elif c == "f":
            assert close(None if a["sum"] is None else float(a["sum"]), None if b["sum"] is None else float(b["sum"])), c
        for key in ("mean", "stddev"):
            assert close(a[key], b[key]), (c, key, a[key], b[key])
    # exact reference for the integers
    valid = [v for v in table["i"].to_pylist() if v is not None]
    assert s2["i"]["distinct_count"] == len(set(valid))
    assert (s2["i"]["sum"] is None and not valid) or int(s2["i"]["sum"]) == sum(valid)
    assert f1 == f2
    assert h1 == h2
    for c, (spec_, bins) in h2.items():
        if spec_ is not None:
            non_nan = s2[c]["row_count"] - s2[c]["null_count"] - (s2[c]["nan_count"] or 0)
            assert sum(b["count"] for b in bins) == non_nan
