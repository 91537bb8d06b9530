"""The web app's request parameters, and the views a request asks for (a table page, a card,
a zoomed histogram) read through the opened states: shared by the HTML and JSON routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.datastructures import QueryParams
from starlette.requests import Request

from engine import values
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError
from engine.ui import viewmodel as vm
from engine.ui.states import States

if TYPE_CHECKING:
    from engine.lookup import TableStatistics

MAX_PAGE_SIZE = 200
MAX_TOP = 1000


def int_param(params: QueryParams, name: str, default: int | None = None, low: int | None = None, high: int | None = None) -> int | None:
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a whole number, not {text!r}") from None
    if low is not None and value < low:
        raise InvalidArgumentError(f"{name} must be >= {low}, not {value}")
    if high is not None and value > high:
        raise InvalidArgumentError(f"{name} must be <= {high}, not {value}")
    return value


def bars_param(params: QueryParams) -> int:
    return int_param(params, "bars", vm.DEFAULT_BARS, 1, 1000) or vm.DEFAULT_BARS


def partition_param(params: QueryParams) -> str | None:
    value = params.get("partition")
    return value if value else None


def column_param(ts: TableStatistics, params: QueryParams) -> str:
    column = params.get("column")
    if column is None:
        raise InvalidArgumentError("give the column: ?column=NAME")
    return vm.check_column(ts, column)  # the stored name


def _value_range(ts: TableStatistics, column: str, params: QueryParams) -> tuple[Any, Any] | None:
    """``lo`` / ``hi`` in the column's text form (docs/VALUE_FORMS.md), decoded to its type."""
    lo, hi = params.get("lo") or None, params.get("hi") or None
    if lo is None and hi is None:
        return None
    t = vm.leaf_types(ts)[column]
    out: list[Any] = []
    for name, text in (("lo", lo), ("hi", hi)):
        if text is None:
            out.append(None)
            continue
        try:
            out.append(values.decode_scalar(text.strip(), t))  # a scalar: as_py() fails on ns and far dates
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{name}={text!r} is not a value of column {column!r} ({t}): {exc}") from None
    return out[0], out[1]


def _top(params: QueryParams) -> int:
    return int_param(params, "top", vm.TOP_K, 0, MAX_TOP) or 0


def state_of(states: States, request: Request) -> TableStatistics:
    """The state a request names: its table, at ``?at=`` (a transaction) or the current one."""
    return states.get(request.path_params["table"], int_param(request.query_params, "at", None, 1))


def page_of(states: States, request: Request, cards: bool = True) -> tuple[TableStatistics, vm.TablePage]:
    q = request.query_params
    ts = state_of(states, request)
    page = vm.table_page(
        ts,
        partition=partition_param(q),
        query=q.get("q", ""),
        page=int_param(q, "page", 1, 1) or 1,
        page_size=int_param(q, "page_size", vm.PAGE_SIZE, 1, MAX_PAGE_SIZE) or vm.PAGE_SIZE,
        bars=bars_param(q),
        top=_top(q),
        transactions=states.history(ts.table) if request.url.path.startswith("/table/") and cards else (),
        cards=cards,
        eager=vm.EAGER_CARDS,
    )
    return ts, page


def card_of(states: States, request: Request) -> tuple[TableStatistics, vm.ColumnCard]:
    q = request.query_params
    ts = state_of(states, request)
    column = column_param(ts, q)
    return ts, vm.column_card(ts, column, partition_param(q), bars_param(q), _top(q))


def histogram_of(states: States, request: Request) -> vm.ColumnCard:
    """A card whose histogram is zoomed to ``start``/``stop`` (bins) or ``lo``/``hi`` (values)."""
    q = request.query_params
    ts = state_of(states, request)
    column = column_param(ts, q)
    partition = partition_param(q)
    vm.check_partition(ts, partition)
    start, stop = int_param(q, "start", None, 0), int_param(q, "stop", None, 0)
    bins = None
    if start is not None or stop is not None:
        bins = (start or 0, stop if stop is not None else 1 << 62)
    if not ts.statistics([column], statistics=["histogram_bins"]).to_pylist()[0]["histogram_bins"]:
        raise StatisticsNotFoundError(f"column {column!r} of table {ts.table!r} has no histogram (only numeric and temporal columns do)")
    h = vm.histogram(ts, column, partition, bars_param(q), bins=bins, value_range=_value_range(ts, column, q))
    return vm.ColumnCard(ts.table, column, str(vm.leaf_types(ts).get(column)), partition, None, None, (), (), h, None, (), "")
