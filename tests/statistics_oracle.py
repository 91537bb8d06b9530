"""The DuckDB oracle of the statistics tests: one column's reference statistics computed by
DuckDB over the data (a relation), and the helpers that read our side (the test modules of
analyze and of the table formats share it); and the Spark bridge's exact equi-height histogram
the slow way."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import types as mt
from engine import values as value_forms
from engine.files import layout
from engine.stats.valuecounts import PERCENTILES, percentile_column

PCTS = [percentile_column(p) for p in PERCENTILES]


def q(name: str) -> str:
    """A column name quoted for DuckDB."""
    return '"' + name.replace('"', '""') + '"'


def decode(text: str | None, t: pa.DataType) -> Any:
    """A statistic's text form (engine.values) as a Python value of type ``t``."""
    return None if text is None else value_forms.decode_scalar(text, t).as_py()


def stat_rows(ts: Any, partition: str | None = None) -> dict[str, dict]:
    """The rows of one statistics.parquet (the table's, or a partition's), by column."""
    t = pq.read_table(ts.file_uri(layout.STATISTICS_FILE, partition))
    return {r["column"]: r for r in t.to_pylist()}


def oracle_row(con: duckdb.DuckDBPyConnection, rel: str, name: str, t: pa.DataType) -> dict:
    """The reference statistics of column ``name`` (Arrow type ``t``) of relation ``rel``;
    NaN excluded from everything but nan_count. Percentiles are the lower nearest rank, the
    value at 0-based position floor(p * (n - 1)) (numpy's method="lower"; DuckDB's
    quantile_disc is another definition, ceil(p * n) - 1). Also ``valid`` (non-null, non-NaN
    rows), ``zero_count`` (numbers) and ``top`` (the largest value count, discrete types)."""
    c = q(name)
    floating = pa.types.is_floating(t)
    where = f"{c} IS NOT NULL" + (f" AND NOT isnan({c})" if floating else "")
    sel = {
        "row_count": "count(*)",
        "null_count": f"count(*) - count({c})",
        "valid": f"count(*) FILTER (WHERE {where})",
    }
    if floating:
        sel["nan_count"] = f"count(*) FILTER (WHERE isnan({c}))"
    if mt.is_orderable(t):
        sel["min"] = f"min({c}) FILTER (WHERE {where})"
        sel["max"] = f"max({c}) FILTER (WHERE {where})"
        sel["distinct_count"] = f"count(DISTINCT {c}) FILTER (WHERE {where})"
    if mt.is_numeric(t):
        sel["sum"] = f"sum({c}::HUGEINT)" if pa.types.is_integer(t) else f"sum({c}) FILTER (WHERE {where})"
        sel["mean"] = f"avg({c}::DOUBLE) FILTER (WHERE {where})"
        sel["stddev"] = f"stddev_samp({c}::DOUBLE) FILTER (WHERE {where})"
        sel["zero_count"] = f"count(*) FILTER (WHERE {c} = 0)"
    if mt.has_length(t):
        binary = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
        length = "octet_length" if binary else "length"
        sel["avg_len"] = f"avg({length}({c}))"
        sel["max_len"] = f"max({length}({c}))"
    if mt.has_percentiles(t):
        picks = ", ".join(f"max(v) FILTER (WHERE i = floor({p} * (n - 1)))" for p in PERCENTILES)
        sel["percentiles"] = (
            f"(SELECT [{picks}] FROM (SELECT {c} AS v, row_number() OVER (ORDER BY {c}) - 1 AS i, count(*) OVER () AS n FROM {rel} WHERE {where}))"
        )
    if mt.is_discrete(t):
        sel["top"] = f"(SELECT max(n) FROM (SELECT count(*) AS n FROM {rel} WHERE {c} IS NOT NULL GROUP BY {c}))"
    row = con.execute("SELECT " + ", ".join(f"{e} AS {k}" for k, e in sel.items()) + f" FROM {rel}").fetchone()
    return dict(zip(sel, row))


def equi_height_histogram(x: np.ndarray, bins: int) -> list[tuple[float, float, int]]:
    """The exact equi-height histogram ``spark_bridge.cbo.equi_height_exact`` documents, computed
    the slow way from every value: bin i ends at the value of rank ceil(i * n / bins); each bin
    is (lo, hi, distinct values in it)."""
    x = np.sort(x.astype(float))
    n = len(x)
    ends = [x[0]] + [x[math.ceil(i * n / bins) - 1] for i in range(1, bins + 1)]
    out = []
    for i in range(bins):
        lo, hi = ends[i], ends[i + 1]
        inside = x[(x >= lo) & (x <= hi)] if i == 0 else x[(x > lo) & (x <= hi)]
        out.append((float(lo), float(hi), 1 if lo == hi else len(np.unique(inside))))
    return out
