"""A filtered DataFrame over an analyzed table: the files to read, and the subset's statistics.

    from spark_bridge.filters import plan_files, subset_statistics
    df = spark.read.parquet("data/sales")
    plan = plan_files(df.where((F.col("city") == "Berlin") & (F.col("price") > 5)), store=".metastore")
    pruned = plan.read(spark).where(...)            # spark.read.option("basePath", root).parquet(*plan.files)
    subset_statistics(df.where(F.col("part") == 1), store=".metastore", columns=["price"])

Both take the DataFrame's scan and filter from Spark's optimized plan
(``spark_bridge.scan``), translate the filter into our predicates
(``spark_bridge.predicates``: exact, or a superset where parts are unknown) and find
the store's table analyzed from the location the DataFrame reads (the ``table_uri``
its statistics record; ``table=`` names it instead, and is checked against it).

File pruning is sound whatever is not translated: it may read more, never fewer files.
Subset statistics need the exact rows, so a filter with an untranslated part is refused
(statistics of a superset would be wrong), and so are statistics older than the files
Spark reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import fileio
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError, TableNotFoundError
from engine.expressions.tree import TRUE, Expression
from engine.lookup import open_statistics
from engine.runtime import exact as _exact_subsets  # noqa: F401 - registers the exact=True subsets' job
from engine.store import Store
from spark_bridge.catalog import fileio_uri
from spark_bridge.predicates import Translation, translate
from spark_bridge.scan import SparkScan, read_scan

if TYPE_CHECKING:  # the lookups load when a DataFrame is planned
    from pyspark.sql import Column, DataFrame, SparkSession

    from engine.lookup import TableStatistics
    from engine.subset import Subset

__all__ = ["DataFrameSubset", "SparkFilePlan", "dataframe_subset", "find_table", "plan_files", "subset_statistics"]


def _canonical(uri: str) -> str:
    return fileio.canonical(uri)


def find_table(store: str, location: str, table: str | None = None) -> TableStatistics:
    """The statistics (``TableStatistics``) of the store's table analyzed from ``location``.

    ``table``: that table, checked to describe ``location``. Without it, the one table
    whose recorded ``table_uri`` is ``location``; TableNotFoundError if none,
    InvalidArgumentError if several (then ``table=`` chooses)."""
    want = _canonical(location)
    if table is not None:
        ts = open_statistics(store, table)
        uri = ts.state.table_uri
        if not uri or _canonical(uri) != want:
            raise InvalidArgumentError(f"table {table!r} of store {store} was analyzed from {uri}, but the DataFrame reads {location}")
        return ts
    found = []
    for name in Store(store).tables():
        ts = open_statistics(store, name)
        uri = ts.state.table_uri
        if uri and _canonical(uri) == want:
            found.append(ts)
    if not found:
        raise TableNotFoundError(
            f"no table of store {store} was analyzed from {location} (what the DataFrame reads); analyze it first "
            f"(engine.api.analyze({location!r}, store=...) or spark_bridge.api.analyze_table)"
        )
    if len(found) > 1:
        raise InvalidArgumentError(
            f"tables {', '.join(repr(t.table) for t in found)} of store {store} were all analyzed from {location}: pass table= to choose"
        )
    return found[0]


def _scan(df: DataFrame, where: Column | str | None) -> SparkScan:
    if where is not None:
        df = df.where(where)
    scan = read_scan(df)
    if scan.file_format != "parquet":
        raise InvalidArgumentError(f"the DataFrame reads {scan.file_format} files at {scan.location}; statistics-driven file pruning reads Parquet")
    return scan


@dataclass(frozen=True)
class SparkFilePlan:
    """The files a filtered DataFrame needs, from the statistics (:func:`plan_files`)."""

    table: str  # the store's table
    root: str  # the table's root, as Spark names it (basePath)
    predicate: str  # the filter as our predicate (a superset of Spark's when not exact)
    expression: Expression  # the same, bound to the table's schema
    exact: bool  # whether the predicate is exactly Spark's filter
    untranslated: tuple[str, ...]  # Spark's text of the parts taken as "might match"
    files: tuple[str, ...]  # the files to read, as Spark names them
    pruned: int  # files Spark would list that the statistics prove hold no matching row
    unindexed: tuple[str, ...]  # files Spark lists that the statistics do not know (always read)
    schema_json: str  # the scanned relation's Spark schema

    def read(self, spark: SparkSession) -> DataFrame:
        """The candidate files as a DataFrame with the table's columns (partition columns
        included: ``basePath`` is the table root), unfiltered: apply the filter again."""
        import json

        from pyspark.sql.types import StructType

        schema = StructType.fromJson(json.loads(self.schema_json))
        if not self.files:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).option("basePath", self.root).parquet(*self.files)


def plan_files(df: DataFrame, store: str, table: str | None = None, *, where: Column | str | None = None) -> SparkFilePlan:
    """The data files a filtered scan must read, pruned by the store's statistics and file index.

    ``df``: ``spark.read.parquet(root)`` or ``spark.table(name)`` (of a table analyzed into
    ``store``), filtered with ``where(...)``; or give the condition (a ``Column`` or SQL text)
    as ``where``. The filter is translated from Spark's optimized plan; parts that cannot be
    translated count as "might match" (``untranslated``), so no file holding a matching row is
    ever left out. Files Spark lists that the index does not know (written after the analyze)
    are kept; files the index names that Spark does not list are not returned.
    """
    scan = _scan(df, where)
    ts = find_table(store, scan.location, table)
    tr = translate(scan.condition, ts.schema)
    plan = ts.plan_files(tr.expression)
    candidates = {_canonical(p) for p in plan.paths()}
    indexed = candidates | {_canonical(p) for p in plan.pruned.column("path").to_pylist()}
    files, unindexed, pruned = [], [], 0
    for spark_path in scan.files:
        key = _canonical(fileio_uri(spark_path))
        if key not in indexed:
            unindexed.append(spark_path)
            files.append(spark_path)
        elif key in candidates:
            files.append(spark_path)
        else:
            pruned += 1
    return SparkFilePlan(
        table=ts.table,
        root=scan.root,
        predicate=tr.text,
        expression=tr.expression,
        exact=tr.exact,
        untranslated=tr.untranslated,
        files=tuple(files),
        pruned=pruned,
        unindexed=tuple(unindexed),
        schema_json=scan.schema_json,
    )


@dataclass(frozen=True)
class DataFrameSubset:
    """A filtered DataFrame as (analyzed table, predicate): ``subset`` answers its statistics."""

    table: str
    predicate: str
    translation: Translation
    subset: Subset


def dataframe_subset(
    df: DataFrame, store: str, table: str | None = None, *, where: Column | str | None = None, exact: bool = False
) -> DataFrameSubset:
    """The rows a filtered DataFrame keeps, as a subset of the analyzed table it reads.

    No data moves: the statistics come from the store (``exact=True`` computes them on the
    candidate files, docs/SUBSETS.md). Refused, with one line, when the filter has a part
    that cannot be translated exactly (statistics of a superset would be wrong), and when
    Spark lists files the statistics do not know (they are older than the table).
    """
    scan = _scan(df, where)
    ts = find_table(store, scan.location, table)
    tr = translate(scan.condition, ts.schema)
    if not tr.exact:
        raise InvalidArgumentError(
            f"the DataFrame's filter has part(s) Metastore cannot translate exactly: {'; '.join(tr.untranslated)}; "
            f"the statistics of a superset of its rows would be wrong (supported: AND, OR, NOT, comparisons of a column "
            f"with a literal, IN, IS [NOT] NULL, isnan, startswith / LIKE 'prefix%')"
        )
    _check_current(ts, scan)
    return DataFrameSubset(ts.table, tr.text, tr, ts.subset(tr.expression, exact))


def _check_current(ts: TableStatistics, scan: SparkScan) -> None:
    """Refuse statistics that do not know every file Spark reads (an append since the analyze)."""
    try:
        known = {_canonical(p) for p in ts.plan_files(TRUE).paths()}
    except StatisticsNotFoundError:
        return  # no file index: nothing to compare with
    new = [p for p in scan.files if _canonical(fileio_uri(p)) not in known]
    if new:
        raise InvalidArgumentError(
            f"table {ts.table!r}'s statistics are older than its files: Spark reads {len(new)} file(s) they do not "
            f"describe (first: {new[0]}); analyze the table again"
        )


def subset_statistics(
    df: DataFrame,
    store: str,
    columns: Sequence[str] | None = None,
    *,
    table: str | None = None,
    where: Column | str | None = None,
    statistics: Sequence[str] | None = None,
    exact: bool = False,
) -> Any:
    """The statistics of the rows a filtered DataFrame keeps (``TableStatistics.statistics(columns,
    where=..., exact=...)`` of the table it reads; each statistic's method in the schema metadata,
    ``engine.subset.methods_of``). See :func:`dataframe_subset`."""
    return dataframe_subset(df, store, table, where=where, exact=exact).subset.statistics(columns, statistics)
