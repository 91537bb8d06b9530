"""The footers (row count and Arrow schema) of a directory table's Parquet files, read when it is listed.

Reading and parsing one footer costs ~60-130 us of CPU (pyarrow's thrift decoding of a
small file's footer), whatever reads it: a table of 10,000 partitions of 10 files spent
~1.3 ms of the driver's CPU a partition on them (issue #18). So:

- footers are read where it is cheapest: in the listing thread while the file system
  answers fast (the page cache, a local disk: a thread pool there only adds the GIL's
  hand-offs, 2-3 times the CPU of reading them one after the other), in a thread pool
  when it does not (a network mount, an object store: their latency is the cost);
- a caller with a Ray cluster can read them in tasks instead (:data:`FetchFooters`,
  engine/runtime/footers.py): a chunk's answer is compact (:class:`FooterChunk`: a row
  count and a schema number per file, the chunk's distinct schemas once), so the
  driver's cost per file is two list items, and the footers of the job's files are
  read on the cores that will read the files;
- the first failure in file order is raised, whoever read it, with the same words
  (:meth:`FooterReader.read`): a bad file fails the listing on the driver, before a job
  starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from engine import fileio
from engine.exceptions import InvalidFileError

__all__ = ["FetchFooters", "Footer", "FooterChunk", "FooterReader", "read_footers"]

#: (rows, the file's Arrow schema)
Footer = tuple[int, pa.Schema]
T = TypeVar("T")

_MAGIC = b"PAR1"
_ENCRYPTED_MAGIC = b"PARE"
#: the first files of a listing read one after the other on a local file system; if they
#: took longer than this on average, the file system is slow (a network mount) and the
#: rest are read in a thread pool
_PROBE_FILES = 32
_SLOW_FILE_S = 0.002


@dataclass(frozen=True)
class FooterChunk:
    """The footers of consecutive files, compactly: ``rows[i]`` and ``schemas[schema_ids[i]]``
    are file i's (equal schemas are sent once: most tables' files share one)."""

    rows: tuple[int, ...]
    schema_ids: tuple[int, ...]
    schemas: tuple[pa.Schema, ...]

    @staticmethod
    def of(footers: Sequence[Footer]) -> FooterChunk:
        rows: list[int] = []
        ids: list[int] = []
        schemas: list[pa.Schema] = []
        seen: dict[pa.Schema, int] = {}
        last = -1
        for n, schema in footers:
            rows.append(n)
            if last >= 0 and schema.equals(schemas[last]):  # equals is C++ (~0.05 us); a hash is ~6 us
                ids.append(last)
                continue
            bare = schema.remove_metadata() if schema.metadata else schema  # the table drops a file's (pandas') metadata
            last = seen.setdefault(bare, len(schemas))
            if last == len(schemas):
                schemas.append(bare)
            ids.append(last)
        return FooterChunk(tuple(rows), tuple(ids), tuple(schemas))

    def footers(self) -> list[Footer]:
        return [(n, self.schemas[i]) for n, i in zip(self.rows, self.schema_ids, strict=True)]


@dataclass(frozen=True)
class FooterReader:
    """Reads the footers of one table's files: a small value (file system, the table's URI
    and its root), so a Ray task can read them as the listing would."""

    fs: pafs.FileSystem
    uri: str  # the table as the caller named it: errors name files under it
    root: str  # the table's root in the file system's terms

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a pickled file system arrives as a new client: share one per process (engine.fileio)
        object.__setattr__(self, "__dict__", {**state, "fs": fileio.share(state["fs"])})

    def display(self, path: str) -> str:
        """A file's name in the caller's terms (the table URI plus the relative path)."""
        prefix = self.root.rstrip("/") + "/"
        return fileio.join(self.uri, path[len(prefix) :] if path.startswith(prefix) else path)

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def read(self, path: str) -> Footer:
        """One file's footer; an InvalidFileError naming the file and what is wrong with it."""
        try:
            with self.fs.open_input_file(path) as handle:
                parquet_file = pq.ParquetFile(handle)
                return parquet_file.metadata.num_rows, parquet_file.schema_arrow
        except FileNotFoundError as exc:
            raise InvalidFileError(f"{self.display(path)}: vanished while the table was listed") from exc
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InvalidFileError(f"{self.display(path)}: {self.diagnose(path, exc)}") from exc

    def read_chunk(self, paths: Sequence[str], max_threads: int) -> FooterChunk:
        """What a Ray task returns for its files (engine/runtime/footers.py)."""
        return FooterChunk.of(read_footers(paths, self.read, local=self.local, max_threads=max_threads))

    def diagnose(self, path: str, exc: BaseException) -> str:
        """Why a footer could not be read, in words a user can act on."""
        try:
            with self.fs.open_input_file(path) as handle:
                size = handle.size()
                head = handle.read(4)
                handle.seek(max(0, size - 4))
                tail = handle.read(4)
        except (pa.ArrowException, OSError) as io_exc:
            return f"cannot be read: {io_exc}"
        if size == 0:
            return "not a Parquet file: the file is empty"
        if head not in (_MAGIC, _ENCRYPTED_MAGIC):
            return f"not a Parquet file: bad magic bytes {head!r} at the start (expected {_MAGIC!r})"
        if size < 12:
            return f"truncated Parquet file: only {size} bytes"
        if tail == _ENCRYPTED_MAGIC or head == _ENCRYPTED_MAGIC:
            return "encrypted Parquet files are not supported"
        if tail != _MAGIC:
            return f"truncated Parquet file: no {_MAGIC!r} footer magic at the end ({size} bytes)"
        return f"unreadable Parquet footer: {exc}"


#: Reads the footers of files of a table elsewhere (Ray tasks): ``(reader, paths)`` -> their
#: footers in order, or None when it declines (too few files to be worth a task) and they
#: are read here; raises the first bad file's error in path order, as reading here would.
FetchFooters = Callable[[FooterReader, Sequence[str]], "list[Footer] | None"]


def read_footers(items: Sequence[T], read: Callable[[T], Footer], *, local: bool, max_threads: int) -> list[Footer]:
    """``read`` of each item, in order; the first failure in item order is raised.

    ``local``: a local file system: the items are read one after the other while the first
    :data:`_PROBE_FILES` show it fast, the rest in a pool of ``max_threads`` otherwise (and
    always on an object store, where each read waits for the network)."""
    out: list[Footer] = []
    if not items:
        return out
    if local or max_threads <= 1:
        started = time.perf_counter()
        for i, item in enumerate(items):
            out.append(read(item))
            if max_threads > 1 and i + 1 == _PROBE_FILES and time.perf_counter() - started > _SLOW_FILE_S * _PROBE_FILES:
                break
        else:
            return out
    rest = items[len(out) :]
    workers = max(1, min(max_threads, len(rest)))
    if workers == 1:
        return out + [read(item) for item in rest]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parquet-footer") as pool:
        # map() re-raises the first failure in item order, so the error is deterministic
        out.extend(pool.map(read, rest))
    return out
