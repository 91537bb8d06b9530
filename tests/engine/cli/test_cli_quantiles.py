"""metastore quantiles: exact (distributed sort on the session's Ray) against DuckDB
and pyarrow, approximate from the published sketches, and its error paths."""

from __future__ import annotations

import json

import duckdb
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore


def run(*args: str):
    return CliRunner().invoke(metastore, list(args))


def test_help() -> None:
    result = run("quantiles", "--help")
    assert result.exit_code == 0 and "quantile_disc" in result.stdout and "--approximate" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["quantiles", "t", "c", "-a", "--rank-of", "1"],
        ["quantiles", "t", "c", "--method", "kll"],
        ["quantiles", "t", "c", "-a", "--ranges", "2"],
    ],
)
def test_usage_errors(args: list[str]) -> None:
    assert run(*args).exit_code == 2


@pytest.mark.ray
def test_exact_json_matches_duckdb(ray_runtime: None, sample_table: str) -> None:
    result = run("--output", "json", "quantiles", sample_table, "price", "-q", "0.1,0.5", "--probability", "0.999")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    con = duckdb.connect()
    (expected,) = con.execute(
        f"SELECT quantile_disc(price, [0.1, 0.5, 0.999]) FROM read_parquet('{sample_table}/**/*.parquet', hive_partitioning = true)"
    ).fetchone()
    assert [q["value"] for q in doc["quantiles"]] == expected
    assert doc["exact"] and doc["table"] == "sales" and [q["p"] for q in doc["quantiles"]] == [0.1, 0.5, 0.999]


@pytest.mark.ray
def test_ranks_of_a_string_column(ray_runtime: None, sample_table: str) -> None:
    result = run("-o", "json", "quantiles", sample_table, "city", "--rank-of", "Berlin", "--value-at", "0", "--value-at", "100")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    city = pds.dataset(sample_table, format="parquet", partitioning="hive").to_table(columns=["city"])["city"]
    ordered = city.take(pc.sort_indices(city)).to_pylist()
    below = pc.sum(pc.less(city, "Berlin")).as_py()
    at_most = below + pc.sum(pc.equal(city, "Berlin")).as_py()
    assert doc["rank_of"] == [{"value": "Berlin", "below": below, "at_most": at_most}]
    assert doc["value_at"] == [{"rank": 0, "value": ordered[0]}, {"rank": 100, "value": ordered[100]}]
    assert doc["quantiles"] == []
    text = run("quantiles", sample_table, "city", "--rank-of", "Berlin")
    assert text.exit_code == 0 and f"{below:,} values below it" in text.stdout


@pytest.mark.ray
def test_approximate_from_the_store(analyzed_sample) -> None:
    _, store, _ = analyzed_sample
    result = run("--store", store, "-o", "json", "quantiles", "sales", "price", "-a", "-q", "0.5")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (q,) = doc["quantiles"]
    assert not doc["exact"] and q["method"] == "kll" and 0 < q["rank_error"] < 0.02 and q["rank"] is None
    text = run("--store", store, "quantiles", "sales", "price", "-a")
    assert text.exit_code == 0 and "approximate" in text.stdout and "±" in text.stdout
    bad = run("--store", store, "quantiles", "sales", "price", "-a", "--method", "tdigest")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and "t-digest" in bad.stderr


@pytest.mark.ray
def test_bad_probability_is_one_line(ray_runtime: None, sample_table: str) -> None:
    result = run("quantiles", sample_table, "price", "-q", "1.5")
    assert result.exit_code == 1 and "outside [0, 1]" in result.stderr and "Traceback" not in result.output


@pytest.mark.ray
def test_analyze_with_tdigest_then_tails_from_it(ray_runtime: None, tmp_path) -> None:
    from engine.sample import generate_table

    table = tmp_path / "small"
    generate_table(str(table), rows=3_000, partitions=2, seed=3)
    store = str(tmp_path / "store")
    assert run("--store", store, "-o", "json", "analyze", str(table), "--tdigest", "--no-user-stats").exit_code == 0
    result = run("--store", store, "-o", "json", "quantiles", "small", "score", "-a", "-q", "0.001,0.5")
    assert result.exit_code == 0, result.output
    methods = [q["method"] for q in json.loads(result.stdout)["quantiles"]]
    assert methods == ["tdigest", "kll"]
