"""docs/PERFORMANCE.md (issue #30, target 6): current figures only, each with its command,
under 10 KB; every benchmark script it names exists (history stays in bench/HISTORY.md and
the JSON results)."""

from __future__ import annotations

import re

from tests.docs.examples import REPO

DOC = REPO / "docs" / "PERFORMANCE.md"


def test_the_performance_page_stays_under_10_kb() -> None:
    assert DOC.stat().st_size < 10_000, f"{DOC.name} is {DOC.stat().st_size:,} bytes: move history to bench/HISTORY.md"


def test_every_benchmark_the_page_names_exists_and_every_section_names_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"\bbench_\w+\.py\b", text))
    assert named, "no benchmark named"
    missing = sorted(n for n in named if not (REPO / "bench" / n).is_file())
    assert not missing, f"{DOC.name} names benchmarks that do not exist: {missing}"
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    command = re.compile(r"\bbench_\w+\.py\b|\btests/[\w/]+\.py\b")  # a benchmark, or the test that measures
    without = [s.splitlines()[0] for s in sections if not command.search(s)]
    assert not without, f"sections without their command: {without}"
