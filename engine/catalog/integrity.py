"""Is a table's store whole? Missing transactions and damaged statistics files.

A transaction file that is deleted leaves a log that still reads: a missing
newest transaction looks like the previous state, a missing first one like a
prune. Three kinds of evidence tell them apart (docs/reference/CATALOG.md, "Integrity"):

- the catalog's own files (engine/catalog/verification.py, ``missing_in_log``): a hole in the
  ids, a checkpoint newer than the newest transaction (a checkpoint records the
  id it follows), ids before the oldest kept transaction that no prune recorded;
- ``CURRENT``, the change signal written after every commit: it names the
  transaction it was written for (``txn_id``, ``txn_uuid``; older pointers only
  the job), so a pointer ahead of the log means lost transactions;
- the runs: a job writes ``runs/<job>/manifest.json`` just before it commits, so
  a manifest newer than the newest transaction whose job no kept transaction
  names is a commit that is missing, unless the run still has its job's lease
  (engine/catalog/lease.py: held from before the manifest until after the commit):
  then the job has not committed, yet (fresh) or ever (stale: an uncommitted job's
  leftovers, a warning of :func:`verify`, collected by gc after the grace period).

``CURRENT`` that does not name the current state's job (a publish stopped between its
commit and the signal: engine/catalog/signal.py) is a problem of :func:`verify` too.

:func:`verify` gathers every problem of a table (the catalog's chain and
checkpoints, missing transactions, every referenced statistics file read whole
against the checksum recorded when it was written); :func:`quick_check` is the
cheap part that ``metastore show`` warns with; gc (engine/catalog/gc.py) refuses to delete
anything while :func:`missing_transactions` finds a problem.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine.catalog import codec, lease, signal
from engine.catalog.logindex import LogIndex, MissingTransactions, transaction_name
from engine.catalog.model import AddPartition, CatalogState, FileRef, SetTableStatistics, extra_files
from engine.catalog.paths import CURRENT, RUNS_DIR
from engine.catalog.replay import CatalogLog
from engine.catalog.verification import missing_in_log, verify_log
from engine.exceptions import (
    CatalogCorruptError,
    MetastoreError,
    StatisticsFileCorruptError,
    UnsupportedCatalogVersionError,
)
from engine.files import checksum, layout

write_pointer = signal.write_pointer  # where rebuild (and older callers) take it from

__all__ = ["Problem", "ProblemKind", "VerifyReport", "missing_transactions", "quick_check", "uncommitted_runs", "verify", "write_pointer"]

MANIFEST = "manifest.json"


class ProblemKind(str, Enum):
    MISSING_TRANSACTION = "missing_transaction"
    DAMAGED_CATALOG = "damaged_catalog"
    MISSING_FILE = "missing_file"
    DAMAGED_FILE = "damaged_file"
    STALE_SIGNAL = "stale_signal"  # CURRENT does not name the current state's job
    UNCOMMITTED_RUN = "uncommitted_run"  # a warning: a job that stopped before its commit left its run


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    message: str  # one line naming the file
    uri: str = ""


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` checked and found; ``ok`` when nothing is wrong."""

    table: str
    transactions: int = 0
    checkpoints: int = 0
    checkpoints_checked: int = 0
    files_checked: int = 0  # read whole against their recorded checksum
    files_unchecked: int = 0  # no checksum recorded (older catalogs): existence and size only
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    #: not problems (``ok`` stays True): the leftovers of jobs that never committed
    warnings: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        """Raise the first problem (CatalogCorruptError, or StatisticsFileCorruptError for a file)."""
        if not self.problems:
            return
        p = self.problems[0]
        more = f" (and {len(self.problems) - 1} more problem{'s' if len(self.problems) > 2 else ''})" if len(self.problems) > 1 else ""
        if p.kind in (ProblemKind.MISSING_FILE, ProblemKind.DAMAGED_FILE):
            raise StatisticsFileCorruptError(p.message + more, uri=p.uri)
        raise CatalogCorruptError(p.message + more, uri=p.uri)


# --------------------------------------------------------------------------- CURRENT


def _pointer(table_uri: str) -> dict[str, Any] | None:
    """``CURRENT``'s content; None if absent or unreadable (not evidence either way)."""
    return signal.read_pointer(table_uri) or None


# --------------------------------------------------------------------------- evidence


def _head(cat: CatalogLog, index: LogIndex) -> tuple[int, str, int]:
    """(id, timeline, commit time in µs) of the newest state the files hold (0, "", 0 if none)."""
    st = cat.state()
    if not st.empty and st.txn_id >= index.head:
        return st.txn_id, st.timeline, st.timestamp_us
    try:
        st = cat.state_at(index.head)
        return st.txn_id, st.timeline, st.timestamp_us
    except MetastoreError:
        return index.head, cat.state().timeline, 0


def _known_jobs(cat: CatalogLog, index: LogIndex) -> set[str] | None:
    """Job ids the kept log names (transactions, and the state the oldest one builds on); None if unreadable."""
    try:
        records = cat.records_for(index, sorted(index.txns))
    except MetastoreError:
        return None
    jobs = {r.job_id for r in records.values()}
    for r in records.values():
        for a in r.actions:
            if isinstance(a, (AddPartition, SetTableStatistics)):
                jobs.add(a.job_id)
    first = min(index.txns) if index.txns else index.head
    for cid in sorted((c for c in index.checkpoints if c >= first - 1), key=lambda c: c):
        try:
            st: CatalogState = cat.state_at(cid)
        except MetastoreError:
            continue
        jobs.update(e.job_id for e in st.entries.values())
        if st.table_statistics is not None:
            jobs.add(st.table_statistics.job_id)
        break
    return jobs


def _store_evidence(cat: CatalogLog, index: LogIndex, runs: bool, runs_listing: list[fileio.FileEntry] | None = None) -> list[MissingTransactions]:
    head, timeline, head_us = _head(cat, index)
    out: list[MissingTransactions] = []

    def name(i: int) -> str:
        return transaction_name(i, timeline)

    pointer = _pointer(cat.table_uri)
    known: set[str] | None = None
    # a table published before the catalog existed has runs and CURRENT but no catalog: not evidence
    has_catalog = bool(index.txns or index.checkpoints) or fileio.exists(cat.transactions_uri)
    if pointer is not None:
        n = pointer.get("txn_id")
        if isinstance(n, int) and not isinstance(n, bool):
            same_log = n == 1 or not timeline or pointer.get("txn_uuid") == codec.txn_uuid(timeline, n)
            if n > head and same_log:
                out.append(
                    MissingTransactions(
                        head + 1, n, name(head + 1),
                        f"CURRENT names transaction {n} (job {pointer.get('job_id')}), written after its commit, "
                        f"but the log ends at {head}",
                    )
                )  # fmt: skip
        elif isinstance(pointer.get("job_id"), str) and has_catalog:
            # a pointer written before it named its transaction (without any catalog file: a table
            # published before the catalog existed, which CURRENT alone describes)
            st = cat.state()
            head_jobs = {e.job_id for e in st.entries.values()} | ({st.table_statistics.job_id} if st.table_statistics else set())
            # the usual case (the head's job) costs nothing; otherwise every kept transaction is read
            known = head_jobs if pointer["job_id"] in head_jobs else _known_jobs(cat, index)
            if known is not None and pointer["job_id"] not in known:
                out.append(
                    MissingTransactions(
                        head + 1, None, name(head + 1),
                        f"CURRENT names job {pointer['job_id']}, which no transaction of the catalog published",
                    )
                )  # fmt: skip
    if runs and not out and has_catalog:
        entries = runs_listing if runs_listing is not None else cat.io.list_files(fileio.join(cat.table_uri, RUNS_DIR))
        manifests = [e for e in entries if e.path.endswith("/" + MANIFEST) and e.path.count("/") >= 2]
        leased = lease.leases(entries)  # a run with its job's lease has not committed: not evidence
        late = [
            (e, e.mtime_ns) for e in manifests if e.mtime_ns is not None and e.mtime_ns > head_us * 1000 and e.path.rsplit("/", 2)[-2] not in leased
        ]
        if late:
            known = known if known is not None else _known_jobs(cat, index)
        for e, mtime_ns in late if known is not None else []:
            job = e.path.rsplit("/", 2)[-2]
            if known is None or job in known:
                continue
            when = datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC).isoformat()
            out.append(
                MissingTransactions(
                    head + 1, None, name(head + 1),
                    f"run {job} wrote its manifest.json at {when}, after the newest transaction {head}, and no "
                    f"transaction names the job: its commit is missing (or the job stopped between the two)",
                )
            )  # fmt: skip
            break
    return out


def missing_transactions(cat: CatalogLog, *, runs: bool = True, runs_listing: list[fileio.FileEntry] | None = None) -> list[MissingTransactions]:
    """Every piece of evidence of a missing transaction: the catalog's files, ``CURRENT`` and
    (``runs``) the run directories' manifests. One listing of the catalog, one of the runs
    (``runs_listing``: the caller's, made before the catalog's, as gc's is)."""
    index = cat.full_index()
    return missing_in_log(cat, index) + _store_evidence(cat, index, runs, runs_listing)


def uncommitted_runs(cat: CatalogLog, runs_listing: list[fileio.FileEntry] | None = None, now: float | None = None) -> list[Problem]:
    """The runs of jobs that stopped before their commit (a stale lease, engine/catalog/lease.py,
    whose job no kept transaction names): warnings, not problems. gc collects them once their
    files are older than the grace period. One listing of the runs (or the caller's)."""
    entries = runs_listing if runs_listing is not None else cat.io.list_files(fileio.join(cat.table_uri, RUNS_DIR))
    stale = {job: held for job, held in lease.leases(entries, now).items() if not held.fresh}
    known = _known_jobs(cat, cat.full_index()) if stale else set()
    out = []
    for job, held in sorted(stale.items()) if known is not None else []:
        if known is None or job in known:
            continue  # it committed, and stopped before letting go of its lease: nothing is left over
        run = fileio.join(cat.table_uri, RUNS_DIR, job)
        files = sum(1 for e in entries if f"/{RUNS_DIR}/{job}/" in e.path)
        out.append(
            Problem(
                ProblemKind.UNCOMMITTED_RUN,
                f"run {run}: {held.describe()} stopped before its commit ({held.why}): nothing of it was published; "
                f"gc deletes its {files} files once they are older than the grace period",
                run,
            )
        )
    return out


def quick_check(store_uri: str, table: str) -> list[str]:
    """Warnings that cost one listing and one small read (``metastore show``): missing transactions
    shown by the catalog's files or by ``CURRENT``, and a ``CURRENT`` that does not signal the
    current state. Never raises."""
    try:
        cat = CatalogLog.open(store_uri, table, up_to_last_good=True)
        missing = missing_transactions(cat, runs=False)
        named = {fileio.join(cat.transactions_uri, m.file) for m in missing}
        warnings = [m.message(table) for m in missing]
        warnings += [str(p) for p in cat.problems if getattr(p, "uri", "") not in named]
        lagging = None if missing else signal.lag(cat)
        warnings += [lagging] if lagging else []
    except Exception as exc:  # noqa: BLE001 - a warning is best effort
        return [f"table {table!r}: the catalog could not be checked ({type(exc).__name__}: {exc})"]
    return warnings


# --------------------------------------------------------------------------- verify


def _referenced_refs(cat: CatalogLog, index: LogIndex, history: list[Any], partitions: dict[str, str] | None = None) -> dict[str, FileRef]:
    """Every statistics file a kept state references, by path (the one recorded with a checksum first):
    the three of each partition and of the table, and the table's files its properties name
    (``engine.catalog.model.extra_files``: file index, frequency segments, table counts).
    ``partitions`` (filled when given): a partition's statistics.parquet path -> the directory of
    its frequencies.parquet (where its partial state is)."""
    refs: dict[str, FileRef] = {}
    partitions = {} if partitions is None else partitions

    def add(ref: FileRef) -> None:
        old = refs.get(ref.path)
        if old is None or (not old.checksum and ref.checksum):
            refs[ref.path] = ref

    first = history[0].id if history else index.head
    base_ids = sorted(c for c in index.checkpoints if c >= first - 1) if first > 1 else []
    if base_ids:
        st = cat.state_at(base_ids[0])
        for e in st.entries.values():
            for r in e.files.refs():
                add(r)
            partitions[e.files.statistics.path] = e.files.frequencies.path.rsplit("/", 1)[0]
        if st.table_statistics is not None:
            for r in (*st.table_statistics.files.refs(), *st.table_statistics.extra_files()):
                add(r)
    for info in history:
        for a in info.actions:
            if isinstance(a, (AddPartition, SetTableStatistics)):
                for r in a.files.refs():
                    add(r)
            if isinstance(a, SetTableStatistics):
                # the file index, the older segments of the table's frequencies, the job's table counts
                for r in extra_files(a.properties):
                    add(r)
            if isinstance(a, AddPartition):
                partitions[a.files.statistics.path] = a.files.frequencies.path.rsplit("/", 1)[0]
    return refs


def _check_file(table_uri: str, ref: FileRef) -> Problem | None:
    uri = fileio.join(table_uri, ref.path)
    try:
        if ref.checksum:
            checksum.check(uri, ref.checksum, ref.size)
            return None
        with fileio.open_input(uri) as f:
            size = f.size()
        if size != ref.size:
            return Problem(ProblemKind.DAMAGED_FILE, f"statistics file damaged: {uri}: {size} bytes, the catalog recorded {ref.size}", uri)
    except FileNotFoundError:
        return Problem(ProblemKind.MISSING_FILE, f"statistics file missing: {uri} (a kept transaction references it)", uri)
    except StatisticsFileCorruptError as exc:
        return Problem(ProblemKind.DAMAGED_FILE, str(exc), uri)
    return None


def _check_partial_state(table_uri: str, statistics_path: str, directory: str) -> tuple[int, list[Problem]]:
    """The partial-state files a partition's statistics.parquet recorded (names and checksums,
    ``metastore.partial_state``), in ``directory``: (files checked, problems). A statistics file
    that cannot be read is reported by its own check."""
    try:
        with fileio.open_input(fileio.join(table_uri, statistics_path)) as f:
            md = pq.read_metadata(f).metadata
    except (OSError, pa.ArrowException):
        return 0, []
    problems = []
    recorded = layout.partial_state_checksums(layout.decode_metadata(md))
    for name, digest in sorted(recorded.items()):
        uri = fileio.join(table_uri, directory, name)
        try:
            checksum.check(uri, digest)
        except FileNotFoundError:
            problems.append(Problem(ProblemKind.MISSING_FILE, f"partial state missing: {uri} (its partition's statistics.parquet names it)", uri))
        except StatisticsFileCorruptError as exc:
            problems.append(Problem(ProblemKind.DAMAGED_FILE, str(exc).replace("the catalog recorded", "its statistics.parquet recorded"), uri))
    return len(recorded), problems


def verify(store_uri: str, table: str, *, files: bool = True) -> VerifyReport:
    """Check everything about ``table``'s statistics and return what is wrong (``report.ok``):

    - the catalog: every transaction's frame, name, uuid chain and actions, every checkpoint
      against the state its transactions build (engine.catalog.verification.verify_log);
    - missing transactions, from every kind of evidence (:func:`missing_transactions`);
    - with ``files``, every statistics file a kept state references: it exists, and is read
      whole against the size and checksum recorded when it was written (only the size when
      no checksum was recorded).
    """
    problems: list[Problem] = []
    report: dict[str, int] = {}
    try:
        cat = CatalogLog.open(store_uri, table, up_to_last_good=True)
    except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
        return VerifyReport(table, problems=(Problem(ProblemKind.DAMAGED_CATALOG, str(exc), getattr(exc, "uri", "")),))
    runs = cat.io.list_files(fileio.join(cat.table_uri, RUNS_DIR))  # before the catalog's listing, as gc's
    for m in missing_transactions(cat, runs_listing=runs):
        problems.append(Problem(ProblemKind.MISSING_TRANSACTION, m.message(table), fileio.join(cat.transactions_uri, m.file)))
    lagging = None if problems else signal.lag(cat)
    if lagging:
        problems.append(Problem(ProblemKind.STALE_SIGNAL, lagging, fileio.join(cat.table_uri, CURRENT)))
    try:
        warnings = uncommitted_runs(cat, runs)
    except MetastoreError as exc:  # an unreadable transaction: reported below
        warnings = [Problem(ProblemKind.UNCOMMITTED_RUN, f"the runs of uncommitted jobs cannot be told: {exc}")]
    history: list[Any] = []
    try:
        report = verify_log(cat)
        history = cat.history()
    except (CatalogCorruptError, UnsupportedCatalogVersionError) as exc:
        if not any(p.uri and p.uri == getattr(exc, "uri", None) for p in problems):
            kind = ProblemKind.MISSING_TRANSACTION if " missing" in str(exc) and "transaction" in str(exc) else ProblemKind.DAMAGED_CATALOG
            problems.append(Problem(kind, str(exc), getattr(exc, "uri", "")))
        try:
            history = cat.history()
        except MetastoreError:
            history = []
    checked = unchecked = 0
    if files:
        index = cat.full_index()
        partitions: dict[str, str] = {}
        try:
            refs = _referenced_refs(cat, index, history, partitions)
        except MetastoreError as exc:
            refs = {}
            problems.append(Problem(ProblemKind.DAMAGED_CATALOG, f"cannot list the referenced files: {exc}", getattr(exc, "uri", "")))
        ordered = sorted(refs.values(), key=lambda r: r.path)
        with ThreadPoolExecutor(max_workers=8 if cat.io.remote else 2) as pool:
            found = list(pool.map(lambda r: _check_file(cat.table_uri, r), ordered))
        for ref, problem in zip(ordered, found):
            if ref.checksum:
                checked += 1
            else:
                unchecked += 1
            if problem is not None:
                problems.append(problem)
        # partial states (inheritance): checked against what their statistics.parquet recorded
        damaged = {p.uri for p in problems}
        todo = sorted((s, d) for s, d in partitions.items() if fileio.join(cat.table_uri, s) not in damaged)
        with ThreadPoolExecutor(max_workers=8 if cat.io.remote else 2) as pool:
            for n, found_partial in pool.map(lambda sd: _check_partial_state(cat.table_uri, *sd), todo):
                checked += n
                problems.extend(found_partial)
    return VerifyReport(
        table,
        transactions=report.get("transactions", len(history)),
        checkpoints=report.get("checkpoints", 0),
        checkpoints_checked=report.get("checkpoints_checked", 0),
        files_checked=checked,
        files_unchecked=unchecked,
        problems=tuple(problems),
        warnings=tuple(warnings),
    )
