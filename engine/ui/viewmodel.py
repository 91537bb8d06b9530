"""The data of the preview pages, built from the lookups (engine/lookup/) only.

It reads through ``TableStatistics`` (partial lookups: the statistics row groups
of a page of columns, a column's head row group of frequencies, the histogram
row groups of a bin range) and returns frozen values; it knows no HTML. The web
app, the static report and the notebook view render these values with the same
templates (engine/ui/render.py), and the JSON endpoints serve them as they are
(``to_json``), so every view shows the same numbers.

A part of a card that cannot be read (a damaged or missing statistics file)
becomes a ``CardError`` naming the file, instead of failing the page.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from engine import measures
from engine import values as value_forms
from engine.columns import display_name, display_path, leaf_columns
from engine.disclosure import store_label, store_paths
from engine.display import fmt_count, fmt_edge, fmt_share, fmt_value, to_jsonable
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError
from engine.files import layout
from engine.pyvalues import python_values
from engine.stats.histograms import HistogramSpec, to_domain
from engine.stats.valuecounts import PERCENTILES, percentile_column
from engine.ui import specials, ticks

if TYPE_CHECKING:
    from engine.lookup import PartitionInfo, TableStatistics
    from engine.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE_SIZE = 20  # column cards per page of a table
EAGER_CARDS = 6  # cards of an app page drawn at once; the others' histograms and top values load when scrolled to
BAR_CHOICES = (10, 25, 50, 100, 250)  # display bars a histogram can be drawn with
DEFAULT_BARS = 50
TOP_K = 10
CHART_WIDTH, CHART_HEIGHT = 360.0, 120.0  # the histogram's SVG viewBox
TOP_BAR_WIDTH = 120.0  # the top-values bars' SVG width
MAX_TEXT = 60  # longest value shown before it is cut with "…"


# ============================================================== values
@dataclass(frozen=True)
class Stat:
    """One row of a card's statistics table: the state shown and, with a partition, the partition's."""

    key: str
    label: str
    value: str
    other: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Bar:
    """One display bar: stored bins ``[start, stop)`` summed; geometry in the chart's viewBox."""

    start: int
    stop: int
    lower: str
    upper: str
    count: int
    x: float
    width: float
    height: float
    other: int | None = None
    other_height: float | None = None


@dataclass(frozen=True)
class Histogram:
    bins: int  # stored bins of the column
    start: int  # the bin range shown: [start, stop)
    stop: int
    bars: tuple[Bar, ...]
    domain: str
    counted: int
    other_counted: int | None
    lower: str
    upper: str
    upper_edges: str
    zoomed: bool
    largest: int
    requested: int  # the bars asked for (fewer when there are fewer bins)
    ticks: tuple[ticks.Placed, ...] = ()  # the value axis: round values within the data's min and max (engine/ui/ticks.py)
    axis_note: str = ""  # what the tick labels leave out (a time zone and its offset, a date)
    infinite: tuple[specials.Special, ...] = ()  # -inf and +inf: bars of their own, their counts bounded (engine/ui/specials.py)


@dataclass(frozen=True)
class TopValue:
    value: str
    count: int
    share: str
    width: float  # bar width in the top-values SVG
    other: int | None = None


@dataclass(frozen=True)
class TopValues:
    kind: str
    stored: int
    values: tuple[TopValue, ...]
    note: str | None
    largest: int


@dataclass(frozen=True)
class CardError:
    section: str  # statistics, frequencies, histogram
    file: str
    message: str


@dataclass(frozen=True)
class ColumnCard:
    """Everything a column's card shows; ``statistics`` / ``other_statistics`` are the lookups' raw values."""

    table: str
    column: str
    type: str
    partition: str | None
    statistics: dict[str, Any] | None
    other_statistics: dict[str, Any] | None
    rows: tuple[Stat, ...]
    user: tuple[Stat, ...]
    histogram: Histogram | None
    top: TopValues | None
    errors: tuple[CardError, ...]
    summary: str  # one line: distinct, nulls, range
    lazy: bool = False  # histogram and top values not read yet: the page's script loads the full card
    name: str = ""  # the column as people read it (engine/columns.py display_name: "qty.units", "s > x"); `column` is the stored name
    path: tuple[str, ...] = ()  # its path: the top-level column, then struct fields
    alerts: tuple[Any, ...] = ()  # the table level's engine.stats.alerts.Alert (kind, detail), docs/DIFF.md


@dataclass(frozen=True)
class TableSummary:
    """A row of the table list."""

    name: str
    rows: int | None
    columns: int | None
    partitions: int | None
    last_analyzed: str | None
    snapshot: str | None
    job_id: str | None
    txn_id: int | None
    stale_by: int | None  # None: unknown (issue #14 will know)
    error: str | None = None


@dataclass(frozen=True)
class Transaction:
    txn_id: int
    committed_at: str
    job_id: str
    snapshot: str
    current: bool


@dataclass(frozen=True)
class TablePage:
    table: str
    store: str  # its label (engine.disclosure.store_label), not where it is
    rows: int
    partitions: tuple[PartitionInfo, ...]
    partition: str | None
    partition_rows: int | None
    at: int | None  # the transaction asked for (None: the current state)
    txn_id: int | None  # the transaction shown
    committed_at: str | None
    snapshot: str
    job_id: str
    stale_by: int | None
    history: tuple[Transaction, ...]
    query: str
    page: int
    pages: int
    page_size: int
    matched: int
    total_columns: int
    columns: tuple[str, ...]
    cards: tuple[ColumnCard, ...]
    bars: int
    top: int


# ============================================================== helpers
def to_json(value: object) -> Any:  # Any: a document its callers add to (JSON)
    """A view value as JSON-ready data (dataclasses as dicts, values as in ``metastore --output json``)."""
    if is_dataclass(value) and not isinstance(value, type):
        return to_jsonable({f.name: _plain(getattr(value, f.name)) for f in fields(value)})
    return to_jsonable(_plain(value))


def _plain(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def cut(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(value: object) -> str:
    """A value for people; '—' for none."""
    if value is None:
        return "—"
    if isinstance(value, (bytes, bytearray)):
        return fmt_value(bytes(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return cut(fmt_value(value))


def leaf_types(ts: TableStatistics) -> dict[str, pa.DataType]:
    """Every statistics column's Arrow type (struct leaves by their dotted names), from the manifest's schema
    (kept on the state for as long as its schema object is the same: ``refresh()`` replaces it)."""
    cached = getattr(ts, "_ui_leaf_types", None)
    if cached is None or cached[0] is not ts.schema:
        cached = (ts.schema, {leaf.name: leaf.type for leaf in leaf_columns(ts.schema)})
        ts._ui_leaf_types = cached  # type: ignore[attr-defined]  # a per-object cache of the UI on the statistics object
    return cached[1]


def column_names(ts: TableStatistics) -> list[str]:
    """The columns with statistics, in table order: the published state's list (no file read)."""
    names = [c["name"] for c in ts.state.columns]
    return names or list(leaf_types(ts))


def search(names: Sequence[str], query: str) -> list[str]:
    """Columns whose name (stored, or as people read it: ``qty.units``, ``s > x``) contains every word of ``query`` (case-insensitive)."""
    words = query.lower().split()
    if not words:
        return list(names)
    return [n for n in names if all(w in n.lower() or w in display_name(n).lower() for w in words)]


def check_column(ts: TableStatistics, column: str) -> str:
    """The stored name of ``column`` (given stored, as in the data, or in its display form ``s > x``)."""
    names = column_names(ts)
    stored = column if column in set(names) else ts.resolve_column(column)
    if stored not in set(names):
        from engine.lookup import struct_fields_hint

        raise StatisticsNotFoundError(f"table {ts.table!r} has no column {column!r}{struct_fields_hint([column], names)}")
    return stored


def check_partition(ts: TableStatistics, partition: str | None) -> None:
    if partition is None:
        return
    keys = [p.key for p in ts.partitions()]
    if partition not in keys:
        shown = ", ".join(keys[:5]) + (f", ... ({len(keys)} in all)" if len(keys) > 5 else "")
        raise StatisticsNotFoundError(f"table {ts.table!r} has no partition {partition!r}; its partitions: {shown or '(none)'}")


def stale_by(ts: TableStatistics) -> int | None:
    """How many source snapshots the shown statistics are behind the table, or None when unknown
    (a Parquet directory has no history; an unreachable table or a snapshot no longer in its
    history is unknown too): the format's history only, no data read (docs/FORMATS.md)."""
    try:
        return ts.stale_by()
    except Exception:  # noqa: BLE001 - staleness is a hint: a page never fails for it
        return None


def _guard(errors: list[CardError], section: str, file: str, fn: Callable[[], T]) -> T | None:
    """``fn()``, or None with a CardError naming ``file`` (a damaged file must not fail the page)."""
    try:
        return fn()
    except (StatisticsNotFoundError, InvalidArgumentError) as exc:
        errors.append(CardError(section, file, str(exc)))
    except Exception as exc:
        log.warning("cannot read %s of %s: %s", section, file, exc, exc_info=True)
        errors.append(CardError(section, file, f"{type(exc).__name__}: {' '.join(str(exc).split())}"))
    return None


def _file(ts: TableStatistics, name: str, partition: str | None) -> str:
    try:
        return ts.file_uri(name, partition)
    except Exception:  # noqa: BLE001
        return name


def _decode_row(row: dict[str, Any], t: pa.DataType | None) -> dict[str, Any]:
    """A statistics row with its values in the column's type (as ``TableStatistics.column_statistics``),
    the value statistics decoded in one call."""
    from engine.lookup import decode_sum

    out = dict(row)
    if out.get("column") is not None:
        out["column"] = display_name(out["column"])  # as people read it: "qty.units", "s > x"
    if t is None:
        return out
    keys = [k for k in layout.VALUE_STATISTICS if out.get(k) is not None]
    if keys:
        try:
            decoded = python_values(value_forms.decode(pa.array([out[k] for k in keys], pa.string()), t))
            out.update(zip(keys, decoded))
        except InvalidArgumentError:
            pass  # shown as stored
    if out.get("sum") is not None:
        out["sum"] = decode_sum(out["sum"], t)
    return out


# ============================================================== statistics rows
def _pct(part: int | None, whole: int | None) -> str:
    if part is None:
        return "—"
    if not whole:
        return fmt_count(part)
    return f"{fmt_count(part)} ({fmt_share(part / whole)})"


def _num(x: object) -> str:
    return show(x)


def _shown(value: Any, form: str) -> str:
    """A registered statistic's value as its ``Measure.formats`` says ("": the number form)."""
    if form == "count":
        return fmt_count(value)
    return format(value, form) if form else _num(value)


def _rows(s: dict[str, Any], o: dict[str, Any] | None) -> tuple[list[Stat], list[Stat]]:
    """The statistics rows of a card and its user-defined statistics."""
    rows: list[Stat] = []

    def add(key: str, label: str, fmt: Callable[[dict[str, Any]], str | None], note: str = "", always: bool = False) -> None:
        value = fmt(s)
        if value is None and not always:
            return
        other = fmt(o) if o is not None else None
        rows.append(Stat(key, label, value if value is not None else "—", (other if other is not None else "—") if o is not None else None, note))

    add("row_count", "rows", lambda r: fmt_count(r.get("row_count")), always=True)
    add("null_count", "nulls", lambda r: _pct(r.get("null_count"), r.get("row_count")), always=True)
    add("nan_count", "NaN", lambda r: None if r.get("nan_count") is None else _pct(r["nan_count"], r.get("row_count")))
    exact = s.get("distinct_count_exact")
    add("distinct_count", "distinct", lambda r: None if r.get("distinct_count") is None else fmt_count(r["distinct_count"]),
        note="exact" if exact else ("≈ theta sketch" if exact is False else ""))  # fmt: skip
    add("min", "min", lambda r: None if r.get("min") is None else show(r["min"]))
    add("max", "max", lambda r: None if r.get("max") is None else show(r["max"]))
    for key, label, form in measures.display():  # the registered statistics (engine/measures): mean, stddev, sum, ...
        add(key, label, lambda r: None if r.get(key) is None else _shown(r[key], form))  # add() calls it at once
    pexact = s.get("percentiles_exact")
    err = s.get("percentiles_rank_error")
    pnote = "exact" if pexact else (f"≈ KLL, rank ±{err:.2%}" if pexact is False and err is not None else ("≈" if pexact is False else ""))
    for p in PERCENTILES:
        key = percentile_column(p)
        add(key, f"p{round(p * 100)}", lambda r: None if r.get(key) is None else show(r[key]), note=pnote)
    add("unsupported", "unsupported", lambda r: r.get("unsupported") or None)
    user = []
    for key, value in s.items():
        if key in layout.BUILTIN_STATISTICS or key == "column":
            continue
        other = None if o is None else show(o.get(key))
        user.append(Stat(key, key, _num(value) if isinstance(value, float) else show(value), other))
    return rows, user


def _summary(s: dict[str, Any] | None) -> str:
    if not s:
        return ""
    parts = []
    if s.get("distinct_count") is not None:
        parts.append(f"{'' if s.get('distinct_count_exact') else '≈'}{fmt_count(s['distinct_count'])} distinct")
    if s.get("row_count"):
        parts.append(f"{fmt_share((s.get('null_count') or 0) / s['row_count'])} null")
    if s.get("min") is not None and s.get("max") is not None:
        parts.append(f"{cut(show(s['min']), 24)} … {cut(show(s['max']), 24)}")
    return " · ".join(parts)


# ============================================================== histograms
def bar_geometry(counts: Sequence[int], width: float = CHART_WIDTH, height: float = CHART_HEIGHT) -> list[tuple[float, float, float]]:
    """(x, bar width, bar height) of each count: equal-width slots, heights proportional to the
    largest count; a non-zero count is at least half a unit tall so it stays visible."""
    n = len(counts)
    if n == 0:
        return []
    largest = max(counts) or 1
    slot = width / n
    gap = slot * 0.12 if slot > 3 else 0.0
    out = []
    for i, c in enumerate(counts):
        h = height * c / largest
        if c > 0:
            h = max(h, 0.5)
        out.append((round(i * slot + gap / 2, 3), round(slot - gap, 3), round(h, 3)))
    return out


def _groups(n: int, shown: int) -> list[tuple[int, int]]:
    """Consecutive [start, stop) index ranges of (nearly) equal size, at most ``shown`` (as the CLI's regroup)."""
    if n <= shown:
        return [(i, i + 1) for i in range(n)]
    return [(i * n // shown, (i + 1) * n // shown) for i in range(shown)]


def _as_domain(value: object, t: pa.DataType) -> float | int | None:
    try:
        return to_domain(pa.scalar(value, type=t))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None


def value_axis(
    spec: HistogramSpec, t: pa.DataType | None, start: int, stop: int, firsts: Sequence[int], data_range: tuple[Any, Any] | None
) -> tuple[tuple[ticks.Placed, ...], str]:
    """The x-axis ticks of bins [start, stop) drawn as bars starting at ``firsts`` (relative bin
    indices): round values between the data's min and max (``data_range``, decoded values) or,
    without it, the shown bins' edges."""
    if t is None or stop <= start:
        return (), ""
    integer = spec.domain == "integer"
    lo: float | int = spec.lower + start * spec.width
    hi: float | int = min(spec.lower + stop * spec.width - (1 if integer else 0), spec.upper)
    if data_range is not None:
        a, b = (None if v is None else _as_domain(v, t) for v in data_range)
        lo, hi = (lo if a is None else max(lo, a)), (hi if b is None else min(hi, b))
    axis = ticks.axis(lo, hi, t)

    def fraction(v: float | int) -> float:
        if not spec.width:
            return 0.5
        return ticks.bar_fraction((v - spec.lower + (0.5 if integer else 0.0)) / spec.width - start, firsts, stop - start)

    return ticks.place(axis.ticks, fraction), axis.note


def histogram(
    ts: TableStatistics,
    column: str,
    partition: str | None = None,
    bars: int = DEFAULT_BARS,
    bins: tuple[int, int] | None = None,
    value_range: tuple[Any, Any] | None = None,
    stats: dict[str, Any] | None = None,
) -> Histogram | None:
    """The table's histogram of ``column`` drawn with at most ``bars`` bars (consecutive stored bins
    summed), over all bins or a bin range / value range (a zoom: only those row groups are read);
    with ``partition``, the partition's counts of the same bins beside them (a partition is binned
    on the table's edges). ``stats``: the column's statistics row (decoded): the value axis ends at
    its min and max when the histogram is not zoomed, and its infinities get bars of their own."""
    spec = ts.histogram_spec(column)
    if spec is None:
        return None
    t = ts.histogram(column, bins=bins, value_range=value_range)
    start = int(t["bin"][0].as_py()) if t.num_rows else 0
    stop = start + t.num_rows
    counts = t["count"].to_numpy()
    other_counts = None
    if partition is not None and t.num_rows:
        pspec = ts.histogram_spec(column, partition)
        if pspec == spec:
            other_counts = ts.histogram(column, partition, bins=(start, stop))["count"].to_numpy()
    groups = _groups(len(counts), max(1, bars))
    firsts = np.array([a for a, _ in groups], dtype=np.int64)
    lasts = np.array([b - 1 for _, b in groups], dtype=np.int64)
    summed = np.add.reduceat(counts, firsts).tolist() if groups else []
    other_summed = np.add.reduceat(other_counts, firsts).tolist() if other_counts is not None and groups else None
    # only the edges the bars show are converted to Python values
    lowers = python_values(t["lower"].take(pa.array(firsts))) if groups else []
    uppers = python_values(t["upper"].take(pa.array(lasts))) if groups else []
    geometry = bar_geometry(summed)
    largest = max(summed) if summed else 0
    out = []
    for i, ((a, b), (x, w, h)) in enumerate(zip(groups, geometry)):
        lo, hi = lowers[i], uppers[i]
        width = None
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and not isinstance(lo, bool):
            width = float(hi) - float(lo)
        oh = None
        if other_summed is not None:
            oh = round(CHART_HEIGHT * other_summed[i] / (largest or 1), 3)
        out.append(
            Bar(start + a, start + b, fmt_edge(lo, width), fmt_edge(hi, width), int(summed[i]), x, w, h,
                int(other_summed[i]) if other_summed is not None else None, oh)
        )  # fmt: skip
    integer = spec.domain == "integer"
    zoomed = (start, stop) != (0, spec.bins)
    data_range = None if zoomed or stats is None else (stats.get("min"), stats.get("max"))
    axis, note = value_axis(spec, leaf_types(ts).get(column), start, stop, firsts.tolist(), data_range)
    first_bin = int(counts[0]) if start == 0 and len(counts) else None
    last_bin = int(counts[-1]) if stop == spec.bins and len(counts) else None
    return Histogram(
        bins=spec.bins,
        start=start,
        stop=stop,
        bars=tuple(out),
        domain=spec.domain,
        counted=int(counts.sum()),
        other_counted=int(other_counts.sum()) if other_counts is not None else None,
        lower=out[0].lower if out else "",
        upper=out[-1].upper if out else "",
        upper_edges="inclusive" if integer else "exclusive (the last one inclusive)",
        zoomed=zoomed,
        largest=largest,
        requested=bars,
        ticks=axis,
        axis_note=note,
        infinite=specials.infinities(stats, first_bin, last_bin),
    )


# ============================================================== top values
def top_values(ts: TableStatistics, column: str, stats: dict[str, Any], k: int, partition: str | None = None) -> TopValues | None:
    """The table's k most frequent values with bars (and each one's count in ``partition``, when asked
    and stored there)."""
    if stats.get("frequencies") is None or k <= 0:
        return None
    t = ts.top_frequencies(column, k, typed=True)
    md = {key.decode(): v.decode() for key, v in (t.schema.metadata or {}).items()}
    kind, stored = md.get("kind", stats["frequencies"]), int(md.get("stored_rows", "0"))
    values = python_values(t.column("value"))
    counts = t.column("frequency").to_pylist()
    others: dict[Any, int] = {}
    if partition is not None and values:
        # the partition's own head of frequencies: its counts of the table's top values when they are among them
        pt_ = ts.top_frequencies(column, max(k * 10, 100), partition)
        texts = ts.top_frequencies(column, k).column("value").to_pylist()
        pmap = dict(zip(pt_.column("value").to_pylist(), pt_.column("frequency").to_pylist()))
        others = {i: pmap[txt] for i, txt in enumerate(texts) if txt in pmap}
    non_null = (stats.get("row_count") or 0) - (stats.get("null_count") or 0)
    largest = max(counts) if counts else 0
    out = tuple(
        TopValue(
            show(v) if v != "" else '""', c, fmt_share(c / non_null) if non_null else "",
            round(TOP_BAR_WIDTH * c / largest, 3) if largest else 0.0,
            others.get(i) if partition is not None else None,
        )
        for i, (v, c) in enumerate(zip(values, counts))
    )  # fmt: skip
    note = None
    if kind == layout.FREQ_ALL_DISTINCT:
        note = "every value occurs exactly once: no frequencies are stored"
    elif kind == layout.FREQ_DUPLICATES_ONLY:
        singles = (stats.get("distinct_count") or 0) - stored
        note = f"only values that occur more than once are stored ({stored:,}); {singles:,} other distinct values occur once"
    return TopValues(kind, stored, out, note, largest)


# ============================================================== cards
def column_cards(
    ts: TableStatistics,
    columns: Sequence[str],
    partition: str | None = None,
    bars: int = DEFAULT_BARS,
    top: int = TOP_K,
    eager: int | None = None,
) -> list[ColumnCard]:
    """The cards of ``columns``: their statistics rows in one lookup (per level), then each card's
    frequencies head and histogram; with ``eager``, only the first ``eager`` cards read those, the
    others are ``lazy`` (a client loads them one by one, through ``column_card``)."""
    types = leaf_types(ts)
    errors: list[CardError] = []
    stat_file = _file(ts, layout.STATISTICS_FILE, None)
    rows = _guard(errors, "statistics", stat_file, lambda: ts.statistics(list(columns)).to_pylist()) if columns else []
    others = None
    if partition is not None and columns:
        pfile = _file(ts, layout.STATISTICS_FILE, partition)
        others = _guard(errors, "statistics", pfile, lambda: ts.statistics(list(columns), partition).to_pylist())
    found = _guard(errors, "alerts", stat_file, lambda: ts.alerts(columns=list(columns))) if rows else None
    cards = []
    for i, column in enumerate(columns):
        s = _decode_row(rows[i], types.get(column)) if rows else None
        o = _decode_row(others[i], types.get(column)) if others else None
        lazy = eager is not None and i >= eager
        card = _card(ts, column, types.get(column), s, o, partition, bars, top, list(errors), lazy)
        cards.append(replace(card, alerts=tuple((found or {}).get(column, ()))))
    return cards


def column_card(
    ts: TableStatistics,
    column: str,
    partition: str | None = None,
    bars: int = DEFAULT_BARS,
    top: int = TOP_K,
) -> ColumnCard:
    """One column's card (unknown column or partition: StatisticsNotFoundError)."""
    column = check_column(ts, column)
    check_partition(ts, partition)
    return column_cards(ts, [column], partition, bars, top)[0]


def _card(
    ts: TableStatistics, column: str, t: pa.DataType | None, s: dict[str, Any] | None, o: dict[str, Any] | None,
    partition: str | None, bars: int, top: int, errors: list[CardError], lazy: bool = False,
) -> ColumnCard:  # fmt: skip
    type_name = (s or {}).get("type") or (str(t) if t is not None else "?")
    rows: tuple[Stat, ...] = ()
    user: tuple[Stat, ...] = ()
    hist = tops = None
    lazy = lazy and s is not None and ((s.get("frequencies") is not None and top > 0) or bool(s.get("histogram_bins")))
    if s is not None:
        r, u = _rows(s, o)
        rows, user = tuple(r), tuple(u)
    if s is not None and not lazy:
        if s.get("frequencies") is not None and top > 0:
            tops = _guard(errors, "frequencies", _file(ts, layout.FREQUENCIES_FILE, None), lambda: top_values(ts, column, s, top, partition))
        if s.get("histogram_bins"):
            hist = _guard(
                errors,
                "histogram",
                _file(ts, layout.HISTOGRAMS_FILE, None),
                lambda: histogram(ts, column, partition, bars, stats=s),
            )
    shown = display_name(column)
    return ColumnCard(
        ts.table, column, type_name, partition, s, o, rows, user, hist, tops, public_errors(ts, errors), _summary(s), lazy, shown,
        tuple(display_path(column)),
    )  # fmt: skip


def public_errors(ts: TableStatistics, errors: Sequence[CardError]) -> tuple[CardError, ...]:
    """``errors`` with the store's location taken out of their files and messages (the path
    inside the store stays: ``sales/runs/<job>/table/statistics.parquet``)."""
    public = store_paths(ts.store.root)
    return tuple(CardError(e.section, public(e.file), public(e.message)) for e in errors)


# ============================================================== pages
def table_summaries(store: Store) -> list[TableSummary]:
    """The table list: one summary per table with published statistics (a table whose
    statistics cannot be opened is listed with its error)."""
    from engine.lookup import TableStatistics

    out = []
    for name in store.tables():
        try:
            ts = TableStatistics(store, name)
        except Exception as exc:  # noqa: BLE001 - one damaged table must not hide the others
            error = store_paths(store.root)(" ".join(str(exc).split()))  # the store's location is not the client's business
            out.append(TableSummary(name, None, None, None, None, None, None, None, None, error=error))
            continue
        out.append(summary_of(ts))
    return out


def summary_of(ts: TableStatistics) -> TableSummary:
    state = ts.state
    return TableSummary(
        name=ts.table,
        rows=state.rows,
        columns=len(column_names(ts)),
        partitions=len(state.partitions),
        last_analyzed=(state.catalog.committed_at if state.catalog else None) or state.created_at,
        snapshot=ts.snapshot,
        job_id=ts.job_id,
        txn_id=state.catalog.txn_id if state.catalog else None,
        stale_by=stale_by(ts),
    )


def history(store_root: str, table: str) -> list[Transaction]:
    """The table's catalog transactions, newest first (empty for a table without a catalog)."""
    from engine.catalog import Catalog

    cat = Catalog.open(store_root, table)
    if cat.state().empty:
        return []
    head = cat.state().txn_id
    return [Transaction(i.id, i.timestamp.isoformat(timespec="seconds"), i.job_id, i.snapshot_id, i.id == head) for i in reversed(cat.history())]


def table_page(
    ts: TableStatistics,
    *,
    partition: str | None = None,
    query: str = "",
    page: int = 1,
    page_size: int = PAGE_SIZE,
    bars: int = DEFAULT_BARS,
    top: int = TOP_K,
    transactions: Sequence[Transaction] = (),
    cards: bool = True,
    eager: int | None = None,
) -> TablePage:
    """A page of a table: the columns matching ``query``, ``page_size`` at a time, and their
    cards (``cards=False``: names only; ``eager``: only the first ``eager`` cards with their
    histogram and top values, the others ``lazy``)."""
    check_partition(ts, partition)
    if page < 1:
        raise InvalidArgumentError(f"page must be >= 1, not {page}")
    names = search(column_names(ts), query)
    pages = max(1, math.ceil(len(names) / page_size)) if page_size > 0 else 1
    if page > pages:
        raise StatisticsNotFoundError(f"table {ts.table!r} has no page {page} of columns (it has {pages})")
    shown = names[(page - 1) * page_size : page * page_size] if page_size > 0 else names
    built = column_cards(ts, shown, partition, bars, top, eager) if cards else []
    position = ts.state.catalog
    parts = tuple(ts.partitions())
    return TablePage(
        table=ts.table,
        store=store_label(ts.store.root),
        rows=ts.state.rows,
        partitions=parts,
        partition=partition,
        partition_rows=next((p.rows for p in parts if p.key == partition), None),
        at=ts.at_transaction,
        txn_id=position.txn_id if position else None,
        committed_at=position.committed_at if position else None,
        snapshot=ts.snapshot,
        job_id=ts.job_id,
        stale_by=stale_by(ts),
        history=tuple(transactions),
        query=query,
        page=page,
        pages=pages,
        page_size=page_size,
        matched=len(names),
        total_columns=len(column_names(ts)),
        columns=tuple(shown),
        cards=tuple(built),
        bars=bars,
        top=top,
    )


#: a statistics row decoded to the column's type (the overview and history views read rows too)
decode_row = _decode_row
