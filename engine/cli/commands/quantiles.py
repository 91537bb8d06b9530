"""``metastore quantiles``: exact (distributed sort) or approximate (sketches) quantiles and ranks of a column (docs/QUANTILES.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from engine.cli.command import Settings, command, common_options, one_line
from engine.cli.opening import open_table
from engine.cli.options import partition_option, runtime_option
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError

DEFAULT_PROBABILITIES = ("0.01", "0.05", "0.25", "0.5", "0.75", "0.95", "0.99")


def _probability_option(values: tuple[str, ...]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _data_location(store: str, table: str) -> tuple[str, str | None]:
    """Where the exact path reads TABLE: ``(location, name)``. A location as given (a URI, or a
    path that exists), or a table of the store: the location its statistics were analyzed from."""
    from engine.names import table_name_problem

    if "://" in table or Path(table).exists():
        return table, None
    accepts = (
        f"TABLE {table!r} is neither a table's location (a Parquet, Iceberg, Delta or Hudi directory, local or s3://) "
        f"nor a table with statistics in store {store}"
    )
    if table_name_problem(table) is not None:
        raise InvalidArgumentError(f"{accepts} (no such path)")
    try:
        ts = open_table(store, table)
    except StatisticsNotFoundError as exc:
        raise InvalidArgumentError(f"{accepts}: {one_line(exc)}") from None
    uri = ts.state.properties.get("table_uri")
    if not uri:
        raise InvalidArgumentError(
            f"table {table!r} in store {store} records no data location: give the table's location, or use --approximate (its sketches)"
        )
    return str(uri), table


def quantiles_doc(q: Any, partition: str | None = None, elapsed_s: float | None = None) -> dict[str, Any]:
    """The result of metastore quantiles; ``elapsed_s`` leaves out starting Ray (``ray_start_s``)."""
    from engine.pyvalues import python_value

    return {
        "table": q.table,
        "column": q.column,
        "type": q.type,
        "exact": q.exact,
        "partition": partition,
        "count": q.count,
        "null_count": q.null_count,
        "nan_count": q.nan_count,
        "elapsed_s": elapsed_s,
        "ray_start_s": q.timings.get("ray_start_s"),
        "quantiles": [
            {"p": float(p), "value": python_value(v), "rank": r, "method": m, "rank_error": e}
            for p, v, r, m, e in zip(q.probabilities, q.values, q.ranks, q.methods, q.rank_errors)
        ],
    }


@command(short_help="Exact (distributed sort) or approximate (sketches) quantiles and ranks of a column.")
@click.argument("table")
@click.argument("column")
@click.option(
    "--quantile",
    "-q",
    "--probability",
    "probabilities",
    multiple=True,
    metavar="P",
    help="A probability in [0, 1] (repeat or comma-separate; default 0.01,0.05,0.25,0.5,0.75,0.95,0.99). "
    "-q, not -p: -p is --partition in every command.",
)
@click.option(
    "--rank-of", "rank_of", multiple=True, metavar="VALUE", help="Exact: how many values lie below VALUE, in the column's text form (repeatable)."
)
@click.option(
    "--value-at", "value_at", multiple=True, type=click.IntRange(min=0), metavar="RANK", help="Exact: the value at 0-based RANK (repeatable)."
)
@click.option(
    "--approximate", "-a", is_flag=True, help="Answer from the sketches of the published statistics of table TABLE in --store (reads no data)."
)
@click.option(
    "--method",
    type=click.Choice(["auto", "kll", "tdigest"]),
    default="auto",
    show_default=True,
    help="--approximate: the sketch (auto: per p the one with the smaller error bound).",
)
@partition_option("--approximate: a partition's sketches (e.g. part=03).")
@click.option("--ranges", type=click.IntRange(min=1), help="Exact: sorted ranges (default: two per CPU).")
@runtime_option(
    "Exact -q: where the sort runs: auto sorts a table of at most 64 MiB and 2,000,000 rows in this process "
    "(no Ray start) unless Ray already runs here, RAY_ADDRESS or --ranges is set; ray always; local never starts Ray "
    "(default: $METASTORE_RUNTIME, else auto; docs/SCALING.md). --rank-of and --value-at sort on Ray."
)
@common_options()
@click.pass_obj
def quantiles(
    settings: Settings, table: str, column: str, probabilities: tuple[str, ...], rank_of: tuple[str, ...],
    value_at: tuple[int, ...], approximate: bool, method: str, partition: str | None, ranges: int | None,
    runtime: str = "auto",
) -> None:  # fmt: skip
    """Quantiles of COLUMN: exact, by sorting the column of the table on Ray; or
    with --approximate, from the KLL / t-digest sketches of table TABLE's
    statistics in the store (no data read).

    TABLE is a table's location (a Parquet, Iceberg, Delta or Hudi directory,
    local or s3://) or the name of a table in the store: the exact path then
    sorts the data at the location its statistics were analyzed from.

    Exact quantiles are DuckDB's quantile_disc: the value at 0-based rank
    max(ceil(n*p), 1) - 1 of the n non-null values (NaN ranks after every number).

    Probabilities are -q/--quantile (--probability also works); -p is --partition,
    as in every command.

    \b
    Examples:
      metastore quantiles data/sales price -q 0.5 -q 0.99
      metastore quantiles sales price -q 0.5           the data sales was analyzed from
      metastore quantiles data/sales city --rank-of Berlin --value-at 0
      metastore quantiles sales price -q 0.001,0.5,0.999 --approximate --output json
      metastore quantiles sales price --approximate -p part=03
    """
    import time

    from engine import quantiles as q_api

    ps = _probability_option(probabilities)
    if approximate:
        from engine.names import check_table_name

        check_table_name(table)
        if rank_of or value_at:
            raise click.UsageError("--rank-of and --value-at need the exact path (drop --approximate)")
        if ranges is not None:
            raise click.UsageError("--ranges applies to the exact path only")
        t0 = time.perf_counter()
        q = q_api.approximate_quantiles(settings.store, table, column, ps or list(DEFAULT_PROBABILITIES), method=method, partition=partition)
        settings.out().quantiles(quantiles_doc(q, partition, time.perf_counter() - t0))
        return
    if partition is not None or method != "auto":
        hint = "; probabilities are -q/--quantile (-p is --partition)" if partition is not None and _is_number(partition) else ""
        raise click.UsageError(f"--partition and --method apply to --approximate only{hint}")
    table, name = _data_location(settings.store, table)
    if not ps and not rank_of and not value_at:
        ps = list(DEFAULT_PROBABILITIES)
    t0 = time.perf_counter()
    if not rank_of and not value_at:
        q = q_api.exact_quantiles(table, column, ps, ranges=ranges, name=name, runtime=runtime)
        settings.out().quantiles(quantiles_doc(q, None, time.perf_counter() - t0 - float(q.timings.get("ray_start_s", 0.0))))
        return
    from engine import values as value_forms
    from engine.sources.base import default_table_name

    q_api.check_probabilities(ps)
    with q_api.sort_column(table, column, ranges=ranges, name=name) as sc:
        probes = [value_forms.decode_scalar(text, sc.type).as_py() for text in rank_of]
        rank_list = sc.quantile_ranks(ps)
        values = sc.quantiles(ps)
        q = q_api.Quantiles(
            table=name or default_table_name(table), column=column, type=str(sc.type), probabilities=tuple(ps),
            values=tuple(values), exact=True, count=sc.count, null_count=sc.null_count, nan_count=sc.nan_count,
            ranks=tuple(rank_list), methods=("sort",) * len(ps), rank_errors=(0.0,) * len(ps), timings=dict(sc.timings),
        )  # fmt: skip
        doc = quantiles_doc(q)
        doc["rank_of"] = [{"value": v, "below": sc.rank_of(v), "at_most": sc.rank_of(v, inclusive=True)} for v in probes]
        doc["value_at"] = [{"rank": r, "value": v} for r, v in zip(value_at, sc.values_at_ranks(list(value_at)))] if value_at else []
        doc["elapsed_s"] = time.perf_counter() - t0 - sc.timings.get("ray_start_s", 0.0)
    settings.out().quantiles(doc)
