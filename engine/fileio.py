"""A small FileIO over ``pyarrow.fs``, modelled on pyiceberg's ``pyiceberg/io``.

Everything else in Metastore names locations by URI (a local path, ``file://``,
``s3://bucket/key``) and goes through this module, so that the choice of
filesystem, its configuration and its reuse live in one place.

Filesystems are cached per process, keyed by scheme and authority/endpoint (and,
for S3, the configuration read from the environment), because creating an S3
client is expensive while reusing one keeps its connection pool warm. The cache
is cleared in a forked child: a client is never shared across processes. Inside
a Ray worker nothing needs to be shipped: the module is imported by reference
and rebuilds its filesystems on first use; a filesystem that *was* pickled (a
TableSource carries its own, so workers use the driver's configuration) can be
folded back into the cache with :func:`share`.

URI paths are taken literally (no percent-decoding, as in pyiceberg): Hive
partition folders such as ``s=a%2Fb`` contain a literal ``%`` on disk and in the
object key, and decoding them here would address a different object.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from engine import config
from engine.exceptions import InvalidArgumentError

__all__ = [
    "FileEntry",
    "canonical",
    "delete_dir",
    "exists",
    "fsync_dir",
    "is_local",
    "is_within",
    "join",
    "list_files",
    "makedirs",
    "open_input",
    "open_output",
    "read_bytes",
    "resolve",
    "share",
    "write_bytes",
    "write_bytes_atomic",
]

_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_LOCAL_SCHEMES = frozenset({"", "file"})


@dataclass(frozen=True)
class FileEntry:
    """One file found by :func:`list_files`.

    ``path`` is what the resolved filesystem understands (``bucket/key`` on S3),
    ``uri`` keeps the caller's scheme so it can be passed back to this module.
    """

    uri: str
    path: str
    size: int
    mtime_ns: int | None


# --------------------------------------------------------------------------- cache

_lock = threading.Lock()
_cache: dict[tuple[object, ...], Any] = {}


def _clear_cache_after_fork() -> None:
    # A forked child must not reuse the parent's S3 client (its sockets and
    # threads did not survive the fork); the lock may have been held at fork time.
    global _lock
    _lock = threading.Lock()
    _cache.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_clear_cache_after_fork)


def _cached(key: tuple[object, ...], factory: Callable[[], object]) -> Any:
    """One client per configuration per process: pyarrow filesystems, and the boto3
    client of what pyarrow does not do (conditional puts, ETags): one cache, one fork handler."""
    with _lock:
        fs = _cache.get(key)
        if fs is None:
            fs = factory()
            _cache[key] = fs
        return fs


def s3_client() -> Any:
    """A boto3 S3 client configured like the S3 filesystem (same environment, same cache)."""
    key = _s3_filesystem_key()
    return _cached(("boto3",) + key[1:], lambda: _make_boto3(key))


def _make_boto3(key: tuple[object, ...]) -> Any:
    import boto3
    from botocore.config import Config

    _, endpoint, region, access_key, secret_key, token = key
    kwargs: dict[str, object] = {"config": Config(retries={"max_attempts": 4, "mode": "standard"}, max_pool_connections=32)}
    if endpoint:
        kwargs["endpoint_url"] = endpoint if "://" in str(endpoint) else f"https://{endpoint}"
    if region:
        kwargs["region_name"] = region
    if access_key:
        kwargs["aws_access_key_id"] = access_key
        kwargs["aws_secret_access_key"] = secret_key
        if token:
            kwargs["aws_session_token"] = token
    return boto3.session.Session().client("s3", **kwargs)


def share(fs: pafs.FileSystem) -> pafs.FileSystem:
    """Return the cached filesystem equal to ``fs`` (or cache ``fs`` itself).

    An unpickled filesystem is a fresh client; folding it into the cache lets every
    task a worker runs reuse one client instead of building one per task.
    """
    with _lock:
        for cached in _cache.values():
            if type(cached) is type(fs) and cached.equals(fs):
                return cached
        _cache[("shared", len(_cache), id(fs))] = fs
        return fs


# --------------------------------------------------------------------------- resolution


def _s3_filesystem_key() -> tuple[object, ...]:
    """The S3 configuration taken from the environment, as a hashable cache key.

    The key includes credentials so that a changed environment (tests, a rotated
    key) gets a new client instead of silently reusing the old one.
    """
    endpoint = config.get(config.AWS_ENDPOINT_URL_S3, config.AWS_ENDPOINT_URL)
    region = config.get(config.AWS_REGION, config.AWS_DEFAULT_REGION)
    if endpoint and not region:
        # An S3-compatible server has no region to discover; without one the SDK
        # may probe the EC2 metadata service and stall.
        region = "us-east-1"
    access_key = config.get(config.AWS_ACCESS_KEY_ID)
    secret_key = config.get(config.AWS_SECRET_ACCESS_KEY)
    token = config.get(config.AWS_SESSION_TOKEN)
    if not (access_key and secret_key):
        access_key = secret_key = token = None  # leave it to the SDK's credential chain
    return ("s3", endpoint, region, access_key, secret_key, token)


def _make_s3(key: tuple[object, ...]) -> pafs.FileSystem:
    _, endpoint, region, access_key, secret_key, token = key
    kwargs: dict[str, object] = {}
    if endpoint:
        parts = urlsplit(str(endpoint)) if "://" in str(endpoint) else None
        if parts is not None:
            kwargs["scheme"] = parts.scheme
            kwargs["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        else:
            kwargs["endpoint_override"] = endpoint
    if region:
        kwargs["region"] = region
    if access_key:
        kwargs["access_key"] = access_key
        kwargs["secret_key"] = secret_key
        if token:
            kwargs["session_token"] = token
    # Defers CreateMultipartUpload until a stream outgrows one part, so a small
    # object (a pointer file, a statistics file) is one PutObject: fewer round
    # trips, and visibly all-or-nothing. Open errors then surface on close().
    kwargs["allow_delayed_open"] = True
    return pafs.S3FileSystem(**kwargs)


def _scheme(uri: str) -> str:
    if "://" not in uri and not uri.startswith("file:"):
        return ""
    scheme = urlsplit(uri).scheme.lower()
    # "C:\\data" parses with scheme "c"; a one-letter scheme is a drive letter.
    return "" if len(scheme) <= 1 else scheme


def is_local(uri: str) -> bool:
    """True for plain paths and ``file://`` URIs."""
    return _scheme(uri) in _LOCAL_SCHEMES


def _local_path(uri: str) -> str:
    if _scheme(uri) == "file":
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError(f"{uri}: file:// URIs must name a local path (host {parts.netloc!r})")
        path = parts.path or "/"
    else:
        path = uri
    return os.path.abspath(path)


def _s3_path(uri: str) -> str:
    """``bucket/key`` of an S3 URI, as the S3 filesystem is given it."""
    parts = urlsplit(uri)
    if not parts.netloc:
        raise InvalidArgumentError(f"{uri}: an S3 URI needs a bucket (s3://bucket/key)")
    return (parts.netloc + "/" + parts.path.lstrip("/")).rstrip("/")


def canonical(uri: str) -> str:
    """One spelling of the location ``uri`` names, for comparing locations and checking containment.

    Built from the paths :func:`resolve` hands the filesystem, so a check on it is a
    check on what a reader opens: a local path or ``file:`` URI (``file:/x``,
    ``file:///x``, ``file://localhost/x``) becomes the absolute path with ``..`` applied
    and symlinks resolved; ``s3``/``s3a``/``s3n`` become ``s3://bucket/key``. Object-store
    and other remote locations with ``.`` or ``..`` segments are refused: their
    filesystems take them literally or not, and a containment check must not guess.
    Creates no filesystem and touches no remote service.
    """
    if not uri:
        raise InvalidArgumentError("empty URI")
    scheme = _scheme(uri)
    if scheme in _LOCAL_SCHEMES:
        return os.path.realpath(_local_path(uri))
    if scheme in _S3_SCHEMES:
        path = _s3_path(uri)
        location = "s3://" + path
    else:
        parts = urlsplit(uri)
        path = parts.path.rstrip("/")
        location = f"{scheme}://{parts.netloc}{path}"
    if any(segment in (".", "..") for segment in path.split("/")):
        raise InvalidArgumentError(f"{uri}: '.' and '..' segments are not allowed in a remote location")
    return location


def is_within(location: str, root: str) -> bool:
    """Whether canonical ``location`` is ``root`` or below it (both from :func:`canonical`)."""
    return location == root or location.startswith(root.rstrip("/") + "/")


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """The cached filesystem for ``uri`` and the path that filesystem understands."""
    if not uri:
        raise InvalidArgumentError("empty URI")
    scheme = _scheme(uri)
    if scheme in _LOCAL_SCHEMES:
        return _cached(("file",), pafs.LocalFileSystem), _local_path(uri)
    if scheme in _S3_SCHEMES:
        path = _s3_path(uri)
        key = _s3_filesystem_key()
        fs = _cached(key, lambda: _make_s3(key))
        return fs, path
    # Anything else (gs://, hdfs://, abfs://, ...): let Arrow configure it, once per authority.
    parts = urlsplit(uri)
    fs = _cached((scheme, parts.netloc), lambda: pafs.FileSystem.from_uri(uri)[0])
    if _bucket_style(scheme, parts.netloc, uri):
        path = parts.netloc + "/" + parts.path.lstrip("/")
    else:
        path = parts.path or "/"
    return fs, path.rstrip("/") or path


_bucket_styles: dict[tuple[str, str], bool] = {}


def _bucket_style(scheme: str, netloc: str, uri: str) -> bool:
    """Whether Arrow puts the authority into the path (gs://bucket/key) or not (hdfs://host:port/path)."""
    key = (scheme, netloc)
    if key not in _bucket_styles:
        _, path = pafs.FileSystem.from_uri(uri)
        _bucket_styles[key] = bool(netloc) and path.lstrip("/").startswith(netloc)
    return _bucket_styles[key]


def _to_uri(like: str, path: str) -> str:
    """The URI of ``path`` on the filesystem that ``like`` resolved to, in ``like``'s style."""
    scheme = _scheme(like)
    if scheme == "":
        return path
    if scheme == "file":
        return "file://" + path
    if scheme in _S3_SCHEMES:
        return f"{scheme}://{path}"
    netloc = urlsplit(like).netloc
    if _bucket_style(scheme, netloc, like):
        return f"{scheme}://{path}"
    return f"{scheme}://{netloc}/{path.lstrip('/')}"


# --------------------------------------------------------------------------- operations


def join(uri: str, *parts: str) -> str:
    """Append path components to ``uri``, keeping its scheme (``s3://b/t`` + ``a=1`` -> ``s3://b/t/a=1``)."""
    out = uri
    for part in parts:
        part = part.strip("/")
        if not part:
            continue
        out = out + part if out.endswith("/") else out + "/" + part
    return out


def exists(uri: str) -> bool:
    """Whether a file or directory (on S3: any object under the prefix) exists at ``uri``."""
    fs, path = resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def list_files(uri: str, recursive: bool = True) -> list[FileEntry]:
    """The files (not directories) under ``uri``, sorted by path.

    Raises FileNotFoundError if ``uri`` does not exist: an empty listing and a
    missing location mean different things to callers.
    """
    fs, path = resolve(uri)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=recursive, allow_not_found=False))
    entries = [
        FileEntry(uri=_to_uri(uri, i.path), path=i.path, size=int(i.size or 0), mtime_ns=i.mtime_ns) for i in infos if i.type == pafs.FileType.File
    ]
    entries.sort(key=lambda e: e.path)
    return entries


def open_input(uri: str) -> pa.NativeFile:
    """A random-access file (what Parquet readers need: the footer is at the end)."""
    fs, path = resolve(uri)
    return fs.open_input_file(path)


def open_output(uri: str) -> pa.NativeFile:
    """A write stream; on local disk the parent directories are created first."""
    fs, path = resolve(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    return fs.open_output_stream(path)


def read_bytes(uri: str) -> bytes:
    fs, path = resolve(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def read_buffer(uri: str) -> pa.Buffer:
    """A whole file as an Arrow buffer: memory-mapped on local disk (no copy: the large partial
    states and table counts are read through the page cache), read into memory elsewhere."""
    fs, path = resolve(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        with pa.memory_map(path, "r") as f:
            return f.read_buffer()
    with fs.open_input_stream(path) as f:
        return f.read_buffer()


def write_bytes(uri: str, data: bytes) -> None:
    with open_output(uri) as f:
        f.write(data)


def write_bytes_atomic(uri: str, data: bytes) -> None:
    """Write ``data`` so that readers see either the old object or the whole new one.

    This is how a pointer file is published. On local disk the bytes go to a
    hidden temporary file in the same directory (same filesystem, so the rename
    is atomic), are fsync'ed, and replace the target with ``os.replace``; the
    directory is fsync'ed so the rename survives a crash. On S3 (and other object
    stores) an object becomes visible only when its upload completes - a single
    PUT, or the completion of a multipart upload - so a plain write is atomic.
    """
    fs, path = resolve(uri)
    if not isinstance(fs, pafs.LocalFileSystem):
        with fs.open_output_stream(path) as f:
            f.write(data)
        return
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    # Hidden name so a table listing never picks it up; O_EXCL + mode 0o666 so the
    # result gets the usual umask permissions (mkstemp would force 0600).
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    """Make a directory's entries durable (a new or renamed file's name); best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def delete_dir(uri: str, missing_ok: bool = True) -> None:
    """Delete a directory (on S3: every object under the prefix) and its contents."""
    fs, path = resolve(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        if missing_ok:
            return
        raise FileNotFoundError(uri)
    fs.delete_dir(path)


def makedirs(uri: str) -> None:
    """Create ``uri`` and its parents (on S3 this writes empty directory marker objects)."""
    fs, path = resolve(uri)
    fs.create_dir(path, recursive=True)


def object_store_options(uri: str) -> dict[str, str]:
    """The S3 configuration of :func:`resolve`, as the options the Rust table libraries
    (delta-rs, hudi-rs: the ``object_store`` crate's keys) take, so that every reader of
    a table talks to the same endpoint with the same credentials; {} for local paths."""
    if _scheme(uri) not in _S3_SCHEMES:
        return {}
    _, endpoint, region, access_key, secret_key, token = _s3_filesystem_key()
    out: dict[str, str] = {}
    if endpoint:
        out["AWS_ENDPOINT_URL"] = str(endpoint)
        if str(endpoint).startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    if region:
        out["AWS_REGION"] = str(region)
    if access_key:
        out["AWS_ACCESS_KEY_ID"] = str(access_key)
        out["AWS_SECRET_ACCESS_KEY"] = str(secret_key)
        if token:
            out["AWS_SESSION_TOKEN"] = str(token)
    return out


#: What the object store or an SDK says when it refuses a request's credentials (pyarrow's
#: AWS SDK, delta-rs's and hudi-rs's object_store crate, boto3).
_DENIED = ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "403 Forbidden", "status: 403")


def is_io_error(exc: BaseException) -> bool:
    """An error of talking to a file system or object store: pyarrow's (OSError) or boto3's."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] == "botocore"


def access_problem(uri: str) -> str | None:
    """Why the object store will not serve ``uri``, when credentials are the reason: none
    found, or ones it refuses; None when they are not the problem (or ``uri`` is local).

    For a table that failed to open: the table libraries report a refused or unsigned
    request each in their own words (delta-rs: "Generic S3 error"), so the store is asked
    once more, here, with the same configuration, and the answer named plainly."""
    if _scheme(uri) not in _S3_SCHEMES:
        return None
    _, _, _, access_key, _, _ = _s3_filesystem_key()
    if not access_key:
        try:
            import boto3

            found = boto3.Session().get_credentials() is not None  # profiles, SSO, an instance role...
        except Exception:  # noqa: BLE001 - a broken profile is no credentials either
            found = False
        if not found:
            return "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or run where an instance role applies)"
    try:
        fs, path = resolve(uri)
        fs.get_file_info(path)
    except OSError as exc:
        text = str(exc)
        if any(marker in text for marker in _DENIED):
            return (
                f"the object store refused the request (access denied: wrong credentials, or no permission): {text.splitlines()[0] if text else exc}"
            )
    return None


def pyiceberg_properties(uri: str) -> dict[str, str]:
    """The same configuration as pyiceberg FileIO properties (``s3.*``)."""
    opts = object_store_options(uri)
    names = {
        "AWS_ENDPOINT_URL": "s3.endpoint",
        "AWS_REGION": "s3.region",
        "AWS_ACCESS_KEY_ID": "s3.access-key-id",
        "AWS_SECRET_ACCESS_KEY": "s3.secret-access-key",
        "AWS_SESSION_TOKEN": "s3.session-token",
    }
    return {names[k]: v for k, v in opts.items() if k in names}
