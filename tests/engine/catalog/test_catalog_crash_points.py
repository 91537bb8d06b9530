"""A publish killed at each of its crash points leaves a store the commands read honestly (issue #33).

``Store.publish`` takes the job's lease, writes ``manifest.json``, commits, writes ``CURRENT``
and lets go of the lease. Each test publishes two jobs in this process, then runs a third
publish in a child process that kills itself (SIGKILL: no clean-up runs) at a crash point,
and asserts through the CLI what the issue asks:

- killed between ``manifest.json`` and the commit (item 7): nothing was committed, so
  ``verify`` exits 0 with a warning naming the uncommitted run, and ``gc`` collects the run
  once older than the grace period; a committed transaction that is really lost still fails;
- killed between the commit and ``CURRENT`` (item 8): the committed state is listed by
  ``tables`` and the Flight server, ``verify`` flags the signal (exit 1) and ``--repair``
  rewrites it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from catalog_testkit import job_output, write_job
from click.testing import CliRunner

from engine import lookup
from engine.catalog import Catalog, integrity, lease, schema_fingerprint
from engine.cli.console import metastore
from engine.store import Store

TABLE = "t"
COLUMNS = [["a", "int64"], ["b", "string"]]
SCHEMA = base64.b64encode(pa.schema([("a", pa.int64()), ("b", pa.string())]).serialize().to_pybytes()).decode()
HERE = Path(__file__).parent
REPO = HERE.parents[2]


def publish(store: str, i: int, drop: bool = False) -> None:
    """Job ``job<i>``: both partitions for the first, then p=0 replaced (p=1 inherited, or
    tombstoned with ``drop``)."""
    Store(store).publish(written_job(store, i, drop))


def written_job(store: str, i: int, drop: bool = False) -> Any:
    """The files of job ``job<i>`` written; its JobOutput."""
    job = f"job{i}"
    parts = {"p=0": 10 + i, "p=1": 20} if i == 0 else {"p=0": 10 + i}
    got = write_job(store, TABLE, job, f"snap{i}", f"2026-01-01T00:00:0{i}Z", parts, columns=[tuple(c) for c in COLUMNS])
    partitions = got["partitions"] + ([] if i == 0 or drop else [{"key": "p=1", "rows": 20, "inherited": True}])
    columns = [{"name": n, "type": t} for n, t in COLUMNS]  # as the analyze job's manifest has them
    extra = {"columns": columns, "schema": SCHEMA, "created_at": f"2026-01-01T00:00:0{i}+00:00", "bins": 10, "user_statistics": []}
    return job_output(store, TABLE, job, f"snap{i}", partitions, {}, schema_fingerprint(COLUMNS), extra=extra)


_CHILD = """
import os, signal, sys
sys.path[:0] = [{here!r}]
import engine.catalog.publish  # engine/store.py imports publish_job from here when it commits
from test_catalog_crash_points import publish
store, i, point = sys.argv[1], int(sys.argv[2]), sys.argv[3]
real = engine.catalog.publish.publish_job

def hooked(*args, **kwargs):
    if point == "before_commit":  # manifest.json written, nothing committed
        os.kill(os.getpid(), signal.SIGKILL)
    info = real(*args, **kwargs)
    if point == "before_current":  # committed, CURRENT not written
        os.kill(os.getpid(), signal.SIGKILL)
    return info

engine.catalog.publish.publish_job = hooked
publish(store, i)
"""


def publish_killed(store: str, i: int, point: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    done = subprocess.run([sys.executable, "-c", _CHILD.format(here=str(HERE)), store, str(i), point], env=env, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])


def cli(store: str, *args: str) -> tuple[int, str]:
    got = CliRunner().invoke(metastore, ["--store", store, *args])
    return got.exit_code, got.output


def cli_json(store: str, *args: str) -> tuple[int, dict]:
    code, out = cli(store, *args, "--output", "json")
    return code, json.loads(out)


def run_files(store: str, job: str | None = None) -> set[str]:
    root = Path(store) / TABLE
    below = root / "runs" / job if job else root / "runs"
    return {str(p.relative_to(root)) for p in below.rglob("*") if p.is_file()} if below.exists() else set()


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "store")
    publish(path, 0)
    publish(path, 1)
    lookup.clear_cache()
    return path


# --------------------------------------------------------------------------- item 7


def test_a_job_killed_between_its_manifest_and_its_commit_is_a_leftover_not_a_lost_transaction(store: str) -> None:
    before = run_files(store)
    publish_killed(store, 2, "before_commit")
    leftover = run_files(store, "job2")
    assert "runs/job2/manifest.json" in leftover and f"runs/job2/{lease.LEASE}" in leftover
    assert Catalog.open(store, TABLE).state().txn_id == 2  # nothing was committed

    # verify: exit 0, one warning naming the run and the dead process; no problem
    code, report = cli_json(store, "verify", TABLE)
    assert code == 0 and report["ok"] and report["problems"] == [], report
    (warning,) = report["warnings"]
    assert warning["kind"] == "uncommitted_run" and "job2" in warning["message"] and "is gone" in warning["message"]
    code, text = cli(store, "verify", TABLE)
    assert code == 0 and "warning: uncommitted_run" in text
    assert integrity.quick_check(store, TABLE) == []  # show has nothing to warn about

    # gc is not refused: within the grace period the leftovers stay, after it they go (and only they)
    code, doc = cli_json(store, "gc", TABLE, "--grace-period", "3600")
    assert code == 0 and doc["files"] == [] and doc["recent"] == len(leftover), doc
    code, doc = cli_json(store, "gc", TABLE, "--grace-period", "0")
    assert code == 0 and set(doc["files"]) == leftover, doc
    assert run_files(store) == before
    code, report = cli_json(store, "verify", TABLE)
    assert code == 0 and report["problems"] == [] and report["warnings"] == []

    # the next publish takes the next id, and the log is whole
    publish(store, 3)
    assert Catalog.open(store, TABLE).state().txn_id == 3
    assert cli(store, "verify", TABLE)[0] == 0


def test_a_lost_committed_transaction_still_fails_beside_a_leftover(store: str) -> None:
    publish_killed(store, 2, "before_commit")
    # transaction 2 (job1, which committed and let go of its lease) is lost; CURRENT too, so only
    # the runs can tell: job1's manifest is newer than the log's head and has no lease
    (Path(store) / TABLE / "CURRENT").unlink()
    manifest = Path(store) / TABLE / "runs" / "job1" / "manifest.json"
    os.utime(manifest, (time.time() + 5, time.time() + 5))  # clear of the file system's timestamp granularity
    (victim,) = (Path(store) / TABLE / "catalog" / "transactions").glob(f"{2:020d}.*.transaction")
    victim.unlink()
    code, report = cli_json(store, "verify", TABLE, "--no-files")
    assert code == 1, report
    (missing,) = [p for p in report["problems"] if p["kind"] == "missing_transaction"]
    assert "run job1" in missing["message"] and "job2" not in missing["message"]
    assert [w["kind"] for w in report["warnings"]] == ["uncommitted_run"] and "job2" in report["warnings"][0]["message"]
    code, text = cli(store, "gc", TABLE, "--grace-period", "0")
    assert code == 1 and "gc refused" in text and "job1" in text


def test_a_running_jobs_lease_is_fresh_and_a_stale_one_by_its_heartbeat(store: str) -> None:
    """A lease of another host: fresh while its heartbeat is recent (gc keeps the run, verify
    is silent), stale once it is older than STALE_AFTER_S (gc collects, verify warns)."""
    publish_killed(store, 2, "before_commit")
    uri = Path(store) / TABLE / "runs" / "job2" / lease.LEASE
    uri.write_text(json.dumps({"job_id": "job2", "pid": 1, "host": "elsewhere.example", "heartbeat_at": "now"}))
    leftover = run_files(store, "job2")
    now = time.time()
    for p in (Path(store) / TABLE / "runs" / "job2").rglob("*"):
        os.utime(p, (now - 60, now - 60))  # files written a minute ago, the last heartbeat then too
    cat = Catalog.open(store, TABLE)
    (held,) = lease.leases(cat.io.list_files(str(Path(store) / TABLE / "runs")), now).values()
    assert held.fresh and held.host == "elsewhere.example"
    result = cat.gc(0, now=now)
    assert result.deleted == [] and result.leased == len(leftover)
    report = integrity.verify(store, TABLE)
    assert report.ok and report.warnings == ()
    # the same lease, STALE_AFTER_S later: the job is taken for dead
    later = now + lease.STALE_AFTER_S + 1
    (held,) = lease.leases(cat.io.list_files(str(Path(store) / TABLE / "runs")), later).values()
    assert not held.fresh and "no heartbeat" in held.why
    (warning,) = integrity.uncommitted_runs(cat, now=later)
    assert "job2" in warning.message and "elsewhere.example" in warning.message
    assert set(Catalog.open(store, TABLE).gc(0, now=later).deleted) == leftover


def test_a_lease_is_renewed_while_its_job_runs_and_gone_after_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lease, "HEARTBEAT_S", 0.05)
    store = str(tmp_path / "store")
    table_uri = str(Path(store) / TABLE)
    Store(store).begin(TABLE, "job0")
    path = Path(table_uri) / "runs" / "job0" / lease.LEASE
    first = path.stat().st_mtime_ns
    deadline = time.monotonic() + 60
    while path.stat().st_mtime_ns == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.stat().st_mtime_ns > first  # the heartbeat rewrote it
    doc = json.loads(path.read_text())
    assert doc["pid"] == os.getpid() and doc["job_id"] == "job0"
    publish(store, 0)  # the job's own publish lets go of it
    assert not path.exists() and "runs/job0/manifest.json" in run_files(store)
    assert cli(store, "verify", TABLE)[0] == 0


# --------------------------------------------------------------------------- item 8


@contextlib.contextmanager
def running_server(store: str) -> Iterator:
    """A Flight server on the store (as tests/flight_server/flight_testkit.py starts one)."""
    from flight_server.server import MetastoreFlightServer, ServerConfig

    server = MetastoreFlightServer(ServerConfig(store=store, host="127.0.0.1", port=0, poll_interval=0))
    try:
        yield server
    finally:
        server.shutdown()


def test_a_first_commit_without_current_is_listed_served_and_flagged(tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    store = str(tmp_path / "store")
    publish_killed(store, 0, "before_current")
    assert not (Path(store) / TABLE / "CURRENT").exists()
    assert Catalog.open(store, TABLE).state().txn_id == 1
    lookup.clear_cache()

    # a directory with no committed transaction is no table (a commit's temporary file, a run)
    (Path(store) / "other" / "catalog" / "transactions").mkdir(parents=True)
    (Path(store) / "other" / "catalog" / "transactions" / ".00000000000000000001.tmp").write_bytes(b"x")
    (Path(store) / "other" / "runs" / "j").mkdir(parents=True)
    # tables lists it (with its state), the store serves it
    code, doc = cli_json(store, "tables")
    assert code == 0 and [(r["table"], r["job_id"], r["rows"]) for r in doc["tables"]] == [(TABLE, "job0", 30)], doc
    assert Store(store).state(TABLE).job_id == "job0"  # what show reads (these test files hold no real statistics)
    # the Flight server lists and serves it
    with running_server(store) as server, MetastoreClient(server.location) as client:
        listed = client.tables().to_pylist()
        assert [(r["table"], r["job_id"], r["error"]) for r in listed] == [(TABLE, "job0", None)]

    # verify flags the missing signal (exit 1) and nothing else; its job committed: no leftover
    code, report = cli_json(store, "verify", TABLE)
    assert code == 1 and [p["kind"] for p in report["problems"]] == ["stale_signal"], report
    assert "CURRENT is missing" in report["problems"][0]["message"] and "--repair" in report["problems"][0]["message"]
    assert report["warnings"] == []
    assert any("CURRENT is missing" in w for w in integrity.quick_check(store, TABLE))
    assert cli(store, "gc", TABLE, "--grace-period", "0")[0] == 0  # not refused
    # --repair writes it for the committed head
    code, report = cli_json(store, "verify", TABLE, "--repair")
    assert code == 0 and report["problems"] == [] and len(report["repaired"]) == 1, report
    pointer = json.loads((Path(store) / TABLE / "CURRENT").read_text())
    head = Catalog.open(store, TABLE).state()
    assert (pointer["job_id"], pointer["txn_id"], pointer["txn_uuid"]) == ("job0", 1, head.txn_uuid)
    assert cli(store, "verify", TABLE)[0] == 0


def test_a_later_commit_without_current_is_flagged_and_repaired_for_pollers(store: str) -> None:
    from flight_server.client import MetastoreClient

    with running_server(store) as server, MetastoreClient(server.location) as client:
        assert client.tables().to_pylist()[0]["job_id"] == "job1"
        publish_killed(store, 2, "before_current")
        assert json.loads((Path(store) / TABLE / "CURRENT").read_text())["job_id"] == "job1"
        lookup.clear_cache()
        code, doc = cli_json(store, "tables")
        assert [(r["table"], r["job_id"]) for r in doc["tables"]] == [(TABLE, "job2")]  # from the catalog
        # the poller compares CURRENT: it still signals job1, so the server keeps serving it ...
        client.refresh()
        assert client.tables().to_pylist()[0]["job_id"] == "job1"
        code, report = cli_json(store, "verify", TABLE)
        assert code == 1 and [p["kind"] for p in report["problems"]] == ["stale_signal"], report
        assert "names job job1 (transaction 2)" in report["problems"][0]["message"]
        # ... until the signal is repaired
        assert cli(store, "verify", TABLE, "--repair")[0] == 0
        client.refresh()
        assert client.tables().to_pylist()[0]["job_id"] == "job2"
    assert cli(store, "verify", TABLE)[0] == 0


def test_maintenance_transactions_do_not_make_current_lag(store: str) -> None:
    """expire commits transactions without rewriting CURRENT: the statistics did not change."""
    publish(store, 2, drop=True)  # p=1 tombstoned: expire removes it in a transaction of its own
    code, out = cli(store, "expire", TABLE, "--keep-last", "1", "--grace-period", "0")
    assert code == 0, out
    head = Catalog.open(store, TABLE).state()
    assert head.txn_id == 4 and head.table_statistics.job_id == "job2" and not head.tombstones
    assert json.loads((Path(store) / TABLE / "CURRENT").read_text())["txn_id"] == 3
    code, report = cli_json(store, "verify", TABLE)
    assert code == 0 and report["problems"] == [], report


# --------------------------------------------------------------------------- on S3


def test_leases_and_the_commits_file_check_on_s3(s3_store: str) -> None:
    """The same rules on S3 (moto): a publish lets go of its lease; a running job's run survives
    gc with no grace period; a commit naming a deleted file fails naming it, nothing committed."""
    from engine import fileio
    from engine.exceptions import StatisticsFileCorruptError

    publish(s3_store, 0)
    table_uri = fileio.join(s3_store, TABLE)
    names = [e.uri for e in fileio.list_files(fileio.join(table_uri, "runs"))]
    assert not any(u.endswith(lease.LEASE) for u in names) and any(u.endswith("manifest.json") for u in names)
    # job1 is running: its lease is fresh, its files are kept by a gc without grace
    Store(s3_store).begin(TABLE, "job1")
    try:
        output = written_job(s3_store, 1)
        mine = {e.uri for e in fileio.list_files(fileio.join(table_uri, "runs", "job1"))}
        result = Catalog.open(s3_store, TABLE).gc(0, now=time.time() + 5)
        assert result.deleted == [] and result.leased == len(mine) == 7  # 6 statistics files + the lease
        # a file gone before the commit: refused, naming it
        victim = fileio.join(table_uri, "runs", "job1", "table", "frequencies.parquet")
        fs, path = fileio.resolve(victim)
        fs.delete_file(path)
        with pytest.raises(StatisticsFileCorruptError, match="statistics file missing: .*job1/table/frequencies.parquet"):
            Store(s3_store).publish(output)
    finally:
        lease.stop(table_uri, "job1")
    head = Catalog.open(s3_store, TABLE).state()
    assert head.txn_id == 1 and head.table_statistics.job_id == "job0"


def test_current_behind_a_commit_whose_job_still_holds_its_lease_is_a_publish_under_way(tmp_path: Path) -> None:
    """Between a commit and its CURRENT write the job still holds its lease: verify does not
    flag the signal then (a publish under way), only once the lease is stale."""
    store = str(tmp_path / "store")
    publish_killed(store, 0, "before_current")
    held = Path(store) / TABLE / "runs" / "job0" / lease.LEASE
    held.write_text(json.dumps({"job_id": "job0", "pid": 1, "host": "elsewhere.example"}))  # alive elsewhere, beating now
    report = integrity.verify(store, TABLE, files=False)
    assert report.ok and report.warnings == (), report
    old = time.time() - lease.STALE_AFTER_S - 5
    os.utime(held, (old, old))
    report = integrity.verify(store, TABLE, files=False)
    assert [p.kind.value for p in report.problems] == ["stale_signal"]
