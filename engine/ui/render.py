"""HTML of the preview pages: Jinja2 templates (autoescaped), one CSS file and one script.

Three modes of the same templates:

- ``app``: pages of the web app; CSS and script linked from ``/static`` (the
  app's Content-Security-Policy allows no inline code), forms and zoom requests
  go back to the app;
- ``report``: one self-contained file (``metastore preview --html``): CSS and
  script inline, every card fully rendered, a Content-Security-Policy that
  forbids any network access;
- ``notebook``: a fragment for Jupyter (``_repr_html_``) with the CSS inline;
  every rule is scoped under ``.ms`` so the notebook's own styles are untouched.

Everything a user or a file can control (table, column and partition names,
string values) goes through autoescaping; nothing is marked safe but our own
CSS, script and the JSON of ``tojson`` (which escapes ``<``, ``>`` and ``&``).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import jinja2

from engine.display import fmt_count, fmt_value
from engine.ui import charts
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from markupsafe import Markup

    from engine.ui.diffview import DiffView
    from engine.ui.overview import Overview
    from engine.ui.trends import History

APP, REPORT, NOTEBOOK = "app", "report", "notebook"
#: the app's icon (served at /favicon.ico): bars on a dark square
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#24292f"/><rect x='
    '"3" y="8" width="2" height="5" fill="#4c78a8"/><rect x="7" y="4" width="2" height="9" fill="#4c78a8"/><rect x="11" y="6" width="2" height="7" fill="#f58518"/></svg>'
)


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("engine.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count"] = lambda n: "—" if n is None else fmt_count(n)
    env.globals["BAR_CHOICES"] = vm.BAR_CHOICES
    env.globals["CHART_WIDTH"] = vm.CHART_WIDTH
    env.globals["CHART_HEIGHT"] = vm.CHART_HEIGHT
    env.globals["TOP_BAR_WIDTH"] = vm.TOP_BAR_WIDTH
    env.globals["DEFAULT_BARS"] = vm.DEFAULT_BARS
    env.globals["table_url"] = table_url
    env.globals["card_url"] = card_url
    env.globals["column_url"] = column_url
    env.globals["history_url"] = history_url
    env.globals["diff_url"] = diff_url
    env.globals["overview_url"] = overview_url
    env.filters["abbr"] = abbreviated
    env.filters["fit"] = fit
    env.filters["value"] = vm.show
    env.globals["quantiles"] = lambda stats: charts.quantiles(stats, vm.show)
    return env


#: a count of a million or more written with thousands separators ("688,123,456")
BIG_COUNT = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3}){2,}(?![\d.,]*\d)")


def short_count(n: int) -> str:
    """``n`` in at most 4 significant characters and a suffix: 1.2K, 688M, 3.4B (exact below 10,000)."""
    a = abs(n)
    if a < 10_000:
        return f"{n:,}"
    units = ((10**3, "K"), (10**6, "M"), (10**9, "B"), (10**12, "T"))
    for i, (size, suffix) in enumerate(units):
        x = n / size
        if abs(x) < 999.5 or i == len(units) - 1:
            text = f"{x:.1f}" if abs(x) < 99.95 else f"{x:.0f}"
            return text.removesuffix(".0") + suffix
    return f"{n:,}"


def abbreviated(n: int | None) -> Markup | str:
    """A count for a narrow cell: abbreviated (``1.2M``) with the exact value in its tooltip."""
    from markupsafe import Markup, escape

    if n is None:
        return "—"
    exact = fmt_count(n)
    short = short_count(n)
    if short == exact:
        return exact
    return Markup('<span class="ms-abbr" title="{}">{}</span>').format(escape(exact), escape(short))


def fit(text: str) -> Markup | str:
    """A statistic as shown in a card: counts of a million or more abbreviated, the exact text in
    the tooltip (no number is ever cut with an ellipsis)."""
    from markupsafe import Markup, escape

    if not BIG_COUNT.search(text):
        return text
    short = BIG_COUNT.sub(lambda m: short_count(int(m.group(0).replace(",", ""))), text)
    return Markup('<span class="ms-abbr" title="{}">{}</span>').format(escape(text), escape(short))


def _state_params(partition: str | None, at: int | None) -> dict[str, Any]:
    return {k: v for k, v in (("partition", partition), ("at", at)) if v is not None}


def column_url(table: str, column: str, partition: str | None = None, at: int | None = None) -> str:
    """The app's page of one column (its card, styled, at its own URL)."""
    return "/table/" + quote(table, safe="") + "/column?" + urlencode({"column": column, **_state_params(partition, at)})


def history_url(table: str, column: str | None = None) -> str:
    """The app's history page of a table (or of one of its columns)."""
    return "/table/" + quote(table, safe="") + "/history" + ("?" + urlencode({"column": column}) if column is not None else "")


def diff_url(table: str, from_txn: int | None = None, to_txn: int | None = None) -> str:
    """The app's diff page between two states of a table (defaults: the newest and the one before)."""
    q = {k: v for k, v in (("from", from_txn), ("to", to_txn)) if v is not None}
    return "/table/" + quote(table, safe="") + "/diff" + ("?" + urlencode(q) if q else "")


def card_url(p: vm.TablePage, column: str) -> str:
    """The app's URL of one full card of the page (what a lazy card loads)."""
    params: dict[str, Any] = {"column": column, "bars": p.bars, "top": p.top}
    if p.partition is not None:
        params["partition"] = p.partition
    if p.at is not None:
        params["at"] = p.at
    return "/table/" + quote(p.table, safe="") + "/card?" + urlencode(params)


def table_url(p: vm.TablePage, keep: bool = True, **changes: object) -> str:
    """The app's URL of a table page: its path, and (``keep``) the page's settings with ``changes``."""
    path = "/table/" + quote(p.table, safe="")
    if not keep:
        return path
    params: dict[str, object] = {"q": p.query, "partition": p.partition, "at": p.at, "bars": p.bars, "page": p.page}
    params.update(changes)
    defaults = {"q": "", "partition": None, "at": None, "bars": vm.DEFAULT_BARS, "page": 1}
    query = {k: v for k, v in params.items() if v is not None and v != defaults[k]}
    return path + ("?" + urlencode(query) if query else "")


@functools.cache
def asset(name: str) -> str:
    """A static file's text (packaged with the code: pyproject's package-data)."""
    return resources.files("engine.ui").joinpath("static", name).read_text(encoding="utf-8")


def _render(template: str, mode: str, **context: object) -> str:
    inline = mode != APP
    return (
        environment()
        .get_template(template)
        .render(
            mode=mode,
            css=jinja2_markup(asset("ui.css")) if inline else None,
            script=jinja2_markup(asset("ui.js")) if mode == REPORT else None,
            **context,
        )
    )


def jinja2_markup(text: str) -> Markup:
    from markupsafe import Markup

    return Markup(text)  # our own packaged CSS/script, never user input


# ============================================================== pages
def tables_page(summaries: list[vm.TableSummary], store: str) -> str:
    return _render("tables.html", APP, tables=summaries, store=store)


def table_page(page: vm.TablePage, mode: str = APP, overview: Overview | None = None) -> str:
    """A table's page; ``overview`` (engine/ui/overview.py ``Overview``): its one-row-per-column table first."""
    return _render("table.html", mode, p=page, overview=overview)


def overview_rows(o: Overview, table: str, partition: str | None, at: int | None) -> str:
    """Rows of the overview (engine/ui/overview.py ``Overview``) as a ``<tbody>`` fragment (the app's overview endpoint)."""
    return _render("overview_rows.html", APP, o=o, table=table, partition=partition, at=at)


def overview_url(p: vm.TablePage, offset: int) -> str:
    """The app's URL of the overview rows of a page's columns from ``offset`` on."""
    params: dict[str, Any] = {"q": p.query, "offset": offset, **_state_params(p.partition, p.at)}
    return "/table/" + quote(p.table, safe="") + "/overview?" + urlencode({k: v for k, v in params.items() if v != ""})


def card(card: vm.ColumnCard, page: vm.TablePage | None = None, mode: str = APP) -> str:
    """One card as an HTML fragment (the app's card endpoint)."""
    return _render("card.html", mode, c=card, p=page)


def histogram(card: vm.ColumnCard, page: vm.TablePage | None = None, mode: str = APP) -> str:
    """A card's histogram figure alone (the app's zoom endpoint)."""
    return _render("histogram.html", mode, c=card, p=page)


def column_page(card: vm.ColumnCard, at: int | None) -> str:
    """A column's own page: its card with the links to its history."""
    return _render("column.html", APP, c=card, at=at)


def history_page(h: History) -> str:
    """The history page (engine/ui/trends.py ``History``)."""
    return _render("history.html", APP, h=h)


def diff_page(view: DiffView) -> str:
    """The app's diff page (engine/ui/diffview.py ``DiffView``)."""
    return _render("diff.html", APP, d=view.doc, v=view, change=_change, side=_side)


def error_page(status: int, title: str, message: str) -> str:
    return _render("error.html", APP, status=status, title=title, message=message)


def report(page: vm.TablePage) -> str:
    """The static report: one self-contained HTML document."""
    return table_page(page, REPORT)


def diff_report(doc: dict[str, Any]) -> str:
    """``metastore diff --html``: the diff document (``TableDiff.as_dict``) as one self-contained
    HTML page (docs/DIFF.md)."""
    return _render("diff.html", REPORT, d=doc, v=None, change=_change, side=_side)


def _shown(v: object) -> str:
    return "" if v is None else (fmt_count(v) if isinstance(v, int) and not isinstance(v, bool) else fmt_value(v))


def _change(a: object, b: object) -> str:
    sa, sb = _shown(a), _shown(b)
    return sa if sa == sb else f"{sa or '—'} → {sb or '—'}"


def _side(s: dict[str, Any]) -> str:
    where = f"partition {s['partition']}" if s["partition"] else "table"
    txn = f"transaction {s['txn_id']}" if s["txn_id"] is not None else f"job {s['job_id']}"
    return f"{where}, {txn}"


def notebook_card(card: vm.ColumnCard) -> str:
    return _render("notebook.html", NOTEBOOK, cards=[card], p=None)


def notebook_page(page: vm.TablePage) -> str:
    return _render("notebook.html", NOTEBOOK, cards=list(page.cards), p=page)
