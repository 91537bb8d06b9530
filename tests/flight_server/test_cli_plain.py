"""Every read command's text output is the same drawn by engine/cli/plain.py or by rich.

The commands run in-process (CliRunner: stdout is not a terminal) at 60, 80 and 200
columns, once as shipped (plain draws what it can) and once with plain turned off
(everything through rich, as before issue #20's start-up work): the bytes must match.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from flight_testkit import GOOD_TOKEN

from engine.cli import plain
from engine.cli.console import metastore

WIDTHS = [60, 80, 200]


def _both(monkeypatch: pytest.MonkeyPatch, width: int, *args: str) -> tuple[str, str]:
    outs = []
    for enabled in (True, False):
        monkeypatch.setattr(plain.Console, "plain_enabled", enabled)
        result = CliRunner(env={"COLUMNS": str(width), "FORCE_COLOR": None, "TTY_COMPATIBLE": None}).invoke(metastore, list(args))
        assert result.exit_code == 0, result.output
        outs.append(result.stdout)
    return outs[0], outs[1]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "args",
    [
        ["show", "sales"],
        ["show", "sales", "--column", "price", "--column", "city"],
        ["show", "sales", "--column", "event_time", "--partition", "part=01"],
        ["show", "sales", "--at", "1"],
        ["show", "wide"],
        ["tables"],
        ["history", "sales"],
        ["config", "sales"],
        ["files", "sales", "--where", "event_date >= 2024-10-01 and id < 5000", "--pruned"],
    ],
    ids=" ".join,
)
def test_read_commands_print_what_rich_prints(flight_data, monkeypatch: pytest.MonkeyPatch, width: int, args: list[str]) -> None:  # noqa: ANN001
    drawn, by_rich = _both(monkeypatch, width, "--store", flight_data.store, *args)
    assert drawn == by_rich
    assert len(drawn.splitlines()) > 3


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    "kind",
    [
        ["statistics", "sales", "-c", "price"], ["top", "sales", "-c", "city"], ["tables"], ["history", "sales"],
        ["staleness", "sales"], ["files", "sales", "-w", "id < 5000"], ["statistics", "sales", "-c", "price", "-w", "city = 'Berlin'"],
    ],
    ids=" ".join,
)  # fmt: skip
def test_query_prints_what_rich_prints(flight_server, monkeypatch: pytest.MonkeyPatch, width: int, kind: list[str]) -> None:  # noqa: ANN001
    drawn, by_rich = _both(monkeypatch, width, "query", *kind, "--server", flight_server.location, "--token", GOOD_TOKEN)
    assert drawn == by_rich
    assert len(drawn.splitlines()) > 2


@pytest.mark.parametrize("plain_enabled", [True, False])
def test_a_store_path_with_brackets_is_printed_as_it_is(flight_data, tmp_path, monkeypatch: pytest.MonkeyPatch, plain_enabled: bool) -> None:  # noqa: ANN001
    # rich read "[/x]" in the path as a closing markup tag: MarkupError before issue #20's fix
    import shutil

    monkeypatch.setattr(plain.Console, "plain_enabled", plain_enabled)
    store = tmp_path / "stats[/x] [bold]"
    empty = tmp_path / "empty[/x]"
    empty.mkdir(parents=True)
    shutil.copytree(flight_data.store, store)

    def words(text: str) -> str:  # wrapped at 60 columns: at the path's space (padding the line) or inside a long word
        return "".join(text.split())

    for width in (60, 200):
        runner = CliRunner(env={"COLUMNS": str(width), "FORCE_COLOR": None, "TTY_COMPATIBLE": None})
        result = runner.invoke(metastore, ["--store", str(store), "tables"])
        assert result.exit_code == 0, result.output
        assert words(f"Tables in {store}") in words(result.stdout)
        result = runner.invoke(metastore, ["--store", str(empty), "tables"])
        assert result.exit_code == 0, result.output
        assert words(f"no tables with published statistics in {empty}") in words(result.stdout)
