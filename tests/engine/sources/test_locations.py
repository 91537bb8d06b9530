"""A table format's metadata cannot send the reader out of the table (issue #33): a Delta add
action, an Iceberg manifest entry or a Hudi file slice naming a file outside the table's
location (``../``, an absolute ``file://`` URI) refuses the table with one line naming the
entry, before anything is read: through open_table, the CLI (nothing published) and the
Flight server's analyze action under ``--analyze-root``. A data root lets such files in."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from engine.cli.console import metastore
from engine.exceptions import InvalidTableLayoutError
from engine.sources import open_table
from engine.sources.locations import Locations

SECRET = "SECRET-password-1"


def secret_file(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "x.parquet"
    pq.write_table(pa.table({"s": [SECRET]}), path)
    return path


def delta_naming(table: Path, add_path: str) -> str:
    """A real delta-rs table whose one add action is rewritten to ``add_path``."""
    write_deltalake(str(table), pa.table({"s": ["a", "b"]}))
    (log,) = glob.glob(f"{table}/_delta_log/*.json")
    actions = [json.loads(line) for line in Path(log).read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["path"] = add_path
    Path(log).write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(table)


def iceberg_naming(root: Path, outside: Path) -> str:
    """A pyiceberg table (its own data file inside) with an outside file added to it by
    pyiceberg's ``add_files`` (a manifest entry naming it)."""
    root.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("t", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table("db.t", schema=pa.schema([pa.field("s", pa.string())]))
    table.append(pa.table({"s": ["a", "b"]}))
    table.add_files([f"file://{outside}"])
    return str(table.location()).removeprefix("file://")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return secret_file(tmp_path / "outside")


def test_locations_are_checked_lexically_and_by_resolved_path(tmp_path: Path) -> None:
    table = tmp_path / "t"
    (table / "data").mkdir(parents=True)
    (tmp_path / "link").symlink_to(table)
    at = Locations(str(table))
    assert at.inside(f"{table}/data/x.parquet") and at.inside(f"file://{table}/data/x.parquet")
    assert not at.inside(f"{table}/../outside/x.parquet") and not at.inside("file:///etc/passwd") and not at.inside(f"{table}x/y")
    assert not at.inside("s3://bucket/t/x.parquet")
    assert Locations(str(tmp_path / "link")).inside(f"{table}/data/x.parquet")  # its absolute names, through a link
    assert Locations("s3://b/t").inside("s3://b/t/x.parquet") and not Locations("s3://b/t").inside("s3://b/t/../u/x.parquet")
    assert Locations(str(table), [str(tmp_path / "outside")]).inside(f"{tmp_path}/outside/x.parquet")
    with pytest.raises(InvalidTableLayoutError, match=rf"^{table}: the entry 'e' names /etc/passwd, outside the table's location: not read$"):
        at.check("/etc/passwd", "the entry 'e'")


@pytest.mark.parametrize("kind", ["relative", "file-uri"])
def test_a_delta_add_action_outside_the_table_is_refused(tmp_path: Path, outside: Path, kind: str) -> None:
    add_path = "../outside/x.parquet" if kind == "relative" else f"file://{outside}"
    uri = delta_naming(tmp_path / "t", add_path)
    with pytest.raises(
        InvalidTableLayoutError, match=rf"^{uri}: Delta add action '{add_path}' \(version 0\) names .*, outside the table's location: not read$"
    ):
        open_table(uri)
    source = open_table(uri, data_roots=[str(tmp_path / "outside")])  # allowed there
    (part,) = source.partitions()
    assert source.read_batches(part, ["s"]).__next__().column("s").to_pylist() == [SECRET]


def test_an_iceberg_manifest_entry_outside_the_table_is_refused(tmp_path: Path, outside: Path) -> None:
    location = iceberg_naming(tmp_path / "lake", outside)
    with pytest.raises(InvalidTableLayoutError, match=rf"Iceberg manifest entry \(data file\) 'file://{outside}' names file://{outside}, outside"):
        open_table(location)
    source = open_table(location, data_roots=[str(outside.parent)])
    assert sum(p.row_count for p in source.partitions()) == 3


@pytest.mark.ray
@pytest.mark.usefixtures("ray_runtime")
def test_the_cli_refuses_in_one_line_and_publishes_nothing(tmp_path: Path, outside: Path) -> None:
    store = tmp_path / "store"
    for table, entry in [
        (delta_naming(tmp_path / "d1", "../outside/x.parquet"), "Delta add action '../outside/x.parquet'"),
        (delta_naming(tmp_path / "d2", "file:///etc/passwd"), "Delta add action 'file:///etc/passwd'"),
        (iceberg_naming(tmp_path / "lake", outside), f"Iceberg manifest entry (data file) 'file://{outside}'"),
    ]:
        result = CliRunner().invoke(metastore, ["--store", str(store), "analyze", table, "--name", "t"])
        assert result.exit_code == 1, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and entry in lines[0] and "outside the table's location" in lines[0], result.stderr
        assert SECRET not in result.output
    assert not store.exists() or not any(store.rglob("statistics.parquet"))
    ok = CliRunner().invoke(
        metastore, ["--store", str(store), "--output", "json", "analyze", str(tmp_path / "d1"), "--data-root", str(outside.parent)]
    )
    assert ok.exit_code == 0, ok.output  # the operator lets the outside folder in


def test_a_delta_deletion_vector_outside_the_table_is_refused(tmp_path: Path, outside: Path) -> None:
    """A vector stored by absolute path (storage type ``p``) outside the table: refused before
    delta-rs reads it."""
    from tests.engine.sources.test_delta_dv import _live_adds, delete_rows

    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"s": ["a", "b", "c"]}), configuration={"delta.enableDeletionVectors": "true"})
    delete_rows(uri, {_live_adds(uri)[0]["path"]: [1]}, "u")
    assert open_table(uri).partitions()[0].row_count == 2  # a vector inside the table: read
    last = max(Path(uri, "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in last.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["deletionVector"].update(storageType="p", pathOrInlineDv=f"file://{outside}")
    last.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    with pytest.raises(InvalidTableLayoutError, match=rf"^{uri}: Delta deletion vector 'file://{outside}' names file://{outside}, outside"):
        open_table(uri)


def test_hudi_file_slices_are_checked(tmp_path: Path) -> None:
    """hudi-rs names a slice's files relative to the table; one leading out is refused (the
    check alone, on stand-ins for hudi-rs's slices: real tables' slices are inside, as the
    Hudi tests read them)."""
    from types import SimpleNamespace

    from engine.sources.hudi import HudiSource

    table = SimpleNamespace(uri=str(tmp_path / "t"), _instant="20240101000000000")

    def piece(base: str, *logs: str) -> SimpleNamespace:
        return SimpleNamespace(base_file_relative_path=lambda: base, log_files_relative_paths=lambda: list(logs))

    HudiSource._check_locations(table, [piece("city=a/f1_0_20240101000000000.parquet", "city=a/.f1_2024.log.1")], ())
    for bad in [piece("../outside/x.parquet"), piece("city=a/f.parquet", "../../etc/passwd")]:
        with pytest.raises(
            InvalidTableLayoutError, match=r"Hudi file slice '.*' \(instant 20240101000000000\) names .*, outside the table's location"
        ):
            HudiSource._check_locations(table, [bad], ())
