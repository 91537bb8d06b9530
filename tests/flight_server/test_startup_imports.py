"""Start-up: the read side loads no Ray, numba, pandas or Spark, nor pyarrow.compute or rich's console.

Importing engine.lookup, and running each read command of the console script
(show, tables, history, config, partitions-of, query) in a fresh process, must
leave ``ray``, ``numba``, ``pandas`` and ``pyspark`` out of ``sys.modules``, and
``pyarrow.compute``, ``rich.console`` and ``rich.table`` (issue #20: a regression
of the start-up work fails here, not only in bench/bench_startup.py). Each process
prints what it loaded of them at exit, so the test sees the real process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from flight_testkit import GOOD_TOKEN

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("ray", "numba", "pandas", "pyspark")
# what the read commands no longer load either (bench/bench_startup.py): pyarrow.compute's
# 300 kernel wrappers (engine/arrowcompute.py calls the kernels by name) and rich's
# console and layout (engine/cli/plain.py draws the views when no terminal shows them)
LIGHT = ("pyarrow.compute", "rich.console", "rich.table")

_RUN = """
import json, sys
sys.argv = ["metastore"] + json.loads(sys.argv[1])
from engine.cli.console import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"code": code, "loaded": [m for m in %r if m in sys.modules]}))
""" % (HEAVY + LIGHT,)


def _fresh(code: str, *args: str) -> dict:
    # stdout is a pipe, as for a script; COLUMNS as a terminal of 80 columns would give
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=str(REPO),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "80"}, timeout=120,
    )  # fmt: skip
    assert out.stdout.strip(), out.stderr
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stdout": out.stdout, "stderr": out.stderr}


def test_importing_the_lookups_loads_none_of_them() -> None:
    got = _fresh(
        f"import sys, json, engine.lookup, engine.catalog; print(json.dumps({{'loaded': [m for m in {HEAVY + LIGHT!r} if m in sys.modules]}}))"
    )
    assert got["loaded"] == []


@pytest.mark.parametrize(
    "args",
    [
        ["show", "sales"],
        ["show", "sales", "--column", "price", "--column", "city"],
        ["show", "sales", "--column", "event_time"],
        ["show", "wide"],
        ["show", "sales", "--partition", "part=01", "--at", "1"],
        ["tables"],
        ["history", "sales"],
        ["config", "sales"],
    ],
    ids=lambda a: " ".join(a),
)
def test_read_commands_load_none_of_them(flight_data, args: list[str]) -> None:  # noqa: ANN001
    got = _fresh(_RUN, json.dumps(["--store", flight_data.store, *args]))
    assert got["code"] == 0, got["stderr"]
    assert got["loaded"] == [], args
    assert len(got["stdout"].strip().splitlines()) > 3  # it printed its answer


def test_partitions_of_loads_none_of_them(flight_data) -> None:  # noqa: ANN001
    # the session's store was analyzed without value partitions: the command says so (exit 1)
    got = _fresh(_RUN, json.dumps(["--store", flight_data.store, "partitions-of", "sales", "city", "Berlin"]))
    assert got["code"] == 1 and "value partitions" in got["stderr"]
    assert got["loaded"] == []


def test_query_loads_none_of_them(flight_server) -> None:  # noqa: ANN001
    for kind in (["statistics", "sales", "-c", "price"], ["top", "sales", "-c", "city"], ["tables"]):
        got = _fresh(_RUN, json.dumps(["query", *kind, "--server", flight_server.location, "--token", GOOD_TOKEN]))
        assert got["code"] == 0, got["stderr"]
        assert got["loaded"] == [], kind
