"""Partition statistics (engine/publish/partition_stats.py) of a table whose partitioning evolved,
against pyiceberg's own view of the snapshot's files (``inspect.files``)."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog

from engine.publish import partition_stats


def test_rows_per_spec_and_partition_of_an_evolved_table(tmp_path: Path) -> None:
    catalog = SqlCatalog("ps", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")
    catalog.create_namespace("db")
    rows = pa.table(
        {
            "d": pa.array([dt.date(2024, 1, 1 + i % 3) for i in range(30)], pa.date32()),
            "part": pa.array(["a", "b"] * 15),
            "v": pa.array(range(30), pa.int64()),
        }
    )
    table = catalog.create_table("db.e", schema=rows.schema)
    table.append(rows)  # unpartitioned
    with table.update_spec() as u:
        u.add_identity("d")
    table = catalog.load_table("db.e")
    table.append(rows)
    with table.update_spec() as u:
        u.add_identity("part")
    table = catalog.load_table("db.e")
    table.append(rows.slice(0, 10))
    snapshot = table.current_snapshot()
    ptype = partition_stats.partition_type(table)
    assert [f.name for f in ptype] == ["d", "part"]
    assert [int(f.metadata[b"PARQUET:field_id"]) for f in ptype] == [1000, 1001]
    got = partition_stats.aggregate(partition_stats.file_entries(table, snapshot), ptype, {s.snapshot_id: s.timestamp_ms for s in table.snapshots()})
    path = tmp_path / "ps.parquet"
    path.write_bytes(partition_stats.parquet_bytes(got))
    back = pq.read_table(path).to_pylist()

    files = table.inspect.files().to_pylist()
    expected: dict[tuple, Counter] = defaultdict(Counter)
    for f in files:
        key = (f["spec_id"], tuple(sorted((k, v) for k, v in (f["partition"] or {}).items() if v is not None)))
        expected[key].update({"rows": f["record_count"], "files": 1, "bytes": f["file_size_in_bytes"]})
    seen = {}
    for r in back:
        named = {k: v for k, v in r["partition"].items() if v is not None}
        seen[(r["spec_id"], tuple(sorted(named.items())))] = Counter(
            {"rows": r["data_record_count"], "files": r["data_file_count"], "bytes": r["total_data_file_size_in_bytes"]}
        )
    assert seen == dict(expected)
    assert {r["spec_id"] for r in back} == {0, 1, 2}
    unpartitioned = [r for r in back if r["spec_id"] == 0]
    assert len(unpartitioned) == 1 and unpartitioned[0]["partition"] == {"d": None, "part": None}
    first = table.snapshots()[0]
    assert unpartitioned[0]["last_updated_snapshot_id"] == first.snapshot_id and unpartitioned[0]["last_updated_at"] == first.timestamp_ms
