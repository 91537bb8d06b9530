"""The three statistics files: their schemas, metadata keys and row-group layout.

Format version 1. Every file carries key-value metadata (``metastore.*``) with
the format version, table identity, partition key, snapshot identity, job id
and creation time, so the files alone describe themselves (the catalog can be
rebuilt from them). Row groups are laid out for the lookups:

- statistics.parquet: one row per table column in table order, row groups of
  ``STATISTICS_ROW_GROUP`` rows; ``metastore.columns`` lists the row order so a
  lookup of a few columns reads only their row groups and only the projected
  statistic columns. A partition's leaves ``histogram_bins`` to its
  histograms.parquet (``HISTOGRAM_BINS_KEY``).
- frequencies.parquet: rows of one column are contiguous, the first
  ``FREQUENCIES_HEAD_ROWS`` rows of each column in a row group of their own (a
  top-k lookup reads one small row group); ``metastore.frequencies`` maps each
  column to its first row group, row count and kind. Optionally (table level,
  ``--value-partitions``) a fourth column ``partitions`` holds each value's
  distribution over the partitions listed in ``metastore.partitions``.
- histograms.parquet: one struct column (lower, upper, count) per histogrammed
  column, one row per bin; ``metastore.histograms`` holds each column's bin spec
  so the bins of a value range are found without reading data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

FORMAT_VERSION = "1"
STATISTICS_FILE = "statistics.parquet"
FREQUENCIES_FILE = "frequencies.parquet"
HISTOGRAMS_FILE = "histograms.parquet"
FILES = (STATISTICS_FILE, FREQUENCIES_FILE, HISTOGRAMS_FILE)

STATISTICS_ROW_GROUP = 64
FREQUENCIES_HEAD_ROWS = 1024
#: footer key of a delta segment of the table's frequencies: {"stored_rows": {column: rows of the merged read}}
SEGMENT_KEY = "metastore.segment"
FREQUENCIES_ROW_GROUP = 128 * 1024
HISTOGRAM_ROW_GROUP = 1000

# frequencies kinds (the `frequencies` column of statistics.parquet)
FREQ_COMPLETE = "complete"  # every distinct value with its count
FREQ_ALL_DISTINCT = "all_distinct"  # no rows stored: every value occurs once
FREQ_DUPLICATES_ONLY = "duplicates_only"  # only values with count > 1; all others occur once

#: Probabilities of the percentile columns of statistics.parquet (column p01 .. p99).
PERCENTILES: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def percentile_column(p: float) -> str:
    return f"p{round(p * 100):02d}"


PERCENTILE_COLUMNS = tuple(percentile_column(p) for p in PERCENTILES)

#: the table-level frequencies.parquet's optional column of per-value partition
#: distributions (engine/stats/valuepartitions.py builds them)
VALUE_PARTITIONS_COLUMN = "partitions"
DISTRIBUTION_TYPE = pa.struct([("index", pa.list_(pa.int32())), ("count", pa.list_(pa.int64()))])
VALUE_PARTITIONS_FIELD = pa.field(VALUE_PARTITIONS_COLUMN, DISTRIBUTION_TYPE)

#: statistics.parquet's own columns; the moments' (``sum``, ``mean``, ``stddev``: engine/measures)
#: follow ``max``, and the lengths' (``avg_len``, ``max_len``) them
_OWN_STATISTICS = pa.schema(
    [
        ("column", pa.string()),
        ("type", pa.string()),
        ("unsupported", pa.string()),
        ("row_count", pa.int64()),
        ("null_count", pa.int64()),
        ("nan_count", pa.int64()),
        ("distinct_count", pa.int64()),
        ("distinct_count_exact", pa.bool_()),
        ("min", pa.string()),
        ("max", pa.string()),
        *[(name, pa.string()) for name in PERCENTILE_COLUMNS],
        ("percentiles_exact", pa.bool_()),
        ("percentiles_rank_error", pa.float64()),
        ("frequencies", pa.string()),
        ("histogram_bins", pa.int64()),
        ("theta_sketch", pa.binary()),
        ("kll_sketch", pa.binary()),
    ]
)
if TYPE_CHECKING:  # built on first use (``__getattr__`` below)
    #: statistics.parquet columns, in file order: its own with the registered statistics'
    #: (engine/measures: one from before the registry in its place, the others at the end in
    #: name order), then the user statistics.
    STATISTICS_SCHEMA: pa.Schema
    #: the names of those columns
    BUILTIN_STATISTICS: frozenset[str]
#: statistics that hold values in the column's text form (engine.values)
VALUE_STATISTICS = ("min", "max", *PERCENTILE_COLUMNS)
SKETCH_COLUMNS = ("theta_sketch", "kll_sketch")
#: A partition's mergeable partial state (engine/files/partial_state.py), next to its
#: frequencies.parquet: where its sketches live when its statistics.parquet says so
PARTIAL_STATE_FILE = "partial_state.arrow"
#: statistics.parquet metadata: ``partial_state`` when the partition's sketch columns are
#: null here and its theta and KLL sketches are the ``theta`` and ``kll`` columns of its
#: partial state (planners read statistics files; sketches only serve merging: docs/FORMAT.md)
SKETCHES_KEY = "metastore.sketches"
#: statistics.parquet metadata of a partition: its partial-state files (next to its
#: frequencies.parquet) as ``{file name: {"size", "checksum"}}``, recorded when they were
#: written: checked by the loads of inheritance, the sketch lookups and verify (the
#: statistics file's own checksum is in the catalog)
PARTIAL_STATE_KEY = "metastore.partial_state"
SKETCHES_IN_PARTIAL_STATE = "partial_state"
#: statistics.parquet metadata of a partition: ``histograms`` when its ``histogram_bins`` column
#: is null and each column's bin count is the one its histograms.parquet's spec gives
#: (``metastore.histograms``): a re-bin on new table edges then rewrites only that file. Files
#: written before it (no key) hold the count themselves; the table's statistics.parquet always does
HISTOGRAM_BINS_KEY = "metastore.histogram_bins"
HISTOGRAM_BINS_IN_HISTOGRAMS = "histograms"
#: histograms.parquet metadata: ``spec`` when the bins' ``lower``/``upper`` are null and
#: follow from ``metastore.histograms`` (a partition's file: its bins are the table's)
EDGES_KEY = "metastore.edges"
EDGES_IN_SPEC = "spec"

FREQUENCIES_SCHEMA = pa.schema([("column", pa.string()), ("value", pa.string()), ("frequency", pa.int64())])
#: table-level frequencies.parquet with value partitions: the partition keys its
#: ``partitions`` column numbers, as a JSON list in table order
PARTITIONS_KEY = "metastore.partitions"
#: a delta segment of the table's frequencies (docs/FORMAT.md, "Segments"): JSON
#: ``{"stored_rows": {column: N}}``, N the rows a full read of the merged column returns;
#: absent in a whole file (a base segment: its stored rows are its own rows)
SEGMENT_KEY = "metastore.segment"


def frequencies_schema(value_partitions: bool = False) -> pa.Schema:
    """The frequencies.parquet schema; with ``value_partitions`` the optional fourth
    column ``partitions`` (engine.stats.valuepartitions: which partitions hold each value)."""
    return FREQUENCIES_SCHEMA.append(VALUE_PARTITIONS_FIELD) if value_partitions else FREQUENCIES_SCHEMA


@dataclass(frozen=True)
class FileIdentity:
    """What every statistics file says about itself in its key-value metadata."""

    table: str
    table_uri: str
    level: str  # "partition" or "table"
    partition: str  # partition key, "" for the table level and unpartitioned tables
    snapshot: str
    job_id: str
    created_at: str

    @staticmethod
    def now() -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds")

    def metadata(self, kind: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        md = {
            "metastore.format_version": FORMAT_VERSION,
            "metastore.kind": kind,
            "metastore.level": self.level,
            "metastore.table": self.table,
            "metastore.table_uri": self.table_uri,
            "metastore.partition": self.partition,
            "metastore.snapshot": self.snapshot,
            "metastore.job_id": self.job_id,
            "metastore.created_at": self.created_at,
        }
        if extra:
            md.update(extra)
        return md


def decode_metadata(md: dict[bytes, bytes] | None) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (md or {}).items() if k.startswith(b"metastore.")}


def partial_state_checksums(statistics_metadata: dict[str, str]) -> dict[str, str]:
    """{partial-state file name: checksum} a partition's statistics.parquet recorded
    (``PARTIAL_STATE_KEY``; empty for files written before it: not checked)."""
    raw = statistics_metadata.get(PARTIAL_STATE_KEY)
    if not raw:
        return {}
    return {name: str(f.get("checksum") or "") for name, f in json.loads(raw).items() if isinstance(f, dict)}


def histogram_bins_in_histograms(statistics_metadata: Mapping[str, str]) -> bool:
    """Whether a statistics.parquet (its decoded metadata) leaves ``histogram_bins`` to its
    partition's histograms.parquet (``HISTOGRAM_BINS_KEY``)."""
    return statistics_metadata.get(HISTOGRAM_BINS_KEY) == HISTOGRAM_BINS_IN_HISTOGRAMS


def bins_of(specs: Mapping[str, Mapping[str, Any] | None], columns: Sequence[str]) -> list[int | None]:
    """Each column's ``histogram_bins`` from a histograms.parquet's specs (``metastore.histograms``):
    None for a column without a histogram (not histogrammed, or no values)."""
    out: list[int | None] = []
    for c in columns:
        spec = specs.get(c)
        out.append(int(spec["bins"]) if spec else None)
    return out


def json_metadata(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def __getattr__(name: str) -> object:
    """``STATISTICS_SCHEMA`` and ``BUILTIN_STATISTICS``, built on first use (PEP 562): the
    registry imports every statistic's module, which the writers need and a lookup does
    not (``metastore show``: start-up, issue #30)."""
    if name not in ("STATISTICS_SCHEMA", "BUILTIN_STATISTICS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from engine import measures

    schema = pa.schema(measures.with_statistics_columns(list(_OWN_STATISTICS)))
    globals().update(STATISTICS_SCHEMA=schema, BUILTIN_STATISTICS=frozenset(schema.names))
    return globals()[name]
