"""Arrow scalars of dates, times and durations pickled by their storage integer.

pyarrow pickles a scalar through ``as_py()``, which fails for values Parquet holds
validly but Python's ``datetime`` cannot (years before 1 or after 9999: a date32
of year 10000, a timestamp[us] of year -1000, a duration[s] beyond 999,999,999
days). Partition tasks return their statistics (min, max, percentiles) as Arrow
scalars through Ray's pickling, so such a file could not be analyzed. Registering
a reducer in ``copyreg`` (which pickle and cloudpickle both consult before a
type's own ``__reduce__``) sends the storage integer and the type instead:
lossless for every value. Importing this module registers it; the modules whose
states carry scalars (engine.stats.moments) import it.
"""

from __future__ import annotations

import copyreg
from collections.abc import Callable

import pyarrow as pa

__all__ = ["from_storage"]

_CLASSES = (pa.Date32Scalar, pa.Date64Scalar, pa.TimestampScalar, pa.DurationScalar, pa.Time32Scalar, pa.Time64Scalar)


def _storage(type_: pa.DataType) -> pa.DataType:
    return pa.int32() if type_.bit_width == 32 else pa.int64()


def from_storage(value: int | None, type_: pa.DataType) -> pa.Scalar:
    """The scalar of ``type_`` whose storage integer is ``value`` (None: a null scalar)."""
    return pa.array([value], _storage(type_)).view(type_)[0]


def _reduce(scalar: pa.Scalar) -> tuple[Callable[[int | None, pa.DataType], pa.Scalar], tuple[int | None, pa.DataType]]:
    value = pa.array([scalar], scalar.type).view(_storage(scalar.type))[0].as_py()
    return from_storage, (value, scalar.type)


for _cls in _CLASSES:
    copyreg.pickle(_cls, _reduce)
