"""A deleted transaction is found, whatever its position, and gc then deletes nothing (issue #21, item 7).

The table is published the way analyze publishes (``Store.publish``: manifest.json, one
catalog transaction, then ``CURRENT``), five jobs with a checkpoint after the third; real
statistics files are on disk, so gc has something to lose. The crash-injection test deletes
each transaction file in turn from a copy of that store and checks every consumer: the
catalog's verify, the store-level verify, the cheap check ``metastore show`` warns with, and
gc (refused, nothing deleted; forced, it proceeds). Rebuild repairs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from catalog_testkit import job_output, write_job
from click.testing import CliRunner

from engine.catalog import Catalog, integrity, rebuild, schema_fingerprint
from engine.catalog.integrity import ProblemKind
from engine.cli.console import metastore
from engine.exceptions import CatalogCorruptError
from engine.store import Store

TABLE = "t"
JOBS = 5
CHECKPOINT_AT = 3
COLUMNS = [["a", "int64"], ["b", "string"]]


def _publish(store: str, i: int) -> None:
    job = f"job{i}"
    # job 0 writes both partitions, later jobs replace p=0 (p=1 stays with job 0's files)
    parts = {"p=0": 10 + i, "p=1": 20} if i == 0 else {"p=0": 10 + i}
    got = write_job(store, TABLE, job, f"snap{i}", f"2026-01-01T00:00:0{i}Z", parts, columns=[tuple(c) for c in COLUMNS])
    partitions = got["partitions"] + ([] if i == 0 else [{"key": "p=1", "rows": 20, "inherited": True}])
    fingerprint = schema_fingerprint(COLUMNS)
    Store(store).publish(job_output(store, TABLE, job, f"snap{i}", partitions, {}, fingerprint, extra={"columns": COLUMNS}))
    if i + 1 == CHECKPOINT_AT:
        Catalog.open(store, TABLE).write_checkpoint()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> str:
    store = str(tmp_path_factory.mktemp("integrity") / "store")
    for i in range(JOBS):
        _publish(store, i)
    cat = Catalog.open(store, TABLE)
    assert cat.state().txn_id == JOBS and cat.verify()["checkpoints_checked"] == 1
    assert integrity.verify(store, TABLE).ok
    return store


def _copy(pristine: str, tmp_path: Path) -> str:
    dst = tmp_path / "store"
    shutil.copytree(pristine, dst)
    return str(dst)


def _txn_file(store: str, i: int) -> Path:
    (path,) = (Path(store) / TABLE / "catalog" / "transactions").glob(f"{i:020d}.*.transaction")
    return path


def _run_files(store: str) -> list[str]:
    root = Path(store) / TABLE
    return sorted(str(p.relative_to(root)) for p in (root / "runs").rglob("*") if p.is_file())


def test_the_intact_store_verifies_and_collects(pristine: str, tmp_path: Path) -> None:
    store = _copy(pristine, tmp_path)
    assert integrity.quick_check(store, TABLE) == []
    report = integrity.verify(store, TABLE)
    assert report.ok and report.transactions == JOBS and report.checkpoints_checked == 1
    # every referenced file was read against a checksum the writer's FileRef... here publish_job had none:
    # the testkit's files carry no checksum, so they are checked by size only
    assert report.files_checked + report.files_unchecked == len([f for f in _run_files(store) if f.endswith(".parquet")])
    result = Catalog.open(store, TABLE).gc(0, now=time.time() + 60)
    # p=0's files of jobs 0..3 are superseded, but every kept transaction references them: nothing to collect
    assert result.deleted == []


@pytest.mark.parametrize("position", range(1, JOBS + 1))
def test_a_deleted_transaction_is_found_at_every_position_and_gc_deletes_nothing(pristine: str, tmp_path: Path, position: int) -> None:
    store = _copy(pristine, tmp_path)
    victim = _txn_file(store, position)
    victim.unlink()
    before = _run_files(store)

    # the catalog's own verify (the evidence inside the catalog, or CURRENT for the newest)
    report = integrity.verify(store, TABLE)
    assert not report.ok
    missing = [p for p in report.problems if p.kind is ProblemKind.MISSING_TRANSACTION]
    assert missing, report.problems
    assert any(victim.name in p.message for p in missing), (victim.name, [p.message for p in missing])
    with pytest.raises(CatalogCorruptError):
        report.raise_for_problems()
    if position < JOBS:  # the newest one leaves a log that is whole in itself: only CURRENT and the runs tell
        with pytest.raises(CatalogCorruptError, match=f"transaction {position}"):
            Catalog.open(store, TABLE, up_to_last_good=True).verify()
    # what show warns with
    warnings = integrity.quick_check(store, TABLE)
    assert warnings and any(f"{position:020d}" in w for w in warnings), warnings

    # gc refuses and deletes nothing, even with no grace period
    cat = Catalog.open(store, TABLE, up_to_last_good=True)
    with pytest.raises(CatalogCorruptError, match="gc refused"):
        cat.gc(0, now=time.time() + 3600)
    assert _run_files(store) == before
    # forced, it goes on (and only lists, here): what the lost transaction referenced is then fair game
    forced = cat.gc(0, now=time.time() + 3600, dry_run=True, force=True)
    assert forced.dry_run and set(forced.deleted) <= set(before)
    if position == 1:
        assert "runs/job0/table/statistics.parquet" in forced.deleted

    # the CLI: verify exits 1 naming the file, show warns, gc refuses with one line
    runner = CliRunner()
    got = runner.invoke(metastore, ["--store", store, "verify", TABLE, "--no-files"])
    assert got.exit_code == 1 and victim.name in got.output
    got = runner.invoke(metastore, ["--store", store, "gc", TABLE, "--grace-period", "0"])
    assert got.exit_code == 1 and "gc refused" in got.output and len(got.output.strip().splitlines()) == 1
    assert _run_files(store) == before

    # rebuild repairs: verify passes, CURRENT names the rebuilt head, gc runs
    rebuild(store, TABLE, replace=True)
    assert integrity.verify(store, TABLE).ok, integrity.verify(store, TABLE).problems
    assert integrity.quick_check(store, TABLE) == []
    Catalog.open(store, TABLE).gc(0, now=time.time() + 3600)
    assert runner.invoke(metastore, ["--store", store, "verify", TABLE]).exit_code == 0


def test_show_warns_of_a_missing_newest_transaction(pristine: str, tmp_path: Path) -> None:
    store = _copy(pristine, tmp_path)
    _txn_file(store, JOBS).unlink()
    warnings = integrity.quick_check(store, TABLE)
    assert len(warnings) == 1 and f"CURRENT names transaction {JOBS}" in warnings[0] and "the log ends at 4" in warnings[0]


def test_a_prune_is_not_a_missing_transaction_but_a_lost_prune_record_is(pristine: str, tmp_path: Path) -> None:
    store = _copy(pristine, tmp_path)
    cat = Catalog.open(store, TABLE)
    deleted = cat.prune(CHECKPOINT_AT).deleted
    assert [n[:20] for n in deleted] == [f"{i:020d}" for i in range(1, CHECKPOINT_AT)]
    assert integrity.verify(store, TABLE).ok
    assert Catalog.open(store, TABLE).missing_transactions() == []
    cat.gc(0, now=time.time() + 3600)  # not refused
    # the record gone, the same files look like lost transactions
    (record,) = (Path(store) / TABLE / "catalog" / "transactions").glob("*.pruned")
    record.unlink()
    (m,) = Catalog.open(store, TABLE).missing_transactions()
    assert (m.first, m.last) == (1, CHECKPOINT_AT - 1) and "no prune recorded" in m.evidence
    # an older catalog pruned before the record existed: pruning again at the same checkpoint records it
    assert Catalog.open(store, TABLE).prune(CHECKPOINT_AT).deleted == []
    assert integrity.verify(store, TABLE).ok


def test_runs_and_an_old_current_pointer_are_evidence_too(pristine: str, tmp_path: Path) -> None:
    store = _copy(pristine, tmp_path)
    _txn_file(store, JOBS).unlink()
    current = Path(store) / TABLE / "CURRENT"
    # a pointer written before it named its transaction: only the job
    current.write_text(json.dumps({"job_id": f"job{JOBS - 1}", "published_at": "2026-01-01T00:00:00+00:00"}))
    (m,) = integrity.missing_transactions(Catalog.open(store, TABLE), runs=False)
    assert m.first == JOBS and m.last is None and f"job{JOBS - 1}" in m.evidence
    # no pointer at all: the newest run's manifest, written after the newest kept transaction
    current.unlink()
    manifest = Path(store) / TABLE / "runs" / f"job{JOBS - 1}" / "manifest.json"
    later = time.time() + 5
    os.utime(manifest, (later, later))
    (m,) = integrity.missing_transactions(Catalog.open(store, TABLE))
    assert m.first == JOBS and f"run job{JOBS - 1}" in m.evidence
    with pytest.raises(CatalogCorruptError, match="gc refused"):
        Catalog.open(store, TABLE).gc(0, now=time.time() + 3600)


def test_checksums_round_trip_through_the_encoding_and_older_files_read_without_one() -> None:
    from engine.catalog import catalog_pb2 as pb
    from engine.catalog import codec
    from engine.catalog.catalog import as_files
    from engine.catalog.model import (
        AddPartition,
        FileRef,
        StatisticsFiles,
        TransactionRecord,
    )
    from engine.exceptions import InvalidArgumentError

    files = StatisticsFiles(
        FileRef("runs/j/s.parquet", 10, "crc32:0a0b0c0d"), FileRef("runs/j/f.parquet", 11, ""), FileRef("runs/j/h.parquet", 12, "crc32:ffffffff")
    )
    rec = TransactionRecord(
        1, codec.ROOT_UUID, "", "6d657461-7374-6f72-6563-000000000001", TABLE, "s", 1, "j", "tok", (AddPartition("p=0", files, 3, "s", "fp"),)
    )
    assert codec.decode_transaction(codec.encode_transaction(rec)) == rec
    # a FileRef written before the field existed (fields 1 and 2 only) reads with no checksum
    old = pb.FileRef(path="runs/j/s.parquet", size=10).SerializeToString()
    msg = pb.FileRef()
    msg.ParseFromString(old)
    assert msg.checksum == ""
    assert (
        as_files(
            {"statistics": ("a/s", 1, "crc32:00000001"), "frequencies": {"path": "a/f", "size": 2}, "histograms": ("a/h", 3)}
        ).statistics.checksum
        == "crc32:00000001"
    )
    with pytest.raises(InvalidArgumentError, match="unknown checksum"):
        as_files({"statistics": ("a/s", 1, "md5:00"), "frequencies": ("a/f", 2), "histograms": ("a/h", 3)})


def test_a_table_published_before_the_catalog_is_not_missing_transactions(pristine: str, tmp_path: Path) -> None:
    store = _copy(pristine, tmp_path)
    shutil.rmtree(Path(store) / TABLE / "catalog")  # what a pre-catalog store has: runs, manifests, CURRENT
    (Path(store) / TABLE / "CURRENT").write_text(json.dumps({"job_id": f"job{JOBS - 1}", "published_at": "2026-01-01T00:00:00+00:00"}))
    assert integrity.missing_transactions(Catalog.open(store, TABLE)) == []
    assert integrity.verify(store, TABLE).ok
