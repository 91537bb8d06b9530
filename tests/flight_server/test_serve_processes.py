"""``metastore serve --processes N`` (engine/cli/processes.py): N server processes, one port
each, through the real console script and Flight clients over loopback: every process answers
(statistics, Flight SQL, health) with its tokens enforced, SIGTERM stops them all, a child that
dies stops the rest with a non-zero exit, and bad values are refused clearly."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from flight_testkit import GOOD_TOKEN, raw_client

REPO = Path(__file__).resolve().parents[2]
TICKET = b'{"v":1,"kind":"statistics","table":"small","columns":["x"]}'


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of one small table, analyzed in this process (no Ray)."""
    from engine.api import analyze

    root = tmp_path_factory.mktemp("processes")
    for part in range(2):
        (root / "small" / f"p={part}").mkdir(parents=True)
        pq.write_table(pa.table({"x": list(range(part * 100, part * 100 + 100)), "s": ["a", "b"] * 50}), root / "small" / f"p={part}" / "0.parquet")
    analyze(str(root / "small"), store=str(root / "store"), name="small", runtime="local", user_statistics=[])
    return str(root / "store")


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli.console", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _locations(proc: subprocess.Popen, count: int, timeout: float = 120) -> tuple[list[str], list[str]]:
    """The locations the ``count`` processes print (and the stderr lines read)."""
    assert proc.stderr is not None
    found: list[str] = []
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"^\[process .* on (grpc\+tcp://\S+) \(auth o", line)  # not the log line of the same process
        if m:
            found.append(m.group(1))
    assert len(found) == count, "".join(lines)
    return found, lines


@pytest.fixture
def two(small_store: str) -> Iterator[tuple[subprocess.Popen, list[str]]]:
    proc = _start(["--store", small_store, "--port", "0", "--processes", "2", "--token-file", _token_file(small_store)])
    try:
        locations, _ = _locations(proc, 2)
        yield proc, locations
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for child in _children(proc.pid):
            child.kill()


def _token_file(store: str) -> str:
    path = Path(store).parent / "tokens.txt"
    path.write_text(GOOD_TOKEN + "\n")
    return str(path)


def _children(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
    except psutil.NoSuchProcess:
        return []


def test_every_process_answers_with_its_tokens_and_sigterm_stops_all(two: tuple[subprocess.Popen, list[str]]) -> None:
    from flight_server.client import MetastoreClient
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack

    proc, locations = two
    assert len(set(locations)) == 2  # one port each
    servers = _children(proc.pid)
    assert len(servers) == 2
    ports = {int(loc.rsplit(":", 1)[1]) for loc in locations}
    listening = {c.laddr.port for s in servers for c in s.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert ports <= listening  # each port is held by one of the two children
    for location in locations:
        c, opts = raw_client(location, GOOD_TOKEN)
        assert c.do_get(flight.Ticket(TICKET), opts).read_all().num_rows == 1
        with pytest.raises(flight.FlightUnauthenticatedError):
            raw_client(location)[0].do_get(flight.Ticket(TICKET)).read_all()
        with pytest.raises(flight.FlightUnauthenticatedError):
            raw_client(location, "wrong-token-0123456789")[0].do_get(flight.Ticket(TICKET)).read_all()
        with MetastoreClient(location, token=GOOD_TOKEN) as client:
            health = client.health()
            assert health["status"] == "ok" and health["auth"] and health["tables"] == 1
        sql = flight.FlightDescriptor.for_command(pack(pb.CommandStatementQuery(query="SELECT count(*) AS n FROM tables")))
        endpoint = c.get_flight_info(sql, opts).endpoints[0]
        assert c.do_get(endpoint.ticket, opts).read_all().column("n").to_pylist() == [1]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert err.count("] stopped") == 2 and "stopped all 2 server processes" in err
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers)


def test_a_child_that_dies_stops_the_others_and_fails(two: tuple[subprocess.Popen, list[str]]) -> None:
    proc, _ = two
    servers = _children(proc.pid)
    servers[0].kill()
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    assert re.search(r"server process \d/2 \(pid \d+\) exited with code -9: stopped the others", err), err
    assert not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers)


def test_a_port_taken_fails_at_start(small_store: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # process 1 gets port - 1 (free or not: it may start), process 2 the taken port
        proc = _start(["--store", small_store, "--port", str(port - 1), "--processes", "2", "--no-auth"])
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert f"cannot start the Flight server on 127.0.0.1:{port}" in err
    assert "exited with code 1: stopped the others" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--processes", "0"], "Invalid value for '--processes': 0 is not in the range x>=1"),
        (["--processes", "3", "--port", "65534"], "--processes 3 from --port 65534 needs ports up to 65536: past 65535"),
        (["--processes", "2", "--analyze-root", "/tmp"], "--processes 2 cannot serve the analyze action"),
    ],
)
def test_bad_values_are_refused(small_store: str, args: list[str], message: str) -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    r = CliRunner().invoke(metastore, ["serve", "--store", small_store, *args])
    assert r.exit_code != 0
    assert message in r.stderr
