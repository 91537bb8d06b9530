"""The values a histogram's bins do not show as such, as bars of their own: NaN (never in a bin:
``nan_count``) and the infinities, which the statistics count in the end bins (-inf in the first,
+inf in the last: docs/FORMAT.md) and, in files written since they were stored, apart as well
(``neginf_count``, ``posinf_count``: engine/measures/infinities.py): a bar then shows that exact
count. A file written before stores no count of its own; what it stores bounds them:

- at least one when the column's min is -inf (max +inf), at most the end bin's count;
- with exact percentiles (the value at position ⌊p·(n−1)⌋ of the n sorted non-NaN values): a
  percentile at -inf puts every position up to it at -inf (at least ⌊p·(n−1)⌋ + 1 of them), a
  finite one none from it on (at most ⌊p·(n−1)⌋); the same from the top for +inf.

A bar shows the lower bound filled and the upper bound outlined; equal bounds: an exact count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.measures.base import nonnull
from engine.stats.valuecounts import PERCENTILES, percentile_column


@dataclass(frozen=True)
class Special:
    kind: str  # "-inf", "+inf"
    low: int  # at least this many
    high: int  # at most this many (== low: exact)
    why: str  # where the count or its bounds come from

    @property
    def exact(self) -> bool:
        return self.low == self.high


def _position(p: float, n: int) -> int:
    """⌊p·(n−1)⌋ for a percentile p in hundredths, in integers (no float rounding)."""
    return round(p * 100) * (n - 1) // 100


def infinities(stats: Mapping[str, Any] | None, first_bin: int | None, last_bin: int | None) -> tuple[Special, ...]:
    """The -inf and +inf bars of a column's statistics row (decoded values), given the counts of the
    first and last stored bins (None when the bins shown do not reach that end: a zoom)."""
    if not stats:
        return ()
    n = nonnull(stats)
    exact = stats.get("percentiles_exact") is True and n > 0
    out = []
    for kind, end, bin_count in (("-inf", stats.get("min"), first_bin), ("+inf", stats.get("max"), last_bin)):
        key = "neginf_count" if kind == "-inf" else "posinf_count"
        stored = stats.get(key)
        if isinstance(stored, int):  # counted apart (engine/measures/infinities.py)
            if stored > 0:
                out.append(Special(kind, stored, stored, f"counted by the statistics: {key}"))
            continue
        if not (isinstance(end, float) and math.isinf(end) and (end < 0) == (kind == "-inf")):
            continue
        low, high = 1, bin_count if bin_count is not None else n
        why = [
            f"not counted apart by the statistics: the column's {'min' if kind == '-inf' else 'max'} is {kind}",
            f"counted in the {'first' if kind == '-inf' else 'last'} bin",
        ]
        if exact:
            for p in PERCENTILES:
                v = stats.get(percentile_column(p))
                if not isinstance(v, float) or math.isnan(v):
                    continue
                pos = _position(p, n)
                below, above = pos + 1, n - pos  # positions up to p, from p on
                if kind == "-inf":
                    low, high = (max(low, below), high) if v == -math.inf else (low, min(high, pos))
                else:
                    low, high = (max(low, above), high) if v == math.inf else (low, min(high, above - 1))
            why.append("the exact percentiles")
        out.append(Special(kind, low, max(low, high), ", ".join(why)))
    return tuple(out)
