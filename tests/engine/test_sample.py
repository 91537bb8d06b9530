"""engine.sample: the deterministic sample-table generator."""

from __future__ import annotations

import math

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from engine.sample import SAMPLE_SCHEMA, generate_table, generate_wide_table

ROWS = 6_000
PARTITIONS = 4


def _files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))


def _read(root) -> pa.Table:
    return ds.dataset(root, format="parquet", partitioning="hive").to_table()


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    schema = generate_table(str(root), rows=ROWS, partitions=PARTITIONS, seed=7, row_group_size=1_000)
    return root, schema


def test_layout_and_row_count(table_dir):
    root, schema = table_dir
    assert schema.names == SAMPLE_SCHEMA.names + ["part"]
    assert sorted(p.name for p in root.iterdir()) == [f"part={p:02d}" for p in range(PARTITIONS)]
    # One file in even partitions, two in odd ones.
    assert _files(root) == [
        "part=00/data-0.parquet",
        "part=01/data-0.parquet",
        "part=01/data-1.parquet",
        "part=02/data-0.parquet",
        "part=03/data-0.parquet",
        "part=03/data-1.parquet",
    ]
    for f in root.rglob("*.parquet"):
        meta = pq.ParquetFile(f).metadata
        assert meta.schema.to_arrow_schema().names == SAMPLE_SCHEMA.names
        assert meta.row_group(0).column(0).compression == "ZSTD"
        assert all(meta.row_group(i).num_rows <= 1_000 for i in range(meta.num_row_groups))
    table = _read(root)
    assert table.num_rows == ROWS
    assert pc.count_distinct(table["part"]).as_py() == PARTITIONS


def test_column_properties(table_dir):
    root, _ = table_dir
    table = _read(root)
    # id: a unique key 1..ROWS, not stored sorted.
    ids = table["id"]
    assert pc.count_distinct(ids).as_py() == ROWS
    assert pc.min_max(ids).as_py() == {"min": 1, "max": ROWS}
    first_file = pq.read_table(root / "part=00" / "data-0.parquet", columns=["id"])["id"]
    assert first_file.to_pylist() != sorted(first_file.to_pylist())
    # price: ~5% nulls and at least one NaN (which is not a null).
    price = table["price"]
    assert 0.03 < price.null_count / ROWS < 0.07
    assert pc.sum(pc.is_nan(price)).as_py() >= 1
    # Cardinalities.
    assert pc.count_distinct(table["city"]).as_py() <= 50
    assert pc.count_distinct(table["category"]).as_py() <= 1_000
    comments = pc.count_distinct(table["comment"]).as_py()
    assert 0.4 * ROWS < comments < 0.6 * ROWS
    lengths = pc.utf8_length(table["comment"])
    assert pc.min(lengths).as_py() >= 10 and pc.max(lengths).as_py() <= 60
    # event_date is the UTC date of event_time.
    assert table["event_date"].equals(pc.cast(table["event_time"], pa.date32()))
    assert table.schema.field("amount").type == pa.decimal128(18, 2)


def test_duckdb_agrees(table_dir):
    root, _ = table_dir
    con = duckdb.connect()
    rows, ids, parts, nulls = con.execute(
        f"SELECT count(*), count(DISTINCT id), count(DISTINCT part), count(*) - count(price) "
        f"FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
    ).fetchone()
    assert (rows, ids, parts) == (ROWS, ROWS, PARTITIONS)
    assert nulls == _read(root)["price"].null_count


def test_deterministic(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate_table(str(a), rows=3_000, partitions=3, seed=1, row_group_size=700)
    generate_table(str(b), rows=3_000, partitions=3, seed=1, row_group_size=700)
    generate_table(str(c), rows=3_000, partitions=3, seed=2, row_group_size=700)
    assert _files(a) == _files(b)
    for rel in _files(a):  # byte for byte (Table.equals would trip over NaN != NaN)
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    assert not _read(a)["id"].equals(_read(c)["id"])


def test_regenerate_replaces_partitions(tmp_path):
    generate_table(str(tmp_path), rows=1_000, partitions=5, seed=0)
    generate_table(str(tmp_path), rows=500, partitions=2, seed=0)
    assert _read(tmp_path).num_rows == 500
    assert len(list(tmp_path.iterdir())) == 2


def test_tiny_tables(tmp_path):
    generate_table(str(tmp_path / "one"), rows=1, partitions=3)
    assert _read(tmp_path / "one").num_rows == 1
    generate_table(str(tmp_path / "zero"), rows=0, partitions=2)
    assert _read(tmp_path / "zero").num_rows == 0


def test_wide_table(tmp_path):
    schema = generate_wide_table(str(tmp_path), columns=30, rows=500, partitions=2, seed=3)
    assert len(schema) == 31 and schema.names[-1] == "part"
    table = _read(tmp_path)
    assert table.num_rows == 500
    assert {str(t) for t in table.schema.types[:30]} == {"int64", "double", "string"}
    assert math.isclose(sum(table[c].null_count for c in table.column_names[:30]) / (6 * 500), 0.02, abs_tol=0.02)
    again = tmp_path.parent / "wide-again"
    generate_wide_table(str(again), columns=30, rows=500, partitions=2, seed=3)
    for rel in _files(tmp_path):
        assert (again / rel).read_bytes() == (tmp_path / rel).read_bytes()
