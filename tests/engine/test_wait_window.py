"""The driver waits on a window of the oldest refs (Executor.wait_all): a window
smaller than the job changes nothing in what it publishes, nor in the progress it reports."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.api import analyze, open_statistics
from engine.files import layout
from engine.runtime.job import executor

pytestmark = pytest.mark.ray


def test_a_small_wait_window_publishes_the_same_statistics(analyzed_sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.stats.user import registered

    table, store, reference = analyzed_sample
    monkeypatch.setattr(executor, "WAIT_WINDOW", 2)  # 4 partitions, two waves: 8 summaries through a window of 2
    seen: list[tuple[str, int, int]] = []
    user = [u for u in registered() if u.name in ("zero_count", "top1_share")]
    result = analyze(table, str(tmp_path / "store"), user_statistics=user, progress=lambda *p: seen.append(p))
    profile = [(d, t) for phase, d, t in seen if phase == "profile"]
    assert profile[0] == (0, 4) and profile[-1] == (4, 4)  # partitions, not waves
    assert [d for d, _ in profile] == sorted(d for d, _ in profile)
    assert result.rows == reference.rows
    ours, theirs = open_statistics(str(tmp_path / "store"), result.table), open_statistics(store, reference.table)
    for name in (layout.FREQUENCIES_FILE, layout.HISTOGRAMS_FILE):
        assert pq.read_table(ours.file_uri(name)).equals(pq.read_table(theirs.file_uri(name))), name
    # the table's KLL sketches and percentiles too: merged in partition order with a coin of
    # fixed seed, whatever order the tasks ended in (issue #28)
    a = pq.read_table(ours.file_uri(layout.STATISTICS_FILE))
    b = pq.read_table(theirs.file_uri(layout.STATISTICS_FILE))
    assert a.replace_schema_metadata(None).equals(b.replace_schema_metadata(None))
