"""Table-level statistics of string columns are exact, against DuckDB.

A multi-partition table with three string columns, one of each frequencies kind
(docs/FORMAT.md): ``word``, mostly distinct (``duplicates_only``: the values seen more than
once), its partitions' counts hash-ordered (the table reduction's hash merge,
engine/stats/valuecounts.py ``hashed_frequencies``); ``tag``, 40 values (``complete``);
``uniq``, every value once (``all_distinct``). Values hold the empty string, non-ASCII text
and long shared prefixes, and nulls. The oracle is DuckDB over the same rows: its exact
distinct count, min and max, and every value's count (strings compare by their bytes in
both, UTF-8 code point order); the stored frequencies are ordered by decreasing count, ties
by increasing value. Checked after a full analyze and again after an append (the table's
counts file, written by the full analyze, plus the new partition's).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import values as value_forms
from engine.api import analyze, open_statistics

KINDS = {"word": "duplicates_only", "tag": "complete", "uniq": "all_distinct"}
_PREFIXES = ["", "é", "\U0001f600", "https://example.org/a/long/shared/prefix/", "Zz"]


def _partition(rng: np.random.Generator, n: int, first: int) -> pa.Table:
    words = [f"{_PREFIXES[v % len(_PREFIXES)]}{v}" if v % 97 else "" for v in rng.integers(0, 12_000, n)]
    nulls = rng.random(n) < 0.05
    return pa.table(
        {
            "word": pa.array(words, pa.string(), mask=nulls),
            "tag": pa.array([f"t{v}é" for v in rng.integers(0, 40, n)], pa.string()),
            "uniq": pa.array([f"u{first + i:07d}" for i in range(n)], pa.string()),
        }
    )


def _oracle(con: duckdb.DuckDBPyConnection, rows: pa.Table, name: str) -> tuple[int, str, str, list[tuple[str, int]]]:
    con.register("rel", pa.table({"x": rows[name]}))
    [(distinct, lo, hi)] = con.execute("SELECT count(DISTINCT x), min(x), max(x) FROM rel").fetchall()
    counts = con.execute("SELECT x, count(*) AS c FROM rel WHERE x IS NOT NULL GROUP BY x ORDER BY c DESC, x").fetchall()
    return distinct, lo, hi, [(v, int(c)) for v, c in counts]


def _check(store: str, table: str, rows: pa.Table) -> None:
    ts = open_statistics(store, table)
    got = {r["column"]: r for r in ts.statistics().to_pylist()}
    con = duckdb.connect()
    try:
        for name, kind in KINDS.items():
            distinct, lo, hi, counts = _oracle(con, rows, name)
            row = got[name]
            assert (row["distinct_count"], row["distinct_count_exact"]) == (distinct, True), name
            assert value_forms.decode_scalar(row["min"], pa.string()).as_py() == lo, name
            assert value_forms.decode_scalar(row["max"], pa.string()).as_py() == hi, name
            top = ts.top_frequencies(name, k=len(counts) + 1, typed=True)
            assert top.schema.metadata[b"kind"].decode() == kind, name
            want = [(v, c) for v, c in counts if c > 1] if kind == "duplicates_only" else [] if kind == "all_distinct" else counts
            assert list(zip(top["value"].to_pylist(), top["frequency"].to_pylist(), strict=True)) == want, name
    finally:
        con.close()


def test_string_table_level_exact_against_duckdb(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    root = tmp_path / "t"
    tables, first = [], 0
    for i in range(4):
        t = _partition(rng, int(rng.integers(2_500, 3_500)), first)
        first += t.num_rows
        (root / f"part={i:02d}").mkdir(parents=True)
        pq.write_table(t, root / f"part={i:02d}" / "data.parquet")
        tables.append(t)
    store = str(tmp_path / "store")
    result = analyze(str(root), store=store, name="t", runtime="local")
    _check(store, result.table, pa.concat_tables(tables))
    # an append: the table's counts (the full analyze's file) plus the new partition's
    added = _partition(rng, 1_500, first)
    (root / "part=04").mkdir()
    pq.write_table(added, root / "part=04" / "data.parquet")
    again = analyze(str(root), store=store, name="t", runtime="local")
    assert again.inherited == 4
    _check(store, again.table, pa.concat_tables([*tables, added]))
