"""Linearity: no committed transaction is lost or reordered; one winner per id, locally and on S3."""

from __future__ import annotations

import threading

import pytest
from catalog_testkit import CountingIO, files_for

from engine.catalog import Catalog, as_files, codec, commit_with_retry, io_for
from engine.exceptions import CommitConflictError, InvalidArgumentError


def add(txn, key: str, job: str, variant: int = 0) -> None:  # noqa: ANN001
    txn.add_partition(key, files_for(job, key, variant), 10 + variant, schema_fingerprint="s")


def test_sequential_commits_form_a_chain(store_uri: str) -> None:
    cat = Catalog.open(store_uri, "t", checkpoint_interval=4)
    for i in range(10):
        txn = cat.begin(f"job{i}", f"snap{i}")
        add(txn, f"p={i % 3}", f"job{i}", i)
        info = txn.commit()
        assert info.txn_id == i + 1
        assert info.checkpoint_written == ((i + 1) % 4 == 0)
    history = Catalog.open(store_uri, "t").history()
    assert [h.id for h in history] == list(range(1, 11))
    assert [h.job_id for h in history] == [f"job{i}" for i in range(10)]
    assert [h.snapshot_id for h in history] == [f"snap{i}" for i in range(10)]
    assert history[0].parent_uuid == "" and history[0].uuid == codec.ROOT_UUID
    for prev, cur in zip(history, history[1:]):
        assert cur.parent_uuid == prev.uuid
        assert cur.timestamp_us >= prev.timestamp_us
    assert [h.has_checkpoint for h in history] == [(i + 1) % 4 == 0 for i in range(10)]
    assert Catalog.open(store_uri, "t").verify() == {"transactions": 10, "checkpoints": 2, "checkpoints_checked": 2}
    # names: 20-digit zero-padded id, 8 hex of the uuid
    assert history[4].uri.endswith(f"/catalog/transactions/00000000000000000005.{history[4].uuid.replace('-', '')[:8]}.transaction")


def test_second_writer_with_the_same_id_is_refused(store_uri: str) -> None:
    a = Catalog.open(store_uri, "t")
    b = Catalog.open(store_uri, "t")
    add(a.begin("ja", "s1"), "p=1", "ja")  # a builder that is never committed changes nothing
    ta, tb = a.begin("ja", "s1"), b.begin("jb", "s1")
    add(ta, "p=1", "ja")
    add(tb, "p=2", "jb")
    assert ta.commit().txn_id == 1
    with pytest.raises(CommitConflictError, match=r"transaction 1 \(00000000000000000001\.[0-9a-f]{8}\.transaction\) was already committed") as err:
        tb.commit()
    assert err.value.txn_id == 1
    with pytest.raises(InvalidArgumentError, match="already committed"):
        tb.commit()
    # the loser wrote nothing; after a refresh it commits the next id on top of the winner
    assert sorted(Catalog.open(store_uri, "t").state().partitions) == ["p=1"]
    assert b.refresh().txn_id == 1
    tb = b.begin("jb", "s2")
    add(tb, "p=2", "jb")
    assert tb.commit().txn_id == 2
    assert sorted(Catalog.open(store_uri, "t").state().partitions) == ["p=1", "p=2"]
    # a's view is stale now: id 2 is taken
    with pytest.raises(CommitConflictError, match="transaction 2"):
        a.begin("ja", "s3").commit()


def test_refresh_reads_only_new_transactions(store_uri: str) -> None:
    writer = Catalog.open(store_uri, "t", checkpoint_interval=0)
    for i in range(5):
        txn = writer.begin(f"j{i}", "s")
        add(txn, f"p={i}", f"j{i}")
        txn.commit()
    counting = CountingIO(io_for(store_uri))
    reader = Catalog.open(store_uri, "t", io=counting)
    assert len(counting.reads) == 5 and counting.lists == 1
    for i in range(5, 8):
        txn = writer.begin(f"j{i}", "s")
        add(txn, f"p={i}", f"j{i}")
        txn.commit()
    counting.reads.clear()
    assert reader.refresh() == writer.state()
    assert [r[:20] for r in counting.reads] == [f"{i:020d}" for i in (6, 7, 8)]
    counting.reads.clear()
    assert reader.refresh().txn_id == 8 and counting.reads == []


def _race(store_uri: str, writers: int, rounds: int) -> list[list[str]]:
    """Every round, all writers (own Catalog objects, like separate processes) commit the same id."""
    barrier = threading.Barrier(writers)
    outcomes: list[list[str]] = [[] for _ in range(rounds)]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            cat = Catalog.open(store_uri, "t", checkpoint_interval=3)
            for r in range(rounds):
                barrier.wait()
                cat.refresh()
                assert cat.state().txn_id == r
                barrier.wait()
                txn = cat.begin(f"w{w}-r{r}", f"s{r}")
                add(txn, f"p={w}", f"w{w}-r{r}")
                try:
                    txn.commit()
                    result = f"won:{w}"
                except CommitConflictError as exc:
                    assert exc.txn_id == r + 1
                    result = "lost"
                with lock:
                    outcomes[r].append(result)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return outcomes


def test_concurrent_writers_one_winner_per_id(store_uri: str) -> None:
    rounds = 6
    outcomes = _race(store_uri, writers=8, rounds=rounds)
    winners = []
    for r, results in enumerate(outcomes):
        won = [x for x in results if x.startswith("won")]
        assert len(won) == 1, (r, results)
        assert results.count("lost") == 7
        winners.append(int(won[0].split(":")[1]))
    cat = Catalog.open(store_uri, "t")
    history = cat.history()
    assert [h.id for h in history] == list(range(1, rounds + 1))
    assert [h.job_id for h in history] == [f"w{w}-r{r}" for r, w in enumerate(winners)]
    cat.verify()


def test_concurrent_writers_with_retries_lose_nothing(store_uri: str) -> None:
    writers, per_writer = 6, 5
    errors: list[BaseException] = []

    def work(w: int) -> None:
        try:
            cat = Catalog.open(store_uri, "t", checkpoint_interval=4)
            for i in range(per_writer):
                job = f"w{w}-{i}"
                commit_with_retry(cat, job, f"s-{job}", lambda txn, state, job=job, w=w: add(txn, f"p={w}", job, len(state.entries)), attempts=100)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    cat = Catalog.open(store_uri, "t")
    history = cat.history()
    assert [h.id for h in history] == list(range(1, writers * per_writer + 1))
    jobs = [h.job_id for h in history]
    assert sorted(jobs) == sorted(f"w{w}-{i}" for w in range(writers) for i in range(per_writer))
    for w in range(writers):  # each writer's own commits keep their order
        mine = [j for j in jobs if j.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(per_writer)]
    assert cat.verify()["checkpoints_checked"] == len(history) // 4
    assert sorted(cat.state().partitions) == [f"p={w}" for w in range(writers)]


def test_transactions_are_validated_when_built(tmp_path) -> None:
    cat = Catalog.open(str(tmp_path), "t")
    txn = cat.begin("j", "s")
    with pytest.raises(InvalidArgumentError, match="no partition 'p=9'"):
        txn.remove_partition("p=9")
    with pytest.raises(InvalidArgumentError, match="relative"):
        txn.add_partition("p=1", {k: ("/abs/x.parquet", 1) for k in ("statistics", "frequencies", "histograms")}, 1)
    with pytest.raises(InvalidArgumentError, match="lack the histograms"):
        txn.add_partition("p=1", {"statistics": ("a", 1), "frequencies": ("b", 1)}, 1)
    with pytest.raises(InvalidArgumentError, match="newer than this Metastore supports"):
        txn.upgrade(2)
    add(txn, "p=1", "j")
    txn.tombstone_partition("p=1")
    with pytest.raises(InvalidArgumentError, match="already tombstoned"):
        txn.tombstone_partition("p=1")
    txn.remove_partition("p=1")
    info = txn.commit()
    assert info.state.entries == {} and info.state.format_version == 1
    assert as_files({f"{k}.parquet": (f"{k}.parquet", 3) for k in ("statistics", "frequencies", "histograms")}).statistics.size == 3
    with pytest.raises(InvalidArgumentError):
        Catalog.open(str(tmp_path), "a/b")
    with pytest.raises(InvalidArgumentError, match="local directory or an s3"):
        Catalog.open("gs://bucket/x", "t")
