"""Append re-analyzes at many partitions merge the table's merged state (one file) instead of
every inherited partition's state (engine/runtime/job/plan.py, ``Append.state``), in this
process (``runtime="local"``: no Ray).

Oracles: a full analyze of the same data with inheritance off, in this process (every statistic,
KLL sketches included, every histogram and the merged frequencies equal: ``assert_like_a_full_analyze``
of tests/engine/test_append.py), and DuckDB over the table's files for a few values. That the
state was used is observable twice: the job says it loaded no partition's state
(``AnalyzeResult.states_loaded``, ``table_state``), and the inherited partitions' partial states
are deleted before the append (a load of any of them would fail and recompute it).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.catalog import Catalog
from engine.catalog.model import TABLE_COUNTS_PROPERTY
from engine.files import layout, partial_state
from engine.runtime.job.result import AnalyzeResult
from engine.sample import generate_table, partition_names
from tests.engine.test_append import USER, assert_like_a_full_analyze

TABLE = "sales"
PARTITIONS = 64


def _analyze(data: Path, store: Path, **kwargs: Any) -> AnalyzeResult:
    return analyze(str(data), store=str(store), user_statistics=USER, runtime="local", **kwargs)


def _counts_property(store: Path) -> dict[str, Any]:
    ts = Catalog.open(str(store), TABLE).state().table_statistics
    return json.loads(ts.properties[TABLE_COUNTS_PROPERTY])


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, list[str]]:
    """The sample table of 65 small partitions (names: the generator's, in table order)."""
    data = tmp_path / "data" / TABLE
    generate_table(str(data), rows=(PARTITIONS + 1) * 150, partitions=PARTITIONS + 1, seed=11)
    return data, partition_names(PARTITIONS + 1)


def _drop_partition_states(run_uri: str) -> int:
    gone = list(Path(run_uri).glob(f"partitions/*/{partial_state.PARTIAL_STATE_FILE}"))
    for f in gone:
        f.unlink()
    return len(gone)


def _duck_check(store: Path, data: Path) -> None:
    rows = {r["column"]: r for r in pq.read_table(open_statistics(str(store), TABLE).file_uri(layout.STATISTICS_FILE)).to_pylist()}
    con = duckdb.connect()
    count, quantity, amount_min, amount_max = con.execute(
        f"SELECT count(*), sum(quantity), min(amount), max(amount) FROM read_parquet('{data}/*/*.parquet', hive_partitioning = true)"
    ).fetchone()
    assert rows["quantity"]["row_count"] == count
    assert int(rows["quantity"]["sum"]) == int(quantity)
    assert float(rows["amount"]["min"]) == pytest.approx(float(amount_min)) and float(rows["amount"]["max"]) == pytest.approx(float(amount_max))


@contextmanager
def _held_out(partition: Path, tmp_path: Path) -> Iterator[None]:
    """The table without ``partition`` for the block (moved aside), with it again after: the
    next analyze sees it appended."""
    held = tmp_path / "held"
    shutil.move(str(partition), str(held))
    try:
        yield
    finally:
        shutil.move(str(held), str(partition))


def test_an_append_at_many_partitions_merges_the_table_state(table, tmp_path: Path) -> None:
    data, names = table
    with _held_out(data / f"part={names[-1]}", tmp_path):
        store = tmp_path / "store"
        first = _analyze(data, store)
        assert (first.runtime, first.states_loaded, first.table_state) == ("local", 0, False)
        state = _counts_property(store)["state"]
        assert state["partitions"]["count"] == PARTITIONS and (store / TABLE / state["path"]).exists()
        assert _drop_partition_states(first.run_uri) == PARTITIONS  # an append that loaded one would recompute it
    second = _analyze(data, store)
    assert (second.inherited, second.recomputed, second.warnings) == (PARTITIONS, 1, [])
    assert (second.states_loaded, second.table_state, second.frequency_segments) == (0, True, 2)
    after = _counts_property(store)["state"]
    assert after["partitions"]["count"] == PARTITIONS + 1 and after["path"] != state["path"]
    assert_like_a_full_analyze(store, data, tmp_path)
    _duck_check(store, data)


def test_a_partition_appended_before_the_others_loads_their_states(table, tmp_path: Path) -> None:
    """The merged state is the fold's value after the partitions it covers: a partition that
    sorts before them cannot be merged after it (the moments would differ in their last bits)."""
    data, names = table
    with _held_out(data / f"part={names[0]}", tmp_path):
        store = tmp_path / "store"
        _analyze(data, store)
    second = _analyze(data, store)
    assert (second.recomputed, second.frequency_segments) == (1, 2)
    assert (second.states_loaded, second.table_state) == (PARTITIONS, False)
    assert_like_a_full_analyze(store, data, tmp_path)


def test_a_damaged_table_state_reduces_in_full_with_a_warning(table, tmp_path: Path) -> None:
    data, names = table
    with _held_out(data / f"part={names[-1]}", tmp_path):
        store = tmp_path / "store"
        _analyze(data, store)
        path = store / TABLE / _counts_property(store)["state"]["path"]
        path.write_bytes(path.read_bytes()[:-100])
    second = _analyze(data, store)
    assert second.frequency_segments == 1 and not second.table_state
    assert any("merged state" in w for w in second.warnings), second.warnings
    assert_like_a_full_analyze(store, data, tmp_path)
    _duck_check(store, data)


# the identity, and the partial state's checksums (those files carry their own identity)
_IDENTITY = {"metastore.job_id", "metastore.created_at", "metastore.snapshot", "metastore.table_uri", layout.PARTIAL_STATE_KEY}


def _chunks(uri: str) -> list[tuple[str, str, int]]:
    """(leaf path, codec, compressed bytes) of every column chunk of a Parquet file."""
    md = pq.read_metadata(uri)
    return [
        (c.path_in_schema, c.compression, c.total_compressed_size)
        for rg in range(md.num_row_groups)
        for c in (md.row_group(rg).column(i) for i in range(md.num_columns))
    ]


def _without_identity(uri: str) -> dict[str, str]:
    return {k: v for k, v in layout.decode_metadata(pq.read_metadata(uri).metadata).items() if k not in _IDENTITY}


def test_re_binned_partitions_write_the_files_a_full_analyze_writes(table, tmp_path: Path) -> None:
    """An append that moves the edges re-bins every inherited partition: its statistics.parquet
    (copied with new ``histogram_bins``) and histograms.parquet hold what a full analyze's hold,
    column chunk for column chunk (codec and compressed size; the identity metadata aside), and
    the codecs are the cheap ones (snappy statistics, uncompressed null edges; zstd counts)."""
    data, names = table
    with _held_out(data / f"part={names[-1]}", tmp_path):
        store = tmp_path / "store"
        _analyze(data, store)
    second = _analyze(data, store)
    assert (second.table_state, second.rebinned) == (True, PARTITIONS)
    oracle = tmp_path / "oracle"
    _analyze(data, oracle, inherit=False)
    got, want = open_statistics(str(store), TABLE), open_statistics(str(oracle), TABLE)
    for p in want.partitions():
        for name in (layout.STATISTICS_FILE, layout.HISTOGRAMS_FILE):
            a, b = got.file_uri(name, p.key), want.file_uri(name, p.key)
            assert pq.read_table(a).replace_schema_metadata(None).equals(pq.read_table(b).replace_schema_metadata(None)), (p.key, name)
            assert _without_identity(a) == _without_identity(b), (p.key, name)
            assert _chunks(a) == _chunks(b), (p.key, name)
        codecs = {c[0].rsplit(".", 1)[-1] if "." in c[0] else "": c[1] for c in _chunks(got.file_uri(layout.HISTOGRAMS_FILE, p.key))}
        assert codecs == {"lower": "UNCOMPRESSED", "upper": "UNCOMPRESSED", "count": "ZSTD"}, p.key
        assert {c[1] for c in _chunks(got.file_uri(layout.STATISTICS_FILE, p.key))} == {"SNAPPY"}, p.key


def test_a_constant_columns_bins_come_from_its_statistics_row() -> None:
    """A re-binned partition's column of one value (min = max in its statistics row: a Hive
    partition column) is binned from that row, not from its value counts. Oracle: numpy's
    bincount of the column's values on the spec's integer edges, and pyarrow's binning of the
    values themselves for a timestamp; columns of more than one value, or none, are left alone."""
    from engine.columns import LeafColumn
    from engine.runtime.tasks.bins import _constant_bins
    from engine.stats.histograms import make_spec

    ts = pa.timestamp("us", tz="UTC")
    when = pa.scalar(1_717_243_200_123_456, ts)
    stats = pa.table(
        {
            "column": ["part", "qty", "empty", "at"],
            "row_count": [1000, 1000, 1000, 1000],
            "null_count": [0, 7, 1000, 3],
            "min": ["1023", "1", None, value_forms.encode(pa.array([when])).to_pylist()[0]],
            "max": ["1023", "9", None, value_forms.encode(pa.array([when])).to_pylist()[0]],
        }
    )
    types = {"part": pa.int32(), "qty": pa.int64(), "empty": pa.int64(), "at": ts}
    leaves = {n: LeafColumn(n, n, (), t) for n, t in types.items()}
    specs = {
        "part": make_spec(pa.int32(), 0, 1088, 1000),
        "qty": make_spec(pa.int64(), 0, 10, 1000),
        "empty": make_spec(pa.int64(), 0, 10, 1000),
        "at": make_spec(ts, when.value - 10**12, when.value + 10**9, 1000),
    }
    got = _constant_bins(specs, stats, leaves, ["part", "qty", "empty", "at"])
    assert sorted(got) == ["at", "part"]
    part = specs["part"]
    assert part is not None
    want = np.bincount(np.full(1000, (1023 - int(part.lower)) // int(part.width)), minlength=part.bins)
    assert np.array_equal(got["part"], want)
    at = specs["at"]
    assert at is not None
    values = pa.array([when.value] * 997 + [None] * 3, pa.int64()).cast(ts)
    assert np.array_equal(got["at"], at.bin_counts(values)) and int(got["at"].sum()) == 997
    assert _constant_bins(specs, stats, leaves, ["qty"]) == {} and _constant_bins(specs, None, leaves, ["part"]) == {}
