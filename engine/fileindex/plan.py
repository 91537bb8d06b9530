"""Planning over a written file index: which data files might hold rows matching a predicate.

``FileIndex`` reads only what a predicate needs: the ranges file's footer (its column map),
the row groups of the predicate's columns and, of those, the columns the rules use; the
file table's ``partition`` and ``rows``, and ``path`` / ``size`` only of the row groups
holding candidates; Bloom filters only for = / IN columns that have them. Files are
immutable (a job's run directory), so an open index is cached per process by URI.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import fileio
from engine import values as value_forms
from engine.exceptions import StatisticsNotFoundError
from engine.expressions.tree import And, BoundReference, Expression, Not, Op, Or, Predicate, references
from engine.expressions.vector import ColumnVectors, VectorMetricsEvaluator
from engine.fileindex.build import BloomProbe
from engine.fileindex.store import (
    BLOOMS_FILE,
    COLUMNS_KEY,
    FILES_FILE,
    FLOAT,
    INT,
    PARTITIONS_KEY,
    RANGES_FILE,
    TEXT,
    from_number,
)

_BOUND_COLUMNS = {INT: ("min_int", "max_int"), FLOAT: ("min_float", "max_float"), TEXT: ("min", "max")}
_CACHE_SIZE = 16


@dataclass(frozen=True)
class FilePlan:
    """``plan_files``: the candidate files (``candidates``: path, partition, rows, size, in
    index order) and, for each pruned file, what proved it empty: ``"partition: <conjunct>"``
    when its partition's statistics did, else the conjunct its own statistics refuted."""

    predicate: str
    candidates: pa.Table
    _pruned: Callable[[], pa.Table]  # computed on first use: path, partition, reason (building it reads every pruned file's path)
    files: int  # files in the index
    pruned_partitions: tuple[str, ...]

    @functools.cached_property
    def pruned(self) -> pa.Table:
        return self._pruned()

    def paths(self) -> list[str]:
        return self.candidates.column("path").to_pylist()


class FileIndex:
    """An open file index (the three files in ``directory``)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        try:
            self._ranges = pq.ParquetFile(fileio.open_input(fileio.join(directory, RANGES_FILE)))
            self._files = pq.ParquetFile(fileio.open_input(fileio.join(directory, FILES_FILE)))
        except FileNotFoundError as exc:
            raise StatisticsNotFoundError(f"no file index in {directory}: {exc}") from None
        self.columns: dict[str, list[Any]] = json.loads(self._ranges.metadata.metadata[COLUMNS_KEY.encode()])
        self._file_groups: dict[int, pa.Table] = {}
        self.n = self._files.metadata.num_rows
        self.partition_files: list[list[Any]] = json.loads(self._files.metadata.metadata.get(PARTITIONS_KEY.encode(), b"[]"))
        # -1: unknown (a file listed without statistics: never pruned for having no rows)
        self.rows = pc.fill_null(self._files.read(columns=["rows"]).column("rows"), -1).to_numpy()
        self._lock = threading.Lock()
        self._vectors: dict[tuple[str, str], ColumnVectors] = {}
        self._blooms: dict[str, tuple[np.ndarray, Callable[[int, pa.Scalar], bool]]] | None = None

    def vectors(self, ref: BoundReference, with_bloom: bool = False) -> ColumnVectors | None:
        """The column's statistics for every file of the index (None: the column is not indexed)."""
        key = (ref.name, str(ref.type))
        got = self._vectors.get(key)
        if got is None:
            where = self.columns.get(ref.name)
            if where is None:
                return None
            group, offset, count, form = where
            lo_name, hi_name = _BOUND_COLUMNS[form]
            with self._lock:
                t = self._ranges.read_row_group(group, columns=["file", "null_count", "nan_count", "bounded", lo_name, hi_name])
            t = t.slice(offset, count)
            ids = t.column("file").to_numpy()
            n = self.n
            known = np.zeros(n, bool)
            known[ids] = True
            nulls = np.full(n, -1, np.int64)
            nans = np.full(n, -1, np.int64)
            nulls[ids] = pc.fill_null(t.column("null_count"), -1).to_numpy()
            nans[ids] = pc.fill_null(t.column("nan_count"), -1).to_numpy()
            bounded = pc.fill_null(t.column("bounded"), False)
            bounds = []
            for name in (lo_name, hi_name):
                col = t.column(name)
                if not pc.all(bounded).as_py():
                    col = pc.if_else(bounded, col, pa.scalar(None, col.type))
                col = col.combine_chunks()
                typed = value_forms.decode(col, ref.type) if form == TEXT else from_number(col, ref.type)
                bounds.append(_scatter(typed, ids, n))
            lower, upper = bounds
            got = ColumnVectors(self.rows, nulls, nans, lower, upper, known)
            self._vectors[key] = got
        if with_bloom:
            bloom = self._bloom_of(ref.name)
            if bloom is not None:
                units, probe = bloom
                return ColumnVectors(got.rows, got.nulls, got.nans, got.lower, got.upper, got.known, probe, units)
        return got

    def _bloom_of(self, column: str) -> tuple[np.ndarray, Callable[[int, pa.Scalar], bool]] | None:
        if self._blooms is None:
            self._blooms = {}
            try:
                self._bloom_file = pq.ParquetFile(fileio.open_input(fileio.join(self.directory, BLOOMS_FILE)))
                self._bloom_columns = json.loads(self._bloom_file.metadata.metadata[COLUMNS_KEY.encode()])
            except (FileNotFoundError, KeyError):
                self._bloom_columns = {}
        if column not in self._blooms:
            where = self._bloom_columns.get(column)
            if where is None:
                return None
            group, offset, count = where
            with self._lock:
                t = self._bloom_file.read_row_group(group, columns=["file", "words"]).slice(offset, count)
            ids = t.column("file").to_numpy()
            units = np.zeros(self.n, bool)
            units[ids] = True
            slot = np.full(self.n, -1, np.int64)
            slot[ids] = np.arange(len(ids))
            words = t.column("words").to_pylist()
            probes: dict[int, BloomProbe] = {}

            def probe(i: int, scalar: pa.Scalar) -> bool:
                k = int(slot[i])
                if k < 0:
                    return True
                if k not in probes:
                    probes[k] = BloomProbe(words[k])
                return probes[k].might_contain(scalar)

            self._blooms[column] = (units, probe)
        return self._blooms[column]

    def file_rows(self, ids: np.ndarray) -> pa.Table:
        """path, partition, rows, size of the files ``ids`` (ascending), reading only their row groups."""
        md = self._files.metadata
        starts = np.cumsum([0] + [md.row_group(g).num_rows for g in range(md.num_row_groups)])
        groups = sorted(set(np.searchsorted(starts, ids, side="right") - 1)) if len(ids) else []
        parts = []
        for g in groups:
            t = self._file_groups.get(int(g))
            if t is None:
                with self._lock:
                    t = self._files.read_row_group(int(g), columns=["path", "partition", "rows", "size"])
                self._file_groups[int(g)] = t
            lo = starts[g]
            inside = ids[(ids >= lo) & (ids < starts[g + 1])] - lo
            parts.append(t.take(pa.array(inside)))
        if not parts:
            return pa.table(
                {
                    "path": pa.array([], pa.string()),
                    "partition": pa.array([], pa.string()),
                    "rows": pa.array([], pa.int64()),
                    "size": pa.array([], pa.int64()),
                }
            )
        return pa.concat_tables(parts)

    def plan(self, expr: Expression, pruned_partitions: dict[str, str] | None = None) -> FilePlan:
        """Candidates of a bound predicate; ``pruned_partitions``: {partition: refuting conjunct}
        from the partition statistics (their files are pruned without reading their ranges)."""
        evaluator = VectorMetricsEvaluator(expr)
        bloom_columns = {p.term.name for p in _predicates(evaluator.expr) if p.op in (Op.EQ, Op.IN)}
        refs = {r.name: r for r in references(evaluator.expr) if isinstance(r, BoundReference)}
        alive = np.ones(self.n, bool)
        gone = pruned_partitions or {}
        for key, first_id, count in self.partition_files if gone else ():
            if key in gone:
                alive[first_id : first_id + count] = False
        vectors = {name: self.vectors(ref, with_bloom=name in bloom_columns) for name, ref in refs.items()}
        first = evaluator.refuting_conjuncts(lambda ref: vectors.get(ref.name), self.n, self.rows)
        keep = alive & (first == -1)
        conj = [str(c) for c in evaluator.conjuncts]

        def pruned() -> pa.Table:
            gone = np.flatnonzero(~keep)
            rows = self.file_rows(gone)
            reasons = pa.array(
                np.array(["partition: "] + ["the file has no rows"] + conj, dtype=object)[_reason_index(alive[gone], first[gone], len(conj))],
                pa.string(),
            )
            if pruned_partitions:
                part_reason = pa.array([pruned_partitions.get(p, "") for p in rows.column("partition").to_pylist()], pa.string())
                reasons = pc.if_else(pa.array(~alive[gone]), pc.binary_join_element_wise(reasons, part_reason, ""), reasons)
            return pa.table({"path": rows.column("path"), "partition": rows.column("partition"), "reason": reasons})

        return FilePlan(str(expr), self.file_rows(np.flatnonzero(keep)), pruned, self.n, tuple(sorted(pruned_partitions or ())))


def _reason_index(alive: np.ndarray, first: np.ndarray, n_conjuncts: int) -> np.ndarray:
    """Per pruned file, the index into ["partition: ", "the file has no rows", *conjuncts]."""
    out = np.where(first == n_conjuncts, 1, first + 2)
    out[~alive] = 0
    return out


def _predicates(expr: Expression) -> list[Predicate]:
    if isinstance(expr, (And, Or)):
        return _predicates(expr.left) + _predicates(expr.right)
    if isinstance(expr, Not):
        return _predicates(expr.child)
    return [expr] if isinstance(expr, Predicate) else []


def _scatter(values: pa.Array, ids: np.ndarray, n: int) -> pa.Array:
    """``values`` placed at positions ``ids`` of an array of length ``n``, nulls elsewhere."""
    if len(ids) == n and (n == 0 or (ids == np.arange(n)).all()):
        return values
    where = np.full(n, len(values), np.int64)
    where[ids] = np.arange(len(ids))
    padded = pa.concat_arrays([values, pa.nulls(1, values.type)])
    return padded.take(pa.array(where))


_open_indexes: OrderedDict[str, FileIndex] = OrderedDict()
_cache_lock = threading.Lock()


def open_file_index(directory: str) -> FileIndex:
    """An open index, cached per process (index files never change: unique paths per job)."""
    with _cache_lock:
        got = _open_indexes.get(directory)
        if got is not None:
            _open_indexes.move_to_end(directory)
            return got
    got = FileIndex(directory)
    with _cache_lock:
        _open_indexes[directory] = got
        while len(_open_indexes) > _CACHE_SIZE:
            _open_indexes.popitem(last=False)
    return got


def clear_cache() -> None:
    with _cache_lock:
        _open_indexes.clear()
