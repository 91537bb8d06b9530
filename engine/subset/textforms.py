"""Order and arithmetic on the values a statistics row keeps as text (pure).

min, max and sum are stored in their lossless text form (docs/VALUE_FORMS.md) so one column
holds every type; merging partitions' rows and bounding a subset's range need them back as
values of the column's type, in its order, and the results in the same text form again.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine import values as value_forms
from engine.exceptions import InvalidArgumentError
from engine.expressions.binding import comparable

#: ``min`` or ``max``: which end of the column's order a function picks
Pick = Callable[..., Any]


def orderable(t: pa.DataType) -> bool:
    """Whether values of ``t`` have an order the range bounds can use."""
    return not (mt.is_nested(t) or mt.is_dictionary(t))


def _key(text: str, t: pa.DataType) -> Any:
    return comparable(value_forms.decode_scalar(text, t))


def extreme(texts: list[str | None], t: pa.DataType, pick: Pick) -> str | None:
    """The smallest (``pick=min``) or largest text form of ``texts`` in the column's order
    (text order is not value order: "10" < "9"); None when there is none or no order."""
    present = [x for x in texts if x is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    if not value_forms.has_text_form(t):
        return None
    if mt.is_numeric(t) or mt.is_temporal(t) or mt.is_offset_string(t):
        try:  # one vectorised decode instead of one per text
            arr = value_forms.decode(pa.array(present, pa.string()), t)
            target = pc.min_max(arr)["min" if pick is min else "max"]
            return present[pc.index(arr, target).as_py()]
        except (pa.ArrowException, InvalidArgumentError):
            pass
    try:
        return pick(present, key=lambda x: _key(x, t))
    except (TypeError, InvalidArgumentError):
        return None


def tighter(a: str | None, b: str | None, t: pa.DataType, pick: Pick) -> str | None:
    """Of two optional bounds, the one ``pick`` chooses (a missing one does not bound)."""
    if a is None:
        return b
    if b is None:
        return a
    return pick([a, b], key=lambda x: _key(x, t))


def sum_or_none(xs: list[int | None]) -> int | None:
    """The sum, or None when any part is unknown (a partial sum would pass as exact)."""
    return None if any(x is None for x in xs) else sum(x for x in xs if x is not None)


def sum_text(v: Any, t: pa.DataType) -> str | None:
    """A sum (or a bound of one) in the stored text form of the column's sums."""
    if v is None:
        return None
    if mt.is_integer(t):
        return str(int(v) if not isinstance(v, float) else int(round(v)))
    if mt.is_decimal(t):
        d = v if isinstance(v, Decimal) else Decimal(repr(float(v)))
        return format(d.quantize(Decimal(1).scaleb(-t.scale)), "f")
    return repr(float(v))


def as_number(text: Any, t: pa.DataType) -> Any:
    """A min or max text form as a number to multiply counts with (None stays None)."""
    if text is None:
        return None
    scalar = value_forms.decode_scalar(str(text), t)
    if mt.is_decimal(t):
        return scalar.as_py()
    if mt.is_integer(t):
        return int(scalar.as_py())
    return float(scalar.as_py())
