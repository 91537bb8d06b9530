"""Pure kernels of the distributed frequency algorithm: field encoding, hashes, Bloom filter, plan, selection."""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.frequencies import bloom, keys, plan
from engine.frequencies.hashing import value_hashes
from engine.frequencies.plan import FrequencySettings, PartitionCounts
from engine.stats.selection import percentiles_of_runs
from engine.stats.valuecounts import batch_value_counts, exact_percentiles, merge_counts

ARRAYS = [
    pa.array([0, -1, 2**62, -(2**63), 2**63 - 1], pa.int64()),
    pa.array([0, 255, 7], pa.uint8()),
    pa.array([0, 2**64 - 1], pa.uint64()),
    pa.array([True, False]),
    pa.array([0, 19000, -5], pa.date32()),
    pa.array([decimal.Decimal("1.25"), decimal.Decimal("-99999.99")], pa.decimal128(7, 2)),
    pa.array(["", "a", "é", "x" * 300, "\x00z"]),
    pa.array([b"", b"\x00\x01", b"\xff" * 40], pa.binary()),
    pa.array(["a", "bb"], pa.large_string()),
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: str(a.type))
def test_fields_round_trip(arr: pa.Array) -> None:
    enc = keys.encode(arr)
    assert len(set(enc.fields())) == len(set(arr.to_pylist()))  # injective
    back = keys.decode(enc.fields(), arr.type)
    assert back.equals(arr)


def test_fields_of_a_sliced_array_are_the_slice() -> None:
    arr = pa.array(["zero", "one", "two", "three"]).slice(1, 2)
    assert keys.decode(keys.encode(arr).fields(), arr.type).to_pylist() == ["one", "two"]
    ints = pa.array([5, 6, 7, 8], pa.int32()).slice(2)
    assert keys.decode(keys.encode(ints).fields(), ints.type).to_pylist() == [7, 8]


def test_unsupported_types_are_named() -> None:
    with pytest.raises(keys.UnsupportedFieldType, match="double"):
        keys.encode(pa.array([1.5]))
    assert not keys.supported(pa.list_(pa.int64()))


def test_a_field_of_the_wrong_width_is_an_error() -> None:
    with pytest.raises(Exception, match="3 bytes"):
        keys.decode([b"abc"], pa.int64())


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: str(a.type))
def test_equal_values_hash_equal_and_distinct_values_rarely_collide(arr: pa.Array) -> None:
    doubled = pa.concat_arrays([arr, arr])
    h = value_hashes(doubled)
    assert h.dtype == np.uint64
    assert np.array_equal(h[: len(arr)], h[len(arr) :])
    assert len(np.unique(h[: len(arr)])) == len(set(arr.to_pylist()))


def test_hashes_of_a_million_distinct_ints_do_not_collide() -> None:
    h = value_hashes(pa.array(np.arange(1_000_000, dtype=np.int64)))
    assert len(np.unique(h)) == 1_000_000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300), st.integers(1, 64))
def test_bloom_has_no_false_negatives(values: list[int], words: int) -> None:
    """Every value added earlier (in this batch or an earlier one) tests positive, however tiny the filter."""
    f = bloom.BlockedBloom.create(words)
    h = value_hashes(pa.array(values, pa.int64())) if values else np.zeros(0, np.uint64)
    half = len(h) // 2
    f.test_and_add(h[:half])
    present = f.test_and_add(h[half:])
    seen = set(values[:half])
    for i, v in enumerate(values[half:]):
        if v in seen:
            assert present[i]
        seen.add(v)
    assert f.contains(h).all()


def test_bloom_false_positive_rate_matches_its_sizing() -> None:
    n = 200_000
    words = bloom.words_for(n, 0.01, 1 << 30)
    f = bloom.BlockedBloom.create(words)
    f.test_and_add(value_hashes(pa.array(np.arange(n, dtype=np.int64))))
    fresh = f.contains(value_hashes(pa.array(np.arange(n, 2 * n, dtype=np.int64))))
    rate = fresh.mean()
    assert 0.002 < rate < 0.02, rate  # sized for 1 %
    assert abs(rate - bloom.expected_fpr(n, words)) < 0.005


def test_bloom_memory_is_capped() -> None:
    assert bloom.words_for(10**12, 0.001, 1 << 20) * 8 == 1 << 20
    assert bloom.words_for(1000, 0.001, 1 << 20) * 8 < 4096


def test_plan_scenarios() -> None:
    s = FrequencySettings(hash_limit=1000)
    unique = [PartitionCounts(1000, 1000), PartitionCounts(500, 499)]
    assert plan.plan_column(unique, FrequencySettings(distinct_ratio=0.99)).scenario == plan.BLOOM
    skewed = [PartitionCounts(1000, 10), PartitionCounts(1000, 20)]
    assert plan.plan_column(skewed, s).scenario == plan.HASH
    big = [PartitionCounts(5000, 1500), PartitionCounts(5000, 1200)]
    p = plan.plan_column(big, s)
    assert (p.scenario, p.batches) == (plan.BATCHED, 3)
    tiny_unique = [PartitionCounts(10, 10)]
    assert plan.plan_column(tiny_unique, FrequencySettings()).scenario == plan.HASH  # below min_bloom_distinct
    with pytest.raises(ValueError, match="bloom_fpr"):
        FrequencySettings(bloom_fpr=0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=5), min_size=1, max_size=200), st.integers(2, 9))
def test_split_points_partition_the_values(values: list[str], batches: int) -> None:
    arr = pa.array(values)
    points = plan.split_points([arr.slice(0, len(arr) // 2), arr.slice(len(arr) // 2)], batches)
    assert len(points) <= batches - 1
    assert points.to_pylist() == sorted(set(points.to_pylist()))
    r = plan.range_of(arr, points)
    pts = points.to_pylist()
    for v, i in zip(values, r):  # range i holds points[i-1] <= v < points[i]
        assert (i == 0 or pts[i - 1] <= v) and (i == len(pts) or v < pts[i])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(-50, 50), max_size=60), min_size=1, max_size=5))
def test_percentiles_of_runs_equal_those_of_the_merged_counts(parts: list[list[int]]) -> None:
    """Selection over sorted partition runs == the merge-based exact percentiles (and numpy 'lower')."""
    runs = [batch_value_counts(pa.array(p, pa.int64())) for p in parts]
    merged = merge_counts(runs, pa.int64())
    expected = exact_percentiles(merged)
    got = percentiles_of_runs(runs, pa.int64())
    assert {k: (v.as_py() if v is not None else None) for k, v in got.items()} == {
        k: (v.as_py() if v is not None else None) for k, v in expected.items()
    }
    flat = [x for p in parts for x in p]
    if flat:
        assert got["p50"].as_py() == int(np.quantile(np.array(flat), 0.5, method="lower"))


def test_percentiles_of_runs_for_dates() -> None:
    a = pa.array([1, 5, 9], pa.date32())
    b = pa.array([2, 2, 3], pa.date32())
    got = percentiles_of_runs([batch_value_counts(a), batch_value_counts(b)], pa.date32())
    assert got["p50"].as_py() == datetime.date(1970, 1, 3)  # sorted 1 2 2 3 5 9: lower median is day 2


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=400), st.integers(1, 40))
def test_bloom_insert_equals_unbuffered_or_at(hashes: list[int], words: int) -> None:
    """The filter's scatter-and-retry insert sets exactly the bits of ``np.bitwise_or.at``, repeated words included."""
    f = bloom.BlockedBloom.create(words)
    h = np.array(hashes, np.uint64)
    f.test_and_add(h, distinct=True)
    idx, mask = f._positions(h)
    expected = np.zeros(words, np.uint64)
    np.bitwise_or.at(expected, idx, mask)
    assert np.array_equal(f.words, expected)
    # the mask is K bits at the positions named by the hash's five low 6-bit slices
    for x, m in zip(hashes[:20], mask[:20]):
        assert int(m) == sum({1 << ((x >> (6 * i)) & 63) for i in range(bloom.K)})


@pytest.mark.parametrize("words", [1, 1000, 1 << 20])
def test_bloom_insert_in_chunks_sets_every_bit_and_sees_earlier_chunks(words: int) -> None:
    """A batch larger than the filter's chunk: the same bits as np.bitwise_or.at, and a
    value repeated in a later chunk of the same batch tests positive."""
    rng = np.random.default_rng(words)
    h = rng.integers(0, 2**64 - 1, 3 * bloom._CHUNK + 17, dtype=np.uint64)
    h[-5:] = h[:5]  # repeats, chunks apart
    f = bloom.BlockedBloom.create(words)
    present = f.test_and_add(h, distinct=False)
    assert present[-5:].all()
    idx, mask = f._positions(h)
    expected = np.zeros(words, np.uint64)
    np.bitwise_or.at(expected, idx, mask)
    assert np.array_equal(f.words, expected)
