"""prune, gc and expire."""

from __future__ import annotations

import time

import pytest
from catalog_testkit import CountingIO, files_for, job_output, write_job

from engine import fileio
from engine.catalog import Catalog, io_for, publish_job, schema_fingerprint
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError

COLS = [("a", "int64"), ("b", "string")]
FP = schema_fingerprint(COLS)


def _names(store: str, cat: Catalog) -> list[str]:
    return io_for(store).list_names(cat.transactions_uri)


def _commit_jobs(cat: Catalog, jobs: int, partitions: int, **partition_options: str) -> None:
    """Transactions of jobs j0, j1, ... at snapshots s0, s1, ...: job i adds partition ``p={i % partitions}`` with i rows."""
    for i in range(jobs):
        txn = cat.begin(f"j{i}", f"s{i}")
        txn.add_partition(f"p={i % partitions}", files_for(f"j{i}", f"p={i % partitions}"), i, **partition_options)
        txn.commit()


def test_prune_deletes_only_older_files(store_uri: str) -> None:
    cat = Catalog.open(store_uri, "t", checkpoint_interval=3)
    _commit_jobs(cat, 8, partitions=2, schema_fingerprint="x")
    state = cat.state()
    with pytest.raises(InvalidArgumentError, match="no checkpoint 5"):
        cat.prune(5)
    result = cat.prune(6)
    assert [n[:20] for n in result.deleted] == [f"{i:020d}" for i in (1, 2, 3, 3, 4, 5)]
    assert [(n[:20], n.rsplit(".", 1)[1]) for n in _names(store_uri, cat)] == [
        (f"{6:020d}", "checkpoint"),
        (f"{6:020d}", "pruned"),  # the prune's record: transactions 1..5 are pruned, not lost
        (f"{6:020d}", "transaction"),
        (f"{7:020d}", "transaction"),
        (f"{8:020d}", "transaction"),
    ]
    reopened = Catalog.open(store_uri, "t")
    assert reopened.state() == state
    assert [h.id for h in reopened.history()] == [6, 7, 8]
    assert reopened.verify()["checkpoints_checked"] == 1
    assert reopened.state_at(6) == cat.state_at(6)
    assert cat.prune(6).deleted == []  # idempotent


def _publish(store: str, job: str, snap: str, created: str, parts: dict[str, int], **kw) -> None:
    written = write_job(store, "t", job, snap, created, parts, COLS, manifest={"columns": COLS})
    publish_job(store, job_output(store, "t", job, snap, written["partitions"], {}, FP, extra={"columns": COLS}), **kw)


def test_gc_keeps_what_kept_transactions_reference(store_uri: str) -> None:
    _publish(store_uri, "j1", "s1", "2026-01-01T00:00:00+00:00", {"p=0": 1, "p=1": 2}, checkpoint_interval=2)
    _publish(store_uri, "j2", "s2", "2026-01-02T00:00:00+00:00", {"p=0": 3, "p=1": 4}, checkpoint_interval=2)
    write_job(store_uri, "t", "j0-crashed", "s0", "2025-12-31T00:00:00+00:00", {"p=0": 9})  # never published
    cat = Catalog.open(store_uri, "t")
    later = time.time() + 3600

    # every file is fresh: nothing goes within the grace period (an in-flight job is safe)
    fresh = cat.gc(600)
    assert fresh.deleted == [] and fresh.recent == 6 and fresh.referenced == 20
    # an hour later: only the crashed job's files (j1's are still referenced by transaction 1)
    dry = cat.gc(600, dry_run=True, now=later)
    assert dry.dry_run and sorted(dry.deleted) == sorted(
        [f"runs/j0-crashed/partitions/p=0/{k}.parquet" for k in ("statistics", "frequencies", "histograms")]
        + [f"runs/j0-crashed/table/{k}.parquet" for k in ("statistics", "frequencies", "histograms")]
    )
    assert all(fileio.exists(fileio.join(cat.table_uri, p)) for p in dry.deleted)  # dry run deletes nothing
    done = cat.gc(600, now=later)
    assert done.deleted == dry.deleted and not done.dry_run
    assert not any(fileio.exists(fileio.join(cat.table_uri, p)) for p in done.deleted)
    assert done.referenced == 20  # 2 jobs x 9 statistics files + their manifest.json

    # after pruning transaction 1 away, j1's files are garbage; j2's stay
    cat.prune(2)
    done = cat.gc(600, now=later)
    assert sorted(done.deleted) == sorted(
        [f"runs/j1/partitions/p={i}/{k}.parquet" for i in (0, 1) for k in ("statistics", "frequencies", "histograms")]
        + [f"runs/j1/table/{k}.parquet" for k in ("statistics", "frequencies", "histograms")]
        + ["runs/j1/manifest.json"]
    )
    state = Catalog.open(store_uri, "t").state()
    assert all(fileio.exists(fileio.join(cat.table_uri, p)) for p in state.referenced_paths())
    assert cat.gc(600, now=later).deleted == []


def test_gc_keeps_tombstoned_files_and_refuses_a_damaged_log(store_uri: str) -> None:
    _publish(store_uri, "j1", "s1", "2026-01-01T00:00:00+00:00", {"p=0": 1, "p=1": 2})
    _publish(store_uri, "j2", "s2", "2026-01-02T00:00:00+00:00", {"p=0": 3})  # p=1 dropped upstream
    cat = Catalog.open(store_uri, "t")
    assert sorted(cat.state().tombstones) == ["p=1"]
    later = time.time() + 3600
    assert cat.gc(0, now=later).deleted == []
    # a damaged transaction: gc cannot know what is referenced, so it deletes nothing
    uri = cat.history()[0].uri
    io_for(store_uri).delete(uri)
    fileio.write_bytes(uri, b"garbage")
    with pytest.raises(Exception, match="damaged transaction"):
        Catalog(store_uri, "t").gc(0, now=later)


def test_expire_removes_what_no_snapshot_of_interest_references(store_uri: str) -> None:
    _publish(store_uri, "j1", "s1", "2026-01-01T00:00:00+00:00", {"p=0": 1, "p=1": 2})
    _publish(store_uri, "j2", "s2", "2026-01-02T00:00:00+00:00", {"p=0": 3})  # p=1 tombstoned
    cat = Catalog.open(store_uri, "t")
    assert cat.expire(["s1"]) is None  # snapshot s1 still needs p=1's statistics
    info = cat.expire([], job_id="expire-1")
    assert info is not None and info.txn_id == 3
    st = Catalog.open(store_uri, "t").state()
    assert sorted(st.entries) == ["p=0"] and st.snapshot_id == "s2"
    assert cat.history()[-1].job_id == "expire-1"
    assert cat.expire([]) is None
    # time travel still sees p=1 at s1
    assert sorted(cat.state_at_snapshot("s1").partitions) == ["p=0", "p=1"]


def test_opening_reads_one_checkpoint_and_the_transactions_after_it(store_uri: str) -> None:
    cat = Catalog.open(store_uri, "t", checkpoint_interval=10)
    _commit_jobs(cat, 37, partitions=5)
    counting = CountingIO(io_for(store_uri))
    reopened = Catalog.open(store_uri, "t", io=counting)
    assert reopened.state() == cat.state()
    assert counting.lists == 1
    assert [(r[:20], r.rsplit(".", 1)[1]) for r in counting.reads] == [(f"{30:020d}", "checkpoint")] + [
        (f"{i:020d}", "transaction") for i in range(31, 38)
    ]
    # time travel: the newest checkpoint at or before the id, then the transactions up to it
    counting.reads.clear()
    assert reopened.state_at(24) == Catalog.open(store_uri, "t", use_checkpoints=False).state_at(24)
    assert [r[:20] for r in counting.reads] == [f"{i:020d}" for i in (20, 21, 22, 23, 24)]
    counting.reads.clear()
    assert reopened.state_at_snapshot("s5").txn_id == 6


def test_interrupted_prune_leaves_a_usable_catalog(store_uri: str) -> None:
    from catalog_testkit import FaultyIO, fast_io

    cat = Catalog.open(store_uri, "t", checkpoint_interval=3)
    _commit_jobs(cat, 4, partitions=4)  # p=0 .. p=3
    head = cat.state()
    faulty = FaultyIO(fast_io(store_uri), fail_at=2, mode="error_before")  # prune record, deletes txn 1, fails on txn 2
    with pytest.raises(OSError, match="injected"):
        Catalog.open(store_uri, "t", io=faulty).prune(3)
    reopened = Catalog.open(store_uri, "t")
    assert reopened.state() == head
    assert [h.id for h in reopened.history()] == [2, 3, 4]
    assert reopened.verify()["checkpoints_checked"] == 1
    with pytest.raises(StatisticsNotFoundError, match="history before it was pruned"):
        reopened.state_at(2)
    assert reopened.state_at(3) == cat.state_at(3)
    with pytest.raises(StatisticsNotFoundError, match="cannot be replayed from its transactions alone"):
        Catalog.open(store_uri, "t", use_checkpoints=False)
    assert reopened.gc(0, dry_run=True, now=time.time() + 60).deleted == []  # no files on disk; nothing referenced is lost
    assert reopened.prune(3).deleted[0].startswith(f"{2:020d}.")  # finishing the prune
