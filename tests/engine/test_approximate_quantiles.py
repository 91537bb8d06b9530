"""Approximate quantiles from the sketches in statistics.parquet (KLL, and the opt-in
t-digest): every answer's true rank error, measured on the table's own values,
is within the bound the result reports."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest

from engine.api import analyze, approximate_quantiles
from engine.exceptions import InvalidArgumentError
from engine.stats import ranks
from engine.stats.tdigest import TDIGEST

pytestmark = pytest.mark.ray

PS = [0.0, 0.001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999, 1.0]


@pytest.fixture(scope="module")
def with_tdigest(ray_runtime: None, sample_table: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    store = str(tmp_path_factory.mktemp("tdigest_store"))
    analyze(sample_table, store=store, user_statistics=[TDIGEST])
    return store


def keys_of(sample_table: str, column: str) -> tuple[np.ndarray, ranks.KeyCodec]:
    """The column's non-null, non-NaN values as sorted keys (what the sketches saw)."""
    col = pds.dataset(sample_table, format="parquet", partitioning="hive").to_table(columns=[column])[column]
    codec = ranks.codec_for(col.type)
    keys, _, _ = codec.encode(col)
    keys = keys[~np.isnan(keys)] if keys.dtype.kind == "f" else keys
    return np.sort(keys), codec


def rank_error(sorted_keys: np.ndarray, key, p: float) -> float:
    n = len(sorted_keys)
    lo = np.searchsorted(sorted_keys, key, "left") / n
    hi = np.searchsorted(sorted_keys, key, "right") / n
    return 0.0 if lo <= p <= hi else min(abs(p - lo), abs(p - hi))


@pytest.mark.parametrize("method", ["kll", "tdigest", "auto"])
@pytest.mark.parametrize("column", ["price", "score", "event_time", "quantity", "amount", "event_date"])
def test_errors_within_reported_bounds(sample_table: str, with_tdigest: str, column: str, method: str) -> None:
    q = approximate_quantiles(with_tdigest, "sales", column, PS, method=method)
    s, codec = keys_of(sample_table, column)
    assert not q.exact and q.count == len(s) and q.ranks == (None,) * len(PS)
    for p, v, err, m in zip(PS, q.values, q.rank_errors, q.methods):
        assert m == (method if method != "auto" else m)
        key = codec.encode_value(v)
        assert rank_error(s, key, p) <= err + 1.5 / len(s), (column, p, v, m)
    if method == "auto":
        assert q.methods[PS.index(0.5)] == "kll" and q.methods[PS.index(0.999)] == "tdigest"
        assert all(e <= 0.0134 for e in q.rank_errors)


def test_values_have_the_column_type(with_tdigest: str) -> None:
    types = {"event_time": dt.datetime, "event_date": dt.date, "amount": Decimal, "quantity": int, "score": float}
    for column, py in types.items():
        q = approximate_quantiles(with_tdigest, "sales", column, [0.1, 0.9])
        assert all(isinstance(v, py) for v in q.values), (column, q.values)
    q = approximate_quantiles(with_tdigest, "sales", "event_time", [0.5])
    assert q.values[0].tzinfo is not None


def test_nulls_and_nan_are_reported(sample_table: str, with_tdigest: str) -> None:
    q = approximate_quantiles(with_tdigest, "sales", "price", [0.5])
    price = pds.dataset(sample_table, format="parquet", partitioning="hive").to_table(columns=["price"])["price"]
    assert q.null_count == price.null_count
    assert q.nan_count == pc.sum(pc.is_nan(price.drop_null())).as_py()


def test_partition_sketches_answer_too(with_tdigest: str) -> None:
    q = approximate_quantiles(with_tdigest, "sales", "price", [0.5], partition="part=01")
    assert 0 < q.count < 20_000 and q.values[0] > 0


def test_without_tdigest_only_kll(analyzed_sample) -> None:
    _, store, _ = analyzed_sample
    q = approximate_quantiles(store, "sales", "price", [0.001, 0.5])
    assert q.methods == ("kll", "kll")
    with pytest.raises(InvalidArgumentError, match="without t-digests"):
        approximate_quantiles(store, "sales", "price", [0.5], method="tdigest")


def test_bad_requests(with_tdigest: str) -> None:
    with pytest.raises(InvalidArgumentError, match="numbers and times only"):
        approximate_quantiles(with_tdigest, "sales", "city", [0.5])
    with pytest.raises(InvalidArgumentError, match="method"):
        approximate_quantiles(with_tdigest, "sales", "price", [0.5], method="exact")
    with pytest.raises(InvalidArgumentError, match="no column"):
        approximate_quantiles(with_tdigest, "sales", "nope", [0.5])
    with pytest.raises(InvalidArgumentError, match="outside"):
        approximate_quantiles(with_tdigest, "sales", "price", [2])
