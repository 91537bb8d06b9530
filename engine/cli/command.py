"""What every ``metastore`` command shares: the settings the group's global options set
(--store/--output/--debug, also accepted after a command's name), the command class that
checks a TABLE name before it runs, the group class that turns deliberate errors into one
line on stderr and exit code 1, the group's commands loaded on first use (``LazyCommands``),
and ``command``, the decorator each command module uses.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import click

from engine import config
from engine.cli.output import Output, make_output
from engine.exceptions import MetastoreError

DEFAULT_STORE = ".metastore"  # engine.api.DEFAULT_STORE (not imported here: keeps --help fast)
STORE_ENV = config.STORE.name


#: Errors shown as one line (exit 1) instead of a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (MetastoreError, FileNotFoundError, PermissionError)


@dataclass
class Settings:
    store: str = DEFAULT_STORE
    output: str = "text"
    debug: bool = False

    @property
    def json(self) -> bool:
        return self.output == "json"

    def out(self) -> Output:
        return make_output(self.output)


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines) if lines else type(exc).__name__


#: commands whose TABLE argument is a table's location, not a name in the store
#: (quantiles: a location, or a name of the store it checks itself when it is one)
#: (query: a name, checked in engine/cli/flight.py, except query analyze's location)
TABLE_IS_A_LOCATION = frozenset({"analyze", "publish", "quantiles", "query"})


class MetastoreCommand(click.Command):
    """A command whose TABLE argument, a name in the store, is checked before it runs (engine/names.py):
    a name no file system takes is one line, not a traceback from the first path built of it."""

    def invoke(self, ctx: click.Context) -> Any:
        table = ctx.params.get("table")
        location = self.name in TABLE_IS_A_LOCATION and not (self.name == "quantiles" and ctx.params.get("approximate"))
        if isinstance(table, str) and not location:
            from engine.names import check_table_name

            check_table_name(table)
        return super().invoke(ctx)


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, each loaded from its module when first looked up.

    Why: a command's module imports what its options need (analyze: the table formats and
    the job's options; query: Flight's request table), and ``metastore show`` should load
    none of that (start-up, issue #30 target 5). ``where`` maps a name to ``module:function``;
    click looks a command up (``get_command``) only to run it or to list it in ``--help``,
    which loads every module. Membership and the names (``in``, iterating) load nothing.
    """

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            module, _, function = self._where[name].partition(":")
            command = getattr(importlib.import_module(module), function)
            if not isinstance(command, click.Command) or command.name != name:
                raise TypeError(f"{self._where[name]} is not the click command {name!r}")
            self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        yield from self._where
        yield from (name for name in self._loaded if name not in self._where)

    def __len__(self) -> int:
        return len(self._where.keys() | self._loaded.keys())


class MetastoreGroup(click.Group):
    """Turns deliberate errors into ``error: ...`` on stderr and exit code 1."""

    command_class = MetastoreCommand

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            settings = ctx.find_object(Settings)
            if settings is not None and settings.debug:
                traceback.print_exception(exc, file=sys.stderr)
            click.echo(f"error: {one_line(exc)}", err=True)
            ctx.exit(1)


def _override(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """Callback of a command-level copy of a global option: overrides the group's value when given."""

    def callback(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value is not None and value is not False:
            setattr(ctx.ensure_object(Settings), name, value)

    return callback


def common_options(store: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--store/--output/--debug, also accepted after the command name (``metastore show t --output json``)."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("--debug", is_flag=True, default=False, expose_value=False, callback=_override("debug"), help="Show tracebacks of errors.")(
            f
        )
        f = click.option(
            "--output", "-o", type=click.Choice(["text", "json"]), default=None, expose_value=False,
            callback=_override("output"), help="Output format (default: the global --output).",
        )(f)  # fmt: skip
        if store:
            f = click.option(
                "--store", "-s", metavar="DIR_OR_URI", default=None, expose_value=False,
                callback=_override("store"), help="Statistics store (default: the global --store).",
            )(f)  # fmt: skip
        return f

    return decorate


def command(name: str | None = None, **attrs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """``click.command`` making a :class:`MetastoreCommand` (engine/cli/console.py adds it to the group)."""
    return click.command(name, cls=MetastoreCommand, **attrs)
