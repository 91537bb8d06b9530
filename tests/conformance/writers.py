"""The conformance matrix's writers: tables as the tools people use write them.

Each writer is one function registered in ``WRITERS`` under its name; it writes a table under
the folder it is given and returns a ``Written``: where the table is, its format, its partition
columns, and a predicate the matrix's ``--where`` cells use. Adding a writer is one function
here (the matrix in test_matrix.py parametrises over ``WRITERS``). The types each writer covers
are what that tool writes by default or with the options named in its docstring.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 240


@dataclass(frozen=True)
class Written:
    """A table a writer wrote: ``path`` (what ``metastore analyze`` takes), its format
    (``parquet``, ``delta``, ``iceberg``), the Hive partition columns (their values come from
    the folders), and a predicate on a plain numeric column for the ``--where`` cells."""

    path: str
    format: str = "parquet"
    partition_columns: tuple[str, ...] = ()
    #: a plain integer column, and a threshold on it: the ``--where`` cells' predicate
    #: ``numeric >= threshold``, the quantile cells' column
    numeric: str = "n"
    threshold: int = 100
    #: columns the matrix does not compare with the oracle, with the reason (one line each)
    skip_oracle: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.numeric} >= {self.threshold}"


WRITERS: dict[str, Callable[[Path], Written]] = {}


def writer(fn: Callable[[Path], Written]) -> Callable[[Path], Written]:
    WRITERS[fn.__name__] = fn
    return fn


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _ns_timestamps(rng: np.random.Generator, n: int) -> np.ndarray:
    base = np.datetime64("2024-01-01T00:00:00", "ns")
    return base + rng.integers(0, 10**15, n).astype("timedelta64[ns]")  # ns digits that matter


@writer
def pandas_default(root: Path) -> Written:
    """pandas ``DataFrame.to_parquet`` with its defaults, one file: int64, float64 with NaN,
    object strings, bool, ns timestamps (naive and tz-aware), timedelta64, Decimal objects,
    a categorical, nullable Int64 and ``string[pyarrow]`` with missing values, dates."""
    import pandas as pd

    rng, n = _rng(), ROWS
    f = rng.normal(50, 20, n)
    f[::17] = np.nan
    df = pd.DataFrame(
        {
            "n": np.arange(n, dtype="int64"),
            "f": f,
            "s": [f"word{i % 37}" for i in range(n)],
            "b": rng.integers(0, 2, n).astype(bool),
            "ts": pd.to_datetime(_ns_timestamps(rng, n)),
            "tstz": pd.to_datetime(_ns_timestamps(rng, n)).tz_localize("UTC").tz_convert("Europe/Berlin"),
            "td": pd.to_timedelta(rng.integers(-(10**12), 10**12, n), unit="ns"),
            "dec": [decimal.Decimal(int(v)) / 100 for v in rng.integers(-100000, 100000, n)],
            "cat": pd.Categorical([["low", "mid", "high"][i % 3] for i in range(n)]),
            "i64": pd.array([None if i % 11 == 0 else i * 3 for i in range(n)], dtype="Int64"),
            "sp": pd.array([None if i % 13 == 0 else f"v{i % 29}" for i in range(n)], dtype="string[pyarrow]"),
            "d": [dt.date(2000, 1, 1) + dt.timedelta(days=int(v)) for v in rng.integers(0, 9000, n)],
        }
    )
    root.mkdir(parents=True)
    df.to_parquet(root / "part-0.parquet")
    return Written(str(root))


@writer
def pandas_partitioned(root: Path) -> Written:
    """pandas ``to_parquet(root, partition_cols=[...])``: Hive folders, the partition column
    (a string) taken out of the files; ns timestamps."""
    import pandas as pd

    rng, n = _rng(), ROWS
    df = pd.DataFrame(
        {
            "region": [["north", "south", "east"][i % 3] for i in range(n)],
            "n": np.arange(n, dtype="int64"),
            "price": rng.gamma(2.0, 30.0, n),
            "ts": pd.to_datetime(_ns_timestamps(rng, n)),
            "name": [f"user{i % 53}" for i in range(n)],
        }
    )
    df.to_parquet(root, partition_cols=["region"])
    return Written(str(root), partition_columns=("region",))


@writer
def polars_partitioned(root: Path) -> Written:
    """polars ``write_parquet(root, partition_by=[...])``, which keeps the partition column in
    the files too: Categorical, Enum, Time, Duration, Decimal, List, Struct, UInt64 above 2**63."""
    import polars as pl

    rng, n = _rng(), ROWS
    df = pl.DataFrame(
        {
            "part": [i % 4 for i in range(n)],
            "n": list(range(n)),
            "cat": pl.Series([["a", "b", "c"][i % 3] for i in range(n)], dtype=pl.Categorical),
            "enum": pl.Series([["x", "y"][i % 2] for i in range(n)], dtype=pl.Enum(["x", "y", "z"])),
            "t": [dt.time(i % 24, i % 60, i % 60, (i * 7919) % 1_000_000) for i in range(n)],
            "dur": pl.Series([dt.timedelta(microseconds=int(v)) for v in rng.integers(0, 10**10, n)], dtype=pl.Duration("ns")),
            "dec": pl.Series([decimal.Decimal(int(v)) / 1000 for v in rng.integers(-(10**6), 10**6, n)], dtype=pl.Decimal(12, 3)),
            "lst": [[i, i + 1] if i % 5 else None for i in range(n)],
            "st": [{"a": i, "b": f"s{i % 7}"} for i in range(n)],
            "u64": pl.Series([2**63 + i * 1_000_003 for i in range(n)], dtype=pl.UInt64),
        }
    )
    df.write_parquet(root, partition_by=["part"])
    return Written(str(root), partition_columns=("part",))


@writer
def duckdb_partitioned(root: Path) -> Written:
    """DuckDB ``COPY ... TO (FORMAT parquet, PARTITION_BY ...)``: UUID, HUGEINT, UBIGINT,
    TIMESTAMP_NS, TIMESTAMPTZ, TIME, INTERVAL, DECIMAL(38,x), LIST, STRUCT, MAP, BLOB."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        f"""COPY (
        SELECT i % 3 AS p, i AS n,
          uuid() AS u_random,
          ('00000000-0000-0000-0000-' || lpad(i::VARCHAR, 12, '0'))::UUID AS u,
          (i::HUGEINT * 1000000000000000000000) AS h,
          (18446744073709551615 - i)::UBIGINT AS ub,
          make_timestamp_ns(1700000000000000000 + i * 1000000007) AS tns,
          make_timestamptz(2024, 1, 1, 0, 0, 0)::TIMESTAMPTZ + to_seconds(i * 3600) AS tz,
          make_time(i % 24, i % 60, (i % 60)::DOUBLE) AS t,
          to_days(i % 40) + to_months(i % 3) AS iv,
          (i * 12345.678901)::DECIMAL(38, 6) AS dec38,
          [i, i * 2] AS lst,
          {{'a': i, 'b': 'x' || (i % 5)}} AS st,
          MAP {{'k': i}} AS mp,
          ('blob' || i)::BLOB AS bl
        FROM range({ROWS}) t(i)
        ) TO '{root}' (FORMAT parquet, PARTITION_BY (p))"""
    )
    return Written(str(root), partition_columns=("p",), skip_oracle={"u_random": "random values: compared for counts only"})


def _pyarrow_table(n: int) -> pa.Table:
    rng = _rng()
    far = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)]
    ms_per_day = 86_400_000
    date64 = [int(v) * ms_per_day for v in rng.integers(-800_000, 3_000_000, n)]  # years ~ -200 .. 10200
    date64[0] = int((far[0] - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
    cols = {
        "n": pa.array(range(n), pa.int64()),
        "ls": pa.array([f"large{i % 41}" for i in range(n)], pa.large_string()),
        "sv": pa.array([f"view{i % 43}" for i in range(n)], pa.string_view()),
        "f16": pa.array(rng.normal(0, 10, n).astype(np.float16), pa.float16()),
        "fsb": pa.array([uuid.UUID(int=i % 31).bytes for i in range(n)], pa.binary(16)),
        "d256": pa.array([decimal.Decimal(int(v)) / 10**4 for v in rng.integers(-(10**9), 10**9, n)], pa.decimal256(50, 4)),
        "t64ns": pa.array(rng.integers(0, 86_400 * 10**9, n), pa.time64("ns")),
        "dur": pa.array(rng.integers(-(10**12), 10**12, n), pa.duration("us")),
        "d64": pa.array(date64, pa.date64()),
    }
    for index in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        cols[f"dict_{index}"] = pa.array([f"c{i % 9}" for i in range(n)]).dictionary_encode().cast(pa.dictionary(getattr(pa, index)(), pa.string()))
    return pa.table(cols)


@writer
def pyarrow_options(root: Path) -> Written:
    """pyarrow ``write_table`` with non-default options, one file each: data page v2 and
    brotli; no dictionary, no statistics and lz4; zstd and row groups of 7 rows. Types:
    large_string, string_view, float16, fixed_size_binary, decimal256, time64[ns], duration,
    date64 far outside years 1..9999, dictionaries with every index type."""
    t = _pyarrow_table(ROWS)
    root.mkdir(parents=True)
    third = ROWS // 3
    pq.write_table(t.slice(0, third), root / "a.parquet", data_page_version="2.0", compression="brotli")
    pq.write_table(t.slice(third, third), root / "b.parquet", use_dictionary=False, write_statistics=False, compression="lz4")
    pq.write_table(t.slice(2 * third), root / "c.parquet", compression="zstd", row_group_size=7)
    return Written(str(root))


@writer
def odd_names(root: Path) -> Written:
    """Names users have: unicode, spaces, quotes, dots, the statistics files' own column names
    (column, value, frequency, count), names differing only in case, a 300-character name; an
    all-null and a constant column; an empty file and a partition of only an empty file."""
    n = ROWS
    long_name = "x" * 300
    t = pa.table(
        {
            "n": pa.array(range(n), pa.int64()),
            "Straße ünï": pa.array([f"ü{i % 5}" for i in range(n)]),
            "with space": pa.array([i % 7 for i in range(n)], pa.int32()),
            "quo\"te's": pa.array([float(i % 3) for i in range(n)]),
            "qty.units": pa.array([i % 90 for i in range(n)], pa.int64()),
            "column": pa.array([f"c{i % 4}" for i in range(n)]),
            "value": pa.array([i % 6 for i in range(n)], pa.int16()),
            "frequency": pa.array([i / 7 for i in range(n)]),
            "count": pa.array([i % 2 for i in range(n)], pa.int8()),
            "Name": pa.array([f"N{i % 3}" for i in range(n)]),
            "name": pa.array([f"n{i % 8}" for i in range(n)]),
            long_name: pa.array([i % 10 for i in range(n)], pa.int64()),
            "all_null": pa.array([None] * n, pa.float64()),
            "constant": pa.array(["same"] * n),
        }
    )
    half = n // 2
    for part, piece in (("k=1", t.slice(0, half)), ("k=2", t.slice(half))):
        os.makedirs(root / part)
        pq.write_table(piece, root / part / "data.parquet")
    pq.write_table(t.slice(0, 0), root / "k=2" / "empty.parquet")
    os.makedirs(root / "k=3")
    pq.write_table(t.slice(0, 0), root / "k=3" / "empty.parquet")
    return Written(str(root), partition_columns=("k",))


@writer
def delta_rs(root: Path) -> Written:
    """delta-rs ``write_deltalake`` partitioned by a string column, appended twice."""
    from deltalake import write_deltalake

    rng, n = _rng(), ROWS
    t = pa.table(
        {
            "n": pa.array(range(n), pa.int64()),
            "region": pa.array([["eu", "us"][i % 2] for i in range(n)]),
            "amount": pa.array(rng.normal(10, 3, n)),
            "at": pa.array(_ns_timestamps(rng, n).astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
        }
    )
    write_deltalake(str(root), t.slice(0, n // 2), partition_by=["region"])
    write_deltalake(str(root), t.slice(n // 2), partition_by=["region"], mode="append")
    return Written(str(root), format="delta", partition_columns=("region",))


@writer
def pyiceberg_table(root: Path) -> Written:
    """pyiceberg (SQL catalog on sqlite) appending twice to a table partitioned by identity."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    rng, n = _rng(), ROWS
    t = pa.table(
        {
            "n": pa.array(range(n), pa.int64()),
            "city": pa.array([["Oslo", "Rome", "Lima"][i % 3] for i in range(n)]),
            "price": pa.array(rng.normal(10, 3, n)),
            "day": pa.array([dt.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
        }
    )
    root.mkdir(parents=True)
    catalog = SqlCatalog("conf", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=t.schema)
    spec_field = table.schema().find_field("city")
    with table.update_spec() as update:
        update.add_field(spec_field.name, IdentityTransform(), "city")
    _ = PartitionSpec, PartitionField
    table = catalog.load_table("db.events")
    table.append(t.slice(0, n // 2))
    table.append(t.slice(n // 2))
    return Written(str(Path(table.location().removeprefix("file://"))), format="iceberg", partition_columns=())


SPARK_SCRIPT = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("conformance-writer")
         .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sql('''
  SELECT id AS n, CAST(id % 3 AS INT) AS p,
         CAST(id * 1.5 AS DECIMAL(18, 2)) AS dec,
         TIMESTAMP_SECONDS(1700000000 + id * 3607) AS ts,
         DATE_ADD(DATE'2020-01-01', CAST(id AS INT)) AS d,
         CONCAT('s', CAST(id % 17 AS STRING)) AS s,
         CAST(id % 2 = 0 AS BOOLEAN) AS b,
         IF(id % 5 = 0, NULL, id / 7.0D) AS x
  FROM range({rows})
''').write.partitionBy("p").parquet(sys.argv[1])
spark.stop()
"""


@writer
def spark_local(root: Path) -> Written:
    """Spark 3.5 (pyspark, local mode, its own JVM) ``df.write.partitionBy(...).parquet``:
    timestamps as INT96 (Spark's default), decimals, dates, an integer partition column."""
    import subprocess
    import sys

    script = root.parent / "spark_writer.py"
    script.write_text(SPARK_SCRIPT.replace("{rows}", str(ROWS)))
    subprocess.run([sys.executable, str(script), str(root)], check=True, capture_output=True, timeout=300)
    return Written(str(root), partition_columns=("p",))


SHARED = Path(os.environ.get("METASTORE_SHARED") or Path(__file__).resolve().parents[3] / "shared")


@writer
def hudi_spark(root: Path) -> Written:
    """A Hudi copy-on-write table that Spark wrote (../shared/lake-tables/hudi, v6, two
    commits, an update): bytes, shorts, floats, decimals, dates, timestamps, binary, nested
    structs, arrays and maps, and Hudi's meta fields. Skipped without ../shared."""
    import shutil
    import zipfile

    import pytest

    zipped = SHARED / "lake-tables" / "hudi" / "sample_table" / "cow" / "v6_nonpartitioned.zip"
    if not zipped.is_file():
        pytest.skip(f"the shared Hudi tables are not at {zipped.parent} (../shared, or METASTORE_SHARED)")
    root.mkdir(parents=True)
    with zipfile.ZipFile(zipped) as f:
        f.extractall(root)
    shutil.rmtree(root / "__MACOSX", ignore_errors=True)
    return Written(str(root / zipped.stem), format="hudi", numeric="id", threshold=2)
