"""Computed subsets (engine/runtime/subset.py): the statistics of the rows matching a
predicate, computed by the analyze job over the candidate files, equal DuckDB's on the
filtered rows; the cache answers a second request without reading data, a new table
snapshot misses it, and the table's expiry and gc let go of it; the job opens only
candidate files; bad input fails in one line."""

from __future__ import annotations

import math
import os
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from predicate_oracle import sql
from predicate_strategies import leaves, trees

from engine import expressions as ex
from engine import types as mt
from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.catalog import Catalog
from engine.catalog.retention import RetentionPolicy, apply_policy
from engine.exceptions import ExpressionError, InvalidArgumentError, SourceChangedError
from engine.files import layout
from engine.runtime.subset import compute_subset

STRUCT = pa.struct([("a", pa.int32()), ("b", pa.string())])
DATA_SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("t", pa.timestamp("us", "UTC")),
        ("d", pa.decimal128(10, 2)),
        ("st", STRUCT),
    ]
)
WORDS = ["Berlin", "Bern", "Paris", "Porto", "", "Rome"]
PARTS = ["a", "b", "c"]


def _file(rng: np.random.Generator, n: int, sort_k: bool) -> pa.Table:
    k = rng.integers(-40, 40, n)
    if sort_k:
        k = np.sort(k)  # row groups with narrow k ranges: pruned by the Parquet statistics
    x = np.round(rng.normal(0, 5, n), 1)
    x[rng.random(n) < 0.05] = np.nan
    x[rng.random(n) < 0.03] = -0.0
    x[rng.random(n) < 0.01] = np.inf
    s = np.array(WORDS, dtype=object)[rng.integers(0, len(WORDS), n)]
    t = 1_700_000_000_000_000 + rng.integers(0, 10**9, n) * 1000
    cents = rng.integers(-(10**6), 10**6, n)
    a = rng.integers(0, 6, n).astype(np.int32)
    return pa.table(
        {
            "k": pa.array(k, pa.int64(), mask=rng.random(n) < 0.05),
            "x": pa.array(x, pa.float64(), mask=rng.random(n) < 0.05),
            "s": pa.array(s, pa.string(), mask=rng.random(n) < 0.05),
            "t": pa.array(t, pa.int64()).view(pa.timestamp("us", "UTC")),
            "d": pa.array([Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(10, 2)),
            "st": pa.StructArray.from_arrays(
                [pa.array(a, pa.int32(), mask=rng.random(n) < 0.1), pa.array(s, pa.string())],
                fields=list(STRUCT),
                mask=pa.array(rng.random(n) < 0.05),
            ),
        },
        schema=DATA_SCHEMA,
    )


def write_table(root: Path, seed: int = 0, files_per_partition: int = 3, rows: int = 300) -> pa.Table:
    """Three partitions (p=a, b, c) of several files (row groups of 50 rows); returns every row
    flattened as DuckDB's oracle reads it (struct leaves as columns named ``st.a``, ``st.b``)."""
    rng = np.random.default_rng(seed)
    flat = []
    for p in PARTS:
        d = root / f"p={p}"
        d.mkdir(parents=True, exist_ok=True)
        for f in range(files_per_partition):
            t = _file(rng, rows, sort_k=f == 0)
            pq.write_table(t, d / f"part-{f}.parquet", row_group_size=50)
            flat.append(flatten(t).append_column("p", pa.array([p] * len(t), pa.string())))
    return pa.concat_tables(flat)


def flatten(t: pa.Table) -> pa.Table:
    st_ = t.column("st").combine_chunks()
    out = t.drop_columns(["st"])
    for name in ("a", "b"):
        out = out.append_column(f"st.{name}", pc.struct_field(st_, name))  # null where the struct is
    return out


@pytest.fixture(scope="module")
def table(ray_runtime, tmp_path_factory):
    """(data directory, store, the rows as DuckDB reads them, the statistics)."""
    base = tmp_path_factory.mktemp("subset")
    data, store = base / "events", base / "store"
    rows = write_table(data)
    analyze(str(data), store=str(store), user_statistics=[])
    return data, str(store), rows, open_statistics(str(store), "events")


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    yield con
    con.close()


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def oracle(con, rows: pa.Table, expr: ex.Expression) -> pa.Table:
    """The flattened rows matching ``expr``; a bound struct leaf is its path (st, a), so the
    query sees ``st`` as the struct again."""
    cur = con.cursor()
    try:
        cur.register("flat", rows)
        if "st.a" not in rows.column_names:
            return cur.sql(f"SELECT * FROM flat WHERE {sql(expr)}").to_arrow_table()
        struct = 'struct_pack(a := "st.a", b := "st.b") AS st'
        return cur.sql(f"SELECT * EXCLUDE (st) FROM (SELECT *, {struct} FROM flat) AS events WHERE {sql(expr)}").to_arrow_table()
    finally:
        cur.close()


def _decode(text, t):
    return None if text is None else value_forms.decode_scalar(text, t).as_py()


def check_subset(con, sub, matching: pa.Table) -> None:
    """Every column's table-level statistics, frequencies and histogram against DuckDB on ``matching``."""
    cur = con.cursor()
    cur.register("m", matching)
    try:
        rows = {r["column"]: r for r in sub.statistics().to_pylist()}
        for name, r in rows.items():
            t = sub.column_type(name)
            c = q(name)
            floating = pa.types.is_floating(t)
            valid = f"{c} IS NOT NULL" + (f" AND NOT isnan({c})" if floating else "")
            n, nulls, nans, lo, hi, distinct = cur.execute(
                f"SELECT count(*), count(*) - count({c}), {f'count(*) FILTER (WHERE isnan({c}))' if floating else 'NULL'}, "
                f"min({c}) FILTER (WHERE {valid}), max({c}) FILTER (WHERE {valid}), count(DISTINCT {c}) FILTER (WHERE {valid}) FROM m"
            ).fetchone()
            ctx = (name, str(sub.subset.predicate))
            assert (r["row_count"], r["null_count"], r["nan_count"]) == (n, nulls, nans), ctx
            assert (_decode(r["min"], t), _decode(r["max"], t)) == (lo, hi), ctx
            if r["distinct_count_exact"]:
                assert r["distinct_count"] == distinct, ctx
            else:
                assert r["distinct_count"] == pytest.approx(distinct, rel=0.05), ctx
            if mt.is_numeric(t):
                total, mean = cur.execute(f"SELECT sum({c}) FILTER (WHERE {valid}), avg({c}::DOUBLE) FILTER (WHERE {valid}) FROM m").fetchone()
                if total is None:
                    assert r["sum"] in (None, "0") and r["mean"] is None, ctx
                elif pa.types.is_integer(t):
                    assert int(r["sum"]) == int(total) and r["mean"] == pytest.approx(mean, rel=1e-12), ctx
                elif pa.types.is_decimal(t):
                    assert Decimal(r["sum"]) == total and r["mean"] == pytest.approx(mean, rel=1e-12), ctx
                elif math.isinf(total) or math.isnan(total):
                    assert float(r["sum"]) == total or (math.isnan(total) and math.isnan(float(r["sum"]))), ctx
                else:
                    assert float(r["sum"]) == pytest.approx(total, rel=1e-9, abs=1e-9), ctx
            if mt.is_discrete(t):
                freq = sub.top_frequencies(name, k=10**6, typed=True)
                got = dict(zip(freq["value"].to_pylist(), freq["frequency"].to_pylist()))
                want = dict(cur.execute(f"SELECT {c}, count(*) FROM m WHERE {c} IS NOT NULL GROUP BY {c}").fetchall())
                kind = freq.schema.metadata[b"kind"].decode()
                if kind == layout.FREQ_COMPLETE:
                    assert got == want, ctx
                elif kind == layout.FREQ_DUPLICATES_ONLY:
                    assert got == {v: k for v, k in want.items() if k > 1}, ctx
                else:
                    assert got == {} and all(k == 1 for k in want.values()), ctx
                top = sub.top_frequencies(name, k=3).column("frequency").to_pylist()
                assert top == sorted(want.values(), reverse=True)[: len(top)], ctx
            spec = sub.histogram_spec(name) if mt.histogram_domain(t) else None
            if spec is not None:
                bins = sub.histogram(name)
                counts = bins["count"].to_pylist()
                assert sum(counts) == cur.execute(f"SELECT count(*) FROM m WHERE {valid}").fetchall()[0][0], ctx
                if spec.domain == "integer":  # each bin's rows counted by DuckDB, all bins in one query
                    edges = pa.table({"i": pa.array(range(len(counts)), pa.int64()), "lo": bins["lower"], "up": bins["upper"]})
                    cur.register("edges", edges)
                    want_counts = cur.execute(
                        f"SELECT count(m.{c}) FROM edges LEFT JOIN m ON m.{c} BETWEEN edges.lo AND edges.up GROUP BY edges.i ORDER BY edges.i"
                    ).fetchall()
                    cur.unregister("edges")
                    assert counts == [n for (n,) in want_counts], ctx
    finally:
        cur.close()


# ------------------------------------------------------------------ exactness (hypothesis)
VALUES = {
    "k": (pa.int64(), st.integers(-45, 45)),
    "x": (pa.float64(), st.one_of(st.sampled_from([math.nan, -0.0, 0.0, math.inf]), st.integers(-100, 100).map(lambda v: v / 10))),
    "s": (pa.string(), st.sampled_from(WORDS + ["Ber", "P", "Zurich"])),
    "d": (pa.decimal128(10, 2), st.integers(-(10**6), 10**6).map(lambda c: Decimal(c).scaleb(-2))),
    "st.a": (pa.int32(), st.integers(-1, 6)),
    "p": (pa.string(), st.sampled_from(PARTS + ["z"])),
}


TREES = trees(leaves(VALUES), max_leaves=3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=TREES)
def test_computed_statistics_equal_duckdb_on_the_matching_rows(table, duck, tree: ex.Expression) -> None:
    _, _, rows, ts = table
    expr = ts.bind(tree)
    sub = compute_subset(ts, expr, cache=False)
    assert sub.subset.cached is False
    check_subset(duck, sub, oracle(duck, rows, expr))


@pytest.mark.parametrize(
    "where",
    [
        "p = 'b' and k between -5 and 5",
        "x > 3 or s starts with 'Ber'",  # NaN is above every value: NaN rows match x > 3
        "st.a in (1, 2) and not st.b = 'Paris'",
        "k > 1000",  # nothing matches: every partition pruned
        "x = nan or x = -0.0",
    ],
)
def test_examples_equal_duckdb(table, duck, where: str) -> None:
    _, _, rows, ts = table
    sub = compute_subset(ts, where, cache=False)
    check_subset(duck, sub, oracle(duck, rows, ts.bind(where)))


def test_the_subsets_partitions_are_the_tables_with_candidate_files(table, duck) -> None:
    _, _, rows, ts = table
    sub = compute_subset(ts, "p in ('a', 'c') and k < 0", cache=False)
    assert [p.key for p in sub.partitions()] == ["p=a", "p=c"]
    for p in sub.partitions():
        want = oracle(duck, rows, ts.bind(f"p = '{p.key[2:]}' and k < 0")).num_rows
        assert p.rows == want == sub.statistics(["k"], partition=p.key).column("row_count")[0].as_py()


# ------------------------------------------------------------------ the cache
def test_a_second_request_reads_no_data_and_fewer_columns_are_served(table, tmp_path) -> None:
    data, store, _, ts = table
    first = compute_subset(ts, "s = 'Bern' and k > 0", ["k", "s", "x"])
    assert first.subset.cached is False
    hidden = tmp_path / "hidden"
    shutil.move(str(data), hidden)  # no data file can be read now
    try:
        again = compute_subset(ts, "k > 0 and s = 'Bern'", ["x", "k"])  # same predicate, reordered; fewer columns
        assert again.subset.cached is True
        assert repr(again.statistics(["k", "x"]).to_pylist()) == repr(first.statistics(["k", "x"]).to_pylist())  # NaN stddev: by repr
        assert compute_subset(ts, "not (k <= 0) and s in ('Bern')", ["s"]).subset.cached is True
        # more columns than the entry holds: computed, and the data is gone
        with pytest.raises(SourceChangedError, match=r"cannot be read as analyzed"):
            compute_subset(ts, "k > 0 and s = 'Bern'", ["k", "d"])
    finally:
        shutil.move(str(hidden), data)


def test_a_new_snapshot_misses_the_cache_and_expiry_and_gc_let_go_of_it(ray_runtime, tmp_path, duck) -> None:
    data, store = tmp_path / "events", str(tmp_path / "store")
    rows = write_table(data, seed=3, files_per_partition=1, rows=200)
    analyze(str(data), store=store, user_statistics=[])
    old = open_statistics(store, "events")
    where = "k >= 0 and p != 'c'"
    first = compute_subset(old, where, ["k", "p"])
    only_old = compute_subset(old, "s = 'Rome'", ["s"])  # computed at the first snapshot only
    old_files = [Path(u) for u in first.state.table_files.values()]
    only_old_dir = Path(only_old.subset.location)
    assert all(f.exists() for f in old_files) and only_old_dir.exists()
    # a new file in partition b: a new snapshot, analyzed
    extra = _file(np.random.default_rng(9), 100, sort_k=False)
    pq.write_table(extra, data / "p=b" / "part-9.parquet")
    rows = pa.concat_tables([rows, flatten(extra).append_column("p", pa.array(["b"] * 100, pa.string()))])
    analyze(str(data), store=store, user_statistics=[])
    new = open_statistics(store, "events")
    assert new.snapshot != old.snapshot
    second = compute_subset(new, where, ["k", "p"])
    assert second.subset.cached is False and second.subset.snapshot == new.snapshot
    check_subset(duck, second, oracle(duck, rows, new.bind(where)))
    assert second.statistics(["k"])["row_count"][0].as_py() > first.statistics(["k"])["row_count"][0].as_py()
    # the unchanged partition's subset statistics were inherited from the first computation (its
    # frequencies file is the first job's; its histograms may be re-binned on the new edges)
    assert f"/runs/{first.job_id}/" in second.file_uri(layout.FREQUENCIES_FILE, "p=a")
    assert f"/runs/{second.job_id}/" in second.file_uri(layout.FREQUENCIES_FILE, "p=b")
    # the old state still answers from its entry (time travel)
    pinned = open_statistics(store, "events", at_snapshot=old.snapshot)
    assert compute_subset(pinned, where, ["k"]).subset.cached is True
    # expire the old state, gc: the entries of the old snapshot go, the new one stays and answers
    result = apply_policy(Catalog.open(store, "events"), RetentionPolicy(retain_last=1, gc_grace_s=0))
    assert any("subsets/" in f for f in result.gc.deleted)
    assert not any(f.exists() for f in old_files)
    assert not only_old_dir.exists()
    shutil.rmtree(data)  # the data is gone: only the cache can answer
    kept = compute_subset(new, where, ["k"])
    assert kept.subset.cached is True
    assert kept.statistics(["k"]).to_pylist() == second.statistics(["k"]).to_pylist()


# ------------------------------------------------------------------ only candidate files
def _spoil(path: Path) -> None:
    """Overwrite a data file with zeros, keeping its size and times (the listing sees no change:
    any read of it fails)."""
    st_ = path.stat()
    path.write_bytes(b"\0" * st_.st_size)
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))


def test_the_job_opens_only_candidate_files(ray_runtime, tmp_path, duck) -> None:
    data, store = tmp_path / "events", str(tmp_path / "store")
    rows = write_table(data, seed=5)
    analyze(str(data), store=store, user_statistics=[])  # with the file index (from footers)
    ts = open_statistics(store, "events")
    where = "p = 'b' and k <= -30"  # part-0 of each partition is sorted by k: its range is the widest
    plan = ts.plan_files(where)
    candidates = set(plan.paths())
    every = {str(f) for f in data.rglob("*.parquet")}
    assert candidates and candidates < every
    for path in every - candidates:
        _spoil(Path(path))
    sub = compute_subset(ts, where, cache=False)
    assert sub.subset.candidate_files == len(candidates)
    check_subset(duck, sub, oracle(duck, rows, ts.bind(where)))


# ------------------------------------------------------------------ bad input
def test_a_predicate_that_does_not_bind(table) -> None:
    ts = table[3]
    with pytest.raises(ExpressionError, match=r"unknown column 'kk'"):
        compute_subset(ts, "kk = 1")
    with pytest.raises(ExpressionError, match=r"1.5 is not a whole number and does not fit column 'k'"):
        compute_subset(ts, "k = 1.5")
    with pytest.raises(InvalidArgumentError, match=r"no statistics for column\(s\): 'nope'"):
        compute_subset(ts, "k = 1", ["nope"])


def test_a_source_that_moved_or_changed(ray_runtime, tmp_path) -> None:
    data, store = tmp_path / "events", str(tmp_path / "store")
    write_table(data, seed=7, files_per_partition=1, rows=100)
    analyze(str(data), store=store, user_statistics=[])
    ts = open_statistics(store, "events")
    moved = tmp_path / "elsewhere"
    shutil.move(str(data), moved)
    with pytest.raises(SourceChangedError, match=rf"table 'events': its data at {data} cannot be read as analyzed .*does not exist"):
        compute_subset(ts, "k = 1")
    shutil.move(str(moved), data)
    pq.write_table(_file(np.random.default_rng(1), 10, sort_k=False), data / "p=a" / "late.parquet")
    with pytest.raises(SourceChangedError, match=r"changed since it was analyzed \(snapshot \w+, now \w+\): analyze it again") as err:
        compute_subset(ts, "k = 1")
    assert "\n" not in str(err.value)


def test_gc_keeps_young_entries_and_a_dry_run_deletes_nothing(ray_runtime, tmp_path) -> None:
    data, store = tmp_path / "events", str(tmp_path / "store")
    write_table(data, seed=11, files_per_partition=1, rows=60)
    analyze(str(data), store=store, user_statistics=[])
    sub = compute_subset(open_statistics(store, "events"), "k > 0", ["k"])
    location = Path(sub.subset.location)
    pq.write_table(_file(np.random.default_rng(2), 10, sort_k=False), data / "p=c" / "late.parquet")
    analyze(str(data), store=store, user_statistics=[])
    cat = Catalog.open(store, "events")
    # the old state is kept (default policy): its entry is needed
    assert not any("subsets/" in f for f in cat.gc(0, dry_run=True).deleted)
    # expired, but younger than the grace period: kept (a subset may be being published for it)
    apply_policy(cat, RetentionPolicy(retain_last=1, gc_grace_s=3600))
    assert location.exists()
    listed = cat.gc(0, dry_run=True).deleted
    assert any(f.startswith("subsets/") and f.endswith("statistics.parquet") for f in listed) and location.exists()
    gone = cat.gc(0).deleted
    assert set(listed) <= set(gone) and not location.exists() and not location.parent.exists()
    # computed again once gc took it: a new log where this process held the old one's state
    new = open_statistics(store, "events")
    again = compute_subset(new, "k > 0", ["k"])
    assert again.subset.cached is False and location.exists()
    hit = compute_subset(new, "k > 0", ["k"])
    assert hit.subset.cached is True and hit.statistics(["k"]).to_pylist() == again.statistics(["k"]).to_pylist()


def test_a_delta_table_that_moved_on_answers_for_the_analyzed_version(ray_runtime, tmp_path, duck) -> None:
    """A table format is reopened at the analyzed snapshot (Delta version), not at its latest."""
    from deltalake import DeltaTable, write_deltalake

    uri, store = str(tmp_path / "delta"), str(tmp_path / "store")
    rng = np.random.default_rng(4)

    def batch(n: int) -> pa.Table:
        return pa.table(
            {
                "k": pa.array(rng.integers(0, 50, n), pa.int64()),
                "x": pa.array(rng.normal(0, 1, n)),
                "part": pa.array(rng.integers(0, 3, n), pa.int64()),
            }
        )

    write_deltalake(uri, batch(600), partition_by=["part"])
    write_deltalake(uri, batch(300), partition_by=["part"], mode="append")
    analyze(uri, store=store, user_statistics=[])  # version 1
    ts = open_statistics(store, "delta")
    write_deltalake(uri, batch(500), partition_by=["part"], mode="append")  # version 2: not analyzed
    sub = compute_subset(ts, "k < 10 and part != 2", cache=False)
    rows = DeltaTable(uri, version=1).to_pyarrow_table()
    check_subset(duck, sub, oracle(duck, rows, ts.bind("k < 10 and part != 2")))
    assert sub.subset.snapshot == ts.snapshot == "1"


def test_the_filtered_source_prunes_row_groups_and_keeps_the_matching_rows(tmp_path, duck) -> None:
    """In-process (no Ray): the row groups read of the k-sorted file are those its statistics admit."""
    from engine.columns import mark_leaf_schema
    from engine.fileindex.rowgroups import matching_row_groups
    from engine.sources import open_table
    from engine.sources.filtered import FilteredSource

    rows = write_table(tmp_path / "events", seed=2)
    source = open_table(str(tmp_path / "events"))
    schema = pa.schema([(f.name, f.type) for f in DATA_SCHEMA if f.name != "st"] + [("st.a", pa.int32()), ("st.b", pa.string()), ("p", pa.string())])
    expr = ex.bound("k <= -30 and st.a != 3", mark_leaf_schema(schema))  # as TableStatistics.schema: leaf names
    filtered = FilteredSource(source, expr, None, name="sub", row_groups=matching_row_groups)
    part = filtered.partitions()[0]
    sorted_file = next(f for f in part.files if f.path.endswith("part-0.parquet"))
    with open(sorted_file.path, "rb") as fh, pa.PythonFile(fh) as handle:
        md = pq.ParquetFile(sorted_file.path).metadata
        groups = filtered._pruner()(handle, md)
    assert groups is not None and 0 < len(groups) < md.num_row_groups
    got = pa.Table.from_batches(list(filtered.read_batches(part, ["k", "s", "st"])))
    assert got.schema.names == ["k", "s", "st"]
    want = oracle(duck, rows, expr).filter(pc.field("p") == "a")
    assert sorted(got.column("k").to_pylist()) == sorted(want.column("k").to_pylist())


def test_a_table_without_a_file_index_reads_every_file_of_its_candidate_partitions(ray_runtime, tmp_path, duck) -> None:
    data, store = tmp_path / "events", str(tmp_path / "store")
    rows = write_table(data, seed=13, files_per_partition=2, rows=80)
    analyze(str(data), store=store, user_statistics=[], file_index=False)
    ts = open_statistics(store, "events")
    where = "p = 'c' and k <= -30"
    sub = compute_subset(ts, where)
    assert sub.subset.candidate_partitions == 1 and sub.subset.candidate_files == 2  # partitions pruned, files not
    check_subset(duck, sub, oracle(duck, rows, ts.bind(where)))


def test_an_s3_store_holds_and_collects_its_subsets(s3_server: str, ray_runtime, tmp_path, duck) -> None:
    """The derived tables on an object store (moto on loopback): computed, served, collected."""
    from engine import fileio

    data, store = tmp_path / "events", "s3://bucket/subset-store"
    rows = write_table(data, seed=17, files_per_partition=1, rows=80)
    analyze(str(data), store=store, user_statistics=[])
    ts = open_statistics(store, "events")
    where = "k between -10 and 10 and p != 'a'"
    sub = compute_subset(ts, where, ["k", "x"])
    assert sub.subset.location.startswith("s3://bucket/subset-store/events/subsets/")
    check_subset(duck, sub, oracle(duck, rows, ts.bind(where)))
    assert compute_subset(ts, where, ["x"]).subset.cached is True
    pq.write_table(_file(np.random.default_rng(3), 10, sort_k=False), data / "p=a" / "late.parquet")
    analyze(str(data), store=store, user_statistics=[])
    result = apply_policy(Catalog.open(store, "events"), RetentionPolicy(retain_last=1, gc_grace_s=0))
    assert any(f.startswith("subsets/") for f in result.gc.deleted)
    assert not fileio.exists(sub.subset.location)
