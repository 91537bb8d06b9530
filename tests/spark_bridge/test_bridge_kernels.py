"""Pure parts of the Spark bridge, without Spark: histograms for the CBO, value forms, plans, identities."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statistics_oracle import equi_height_histogram

from spark_bridge.cbo import (
    SparkColumnStat,
    equi_height_exact,
    equi_height_from_quantiles,
    spark_sizes,
    spark_text,
    width_quantiles,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=300), st.integers(2, 40))
def test_exact_histogram_equals_brute_force(values: list[int], bins: int) -> None:
    x = np.array(values)
    uniq, counts = np.unique(x, return_counts=True)
    perm = np.random.default_rng(len(values)).permutation(len(uniq))  # any order of the value counts
    h = equi_height_exact(uniq[perm].astype(float), counts[perm], bins)
    assert list(h.bins) == equi_height_histogram(x, bins)
    assert h.height == len(values) / bins and h.method == "exact"


def test_histogram_from_quantiles_estimates_distinct_counts() -> None:
    h = equi_height_from_quantiles([0, 0, 10, 20, 1000], non_null=400, distinct=200, integer_valued=True, method="kll")
    assert h.height == 100
    assert h.bins[0] == (0.0, 0.0, 1)  # lo == hi: one value
    assert h.bins[1] == (0.0, 10.0, 10)  # 50 spread evenly, capped by the 10 integers in (0, 10]
    assert h.bins[3] == (20.0, 1000.0, 50)
    dense = equi_height_from_quantiles([0.0, 0.5, 1.0], non_null=10, distinct=10, integer_valued=False, method="kll")
    assert [b[2] for b in dense.bins] == [5, 5]  # all distinct: a bin's height
    # endpoints never decrease (quantile sketches can wobble)
    wobbly = equi_height_from_quantiles([0.0, 3.0, 2.0, 5.0], non_null=30, distinct=30, integer_valued=False, method="kll")
    assert [b[:2] for b in wobbly.bins] == [(0.0, 3.0), (3.0, 3.0), (3.0, 5.0)]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(10, 200))
def test_equal_width_quantiles_err_at_most_the_fullest_bin(seed: int, nbins: int) -> None:
    x = np.random.default_rng(seed).lognormal(0, 1, 2000)
    counts, edges = np.histogram(x, bins=nbins)
    p = np.linspace(0, 1, 51)
    q = width_quantiles(edges[:-1], edges[1:], counts, p)
    ranks = np.searchsorted(np.sort(x), q, side="right") / len(x)
    assert np.all(np.diff(q) >= 0)
    assert np.max(np.abs(ranks - p)) <= counts.max() / len(x) + 1e-9


def test_spark_text_forms() -> None:
    assert spark_text(True, "boolean") == "true" and spark_text(False, "boolean") == "false"
    assert spark_text(-12, "long") == "-12"
    assert spark_text(1.5, "double") == "1.5" and spark_text(float("inf"), "double") == "Infinity"
    assert spark_text(float("-inf"), "float") == "-Infinity" and spark_text(float("nan"), "double") == "NaN"
    assert spark_text(Decimal("1E+2"), "decimal") == "100" and spark_text(Decimal("-0.50"), "decimal") == "-0.50"
    assert spark_text(date(2024, 1, 5), "date") == "2024-01-05"
    paris = timezone(timedelta(hours=1))
    assert spark_text(datetime(2024, 1, 5, 11, 0, 0, 7, tzinfo=paris), "timestamp") == "2024-01-05 10:00:00.000007"
    assert spark_text(datetime(5, 1, 2, 3, 4, 5), "timestamp_ntz") == "0005-01-02 03:04:05.000000"
    assert spark_text("abc", "string") is None and spark_text(b"x", "binary") is None and spark_text(None, "long") is None


def test_spark_sizes_and_map() -> None:
    assert spark_sizes("string", None, 34.2, 60) == (35, 60)
    assert spark_sizes("string", None, None, None) == (20, 20)  # all null: Spark's default size
    assert spark_sizes("long", None, None, None) == (8, 8)
    assert spark_sizes("decimal", 18, None, None) == (8, 8) and spark_sizes("decimal", 19, None, None) == (16, 16)
    m = SparkColumnStat(5, "1", "9", 0, 8, 8).to_map("c")
    assert m == {"c.version": "2", "c.avgLen": "8", "c.maxLen": "8", "c.distinctCount": "5", "c.nullCount": "0", "c.min": "1", "c.max": "9"}
    assert "c.min" not in SparkColumnStat(5, None, None, 0, 20, 30).to_map("c")


def test_unmovable_types_are_named() -> None:
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.source import check_spark_types

    def schema(**fields):
        return json.dumps({"type": "struct", "fields": [{"name": k, "type": v, "nullable": True, "metadata": {}} for k, v in fields.items()]})

    check_spark_types(schema(a="long", b="interval day to second", c={"type": "array", "elementType": "string", "containsNull": True}))
    nested = {"type": "struct", "fields": [{"name": "i", "type": "interval", "nullable": True, "metadata": {}}]}
    with pytest.raises(InvalidArgumentError, match=r"s\.i \(interval\), ym \(interval year to month\).*df\.drop\('s', 'ym'\)"):
        check_spark_types(schema(a="long", s=nested, ym="interval year to month"))
    with pytest.raises(InvalidArgumentError, match="partition_by column 'm' is of type map<string,bigint>"):
        check_spark_types(schema(m={"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}), ["m"])


def test_identity_digest_ignores_expression_ids_and_file_order() -> None:
    from spark_bridge.identity import content_digest, normalize_plan

    assert normalize_plan("Project [id#12L, part#38]\n+- Filter (q#29 > 5)") == "Project [id, part]\n+- Filter (q > 5)"
    files = [("/t/a.parquet", 10, 1), ("/t/b.parquet", 20, 2)]
    d = content_digest("Relation [id#1L] parquet", files, ["part"], "s")
    assert d == content_digest("Relation [id#7L] parquet", files[::-1], ["part"], "s")
    assert d != content_digest("Relation [id#1L] parquet", [("/t/a.parquet", 10, 3), files[1]], ["part"], "s")
    assert d != content_digest("Relation [id#1L] parquet", files, [], "s")


def _info(**overrides):
    from spark_bridge.catalog import CatalogPartition, CatalogTableInfo

    base = dict(
        name="db.t",
        database="db",
        table="t",
        table_type="EXTERNAL",
        provider="parquet",
        serde=None,
        location="/data/t",
        schema_json="{}",
        partition_columns=("s", "n"),
        tracks_partitions=True,
        partitions=(
            CatalogPartition((("s", "a/b"), ("n", "1")), "/data/t/s=a%2Fb/n=1"),
            CatalogPartition((("s", None), ("n", "2")), "/data/t/s=__HIVE_DEFAULT_PARTITION__/n=2"),
        ),
    )
    base.update(overrides)
    return CatalogTableInfo(**base)


def test_which_tables_are_read_from_their_files() -> None:
    from engine.exceptions import TableNotFoundError
    from spark_bridge.catalog import CatalogPartition
    from spark_bridge.table_source import plan_files

    registered, why = plan_files(_info())
    assert why == "" and registered == {
        "s=a%2Fb/n=1": (("s", "a/b"), ("n", "1")),
        "s=__HIVE_DEFAULT_PARTITION__/n=2": (("s", None), ("n", "2")),
    }
    assert plan_files(_info(partition_columns=(), partitions=None)) == ({}, "")
    assert plan_files(_info(tracks_partitions=False, partitions=None)) == ({}, "")
    assert "Hive serde" in plan_files(_info(provider="hive", serde="parquet"))[1]
    assert "'hdfs'" in plan_files(_info(location="hdfs://nn/data/t"))[1]
    moved = _info(partitions=(CatalogPartition((("s", "x"), ("n", "1")), "/elsewhere/s=x/n=1"),))
    assert "outside the table location" in plan_files(moved)[1]
    renamed = _info(partitions=(CatalogPartition((("s", "x"), ("n", "1")), "/data/t/custom"),))
    assert "not at the Hive path" in plan_files(renamed)[1]
    with pytest.raises(TableNotFoundError, match="MSCK REPAIR TABLE db.t"):
        plan_files(_info(partitions=()))
