"""Damaged statistics files give a clear error naming the file, never a silent wrong answer
(issue #21, items 8, 9 and 10).

One small table is analyzed once (real Ray, real files); each test damages a copy of its store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine import lookup
from engine.api import analyze, open_statistics
from engine.catalog import Catalog, integrity, rebuild
from engine.cli.console import metastore
from engine.exceptions import StatisticsFileCorruptError
from engine.files import checksum, layout

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def small_store(ray_runtime, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("integrity_data")
    rng = np.random.default_rng(3)
    for p in range(2):
        (root / "t" / f"p={p}").mkdir(parents=True)
        pq.write_table(pa.table({"x": pa.array(rng.integers(0, 9, 40), pa.int64())}), root / "t" / f"p={p}" / "a.parquet")
    store = str(root / "store")
    result = analyze(str(root / "t"), store=store, user_statistics=[])
    return store, result.table


def _copy(small_store: tuple[str, str], tmp_path: Path) -> tuple[str, str]:
    store, table = small_store
    dst = tmp_path / "store"
    shutil.copytree(store, dst)
    lookup.clear_cache()
    return str(dst), table


def _table_file(store: str, table: str, name: str) -> Path:
    st = Catalog.open(store, table).state()
    return Path(store) / table / st.table_statistics.files.by_name()[name].path


def test_every_file_is_recorded_with_the_checksum_of_its_bytes(small_store, tmp_path) -> None:
    store, table = _copy(small_store, tmp_path)
    st = Catalog.open(store, table).state()
    refs = [r for e in st.partitions.values() for r in e.files.refs()] + list(st.table_statistics.files.refs())
    assert len(refs) == 9
    # the file index's three files, a table counts file per group of discrete columns and the
    # table's merged state (table_state.arrow; the table's properties name them)
    extra = st.table_statistics.extra_files()
    table_counts = json.loads(st.table_statistics.properties["table_counts"])
    n_counts = len(table_counts["files"]) + (1 if table_counts.get("state") else 0)
    assert len(extra) == 3 + n_counts and len(table_counts["files"]) >= 1
    assert any(ref.path.endswith("/table_state.arrow") for ref in extra)
    refs += extra
    for ref in refs:
        data = (Path(store) / table / ref.path).read_bytes()
        assert ref.size == len(data) and ref.checksum == checksum.of_bytes(data)  # independent: the bytes on disk
    # the partitions' partial states (inheritance): recorded in their statistics.parquet, checked too
    for e in st.partitions.values():
        md = pq.read_metadata(Path(store) / table / e.files.statistics.path).metadata
        recorded = json.loads(md[layout.PARTIAL_STATE_KEY.encode()])
        assert sorted(recorded) == ["partial_counts.arrow", "partial_state.arrow"]
        for name, ref in recorded.items():
            data = (Path(store) / table / e.files.frequencies.path).with_name(name).read_bytes()
            assert ref == {"size": len(data), "checksum": checksum.of_bytes(data)}
    report = integrity.verify(store, table)
    assert report.ok and report.files_checked == 9 + 3 + n_counts + 4 and report.files_unchecked == 0


def test_a_bit_flip_at_every_byte_of_a_statistics_file_is_detected(small_store, tmp_path) -> None:
    store, table = _copy(small_store, tmp_path)
    path = _table_file(store, table, "statistics.parquet")
    good = path.read_bytes()
    ts = open_statistics(store, table)
    expected = ts.statistics(["x"]).to_pylist()
    # every bit of every byte, against the recorded checksum (CRC-32 detects every single-bit error)
    recorded = Catalog.open(store, table).state().table_statistics.files.statistics.checksum
    buf = bytearray(good)
    for i in range(len(buf)):
        for bit in range(8):
            buf[i] ^= 1 << bit
            assert checksum.of_bytes(bytes(buf)) != recorded, (i, bit)
            buf[i] ^= 1 << bit
    # and one flip per byte position through the lookups' first read of the file: every one refused, naming it
    for i in range(len(good)):
        damaged = bytearray(good)
        damaged[i] ^= 1 << (i % 8)
        path.write_bytes(bytes(damaged))
        lookup.clear_cache()
        with pytest.raises(StatisticsFileCorruptError, match="statistics file damaged: .*statistics.parquet"):
            open_statistics(store, table).statistics(["x"])
    path.write_bytes(good)
    lookup.clear_cache()
    assert open_statistics(store, table).statistics(["x"]).to_pylist() == expected


def test_verify_reads_every_file_against_its_checksum(small_store, tmp_path) -> None:
    store, table = _copy(small_store, tmp_path)
    path = _table_file(store, table, "histograms.parquet")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # same size, one bit
    path.write_bytes(bytes(data))
    report = integrity.verify(store, table)
    assert [p.kind.value for p in report.problems] == ["damaged_file"] and str(path) in report.problems[0].message
    got = CliRunner().invoke(metastore, ["--store", store, "verify", table])
    assert got.exit_code == 1 and str(path) in got.output
    assert CliRunner().invoke(metastore, ["--store", store, "verify", table, "--no-files"]).exit_code == 0


def test_the_first_read_pays_the_check_warm_lookups_do_not(small_store, tmp_path, monkeypatch) -> None:
    store, table = _copy(small_store, tmp_path)
    calls = []
    real = checksum.of_bytes
    monkeypatch.setattr(checksum, "of_bytes", lambda data: (calls.append(len(data)), real(data))[1])
    ts = open_statistics(store, table)
    for _ in range(3):
        ts.statistics(["x"])
        ts.top_frequencies("x", 3)
    assert len(calls) == 2  # statistics.parquet and frequencies.parquet, once each


def _without_checksums(store: str, table: str) -> None:
    """The catalog as an older Metastore wrote it: no checksums (rebuilt from manifests that have none)."""
    for manifest in (Path(store) / table / "runs").glob("*/manifest.json"):
        m = json.loads(manifest.read_text())
        for ref in m["table_files"].values():
            ref.pop("checksum", None)
        for p in m["partitions"]:
            for ref in p.get("files", {}).values():
                ref.pop("checksum", None)
        manifest.write_text(json.dumps(m))
    rebuild(store, table, replace=True)
    st = Catalog.open(store, table).state()
    assert not any(r.checksum for r in st.table_statistics.files.refs())


@pytest.mark.parametrize("checksums", [True, False], ids=["with_checksums", "older_catalog"])
def test_a_truncated_statistics_file_is_one_line_naming_it(small_store, tmp_path, checksums) -> None:
    store, table = _copy(small_store, tmp_path)
    if not checksums:
        _without_checksums(store, table)
        assert open_statistics(store, table).statistics(["x"]).num_rows == 1  # older catalogs still read
    path = _table_file(store, table, "statistics.parquet")
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 9, 0):
        path.write_bytes(data[:cut])
        lookup.clear_cache()
        got = CliRunner().invoke(metastore, ["--store", store, "show", table])
        assert got.exit_code == 1, got.output
        lines = got.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: statistics file damaged: ") and str(path) in lines[0], got.output
    report = integrity.verify(store, table)
    assert any(p.kind.value == "damaged_file" and str(path) in p.message for p in report.problems)


def test_tables_lists_the_healthy_tables_and_marks_a_damaged_one(small_store, tmp_path) -> None:
    store, table = _copy(small_store, tmp_path)
    shutil.copytree(Path(store) / table, Path(store) / "broken")
    for f in (Path(store) / "broken" / "catalog" / "transactions").glob("*.transaction"):
        f.write_bytes(f.read_bytes()[:-3])  # every transaction truncated: the catalog cannot be read
    got = CliRunner().invoke(metastore, ["--store", store, "--output", "json", "tables"])
    assert got.exit_code == 0, got.output
    rows = {r["table"]: r for r in json.loads(got.output)["tables"]}
    assert set(rows) == {table, "broken"}
    assert rows[table].get("error") is None and rows[table]["rows"] == 80
    assert "catalog of table 'broken'" in rows["broken"]["error"]
    text = CliRunner().invoke(metastore, ["--store", store, "tables"])
    assert text.exit_code == 0 and "damaged" in text.output and table in text.output


def _partial_state_file(store: str, table: str, name: str) -> tuple[str, Path]:
    """(partition key, path) of one partition's partial-state file ``name``."""
    key, e = sorted(Catalog.open(store, table).state().partitions.items())[0]
    return key, (Path(store) / table / e.files.frequencies.path).with_name(name)


@pytest.mark.parametrize("name", ["partial_state.arrow", "partial_counts.arrow"])
def test_a_bit_flip_in_a_partial_state_is_found_by_verify(small_store, tmp_path, name: str) -> None:
    store, table = _copy(small_store, tmp_path)
    _, path = _partial_state_file(store, table, name)
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x04  # same size, one bit
    path.write_bytes(bytes(data))
    report = integrity.verify(store, table)
    assert [p.kind.value for p in report.problems] == ["damaged_file"], report.problems
    assert str(path) in report.problems[0].message and "statistics.parquet recorded" in report.problems[0].message
    path.unlink()
    assert [p.kind.value for p in integrity.verify(store, table).problems] == ["missing_file"]


def test_a_bit_flip_in_a_partial_state_is_found_on_read(small_store, tmp_path) -> None:
    store, table = _copy(small_store, tmp_path)
    key, path = _partial_state_file(store, table, "partial_state.arrow")
    expected = open_statistics(store, table).statistics(["x"], key, sketches=True).to_pylist()
    lookup.clear_cache()
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0x01
    path.write_bytes(bytes(damaged))
    # the lookups: the partition's sketches are read from its partial state
    with pytest.raises(StatisticsFileCorruptError, match=f"statistics file damaged: {path}"):
        open_statistics(store, table).statistics(["x"], key, sketches=True)
    # inheritance: a re-analyze of the unchanged data does not load it, it recomputes the partition
    data_dir = str(Path(small_store[0]).parent / "t")
    result = analyze(data_dir, store=store, user_statistics=[])
    assert result.recomputed == 1 and result.inherited == 1, (result.recomputed, result.inherited)
    assert any(str(path) in w and "damaged" in w for w in result.warnings), result.warnings
    lookup.clear_cache()
    assert open_statistics(store, table).statistics(["x"], key, sketches=True).to_pylist() == expected
