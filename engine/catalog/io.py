"""The object-store operations the catalog needs, with create-if-absent.

The catalog's only coordination primitive is "create this object unless it
exists, all or nothing". ``pyarrow.fs`` cannot express it (neither locally nor on
S3), so the catalog has its own small I/O layer:

- :class:`LocalCatalogIO`: the bytes go to a hidden temporary file in the same
  directory, are fsync'ed, and are published with ``os.link`` - which fails with
  ``EEXIST`` if the name exists (exclusive create, like ``open(path, "xb")``) and,
  unlike writing into an ``O_EXCL`` file, publishes the whole file at once, so a
  crash never leaves a torn transaction under its final name. Filesystems without
  hard links fall back to ``O_CREAT | O_EXCL`` (exclusive, but not crash-atomic).
- :class:`S3CatalogIO`: ``PutObject`` with ``If-None-Match: *`` through boto3 (S3
  answers 412 if the key exists; a single PUT is atomic). Lists with
  ``ListObjectsV2`` (1,000 keys per page), reads with ``GetObject``.

Every catalog read and write goes through one of these objects, so tests can wrap
one to count requests or to inject failures and crashes at the k-th write.
"""

from __future__ import annotations

import bisect
import errno
import os
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from engine import fileio
from engine.exceptions import InvalidArgumentError

__all__ = ["CatalogIO", "ListingMemoIO", "LocalCatalogIO", "S3CatalogIO", "io_for"]


class CatalogIO:
    """The interface (and shared helpers). URIs are in the caller's form (path or s3://)."""

    #: reads are worth issuing in parallel (a network round trip each)
    remote = False

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        """Base names of the objects directly in ``dir_uri``, sorted; [] if it does not exist.

        ``start_after``: only names sorting after it (a hint: an implementation may
        list everything, the caller filters).
        """
        raise NotImplementedError

    def relist(self, dir_uri: str) -> None:
        """Make the next :meth:`list_names` of ``dir_uri`` ask the store (an I/O that remembers
        listings, :class:`ListingMemoIO`, answers from memory otherwise; a plain one always asks)."""

    def read(self, uri: str) -> bytes:
        """The whole object; FileNotFoundError if it does not exist."""
        raise NotImplementedError

    def create(self, uri: str, data: bytes) -> None:
        """Create ``uri`` with ``data`` unless it exists (FileExistsError), all or nothing."""
        raise NotImplementedError

    def delete(self, uri: str) -> None:
        """Delete one object; a missing object is not an error."""
        raise NotImplementedError

    def list_files(self, dir_uri: str) -> list[fileio.FileEntry]:
        """Every file below ``dir_uri`` (recursive) with size and mtime; [] if it does not exist."""
        try:
            return fileio.list_files(dir_uri, recursive=True)
        except FileNotFoundError:
            return []

    def copy(self, src_uri: str, dst_uri: str) -> None:
        """Copy one object (used to keep a backup of a replaced catalog)."""
        self.create(dst_uri, self.read(src_uri))

    def read_many(self, uris: Sequence[str]) -> list[bytes | BaseException]:
        """Read several objects: each result is the bytes or the exception raised."""
        if len(uris) > 1 and self.remote:
            with ThreadPoolExecutor(max_workers=min(16, len(uris))) as pool:
                return list(pool.map(self._read_or_error, uris))
        return [self._read_or_error(u) for u in uris]

    def _read_or_error(self, uri: str) -> bytes | BaseException:
        try:
            return self.read(uri)
        except Exception as exc:  # noqa: BLE001 - handed back to the caller
            return exc


# --------------------------------------------------------------------------- one listing a pass


class ListingMemoIO(CatalogIO):
    """Wraps a CatalogIO for one publish and its retention pass: each directory is listed once.

    On S3 every listing is a LIST round trip (tens of ms, a page per 1,000 keys), and a publish
    listed ``transactions/`` 4 to 7 times and ``retention/`` 2 to 4 times (docs/reference/CATALOG.md,
    "Requests of a publish"; docs/PERFORMANCE.md). This I/O lists a directory on the first
    :meth:`list_names` and then answers from what it listed, kept current with every write made
    through it (a create, also one refused because the name exists, a delete, a copy). What
    it does not see are other writers' changes after its listing: the callers that must see
    them (a commit that lost its id, the gc after listing the runs) call :meth:`relist` first;
    for the others a listing a few milliseconds old is as good as a new one (see
    ``Catalog.refresh``). Reads and writes go to the store as they are.
    """

    def __init__(self, inner: CatalogIO) -> None:
        self.inner = inner
        self.remote = inner.remote
        self._names: dict[str, list[str]] = {}  # directory URI -> sorted names
        self._stale: set[str] = set()

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        key = dir_uri.rstrip("/")
        known = self._names.get(key)
        if known is None or key in self._stale:
            names = self.inner.list_names(dir_uri, start_after)
            self._stale.discard(key)
            if start_after is None:
                self._names[key] = list(names)
            elif known is not None:  # a listing of the names after start_after renews those
                self._names[key] = [n for n in known if n <= start_after] + [n for n in names if n > start_after]
            return names
        return [n for n in known if n > start_after] if start_after is not None else list(known)

    def relist(self, dir_uri: str) -> None:
        self._stale.add(dir_uri.rstrip("/"))
        self.inner.relist(dir_uri)

    def _noted(self, uri: str, present: bool | None) -> None:
        """Note a write's outcome: the name is there, is not, or (None: the write failed, it may
        have landed) unknown, and the next listing of its directory asks the store."""
        directory, _, name = uri.rstrip("/").rpartition("/")
        known = self._names.get(directory)
        if known is None:
            return
        if present is None:
            self._stale.add(directory)
            return
        i = bisect.bisect_left(known, name)
        there = i < len(known) and known[i] == name
        if present and not there:
            known.insert(i, name)
        elif not present and there:
            del known[i]

    def read(self, uri: str) -> bytes:
        return self.inner.read(uri)

    def create(self, uri: str, data: bytes) -> None:
        try:
            self.inner.create(uri, data)
        except FileExistsError:
            self._noted(uri, True)  # it exists: the next choice of a free name must know it
            raise
        except BaseException:
            self._noted(uri, None)
            raise
        self._noted(uri, True)

    def delete(self, uri: str) -> None:
        try:
            self.inner.delete(uri)
        except BaseException:
            self._noted(uri, None)
            raise
        self._noted(uri, False)

    def copy(self, src_uri: str, dst_uri: str) -> None:
        try:
            self.inner.copy(src_uri, dst_uri)
        except BaseException:
            self._noted(dst_uri, None)
            raise
        self._noted(dst_uri, True)

    def list_files(self, dir_uri: str) -> list[fileio.FileEntry]:
        return self.inner.list_files(dir_uri)

    def read_many(self, uris: Sequence[str]) -> list[bytes | BaseException]:
        return self.inner.read_many(uris)


# --------------------------------------------------------------------------- local


class LocalCatalogIO(CatalogIO):
    """A local directory. ``durable``: fsync files and directories (on by default)."""

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable

    @staticmethod
    def _path(uri: str) -> str:
        return fileio.resolve(uri)[1]

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        try:
            names = os.listdir(self._path(dir_uri))
        except (FileNotFoundError, NotADirectoryError):
            return []
        if start_after is not None:
            names = [n for n in names if n > start_after]
        names.sort()
        return names

    def read(self, uri: str) -> bytes:
        with open(self._path(uri), "rb") as f:
            return f.read()

    def create(self, uri: str, data: bytes) -> None:
        path = self._path(uri)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        if os.path.lexists(path):  # cheap early answer; the link below is what decides
            raise FileExistsError(errno.EEXIST, "exists", uri)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if self.durable:
                    f.flush()
                    os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic, and fails if `path` exists
            except FileExistsError:
                raise FileExistsError(errno.EEXIST, "exists", uri) from None
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                    raise
                self._create_excl(path, data, uri)
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if self.durable:
            fileio.fsync_dir(directory)

    def _create_excl(self, path: str, data: bytes, uri: str) -> None:
        """No hard links on this filesystem: exclusive create, then write (not crash-atomic)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "exists", uri) from None
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if self.durable:
                f.flush()
                os.fsync(f.fileno())

    def delete(self, uri: str) -> None:
        try:
            os.unlink(self._path(uri))
        except FileNotFoundError:
            pass

    def copy(self, src_uri: str, dst_uri: str) -> None:
        os.makedirs(os.path.dirname(self._path(dst_uri)), exist_ok=True)
        self.create(dst_uri, self.read(src_uri))


# --------------------------------------------------------------------------- S3


def _bucket_key(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    if not parts.netloc:
        raise InvalidArgumentError(f"{uri}: an S3 URI needs a bucket (s3://bucket/key)")
    return parts.netloc, parts.path.lstrip("/")


def _error_code(exc: BaseException) -> tuple[str, int]:
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return code, status


class S3CatalogIO(CatalogIO):
    """S3 and S3-compatible stores that implement conditional writes (``If-None-Match: *``)."""

    remote = True
    #: 409 ConditionalRequestConflict: another conditional write on the key is in flight; retry
    conflict_retries = 6

    @property
    def client(self) -> Any:  # a boto3 client: boto3 ships no types
        return fileio.s3_client()

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        bucket, key = _bucket_key(dir_uri)
        prefix = key.rstrip("/") + "/" if key else ""
        kwargs: dict[str, object] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        if start_after is not None:
            kwargs["StartAfter"] = prefix + start_after
        names: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(**kwargs):
            for obj in page.get("Contents", ()):
                names.append(obj["Key"][len(prefix) :])
        names.sort()
        return names

    def read(self, uri: str) -> bytes:
        bucket, key = _bucket_key(uri)
        try:
            return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:
            code, status = _error_code(exc)
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                raise FileNotFoundError(errno.ENOENT, "not found", uri) from None
            raise

    def create(self, uri: str, data: bytes) -> None:
        bucket, key = _bucket_key(uri)
        for attempt in range(self.conflict_retries + 1):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return
            except Exception as exc:
                code, status = _error_code(exc)
                if code == "PreconditionFailed" or status == 412:
                    raise FileExistsError(errno.EEXIST, "exists", uri) from None
                if (code == "ConditionalRequestConflict" or status == 409) and attempt < self.conflict_retries:
                    time.sleep(0.01 * 2**attempt)
                    continue
                raise

    def delete(self, uri: str) -> None:
        bucket, key = _bucket_key(uri)
        self.client.delete_object(Bucket=bucket, Key=key)

    def copy(self, src_uri: str, dst_uri: str) -> None:
        src_bucket, src_key = _bucket_key(src_uri)
        bucket, key = _bucket_key(dst_uri)
        self.client.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": src_bucket, "Key": src_key})


# --------------------------------------------------------------------------- choice

_S3 = frozenset({"s3", "s3a", "s3n"})


def io_for(uri: str) -> CatalogIO:
    """The catalog I/O for a store URI: a local directory or an ``s3://`` prefix."""
    if fileio.is_local(uri):
        return LocalCatalogIO()
    scheme = urlsplit(uri).scheme.lower()
    if scheme in _S3:
        return S3CatalogIO()
    raise InvalidArgumentError(
        f"{uri}: the catalog needs a local directory or an s3:// store "
        f"(it commits with create-if-absent writes, which {scheme}:// does not offer here)"
    )


def local_prune_empty_dirs(root_uri: str) -> None:
    """Remove empty directories below a local root (after a garbage collection), best effort."""
    if not fileio.is_local(root_uri):
        return
    root = fileio.resolve(root_uri)[1]
    for dirpath, _dirnames, _filenames in os.walk(root, topdown=False):
        if dirpath == root:
            continue
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
