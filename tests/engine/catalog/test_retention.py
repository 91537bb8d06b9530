"""Retention: a table's policy applied after every analyze keeps the store bounded, the
kept states answer exactly as before, and time travel to an expired state says so.

The end-to-end test analyzes a tiny table 50 times on Ray (its data changing every
third time); the CLI tests work on a copy of the session's two-job store.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import fileio
from engine.api import analyze, open_statistics
from engine.catalog import Catalog, retention
from engine.catalog.retention import (
    DEFAULT_POLICY,
    KEEP_GC_RECORDS,
    RetentionPolicy,
    apply_policy,
    kept_from,
    parse_duration,
    read_policy,
    write_policy,
)
from engine.cli.console import metastore
from engine.exceptions import InvalidArgumentError, StatisticsExpiredError
from engine.files import layout
from engine.sample import generate_table

TABLE = "sales"


def _usage(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _answers(store: Path, txn: int) -> dict:
    """What a state answers: its table-level statistics, one partition's, and a top-k."""
    s = open_statistics(str(store), TABLE, at_transaction=txn)
    parts = [p.key for p in s.partitions()]
    return {
        "partitions": [(p.key, p.rows) for p in s.partitions()],
        "table": s.statistics(columns=["city", "quantity", "price"])
        .drop_columns([c for c in s.statistics(columns=["price"]).schema.names if c.startswith("p") and c[1:].isdigit()])
        .to_pylist(),
        "partition": s.statistics(columns=["quantity"], partition=parts[0]).to_pylist(),
        "top": s.top_frequencies("city", 3).to_pylist(),
        "file": pq.read_table(s.file_uri(layout.STATISTICS_FILE)).num_rows,
    }


@pytest.mark.ray
def test_fifty_reanalyses_under_a_policy_keep_the_store_bounded(ray_runtime: None, tmp_path: Path) -> None:
    data, store = tmp_path / "data" / TABLE, tmp_path / "store"
    generate_table(str(data), rows=600, partitions=3, seed=0)
    analyze(str(data), store=str(store), user_statistics=[])
    write_policy(Catalog.open(str(store), TABLE), RetentionPolicy(retain_last=4, gc_grace_s=0))
    answers: dict[int, dict] = {}
    usage: list[tuple[int, int]] = []
    victim = data / "part=00" / "data-0.parquet"
    for i in range(50):
        if i % 3 == 0:  # a changed partition: a new state with new partition files
            t = pq.read_table(victim)
            pq.write_table(t.slice(0, t.num_rows - 1) if i % 2 else t, victim)
        analyze(str(data), store=str(store), user_statistics=[])
        cat = Catalog.open(str(store), TABLE)
        head = cat.state().txn_id
        answers[head] = _answers(store, head)
        usage.append(_usage(store / TABLE))
        history = cat.history()
        assert len(history) <= 4 + 1, [h.id for h in history]  # the policy's 4 (+ a retention commit)
    # bounded: after the first few analyses the store stops growing
    settled = max(usage[5:10])
    assert max(f for f, _ in usage[10:]) <= settled[0] * 1.25, usage
    assert max(b for _, b in usage[10:]) <= settled[1] * 1.25, usage
    runs = list((store / TABLE / "runs").iterdir())
    assert len(runs) <= 4 + 3 + 1, len(runs)  # kept states' runs + inherited partitions' runs
    # every kept state answers exactly as it did when it was current
    cat = Catalog.open(str(store), TABLE)
    kept = [h.id for h in cat.history()]
    for txn in kept:
        if txn in answers:
            assert _answers(store, txn) == answers[txn], txn
    # an expired one says when and by what (its own record, or the oldest one kept)
    with pytest.raises(
        StatisticsExpiredError,
        match=rf"transaction {kept[0] - 1} of table 'sales' was expired on \d{{4}}-\d\d-\d\d [\d:]+ UTC by policy retain-last 4",
    ):
        open_statistics(str(store), TABLE, at_transaction=kept[0] - 1)
    with pytest.raises(StatisticsExpiredError, match=r"transaction 2 of table 'sales' was expired on or before \d{4}-\d\d-\d\d [\d:]+ UTC"):
        open_statistics(str(store), TABLE, at_transaction=2)
    # compacted expiry records + the policy + the newest gc records
    assert len(list((store / TABLE / "catalog" / "retention").iterdir())) <= 16 + 1 + KEEP_GC_RECORDS


def test_policy_rules_and_durations() -> None:
    assert [parse_duration(t) for t in ("90s", "15m", "12h", "7d", "2w", "30")] == [90, 900, 43200, 604800, 1209600, 30]
    with pytest.raises(InvalidArgumentError, match="7 days"):
        parse_duration("7 days")
    with pytest.raises(InvalidArgumentError):
        RetentionPolicy(retain_last=0)
    assert DEFAULT_POLICY.retain_last == 100  # bounded by default
    assert RetentionPolicy(retain_last=3, retain_for_s=604800).describe() == "retain-last 3 + retain-for 1w, gc grace 1h"


def _commit(cat: Catalog, job: str, snapshot: str, key: str) -> None:
    from engine.catalog import StatisticsFiles
    from engine.catalog.model import FileRef

    files = StatisticsFiles(
        *(FileRef(f"runs/{job}/partitions/{key}/{n}", 10) for n in ("statistics.parquet", "frequencies.parquet", "histograms.parquet"))
    )
    cat.begin(job, snapshot).add_partition(key, files, 5).commit()


def test_kept_from_takes_the_union_of_both_rules_and_always_the_current(tmp_path: Path) -> None:
    cat = Catalog.open(str(tmp_path / "store"), "t")
    for i in range(6):
        _commit(cat, f"j{i}", f"s{i}", f"p={i}")
    now = time.time()
    assert kept_from(cat, RetentionPolicy(retain_last=2)) == 5
    assert kept_from(cat, RetentionPolicy(retain_for_s=3600), now=now) == 1  # all are young
    assert kept_from(cat, RetentionPolicy(retain_for_s=60), now=now + 3600) == 6  # none is: the current stays
    assert kept_from(cat, RetentionPolicy(retain_last=3, retain_for_s=60), now=now + 3600) == 4
    assert kept_from(cat, RetentionPolicy()) == 1
    r = apply_policy(cat, RetentionPolicy(retain_last=2, gc_grace_s=0))
    assert (r.kept_from, r.expired_before, r.transaction_files_deleted) == (5, 5, 4)
    assert [h.id for h in cat.history()] == [5, 6]
    assert cat.state_at(5).partitions.keys() == {f"p={i}" for i in range(5)}
    with pytest.raises(StatisticsExpiredError, match="by policy retain-last 2"):
        cat.state_at(3)
    with pytest.raises(StatisticsExpiredError, match=r"describes snapshot 's1'.*were expired \(the last time on "):
        cat.state_at_snapshot("s1")


# ---------------------------------------------------------------- CLI
def _cli(*args: str):
    result = CliRunner().invoke(metastore, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def store_copy(two_jobs, tmp_path: Path) -> str:  # noqa: ANN001
    copy = tmp_path / "store"
    shutil.copytree(two_jobs.store, copy)
    return str(copy)


def test_cli_config_expire_prune(store_copy: str) -> None:
    doc = json.loads(_cli("--store", store_copy, "--output", "json", "config", TABLE).stdout)
    assert doc["default"] and doc["retain_last"] == 100
    doc = json.loads(_cli("--store", store_copy, "--output", "json", "config", TABLE, "--retain-last", "7", "--retain-for", "7d").stdout)
    assert (doc["retain_last"], doc["retain_for_s"], doc["gc_grace_s"]) == (7, 604800, 3600)
    policy, was_set = read_policy(Catalog.open(store_copy, TABLE))
    assert was_set and policy == RetentionPolicy(7, 604800, 3600)
    text = _cli("--store", store_copy, "config", TABLE).stdout
    assert "7 states" in text and "1w" in text

    # prune: the history starts at transaction 2; the first state says it was pruned
    doc = json.loads(_cli("--store", store_copy, "--output", "json", "prune", TABLE, "--before", "2").stdout)
    assert doc["expired_before_txn"] == 2 and doc["transaction_files_deleted"] >= 1
    result = CliRunner().invoke(metastore, ["--store", store_copy, "show", TABLE, "--at", "1"])
    assert result.exit_code == 1 and "expired" in result.stderr and "metastore prune --before 2" in result.stderr
    assert result.stderr.count("\n") == 1
    # expire: the first job's files, now referenced by no state, go with a zero grace period
    first_run = Path(store_copy) / TABLE / "runs"
    before = {p.name for p in first_run.iterdir()}
    doc = json.loads(_cli("--store", store_copy, "--output", "json", "expire", TABLE, "--keep-last", "1", "--grace-period", "0").stdout)
    assert doc["files_deleted"] and all(f.startswith("runs/") for f in doc["files_deleted"])
    assert len({p.name for p in first_run.iterdir()}) < len(before)
    assert _cli("--store", store_copy, "show", TABLE).stdout  # the current state still answers
    assert CliRunner().invoke(metastore, ["--store", store_copy, "expire", TABLE]).exit_code == 2  # neither option


@pytest.mark.parametrize("command", ["expire", "prune", "config"])
def test_help_describes_retention(command: str) -> None:
    out = _cli(command, "--help").stdout
    assert f"Usage: metastore {command}" in out and "Examples:" in out


# ---------------------------------------------------------------- the gc after a publish, paced
class _Clock:
    """retention's clock, moved on by the test: gc pacing is by the clock, never by sleeping."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset


def _publish(store: Path, i: int) -> None:
    """Publish ``i`` of table ``t``: both partitions and the table level replaced (real files)."""
    from engine.catalog import JobOutput, JobPartition, StatisticsFiles, publish_job
    from engine.catalog.model import FileRef

    job = f"job{i:03d}"

    def files(base: str) -> StatisticsFiles:
        refs = []
        for n in ("statistics.parquet", "frequencies.parquet", "histograms.parquet"):
            path = store / "t" / base / n
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * 10)
            refs.append(FileRef(f"{base}/{n}", 10))
        return StatisticsFiles(*refs)

    (store / "t" / "runs" / job).mkdir(parents=True, exist_ok=True)
    (store / "t" / "runs" / job / "manifest.json").write_text("{}")
    parts = tuple(JobPartition(f"p={k}", 5, files(f"runs/{job}/partitions/p={k}")) for k in range(2))
    publish_job(str(store), JobOutput("t", job, f"s{i}", "fp", parts, files(f"runs/{job}/table"), {"columns": []}))


def _on_disk(store: Path) -> set[str]:
    return {str(p.relative_to(store / "t")) for p in (store / "t" / "runs").rglob("*") if p.is_file()}


def _kept_refs(store: Path) -> set[str]:
    cat = Catalog.open(str(store), "t")
    refs: set[str] = set()
    for h in cat.headers():
        refs |= cat.state_at(h.id).referenced_paths()
    return refs


def _age(store: Path, seconds: float) -> None:
    """Every file below runs/ written ``seconds`` earlier (as if the test had taken that long)."""
    for p in (store / "t" / "runs").rglob("*"):
        if p.is_file():
            st = p.stat()
            os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds))


def test_a_skipped_gc_leaves_nothing_behind_for_good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within the grace period the publishes expire states but skip the gc, so the expired
    states' files stay for now; after it, the next publish's gc, or `metastore gc`, removes
    every one of them: the store then holds exactly what the kept states reference (and the
    kept runs' manifests)."""
    store = tmp_path / "store"
    clock = _Clock()
    monkeypatch.setattr(retention, "time", clock)
    write_policy(Catalog(str(store), "t"), RetentionPolicy(retain_last=2, gc_grace_s=3600))
    for i in range(1, 8):
        _publish(store, i)
    cat = Catalog.open(str(store), "t")
    assert len(cat.headers()) <= 2 + 1  # expired at every publish
    kept = _kept_refs(store)
    manifests = {f"runs/job{i:03d}/manifest.json" for i in range(1, 8)}
    garbage = _on_disk(store) - kept - manifests
    assert garbage  # the expired states' files: the gc was skipped (the last one ran at publish 1)
    assert retention.last_gc(cat).expiry_seen == 0  # no expiry yet when it ran
    _age(store, 2 * 3600)  # the files are older than the grace period now

    # `metastore gc` (its own grace period, the default 1h) deletes every one of them
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    doc = json.loads(_cli("--store", str(copy), "--output", "json", "gc", "t").stdout)
    kept_manifests = {f"{r}/manifest.json" for r in {"/".join(p.split("/")[:2]) for p in kept}}
    assert set(doc["files"]) == garbage | (manifests - kept_manifests)
    assert _on_disk(copy) == kept | kept_manifests

    # the next publish, once the clock has passed the grace period, does the same
    clock.offset = 2 * 3600
    _publish(store, 8)
    kept = _kept_refs(store)
    kept_manifests = {f"{r}/manifest.json" for r in {"/".join(p.split("/")[:2]) for p in kept}}
    assert _on_disk(store) == kept | kept_manifests
    assert retention.last_gc(Catalog.open(str(store), "t")).deleted > 0
    # and the publish right after it does not gc again (within the grace period of that gc)
    _publish(store, 9)
    assert len(_on_disk(store) - _kept_refs(store)) > 3


def test_the_runs_of_failed_jobs_go_with_a_later_gc_without_any_expiry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed job's run is garbage that no expiry announces: a new table's first publish
    records a baseline instead of a gc, and the daily pass finds the run; a run that pass saw
    too young goes with the next publish once the grace period has passed."""
    store = tmp_path / "store"
    clock = _Clock()
    monkeypatch.setattr(retention, "time", clock)
    policy = RetentionPolicy(retain_last=100, gc_grace_s=3600)  # no expiry here
    write_policy(Catalog(str(store), "t"), policy)
    orphan = store / "t" / "runs" / "failed-job" / "partitions" / "p=0" / "statistics.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"x")
    _publish(store, 1)  # a new table: the baseline, no gc
    cat = Catalog.open(str(store), "t")
    baseline = retention.last_gc(cat)
    assert baseline is not None and (baseline.recent, baseline.deleted) == (0, 0) and orphan.exists()
    _publish(store, 2)  # within the grace period: no gc
    clock.offset = 2 * 3600
    _age(store, 2 * 3600)
    assert retention.gc_due(cat, policy) is None  # a grace period later, less than a day: nothing announces it
    _publish(store, 3)
    assert orphan.exists()
    # a second failed job, just before the daily pass: that gc sees it too young
    orphan2 = store / "t" / "runs" / "failed-job-2" / "table" / "statistics.parquet"
    orphan2.parent.mkdir(parents=True)
    orphan2.write_bytes(b"x")
    clock.offset = retention.GC_SWEEP_S + 1
    os.utime(orphan2, (clock.time(), clock.time()))
    assert retention.gc_due(cat, policy) == f"the last gc is older than {retention.format_duration(retention.GC_SWEEP_S)}"
    _publish(store, 4)
    assert not orphan.exists() and orphan2.exists() and retention.last_gc(cat).recent == 1
    clock.offset += 2 * 3600
    assert retention.gc_due(cat, policy) == "the last gc kept 1 unreferenced files younger than the grace period"
    _publish(store, 5)
    assert not orphan2.exists()
    assert {p.name for p in (store / "t" / "runs").iterdir()} == {f"job{i:03d}" for i in range(1, 6)}  # no expiry: every state kept


# ---------------------------------------------------------------- tombstones no kept state holds
_OPS = st.lists(st.lists(st.sampled_from(["keep", "new", "tombstone", "readd", "remove"]), min_size=3, max_size=3), min_size=2, max_size=9)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS, data=st.data())
def test_expire_tombstones_removes_exactly_the_tombstones_no_kept_state_holds(ops: list[list[str]], data: st.DataObject) -> None:
    """Against a replay of every kept state: the linear-log rule (added at or after the oldest
    kept state, or live in it) removes the tombstones live in none of them, and only those.
    Histories with replaced, tombstoned, re-added (a republish of older files) and removed
    partitions, one operation per partition and transaction."""
    import tempfile

    from engine.catalog import StatisticsFiles
    from engine.catalog.model import FileRef

    def files(tag: str) -> StatisticsFiles:
        return StatisticsFiles(*(FileRef(f"runs/{tag}/{n}.parquet", 10) for n in ("statistics", "frequencies", "histograms")))

    with tempfile.TemporaryDirectory() as store:
        cat = Catalog.open(store, "t")
        seen: dict[str, list[str]] = {}  # the file tags each partition ever had
        for i, row in enumerate(ops, start=1):
            txn = cat.begin(f"j{i}", f"s{i}")
            entries = cat.state().entries
            for k, op in enumerate(row):
                key, e = f"p={k}", entries.get(f"p={k}")
                if op == "new" or (e is None and op != "remove"):
                    tag = f"j{i}-{k}"
                    seen.setdefault(key, []).append(tag)
                    txn.add_partition(key, files(tag), 1)
                elif op == "tombstone" and e is not None and not e.tombstoned:
                    txn.tombstone_partition(key)
                elif op == "readd" and e is not None and len(seen[key]) > 1:
                    txn.add_partition(key, files(seen[key][0]), 1)  # an older job's files again
                elif op == "remove" and e is not None:
                    txn.remove_partition(key)
            if txn.actions:
                txn.commit()
        head = cat.state()
        since = data.draw(st.integers(min_value=1, max_value=head.txn_id))
        held = set()
        for j in range(since, head.txn_id + 1):
            held |= {(k, e.files, e.added_in) for k, e in cat.state_at(j).partitions.items()}
        expected = {k for k, e in head.entries.items() if e.tombstoned and (k, e.files, e.added_in) not in held}
        cat.expire_tombstones(cat.state_at(since))
        after = cat.state()
        assert set(head.entries) - set(after.entries) == expected
        assert all(after.entries[k] == e for k, e in head.entries.items() if k not in expected)
        for j in range(since, head.txn_id + 1):  # every kept state answers as before
            assert Catalog.open(store, "t").state_at(j) == cat.state_at(j)


def test_no_expiry_past_a_missing_transaction(tmp_path: Path) -> None:
    """A count-only policy decides from the listing, but a hole in it stops the expiry (the
    transaction may be lost, not pruned: verify and gc must still see it)."""
    from engine.exceptions import CatalogCorruptError

    cat = Catalog.open(str(tmp_path / "store"), "t")
    for i in range(6):
        _commit(cat, f"j{i}", f"s{i}", f"p={i}")
        if i == 4:
            cat.write_checkpoint()  # of state 5, the oldest the policy keeps: no replay needed to expire
    lost = next(p for p in (tmp_path / "store" / "t" / "catalog" / "transactions").iterdir() if p.name.startswith(f"{3:020d}."))
    lost.unlink()
    with pytest.raises(CatalogCorruptError, match="transaction 3 is missing"):
        apply_policy(cat, RetentionPolicy(retain_last=2, gc_grace_s=0))
    assert cat.transaction_ids() == [1, 2, 4, 5, 6]


def test_the_gc_record_paces_the_gc_on_local_and_s3_stores(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gc record is written, read and compacted through the table's FileIO: on S3 (moto)
    as on a local directory, the publishes within the grace period leave it as it was and the
    first one after it replaces it."""
    clock = _Clock()
    monkeypatch.setattr(retention, "time", clock)
    cat = Catalog(store_uri, "t")
    write_policy(cat, RetentionPolicy(retain_last=2, gc_grace_s=3600))
    for i in range(1, 6):
        _commit(cat, f"j{i}", f"s{i}", "p=0")
        retention.apply_after_publish(cat)
        if i == 1:
            first = retention.last_gc(cat)
    assert first is not None and first.expiry_seen == 0
    assert retention.last_gc(cat) == first  # expiries since, but within the grace period: no gc
    assert retention.newest_expiry(cat) > 0
    clock.offset = 2 * 3600
    _commit(cat, "j6", "s6", "p=0")
    result = retention.apply_after_publish(cat)
    assert result is not None and result.gc_reason == "states were expired since the last gc"
    last = retention.last_gc(cat)
    assert last is not None and last.at_s > first.at_s and last.expiry_seen == retention.newest_expiry(cat)
    clock.offset = 4 * 3600
    _commit(cat, "j7", "s7", "p=0")
    assert retention.apply_after_publish(cat).gc_reason == "states were expired since the last gc"
    names = [n.rsplit("/", 1)[-1] for n in cat.io.list_names(fileio.join(cat.catalog_uri, "retention"))]
    gc_names = sorted(n for n in names if n.startswith("gc-"))
    assert len(gc_names) == 2 and gc_names[0] == f"gc-{int(last.at_s * 1000):020d}.json"  # the third gc's compaction
