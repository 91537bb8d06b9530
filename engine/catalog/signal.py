"""``CURRENT``, the change signal, and the tables a store has (issue #33).

``Store.publish`` commits, then writes ``CURRENT`` (``{"job_id", "published_at", "txn_id",
"txn_uuid"}``) for pollers (the Flight server, the web app). A crash between the two leaves
a committed state that ``CURRENT`` does not name: absent after a table's first commit, the
previous job's after a later one. So:

- a table is a directory holding ``CURRENT`` *or a committed transaction*
  (:func:`has_statistics`): discovery does not depend on the signal;
- :func:`read_signal` is ``CURRENT``, or, when it is absent, the signal the catalog's head
  would have written (what a poller compares);
- :func:`lag` says when ``CURRENT`` does not name the job of the current state (``verify``
  reports it, ``metastore verify --repair`` rewrites it with :func:`repair`). Maintenance
  transactions (expire, tombstone removal) do not rewrite ``CURRENT``: they change no
  statistics, and the job the state's table statistics name stays the same.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs

from engine import fileio
from engine.catalog import lease
from engine.catalog.codec import CHECKPOINT, TRANSACTION
from engine.catalog.paths import CATALOG_DIR, CURRENT
from engine.catalog.replay import CatalogLog

__all__ = ["has_statistics", "lag", "read_pointer", "read_signal", "repair", "write_pointer"]

_UNREADABLE: dict[str, Any] = {}  # read_pointer's answer for a CURRENT that is not a JSON object


def write_pointer(table_uri: str, job_id: str, txn_id: int, txn_uuid: str) -> None:
    """Write ``CURRENT``, the change signal, for the transaction just committed (it names it,
    so that a later loss of that transaction shows)."""
    pointer = {"job_id": job_id, "published_at": datetime.now(UTC).isoformat(), "txn_id": txn_id, "txn_uuid": txn_uuid}
    fileio.write_bytes_atomic(fileio.join(table_uri, CURRENT), json.dumps(pointer).encode())


def read_pointer(table_uri: str) -> dict[str, Any] | None:
    """``CURRENT``'s content; None if there is none, ``{}`` if it cannot be read or parsed."""
    try:
        value = json.loads(fileio.read_bytes(fileio.join(table_uri, CURRENT)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return _UNREADABLE
    return value if isinstance(value, dict) else _UNREADABLE


def has_statistics(table_uri: str) -> bool:
    """Whether a table directory has published statistics: ``CURRENT``, or a committed
    transaction or checkpoint (one listing of ``catalog/transactions/``, only without ``CURRENT``)."""
    fs, path = fileio.resolve(table_uri)
    if fs.get_file_info(f"{path}/{CURRENT}").type == pafs.FileType.File:
        return True
    selector = pafs.FileSelector(f"{path}/{CATALOG_DIR}/transactions", recursive=False, allow_not_found=True)
    suffixes = (f".{TRANSACTION}", f".{CHECKPOINT}")
    return any(
        i.type == pafs.FileType.File and i.base_name.endswith(suffixes) and not i.base_name.startswith(".") for i in fs.get_file_info(selector)
    )


def _head(store_uri: str, table: str) -> tuple[Any, Any]:
    """(catalog, its current state) of a table; the state is None without table statistics."""
    cat = CatalogLog.open(store_uri, table, up_to_last_good=True)
    st = cat.state()
    return cat, (None if st.empty or st.table_statistics is None else st)


def _signal_of(st: Any) -> dict[str, Any]:
    return {"job_id": st.table_statistics.job_id, "published_at": st.timestamp.isoformat(), "txn_id": st.txn_id, "txn_uuid": st.txn_uuid}


def read_signal(store_uri: str, table: str) -> dict[str, Any] | None:
    """``CURRENT``, or (absent) the one the catalog's head would have: what a poller compares.
    None when the table has neither."""
    pointer = read_pointer(fileio.join(store_uri, table))
    if pointer is not None:
        return pointer
    if not has_statistics(fileio.join(store_uri, table)):
        return None
    _cat, st = _head(store_uri, table)
    return None if st is None else _signal_of(st)


def lag(cat: Any, now: float | None = None) -> str | None:
    """Why ``CURRENT`` does not signal the current state of ``cat`` (None when it does, when the
    table has no state, or when the head's job still holds its lease: its publish is writing it)."""
    st = cat.state()
    if st.empty or st.table_statistics is None:
        return None
    job = st.table_statistics.job_id
    pointer = read_pointer(cat.table_uri)
    if pointer is not None and pointer.get("job_id") == job:
        return None
    n = pointer.get("txn_id") if pointer else None
    if isinstance(n, int) and not isinstance(n, bool) and n > st.txn_id:
        return None  # a newer commit than this catalog read (or a lost one: integrity's missing_transactions)
    held = lease.leases(_lease_listing(cat.table_uri, job), time.time() if now is None else now).get(job)
    if held is not None and held.fresh:
        return None  # committed, CURRENT not written yet: the publish is under way
    where = fileio.join(cat.table_uri, CURRENT)
    if pointer is None:
        what = f"{where} is missing"
    elif not pointer:
        what = f"{where} cannot be read"
    else:
        what = f"{where} names job {pointer.get('job_id')} (transaction {pointer.get('txn_id', '?')})"
    return (
        f"{what}, but the current state is transaction {st.txn_id} of job {job}: a publish stopped between its "
        f"commit and the change signal; pollers (the Flight server, the web app) may not see the state "
        f"(metastore verify {cat.table} --repair rewrites it)"
    )


def _lease_listing(table_uri: str, job_id: str) -> list[fileio.FileEntry]:
    uri = lease.lease_uri(table_uri, job_id)
    fs, path = fileio.resolve(uri)
    info = fs.get_file_info(path)
    return [fileio.FileEntry(uri, path, int(info.size or 0), info.mtime_ns)] if info.type == pafs.FileType.File else []


def repair(store_uri: str, table: str) -> str | None:
    """Rewrite ``CURRENT`` for the current state if :func:`lag` finds it lagging; what was done."""
    cat, st = _head(store_uri, table)
    if st is None or lag(cat) is None:
        return None
    write_pointer(cat.table_uri, st.table_statistics.job_id, st.txn_id, st.txn_uuid)
    return f"{fileio.join(cat.table_uri, CURRENT)} rewritten: it names transaction {st.txn_id} of job {st.table_statistics.job_id}"
