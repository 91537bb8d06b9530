"""t-digest sketches (DataSketches ``tdigest_double``, k=200) for quantiles near the tails.

KLL's rank error is the same everywhere (about 1.3% at k=200): at p = 0.999
it cannot tell the 99.9th percentile from the 98.6th. A t-digest keeps small
centroids near both ends, so its error shrinks like p(1-p) there, but it has
no proven bound and is worse than KLL in the middle. So quantile queries take
each from the sketch with the smaller bound (engine/quantiles.py).

The t-digest is an opt-in statistic of statistics.parquet, stored as the
binary column ``tdigest_sketch`` through the user-statistics mechanism
(engine/stats/user.py): ``analyze(..., user_statistics=[..., TDIGEST])`` or
``metastore analyze --tdigest``. Opt-in because feeding it costs ~0.1 us per
value (about 0.5 CPU-s per 5M-row column).

Error bound: DataSketches documents none for its t-digest. Over uniform,
normal, log-normal, exponential, Pareto, Zipf, bimodal, sorted and 50-value
data (10^6 values in 16 partitions merged, three orders each) the worst rank
error seen at p was 0.09-0.21 * p(1-p); :func:`rank_error_bound` reports
``TDIGEST_ERROR_FACTOR * p(1-p)`` with ``TDIGEST_ERROR_FACTOR = 0.25``, an
empirical bound (tests/engine/stats/test_quantile_sketches.py checks it on
other data), not a guarantee. At p = 0 and 1 it is exact (min and max are kept).
"""

from __future__ import annotations

import datasketches as ds
import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.stats.sketches import as_float64
from engine.stats.user import UserStatistic

__all__ = ["TDIGEST", "TDIGEST_COLUMN", "TDIGEST_ERROR_FACTOR", "TDIGEST_K", "merge_tdigests", "rank_error_bound", "tdigest_of", "tdigest_quantiles"]

TDIGEST_K = 200
TDIGEST_COLUMN = "tdigest_sketch"
TDIGEST_ERROR_FACTOR = 0.25


def tdigest_of(values: pa.Array) -> bytes | None:
    """A serialized t-digest of the non-null, non-NaN values (None when there are none)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    x = as_float64(values)
    if len(x) == 0:
        return None
    sketch = ds.tdigest_double(TDIGEST_K)
    if not x.flags.writeable or not x.flags.c_contiguous:
        x = np.array(x, dtype=np.float64)  # the binding takes writable, contiguous float64 only
    sketch.update(x)
    return sketch.serialize()


def merge_tdigests(a: bytes | None, b: bytes | None) -> bytes | None:
    if a is None:
        return b
    if b is None:
        return a
    s = ds.tdigest_double.deserialize(a)
    s.merge(ds.tdigest_double.deserialize(b))
    return s.serialize()


def tdigest_quantiles(blob: bytes, probabilities: list[float]) -> tuple[list[float], int]:
    """(quantiles as float64, the number of values the digest saw)."""
    s = ds.tdigest_double.deserialize(blob)
    return [s.get_quantile(float(p)) for p in probabilities], int(s.get_total_weight())


def _state_bytes(state: bytes | None) -> bytes:
    """A partition's t-digest as stored in its partial state: the sketch's own bytes (b"" for none)."""
    return b"" if state is None else bytes(state)


def _bytes_state(data: bytes) -> bytes | None:
    """Back from :func:`_state_bytes`, checked by DataSketches (damaged bytes raise, and the
    partition is recomputed instead of inheriting a sketch no merge could read)."""
    if not data:
        return None
    blob = bytes(data)
    ds.tdigest_double.deserialize(blob)
    return blob


def rank_error_bound(p: float) -> float:
    """The empirical normalized rank error bound of a t-digest quantile at ``p``."""
    return TDIGEST_ERROR_FACTOR * p * (1.0 - p)


#: The opt-in statistic: a t-digest per column with percentiles (numbers, times).
TDIGEST = UserStatistic(
    name=TDIGEST_COLUMN,
    compute=tdigest_of,
    merge=merge_tdigests,
    result_type=pa.binary(),
    applies_to=mt.has_percentiles,
    description=f"t-digest (DataSketches tdigest_double, k={TDIGEST_K}) of the non-null, non-NaN values as float64",
    # the state already is DataSketches' serialization: stored as is, so unchanged partitions are inherited
    serialize=_state_bytes,
    deserialize=_bytes_state,
)
