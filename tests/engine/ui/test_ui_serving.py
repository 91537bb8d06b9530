"""``metastore ui`` against slow and hostile clients, over loopback: a flood of connections that
never finish their headers, oversized request heads, malformed Host headers and token-login
redirects that would leave the origin (issue #33)."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def start_ui(store: Path, log: Path, fd_limit: int | None = None, *args: str) -> tuple[subprocess.Popen, str]:
    """A real ``metastore ui`` process on a free loopback port (stderr to ``log``); its base URL."""

    def limit() -> None:
        if fd_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    cmd = [sys.executable, "-m", "engine", "ui", "--store", str(store), "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env, preexec_fn=limit)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"on (http://127\.0\.0\.1:\d+)/", log.read_text(errors="replace"))
        if match:
            return proc, match.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"metastore ui did not start: {log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("ui-serving") / "store"
    store.mkdir()
    return store


def healthz(url: str, timeout: float = 20.0) -> dict:
    with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as r:
        assert r.status == 200
        return json.loads(r.read())


def flood(port: int, sockets: int, seconds: float) -> list[socket.socket]:
    """Up to ``sockets`` connections, each sending a request head it never finishes (at most ``seconds``)."""
    opened: list[socket.socket] = []
    deadline = time.monotonic() + seconds
    while len(opened) < sockets and time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(PARTIAL_HEAD)
        except OSError:
            s.close()
            continue
        opened.append(s)
    return opened


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def ui_process(small_store: Path, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """``metastore ui`` with 1,024 open files at most (soft = hard: it cannot raise it)."""
    log = tmp_path / "ui.log"
    proc, url = start_ui(small_store, log, fd_limit=1024)
    try:
        yield SimpleNamespace(proc=proc, url=url, port=int(url.rsplit(":", 1)[1]), log=log)
    finally:
        proc.kill()
        proc.wait(30)


def test_a_slow_client_flood_leaves_healthz_answering_and_the_log_small(ui_process) -> None:
    """3,000 connections that never finish their headers, against a process allowed 1,024 files:
    the connection cap evicts the oldest, so /healthz still answers, the process stays under its
    file limit and the log does not fill with "Too many open files"."""
    conns = flood(ui_process.port, 3000, seconds=60)
    try:
        assert len(conns) >= 2000  # twice the file limit at least (connects that time out on a busy machine are retried)
        assert healthz(ui_process.url)["status"] == "ok"
        assert ui_process.proc.poll() is None
        assert open_fds(ui_process.proc.pid) < 1024 - 128  # bounded by the cap (512 connections), well under the limit
    finally:
        for s in conns:
            s.close()
    log = ui_process.log.read_text(errors="replace")
    assert "Too many open files" not in log and "Traceback" not in log
    assert len(log) < 10_000, log[-2000:]


def test_a_connection_that_never_finishes_its_head_is_timed_out(small_store: Path) -> None:
    """The header timeout: a partial head is answered 408 and closed; a whole request still answers."""
    from engine.ui.app import UiServer
    from engine.ui.serving import Limits

    server = UiServer(str(small_store), limits=Limits(header_timeout_s=0.5))
    url = server.start().rstrip("/")
    try:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        s.sendall(PARTIAL_HEAD)
        answer = b""
        while chunk := s.recv(4096):  # the server closes it: recv returns b"" (a hang: the 30 s timeout fails it)
            answer += chunk
        s.close()
        assert answer.startswith(b"HTTP/1.1 408 ")
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=30)  # nothing sent at all
        assert idle.recv(4096).startswith(b"HTTP/1.1 408 ")
        idle.close()
        assert healthz(url)["status"] == "ok"
    finally:
        server.stop()


def test_the_connection_cap_evicts_the_oldest_waiting_connection(small_store: Path) -> None:
    from engine.ui.app import UiServer
    from engine.ui.serving import Limits

    server = UiServer(str(small_store), limits=Limits(max_connections=20, header_timeout_s=600))
    url = server.start().rstrip("/")
    try:
        conns = flood(server.port, 60, seconds=30)
        assert healthz(url)["status"] == "ok"
        # the first 40 or more were evicted (closed by the server: recv gives b""), the newest are still open
        evicted = 0
        for s in conns[:40]:
            s.settimeout(10)
            try:
                evicted += s.recv(1) == b""
            except OSError:
                evicted += 1
        assert evicted == 40
        conns[-1].setblocking(False)
        with pytest.raises(BlockingIOError):  # still open, nothing to read
            conns[-1].recv(1)
        for s in conns:
            s.close()
    finally:
        server.stop()


def raw_request(port: int, head: bytes) -> bytes:
    """Send ``head`` whole, then read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("size", [20_000, 200_000])  # one read (h11's own limit misses it) or several
@pytest.mark.parametrize("what", ["url", "header"])
def test_an_oversized_request_head_is_answered_431(small_store: Path, what: str, size: int) -> None:
    from engine.ui.app import UiServer

    server = UiServer(str(small_store))
    server.start()
    try:
        fits = raw_request(server.port, f"GET /api/tables?x={'a' * 15_000} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        assert fits.startswith(b"HTTP/1.1 200 "), fits[:200]  # under the 16 KiB limit
        big = "a" * size
        head = (
            f"GET /api/tables?x={big} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            if what == "url"
            else f"GET /api/tables HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {big}\r\n\r\n"
        )
        answer = raw_request(server.port, head.encode())
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"too long" in answer
    finally:
        server.stop()


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:{port}@evil.com", "127.0.0.1@evil.com", "evil.com#127.0.0.1", "127.0.0.1:{port}/x", "127.0.0.1 evil.com", "[::1", "localhost:80:80"],
)
def test_a_malformed_host_header_is_a_400(small_store: Path, host: str) -> None:
    from engine.ui.app import UiServer

    server = UiServer(str(small_store))
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.putrequest("GET", "/api/tables", skip_host=True)
        conn.putheader("Host", host.format(port=server.port))
        conn.endheaders()
        r = conn.getresponse()
        body = r.read()
        assert r.status == 400 and "Host" in json.loads(body)["error"]
        for good in (f"127.0.0.1:{server.port}", "localhost", f"[::1]:{server.port}"):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", "/api/tables", headers={"Host": good})
            assert conn.getresponse().status == 200
    finally:
        server.stop()


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/x",
        "/\\evil.example/x",
        "/%2F%2Fevil.example/x",
        "/%5C%5Cevil.example",
        "http://evil.example/x",
        "///evil.example",
        "/\\/evil.example",
    ],
)
def test_the_token_login_redirects_only_within_the_origin(small_store: Path, target: str) -> None:
    """``?token=`` answers a redirect to the same URL without the token: never to another host,
    however the path is spelled (a browser reads ``//host`` and ``/\\host`` as another host)."""
    from engine.ui.app import UiServer, authenticator_for

    server = UiServer(str(small_store), authenticator=authenticator_for("127.0.0.1", ["s3cret-token"], None, False))
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.putrequest("GET", f"{target}?token=s3cret-token&a=1", skip_host=True)
        conn.putheader("Host", f"127.0.0.1:{server.port}")
        conn.endheaders()
        r = conn.getresponse()
        r.read()
        assert r.status == 303
        location = r.getheader("location")
        base = f"http://127.0.0.1:{server.port}/table/x"
        resolved = urllib.parse.urlsplit(urllib.parse.urljoin(base, location.replace("\\", "/")))
        assert (resolved.scheme, resolved.netloc) == ("http", f"127.0.0.1:{server.port}"), location
        assert location.startswith("/") and location[1:2] not in ("/", "\\") and location.endswith("?a=1")
        assert "token" not in location
    finally:
        server.stop()


@pytest.mark.slow
def test_two_clients_of_ten_thousand_slow_connections(small_store: Path, tmp_path: Path) -> None:
    """The issue's flood: two client processes opening 10,000 never-finished connections each for
    40 s against ``metastore ui`` (its file limit raised to the hard one at start); /healthz
    answers throughout and the log stays small."""
    log = tmp_path / "ui.log"
    proc, url = start_ui(small_store, log)
    port = int(url.rsplit(":", 1)[1])
    script = (
        "import socket, sys, time\n"
        "conns, t = [], time.monotonic()\n"
        "while time.monotonic() - t < 40:\n"
        "    if len(conns) < 10000:\n"
        "        s = socket.socket(); s.settimeout(5)\n"
        "        try:\n"
        f"            s.connect(('127.0.0.1', {port})); s.sendall({PARTIAL_HEAD!r}); conns.append(s)\n"
        "        except OSError:\n"
        "            s.close()\n"
        "    else:\n"
        "        time.sleep(0.1)\n"
    )

    def nofile() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 12000), hard))

    clients = [subprocess.Popen([sys.executable, "-c", script], preexec_fn=nofile) for _ in range(2)]
    try:
        answered = 0
        while any(c.poll() is None for c in clients):
            assert healthz(url)["status"] == "ok"
            answered += 1
            time.sleep(2)
        assert answered >= 10 and proc.poll() is None
    finally:
        for c in clients:
            c.kill()
            c.wait(30)
        proc.kill()
        proc.wait(30)
    text = log.read_text(errors="replace")
    assert "Too many open files" not in text and len(text) < 20_000, text[-2000:]


def test_api_errors_are_json_with_a_4xx(small_store: Path, tmp_path: Path) -> None:
    """A table name no file system takes (over 255 bytes, a NUL) is a 404 naming the rule, not a
    500; every /api error is JSON, an unexpected one too (without the store's paths)."""
    from engine.ui.app import UiServer

    server = UiServer(str(small_store))
    server.start()
    try:
        for path, status in [
            ("/api/tables/" + "x" * 300, 404), ("/api/tables/" + urllib.parse.quote("é" * 200) + "/card?column=a", 404), ("/api/tables/a%00b", 404),
            ("/api/tables/..", 404), ("/api/nosuch", 404), ("/api/tables/sales/card?column=a&at=x", 400),
        ]:  # fmt: skip
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", path)
            r = conn.getresponse()
            doc = json.loads(r.read())
            assert (r.status, doc["status"]) == (status, status) and doc["error"], path
            assert "at most 255 bytes" in doc["error"] or "x" * 300 not in path
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/table/" + "x" * 300)
        r = conn.getresponse()
        assert r.status == 404 and "at most 255 bytes" in r.read().decode()
    finally:
        server.stop()
    not_a_dir = tmp_path / "store-is-a-file"
    not_a_dir.write_text("x")
    server = UiServer(str(not_a_dir))
    server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/api/tables")
        r = conn.getresponse()
        doc = json.loads(r.read())
        assert r.status == 500 and doc == {"error": "internal error (the server's log has the details)", "status": 500}
    finally:
        server.stop()


@pytest.mark.browser
def test_chromium_stays_on_the_app_after_the_token_login(small_store: Path, browser) -> None:
    """The browser that followed ``Location: //evil.example/x`` (issue #33) now lands on the app."""
    from engine.ui.app import UiServer, authenticator_for

    server = UiServer(str(small_store), authenticator=authenticator_for("127.0.0.1", ["s3cret-token"], None, False))
    url = server.start().rstrip("/")
    try:
        for target in ("//evil.example/x", "/%2F%2Fevil.example/x", "/\\evil.example/x"):
            browser.get(f"{url}{target}?token=s3cret-token")
            landed = urllib.parse.urlsplit(browser.current_url)
            assert landed.netloc == f"127.0.0.1:{server.port}" and "token" not in landed.query, browser.current_url
        browser.get(f"{url}/")  # the cookie the login set lets the browser in
        assert "Metastore" in browser.title and "Authentication required" not in browser.page_source
    finally:
        server.stop()


def test_a_repeated_log_message_is_rate_limited() -> None:
    """The filter's law: per message, at most ``burst`` records a window; the first record of the
    next window says how many were dropped; other messages are counted apart."""
    import logging

    from engine.ui.serving import RateLimit

    now = [0.0]
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test.ratelimit")
    logger.propagate = False
    logger.addHandler(Keep())
    logger.addFilter(RateLimit(burst=5, window_s=60, clock=lambda: now[0]))
    for i in range(1000):
        logger.error("socket.accept() out of system resource: %d", i)
    logger.error("another message")
    assert records == [f"socket.accept() out of system resource: {i}" for i in range(5)] + ["another message"]
    now[0] = 61.0
    logger.error("socket.accept() out of system resource: %d", 1000)
    assert records[-1] == "socket.accept() out of system resource: 1000 (995 more like it dropped)"
