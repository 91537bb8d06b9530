"""The analyze defaults are AnalyzeOptions': every entry point offers the same ones.

The console and the Flight client load no engine.options at start-up (it imports the
kernels), so they spell the histogram sizes out: checked here against the options."""

from __future__ import annotations

import inspect

from engine import api
from engine.options import ALLOWED_BINS, AnalyzeOptions


def test_console_bins_are_the_options() -> None:
    from engine.cli.commands.analyze import analyze

    option = next(p for p in analyze.params if p.name == "bins")
    assert option.default == str(AnalyzeOptions.bins)
    assert tuple(option.type.choices) == tuple(map(str, ALLOWED_BINS))


def test_flight_client_bins_are_the_options() -> None:
    from flight_server.client import MetastoreClient

    assert inspect.signature(MetastoreClient.analyze).parameters["bins"].default == AnalyzeOptions.bins


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
        assert option.default == Runtime.AUTO.value, command.name
