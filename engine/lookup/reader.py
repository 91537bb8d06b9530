"""The reader core of a table's published statistics (``StatisticsReader``): its state, and
lookups that read only what they return (open files cached in engine/lookup/files.py):

- statistics of some columns: the row groups holding those rows (64 rows each),
  and only the statistic columns asked for (sketches are skipped by default);
- top-k frequencies: the column's head row group (1,024 rows), more only if k is larger;
  a table whose frequencies are in segments (appends, docs/FORMAT.md "Segments"): the
  newest segment's head, and beyond it every segment merged (cached);
- histogram bins: the one struct column, only the row groups of the bin range;
  a value range is turned into bins with the spec in the file's metadata;
- ``where=``: the rows matching a predicate, answered by engine/subset (docs/SUBSETS.md).

``engine.lookup.TableStatistics`` adds its views (pruning, value partitions, review, notebook).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine import arrowcompute as pc
from engine import expressions as ex
from engine import fileio
from engine import types as mt
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY
from engine.catalog.reading import state_at
from engine.columns import column_name, mark_leaf_schema, parse_display_name
from engine.exceptions import InvalidArgumentError
from engine.files import layout
from engine.lookup import files
from engine.lookup.files import StatisticsFile, damaged
from engine.measures.moments import decode_sum
from engine.stats.histograms import HistogramSpec, from_domain, to_domain
from engine.store import Store, partition_dirname

if TYPE_CHECKING:  # engine.subset loads with the first where= (start-up, #20)
    from engine.subset import Subset, SubsetRunner

_subset_runner: list[SubsetRunner] = []  # the registered runner (one)


def use_subset_runner(runner: SubsetRunner) -> None:
    """Compute ``exact=True`` subsets with ``runner``: the Ray job of engine/runtime/subset.py,
    registered from above (engine/runtime/exact.py), which the lookups cannot import."""
    _subset_runner[:] = [runner]


@dataclass(frozen=True)
class PartitionInfo:
    key: str
    rows: int


def struct_fields_hint(missing: Sequence[str], stored: Sequence[str], shown: int = 8) -> str:
    """For a missing name that is a struct (its fields are stored as ``name.field``): the fields to ask for."""
    notes = []
    for name in missing:
        fields = [c for c in stored if c.startswith(name + ".")]
        if fields:
            more = f", ... ({len(fields)} in all)" if len(fields) > shown else ""
            notes.append(f"{name!r} is a struct: ask for its fields {', '.join(map(repr, fields[:shown]))}{more}")
    return "; " + "; ".join(notes) if notes else ""


class StatisticsReader:
    """The published statistics of one table (the state at open time; ``refresh()`` to move on).

    ``at_transaction`` / ``at_snapshot``: an earlier state from the table's catalog
    (time travel, docs/CATALOG.md): the state right after that transaction, or after
    the newest transaction describing that table snapshot. Such a state is pinned:
    ``refresh()`` reads the same state again.
    """

    def __init__(self, store: Store, table: str, at_transaction: int | None = None, at_snapshot: str | None = None) -> None:
        if at_transaction is not None and at_snapshot is not None:
            raise InvalidArgumentError("give at_transaction or at_snapshot, not both")
        self.store = store
        self.table = table
        self.at_transaction = at_transaction
        self.at_snapshot = at_snapshot
        self.refresh()

    @property
    def time_travel(self) -> bool:
        return self.at_transaction is not None or self.at_snapshot is not None

    @property
    def txn_id(self) -> int | None:
        """The catalog transaction this state is (None for a table without a catalog)."""
        return self.state.catalog.txn_id if self.state.catalog is not None else None

    def refresh(self) -> None:
        if self.time_travel:
            self.state = state_at(self.store.root, self.table, txn_id=self.at_transaction, snapshot=self.at_snapshot)
        else:
            self.state = self.store.state(self.table)
        self._manifest: dict[str, Any] | None = None
        self._run = self.state.run_uri
        self.schema = mark_leaf_schema(self.state.schema)  # leaf names: the binder reads s\\.x as column "s.x"
        self._keys = {p.key for p in self.state.partitions}
        self._names = frozenset(self.schema.names)
        # the catalog names every partition's files: with inherited statistics
        # partitions live in different runs
        self._partition_files = {p.key: p.files for p in self.state.partitions if p.files}
        self._table_files = self.state.table_files
        self._checksums: Mapping[str, str] = self.state.checksums  # file URI -> checksum (#21)
        # the older segments of the table's frequencies, oldest (the base) first, as (URI, checksum);
        # empty (one segment, the triple's file) unless an append re-analyze wrote deltas
        named = self.state.properties.get(FREQUENCY_SEGMENTS_PROPERTY) or ()
        table_uri = self.store.table_uri(self.table) if named else ""
        self.older_segments: tuple[tuple[str, str], ...] = tuple((fileio.join(table_uri, s["path"]), str(s.get("checksum") or "")) for s in named)

    @property
    def manifest(self) -> dict[str, Any]:
        """The state in its JSON form (``PublishedState.as_manifest``)."""
        if self._manifest is None:
            self._manifest = self.state.as_manifest()
        return self._manifest

    # ------------------------------------------------------------ helpers
    @property
    def job_id(self) -> str:
        return self.state.job_id

    @property
    def snapshot(self) -> str:
        return self.state.snapshot_id

    def stale_by(self) -> int | None:
        """How many snapshots the analyzed table (Iceberg, Delta, Hudi) has committed since the
        snapshot these statistics describe, from the format's history (no data read; None for
        a Parquet directory or a snapshot no longer in the history; docs/FORMATS.md)."""
        from engine.sources import snapshots_since

        uri = self.state.table_uri
        return snapshots_since(uri, self.snapshot) if uri else None

    def partitions(self) -> list[PartitionInfo]:
        return [PartitionInfo(p.key, p.rows) for p in self.state.partitions]

    def resolve_column(self, column: str | Sequence[str]) -> str:
        """The stored name of a column (engine/columns.py): a stored name as it is, a path
        (a tuple of names: ``("s.x",)`` is a top-level column ``s.x``, ``("s", "x")`` field
        ``x`` of a struct ``s``), a top-level column's name as in the data (``s.x``
        when no struct leaf is stored under that name), or a display form
        (engine/columns.py ``display_name``: ``s > x``). Unknown names come back as
        they are, for the caller's error."""
        if not isinstance(column, str):
            return column_name(tuple(column))
        names = self._names
        if column in names:
            return column
        escaped = column_name((column,))
        if escaped in names:
            return escaped
        path = parse_display_name(column)  # a struct leaf as people read it: "s > x"
        if path is not None and column_name(path) in names:
            return column_name(path)
        return column

    def resolve_columns(self, columns: Sequence[str]) -> tuple[str, ...]:
        """``resolve_column`` of each name, in order (one set test when every name is stored as it is,
        as nearly always: the Flight server's hot path asks this per request)."""
        if self._names.issuperset(columns):
            return tuple(columns)
        return tuple(self.resolve_column(c) for c in columns)

    def column_type(self, column: str) -> pa.DataType:
        column = self.resolve_column(column)
        idx = self.schema.get_field_index(column)
        if idx < 0:
            raise InvalidArgumentError(f"table {self.table!r} has no column {column!r}{struct_fields_hint([column], self.schema.names)}")
        return self.schema.field(idx).type

    def file_uri(self, name: str, partition: str | None = None) -> str:
        if partition is None:
            return self._table_files.get(name) or fileio.join(self._run, "table", name)
        if partition not in self._keys:
            raise InvalidArgumentError(f"table {self.table!r} has no partition {partition!r}")
        files = self._partition_files.get(partition)
        if files and name in files:
            return files[name]
        return fileio.join(self._run, "partitions", partition_dirname(partition), name)

    def stored_file(self, name: str, partition: str | None = None) -> StatisticsFile:
        """An open statistics file of this state, its checksum checked on its first read."""
        uri = self.file_uri(name, partition)
        return files.open_file(uri, self._checksums.get(uri, ""))

    # ------------------------------------------------------------ statistics
    def statistics(
        self,
        columns: Sequence[str] | None = None,
        partition: str | None = None,
        statistics: Sequence[str] | None = None,
        sketches: bool = False,
        *,
        where: ex.Where | None = None,
        exact: bool = False,
    ) -> pa.Table:
        """Rows of statistics.parquet for ``columns`` (all if None), in the order asked.

        A partition's sketches kept in its partial state (``metastore.sketches``) are read
        from there: the result is the same either way.

        ``where``: the statistics of the rows matching that predicate instead (docs/SUBSETS.md):
        the same columns, each statistic's method (stored, estimated with bounds, computed) in
        the schema metadata (``engine.subset.methods_of``); ``exact=True`` computes them."""
        if where is not None:
            return self._subset(where, exact, partition, columns).statistics(columns, statistics)
        f = self.stored_file(layout.STATISTICS_FILE, partition)
        proj = _projection(f, statistics, sketches)
        t = self._statistics_rows(f, columns, proj)
        if partition is not None and "histogram_bins" in proj and layout.histogram_bins_in_histograms(f.kv):
            t = self._with_histogram_bins(t, partition)
        if partition is not None and f.kv.get(layout.SKETCHES_KEY) == layout.SKETCHES_IN_PARTIAL_STATE:
            wanted = [c for c in layout.SKETCH_COLUMNS if c in proj]
            if wanted:
                t = self._with_sketches(t, partition, wanted, layout.partial_state_checksums(f.kv).get(layout.PARTIAL_STATE_FILE, ""))
        return t

    def _with_histogram_bins(self, t: pa.Table, partition: str) -> pa.Table:
        """A partition's ``histogram_bins`` from its histograms.parquet's specs (its statistics
        file leaves them null: ``layout.HISTOGRAM_BINS_KEY``; only that file's footer is read)."""
        specs = self.stored_file(layout.HISTOGRAMS_FILE, partition).meta_json("metastore.histograms")
        i = t.schema.get_field_index("histogram_bins")
        bins = layout.bins_of(specs, t.column("column").to_pylist())
        return t.set_column(i, t.schema.field(i), pa.array(bins, pa.int64()))

    def _with_sketches(self, t: pa.Table, partition: str, wanted: list[str], expected_checksum: str = "") -> pa.Table:
        frequencies = self.file_uri(layout.FREQUENCIES_FILE, partition)
        by_column = files.partial_sketches(
            fileio.join(frequencies.rsplit("/", 1)[0], layout.PARTIAL_STATE_FILE),
            expected_checksum,
        )
        names = t.column("column").to_pylist()
        for name in wanted:
            i = t.schema.get_field_index(name)
            values = [by_column.get(c, {}).get(name) for c in names]
            t = t.set_column(i, t.schema.field(i), pa.array(values, pa.binary()))
        return t

    def _statistics_rows(self, f: StatisticsFile, columns: Sequence[str] | None, proj: list[str]) -> pa.Table:
        order: list[str] = f.meta_json("metastore.columns")
        rg_rows = int(f.kv["metastore.row_group_rows"])
        if columns is None:
            try:
                with f.lock:
                    return f.pf.read(columns=proj)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
                raise damaged(f.uri, exc) from None
        columns = [self.resolve_column(c) for c in columns]
        position = f.decoded.get("position")
        if position is None:
            position = f.decoded["position"] = {c: i for i, c in enumerate(order)}
        missing = [c for c in columns if c not in position]
        if missing:
            raise InvalidArgumentError(
                f"table {self.table!r} has no statistics for column(s): {', '.join(map(repr, missing))}{struct_fields_hint(missing, order)}"
            )
        rows = [position[c] for c in columns]
        groups = sorted({r // rg_rows for r in rows})
        t = f.read_row_groups(groups, tuple(proj))
        base = {g: i * rg_rows for i, g in enumerate(groups)}  # every group but the last is full
        take = [base[r // rg_rows] + r % rg_rows for r in rows]
        return pc.take(t, pa.array(take, pa.int64()))

    def statistics_columns(self, partition: str | None = None) -> list[str]:
        """The columns described by a statistics file, in row order (row i is column i), from its footer."""
        f = self.stored_file(layout.STATISTICS_FILE, partition)
        return list(f.meta_json("metastore.columns"))

    def column_statistics(self, column: str, partition: str | None = None, sketches: bool = False) -> dict[str, Any]:
        """One column's statistics as a dict, values decoded to Python values of the column's type
        (a date or time beyond Python's years 1..9999 stays an Arrow scalar: Python has no value for it;
        so does a nanosecond value without pandas, which ``as_py()`` needs for it: engine/pyvalues.py
        formats both exactly)."""
        column = self.resolve_column(column)
        row = self.statistics([column], partition, sketches=sketches).to_pylist()[0]
        t = self.column_type(column)
        for key in layout.VALUE_STATISTICS:
            if row.get(key) is not None:
                row[key] = py_or_scalar(value_forms.decode_scalar(row[key], t))
        if row.get("sum") is not None:
            row["sum"] = decode_sum(row["sum"], t)
        return row

    def statistics_schema(self, partition: str | None = None, statistics: Sequence[str] | None = None, sketches: bool = False) -> pa.Schema:
        """The schema ``statistics()`` returns for these arguments, from the file footer only."""
        f = self.stored_file(layout.STATISTICS_FILE, partition)
        proj = _projection(f, statistics, sketches)
        return pa.schema([f.schema.field(n) for n in proj])

    # ------------------------------------------------------------ frequencies
    def frequency_index(self, partition: str | None = None) -> dict[str, tuple[int, int, int, str]]:
        """``{column: (first row group, row groups, stored rows, kind)}`` of the frequencies file.
        The table's frequencies in several segments: the newest segment's row groups, the rows a
        full read of the merged column returns (``metastore.segment``) and the kind."""
        f = self.stored_file(layout.FREQUENCIES_FILE, partition)
        index = {k: tuple(v) for k, v in f.meta_json("metastore.frequencies").items()}
        if partition is None and self.older_segments:
            stored = files.stored_rows(f)
            index = {k: (v[0], v[1], stored.get(k, v[2]), v[3]) for k, v in index.items()}
        return index

    def frequency_segments(self) -> list[str]:
        """The URIs of the table's frequencies segments, oldest (the base) first, the newest (the
        file ``file_uri("frequencies.parquet")`` names) last; one URI when they are one file."""
        return [uri for uri, _ in self.older_segments] + [self.file_uri(layout.FREQUENCIES_FILE)]

    def top_frequencies(
        self, column: str, k: int = 10, partition: str | None = None, typed: bool = False, *, where: ex.Where | None = None, exact: bool = False
    ) -> pa.Table:
        """The k most frequent values of a discrete column: (value, frequency), by decreasing frequency.

        An empty result with kind ``all_distinct`` means every value occurs once.
        The kind is in the result's schema metadata (``kind``). ``where``: of the rows matching
        that predicate (docs/SUBSETS.md; each value's method in ``metastore.subset``).
        """
        if where is not None:
            return self._subset(where, exact, partition).top_frequencies(column, k, typed)
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        column = self.resolve_column(column)
        f = self.stored_file(layout.FREQUENCIES_FILE, partition)
        index = f.meta_json("metastore.frequencies")
        if column not in index:
            self.column_type(column)  # unknown column -> clear error
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        first, n_groups, n_rows, kind = index[column]
        stored = n_rows
        if partition is None and self.older_segments:
            stored = files.stored_rows(f).get(column, n_rows)
        want = min(k, stored)
        if want > min(n_rows, layout.FREQUENCIES_HEAD_ROWS) and stored > n_rows:
            # beyond the newest segment's head (its first min(1,024, stored) rows are the merged
            # view's): every segment merged, newest per value (engine/stats/segments.py)
            t = self._merged_frequencies(column, f, first, n_groups).slice(0, want)
        else:
            groups, covered = [], 0
            for g in range(first, first + n_groups):
                if covered >= want:
                    break
                groups.append(g)
                covered += f.pf.metadata.row_group(g).num_rows
            if groups:
                t = f.read_row_groups(groups, ("value", "frequency")).slice(0, want)
            else:
                t = pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})
        if typed:
            t = t.set_column(0, "value", value_forms.decode(contiguous(t["value"]), self.column_type(column)))
        return t.replace_schema_metadata({"kind": kind, "stored_rows": str(stored)})

    def top_counts(self, partition: str | None = None) -> dict[str, int | None]:
        """Each discrete column's most frequent value's count: the first row of its frequencies
        (the newest segment's head is the merged view's), 1 when every value occurs once, None
        without values; one read of the ``frequency`` column of every column's first row group
        (the alerts' ``imbalanced``, docs/DIFF.md)."""
        f = self.stored_file(layout.FREQUENCIES_FILE, partition)
        stored = files.stored_rows(f) if partition is None and self.older_segments else {}
        out: dict[str, int | None] = {}
        heads: list[tuple[str, int]] = []
        for column, (first, n_groups, n_rows, kind) in f.meta_json("metastore.frequencies").items():
            if n_rows and n_groups:
                heads.append((column, first))
            else:  # nothing stored: all distinct (or only singles), or no values
                out[column] = 1 if kind != "complete" and stored.get(column, n_rows) == 0 else None
        if heads:
            groups = [g for _, g in heads]
            try:
                with f.lock:
                    freq = f.pf.read_row_groups(groups, columns=["frequency"]).column("frequency").to_numpy()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
                raise damaged(f.uri, exc) from None
            at = 0
            for (column, g), n in zip(heads, (f.pf.metadata.row_group(g).num_rows for g in groups)):
                out[column] = int(freq[at])
                at += n
        return out

    def _merged_frequencies(self, column: str, newest: StatisticsFile, first: int, n_groups: int) -> pa.Table:
        """All stored rows of ``column`` merged from the table's segments (engine/lookup/files.py)."""
        return files.merged_frequencies(column, newest, first, n_groups, self.older_segments, self.column_type)

    # ------------------------------------------------------------ values
    def value_text(self, column: str, value: object) -> tuple[pa.Scalar, str]:
        """A value of ``column`` given in its type (a Python value or pyarrow scalar) or,
        as a str, in its text form (docs/VALUE_FORMS.md): the typed scalar and its
        canonical text form (what frequencies.parquet stores)."""
        column = self.resolve_column(column)
        t = self.column_type(column)
        if value is None:
            raise InvalidArgumentError(f"column {column!r}: frequencies count no nulls (the null count is in the column's statistics)")
        try:
            if isinstance(value, pa.Scalar):
                scalar = value if value.type == t else pc.cast(value, t)
            elif isinstance(value, str) and not mt.is_string_like(t):
                scalar = value_forms.decode_scalar(value, t)
            else:
                scalar = pa.scalar(value, type=t)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"column {column!r} ({t}): {exc}") from None
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"column {column!r} ({t}): {value!r} is not a value of this column: {exc}") from None
        if not scalar.is_valid:
            raise InvalidArgumentError(f"column {column!r}: frequencies count no nulls (the null count is in the column's statistics)")
        text = value_forms.encode_scalar(scalar)
        assert text is not None
        return scalar, text

    # ------------------------------------------------------------ predicates
    def bind(self, where: ex.Where) -> ex.Expression:
        """A predicate bound to this table's schema: its text (docs/PREDICATES.md), a tree of
        ``engine.expressions`` (bound or not) or a pyiceberg expression. ExpressionError
        (one line, with the position) if it does not parse or fit the schema. A bound tree
        is reshaped too (chains balanced: the evaluators recurse over it)."""
        return ex.bound(where, self.schema)

    # ------------------------------------------------------------ subsets
    def subset(self, where: ex.Where, exact: bool = False) -> Subset:
        """The rows matching ``where`` (``engine.subset.Subset``): ``.statistics()``,
        ``.top_frequencies()``, ``.histogram()``, ``.row_count()``, ``.partitions``, each
        answer with its method (docs/SUBSETS.md). ``exact=True``: computed on the data."""
        from engine.subset import Subset

        return Subset(self, where, exact, runner=_subset_runner[0] if _subset_runner else None)

    def _subset(self, where: ex.Where, exact: bool, partition: str | None, columns: Sequence[str] | None = None) -> Subset:
        if partition is not None:
            raise InvalidArgumentError("where= describes rows of the whole table: give no partition with it")
        from engine.subset import Subset

        return Subset(self, where, exact, columns, _subset_runner[0] if _subset_runner else None)

    # ------------------------------------------------------------ histograms
    def histogram_spec(self, column: str, partition: str | None = None) -> HistogramSpec | None:
        column = self.resolve_column(column)
        f = self.stored_file(layout.HISTOGRAMS_FILE, partition)
        specs = f.meta_json("metastore.histograms")
        if column not in specs:
            self.column_type(column)
            raise InvalidArgumentError(f"column {column!r} has no histogram (only numeric and temporal columns do)")
        return HistogramSpec(**specs[column]) if specs[column] else None

    def histogram(
        self,
        column: str,
        partition: str | None = None,
        bins: tuple[int, int] | None = None,
        value_range: tuple[Any, Any] | None = None,
        *,
        where: ex.Where | None = None,
        exact: bool = False,
    ) -> pa.Table:
        """Bins (lower, upper, count) of a column: all, a bin range [start, stop), or those overlapping a value range.

        ``where``: the counts of the rows matching that predicate, on the table's edges
        (docs/SUBSETS.md; each bin's method in ``metastore.subset``)."""
        if where is not None:
            sub = self._subset(where, exact, partition)
            t = sub.histogram(column)
            if bins is not None or value_range is not None:  # on the table's edges, or the computed subset's own
                edges = sub.computed([self.resolve_column(column)]) if exact else self
                keep = edges.histogram(column, bins=bins, value_range=value_range).column("bin")
                t = t.filter(pc.is_in(t.column("bin"), value_set=keep.combine_chunks()))
            return t
        column = self.resolve_column(column)
        spec = self.histogram_spec(column, partition)
        if spec is None:
            return pa.table({"bin": pa.array([], pa.int64()), "lower": pa.array([]), "upper": pa.array([]), "count": pa.array([], pa.int64())})
        start, stop = 0, spec.bins
        if bins is not None:
            start, stop = max(0, bins[0]), min(spec.bins, bins[1])
        if value_range is not None:
            t = self.column_type(column)
            lo, hi = value_range
            dlo = to_domain(pa.scalar(lo, type=t)) if lo is not None else -float("inf")
            dhi = to_domain(pa.scalar(hi, type=t)) if hi is not None else float("inf")
            if lo is not None:
                start = max(start, spec.bin_of(dlo))
            if hi is not None:
                stop = min(stop, spec.bin_of(dhi) + 1)
            # a range wholly below or above the table's range overlaps no bin (bin_of clamps);
            # float infinities sit in the end bins, so an unbounded side still reaches them
            integer = spec.domain == "integer"
            if (dhi < spec.lower and (integer or dlo > -float("inf"))) or (dlo > spec.upper and (integer or dhi < float("inf"))):
                start = stop = 0
        if start >= stop:
            start = stop = min(start, spec.bins)
        f = self.stored_file(layout.HISTOGRAMS_FILE, partition)
        rg_rows = layout.HISTOGRAM_ROW_GROUP
        groups = list(range(start // rg_rows, (stop - 1) // rg_rows + 1)) if stop > start else []
        if groups:
            col = contiguous(f.read_row_groups(groups, (column,))[column])
            col = col.slice(start - groups[0] * rg_rows, stop - start)
        else:
            col = pa.array([], f.schema.field(column).type)
        lower, upper = pc.struct_field(col, "lower"), pc.struct_field(col, "upper")
        if f.kv.get(layout.EDGES_KEY) == layout.EDGES_IN_SPEC:  # a partition's: the table's edges
            lows, ups = spec.edges()
            t = self.column_type(column)
            lower, upper = from_domain(lows[start:stop], t), from_domain(ups[start:stop], t)
        return pa.table(
            {
                "bin": pa.array(range(start, stop), pa.int64()),
                "lower": lower,
                "upper": upper,
                "count": pc.struct_field(col, "count"),
            }
        )


def _projection(f: StatisticsFile, statistics: Sequence[str] | None, sketches: bool) -> list[str]:
    """The statistics.parquet columns a lookup reads: all but the sketches, or those asked for."""
    names = f.schema.names
    if statistics is None:
        return [n for n in names if sketches or n not in layout.SKETCH_COLUMNS]
    unknown = [s for s in statistics if s not in names]
    if unknown:
        raise InvalidArgumentError(f"unknown statistic(s): {', '.join(unknown)}")
    return ["column", *[s for s in statistics if s != "column"]]


def py_or_scalar(scalar: pa.Scalar) -> Any:
    """``scalar.as_py()``, or the scalar itself where that fails (years beyond 1..9999; a
    nanosecond value without pandas)."""
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return scalar
