"""Table names: a name that could leave the store or that no file system takes is refused before
any work, by the CLI, the API and the job, and nothing is created anywhere (issue #33)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from engine.cli.console import metastore
from engine.exceptions import InvalidArgumentError
from engine.names import MAX_NAME_BYTES, check_table_name, table_name_problem

BAD_NAMES = ["../escaped", "/abs", "a/b", "a\\b", "", ".", "..", "x" * 256, "é" * 128, "a\nb", "a\x00b", "../../tmp/x"]


def listing(root: Path) -> set[str]:
    """Every path below ``root`` (files and directories), relative."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def table_and_store(tmp_path: Path) -> tuple[Path, Path]:
    """A table pandas wrote (two Hive partitions) and a store path beside it (not created)."""
    import pandas as pd

    table = tmp_path / "lake" / "sales"
    for part in (0, 1):
        (table / f"part={part}").mkdir(parents=True)
        pd.DataFrame({"price": [1.5, 2.5, None], "city": ["Oslo", "Rome", "Oslo"]}).to_parquet(table / f"part={part}" / "data.parquet")
    return table, tmp_path / "stores" / "store"


@pytest.mark.parametrize("name", BAD_NAMES)
def test_cli_analyze_refuses_a_bad_name_before_any_work(table_and_store: tuple[Path, Path], name: str) -> None:
    table, store = table_and_store
    root = table.parents[1]  # the store's parent's parent: holds the table and the store's parent
    before = listing(root)
    result = CliRunner().invoke(metastore, ["--store", str(store), "analyze", str(table), "--name", name])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: bad table name"), result.output
    assert "Traceback" not in result.output
    assert listing(root) == before  # nothing created: no store, no runs/, nothing beside or above
    assert not (root.parent / "escaped").exists() and not Path("/abs").exists()


@pytest.mark.parametrize("name", ["../escaped", "/abs", "a/b", "x" * 300])
def test_api_analyze_refuses_a_bad_name_before_any_work(table_and_store: tuple[Path, Path], name: str) -> None:
    from engine.api import analyze

    table, store = table_and_store
    root = table.parents[1]
    before = listing(root)
    with pytest.raises(InvalidArgumentError, match="bad table name"):
        analyze(str(table), str(store), name=name)
    assert listing(root) == before


def test_the_job_refuses_a_bad_name_of_its_source(table_and_store: tuple[Path, Path]) -> None:
    """The job checks its source's name too (every entry point starts it): refused before Ray starts."""
    from engine.runtime.analyze import analyze_source
    from engine.sources import open_table

    table, store = table_and_store
    source = open_table(str(table), name="../escaped")
    root = table.parents[1]
    before = listing(root)
    with pytest.raises(InvalidArgumentError, match="bad table name"):
        analyze_source(source, str(store))
    assert listing(root) == before


@given(st.text(min_size=0, max_size=300))
def test_an_accepted_name_is_one_directory_of_the_store(name: str) -> None:
    """The law, against the OS's own path rules: an accepted name joined to a store is a direct
    child of it, named as given, and short enough for a directory name."""
    problem = table_name_problem(name)
    store = "/store/root"
    if problem is None:
        joined = os.path.normpath(os.path.join(store, name))
        assert os.path.dirname(joined) == store and os.path.basename(joined) == name
        assert len(name.encode("utf-8")) <= MAX_NAME_BYTES and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
    else:
        with pytest.raises(InvalidArgumentError, match="bad table name"):
            check_table_name(name)


@pytest.mark.parametrize("name", ["sales", "sales-2026", "part=1", "Ærø", "a b", "x" * 255, "..a", "a..b"])
def test_good_names_can_be_made_as_directories(tmp_path: Path, name: str) -> None:
    assert check_table_name(name) == name
    (tmp_path / name).mkdir()  # the file system takes it
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("command", [["show"], ["history"], ["verify"], ["gc", "--dry-run"], ["rebuild"], ["config"], ["prune", "--before", "2"]])
@pytest.mark.parametrize("name", ["x" * 300, "../x", "a\x01b"])
def test_cli_commands_on_a_table_refuse_a_bad_name_in_one_line(tmp_path: Path, command: list[str], name: str) -> None:
    """Every command naming a table of the store: one line, exit 1 (a name over 255 bytes was a
    traceback from the first path built of it)."""
    store = tmp_path / "store"
    store.mkdir()
    result = CliRunner().invoke(metastore, ["--store", str(store), command[0], name, *command[1:]])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: bad table name"), result.output
    assert list(store.iterdir()) == []
