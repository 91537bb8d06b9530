"""Analyze a table on a real S3-compatible server (moto on loopback) into an S3 store."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

from engine import fileio
from engine.api import analyze, open_statistics
from engine.sample import generate_table

pytestmark = pytest.mark.ray


def _upload(local_dir: str, uri: str) -> None:
    fs, path = fileio.resolve(uri)
    pafs.copy_files(local_dir, path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def test_analyze_s3_table_into_s3_store(s3_server: str, ray_runtime: None, tmp_path) -> None:
    local = str(tmp_path / "sales")
    generate_table(local, rows=6_000, partitions=3, seed=7)
    _upload(local, "s3://bucket/tables/sales")

    result = analyze("s3://bucket/tables/sales", store="s3://bucket/stats", user_statistics=[])

    assert result.partitions == 3 and result.rows == 6_000
    stats = open_statistics("s3://bucket/stats", "sales")
    oracle = ds.dataset(local, format="parquet", partitioning="hive").to_table()

    row = stats.column_statistics("quantity")
    assert row["row_count"] == 6_000
    assert row["min"] == pc.min(oracle["quantity"]).as_py()
    assert row["max"] == pc.max(oracle["quantity"]).as_py()
    assert row["distinct_count"] == pc.count_distinct(oracle["quantity"]).as_py()

    top = stats.top_frequencies("city", k=3, typed=True)
    vc = pc.value_counts(oracle["city"]).to_pylist()
    expected = sorted(((d["counts"], d["values"]) for d in vc), key=lambda t: (-t[0], t[1]))[:3]
    assert list(zip(top["frequency"].to_pylist(), top["value"].to_pylist())) == expected

    # the published files are really on the S3 server, under the job's run directory
    fs, path = fileio.resolve(f"s3://bucket/stats/sales/runs/{result.job_id}/table/statistics.parquet")
    assert fs.get_file_info(path).type == pafs.FileType.File
    assert isinstance(stats.histogram("price"), pa.Table)
