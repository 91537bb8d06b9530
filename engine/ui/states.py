"""The opened table states the web app reads: the current one per table (re-checked against
its ``CURRENT`` change signal), pinned ones (``?at=``) and catalog histories."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from engine import fileio, names
from engine.exceptions import StatisticsNotFoundError
from engine.store import CURRENT, Store
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from engine.lookup import TableStatistics


class States:
    """Opened table states: the current one re-checked against the table's ``CURRENT`` change
    signal at most once per ``poll_s`` (a new analyze shows on the next request after it),
    pinned ones (``at``) kept in a small LRU; catalog histories per current transaction."""

    def __init__(self, store: Store, poll_s: float = 1.0, pinned: int = 32) -> None:
        self.store = store
        self.poll_s = poll_s
        self._pinned_max = pinned
        self._current: dict[str, tuple[Any, bytes | None, float]] = {}
        self._pinned: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._history: dict[str, tuple[int | None, list[vm.Transaction]]] = {}
        self._lock = threading.Lock()

    def _signal(self, table: str) -> bytes | None:
        try:
            return fileio.read_bytes(fileio.join(self.store.table_uri(table), CURRENT))
        except (FileNotFoundError, OSError):
            return None

    def get(self, table: str, at: int | None = None) -> TableStatistics:
        from engine.lookup import TableStatistics

        check_table_name(table)
        if at is not None:
            with self._lock:
                hit = self._pinned.get((table, at))
                if hit is not None:
                    self._pinned.move_to_end((table, at))
                    return hit
            ts = TableStatistics(self.store, table, at_transaction=at)
            with self._lock:
                self._pinned[(table, at)] = ts
                while len(self._pinned) > self._pinned_max:
                    self._pinned.popitem(last=False)
            return ts
        now = time.monotonic()
        with self._lock:
            hit = self._current.get(table)
        if hit is not None and now - hit[2] < self.poll_s:
            return hit[0]
        signal = self._signal(table)
        if hit is not None and signal == hit[1] and signal is not None:
            with self._lock:
                self._current[table] = (hit[0], signal, now)
            return hit[0]
        ts = TableStatistics(self.store, table)
        with self._lock:
            self._current[table] = (ts, signal, now)
        return ts

    def history(self, table: str) -> list[vm.Transaction]:
        head = self.get(table).txn_id
        with self._lock:
            hit = self._history.get(table)
        if hit is not None and hit[0] == head:
            return hit[1]
        txns = vm.history(self.store.root, table)
        with self._lock:
            self._history[table] = (head, txns)
        return txns


def check_table_name(table: str) -> None:
    """A table name is one directory name of the store (no path can leave the store): else a 404."""
    problem = names.table_name_problem(table)
    if problem is not None:
        raise StatisticsNotFoundError(f"no table {names.shown(table)}: {problem}")
