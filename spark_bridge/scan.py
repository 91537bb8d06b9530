"""What a DataFrame reads and which rows it keeps: its file scan and filter, from Spark's plan.

    from spark_bridge.scan import read_scan
    scan = read_scan(spark.read.parquet("data/sales").where("city = 'Berlin' and price > 5"))
    scan.location, scan.condition          # the table's root; the filter as plain values

The filter comes from the **optimized logical plan** (``queryExecution().optimizedPlan()``):
the Filter conditions between the DataFrame's top and its one file relation, combined
with AND. Why that and not the scan's ``PushedFilters``:

- it holds every condition, the partition columns' too (the physical scan splits them
  into ``PartitionFilters`` and ``PushedFilters``, and drops what the source cannot take);
- its literals are typed Catalyst literals (dates as days, timestamps as microseconds,
  exact decimals), where pushed ``sources.Filter`` values are Java objects whose type
  must be guessed;
- it needs no physical planning, and Spark's optimizer has already simplified it in
  ways that help: ``LIKE 'ab%'`` becomes ``StartsWith``, casts of integer columns are
  unwrapped (``int_col > 2.5`` is ``int_col > 2``), ``NOT (a > 5)`` is ``a <= 5``,
  constants are folded, Filters are combined and pushed below Projects.

The expressions are captured as :class:`spark_bridge.predicates.SparkExpr` values (one
py4j call or a few per node); only the kinds the translation knows are descended into.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from engine.exceptions import InvalidArgumentError
from spark_bridge.catalog import fileio_uri
from spark_bridge.predicates import COMPARISONS, SparkExpr

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import DataFrame

__all__ = ["SparkScan", "capture", "read_scan"]

#: plan nodes a filtered scan may have above its relation (they do not change which rows it keeps)
_PASS_THROUGH = ("Project", "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions")
_EXPR_IDS = re.compile(r"#\d+L?")
#: expressions whose children the translation looks at
_DESCEND = {"And", "Or", "Not", "EqualNullSafe", "In", "IsNull", "IsNotNull", "IsNaN", "StartsWith", "Cast", *COMPARISONS}


@dataclass(frozen=True)
class SparkScan:
    """A DataFrame as a filtered scan of one table's files."""

    location: str  # the table's root as engine.fileio reads it: the catalog table's location, or the one path read
    root: str  # the same as Spark names it (a URI: a reader's basePath)
    files: tuple[str, ...]  # the files the scan lists, as Spark names them (a catalog table's: after partition pruning)
    schema_json: str  # the relation's Spark schema (data and partition columns) as JSON
    table: str | None  # "db.table" when the DataFrame reads a catalog table
    file_format: str  # Spark's short name: parquet, orc, csv, ...
    condition: SparkExpr | None  # the Filters above the scan, ANDed; None if none
    columns: tuple[str, ...]  # the relation's columns (data and partition columns)


def _simple_name(obj: Any) -> str:
    return str(obj.getClass().getSimpleName())


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _relation(plan: Any, allowed: tuple[str, ...]) -> tuple[Any, list[Any]]:
    """The node under ``plan`` below the allowed nodes, and the Filter conditions on the way."""
    conditions: list[Any] = []
    node = plan
    while True:
        kind = _simple_name(node)
        if kind == "Filter":
            conditions.append(node.condition())
        elif kind not in allowed:
            return node, conditions
        node = node.child()


def read_scan(df: DataFrame) -> SparkScan:
    """The file scan and filter of ``df``; InvalidArgumentError (one line) for other plans.

    The relation (location, files, columns) is the analyzed plan's (a catalog table's files
    before partition pruning); the filter the optimized plan's. When the optimizer proved
    that no row can match (an empty ``LocalRelation`` replaces the scan), the filter is false.
    """
    qe = df._jdf.queryExecution()
    node, _ = _relation(qe.analyzed(), (*_PASS_THROUGH, "SubqueryAlias"))
    kind = _simple_name(node)
    if kind != "LogicalRelation" or _simple_name(node.relation()) != "HadoopFsRelation":
        what = f"{kind} over a {_simple_name(node.relation())}" if kind == "LogicalRelation" else kind
        raise InvalidArgumentError(
            f"the DataFrame is not a filtered scan of one table's files: its plan has {what} where the scan "
            f"should be (only Filter, Project, Sort and repartitions may sit above a spark.read.parquet(...) or catalog-table scan)"
        )
    relation = node.relation()
    names = {int(a.exprId().id()): str(a.name()) for a in _seq(node.output())}
    optimized, conditions = _relation(qe.optimizedPlan(), _PASS_THROUGH)
    condition: SparkExpr | None = None
    if _simple_name(optimized) == "LocalRelation" and optimized.data().isEmpty():
        condition = SparkExpr("Literal", value=False, type="boolean", text="false (Spark's optimizer proved no row matches)")
    elif _simple_name(optimized) != "LogicalRelation":
        raise InvalidArgumentError(f"the DataFrame's optimized plan has {_simple_name(optimized)} where its scan should be")
    for c in conditions:
        captured = capture(c, names)
        condition = captured if condition is None else SparkExpr("And", (condition, captured), text=f"{condition.text} AND {captured.text}")
    table, root = None, None
    catalog_table = node.catalogTable()
    if catalog_table.isDefined():
        meta = catalog_table.get()
        ident = meta.identifier()
        table = f"{ident.database().get()}.{ident.table()}" if ident.database().isDefined() else str(ident.table())
        uri = meta.storage().locationUri()
        root = str(uri.get().toString()) if uri.isDefined() else None
    if root is None:
        roots = [str(p.toString()) for p in _seq(relation.location().rootPaths())]
        if len(roots) != 1:
            raise InvalidArgumentError(f"the DataFrame reads {len(roots)} paths ({', '.join(roots[:3])}); one table's root is needed")
        root = roots[0]
    return SparkScan(
        location=fileio_uri(root),
        root=root,
        files=tuple(str(f) for f in relation.location().inputFiles()),
        schema_json=str(relation.schema().json()),
        table=table,
        file_format=str(relation.fileFormat().toString()).lower(),
        condition=condition,
        columns=tuple(names.values()),
    )


def capture(e: Any, names: dict[int, str]) -> SparkExpr:
    """A Catalyst expression as a SparkExpr; ``names``: the relation's columns by expression id."""
    kind = _simple_name(e)
    text = _EXPR_IDS.sub("", str(e.toString()))  # city#12 -> city: ids change per session
    if kind == "AttributeReference":
        name = names.get(int(e.exprId().id()))
        return SparkExpr("Column", path=None if name is None else (name,), type=_type(e), text=text)
    if kind == "GetStructField":
        child = capture(e.child(), names)
        field = str(e.childSchema().apply(int(e.ordinal())).name())
        path = None if child.path is None else (*child.path, field)
        return SparkExpr("Column", path=path, type=_type(e), text=text)
    if kind == "Literal":
        t = _type(e)
        return SparkExpr("Literal", value=_internal_value(e.value(), t), type=t, text=text)
    if kind == "InSet":
        child = capture(e.child(), names)
        values = tuple(_internal_value(v, child.type) for v in _seq(e.hset().toSeq()))
        return SparkExpr("InSet", (child,), value=values, type="boolean", text=text)
    if kind in _DESCEND:
        children = tuple(capture(c, names) for c in _seq(e.children()))
        return SparkExpr(kind, children, type=_type(e), text=text)
    return SparkExpr(kind, type=_type(e), text=text)


def _type(e: Any) -> str:
    try:
        return str(e.dataType().simpleString())
    except Exception:  # unresolved or dataType-less expressions: never translated
        return ""


def _internal_value(v: Any, spark_type: str) -> Any:
    """Catalyst's internal value of a literal as a Python value (see SparkExpr)."""
    if v is None:
        return None
    if spark_type == "string":
        return str(v.toString())
    if spark_type.startswith("decimal"):
        return Decimal(str(v.toJavaBigDecimal().toPlainString()))
    if spark_type == "binary":
        return bytes(v)
    if isinstance(v, (bool, int, float, str)):
        return v
    return str(v.toString())  # a type the translation does not take: kept for the report only
