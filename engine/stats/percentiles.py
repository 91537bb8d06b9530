"""The percentiles statistics.parquet stores (columns p01 .. p99).

Its own module so that the file layout (and so every lookup) can name them
without importing the value-count kernels (numba) that compute them.
"""
from __future__ import annotations

#: Probabilities of the percentile columns of statistics.parquet (column p01 .. p99).
PERCENTILES: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def percentile_column(p: float) -> str:
    return f"p{round(p * 100):02d}"
