"""Inheritance of unchanged partitions, end to end on Ray.

A table is analyzed, changed (a partition added, a file rewritten, a partition
deleted, a schema change, moved histogram edges, damaged partial states), and
analyzed again. Unchanged partitions must keep their files (same paths, no
profile task: no directory of theirs in the new run), and every statistics file
the new state names must equal what a fresh analyze of the same data with
inheritance off writes (the oracle), but for KLL sketches, which compact at
random: their approximate percentiles are checked against the data instead.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from engine import fileio
from engine.api import analyze, open_statistics
from engine.catalog import Catalog, current_manifest
from engine.files import layout, partial_state
from engine.sample import generate_table
from engine.stats.user import TOP1_SHARE, ZERO_COUNT, UserStatistic
from engine.stats.valuecounts import PERCENTILES, percentile_column

pytestmark = pytest.mark.ray

USER = [ZERO_COUNT, TOP1_SHARE]
TABLE = "sales"
PCTS = [percentile_column(p) for p in PERCENTILES]


# ---------------------------------------------------------------- helpers
def _analyze(data: Path, store: Path, **kwargs: Any):
    kwargs.setdefault("user_statistics", USER)
    return analyze(str(data), store=str(store), **kwargs)


def _entries(store: Path) -> dict:
    return Catalog.open(str(store), TABLE).state().partitions


def _rewrite(path: Path, change) -> None:  # noqa: ANN001
    """Rewrite one data file through ``change(table) -> table`` (a new mtime, new content)."""
    t = pq.read_table(path)
    time.sleep(0.01)
    pq.write_table(change(t), path)


def _partition_dirs(run_uri: str) -> set[str]:
    root = Path(run_uri) / "partitions"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def _nan_safe(v: Any) -> Any:
    return "nan" if isinstance(v, float) and math.isnan(v) else v


def _stat_rows(uri: str) -> list[dict]:
    t = pq.read_table(uri)  # KLL sketches included: deterministic, merged in partition order (issue #28)
    return [{k: _nan_safe(v) for k, v in r.items()} for r in t.to_pylist()]


def _data(data: Path) -> pa.Table:
    return ds.dataset(str(data), format="parquet", partitioning="hive").to_table()


def _check_approximate(row: dict, t: pa.DataType, column: pa.ChunkedArray) -> None:
    """KLL percentiles (table level, floats and timestamps): within the rank error of the data."""
    from engine import values as value_forms

    temporal = pa.types.is_timestamp(t)
    x = (column.cast(pa.int64()) if temporal else column).cast(pa.float64()).drop_null().to_numpy()
    x = np.sort(x[~np.isnan(x)])
    err = row["percentiles_rank_error"]
    assert 0 < err < 0.05
    for p, name in zip(PERCENTILES, PCTS):
        v = value_forms.decode_scalar(row[name], t)
        v = float(v.cast(pa.int64()).as_py() if temporal else v.as_py())
        rank = np.searchsorted(x, v, side="right") / len(x)
        assert p - 3 * err - 1 / len(x) <= rank <= p + 3 * err + 1 / len(x), (row["column"], name, rank)


def assert_same_as_oracle(store: Path, oracle: Path, data: Path) -> None:
    """Every file of the current state of ``store`` equals the oracle's (fresh, inheritance off)."""
    got, want = open_statistics(str(store), TABLE), open_statistics(str(oracle), TABLE)
    assert [(p.key, p.rows) for p in got.partitions()] == [(p.key, p.rows) for p in want.partitions()]
    assert got.manifest["rows"] == want.manifest["rows"]
    table = _data(data)
    a, b = _stat_rows(got.file_uri(layout.STATISTICS_FILE)), _stat_rows(want.file_uri(layout.STATISTICS_FILE))
    assert [r["column"] for r in a] == [r["column"] for r in b]
    for ra, rb in zip(a, b):
        if ra["percentiles_exact"] is False:
            assert rb["percentiles_exact"] is False
            t = got.column_type(ra["column"])
            for r in (ra, rb):
                _check_approximate(r, t, table[ra["column"]])
                for name in PCTS:
                    r.pop(name)
        assert ra == rb, ra["column"]
    assert pq.read_table(got.file_uri(layout.HISTOGRAMS_FILE)).equals(pq.read_table(want.file_uri(layout.HISTOGRAMS_FILE)))
    if len(got.frequency_segments()) == 1:
        assert pq.read_table(got.file_uri(layout.FREQUENCIES_FILE)).equals(pq.read_table(want.file_uri(layout.FREQUENCIES_FILE)))
    else:  # an append wrote a delta segment: the merged view is the whole file (docs/FORMAT.md)
        index = want.frequency_index()
        assert {c: v[2:] for c, v in got.frequency_index().items()} == {c: v[2:] for c, v in index.items()}
        for column, (_, _, rows, _) in index.items():
            assert got.top_frequencies(column, rows).equals(want.top_frequencies(column, rows)), column
    for p in got.partitions():
        assert _stat_rows(got.file_uri(layout.STATISTICS_FILE, p.key)) == _stat_rows(want.file_uri(layout.STATISTICS_FILE, p.key)), p.key
        for name in (layout.FREQUENCIES_FILE, layout.HISTOGRAMS_FILE):
            assert pq.read_table(got.file_uri(name, p.key)).equals(pq.read_table(want.file_uri(name, p.key))), (p.key, name)


def _oracle(data: Path, tmp: Path, **kwargs: Any) -> Path:
    store = tmp / f"oracle-{time.time_ns()}"
    r = _analyze(data, store, inherit=False, **kwargs)
    assert r.inherited == 0 and r.recompute_reasons and set(r.recompute_reasons.values()) == {"inheritance off"}
    return store


KEYS = [f"part={i:02d}" for i in range(10) if i != 4]


@pytest.fixture
def table9(tmp_path: Path) -> Path:
    """The sample table with partitions 00..09 but part=04 moved aside (to ``tmp_path/held``).

    With this seed no extreme value of any column is in part=01, part=04 or part=08, so
    adding part=04 back, deleting part=08 or dropping rows of part=01 moves no histogram
    edge (no partition is re-binned; the next test moves edges on purpose)."""
    data = tmp_path / "data" / TABLE
    generate_table(str(data), rows=12_000, partitions=10, seed=1)
    shutil.move(str(data / "part=04"), str(tmp_path / "held"))
    return data


# ---------------------------------------------------------------- add, rewrite, delete
def test_unchanged_partitions_are_inherited_and_the_table_equals_a_fresh_analyze(table9: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _analyze(table9, store)
    assert (first.inherited, first.recomputed, first.rebinned) == (0, 9, 0)
    assert set(first.recompute_reasons.values()) == {"new partition"}
    before = _entries(store)
    v1_table_stats = pq.read_table(open_statistics(str(store), TABLE).file_uri(layout.STATISTICS_FILE))

    # the same snapshot again: everything is inherited, no partition is read
    again = _analyze(table9, store)
    assert (again.inherited, again.recomputed, again.rebinned, again.warnings) == (9, 0, 0, [])
    assert again.timings["cpu_profile_s"] == 0 and again.timings["cpu_histograms_s"] == 0
    # ... nor loaded and merged again: the table level is carried over (the first job's files)
    assert again.carried_over == first.job_id and again.run_uri == first.run_uri and again.timings["cpu_reduce_s"] == 0
    assert sorted(p.name for p in (store / TABLE / "runs" / again.job_id).iterdir()) == ["manifest.json"]
    assert pq.read_table(open_statistics(str(store), TABLE).file_uri(layout.STATISTICS_FILE)).equals(v1_table_stats)
    assert {k: e.files for k, e in _entries(store).items()} == {k: e.files for k, e in before.items()}

    # add part=04, rewrite a file of part=01 (10 rows fewer), delete part=08
    shutil.move(str(tmp_path / "held"), str(table9 / "part=04"))
    _rewrite(table9 / "part=01" / "data-0.parquet", lambda t: t.slice(0, t.num_rows - 10))
    shutil.rmtree(table9 / "part=08")
    second = _analyze(table9, store)
    assert (second.inherited, second.recomputed, second.rebinned, second.warnings) == (7, 2, 0, [])
    assert second.recompute_reasons == {"part=01": "data changed", "part=04": "new partition"}
    # the tasks ran only for the changed partitions: only they have files in the new run
    assert _partition_dirs(second.run_uri) == {"part=01", "part=04"}
    after = _entries(store)
    for key in set(KEYS) - {"part=01", "part=08"}:
        assert after[key].files == before[key].files and after[key].job_id == first.job_id, key
        assert after[key].data_fingerprint == before[key].data_fingerprint
    assert after["part=01"].job_id == second.job_id and after["part=01"].row_count == before["part=01"].row_count - 10
    m = current_manifest(str(store), TABLE)
    assert m["tombstones"] == ["part=08"] and m["rows"] == second.rows == 12_000 - 1_200 - 10
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)

    # time travel: transaction 1 still reads the first job's statistics, files and all
    old = open_statistics(str(store), TABLE, at_transaction=1)
    assert [p.key for p in old.partitions()] == KEYS
    assert pq.read_table(old.file_uri(layout.STATISTICS_FILE)).equals(v1_table_stats)
    assert old.column_statistics("id", partition="part=01")["row_count"] == before["part=01"].row_count
    assert old.file_uri(layout.STATISTICS_FILE, "part=08") == str(store / TABLE / before["part=08"].files.statistics.path)

    # republishing the second job names its inherited partitions' files explicitly
    from engine.store import Store

    Store(str(store)).republish(TABLE, first.job_id)
    Store(str(store)).republish(TABLE, second.job_id)
    assert {k: e.files for k, e in _entries(store).items()} == {k: e.files for k, e in after.items()}


def test_no_inherit_and_changed_options_recompute_everything(table9: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _analyze(table9, store)
    off = _analyze(table9, store, inherit=False)
    assert (off.inherited, off.recomputed) == (0, 9) and set(off.recompute_reasons.values()) == {"inheritance off"}
    ratio = _analyze(table9, store, mostly_distinct_ratio=0.7)
    assert ratio.inherited == 0 and set(ratio.recompute_reasons.values()) == {"analysis options changed (mostly_distinct_ratio)"}
    fewer = _analyze(table9, store, mostly_distinct_ratio=0.7, user_statistics=[ZERO_COUNT])
    assert fewer.inherited == 0 and set(fewer.recompute_reasons.values()) == {"analysis options changed (user_statistics)"}
    plain = UserStatistic("plain_count", compute=len, merge=lambda a, b: a + b, result_type=pa.int64())
    opaque = _analyze(table9, store, user_statistics=[ZERO_COUNT, plain])
    assert opaque.inherited == 0
    assert set(opaque.recompute_reasons.values()) == {"user statistic(s) without serialize/deserialize: plain_count"}
    # a job that could not store its states leaves nothing to inherit from
    assert not list(Path(opaque.run_uri).rglob(partial_state.PARTIAL_STATE_FILE))
    assert _analyze(table9, store, user_statistics=[ZERO_COUNT, plain]).inherited == 0
    back = _analyze(table9, store)
    assert back.inherited == 0 and set(back.recompute_reasons.values()) == {"the earlier statistics have no partial states"}
    assert _analyze(table9, store).inherited == 9


# ---------------------------------------------------------------- schema changes
def test_a_new_column_or_a_type_change_recomputes_every_partition(table9: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _analyze(table9, store)
    # a new column in one file of part=01: the unified schema gains it
    extra = pq.read_table(table9 / "part=01" / "data-1.parquet")
    extra = extra.append_column("extra", pa.array(range(extra.num_rows), pa.int64()))
    pq.write_table(extra, table9 / "part=01" / "data-1.parquet")
    added = _analyze(table9, store)
    assert (added.inherited, added.recomputed) == (0, 9)
    assert added.recompute_reasons == dict.fromkeys(KEYS, "schema changed")
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)
    # quantity int32 -> int64 in part=02: the column is promoted everywhere
    _rewrite(
        table9 / "part=02" / "data-0.parquet",
        lambda t: t.set_column(t.schema.get_field_index("quantity"), "quantity", t["quantity"].cast(pa.int64())),
    )
    promoted = _analyze(table9, store)
    assert (promoted.inherited, promoted.recomputed) == (0, 9)
    assert open_statistics(str(store), TABLE).column_type("quantity") == pa.int64()
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)
    assert _analyze(table9, store).inherited == 9


# ---------------------------------------------------------------- histogram edges
def test_moved_edges_rebin_inherited_partitions_and_rewrite_only_their_histograms(tmp_path: Path) -> None:
    data = tmp_path / "data" / TABLE
    generate_table(str(data), rows=8_000, partitions=4, seed=1)
    store = tmp_path / "store"
    _analyze(data, store)
    v1 = _entries(store)

    # a new partition part=04 beyond every key (the int64 partition column gets a 5th bin), with
    # a price far above the others and dates in the next year (more day bins)
    new = pq.read_table(data / "part=00" / "data-0.parquet").slice(0, 500)
    new = new.set_column(new.schema.get_field_index("price"), "price", pc.multiply(new["price"], 1000.0))
    dates = pc.add(new["event_date"].cast(pa.int32()), pa.scalar(400, pa.int32())).cast(pa.date32())
    new = new.set_column(new.schema.get_field_index("event_date"), "event_date", dates)
    (data / "part=04").mkdir()
    pq.write_table(new, data / "part=04" / "data-0.parquet")
    second = _analyze(data, store)
    assert (second.inherited, second.recomputed, second.rebinned) == (4, 1, 4)
    v2 = _entries(store)
    for key in v1:
        # frequencies (and the partial state next to them) stay in the first run, and statistics.parquet
        # too though the bin counts of part and event_date changed (a partition's are its histograms':
        # docs/FORMAT.md); the histograms are new
        assert v2[key].files.frequencies == v1[key].files.frequencies
        assert v2[key].files.statistics == v1[key].files.statistics
        assert v2[key].files.histograms.path.startswith(f"runs/{second.job_id}/")
        assert v2[key].data_fingerprint == v1[key].data_fingerprint
    assert_same_as_oracle(store, _oracle(data, tmp_path), data)

    # a higher price in part=01: only price's edges move, and a float histogram keeps its 1,000 bins,
    # so the other partitions get new histograms but keep their statistics.parquet
    _rewrite(data / "part=01" / "data-0.parquet", lambda t: t.set_column(t.schema.get_field_index("price"), "price", pc.multiply(t["price"], 1500.0)))
    third = _analyze(data, store)
    assert (third.inherited, third.recomputed, third.rebinned) == (4, 1, 4)
    assert third.recompute_reasons == {"part=01": "data changed"}
    v3 = _entries(store)
    for key in ("part=00", "part=02", "part=03", "part=04"):
        assert v3[key].files.statistics == v2[key].files.statistics
        assert v3[key].files.frequencies == v2[key].files.frequencies
        assert v3[key].files.histograms.path.startswith(f"runs/{third.job_id}/")
    assert_same_as_oracle(store, _oracle(data, tmp_path), data)

    # the files alone rebuild the same state (a re-binned partition takes its frequencies and statistics from its first job)
    from engine.catalog import rebuild

    rebuild(str(store), TABLE, replace=True)
    rebuilt = _entries(store)
    assert {k: e.files for k, e in rebuilt.items()} == {k: e.files for k, e in v3.items()}


# ---------------------------------------------------------------- damaged partial states
def test_a_damaged_or_missing_partial_state_falls_back_to_recomputing(table9: Path, tmp_path: Path, caplog) -> None:
    store = tmp_path / "store"
    _analyze(table9, store)
    entries = _entries(store)

    def state_path(key: str, name: str) -> Path:
        return (store / TABLE / entries[key].files.frequencies.path).parent / name

    damaged = state_path("part=01", partial_state.PARTIAL_STATE_FILE)
    damaged.write_bytes(damaged.read_bytes()[:100])
    missing = state_path("part=02", partial_state.PARTIAL_COUNTS_FILE)
    missing.unlink()
    # nothing changed, but the table is carried over only when every partition's files check out
    with caplog.at_level("WARNING", logger="engine.analyze"):
        second = _analyze(table9, store)
    assert (second.inherited, second.recomputed, second.carried_over) == (7, 2, "")
    assert len(second.warnings) == 2
    assert any(str(damaged) in w and "part=01" in w for w in second.warnings)
    assert any(str(missing) in w and "missing" in w for w in second.warnings)
    assert second.recompute_reasons["part=01"].startswith("partial state unusable: partial state damaged: ")
    assert sum("cannot inherit" in r.getMessage() for r in caplog.records) == 2
    assert _partition_dirs(second.run_uri) == {"part=01", "part=02"}
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)
    # the recomputed partitions wrote new partial states: the next job inherits everything
    third = _analyze(table9, store)
    assert (third.inherited, third.recomputed, third.warnings, third.carried_over) == (9, 0, [], second.job_id)


def test_a_damaged_inherited_histograms_file_is_recomputed_not_merged(table9: Path, tmp_path: Path) -> None:
    """A bit flip in an inherited partition's histograms.parquet (its checksum, issue #21) makes the
    partition recomputed with a warning naming the file, not merged into the table's histograms."""
    store = tmp_path / "store"
    _analyze(table9, store)
    path = store / TABLE / _entries(store)["part=03"].files.histograms.path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    second = _analyze(table9, store)
    assert (second.inherited, second.recomputed, second.carried_over) == (8, 1, "")
    assert len(second.warnings) == 1 and str(path) in second.warnings[0] and "checksum" in second.warnings[0]
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)


# ---------------------------------------------------------------- gc
def test_gc_keeps_the_files_and_partial_states_of_inherited_partitions(table9: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _analyze(table9, store)
    _rewrite(table9 / "part=02" / "data-0.parquet", lambda t: t.slice(0, t.num_rows - 1))
    second = _analyze(table9, store)
    assert second.inherited == 8
    cat = Catalog.open(str(store), TABLE)
    assert cat.write_checkpoint() is not None
    cat.prune(cat.state().txn_id)  # the first transaction is gone: only the inheritance references run 1
    result = cat.gc(0)
    run1 = f"runs/{first.job_id}/"
    deleted = set(result.deleted)
    # run 1's replaced partition and its table level go ...
    assert {f"{run1}partitions/part=02/{n}" for n in layout.FILES} <= deleted
    assert {f"{run1}table/{n}" for n in layout.FILES} <= deleted
    # ... the inherited partitions' files and partial states stay
    for key in set(KEYS) - {"part=02"}:
        for name in (*layout.FILES, *partial_state.FILES):
            rel = f"{run1}partitions/{key}/{name}"
            assert rel not in deleted and (store / TABLE / rel).exists(), rel
    assert all(not d.startswith(f"runs/{second.job_id}/") for d in deleted)
    third = _analyze(table9, store)
    assert (third.inherited, third.warnings) == (9, [])
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)


# ---------------------------------------------------------------- an unchanged table
def test_an_unchanged_table_is_carried_over_and_outlives_the_state_it_came_from(table9: Path, tmp_path: Path) -> None:
    """Nothing changed: the new state names the earlier table files (the partial states are
    checked, not loaded; nothing is merged or written but the manifest); they stay readable after the state that
    wrote them is expired and collected, the job can be republished, and the next change merges
    the table level anew, equal to a fresh analyze."""
    store = tmp_path / "store"
    first = _analyze(table9, store)
    want = {n: pq.read_table(open_statistics(str(store), TABLE).file_uri(n)) for n in layout.FILES}
    again = _analyze(table9, store)
    assert (again.carried_over, again.inherited, again.recomputed, again.rows) == (first.job_id, 9, 0, first.rows)
    state = Catalog.open(str(store), TABLE).state()
    assert state.table_statistics.job_id == again.job_id and state.table_statistics.snapshot_id == again.snapshot
    # a carried-over state carries over what the files' job was, not the state it came from
    third = _analyze(table9, store)
    assert third.carried_over == first.job_id
    ts = open_statistics(str(store), TABLE)
    assert ts.state.job_id == third.job_id and ts.state.run_uri == first.run_uri
    for n in layout.FILES:
        assert pq.read_table(ts.file_uri(n)).equals(want[n]), n

    cat = Catalog.open(str(store), TABLE)
    assert cat.write_checkpoint() is not None
    cat.prune(cat.state().txn_id)  # the first job's state goes; its files are the current state's
    deleted = set(cat.gc(0).deleted)
    assert not any(d.startswith(f"runs/{first.job_id}/") for d in deleted), deleted
    ts = open_statistics(str(store), TABLE)
    for n in layout.FILES:
        assert pq.read_table(ts.file_uri(n)).equals(want[n]), n
    assert ts.column_statistics("id")["row_count"] == first.rows

    from engine.store import Store

    Store(str(store)).republish(TABLE, third.job_id)  # from its manifest, which names the first job's files
    assert open_statistics(str(store), TABLE).file_uri(layout.STATISTICS_FILE) == ts.file_uri(layout.STATISTICS_FILE)

    from engine.catalog import rebuild

    before_rebuild = Catalog.open(str(store), TABLE).state()
    rebuilt = rebuild(str(store), TABLE, replace=True)  # the carry-over from its manifest (its run has no other file)
    assert rebuilt.jobs[-1] == third.job_id and first.job_id in rebuilt.jobs
    after_rebuild = Catalog.open(str(store), TABLE).state()
    assert after_rebuild.table_statistics.files == before_rebuild.table_statistics.files
    assert (after_rebuild.table_statistics.job_id, after_rebuild.snapshot_id) == (third.job_id, third.snapshot)
    assert {k: e.files for k, e in after_rebuild.partitions.items()} == {k: e.files for k, e in before_rebuild.partitions.items()}

    shutil.move(str(tmp_path / "held"), str(table9 / "part=04"))
    changed = _analyze(table9, store)  # (rebuilt partitions have no data fingerprint: all recomputed)
    assert (changed.carried_over, changed.recomputed) == ("", 10)
    assert changed.run_uri.endswith(changed.job_id)
    assert_same_as_oracle(store, _oracle(table9, tmp_path), table9)


@pytest.mark.parametrize(
    ("option", "check"),
    [
        ({"bins": 10_000}, lambda ts: ts.column_statistics("price")["histogram_bins"] == 10_000),
        ({"value_partitions": True}, lambda ts: "partitions" in pq.read_schema(ts.file_uri(layout.FREQUENCIES_FILE)).names),
    ],
    ids=["bins", "value_partitions"],
)
def test_a_table_level_option_changed_merges_the_table_again(table9: Path, tmp_path: Path, option: dict, check) -> None:  # noqa: ANN001
    store = tmp_path / "store"
    _analyze(table9, store)
    got = _analyze(table9, store, **option)
    assert (got.carried_over, got.inherited) == ("", 9)
    assert check(open_statistics(str(store), TABLE))
    assert _analyze(table9, store, **option).carried_over == got.job_id  # and unchanged again: carried over


def test_a_new_version_without_data_changes_is_carried_over_at_that_version(tmp_path: Path) -> None:
    """A Delta commit that changes no file (table properties): the statistics describe the new
    version (not stale), from the files of the job that merged them."""
    from deltalake import DeltaTable, write_deltalake

    uri = str(tmp_path / "events")
    write_deltalake(uri, pa.table({"part": [1, 1, 2, 2], "x": [1.0, 2.0, 3.0, 4.0]}), partition_by=["part"])
    store = str(tmp_path / "store")
    first = analyze(uri, store=store)
    DeltaTable(uri).alter.set_table_properties({"delta.appendOnly": "false"})
    assert open_statistics(store, "events").stale_by() == 1
    again = analyze(uri, store=store)
    assert (again.snapshot, again.carried_over, again.inherited) == ("1", first.job_id, 2)
    ts = open_statistics(store, "events")
    assert ts.stale_by() == 0 and ts.column_statistics("x")["sum"] == 10.0


# ---------------------------------------------------------------- CLI
def test_cli_says_what_was_inherited_and_no_inherit_recomputes(table9: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from engine.cli.console import metastore

    store = str(tmp_path / "store")

    def cli(*args: str):
        r = CliRunner().invoke(metastore, ["--store", store, *args])
        assert r.exit_code == 0, r.output
        return r

    assert json.loads(cli("--output", "json", "analyze", str(table9)).stdout)["inherited"] == 0
    doc = json.loads(cli("--output", "json", "analyze", str(table9)).stdout)
    assert (doc["inherited"], doc["recomputed"], doc["partitions"]) == (9, 0, 9)
    text = " ".join(cli("analyze", str(table9)).stdout.split())  # unchanged again: carried over from the first job
    assert f"9 (9 inherited, 0 recomputed; table unchanged, its statistics carried over from job {doc['carried_over']})" in text
    _rewrite(table9 / "part=00" / "data-0.parquet", lambda t: t.slice(0, t.num_rows - 1))
    text = cli("analyze", str(table9)).stdout
    assert "9 (8 inherited, 1 recomputed)" in text
    doc = json.loads(cli("--output", "json", "analyze", "--no-inherit", str(table9)).stdout)
    assert (doc["inherited"], doc["recomputed"]) == (0, 9) and doc["recompute_reasons"]["part=00"] == "inheritance off"
    assert "--no-inherit" in cli("analyze", "--help").stdout


# ---------------------------------------------------------------- S3
def test_inheritance_on_an_s3_table_and_store(s3_server: str, ray_runtime: None, tmp_path: Path) -> None:
    import uuid

    import pyarrow.fs as pafs

    local = tmp_path / "sales"
    generate_table(str(local), rows=6_000, partitions=3, seed=2)
    prefix = f"s3://bucket/inherit-{uuid.uuid4().hex[:8]}"
    fs, path = fileio.resolve(f"{prefix}/tables/{TABLE}")
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    table_uri, store = f"{prefix}/tables/{TABLE}", f"{prefix}/stats"
    first = analyze(table_uri, store=store, user_statistics=USER)
    before = Catalog.open(store, TABLE).state().partitions
    # rewrite part=01's second file on S3 (one row fewer)
    t = pq.read_table(local / "part=01" / "data-1.parquet")
    pq.write_table(t.slice(1), local / "part=01" / "data-1.parquet")
    pafs.copy_files(
        str(local / "part=01" / "data-1.parquet"),
        f"{path}/part=01/data-1.parquet",
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=fs,
    )
    second = analyze(table_uri, store=store, user_statistics=USER)
    assert (second.inherited, second.recomputed, second.warnings) == (2, 1, [])
    after = Catalog.open(store, TABLE).state().partitions
    assert after["part=00"].files == before["part=00"].files and after["part=02"].files == before["part=02"].files
    assert after["part=01"].job_id == second.job_id != first.job_id
    oracle = analyze(table_uri, store=f"{prefix}/oracle", user_statistics=USER, inherit=False)
    got, want = open_statistics(store, TABLE), open_statistics(f"{prefix}/oracle", TABLE)
    assert got.manifest["rows"] == want.manifest["rows"] == 5_999 == oracle.rows
    for name in (layout.FREQUENCIES_FILE, layout.HISTOGRAMS_FILE):
        with fileio.open_input(got.file_uri(name)) as a, fileio.open_input(want.file_uri(name)) as b:
            assert pq.read_table(a).equals(pq.read_table(b)), name
    exact = [
        "column",
        "row_count",
        "null_count",
        "distinct_count",
        "min",
        "max",
        "sum",
        "mean",
        "stddev",
        "frequencies",
        "histogram_bins",
        "theta_sketch",
    ]
    assert got.statistics(statistics=exact, sketches=True).to_pylist() == want.statistics(statistics=exact, sketches=True).to_pylist()
    # unchanged since: the table level is carried over, on S3 too
    third = analyze(table_uri, store=store, user_statistics=USER)
    assert (third.carried_over, third.inherited, third.recomputed) == (second.job_id, 3, 0)
    again = open_statistics(store, TABLE)
    assert again.state.job_id == third.job_id and again.file_uri(layout.STATISTICS_FILE) == got.file_uri(layout.STATISTICS_FILE)
    assert again.statistics(statistics=exact, sketches=True).to_pylist() == want.statistics(statistics=exact, sketches=True).to_pylist()


# ---------------------------------------------------------------- phase 1 in one wave or two
def test_two_waves_and_one_wave_write_the_same_files(ray_runtime: None, table9: Path, tmp_path: Path) -> None:
    """Phase 1 profiles the discrete columns first and the others in a second wave (so the
    table reductions overlap it); one task per partition must give the very same files."""
    from engine.columns import leaf_columns
    from engine.options import AnalyzeOptions
    from engine.runtime.job.driver import run_job
    from engine.sources import open_table
    from engine.store import Store

    two = _analyze(table9, tmp_path / "two", inherit=False)
    source = open_table(str(table9), name=TABLE)
    one = run_job(source, Store(str(tmp_path / "one")), leaf_columns(source.schema()), USER, AnalyzeOptions(inherit=False, two_waves=False))
    assert one.rows == two.rows == 10_800
    # the footers gave every range: the second waves binned, phase 2 had nothing to do
    assert two.histograms_guessed and not one.histograms_guessed
    assert_same_as_oracle(tmp_path / "two", tmp_path / "one", table9)
    # the partial states too, KLL sketches included (deterministic: issue #28): a later job
    # inherits the same thing from either
    for key in KEYS:
        for name in ("partial_state.arrow", "partial_counts.arrow"):
            a = partial_state._read_ipc(f"{two.run_uri}/partitions/{key}/{name}")
            b = partial_state._read_ipc(f"{one.run_uri}/partitions/{key}/{name}")
            assert a.replace_schema_metadata(None).equals(b.replace_schema_metadata(None)), (key, name)


def test_wrong_or_missing_metadata_bounds_fall_back_to_binning_after_phase_1(ray_runtime: None, table9: Path, tmp_path: Path) -> None:
    """Histogram edges guessed from footers are checked: a source whose metadata lies
    (or knows nothing) gets exactly the files of a one-wave analyze."""
    import copy

    from engine.columns import leaf_columns
    from engine.options import AnalyzeOptions
    from engine.runtime.job.driver import run_job
    from engine.sources import open_table
    from engine.store import Store

    source = open_table(str(table9), name=TABLE)
    leaves = leaf_columns(source.schema())
    _one = run_job(source, Store(str(tmp_path / "one")), leaves, USER, AnalyzeOptions(inherit=False, two_waves=False))

    class Lying(type(source)):  # noqa: D401 - pickled by value into the Ray tasks
        def column_bounds(self, partition, columns):  # noqa: ANN001, ANN201
            got = super().column_bounds(partition, columns)
            if "quantity" in got and got["quantity"] is not None:
                lo, hi = got["quantity"]
                # past the real max, and past the end of the table range widened from it
                got["quantity"] = (lo, pa.scalar(2 * hi.as_py() - lo.as_py() + 1, hi.type))
            return got

    class Silent(type(source)):
        def column_bounds(self, partition, columns):  # noqa: ANN001, ANN201
            return {}

    for cls in (Lying, Silent):
        liar = copy.copy(source)
        liar.__class__ = cls
        store = tmp_path / cls.__name__
        r = run_job(liar, Store(str(store)), leaves, USER, AnalyzeOptions(inherit=False))
        assert not r.histograms_guessed, cls.__name__
        assert_same_as_oracle(store, tmp_path / "one", table9)


def test_progress_counts_partitions_once_and_ends_complete(table9: Path, tmp_path: Path) -> None:
    seen: dict[str, list[tuple[int, int]]] = {}
    _analyze(table9, tmp_path / "s", progress=lambda phase, done, total: seen.setdefault(phase, []).append((done, total)))
    profile = seen["profile"]
    assert {t for _, t in profile} == {len(KEYS)}  # partitions, each once (not its two waves)
    assert [d for d, _ in profile] == sorted(d for d, _ in profile) and profile[0][0] == 0 and profile[-1][0] == len(KEYS)
    assert seen["histograms"][-1][0] == seen["histograms"][-1][1]


# ---------------------------------------------------------------- the shipped t-digest
def test_tdigest_states_are_inherited_and_merge_into_the_table_digest(table9: Path, tmp_path: Path) -> None:
    """``--tdigest`` (TDIGEST) stores its partition states, so an unchanged table inherits every
    partition; after a partition is added, the table's digest merges the inherited partitions'
    stored digests with the new one and counts every value of the data."""
    from engine.stats.tdigest import TDIGEST, TDIGEST_COLUMN, tdigest_quantiles

    store = tmp_path / "store"
    user = [*USER, TDIGEST]
    first = _analyze(table9, store, user_statistics=user)
    again = _analyze(table9, store, user_statistics=user)
    assert (again.inherited, again.recomputed, again.warnings, again.carried_over) == (9, 0, [], first.job_id)

    shutil.move(str(tmp_path / "held"), str(table9 / "part=04"))
    second = _analyze(table9, store, user_statistics=user)
    assert (second.inherited, second.recomputed, second.warnings) == (9, 1, [])
    assert first.job_id != second.job_id

    got = open_statistics(str(store), TABLE)
    want_store = _oracle(table9, tmp_path, user_statistics=user)
    want = open_statistics(str(want_store), TABLE)
    data = _data(table9)
    for p in got.partitions():  # partition digests: byte for byte the fresh analyze's
        a = pq.read_table(got.file_uri(layout.STATISTICS_FILE, p.key), columns=["column", TDIGEST_COLUMN]).to_pylist()
        b = pq.read_table(want.file_uri(layout.STATISTICS_FILE, p.key), columns=["column", TDIGEST_COLUMN]).to_pylist()
        assert a == b, p.key
    table_rows = pq.read_table(got.file_uri(layout.STATISTICS_FILE), columns=["column", TDIGEST_COLUMN]).to_pylist()
    digests = {r["column"]: r[TDIGEST_COLUMN] for r in table_rows if r[TDIGEST_COLUMN] is not None}
    assert "price" in digests and "amount" in digests
    for name, blob in digests.items():  # the table digest counts every value and ranks within its bound
        t = data.schema.field(name).type
        col = data[name].combine_chunks()
        if pa.types.is_temporal(t):  # a digest sees times as their storage integers
            col = col.view(pa.int32() if t.bit_width == 32 else pa.int64())
        x = col.cast(pa.float64()).drop_null().to_numpy()
        x = np.sort(x[~np.isnan(x)])
        (q,), n = tdigest_quantiles(blob, [0.5])
        assert n == len(x), name
        assert abs(np.searchsorted(x, q, side="right") / len(x) - 0.5) <= 0.0625 + 1 / len(x), name
