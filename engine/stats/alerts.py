"""Alerts about a column, from its stored statistics only (pure: no data read).

``column_alerts(facts, thresholds)`` checks one column's stored numbers against
``AlertThresholds`` (defaults below, docs/DIFF.md "Alerts"); ``table_alerts`` the table's
staleness. Each alert is a kind and a one-line detail:

| kind | when |
|---|---|
| ``all_null`` | every row is null (rows > 0) |
| ``constant`` | exactly one distinct value (and not all null) |
| ``unique`` | every non-null value distinct (exact distinct count, more than one value) |
| ``high_nulls`` | nulls / rows >= ``high_nulls`` (not all null) |
| ``nan`` | NaN values (floats) |
| ``infinite`` | min is -inf or max is +inf (floats) |
| ``skewed`` | numeric, \\|3 (mean - median) / stddev\\| >= ``skewed`` (Pearson's median skewness, in [-3, 3]) |
| ``high_cardinality`` | a string or binary column with >= ``high_cardinality`` distinct values, not unique |
| ``imbalanced`` | a discrete column whose most frequent value holds >= ``imbalanced`` of the non-null rows, not constant |
| ``stale`` | the table committed >= ``stale_snapshots`` snapshots since the analyzed one, or the state is older than ``stale_age_s`` |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

from engine.exceptions import InvalidArgumentError


@dataclass(frozen=True)
class AlertThresholds:
    """When an alert fires (settable: ``metastore show --alert-threshold NAME=VALUE``)."""

    high_nulls: float = 0.5  # share of null rows
    skewed: float = 0.5  # |Pearson's median skewness|
    high_cardinality: int = 50  # distinct values of a string/binary column
    imbalanced: float = 0.8  # share of the most frequent value among non-null rows
    stale_snapshots: int = 1  # table snapshots committed since the analyzed one
    stale_age_s: float | None = None  # age of the state in seconds (None: not checked)

    def with_settings(self, settings: dict[str, str]) -> AlertThresholds:
        """A copy with ``name -> text`` settings applied; unknown names or bad numbers are errors."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}  # replace() types each keyword by its field
        for name, text in settings.items():
            if name not in known:
                raise InvalidArgumentError(f"unknown alert threshold {name!r}: expected one of {', '.join(known)}")
            integer = name in ("high_cardinality", "stale_snapshots")
            try:
                value: int | float = int(text) if integer else float(text)
            except ValueError:
                raise InvalidArgumentError(f"alert threshold {name}: {text!r} is not {'an integer' if integer else 'a number'}") from None
            if (isinstance(value, float) and not math.isfinite(value)) or value < 0:
                raise InvalidArgumentError(f"alert threshold {name}: {text!r} must be a finite number >= 0")
            changes[name] = value
        return replace(self, **changes)


@dataclass(frozen=True)
class Alert:
    kind: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class ColumnFacts:
    """The stored numbers the alerts look at (None: not stored for this column)."""

    rows: int
    nulls: int
    nans: int | None = None
    distinct: int | None = None
    distinct_exact: bool = False
    minimum: Any = None
    maximum: Any = None
    mean: float | None = None
    stddev: float | None = None
    median: float | None = None  # p50 as a number (numeric columns)
    top_count: int | None = None  # frequency of the most frequent value (discrete columns)
    categorical: bool = False  # string or binary
    unsupported: bool = False


def _share(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,} ({part / whole:.1%})"


def column_alerts(f: ColumnFacts, t: AlertThresholds = AlertThresholds()) -> list[Alert]:
    """The alerts of one column, in the order of the table in the module docstring."""
    out: list[Alert] = []
    if f.rows <= 0 or f.unsupported:
        return out
    values = f.rows - f.nulls - (f.nans or 0)  # non-null, non-NaN
    if f.nulls == f.rows:
        return [Alert("all_null", f"all {f.rows:,} rows are null")]
    if f.distinct == 1:
        out.append(Alert("constant", f"one distinct value ({f.minimum!r})" if f.minimum is not None else "one distinct value"))
    unique = f.distinct_exact and f.distinct is not None and values > 1 and f.distinct == values
    if unique:
        out.append(Alert("unique", f"all {values:,} non-null values are distinct"))
    if f.nulls / f.rows >= t.high_nulls and f.nulls:
        out.append(Alert("high_nulls", f"{_share(f.nulls, f.rows)} rows are null (threshold {t.high_nulls:.0%})"))
    if f.nans:
        out.append(Alert("nan", f"{_share(f.nans, f.rows)} values are NaN"))
    infinite = [s for s, v in (("min is -inf", f.minimum), ("max is +inf", f.maximum)) if isinstance(v, float) and math.isinf(v)]
    if infinite:
        out.append(Alert("infinite", ", ".join(infinite)))
    skew = pearson_skew(f.mean, f.median, f.stddev)
    if skew is not None and abs(skew) >= t.skewed and f.distinct != 1:
        side = "right" if skew > 0 else "left"
        out.append(Alert("skewed", f"skewed to the {side}: 3 (mean - median) / stddev = {skew:.2f} (threshold {t.skewed:g})"))
    if f.categorical and f.distinct is not None and f.distinct >= t.high_cardinality and not unique:
        approx = "" if f.distinct_exact else "~"
        out.append(Alert("high_cardinality", f"{approx}{f.distinct:,} distinct values (threshold {t.high_cardinality:,})"))
    non_null = f.rows - f.nulls
    if f.top_count is not None and non_null > 0 and f.distinct is not None and f.distinct > 1 and f.top_count / non_null >= t.imbalanced:
        out.append(Alert("imbalanced", f"the most frequent value holds {_share(f.top_count, non_null)} non-null rows (threshold {t.imbalanced:.0%})"))
    return out


def pearson_skew(mean: float | None, median: float | None, stddev: float | None) -> float | None:
    """3 (mean - median) / stddev, or None when a number is missing or stddev is 0 or not finite."""
    if mean is None or median is None or stddev is None:
        return None
    if not (math.isfinite(mean) and math.isfinite(median) and math.isfinite(stddev)) or stddev <= 0:
        return None
    return 3.0 * (mean - median) / stddev


def table_alerts(stale_by: int | None, age_s: float | None, t: AlertThresholds = AlertThresholds()) -> list[Alert]:
    """The table-level alerts: ``stale`` by the source's snapshots or by the state's age."""
    reasons = []
    if stale_by is not None and t.stale_snapshots > 0 and stale_by >= t.stale_snapshots:
        reasons.append(f"the table committed {stale_by:,} snapshot{'s' if stale_by != 1 else ''} since the analyzed one")
    if age_s is not None and t.stale_age_s is not None and age_s >= t.stale_age_s:
        reasons.append(f"the statistics are {age_s / 86400:.1f} days old (threshold {t.stale_age_s / 86400:.1f})")
    return [Alert("stale", "; ".join(reasons))] if reasons else []
