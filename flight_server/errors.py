"""The errors a Flight client sees: one line, and a machine-readable code in ``extra_info``.

Every error a client can cause is a FlightServerError (or FlightUnavailableError when
the store cannot be read, FlightUnauthorizedError for a refused exact subset) with
``extra_info`` = ``{"code": ...}``; ``get_schema``'s errors need their own classes
(:func:`schema_error`).
"""

from __future__ import annotations

import json
import logging

import pyarrow.flight as flight

from engine.exceptions import (
    CatalogCorruptError,
    InvalidArgumentError,
    MetastoreError,
    StatisticsFileCorruptError,
    StatisticsNotFoundError,
)
from flight_server import exact
from flight_server.exact import ExactRefused
from flight_server.jobs import JobError
from flight_server.protocol import RequestError
from flight_server.state import TimeTravelUnavailable, UnknownTable

log = logging.getLogger("metastore.flight")


def _code(code: str) -> bytes:
    return json.dumps({"code": code}).encode()


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_flight_error(exc: BaseException) -> flight.FlightError:
    """The Flight error a client sees for ``exc``: one line, and a machine-readable code in extra_info."""
    if isinstance(exc, flight.FlightError):
        return exc
    msg = one_line(str(exc) or type(exc).__name__)
    if isinstance(exc, RequestError):
        return flight.FlightServerError(f"bad request: {msg}", _code("bad_request"))
    if isinstance(exc, TimeTravelUnavailable):
        return flight.FlightServerError(msg, _code("time_travel_unavailable"))
    if isinstance(exc, UnknownTable):
        return flight.FlightServerError(msg, _code("not_found"))
    if isinstance(exc, InvalidArgumentError):
        return flight.FlightServerError(f"bad request: {msg}", _code("bad_request"))
    if isinstance(exc, JobError):
        return flight.FlightServerError(msg, _code("job"))
    if isinstance(exc, ExactRefused):
        if exc.code == exact.FORBIDDEN:
            return flight.FlightUnauthorizedError(msg, _code(exc.code))
        return flight.FlightUnavailableError(msg, _code(exc.code))
    if isinstance(exc, (StatisticsFileCorruptError, CatalogCorruptError)):
        return flight.FlightServerError(f"statistics damaged: {msg}", _code("damaged"))
    if isinstance(exc, StatisticsNotFoundError):
        return flight.FlightUnavailableError(f"statistics unavailable: {msg} (retry; the table may have been republished)", _code("unavailable"))
    if isinstance(exc, MetastoreError):
        return flight.FlightServerError(msg, _code("error"))
    if isinstance(exc, OSError):
        return flight.FlightUnavailableError(f"statistics store unavailable: {msg}", _code("unavailable"))
    log.error("internal error", exc_info=exc)
    return flight.FlightServerError(f"internal error: {type(exc).__name__}: {msg}", _code("internal"))


def _opaque_error_class(code: str, base: type[Exception]) -> type[Exception]:
    """An exception class for errors of ``get_schema``, which pyarrow's server cannot send as Flight errors.

    pyarrow's ``_get_schema`` (unlike the other methods) does not turn a raised FlightError
    into its status: whatever get_schema raises becomes a generic status whose message
    ends with ``traceback.format_exception`` of it (apache/arrow#43556). That formatting
    falls back to the class name when its text is not valid UTF-8, so these classes carry
    an unencodable character in their qualified name: the client gets ``<message>.
    Detail: Python exception: <code>`` and no traceback. The base class picks the status
    (ValueError: INVALID_ARGUMENT, KeyError: NOT_FOUND, OSError: IOError, else UNKNOWN).
    """
    cls = type(code, (base,), {"__str__": lambda self: str(self.args[0]) if self.args else code, "__module__": "metastore"})
    cls.__qualname__ = code + "\udc80"
    return cls


_SCHEMA_ERRORS = {
    "bad_request": _opaque_error_class("bad_request", ValueError),
    "time_travel_unavailable": _opaque_error_class("time_travel_unavailable", ValueError),
    "not_found": _opaque_error_class("not_found", KeyError),
    "job": _opaque_error_class("job", ValueError),
    exact.FORBIDDEN: _opaque_error_class(exact.FORBIDDEN, RuntimeError),
    exact.BUSY: _opaque_error_class(exact.BUSY, ConnectionError),
    exact.RATE_LIMITED: _opaque_error_class(exact.RATE_LIMITED, ConnectionError),
    "unavailable": _opaque_error_class("unavailable", ConnectionError),
    "error": _opaque_error_class("error", RuntimeError),
    "internal": _opaque_error_class("internal", RuntimeError),
}


def schema_error(exc: flight.FlightError) -> Exception:
    """A get_schema error as an exception pyarrow sends without a traceback (see _opaque_error_class)."""
    code = "unavailable" if isinstance(exc, flight.FlightUnavailableError) else "internal"
    try:
        code = json.loads(exc.extra_info or b"{}").get("code", code)
    except (ValueError, AttributeError):
        pass
    text = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    return _SCHEMA_ERRORS.get(code, _SCHEMA_ERRORS["internal"])(text)
