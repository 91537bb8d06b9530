"""The tasks' column profiles (engine/runtime/tasks/values.column_profile): made once per process
for the same column, type and user statistics, and deciding everything as a profile made anew."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.runtime.tasks.values import column_profile
from engine.stats.profile import ColumnProfile
from engine.stats.user import default_statistics

TYPES = [pa.int64(), pa.float64(), pa.string(), pa.timestamp("us", tz="UTC"), pa.decimal128(18, 2), pa.bool_(), pa.list_(pa.int32())]


@pytest.mark.parametrize("type_", TYPES, ids=str)
def test_a_column_profile_is_made_once_and_decides_as_a_new_one(type_):
    user = list(default_statistics())
    got = column_profile("c", type_, user)
    assert column_profile("c", type_, list(user)) is got  # equal arguments: the same profile
    assert column_profile("d", type_, user) is not got and column_profile("c", type_, []) is not got
    fresh = ColumnProfile("c", type_, user)
    for attr in ("discrete", "counted", "reduced", "unsupported", "work_type", "counts_strings", "float_range"):
        assert getattr(got, attr) == getattr(fresh, attr), attr
    assert [u.name for u in got.user] == [u.name for u in fresh.user]
    assert [m.name for m in got.measures] == [m.name for m in fresh.measures]


def test_a_cached_profile_computes_what_a_new_one_does():
    """Used for several partitions in turn, a profile keeps nothing of the earlier ones."""
    rng = np.random.default_rng(3)
    user = list(default_statistics())
    cached = column_profile("x", pa.float64(), user)
    for _ in range(3):
        column = pa.array(rng.normal(0, 1, 2_000))
        got = cached.profile_column_view(column)[1]
        want = ColumnProfile("x", pa.float64(), user).profile_column_view(column)[1]
        assert got.keys() == want.keys()
        assert all(got[k] == want[k] or (got[k] != got[k] and want[k] != want[k]) for k in got), [k for k in got if got[k] != want[k]]
