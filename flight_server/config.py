"""The Flight server's configuration: what ``metastore serve`` sets (flight_server/server.py reads it)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from engine import fileio
from engine.exceptions import MetastoreError
from flight_server.auth import Token

DEFAULT_PORT = 8815


class ServerConfigError(MetastoreError):
    """The server cannot start with this configuration (e.g. no tokens on a public address)."""


@dataclass
class ServerConfig:
    store: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port (see server.port)
    tokens: list[Token] = field(default_factory=list)
    token_file: str | None = None
    no_auth: bool = False  # serve a non-loopback address without tokens (explicit opt-out)
    tls_cert: bytes | None = None  # PEM certificate chain
    tls_key: bytes | None = None  # PEM private key
    poll_interval: float = 2.0  # seconds between cheap polls of the CURRENT pointers; 0: only on refresh
    allow_analyze: bool = True  # False: refuse the analyze action even with roots (serve --no-analyze)
    analyze_roots: tuple[str, ...] = ()  # the locations the analyze action may read; none: the action is off
    allow_source_change: bool = False  # analyze may publish over a table whose statistics came from another location
    health_store: bool = False  # health names the store and analyze roots on a server without tokens too
    max_analyze_jobs: int = 2
    allow_exact: bool = True  # False: refuse "exact" subsets even where analyze is enabled (serve --no-exact)
    max_exact_jobs: int = 1  # exact subsets computed at once; more are refused (busy)
    exact_rate: int = 10  # exact subsets computed per client (address) per exact_rate_window seconds
    exact_rate_window: float = 60.0
    exact_cache_bytes: int = 256 * 1024 * 1024  # the store's computed subsets kept within this (least recently used deleted)
    shutdown_grace: float | None = None  # seconds shutdown waits for in-flight calls (None: until they end)
    result_cache_bytes: int = 64 * 1024 * 1024  # recent results by ticket (0: off)
    prepared_cache_bytes: int = 64 * 1024 * 1024  # prepared answers per statistics file (flight_server/prepared.py; 0: off)
    sql: bool = True  # the Flight SQL face (docs/FLIGHT_SQL.md; serve --no-sql: off)
    sql_timeout: float = 30.0  # seconds per SQL query (serve --sql-timeout)
    sql_max_rows: int = 1_000_000  # rows per SQL result (serve --sql-max-rows)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens) or self.token_file is not None

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None

    @property
    def analyze_enabled(self) -> bool:
        """The analyze action is off unless the operator names the locations it may read."""
        return self.allow_analyze and bool(self.analyze_roots)

    @property
    def exact_enabled(self) -> bool:
        """Exact subsets read data and disclose rows: the analyze action's permission (and not --no-exact)."""
        return self.analyze_enabled and self.allow_exact


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_pem(path: str | None) -> bytes | None:
    if path is None:
        return None
    if "://" in path:
        return fileio.read_bytes(path)
    with open(path, "rb") as f:
        return f.read()
