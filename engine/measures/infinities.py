"""Infinities: how many of a floating column's values are +inf (``posinf_count``) and how
many -inf (``neginf_count``).

The histogram counts them in its end bins and min/max show that there are some, but only
these two counts say how many. Floats only (float16/32/64): decimals and integers hold no
infinities. The state is the two counts, exact and merged by addition, so partitions add
up to the table exactly as one pass over all rows would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine import arrowcompute
from engine import types as mt
from engine.measures.base import Measure


@dataclass(frozen=True)
class InfinityCounts:
    pos: int = 0
    neg: int = 0


class Infinities(Measure[InfinityCounts]):
    name = "infinities"
    columns = (pa.field("posinf_count", pa.int64()), pa.field("neginf_count", pa.int64()))
    state_fields = (pa.field("pos", pa.int64()), pa.field("neg", pa.int64()))

    @staticmethod
    def applies_to(type_: pa.DataType) -> bool:
        return mt.is_floating(type_)

    def zero(self) -> InfinityCounts:
        return InfinityCounts()

    def update(self, state: InfinityCounts, batch: pa.Array) -> InfinityCounts:
        x = arrowcompute.cast(batch, pa.float64(), safe=False).to_numpy(zero_copy_only=False)  # nulls: NaN
        return InfinityCounts(state.pos + int(np.isposinf(x).sum()), state.neg + int(np.isneginf(x).sum()))

    def merge(self, a: InfinityCounts, b: InfinityCounts) -> InfinityCounts:
        return InfinityCounts(a.pos + b.pos, a.neg + b.neg)

    def finalize(self, state: InfinityCounts) -> dict[str, Any]:
        return {"posinf_count": state.pos, "neginf_count": state.neg}

    def encode(self, state: InfinityCounts) -> dict[str, Any]:
        return {"pos": state.pos, "neg": state.neg}

    def decode(self, fields: Mapping[str, Any]) -> InfinityCounts:
        if fields["pos"] is None or fields["neg"] is None:
            raise ValueError("infinity counts missing")
        return InfinityCounts(fields["pos"], fields["neg"])

    def from_statistics(self, row: Mapping[str, Any]) -> InfinityCounts | None:
        """The stored counts; None for a row written before they were (no such columns)."""
        pos, neg = row.get("posinf_count"), row.get("neginf_count")
        if pos is None or neg is None:
            return None
        return InfinityCounts(pos, neg)


MEASURE = Infinities
