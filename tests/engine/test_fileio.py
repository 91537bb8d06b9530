from __future__ import annotations

import os
import pickle
import stat
import threading
import uuid
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from engine import fileio
from engine.exceptions import InvalidArgumentError, MetastoreError

# ----------------------------------------------------------------------------- resolution


def test_resolve_local_forms(tmp_path: Path) -> None:
    fs, path = fileio.resolve(str(tmp_path))
    assert isinstance(fs, pafs.LocalFileSystem)
    assert path == str(tmp_path)
    assert fileio.resolve(f"file://{tmp_path}") == (fs, str(tmp_path))
    assert fileio.resolve(f"file://localhost{tmp_path}")[1] == str(tmp_path)
    # Relative paths become absolute: Arrow and worker processes must not depend on the cwd.
    assert fileio.resolve("some/relative")[1] == os.path.abspath("some/relative")
    # Filesystems are cached per process.
    assert fileio.resolve(str(tmp_path))[0] is fs


def test_resolve_keeps_percent_signs_literally(tmp_path: Path) -> None:
    # Hive folders contain literal '%XX' on disk; decoding would address another file.
    assert fileio.resolve(f"file://{tmp_path}/s=a%2Fb")[1] == f"{tmp_path}/s=a%2Fb"


def test_resolve_rejects_unusable_uris() -> None:
    with pytest.raises(InvalidArgumentError):
        fileio.resolve("")
    with pytest.raises(InvalidArgumentError, match="bucket"):
        fileio.resolve("s3:///key")
    with pytest.raises(InvalidArgumentError, match="remote"):
        fileio.resolve("file://remote/tmp/x")
    assert issubclass(InvalidArgumentError, MetastoreError)


def test_s3_filesystem_follows_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # No request is made: S3FileSystem connects lazily.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    fs1, path = fileio.resolve("s3://bkt/some/key/")
    assert isinstance(fs1, pafs.S3FileSystem)
    assert path == "bkt/some/key"
    assert fileio.resolve("s3a://other/x")[0] is fs1  # one client per endpoint, not per bucket
    assert fileio.resolve("s3://bkt")[1] == "bkt"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:2")  # the service-specific one wins
    fs2, _ = fileio.resolve("s3://bkt/key")
    assert fs2 is not fs1
    options = pickle.loads(pickle.dumps(fs2)).__reduce__()[1][0]
    assert (options["endpoint_override"], options["scheme"]) == ("127.0.0.1:2", "http")


def test_join_keeps_scheme() -> None:
    assert fileio.join("s3://b/t", "a=1", "f.parquet") == "s3://b/t/a=1/f.parquet"
    assert fileio.join("s3://b/t/", "/a=1/") == "s3://b/t/a=1"
    assert fileio.join("s3://", "b", "k") == "s3://b/k"
    assert fileio.join("file:///tmp/x", "y") == "file:///tmp/x/y"
    assert fileio.join("/tmp/x", "", "y") == "/tmp/x/y"
    assert fileio.join("/", "tmp") == "/tmp"
    assert fileio.join("rel", "a") == "rel/a"


def test_is_local() -> None:
    assert fileio.is_local("/tmp/x")
    assert fileio.is_local("file:///tmp/x")
    assert fileio.is_local("relative/path")
    assert not fileio.is_local("s3://b/k")


# ----------------------------------------------------------------------------- local operations


def test_local_read_write_list_delete(tmp_path: Path) -> None:
    root = f"file://{tmp_path}/table"
    assert not fileio.exists(root)
    fileio.write_bytes(fileio.join(root, "a=1", "f1.bin"), b"one")  # parents are created
    fileio.write_bytes(fileio.join(root, "a=2", "f2.bin"), b"three")
    fileio.makedirs(fileio.join(root, "a=3"))
    with fileio.open_output(fileio.join(root, "top.bin")) as out:
        out.write(b"xy")
    assert fileio.exists(root)
    assert fileio.exists(fileio.join(root, "a=3"))
    assert fileio.read_bytes(fileio.join(root, "a=2", "f2.bin")) == b"three"
    with fileio.open_input(fileio.join(root, "a=1", "f1.bin")) as f:
        assert f.size() == 3
        f.seek(1)
        assert f.read() == b"ne"

    entries = fileio.list_files(root)
    assert [e.uri for e in entries] == [
        f"file://{tmp_path}/table/a=1/f1.bin",
        f"file://{tmp_path}/table/a=2/f2.bin",
        f"file://{tmp_path}/table/top.bin",
    ]
    assert [e.path for e in entries] == [e.uri[len("file://") :] for e in entries]
    assert [e.size for e in entries] == [3, 5, 2]
    assert all(isinstance(e.mtime_ns, int) and e.mtime_ns > 0 for e in entries)
    assert [e.uri for e in fileio.list_files(root, recursive=False)] == [f"file://{tmp_path}/table/top.bin"]
    # Plain paths stay plain paths.
    assert fileio.list_files(str(tmp_path / "table" / "a=1"))[0].uri == str(tmp_path / "table" / "a=1" / "f1.bin")
    with pytest.raises(FileNotFoundError):
        fileio.list_files(fileio.join(root, "missing"))

    fileio.delete_dir(root)
    assert not fileio.exists(root)
    fileio.delete_dir(root)  # missing_ok by default
    with pytest.raises(FileNotFoundError):
        fileio.delete_dir(root, missing_ok=False)


def test_write_bytes_atomic_local(tmp_path: Path) -> None:
    target = str(tmp_path / "pointers" / "current")
    fileio.write_bytes_atomic(target, b"v1")
    fileio.write_bytes_atomic(target, b"v2")
    assert fileio.read_bytes(target) == b"v2"
    assert os.listdir(tmp_path / "pointers") == ["current"]  # no temporary file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~umask


def test_write_bytes_atomic_readers_never_see_partial_content(tmp_path: Path) -> None:
    target = str(tmp_path / "pointer")
    payloads = [bytes([i]) * (256 * 1024) for i in range(1, 5)]
    fileio.write_bytes_atomic(target, payloads[0])
    stop = threading.Event()
    seen: list[bytes] = []

    def read_loop() -> None:
        while not stop.is_set():
            data = fileio.read_bytes(target)
            if data not in payloads:
                seen.append(data)

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for i in range(60):
            fileio.write_bytes_atomic(target, payloads[i % len(payloads)])
    finally:
        stop.set()
        reader.join()
    assert seen == []


def test_write_bytes_atomic_cleans_up_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "as_dir"
    target.mkdir()
    (target / "child").write_bytes(b"x")  # os.replace onto a non-empty directory fails
    with pytest.raises(OSError):
        fileio.write_bytes_atomic(str(target), b"data")
    assert sorted(os.listdir(tmp_path)) == ["as_dir"]


def test_filesystems_pickle_and_share(tmp_path: Path) -> None:
    fs, _ = fileio.resolve(str(tmp_path))
    clone = pickle.loads(pickle.dumps(fs))
    assert clone is not fs
    assert fileio.share(clone) is fs


# ----------------------------------------------------------------------------- S3


def test_s3_operations(s3_server: str) -> None:
    root = f"s3://bucket/fileio-{uuid.uuid4().hex[:8]}"
    fs, path = fileio.resolve(root)
    assert isinstance(fs, pafs.S3FileSystem)
    assert not fileio.exists(root)
    fileio.write_bytes(fileio.join(root, "a=1", "f.bin"), b"abc")
    fileio.write_bytes_atomic(fileio.join(root, "pointer"), b"p1")
    fileio.write_bytes_atomic(fileio.join(root, "pointer"), b"p2")
    fileio.makedirs(fileio.join(root, "a=2"))
    assert fileio.exists(root)
    assert fileio.read_bytes(fileio.join(root, "pointer")) == b"p2"
    entries = fileio.list_files(root)
    assert [(e.uri, e.size) for e in entries] == [(f"{root}/a=1/f.bin", 3), (f"{root}/pointer", 2)]
    assert entries[0].path == f"{path}/a=1/f.bin"
    with fileio.open_input(fileio.join(root, "a=1", "f.bin")) as f:
        assert f.read() == b"abc"
    fileio.delete_dir(root)
    assert not fileio.exists(root)
    fileio.delete_dir(root)
    # A pickled S3 filesystem (as shipped to a Ray worker) folds back into the cache.
    assert fileio.share(pickle.loads(pickle.dumps(fs))) is fs
