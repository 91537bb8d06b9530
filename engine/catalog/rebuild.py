"""Re-create a table's catalog from its statistics files alone.

Every statistics file describes itself in its Parquet key-value metadata
(``metastore.table``, ``.level``, ``.partition``, ``.kind``, ``.snapshot``,
``.job_id``, ``.created_at``; engine/files/layout.py). :func:`rebuild` reads the
footers of every file below ``<table>/runs/``, groups them by job and commits one
transaction per job, oldest ``created_at`` first, so the newest job per partition
wins. Only complete jobs count: a job whose table-level files are not all there
never finished (the table level is written last), and a partition needs all
three files. A job that re-binned an inherited partition wrote only its
histograms.parquet (and statistics.parquet when the bin counts changed) and kept
the other files of the partition's earlier job: such a partition takes the kinds
it lacks from the newest earlier job that has them. A job that carried an unchanged
table over wrote only its manifest.json, which names the table files it carried
(``table_files_job``): it is rebuilt from that, after the job that wrote them.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow.parquet as pq

from engine import fileio
from engine.catalog import codec
from engine.catalog.cache import forget_catalog
from engine.catalog.catalog import Catalog
from engine.catalog.io import CatalogIO, io_for
from engine.catalog.job_output import manifest_properties
from engine.catalog.logindex import DEFAULT_CHECKPOINT_INTERVAL
from engine.catalog.model import KINDS, FileRef, StatisticsFiles
from engine.catalog.paths import MANIFEST, RUNS_DIR, RunLayout
from engine.catalog.signal import write_pointer
from engine.catalog.snapshots import schema_fingerprint
from engine.exceptions import InvalidArgumentError
from engine.files import layout

log = logging.getLogger("engine.catalog")

__all__ = ["RebuildResult", "rebuild"]


@dataclass
class RebuildResult:
    transactions: int  # committed, one per complete job
    jobs: list[str]  # in commit order
    skipped: list[str] = field(default_factory=list)  # what was left out, and why
    backup_uri: str | None = None  # where the replaced catalog's files were copied


@dataclass
class _File:
    rel: str
    size: int
    meta: dict[str, str]


def _file_refs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``{"path", "size", "checksum"}`` entries a job's manifest.json records (#21)."""
    out: list[dict[str, Any]] = []
    groups = [p.get("files") for p in manifest.get("partitions") or [] if isinstance(p, dict)]
    groups.append(manifest.get("table_files"))
    for files in groups:
        if isinstance(files, dict):
            out.extend(v for v in files.values() if isinstance(v, dict) and v.get("path") and v.get("checksum"))
    return out


def _read_footer(uri: str) -> dict[str, str]:
    with fileio.open_input(uri) as f:
        return layout.decode_metadata(pq.read_metadata(f).metadata)


def _statistics_summary(uri: str) -> tuple[int, str]:
    """Row count and schema fingerprint of a statistics.parquet (its row_count, column and type columns)."""
    with fileio.open_input(uri) as f:
        t = pq.read_table(f, columns=["column", "type", "row_count"])
    rows = t.column("row_count").to_pylist()
    pairs = list(zip(t.column("column").to_pylist(), t.column("type").to_pylist()))
    return (int(rows[0]) if rows and rows[0] is not None else 0), schema_fingerprint(pairs)


def _with_carried_over(
    io: CatalogIO,
    table_uri: str,
    root: str,
    listed: list[fileio.FileEntry],
    complete: list[tuple[str, dict[str, Any]]],
    jobs: dict[str, dict[str, Any]],
    result: RebuildResult,
) -> list[tuple[str, dict[str, Any]]]:
    """``complete`` with the jobs that carried an unchanged table over (engine/runtime/analyze.py):
    such a job wrote only its manifest.json, which names the table files of the job that wrote
    them (``table_files_job``); it is rebuilt as a transaction naming them again, in its own
    ``created_at`` order, with its source snapshot."""
    done = dict(complete)
    found = []
    for entry in listed:
        rel = entry.path[len(root) :] if entry.path.startswith(root) else entry.path
        parts = rel.split("/")
        if len(parts) != 3 or parts[0] != RUNS_DIR or parts[2] != MANIFEST or parts[1] in jobs:
            continue
        try:
            manifest = json.loads(io.read(entry.uri))
        except Exception as exc:  # noqa: BLE001 - reported, the run is skipped
            result.skipped.append(f"{rel}: unreadable ({type(exc).__name__}: {exc})")
            continue
        origin = manifest.get("table_files_job") if isinstance(manifest, dict) else None
        if not origin:
            continue  # a run without statistics files: a job that did not finish
        if origin not in done:
            result.skipped.append(f"job {parts[1]}: carries over the table files of job {origin}, which is not complete")
            continue
        found.append(
            (
                parts[1],
                {
                    **done[origin],
                    "created_at": str(manifest.get("created_at") or ""),
                    "snapshot": str(manifest.get("snapshot") or ""),
                    "partitions": {},
                },
            )
        )
    return sorted(complete + found, key=lambda kv: (kv[1]["created_at"], kv[0])) if found else complete


def rebuild(
    store_uri: str,
    table: str,
    *,
    replace: bool = False,
    backup: bool = True,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    io: CatalogIO | None = None,
) -> RebuildResult:
    """Re-create the catalog of ``table`` from the statistics files below ``runs/``.

    An existing catalog is replaced only with ``replace=True``: its files are
    first copied to ``catalog/backup/<UTC time>/`` (unless ``backup=False``) and
    deleted, newest first. No writer may commit to the table while it runs (it is
    a recovery tool): the rebuilt log has a new timeline, and a writer still on
    the old one is refused by readers (its files do not belong to the new log).
    """
    io = io if io is not None else io_for(store_uri)
    cat = Catalog(store_uri, table, io=io, checkpoint_interval=checkpoint_interval)
    result = RebuildResult(transactions=0, jobs=[])
    _clear(io, cat, table, replace=replace, backup=backup, result=result)
    complete = _complete_jobs(io, cat, table, result)
    summaries = _summaries(io, cat, complete)
    manifests, recorded = _manifests(io, cat, complete)
    for job, j in complete:
        if _commit_job(cat, job, j, summaries, manifests.get(job), recorded, result):
            result.transactions += 1
            result.jobs.append(job)
    for line in result.skipped:
        log.warning("rebuild of %r: skipped %s", table, line)
    forget_catalog(store_uri, table)  # this process's readers: the rebuilt log restarts its transaction ids
    head = cat.state()
    if not head.empty and head.table_statistics is not None:
        # the change signal names the rebuilt log's head (a pointer of the replaced log would
        # name transactions this log does not have)
        write_pointer(cat.table_uri, head.table_statistics.job_id, head.txn_id, head.txn_uuid)
    return result


def _clear(io: CatalogIO, cat: Catalog, table: str, *, replace: bool, backup: bool, result: RebuildResult) -> None:
    """Back up and delete the table's existing catalog files (refused without ``replace``)."""
    existing = [n for n in io.list_names(cat.transactions_uri) if codec.parse_name(n) is not None]
    if not existing:
        return
    if not replace:
        raise InvalidArgumentError(
            f"table {table!r} already has a catalog ({len(existing)} files in {cat.transactions_uri}); "
            f"pass replace=True to rebuild it from the statistics files"
        )
    if backup:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        result.backup_uri = fileio.join(cat.catalog_uri, "backup", stamp)
        for name in existing:
            io.copy(fileio.join(cat.transactions_uri, name), fileio.join(result.backup_uri, name))
    for name in sorted(existing, reverse=True):  # newest first: an interrupted delete leaves a prefix of the old log
        io.delete(fileio.join(cat.transactions_uri, name))


def _footers(io: CatalogIO, entries: list[fileio.FileEntry]) -> list[tuple[fileio.FileEntry, dict[str, str] | Exception]]:
    """Every statistics file's footer (its metastore.* metadata), or why it cannot be read."""

    def footer(entry: fileio.FileEntry) -> tuple[fileio.FileEntry, dict[str, str] | Exception]:
        try:
            return entry, _read_footer(entry.uri)
        except Exception as exc:  # noqa: BLE001 - reported, the file is skipped
            return entry, exc

    with ThreadPoolExecutor(max_workers=16 if io.remote else 4) as pool:
        return list(pool.map(footer, entries))


def _complete_jobs(io: CatalogIO, cat: Catalog, table: str, result: RebuildResult) -> list[tuple[str, dict[str, Any]]]:
    """The jobs whose files make a transaction, in commit order, each with its table's and its
    partitions' files (a partition's files missing from a job taken from its newest earlier job)."""
    runs_uri = fileio.join(cat.table_uri, RUNS_DIR)
    root = fileio.resolve(cat.table_uri)[1].rstrip("/") + "/"
    # the three kinds' files; a run's file index (engine/fileindex) comes back through its manifest's properties
    from engine.fileindex.store import INDEX_FILES as _INDEX_FILES  # here: the index's builder imports Ray

    listed = io.list_files(runs_uri)
    entries = [e for e in listed if e.path.endswith(".parquet") and e.path.rsplit("/", 1)[-1] not in _INDEX_FILES]
    jobs: dict[str, dict[str, Any]] = {}
    for entry, meta in _footers(io, entries):
        rel = entry.path[len(root) :] if entry.path.startswith(root) else entry.path
        if isinstance(meta, Exception):
            result.skipped.append(f"{rel}: unreadable ({type(meta).__name__}: {meta})")
            continue
        kind, level, job = meta.get("metastore.kind"), meta.get("metastore.level"), meta.get("metastore.job_id")
        if not job or kind not in KINDS or level not in ("table", "partition"):
            result.skipped.append(f"{rel}: not a statistics file (metastore.* metadata incomplete)")
            continue
        if meta.get("metastore.table", table) != table:
            result.skipped.append(f"{rel}: belongs to table {meta.get('metastore.table')!r}")
            continue
        j = jobs.setdefault(
            job, {"created_at": meta.get("metastore.created_at", ""), "snapshot": meta.get("metastore.snapshot", ""), "table": {}, "partitions": {}}
        )
        j["created_at"] = min(j["created_at"], meta.get("metastore.created_at", "")) or j["created_at"]
        f = _File(rel, entry.size, meta)
        if level == "table":
            j["table"][kind] = f
        else:
            j["partitions"].setdefault(meta.get("metastore.partition", ""), {})[kind] = f

    ordered = sorted(jobs.items(), key=lambda kv: (kv[1]["created_at"], kv[0]))
    complete = []
    for job, j in ordered:
        if set(j["table"]) != set(KINDS):
            result.skipped.append(f"job {job}: table-level files incomplete ({', '.join(sorted(j['table'])) or 'none'}): the job did not finish")
            continue
        complete.append((job, j))
    complete = _with_carried_over(io, cat.table_uri, root, listed, complete, jobs, result)
    # a partition's files missing from a job (re-binned inherited partitions) come from its newest earlier job
    latest: dict[str, dict[str, _File]] = {}
    for _job, j in complete:
        for key, files in j["partitions"].items():
            merged = {**latest.get(key, {}), **files}
            if set(files) != set(KINDS) and set(merged) == set(KINDS):
                j["partitions"][key] = merged
            latest[key] = merged
    return complete


def _summaries(io: CatalogIO, cat: Catalog, complete: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[int, str] | Exception]:
    """Row count and schema fingerprint of every statistics.parquet the transactions name, by URI."""

    def summary(uri: str) -> tuple[int, str] | Exception:
        try:
            return _statistics_summary(uri)
        except Exception as exc:  # noqa: BLE001
            return exc

    stat_uris = []
    for _job, j in complete:
        stat_uris.append(fileio.join(cat.table_uri, j["table"]["statistics"].rel))
        for files in j["partitions"].values():
            if set(files) == set(KINDS):
                stat_uris.append(fileio.join(cat.table_uri, files["statistics"].rel))
    with ThreadPoolExecutor(max_workers=16 if io.remote else 4) as pool:
        return dict(zip(stat_uris, pool.map(summary, stat_uris)))


def _manifests(
    io: CatalogIO, cat: Catalog, complete: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, dict[str, Any] | Exception | None], dict[str, tuple[int, str]]]:
    """Each job's manifest.json (None: none; the exception: unreadable), and the sizes and
    checksums they recorded when the files were written (#21), by path."""
    manifests: dict[str, dict[str, Any] | Exception | None] = {}
    recorded: dict[str, tuple[int, str]] = {}
    for job, _j in complete:
        try:
            manifests[job] = json.loads(io.read(fileio.join(cat.table_uri, RunLayout(job).manifest)))
        except FileNotFoundError:
            manifests[job] = None
        except Exception as exc:  # noqa: BLE001
            manifests[job] = exc
        m = manifests[job]
        if isinstance(m, dict):
            for ref in _file_refs(m):
                recorded[ref["path"]] = (int(ref.get("size") or -1), str(ref["checksum"]))
    return manifests, recorded


def _refs(files: dict[str, _File], recorded: dict[str, tuple[int, str]]) -> StatisticsFiles:
    """A partition's (or the table's) files, with the checksums recorded for them; a file whose
    size differs from the recorded one keeps no checksum (verify reports it)."""
    out = {}
    for k in KINDS:
        size, checksum = recorded.get(files[k].rel, (-1, ""))
        out[k] = FileRef(files[k].rel, files[k].size, checksum if size == files[k].size else "")
    return StatisticsFiles(**out)


def _commit_job(
    cat: Catalog,
    job: str,
    j: dict[str, Any],
    summaries: dict[str, tuple[int, str] | Exception],
    manifest: dict[str, Any] | Exception | None,
    recorded: dict[str, tuple[int, str]],
    result: RebuildResult,
) -> bool:
    """Commit the transaction of one complete job; False when its table statistics cannot be read."""
    table_stats = summaries[fileio.join(cat.table_uri, j["table"]["statistics"].rel)]
    if isinstance(table_stats, Exception):
        result.skipped.append(f"job {job}: table statistics unreadable ({table_stats})")
        return False
    table_rows, table_schema = table_stats
    txn = cat.begin(job, j["snapshot"])
    for key in sorted(j["partitions"]):
        files = j["partitions"][key]
        if set(files) != set(KINDS):
            result.skipped.append(f"job {job} partition {key!r}: files incomplete ({', '.join(sorted(files))})")
            continue
        s = summaries.get(fileio.join(cat.table_uri, files["statistics"].rel))
        if s is None or isinstance(s, Exception):
            result.skipped.append(f"job {job} partition {key!r}: statistics unreadable ({s})")
            continue
        rows, schema = s
        txn.add_partition(
            key,
            _refs(files, recorded),
            rows,
            snapshot_id=files["statistics"].meta.get("metastore.snapshot", j["snapshot"]),
            schema_fingerprint=schema,
        )
    properties = {}
    if isinstance(manifest, dict):
        properties = {k: json.dumps(v, separators=(",", ":")) for k, v in manifest_properties(manifest).items()}
    elif isinstance(manifest, Exception):
        result.skipped.append(f"job {job}: manifest.json unreadable ({manifest}); no schema in the catalog")
    txn.set_table_statistics(_refs(j["table"], recorded), table_rows, schema_fingerprint=table_schema, properties=properties)
    txn.commit()
    return True
