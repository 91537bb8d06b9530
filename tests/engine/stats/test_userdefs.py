"""User statistics by reference (engine/stats/userdefs.py): analyze records where a statistic's
definition lives, another process loads it from there; what cannot be loaded says why."""

from __future__ import annotations

import operator

import pyarrow as pa
import pytest

from engine.stats import userdefs
from engine.stats.tdigest import TDIGEST
from engine.stats.user import TOP1_SHARE, ZERO_COUNT, UserStatistic, register, unregister

#: bound at module level: loadable as test_userdefs:MODULE_LEVEL
MODULE_LEVEL = UserStatistic(name="module_level", compute=len, merge=operator.add, result_type=pa.int64())
NOT_A_STATISTIC = 42


def _local() -> UserStatistic:
    return UserStatistic(name="local", compute=lambda a: len(a), merge=operator.add, result_type=pa.int64())


def test_the_shipped_statistics_are_referenced_by_their_module_level_names() -> None:
    assert userdefs.reference_of(ZERO_COUNT) == "engine.stats.user:ZERO_COUNT"
    assert userdefs.reference_of(TOP1_SHARE) == "engine.stats.user:TOP1_SHARE"
    assert userdefs.reference_of(TDIGEST) == "engine.stats.tdigest:TDIGEST"
    for stat in (ZERO_COUNT, TOP1_SHARE, TDIGEST):
        assert userdefs.load(userdefs.reference_of(stat), stat.name) is stat


def test_a_statistic_without_a_module_level_name_has_no_reference() -> None:
    assert userdefs.reference_of(_local()) is None
    # len and operator.add live in builtins/_operator: MODULE_LEVEL's functions do not name its module
    assert userdefs.reference_of(MODULE_LEVEL) is None


@pytest.mark.parametrize(
    "reference,name,words",
    [
        ("engine.stats.user:ZERO_COUNT", "other_name", "is now the statistic 'zero_count'"),
        (f"{__name__}:NOT_A_STATISTIC", "x", "is not a UserStatistic"),
        ("no_such_module_xyz:STAT", "x", "cannot be imported here: ModuleNotFoundError"),
        ("__main__:STAT", "x", "not a module:attribute reference"),
        ("os; rm -rf /:X", "x", "not a module:attribute reference"),
        ("engine.stats.user", "x", "not a module:attribute reference"),
    ],
)
def test_what_cannot_be_loaded_says_why(reference: str, name: str, words: str) -> None:
    with pytest.raises(userdefs.UnavailableStatistic, match=words.replace("(", r"\(").replace(")", r"\)")):
        userdefs.load(reference, name)


def test_resolve_takes_the_reference_then_the_registry_then_the_shipped_one() -> None:
    local = _local()
    got = userdefs.resolve(["zero_count", "module_level", "local", "top1_share"], {"module_level": f"{__name__}:MODULE_LEVEL"})
    assert [u.name for u in got.statistics] == ["zero_count", "module_level", "top1_share"]  # zero_count, top1_share: shipped
    assert got.statistics[1] is MODULE_LEVEL
    assert list(got.unavailable) == ["local"] and "not recorded" in got.unavailable["local"]
    register(local)
    try:
        got = userdefs.resolve(["local"], {"local": "no_such_module_xyz:LOCAL"})
        assert got.statistics == [local] and got.unavailable == {}  # the reference fails: the registered one
    finally:
        unregister("local")
    got = userdefs.resolve(["local"], {"local": "no_such_module_xyz:LOCAL"})
    assert got.statistics == [] and "cannot be imported here" in got.unavailable["local"]
