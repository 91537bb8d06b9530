"""The examples' servers: a ``metastore ui`` or ``metastore serve`` line of a doc runs until it is
stopped, so the harness (tests/docs/test_examples.py) starts it in the background on a free port
(``--port N`` replaced, or added), waits until it answers (the UI's ``/healthz``, the Flight
``health`` action, with the line's token and TLS certificate), lets the block's later lines talk
to it, then stops it as a user does (Ctrl-C) and checks that it stopped cleanly.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: the commands that serve until stopped, and how each is asked whether it answers
SERVERS = frozenset({"ui", "serve"})
#: how long a server may take to answer (the Flight server with --analyze-root attaches to Ray)
START_TIMEOUT = 120.0


def subcommand(arguments: list[str]) -> str | None:
    """The metastore command of ``arguments`` (global options may come first)."""
    from engine.cli.console import metastore

    return next((a for a in arguments if a in metastore.commands), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _option(arguments: list[str], name: str) -> str | None:
    return arguments[arguments.index(name) + 1] if name in arguments[:-1] else None


def with_port(arguments: list[str], port: int) -> list[str]:
    """``arguments`` with ``--port`` set to ``port``."""
    if "--port" in arguments[:-1]:
        i = arguments.index("--port")
        return [*arguments[: i + 1], str(port), *arguments[i + 2 :]]
    return [*arguments, "--port", str(port)]


def _token(arguments: list[str], environment: dict[str, str], cwd: Path) -> str | None:
    """The token a client of this server line sends: --token, the first of --token-file, else $METASTORE_FLIGHT_TOKEN."""
    if (token := _option(arguments, "--token")) is not None:
        return token
    if (file := _option(arguments, "--token-file")) is not None:
        lines = [line.split("#", 1)[0].split() for line in (cwd / file).read_text().splitlines()]
        return next(fields[0] for fields in lines if fields)
    return environment.get("METASTORE_FLIGHT_TOKEN")


@dataclass
class Server:
    """A server line running in the background."""

    kind: str  # "ui" or "serve"
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    location: str  # its URL (ui) or Flight location (serve)
    token: str | None
    root_certs: bytes | None

    def answers(self) -> bool:
        try:
            if self.kind == "ui":
                headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
                with urllib.request.urlopen(urllib.request.Request(f"{self.location}/healthz", headers=headers), timeout=5) as r:
                    return bool(json.loads(r.read())["status"] == "ok")
            from flight_server.client import MetastoreClient

            with MetastoreClient(self.location, token=self.token, tls_root_certs=self.root_certs, timeout=10) as client:
                return client.health()["status"] in ("ok", "degraded")
        except Exception:  # noqa: BLE001 - not yet listening
            return False

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill(self) -> None:
        """Stop it at once (the block failed before): no checks."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def stop(self) -> str:
        """Ctrl-C, as a user stops it; its output. Fails unless it stops cleanly (exit 0, no traceback)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.kind} on {self.location} did not stop on Ctrl-C:\n{self.output()[-3000:]}") from None
        text = self.output()
        self.log.close()
        assert code == 0 and "Traceback" not in text, f"{self.kind} on {self.location} stopped with exit {code}:\n{text[-3000:]}"
        return text


def start(arguments: list[str], environment: dict[str, str], cwd: Path, log: IO[bytes]) -> Server:
    """Start the server line ``metastore ARGUMENTS`` on a free port; return once it answers."""
    kind = subcommand(arguments)
    assert kind in SERVERS, arguments
    port = free_port()
    arguments = with_port(arguments, port)
    cert = _option(arguments, "--tls-cert")
    if kind == "ui":
        location = f"http://127.0.0.1:{port}"
    else:
        location = f"grpc+tls://127.0.0.1:{port}" if cert else f"grpc://127.0.0.1:{port}"
    process = subprocess.Popen([sys.executable, "-m", "engine", *arguments], cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT)
    server = Server(kind, process, log, location, _token(arguments, environment, cwd), (cwd / cert).read_bytes() if cert else None)
    deadline = time.monotonic() + START_TIMEOUT
    while not server.answers():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            raise AssertionError(f"metastore {' '.join(arguments)} did not answer (exit {process.returncode}):\n{server.output()[-3000:]}")
        time.sleep(0.2)
    return server


def write_credentials(directory: Path) -> None:
    """What the server lines of the docs name: tokens.txt (one token), cert.pem and key.pem (a
    self-signed certificate for 127.0.0.1 and localhost)."""
    from tests.flight_server.flight_testkit import self_signed_cert

    (directory / "tokens.txt").write_text("# the examples' token\ndoc-example-token\n")
    cert_pem, key_pem = self_signed_cert("localhost")
    (directory / "cert.pem").write_bytes(cert_pem)
    (directory / "key.pem").write_bytes(key_pem)
