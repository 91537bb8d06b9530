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


def _locations(proc: subprocess.Popen, count: int, timeout: float = 120) -> tuple[list[str], list[int]]:
    """The locations the ``count`` processes print, and their pids."""
    assert proc.stderr is not None
    found: list[str] = []
    pids: list[int] = []
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"^\[process \d+/\d+, pid (\d+)\] serving .* on (grpc\+tcp://\S+) \(auth o", line)  # not the log line
        if m:
            pids.append(int(m.group(1)))
            found.append(m.group(2))
    assert len(found) == count, "".join(lines)
    return found, pids


@pytest.fixture
def two(small_store: str) -> Iterator[tuple[subprocess.Popen, list[str], list[int]]]:
    proc = _start(["--store", small_store, "--port", "0", "--processes", "2", "--token-file", _token_file(small_store)])
    pids: list[int] = []
    try:
        locations, pids = _locations(proc, 2)
        yield proc, locations, pids
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _token_file(store: str) -> str:
    path = Path(store).parent / "tokens.txt"
    path.write_text(GOOD_TOKEN + "\n")
    return str(path)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_every_process_answers_with_its_tokens_and_sigterm_stops_all(two: tuple[subprocess.Popen, list[str], list[int]]) -> None:
    from flight_server.client import MetastoreClient
    from flight_server.sql import flight_sql_pb2 as pb
    from flight_server.sql.protocol import pack

    proc, locations, pids = two
    seen = f"locations {locations}, pids {pids}, parent {proc.pid}"
    assert len(set(locations)) == 2 and len(set(pids)) == 2 and proc.pid not in pids, seen  # two processes, one port each
    assert all(_alive(pid) for pid in pids)
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
    assert not any(_alive(pid) for pid in pids)


def test_a_child_that_dies_stops_the_others_and_fails(two: tuple[subprocess.Popen, list[str], list[int]]) -> None:
    proc, _, pids = two
    os.kill(pids[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    assert re.search(rf"server process \d/2 \(pid {pids[0]}\) exited with code -9: stopped the others", err), err
    assert not any(_alive(pid) for pid in pids)


def test_the_processes_end_with_a_killed_parent(two: tuple[subprocess.Popen, list[str], list[int]]) -> None:
    proc, _, pids = two
    proc.kill()  # kill -9: no handler runs in the parent
    proc.wait()
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)


def test_a_port_taken_fails_at_start(small_store: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # process 1 gets the taken port (process 2 the next one, free or not: it may start)
        proc = _start(["--store", small_store, "--port", str(port), "--processes", "2", "--no-auth"])
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


def test_one_process_by_default(small_store: str) -> None:
    """No --processes: the server runs in the command's own process, as before."""
    proc = _start(["--store", small_store, "--port", "0", "--no-sql"])
    try:
        assert proc.stderr is not None
        line = ""
        while "Ctrl-C stops" not in line:
            line = proc.stderr.readline()
            assert line, "serve ended"
        assert not line.startswith("[process")
        location = re.search(r"on (grpc\+tcp://\S+) \(auth o", line)
        assert location is not None
        c, opts = raw_client(location.group(1))
        assert c.do_get(flight.Ticket(TICKET), opts).read_all().num_rows == 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "stopped" in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
