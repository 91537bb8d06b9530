"""Quantiles of a column, exact (a distributed sort of the table) or approximate
(the sketches kept in statistics.parquet), in one result shape.

    from engine.api import exact_quantiles, approximate_quantiles, sort_column
    exact_quantiles("data/sales", "price", [0.5, 0.99])          # reads the table, sorts it (Ray, or this process when small)
    approximate_quantiles(".metastore", "sales", "price", [0.5, 0.99])  # reads one sketch

Exact quantiles follow DuckDB's ``quantile_disc`` (see engine/stats/ranks.py);
approximate ones carry the normalized rank error of the sketch that answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engine import types as mt
from engine.exceptions import InvalidArgumentError
from engine.types import is_fractional

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.runtime.distributed_sort import SortedColumn

__all__ = ["Quantiles", "approximate_quantiles", "exact_quantiles", "sort_column"]


@dataclass(frozen=True)
class Quantiles:
    """Quantiles of one column.

    ``count`` is the number of values ranked: non-null values for exact
    quantiles (NaN included, ordered last), non-null non-NaN values for
    sketches (sketches never see NaN). ``ranks`` are the exact 0-based ranks
    (None for approximate results). ``rank_errors[i]`` bounds ``|true rank of
    values[i] / count - probabilities[i]|`` beyond the discretisation (0 when exact).
    """

    table: str
    column: str
    type: str
    probabilities: tuple[Any, ...]
    values: tuple[Any, ...]
    exact: bool
    count: int
    null_count: int
    nan_count: int
    ranks: tuple[int | None, ...] = ()
    methods: tuple[str, ...] = ()
    rank_errors: tuple[float, ...] = ()
    timings: dict[str, float | str] = field(default_factory=dict, compare=False)  # seconds per phase; "runtime": where it ran

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_probabilities(probabilities: Sequence[object]) -> list[Any]:
    from engine.stats import ranks

    if isinstance(probabilities, (str, bytes)) or not isinstance(probabilities, Sequence):
        raise InvalidArgumentError("probabilities must be a list of numbers in [0, 1]")
    ps = list(probabilities)
    ranks.ranks_for(1, ps)  # validates every one
    return ps


def sort_column(table_uri: str, column: str, *, ranges: int | None = None, name: str | None = None, representation: str = "auto") -> SortedColumn:
    """Sort ``column`` of the table at ``table_uri`` on Ray: a :class:`SortedColumn`
    answering ``value_at_rank``, ``rank_of``, ``count_of`` and ``quantiles`` exactly.

    Starts (or attaches to, via RAY_ADDRESS) Ray if this process has not.
    """
    from engine.runtime import distributed_sort
    from engine.runtime.ray_runtime import ensure_ray
    from engine.sources import open_table

    source = open_table(table_uri, name=name)
    ray_s = ensure_ray()
    sorted_col, _ = distributed_sort.sort_column(source, column, ranges=ranges, representation=representation)
    sorted_col.timings["ray_start_s"] = ray_s
    return sorted_col


def exact_quantiles(
    table_uri: str,
    column: str,
    probabilities: Sequence[object],
    *,
    ranges: int | None = None,
    name: str | None = None,
    representation: str = "auto",
    merge: str = "auto",
    runtime: str = "auto",
) -> Quantiles:
    """Exact quantiles (DuckDB's ``quantile_disc``) of ``column`` by a distributed sort.

    Two rounds of Ray tasks (prepare, merge); the values at the wanted ranks
    come back with the sort, and the sorted ranges are freed at the end. A
    column whose partitions count into few distinct values takes one round:
    the driver merges the counts (``merge``, see
    engine.runtime.distributed_sort.quantiles). ``representation``: see
    engine.runtime.distributed_sort.sort_column (``"auto"``: partitions with
    few distinct values are counted into runs instead of sorted). Same answers
    whatever the options.

    ``runtime``: ``"ray"`` sorts on Ray (started if this process has not); ``"local"`` in
    this process, one range, without Ray (``ranges`` and ``merge`` then do not apply);
    ``"auto"`` (default; else ``METASTORE_RUNTIME``) in this process for a small table
    when neither ``ranges`` nor ``merge`` is given and no Ray runs here
    (engine/runtime/placement.py). Same answers.
    """
    from engine.options import Runtime
    from engine.runtime import placement
    from engine.sources import open_table

    ps = check_probabilities(probabilities)
    source = open_table(table_uri, name=name)
    where = placement.choose(runtime, source.partitions(), needs_ray=ranges is not None or merge != "auto")
    ray_s = 0.0
    if where is Runtime.LOCAL:
        from engine.runtime import local_sort

        q = local_sort.quantiles(source, column, ps, representation=representation)
    else:
        from engine.runtime import distributed_sort
        from engine.runtime.ray_runtime import ensure_ray

        ray_s = ensure_ray()
        # The ranks depend on the count, known only after the first round: the sort
        # computes them itself when given probabilities.
        q = distributed_sort.quantiles(source, column, ps, ranges=ranges, representation=representation, merge=merge)
    return Quantiles(
        table=source.name,
        column=column,
        type=str(q.type),
        probabilities=tuple(ps),
        values=tuple(q.values),
        exact=True,
        count=q.count,
        null_count=q.null_count,
        nan_count=q.nan_count,
        ranks=tuple(q.ranks),
        methods=("sort",) * len(ps),
        rank_errors=(0.0,) * len(ps),
        timings={**q.timings, "ray_start_s": ray_s, "runtime": where.value},
    )


# ============================================================== approximate
METHODS = ("auto", "kll", "tdigest")


def _from_float64(values: list[float | None], t: pa.DataType) -> list[Any]:
    """Sketch answers (float64) as Python values of the column's type: integers and
    times rounded to the nearest representable value, decimals rounded to the scale."""
    import numpy as np
    import pyarrow as pa

    from engine.stats import ranks

    out: list[Any] = []
    codec = ranks.codec_for(t)
    for v in values:
        if v is None:
            out.append(None)
        elif is_fractional(t):
            out.append(pa.scalar(v, pa.float64()).cast(t, safe=False).as_py())
        else:  # integers, booleans, dates, times, timestamps, durations: their integer storage
            assert codec.dtype is not None  # integer-stored types have a numpy codec (ranks.codec_for)
            info = np.iinfo(codec.dtype)
            key = min(max(int(round(v)), int(info.min)), int(info.max))
            out.append(codec.decode(np.array([key], dtype=codec.dtype)).to_pylist()[0])
    return out


def approximate_quantiles(
    store: str,
    table: str,
    column: str,
    probabilities: Sequence[object],
    *,
    method: str = "auto",
    partition: str | None = None,
    at_transaction: int | None = None,
) -> Quantiles:
    """Approximate quantiles from the sketches in a table's (or partition's) statistics.parquet.

    ``method``: ``"kll"`` (every column with percentiles: rank error ~1.3% at
    any p, DataSketches' 99%-confidence bound), ``"tdigest"`` (columns analyzed
    with the opt-in t-digest: error ~0.25 p(1-p), empirical), or ``"auto"``:
    for each p the sketch with the smaller bound. Nothing reads the table.
    """
    import datasketches as ds

    from engine.lookup import open_statistics
    from engine.stats import tdigest

    if method not in METHODS:
        raise InvalidArgumentError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    ps = check_probabilities(probabilities)
    ts = open_statistics(store, table, at_transaction=at_transaction)
    t = ts.column_type(column)
    if not mt.has_percentiles(t):
        raise InvalidArgumentError(
            f"column {column!r} of table {table!r} has type {t}: quantile sketches are kept for numbers and times "
            "only; exact_quantiles (metastore quantiles TABLE_PATH COLUMN) sorts any orderable column"
        )
    row = ts.statistics([column], partition, sketches=True).to_pylist()[0]
    kll_blob = row.get("kll_sketch")
    td_blob = row.get(tdigest.TDIGEST_COLUMN)
    if method == "tdigest" and tdigest.TDIGEST_COLUMN not in row:
        raise InvalidArgumentError(
            f"table {table!r} was analyzed without t-digests; analyze it with user_statistics=[..., TDIGEST] "
            "(metastore analyze --tdigest) or use method='kll'"
        )
    fs = [float(p) for p in ps]
    kll = ds.kll_doubles_sketch.deserialize(kll_blob) if kll_blob else None
    kll_error = kll.normalized_rank_error(False) if kll else 0.0
    td_values, _ = tdigest.tdigest_quantiles(td_blob, fs) if td_blob else ([], 0)
    values: list[float | None] = []
    methods: list[str] = []
    errors: list[float] = []
    for i, p in enumerate(fs):
        use_td = td_blob is not None and (method == "tdigest" or (method == "auto" and tdigest.rank_error_bound(p) < kll_error))
        if use_td:
            values.append(td_values[i])
            methods.append("tdigest")
            errors.append(tdigest.rank_error_bound(p))
        elif method != "tdigest" and kll is not None:
            values.append(kll.get_quantile(p))
            methods.append("kll")
            errors.append(kll_error)
        else:  # no values at all
            values.append(None)
            methods.append(method if method != "auto" else "kll")
            errors.append(0.0)
    return Quantiles(
        table=table,
        column=column,
        type=str(t),
        probabilities=tuple(ps),
        values=tuple(_from_float64(values, t)),
        exact=False,
        count=kll.n if kll else 0,
        null_count=row.get("null_count") or 0,
        nan_count=row.get("nan_count") or 0,
        ranks=(None,) * len(ps),
        methods=tuple(methods),
        rank_errors=tuple(errors),
    )
