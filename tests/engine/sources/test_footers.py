"""Footers read when a directory table is listed: here, in a thread pool, or in Ray tasks
(engine/runtime/footers.py); whoever reads them, the table and the errors are the same."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.exceptions import InvalidFileError, MetastoreError, SchemaDriftError
from engine.sources import footers as footers_module
from engine.sources import open_table
from engine.sources.footers import Footer, FooterChunk, FooterReader, read_footers
from engine.sources.parquet import _FOOTERS
from tests.damaged_files import DAMAGES, write_damaged


def write(path: Path, table: pa.Table, **kwargs: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def drifting_table(root: Path) -> Path:
    """30 files: widened, added and metadata-carrying columns, in several runs of schemas."""
    for i in range(30):
        cols = {"id": pa.array([i, i + 1], pa.int32() if i < 10 else pa.int64())}
        if i >= 20:
            cols["note"] = pa.array(["a", None])
        t = pa.table(cols)
        if i == 12:  # a writer's schema metadata (pandas'): dropped
            t = t.replace_schema_metadata({"pandas": f"index {i}"})
        if i == 25:  # field metadata of a later file: the first appearance's (none) is kept
            t = t.cast(pa.schema([f.with_metadata({"origin": "25"}) if f.name == "note" else f for f in t.schema]))
        write(root / f"d={i % 4}" / f"part-{i:03d}.parquet", t)
    return root


def in_process(chunk: int = 7):
    """A FetchFooters reading in chunks here, as the Ray tasks do (through FooterReader.read_chunk, pickled)."""
    calls: list[int] = []

    def fetch(reader: FooterReader, paths: Sequence[str]) -> list[Footer] | None:
        reader = pickle.loads(pickle.dumps(reader))  # as a task receives it
        calls.append(len(paths))
        out: list[Footer] = []
        for i in range(0, len(paths), chunk):
            got = pickle.loads(pickle.dumps(reader.read_chunk(paths[i : i + chunk], max_threads=4)))
            out.extend(got.footers())
        return out

    fetch.calls = calls  # type: ignore[attr-defined]
    return fetch


def same_table(a, b) -> None:
    assert a.schema() == b.schema() and [f.metadata for f in a.schema()] == [f.metadata for f in b.schema()]
    assert a.partitions() == b.partitions()
    assert a.snapshot_id() == b.snapshot_id()


def test_a_chunk_sends_each_schema_once() -> None:
    s1, s2 = pa.schema([("a", pa.int64())]), pa.schema([("a", pa.int64()), ("b", pa.string())])
    footers = [(1, s1), (2, s1), (3, s2), (4, s1.with_metadata({"pandas": "..."})), (5, s2)]
    chunk = FooterChunk.of(footers)
    assert chunk.rows == (1, 2, 3, 4, 5) and chunk.schema_ids == (0, 0, 1, 0, 1)
    assert chunk.schemas == (s1, s2) and all(s.metadata is None for s in chunk.schemas)
    assert [(n, s) for n, s in chunk.footers()] == [(n, s) for n, s in footers]  # equal, metadata aside
    assert FooterChunk.of([]).footers() == []


def test_footers_read_elsewhere_give_the_same_table(tmp_path: Path) -> None:
    root = drifting_table(tmp_path / "t")
    _FOOTERS.clear()
    here = open_table(str(root))
    _FOOTERS.clear()
    fetch = in_process()
    elsewhere = open_table(str(root), footers=fetch)
    assert fetch.calls == [30]
    same_table(here, elsewhere)
    assert elsewhere.schema().field("id").type == pa.int64() and elsewhere.schema().field("note").nullable
    assert sum(p.row_count for p in elsewhere.partitions()) == 60
    fetch = in_process()
    again = open_table(str(root), footers=fetch)  # unchanged local files: from the cache, nothing fetched
    assert fetch.calls == []
    same_table(here, again)


def test_a_fetch_that_declines_leaves_the_footers_to_the_listing(tmp_path: Path) -> None:
    root = drifting_table(tmp_path / "t")
    _FOOTERS.clear()
    asked: list[int] = []
    source = open_table(str(root), footers=lambda reader, paths: asked.append(len(paths)))
    assert asked == [30] and sum(p.row_count for p in source.partitions()) == 60


def damaged_tables(root: Path) -> dict[str, Path]:
    out = {}
    # (a file holding the partition column with another value than its folder is no listing
    # error since polars' tables are read: the values are checked as they are read,
    # tests/engine/sources/test_parquet.py::test_partition_column_the_files_hold_too)
    for damage in (*DAMAGES, "incompatible"):
        t = root / damage
        for i in range(6):
            write(t / f"p={i}" / "data.parquet", pa.table({"x": [i, i + 1]}))
        bad = t / "p=3" / "bad.parquet"
        if damage in DAMAGES:
            write_damaged(bad, (t / "p=3" / "data.parquet").read_bytes(), damage)
        else:
            write(bad, pa.table({"x": ["now a string"]}))
        if damage != "incompatible":  # footers are read before schemas are unified
            (t / "p=4" / "later-bad.parquet").write_bytes(b"PAR1 also bad")  # the first bad file in path order is named
        out[damage] = t
    return out


def error_of(root: Path, **kwargs) -> MetastoreError:
    _FOOTERS.clear()
    with pytest.raises(MetastoreError) as info:
        open_table(str(root), **kwargs)
    return info.value


def test_bad_files_fail_the_listing_with_the_same_error_wherever_read(tmp_path: Path) -> None:
    for damage, root in damaged_tables(tmp_path).items():
        here = error_of(root)
        elsewhere = error_of(root, footers=in_process(chunk=2))
        assert (type(elsewhere), str(elsewhere)) == (type(here), str(here)), damage
        expected = {"incompatible": SchemaDriftError}.get(damage, InvalidFileError)
        assert type(here) is expected and f"{root}/p=3/bad.parquet" in str(here), (damage, str(here))


def test_slow_file_systems_are_read_in_a_pool_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local files are read one after the other while the first ones come fast; a slow file
    system (a network mount) sends the rest to a pool: same footers, same first error."""
    root = drifting_table(tmp_path / "t")
    paths = sorted(str(p) for p in root.rglob("*.parquet"))
    reader = FooterReader(pa.fs.LocalFileSystem(), str(root), str(root))
    sequential = read_footers(paths, reader.read, local=True, max_threads=1)
    monkeypatch.setattr(footers_module, "_PROBE_FILES", 3)
    monkeypatch.setattr(footers_module, "_SLOW_FILE_S", 0.0)  # every file system is slow
    pooled = read_footers(paths, reader.read, local=True, max_threads=8)
    assert [(n, s) for n, s in pooled] == [(n, s) for n, s in sequential]
    (root / "d=1" / "part-015.parquet").write_bytes(b"not parquet")
    (root / "d=3" / "part-027.parquet").write_bytes(b"")
    for threads in (1, 8):
        with pytest.raises(InvalidFileError, match="part-015.parquet: not a Parquet file"):
            read_footers(sorted(str(p) for p in root.rglob("*.parquet")), reader.read, local=True, max_threads=threads)


# ---------------------------------------------------------------- in Ray tasks (engine/runtime/footers.py)
@pytest.mark.ray
def test_footers_read_in_ray_tasks(ray_runtime, tmp_path: Path) -> None:
    from engine.runtime.footers import InTasks

    root = drifting_table(tmp_path / "t")
    _FOOTERS.clear()
    here = open_table(str(root))
    _FOOTERS.clear()
    assert InTasks(min_files=31)(FooterReader(pa.fs.LocalFileSystem(), str(root), str(root)), ["x"] * 30) is None  # too few
    same_table(here, open_table(str(root), footers=InTasks(min_files=1)))
    for damage, bad in damaged_tables(tmp_path / "bad").items():
        expected = error_of(bad)
        got = error_of(bad, footers=InTasks(min_files=1))
        assert (type(got), str(got)) == (type(expected), str(expected)), damage


@pytest.mark.ray
def test_an_analyze_of_many_files_reads_footers_in_tasks_and_refuses_a_bad_one(ray_runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.api import analyze, open_statistics
    from engine.exceptions import StatisticsNotFoundError
    from engine.runtime import footers as runtime_footers
    from engine.store import Store

    monkeypatch.setattr(runtime_footers, "MIN_FILES", 1)
    fetched: list[int] = []
    real = runtime_footers.InTasks.__call__

    def counted(self, reader, paths):  # noqa: ANN001, ANN202
        got = real(self, reader, paths)
        fetched.append(len(got or []))
        return got

    monkeypatch.setattr(runtime_footers.InTasks, "__call__", counted)
    root = drifting_table(tmp_path / "t")
    _FOOTERS.clear()
    result = analyze(str(root), str(tmp_path / "store"), user_statistics=[])
    assert fetched == [30] and result.rows == 60
    assert open_statistics(str(tmp_path / "store"), "t").statistics().num_rows > 0
    bad = damaged_tables(tmp_path / "bad")["garbage_footer"]
    with pytest.raises(InvalidFileError, match=f"{bad}/p=3/bad.parquet: "):
        analyze(str(bad), str(tmp_path / "store2"), user_statistics=[])
    with pytest.raises(StatisticsNotFoundError):
        Store(str(tmp_path / "store2")).current("garbage_footer")
