"""Which published statistics a request is served from: the ``StateResolver`` seam.

Today the published state of a table is its ``CURRENT`` pointer (engine.store):
:class:`CurrentStateResolver` keeps one immutable :class:`TableState` per table,
built from the manifest the pointer names, and swaps it for a new one when the
pointer moves (a ``refresh`` action, or the cheap background poll that reads only
the small ``CURRENT`` files). Requests take the state they are given for their whole
lifetime, and statistics files are immutable (unique paths per job), so a
concurrent analyze or publish never changes what an in-flight stream reads.

Every table published since the catalog (engine/catalog, docs/CATALOG.md) also has a
transaction log: a request with ``at`` (``at_transaction`` / ``at_snapshot``) is
served from the catalog's state at that transaction or snapshot, and the
``history`` action lists the catalog's transactions. Past states are immutable, so
they need no polling. Only a table without a catalog (published through ``CURRENT``
alone) still answers ``at`` with :class:`TimeTravelUnavailable`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from engine import fileio, lookup
from engine.catalog import AddPartition, RemovePartition, TombstonePartition
from engine.catalog.signal import read_signal
from engine.exceptions import CatalogCorruptError, MetastoreError, StatisticsNotFoundError
from engine.lookup import TableStatistics
from engine.store import CURRENT, Store
from flight_server.protocol import At

if TYPE_CHECKING:  # the catalog is imported on first use (history), not with the server
    from engine.catalog import Catalog

log = logging.getLogger("metastore.flight")


class TimeTravelUnavailable(MetastoreError):
    """A request asked for a past state (at_transaction / at_snapshot) and no catalog is configured."""


class UnknownTable(MetastoreError):
    """The store has no published statistics for the table."""


class UnknownState(UnknownTable):
    """The table's catalog has no such transaction or snapshot (or it was pruned)."""


@dataclass(frozen=True)
class TableState:
    """One table's published statistics, immutable; ``stats`` is never refreshed in place."""

    table: str
    job_id: str
    snapshot: str
    published_at: str | None
    stats: TableStatistics
    loaded_at: float  # time.time() when this state was read

    @property
    def run_uri(self) -> str:
        return self.stats.state.run_uri

    def summary(self) -> dict[str, Any]:
        st = self.stats.state
        return {
            "table": self.table,
            "job_id": self.job_id,
            "snapshot": self.snapshot,
            "published_at": self.published_at,
            "created_at": st.created_at,
            "rows": st.rows,
            "partitions": len(st.partitions),
            "columns": len(self.stats.schema),
        }


class StateResolver(Protocol):
    """What the server needs to know about published statistics.

    ``generation`` grows whenever any table's state changes (the server's result
    cache is valid for one generation); a resolver without it disables that cache.
    """

    generation: int

    def resolve(self, table: str, at: At | None = None) -> TableState:
        """The state a request on ``table`` is served from (``at``: a past state; needs the catalog)."""

    def tables(self) -> list[TableState]:
        """The current state of every table with statistics."""

    def refresh(self, table: str | None = None) -> dict[str, Any]:
        """Re-read the published state (one table or all); returns what changed."""

    def history(self, table: str) -> dict[str, Any]:
        """The published states of a table that the resolver knows, newest first."""

    def close(self) -> None:
        """Stop background work."""


class CurrentStateResolver:
    """Resolves every request to the table's current published manifest (``CURRENT``).

    ``poll_interval`` > 0 starts a daemon thread that re-reads the ``CURRENT``
    pointers (and the store's table list) that often; a moved pointer swaps the
    table's state and drops the old run's entries from the lookup caches.
    Only names the store lists are ever read: a request cannot make the
    resolver open a path of its choosing.
    """

    def __init__(self, store: Store | str, poll_interval: float = 2.0) -> None:
        self.store = store if isinstance(store, Store) else Store(store)
        self.poll_interval = poll_interval
        self.generation = 0  # bumped on every change of any table's state
        self.last_poll: float = 0.0
        self.poll_errors = 0
        self._states: dict[str, TableState] = {}  # replaced, never mutated: readers need no lock
        #: tables the store lists whose published state cannot be read (a damaged catalog), with the
        #: error: list_flights shows them (#21); replaced, never mutated
        self.errors: dict[str, str] = {}
        self._catalogs: dict[str, Catalog] = {}  # engine.catalog.Catalog per table, for history
        self._lock = threading.Lock()  # guards the swaps of _states / generation
        self._scan_lock = threading.Lock()  # one store scan at a time
        self._last_scan = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._scan(only_new=False)
        if poll_interval > 0:
            self._thread = threading.Thread(target=self._poll_loop, name="metastore-flight-poll", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------ queries
    def resolve(self, table: str, at: At | None = None) -> TableState:
        if at is not None:
            return self._resolve_at(self.resolve(table), at)
        state = self._states.get(table)
        if state is not None:
            return state
        # maybe published since the last poll: rescan, at most twice a second
        if time.monotonic() - self._last_scan > 0.5:
            self._scan(only_new=True)
            state = self._states.get(table)
            if state is not None:
                return state
        if table in self.errors:  # listed by the store, but its state cannot be read (#21)
            raise CatalogCorruptError(f"table {table!r} cannot be served: {self.errors[table]}")
        known = sorted(self._states)
        hint = f"; tables: {', '.join(known[:10])}{', ...' if len(known) > 10 else ''}" if known else "; the store has no tables"
        shown = table if len(table) <= 80 else table[:79] + "…"
        raise UnknownTable(f"unknown table {shown!r}{hint}")

    def tables(self) -> list[TableState]:
        states = self._states
        return [states[name] for name in sorted(states)]

    def _has_catalog(self, table: str) -> bool:
        return fileio.exists(fileio.join(self.store.table_uri(table), "catalog"))

    def _catalog(self, table: str) -> Catalog:
        """A catalog per table (its decoded transactions are cached), refreshed on each use."""
        from engine.catalog import Catalog

        with self._lock:
            cat = self._catalogs.get(table)
        if cat is None:
            cat = Catalog.open(self.store.root, table)
            with self._lock:
                self._catalogs[table] = cat
        else:
            cat.refresh()
        return cat

    def _resolve_at(self, current: TableState, at: At) -> TableState:
        """The past state ``at`` of a known table, from its catalog (``current``: its current state)."""
        table = current.table
        what = f"transaction {at.transaction}" if at.transaction is not None else f"snapshot {(at.snapshot or '')[:80]!r}"
        if not self._has_catalog(table):
            raise TimeTravelUnavailable(
                f"time travel needs the catalog: table {table!r} was published without one, "
                f"so only its current statistics are served (asked for {what})"
            )
        try:
            stats = TableStatistics(self.store, table, at_transaction=at.transaction, at_snapshot=at.snapshot)
        except StatisticsNotFoundError as exc:
            raise UnknownState(f"table {table!r} has no state at {what}: {exc}") from None
        return TableState(
            table=table,
            job_id=stats.job_id,
            snapshot=stats.snapshot,
            published_at=stats.state.catalog.committed_at if stats.state.catalog is not None else None,
            stats=stats,
            loaded_at=time.time(),
        )

    def history(self, table: str) -> dict[str, Any]:
        state = self.resolve(table)
        if self._has_catalog(table):
            return self._catalog_history(state)
        return {
            "table": table,
            "history": [{"job_id": state.job_id, "snapshot": state.snapshot, "published_at": state.published_at, "current": True}],
            "complete": False,
            "note": "only the current published job is known; the full history needs the catalog",
        }

    def _catalog_history(self, state: TableState) -> dict[str, Any]:
        """Every transaction still in the table's catalog, newest first."""
        cat = self._catalog(state.table)
        head = cat.state().txn_id
        entries = []
        for info in reversed(cat.history()):
            entries.append(
                {
                    "txn_id": info.id,
                    "uuid": info.uuid,
                    "job_id": info.job_id,
                    "snapshot": info.snapshot_id,
                    "published_at": info.timestamp.isoformat(),
                    "partitions_added": sum(isinstance(a, AddPartition) for a in info.actions),
                    "partitions_removed": sum(isinstance(a, RemovePartition) for a in info.actions),
                    "partitions_tombstoned": sum(isinstance(a, TombstonePartition) for a in info.actions),
                    "current": info.id == head,
                }
            )
        oldest = entries[-1]["txn_id"] if entries else None
        return {
            "table": state.table,
            "history": entries,
            "complete": oldest == 1,  # False after a prune: older transactions are gone
            "note": "catalog transactions, newest first; read any of them with at_transaction",
        }

    # ------------------------------------------------------------ changes
    def refresh(self, table: str | None = None) -> dict[str, Any]:
        if table is not None:
            held = self._states.get(table)
            if held is None:  # only names the store lists are read (no paths from requests)
                changed = table in self._scan(only_new=True)
            else:
                changed = self._reload(table, held.job_id)
            state = self._states.get(table)
            if state is None:
                raise UnknownTable(f"unknown table {table[:80]!r}: no published statistics in {self.store.root}")
            return {"changed": [table] if changed else [], "tables": {table: state.job_id}}
        scanned = self._scan(only_new=False)
        return {"changed": scanned, "tables": {n: s.job_id for n, s in sorted(self._states.items())}}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------ internals
    def _poll_loop(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self._scan(only_new=False)
            except Exception as exc:
                self.poll_errors += 1
                log.warning("polling the store failed: %s", exc)

    def _pointer(self, table: str) -> dict[str, Any] | None:
        uri = fileio.join(self.store.table_uri(table), CURRENT)
        try:
            return json.loads(fileio.read_bytes(uri))
        except FileNotFoundError:  # a publish stopped before CURRENT: the catalog's head signals (#33)
            return read_signal(self.store.root, table)

    def _scan(self, only_new: bool) -> list[str]:
        """Compare the pointers of the store's tables with the states held (``only_new``: only
        tables not held yet); reload what moved, drop what is gone. Returns the changed tables."""
        with self._scan_lock:
            self._last_scan = time.monotonic()
            names = self.store.tables()
            changed = []
            for name in names:
                held = self._states.get(name)
                if only_new and held is not None:
                    continue
                try:
                    if self._reload(name, held.job_id if held else None):
                        changed.append(name)
                    if name in self.errors:
                        self.errors = {k: v for k, v in self.errors.items() if k != name}
                except (MetastoreError, OSError, ValueError, KeyError) as exc:  # half-written or unreadable: keep what we have
                    log.warning("cannot load the statistics of %s: %s", name, exc)
                    if held is None:
                        self.errors = {**self.errors, name: " ".join(str(exc).split()) or type(exc).__name__}
            if not only_new:
                self.errors = {k: v for k, v in self.errors.items() if k in names}
                for gone in set(self._states) - set(names):
                    self._drop(gone)
                    changed.append(gone)
            self.last_poll = time.time()
            return sorted(changed)

    def _reload(self, table: str, held_job: str | None) -> bool:
        """Swap in the table's published state if its pointer moved; whether it changed."""
        pointer = self._pointer(table)
        if pointer is None:
            if held_job is not None:
                self._drop(table)
                return True
            return False
        if pointer.get("job_id") == held_job:
            return False  # nothing moved: keep the state (and its warm caches)
        try:
            stats = TableStatistics(self.store, table)
        except (StatisticsNotFoundError, FileNotFoundError):
            return False  # the pointer names a run whose manifest is not readable (yet): try again later
        state = TableState(
            table=table,
            job_id=stats.job_id,
            snapshot=stats.snapshot,
            published_at=pointer.get("published_at"),
            stats=stats,
            loaded_at=time.time(),
        )
        with self._lock:
            old = self._states.get(table)
            self._states = {**self._states, table: state}  # copy on write: readers never see a half-updated dict
            self.generation += 1
        if old is not None and old.run_uri != state.run_uri:
            lookup.forget(old.run_uri.rstrip("/") + "/")
            log.info("table %s: job %s replaces %s", table, state.job_id, old.job_id)
        return old is None or old.job_id != state.job_id

    def _drop(self, table: str) -> None:
        with self._lock:
            old = self._states.get(table)
            if old is None:
                return
            self._states = {k: v for k, v in self._states.items() if k != table}
            self.generation += 1
        lookup.forget(old.run_uri.rstrip("/") + "/")
