"""How a job reaches Redis: `--redis URL`, else REDIS_URL, else a server of its own
(on loopback on one node; on the node's cluster address with a password when Ray
has several nodes); an unusable URL fails the job before any task starts; TLS URLs.

The multi-node placement itself is tested on a real Ray cluster (tests/cluster).
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray
import redis
from click.testing import CliRunner
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.cli.console import metastore
from engine.exceptions import ServiceError
from engine.frequencies.coordinator import MonostoreActor, placement
from engine.redis_server import find_redis_server, generate_password
from engine.runtime import analyze as analyze_module


def _closed_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
    return sock, sock.getsockname()[1]


@pytest.fixture
def no_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any job that gets as far as starting fails the test: the check must come first."""

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the job started")

    monkeypatch.setattr(analyze_module, "run_job", started)
    monkeypatch.delenv("REDIS_URL", raising=False)


def test_an_unreachable_redis_url_fails_before_any_task(sample_table: str, tmp_path: Path, no_job: None) -> None:
    from engine.api import analyze

    sock, port = _closed_port()
    with sock:
        with pytest.raises(ServiceError) as info:
            analyze(sample_table, str(tmp_path / "store"), frequencies="redis", redis_url=f"redis://:s3cret@127.0.0.1:{port}/0")
    text = str(info.value)
    assert f"--redis redis://:***@127.0.0.1:{port}/0" in text and "Connection refused" in text
    assert "s3cret" not in text and "\n" not in text
    assert not (tmp_path / "store").exists(), "nothing written"


def test_redis_url_from_the_environment_is_checked_and_named(
    sample_table: str, tmp_path: Path, no_job: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, port = _closed_port()
    with sock:
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
        result = CliRunner().invoke(metastore, ["--store", str(tmp_path / "store"), "analyze", sample_table, "--frequencies", "redis"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert f"REDIS_URL redis://127.0.0.1:{port}/0" in lines[0]
    # the reduce strategy never needs Redis: REDIS_URL is not even looked at
    ran = SimpleNamespace(timings={})
    monkeypatch.setattr(analyze_module, "run_job", lambda *args, **kwargs: ran)
    monkeypatch.setattr(analyze_module, "ensure_ray", lambda: 0.0)
    from engine.runtime.analyze import analyze_source
    from engine.sources import open_table

    assert analyze_source(open_table(sample_table), str(tmp_path / "store")) is ran


def test_the_option_wins_over_the_environment(sample_table: str, tmp_path: Path, no_job: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.api import analyze

    sock, port = _closed_port()
    with sock:
        monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
        with pytest.raises(ServiceError, match=f"--redis redis://127.0.0.1:{port}/0"):
            analyze(sample_table, str(tmp_path / "store"), frequencies="redis", redis_url=f"redis://127.0.0.1:{port}/0")


def test_one_node_places_the_coordinator_anywhere_on_loopback(ray_runtime: None) -> None:
    assert placement() == ({}, False)


def test_a_cluster_coordinator_listens_on_the_node_address_with_a_password(ray_runtime: None) -> None:
    """What the coordinator does when the job spans nodes (forced here on one node)."""
    actor = MonostoreActor.remote(None, maxmemory="32mb", cluster=True)
    try:
        info = ray.get(actor.info.remote())
        url = redis.connection.parse_url(info["url"])
        assert url["host"] == ray.util.get_node_ip_address() and not url["host"].startswith("127.")
        assert len(url["password"]) == 64
        assert info["redacted_url"] == f"redis://:***@{url['host']}:{url['port']}/0"
        assert info["node_id"] == ray.get_runtime_context().get_node_id()
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(host=url["host"], port=url["port"], socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)).ping()
        assert redis.Redis.from_url(info["url"]).ping()
    finally:
        ray.get(actor.shutdown.remote())
        ray.kill(actor)


# ---------------------------------------------------------------- TLS
@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory):
    """A real redis-server on TLS only (a self-signed certificate for 127.0.0.1) with a password: its rediss:// URL."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"),
         "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    password = generate_password()
    proc = subprocess.Popen(
        [find_redis_server(), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--tls-cert-file", str(d / "cert.pem"),
         "--tls-key-file", str(d / "key.pem"), "--tls-ca-cert-file", str(d / "cert.pem"), "--tls-auth-clients", "no",
         "--save", "", "--appendonly", "no", "--dir", str(d), "-"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(f'requirepass "{password}"\n'.encode())
    proc.stdin.close()
    url = f"rediss://:{password}@127.0.0.1:{port}/0?ssl_ca_certs={d / 'cert.pem'}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                if redis.Redis.from_url(url, socket_connect_timeout=1).ping():
                    break
            except redis.exceptions.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_redis_strategy_over_tls_with_a_password(tls_redis: str, sample_table: str, analyzed_sample, tmp_path: Path) -> None:
    """Both connections of the algorithm (redis-py, and the raw RESP pipelines of the
    partition tasks) take TLS and the password from the one URL; a plain-text client is refused."""
    import pyarrow.parquet as pq

    from engine.api import analyze

    plain = tls_redis.replace("rediss://", "redis://").split("?")[0]
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(plain, socket_connect_timeout=2, socket_timeout=2, retry=Retry(NoBackoff(), 0)).ping()
    result = analyze(sample_table, str(tmp_path / "store"), frequencies="redis", redis_url=tls_redis, user_statistics=[])
    assert result.frequencies and {r["scenario"] for r in result.frequencies.values()} >= {"bloom", "hash"}
    assert all(r["attempts"] == 1 for r in result.frequencies.values())
    _, reduced_store, reduced = analyzed_sample
    ours = pq.read_table(Path(result.run_uri) / "table" / "frequencies.parquet")
    theirs = pq.read_table(Path(reduced.run_uri) / "table" / "frequencies.parquet")
    assert ours.sort_by([("column", "ascending")]).equals(theirs.sort_by([("column", "ascending")]))
    assert redis.Redis.from_url(tls_redis).keys("metastore:*") == []
