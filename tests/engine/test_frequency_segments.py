"""A table whose frequencies are kept in segments (a base and deltas, docs/FORMAT.md "Segments")
reads exactly like one whose single frequencies.parquet holds the merged rows; the catalog keeps,
checks and rebuilds the segments like the three files.

The segments are written by hand from generated value counts (tests/frequency_segments.py: a base
of partitions 0..2, a delta after each of partitions 3 and 4) and published as catalog states on a
local store; the oracle of every step is a table of the same store with one whole file of the
counts of all its data.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from engine import lookup
from engine import values as value_forms
from engine.catalog import Catalog, integrity
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY
from engine.catalog.rebuild import rebuild
from engine.exceptions import StatisticsFileCorruptError, StatisticsNotFoundError
from engine.files import layout, writer
from engine.lookup import files as lookup_files
from engine.lookup import open_statistics
from tests.frequency_segments import HEAD, KINDS, SegmentedTable, build_segmented_table, value_counts

COLUMNS = tuple(KINDS)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SegmentedTable:
    return build_segmented_table(str(tmp_path_factory.mktemp("segments") / "store"))


@pytest.fixture
def copied(built: SegmentedTable, tmp_path: Path) -> SegmentedTable:
    """A copy of the built store that a test may damage, prune or collect."""
    import dataclasses
    import shutil

    shutil.copytree(built.store, tmp_path / "store")
    lookup.clear_cache()
    return dataclasses.replace(built, store=str(tmp_path / "store"))


def _at(built: SegmentedTable, step: int) -> lookup.TableStatistics:
    return open_statistics(built.store, built.table, at_transaction=built.jobs[step].txn_id)


def test_the_data_has_each_kind_at_every_step_and_segments_of_every_size(built: SegmentedTable) -> None:
    """What the tests below rely on: the job would pick the same kinds at every step, stored rows go
    from fewer than a head to more, and the deltas are smaller than the whole files."""
    for step in range(len(built.jobs)):
        data = pa.concat_tables(built.partitions[: built.base + step])
        for c in COLUMNS:
            counts = value_counts(data[c])
            non_null = len(data[c]) - data[c].null_count
            assert writer.frequency_kind(counts.num_rows, non_null, 0.5) == KINDS[c]
    whole = open_statistics(built.store, built.oracles[-1]).frequency_index()
    assert whole["cat"][2] > HEAD + 1 and whole["name"][2] > HEAD + 1 and whole["day"][2] < HEAD and whole["uid"][2] == 0
    assert open_statistics(built.store, built.oracles[0]).frequency_index()["name"][2] < HEAD
    newest = lookup_files.open_file(_at(built, 2).file_uri(layout.FREQUENCIES_FILE)).meta_json("metastore.frequencies")
    assert newest["name"][2] < whole["name"][2] and newest["cat"][2] < whole["cat"][2]


@pytest.mark.parametrize("step", [0, 1, 2])
def test_top_frequencies_read_like_the_whole_file(built: SegmentedTable, step: int) -> None:
    ts, whole = _at(built, step), open_statistics(built.store, built.oracles[step])
    assert [ts.frequency_index()[c][2:] for c in COLUMNS] == [whole.frequency_index()[c][2:] for c in COLUMNS]
    for c in COLUMNS:
        stored = whole.frequency_index()[c][2]
        for k in sorted({0, 1, 10, HEAD, HEAD + 1, stored, stored + 5}):
            got, expected = ts.top_frequencies(c, k), whole.top_frequencies(c, k)
            assert got.equals(expected), (step, c, k)
            assert got.schema.metadata == expected.schema.metadata  # kind, stored_rows
            typed = ts.top_frequencies(c, k, typed=True)
            assert typed.equals(whole.top_frequencies(c, k, typed=True)), (step, c, k)
            assert typed["value"].type == built.schema.field(c).type


def test_the_merged_order_is_frequency_then_typed_value(built: SegmentedTable) -> None:
    """Independent of the writer's order: Python's sort of the typed values (-1 < 10 < 9 as text)."""
    ts = _at(built, 2)
    for c in ("cat", "day", "name"):
        t = ts.top_frequencies(c, 10**6, typed=True)
        rows = list(zip(t["value"].to_pylist(), t["frequency"].to_pylist()))
        assert rows == sorted(rows, key=lambda r: (-r[1], r[0]))
        data = pa.concat_tables(built.partitions)
        counts = dict(zip(*value_counts(data[c]).to_pydict().values()))
        assert dict(rows) == {v: n for v, n in counts.items() if KINDS[c] == layout.FREQ_COMPLETE or n > 1}


def test_a_value_first_seen_once_then_again_is_stored(built: SegmentedTable) -> None:
    """duplicates_only: a name of the base stored only once there (not stored), repeated by an
    append, is in the merged view with its count; not in the base."""
    base = _at(built, 0).top_frequencies("name", 10**6).column("value").to_pylist()
    merged = dict(zip(*_at(built, 2).top_frequencies("name", 10**6).to_pydict().values()))
    once = value_counts(pa.concat_tables(built.partitions[: built.base])["name"])
    once = {v for v, n in zip(*once.to_pydict().values()) if n == 1}
    late = [v for v in merged if v in once]
    assert late and not set(late) & set(base)
    assert all(merged[v] >= 2 for v in late)


def test_the_head_is_one_file_and_one_row_group(built: SegmentedTable) -> None:
    ts = _at(built, 2)
    newest = ts.file_uri(layout.FREQUENCIES_FILE)
    assert ts.frequency_segments()[-1] == newest and len(ts.frequency_segments()) == 3
    lookup.clear_cache()
    ts.top_frequencies("cat", HEAD)
    assert list(lookup_files._files) == [newest] and len(lookup_files._row_groups) == 1 and not lookup_files._merged
    ts.top_frequencies("cat", HEAD + 1)  # beyond the head: every segment, merged once
    assert sorted(lookup_files._files) == sorted(ts.frequency_segments()) and len(lookup_files._merged) == 1
    ts.top_frequencies("cat", 10**6)
    assert len(lookup_files._merged) == 1  # cached


def test_one_segment_reads_one_file(built: SegmentedTable) -> None:
    ts = open_statistics(built.store, built.oracles[-1])
    assert FREQUENCY_SEGMENTS_PROPERTY not in ts.state.properties and ts.frequency_segments() == [ts.file_uri(layout.FREQUENCIES_FILE)]
    lookup.clear_cache()
    ts.top_frequencies("cat", 10**6)
    assert list(lookup_files._files) == [ts.file_uri(layout.FREQUENCIES_FILE)] and not lookup_files._merged


def test_subsets_of_the_whole_table_read_the_merged_rows(built: SegmentedTable) -> None:
    """The stored frequencies a subset decodes (engine/subset/stored.py) are the full read."""
    from engine.expressions import bound
    from engine.subset.stored import StoredInputs

    ts, whole = _at(built, 2), open_statistics(built.store, built.oracles[-1])
    ref = bound("cat = 1", ts.schema).term  # type: ignore[union-attr]
    got, expected = StoredInputs(ts, None).freq(ref, None), StoredInputs(whole, None).freq(ref, None)
    assert got is not None and expected is not None and got.kind == expected.kind
    assert got.values.equals(expected.values) and (got.counts == expected.counts).all()


def test_value_partitions_refuse_a_table_in_segments(built: SegmentedTable) -> None:
    with pytest.raises(StatisticsNotFoundError, match="3 segments"):
        _at(built, 2).value_partitions("cat", 1)


def test_a_damaged_delta_is_named_by_the_lookup_and_by_verify(copied: SegmentedTable) -> None:
    ts = _at(copied, 2)
    assert integrity.verify(copied.store, copied.table).ok
    delta = Path(ts.frequency_segments()[1])
    data = bytearray(delta.read_bytes())
    data[len(data) // 3] ^= 0x10
    delta.write_bytes(bytes(data))
    lookup.clear_cache()
    assert ts.top_frequencies("cat", 10).num_rows == 10  # the head: the newest segment only
    with pytest.raises(StatisticsFileCorruptError, match=str(delta)):
        ts.top_frequencies("cat", HEAD + 1)
    report = integrity.verify(copied.store, copied.table)
    assert not report.ok and [p.uri for p in report.problems] == [str(delta)]
    assert report.problems[0].kind == integrity.ProblemKind.DAMAGED_FILE and str(delta) in report.problems[0].message
    delta.unlink()
    report = integrity.verify(copied.store, copied.table)
    assert [p.kind for p in report.problems] == [integrity.ProblemKind.MISSING_FILE] and str(delta) in report.problems[0].message


def test_verify_checks_every_segment_and_the_table_counts(built: SegmentedTable) -> None:
    report = integrity.verify(built.store, built.table)
    # the three jobs' three files, the two older segments and the table counts, once each
    assert report.ok and report.files_checked == 3 * 3 + 1 and report.files_unchecked == 0


def _files(store: str, table: str) -> set[str]:
    root = Path(store) / table
    return {str(p.relative_to(root)) for p in (root / "runs").rglob("*") if p.is_file()}


def test_gc_after_prune_keeps_the_segments_a_kept_state_names(copied: SegmentedTable) -> None:
    store, table = copied.store, copied.table
    cat = Catalog.open(store, table)
    cat.write_checkpoint()  # at transaction 3, the newest
    cat.prune(3)
    later = time.time() + 3600
    done = cat.gc(0, now=later)
    # the base's and the first delta's statistics and histograms: no kept state names them
    assert sorted(done.deleted) == sorted(f"runs/job{j}/table/{k}.parquet" for j in (0, 1) for k in ("statistics", "histograms"))
    kept = _files(store, table)
    assert {"runs/job0/table/frequencies.parquet", "runs/job1/table/frequencies.parquet", "runs/job0/table/table_counts.arrow"} <= kept
    lookup.clear_cache()
    ts, whole = open_statistics(store, table), open_statistics(store, copied.oracles[-1])
    assert ts.top_frequencies("name", 10**6).equals(whole.top_frequencies("name", 10**6))
    assert integrity.verify(store, table).ok

    # a new base (a full analyze: one segment, its own table counts): the old segments go
    from tests.frequency_segments import publish_table_job, segments_of, write_table_counts

    data = pa.concat_tables(copied.partitions)
    whole_rows = [(c, KINDS[c], segments_of([data[c]], KINDS[c]).rows[0]) for c in COLUMNS]
    counts = write_table_counts(store, table, "job3", data)
    publish_table_job(store, table, "job3", "2026-01-09T00:00:00.000+00:00", copied.schema, data, whole_rows, table_counts=counts)
    cat = Catalog.open(store, table)
    cat.write_checkpoint()
    cat.prune(4)
    done = cat.gc(0, now=later)
    gone = {"runs/job0/table/frequencies.parquet", "runs/job1/table/frequencies.parquet", "runs/job0/table/table_counts.arrow"}
    gone |= {f"runs/job2/table/{k}.parquet" for k in ("statistics", "frequencies", "histograms")}
    assert gone <= set(done.deleted) and not gone & _files(store, table)
    lookup.clear_cache()
    assert open_statistics(store, table).top_frequencies("name", 10**6).equals(whole.top_frequencies("name", 10**6))


def test_a_rebuilt_catalog_keeps_the_segments(copied: SegmentedTable) -> None:
    store, table = copied.store, copied.table
    before = open_statistics(store, table)
    named = before.state.properties[FREQUENCY_SEGMENTS_PROPERTY]
    result = rebuild(store, table, replace=True)
    assert result.jobs == ["job0", "job1", "job2"]
    lookup.clear_cache()
    after = open_statistics(store, table)
    assert after.state.properties[FREQUENCY_SEGMENTS_PROPERTY] == named and after.frequency_segments() == before.frequency_segments()
    whole = open_statistics(store, copied.oracles[-1])
    for c in COLUMNS:
        assert after.top_frequencies(c, 10**6).equals(whole.top_frequencies(c, 10**6))
    assert integrity.verify(store, table).ok


def test_republishing_the_base_reads_one_segment_again(copied: SegmentedTable) -> None:
    from engine.store import Store

    Store(copied.store).republish(copied.table, "job0")
    lookup.clear_cache()
    ts = open_statistics(copied.store, copied.table)
    assert len(ts.frequency_segments()) == 1
    assert ts.top_frequencies("cat", 10**6).equals(open_statistics(copied.store, copied.oracles[0]).top_frequencies("cat", 10**6))
    Store(copied.store).republish(copied.table, "job2")  # and the segmented state again, from its manifest
    lookup.clear_cache()
    ts = open_statistics(copied.store, copied.table)
    assert len(ts.frequency_segments()) == 3
    assert ts.top_frequencies("cat", 10**6).equals(open_statistics(copied.store, copied.oracles[2]).top_frequencies("cat", 10**6))


def test_text_forms_decode_to_the_column_type(built: SegmentedTable) -> None:
    ts = _at(built, 2)
    t = ts.top_frequencies("day", 5)
    typed = ts.top_frequencies("day", 5, typed=True)
    assert value_forms.decode(t["value"].combine_chunks(), pa.date32()).equals(typed["value"].combine_chunks())


def test_a_job_output_naming_segments_outside_the_table_is_refused(built: SegmentedTable) -> None:
    import dataclasses

    from engine.catalog.job_output import JobOutput
    from engine.exceptions import InvalidArgumentError
    from engine.store import Store

    layout_ = Store(built.store).layout(built.table)
    output = JobOutput.from_json((Path(layout_.absolute(layout_.run("job2").manifest))).read_bytes(), lambda rel: 0, lambda cols: "unused")
    assert len(output.properties[FREQUENCY_SEGMENTS_PROPERTY]) == 2
    outside = [{"path": "../other/runs/x/table/frequencies.parquet", "size": 1, "checksum": ""}]
    with pytest.raises(InvalidArgumentError, match="not below the table directory"):
        dataclasses.replace(output, properties={**output.properties, FREQUENCY_SEGMENTS_PROPERTY: outside})
    with pytest.raises(InvalidArgumentError, match="must name files"):
        dataclasses.replace(output, properties={**output.properties, FREQUENCY_SEGMENTS_PROPERTY: [{"size": 1}]})


def test_segments_in_an_s3_store(s3_server: str) -> None:
    """The same on S3 (moto): segment URIs below the table, merged reads, verify, gc after prune."""
    import uuid

    built = build_segmented_table(f"s3://bucket/segments-{uuid.uuid4().hex}")
    lookup.clear_cache()
    ts, whole = open_statistics(built.store, built.table), open_statistics(built.store, built.oracles[-1])
    assert all(uri.startswith(built.store + "/t/runs/") for uri in ts.frequency_segments()) and len(ts.frequency_segments()) == 3
    for c in COLUMNS:
        assert ts.top_frequencies(c, 10**6).equals(whole.top_frequencies(c, 10**6))
    assert integrity.verify(built.store, built.table).ok
    cat = Catalog.open(built.store, built.table)
    cat.write_checkpoint()
    cat.prune(3)
    deleted = cat.gc(0, now=time.time() + 3600).deleted
    assert sorted(deleted) == sorted(f"runs/job{j}/table/{k}.parquet" for j in (0, 1) for k in ("statistics", "histograms"))
    lookup.clear_cache()
    assert open_statistics(built.store, built.table).top_frequencies("cat", 10**6).equals(whole.top_frequencies("cat", 10**6))
