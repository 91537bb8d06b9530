"""A table whose column names collide with struct paths, and DuckDB as the oracle of predicates on it.

Six files in two Hive partitions, three written by pyarrow with non-default options (small row
groups, no dictionary, data page v2, zstd) and three by pandas: a struct ``s`` with fields
``x`` (int64) and ``y``, a top-level string column named ``s.x``, a top-level int column named
``qty.units`` (no struct ``qty``), ``id`` and ``price``. File k holds ``s.x`` values ``dotk``
and ``dotk<letter>``, struct ``s.x`` values ``100k .. 100k+39`` and ``qty.units`` ``10k .. 10k+9``,
so a predicate on either ``s.x`` selects files that tell the two columns apart, and min/max
prune exactly.

DuckDB reads the files itself: ``"s.x"`` is its column named s.x, ``s.x`` field x of struct s.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_FILE = 40
FILES = 6
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("s.x", pa.string()),
        ("qty.units", pa.int64()),
        ("price", pa.float64()),
    ]
)


def _rows(k: int) -> dict[str, list]:
    n = ROWS_PER_FILE
    return {
        "id": [k * n + j for j in range(n)],
        "s": [{"x": 100 * k + j, "y": f"y{j % 3}"} for j in range(n)],
        "s.x": [f"dot{k}" if j % 10 == 0 else f"dot{k}{chr(97 + j % 26)}" for j in range(n)],
        "qty.units": [10 * k + j % 10 for j in range(n)],
        "price": [None if j % 7 == 0 else float(k * n + j) / 4 for j in range(n)],
    }


def write_dotted_table(root: Path) -> list[str]:
    """The table under ``root`` (``p=0``, ``p=1``); its files' paths."""
    paths = []
    for k in range(FILES):
        part = root / f"p={k // 3}"
        part.mkdir(parents=True, exist_ok=True)
        path = part / f"f{k}.parquet"
        if k % 2 == 0:
            table = pa.Table.from_pydict(_rows(k), schema=SCHEMA)
            pq.write_table(table, path, row_group_size=16, use_dictionary=False, data_page_version="2.0", compression="zstd")
        else:
            pd.DataFrame(_rows(k)).to_parquet(path, engine="pyarrow", index=False, schema=SCHEMA)
        paths.append(str(path))
    return paths


def _source(root: Path) -> str:
    return f"read_parquet('{root}/*/*.parquet', filename = true, hive_partitioning = true)"


def duckdb_files(root: Path, where: str) -> set[str]:
    """The files DuckDB finds a row matching ``where`` (its SQL) in."""
    with duckdb.connect() as con:
        return {r[0] for r in con.execute(f"SELECT DISTINCT filename FROM {_source(root)} WHERE {where}").fetchall()}


def duckdb_count(root: Path, where: str) -> int:
    with duckdb.connect() as con:
        return con.execute(f"SELECT count(*) FROM {_source(root)} WHERE {where}").fetchone()[0]


#: (our predicate, DuckDB's SQL of the same rows): every spelling of both columns named s.x
SPELLINGS = [
    ("\"s.x\" = 'dot1'", "\"s.x\" = 'dot1'"),  # quoted: the top-level column named s.x
    ("`s.x` = 'dot4'", "\"s.x\" = 'dot4'"),
    ("\"s.x\" in ('dot2', 'dot5a')", "\"s.x\" in ('dot2', 'dot5a')"),
    ("s.x = 203", "s.x = 203"),  # unquoted: field x of struct s
    ('"s"."x" = 310', "s.x = 310"),
    ('s."x" between 0 and 150', "s.x between 0 and 150"),
    ('"s".x >= 500 or "s.x" = \'dot0\'', "s.x >= 500 or \"s.x\" = 'dot0'"),
    ("\"s.x\" >= 'dot3' and s.x < 450", "\"s.x\" >= 'dot3' and s.x < 450"),
    ('"qty.units" > 40', '"qty.units" > 40'),
    ("qty.units <= 9", '"qty.units" <= 9'),  # unquoted: no struct qty, so the column named qty.units
]
