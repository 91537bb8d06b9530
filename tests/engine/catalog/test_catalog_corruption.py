"""Minimal data loss: a damaged or missing file gives a clear error naming it; open up to the last good one; rebuild."""

from __future__ import annotations

import pytest
from catalog_testkit import files_for, job_output, write_job

from engine import fileio
from engine.catalog import Catalog, codec, io_for, publish_job, rebuild, schema_fingerprint
from engine.catalog.model import TransactionRecord
from engine.exceptions import (
    CatalogCorruptError,
    InvalidArgumentError,
    MetastoreError,
    StatisticsNotFoundError,
    UnsupportedCatalogVersionError,
)


def build(store: str, n: int, interval: int = 5) -> Catalog:
    cat = Catalog.open(store, "t", checkpoint_interval=interval)
    for i in range(n):
        txn = cat.begin(f"j{i}", f"s{i}")
        txn.add_partition(f"p={i % 4}", files_for(f"j{i}", f"p={i % 4}"), i, schema_fingerprint="x")
        txn.commit()
    return cat


def name_of(cat: Catalog, txn_id: int, kind: str = "transaction") -> str:
    return codec.file_name(txn_id, codec.txn_uuid(cat.state().timeline, txn_id), kind)


def uri_of(cat: Catalog, txn_id: int, kind: str = "transaction") -> str:
    return fileio.join(cat.transactions_uri, name_of(cat, txn_id, kind))


def overwrite(uri: str, data: bytes) -> None:
    io_for(uri).delete(uri)
    fileio.write_bytes(uri, data)


DAMAGE = {
    "bitflip": lambda b: b[:30] + bytes([b[30] ^ 0x40]) + b[31:],
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "garbage": lambda b: b"PK\x03\x04 not a catalog file at all" * 3,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_transaction_after_the_checkpoint(store_uri: str, damage: str) -> None:
    cat = build(store_uri, 13)  # checkpoints 5, 10; transactions 11..13 after the newest
    expected_good = cat.state_at(11)
    uri = uri_of(cat, 12)
    overwrite(uri, DAMAGE[damage](fileio.read_bytes(uri)))
    with pytest.raises(CatalogCorruptError) as err:
        Catalog.open(store_uri, "t")
    assert name_of(cat, 12) in str(err.value) and err.value.uri == uri
    assert isinstance(err.value, MetastoreError)
    good = Catalog.open(store_uri, "t", up_to_last_good=True)
    assert good.state() == expected_good
    assert [p.uri for p in good.problems] == [uri]
    with pytest.raises(InvalidArgumentError, match="last good transaction"):
        good.begin("j", "s")


def test_missing_transaction_is_named(store_uri: str) -> None:
    cat = build(store_uri, 8)
    io_for(store_uri).delete(uri_of(cat, 7))
    with pytest.raises(CatalogCorruptError, match=rf"{name_of(cat, 7)}: transaction 7 is missing \(the log goes on to 8\)"):
        Catalog.open(store_uri, "t")
    assert Catalog.open(store_uri, "t", up_to_last_good=True).state() == cat.state_at(6)
    # without checkpoints the replay meets the same hole
    with pytest.raises(CatalogCorruptError, match=name_of(cat, 7)):
        Catalog.open(store_uri, "t", use_checkpoints=False)


def test_damaged_checkpoint_is_named_and_skippable(store_uri: str) -> None:
    cat = build(store_uri, 12)  # checkpoints 5 and 10
    uri = uri_of(cat, 10, "checkpoint")
    overwrite(uri, DAMAGE["bitflip"](fileio.read_bytes(uri)))
    with pytest.raises(CatalogCorruptError, match=rf"{name_of(cat, 10, 'checkpoint')}: damaged checkpoint: checksum mismatch"):
        Catalog.open(store_uri, "t")
    # the transactions are the truth: an older checkpoint plus more of them give the same state
    good = Catalog.open(store_uri, "t", up_to_last_good=True)
    assert good.state() == cat.state()
    assert [p.uri for p in good.problems] == [uri]
    assert Catalog.open(store_uri, "t", use_checkpoints=False).state() == cat.state()
    with pytest.raises(CatalogCorruptError, match=name_of(cat, 10, "checkpoint")):
        Catalog.open(store_uri, "t", use_checkpoints=False).verify()


def test_missing_checkpoint_after_prune_is_named(store_uri: str) -> None:
    cat = build(store_uri, 12)
    assert cat.prune(10).deleted[0] == name_of(cat, 1)
    io_for(store_uri).delete(uri_of(cat, 10, "checkpoint"))
    with pytest.raises(CatalogCorruptError, match=rf"{name_of(cat, 10, 'checkpoint')}: checkpoint missing or unreadable"):
        Catalog.open(store_uri, "t")
    with pytest.raises(CatalogCorruptError):
        Catalog.open(store_uri, "t", up_to_last_good=True)  # nothing to build on


def test_damage_before_the_newest_checkpoint_does_not_stop_opening(store_uri: str) -> None:
    cat = build(store_uri, 12)
    uri = uri_of(cat, 3)
    overwrite(uri, b"")
    assert Catalog.open(store_uri, "t").state() == cat.state()  # opening reads checkpoint 10, 11, 12 only
    with pytest.raises(CatalogCorruptError, match=name_of(cat, 3)):
        Catalog.open(store_uri, "t").history()
    with pytest.raises(CatalogCorruptError, match=name_of(cat, 3)):
        Catalog.open(store_uri, "t").verify()
    with pytest.raises(CatalogCorruptError, match=name_of(cat, 3)):
        Catalog.open(store_uri, "t").state_at(4)


def test_fork_and_foreign_files_are_refused(store_uri: str) -> None:
    cat = build(store_uri, 4, interval=0)
    other = build(store_uri + "-other", 4, interval=0)  # another log: another timeline
    foreign = fileio.read_bytes(uri_of(other, 4))
    # a writer of the other log "commits" id 5 here: a file that does not follow from this log
    fork = fileio.join(cat.transactions_uri, name_of(other, 5))
    rec = codec.decode_transaction(foreign)
    fileio.write_bytes(
        fork,
        codec.encode_transaction(
            TransactionRecord(**{**rec.__dict__, "id": 5, "uuid": codec.txn_uuid(rec.timeline, 5), "parent_uuid": codec.txn_uuid(rec.timeline, 4)})
        ),
    )
    with pytest.raises(CatalogCorruptError, match=rf"{name_of(other, 5)}: transaction 5 does not belong to this log"):
        Catalog.open(store_uri, "t")
    assert Catalog.open(store_uri, "t", up_to_last_good=True).state() == cat.state()
    io_for(store_uri).delete(fork)
    # a copy of another log's file under this log's name: the content gives it away
    overwrite(uri_of(cat, 4), foreign)
    with pytest.raises(CatalogCorruptError, match=rf"{name_of(cat, 4)}: content .* does not continue the log"):
        Catalog.open(store_uri, "t")


def test_newer_format_is_refused_clearly(store_uri: str) -> None:
    cat = build(store_uri, 2, interval=0)
    rec = codec.decode_transaction(fileio.read_bytes(uri_of(cat, 2)))
    overwrite(uri_of(cat, 2), codec.encode_transaction(TransactionRecord(**{**rec.__dict__, "format_version": 2})))
    with pytest.raises(UnsupportedCatalogVersionError, match="catalog format version 2; this Metastore reads up to 1"):
        Catalog.open(store_uri, "t")
    assert Catalog.open(store_uri, "t", up_to_last_good=True).state() == cat.state_at(1)


def test_time_travel_after_prune_says_pruned(store_uri: str) -> None:
    cat = build(store_uri, 12)
    before = cat.state_at(7)
    assert cat.state_at(7) == Catalog.open(store_uri, "t", use_checkpoints=False).state_at(7)
    cat.prune(10)
    with pytest.raises(StatisticsNotFoundError, match="history before it was pruned"):
        cat.state_at(7)
    assert cat.state_at(11) == Catalog.open(store_uri, "t").state_at(11)
    assert before.txn_id == 7
    with pytest.raises(StatisticsNotFoundError, match="no transaction 99"):
        cat.state_at(99)


def test_rebuild_recovers_a_corrupt_catalog(store_uri: str) -> None:
    table = "t"
    cols = [("a", "int64"), ("b", "string")]
    fp = schema_fingerprint(cols)
    jobs = [
        ("job-a", "snap-1", "2026-01-01T00:00:00.000+00:00", {"p=0": 10, "p=1": 11}),
        ("job-b", "snap-2", "2026-01-02T00:00:00.000+00:00", {"p=0": 20, "p=1": 21, "p=2": 22}),
    ]
    for job, snap, created, parts in jobs:
        written = write_job(store_uri, table, job, snap, created, parts, cols, manifest={"columns": cols, "bins": 1000})
        publish_job(store_uri, job_output(store_uri, table, job, snap, written["partitions"], {}, fp, extra={"columns": cols, "bins": 1000}))
    published = Catalog.open(store_uri, table).state()
    assert published.txn_id == 2
    # the log is damaged
    cat = Catalog.open(store_uri, table)
    overwrite(uri_of(cat, 2), b"\x00" * 10)
    with pytest.raises(CatalogCorruptError):
        Catalog.open(store_uri, table)
    with pytest.raises(InvalidArgumentError, match="replace=True"):
        rebuild(store_uri, table)
    result = rebuild(store_uri, table, replace=True)
    assert result.jobs == ["job-a", "job-b"] and result.transactions == 2 and not result.skipped
    assert result.backup_uri is not None
    assert len(io_for(store_uri).list_names(result.backup_uri)) == 2  # the damaged log was kept aside
    rebuilt = Catalog.open(store_uri, table).state()
    assert rebuilt.timeline != published.timeline
    for a, b in [(rebuilt, published)]:
        assert {k: (e.files, e.row_count, e.snapshot_id, e.schema_fingerprint, e.job_id) for k, e in a.partitions.items()} == {
            k: (e.files, e.row_count, e.snapshot_id, e.schema_fingerprint, e.job_id) for k, e in b.partitions.items()
        }
        assert (a.table_statistics.files, a.table_statistics.row_count, a.table_statistics.schema_fingerprint) == (
            b.table_statistics.files,
            b.table_statistics.row_count,
            b.table_statistics.schema_fingerprint,
        )
        assert a.snapshot_id == b.snapshot_id == "snap-2"
    assert rebuilt.table_statistics.properties["bins"] == "1000"
    Catalog.open(store_uri, table).verify()


def test_rebuild_newest_job_per_partition_wins_and_unfinished_jobs_are_skipped(store_uri: str) -> None:
    table = "t"
    write_job(store_uri, table, "j2", "s2", "2026-01-02T00:00:00.000+00:00", {"p=1": 5})
    write_job(store_uri, table, "j1", "s1", "2026-01-01T00:00:00.000+00:00", {"p=0": 1, "p=1": 2})
    write_job(store_uri, table, "j3", "s3", "2026-01-03T00:00:00.000+00:00", {"p=0": 9}, table_level=False)  # crashed
    fileio.write_bytes(fileio.join(store_uri, table, "runs", "j1", "partitions", "p=0", "junk.parquet"), b"not parquet")
    result = rebuild(store_uri, table)
    assert result.jobs == ["j1", "j2"]
    assert any("j3" in s and "did not finish" in s for s in result.skipped)
    assert any("junk.parquet" in s for s in result.skipped)
    st = Catalog.open(store_uri, table).state()
    assert {k: (e.job_id, e.row_count, e.snapshot_id) for k, e in st.partitions.items()} == {"p=0": ("j1", 1, "s1"), "p=1": ("j2", 5, "s2")}
    assert st.snapshot_id == "s2" and st.table_statistics.job_id == "j2"
    assert [h.job_id for h in Catalog.open(store_uri, table).history()] == ["j1", "j2"]
