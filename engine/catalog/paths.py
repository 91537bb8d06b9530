"""Every path below a store, in one place.

A store root (a local directory or an ``s3://`` prefix) holds one directory per
table::

    <root>/<table>/runs/<job_id>/manifest.json
    <root>/<table>/runs/<job_id>/table/{statistics,frequencies,histograms}.parquet
    <root>/<table>/runs/<job_id>/partitions/<partition key>/{...}.parquet (+ partial state)
    <root>/<table>/catalog/...     the transaction log: which files are current (engine/catalog)
    <root>/<table>/CURRENT         {"job_id": ...}: a change signal for pollers, never the truth

A job writes only below its own ``runs/<job_id>/`` (immutable, unique paths), so
the catalog can name files by paths relative to the table directory, and a
failed job leaves nothing but an unreferenced run directory. The analyze job,
the store, the catalog (gc, rebuild) and the lookups all ask this module, so the
layout is spelled once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from engine import fileio

CATALOG_DIR = "catalog"
RUNS_DIR = "runs"
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
UNPARTITIONED = "_unpartitioned"


def new_job_id() -> str:
    """Sortable by start time, unique without coordination (a uuid suffix)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def partition_dirname(key: str) -> str:
    return key if key else UNPARTITIONED


def files_run(statistics_path: str, job_id: str) -> str:
    """The run directory (relative to the table directory) holding a state's table files:
    the one its table statistics.parquet is in, which is an earlier job's when the
    state's job carried an unchanged table over (engine/runtime/analyze.py)."""
    suffix = "/table/statistics.parquet"
    return statistics_path[: -len(suffix)] if statistics_path.endswith(suffix) else f"{RUNS_DIR}/{job_id}"


@dataclass(frozen=True)
class RunLayout:
    """The files of one job, as paths relative to the table directory (what the catalog stores)."""

    job_id: str

    @property
    def root(self) -> str:
        return f"{RUNS_DIR}/{self.job_id}"

    @property
    def manifest(self) -> str:
        return f"{self.root}/{MANIFEST}"

    def partition_dir(self, key: str) -> str:
        return f"{self.root}/partitions/{partition_dirname(key)}"

    def partition_file(self, key: str, name: str) -> str:
        return f"{self.partition_dir(key)}/{name}"

    @property
    def table_dir(self) -> str:
        return f"{self.root}/table"

    def table_file(self, name: str) -> str:
        return f"{self.table_dir}/{name}"


@dataclass(frozen=True)
class TableLayout:
    """Absolute locations of one table's directory in a store."""

    store_root: str
    table: str

    @property
    def uri(self) -> str:
        return fileio.join(self.store_root, self.table)

    @property
    def catalog_uri(self) -> str:
        return fileio.join(self.uri, CATALOG_DIR)

    @property
    def runs_uri(self) -> str:
        return fileio.join(self.uri, RUNS_DIR)

    @property
    def current_uri(self) -> str:
        return fileio.join(self.uri, CURRENT)

    def run(self, job_id: str) -> RunLayout:
        return RunLayout(job_id)

    def absolute(self, relative: str) -> str:
        """The URI of a path relative to the table directory."""
        return fileio.join(self.uri, relative)

    def run_uri(self, job_id: str) -> str:
        return self.absolute(RunLayout(job_id).root)

    def relative(self, uri: str) -> str | None:
        """The path relative to the table directory of a URI below it (None: not below it)."""
        prefix = self.uri.rstrip("/") + "/"
        if uri.startswith(prefix):
            return uri[len(prefix) :]
        if fileio.is_local(self.uri) and fileio.is_local(uri):
            local = fileio.resolve(self.uri)[1].rstrip("/") + "/"
            path = fileio.resolve(uri)[1]
            if path.startswith(local):
                return path[len(local) :]
        return None
