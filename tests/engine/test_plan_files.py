"""plan_files: partitions pruned first from their statistics, then files from the file index;
never a file holding a matching row pruned (DuckDB and Arrow on each file), exact candidate
sets on sorted data, the refuting conjunct named; the CLI."""

from __future__ import annotations

import json
import math
import random
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from predicate_oracle import arrow_matches, duckdb_matches
from predicate_strategies import leaves, trees

from engine import expressions as ex
from engine.fileindex import store
from engine.fileindex.build import build_file_index
from engine.sources.parquet import ParquetDirectorySource

pytestmark = pytest.mark.ray

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("big", pa.int64()),
        ("u", pa.uint64()),
        ("price", pa.float64()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", "UTC")),
        ("name", pa.string()),
    ]
)
EXTREMES = [-(2**63), 2**63 - 1, 0, -1]


def _file(rng: random.Random, start: int, n: int) -> pa.Table:
    def maybe(v, p=0.1):
        return None if rng.random() < p else v

    return pa.table(
        {
            "id": list(range(start, start + n)),  # sorted: files hold disjoint ranges
            "big": [maybe(rng.choice(EXTREMES + [rng.randrange(-(2**63), 2**63)])) for _ in range(n)],
            "u": [maybe(rng.choice([0, 2**64 - 1, rng.randrange(2**64)])) for _ in range(n)],
            "price": [maybe(rng.choice([math.nan, -0.0, 0.0, rng.uniform(-100, 100)])) for _ in range(n)],
            "amount": [maybe(Decimal(rng.randrange(-(10**6), 10**6)) / 100) for _ in range(n)],
            "at": pa.array([maybe(rng.randrange(-(2**50), 2**50)) for _ in range(n)], pa.int64()).view(pa.timestamp("us", "UTC")),
            "name": [maybe(rng.choice(["ab", "abc", "abd", "b", "é", ""]) + rng.choice(["", "x", "y"])) for _ in range(n)],
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def indexed(ray_runtime: None, tmp_path_factory) -> dict:
    from engine.api import analyze
    from engine.lookup import open_statistics

    root = tmp_path_factory.mktemp("plan")
    table = root / "t"
    rng = random.Random(11)
    start = 0
    data: dict[str, pa.Table] = {}
    for p in range(4):
        d = table / f"p={p}"
        d.mkdir(parents=True)
        for f in range(4):
            n = 0 if (p, f) == (1, 3) else rng.randrange(1, 40)  # one empty file
            t = _file(rng, start, n)
            path = d / f"f{f}.parquet"
            pq.write_table(t, path, row_group_size=rng.choice([5, 1000]))
            data[str(path)] = t
            start += n + 1000 * p  # partitions far apart
    analyze(str(table), store=str(root / "store"), user_statistics=[])
    source = ParquetDirectorySource(str(table))
    parts = [build_file_index(source, p, bloom_columns=["name"], exact_columns=["price"]) for p in source.partitions()]
    index = root / "index"
    store.write_file_index(store.assemble(parts, source.schema()), str(index))  # numbers where the type allows
    ts = open_statistics(str(root / "store"), "t")
    return {"ts": ts, "index": str(index), "data": data}


def _holding(data: dict[str, pa.Table], expr: ex.Expression) -> set[str]:
    con = duckdb.connect()
    try:
        out = set()
        for path, t in data.items():
            t = t.append_column("p", pa.array([int(Path(path).parent.name.split("=")[1])] * len(t), pa.int32()))
            if arrow_matches(t, expr) or duckdb_matches(con, t, expr):
                out.add(path)
        return out
    finally:
        con.close()


def _values(name: str):
    return {
        "id": st.integers(-10, 5000),
        "big": st.sampled_from(EXTREMES) | st.integers(-(2**63), 2**63 - 1),
        "u": st.sampled_from([0, 2**64 - 1]) | st.integers(0, 2**64 - 1),
        "price": st.sampled_from([math.nan, -0.0, 0.0, 50.0, -100.0]) | st.floats(-150, 150),
        "amount": st.decimals(min_value=-20000, max_value=20000, places=2, allow_nan=False),
        "at": st.integers(-(2**50), 2**50).map(lambda v: pa.array([v], pa.int64()).view(pa.timestamp("us", "UTC"))[0]),
        "name": st.sampled_from(["ab", "abc", "abdx", "b", "é", "", "a", "zz"]),
    }[name]


TREES = trees(leaves({name: (SCHEMA.field(name).type, _values(name)) for name in SCHEMA.names}, typed=False), max_leaves=4)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=60, **_SETTINGS)
@given(tree=TREES)
def test_every_file_holding_a_matching_row_is_a_candidate(indexed: dict, tree: ex.Expression) -> None:
    _check_candidates(indexed, tree)


@pytest.mark.slow
@settings(max_examples=600, **_SETTINGS)
@given(tree=TREES)
def test_every_file_holding_a_matching_row_is_a_candidate_many(indexed: dict, tree: ex.Expression) -> None:
    _check_candidates(indexed, tree)


def _check_candidates(indexed: dict, tree: ex.Expression) -> None:
    ts = indexed["ts"]
    expr = ts.bind(tree)
    plan = ts.plan_files(expr, index=indexed["index"])
    kept = set(plan.paths())
    assert _holding(indexed["data"], expr) <= kept, str(expr)
    assert kept | set(plan.pruned.column("path").to_pylist()) == set(indexed["data"])
    assert plan.candidates.num_rows + plan.pruned.num_rows == plan.files == len(indexed["data"])
    assert all(plan.pruned.column("reason").to_pylist())


def test_sorted_ids_prune_exactly_what_the_ranges_allow(indexed: dict) -> None:
    ts, data = indexed["ts"], indexed["data"]
    ids = {path: (min(t.column("id").to_pylist()), max(t.column("id").to_pylist())) for path, t in data.items() if len(t)}
    lo, hi = sorted(ids.values())[5]
    plan = ts.plan_files(f"id between {lo} and {hi}", index=indexed["index"])
    want = {path for path, (a, b) in ids.items() if a <= hi and b >= lo}
    assert set(plan.paths()) == want and len(want) == 1
    reasons = dict(zip(plan.pruned.column("path").to_pylist(), plan.pruned.column("reason").to_pylist()))
    assert {r for p, r in reasons.items() if p in ids} <= {f"id >= {lo}", f"id <= {hi}", f"partition: id >= {lo}", f"partition: id <= {hi}"}
    assert any(r.startswith("partition: ") for r in reasons.values())  # partitions went first
    empty = [p for p, t in data.items() if len(t) == 0]
    assert empty and all(reasons[p] in ("the file has no rows",) or reasons[p].startswith("partition: ") for p in empty)


def test_bloom_filters_prune_equality_inside_the_range(indexed: dict) -> None:
    ts, data = indexed["ts"], indexed["data"]
    plan = ts.plan_files("name = 'zz'", index=indexed["index"])  # within no file's range or filter
    assert plan.candidates.num_rows == 0
    # 'abx' is inside most files' [min, max] ('' .. 'é'): only Bloom filters can rule files out
    holding = {p for p, t in data.items() if "abx" in t.column("name").to_pylist()}
    plan = ts.plan_files("name = 'abx'", index=indexed["index"])
    assert holding <= set(plan.paths())
    in_range = ts.plan_files("name >= 'abx' and name <= 'abx'", index=indexed["index"])
    assert plan.candidates.num_rows < in_range.candidates.num_rows


def test_metastore_files_command(indexed: dict) -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    ts = indexed["ts"]
    store_dir = ts.store.root
    where = "id < 30 and price is not nan"
    r = CliRunner().invoke(metastore, ["files", "t", "--where", where, "--index", indexed["index"], "--store", store_dir, "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    want = ts.plan_files(where, index=indexed["index"])
    assert [f["path"] for f in doc["files"]] == want.paths()
    assert all({"path", "partition", "rows"} <= set(f) for f in doc["files"])
    r = CliRunner().invoke(metastore, ["files", "t", "--where", where, "--index", indexed["index"], "--store", store_dir])
    assert r.exit_code == 0 and "candidate" in r.stdout
    bad = CliRunner().invoke(metastore, ["files", "t", "--where", "id <", "--index", indexed["index"], "--store", store_dir])
    assert bad.exit_code == 1 and len(bad.stderr.strip().splitlines()) == 1 and "at character 5" in bad.stderr
