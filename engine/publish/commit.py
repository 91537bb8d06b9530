"""Publish a table's newest statistics into its own Iceberg metadata, through its catalog.

For the snapshot the statistics describe, :func:`publish` writes next to the table's
metadata (``<location>/metadata/``):

- a Puffin file (engine/publish/puffin.py): per column one ``apache-datasketches-theta-v1``
  blob (engine/publish/iceberg_theta.py) with property ``ndv``, then our own blobs
  (``metastore-kll-v1``, ``metastore-histogram-v1``, ``metastore-frequencies-v1``,
  docs/PLANNERS.md);
- a partition statistics file (engine/publish/partition_stats.py);

and commits both as the snapshot's ``statistics`` and ``partition-statistics`` entries in
one metadata update of the table's catalog (no snapshot is created, no data file touched),
retried on a commit conflict. The table metadata's ``blob-metadata`` lists the theta blobs
only: pyiceberg (0.12) refuses table metadata naming any other blob type, and planners read
``ndv`` from there; our blobs are found through the Puffin file's own footer.

The theta sketches hash each column's distinct values. A column whose store theta sketch
hashes every value as Iceberg serializes it (long, string, timestamps and times, a double
with no NaN and no zero) publishes that sketch as it is, where it is byte for byte the one of
its values (iceberg_theta.from_store_sketch): nothing read. Else a discrete column whose table-level
frequencies are ``complete`` (every distinct value with its count, segments of appends
merged) takes them from the store; the others (floats, timestamps and times, and discrete
columns whose frequencies keep only duplicates or nothing: mostly distinct values) are read
from the snapshot's data files, only those columns: with pyarrow straight from the Parquet
files of a partition where no delete applies and nothing needs converting
(engine/publish/parquet_read.py), else by the reader analyze uses (deletes applied); every
value read is hashed as it comes (no deduplication of values: the sketch keeps the smallest
distinct hashes). The store's complete frequencies hold each value once: they are hashed
as they are. ``ndv`` is the store's distinct count where it
is exact, else the count of the distinct hashes read (an empty string counted apart).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from engine import fileio
from engine import types as mt
from engine import values as value_forms
from engine.exceptions import (
    CommitConflictError,
    InvalidArgumentError,
    MetastoreError,
    SnapshotNotFoundError,
    StatisticsNotFoundError,
    first_line,
)
from engine.lookup import TableStatistics, open_statistics
from engine.names import check_table_name
from engine.publish import iceberg_theta, parquet_read, partition_stats, puffin
from engine.sources.iceberg import IcebergSource, load_table

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.name_mapping import NameMapping
    from pyiceberg.table.snapshots import Snapshot

KLL_BLOB = "metastore-kll-v1"
HISTOGRAM_BLOB = "metastore-histogram-v1"
FREQUENCIES_BLOB = "metastore-frequencies-v1"
#: the most frequent values a frequencies blob keeps
TOP_VALUES = 100
#: commit attempts before a conflict is reported
ATTEMPTS = 5


@dataclass(frozen=True)
class Published:
    """What one publish wrote and committed."""

    table: str
    identifier: str
    snapshot_id: int
    statistics_path: str
    partition_statistics_path: str  # "" for an unpartitioned table (none written)
    ndv: dict[str, int]
    blobs: int
    attempts: int
    elapsed_s: float
    skipped: dict[str, str] = field(default_factory=dict)  # column -> why it has no theta blob
    read_from_data: list[str] = field(default_factory=list)  # columns whose distinct values were read from the data files


def how_to_publish(identifier: str) -> str:
    return (
        f"{identifier}: publish writes statistics into an Iceberg table's metadata through its catalog, "
        f"and this table has none here; name it by its catalog: metastore publish db.table --catalog NAME "
        f"(a pyiceberg catalog: .pyiceberg.yaml or PYICEBERG_CATALOG__NAME__*)"
    )


def publish(store: str, identifier: str, catalog: str | None, name: str | None = None) -> Published:
    """Write the statistics of the store's table ``name`` (default: the identifier's last part)
    into the Iceberg table ``identifier`` of pyiceberg catalog ``catalog``, for the snapshot
    they describe."""
    if catalog is None:
        raise InvalidArgumentError(how_to_publish(identifier))
    started = time.perf_counter()
    name = name or identifier.rsplit(".", 1)[-1]
    check_table_name(name)
    table = load_table(identifier, catalog)
    ts = open_statistics(store, name)
    _check_same_table(ts, table, identifier, store, name)
    snapshot = table.snapshot_by_id(int(ts.snapshot)) if ts.snapshot.lstrip("-").isdigit() else None
    if snapshot is None:
        raise SnapshotNotFoundError(
            f"{identifier}: the statistics describe snapshot {ts.snapshot!r}, which the table no longer has; analyze it again"
        )
    schema = table.schemas().get(snapshot.schema_id) if snapshot.schema_id is not None else None
    columns, skipped = _columns(ts, schema or table.schema())
    rows = {r["column"]: r for r in ts.statistics([c for c, _, _ in columns], sketches=True).to_pylist()} if columns else {}
    distinct, read = _column_hashes(ts, rows, identifier, catalog, snapshot.snapshot_id, columns, table.name_mapping())
    blobs, ndv = _blobs(ts, rows, columns, distinct, snapshot)
    location = str(table.location()).rstrip("/")
    statistics_path = f"{location}/metadata/{snapshot.snapshot_id}-{uuid.uuid4()}.stats"
    written = puffin.write_puffin(blobs, {"created-by": "metastore"})
    _write(table, statistics_path, written.data)
    partition_type = partition_stats.partition_type(table)
    partition_path, partition_bytes = "", b""
    if partition_type.num_fields:  # an unpartitioned table has no partition statistics (as Iceberg's Java writes none)
        partition_rows = partition_stats.aggregate(
            partition_stats.file_entries(table, snapshot), partition_type, {s.snapshot_id: s.timestamp_ms for s in table.snapshots()}
        )
        partition_path = f"{location}/metadata/partition-stats-{snapshot.snapshot_id}-{uuid.uuid4()}.parquet"
        partition_bytes = partition_stats.parquet_bytes(partition_rows)
        _write(table, partition_path, partition_bytes)
    theta = [b for b in written.blobs if b["type"] == iceberg_theta.THETA_BLOB]
    attempts = _commit(table, identifier, snapshot.snapshot_id, statistics_path, len(written.data), written.footer_size, theta, partition_path, len(partition_bytes))  # fmt: skip
    return Published(
        ts.table,
        identifier,
        snapshot.snapshot_id,
        statistics_path,
        partition_path,
        ndv,
        len(blobs),
        attempts,
        time.perf_counter() - started,
        skipped,
        read,
    )


def _check_same_table(ts: TableStatistics, table: Table, identifier: str, store: str, name: str) -> None:
    """The store's statistics must be of this table (its location, as analyze recorded it)."""
    recorded = ts.state.table_uri or ""
    location = str(table.location()).rstrip("/")
    if not recorded or fileio.canonical(recorded.rstrip("/")) != fileio.canonical(location):
        raise StatisticsNotFoundError(
            f"{identifier}: the statistics of {name!r} in store {store} are of {recorded or 'another table'}, not of this table at {location}; "
            f"analyze it first: metastore analyze {identifier} --catalog NAME --publish"
        )


def _columns(ts: TableStatistics, schema: Schema) -> tuple[list[tuple[str, int, str]], dict[str, str]]:
    """(name, field id, Iceberg type) of the top-level primitive columns with statistics, and the
    others with why they get no theta blob."""
    stored = set(ts.statistics_columns())
    out, skipped = [], {}
    for f in schema.fields:
        if f.name not in stored:
            continue
        kind = str(f.field_type)
        if not f.field_type.is_primitive or not iceberg_theta.supported(kind):
            skipped[f.name] = f"type {kind} has no Iceberg single-value serialization"
            continue
        out.append((f.name, f.field_id, kind))
    return out, skipped


def _stored_hashes(ts: TableStatistics, name: str, kind: str, row: dict[str, Any]) -> ColumnHashes | None:
    """The theta hashes of a column's distinct values from the store, when its table
    frequencies hold them all (kind ``complete``, as many non-null values as its exact
    distinct count); else None. The frequencies' values are distinct already: each is
    hashed as it is, not deduplicated again."""
    if row.get("frequencies") != "complete" or not _exact_distinct(row):
        return None
    n = int(row["distinct_count"])
    values = ts.top_frequencies(name, n, typed=True)["value"]
    if len(values) - values.null_count != n:
        return None
    hashed, _ = iceberg_theta.value_hashes(values, kind)
    return ColumnHashes(hashed, n)


@dataclass
class ColumnHashes:
    """A column's theta hashes (duplicates allowed) and its number of distinct values
    (None: the store's exact count is used); or its theta blob as the store holds it
    (``blob``, no hashes: iceberg_theta.from_store_sketch)."""

    hashes: np.ndarray
    distinct: int | None
    blob: bytes | None = None


#: hashes a column gathers from the data before they are reduced (then the bound doubles, so
#: each hash is reduced O(log) times at most; memory follows what must be kept)
COMPACT_AT = 1 << 22
#: distinct hashes a column keeps when its distinct count is known: more than the theta
#: sketch's exact limit (engine.stats.sketches: 7,680), so the sketch is the same
KEEP_SMALLEST = 1 << 13
#: threads reading and hashing data files at once (the machine kind has 2 cores)
READERS = 2


class _Gathered:
    """The hashes of one column's values read from the data, batch by batch.

    ``count``: the column's distinct count is wanted (the store's is not exact), so every
    distinct hash is kept (deduplicated by a sort when the bound is passed); else only
    the KEEP_SMALLEST smallest distinct ones, which are all the sketch uses: once that many
    are kept, a batch's hashes are cut to those below the next one (``cut``) as they come,
    so a batch adds a handful and the column's reductions are few and small."""

    def __init__(self, kind: str, count: bool) -> None:
        self.kind, self.count = kind, count
        self.parts: list[np.ndarray] = []
        self.size = 0
        self.bound = COMPACT_AT if count else 4 * KEEP_SMALLEST
        self.cut: np.uint64 | None = None  # no hash from here up can be among the smallest kept
        self.empty = False  # an empty string or binary was seen (not hashed; counted)

    def add(self, values: pa.Array | pa.ChunkedArray) -> None:
        self.add_hashed(*iceberg_theta.value_hashes(values, self.kind))

    def add_hashed(self, hashed: np.ndarray, empty: bool) -> None:
        """A batch's hashes (:func:`iceberg_theta.value_hashes`), hashed elsewhere."""
        self.empty = self.empty or empty
        if self.cut is not None:
            hashed = hashed[hashed < self.cut]
        self.parts.append(hashed)
        self.size += len(hashed)
        if self.size > self.bound:
            kept = self._reduce()
            self.parts, self.size = [kept], len(kept)
            if self.count:
                self.bound = max(COMPACT_AT, 2 * self.size)

    def _reduce(self) -> np.ndarray:
        merged = np.concatenate(self.parts) if self.parts else np.zeros(0, np.uint64)
        if self.count:
            return iceberg_theta.sorted_unique(merged)
        if len(merged) > 4 * KEEP_SMALLEST:
            # every hash up to the (4 * KEEP_SMALLEST)-th smallest: all the smallest distinct
            # ones are among them, unless duplicates leave too few distinct
            threshold = np.partition(merged, 4 * KEEP_SMALLEST)[4 * KEEP_SMALLEST]
            below = iceberg_theta.sorted_unique(merged[merged <= threshold])
            if len(below) > KEEP_SMALLEST:
                return self._keep(below)
        return self._keep(iceberg_theta.sorted_unique(merged))

    def _keep(self, distinct: np.ndarray) -> np.ndarray:
        """The KEEP_SMALLEST smallest of ``distinct`` (ascending, every distinct hash kept so far
        below its end), the next one becoming the cut."""
        if len(distinct) <= KEEP_SMALLEST:
            return distinct
        self.cut = distinct[KEEP_SMALLEST]
        return distinct[:KEEP_SMALLEST]

    def result(self) -> ColumnHashes:
        kept = self._reduce()
        return ColumnHashes(kept, len(kept) + int(self.empty) if self.count else None)


def _column_hashes(
    ts: TableStatistics,
    rows: dict[str, dict[str, Any]],
    identifier: str,
    catalog: str,
    snapshot_id: int,
    columns: Sequence[tuple[str, int, str]],
    name_mapping: NameMapping | None = None,
) -> tuple[dict[str, ColumnHashes], list[str]]:
    """Each column's theta hashes: the store's theta sketch where it is the blob already
    (iceberg_theta.from_store_sketch), else of the store's table frequencies where they hold every
    value, else of the snapshot's live rows (only those columns read, every value hashed as
    read: straight from the Parquet files where nothing is deleted, engine/publish/parquet_read.py,
    ``name_mapping`` the table's, for files without field ids). Also the columns read from the data."""
    from engine.sources import open_table

    out: dict[str, ColumnHashes] = {}
    for name, _, kind in columns:
        sketch = iceberg_theta.from_store_sketch(kind, rows[name])
        if sketch is not None:
            out[name] = ColumnHashes(np.zeros(0, np.uint64), None, sketch)
            continue
        stored = _stored_hashes(ts, name, kind, rows[name])
        if stored is not None:
            out[name] = stored
    rest = [(name, kind) for name, _, kind in columns if name not in out]
    if not rest:
        return out, []
    source = open_table(identifier, catalog=catalog, at_snapshot=str(snapshot_id))
    gathered = {name: _Gathered(kind, count=not _exact_distinct(rows[name])) for name, kind in rest}
    names = [name for name, _ in rest]
    direct: list[parquet_read.DirectFile] = []
    schemas: dict[str, dict[int, str]] = {}
    for partition in source.partitions():
        files = parquet_read.direct_files(source, partition, names, name_mapping, schemas) if isinstance(source, IcebergSource) else None
        if files is not None:
            direct += files
            continue
        for batch in source.read_batches(partition, names):
            for name in names:
                gathered[name].add(batch.column(name))
    if direct:
        assert isinstance(source, IcebergSource)
        _gather_direct(source, direct, gathered)
    with ThreadPoolExecutor(READERS) as pool:  # the last sorts, side by side (numpy's sort releases the GIL)
        out.update(zip(names, pool.map(_Gathered.result, [gathered[name] for name in names])))
    return out, names


def _gather_direct(source: IcebergSource, files: Sequence[parquet_read.DirectFile], gathered: dict[str, _Gathered]) -> None:
    """Read and hash the direct files on READERS threads (pyarrow's reads, the hash kernels
    and numpy release the GIL), at most READERS files ahead of the gathering, which
    takes each file's hashes in file order."""
    names = list(gathered)
    kinds = {name: gathered[name].kind for name in names}

    def hash_file(file: parquet_read.DirectFile) -> list[dict[str, tuple[np.ndarray, bool]]]:
        return [{n: iceberg_theta.value_hashes(b.column(n), kinds[n]) for n in names} for b in parquet_read.read_file(source, file, names)]

    with ThreadPoolExecutor(READERS) as pool:
        pending: deque[Future[list[dict[str, tuple[np.ndarray, bool]]]]] = deque()
        for file in [*files, None]:
            if file is not None:
                pending.append(pool.submit(hash_file, file))
            while pending and (file is None or len(pending) > READERS):
                for batch in pending.popleft().result():
                    for name, (hashed, empty) in batch.items():
                        gathered[name].add_hashed(hashed, empty)


def _exact_distinct(row: dict[str, Any]) -> bool:
    return bool(row.get("distinct_count_exact")) and row.get("distinct_count") is not None


def _blobs(
    ts: TableStatistics,
    rows: dict[str, dict[str, Any]],
    columns: Sequence[tuple[str, int, str]],
    distinct: dict[str, ColumnHashes],
    snapshot: Snapshot,
) -> tuple[list[puffin.Blob], dict[str, int]]:
    """The theta blobs (one a column, in schema order), then our own blobs."""
    sid, seq = snapshot.snapshot_id, snapshot.sequence_number or 0
    theta, ours, ndv = [], [], {}
    for name, fid, _ in columns:
        row = rows[name]
        column = distinct[name]
        ndv[name] = int(row["distinct_count"]) if _exact_distinct(row) or column.distinct is None else column.distinct
        blob = column.blob if column.blob is not None else iceberg_theta.theta_blob_of_hashes(column.hashes)
        theta.append(puffin.Blob(iceberg_theta.THETA_BLOB, (fid,), sid, seq, blob, {"ndv": str(ndv[name])}))
        if row.get("kll_sketch"):
            ours.append(puffin.Blob(KLL_BLOB, (fid,), sid, seq, bytes(row["kll_sketch"])))
        hist = _histogram_json(ts, name)
        if hist is not None:
            ours.append(puffin.Blob(HISTOGRAM_BLOB, (fid,), sid, seq, hist))
        freq = _frequencies_json(ts, name, row)
        if freq is not None:
            ours.append(puffin.Blob(FREQUENCIES_BLOB, (fid,), sid, seq, freq))
    return theta + ours, ndv


def _text(values: Any) -> list[str | None]:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return (arr if mt.is_string(arr.type) else value_forms.encode(arr)).to_pylist()


def _histogram_json(ts: TableStatistics, column: str) -> bytes | None:
    try:
        spec = ts.histogram_spec(column)
    except InvalidArgumentError:
        return None
    if spec is None:
        return None
    h = ts.histogram(column)
    doc = {"column": column, "lower": _text(h["lower"]), "upper": _text(h["upper"]), "count": h["count"].to_pylist()}
    return json.dumps(doc, separators=(",", ":")).encode()


def _frequencies_json(ts: TableStatistics, column: str, row: dict[str, Any]) -> bytes | None:
    if row.get("frequencies") is None:
        return None
    top = ts.top_frequencies(column, TOP_VALUES)
    doc = {"column": column, "kind": row["frequencies"], "value": _text(top["value"]), "frequency": top["frequency"].to_pylist()}
    return json.dumps(doc, separators=(",", ":")).encode()


def _write(table: Table, path: str, data: bytes) -> None:
    try:
        with table.io.new_output(path).create(overwrite=False) as f:
            f.write(data)
    except OSError as exc:
        raise MetastoreError(f"cannot write {path} into the table's metadata directory: {first_line(exc)}") from None


def _commit(
    table: Table,
    identifier: str,
    snapshot_id: int,
    path: str,
    size: int,
    footer_size: int,
    theta: list[dict[str, Any]],
    partition_path: str,
    partition_size: int,
) -> int:
    """Set the snapshot's statistics and partition statistics in one metadata update; on a
    commit conflict reload the table and try again. The attempts it took."""
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
    from pyiceberg.table.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile

    blob_metadata = [
        BlobMetadata(
            type=b["type"],
            fields=b["fields"],
            **{"snapshot-id": b["snapshot-id"], "sequence-number": b["sequence-number"]},
            properties=b.get("properties"),
        )
        for b in theta
    ]
    # pyiceberg's models take their fields by the JSON names (dashes): Any, as mypy sees the Python names
    statistics_fields: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "statistics-path": path,
        "file-size-in-bytes": size,
        "file-footer-size-in-bytes": footer_size,
        "blob-metadata": blob_metadata,
    }
    statistics = StatisticsFile(**statistics_fields)
    partition_fields: dict[str, Any] = {"snapshot-id": snapshot_id, "statistics-path": partition_path, "file-size-in-bytes": partition_size}
    partitions = PartitionStatisticsFile(**partition_fields)
    written = tuple(p for p in (path, partition_path) if p)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            tx = table.transaction()
            tx.update_statistics().set_statistics(statistics).commit()
            if partition_path:
                _SetPartitionStatistics(tx, partitions).commit()
            tx.commit_transaction()
            return attempt
        except CommitFailedException:
            if attempt == ATTEMPTS:
                break
            time.sleep(0.05 * attempt)
            table.refresh()
            if table.snapshot_by_id(snapshot_id) is None:  # expired by the writer we raced
                _forget(table, written)
                raise SnapshotNotFoundError(f"{identifier}: snapshot {snapshot_id} was expired while publishing; analyze the table again") from None
        except CommitStateUnknownException as exc:  # the files may be named now: keep them
            raise MetastoreError(
                f"{identifier}: the catalog did not say whether the statistics commit landed ({first_line(exc)}); "
                "look at the table's statistics entries, or publish again"
            ) from None
    _forget(table, written)
    raise CommitConflictError(f"{identifier}: the catalog refused the statistics commit {ATTEMPTS} times (concurrent commits); publish again")


def _forget(table: Table, paths: Sequence[str]) -> None:
    """Delete files written for a commit that did not land (best effort: an orphan is harmless)."""
    for p in paths:
        try:
            table.io.delete(p)
        except OSError:
            pass


def _set_partition_statistics_class() -> type:
    """pyiceberg 0.12 has the metadata update (``SetPartitionStatisticsUpdate``) but no public
    builder for it: this adapter is the builder, as ``UpdateStatistics`` is for statistics."""
    from pyiceberg.table.update import SetPartitionStatisticsUpdate, UpdateTableMetadata

    class SetPartitionStatistics(UpdateTableMetadata["SetPartitionStatistics"]):
        def __init__(self, transaction: Any, statistics: Any) -> None:
            super().__init__(transaction)
            self._statistics = statistics

        def _commit(self) -> Any:
            return (SetPartitionStatisticsUpdate(**{"partition-statistics": self._statistics}),), ()

    return SetPartitionStatistics


def _SetPartitionStatistics(transaction: Any, statistics: Any) -> Any:  # noqa: N802 - used like the class it builds
    return _set_partition_statistics_class()(transaction, statistics)
