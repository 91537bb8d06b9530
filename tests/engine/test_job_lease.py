"""A running analyze job's files survive gc and expire, and a commit checks its files (issue #33, item 9).

An analyze (real Ray) pauses at its commit: its files and manifest.json are written, nothing
is committed. Meanwhile ``metastore expire --grace-period 0s`` and ``metastore gc
--grace-period 0`` run: the job's lease keeps every one of its files, and the job then
commits. In the second test a file of the paused job is deleted: the commit fails with one
line naming it and the catalog stays as it was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pytest
from click.testing import CliRunner

import engine.catalog.publish
from engine.api import analyze
from engine.catalog import Catalog, lease
from engine.cli.console import metastore

pytestmark = pytest.mark.ray

TABLE = "events"


def _write_table(root: Path) -> Path:
    """Two partitions written by pandas, a third by polars."""
    table = root / TABLE
    rng = np.random.default_rng(7)
    for p in range(2):
        (table / f"p={p}").mkdir(parents=True)
        pd.DataFrame({"x": rng.integers(0, 50, 300), "s": rng.choice(["a", "b", "c"], 300)}).to_parquet(table / f"p={p}" / "part-0.parquet")
    (table / "p=2").mkdir()
    pl.DataFrame({"x": rng.integers(0, 50, 200), "s": rng.choice(["a", "d"], 200).tolist()}).write_parquet(table / "p=2" / "data.parquet")
    return table


class PausedCommit:
    """Pauses ``Store.publish`` between manifest.json and the commit (``engine.catalog.publish.publish_job``,
    which engine/store.py imports when it commits)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached, self.go = threading.Event(), threading.Event()
        self.job_id = ""
        real = engine.catalog.publish.publish_job

        def paused(store_uri: str, output: Any, **kwargs: Any) -> Any:
            self.job_id = output.job_id
            self.reached.set()
            assert self.go.wait(300), "the test never let the commit go"
            return real(store_uri, output, **kwargs)

        monkeypatch.setattr(engine.catalog.publish, "publish_job", paused)

    def run(self, fn: Callable[[], Any]) -> dict[str, Any]:
        """Run ``fn`` in a thread; returns its outcome holder (``result`` or ``error``)."""
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["result"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                outcome["error"] = exc

        outcome["thread"] = threading.Thread(target=target, daemon=True)
        outcome["thread"].start()
        assert self.reached.wait(300), outcome.get("error")
        return outcome

    def finish(self, outcome: dict[str, Any]) -> None:
        self.go.set()
        outcome["thread"].join(300)
        assert not outcome["thread"].is_alive()


def _cli(store: str, *args: str) -> tuple[int, str]:
    got = CliRunner().invoke(metastore, ["--store", store, *args])
    return got.exit_code, got.output


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.fixture
def analyzed_once(ray_runtime: None, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    table = _write_table(tmp_path / "data")
    store = str(tmp_path / "store")
    analyze(str(table), store=store, user_statistics=[])
    # the data changes (a partition is rewritten): the next job recomputes it and writes new files
    pd.DataFrame({"x": np.arange(120), "s": ["z"] * 120}).to_parquet(table / "p=1" / "part-0.parquet")
    yield table, store


def test_expire_and_gc_with_no_grace_keep_a_running_jobs_files_and_it_commits(analyzed_once, monkeypatch: pytest.MonkeyPatch) -> None:
    table, store = analyzed_once
    pause = PausedCommit(monkeypatch)
    outcome = pause.run(lambda: analyze(str(table), store=store, user_statistics=[]))
    run = Path(store) / TABLE / "runs" / pause.job_id
    written = _files(run)
    assert "manifest.json" in written and lease.LEASE in written and any(f.endswith("statistics.parquet") for f in written)

    code, out = _cli(store, "expire", TABLE, "--keep-last", "1", "--grace-period", "0s", "--output", "json")
    assert code == 0, out
    code, out = _cli(store, "gc", TABLE, "--grace-period", "0", "--output", "json")
    assert code == 0, out  # not refused: a manifest under a fresh lease is a job still running
    doc = json.loads(out)
    assert doc["files"] == [] and doc["running_jobs"] == len(written), doc
    assert _files(run) == written  # not one of them went

    pause.finish(outcome)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert result.job_id == pause.job_id
    assert not (run / lease.LEASE).exists()  # let go after the commit
    # the committed state names the job's files, all there, and counts the table's rows
    code, out = _cli(store, "verify", TABLE, "--output", "json")
    assert code == 0 and json.loads(out)["problems"] == [], out
    state = Catalog.open(store, TABLE).state()
    assert state.table_statistics.job_id == pause.job_id
    rows = duckdb.connect().sql(f"select count(*) from read_parquet('{table}/*/*.parquet')").fetchall()[0][0]
    assert sum(e.row_count for e in state.partitions.values()) == rows == 300 + 120 + 200


def test_a_commit_whose_file_was_deleted_fails_naming_it_and_commits_nothing(analyzed_once, monkeypatch: pytest.MonkeyPatch) -> None:
    table, store = analyzed_once
    before = Catalog.open(store, TABLE).state()
    current = (Path(store) / TABLE / "CURRENT").read_bytes()
    pause = PausedCommit(monkeypatch)
    outcome = pause.run(lambda: CliRunner().invoke(metastore, ["--store", store, "analyze", str(table)]))
    run = Path(store) / TABLE / "runs" / pause.job_id
    victim = run / "partitions" / "p=1" / "histograms.parquet"
    victim.unlink()  # what a gc that did not honour the job's lease would have done
    pause.finish(outcome)
    got = outcome["result"]
    assert got.exit_code != 0
    errors = [line for line in got.output.splitlines() if line.startswith("error:")]  # beside the progress lines
    assert len(errors) == 1 and errors[0].startswith("error: cannot commit job") and str(victim) in errors[0], got.output
    assert "Traceback" not in got.output
    # the catalog as before: same head, same CURRENT; the failed job's run is gone
    after = Catalog.open(store, TABLE).state()
    assert (after.txn_id, after.txn_uuid) == (before.txn_id, before.txn_uuid)
    assert (Path(store) / TABLE / "CURRENT").read_bytes() == current
    assert not run.exists()
    assert _cli(store, "verify", TABLE)[0] == 0
