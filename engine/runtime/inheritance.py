"""Which partitions an analyze job inherits, and the task that loads an inherited partition.

An analyze of a newer table snapshot keeps the statistics of partitions whose
data did not change (same data fingerprint), whose statistics were computed for
the same columns (same schema fingerprint) and with the same analysis options
(:func:`engine.files.partial_state.config`): it loads their partial states
(:func:`load_partition`, a cheap task: two small files and the histogram file)
instead of profiling them, and merges them into the table level like freshly
profiled ones. Everything else is recomputed, with the reason recorded.

The decision is made on the driver from the catalog's current state
(:func:`plan`); a load that fails (a missing or damaged partial state) falls back
to recomputing that partition, with a warning (``engine.runtime.job.profile``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine.arrowcompute import contiguous
from engine.catalog.model import CatalogState, StatisticsFiles
from engine.columns import LeafColumn
from engine.exceptions import CatalogError
from engine.files import checksum, layout, partial_state
from engine.runtime.tasks.values import column_profile
from engine.sources.base import TableSource
from engine.stats.histograms import HistogramSpec
from engine.stats.profile import ColumnState
from engine.stats.user import UserStatistic

log = logging.getLogger("engine.analyze")

#: manifest field (catalog table property) holding the options a job's partition files depend on
CONFIG_PROPERTY = "statistics_config"


@dataclass(frozen=True)
class InheritedPartition:
    """A partition whose statistics carry over: its catalog entry and where its partial state is."""

    key: str
    files: dict[str, dict[str, Any]]  # file name -> {"path" (relative to the table directory), "size"}
    rows: int
    job_id: str  # the job that computed it
    snapshot: str
    data_fingerprint: str
    state_uri: str
    counts_uri: str
    statistics_uri: str
    histograms_uri: str


@dataclass(frozen=True)
class CarriedTable:
    """The catalog's current table-level statistics, when the new snapshot has exactly the
    partitions they were merged from and inherits every one: the table level is then the
    same too, and the job can carry its files over instead of merging them again (the
    driver checks the table-level options first: ``engine.runtime.job.plan``)."""

    job_id: str  # the transaction's job (the files may be older: see ``files_job``)
    files: StatisticsFiles  # paths relative to the table directory
    row_count: int
    properties: dict[str, Any]  # the table properties, decoded (JSON values)


@dataclass(frozen=True)
class Plan:
    fingerprints: dict[str, str]  # partition key -> data fingerprint of the new snapshot ("" unknown)
    inherited: dict[str, InheritedPartition]
    reasons: dict[str, str]  # partition key -> why it is recomputed
    config: dict[str, Any]  # what this job's partition files depend on (stored as a table property)
    write_partial_state: bool  # False when a user statistic's state cannot be stored
    #: every partition inherited and none gone: the current table level (None: it must be merged)
    table: CarriedTable | None = None
    #: the current table level whatever changed (None: none, or not of this version), and its partitions
    previous: CarriedTable | None = None
    previous_keys: frozenset[str] = frozenset()


@dataclass
class LoadedPartition:
    """What a load task returns for an inherited partition (value counts go to the object store separately)."""

    key: str
    rows: int
    states: dict[str, ColumnState]
    histogram_specs: dict[str, dict[str, Any] | None]  # column -> spec as stored in its histograms.parquet
    histogram_counts: dict[str, np.ndarray]
    cpu_s: float = 0.0
    #: {file name: checksum} of its partial state, as its statistics.parquet recorded them
    partial_checksums: dict[str, str] = field(default_factory=dict)
    #: stands in the table's merged state (:class:`TableState`): no state, no histogram counts and
    #: no checksums read; ``histogram_specs`` are the table's (what it is binned on)
    merged: bool = False


@dataclass(frozen=True)
class TableState:
    """What an append re-analyze loads instead of every inherited partition's state (the table's
    merged state, ``engine.files.partial_state.TABLE_STATE_FILE``): the inherited partitions'
    states merged in table order (no KLL sketch: ``kll_parts``, each partition's, in that order),
    and the table's histograms they are binned on (every partition's histograms are on the table's
    edges, so the table's bin counts are the sum of theirs)."""

    rows: int
    states: dict[str, ColumnState]
    kll_parts: dict[str, list[bytes]]
    histogram_specs: dict[str, dict[str, Any] | None]
    histogram_counts: dict[str, np.ndarray]
    cpu_s: float = 0.0


@dataclass(frozen=True)
class LoadFailure:
    key: str
    message: str  # names the file


@dataclass
class Counters:
    """How a job's partitions were obtained (AnalyzeResult)."""

    inherited: int = 0
    recomputed: int = 0
    rebinned: int = 0  # inherited, but histograms re-binned on new table edges
    reasons: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def columns_fingerprint(leaves: list[LeafColumn]) -> str:
    """The schema fingerprint of a job's statistics columns (what the catalog records)."""
    from engine.catalog import schema_fingerprint

    return schema_fingerprint(manifest_columns(leaves))


def manifest_columns(leaves: list[LeafColumn]) -> list[dict[str, str]]:
    return [{"name": l.name, "type": mt.type_name(l.type)} for l in leaves]


def plan(
    source: TableSource,
    store_root: str,
    table: str,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    mostly_distinct_ratio: float,
    enabled: bool = True,
) -> Plan:
    """Decide, per partition of ``source``, whether its statistics are inherited or recomputed."""
    from engine.catalog import Catalog, inherit

    cfg = partial_state.config(mostly_distinct_ratio, user)
    keys = [p.key for p in source.partitions()]
    fingerprints = source.partition_fingerprints() or {}
    unserializable = partial_state.unserializable(user)

    def everything(why: str) -> Plan:
        return Plan({k: fingerprints.get(k, "") for k in keys}, {}, {k: why for k in keys}, cfg, not unserializable)

    if not enabled:
        return everything("inheritance off")
    if unserializable:
        return everything(f"user statistic(s) without serialize/deserialize: {', '.join(unserializable)}")
    if not fingerprints:
        return everything(f"{type(source).__name__} cannot tell unchanged partitions (no data fingerprints)")
    if not fileio.exists(fileio.join(store_root, table, "catalog")):
        return everything("new partition")
    try:
        state = Catalog.open(store_root, table).state()
    except CatalogError as exc:
        return everything(f"catalog unreadable ({exc})")
    ts = state.table_statistics
    if state.empty or ts is None:
        return everything("new partition")
    previous = json.loads(ts.properties[CONFIG_PROPERTY]) if CONFIG_PROPERTY in ts.properties else None
    if previous is None:
        return everything("the earlier statistics have no partial states")
    if previous != cfg:
        changed = sorted(k for k in set(cfg) | set(previous) if cfg.get(k) != previous.get(k))
        return everything(f"analysis options changed ({', '.join(changed)})")
    decided = inherit(state, fingerprints, columns_fingerprint(leaves))
    table_uri = fileio.join(store_root, table)
    inherited = {}
    for key, entry in decided.inherited.items():
        files = {name: {"path": ref.path, "size": ref.size, "checksum": ref.checksum} for name, ref in entry.files.by_name().items()}
        # the partial state sits next to the partition's frequencies.parquet (both come from phase 1)
        freq_dir = fileio.join(table_uri, entry.files.frequencies.path.rsplit("/", 1)[0])
        state_uri, counts_uri = partial_state.uris(freq_dir)
        inherited[key] = InheritedPartition(
            key=key,
            files=files,
            rows=entry.row_count,
            job_id=entry.job_id,
            snapshot=entry.snapshot_id,
            data_fingerprint=entry.data_fingerprint,
            state_uri=state_uri,
            counts_uri=counts_uri,
            statistics_uri=fileio.join(table_uri, entry.files.statistics.path),
            histograms_uri=fileio.join(table_uri, entry.files.histograms.path),
        )
    previous = _table_level(state)
    carried = previous if len(inherited) == len(keys) and set(state.partitions) == set(keys) else None
    return Plan(fingerprints, inherited, dict(decided.reasons), cfg, True, carried, previous, frozenset(state.partitions))


def _table_level(state: CatalogState) -> CarriedTable | None:
    """The current table level with its properties decoded (None: not written by a job of this version)."""
    ts = state.table_statistics
    if ts is None:  # no table level at all: merged again
        return None
    try:
        properties = {k: json.loads(v) for k, v in ts.properties.items()}
    except (TypeError, ValueError):  # not written by a job of this version: merge it again
        return None
    return CarriedTable(ts.job_id, ts.files, ts.row_count, properties)


# ---------------------------------------------------------------- task body
def read_histograms(uri: str, expected_checksum: str = "") -> tuple[dict[str, dict[str, Any] | None], dict[str, np.ndarray]]:
    """(bin spec per column, bin counts per binned column) of a histograms.parquet
    (checked against ``expected_checksum``, the one recorded when it was written, if any).

    Only the binned columns' ``count`` leaves are read, on this thread: the edges (null in a
    partition's file) are not decoded (0.83 -> 0.45 ms a 9-column partition's file; a re-bin
    reads one a partition)."""
    data = checksum.read_checked(uri, expected_checksum)  # StatisticsFileCorruptError naming the file
    pf = pq.ParquetFile(pa.BufferReader(data))
    schema = pf.schema_arrow
    specs = json.loads(layout.decode_metadata(schema.metadata)["metastore.histograms"])
    names = [name for name, spec in specs.items() if spec is not None]
    if pf.metadata.num_columns == 3 * len(schema) and all(f.type.num_fields == 3 and f.type.field(2).name == "count" for f in schema):
        # each column a struct of three leaves (lower, upper, count): its count is leaf 3i + 2
        t = pf.reader.read_all(column_indices=[3 * schema.get_field_index(n) + 2 for n in names], use_threads=False)
    else:
        t = pf.read(use_threads=False)
    counts = {}
    for name in names:
        col = contiguous(t.column(name))
        counts[name] = col.field("count").slice(0, specs[name]["bins"]).to_numpy(zero_copy_only=False).astype(np.int64)
    return specs, counts


def partial_state_checksums(inherited: InheritedPartition) -> dict[str, str]:
    """{file name: checksum} of the partition's partial state, as its statistics.parquet
    recorded them when they were written (that file checked first against the catalog's
    checksum: the chain from the catalog to the partial state); empty for older files."""
    uri = inherited.statistics_uri
    with fileio.open_input(uri) as f:
        data = f.read()
    recorded = (inherited.files.get(layout.STATISTICS_FILE) or {}).get("checksum", "")
    if recorded and checksum.of_bytes(data) != recorded:
        raise partial_state.PartialStateError(
            f"statistics file damaged: {uri}: checksum {checksum.of_bytes(data)}, the catalog recorded {recorded} when it was written"
        )
    return layout.partial_state_checksums(layout.decode_metadata(pq.read_metadata(pa.BufferReader(data)).metadata))


def load_partition(
    inherited: InheritedPartition,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    cfg: dict[str, Any],
    groups: list[list[str]],
    counts: bool = True,
) -> LoadedPartition | LoadFailure | tuple[Any, ...]:
    """An inherited partition's states, histogram, and (as separate Ray objects, one per
    group of reduced columns, like ``profile_partition``) its exact value counts; without
    ``counts`` (an append re-analyze: the table's counts come from elsewhere) empty groups.

    Never raises for a bad file: a :class:`LoadFailure` naming it tells the driver
    to recompute the partition instead.
    """
    cpu0 = time.process_time()
    try:
        profiles = [column_profile(l.name, l.type, user) for l in leaves]  # made once per process (values.column_profile)
        expected = partial_state_checksums(inherited)
        rows, states = partial_state.read_states(inherited.state_uri, profiles, user, cfg, expected.get(partial_state.PARTIAL_STATE_FILE, ""))
        if rows != inherited.rows:
            raise partial_state.PartialStateError(
                f"partial state does not match its partition: {inherited.state_uri}: {rows} rows, the catalog says {inherited.rows}"
            )
        reduced = [p for p in profiles if p.reduced] if counts else []
        values = partial_state.read_counts(inherited.counts_uri, reduced, cfg, expected.get(partial_state.PARTIAL_COUNTS_FILE, "")) if reduced else {}
        try:
            recorded = (inherited.files.get(layout.HISTOGRAMS_FILE) or {}).get("checksum", "")
            specs, hist_counts = read_histograms(inherited.histograms_uri, recorded)
        except Exception as exc:  # noqa: BLE001
            raise partial_state.PartialStateError(f"histograms unreadable: {inherited.histograms_uri}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any failure: recompute the partition
        failure = LoadFailure(inherited.key, str(exc) if isinstance(exc, partial_state.PartialStateError) else f"{type(exc).__name__}: {exc}")
        return (failure, *({} for _ in groups)) if groups else failure
    loaded = LoadedPartition(inherited.key, rows, states, specs, hist_counts, time.process_time() - cpu0, expected)
    if not groups:
        return loaded
    return (loaded, *({c: values[c] for c in g} if counts else {} for g in groups))


def load_table_state(
    uri: str,
    expected: str,
    histograms_uri: str,
    histograms_checksum: str,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    cfg: dict[str, Any],
) -> TableState | LoadFailure:
    """The table's merged state (at ``uri``) and histograms (at ``histograms_uri``), each checked
    against the checksum the catalog recorded; a :class:`LoadFailure` naming the file when either
    cannot be used (the append is then reduced in full)."""
    cpu0 = time.process_time()
    try:
        profiles = [column_profile(l.name, l.type, user) for l in leaves]
        rows, states, klls = partial_state.read_table_state(uri, profiles, user, cfg, expected)
        try:
            specs, counts = read_histograms(histograms_uri, histograms_checksum)
        except Exception as exc:  # noqa: BLE001
            raise partial_state.PartialStateError(f"histograms unreadable: {histograms_uri}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any failure: the append is reduced in full
        return LoadFailure("", str(exc) if isinstance(exc, partial_state.PartialStateError) else f"{type(exc).__name__}: {exc}")
    return TableState(rows, states, klls, specs, counts, time.process_time() - cpu0)


def check_partition(inherited: InheritedPartition, discrete: bool) -> LoadFailure | None:
    """What :func:`load_partition` checks of an inherited partition's files, without decoding
    them: its statistics.parquet against the catalog's checksum, its partial state against what
    that file recorded, its histograms.parquet. An unchanged table is carried over only when
    every partition passes, so a re-analyze still finds a damaged state (and recomputes its
    partition) as one that loads the states does; ``discrete``: the table has reduced columns
    (their value counts are a file of the state)."""
    try:
        expected = partial_state_checksums(inherited)
        partial_state.check_file(inherited.state_uri, expected.get(partial_state.PARTIAL_STATE_FILE, ""))
        if discrete:
            partial_state.check_file(inherited.counts_uri, expected.get(partial_state.PARTIAL_COUNTS_FILE, ""))
        recorded = (inherited.files.get(layout.HISTOGRAMS_FILE) or {}).get("checksum", "")
        if recorded:
            got, _ = checksum.of_file(inherited.histograms_uri)
            if got != recorded:
                raise partial_state.PartialStateError(
                    f"histograms unreadable: {inherited.histograms_uri}: checksum {got}, the catalog recorded {recorded} when it was written"
                )
    except Exception as exc:  # noqa: BLE001 - any failure: the table level is merged, the partition recomputed
        return LoadFailure(inherited.key, str(exc) if isinstance(exc, partial_state.PartialStateError) else f"{type(exc).__name__}: {exc}")
    return None


def check_batch(inherited: list[InheritedPartition], discrete: bool) -> tuple[list[LoadFailure | None], float]:
    """:func:`check_partition` of each partition of a batch, and the task's CPU seconds."""
    cpu0 = time.process_time()
    return [check_partition(i, discrete) for i in inherited], time.process_time() - cpu0


def load_batch(
    inherited: list[InheritedPartition],
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    cfg: dict[str, Any],
    groups: list[list[str]],
    counts: bool = True,
) -> list[LoadedPartition | LoadFailure] | tuple[Any, ...]:
    """:func:`load_partition` of each inherited partition of a batch (engine/runtime/batching.py):
    the list of what each loaded (or why it could not), and (as separate Ray objects, one per
    group) a list of each partition's value counts of the group ({} for a failure)."""
    got = [load_partition(i, leaves, user, cfg, groups, counts) for i in inherited]
    if not groups:
        return got  # type: ignore[return-value]  # one Ray object per group: the declared union covers both shapes
    return ([g[0] for g in got], *([g[1 + n] for g in got] for n in range(len(groups))))  # type: ignore[index]  # one Ray object per group: the declared union covers both shapes


def same_histograms(stored: dict[str, dict[str, Any] | None], specs: dict[str, Any]) -> bool:
    """Whether a partition's histograms were binned on exactly these table edges."""
    if set(stored) != set(specs):
        return False
    for name, spec in specs.items():
        old = stored[name]
        if (old is None) != (spec is None):
            return False
        if old is not None and HistogramSpec(**old) != spec:
            return False
    return True


def unchanged_counts(loaded: LoadedPartition, specs: dict[str, Any]) -> dict[str, np.ndarray]:
    """The bin counts re-binning need not read the data for: the inherited ones of the columns
    whose edges did not move, and those derived exactly from them where every old bin lies in one
    new bin (``HistogramSpec.counts_from``: unit-width integer bins, e.g. dates, partition numbers)."""
    return unchanged_bin_counts(loaded.histogram_specs, loaded.histogram_counts, specs)


def unchanged_bin_counts(stored: dict[str, dict[str, Any] | None], counts: dict[str, np.ndarray], specs: dict[str, Any]) -> dict[str, np.ndarray]:
    """:func:`unchanged_counts` of a partition's histograms (``stored`` specs and their ``counts``)."""
    out = {}
    for name, spec in specs.items():
        old = stored.get(name)
        if spec is None or old is None or name not in counts:
            continue
        before = HistogramSpec(**old)
        derived = counts[name] if before == spec else spec.counts_from(before, counts[name])
        if derived is not None:
            out[name] = derived
    return out


def stored_bins(stored: dict[str, dict[str, Any] | None]) -> dict[str, int | None]:
    return {name: (spec["bins"] if spec else None) for name, spec in stored.items()}
