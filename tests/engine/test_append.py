"""Append re-analyzes, end to end on Ray: the table's discrete columns are reduced from its
counts at the last full reduction plus the appended partitions', and its frequencies get a
delta segment (docs/FORMAT.md, "Table frequencies in segments").

The oracle is a fresh analyze of the same data with inheritance off: every statistic of the
table (but KLL's approximate percentiles) must be equal, and the segments, merged as the format
says (read here straight from the Parquet files, newest first, from the newest segment holding a
column in full), must be the oracle's frequencies.parquet, row for row and in its order.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from engine.api import analyze, open_statistics
from engine.catalog import Catalog
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY, TABLE_COUNTS_PROPERTY
from engine.files import layout
from engine.runtime.job import plan
from engine.runtime.job.result import AnalyzeResult
from engine.sample import generate_table
from engine.stats.user import TOP1_SHARE, ZERO_COUNT

pytestmark = pytest.mark.ray

TABLE = "sales"
USER = [ZERO_COUNT, TOP1_SHARE]


def _analyze(data: Path, store: Path, **kwargs: Any) -> AnalyzeResult:
    kwargs.setdefault("user_statistics", USER)
    return analyze(str(data), store=str(store), **kwargs)


def _properties(store: Path) -> dict[str, Any]:
    ts = Catalog.open(str(store), TABLE).state().table_statistics
    return {k: json.loads(v) for k, v in ts.properties.items()}


def merged_frequencies(store: Path) -> dict[str, list[tuple[str, int]]]:
    """{column: [(value, frequency)]}: the table's segments merged as docs/FORMAT.md says, in the
    file order of a single full file (by frequency, then value: the oracle file's order is used
    to break ties, since text forms do not sort like values)."""
    ts = open_statistics(str(store), TABLE)
    older = _properties(store).get(FREQUENCY_SEGMENTS_PROPERTY) or []
    uris = [str(store / TABLE / s["path"]) for s in older] + [ts.file_uri(layout.FREQUENCIES_FILE)]
    out: dict[str, dict[str, int]] = {}
    for uri in uris:  # oldest first: newer rows replace older ones
        pf = pq.ParquetFile(uri)
        md = layout.decode_metadata(pf.metadata.metadata)
        full = set(json.loads(md[layout.SEGMENT_KEY]).get("full", [])) if layout.SEGMENT_KEY in md else set(json.loads(md["metastore.frequencies"]))
        t = pf.read()
        rows: dict[str, dict[str, int]] = {}
        for c, v, f in zip(t["column"].to_pylist(), t["value"].to_pylist(), t["frequency"].to_pylist()):
            rows.setdefault(c, {})[v] = f
        for column in json.loads(md["metastore.frequencies"]):
            if column in full:
                out[column] = {}
            out.setdefault(column, {}).update(rows.get(column, {}))
    return {c: sorted(v.items(), key=lambda r: -r[1]) for c, v in out.items()}


def file_frequencies(uri: str) -> dict[str, list[tuple[str, int]]]:
    t = pq.read_table(uri)
    out: dict[str, list[tuple[str, int]]] = {}
    for c, v, f in zip(t["column"].to_pylist(), t["value"].to_pylist(), t["frequency"].to_pylist()):
        out.setdefault(c, []).append((v, f))
    return out


def _stat_rows(uri: str) -> list[dict]:
    t = pq.read_table(uri)  # KLL sketches and their percentiles included: deterministic (issue #28)
    return [{k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in t.to_pylist()]


def assert_like_a_full_analyze(store: Path, data: Path, tmp: Path) -> None:
    oracle = tmp / f"oracle-{time.time_ns()}"
    _analyze(data, oracle, inherit=False)
    got, want = open_statistics(str(store), TABLE), open_statistics(str(oracle), TABLE)
    assert _stat_rows(got.file_uri(layout.STATISTICS_FILE)) == _stat_rows(want.file_uri(layout.STATISTICS_FILE))
    assert pq.read_table(got.file_uri(layout.HISTOGRAMS_FILE)).equals(pq.read_table(want.file_uri(layout.HISTOGRAMS_FILE)))
    # every partition's histograms too: re-binned ones from stored counts, value counts or data
    for p in want.partitions():
        a, b = pq.read_table(got.file_uri(layout.HISTOGRAMS_FILE, p.key)), pq.read_table(want.file_uri(layout.HISTOGRAMS_FILE, p.key))
        assert a.equals(b), p.key
    expected = file_frequencies(want.file_uri(layout.FREQUENCIES_FILE))
    merged = merged_frequencies(store)
    assert set(merged) == set(
        json.loads(layout.decode_metadata(pq.read_metadata(want.file_uri(layout.FREQUENCIES_FILE)).metadata)["metastore.frequencies"])
    )
    for column in merged:
        want_rows = expected.get(column, [])
        assert sorted(merged[column], key=lambda r: (-r[1], r[0])) == sorted(want_rows, key=lambda r: (-r[1], r[0])), column
        # the newest segment's head is the full file's first row group
        head = file_frequencies(got.file_uri(layout.FREQUENCIES_FILE)).get(column, [])[: layout.FREQUENCIES_HEAD_ROWS]
        assert head == want_rows[: layout.FREQUENCIES_HEAD_ROWS], column
    # the readers (engine/lookup/: what Flight, the UI, subsets and Spark read) see the whole file
    got_index, want_index = got.frequency_index(), want.frequency_index()
    assert {c: v[2:] for c, v in got_index.items()} == {c: v[2:] for c, v in want_index.items()}  # stored rows, kinds
    for column, (_, _, rows, _) in want_index.items():
        for k in {1, 10, rows}:
            a, b = got.top_frequencies(column, k), want.top_frequencies(column, k)
            assert a.select(["value", "frequency"]).equals(b.select(["value", "frequency"])), (column, k)


@pytest.fixture
def held(tmp_path: Path) -> tuple[Path, list[Path]]:
    """The sample table of 6 partitions with the last two moved aside (appended by the tests)."""
    data = tmp_path / "data" / TABLE
    generate_table(str(data), rows=180_000, partitions=6, seed=3)
    aside = []
    for key in ("part=04", "part=05"):
        shutil.move(str(data / key), str(tmp_path / key))
        aside.append(tmp_path / key)
    return data, aside


def _profiled(run_uri: str) -> set[str]:
    """Partitions profiled by the job of ``run_uri`` (re-binned ones get only new histograms there)."""
    return {p.parent.name for p in (Path(run_uri) / "partitions").glob("*/partial_counts.arrow")}


def test_an_append_reduces_only_the_appended_values_and_equals_a_full_analyze(held, tmp_path: Path) -> None:
    data, aside = held
    store = tmp_path / "store"
    first = _analyze(data, store)
    assert first.frequency_segments == 1
    counts = _properties(store)[TABLE_COUNTS_PROPERTY]
    assert counts["base_partitions"] == [f"part={i:02d}" for i in range(4)] and counts["appended"] == []
    assert all((store / TABLE / f["path"]).exists() for f in counts["files"])
    # the append must not read the inherited partitions' value counts: remove them
    for f in (store / TABLE / "runs" / first.job_id / "partitions").glob("*/partial_counts.arrow"):
        f.unlink()
    shutil.move(str(aside[0]), str(data / "part=04"))
    second = _analyze(data, store)
    assert (second.inherited, second.recomputed, second.warnings) == (4, 1, [])
    assert second.frequency_segments == 2 and "cpu_append_attempt_s" not in second.timings
    assert _profiled(second.run_uri) == {"part=04"}
    props = _properties(store)
    assert props[TABLE_COUNTS_PROPERTY]["appended"] == ["part=04"] and props[TABLE_COUNTS_PROPERTY]["files"] == counts["files"]
    assert [s["path"] for s in props[FREQUENCY_SEGMENTS_PROPERTY]] == [f"runs/{first.job_id}/table/{layout.FREQUENCIES_FILE}"]
    assert_like_a_full_analyze(store, data, tmp_path)


def test_appends_chain_then_a_changed_partition_reduces_in_full(held, tmp_path: Path) -> None:
    data, aside = held
    store = tmp_path / "store"
    _analyze(data, store)
    for n, path in enumerate(aside):
        shutil.move(str(path), str(data / path.name))
        r = _analyze(data, store)
        assert (r.recomputed, r.frequency_segments) == (1, 2 + n)
        assert_like_a_full_analyze(store, data, tmp_path)
    # a partition rewritten: not an append; the table is reduced in full, one segment again
    f = data / "part=01" / "data-0.parquet"
    t = pq.read_table(f)
    pq.write_table(t.slice(0, t.num_rows - 7), f)
    r = _analyze(data, store)
    assert (r.recomputed, r.frequency_segments) == (1, 1)
    assert FREQUENCY_SEGMENTS_PROPERTY not in _properties(store)
    assert _properties(store)[TABLE_COUNTS_PROPERTY]["appended"] == []
    assert_like_a_full_analyze(store, data, tmp_path)


def test_too_many_segments_reduce_in_full(held, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan, "MAX_FREQUENCY_SEGMENTS", 2)
    data, aside = held
    store = tmp_path / "store"
    _analyze(data, store)
    shutil.move(str(aside[0]), str(data / "part=04"))
    assert _analyze(data, store).frequency_segments == 2
    shutil.move(str(aside[1]), str(data / "part=05"))
    r = _analyze(data, store)
    assert (r.recomputed, r.frequency_segments) == (1, 1)
    assert _properties(store)[TABLE_COUNTS_PROPERTY]["base_partitions"] == [f"part={i:02d}" for i in range(6)]
    assert_like_a_full_analyze(store, data, tmp_path)


def test_value_partitions_always_reduce_in_full(held, tmp_path: Path) -> None:
    data, aside = held
    store = tmp_path / "store"
    _analyze(data, store, value_partitions=True)
    assert TABLE_COUNTS_PROPERTY not in _properties(store)
    shutil.move(str(aside[0]), str(data / "part=04"))
    r = _analyze(data, store, value_partitions=True)
    assert (r.inherited, r.recomputed, r.frequency_segments) == (4, 1, 1)


def test_damaged_table_counts_reduce_in_full_with_a_warning(held, tmp_path: Path) -> None:
    data, aside = held
    store = tmp_path / "store"
    _analyze(data, store)
    f = store / TABLE / _properties(store)[TABLE_COUNTS_PROPERTY]["files"][0]["path"]
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    f.write_bytes(bytes(raw))
    shutil.move(str(aside[0]), str(data / "part=04"))
    r = _analyze(data, store)
    assert r.frequency_segments == 1 and len(r.warnings) == 1
    assert "table_counts-" in r.warnings[0] and "reduced in full" in r.warnings[0]
    assert_like_a_full_analyze(store, data, tmp_path)


def test_the_cli_line_says_an_append_was_reduced_alone() -> None:
    from engine.display import partitions_text

    doc = {"partitions": 17, "inherited": 16, "recomputed": 1, "rebinned": 16, "frequency_segments": 2}
    assert partitions_text(doc) == "17 (16 inherited, 1 recomputed; 16 re-binned; appended: table frequencies in 2 segments)"
    assert partitions_text({**doc, "frequency_segments": 1}) == "17 (16 inherited, 1 recomputed; 16 re-binned)"


def test_an_append_on_an_s3_table_and_store(s3_server: str, ray_runtime: None, tmp_path: Path) -> None:
    """The same on S3 (moto): the table's counts and segments are read from the store there."""
    import uuid

    import pyarrow.fs as pafs

    from engine import fileio

    local = tmp_path / "sales"
    generate_table(str(local), rows=90_000, partitions=4, seed=5)
    shutil.move(str(local / "part=03"), str(tmp_path / "part=03"))
    prefix = f"s3://bucket/append-{uuid.uuid4().hex[:8]}"
    fs, path = fileio.resolve(f"{prefix}/tables/{TABLE}")
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    table_uri, store = f"{prefix}/tables/{TABLE}", f"{prefix}/stats"
    analyze(table_uri, store=store, user_statistics=USER)
    pafs.copy_files(str(tmp_path / "part=03"), f"{path}/part=03", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    second = analyze(table_uri, store=store, user_statistics=USER)
    assert (second.inherited, second.recomputed, second.frequency_segments, second.warnings) == (3, 1, 2, [])
    analyze(table_uri, store=f"{prefix}/oracle", user_statistics=USER, inherit=False)
    got, want = open_statistics(store, TABLE), open_statistics(f"{prefix}/oracle", TABLE)
    index = want.frequency_index()
    assert {c: v[2:] for c, v in got.frequency_index().items()} == {c: v[2:] for c, v in index.items()}
    for column, (_, _, rows, _) in index.items():
        assert got.top_frequencies(column, rows).equals(want.top_frequencies(column, rows)), column
    stats = ["column", "row_count", "null_count", "distinct_count", "min", "max", "sum", "frequencies", "histogram_bins"]
    assert got.statistics(statistics=stats[1:]).equals(want.statistics(statistics=stats[1:]))
