"""One column's statistics of a subset that cuts partitions (docs/SUBSETS.md, step 4): the
whole partitions' part exactly, the cut partitions' part estimated, every estimate with the
interval the true value is guaranteed to lie in and the assumption behind it.

- null and NaN counts: 0 where the predicate rejects them on the column, else a share;
- min and max: between the predicate's range and the contributing partitions' range;
- distinct count: Cardenas' formula between the bounds the counts allow;
- sum and mean: a share of the cut partitions' sums (or the estimated bins' midpoints when
  the predicate cuts the column), bounded by the value range times the possible counts;
- max length: between the whole partitions' and the contributing partitions'.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.expressions.tree import BoundReference
from engine.measures.base import nonnull
from engine.measures.moments import decode_sum
from engine.subset import counts as cnt
from engine.subset.counts import Count
from engine.subset.distributions import SHARE, bins
from engine.subset.merge import merge_moments
from engine.subset.model import CARDENAS, INDEPENDENCE, SUBSET_SPANS_RANGE, Answer, Method
from engine.subset.predicates import pins, split_for
from engine.subset.rowcounts import RowCounts, count_answer
from engine.subset.textforms import as_number, extreme, orderable, sum_text, tighter


def estimated(column: str, t: pa.DataType, parts: dict[str, dict[str, Any]], counts: RowCounts) -> tuple[dict[str, Any], dict[str, Answer]]:
    """The statistics of ``column`` (of type ``t``) and their answers, from the stored rows
    ``parts`` of the partitions the rows can come from."""
    split = counts.split
    values: dict[str, Any] = {}
    answers: dict[str, Answer] = {}
    full = [parts[k] for k in split.partitions.all]
    rc = counts.total()
    rows_lo, rows_hi = int(rc.low if rc.low is not None else rc.value), int(rc.high if rc.high is not None else rc.value)
    pinned = pins(counts.nf, column)

    # nulls and NaN: zero when the predicate rejects them on this column; else the whole
    # partitions' exactly plus a bounded share of the others'
    for stat, rejected in (("null_count", pinned.no_nulls), ("nan_count", pinned.no_nans or not mt.is_floating(t))):
        if rejected:
            values[stat] = None if stat == "nan_count" and not mt.is_floating(t) else 0
            answers[stat] = Answer(column, stat, values[stat], Method.STORED)
            continue
        if stat == "null_count" and pinned.only_nulls:
            values[stat] = rc.value
            answers[stat] = count_answer(column, stat, rows_lo, Count(0, float(rc.value) - rows_lo, rows_hi - rows_lo))
            continue
        base = sum(r.get(stat) or 0 for r in full)
        some = [(parts[k].get(stat) or 0, counts.partition(k)) for k in split.partitions.some]
        c = Count(
            0,
            sum(x * counts.share(k) for (x, _), k in zip(some, split.partitions.some)),
            sum(min(x, pc_.high) for x, pc_ in some),
            frozenset({INDEPENDENCE}),
        )
        answers[stat] = count_answer(column, stat, base, c)
        values[stat] = answers[stat].value
    # the range of the subset's values: within the stored range of the partitions it can
    # come from, within the predicate's range on this column
    contributing = split.contributing
    lo_text = extreme([parts[k]["min"] for k in contributing], t, min)
    hi_text = extreme([parts[k]["max"] for k in contributing], t, max)
    full_lo = extreme([r["min"] for r in full], t, min)
    full_hi = extreme([r["max"] for r in full], t, max)
    if lo_text is not None and hi_text is not None and value_forms.has_text_form(t) and orderable(t):
        low_min = tighter(lo_text, pinned.lo, t, max)
        high_max = tighter(hi_text, pinned.hi, t, min)
        high_min = tighter(high_max, full_lo, t, min)
        low_max = tighter(low_min, full_hi, t, max)
        values["min"], values["max"] = low_min, high_max
        answers["min"] = Answer(column, "min", low_min, Method.ESTIMATED, low_min, high_min, SUBSET_SPANS_RANGE)
        answers["max"] = Answer(column, "max", high_max, Method.ESTIMATED, low_max, high_max, SUBSET_SPANS_RANGE)
    # distinct values: at most the values the predicate allows and the subset's non-null rows
    dist_or_none = [parts[k].get("distinct_count") for k in contributing]
    dist = [d for d in dist_or_none if d is not None]
    table_d = counts.stored.table_distinct_count(column)
    if len(dist) == len(dist_or_none) and table_d is not None:
        nonnull_hi = rows_hi - (values.get("null_count") or 0 if answers.get("null_count") and answers["null_count"].exact else 0)
        high = min(table_d, sum(dist), max(0, nonnull_hi))
        if pinned.values is not None:
            high = min(high, pinned.values)
        full_d = [r["distinct_count"] for r in full if r["row_count"]]
        low = min(max(full_d, default=0), high)
        n_all = sum(nonnull(parts[k]) for k in contributing)
        est_rows = max(0.0, rc.value - (values.get("null_count") or 0) - (values.get("nan_count") or 0))
        D = min(table_d, sum(dist))
        est = D * (1 - (1 - min(1.0, est_rows / n_all)) ** (n_all / D)) if D and n_all else 0.0
        d = int(round(min(max(est, low), high)))
        values["distinct_count"] = d
        answers["distinct_count"] = (
            Answer(column, "distinct_count", d, Method.STORED)
            if low == high
            else Answer(column, "distinct_count", d, Method.ESTIMATED, low, high, CARDENAS)
        )
    # sum and mean: the whole partitions' exactly, the others' in proportion; bounded by
    # the value range times the possible counts
    if mt.is_numeric(t):
        _estimated_moments(column, t, parts, full, values, answers, counts)
    lens_or_none = [parts[k].get("max_len") for k in contributing]
    lens = [x for x in lens_or_none if x is not None]
    if lens and len(lens) == len(lens_or_none):
        hi_len, lo_len = max(lens), max((r.get("max_len") or 0 for r in full), default=0)
        values["max_len"] = hi_len
        answers["max_len"] = Answer(
            column, "max_len", hi_len, Method.STORED if hi_len == lo_len else Method.ESTIMATED, lo_len, hi_len, SUBSET_SPANS_RANGE
        )
    values["row_count"] = rc.value
    answers["row_count"] = Answer(column, "row_count", rc.value, rc.method, rc.low, rc.high, rc.assumption)
    return values, answers


def _estimated_moments(
    column: str,
    t: pa.DataType,
    parts: dict[str, dict[str, Any]],
    full: list[dict[str, Any]],
    values: dict[str, Any],
    answers: dict[str, Answer],
    counts: RowCounts,
) -> None:
    """Sum and mean into ``values`` and ``answers``; needs the min and max answers first (their
    bounds bound the sum), and gives none without them."""
    stored = counts.stored
    exact = merge_moments(t, full) if full else None
    sum_all = decode_sum(exact["sum"], t) if exact and exact.get("sum") is not None else 0
    n_all = sum(nonnull(r) for r in full)
    est_sum: Any = sum_all
    est_n = float(n_all)
    hi_n = 0
    for k in counts.split.partitions.some:
        r = parts[k]
        if r.get("sum") is None:
            continue
        s = decode_sum(r["sum"], t)
        f = counts.share(k)
        est_sum = est_sum + (s * Decimal(repr(f)) if isinstance(s, Decimal) else s * f)
        est_n += nonnull(r) * f
        hi_n += min(nonnull(r), counts.partition(k).high)
    assumption = SHARE
    spec = stored.spec(column) if stored.histogrammed(BoundReference(column, (column,), t)) else None
    if spec is not None and spec.bins and split_for(counts.nf, column)[0] is not None:
        # the predicate cuts this column's values: their estimated bins say more than a share
        b = bins(column, spec, counts)
        mids = np.array([sum(cnt.bin_edges(spec, i)) / 2 for i in range(spec.bins)], np.float64)
        if b.estimate.sum() > 0:
            est_n = float(b.estimate.sum())
            est_sum = float((mids * b.estimate).sum())
            est_sum = Decimal(repr(est_sum)) if mt.is_decimal(t) else est_sum
            assumption = f"bin midpoints ({b.assumption})" if b.assumption else "bin midpoints"
    lo_v = as_number(answers["min"].low, t) if "min" in answers else None
    hi_v = as_number(answers["max"].high, t) if "max" in answers else None
    if lo_v is not None and hi_v is not None and all(math.isfinite(float(x)) for x in (lo_v, hi_v)):
        low = sum_all + min(0, hi_n * lo_v)
        high = sum_all + max(0, hi_n * hi_v)
        if mt.is_floating(t):
            low, high = _widen(float(low), -1), _widen(float(high), 1)
            # but not past zero when the values' sign is known: a sum of values that are
            # all >= 0 is >= 0 (a zero bound widened by the absolute term came out -1e-300)
            if float(lo_v) >= 0 and low <= 0:
                low = 0.0
            if float(hi_v) <= 0 and high >= 0:
                high = 0.0
        s_val = min(max(est_sum, low), high)
        values["sum"] = sum_text(s_val, t)
        answers["sum"] = Answer(column, "sum", values["sum"], Method.ESTIMATED, sum_text(low, t), sum_text(high, t), assumption)
        mean = float(est_sum) / est_n if est_n > 0 else None
        if mean is not None:
            mean = min(max(mean, float(lo_v)), float(hi_v))
        values["mean"] = mean
        answers["mean"] = Answer(column, "mean", mean, Method.ESTIMATED, float(lo_v), float(hi_v), assumption)


def _widen(x: float, direction: int) -> float:
    """A float bound moved outwards past the rounding of the sum that computed it (the
    caller keeps it on zero's side when the values' sign is known)."""
    return x + direction * (abs(x) * 1e-9 + 1e-300)
