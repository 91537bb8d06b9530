"""Where statistics files live and how an analyze publishes them atomically.

Layout under a store root (a local directory or an ``s3://`` prefix)::

    <root>/<table>/runs/<job_id>/manifest.json
    <root>/<table>/runs/<job_id>/table/{statistics,frequencies,histograms}.parquet
    <root>/<table>/runs/<job_id>/partitions/<partition key>/{...}.parquet
    <root>/<table>/catalog/transactions/...   the catalog: which files are current (engine/catalog)
    <root>/<table>/CURRENT                    {"job_id": ...}: a change signal for pollers

A job writes only below its own ``runs/<job_id>/`` (immutable, unique paths);
nothing is visible until ``publish`` commits one catalog transaction. A failed
job leaves only an unreferenced run directory, which ``abort`` removes (and the
catalog's garbage collection would). Tables published before the catalog
existed are still read through their ``CURRENT`` pointer.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from engine import fileio
from engine.exceptions import StatisticsNotFoundError

CURRENT = "CURRENT"
MANIFEST = "manifest.json"
UNPARTITIONED = "_unpartitioned"


def new_job_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def partition_dirname(key: str) -> str:
    return key if key else UNPARTITIONED


@dataclass(frozen=True)
class Store:
    root: str

    def table_uri(self, table: str) -> str:
        return fileio.join(self.root, table)

    def run_uri(self, table: str, job_id: str) -> str:
        return fileio.join(self.root, table, "runs", job_id)

    def partition_uri(self, table: str, job_id: str, key: str) -> str:
        return fileio.join(self.run_uri(table, job_id), "partitions", partition_dirname(key))

    def table_level_uri(self, table: str, job_id: str) -> str:
        return fileio.join(self.run_uri(table, job_id), "table")

    def publish(self, table: str, job_id: str, manifest: dict[str, Any]) -> None:
        """Make a finished job's files the table's current statistics.

        The commit is one transaction of the table's catalog (engine/catalog):
        atomic, linear, with history and time travel. ``manifest.json`` stays in
        the run directory so the catalog can be rebuilt from the files alone,
        and ``CURRENT`` is rewritten afterwards as a cheap change signal for
        pollers (it is never the source of truth).
        """
        run = self.run_uri(table, job_id)
        fileio.write_bytes(fileio.join(run, MANIFEST), json.dumps(manifest, indent=1).encode())
        self._commit(table, job_id, manifest)

    def republish(self, table: str, job_id: str) -> None:
        """Make an earlier job's statistics current again (a roll-back), from its manifest."""
        uri = fileio.join(self.run_uri(table, job_id), MANIFEST)
        if not fileio.exists(uri):
            raise StatisticsNotFoundError(f"no analyze job {job_id!r} of table {table!r} in store {self.root}")
        self._commit(table, job_id, json.loads(fileio.read_bytes(uri)), republish=True)

    def _commit(self, table: str, job_id: str, manifest: dict[str, Any], republish: bool = False) -> None:
        from engine.catalog import publish_job, schema_fingerprint

        extra = {k: v for k, v in manifest.items() if k not in ("partitions", "job_id", "snapshot", "table")}
        partitions = []
        for p in manifest["partitions"]:
            # files: partitions the job inherited live in earlier runs; a republish names
            # them explicitly (the catalog's entry may have changed since)
            entry = {k: p[k] for k in ("key", "rows", "files", "data_fingerprint", "job_id", "snapshot") if p.get(k) is not None}
            if p.get("inherited") and not republish:
                entry["inherited"] = True
            partitions.append(entry)
        commit = publish_job(
            self.root,
            table,
            job_id,
            manifest["snapshot"],
            partitions,
            manifest.get("table_file_refs"),  # checksums (#21): the table files' sizes and checksums (None: the run's table/)
            schema_fingerprint(manifest["columns"]),
            extra=extra,
        )
        pointer = {"job_id": job_id, "published_at": datetime.now(timezone.utc).isoformat()}
        # the transaction it signals (#21): a later loss of that transaction shows (engine/catalog/integrity.py)
        pointer.update(txn_id=commit.txn_id, txn_uuid=commit.uuid)
        fileio.write_bytes_atomic(fileio.join(self.table_uri(table), CURRENT), json.dumps(pointer).encode())

    def abort(self, table: str, job_id: str) -> None:
        try:
            fileio.delete_dir(self.run_uri(table, job_id), missing_ok=True)
        except Exception:  # best effort: an unreferenced run is harmless
            pass

    def current(self, table: str) -> dict[str, Any]:
        """The published manifest of a table, from its catalog (or a pre-catalog CURRENT pointer)."""
        from engine.catalog import current_manifest

        if fileio.exists(fileio.join(self.table_uri(table), "catalog")):
            return current_manifest(self.root, table)
        pointer_uri = fileio.join(self.table_uri(table), CURRENT)
        if not fileio.exists(pointer_uri):
            raise StatisticsNotFoundError(f"no published statistics for table {table!r} in store {self.root}")
        job_id = json.loads(fileio.read_bytes(pointer_uri))["job_id"]
        manifest = json.loads(fileio.read_bytes(fileio.join(self.run_uri(table, job_id), MANIFEST)))
        manifest["run_uri"] = self.run_uri(table, job_id)
        return manifest

    def tables(self) -> list[str]:
        """Tables with published statistics (a directory holding CURRENT)."""
        import pyarrow.fs as pafs

        fs, path = fileio.resolve(self.root)
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return []
        names = []
        for info in fs.get_file_info(pafs.FileSelector(path, recursive=False)):
            if info.type == pafs.FileType.Directory and fs.get_file_info(f"{info.path}/{CURRENT}").type == pafs.FileType.File:
                names.append(info.base_name)
        return sorted(names)
