"""Start-up: the read side loads no Ray, numba, pandas or Spark, nor pyarrow.compute or rich's console.

Importing engine.lookup, and running each read command of the console script
(show, tables, history, config, partitions-of, query) in a fresh process, must
leave ``ray``, ``numba``, ``pandas`` and ``pyspark`` out of ``sys.modules``, and
``pyarrow.compute``, ``rich.console`` and ``rich.table`` (issue #20: a regression
of the start-up work fails here, not only in bench/bench_startup.py). ``show``,
``tables`` and ``import engine.lookup`` leave out the engine's modules they do not use
either (``NOT_READ``, issue #30 target 5). Each process prints what it loaded of them
at exit, so the test sees the real process.
"""

from __future__ import annotations

import json
import shutil
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
# what `show`, `tables` and `import engine.lookup` leave out of the engine too (issue #30 target 5,
# bench/HISTORY.md: 60 modules crept in): the catalog's writers (the publish, its retention pass,
# gc, transactions, expiry records, a job's output), the other commands' modules (engine/cli/console.py
# loads a command's module when it runs: analyze's options, Flight's request table), the exact
# subsets' runner and the predicate tree it loads (only `show --exact` registers it), pruning,
# value partitions, the statistics registry (engine/files/layout.py builds its schema on first use)
# and the catalog commands' text views
NOT_READ = (
    "engine.catalog.publish", "engine.catalog.retention", "engine.catalog.gc", "engine.catalog.maintenance",
    "engine.catalog.transaction", "engine.catalog.retention_records", "engine.catalog.job_output",
    "engine.cli.commands.analyze", "engine.cli.commands.demo", "engine.cli.commands.history", "engine.cli.commands.maintenance",
    "engine.cli.commands.quantiles", "engine.cli.commands.query", "engine.cli.commands.servers", "engine.options",
    "flight_server.requests", "engine.runtime.exact", "engine.expressions.tree", "engine.lookup.pruning",
    "engine.lookup.valueparts", "engine.measures.skewness", "engine.cli.catalog_text",
)  # fmt: skip
# `tables` reads each table's published state (engine/store.py), none of its files: no lookups
NOT_IN_TABLES = ("engine.lookup", "engine.lookup.reader", "engine.values")

_RUN = """
import json, sys
sys.argv = ["metastore"] + json.loads(sys.argv[1])
from engine.cli.console import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
import gc
print(json.dumps({"code": code, "loaded": [m for m in %r if m in sys.modules], "gc": gc.isenabled()}))
""" % (HEAVY + LIGHT + NOT_READ + NOT_IN_TABLES,)


def _fresh(code: str, *args: str) -> dict:
    # stdout is a pipe, as for a script; COLUMNS as a terminal of 80 columns would give
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=str(REPO),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "80"}, timeout=120,
    )  # fmt: skip
    assert out.stdout.strip(), out.stderr
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stdout": out.stdout, "stderr": out.stderr}


def _heavy(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m in HEAVY + LIGHT]


def test_importing_the_lookups_loads_none_of_them() -> None:
    got = _fresh(
        "import sys, json, engine.lookup, engine.catalog, engine.store\n"
        f"print(json.dumps({{'loaded': [m for m in {HEAVY + LIGHT + NOT_READ!r} if m in sys.modules]}}))"
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
    if args[0] in ("show", "tables"):
        assert [m for m in got["loaded"] if m not in NOT_IN_TABLES or args[0] == "tables"] == [], args
    else:  # history and config: their commands' modules, catalog_text and (config) the retention policy's
        assert _heavy(got["loaded"]) == [], args
    assert len(got["stdout"].strip().splitlines()) > 3  # it printed its answer
    assert got["gc"] is False  # engine/cli/console.py: a read command's process does without the cycle collector


def test_partitions_of_loads_none_of_them(flight_data) -> None:  # noqa: ANN001
    # the session's store was analyzed without value partitions: the command says so (exit 1)
    got = _fresh(_RUN, json.dumps(["--store", flight_data.store, "partitions-of", "sales", "city", "Berlin"]))
    assert got["code"] == 1 and "value partitions" in got["stderr"]
    assert _heavy(got["loaded"]) == []


def test_query_loads_none_of_them(flight_server) -> None:  # noqa: ANN001
    for kind in (["statistics", "sales", "-c", "price"], ["top", "sales", "-c", "city"], ["tables"]):
        got = _fresh(_RUN, json.dumps(["query", *kind, "--server", flight_server.location, "--token", GOOD_TOKEN]))
        assert got["code"] == 0, got["stderr"]
        assert _heavy(got["loaded"]) == [], kind


def test_show_exact_registers_the_runner_in_a_fresh_process(flight_data, tmp_path: Path) -> None:  # noqa: ANN001
    """``show --where --exact`` computes the subset although the console no longer imports
    engine/runtime/exact.py for every table it opens (engine/cli/opening.py: only with --exact).
    On a copy of the store: the computed subset is stored with the table."""
    store = tmp_path / "store"
    shutil.copytree(flight_data.store, store)
    args = ["--store", str(store), "-o", "json", "show", "sales", "--where", "price > 50", "--exact", "--column", "price"]
    got = _fresh(_RUN, json.dumps(args))
    assert got["code"] == 0, got["stderr"]
    assert "engine.runtime.exact" in got["loaded"]
    doc = json.loads(got["stdout"][: got["stdout"].rindex("\n{")])
    assert doc["exact"] is True and doc["row_count"]["method"] == "computed"
