"""The analyze defaults are AnalyzeOptions': every entry point offers the same ones.

The console and the Flight client read them from engine.options (a module that imports no
kernels, no numpy or pyarrow: checked here too); these tests check that every entry point's
default is the options' own, so a default changed in AnalyzeOptions changes everywhere."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

from engine import api
from engine.options import ALLOWED_BINS, AnalyzeOptions, FrequencyStrategy

REPO = Path(__file__).resolve().parents[2]


def test_console_bins_are_the_options() -> None:
    from engine.cli.commands.analyze import analyze

    option = next(p for p in analyze.params if p.name == "bins")
    assert option.default == str(AnalyzeOptions().bins)
    assert tuple(option.type.choices) == tuple(map(str, ALLOWED_BINS))
    option = next(p for p in analyze.params if p.name == "frequencies")
    assert option.default == AnalyzeOptions().frequencies.value
    assert tuple(option.type.choices) == tuple(s.value for s in FrequencyStrategy)
    flags = analyze.make_context("analyze", ["data/sales"]).params  # a command line without options: the defaults
    assert (flags["no_inherit"], AnalyzeOptions().inherit) == (False, True)
    assert (flags["no_file_index"], AnalyzeOptions().file_index) == (False, True)
    assert (flags["value_partitions"], AnalyzeOptions().value_partitions) == (False, False)


def test_flight_client_bins_are_the_options() -> None:
    from flight_server.client import MetastoreClient

    params = inspect.signature(MetastoreClient.analyze).parameters
    for name in ("bins", "inherit", "value_partitions"):
        assert params[name].default == getattr(AnalyzeOptions(), name), name


def test_api_defaults_are_the_options() -> None:
    params = inspect.signature(api.analyze).parameters
    for name in ("bins", "mostly_distinct_ratio", "frequencies", "inherit", "value_partitions", "file_index", "bloom_columns"):
        assert params[name].default == getattr(AnalyzeOptions(), name), name


def test_console_runtimes_are_the_options() -> None:
    from engine.cli.commands.analyze import analyze
    from engine.cli.commands.quantiles import quantiles
    from engine.options import Runtime

    for command in (analyze, quantiles):
        option = next(p for p in command.params if p.name == "runtime")
        assert tuple(option.type.choices) == tuple(r.value for r in Runtime), command.name
        assert option.default == AnalyzeOptions().runtime.value == Runtime.AUTO.value, command.name


def test_console_names_the_placement_thresholds() -> None:
    """--runtime's help states the size below which auto runs in process: placement's own."""
    from engine.cli.commands.analyze import analyze
    from engine.cli.commands.quantiles import quantiles
    from engine.runtime.placement import LOCAL_MAX_BYTES, LOCAL_MAX_ROWS

    for command in (analyze, quantiles):
        text = " ".join(next(p for p in command.params if p.name == "runtime").help.split())
        assert f"at most {LOCAL_MAX_BYTES // 2**20} MiB and {LOCAL_MAX_ROWS:,} rows" in text, command.name


def test_options_load_no_kernels() -> None:
    """engine.options (imported by the console and the Flight client at start-up) loads neither numpy nor pyarrow."""
    code = "import sys, engine.options; print(sorted(m for m in ('numpy', 'pyarrow', 'ray') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.strip() == "[]"


def test_the_analyze_action_describes_the_options_defaults() -> None:
    """list_actions' description of the analyze action (flight_server/requests.py, which loads no
    engine module: --help stays fast) states AnalyzeOptions' defaults; the action applies them."""
    import json

    from flight_server.requests import REQUESTS

    description = next(r for r in REQUESTS if r.name == "analyze").description
    defaults = AnalyzeOptions()
    for name in ("bins", "inherit", "value_partitions"):
        assert f'"{name}": {json.dumps(getattr(defaults, name))}' in description, name
