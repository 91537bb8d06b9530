"""The catalog commands of the CLI (history, gc, rebuild, show --at) and time travel in the
lookups, on a real store: a small engine.sample table analyzed twice on Ray with different data."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.cli.console import metastore

TABLE = "sales"


def run(*args: str):
    return CliRunner().invoke(metastore, list(args))


def ok(*args: str):
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def doc(*args: str) -> dict:
    return json.loads(ok(*args, "--output", "json").stdout)


@pytest.fixture
def store_copy(two_jobs, tmp_path: Path) -> str:
    """A copy of the two-job store that a test may change (gc, prune, rebuild)."""
    copy = tmp_path / "store"
    shutil.copytree(two_jobs.store, copy)
    return str(copy)


# ---------------------------------------------------------------- help and errors
@pytest.mark.parametrize("command", ["history", "gc", "rebuild"])
def test_help(command: str) -> None:
    result = ok(command, "--help")
    assert f"Usage: metastore {command}" in result.stdout and "Examples:" in result.stdout


def test_show_help_has_time_travel_options() -> None:
    out = ok("show", "--help").stdout
    assert "--at " in out and "--at-snapshot" in out


@pytest.mark.parametrize("command", [["history", "nosuch"], ["gc", "nosuch", "--dry-run"], ["rebuild", "nosuch"], ["show", "nosuch", "--at", "1"]])
def test_unknown_table_is_one_line(tmp_path: Path, command: list[str]) -> None:
    result = run("--store", str(tmp_path / "store"), *command)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr


def test_at_and_at_snapshot_together_is_a_usage_error(tmp_path: Path) -> None:
    assert run("--store", str(tmp_path), "show", TABLE, "--at", "1", "--at-snapshot", "x").exit_code == 2


# ---------------------------------------------------------------- history
@pytest.mark.ray
def test_history_lists_both_jobs(two_jobs) -> None:
    h = doc("--store", two_jobs.store, "history", TABLE)
    rows = h["transactions"]  # newest first, as query history (the Flight history action)
    assert [r["txn_id"] for r in rows] == [2, 1]
    assert [r["job_id"] for r in rows] == [two_jobs.second.job_id, two_jobs.first.job_id]
    assert [r["snapshot"] for r in rows] == [two_jobs.second.snapshot, two_jobs.first.snapshot]
    assert [(r["partitions_added"], r["partitions_removed"], r["partitions_tombstoned"]) for r in rows] == [(3, 0, 0), (2, 0, 0)]
    assert [r["current"] for r in rows] == [True, False] and h["current_txn_id"] == 2
    assert all(len(r["uuid"]) == 36 and r["committed_at"] for r in rows)
    text = ok("--store", two_jobs.store, "history", TABLE).stdout
    assert two_jobs.first.job_id in text and two_jobs.second.job_id in text and rows[0]["uuid"][:8] in text
    assert text.index(two_jobs.second.job_id) < text.index(two_jobs.first.job_id)  # newest first in text too


# ---------------------------------------------------------------- show --at / lookups at a past state
@pytest.mark.ray
def test_show_at_the_first_transaction_has_the_first_jobs_numbers(two_jobs) -> None:
    now = doc("--store", two_jobs.store, "show", TABLE)
    assert (now["job_id"], now["rows"], now["partitions"]) == (two_jobs.second.job_id, 3_000, 3)
    for args in (["--at", "1"], ["--at-snapshot", two_jobs.first.snapshot]):
        then = doc("--store", two_jobs.store, "show", TABLE, *args)
        assert (then["job_id"], then["snapshot"], then["rows"], then["partitions"]) == (two_jobs.first.job_id, two_jobs.first.snapshot, 2_000, 2)
        assert {c["rows"] for c in then["columns"]} == {2_000}
        assert then["at"]["txn_id"] == 1
    detail = doc("--store", two_jobs.store, "show", TABLE, "--at", "1", "--column", "price")
    assert detail["columns"][0]["statistics"]["row_count"] == 2_000
    text = " ".join(ok("--store", two_jobs.store, "show", TABLE, "--at", "1").stdout.split())
    assert "as of transaction 1" in text and "2,000" in text
    at2 = doc("--store", two_jobs.store, "show", TABLE, "--at", "2")
    assert at2["rows"] == 3_000 and "at" in at2


@pytest.mark.ray
def test_show_at_an_unknown_state_is_one_line(two_jobs) -> None:
    for args in (["--at", "9"], ["--at-snapshot", "nosuch"]):
        result = run("--store", two_jobs.store, "show", TABLE, *args)
        assert result.exit_code == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.output


@pytest.mark.ray
def test_lookups_read_an_older_state(two_jobs) -> None:
    from engine.catalog.reading import manifest_at
    from engine.lookup import open_statistics

    old = open_statistics(two_jobs.store, TABLE, at_transaction=1)
    assert (old.job_id, old.txn_id, old.manifest["rows"]) == (two_jobs.first.job_id, 1, 2_000)
    assert old.column_statistics("price")["row_count"] == 2_000
    assert [p.key for p in old.partitions()] == ["part=00", "part=01"]
    old.refresh()  # pinned: still the old state
    assert old.job_id == two_jobs.first.job_id
    by_snapshot = open_statistics(two_jobs.store, TABLE, at_snapshot=two_jobs.first.snapshot)
    assert by_snapshot.manifest == old.manifest
    current = open_statistics(two_jobs.store, TABLE)
    assert current.job_id == two_jobs.second.job_id and current.column_statistics("price")["row_count"] == 3_000
    assert manifest_at(two_jobs.store, TABLE)["job_id"] == two_jobs.second.job_id
    assert manifest_at(two_jobs.store, TABLE, txn_id=2) == current.manifest


# ---------------------------------------------------------------- gc
def _age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (past, past))


@pytest.mark.ray
def test_gc_collects_a_fake_orphan_run_older_than_the_grace_period(two_jobs, store_copy: str) -> None:
    runs = Path(store_copy) / TABLE / "runs"
    orphan = runs / "19990101T000000-deadbeef" / "table"
    orphan.mkdir(parents=True)
    (orphan / "statistics.parquet").write_bytes(b"not really parquet")
    young = runs / "29990101T000000-cafecafe" / "table"  # a job still running: too recent
    young.mkdir(parents=True)
    (young / "statistics.parquet").write_bytes(b"x")
    _age(orphan.parent, 7200)
    dry = doc("--store", store_copy, "gc", TABLE, "--dry-run")
    assert dry["dry_run"] is True and dry["grace_period_s"] == 3600
    assert dry["files"] == ["runs/19990101T000000-deadbeef/table/statistics.parquet"]
    assert dry["recent"] == 1 and dry["referenced"] > 0
    assert (orphan / "statistics.parquet").exists()
    assert "would delete" in ok("--store", store_copy, "gc", TABLE, "--dry-run").stdout
    done = doc("--store", store_copy, "gc", TABLE)
    assert done["files"] == dry["files"] and done["dry_run"] is False
    assert not (orphan / "statistics.parquet").exists() and (young / "statistics.parquet").exists()
    assert doc("--store", store_copy, "show", TABLE)["rows"] == 3_000


@pytest.mark.ray
def test_gc_after_prune_collects_the_first_jobs_files(two_jobs, store_copy: str) -> None:
    from engine.catalog import Catalog

    first_run = Path(store_copy) / TABLE / "runs" / two_jobs.first.job_id
    second_run = Path(store_copy) / TABLE / "runs" / two_jobs.second.job_id
    # nothing is collected while transaction 1 is kept: it references the first job's files
    assert doc("--store", store_copy, "gc", TABLE, "--grace-period", "0", "--dry-run")["files"] == []
    cat = Catalog.open(store_copy, TABLE)
    assert cat.write_checkpoint() is not None
    cat.prune(2)
    assert [r["txn_id"] for r in doc("--store", store_copy, "history", TABLE)["transactions"]] == [2]
    dry = doc("--store", store_copy, "gc", TABLE, "--grace-period", "0", "--dry-run")
    expected = sorted(str(p.relative_to(Path(store_copy) / TABLE)) for p in first_run.rglob("*") if p.is_file())
    # table level (3 files, the file index's 3, the merged state table_state.arrow and a table
    # counts file per column group) + 2 partitions (3 files and 2 partial-state files each) + the
    # run's manifest.json
    counts = [p for p in expected if "/table/table_counts-" in p]
    assert any(p.endswith("/table/table_state.arrow") for p in expected)
    assert len(expected) - len(counts) == 18 and len(counts) == len(
        json.loads(Catalog.open(store_copy, TABLE).state().table_statistics.properties["table_counts"])["files"]
    )
    assert sorted(dry["files"]) == expected
    assert all((Path(store_copy) / TABLE / rel).exists() for rel in expected)
    # the default grace period keeps these fresh files
    assert doc("--store", store_copy, "gc", TABLE, "--dry-run")["files"] == []
    done = doc("--store", store_copy, "gc", TABLE, "--grace-period", "0")
    assert sorted(done["files"]) == expected
    assert not [p for p in first_run.rglob("*") if p.is_file()] and len(list(second_run.rglob("*.parquet"))) == 15
    assert doc("--store", store_copy, "show", TABLE, "--column", "price")["columns"][0]["statistics"]["row_count"] == 3_000
    result = run("--store", store_copy, "show", TABLE, "--at", "1")
    assert result.exit_code == 1 and "pruned" in result.stderr


# ---------------------------------------------------------------- rebuild
@pytest.mark.ray
def test_rebuild_after_deleting_the_catalog_gives_the_same_current_state(two_jobs, store_copy: str) -> None:
    from engine.catalog import Catalog

    before_state = Catalog.open(store_copy, TABLE).state()
    before = doc("--store", store_copy, "show", TABLE)
    shutil.rmtree(Path(store_copy) / TABLE / "catalog")
    assert run("--store", store_copy, "history", TABLE).exit_code == 1
    rebuilt = doc("--store", store_copy, "rebuild", TABLE)
    assert rebuilt["transactions"] == 2 and rebuilt["jobs"] == [two_jobs.first.job_id, two_jobs.second.job_id]
    assert rebuilt["current"]["job_id"] == two_jobs.second.job_id and rebuilt["current"]["rows"] == 3_000
    after_state = Catalog.open(store_copy, TABLE).state()
    assert after_state.referenced_paths() == before_state.referenced_paths()
    assert sorted(after_state.partitions) == sorted(before_state.partitions)
    assert {k: e.row_count for k, e in after_state.partitions.items()} == {k: e.row_count for k, e in before_state.partitions.items()}
    assert doc("--store", store_copy, "show", TABLE) == before
    assert doc("--store", store_copy, "show", TABLE, "--at", "1")["job_id"] == two_jobs.first.job_id
    # again, over the rebuilt catalog: it is replaced, with a backup
    again = doc("--store", store_copy, "rebuild", TABLE)
    assert again["backup_uri"] and again["transactions"] == 2
    assert "Rebuilt the catalog" in ok("--store", store_copy, "rebuild", TABLE).stdout
    refused = run("--store", store_copy, "rebuild", TABLE, "--no-replace")
    assert refused.exit_code == 1 and "already has a catalog" in refused.stderr
