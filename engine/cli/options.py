"""Options shared by the ``metastore`` commands: one meaning per short option, one duration syntax.

Short options (every command that has the option uses the same letter for it):

  -c  --column(s)   -p  --partition   -k  --top   -w  --where   -q  --quantile (probability)
  -s  --store       -o  --output      -b  --bins-shown

A duration is ``30s``, ``15m``, ``1h``, ``7d``, ``2w`` or a bare number of seconds
(``3600``: what scripts written for the seconds-only options pass), everywhere one is asked
for: gc --grace-period, expire, config, serve --poll-interval, query --timeout.

Also ``--runtime`` (runtime_option) and the parsing of a repeatable, comma-separable --column
(split_columns). The choices of one command (analyze --format, query's KIND) are in its module:
this module imports click alone, as every command loads it (start-up, issue #30).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

DURATION_HELP = "30s, 15m, 1h, 7d, 2w or seconds"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}  # as engine.catalog.retention's


class Duration(click.ParamType[float, Any]):
    """A duration in seconds (float) from ``30s``/``15m``/``1h``/``7d``/``2w`` or a bare number of seconds."""

    name = "duration"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            seconds = parse_duration(str(value), fail=lambda m: self.fail(m, param, ctx))
        if seconds < self.minimum:
            self.fail(f"{value!r} is shorter than {self.minimum:g}s", param, ctx)
        return seconds


def parse_duration(text: str, fail: Callable[[str], Any] | None = None) -> float:
    """Seconds of ``text`` (``90s``, ``15m``, ``12h``, ``7d``, ``2w`` or a number of seconds)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*([smhdw]?)\s*", text)
    if not m:
        message = f"{text!r} is not a duration: write a number and a unit ({DURATION_HELP}), e.g. 90s, 12h, 7d"
        if fail is not None:
            fail(message)
        raise click.BadParameter(message)
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def partition_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002 - click's name
    """``--partition/-p KEY``: the same letter in every command."""
    return click.option("--partition", "-p", metavar="KEY", help=help)


def runtime_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002
    """``--runtime auto|ray|local`` (docs/SCALING.md, "When Ray starts"): engine.options.Runtime's
    values, AnalyzeOptions' default (imported by the commands that have the option only)."""
    from engine.options import AnalyzeOptions, Runtime

    return click.option(
        "--runtime", type=click.Choice([r.value for r in Runtime]), default=AnalyzeOptions.runtime.value, show_default=True, help=help
    )


def columns_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002
    """``--column/-c C`` (repeatable; comma-separated also)."""
    return click.option("--column", "-c", "columns", multiple=True, metavar="C", help=help)


def where_option(help: str, required: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002
    """``--where/-w 'PREDICATE'`` (docs/PREDICATES.md)."""
    return click.option("--where", "-w", metavar="'PREDICATE'", required=required, help=help)


def split_columns(values: tuple[str, ...]) -> list[str] | None:
    """The column names of a repeatable, comma-separable ``--column`` (None: none given)."""
    names = [c.strip() for v in values for c in v.split(",") if c.strip()]
    return names or None
