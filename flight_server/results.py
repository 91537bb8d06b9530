"""Recent single-table results of the Flight server, by ticket (flight_server/server.py's ``do_get``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow as pa


class ResultCache:
    """Recent single-table results by ticket bytes, valid for one resolver generation.

    Statistics files are immutable, so a result only goes stale when a table's published
    state changes, which bumps the resolver's ``generation``: entries of an older
    generation are never served (and are dropped when met). Bounded in bytes.

    A result is kept from the second time its ticket is answered (``admit_after``; the
    tickets seen once are remembered by hash in a bounded list, ``seen_keys``): most
    tickets of a planner fleet that do not repeat (random column sets) then cost no copy,
    no size walk and no eviction, and never push the results that do repeat out.
    A hash collision only admits a result early: entries are keyed by the whole ticket.

    The key is the ticket alone: every accepted token may read every table (engine/tokens.py
    has no per-token scope). A scope per token would have to be part of the key.
    """

    def __init__(
        self, max_bytes: int = 64 * 1024 * 1024, max_entry_bytes: int = 4 * 1024 * 1024, admit_after: int = 2, seen_keys: int = 32_768
    ) -> None:
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.admit_after = admit_after
        self.seen_keys = seen_keys
        self._entries: OrderedDict[bytes, tuple[int, pa.Table, int]] = OrderedDict()  # generation, table, bytes
        self._seen: OrderedDict[int, int] = OrderedDict()  # hash(ticket) -> answers so far (not kept yet)
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes, generation: int) -> pa.Table | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            if entry[0] != generation:
                del self._entries[key]
                self._bytes -= entry[2]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(self, key: bytes, generation: int, table: pa.Table) -> None:
        """Keep ``table`` as the answer to ``key`` in ``generation`` (from the key's ``admit_after``-th answer)."""
        if self.max_bytes <= 0:
            return
        if self.admit_after > 1:
            h = hash(key)
            with self._lock:
                seen = self._seen.get(h, 0) + 1
                if seen < self.admit_after:
                    self._seen[h] = seen
                    if len(self._seen) > self.seen_keys:
                        self._seen.popitem(last=False)
                    return
                self._seen.pop(h, None)
        size = table.get_total_buffer_size()  # cheap (nbytes walks slices); an upper bound
        if size > self.max_entry_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (generation, table, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "hits": self.hits, "misses": self.misses}
