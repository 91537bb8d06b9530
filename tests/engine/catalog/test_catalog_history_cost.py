"""A publish's work does not grow with the table's history (issue #18, docs/PERFORMANCE.md "Scaling"),
and it lists each catalog directory once (on S3 a listing is a LIST round trip).

Counted, not timed: the transactions a publish decodes in full (every action built) are the
ones since the last checkpoint, whatever the number of kept transactions; the retention pass
after it reads headers and file paths only, and its gc (which reads every kept transaction's
file paths and lists the runs) runs only when due: at most once per grace period. The answers (history, time travel, retention,
expire, gc, verify) are checked against paths that do not use the new shortcuts: a replay of
every transaction without checkpoints, the full history, and the states' own references.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from engine.catalog import Catalog, JobOutput, JobPartition, codec, commit_with_retry, publish_job, retention
from engine.catalog import replay as catalog_module
from engine.catalog.io import CatalogIO, ListingMemoIO, io_for
from engine.catalog.model import FileRef, StatisticsFiles
from engine.catalog.retention import RetentionPolicy, apply_policy, write_policy
from engine.exceptions import StatisticsExpiredError

PARTITIONS = 12
KINDS = ("statistics", "frequencies", "histograms")


def _files(job: str, key: str | None, root: Path | None) -> StatisticsFiles:
    base = f"runs/{job}/table" if key is None else f"runs/{job}/partitions/{key}"
    refs = []
    for kind in KINDS:
        rel = f"{base}/{kind}.parquet"
        if root is not None:  # real files, for gc
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(b"x" * 10)
        refs.append(FileRef(rel, 10))
    return StatisticsFiles(*refs)


def _output(i: int, root: Path | None = None) -> JobOutput:
    """Publish ``i``: every partition but a rotating quarter (tombstoned) and, from the 6th on,
    the last one (dropped for good: expire removes it), a new snapshot."""
    job = f"job{i:03d}"
    keys = [f"p={k:02d}" for k in range(PARTITIONS) if (k + i) % 4 != 0 and (i <= 5 or k != PARTITIONS - 1)]
    parts = tuple(JobPartition(k, 5, _files(job, k, root)) for k in keys)
    return JobOutput("t", job, f"s{i}", "fp", parts, _files(job, None, root), {"columns": []})


class _CountingIO(CatalogIO):
    """The store's real catalog I/O, counting requests: listings and reads by directory
    (``transactions``, ``retention``), the recursive listings of ``runs`` by :class:`_Counter`."""

    def __init__(self, inner: CatalogIO, counter: _Counter) -> None:
        self.inner, self.counter, self.remote = inner, counter, inner.remote

    @staticmethod
    def _dir(uri: str) -> str:
        return uri.rstrip("/").rsplit("/", 2)[-2]

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        self.counter.lists[dir_uri.rstrip("/").rsplit("/", 1)[-1]] += 1
        return self.inner.list_names(dir_uri, start_after)

    def read(self, uri: str) -> bytes:
        self.counter.reads[self._dir(uri)] += 1
        return self.inner.read(uri)

    def create(self, uri: str, data: bytes) -> None:
        self.inner.create(uri, data)

    def delete(self, uri: str) -> None:
        self.inner.delete(uri)

    def list_files(self, dir_uri: str):  # noqa: ANN201
        return self.inner.list_files(dir_uri)


class _Counter:
    """Decodes (in full, headers only, file paths only: what gc reads of a transaction it has
    not decoded), listings of a table's runs (gc's other cost), and, through :meth:`io`, the
    catalog's listings and reads by directory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = self.headers = self.paths = self.listings = 0
        self.lists: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        real = (codec.decode_transaction, codec.decode_header, codec.decode_paths)
        real_list = CatalogIO.list_files

        def list_files(io: CatalogIO, dir_uri: str):  # noqa: ANN202
            self.listings += 1
            return real_list(io, dir_uri)

        monkeypatch.setattr(CatalogIO, "list_files", list_files)

        def full(data: bytes):  # noqa: ANN202
            self.full += 1
            return real[0](data)

        def header(data: bytes):  # noqa: ANN202
            self.headers += 1
            return real[1](data)

        def paths(data: bytes):  # noqa: ANN202
            self.paths += 1
            return real[2](data)

        monkeypatch.setattr(codec, "decode_transaction", full)
        monkeypatch.setattr(codec, "decode_header", header)
        monkeypatch.setattr(codec, "decode_paths", paths)

    def reset(self) -> None:
        self.full = self.headers = self.paths = self.listings = 0
        self.lists.clear()
        self.reads.clear()

    def io(self, store: str) -> CatalogIO:
        """The store's real catalog I/O, counted."""
        return _CountingIO(io_for(store), self)


@pytest.mark.parametrize("rule", ["count", "bytes"])
def test_a_publish_decodes_a_bounded_number_of_transactions_in_full(rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "store")
    interval = 5 if rule == "count" else 100
    if rule == "bytes":  # the size rule alone: a checkpoint once the transactions since the last outweigh the state
        monkeypatch.setattr(catalog_module, "CHECKPOINT_MIN_BYTES", 0)
    counter = _Counter(monkeypatch)
    full_decodes = {}
    for i in range(1, 41):
        counter.reset()
        publish_job(store, _output(i), checkpoint_interval=interval)
        full_decodes[i] = counter.full
        if i > 1:
            # the retention pass read the older headers, not the transactions
            assert counter.headers <= i
    bound = interval if rule == "count" else 3
    assert max(full_decodes.values()) <= bound, full_decodes
    # the same at the 10th and at the 40th publish: independent of the history (40 kept transactions)
    assert max(full_decodes[i] for i in range(31, 41)) == max(full_decodes[i] for i in range(6, 16))
    cat = Catalog.open(store, "t")
    assert len(cat.headers()) == 40
    checkpoints = [h.id for h in cat.headers() if h.has_checkpoint]
    if rule == "count":
        assert checkpoints == [5, 10, 15, 20, 25, 30, 35, 40]
    else:  # 12 partitions: a checkpoint about every second publish, not every 100th
        assert len(checkpoints) >= 12
    assert cat.verify()["checkpoints_checked"] == len(checkpoints)


def test_answers_with_size_checkpoints_equal_a_full_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_module, "CHECKPOINT_MIN_BYTES", 0)
    store = tmp_path / "store"
    write_policy(Catalog(str(store), "t"), RetentionPolicy(retain_last=100))  # no expiry while building
    for i in range(1, 13):
        publish_job(str(store), _output(i, store / "t"))
    cat = Catalog.open(str(store), "t")
    replay = Catalog.open(str(store), "t", use_checkpoints=False)  # every transaction, no checkpoint
    assert any(h.has_checkpoint for h in cat.headers())
    # history: the headers say what the full history says
    full = replay.history()
    assert [(h.id, h.uuid, h.parent_uuid, h.snapshot_id, h.job_id, h.timestamp_us, h.uri) for h in cat.headers()] == [
        (h.id, h.uuid, h.parent_uuid, h.snapshot_id, h.job_id, h.timestamp_us, h.uri) for h in full
    ]
    # time travel: every state and every snapshot as a replay without checkpoints builds it
    for i in range(1, 13):
        assert Catalog.open(str(store), "t").state_at(i) == replay.state_at(i)
        assert Catalog.open(str(store), "t").state_at_snapshot(f"s{i}").txn_id == i
    states = {i: replay.state_at(i) for i in range(1, 13)}
    # retention: keep the last 3; what gc deletes is exactly what no kept state references
    referenced = set()
    for i in (10, 11, 12):
        referenced |= states[i].referenced_paths()
    on_disk = {str(p.relative_to(store / "t")) for p in (store / "t" / "runs").rglob("*") if p.is_file()}
    older_checkpoints = sum(1 for h in cat.headers() if h.has_checkpoint and h.id < 10)
    result = apply_policy(cat, RetentionPolicy(retain_last=3, gc_grace_s=0), now=time.time() + 60)
    # the transaction files before 10 and the checkpoints among them (prune counts both)
    assert (result.kept_from, result.expired_before, result.transaction_files_deleted) == (10, 10, 9 + older_checkpoints)
    assert result.gc is not None and set(result.gc.deleted) == on_disk - referenced
    assert result.gc.referenced == len(on_disk & referenced)
    # expire removed the tombstones no kept snapshot has live (and kept the kept states' answers)
    after = Catalog.open(str(store), "t")
    head = after.state()
    assert head.txn_id == 13 and set(head.partitions) == set(states[12].partitions)
    live_somewhere = set().union(*(states[i].partitions for i in (10, 11, 12)))
    assert set(head.entries) == live_somewhere
    for i in (10, 11, 12):
        assert after.state_at(i) == states[i]
        # the expire's transaction describes the current snapshot: the newest state of s12
        assert after.state_at_snapshot(f"s{i}").txn_id == (i if i < 12 else 13)
    with pytest.raises(StatisticsExpiredError, match="retain-last 3"):
        after.state_at(9)
    assert [h.id for h in after.headers()] == [10, 11, 12, 13] == [h.id for h in after.history()]
    assert after.verify()["transactions"] == 4


def test_a_checkpoint_by_size_needs_the_sizes_it_did_not_see(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that did not read the transactions since the last checkpoint (unknown sizes)
    falls back on the count rule: the policy never guesses."""
    monkeypatch.setattr(catalog_module, "CHECKPOINT_MIN_BYTES", 0)
    monkeypatch.setattr(catalog_module, "_ENTRY_BYTES_GUESS", 1)
    store = str(tmp_path / "store")
    cat = Catalog.open(store, "t", checkpoint_interval=100)
    txn = cat.begin("j1", "s1")
    txn.add_partition("p=1", _files("j1", "p=1", None), 1)
    assert txn.commit().checkpoint_written  # its own transaction outweighs an empty state
    cat._headers.clear()
    cat._checkpoint_sizes.clear()  # as a writer that opened without reading checkpoint 1 or transaction 1
    txn = cat.begin("j2", "s2")
    txn.add_partition("p=2", _files("j2", "p=2", None), 1)
    assert not txn.commit().checkpoint_written
    assert Catalog.open(store, "t", checkpoint_interval=100).state() == cat.state()


class _Clock:
    """retention's clock, moved on by the test (gc pacing is by the clock, not by sleeping)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset


def test_the_gc_after_a_publish_runs_at_most_once_per_grace_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a policy that expires a state at every publish, the gc (every kept transaction's
    paths, a listing of the runs) runs once the grace period has passed (the first publish
    records a baseline: a new table has nothing to collect): the other publishes read no
    transaction's paths and list nothing, at the 10th as at the 40th. A gc that ran reads each kept transaction's paths at most once."""
    store = tmp_path / "store"
    clock = _Clock()
    monkeypatch.setattr(retention, "time", clock)
    write_policy(Catalog(str(store), "t"), RetentionPolicy(retain_last=5, gc_grace_s=3600))
    counter = _Counter(monkeypatch)
    work: dict[int, tuple[int, int]] = {}
    for i in range(1, 41):
        if i == 25:
            clock.offset = 2 * 3600  # two grace periods later
        counter.reset()
        publish_job(str(store), _output(i, store / "t"))
        work[i] = (counter.paths, counter.listings)
        if i == 25:
            expired_at_25 = retention.newest_expiry(Catalog(str(store), "t"))
    ran = [i for i, (_, listings) in work.items() if listings]
    assert ran == [25], work  # the first after the grace period
    assert all(work[i] == (0, 0) for i in range(1, 41) if i != 25), work
    assert work[25][0] <= 5 + 1  # the kept transactions' paths (the commit's own already decoded)
    record = retention.last_gc(Catalog.open(str(store), "t"))
    assert record is not None and record.expiry_seen == expired_at_25 > 0  # it ran after publish 25's expiry
    # publishes 26-40 expired states after that gc: one is due once the grace period passes again
    cat = Catalog.open(str(store), "t")
    assert retention.gc_due(cat, RetentionPolicy(retain_last=5, gc_grace_s=3600)) is None
    assert retention.gc_due(cat, RetentionPolicy(retain_last=5, gc_grace_s=3600), now=clock.time() + 3600) == "states were expired since the last gc"


def test_without_expiry_a_publish_lists_no_runs_and_reads_no_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default policy (keep 100) expires nothing in 40 publishes: after the first, no gc,
    and the retention pass reads no transaction header either (a count rule needs the ids)."""
    store = str(tmp_path / "store")
    counter = _Counter(monkeypatch)
    for i in range(1, 41):
        counter.reset()
        publish_job(store, _output(i), checkpoint_interval=5)
        if i > 1:
            assert (counter.paths, counter.listings, counter.headers) == (0, 0, 0), (i, counter.__dict__)


def test_a_count_rule_at_its_bound_writes_a_checkpoint_once_in_a_tenth_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small table (no checkpoint of its own before the 100th commit) at its policy's bound:
    every publish expires, but an expiry stops at a checkpoint up to retain_last // 10 states
    back instead of writing one: 20 kept, a checkpoint written once in 3 publishes, and at
    least 20 (at most 22, + a retention commit) states kept."""
    store = str(tmp_path / "store")
    write_policy(Catalog(store, "t"), RetentionPolicy(retain_last=20))
    written = [0]
    real = codec.encode_checkpoint

    def encode(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        written[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(codec, "encode_checkpoint", encode)
    for i in range(1, 61):
        publish_job(store, _output(i))
        kept = Catalog.open(store, "t").transaction_ids()
        if i > 20:
            assert 20 <= len(kept) <= 20 + 2 + 1, (i, kept)
    assert written[0] <= (60 - 20) // 3 + 1, written[0]
    cat = Catalog.open(store, "t")
    assert cat.verify()["transactions"] == len(cat.transaction_ids())
    # metastore expire keeps exactly what it is asked (no slack)
    head = cat.transaction_ids()[-1]
    result = apply_policy(cat, RetentionPolicy(retain_last=20, gc_grace_s=0))
    assert result.kept_from == head - 19 == cat.transaction_ids()[0]


def test_a_publish_lists_each_catalog_directory_once(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests, counted on the real I/O (a local store and S3 on moto), of 20 publishes under a
    policy that expires a state at every publish from the 6th (checkpoints every 5, tombstones
    to remove): each lists ``transactions/`` once (the open) and ``retention/`` once. The gc (the first
    publish after the grace period) lists the runs once and the catalog twice more, from the store: after the runs
    (a commit made meanwhile must count) and its refresh. The states kept answer as a replay."""
    clock = _Clock()
    monkeypatch.setattr(retention, "time", clock)
    write_policy(Catalog(store_uri, "t"), RetentionPolicy(retain_last=5, gc_grace_s=3600))
    counter = _Counter(monkeypatch)
    seen: dict[int, tuple[dict[str, int], int, dict[str, int]]] = {}
    states = {}  # every state as it was committed (by the publish, or its tombstone removal)
    for i in range(1, 21):
        if i == 15:
            clock.offset = 2 * 3600
        counter.reset()
        info = publish_job(store_uri, _output(i), io=counter.io(store_uri), checkpoint_interval=5)
        seen[i] = (dict(counter.lists), counter.listings, dict(counter.reads))
        head = Catalog.open(store_uri, "t").state()
        states[info.txn_id], states[head.txn_id] = info.state, head
    for i, (lists, runs, reads) in seen.items():
        if i == 15:  # the gc ran
            assert (lists, runs) == ({"transactions": 3, "retention": 1}, 1), (i, seen[i])
        else:
            assert (lists, runs) == ({"transactions": 1, "retention": 1}, 0), (i, seen[i])
        if i > 1:
            assert reads["retention"] == 2, (i, seen[i])  # the policy, the last gc's record
        # the open's checkpoint and the transactions after it; an expiry's checkpoint (read back
        # by prune's check, and to build the oldest kept state when it had to write one)
        assert reads.get("transactions", 0) <= 5 + 2 + 5, (i, seen[i])
    cat = Catalog.open(store_uri, "t")
    ids = cat.transaction_ids()
    assert ids[0] > 10 and len(ids) <= 5 + 1, ids  # expired at every publish (+ a tombstone removal)
    assert cat.verify()["transactions"] == len(ids)
    for j in ids:
        assert cat.state_at(j) == states[j]
    assert retention.expiry_of(cat, ids[0] - 1) is not None


def test_a_remembered_listing_gives_way_to_the_store_where_it_must(store_uri: str) -> None:
    """With the publish's ListingMemoIO, a commit that lost its id to another writer refreshes from
    the store (the remembered listing does not hold the winner), the retention's tombstone
    removal retries on the store's state, and gc sees a commit made after the open: the files
    it references again (a republish of an old run) are kept."""
    for i in (1, 2, 3):
        publish_job(store_uri, _output(i))
    memo = ListingMemoIO(io_for(store_uri))
    cat = Catalog.open(store_uri, "t", io=memo)
    other = Catalog.open(store_uri, "t")
    for i in (4, 5):
        commit_with_retry(other, f"other{i}", f"s{i}", lambda txn, st, i=i: txn.set_table_statistics(_files(f"job{i:03d}", None, None), 1))
    assert [n for n in memo.list_names(cat.transactions_uri) if n.endswith(".transaction")][-1].startswith(f"{3:020d}")  # remembered
    # two attempts: the second on the store's state (a refresh from the remembered listing would
    # know only the one name its conflict taught it, and lose again)
    info = commit_with_retry(cat, "mine", "s6", lambda txn, st: txn.set_table_statistics(_files("job001", None, None), 1), attempts=2)
    assert info.txn_id == 6 and Catalog.open(store_uri, "t").state().txn_id == 6
    # tombstones of publish 3 (keys rotate): removing them conflicts with three other commits first
    assert cat.state().tombstones
    other.refresh()
    for i in (7, 8, 9):
        commit_with_retry(other, f"other{i}", f"s{i}", lambda txn, st: txn.set_table_statistics(_files("job002", None, None), 1))
    removed = cat.expire_tombstones(cat.state(), job_id="retention")
    assert removed is not None and removed.txn_id == 10 and not Catalog.open(store_uri, "t").state().tombstones


def test_gc_on_a_remembered_listing_sees_the_commits_made_after_it(tmp_path: Path) -> None:
    """A catalog on a remembered listing (a publish's) whose gc runs after other writers committed:
    the gc reads the log from the store after listing the runs, so a file only a later, no longer
    current transaction references (a republish of an old run) is kept."""
    store, root = str(tmp_path / "store"), tmp_path / "store" / "t"
    writer = Catalog.open(store, "t")
    for job in ("job001", "job002"):
        commit_with_retry(writer, job, job, lambda txn, st, job=job: txn.set_table_statistics(_files(job, None, root), 1))
    writer.write_checkpoint()
    writer.prune(2)  # job001's files: referenced by no kept state
    cat = Catalog.open(store, "t", io=ListingMemoIO(io_for(store)))
    for job in ("job001", "job003"):  # another writer: job001 again (transaction 3), then job003
        commit_with_retry(writer, job, job, lambda txn, st, job=job: txn.set_table_statistics(_files(job, None, root), 1))
    result = cat.gc(0, now=time.time() + 60)
    assert sorted(result.deleted) == []  # job001 (transaction 3), job002 (2), job003 (4): all kept states'
    assert (root / "runs/job001/table/statistics.parquet").exists()
    writer.write_checkpoint()
    writer.prune(4)
    assert {p.split("/")[1] for p in cat.gc(0, now=time.time() + 60).deleted} == {"job001", "job002"}


@pytest.mark.parametrize("mode", ["error_after", "error_before"])
def test_a_remembered_listing_asks_the_store_after_a_failed_write(store_uri: str, mode: str) -> None:
    """A write that raised may have landed: the next listing of its directory asks the store
    (and shows the file exactly when it landed); writes that succeed are remembered."""
    from tests.engine.catalog.catalog_testkit import FaultyIO

    memo = ListingMemoIO(FaultyIO(io_for(store_uri), fail_at=1, mode=mode))
    d = f"{store_uri}/t/catalog/retention"
    assert memo.list_names(d) == []
    memo.create(f"{d}/a.json", b"{}")  # write 0: succeeds, remembered
    assert memo.list_names(d) == ["a.json"]
    with pytest.raises(OSError, match="injected"):
        memo.create(f"{d}/b.json", b"{}")  # write 1: fails
    assert memo.list_names(d) == (["a.json", "b.json"] if mode == "error_after" else ["a.json"])
    with pytest.raises(FileExistsError):
        memo.create(f"{d}/a.json", b"{}")
    memo.delete(f"{d}/a.json")
    assert memo.list_names(d, start_after="a") == (["b.json"] if mode == "error_after" else [])
