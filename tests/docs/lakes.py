"""The tables in other formats the docs' examples name, made small in the examples' directory:
the Iceberg table ``warehouse/db/events`` (also ``db.events`` of the pyiceberg catalog ``prod``),
the Delta table ``lake/orders`` (13 versions, dated in April 2024, so ``--at-snapshot 12`` and
``--as-of 2024-05-01T00:00:00Z`` name one), the Hudi table ``lake/trips`` (a merge-on-read
table Spark wrote, from ../shared/lake-tables when it is there) and, on the S3-compatible test
server, ``s3://bucket/table`` (a copy of ``data/sales``).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("METASTORE_SHARED") or REPO.parent / "shared")
#: the Hudi table lake/trips is made from (merge-on-read, Avro log files: inserts and deletes)
HUDI_TRIPS = SHARED / "lake-tables" / "hudi" / "quickstart_trips_table" / "mor" / "avro" / "v6_trips_8i3d.zip"
#: Delta: version v of lake/orders is committed at DELTA_FIRST + v days (version 12: 2024-04-30 12:00 UTC)
DELTA_FIRST = datetime(2024, 4, 18, 12, tzinfo=UTC)


def write_dated_delta(location: str, versions: int, first: datetime, step: timedelta) -> None:
    """A Delta table of ``versions`` appends (10 rows each: ``id``, ``part`` = version % 3,
    partitioned by ``part``), version v committed at ``first + v * step`` (its commitInfo
    timestamp and its log file's mtime, both of which delta-rs may read)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for v in range(versions):
        rows = pa.table({"id": pa.array(range(v * 10, v * 10 + 10), pa.int64()), "part": pa.array([v % 3] * 10, pa.int64())})
        write_deltalake(location, rows, mode="append", partition_by=["part"])
    for v in range(versions):
        log = Path(location) / "_delta_log" / f"{v:020d}.json"
        ms = int((first + v * step).timestamp() * 1000)
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"]["timestamp"] = ms
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(log, (ms / 1000, ms / 1000))


def write_orders(doc_dir: Path) -> None:
    """lake/orders: the Delta table of the docs (versions 0 to 13)."""
    write_dated_delta(str(doc_dir / "lake" / "orders"), 14, DELTA_FIRST, timedelta(days=1))


def write_trips(doc_dir: Path) -> bool:
    """lake/trips: the Hudi table of the docs, unzipped from the shared tables; False when they are not there."""
    if not HUDI_TRIPS.is_file():
        return False
    target = doc_dir / "lake" / "trips"
    unpacked = doc_dir / "lake" / "trips-unzipped"
    with zipfile.ZipFile(HUDI_TRIPS) as z:
        z.extractall(unpacked, [n for n in z.namelist() if not n.startswith("__MACOSX/")])
    (table,) = [p for p in unpacked.iterdir() if p.is_dir()]
    shutil.move(str(table), str(target))
    shutil.rmtree(unpacked)
    return True


def upload_sales(doc_dir: Path, endpoint: str) -> None:
    """s3://bucket/table: data/sales's files, on the S3-compatible server at ``endpoint``."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint)
    sales = doc_dir / "data" / "sales"
    for file in sorted(sales.rglob("*.parquet")):
        s3.upload_file(str(file), "bucket", f"table/{file.relative_to(sales).as_posix()}")
