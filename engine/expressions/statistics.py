"""Metastore's statistics as the evaluator's metrics: a statistics.parquet row
(row_count, null_count, nan_count, min, max in their text forms) to ColumnMetrics.

Kept apart from the lookups so the same conversion serves a partition's statistics
file, the Flight service's prepared rows and the per-file index.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.exceptions import InvalidArgumentError
from engine.expressions.binding import comparable
from engine.expressions.metrics import ColumnMetrics

#: the statistics.parquet columns the evaluator reads
PRUNING_STATISTICS = ("row_count", "null_count", "nan_count", "min", "max")


def metrics_from_row(row: Mapping[str, Any], t: pa.DataType) -> ColumnMetrics:
    """A statistics row of a column of type ``t`` as metrics; a bound that does not decode is unknown."""
    t = mt.without_dictionary(t)
    return ColumnMetrics(
        rows=row.get("row_count"),
        nulls=row.get("null_count"),
        nans=row.get("nan_count") if mt.is_floating(t) else 0,
        lower=_bound(row.get("min"), t),
        upper=_bound(row.get("max"), t),
    )


def _bound(text: str | None, t: pa.DataType) -> Any:
    if text is None or not value_forms.has_text_form(t):
        return None
    try:
        value = comparable(value_forms.decode_scalar(text, t))
    except InvalidArgumentError:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None  # a NaN bound proves nothing
    return value
