"""Runs the multi-node cluster tests (tests/cluster, marker `cluster`) as part of the default run.

They need a process of their own: a process is connected to one Ray at a time, and
this session holds a local Ray (tests/conftest.py, ``ray_runtime``) from its first
Ray test to its end. So the default selection leaves them out (pyproject.toml:
``-m 'not slow and not cluster'``) and this test starts ``pytest -m cluster tests/cluster``
in a child process, which starts its own three-node cluster (tests/cluster/conftest.py)
and stops it before it exits. About 3 minutes on a busy 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(1200)
def test_the_cluster_tests_pass_on_a_three_node_ray_cluster(tmp_path: Path) -> None:
    report = tmp_path / "cluster.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "cluster", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "tests/cluster"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
    assert proc.returncode == 0, tail
    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None, tail
    counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    # the child ran every cluster test (a selection that matched nothing exits 5, not 0)
    assert counts["tests"] >= 9 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, (counts, tail)
