"""analyze(frequencies="redis") publishes the same table-level statistics and frequencies as the Ray reduction."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import redis

from engine.api import analyze, open_statistics
from engine.redis_server import RedisServer

pytestmark = pytest.mark.ray

EXACT = ["column", "row_count", "null_count", "distinct_count", "min", "max", "p01", "p05", "p25", "p50", "p75", "p95", "p99", "frequencies"]


def exact_rows(t) -> list[dict]:
    """Statistics rows without the KLL (non-deterministic) percentiles of float columns."""
    rows = t.select(EXACT + ["percentiles_exact"]).to_pylist()
    for r in rows:
        if not r.pop("percentiles_exact"):
            for k in EXACT:
                if k.startswith("p") and k[1:].isdigit():
                    r[k] = None
    return rows


def test_redis_strategy_equals_the_ray_reduction(analyzed_sample, tmp_path) -> None:
    table, store, reduced = analyzed_sample
    with RedisServer() as server:
        result = analyze(table, store=str(tmp_path / "store"), frequencies="redis", redis_url=server.url, user_statistics=[])
        assert redis.Redis.from_url(server.url).keys("*") == [], "the job removed its keys"
    assert result.frequencies, "some columns went through Redis"
    scenarios = {c: r["scenario"] for c, r in result.frequencies.items()}
    assert scenarios.get("id") == "bloom"  # the unique key
    assert "hash" in scenarios.values()
    # strings outside the Bloom path go by their phase-1 theta hashes, and never collide here
    fields = {c: (r["fields"], r["collision"]) for c, r in result.frequencies.items()}
    assert fields["comment"] == fields["city"] == ("hash", "")
    assert fields["id"][0] == "value"

    a = open_statistics(store, reduced.table)
    b = open_statistics(str(tmp_path / "store"), result.table)
    sa = exact_rows(pq.read_table(a.file_uri("statistics.parquet")))
    sb = exact_rows(pq.read_table(b.file_uri("statistics.parquet")))
    assert sa == sb
    fa = pq.read_table(a.file_uri("frequencies.parquet"))
    fb = pq.read_table(b.file_uri("frequencies.parquet"))
    key = lambda t: sorted(zip(t["column"].to_pylist(), t["value"].to_pylist(), t["frequency"].to_pylist()))  # noqa: E731
    assert key(fa) == key(fb)
    # the same order too: by column, decreasing count, then value
    assert fa.select(["column", "value", "frequency"]).equals(fb.select(["column", "value", "frequency"]))


def test_unknown_strategy_is_a_clear_error(sample_table, tmp_path) -> None:
    from engine.exceptions import MetastoreError

    with pytest.raises(MetastoreError, match="frequencies must be one of reduce, redis"):
        analyze(sample_table, store=str(tmp_path), frequencies="bogus")
