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
from engine.files import layout, partial_state, writer
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


def _files_of(store: Path, name: str) -> dict[str, tuple[str, bytes, int]]:
    """Each partition's ``name`` file: (URI, bytes, modification time in ns)."""
    ts = open_statistics(str(store), TABLE)
    return {p.key: (u, Path(u).read_bytes(), Path(u).stat().st_mtime_ns) for p in ts.partitions() if (u := ts.file_uri(name, p.key))}


#: the histogrammed integer columns of the sample table a DuckDB oracle bins by their values
_INTEGER_COLUMNS = ("id", "quantity", "user_id", "part")


def _duck_bins(data: Path, partition: str, column: str, spec: Any) -> np.ndarray:
    """Bin counts of ``column`` in one partition by DuckDB: bin ``(v - lower) // width`` of each
    non-null value, clamped to the last bin (the integer domain's definition, docs/FORMAT.md)."""
    lower, width, bins = int(spec.lower), int(spec.width), int(spec.bins)
    rows = (
        duckdb.connect()
        .execute(
            f"SELECT least((CAST({column} AS HUGEINT) - {lower}) // {width}, {bins - 1}) AS b, count(*) "
            f"FROM read_parquet('{data}/{partition}/*.parquet', hive_partitioning = true) WHERE {column} IS NOT NULL GROUP BY b"
        )
        .fetchall()
    )
    out = np.zeros(bins, np.int64)
    for b, n in rows:
        out[int(b)] = n
    return out


def test_re_binned_partitions_write_the_files_a_full_analyze_writes(table, tmp_path: Path) -> None:
    """An append that moves the edges (and the bin count of the partition column) re-bins every
    inherited partition: its histograms.parquet holds what a full analyze's holds, column chunk
    for column chunk (codec and compressed size; the identity metadata aside), uncompressed with
    its counts DELTA_BINARY_PACKED, and its bins are DuckDB's counts of the values; its
    statistics.parquet is not rewritten (the same file, bytes and modification time: its
    ``histogram_bins`` are null, the count is its histograms'), equal to a full analyze's, and
    the lookups give the partition the table's bin counts."""
    data, names = table
    with _held_out(data / f"part={names[-1]}", tmp_path):
        store = tmp_path / "store"
        _analyze(data, store)
        before_bins = open_statistics(str(store), TABLE).column_statistics("part")["histogram_bins"]
    before = _files_of(store, layout.STATISTICS_FILE)
    second = _analyze(data, store)
    assert (second.table_state, second.rebinned) == (True, PARTITIONS)
    after = _files_of(store, layout.STATISTICS_FILE)
    assert {k: after[k] for k in before} == before  # not rewritten: same URI, bytes, mtime
    oracle = tmp_path / "oracle"
    _analyze(data, oracle, inherit=False)
    got, want = open_statistics(str(store), TABLE), open_statistics(str(oracle), TABLE)
    table_bins = {r["column"]: r["histogram_bins"] for r in want.statistics(statistics=["histogram_bins"]).to_pylist()}
    assert table_bins["part"] != before_bins  # the bin count changed: the case that copied statistics files
    for p in want.partitions():
        for name in (layout.STATISTICS_FILE, layout.HISTOGRAMS_FILE):
            a, b = got.file_uri(name, p.key), want.file_uri(name, p.key)
            assert pq.read_table(a).replace_schema_metadata(None).equals(pq.read_table(b).replace_schema_metadata(None)), (p.key, name)
            assert _without_identity(a) == _without_identity(b), (p.key, name)
            assert _chunks(a) == _chunks(b), (p.key, name)
        hist = got.file_uri(layout.HISTOGRAMS_FILE, p.key)
        assert {c[1] for c in _chunks(hist)} == {"UNCOMPRESSED"}, p.key
        md = pq.read_metadata(hist)
        counts = [md.row_group(0).column(i) for i in range(md.num_columns) if md.row_group(0).column(i).path_in_schema.endswith(".count")]
        assert counts and all("DELTA_BINARY_PACKED" in c.encodings for c in counts), p.key
        stats = got.file_uri(layout.STATISTICS_FILE, p.key)
        assert {c[1] for c in _chunks(stats)} == {"SNAPPY"}, p.key
        assert pq.read_table(stats, columns=["histogram_bins"]).column(0).null_count == len(table_bins), p.key
        assert layout.decode_metadata(pq.read_metadata(stats).metadata)[layout.HISTOGRAM_BINS_KEY] == layout.HISTOGRAM_BINS_IN_HISTOGRAMS
        rows = got.statistics(partition=p.key, statistics=["histogram_bins"]).to_pylist()
        assert {r["column"]: r["histogram_bins"] for r in rows} == table_bins, p.key
        for column in _INTEGER_COLUMNS:
            spec = got.histogram_spec(column, p.key)
            bins = got.histogram(column, p.key).column("count").to_numpy()
            assert np.array_equal(bins, _duck_bins(data, p.key, column, spec)), (p.key, column)


def _older_statistics_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions' statistics.parquet written as before ``layout.HISTOGRAM_BINS_KEY``: each
    column's ``histogram_bins`` in the file (its histograms.parquet's, written just before)."""
    real = writer.write_statistics

    def older(uri: str, rows: list[dict[str, Any]], user: Any, identity: layout.FileIdentity, partial_state: Any = None) -> Any:
        got = real(uri, rows, user, identity, partial_state=partial_state)
        if identity.level != "partition":
            return got
        t = pq.read_table(uri)
        specs = json.loads(pq.read_metadata(uri.rsplit("/", 1)[0] + "/" + layout.HISTOGRAMS_FILE).metadata[b"metastore.histograms"])
        i = t.schema.get_field_index("histogram_bins")
        t = t.set_column(i, t.schema.field(i), pa.array(layout.bins_of(specs, t["column"].to_pylist()), pa.int64()))
        md = {k: v for k, v in (t.schema.metadata or {}).items() if k != layout.HISTOGRAM_BINS_KEY.encode()}
        return writer._write_statistics_table(uri, t.replace_schema_metadata(md))

    monkeypatch.setattr(writer, "write_statistics", older)


def test_older_partition_statistics_read_and_are_copied_once(table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose partitions' statistics.parquet hold ``histogram_bins`` (written before they
    moved to histograms.parquet) reads the same; an append that changes the bin count copies each
    re-binned partition's file once without them (then equal to a full analyze's), and the next
    such append copies none. Oracle: the table level's ``histogram_bins`` (a partition's bins are
    the table's) and a full analyze's files."""
    data, names = table
    held = data / f"part={names[-1]}"
    shutil.move(str(held), str(tmp_path / "held"))
    store = tmp_path / "store"
    with monkeypatch.context() as m:
        _older_statistics_writer(m)
        _analyze(data, store)
    first = _files_of(store, layout.STATISTICS_FILE)
    ts = open_statistics(str(store), TABLE)
    table_bins = {r["column"]: r["histogram_bins"] for r in ts.statistics(statistics=["histogram_bins"]).to_pylist()}
    for key, (uri, _, _) in first.items():
        assert layout.HISTOGRAM_BINS_KEY not in layout.decode_metadata(pq.read_metadata(uri).metadata)
        stored = pq.read_table(uri, columns=["column", "histogram_bins"]).to_pylist()
        assert {r["column"]: r["histogram_bins"] for r in stored} == table_bins, key
        assert {r["column"]: r["histogram_bins"] for r in ts.statistics(partition=key, statistics=["histogram_bins"]).to_pylist()} == table_bins
    shutil.move(str(tmp_path / "held"), str(held))
    assert _analyze(data, store).rebinned == PARTITIONS
    copied = _files_of(store, layout.STATISTICS_FILE)
    ts = open_statistics(str(store), TABLE)
    table_bins = {r["column"]: r["histogram_bins"] for r in ts.statistics(statistics=["histogram_bins"]).to_pylist()}
    oracle = open_statistics(str(_full(data, tmp_path / "oracle1")), TABLE)
    for key, (uri, _, _) in first.items():
        assert copied[key][0] != uri, key  # copied into the append's run
        assert layout.decode_metadata(pq.read_metadata(copied[key][0]).metadata)[layout.HISTOGRAM_BINS_KEY] == layout.HISTOGRAM_BINS_IN_HISTOGRAMS
        assert (
            pq.read_table(copied[key][0])
            .replace_schema_metadata(None)
            .equals(pq.read_table(oracle.file_uri(layout.STATISTICS_FILE, key)).replace_schema_metadata(None))
        ), key
        assert {r["column"]: r["histogram_bins"] for r in ts.statistics(partition=key, statistics=["histogram_bins"]).to_pylist()} == table_bins
    far = data / "part=200"  # a copy of the first partition far beyond the range: the edges move again
    far.mkdir()
    for f in (data / f"part={names[0]}").iterdir():
        shutil.copy(f, far / f.name)
    assert _analyze(data, store).rebinned == PARTITIONS + 1
    again = _files_of(store, layout.STATISTICS_FILE)
    assert {k: again[k] for k in copied} == copied  # the new format is not copied again
    ts = open_statistics(str(store), TABLE)
    previous, table_bins = table_bins, {r["column"]: r["histogram_bins"] for r in ts.statistics(statistics=["histogram_bins"]).to_pylist()}
    assert table_bins["part"] != previous["part"]  # the bin count changed again
    for key in copied:
        assert {r["column"]: r["histogram_bins"] for r in ts.statistics(partition=key, statistics=["histogram_bins"]).to_pylist()} == table_bins
    assert_like_a_full_analyze(store, data, tmp_path)


def _full(data: Path, store: Path) -> Path:
    _analyze(data, store, inherit=False)
    return store


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
