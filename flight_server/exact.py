"""Exact subsets on the server (``"exact": true``, docs/reference/FLIGHT.md "Exact subsets"): who may ask,
and how much they may cost.

An exact answer is computed on the table's data (a Ray job over the matching rows,
engine/runtime/subset.py): over arbitrary predicates it discloses rows (``id = k`` for every
k is the table), it spends the server's cluster and it writes under the store. So:

- **permission**: the analyze action's (``--analyze-root``; ``--no-analyze`` and ``--no-exact``
  refuse it): the table's data (its recorded location) must lie under a root, and a local
  table may hold no symbolic link out of the roots;
- **concurrency**: at most ``max_jobs`` computations at once; another is refused (``busy``)
  rather than queued on a request thread;
- **rate**: at most ``rate`` computations per client (its address) in ``window`` seconds
  (``rate_limited``); answers from the cache do not count;
- **cache budget**: the computed subsets under the store (``<table>/subsets/<predicate>/``)
  are kept within ``cache_bytes``: after each computation the least recently used
  predicates (computed or answered from the cache) are deleted, never the one just used.

The limits act through the hook of engine/subset/guard.py, around the job itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine import fileio
from engine.catalog import derived
from engine.catalog.cache import forget_catalog
from engine.exceptions import InvalidArgumentError, MetastoreError
from engine.runtime import exact as _exact_subsets  # noqa: F401 - registers the exact=True subsets' job
from engine.store import Store

log = logging.getLogger("metastore.flight")

FORBIDDEN = "forbidden"
BUSY = "busy"
RATE_LIMITED = "rate_limited"


class ExactRefused(MetastoreError):
    """An exact subset this server does not compute (now, or for this caller); ``code`` says which."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ExactLimits:
    max_jobs: int = 1
    rate: int = 10  # computations per client per window
    window_s: float = 60.0
    cache_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_jobs < 1 or self.rate < 1 or self.window_s <= 0 or self.cache_bytes < 0:
            raise InvalidArgumentError("exact limits: max_jobs and rate at least 1, a positive window, a cache budget of 0 bytes or more")


def client_of(peer: str | bytes | None) -> str:
    """The client a gRPC peer (``ipv4:127.0.0.1:5123``, ``ipv6:[::1]:5123``) counts as: its address."""
    text = peer.decode("utf-8", "replace") if isinstance(peer, bytes) else (peer or "")
    kind, _, rest = text.partition(":")
    if kind in ("ipv4", "ipv6") and ":" in rest:
        return kind + ":" + rest.rsplit(":", 1)[0]
    return text or "unknown"


class ExactSubsets:
    """The server's exact subsets: permission, limits and the cache budget (thread-safe).

    ``roots``: canonical analyze roots; ``enabled``: the operator's permission;
    ``escape(location)``: a symbolic link in a local table leading out of the roots, or None;
    ``ready()``: why no job can run now (Ray down), or None.
    """

    def __init__(
        self,
        store: str,
        roots: tuple[str, ...],
        enabled: bool,
        limits: ExactLimits,
        escape: Callable[[str], str | None] | None = None,
        ready: Callable[[], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.roots = roots
        self.enabled = enabled
        self.limits = limits
        self._escape = escape
        self._ready = ready
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._calls: dict[str, deque[float]] = {}
        self._entries: OrderedDict[str, int] | None = None  # predicate root -> bytes, least recently used first
        self._computing: dict[str, int] = {}  # predicate roots a job is writing now (never evicted)
        self.evicted = 0

    # ------------------------------------------------------------ permission
    def permit(self, table: str, table_uri: object, refusal: str) -> None:
        """Refuse (ExactRefused, ``forbidden``) unless exact subsets of ``table`` are allowed.
        ``refusal``: the message of a server on which they are off."""
        if not self.enabled:
            raise ExactRefused(refusal, FORBIDDEN)
        location = None
        if isinstance(table_uri, str) and table_uri:
            try:
                location = fileio.canonical(table_uri)
            except InvalidArgumentError:
                location = None
        if location is None or not any(fileio.is_within(location, r) for r in self.roots):
            # the table's location is a server path: it stays in the log
            log.warning("exact subset of %r refused: its data at %r lies outside the analyze roots", table, table_uri)
            raise ExactRefused(
                f"table {table!r}: its data lies outside the locations this server may read (--analyze-root): no exact subsets of it",
                FORBIDDEN,
            )

    # ------------------------------------------------------------ the guard of one request
    def guard(self, client: str, table_uri: str) -> _Guard:
        return _Guard(self, client, table_uri)

    def _admit(self, client: str, table_uri: str, root: str) -> None:
        problem = self._ready() if self._ready is not None else None
        if problem is not None:
            raise ExactRefused(f"exact subsets are unavailable: {problem}; restart the server", BUSY)
        now = self._clock()
        with self._lock:
            calls = self._calls.setdefault(client, deque())
            while calls and calls[0] <= now - self.limits.window_s:
                calls.popleft()
            if len(calls) >= self.limits.rate:
                raise ExactRefused(
                    f"too many exact subsets computed for this client: at most {self.limits.rate} in {self.limits.window_s:g} s; "
                    "retry later (answers already computed are served without limit)",
                    RATE_LIMITED,
                )
            if self._running >= self.limits.max_jobs:
                raise ExactRefused(f"the server is computing {self._running} exact subset(s), its limit: retry later", BUSY)
            self._running += 1
            self._computing[root] = self._computing.get(root, 0) + 1
            calls.append(now)
            if len(self._calls) > 10_000:  # forget clients with nothing in the window
                for c in [c for c, q in self._calls.items() if not q]:
                    del self._calls[c]
        if self._escape is not None and fileio.is_local(table_uri):
            escape = self._escape(fileio.canonical(table_uri))
            if escape is not None:
                self._leave(root)
                log.warning("exact subset refused: %s holds a symbolic link out of the analyze roots: %s", table_uri, escape)
                raise ExactRefused("the table's data holds a symbolic link out of the locations this server may read", FORBIDDEN)

    def _leave(self, root: str) -> None:
        with self._lock:
            self._running -= 1
            left = self._computing.pop(root, 1) - 1
            if left > 0:
                self._computing[root] = left

    # ------------------------------------------------------------ the cache budget
    def _known(self) -> OrderedDict[str, int]:
        """The subsets under the store, least recently used first (from the files' times on first use)."""
        if self._entries is None:
            found: list[tuple[int, str, int]] = []
            try:
                tables = Store(self.store).tables()
            except Exception as exc:  # noqa: BLE001 - the budget starts from what can be listed
                log.warning("exact subsets: the store's tables cannot be listed: %s", exc)
                tables = []
            for table in tables:
                found += _predicates(derived.subsets_root(self.store, table))
            self._entries = OrderedDict((root, size) for _, root, size in sorted(found))
        return self._entries

    def touch(self, root: str, size: int | None = None) -> None:
        """``root`` was used now (its size measured again when given)."""
        with self._lock:
            entries = self._known()
            if size is None:
                size = entries.get(root)
                if size is None:
                    size = _size(root)
            entries[root] = size
            entries.move_to_end(root)

    def evict(self) -> list[str]:
        """Delete the least recently used predicates until the subsets fit the budget (never
        the most recently used one); returns the deleted predicate directories."""
        gone: list[str] = []
        with self._lock:
            entries = self._known()
            total = sum(entries.values())
            newest = next(reversed(entries), None)
            for root in list(entries):
                if total <= self.limits.cache_bytes:
                    break
                if root == newest or root in self._computing:
                    continue
                total -= entries.pop(root)
                gone.append(root)
        for root in gone:
            _delete(root)
        self.evicted += len(gone)
        return gone

    def info(self) -> dict[str, object]:
        with self._lock:
            cached = sum(self._entries.values()) if self._entries is not None else None
            return {
                "enabled": self.enabled,
                "running": self._running,
                "max_jobs": self.limits.max_jobs,
                "rate": self.limits.rate,
                "window_s": self.limits.window_s,
                "cache_bytes": self.limits.cache_bytes,
                "cached_bytes": cached,
                "evicted": self.evicted,
            }


class _Guard:
    """engine.subset.guard.SubsetGuard of one request: its client's limits, the store's budget."""

    def __init__(self, owner: ExactSubsets, client: str, table_uri: str) -> None:
        self.owner = owner
        self.client = client
        self.table_uri = table_uri

    @contextlib.contextmanager
    def computing(self, table: str, root: str) -> Iterator[None]:
        owner = self.owner
        owner._admit(self.client, self.table_uri, root)
        try:
            yield
        finally:
            owner._leave(root)
        owner.touch(root, _size(root))
        owner.evict()

    def used(self, table: str, root: str) -> None:
        self.owner.touch(root)


def _size(root: str) -> int:
    try:
        return sum(e.size for e in fileio.list_files(root))
    except FileNotFoundError:
        return 0


def _predicates(subsets_root: str) -> list[tuple[int, str, int]]:
    """(newest file time, predicate root, bytes) of each predicate under a table's subsets directory."""
    try:
        entries = fileio.list_files(subsets_root)
    except FileNotFoundError:
        return []
    prefix = fileio.resolve(subsets_root)[1].rstrip("/") + "/"
    found: dict[str, list[int]] = {}
    for e in entries:
        head = e.path[len(prefix) :].split("/", 1)[0] if e.path.startswith(prefix) else ""
        if head:
            acc = found.setdefault(head, [0, 0])
            acc[0] = max(acc[0], e.mtime_ns or 0)
            acc[1] += e.size
    return [(t, fileio.join(subsets_root, head), size) for head, (t, size) in found.items()]


def _delete(root: str) -> None:
    try:
        names = derived.derived_tables_in(root)
        fileio.delete_dir(root)
        for name in names:
            forget_catalog(root, name)
    except OSError as exc:
        log.warning("exact subsets: %s not evicted: %s", root, exc)
