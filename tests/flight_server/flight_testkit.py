"""Helpers of the Flight server tests (imported by the test modules of this directory)."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

GOOD_TOKEN = "good-token-0123456789"
EXPIRED_TOKEN = "expired-token-0123456789"
SALES_ROWS = 20_000
SALES_PARTITIONS = 4
WIDE_COLUMNS = 1_000
WIDE_ROWS = 2_000


def strip(table: pa.Table, drop: tuple[str, ...] = ("partition",)) -> pa.Table:
    """A result without the Flight-only columns and without schema metadata (for comparing with engine.lookup)."""
    keep = [n for n in table.schema.names if n not in drop]
    return table.select(keep).replace_schema_metadata(None).combine_chunks()


def same(a: pa.Table, b: pa.Table) -> bool:
    return a.replace_schema_metadata(None).combine_chunks().equals(b.replace_schema_metadata(None).combine_chunks())


@contextlib.contextmanager
def running_server(store: str, **options: Any) -> Iterator:
    """A MetastoreFlightServer on 127.0.0.1, any free port, shut down at the end."""
    from flight_server.server import MetastoreFlightServer, ServerConfig

    options.setdefault("host", "127.0.0.1")
    options.setdefault("port", 0)
    server = MetastoreFlightServer(ServerConfig(store=store, **options))
    try:
        yield server
    finally:
        server.shutdown()


REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def serve_process(args: list[str], env: dict[str, str] | None = None, timeout: float = 180) -> Iterator[tuple[subprocess.Popen, str, list[str]]]:
    """``metastore serve ARGS`` in a subprocess (this checkout's code); yields (process, location,
    the stderr lines read up to the "serving" line). Killed at the end if still running."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.console", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, cwd=str(REPO),
    )  # fmt: skip
    try:
        location, lines = None, []
        deadline = time.monotonic() + timeout
        while location is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"on (grpc\+tcp://\S+) \(auth o", line)
            if m:
                location = m.group(1)
        assert location, "".join(lines)
        yield proc, location, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def self_signed_cert(host: str = "localhost") -> tuple[bytes, bytes]:
    """(certificate PEM, private key PEM) of a fresh self-signed certificate for ``host`` and 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert_pem, key_pem


def raw_client(location: str, token: str | None = None, **kwargs: Any) -> tuple[flight.FlightClient, flight.FlightCallOptions]:
    """A plain pyarrow FlightClient and call options carrying ``token`` (or nothing)."""
    client = flight.FlightClient(location, **kwargs)
    headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
    return client, flight.FlightCallOptions(headers=headers, timeout=30)


def first_line(exc: BaseException) -> str:
    """The server's message of a Flight error (what precedes gRPC's '. Detail:')."""
    text = str(exc)
    cut = text.find(". Detail:")
    return text[:cut] if cut > 0 else text
