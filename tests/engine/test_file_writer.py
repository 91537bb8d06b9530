"""engine.files.writer.write_parquet: footers without a second copy of the schema, files that
read back as written (the same Arrow types and metadata), old files still read alike."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.files import checksum
from engine.files.writer import write_parquet

METADATA = {b"metastore.kind": b"statistics", b"metastore.histograms": b'{"x": {"bins": 3}}'}


@pytest.mark.parametrize(
    ("types", "compact"),
    [
        ([pa.string(), pa.int64(), pa.float64(), pa.bool_(), pa.binary(), pa.date32(), pa.timestamp("us", "UTC")], True),
        ([pa.struct([("lower", pa.int64()), ("count", pa.int64())]), pa.list_(pa.int32())], True),
        ([pa.string(), pa.duration("s")], False),  # Parquet has no duration: the Arrow schema is kept
        ([pa.large_string()], False),
        ([pa.timestamp("ms", "Europe/Berlin")], False),
    ],
)
def test_files_read_back_as_written(tmp_path: Path, types: list[pa.DataType], compact: bool) -> None:
    schema = pa.schema([(f"c{i}", t) for i, t in enumerate(types)], metadata=METADATA)
    table = pa.Table.from_pylist([{}, {}], schema=schema)  # nulls of every type
    uri = str(tmp_path / "f.parquet")
    written = write_parquet(uri, [table.slice(0, 1), table.slice(1, 1)], schema, dictionary=False)
    data = Path(uri).read_bytes()
    assert (written.size, written.checksum) == (len(data), checksum.of_bytes(data))
    f = pq.ParquetFile(uri)
    assert (b"ARROW:schema" in f.metadata.metadata) is not compact
    assert f.metadata.num_row_groups == 2
    back = pq.read_table(uri)
    assert back.schema.equals(schema, check_metadata=False) and back.equals(table.replace_schema_metadata(None).cast(back.schema))
    # readers see the metadata either way: the footer's key-value pairs and the read schema
    assert {k: v for k, v in f.metadata.metadata.items() if k != b"ARROW:schema"} == METADATA
    assert {k: v for k, v in back.schema.metadata.items() if k != b"ARROW:schema"} == METADATA


def test_a_file_written_the_old_way_reads_alike(tmp_path: Path) -> None:
    """Files of earlier jobs carry ARROW:schema with the metadata inside: the same answers."""
    schema = pa.schema([("column", pa.string()), ("row_count", pa.int64())], metadata=METADATA)
    table = pa.table({"column": ["a", "b"], "row_count": [1, 2]}, schema=schema)
    old, new = str(tmp_path / "old.parquet"), str(tmp_path / "new.parquet")
    pq.write_table(table, old)
    write_parquet(new, [table], schema, dictionary=False)
    assert Path(new).stat().st_size < Path(old).stat().st_size
    for got in (pq.read_table(old), pq.read_table(new)):
        assert got.to_pylist() == table.to_pylist() and got.schema.metadata == METADATA


def test_a_delta_segment_differs_from_a_whole_file_only_by_its_segment_key(tmp_path: Path) -> None:
    """write_frequencies(stored_rows=): the same rows and layout, plus ``metastore.segment``
    (docs/FORMAT.md, "Segments"); nonsense refused before anything is written."""
    import json

    from engine.files import layout, writer
    from engine.files.layout import FileIdentity

    identity = FileIdentity("t", "/data/t", "table", "", "s", "j", "2026-01-01T00:00:00.000+00:00")
    counts = pa.table({"value": pa.array(range(3000), pa.int64()), "count": pa.array([3000 - i for i in range(3000)], pa.int64())})
    rows = [
        ("a", layout.FREQ_COMPLETE, writer.frequency_rows("a", counts)),
        ("b", layout.FREQ_ALL_DISTINCT, writer.frequency_rows("b", counts.slice(0, 0))),
    ]
    whole = writer.write_frequencies(str(tmp_path / "whole.parquet"), rows, identity)
    delta = writer.write_frequencies(str(tmp_path / "delta.parquet"), rows, identity, stored_rows={"a": 5000, "b": 0})
    md_whole = pq.read_metadata(tmp_path / "whole.parquet")
    md_delta = pq.read_metadata(tmp_path / "delta.parquet")
    assert layout.SEGMENT_KEY.encode() not in md_whole.metadata
    assert json.loads(md_delta.metadata[layout.SEGMENT_KEY.encode()]) == {"stored_rows": {"a": 5000, "b": 0}}
    assert {k: v for k, v in md_delta.metadata.items() if k != layout.SEGMENT_KEY.encode()} == dict(md_whole.metadata)
    assert [md_delta.row_group(i).num_rows for i in range(md_delta.num_row_groups)] == [layout.FREQUENCIES_HEAD_ROWS, 3000 - 1024]
    assert pq.read_table(tmp_path / "delta.parquet").equals(pq.read_table(tmp_path / "whole.parquet"))
    assert whole.size != delta.size
    for bad, match in (({"a": 2999, "b": 0}, "more than its stored_rows"), ({"a": 5000}, "every column"), ({"a": 5000, "b": 0, "c": 1}, "unknown")):
        with pytest.raises(ValueError, match=match):
            writer.write_frequencies(str(tmp_path / "bad.parquet"), rows, identity, stored_rows=bad)
    assert not (tmp_path / "bad.parquet").exists()
