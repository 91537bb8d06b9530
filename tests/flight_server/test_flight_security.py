"""The security model of the Flight server (docs/reference/FLIGHT.md#security-model), against real servers
on loopback: analyze off by default and confined to its roots however a location is spelled,
no publishing over another location's table, Ray that survives its jobs and is reported
truthfully, what health discloses."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pyarrow.flight as flight
import pytest
from flight_testkit import running_server, same, serve_process, strip

pytestmark = pytest.mark.ray


def _children(pid: int) -> dict[int, str]:
    """The child processes of ``pid`` (pid -> command name), from /proc."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                with open(f"/proc/{entry}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out[int(entry)] = comm
    return out


# ============================================================== item 1: Ray in `metastore serve`
def test_serve_runs_analyze_twice_reports_ray_truthfully_and_stops_cleanly(flight_data, tmp_path: Path) -> None:
    """The second analyze used to kill the server (Ray started from the first job's thread died
    with it); SIGTERM after an analyze exited 134. Token from the environment: not in `ps`."""
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    secret = "env-token-0123456789"
    store = tmp_path / "store"
    root = str(Path(flight_data.sales_path).parent)
    args = ["--store", str(store), "--analyze-root", root, "--poll-interval", "0"]
    with serve_process(args, env={"METASTORE_FLIGHT_TOKEN": secret}) as (proc, location, _):
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert secret.encode() not in f.read()
        with MetastoreClient(location, token=secret, timeout=120) as c:
            health = c.health()
            assert health["status"] == "ok" and health["analyze"]["ray"] == {"state": "running", "mode": "local", "problem": None}
            first = c.wait_analyze(c.analyze(flight_data.sales_path, name="sales"), timeout=600)
            assert first["state"] == "succeeded", first
            assert first["result"]["recomputed"] == 4
            # the first job's thread has ended; Ray must still be there for the second job
            second = c.wait_analyze(c.analyze(flight_data.sales_path, name="sales", inherit=False), timeout=600)
            assert second["state"] == "succeeded", second
            assert second["result"]["recomputed"] == 4 and proc.poll() is None
            oracle = open_statistics(str(store), "sales")
            assert oracle.job_id == second["result"]["job_id"] != first["result"]["job_id"]
            assert same(strip(c.statistics("sales", ["price", "city"])), oracle.statistics(["price", "city"]))
            health = c.health()
            assert health["status"] == "ok" and health["analyze"]["ray"]["state"] == "running"
            assert health["store"] == str(store) and health["analyze"]["roots"] == [os.path.realpath(root)]  # authenticated caller

            # Ray's raylet dies: health says so, analyze is refused, statistics are still served
            raylets = [pid for pid, name in _children(proc.pid).items() if name == "raylet"]
            assert len(raylets) == 1, _children(proc.pid)
            os.kill(raylets[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while (health := c.health())["status"] == "ok":
                assert time.monotonic() < deadline, health
                time.sleep(0.2)
            assert health["status"] == "degraded"
            assert health["analyze"]["ray"]["state"] == "down" and "raylet" in health["analyze"]["ray"]["problem"]
            with pytest.raises(flight.FlightServerError, match="analyze is unavailable: Ray's processes exited: .*raylet.*restart the server"):
                c.analyze(flight_data.sales_path, name="sales")
            assert c.statistics("sales", ["price"]).num_rows == 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        assert "stopped" in err


def test_help_names_the_safe_ways_to_pass_a_token() -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    text = " ".join(CliRunner().invoke(metastore, ["serve", "--help"]).output.split())
    assert "METASTORE_FLIGHT_TOKEN" in text and "--token-file" in text and "ps" in text
    assert "The analyze action is off unless --analyze-root" in text


# ============================================================== items 2 and 3: what analyze may read and publish
@pytest.fixture(scope="module")
def lake(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An analyze root holding two small tables, a symlink to a table outside it, a table with a
    file linked from outside, and a secret table outside the root."""
    from engine.sample import generate_table

    base = tmp_path_factory.mktemp("lake")
    root, outside = base / "root", base / "outside"
    generate_table(str(root / "tables" / "small"), rows=600, partitions=2, seed=1)
    generate_table(str(root / "tables" / "other"), rows=600, partitions=2, seed=2)
    generate_table(str(outside / "secret"), rows=600, partitions=2, seed=3)
    (root / "link_out").symlink_to(outside / "secret", target_is_directory=True)
    (root / "link_in").symlink_to(root / "tables" / "small", target_is_directory=True)
    shutil.copytree(root / "tables" / "small", root / "tables" / "with_link")
    part = sorted(p for p in (root / "tables" / "with_link").iterdir() if p.is_dir())[0]
    secret_file = next((outside / "secret" / part.name).glob("*.parquet"))
    (part / "smuggled.parquet").symlink_to(secret_file)
    return {"root": str(root), "outside": str(outside), "base": str(base)}


def test_analyze_is_off_unless_roots_are_named(flight_data, tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    with running_server(str(tmp_path / "store"), poll_interval=0) as server, MetastoreClient(server.location) as c:
        with pytest.raises(flight.FlightServerError, match=r"analyze is disabled on this server: .*--analyze-root") as info:
            c.analyze(flight_data.sales_path)
        assert json.loads(info.value.extra_info)["code"] == "job"
        health = c.health()
        assert health["analyze"] == {"enabled": False, "ray": None, "allow_source_change": False}
        assert "store" not in health  # no tokens: any local user may call health
    with running_server(str(tmp_path / "store"), poll_interval=0, health_store=True) as server, MetastoreClient(server.location) as c:
        assert c.health()["store"] == str(tmp_path / "store")
    roots = (str(Path(flight_data.sales_path).parent),)
    with running_server(str(tmp_path / "store"), poll_interval=0, analyze_roots=roots, allow_analyze=False) as server:
        with MetastoreClient(server.location) as c, pytest.raises(flight.FlightServerError, match=r"disabled on this server \(--no-analyze\)"):
            c.analyze(flight_data.sales_path)


def test_analyze_reads_only_under_its_roots_however_the_location_is_spelled(lake, tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    root, outside = lake["root"], lake["outside"]
    secret = f"{outside}/secret"
    refused = [
        (f"file:{secret}", "outside the locations"),
        (f"file://{secret}", "outside the locations"),
        (f"file://localhost{secret}", "outside the locations"),
        (secret, "outside the locations"),
        (f"{root}/../outside/secret", "outside the locations"),
        (f"file:{root}/tables/../../outside/secret", "outside the locations"),
        (f"{root}/link_out", "outside the locations"),  # a symlink out of the root
        (f"file:{root}/link_out/", "outside the locations"),
        (f"{root}/tables/with_link", "holds a symbolic link out of the locations"),  # a file linked from outside
        (os.path.relpath(secret), "outside the locations"),
        ("s3://bucket/lake/t", "outside the locations"),  # only local roots
        (f"file://otherhost{root}/tables/small", "must name a local path"),
        (lake["base"], "outside the locations"),  # the root's parent
    ]
    store = str(tmp_path / "store")
    with running_server(store, poll_interval=0, analyze_roots=(root,)) as server, MetastoreClient(server.location) as c:
        for uri, words in refused:
            with pytest.raises(flight.FlightServerError) as info:
                c.analyze(uri, name="probe")
            assert words in str(info.value), (uri, str(info.value))
            assert json.loads(info.value.extra_info)["code"] == "bad_request"
        assert c.tables().num_rows == 0 and server.jobs.list() == []  # nothing started

        # inside the root: every spelling is read at its canonical location
        status = c.wait_analyze(c.analyze(f"file:{root}/tables/../tables/small/", name="small"), timeout=600)
        assert status["state"] == "succeeded", status
        assert status["table_uri"] == f"{os.path.realpath(root)}/tables/small"
        assert status["result"]["rows"] == 600


def test_analyze_does_not_publish_over_a_table_from_another_location(lake, tmp_path: Path) -> None:
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    root = lake["root"]
    store = str(tmp_path / "store")
    with running_server(store, poll_interval=0, analyze_roots=(root,)) as server, MetastoreClient(server.location) as c:
        first = c.wait_analyze(c.analyze(f"{root}/tables/small", name="t"), timeout=600)
        assert first["state"] == "succeeded", first
        # another table under the same name: refused, and the table keeps its statistics
        with pytest.raises(flight.FlightServerError, match="table 't' holds the statistics of another location.*--allow-source-change") as info:
            c.analyze(f"{root}/tables/other", name="t")
        assert json.loads(info.value.extra_info)["code"] == "job"
        assert "tables/small" not in str(info.value)  # the other table's location is not disclosed
        assert open_statistics(store, "t").job_id == first["result"]["job_id"]
        # the same location spelled otherwise (a file: URI through a symlink inside the root) is the same table
        again = c.wait_analyze(c.analyze(f"file:{root}/link_in", name="t"), timeout=600)
        assert again["state"] == "succeeded" and again["result"]["inherited"] == 2, again
    with running_server(store, poll_interval=0, analyze_roots=(root,), allow_source_change=True) as server:
        with MetastoreClient(server.location) as c:
            assert c.health()["analyze"]["allow_source_change"] is True
            moved = c.wait_analyze(c.analyze(f"{root}/tables/other", name="t"), timeout=600)
            assert moved["state"] == "succeeded", moved
    assert open_statistics(store, "t").manifest["table_uri"] == f"{os.path.realpath(root)}/tables/other"


def test_object_store_roots_refuse_dot_segments_and_other_prefixes(ray_runtime: None, tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    with running_server(str(tmp_path / "store"), poll_interval=0, analyze_roots=("s3://bucket/lake",)) as server:
        with MetastoreClient(server.location) as c:
            for uri, words in [
                ("s3://bucket/lake/../secret/t", "'.' and '..' segments are not allowed"),
                ("s3://bucket/lake/./t", "'.' and '..' segments are not allowed"),
                ("s3://bucket/lakeside/t", "outside the locations"),
                ("s3://other/lake/t", "outside the locations"),
                (str(tmp_path), "outside the locations"),
                ("gs://bucket/lake/t", "outside the locations"),
            ]:
                with pytest.raises(flight.FlightServerError, match="bad request") as info:
                    c.analyze(uri, name="probe")
                assert words in str(info.value), (uri, str(info.value))
            assert server.jobs.list() == []


def test_canonical_locations_match_what_the_reader_opens(tmp_path: Path) -> None:
    """fileio.canonical against fileio.resolve (the reader's function) and os.path.realpath."""
    from engine import fileio

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    real = os.path.realpath(tmp_path / "real")
    for spelling in [f"{tmp_path}/real", f"file:{tmp_path}/real", f"file://{tmp_path}/real/", f"file://localhost{tmp_path}/link",
                     f"{tmp_path}/real/../link", f"file:{tmp_path}/x/../real"]:  # fmt: skip
        assert fileio.canonical(spelling) == real, spelling
        assert os.path.realpath(fileio.resolve(spelling)[1]) == real, spelling
    assert fileio.canonical("s3a://bucket/a/b/") == "s3://bucket/a/b"
    assert fileio.is_within("/a/b/c", "/a/b") and fileio.is_within("/a/b", "/a/b") and not fileio.is_within("/a/bc", "/a/b")
    assert fileio.is_within("/anything", "/")
