"""Before a commit: every file the transaction names exists, with the size recorded (issue #33).

A transaction naming a file that is gone publishes a state that cannot be read: a gc that
ran during the job (a grace period shorter than the job, or a lease gone stale) deleted 15
of a job's new files and the job still committed. ``Store.publish`` therefore checks the
files its transaction adds before it commits (``publish_job(check_files=True)``): on a local
store a stat a file; on S3 the job's own run by one listing of it, files of other runs (a
carried-over table level, segments of earlier jobs, an inherited partition added again) one
by one. A missing or resized file
fails the commit with one line naming it; nothing is written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs

from engine import fileio
from engine.catalog.io import CatalogIO
from engine.catalog.model import AddPartition, FileRef, SetTableStatistics, extra_files
from engine.catalog.paths import RUNS_DIR
from engine.exceptions import StatisticsFileCorruptError

__all__ = ["FileCheck"]


def _refs(actions: Iterable[object]) -> dict[str, FileRef]:
    refs: dict[str, FileRef] = {}
    for a in actions:
        if isinstance(a, (AddPartition, SetTableStatistics)):
            for r in a.files.refs():
                refs.setdefault(r.path, r)
        if isinstance(a, SetTableStatistics):
            for r in extra_files(a.properties):
                refs.setdefault(r.path, r)
    return refs


def _local_size(path: str) -> int | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _size(uri: str) -> int | None:
    fs, path = fileio.resolve(uri)
    info = fs.get_file_info(path)
    return int(info.size or 0) if info.type == pafs.FileType.File else None


class FileCheck:
    """Checks the files of a job's transaction (one listing of its run, kept across retries)."""

    def __init__(self, io: CatalogIO, table_uri: str, table: str, job_id: str) -> None:
        self.io, self.table_uri, self.table, self.job_id = io, table_uri, table, job_id
        self.own = f"{RUNS_DIR}/{job_id}/"
        self._sizes: dict[str, int] | None = None  # the job's run: path relative to the table -> size

    def _own_sizes(self) -> dict[str, int]:
        if self._sizes is None:
            root = fileio.resolve(self.table_uri)[1].rstrip("/") + "/"
            listed = self.io.list_files(fileio.join(self.table_uri, RUNS_DIR, self.job_id))
            self._sizes = {e.path[len(root) :]: e.size for e in listed if e.path.startswith(root)}
        return self._sizes

    def __call__(self, actions: Iterable[object]) -> None:
        """Raise StatisticsFileCorruptError naming the first file of ``actions`` that is missing
        or has another size than recorded."""
        refs = [r for _, r in sorted(_refs(actions).items())]
        found: dict[str, int | None] = {}
        if fileio.is_local(self.table_uri):  # a stat a file is cheaper than listing a run's directories
            root = fileio.resolve(self.table_uri)[1]
            found.update((r.path, _local_size(os.path.join(root, r.path))) for r in refs)
            own: list[FileRef] = []
            other: list[FileRef] = []
        else:
            own = [r for r in refs if r.path.startswith(self.own)]
            other = [r for r in refs if not r.path.startswith(self.own)]
        if own:
            sizes = self._own_sizes()
            found.update((r.path, sizes.get(r.path)) for r in own)
        if other:
            uris = [fileio.join(self.table_uri, r.path) for r in other]
            with ThreadPoolExecutor(max_workers=min(16, len(uris)) if self.io.remote else 1) as pool:
                found.update(zip((r.path for r in other), pool.map(_size, uris)))
        bad = [(r, found[r.path]) for r in refs if found[r.path] is None or found[r.path] != r.size]
        if not bad:
            return
        ref, size = bad[0]
        uri = fileio.join(self.table_uri, ref.path)
        if size is None:
            what = f"statistics file missing: {uri} (deleted while the job ran? a gc with a grace period shorter than the job)"
        else:
            what = f"statistics file damaged: {uri}: {size} bytes, the job recorded {ref.size}"
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise StatisticsFileCorruptError(f"cannot commit job {self.job_id} of table {self.table!r}: {what}{more}; nothing was committed", uri=uri)
