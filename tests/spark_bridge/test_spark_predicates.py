"""The translation of Spark conditions (captured as SparkExpr values) into our predicates, without Spark.

The end-to-end oracle (Spark's own rows and input files) is in test_file_pruning.py;
here the rules themselves: unknown parts in AND / OR / NOT, Spark's NaN order and
null-safe equality, nulls in IN lists, literal kinds, casts.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import expressions as ex
from spark_bridge.predicates import SparkExpr, translate

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("small", pa.int16()),
        ("price", pa.float64()),
        ("city", pa.string()),
        ("ts", pa.timestamp("ns", tz="UTC")),
        ("naive", pa.timestamp("us")),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("flag", pa.bool_()),
        ("s", pa.struct([("x", pa.int32())])),
    ]
)
TYPES = {"id": "bigint", "small": "smallint", "price": "double", "city": "string", "ts": "timestamp", "naive": "timestamp_ntz"}
TYPES |= {"day": "date", "amount": "decimal(10,2)", "flag": "boolean"}


def col(name: str, spark_type: str | None = None) -> SparkExpr:
    path = tuple(name.split("."))
    return SparkExpr("Column", path=path, type=spark_type or TYPES.get(name, "int"), text=name)


def lit(value, spark_type: str) -> SparkExpr:
    return SparkExpr("Literal", value=value, type=spark_type, text=repr(value))


def node(kind: str, *children: SparkExpr, text: str = "") -> SparkExpr:
    return SparkExpr(kind, children, type="boolean", text=text or kind)


OPAQUE = SparkExpr("Contains", text="Contains(city, er)")


def text(e: SparkExpr) -> tuple[str, bool]:
    t = translate(e, SCHEMA)
    return str(t.expression), t.exact


def test_comparisons_literals_and_structs() -> None:
    assert text(node("GreaterThan", col("id"), lit(5, "bigint"))) == ("id > 5", True)
    assert text(node("LessThan", lit(5, "bigint"), col("id"))) == ("id > 5", True)  # literal first: flipped
    assert text(node("EqualTo", col("s.x", "int"), lit(2, "int"))) == ("s.x = 2", True)
    assert text(node("EqualTo", col("city"), lit("it's", "string"))) == ("city = 'it''s'", True)
    assert text(node("GreaterThanOrEqual", col("day"), lit(19_723, "date"))) == ("day >= '2024-01-01'", True)
    assert text(node("LessThan", col("ts"), lit(1, "timestamp")))[1]  # microseconds into a nanosecond column, exactly
    assert text(node("EqualTo", col("amount"), lit(__import__("decimal").Decimal("1.50"), "decimal(10,2)"))) == ("amount = 1.50", True)
    assert text(node("StartsWith", col("city"), lit("Ber", "string"))) == ("city STARTS WITH 'Ber'", True)
    assert text(col("flag")) == ("flag = true", True)
    assert text(node("Not", col("flag"))) == ("flag = false", True)
    assert text(node("IsNotNull", col("city"))) == ("city IS NOT NULL", True)
    # a widening integer cast is the column; a value that does not fit is unknown, never a rounding
    assert text(node("GreaterThan", SparkExpr("Cast", (col("small"),), type="bigint"), lit(7, "bigint"))) == ("small > 7", True)
    assert text(node("GreaterThan", SparkExpr("Cast", (col("small"),), type="bigint"), lit(70_000, "bigint"))) == ("true", False)
    assert text(node("GreaterThan", SparkExpr("Cast", (col("amount"),), type="double"), lit(1.5, "double"))) == ("true", False)


def test_timestamps_bind_only_to_their_kind() -> None:
    assert text(node("EqualTo", col("naive"), lit(0, "timestamp_ntz")))[1]
    assert text(node("EqualTo", col("naive", "timestamp"), lit(0, "timestamp"))) == ("true", False)
    assert text(node("EqualTo", col("ts", "timestamp_ntz"), lit(0, "timestamp_ntz"))) == ("true", False)


def test_unknown_parts_never_shrink_the_rows() -> None:
    a = node("LessThan", col("id"), lit(40, "bigint"))
    assert text(node("And", a, OPAQUE)) == ("id < 40", False)  # dropped from an AND
    assert text(node("Or", a, OPAQUE)) == ("true", False)  # an OR with it is unknown
    assert text(node("Not", node("And", a, OPAQUE))) == ("true", False)  # NOT (a AND ?) is never NOT a
    assert text(node("Not", node("Or", a, OPAQUE))) == ("id >= 40", False)  # NOT (a OR ?) = NOT a AND NOT ?
    assert text(node("Not", node("Not", node("And", a, OPAQUE)))) == ("id < 40", False)
    assert text(node("EqualTo", col("id"), col("small"))) == ("true", False)  # two columns
    t = translate(node("And", a, OPAQUE), SCHEMA)
    assert t.untranslated == ("Contains(city, er)",)
    assert text(node("Not", node("And", a, node("GreaterThan", col("id"), lit(10, "bigint"))))) == ("id >= 40 OR id <= 10", True)


def test_spark_nan_order_null_safe_equality_and_in_lists() -> None:
    nan = float("nan")
    gt = node("GreaterThan", col("price"), lit(5.0, "double"))
    assert text(gt) == ("price > 5 OR price IS NAN", True)  # NaN is the largest value in Spark
    assert text(node("Not", gt)) == ("price <= 5 AND price IS NOT NAN", True)
    assert text(node("EqualTo", col("price"), lit(nan, "double"))) == ("price IS NAN", True)  # NaN = NaN in Spark
    assert text(node("Not", node("EqualTo", col("price"), lit(nan, "double")))) == ("price IS NOT NAN", True)
    assert text(node("GreaterThan", col("price"), lit(nan, "double"))) == ("false", True)
    assert text(node("LessThanOrEqual", col("price"), lit(nan, "double"))) == ("price IS NOT NULL", True)
    # isnan(null) is false, so its NOT keeps nulls
    assert text(node("Not", node("IsNaN", col("price")))) == ("price IS NOT NAN OR price IS NULL", True)
    # x <=> v: NOT keeps nulls; x <=> null is IS NULL
    assert text(node("EqualNullSafe", col("id"), lit(3, "bigint"))) == ("id = 3", True)
    assert text(node("Not", node("EqualNullSafe", col("id"), lit(3, "bigint")))) == ("id != 3 OR id IS NULL", True)
    assert text(node("EqualNullSafe", col("id"), lit(None, "bigint"))) == ("id IS NULL", True)
    assert text(node("EqualTo", col("id"), lit(None, "bigint"))) == ("false", True)
    assert text(node("Not", node("EqualTo", col("id"), lit(None, "bigint")))) == ("false", True)
    # IN: nulls never match; NOT IN with a null is never true; NaN matches NaN
    assert text(node("In", col("id"), lit(1, "bigint"), lit(None, "bigint"), lit(2, "bigint"))) == ("id IN (1, 2)", True)
    assert text(node("Not", node("In", col("id"), lit(1, "bigint"), lit(None, "bigint")))) == ("false", True)
    assert text(node("In", col("price"), lit(1.0, "double"), lit(nan, "double"))) == ("price IN (1) OR price IS NAN", True)
    assert text(node("Not", node("In", col("price"), lit(1.0, "double"), lit(nan, "double")))) == ("price NOT IN (1) AND price IS NOT NAN", True)
    inset = SparkExpr("InSet", (col("city"),), value=("a", "b", None), type="boolean", text="city INSET a, b, null")
    assert text(inset) == ("city IN ('a', 'b')", True)
    assert text(lit(True, "boolean")) == ("true", True) and text(lit(None, "boolean")) == ("false", True)


@pytest.mark.parametrize("schema_name", ["ID", "Id"])
def test_column_names_resolve_case_insensitively(schema_name: str) -> None:
    e = SparkExpr("GreaterThan", (SparkExpr("Column", path=(schema_name,), type="bigint"), lit(1, "bigint")), type="boolean")
    assert text(e) == ("id > 1", True)


def test_no_condition_is_true() -> None:
    t = translate(None, SCHEMA)
    assert (str(t.expression), t.exact, t.untranslated) == ("true", True, ())


def test_long_chains_translate_and_absurd_ones_read_everything() -> None:
    terms = [node("EqualTo", col("id"), lit(k, "bigint")) for k in range(1500)]
    chain = terms[0]
    for t in terms[1:]:  # as Catalyst builds a OR b OR c: left-deep
        chain = node("Or", chain, t)
    got = translate(chain, SCHEMA)
    assert got.exact and str(got.expression) == " OR ".join(f"id = {k}" for k in range(1500))
    assert ex.tree.fold(got.expression, lambda _: 0, lambda _, kids: 1 + max(kids)) == 11  # balanced
    deep = terms[0]
    for k in range(3000):  # alternating: past the depth limit, so nothing is pruned (a superset, never a subset)
        deep = node("And" if k % 2 else "Or", deep, terms[k % 1500])
    got = translate(deep, SCHEMA)
    assert (str(got.expression), got.exact) == ("true", False) and "nested too deeply" in got.untranslated[0]


def test_a_dotted_column_of_the_statistics_schema() -> None:
    from engine.columns import mark_leaf_schema

    leaves = mark_leaf_schema(pa.schema([("s.x", pa.int32()), ("s\\.x", pa.string())]))  # struct leaf s.x, column "s.x"
    top = translate(node("EqualTo", SparkExpr("Column", path=("s.x",), type="string"), lit("a", "string")), leaves).expression
    leaf = translate(node("EqualTo", col("s.x", "int"), lit(2, "int")), leaves).expression
    assert (top.term.name, str(top)) == ("s\\.x", "\"s.x\" = 'a'")
    assert (leaf.term.name, str(leaf)) == ("s.x", "s.x = 2")
