"""Values for people: counts, floats, dates and shares as text, documents as JSON.

Pure functions shared by everything that shows statistics (the CLI's text and JSON
output, the Flight CLI, the web previews); no terminal or HTML here.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from engine.jsontypes import JSON

BAR_WIDTH = 40
_EIGHTHS = " ▏▎▍▌▋▊▉"  # 0/8 .. 7/8 of a cell
_FULL = "█"
MAX_CELL = 40  # longest value shown in a table cell before it is cut with "…"

SKETCH_STATISTICS = ("theta_sketch", "kll_sketch")


class Exact(str):
    """A date, time, timestamp or duration Python's ``datetime`` cannot hold exactly (nanoseconds;
    years outside 1..9999; durations beyond 999,999,999 days), built by engine/pyvalues.py.

    The str itself is the JSON form (ISO 8601 as ``isoformat()`` writes it, with up to nine
    fraction digits; beyond Python's years the text form of docs/VALUE_FORMS.md); ``text`` is
    the form for people (``fmt_value``: a space for the ``T``, the offset as ``fmt_datetime``
    writes it). Both are lossless.
    """

    text: str

    def __new__(cls, json_form: str, text: str | None = None) -> Exact:
        self = super().__new__(cls, json_form)
        self.text = json_form if text is None else text
        return self

    def __reduce__(self) -> tuple[type[Exact], tuple[str, str]]:
        return Exact, (str(self), self.text)

    def __deepcopy__(self, memo: dict[int, Any]) -> Exact:
        return self


# ============================================================== JSON
def to_jsonable(value: object) -> Any:  # Any: its callers read the document (JSON, dicts of lists of ...)
    """``value`` with everything JSON cannot hold as a number turned into a string (bytes: their length)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return _json_default(value)


def _json_default(value: object) -> JSON:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return to_jsonable(item())
    return str(value)


def dumps(document: object) -> str:
    return json.dumps(to_jsonable(document), indent=2, ensure_ascii=False, default=_json_default)


# ============================================================== value formatting
def fmt_count(n: int | None) -> str:
    return "" if n is None else f"{n:,}"


def fmt_float(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    a = abs(x)
    if a != 0 and (a >= 1e15 or a < 1e-4):
        return f"{x:.4g}"
    if a >= 1e6:
        return f"{x:,.0f}"
    if a >= 1e4:
        return f"{x:,.1f}"
    return f"{x:.6g}"


def fmt_share(share: float | None) -> str:
    if share is None:
        return ""
    if share >= 0.001 or share == 0:
        return f"{share:.1%}"
    return f"{share:.3%}" if share >= 0.00001 else "<0.001%"


def fmt_datetime(value: dt.datetime, seconds_only: bool = True) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    nanosecond = getattr(value, "nanosecond", 0)  # a pandas Timestamp (a datetime with nanoseconds)
    if not seconds_only and nanosecond:
        text += f".{value.microsecond:06d}{nanosecond:03d}"
    elif not seconds_only and value.microsecond:
        text += f".{value.microsecond:06d}"
    if value.tzinfo is not None:
        offset = value.utcoffset()
        text += "Z" if offset == dt.timedelta(0) else value.strftime("%z")
    return text


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def partitions_text(doc: dict[str, Any]) -> str:
    """``12 (9 inherited, 3 recomputed; 2 re-binned)``: how the job got each partition's statistics."""
    n = fmt_count(doc["partitions"])
    inherited, rebinned = doc.get("inherited") or 0, doc.get("rebinned") or 0
    if not inherited:
        return n
    text = f"{n} ({inherited:,} inherited, {doc.get('recomputed') or 0:,} recomputed"
    if doc.get("carried_over"):  # nothing changed: the table level too is the earlier job's
        return text + f"; table unchanged, its statistics carried over from job {doc['carried_over']})"
    if rebinned:
        text += f"; {rebinned:,} re-binned"
    segments = doc.get("frequency_segments") or 1
    if segments > 1 and doc.get("recomputed"):  # an append: only the new values were reduced
        text += f"; appended: table frequencies in {segments} segments"
    return text + ")"


def fmt_value(value: object) -> str:
    """A column value for people (floats rounded; dates, times and timestamps exact)."""
    if value is None:
        return ""
    if isinstance(value, Exact):
        return value.text
    if isinstance(value, (str, bytes, bytearray)) and len(value) == 0:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return fmt_float(value)
    if isinstance(value, dt.datetime):
        return fmt_datetime(value, seconds_only=False)
    if isinstance(value, (dt.date, dt.time, Decimal, int)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex() if len(value) <= 16 else value[:16].hex() + "…"
    return str(value)


def fmt_edge(value: object, width: float | None) -> str:
    """A histogram edge, with as many decimals as the bucket width calls for."""
    if isinstance(value, float) and math.isfinite(value) and width and width > 0 and math.isfinite(width):
        decimals = min(8, max(0, 4 - math.floor(math.log10(width))))
        return f"{value:,.{decimals}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return fmt_value(value)


def cut(text: str, limit: int = MAX_CELL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bar(count: int, largest: int, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of ``count / largest`` of ``width`` cells, in eighths; never empty for count > 0."""
    if largest <= 0 or count <= 0:
        return ""
    eighths = max(1, round(count / largest * width * 8))
    full, rest = divmod(eighths, 8)
    return _FULL * full + (_EIGHTHS[rest] if rest else "")


def regroup(buckets: Sequence[dict[str, Any]], shown: int) -> list[dict[str, Any]]:
    """Consecutive bins summed into at most ``shown`` display buckets of (nearly) equal bin counts.

    Each bucket keeps the lower edge of its first bin and the upper edge of its last.
    """
    n = len(buckets)
    if shown <= 0 or n <= shown:
        return [dict(b) for b in buckets]
    out = []
    for i in range(shown):
        start, stop = i * n // shown, (i + 1) * n // shown
        group = buckets[start:stop]
        out.append({"lower": group[0]["lower"], "upper": group[-1]["upper"], "count": sum(b["count"] for b in group)})
    return out


def bucket_width(bucket: dict[str, Any]) -> float | None:
    lo, hi = bucket.get("lower"), bucket.get("upper")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and not isinstance(lo, bool):
        return float(hi) - float(lo)
    return None
