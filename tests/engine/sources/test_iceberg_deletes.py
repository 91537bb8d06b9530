"""Iceberg equality delete files, applied by IcebergSource (pyiceberg 0.12 refuses them).

pyiceberg cannot write equality deletes, so the tests write them per the spec with as
little by hand as pyiceberg allows: a Parquet file of the equality columns with their
field ids, listed by pyiceberg's own snapshot producer and manifest writer (a fast
append whose manifest says ``content: deletes``) as a ``DataFile`` with
``content=EQUALITY_DELETES`` and its ``equality_ids``, in a new snapshot with a new
sequence number. The oracle is computed independently: the appended rows minus the
rows whose keys a delete file lists, by the spec's rules in plain Python (sequence
numbers, same partition, null equals null), then every statistic against DuckDB.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriter, ManifestWriterV2
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record

from engine.api import analyze
from engine.exceptions import InvalidTableLayoutError
from engine.sources import open_table
from engine.sources.iceberg_deletes import _codes
from tests.engine.sources.lake_helpers import analyze_source, batch, check_table, counting, reads
from tests.engine.sources.test_iceberg import BY_PART, SCHEMA, _arrow, _catalog, _location

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]


def add_equality_deletes(table, keys: pa.Table, part: int | None) -> None:
    """Commit one snapshot adding an equality delete file of ``keys`` (columns named as the
    table's, equality ids = those columns) in partition ``part=<part>``."""
    schema = table.schema()
    ids = [schema.find_field(n).field_id for n in keys.column_names]
    fields = [pa.field(n, keys.schema.field(n).type, metadata={"PARQUET:field_id": str(i)}) for n, i in zip(keys.column_names, ids)]
    path = f"{_location(table)}/data/eq-delete-{uuid.uuid4().hex}.parquet"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(keys.cast(pa.schema(fields)), path)
    delete = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path="file://" + path,
        file_format=FileFormat.PARQUET,
        partition=Record(part) if part is not None else Record(),
        record_count=keys.num_rows,
        file_size_in_bytes=Path(path).stat().st_size,
        equality_ids=ids,
        spec_id=table.metadata.default_spec_id,
        sort_order_id=None,
        key_metadata=None,
    )
    tx = table.transaction()
    producer = _FastAppendFiles(operation=Operation.DELETE, transaction=tx, io=table.io)
    producer.append_data_file(delete)
    # pyiceberg's v2 manifest writer always says "data": the same writer, saying "deletes"
    deletes_meta = property(lambda self: {**ManifestWriter._meta.fget(self), "content": "deletes"})
    with (
        mock.patch.object(ManifestWriterV2, "content", lambda self: ManifestContent.DELETES),
        mock.patch.object(ManifestWriterV2, "_meta", deletes_meta),
    ):
        producer.commit()
    tx.commit_transaction()


def _key(row: dict, names: list[str]) -> tuple:
    return tuple(row[n] for n in names)


def _oracle(appends: list[tuple[int, pa.Table]], deletes: list[tuple[int, int, pa.Table]]) -> pa.Table:
    """appends: (sequence number, rows); deletes: (sequence number, part or None for a global
    delete, keys). A row goes when a delete of its partition (or a global one) with a higher
    sequence number lists its key (None == None)."""
    kept = []
    for seq, rows in appends:
        for row in rows.to_pylist():
            gone = any(
                seq < dseq and dpart in (None, row["part"]) and _key(row, keys.column_names) in {_key(k, keys.column_names) for k in keys.to_pylist()}
                for dseq, dpart, keys in deletes
            )
            if not gone:
                kept.append(row)
    return pa.Table.from_pylist(kept, schema=appends[0][1].schema)


@pytest.fixture(scope="module")
def deleted(tmp_path_factory: pytest.TempPathFactory):
    """seq 1: append; seq 2-4: equality deletes by city (Rome and null) in part 0, by id
    in part 1, by (id, city) in part 2; seq 5: append (its Rome and null-city rows of part
    0 stay: the deletes are older); seq 6: a delete by city Oslo in part 3 (seq 1's and
    seq 5's Oslo rows of part 3 go); seq 7: append (its Oslo rows stay). Returns (table,
    oracle by snapshot index, snapshot ids)."""
    catalog = _catalog(tmp_path_factory.mktemp("iceberg-eq"))
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=BY_PART)
    arrow = table.schema().as_arrow()
    first = _arrow(batch(4_000, seed=11), arrow)
    table.append(first)
    p1_ids = pc.filter(first["id"], pc.equal(first["part"], 1)).to_pylist()[:300:3]
    p2 = first.filter(pc.equal(first["part"], 2)).slice(0, 200)
    d_city = pa.table({"city": pa.array(["Rome", None], pa.string())})
    d_id = pa.table({"id": pa.array(p1_ids + [999_999], pa.int32())})
    # (id, city) pairs: half as they are (nulls included), half with another city (no match)
    pairs = p2.select(["id", "city"]).to_pylist()
    d_pair = pa.Table.from_pylist(
        [r if i % 2 == 0 else {"id": r["id"], "city": "Nowhere"} for i, r in enumerate(pairs)],
        schema=pa.schema([("id", pa.int32()), ("city", pa.string())]),
    )
    add_equality_deletes(table, d_city, 0)
    add_equality_deletes(table, d_id, 1)
    add_equality_deletes(table, d_pair, 2)
    second = _arrow(batch(2_000, seed=12, start=4_000), arrow)
    table.append(second)
    d_oslo = pa.table({"city": pa.array(["Oslo"], pa.string())})
    add_equality_deletes(table, d_oslo, 3)
    third = _arrow(batch(400, seed=13, start=6_000), arrow)
    table.append(third)
    table = catalog.load_table("db.orders")
    seqs = [s.sequence_number for s in table.snapshots()]
    assert seqs == [1, 2, 3, 4, 5, 6, 7]
    dels = [(2, 0, d_city), (3, 1, d_id), (4, 2, d_pair), (6, 3, d_oslo)]
    oracle = _oracle([(1, first), (5, second), (7, third)], dels)
    # the deletes delete something, and the nulls and the sequence-number rule matter
    assert 0 < oracle.num_rows < first.num_rows + second.num_rows + third.num_rows
    assert second.filter(pc.and_(pc.equal(second["part"], 0), pc.is_null(second["city"]))).num_rows > 0
    # by snapshot index: the last, and the one of the delete of part 3
    oracles = {6: oracle, 5: _oracle([(1, first), (5, second)], dels)}
    return table, oracles, [s.snapshot_id for s in table.snapshots()]


def test_equality_deletes_applied_statistics_equal_duckdb(deleted, tmp_path: Path) -> None:
    table, oracles, _ = deleted
    oracle = oracles[6]
    store = str(tmp_path / "store")
    result = analyze(_location(table), store=store, user_statistics=[])
    assert result.rows == oracle.num_rows
    parts = {f"part={p}": oracle.filter(pc.equal(oracle["part"], p)) for p in range(4)}
    check_table(store, "orders", oracle, parts)


def _rows(t: pa.Table) -> list[dict]:
    return [{k: repr(v) for k, v in r.items()} for r in t.to_pylist()]  # NaN equals NaN


def test_reader_rows_equal_the_oracle(deleted) -> None:
    """The rows themselves (not only their statistics): per partition, as multisets."""
    table, oracles, _ = deleted
    oracle = oracles[6]
    source = open_table(_location(table))
    names = source.schema().names
    for p in source.partitions():
        got = pa.Table.from_batches(list(source.read_batches(p, names)))
        want = oracle.filter(pc.equal(oracle["part"], int(p.key.split("=")[1])))
        key = [("id", "ascending")]
        assert _rows(got.cast(want.schema).sort_by(key)) == _rows(want.sort_by(key)), p.key
    # a count-only read (no columns) counts the remaining rows too
    total = sum(b.num_rows for p in source.partitions() for b in source.read_batches(p, []))
    assert total == oracle.num_rows


def test_older_snapshot_has_only_the_deletes_it_had(deleted, tmp_path: Path) -> None:
    table, _, snapshots = deleted
    first = table.scan(snapshot_id=snapshots[0]).to_arrow()
    store = str(tmp_path / "store")
    result = analyze(_location(table), store=store, user_statistics=[], at_snapshot=str(snapshots[0]))
    assert result.rows == first.num_rows
    check_table(store, "orders", first)


def test_a_new_delete_file_recomputes_only_its_partition(deleted, tmp_path: Path) -> None:
    """The delete of part 3 (seq 6) changes that partition's fingerprint only: a re-analyze
    profiles part 3 alone, and its statistics equal the oracle of that snapshot."""
    table, oracles, snapshots = deleted
    location, store = _location(table), str(tmp_path / "store")
    analyze(location, store=store, user_statistics=[], at_snapshot=str(snapshots[4]))
    log = tmp_path / "reads.log"
    source = counting(open_table(location, at_snapshot=str(snapshots[5])), log)
    result = analyze_source(source, store)
    assert set(result.recompute_reasons) == {"part=3"}
    # the others are read only to re-bin columns whose table edges the deleted rows moved
    assert "part=3" in reads(log) and (result.rebinned or reads(log) == {"part=3"})
    assert (result.inherited, result.recomputed) == (3, 1)
    check_table(store, "orders", oracles[5])


def test_key_codes_null_equals_null_across_columns() -> None:
    data = [pa.array([1, None, 1, None, 2], pa.int64()), pa.array(["a", "a", None, None, "a"])]
    keys = [pa.array([None, 1], pa.int64()), pa.array([None, None])]
    d, k = _codes(data, [keys[0], keys[1].cast(pa.string())])
    assert np.isin(d, k).tolist() == [False, False, True, True, False]


def test_unpartitioned_table_delete_applies_to_every_older_file(tmp_path: Path) -> None:
    """A delete file of an unpartitioned spec is global: it deletes from every data file
    older than itself, none newer."""
    table = _catalog(tmp_path / "cat").create_table("db.flat", schema=SCHEMA)
    arrow = table.schema().as_arrow()
    first, second = _arrow(batch(1_500, seed=21), arrow), _arrow(batch(700, seed=22, start=1_500), arrow)
    table.append(first.slice(0, 700))
    table.append(first.slice(700))
    keys = pa.table({"city": pa.array(["Paris", None], pa.string())})
    add_equality_deletes(table, keys, None)
    table.append(second)
    table = _catalog(tmp_path / "cat").load_table("db.flat")
    assert [s.sequence_number for s in table.snapshots()] == [1, 2, 3, 4]
    oracle = _oracle([(1, first.slice(0, 700)), (2, first.slice(700)), (4, second)], [(3, None, keys)])
    store = str(tmp_path / "store")
    assert analyze(_location(table), store=store, user_statistics=[]).rows == oracle.num_rows
    check_table(store, "flat", oracle)


def test_a_missing_equality_delete_file_fails_in_one_line_naming_it(tmp_path: Path) -> None:
    table = _catalog(tmp_path / "cat").create_table("db.gone", schema=SCHEMA)
    table.append(_arrow(batch(300, seed=31), table.schema().as_arrow()))
    add_equality_deletes(table, pa.table({"city": pa.array(["Lima"], pa.string())}), None)
    table = _catalog(tmp_path / "cat").load_table("db.gone")
    (path,) = list(Path(_location(table), "data").glob("eq-delete-*.parquet"))
    path.unlink()
    store = tmp_path / "store"
    with pytest.raises(InvalidTableLayoutError, match=f"equality delete file .*{path.name} is missing") as err:
        analyze(_location(table), store=str(store), user_statistics=[])
    assert "\n" not in str(err.value)
    assert not (store / "gone" / "catalog").exists()  # nothing published
