"""The file index is built by analyze: plan_files needs no index argument, and the index
survives inheritance, time travel, gc and rebuild (same answers before and after)."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from predicate_oracle import duckdb_matches

pytestmark = pytest.mark.ray

SCHEMA = pa.schema([("id", pa.int64()), ("price", pa.float64()), ("name", pa.string())])


def _write(table, rng: random.Random) -> dict[str, pa.Table]:
    data, start = {}, 0
    for p in range(3):
        d = table / f"p={p}"
        d.mkdir(parents=True, exist_ok=True)
        for f in range(3):
            n = rng.randrange(50, 120)
            t = pa.table(
                {
                    "id": list(range(start, start + n)),  # sorted: each file a disjoint id range
                    "price": [rng.uniform(0, 100) for _ in range(n)],
                    "name": [f"n{start + i:06d}" for i in range(n)],  # high cardinality: a Bloom column
                },
                schema=SCHEMA,
            )
            path = d / f"f{f}.parquet"
            pq.write_table(t, path)
            data[str(path)] = t
            start += n
    return data


def _answers(ts, data: dict[str, pa.Table], wheres: list[str]) -> list[list[str]]:
    out = []
    for where in wheres:
        plan = ts.plan_files(where)
        candidates = sorted(plan.paths())
        expr = ts.bind(where)
        con = duckdb.connect()
        must = []
        for path, t in data.items():
            t = t.append_column("p", pa.array([int(Path(path).parent.name.split("=")[1])] * len(t), pa.int32()))
            if duckdb_matches(con, t, expr):
                must.append(path)
        con.close()
        assert set(must) <= set(candidates), f"{where}: a file holding a matching row was pruned"
        out.append(candidates)
    return out


def test_analyze_builds_the_index_and_it_survives_inheritance_time_travel_gc_and_rebuild(ray_runtime: None, tmp_path) -> None:
    from engine.api import AnalyzeOptions, analyze
    from engine.catalog import Catalog, rebuild
    from engine.lookup import open_statistics

    data = _write(tmp_path / "t", random.Random(5))
    store = str(tmp_path / "store")
    first = analyze(str(tmp_path / "t"), store=store, name="t", user_statistics=[], bloom_columns=None)  # None: auto
    ts = open_statistics(store, "t")
    assert "file_index" in ts.state.properties
    some = sorted(data)[4]
    lo = int(data[some]["id"][0].as_py())
    wheres = [f"id = {lo}", f"id between {lo} and {lo + 3}", f"name = 'n{lo:06d}'", "name = 'nope'", "price < 0", "p = 1 and id > 0"]
    before = _answers(ts, data, wheres)
    assert before[0] == [some] and before[1] == [some]  # ranges prune every other file
    assert before[2] == [some] and before[3] == [] and before[4] == []  # the Bloom filter and the range
    assert len(ts.plan_files("p = 1 and id > 0").paths()) == 3  # the partition's own statistics prune the others

    # re-analyze an unchanged table: every partition inherited, the index carried over
    second = analyze(str(tmp_path / "t"), store=store, name="t", user_statistics=[], bloom_columns=None)
    assert second.inherited == 3 and second.recomputed == 0
    ts = open_statistics(store, "t")
    assert _answers(ts, data, wheres) == before

    # time travel to the first state; gc (no grace) keeps every kept state's index
    cat = Catalog.open(store, "t")
    cat.gc(grace_period_s=0)
    assert _answers(open_statistics(store, "t", at_transaction=1), data, wheres) == before
    assert _answers(open_statistics(store, "t"), data, wheres) == before
    # a rebuilt catalog names the index again (from the manifests)
    rebuild(store, "t", replace=True)
    assert _answers(open_statistics(store, "t"), data, wheres) == before
    assert first.job_id != second.job_id

    # off: no index, and planning says so in one line
    analyze(str(tmp_path / "t"), store=store, name="off", user_statistics=[], options=AnalyzeOptions(file_index=False))
    with pytest.raises(Exception, match="has no file index"):
        open_statistics(store, "off").plan_files("id = 1")


def test_bloom_columns_are_checked_before_any_work(ray_runtime: None, tmp_path) -> None:
    from engine.api import AnalyzeOptions, analyze
    from engine.exceptions import InvalidArgumentError

    _write(tmp_path / "t", random.Random(6))
    with pytest.raises(InvalidArgumentError, match="no column.*'nope'"):
        analyze(str(tmp_path / "t"), store=str(tmp_path / "s"), options=AnalyzeOptions(bloom_columns=("nope",)))
    assert not (tmp_path / "s").exists()
