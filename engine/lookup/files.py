"""The open statistics files of this process: footers parsed once, checksums checked on a
file's first read, decoded row groups and merged frequency segments cached by URI.

Statistics files are immutable (unique paths per job), so nothing here is invalidated
except by ``forget`` (a run no longer published) or ``clear_cache`` (a cold start).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine.exceptions import InvalidArgumentError, StatisticsFileCorruptError, StatisticsNotFoundError
from engine.files import checksum, layout

_FILE_CACHE_SIZE = 256  # open statistics files (footer parsed, metadata decoded)
_ROW_GROUP_CACHE_BYTES = 64 * 1024 * 1024  # decoded row groups of hot files


class StatisticsFile:
    """An open statistics file: the parsed footer, its decoded metadata, a reader.

    Statistics files are immutable (unique paths per job), so everything here
    stays valid for as long as the file is cached.
    """

    def __init__(self, uri: str, expected_checksum: str = "") -> None:
        try:
            source: Any = None
            if expected_checksum and (uri, expected_checksum) not in _verified:
                # the first read of a file checks all of it against the checksum taken when it
                # was written (engine/files/checksum.py); files are immutable, so once is enough
                with fileio.open_input(uri) as f:
                    data = f.read_buffer()
                if checksum.of_bytes(memoryview(data)) != expected_checksum:
                    checksum.check(uri, expected_checksum)  # raises, naming the file
                _remember_verified(uri, expected_checksum)
                if data.size <= _KEEP_VERIFIED_BYTES:  # small (most): read from the bytes already here
                    source = pa.BufferReader(data)
            self.pf = pq.ParquetFile(source if source is not None else fileio.open_input(uri))
            self.kv = layout.decode_metadata(self.pf.metadata.metadata)
            self.schema = self.pf.schema_arrow
        except FileNotFoundError as exc:
            raise StatisticsNotFoundError(f"statistics file missing: {uri}") from exc
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError, KeyError) as exc:
            raise damaged(uri, exc) from None
        self.uri = uri
        #: footer values decoded from JSON, and what readers derive from them (column positions): once per open file
        self.decoded: dict[str, Any] = {}
        self.lock = threading.Lock()  # a Parquet reader is not safe for concurrent reads

    def meta_json(self, key: str) -> Any:
        if key not in self.decoded:
            try:
                self.decoded[key] = json.loads(self.kv[key])
            except (KeyError, ValueError) as exc:
                raise damaged(self.uri, exc) from None
        return self.decoded[key]

    def read_row_group(self, group: int, columns: tuple[str, ...]) -> pa.Table:
        key = (self.uri, group, columns)
        with _lock:
            hit = _row_groups.get(key)
            if hit is not None:
                return hit
        try:
            with self.lock:
                t = self.pf.read_row_group(group, columns=list(columns))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
            raise damaged(self.uri, exc) from None
        with _lock:
            _row_groups.remember(key, t)
        return t

    def read_row_groups(self, groups: list[int], columns: tuple[str, ...]) -> pa.Table:
        parts = [self.read_row_group(g, columns) for g in groups]
        if not parts:
            return self.schema.empty_table().select(list(columns))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def damaged(uri: str, exc: BaseException) -> StatisticsFileCorruptError:
    """One line naming a statistics file that cannot be read (truncated, damaged pages or footer)."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if len(detail) > 160:
        detail = detail[:159] + "…"
    return StatisticsFileCorruptError(f"statistics file damaged: {uri}: not a readable statistics file ({detail})", uri=uri)


_KEEP_VERIFIED_BYTES = 1024 * 1024  # a checked file up to this size is then read from memory
_verified: OrderedDict[tuple[str, str], None] = OrderedDict()  # (uri, checksum) checked this process
_VERIFIED_MAX = 65_536


def _remember_verified(uri: str, expected: str) -> None:
    with _lock:
        _verified[(uri, expected)] = None
        while len(_verified) > _VERIFIED_MAX:
            _verified.popitem(last=False)


_files: OrderedDict[str, StatisticsFile] = OrderedDict()


class _TableCache:
    """Decoded tables by key, the least recently used dropped beyond ``max_bytes`` (the newest
    kept whatever its size). Callers hold ``_lock``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.nbytes = max_bytes, 0
        self._items: OrderedDict[tuple[Any, ...], pa.Table] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> pa.Table | None:
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
        return hit

    def remember(self, key: tuple[Any, ...], t: pa.Table) -> None:
        if key in self._items:
            return
        self._items[key] = t
        self.nbytes += t.nbytes
        while self.nbytes > self.max_bytes and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            self.nbytes -= old.nbytes

    def forget(self, prefix: str) -> int:
        """Drop the entries whose key's first element (a URI) starts with ``prefix``; how many."""
        gone = [k for k in self._items if str(k[0]).startswith(prefix)]
        for k in gone:
            self.nbytes -= self._items.pop(k).nbytes
        return len(gone)

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._items)


_row_groups = _TableCache(_ROW_GROUP_CACHE_BYTES)
_lock = threading.Lock()


_sketches: OrderedDict[str, dict[str, dict[str, bytes | None]]] = OrderedDict()


def partial_sketches(uri: str, expected_checksum: str = "") -> dict[str, dict[str, bytes | None]]:
    """column -> {"theta_sketch", "kll_sketch"} of a partition's partial state (immutable: cached),
    checked on this first read against ``expected_checksum`` (its statistics.parquet recorded it)."""
    with _lock:
        hit = _sketches.get(uri)
    if hit is not None:
        return hit
    try:
        data = fileio.read_bytes(uri)
        if expected_checksum and checksum.of_bytes(data) != expected_checksum:
            raise StatisticsFileCorruptError(
                f"statistics file damaged: {uri}: checksum {checksum.of_bytes(data)}, its partition's statistics.parquet recorded "
                f"{expected_checksum} when it was written",
                uri=uri,
            )
        t = pa.ipc.open_file(pa.BufferReader(data)).read_all().select(["column", "theta", "kll"])
    except FileNotFoundError as exc:
        raise StatisticsNotFoundError(f"the partition's sketches are in its partial state, which is missing: {uri}") from exc
    except pa.ArrowInvalid as exc:
        raise StatisticsNotFoundError(f"the partition's sketches are in its partial state, which is damaged: {uri}: {exc}") from exc
    out = {c: {"theta_sketch": th, "kll_sketch": k} for c, th, k in zip(t["column"].to_pylist(), t["theta"].to_pylist(), t["kll"].to_pylist())}
    with _lock:
        _sketches[uri] = out
        while len(_sketches) > 64:
            _sketches.popitem(last=False)
    return out


def stored_rows(f: StatisticsFile) -> dict[str, int]:
    """``{column: rows of the merged view}`` of a delta segment (``metastore.segment``); empty for
    a whole file (its stored rows are its own)."""
    if layout.SEGMENT_KEY not in f.kv:
        return {}
    hit = f.decoded.get("stored_rows")  # decoded once per open file (a wide table's footer names every column)
    if hit is None:
        value = f.meta_json(layout.SEGMENT_KEY)
        try:
            hit = f.decoded["stored_rows"] = {str(c): int(n) for c, n in value["stored_rows"].items()}
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise damaged(f.uri, exc) from None
    return hit


def held_in_full(f: StatisticsFile) -> set[str]:
    """The columns a segment of the table's frequencies holds in full: every column of a base (a
    whole file), and a delta's ``metastore.segment`` ``full`` list (docs/FORMAT.md)."""
    if layout.SEGMENT_KEY not in f.kv:
        return set(f.meta_json("metastore.frequencies"))
    return set(f.meta_json(layout.SEGMENT_KEY).get("full") or ())


def column_rows(f: StatisticsFile, first: int, n_groups: int) -> pa.Table:
    """(value, frequency) of one column's row groups, read past the row-group cache (a merged
    read keeps its result instead)."""
    if not n_groups:
        return pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})
    try:
        with f.lock:
            return f.pf.read_row_groups(list(range(first, first + n_groups)), columns=["value", "frequency"])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError, OSError) as exc:
        raise damaged(f.uri, exc) from None


_MERGED_CACHE_BYTES = 256 * 1024 * 1024  # merged reads of columns in segments (the newest one kept whatever its size)
_merged = _TableCache(_MERGED_CACHE_BYTES)


def open_file(uri: str, expected_checksum: str = "") -> StatisticsFile:
    with _lock:
        f = _files.get(uri)
        if f is not None:
            _files.move_to_end(uri)
            return f
    f = StatisticsFile(uri, expected_checksum)
    with _lock:
        _files[uri] = f
        while len(_files) > _FILE_CACHE_SIZE:
            _files.popitem(last=False)
    return f


def clear_cache() -> None:
    """Forget open files and decoded row groups (a cold start)."""
    with _lock:
        _files.clear()
        _row_groups.clear()
        _verified.clear()
        _sketches.clear()
        _merged.clear()


def forget(prefix: str) -> int:
    """Forget the open files and decoded row groups whose URI starts with ``prefix``
    (e.g. the run directory of a job that is no longer published); returns how many
    cache entries were dropped. Readers holding such a file keep a valid handle.
    """
    dropped = 0
    with _lock:
        for uri in [u for u in _files if u.startswith(prefix)]:
            del _files[uri]
            dropped += 1
        dropped += _merged.forget(prefix)
        for uri in [u for u in _sketches if u.startswith(prefix)]:
            del _sketches[uri]
            dropped += 1
        dropped += _row_groups.forget(prefix)
    return dropped


def cache_info() -> dict[str, int]:
    """Sizes of the per-process caches: open files, decoded row groups and their bytes."""
    with _lock:
        return {"files": len(_files), "row_groups": len(_row_groups), "row_group_bytes": _row_groups.nbytes}


def merged_frequencies(
    column: str, newest: StatisticsFile, first: int, n_groups: int, older: Sequence[tuple[str, str]], column_type: Callable[[str], pa.DataType]
) -> pa.Table:
    """All stored rows of ``column`` (value text, frequency) merged from the table's segments
    (``older``: the older ones as (URI, checksum), the base first; ``newest`` the newest's open
    file), in the order of a whole file; each segment's checksum checked on its first read.
    Cached per (newest segment, column): segments are immutable."""
    key = (newest.uri, column)
    with _lock:
        hit = _merged.get(key)
        if hit is not None:
            return hit
    from engine.stats import segments  # here: only reads beyond the head need it (start-up, #20)

    # newest first, back to the segment that holds the column in full (the base holds every
    # column in full; a delta may, when the column was small or changed kind): older ones are
    # of no use for it
    parts = [column_rows(newest, first, n_groups)]
    held = held_in_full(newest)
    for uri, expected in reversed(older):
        if column in held:
            break
        f = open_file(uri, expected)
        held = held_in_full(f)
        index = f.meta_json("metastore.frequencies")
        if column in index:
            parts.insert(0, column_rows(f, *index[column][:2]))
    try:
        t = parts[0] if len(parts) == 1 else segments.merge(parts, column_type(column))
    except (pa.ArrowInvalid, InvalidArgumentError) as exc:
        raise damaged(newest.uri, exc) from None
    with _lock:
        _merged.remember(key, t)
    return t
