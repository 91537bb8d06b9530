"""An analyze's progress counts partitions (issue #28): the demo's bar said
``profile 16/16 partitions`` for an 8-partition table, counting each partition's two
profile waves. Every phase of an analyze of an 8-partition table reports a total of 8,
counts up without going back, and ends at 8 -- through the API's callback and in the
CLI's progress bar.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.dataset as pds
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore
from engine.sample import generate_table

pytestmark = pytest.mark.ray

PARTITIONS = 8


@pytest.fixture(scope="module")
def table8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("progress") / "sales"
    generate_table(str(root), rows=8_000, partitions=PARTITIONS, seed=2)
    return root


def by_phase(events: list[tuple[str, int, int]]) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for phase, done, total in events:
        out.setdefault(phase, []).append((done, total))
    return out


def assert_counts_partitions(phases: dict[str, list[tuple[int, int]]], partitions: int) -> None:
    for phase, seen in phases.items():
        done = [d for d, _ in seen]
        assert {t for _, t in seen} == {partitions}, (phase, seen)
        assert done == sorted(done) and done[0] == 0 and done[-1] == partitions, (phase, seen)


def test_every_phase_counts_the_partitions_once(ray_runtime: None, table8: Path, tmp_path: Path) -> None:
    from engine.api import analyze

    partitions = len({Path(f).parent.name for f in pds.dataset(str(table8), format="parquet").files})  # the oracle: the table's folders
    assert partitions == PARTITIONS
    events: list[tuple[str, int, int]] = []
    result = analyze(str(table8), store=str(tmp_path / "s"), user_statistics=[], progress=lambda *e: events.append(e))
    assert result.partitions == partitions
    phases = by_phase(events)
    assert "profile" in phases and "histograms" in phases
    assert_counts_partitions(phases, partitions)
    # a re-analyze that inherits every partition: its phases count them the same way
    events.clear()
    analyze(str(table8), store=str(tmp_path / "s"), user_statistics=[], progress=lambda *e: events.append(e))
    assert_counts_partitions(by_phase(events), partitions)


def test_the_cli_progress_bar_says_8_of_8_partitions(ray_runtime: None, table8: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(metastore, ["--store", str(tmp_path / "s"), "analyze", str(table8), "--no-user-stats"])
    assert r.exit_code == 0, r.output
    bars = dict(re.findall(r"^(\w+)\s.*?(\d+/\d+) partitions", r.output, re.MULTILINE))
    assert bars.get("profile") == f"{PARTITIONS}/{PARTITIONS}", r.output
    assert set(bars.values()) == {f"{PARTITIONS}/{PARTITIONS}"}, r.output
