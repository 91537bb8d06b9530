"""The console's commands load from their modules when they run (engine/cli/console.py ``COMMANDS``,
engine/cli/command.py ``LazyCommands``): every name leads to the click command of that name,
``--help`` lists each with its one-line help, and a command's run loads its own module alone
(issue #30 target 5: ``metastore show`` loaded every command's module, analyze's options and
Flight's request table with them). The modules each command loads are checked in fresh
processes by tests/flight_server/test_startup_imports.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from engine.cli.command import LazyCommands
from engine.cli.console import COMMANDS, metastore

REPO = Path(__file__).resolve().parents[3]


def test_every_name_is_the_command_of_that_name_in_its_module() -> None:
    assert set(metastore.commands) == set(COMMANDS) and len(metastore.commands) == len(COMMANDS)
    for name, where in COMMANDS.items():
        module, _, function = where.partition(":")
        assert module.startswith("engine.cli.commands.")
        command = metastore.commands[name]
        assert isinstance(command, click.Command) and command.name == name
        assert command is getattr(sys.modules[module], function)


def test_help_lists_every_command_with_its_one_line_help() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(metastore, ["--help"])
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:")[1]
    for name in COMMANDS:
        short = metastore.commands[name].get_short_help_str(limit=150)
        assert f"  {name} " in listed and short in " ".join(listed.split()), name


def test_lookups_of_names_load_nothing_and_a_wrong_entry_is_refused() -> None:
    commands = LazyCommands({"show": "engine.cli.commands.read:show", "bogus": "engine.cli.commands.read:tables"})
    assert "show" in commands and "tables" not in commands and list(commands) == ["show", "bogus"]
    assert commands._loaded == {}  # membership and names loaded no command
    assert commands["show"].name == "show"
    with pytest.raises(TypeError, match="not the click command 'bogus'"):
        commands["bogus"]
    with pytest.raises(KeyError):
        commands["tables"]
    del commands["bogus"]
    assert list(commands) == ["show"] and len(commands) == 1


def test_a_command_loads_its_own_module_only() -> None:
    code = (
        "import json, sys\n"
        "from engine.cli.console import main\n"
        "try:\n    main(['tables', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('engine.cli.commands.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["engine.cli.commands.read"], out.stderr
