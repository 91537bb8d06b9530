"""Helpers of the catalog tests: fault injection, request counting, a reference model, tiny statistics files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine.catalog import CatalogIO, CatalogState, io_for
from engine.catalog.io import LocalCatalogIO
from engine.files.layout import FileIdentity

KINDS = ("statistics", "frequencies", "histograms")


# --------------------------------------------------------------------------- I/O wrappers


class SimulatedCrash(BaseException):
    """The process stops here (not an Exception: nothing in the catalog may catch it)."""


class FaultyIO(CatalogIO):
    """Wraps a CatalogIO; at the ``fail_at``-th write (create, delete, copy; 0-based) it

    - ``error_before``: raises OSError, nothing written;
    - ``error_after``:  writes, then raises OSError (the response was lost);
    - ``crash_before``: raises SimulatedCrash, nothing written;
    - ``crash_after``:  writes, then raises SimulatedCrash.

    ``created`` and ``deleted`` record what really happened in the store.
    """

    MODES = ("error_before", "error_after", "crash_before", "crash_after")

    def __init__(self, inner: CatalogIO, fail_at: int | None = None, mode: str = "error_before") -> None:
        assert mode in self.MODES
        self.inner = inner
        self.remote = inner.remote
        self.fail_at = fail_at
        self.mode = mode
        self.writes = 0
        self.fired = False
        self.created: list[str] = []
        self.deleted: list[str] = []

    def _write(self, what: str, uri: str, fn, record: list[str]) -> None:  # noqa: ANN001
        k = self.writes
        self.writes += 1
        if self.fail_at is None or k != self.fail_at or self.fired:
            fn()
            record.append(uri)
            return
        self.fired = True
        if self.mode == "error_before":
            raise OSError(f"injected failure before write #{k} ({what} {uri})")
        if self.mode == "crash_before":
            raise SimulatedCrash(f"crash before write #{k} ({what} {uri})")
        fn()
        record.append(uri)
        if self.mode == "error_after":
            raise OSError(f"injected failure after write #{k} ({what} {uri}): the response was lost")
        raise SimulatedCrash(f"crash after write #{k} ({what} {uri})")

    def create(self, uri: str, data: bytes) -> None:
        self._write("create", uri, lambda: self.inner.create(uri, data), self.created)

    def delete(self, uri: str) -> None:
        self._write("delete", uri, lambda: self.inner.delete(uri), self.deleted)

    def copy(self, src_uri: str, dst_uri: str) -> None:
        self._write("copy", dst_uri, lambda: self.inner.copy(src_uri, dst_uri), self.created)

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        return self.inner.list_names(dir_uri, start_after)

    def read(self, uri: str) -> bytes:
        return self.inner.read(uri)

    def list_files(self, dir_uri: str):  # noqa: ANN201
        return self.inner.list_files(dir_uri)


class CountingIO(CatalogIO):
    """Counts requests by kind; ``reads`` lists the names read."""

    def __init__(self, inner: CatalogIO) -> None:
        self.inner = inner
        self.remote = inner.remote
        self.lists = 0
        self.reads: list[str] = []
        self.creates = 0

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        self.lists += 1
        return self.inner.list_names(dir_uri, start_after)

    def read(self, uri: str) -> bytes:
        self.reads.append(uri.rsplit("/", 1)[-1])
        return self.inner.read(uri)

    def create(self, uri: str, data: bytes) -> None:
        self.creates += 1
        self.inner.create(uri, data)

    def delete(self, uri: str) -> None:
        self.inner.delete(uri)

    def list_files(self, dir_uri: str):  # noqa: ANN201
        return self.inner.list_files(dir_uri)


def fast_io(store_uri: str) -> CatalogIO:
    """The store's catalog I/O, without fsync locally (a simulated crash is a process stop, not a power cut)."""
    return LocalCatalogIO(durable=False) if fileio.is_local(store_uri) else io_for(store_uri)


# --------------------------------------------------------------------------- reference model


def files_for(job: str, key: str | None, variant: int = 0) -> dict[str, tuple[str, int]]:
    base = f"runs/{job}/table" if key is None else f"runs/{job}/partitions/{key or '_unpartitioned'}"
    return {k: (f"{base}/{k}.parquet", 100 + 10 * variant + i) for i, k in enumerate(KINDS)}


@dataclass
class Model:
    """An independent reference implementation of the catalog's state."""

    txn_id: int = 0
    snapshot: str = ""
    job_id: str = ""
    version: int = 0
    entries: dict[str, tuple] = field(default_factory=dict)  # key -> (files, rows, snap, schema, job, datafp, tomb, added_in)
    table: tuple | None = None

    def copy(self) -> Model:
        return Model(self.txn_id, self.snapshot, self.job_id, self.version, dict(self.entries), self.table)

    def live(self, key: str) -> bool:
        return key in self.entries and not self.entries[key][6]


def normalize(state: CatalogState) -> Model:
    entries = {
        k: (
            tuple((r.path, r.size) for r in e.files.refs()),
            e.row_count,
            e.snapshot_id,
            e.schema_fingerprint,
            e.job_id,
            e.data_fingerprint,
            e.tombstoned,
            e.added_in,
        )
        for k, e in state.entries.items()
    }
    ts = state.table_statistics
    table = None
    if ts is not None:
        table = (
            tuple((r.path, r.size) for r in ts.files.refs()),
            ts.row_count,
            ts.snapshot_id,
            ts.schema_fingerprint,
            ts.job_id,
            tuple(sorted(ts.properties.items())),
        )
    return Model(state.txn_id, state.snapshot_id, state.job_id, state.format_version, entries, table)


def run_intents(txn, model: Model, intents: Sequence[tuple], job: str, snapshot: str) -> Model:  # noqa: ANN001
    """Turn intents into valid actions on ``txn`` and return the model after them.

    Intents: ("add", key, variant), ("remove", key), ("tomb", key), ("table", variant), ("upgrade",).
    An intent that would not apply becomes an add of the key.
    """
    m = model.copy()
    m.txn_id += 1
    m.snapshot, m.job_id = snapshot, job
    if model.version == 0:
        m.version = 1  # the builder starts a new catalog with Upgrade(1)
    for intent in intents:
        kind = intent[0]
        if kind in ("remove", "tomb"):
            key = intent[1]
            if kind == "remove" and key in m.entries:
                txn.remove_partition(key)
                del m.entries[key]
                continue
            if kind == "tomb" and m.live(key):
                txn.tombstone_partition(key)
                m.entries[key] = m.entries[key][:6] + (True,) + m.entries[key][7:]
                continue
            intent = ("add", key, 0)
            kind = "add"
        if kind == "add":
            _, key, variant = intent
            files = files_for(job, key, variant)
            rows = 1000 + variant
            txn.add_partition(key, files, rows, schema_fingerprint=f"schema{variant % 2}", data_fingerprint=f"d{variant}")
            m.entries[key] = (tuple(files[k] for k in KINDS), rows, snapshot, f"schema{variant % 2}", job, f"d{variant}", False, m.txn_id)
        elif kind == "table":
            variant = intent[1]
            files = files_for(job, None, variant)
            props = {"columns": json.dumps([["a", "int64"]]), "v": str(variant)}
            txn.set_table_statistics(files, 5000 + variant, schema_fingerprint="schema0", properties=props)
            m.table = (tuple(files[k] for k in KINDS), 5000 + variant, snapshot, "schema0", job, tuple(sorted(props.items())))
        elif kind == "upgrade":
            txn.upgrade(1)
            m.version = 1
        else:  # pragma: no cover
            raise AssertionError(intent)
    return m


# --------------------------------------------------------------------------- tiny statistics files


def write_stat_file(uri: str, identity: FileIdentity, kind: str, columns: Sequence[tuple[str, str]], rows: int) -> int:
    """A small Parquet file with the metastore.* metadata of ``kind``; returns its size."""
    if kind == "statistics":
        t = pa.table(
            {
                "column": [c for c, _ in columns],
                "type": [t for _, t in columns],
                "row_count": pa.array([rows] * len(columns), pa.int64()),
            }
        )
    elif kind == "frequencies":
        t = pa.table({"column": ["a"], "value": ["1"], "frequency": pa.array([rows], pa.int64())})
    else:
        t = pa.table({"a": pa.array([{"lower": 0, "upper": 1, "count": rows}])})
    md = identity.metadata(kind)
    md["metastore.columns"] = json.dumps([c for c, _ in columns])
    md["metastore.row_group_rows"] = "64"
    t = t.replace_schema_metadata(md)
    with fileio.open_output(uri) as sink:
        pq.write_table(t, sink)
    return fileio.resolve(uri)[0].get_file_info(fileio.resolve(uri)[1]).size


def write_job(
    store_uri: str,
    table: str,
    job_id: str,
    snapshot: str,
    created_at: str,
    partitions: dict[str, int],
    columns: Sequence[tuple[str, str]] = (("a", "int64"), ("b", "string")),
    table_level: bool = True,
    manifest: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the statistics files of one analyze job; returns what publish_job needs."""
    from engine.store import Store

    store = Store(store_uri)
    parts = []
    for key, rows in partitions.items():
        ident = FileIdentity(table, f"/data/{table}", "partition", key, snapshot, job_id, created_at)
        out = store.partition_uri(table, job_id, key)
        for kind in KINDS:
            write_stat_file(fileio.join(out, f"{kind}.parquet"), ident, kind, columns, rows)
        parts.append({"key": key, "rows": rows})
    if table_level:
        ident = FileIdentity(table, f"/data/{table}", "table", "", snapshot, job_id, created_at)
        out = store.table_level_uri(table, job_id)
        for kind in KINDS:
            write_stat_file(fileio.join(out, f"{kind}.parquet"), ident, kind, columns, sum(partitions.values()))
    if manifest is not None:
        fileio.write_bytes(fileio.join(store.run_uri(table, job_id), "manifest.json"), json.dumps(manifest).encode())
    return {"partitions": parts, "columns": list(columns)}


def job_output(
    store_uri: str,
    table: str,
    job_id: str,
    snapshot: str,
    partitions: Sequence[dict[str, Any]],
    table_files: dict[str, Any] | None,
    schema_fingerprint: str,
    *,
    extra: dict[str, Any] | None = None,
):
    """A typed JobOutput from the short forms these tests write: partitions as
    ``{"key", "rows", "files"?, "data_fingerprint"?, "inherited"?, "job_id"?, "snapshot"?}``,
    files as ``{kind: path | (path, size)}`` (default: the job's run layout), sizes
    looked up when not given (a missing file raises StatisticsNotFoundError)."""
    import pyarrow.fs as pafs

    from engine.catalog import FileRef, JobOutput, JobPartition, RunLayout, StatisticsFiles, TableLayout
    from engine.catalog.model import FILE_NAMES
    from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError

    where, run = TableLayout(store_uri, table), RunLayout(job_id)

    def size(rel: str) -> int:
        fs, path = fileio.resolve(where.absolute(rel))
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise StatisticsNotFoundError(f"statistics file missing: {where.absolute(rel)}")
        return int(info.size or 0)

    def files(given: dict[str, Any] | None, default) -> StatisticsFiles:  # noqa: ANN001
        refs = {}
        for kind in KINDS:
            value = (given or {}).get(kind, (given or {}).get(FILE_NAMES[kind]))
            if isinstance(value, dict):
                value = (value["path"], value.get("size"))
            path, n = (value[0], value[1]) if isinstance(value, (tuple, list)) else (value or default(FILE_NAMES[kind]), None)
            if "://" in path or path.startswith("/"):
                rel = where.relative(path)
                if rel is None:
                    raise InvalidArgumentError(f"statistics file {path!r} is not below the table directory {where.uri}")
                path = rel
            refs[kind] = FileRef(path, int(n) if n is not None else size(path))
        return StatisticsFiles(**refs)

    keys = [p["key"] for p in partitions]
    if len(set(keys)) != len(keys):
        raise InvalidArgumentError(f"partition {next(k for k in keys if keys.count(k) > 1)!r} is listed twice")
    out = []
    for p in partitions:
        inherited = bool(p.get("inherited"))
        f = None if inherited and not p.get("files") else files(p.get("files"), lambda name, k=p["key"]: run.partition_file(k, name))
        out.append(
            JobPartition(
                p["key"],
                int(p.get("rows", 0)),
                f,
                str(p.get("data_fingerprint") or ""),
                inherited,
                str(p.get("job_id") or ""),
                str(p.get("snapshot") or ""),
            )  # fmt: skip
        )
    tf = dict(table_files or {})
    rows = tf.pop("rows", None)
    derived = {"partitions", "run_uri", "job_id", "snapshot", "table", "table_files", "tombstones", "catalog"}
    properties = {k: v for k, v in (extra or {}).items() if k not in derived}
    return JobOutput(table, job_id, snapshot, schema_fingerprint, tuple(out), files(tf, run.table_file), properties, rows)
