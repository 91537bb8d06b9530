"""``comparable``: the one Python form that orders like a column's values (engine/expressions/binding.py).

The predicates' literals, the stored min/max of subsets and file indexes and the Flight
service's histogram bounds all compare through it. Oracles: Arrow's own storage view
(``pyarrow.compute.cast`` of the integer view) and numpy's ordering of the same values.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine import values as value_forms
from engine.expressions import comparable

TEMPORAL = [
    (pa.date32(), [dt.date(1970, 1, 2), dt.date(2024, 3, 1), None]),
    (pa.timestamp("ns"), [1, -5, None]),
    (pa.timestamp("us", tz="UTC"), [10**15, 0, None]),
    (pa.time32("ms"), [1000, 5, None]),
    (pa.duration("s"), [-3, 7, None]),
]


@pytest.mark.parametrize(("t", "values"), TEMPORAL, ids=lambda x: str(x))
def test_temporal_values_are_their_storage_count_and_null_is_none(t: pa.DataType, values: list) -> None:
    a = pa.array(values, t)
    storage = pa.int32() if t.bit_width == 32 else pa.int64()
    want = a.view(storage).to_pylist()  # Arrow's own buffer values
    assert [comparable(a[i]) for i in range(len(a))] == want
    assert comparable(pa.scalar(None, t)) is None


@pytest.mark.parametrize("t", [pa.float16(), pa.float32(), pa.float64()], ids=str)
def test_floats_are_python_floats_ordering_as_numpy_nan_kept(t: pa.DataType) -> None:
    raw = np.array([2.5, -0.0, 0.0, -1.25, 65504.0], dtype=t.to_pandas_dtype())
    a = pa.array(raw, t)
    got = [comparable(a[i]) for i in range(len(a))]
    assert all(type(v) is float for v in got)
    assert got == [float(v) for v in raw]
    assert sorted(range(len(got)), key=lambda i: got[i]) == list(np.argsort(raw, kind="stable"))
    nan = comparable(pc.cast(pa.scalar(float("nan")), t))
    assert type(nan) is float and math.isnan(nan)  # NaN stays NaN (callers refuse or skip it)
    assert comparable(pa.scalar(None, t)) is None


def test_other_types_are_as_py_binaries_bytes() -> None:
    assert comparable(pa.scalar(b"ab", pa.binary_view())) == b"ab" and type(comparable(pa.scalar(b"ab", pa.binary_view()))) is bytes
    assert type(comparable(pa.scalar(b"xy", pa.binary(2)))) is bytes
    assert comparable(pa.scalar(Decimal("1.50"), pa.decimal128(5, 2))) == Decimal("1.50")
    assert comparable(pa.scalar("Berlin")) == "Berlin"
    assert comparable(pa.scalar(None, pa.string())) is None
    assert comparable(pa.scalar(None, pa.binary())) is None


def test_the_flight_service_compares_bounds_with_the_same_function() -> None:
    from flight_server import service

    assert service.comparable is comparable
    # a histogram bound given as its text form: the column type's comparable value
    for t, text in [(pa.float16(), "1.5"), (pa.timestamp("ns"), "1970-01-01T00:00:00.000000001"), (pa.date32(), "1970-01-03")]:
        got = service._typed_value(None, "c", t, text, "value_range bound")  # type: ignore[arg-type]
        assert got == comparable(value_forms.decode_scalar(text, t))
    assert service._typed_value(None, "c", pa.date32(), "1970-01-03", "b") == 2  # type: ignore[arg-type]
