"""The server's exact-subset limits as pure logic (flight_server/exact.py), on a fake clock and
temporary directories: the rate window per client, the concurrency count, the refusals'
codes, the client of a gRPC peer, and the cache budget's least-recently-used order. The
same limits on real servers: tests/flight_server/test_flight_exact.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.exceptions import InvalidArgumentError
from flight_server.exact import BUSY, FORBIDDEN, RATE_LIMITED, ExactLimits, ExactRefused, ExactSubsets, client_of


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gate(tmp_path: Path, **limits) -> tuple[ExactSubsets, Clock]:
    clock = Clock()
    roots = (str(tmp_path / "lake"),)
    return ExactSubsets(str(tmp_path / "store"), roots, True, ExactLimits(**limits), clock=clock), clock


def test_client_of_a_peer_is_its_address() -> None:
    assert client_of("ipv4:127.0.0.1:51234") == client_of(b"ipv4:127.0.0.1:40000") == "ipv4:127.0.0.1"
    assert client_of("ipv6:[::1]:51234") == "ipv6:[::1]"
    assert client_of("unix:/tmp/sock") == "unix:/tmp/sock" and client_of(None) == "unknown"


def test_the_rate_is_per_client_in_a_sliding_window(tmp_path: Path) -> None:
    g, clock = gate(tmp_path, rate=2, window_s=60, max_jobs=5)
    for _ in range(2):
        with g.guard("a", str(tmp_path / "lake" / "t")).computing("t", str(tmp_path / "r")):
            pass
    with pytest.raises(ExactRefused) as info, g.guard("a", "x").computing("t", str(tmp_path / "r")):
        pass
    assert info.value.code == RATE_LIMITED
    with g.guard("b", "x").computing("t", str(tmp_path / "r")):  # another client
        pass
    clock.now += 60.5  # the first two left the window
    with g.guard("a", "x").computing("t", str(tmp_path / "r")):
        pass


def test_jobs_beyond_the_limit_are_busy_and_do_not_spend_the_rate(tmp_path: Path) -> None:
    g, _ = gate(tmp_path, rate=2, window_s=60, max_jobs=1)
    with g.guard("a", "x").computing("t", str(tmp_path / "r1")):
        assert g.info()["running"] == 1
        for _ in range(3):
            with pytest.raises(ExactRefused) as info, g.guard("b", "x").computing("t", str(tmp_path / "r2")):
                pass
            assert info.value.code == BUSY
    assert g.info()["running"] == 0
    with g.guard("b", "x").computing("t", str(tmp_path / "r2")):  # b's busy refusals did not count
        pass
    with g.guard("b", "x").computing("t", str(tmp_path / "r2")):
        pass


def test_a_failed_job_frees_its_slot(tmp_path: Path) -> None:
    g, _ = gate(tmp_path, max_jobs=1)
    with pytest.raises(RuntimeError), g.guard("a", "x").computing("t", str(tmp_path / "r")):
        raise RuntimeError("the job failed")
    assert g.info()["running"] == 0


def test_permission(tmp_path: Path) -> None:
    g, _ = gate(tmp_path)
    g.permit("t", str(tmp_path / "lake" / "t"), "off")
    for uri in (str(tmp_path / "elsewhere"), str(tmp_path / "lake" / ".." / "store"), None, ""):
        with pytest.raises(ExactRefused) as info:
            g.permit("t", uri, "off")
        assert info.value.code == FORBIDDEN and str(tmp_path) not in str(info.value)
    off = ExactSubsets(str(tmp_path / "store"), (), False, ExactLimits())
    with pytest.raises(ExactRefused, match="^off$"):
        off.permit("t", str(tmp_path / "lake" / "t"), "off")


def _entry(root: Path, size: int) -> None:
    root.mkdir(parents=True)
    (root / "data").write_bytes(b"x" * size)


def test_the_budget_evicts_the_least_recently_used_never_the_newest_nor_one_being_computed(tmp_path: Path) -> None:
    g, _ = gate(tmp_path, cache_bytes=250, max_jobs=2)
    subsets = tmp_path / "store" / "t" / "subsets"
    roots = [subsets / f"p{i}" for i in range(5)]
    for r in roots[:3]:
        _entry(r, 100)
        g.touch(str(r))
    assert g.evict() == [str(roots[0])] and not roots[0].exists()
    g.touch(str(roots[1]))  # now p2 is the least recently used
    _entry(roots[3], 100)
    with g.guard("a", "x").computing("t", str(roots[3])):
        pass
    assert not roots[2].exists() and roots[1].exists() and roots[3].exists()
    # a predicate another job is writing is skipped; the newest stays even alone above the budget
    _entry(roots[4], 400)
    with g.guard("a", "x").computing("t", str(roots[1])):
        g.touch(str(roots[4]))
        assert g.evict() == [str(roots[3])]
    # that job's end makes p1 the newest: p4 is over the budget and goes
    assert not roots[4].exists() and roots[1].exists()
    assert g.info()["cached_bytes"] == 100 and g.evicted == 4


def test_limits_are_checked() -> None:
    for bad in ({"max_jobs": 0}, {"rate": 0}, {"window_s": 0}, {"cache_bytes": -1}):
        with pytest.raises(InvalidArgumentError):
            ExactLimits(**bad)
