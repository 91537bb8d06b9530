"""engine.redis_server against the real redis-server binary."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.exceptions import ServiceError
from engine.redis_server import (
    REDIS_SERVER_ENV,
    REDIS_URL_ENV,
    RedisServer,
    check_reachable,
    connect_or_start,
    find_redis_server,
    generate_password,
)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.delenv(REDIS_SERVER_ENV, raising=False)


def test_find_redis_server_finds_the_installed_binary() -> None:
    path = find_redis_server()
    assert os.path.basename(path) == "redis-server"
    assert os.access(path, os.X_OK)


def test_start_set_get_stop_frees_port_and_tmpdir() -> None:
    server = RedisServer(maxmemory="64mb").start()
    try:
        port = server.port
        assert port is not None and server.running
        assert server.url == f"redis://127.0.0.1:{port}/0"
        tmpdir = server._tmpdir
        assert tmpdir is not None and tmpdir.is_dir()

        client = redis.Redis.from_url(server.url)
        try:
            assert client.set("metastore:test", b"value")
            assert client.get("metastore:test") == b"value"
            config = client.config_get("*")
            assert config["bind"] == "127.0.0.1"
            assert config["protected-mode"] == "yes"
            assert config["save"] == ""
            assert config["appendonly"] == "no"
            assert config["maxmemory"] == str(64 * 1024 * 1024)
            assert config["maxmemory-policy"] == "noeviction"
        finally:
            client.close()
    finally:
        server.stop()

    assert not server.running
    assert server.pid is None
    assert not tmpdir.exists()
    assert _port_is_free(port)
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)).ping()
    server.stop()  # idempotent


def test_context_manager_and_two_servers_side_by_side() -> None:
    with RedisServer() as a, RedisServer() as b:
        assert a.port != b.port
        ca, cb = redis.Redis.from_url(a.url), redis.Redis.from_url(b.url)
        ca.set("k", "a")
        assert cb.get("k") is None
        ca.close()
        cb.close()
        ports = (a.port, b.port)
    assert all(_port_is_free(p) for p in ports)


def test_bogus_binary_raises_service_error(tmp_path: Path) -> None:
    bogus = str(tmp_path / "no-such-redis-server")
    with pytest.raises(ServiceError) as info:
        RedisServer(binary=bogus).start()
    assert bogus in str(info.value)
    assert "scripts/bootstrap.sh" in str(info.value)


def test_server_that_dies_at_startup_reports_log_tail() -> None:
    # redis-server rejects this option value and exits straight away.
    server = RedisServer(maxmemory_policy="not-a-policy")
    with pytest.raises(ServiceError) as info:
        server.start()
    message = str(info.value)
    assert server.binary in message
    assert "not-a-policy" in message or "FATAL" in message
    assert not server.running


def test_binary_that_never_answers_times_out(tmp_path: Path) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'pretending to start'\nexec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    server = RedisServer(binary=str(fake), startup_timeout=0.5)
    with pytest.raises(ServiceError) as info:
        server.start()
    message = str(info.value)
    assert str(fake) in message and "did not answer PING" in message
    assert "pretending to start" in message
    assert not server.running


def test_find_redis_server_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("engine.redis_server._FALLBACK_LOCATIONS", ())
    with pytest.raises(ServiceError, match="scripts/bootstrap.sh"):
        find_redis_server()


def test_find_redis_server_honours_explicit_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REDIS_SERVER_ENV, str(tmp_path / "missing"))
    with pytest.raises(ServiceError, match=REDIS_SERVER_ENV):
        find_redis_server()
    monkeypatch.delenv(REDIS_SERVER_ENV)
    real = find_redis_server()
    monkeypatch.setenv(REDIS_SERVER_ENV, real)
    monkeypatch.setenv("PATH", str(tmp_path))  # the explicit path wins even without PATH
    assert find_redis_server() == real


def test_connect_or_start_starts_private_server() -> None:
    url, handle = connect_or_start(maxmemory="32mb")
    try:
        assert handle is not None and handle.running
        assert url == handle.url
        assert redis.Redis.from_url(url).ping()
    finally:
        assert handle is not None
        handle.stop()


def test_connect_or_start_uses_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with RedisServer() as existing:
        monkeypatch.setenv(REDIS_URL_ENV, existing.url)
        url, handle = connect_or_start()
        assert handle is None
        assert url == existing.url


def test_connect_or_start_unreachable_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connection refused
        monkeypatch.setenv(REDIS_URL_ENV, f"redis://:s3cret@127.0.0.1:{port}/0")
        with pytest.raises(ServiceError) as info:
            connect_or_start()
    assert "does not answer PING" in str(info.value)
    assert "s3cret" not in str(info.value)


# ---------------------------------------------------------------- a server other nodes reach
def _cluster_address() -> str:
    """This machine's address other machines would use (not loopback)."""
    import ray.util

    host = ray.util.get_node_ip_address()
    assert not host.startswith("127."), "the test needs a non-loopback address"
    return host


def test_a_server_off_loopback_refuses_a_client_without_the_password() -> None:
    host = _cluster_address()
    password = generate_password()
    with RedisServer(host=host, password=password, maxmemory="32mb") as server:
        assert server.url == f"redis://:{password}@{host}:{server.port}/0"
        no_password = redis.Redis(host=host, port=server.port, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.exceptions.AuthenticationError):
            no_password.ping()
        wrong = redis.Redis(host=host, port=server.port, password="guess", socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.exceptions.AuthenticationError):
            wrong.ping()
        client = redis.Redis.from_url(server.url)
        assert client.ping()
        assert client.config_get("bind")["bind"] == host
        assert client.config_get("requirepass")["requirepass"] == password
        # the password reached the server on its stdin, never on its command line (ps shows that)
        with open(f"/proc/{server.pid}/cmdline", "rb") as f:
            assert password.encode() not in f.read()


def test_a_server_off_loopback_without_a_password_is_refused() -> None:
    with pytest.raises(ServiceError, match="needs a password"):
        RedisServer(host=_cluster_address())


def test_check_reachable_names_the_problem_in_one_line_without_the_password() -> None:
    password = generate_password()
    with RedisServer(host=_cluster_address(), password=password, maxmemory="32mb") as server:
        check_reachable(server.url)  # fine: no exception
        bare = server.url.replace(f":{password}@", "")
        with pytest.raises(ServiceError, match="requires a password, and the URL has none") as info:
            check_reachable(bare)
        wrong = server.url.replace(password, "guess")
        with pytest.raises(ServiceError, match="wrong user name or password") as info2:
            check_reachable(wrong, "REDIS_URL")
        assert "REDIS_URL" in str(info2.value) and "guess" not in str(info2.value)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connection refused
        with pytest.raises(ServiceError, match="Connection refused") as info3:
            check_reachable(f"redis://:s3cret@127.0.0.1:{port}/0")
    with pytest.raises(ServiceError, match="not a valid Redis URL"):
        check_reachable("http://127.0.0.1:6379")
    for e in (info, info2, info3):
        assert "\n" not in str(e.value) and password not in str(e.value) and "s3cret" not in str(e.value)
