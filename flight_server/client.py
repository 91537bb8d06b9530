"""A small typed client of the Metastore Flight service.

    from flight_server.client import MetastoreClient
    with MetastoreClient("grpc://127.0.0.1:8815", token="...") as client:
        client.tables()                                         # pyarrow.Table: one row per table
        client.statistics("sales", ["price", "city"])           # one row per column (first column: partition)
        client.top_frequencies("sales", "city", k=20)           # value, frequency
        client.histogram("sales", "price", value_range=(10, 20))  # bin, lower, upper, count
        client.partitions_matching("sales", "price >= 100 and city = 'Berlin'")  # partition, rows, null_count, nan_count, min, max
        client.health()                                         # dict

Each call is one ``do_get`` with the request as the ticket (no ``get_flight_info``
round trip). Errors are the Flight errors the server sends, with the message cut
to the server's one line (the gRPC debug context is dropped).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from engine.jsontypes import JSON, JSONObject
from engine.options import AnalyzeOptions
from flight_server import protocol
from flight_server.protocol import (
    At,
    Filter,
    HistogramRequest,
    PartitionsMatchingRequest,
    PlanFilesRequest,
    StatisticsRequest,
    TopFrequenciesRequest,
)

__all__ = ["MetastoreClient"]


def _clean(exc: flight.FlightError) -> flight.FlightError:
    """The same error type with only the server's message (gRPC adds '. Detail: ...' and a debug context)."""
    text = str(exc)
    for marker in (". Detail:", ". gRPC client debug context:", ". Client context:"):
        cut = text.find(marker)
        if cut > 0:
            text = text[:cut]
    clean = type(exc)(text, exc.extra_info)
    return clean


def _value_text(value: object) -> bool | int | float | str | None:
    """A Python value as the JSON the protocol takes: numbers and booleans as is, anything else as its text form."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    from engine import values as value_forms  # datetimes, dates, Decimals, bytes

    return value_forms.encode_scalar(pa.scalar(value))


class MetastoreClient:
    def __init__(
        self,
        location: str | tuple[str, int] | flight.Location,
        token: str | None = None,
        *,
        tls_root_certs: bytes | None = None,
        override_hostname: str | None = None,
        disable_server_verification: bool = False,
        timeout: float | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if tls_root_certs is not None:
            kwargs["tls_root_certs"] = tls_root_certs
        if override_hostname is not None:
            kwargs["override_hostname"] = override_hostname
        if disable_server_verification:
            kwargs["disable_server_verification"] = True
        self.location = location
        self._client = flight.FlightClient(location, **kwargs)
        headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._options = flight.FlightCallOptions(timeout=timeout, headers=headers)

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> MetastoreClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ raw calls
    def get(self, request: protocol.Request | dict[str, Any] | bytes) -> pa.Table:
        """The result of any request (a request object, a JSON document or ticket bytes)."""
        ticket = request if isinstance(request, bytes) else protocol.encode(request)
        try:
            return self._client.do_get(flight.Ticket(ticket), self._options).read_all()
        except flight.FlightError as exc:
            raise _clean(exc) from None

    def flight_info(self, request: protocol.Request | dict[str, Any] | bytes) -> flight.FlightInfo:
        command = request if isinstance(request, bytes) else protocol.encode(request)
        try:
            return self._client.get_flight_info(flight.FlightDescriptor.for_command(command), self._options)
        except flight.FlightError as exc:
            raise _clean(exc) from None

    def action(self, kind: str, body: Mapping[str, JSON] | None = None) -> dict[str, Any]:
        payload = json.dumps(body).encode() if body else b""
        try:
            results = list(self._client.do_action(flight.Action(kind, payload), self._options))
        except flight.FlightError as exc:
            raise _clean(exc) from None
        return json.loads(results[0].body.to_pybytes()) if results else {}

    # ------------------------------------------------------------ requests
    def statistics(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        partition: str | None = None,
        partitions: Sequence[str] | str | None = None,
        statistics: Sequence[str] | None = None,
        at: At | None = None,
        where: str | None = None,
        exact: bool = False,
    ) -> pa.Table:
        """Statistics rows (first column ``partition``: null at table level); ``partitions="*"`` for every partition.
        ``where``: of the rows matching that predicate, each statistic's method in the schema
        metadata (``engine.subset.methods_of``; docs/SUBSETS.md)."""
        return self.get(
            StatisticsRequest(
                table=table,
                columns=tuple(columns) if columns is not None else None,
                partition=partition,
                partitions=partitions if isinstance(partitions, str) or partitions is None else tuple(partitions),
                statistics=tuple(statistics) if statistics is not None else None,
                at=at,
                where=where,
                exact=exact,
            )
        )

    def top_frequencies(
        self, table: str, column: str, k: int = 20, partition: str | None = None, typed: bool = False, where: str | None = None, exact: bool = False
    ) -> pa.Table:
        """(value, frequency) by decreasing frequency; ``kind`` and ``stored_rows`` in the schema metadata."""
        return self.get(TopFrequenciesRequest(table=table, column=column, k=k, partition=partition, typed=typed, where=where, exact=exact))

    def histogram(
        self,
        table: str,
        column: str,
        bins: tuple[int, int] | None = None,
        value_range: tuple[object, object] | None = None,
        partition: str | None = None,
        where: str | None = None,
        exact: bool = False,
    ) -> pa.Table:
        """Bins (bin, lower, upper, count): all, a bin range [start, stop), or those overlapping [lo, hi]."""
        vr = None if value_range is None else (_value_text(value_range[0]), _value_text(value_range[1]))
        request = HistogramRequest(
            table=table, column=column, bins=(bins[0], bins[1]) if bins else None, value_range=vr, partition=partition, where=where, exact=exact
        )
        return self.get(request)

    def partitions_matching(self, table: str, where: str, op: str | None = None, value: object = None) -> pa.Table:
        """Partitions whose statistics might hold a row matching a predicate (min/max, null and
        NaN counts): ``partitions_matching("sales", "price >= 100 and city = 'Berlin'")``
        (docs/PREDICATES.md), or one comparison ``partitions_matching("sales", "price", ">=", 100)``."""
        if op is None:
            return self.get(PartitionsMatchingRequest(table=table, filter=where))
        return self.get(PartitionsMatchingRequest(table=table, filter=Filter(where, op, _value_text(value))))

    def plan_files(self, table: str, where: str) -> pa.Table:
        """The data files that might hold rows matching ``where`` (path, partition, rows, size):
        partitions pruned from their statistics, then files from the table's file index."""
        return self.get(PlanFilesRequest(table=table, filter=where))

    # ------------------------------------------------------------ metadata and actions
    def tables(self) -> pa.Table:
        """One row per table with statistics: table, job_id, snapshot, published_at, rows, partitions, columns,
        and error (null, or why a damaged table cannot be served)."""
        rows = []
        try:
            for info in self._client.list_flights(b"", self._options):
                meta = json.loads(info.app_metadata or b"{}")
                rows.append({k: meta.get(k) for k in ("table", "job_id", "snapshot", "published_at", "rows", "partitions", "columns", "error")})
        except flight.FlightError as exc:
            raise _clean(exc) from None
        schema = pa.schema(
            [
                ("table", pa.string()),
                ("job_id", pa.string()),
                ("snapshot", pa.string()),
                ("published_at", pa.string()),
                ("rows", pa.int64()),
                ("partitions", pa.int64()),
                ("columns", pa.int64()),
                ("error", pa.string()),  # a damaged table: why it cannot be served (other columns null)
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def health(self) -> dict[str, Any]:
        return self.action("health")

    def history(self, table: str) -> dict[str, Any]:
        return self.action("history", {"table": table})

    def diff(self, table: str, **body: JSON) -> dict[str, Any]:
        """The ``diff`` action: ``from``/``to`` (transactions), ``from_partition``/``to_partition``,
        ``columns``, ``top`` (docs/reference/FLIGHT.md); ``from_`` is accepted for ``from``."""
        if "from_" in body:
            body["from"] = body.pop("from_")
        return self.action("diff", {"table": table, **body})

    def alerts(self, table: str, **body: JSON) -> dict[str, Any]:
        """The ``alerts`` action: ``columns``, ``partition``, ``thresholds`` (docs/reference/FLIGHT.md)."""
        return self.action("alerts", {"table": table, **body})

    def refresh(self, table: str | None = None) -> dict[str, Any]:
        return self.action("refresh", {"table": table} if table else None)

    def analyze(
        self,
        table_uri: str,
        name: str | None = None,
        bins: int = AnalyzeOptions.bins,
        columns: Sequence[str] | None = None,
        inherit: bool = AnalyzeOptions.inherit,
        value_partitions: bool = AnalyzeOptions.value_partitions,
    ) -> str:
        """Start an analyze on the server's Ray cluster; returns the job handle.

        ``inherit=False`` recomputes every partition (no inheritance of unchanged ones);
        ``value_partitions=True`` keeps each value's partitions in the table-level frequencies."""
        body: JSONObject = {"table_uri": table_uri, "bins": bins}
        if not inherit:
            body["inherit"] = False
        if value_partitions:
            body["value_partitions"] = True
        if name is not None:
            body["name"] = name
        if columns is not None:
            body["columns"] = list(columns)
        return self.action("analyze", body)["job"]

    def analyze_status(self, job: str) -> dict[str, Any]:
        return self.action("analyze_status", {"job": job})

    def wait_analyze(self, job: str, timeout: float = 600.0, poll: float = 0.2) -> dict[str, Any]:
        """Poll ``analyze_status`` until the job ends; returns the final status (raises TimeoutError)."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.analyze_status(job)
            if status["state"] in ("succeeded", "failed"):
                return status
            if time.monotonic() > deadline:
                raise TimeoutError(f"analyze job {job} still {status['state']} after {timeout} s")
            time.sleep(poll)
