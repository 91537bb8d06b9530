"""Exact percentiles of a column held as several sorted (value, count) runs, without merging them.

The table-level percentiles of an integer-like column are found by a binary
search over the value domain: the number of values <= v is the sum over
partitions of a ``searchsorted`` in each sorted run, so each percentile costs
64 x partitions x log(run) steps, whatever the column's size. Same definition
as :func:`engine.stats.valuecounts.exact_percentiles` (lower nearest rank:
the value at 0-based position floor(p * (n - 1))).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.arrowcompute import contiguous
from engine.stats import sortedvalues
from engine.stats.valuecounts import (
    PERCENTILES,
    counted_integer_storage,
    counts_sorted,
    from_numpy_ints,
    percentile_column,
    to_numpy_ints,
)


def supported(t: pa.DataType) -> bool:
    """Integer-like types (by their integer storage) and decimals whose unscaled values fit int64."""
    return counted_integer_storage(t) is not None or (mt.is_decimal(t) and sortedvalues.supports(t))


def sort_keys(values: pa.Array, type_: pa.DataType) -> np.ndarray:
    """Values of a :func:`supported` type as integers in the same order (their storage, or a
    decimal's unscaled value): what the binary searches compare."""
    storage = counted_integer_storage(type_)
    return to_numpy_ints(values, storage) if storage is not None else sortedvalues.unscaled(values)


def _value(key: int, type_: pa.DataType) -> pa.Scalar:
    storage = counted_integer_storage(type_)
    if storage is None:
        return sortedvalues.to_arrow(np.array([key], np.int64), type_)[0]
    return from_numpy_ints(np.array([key], dtype=storage.to_pandas_dtype()), storage, type_)[0]


def _run(counts: pa.Table, type_: pa.DataType) -> tuple[np.ndarray, np.ndarray | None, int]:
    """(sorted keys, their cumulative counts or None when every count is 1, the values' count)."""
    v = sort_keys(contiguous(counts["value"]), type_)
    c = counts["count"].to_numpy()
    if not counts_sorted(counts):
        order = np.argsort(v, kind="stable")
        v, c = v[order], c[order]
    if bool((c == 1).all()):  # a mostly distinct column's: the cumulative count is the position
        return v, None, len(v)
    cum = np.cumsum(c)
    return v, cum, int(cum[-1])


def percentiles_of_runs(parts: list[pa.Table], type_: pa.DataType, probabilities: tuple[float, ...] = PERCENTILES) -> dict[str, pa.Scalar | None]:
    """Exact percentiles of the values ``parts`` (value counts, any order) hold together."""
    if not supported(type_):
        raise TypeError(f"percentiles_of_runs() needs an integer-like or narrow decimal type, not {type_}")
    names = [percentile_column(p) for p in probabilities]
    runs = [_run(p, type_) for p in parts if p.num_rows]
    n = sum(size for _, _, size in runs)
    if n == 0:
        return dict.fromkeys(names)
    lo0 = min(int(v[0]) for v, _, _ in runs)
    hi0 = max(int(v[-1]) for v, _, _ in runs)

    def count_le(x: int) -> int:
        total = 0
        for v, cum, _ in runs:
            i = int(np.searchsorted(v, x, side="right"))
            total += (i if cum is None else int(cum[i - 1])) if i else 0
        return total

    out: dict[str, pa.Scalar | None] = {}
    for name, p in zip(names, probabilities):
        k = int(np.floor(p * (n - 1)))  # 0-based position: the smallest x with count_le(x) > k
        lo, hi = lo0, hi0
        while lo < hi:
            mid = (lo + hi) // 2
            if count_le(mid) > k:
                hi = mid
            else:
                lo = mid + 1
        out[name] = _value(lo, type_)
    return out
