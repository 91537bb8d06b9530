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
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2

from engine.display import fmt_count
from engine.ui import viewmodel as vm

APP, REPORT, NOTEBOOK = "app", "report", "notebook"


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
    return env


def card_url(p: vm.TablePage, column: str) -> str:
    """The app's URL of one full card of the page (what a lazy card loads)."""
    params: dict[str, Any] = {"column": column, "bars": p.bars, "top": p.top}
    if p.partition is not None:
        params["partition"] = p.partition
    if p.at is not None:
        params["at"] = p.at
    return "/table/" + quote(p.table, safe="") + "/card?" + urlencode(params)


def table_url(p: vm.TablePage, keep: bool = True, **changes: Any) -> str:
    """The app's URL of a table page: its path, and (``keep``) the page's settings with ``changes``."""
    path = "/table/" + quote(p.table, safe="")
    if not keep:
        return path
    params = {"q": p.query, "partition": p.partition, "at": p.at, "bars": p.bars, "page": p.page}
    params.update(changes)
    defaults = {"q": "", "partition": None, "at": None, "bars": vm.DEFAULT_BARS, "page": 1}
    query = {k: v for k, v in params.items() if v is not None and v != defaults[k]}
    return path + ("?" + urlencode(query) if query else "")


@functools.cache
def asset(name: str) -> str:
    """A static file's text (packaged with the code: pyproject's package-data)."""
    return resources.files("engine.ui").joinpath("static", name).read_text(encoding="utf-8")


def _render(template: str, mode: str, **context: Any) -> str:
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


def jinja2_markup(text: str) -> Any:
    from markupsafe import Markup

    return Markup(text)  # our own packaged CSS/script, never user input


# ============================================================== pages
def tables_page(summaries: list[vm.TableSummary], store: str) -> str:
    return _render("tables.html", APP, tables=summaries, store=store)


def table_page(page: vm.TablePage, mode: str = APP) -> str:
    return _render("table.html", mode, p=page)


def card(card: vm.ColumnCard, page: vm.TablePage | None = None, mode: str = APP) -> str:
    """One card as an HTML fragment (the app's card endpoint)."""
    return _render("card.html", mode, c=card, p=page)


def histogram(card: vm.ColumnCard, page: vm.TablePage | None = None, mode: str = APP) -> str:
    """A card's histogram figure alone (the app's zoom endpoint)."""
    return _render("histogram.html", mode, c=card, p=page)


def error_page(status: int, title: str, message: str) -> str:
    return _render("error.html", APP, status=status, title=title, message=message)


def report(page: vm.TablePage) -> str:
    """The static report: one self-contained HTML document."""
    return table_page(page, REPORT)


def diff_report(doc: dict[str, Any]) -> str:
    """``metastore diff --html``: the diff document (``TableDiff.as_dict``) as one self-contained
    HTML page (docs/DIFF.md)."""
    from engine.display import fmt_value

    def shown(v: Any) -> str:
        return "" if v is None else (fmt_count(v) if isinstance(v, int) and not isinstance(v, bool) else fmt_value(v))

    def change(a: Any, b: Any) -> str:
        sa, sb = shown(a), shown(b)
        return sa if sa == sb else f"{sa or '—'} → {sb or '—'}"

    def side(s: dict[str, Any]) -> str:
        where = f"partition {s['partition']}" if s["partition"] else "table"
        txn = f"transaction {s['txn_id']}" if s["txn_id"] is not None else f"job {s['job_id']}"
        return f"{where}, {txn}"

    return _render("diff.html", REPORT, d=doc, change=change, side=side)


def notebook_card(card: vm.ColumnCard) -> str:
    return _render("notebook.html", NOTEBOOK, cards=[card], p=None)


def notebook_page(page: vm.TablePage) -> str:
    return _render("notebook.html", NOTEBOOK, cards=list(page.cards), p=page)
