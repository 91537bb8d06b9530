"""A store of statistics: publish a job's output atomically, read the current state.

The layout of a store is engine/catalog/paths.py's. A job writes only below its
own ``runs/<job_id>/``; nothing is visible until :meth:`Store.publish` commits
one catalog transaction (engine/catalog). A failed job leaves only an
unreferenced run directory, which :meth:`Store.abort` removes (and the
catalog's garbage collection would). Tables published before the catalog
existed are still read through their ``CURRENT`` pointer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from engine import fileio
from engine.catalog.paths import CURRENT, MANIFEST, UNPARTITIONED, TableLayout, new_job_id, partition_dirname  # noqa: F401 (re-exported)
from engine.catalog.published import PublishedState
from engine.catalog.reading import current_state, output_state
from engine.exceptions import StatisticsNotFoundError

if TYPE_CHECKING:
    from engine.catalog.job_output import JobOutput

# The writers' modules (a job's output, its lease, the publish) and the listing's signal check
# load in the methods that use them: the lookups import this module to read (issue #30).

log = logging.getLogger("engine.store")


@dataclass(frozen=True)
class Store:
    root: str

    def layout(self, table: str) -> TableLayout:
        return TableLayout(self.root, table)

    def table_uri(self, table: str) -> str:
        return self.layout(table).uri

    def run_uri(self, table: str, job_id: str) -> str:
        return self.layout(table).run_uri(job_id)

    def partition_uri(self, table: str, job_id: str, key: str) -> str:
        layout = self.layout(table)
        return layout.absolute(layout.run(job_id).partition_dir(key))

    def table_level_uri(self, table: str, job_id: str) -> str:
        layout = self.layout(table)
        return layout.absolute(layout.run(job_id).table_dir)

    def begin(self, table: str, job_id: str) -> None:
        """Take the job's lease on its run (engine/catalog/lease.py): until the job commits or
        fails, gc and expire keep its files, whatever their grace period."""
        from engine.catalog import lease

        lease.acquire(self.table_uri(table), job_id)

    def publish(self, output: JobOutput) -> None:
        """Make a finished job's files the table's current statistics.

        The commit is one transaction of the table's catalog (engine/catalog):
        atomic, linear, with history and time travel. ``manifest.json`` stays in
        the run directory so that the job can be republished and the catalog
        rebuilt from the files alone, and ``CURRENT`` is rewritten afterwards as
        a cheap change signal for pollers (it is never the source of truth).

        The job's lease (:meth:`begin`; taken here if the job did not) is held from before
        ``manifest.json`` until after ``CURRENT``: a manifest without a transaction is then
        either a job that never committed (its lease stays, and goes stale) or a lost
        transaction (no lease). Every file the transaction adds must exist, or nothing is
        committed (StatisticsFileCorruptError naming it).
        """
        from engine.catalog import lease

        layout = self.layout(output.table)
        lease.acquire(layout.uri, output.job_id)
        try:
            fileio.write_bytes(layout.absolute(layout.run(output.job_id).manifest), output.to_json())
            self._commit(output)
        except BaseException:
            lease.stop(layout.uri, output.job_id)  # the file stays: the run is uncommitted until aborted or collected
            raise
        lease.release(layout.uri, output.job_id)

    def republish(self, table: str, job_id: str) -> None:
        """Make an earlier job's statistics current again (a roll-back), from its manifest."""
        from engine.catalog.job_output import JobOutput

        layout = self.layout(table)
        uri = layout.absolute(layout.run(job_id).manifest)
        if not fileio.exists(uri):
            raise StatisticsNotFoundError(f"no analyze job {job_id!r} of table {table!r} in store {self.root}")
        output = JobOutput.from_json(fileio.read_bytes(uri), lambda rel: _size(layout.absolute(rel)), _schema_fingerprint)
        # partitions the job inherited live in earlier runs; a republish names them explicitly
        self._commit(output.republished())

    def _commit(self, output: JobOutput) -> None:
        # imported here: the publish's retention pass loads gc, maintenance and the integrity
        # checks, which a process that only reads (``metastore show``) never needs (issue #30)
        from engine.catalog.publish import publish_job

        commit = publish_job(self.root, output, check_files=True)
        pointer: dict[str, str | int] = {"job_id": output.job_id, "published_at": datetime.now(UTC).isoformat()}
        # the transaction it signals (#21): a later loss of that transaction shows (engine/catalog/integrity.py)
        pointer.update(txn_id=commit.txn_id, txn_uuid=commit.uuid)
        try:
            fileio.write_bytes_atomic(self.layout(output.table).current_uri, json.dumps(pointer).encode())
        except Exception as exc:  # noqa: BLE001 - the commit stands: failing here would make the job delete files it published
            log.warning(
                "%s: published as catalog transaction %d, but the CURRENT change signal was not written: %s", output.table, commit.txn_id, exc
            )

    def abort(self, table: str, job_id: str) -> None:
        from engine.catalog import lease

        lease.stop(self.table_uri(table), job_id)  # no heartbeat may write into the run once it is deleted
        try:
            fileio.delete_dir(self.run_uri(table, job_id), missing_ok=True)
        except Exception:  # best effort: an unreferenced run is harmless
            pass

    def current(self, table: str) -> dict[str, Any]:
        """:meth:`state` in its JSON form."""
        return self.state(table).as_manifest()

    def state(self, table: str) -> PublishedState:
        """The published statistics of a table, from its catalog (or a pre-catalog CURRENT pointer)."""
        layout = self.layout(table)
        if fileio.exists(layout.catalog_uri):
            return current_state(self.root, table)
        if not fileio.exists(layout.current_uri):
            raise StatisticsNotFoundError(f"no published statistics for table {table!r} in store {self.root}")
        job_id = json.loads(fileio.read_bytes(layout.current_uri))["job_id"]
        data = fileio.read_bytes(layout.absolute(layout.run(job_id).manifest))
        from engine.catalog.job_output import JobOutput

        output = JobOutput.from_json(data, lambda rel: _size(layout.absolute(rel)), _schema_fingerprint)
        return output_state(layout.uri, output)

    def tables(self) -> list[str]:
        """Tables with published statistics: a directory holding CURRENT or a committed catalog
        transaction (a publish that stopped before CURRENT still published: engine/catalog/signal.py)."""
        from engine.catalog.signal import has_statistics

        fs, path = fileio.resolve(self.root)
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return []
        names = []
        for info in fs.get_file_info(pafs.FileSelector(path, recursive=False)):
            if info.type == pafs.FileType.Directory and has_statistics(fileio.join(self.root, info.base_name)):
                names.append(info.base_name)
        return sorted(names)


def _size(uri: str) -> int:
    """A file's size (manifests written before sizes were recorded name files without them)."""
    fs, path = fileio.resolve(uri)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise StatisticsNotFoundError(f"statistics file missing: {uri}")
    return int(info.size or 0)


def _schema_fingerprint(columns: list[Any]) -> str:
    """engine.catalog.schema_fingerprint, imported when a manifest without one is read (it
    loads the table sources, which the read commands do not need: start-up, issue #20)."""
    from engine.catalog.snapshots import schema_fingerprint

    return schema_fingerprint(columns)
