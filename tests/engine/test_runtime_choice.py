"""Where a job's tasks run (engine/runtime/placement.py): a small table in this process,
without Ray; a large one, a named cluster or a process already running Ray on Ray. The
answers are the same both ways (the analyze job's files: tests/engine/test_determinism.py;
exact quantiles here, against DuckDB)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.exceptions import InvalidArgumentError, UnsupportedOptionsError
from engine.options import AnalyzeOptions, Runtime
from engine.runtime import placement
from engine.sources.base import DataFile, Partition

REPO = Path(__file__).resolve().parents[2]


def parts(size: int, rows: int | None) -> list[Partition]:
    return [Partition("", (), (DataFile("f.parquet", size, 0, num_rows=rows),))]


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No runtime named in the environment, no cluster, no Ray in this process."""
    monkeypatch.delenv("METASTORE_RUNTIME", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(placement, "ray_running", lambda: False)


def test_auto_runs_a_small_table_in_process_and_a_large_one_on_ray(quiet: None) -> None:
    assert placement.choose("auto", parts(1_000, 10_000)) is Runtime.LOCAL
    assert placement.choose("auto", parts(1_000, None)) is Runtime.LOCAL
    assert placement.choose("auto", parts(placement.LOCAL_MAX_BYTES + 1, 10)) is Runtime.RAY
    assert placement.choose("auto", parts(1_000, placement.LOCAL_MAX_ROWS + 1)) is Runtime.RAY
    assert placement.choose("auto", parts(1_000, 10), needs_ray=True) is Runtime.RAY
    # an explicit choice wins over the size
    assert placement.choose("ray", parts(1_000, 10)) is Runtime.RAY
    assert placement.choose(Runtime.LOCAL, parts(placement.LOCAL_MAX_BYTES * 4, None)) is Runtime.LOCAL


def test_auto_takes_ray_when_it_runs_here_or_a_cluster_is_named(quiet: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert placement.choose("auto", parts(1_000, 10)) is Runtime.RAY
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setattr(placement, "ray_running", lambda: True)
    assert placement.choose("auto", parts(1_000, 10)) is Runtime.RAY
    assert placement.choose("local", parts(1_000, 10)) is Runtime.LOCAL


def test_the_environment_names_the_runtime_when_the_option_is_auto(quiet: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METASTORE_RUNTIME", "ray")
    assert placement.choose("auto", parts(1_000, 10)) is Runtime.RAY
    assert placement.choose("local", parts(1_000, 10)) is Runtime.LOCAL
    monkeypatch.setenv("METASTORE_RUNTIME", "elsewhere")
    with pytest.raises(InvalidArgumentError, match="METASTORE_RUNTIME"):
        placement.choose("auto", parts(1_000, 10))


def test_bad_runtime_options_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="runtime must be one of"):
        AnalyzeOptions(runtime="cloud")
    with pytest.raises(UnsupportedOptionsError, match="redis"):
        AnalyzeOptions(runtime="local", frequencies="redis")


def _table(root: Path) -> Path:
    """Three partitions: floats with NaN and nulls, strings, a column of few values."""
    rng = np.random.default_rng(11)
    for i in range(3):
        n = 3_000 + 500 * i
        price = rng.lognormal(3, 1, n)
        price[rng.random(n) < 0.02] = np.nan
        d = root / f"part={i}"
        d.mkdir(parents=True)
        pq.write_table(
            pa.table(
                {
                    "price": pa.array(price, mask=rng.random(n) < 0.05),
                    "city": pa.array(rng.choice(["Berlin", "Oslo", "Rome", "Paris", "Lima"], n)),
                    "few": pa.array(rng.integers(0, 7, n)),
                }
            ),
            d / "0.parquet",
        )
    return root


PS = [0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0]


@pytest.mark.ray
@pytest.mark.parametrize("column", ["price", "city", "few"])
def test_exact_quantiles_in_process_equal_those_on_ray_and_duckdb(ray_runtime: None, tmp_path: Path, column: str) -> None:
    from engine.quantiles import exact_quantiles

    table = _table(tmp_path / "t")
    local = exact_quantiles(str(table), column, PS, runtime="local")
    on_ray = exact_quantiles(str(table), column, PS, runtime="ray")
    assert local.timings["runtime"] == "local" and on_ray.timings["runtime"] == "ray"
    # values, ranks, counts (timings aside; NaN compared as text)
    assert _nan_as_text(local.values) == _nan_as_text(on_ray.values)
    assert (local.count, local.null_count, local.nan_count, local.ranks) == (on_ray.count, on_ray.null_count, on_ray.nan_count, on_ray.ranks)
    # DuckDB's quantile_disc skips nulls and orders NaN after every number, as the sort does
    expected = duckdb.connect().execute(f"SELECT quantile_disc({column}, {PS}) FROM read_parquet('{table}/*/*.parquet')").fetchall()[0][0]
    assert _nan_as_text(local.values) == _nan_as_text(expected)


def _nan_as_text(values: object) -> list[object]:
    return ["nan" if isinstance(v, float) and v != v else v for v in values]  # type: ignore[attr-defined]


def test_a_small_analyze_and_quantiles_never_import_ray(tmp_path: Path) -> None:
    """A fresh process analyzes a small table and answers its quantiles with Ray never
    imported (python -X importtime would list it)."""
    table = _table(tmp_path / "t")
    script = (
        "import sys, json\n"
        "from engine.api import analyze\n"
        "from engine.quantiles import exact_quantiles\n"
        f"r = analyze({str(table)!r}, {str(tmp_path / 'store')!r})\n"
        f"q = exact_quantiles({str(table)!r}, 'few', [0.5])\n"
        "print(json.dumps({'runtime': r.runtime, 'rows': r.rows, 'q': q.values[0], 'ray': 'ray' in sys.modules}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "METASTORE_RUNTIME")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    few = pa.concat_arrays([pq.read_table(p)["few"].combine_chunks() for p in sorted(table.rglob("*.parquet"))])
    assert got == {"runtime": "local", "rows": 10_500, "q": int(np.sort(few.to_numpy())[math.ceil(len(few) * 0.5) - 1]), "ray": False}


def test_a_task_failing_in_process_fails_the_job_as_on_ray_and_publishes_nothing(quiet: None, tmp_path: Path) -> None:
    """Corrupt data pages (valid footer): the error names the file, nothing is published,
    the run directory is removed, as the same failure in a Ray task does (tests/engine/test_bad_input.py)."""
    from engine.api import analyze
    from engine.exceptions import MetastoreError, StatisticsNotFoundError
    from engine.store import Store
    from tests.engine.test_bad_input import assert_nothing_published, corrupt_pages, good_table, write

    root = write(tmp_path / "t", {"p=0/bad.parquet": good_table(5_000), "p=1/data.parquet": good_table(5_000, seed=1)}, compression="snappy")
    corrupt_pages(tmp_path / "t" / "p=0" / "bad.parquet")
    store = tmp_path / "store"
    with pytest.raises(MetastoreError) as info:
        analyze(root, store=str(store), user_statistics=[], runtime="local")
    assert "bad.parquet" in str(info.value)
    with pytest.raises(StatisticsNotFoundError):
        Store(str(store)).current("t")
    assert_nothing_published(store, "t")
