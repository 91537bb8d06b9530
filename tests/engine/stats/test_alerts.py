"""The alert checks (engine/stats/alerts.py) on crafted facts; the CLI's in tests/engine/cli/test_cli_alerts.py."""

from __future__ import annotations

import math

import pytest

from engine.exceptions import InvalidArgumentError
from engine.stats.alerts import AlertThresholds, ColumnFacts, column_alerts, pearson_skew, table_alerts


def kinds(f: ColumnFacts, t: AlertThresholds = AlertThresholds()) -> list[str]:
    return [a.kind for a in column_alerts(f, t)]


def test_each_kind() -> None:
    assert kinds(ColumnFacts(rows=10, nulls=10)) == ["all_null"]
    assert kinds(ColumnFacts(rows=10, nulls=0, distinct=1, distinct_exact=True, minimum=3, top_count=10)) == ["constant"]
    assert kinds(ColumnFacts(rows=10, nulls=0, distinct=10, distinct_exact=True, top_count=1)) == ["unique"]
    assert kinds(ColumnFacts(rows=10, nulls=0, distinct=10, distinct_exact=False)) == []  # an estimate says nothing
    assert kinds(ColumnFacts(rows=10, nulls=6, distinct=2, distinct_exact=True, top_count=2)) == ["high_nulls"]
    assert kinds(ColumnFacts(rows=10, nulls=0, nans=2, distinct=8, distinct_exact=True)) == ["unique", "nan"]
    assert kinds(ColumnFacts(rows=10, nulls=0, distinct=5, minimum=-math.inf, maximum=1.0)) == ["infinite"]
    assert kinds(ColumnFacts(rows=10, nulls=0, distinct=5, mean=3.0, median=1.0, stddev=2.0)) == ["skewed"]
    assert kinds(ColumnFacts(rows=100, nulls=0, distinct=50, distinct_exact=True, categorical=True, top_count=2)) == ["high_cardinality"]
    assert kinds(ColumnFacts(rows=100, nulls=0, distinct=3, distinct_exact=True, top_count=80)) == ["imbalanced"]
    assert kinds(ColumnFacts(rows=0, nulls=0)) == [] and kinds(ColumnFacts(rows=5, nulls=0, unsupported=True)) == []


def test_thresholds_settable() -> None:
    f = ColumnFacts(rows=10, nulls=3, distinct=3, distinct_exact=True, top_count=3)
    assert kinds(f) == []
    assert kinds(f, AlertThresholds().with_settings({"high_nulls": "0.3"})) == ["high_nulls"]
    with pytest.raises(InvalidArgumentError, match="unknown alert threshold"):
        AlertThresholds().with_settings({"nope": "1"})
    with pytest.raises(InvalidArgumentError, match="not an integer"):
        AlertThresholds().with_settings({"high_cardinality": "x"})


def test_pearson_skew_and_stale() -> None:
    assert pearson_skew(3.0, 1.0, 2.0) == 3.0 and pearson_skew(1.0, 1.0, 0.0) is None and pearson_skew(None, 1.0, 1.0) is None
    assert [a.kind for a in table_alerts(2, None)] == ["stale"] and table_alerts(0, None) == [] and table_alerts(None, 10.0) == []
    assert [a.kind for a in table_alerts(None, 100.0, AlertThresholds(stale_age_s=50))] == ["stale"]
