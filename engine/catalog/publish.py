"""What the analyze job and the lookups need from the catalog.

- :func:`publish_job`: commit one transaction for a finished analyze job (replaces
  ``Store.publish``'s ``CURRENT`` pointer).
- :func:`current_manifest`: the manifest ``engine.lookup`` reads today through
  ``Store.current()``, built from the catalog's current state.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from engine import fileio
from engine.catalog import retention
from engine.catalog.catalog import DEFAULT_CHECKPOINT_INTERVAL, RUNS_DIR, Catalog, CommitInfo, commit_with_retry
from engine.catalog.io import CatalogIO
from engine.catalog.model import FILE_NAMES, KINDS, FileRef, StatisticsFiles
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError, StatisticsNotFoundError
from engine.files import layout

__all__ = ["current_manifest", "manifest_at", "publish_job"]

#: manifest fields that the catalog state holds itself (not stored as properties)
_DERIVED = frozenset({"partitions", "run_uri", "job_id", "snapshot", "table", "table_files", "tombstones", "catalog"})


def _partition_dirname(key: str) -> str:
    from engine.store import partition_dirname

    return partition_dirname(key)


class _Sizes:
    """Sizes of statistics files, from one listing of the job's run directory (and a stat for others)."""

    def __init__(self, catalog: Catalog, job_id: str) -> None:
        self.catalog = catalog
        self.root = fileio.resolve(catalog.table_uri)[1].rstrip("/") + "/"
        self._sizes: dict[str, int] | None = None
        self.run_prefix = f"{RUNS_DIR}/{job_id}/"
        self.job_id = job_id

    def _relative(self, entry_path: str) -> str:
        return entry_path[len(self.root):] if entry_path.startswith(self.root) else entry_path

    def size(self, rel: str) -> int:
        if self._sizes is None:
            run = fileio.join(self.catalog.table_uri, RUNS_DIR, self.job_id)
            self._sizes = {self._relative(e.path): e.size for e in self.catalog.io.list_files(run)}
        if rel in self._sizes:
            return self._sizes[rel]
        import pyarrow.fs as pafs

        fs, path = fileio.resolve(fileio.join(self.catalog.table_uri, rel))
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise StatisticsNotFoundError(f"statistics file missing: {fileio.join(self.catalog.table_uri, rel)}")
        self._sizes[rel] = int(info.size or 0)
        return self._sizes[rel]


def _relative_path(catalog: Catalog, value: str) -> str:
    """A path relative to the table directory, from a relative path or a URI below the table."""
    if "://" in value or value.startswith("/"):
        prefix = catalog.table_uri.rstrip("/") + "/"
        if value.startswith(prefix):
            return value[len(prefix):]
        local = fileio.resolve(catalog.table_uri)[1].rstrip("/") + "/" if fileio.is_local(catalog.table_uri) else None
        if local and fileio.is_local(value) and fileio.resolve(value)[1].startswith(local):
            return fileio.resolve(value)[1][len(local):]
        raise InvalidArgumentError(f"statistics file {value!r} is not below the table directory {catalog.table_uri}")
    return value


def _files(catalog: Catalog, sizes: _Sizes, given: Mapping[str, Any] | None, default_dir: str) -> StatisticsFiles:
    refs = {}
    given = given or {}
    for kind in KINDS:
        name = FILE_NAMES[kind]
        value = given.get(kind, given.get(name))
        if value is None:
            path, size = f"{default_dir}/{name}", None
        elif isinstance(value, FileRef):
            path, size = value.path, value.size
        elif isinstance(value, Mapping):
            path, size = str(value["path"]), value.get("size")
        elif isinstance(value, (tuple, list)):
            path, size = str(value[0]), value[1]
        else:
            path, size = str(value), None
        path = _relative_path(catalog, path)
        refs[kind] = FileRef(path, int(size) if size is not None else sizes.size(path))
    return StatisticsFiles(**refs)


def publish_job(
    store_uri: str,
    table: str,
    job_id: str,
    snapshot: str,
    partitions: Sequence[Mapping[str, Any]],
    table_files: Mapping[str, Any] | None,
    schema_fingerprint: str,
    *,
    extra: Mapping[str, Any] | None = None,
    tombstone_missing: bool = True,
    attempts: int = 5,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    io: CatalogIO | None = None,
) -> CommitInfo:
    """Commit one transaction that publishes a finished analyze job.

    ``partitions``: one dict per partition of the analyzed snapshot:

    - ``key`` and ``rows``;
    - ``files`` (optional): the three files as ``{kind or file name: path | (path, size) | {"path", "size"}}``,
      paths relative to the table directory or URIs below it; by default the job's
      ``runs/<job_id>/partitions/<key>/<file>``; missing sizes are looked up
      (one listing of the job's run directory);
    - ``data_fingerprint`` (optional): :func:`engine.catalog.partition_fingerprint` of its data files,
      which later jobs need to inherit the statistics;
    - ``inherited: True``: the partition keeps the statistics it has in the catalog
      (refused with IncompatibleSchemaError if they were computed for another schema).
      With ``files`` too, the entry is kept only if it still names those files; if a
      concurrent commit replaced it, the partition is added again with ``files``
      (and its ``rows``, ``data_fingerprint``, ``job_id``, ``snapshot``), so the
      transaction describes exactly what the job merged into its table level.

    ``table_files``: the table-level files in the same form (``{}``/None: the job's
    ``runs/<job_id>/table/<file>``); may hold ``rows``. ``extra``: manifest fields
    readers need (``columns``, ``schema``, ``bins``, ...), stored JSON-encoded and
    returned by :func:`current_manifest`.

    Partitions that are live in the catalog but absent from ``partitions`` are
    tombstoned (their data was dropped upstream) unless ``tombstone_missing`` is
    False. A concurrent commit is resolved by rebuilding the transaction on the
    newer state (``attempts`` times): the last job to publish wins, as with the
    ``CURRENT`` pointer.
    """
    if not schema_fingerprint:
        raise InvalidArgumentError("publish_job needs the schema fingerprint (engine.catalog.schema_fingerprint)")
    catalog = Catalog.open(store_uri, table, io=io, checkpoint_interval=checkpoint_interval)
    sizes = _Sizes(catalog, job_id)
    run = f"{RUNS_DIR}/{job_id}"
    prepared: list[dict[str, Any]] = []
    seen: set[str] = set()
    for p in partitions:
        key = str(p["key"])
        if key in seen:
            raise InvalidArgumentError(f"partition {key!r} is listed twice")
        seen.add(key)
    for p in partitions:
        key = str(p["key"])
        files = _files(catalog, sizes, p.get("files"), f"{run}/partitions/{_partition_dirname(key)}") if not p.get("inherited") or p.get("files") else None
        if p.get("inherited") and files is None:
            prepared.append({"key": key, "inherited": True})
            continue
        prepared.append(
            {
                "key": key,
                "inherited": bool(p.get("inherited")),
                "files": files,
                "rows": int(p["rows"]),
                "data_fingerprint": str(p.get("data_fingerprint") or ""),
                "job_id": str(p.get("job_id") or job_id),
                "snapshot": str(p.get("snapshot") or snapshot),
            }
        )
    tf = dict(table_files or {})
    table_rows = tf.pop("rows", None)
    table_refs = _files(catalog, sizes, tf, f"{run}/table")
    properties = {k: json.dumps(v, separators=(",", ":")) for k, v in (extra or {}).items() if k not in _DERIVED}

    def build(txn, state) -> None:  # noqa: ANN001
        rows = 0
        for p in prepared:
            old = state.partitions.get(p["key"]) if p["inherited"] else None
            if p["inherited"] and old is None and p.get("files") is None:
                raise InvalidArgumentError(f"partition {p['key']!r} is marked inherited but has no statistics in the catalog")
            # kept as it is: no action (unless a concurrent commit replaced the files the job merged)
            if old is not None and (p.get("files") is None or old.files.paths() == p["files"].paths()):
                if old.schema_fingerprint != schema_fingerprint:
                    raise IncompatibleSchemaError(
                        f"partition {p['key']!r}: its statistics were computed for schema {old.schema_fingerprint or '(unknown)'}, "
                        f"not {schema_fingerprint}; they cannot be inherited"
                    )
                rows += old.row_count
                continue
            txn.add_partition(
                p["key"],
                p["files"],
                p["rows"],
                snapshot_id=p["snapshot"],
                schema_fingerprint=schema_fingerprint,
                job_id=p["job_id"],
                data_fingerprint=p["data_fingerprint"],
            )
            rows += p["rows"]
        if tombstone_missing:
            for key in state.partitions:
                if key not in seen:
                    txn.tombstone_partition(key)
        txn.set_table_statistics(
            table_refs,
            int(table_rows) if table_rows is not None else rows,
            schema_fingerprint=schema_fingerprint,
            properties=properties,
        )

    info = commit_with_retry(catalog, job_id, snapshot, build, attempts=attempts)
    # RETENTION HOOK (issue #20): the table's retention policy after every publish; never raises
    retention.apply_after_publish(catalog)
    return info


# --------------------------------------------------------------------------- reading

_catalogs: dict[tuple[str, str], Catalog] = {}
_catalogs_lock = threading.Lock()


def _catalog(store_uri: str, table: str) -> Catalog:
    """A per-process catalog per table, refreshed on each use (one LIST of new names)."""
    key = (store_uri, table)
    with _catalogs_lock:
        cat = _catalogs.get(key)
    if cat is None:
        cat = Catalog.open(store_uri, table)
        with _catalogs_lock:
            _catalogs[key] = cat
    else:
        cat.refresh()
    return cat


def current_manifest(store_uri: str, table: str) -> dict[str, Any]:
    """The current statistics of ``table`` as the manifest ``engine.lookup`` uses.

    The keys of today's ``Store.current()`` (``job_id``, ``snapshot``, ``schema``,
    ``columns``, ``partitions`` as ``{"key", "rows"}``, ``run_uri``, ...), plus:

    - ``table_files``: ``{file name: URI}`` of the table-level files;
    - per partition ``files`` (``{file name: URI}``), ``job_id`` and ``snapshot``:
      with inherited statistics, partitions live in different runs, so a lookup
      must take a partition's URIs from here, not from ``run_uri``;
    - ``tombstones``: keys of partitions dropped upstream (not counted);
    - ``catalog``: ``{"txn_id", "txn_uuid", "committed_at"}``.
    """
    cat = _catalog(store_uri, table)
    st = cat.state()
    ts = st.table_statistics
    if st.empty or ts is None:
        raise StatisticsNotFoundError(f"no published statistics for table {table!r} in store {store_uri}")
    return _manifest(cat, table, st)


def manifest_at(store_uri: str, table: str, txn_id: int | None = None, snapshot: str | None = None) -> dict[str, Any]:
    """The manifest of an earlier state of ``table`` (time travel), in the form of :func:`current_manifest`.

    ``txn_id``: the state right after that catalog transaction; ``snapshot``: the
    state after the newest transaction describing that table snapshot (give one,
    or neither for the current state). ``catalog.txn_id`` of the result says which
    transaction the state is. Raises StatisticsNotFoundError for an id beyond the
    head, a pruned or unknown id or snapshot, a state without table statistics,
    or a table without a catalog.
    """
    if txn_id is not None and snapshot is not None:
        raise InvalidArgumentError("give a transaction id or a snapshot, not both")
    if txn_id is None and snapshot is None:
        return current_manifest(store_uri, table)
    cat = _catalog(store_uri, table)
    head = cat.state()
    if head.empty:
        raise StatisticsNotFoundError(f"table {table!r} in store {store_uri} has no catalog: no earlier states to read")
    if txn_id is not None:
        if isinstance(txn_id, bool) or not isinstance(txn_id, int) or txn_id < 1:
            raise InvalidArgumentError(f"a transaction id is a whole number >= 1, not {txn_id!r}")
        if txn_id > head.txn_id:
            raise StatisticsNotFoundError(f"table {table!r} has no transaction {txn_id} (the newest is {head.txn_id})")
        st = cat.state_at(txn_id)
        what = f"transaction {txn_id}"
    else:
        st = cat.state_at_snapshot(str(snapshot))
        what = f"snapshot {snapshot!r}"
    if st.empty or st.table_statistics is None:
        raise StatisticsNotFoundError(f"table {table!r} has no table statistics at {what}")
    return _manifest(cat, table, st)


def _manifest(cat: Catalog, table: str, st: Any) -> dict[str, Any]:
    ts = st.table_statistics
    manifest: dict[str, Any] = {k: json.loads(v) for k, v in ts.properties.items()}
    table_uri = cat.table_uri

    def uris(files: StatisticsFiles) -> dict[str, str]:
        return {name: fileio.join(table_uri, ref.path) for name, ref in files.by_name().items()}

    stat_path = ts.files.statistics.path
    suffix = f"/table/{layout.STATISTICS_FILE}"
    run_uri = fileio.join(table_uri, stat_path[: -len(suffix)]) if stat_path.endswith(suffix) else fileio.join(table_uri, RUNS_DIR, ts.job_id)
    manifest.setdefault("format_version", layout.FORMAT_VERSION)
    manifest.setdefault("rows", ts.row_count)
    manifest.update(
        {
            "table": table,
            "snapshot": st.snapshot_id,
            "job_id": ts.job_id,
            "run_uri": run_uri,
            "schema_fingerprint": ts.schema_fingerprint,
            "table_files": uris(ts.files),
            "partitions": [
                {"key": e.key, "rows": e.row_count, "job_id": e.job_id, "snapshot": e.snapshot_id, "files": uris(e.files)}
                for e in st.partitions.values()
            ],
            "tombstones": sorted(st.tombstones),
            "catalog": {"txn_id": st.txn_id, "txn_uuid": st.txn_uuid, "committed_at": st.timestamp.isoformat()},
        }
    )
    return manifest
