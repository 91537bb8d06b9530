"""The predicate language: parsing, printing, binding to a schema, and errors that point at a position."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import expressions as ex
from engine.exceptions import ExpressionError, InvalidArgumentError

SCHEMA = pa.schema(
    [
        ("city", pa.string()),
        ("price", pa.float64()),
        ("q", pa.int8()),
        ("u", pa.uint64()),
        ("d", pa.decimal128(5, 2)),
        ("big", pa.decimal256(60, 10)),
        ("ts", pa.timestamp("ns", "UTC")),
        ("naive", pa.timestamp("us")),
        ("day", pa.date32()),
        ("s", pa.struct([("x", pa.int32()), ("y.z", pa.string())])),
        ("a.b", pa.int64()),
        ("my col", pa.int64()),
        ("bin", pa.binary()),
        ("f16", pa.float16()),
        ("f32", pa.float32()),
        ("l", pa.list_(pa.int32())),
        ("flag", pa.bool_()),
        ("dur", pa.duration("ms")),
        ("clock", pa.time64("ns")),
        ("cat", pa.dictionary(pa.int32(), pa.string())),
    ]
)


def b(text: str) -> ex.Expression:
    return ex.bound(text, SCHEMA)


def only(expr: ex.Expression) -> ex.Predicate:
    assert isinstance(expr, ex.Predicate), expr
    return expr


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize(
    "text,printed",
    [
        ("city == Berlin and price > 5", "city = 'Berlin' AND price > 5"),  # the CLI case of the issue
        ("city = 'Berlin' AND price > 5", "city = 'Berlin' AND price > 5"),
        ("a between 1 and 3", "a >= 1 AND a <= 3"),
        ("a not between 1 and 3", "NOT (a >= 1 AND a <= 3)"),
        ("`my col` = 1", '"my col" = 1'),
        ('"my ""col""" = 1', '"my ""col""" = 1'),
        ("s.\"y.z\" like 'ab%'", "s.\"y.z\" STARTS WITH 'ab'"),
        ("s.x in (1, 2,3)", "s.x IN (1, 2, 3)"),
        ("x not in ('a', 'b')", "x NOT IN ('a', 'b')"),
        ("x is null or y is not null", "x IS NULL OR y IS NOT NULL"),
        ("x IS NaN and not y is not nan", "x IS NAN AND NOT y IS NOT NAN"),
        ("x starts with 'a' or x not starts with 'b'", "x STARTS WITH 'a' OR x NOT STARTS WITH 'b'"),
        ("x like 'a\\%b%'", "x STARTS WITH 'a%b'"),
        ("x like 'abc'", "x = 'abc'"),
        ("x not like 'abc%'", "x NOT STARTS WITH 'abc'"),
        ("x <> 1 and y != 2 and z <= -1.5e300", "x != 1 AND y != 2 AND z <= -1.5e300"),
        ("(a = 1 or b = 2) and c = 3", "(a = 1 OR b = 2) AND c = 3"),
        ("a = 1 or b = 2 and c = 3", "a = 1 OR b = 2 AND c = 3"),
        ("not (a = 1 or b = 2)", "NOT (a = 1 OR b = 2)"),
        ("price is_null", "price IS NULL"),  # the first Flight names
        ("e >= 2024-10-01", "e >= '2024-10-01'"),
        ("t < 2024-10-01T00:00:00Z", "t < '2024-10-01T00:00:00Z'"),
        ("x = 'it''s'", "x = 'it''s'"),
        ("x = true or true", "x = true OR true"),
        ("x = nan or x = -inf", "x = nan OR x = -inf"),
        ('"and" = 1', '"and" = 1'),
    ],
)
def test_parse_and_print(text: str, printed: str) -> None:
    expr = ex.parse(text)
    assert str(expr) == printed
    assert ex.parse(str(expr)) == expr  # the printed form reads back as the same tree


@pytest.mark.parametrize(
    "text,words,position",
    [
        ("a = 'x' or (b = 1", "unbalanced parentheses: '(' is never closed", 12),
        ("a = 1)", "unbalanced parentheses: ')' without '('", 6),
        ("(a = 1", "'(' is never closed", 1),
        ("a in (1, 2", "the IN list's '(' is never closed", 6),
        ("a ~ 3", "unknown operator '~'", 3),
        ("a ! 3", "unknown operator '!'", 3),
        ("a = 1 b = 2", "expected AND, OR or the end", 7),
        ("x = null", "use IS NULL", 5),
        ("a.b. = 1", "must not end with '.'", 4),
        ("5 = x", "expected a column, found a number", 1),
        ("and = 1", "found the keyword and", 1),
        ("a = ", "expected a value after =, found the end", 5),
        ("a", "expected an operator after the column a", 2),
        ("", "empty expression", 1),
        ("a like 'a%b'", "only LIKE 'prefix%'", 8),
        ("a = 'open", "unterminated string", 5),
        ('"open = 1', "unterminated quoted name", 1),
        ("a is 5", "expected NULL or NAN after IS", 6),
        ("a not = 1", "expected IN, BETWEEN, LIKE or STARTS WITH after NOT", 7),
        ("a between 1 or 2", "expected AND between the bounds", 13),
        ("a in 1", "IN takes a list in parentheses", 6),
        ('a = "b"', "strings take single quotes", 5),
        ("'a' = 1", "quote column names with", 1),
    ],
)
def test_malformed_expressions_point_at_the_position(text: str, words: str, position: int) -> None:
    with pytest.raises(ExpressionError) as info:
        ex.parse(text)
    message = str(info.value)
    assert words in message, message
    assert info.value.position == position - 1
    assert f"at character {position} in " in message
    assert "\n" not in message
    assert isinstance(info.value, InvalidArgumentError)  # the CLI prints it as one line


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ExpressionError, match="nests too deeply"):
        ex.parse("(" * 5000 + "a = 1" + ")" * 5000)
    with pytest.raises(ExpressionError, match="nests too deeply"):
        ex.parse("not " * 5000 + "a = 1")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab =<>!()'\",.`x1-notandorinis", max_size=30))
def test_any_text_parses_or_fails_with_one_clear_line(text: str) -> None:
    try:
        expr = ex.parse(text)
    except ExpressionError as exc:
        assert "\n" not in str(exc) and -1 <= exc.position <= len(text)
        return
    assert ex.parse(str(expr)) == expr


# ------------------------------------------------------------------ binding
def test_binding_resolves_struct_leaves_quoted_and_dotted_names() -> None:
    p = only(b("s.x = 3"))
    assert (p.term.name, p.term.path, p.term.type) == ("s.x", ("s", "x"), pa.int32())
    p = only(b("s.\"y.z\" = 'q'"))
    # the bound name is the statistics files' name of the path (engine.columns.column_name: a dot in a name escaped)
    assert (p.term.name, p.term.path) == ("s.y\\.z", ("s", "y.z"))
    for text in ('"a.b" = 4', "`a.b` = 4", "a.b = 4"):  # a top-level name with a dot: quoted, or unquoted when no struct path matches
        p = only(b(text))
        assert (p.term.name, p.term.path) == ("a\\.b", ("a.b",))
    assert only(b("`my col` = 1")).term.name == "my col"
    assert only(b("cat = 'x'")).term.type == pa.string()  # dictionaries bind as their values


@pytest.mark.parametrize(
    "text,value",
    [
        ("u = 18446744073709551615", 2**64 - 1),
        ("q = -128", -128),
        ("q = 1e2", 100),
        ("d = 1.5", Decimal("1.50")),
        ("d = -999.99", Decimal("-999.99")),
        (
            "big = 12345678901234567890123456789012345678901234567890.0123456789",
            Decimal("12345678901234567890123456789012345678901234567890.0123456789"),
        ),
        ("ts = '2024-01-01T00:00:00.123456789Z'", 1704067200123456789),  # nanoseconds kept
        ("ts = 5", 5),  # a number is the storage count
        ("naive = '2024-01-01T00:00:00'", 1704067200000000),
        ("day = 2024-02-29", 19782),
        ("clock = '23:59:59.999999999'", 86399999999999),
        ("dur = 1500", 1500),
        ("bin = 'ff00'", b"\xff\x00"),
        ("flag = true", True),
        ("city = 'Berlin'", "Berlin"),
        ("city = Berlin", "Berlin"),
        ("city = '5'", "5"),
        ("price = -0.0", -0.0),
        ("price = 1e308", 1e308),
        ("f32 = 0.1", float(pa.scalar(0.1, pa.float32()).as_py())),  # the nearest value at the column's width
        ("f16 = 65504", 65504.0),
    ],
)
def test_literals_become_values_of_the_column_type(text: str, value) -> None:
    p = only(b(text))
    got = p.literals[0].value
    assert got == value and type(got) is type(value)
    assert only(b(str(p))).literals == p.literals  # a bound expression prints as text that binds back


@pytest.mark.parametrize(
    "text,words,position",
    [
        ("q > 300", "300 is not a value of column 'q' (int8)", 5),
        ("q > 1.5", "1.5 is not a whole number and does not fit column 'q' (int8)", 5),
        ("u = 18446744073709551616", "not a value of column 'u' (uint64)", 5),
        ("u = -1", "not a value of column 'u' (uint64)", 5),
        ("d = 1.005", "not a value of column 'd' (decimal128(5, 2))", 5),
        ("d = 10000", "not a value of column 'd'", 5),
        ("q = nan", "nan is a float and does not fit column 'q'", 5),
        ("ts >= '2024-01-01T00:00:00'", "not a value of column 'ts' (timestamp[ns, tz=UTC])", 7),
        ("naive >= '2024-01-01T00:00:00Z'", "not a value of column 'naive'", 10),
        ("day = 2024-02-30", "not a value of column 'day' (date32[day])", 7),
        ("l = 3", "column 'l' (list<item: int32>) has no comparable values", 1),
        ("s = 1", "name one of its fields", 1),
        ("nosuch = 1", "unknown column 'nosuch'", 1),
        ("price > 1 and City = 'x'", "unknown column 'City' (did you mean 'city'?", 15),
        ("s.nope = 1", "unknown column 's.nope'", 1),
        ("flag = 1", "the number 1 does not fit column 'flag' (bool)", 8),
        ("city = 3", "the number 3 does not fit column 'city' (string) (quote strings: '3')", 8),
        ("price = true", "the boolean true does not fit column 'price'", 9),
        ("q is nan", "IS NAN needs a float column", 1),
        ("q like 'a%'", "STARTS WITH needs a string or binary column", 1),
        ("bin = 'xyz'", "not a value of column 'bin' (binary)", 7),
        ("city in ('a', 'b', 4)", "the number 4 does not fit column 'city'", 20),
    ],
)
def test_literals_that_do_not_fit_and_unknown_columns_point_at_the_position(text: str, words: str, position: int) -> None:
    with pytest.raises(ExpressionError) as info:
        b(text)
    assert words in str(info.value), str(info.value)
    assert info.value.position == position - 1, str(info.value)
    assert "\n" not in str(info.value)


def test_api_values_bind_exactly() -> None:
    def lit(column: str, value) -> object:
        return only(ex.bind(ex.predicate(column, "=", value), SCHEMA)).literals[0].value

    assert lit("u", 2**64 - 1) == 2**64 - 1
    assert lit("d", Decimal("1.5")) == Decimal("1.50")
    assert lit("ts", dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) == 1704067200 * 10**9
    assert lit("ts", pa.scalar(1, pa.timestamp("ns", "UTC"))) == 1
    assert lit("day", dt.date(1970, 1, 2)) == 1
    assert lit("day", "1970-01-03") == 2  # a str is the text form
    assert lit("price", 3) == 3.0
    assert lit("q", 3.0) == 3
    for column, value, words in [
        ("q", 1.5, "does not fit"),
        ("q", True, "does not fit"),
        ("city", 3, "is not a string"),
        ("naive", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "zoned"),
        ("d", Decimal("1.005"), "not a value"),
        ("q", None, "use IS NULL"),
    ]:
        with pytest.raises(ExpressionError, match=words):
            ex.bind(ex.predicate(column, "=", value), SCHEMA)


def test_in_lists_drop_repeated_values_and_keep_signed_zeros_apart() -> None:
    p = only(b("u in (1, 1, 2, 1)"))
    assert [lit.value for lit in p.literals] == [1, 2]
    p = only(b("price in (0.0, -0.0, nan, nan)"))
    assert len(p.literals) == 3


def test_rewrite_not_pushes_negation_into_the_predicates() -> None:
    expr = ex.rewrite_not(b("not (q < 1 or (city = 'a' and not price is nan)) and not not u in (1)"))
    assert str(expr) == "q >= 1 AND (city != 'a' OR price IS NAN) AND u IN (1)"
    assert [str(c) for c in ex.conjuncts(expr)] == ["q >= 1", "city != 'a' OR price IS NAN", "u IN (1)"]
    for op, neg in ex.tree.NEGATED.items():
        assert ex.tree.NEGATED[neg] is op


def test_pyiceberg_row_filters_pass_straight_through() -> None:
    from pyiceberg.expressions import parser as iceberg_parser

    text = "city = 'Berlin' and price between 1 and 3 and q in (1, 2) and not city like 'B%' and price is not nan and s.x is null"
    ours = b(text)
    theirs = ex.bound(iceberg_parser.parse(text), SCHEMA)
    assert str(ex.rewrite_not(theirs)) == str(ex.rewrite_not(ours))


# ------------------------------------------------------------------ dotted names (#28 item 4)
@pytest.mark.parametrize(
    "text,path",
    [
        ('"s"."x" = 1', ("s", "x")),
        ('s."x" = 1', ("s", "x")),
        ('"s".x = 1', ("s", "x")),
        ("`s`.`x` = 1", ("s", "x")),
        ('s."y.z" = 1', ("s", "y.z")),
        ('"s.x" = 1', ("s.x",)),
        ("`s.x` = 1", ("s.x",)),
        ('"a""b" = 1', ('a"b',)),
    ],
)
def test_quoted_parts_make_the_path(text: str, path: tuple[str, ...]) -> None:
    p = only(ex.parse(text))
    assert p.term.path == path
    assert ex.parse(str(p)) == p  # prints back as it parses


def test_a_leaf_schema_binds_stored_names() -> None:
    """TableStatistics.schema: one field per leaf, named as the statistics files name them."""
    from engine.columns import leaf_columns, mark_leaf_schema

    table = pa.schema([("s", pa.struct([("x", pa.int64())])), ("s.x", pa.string()), ("qty.units", pa.int32())])
    leaves = mark_leaf_schema(pa.schema([(leaf.name, leaf.type) for leaf in leaf_columns(table)]))
    assert leaves.names == ["s.x", "s\\.x", "qty\\.units"]
    for schema in (table, leaves):  # the same binding from the table's schema and the statistics' one
        for text, name, path, t in [
            ("s.x = 1", "s.x", ("s", "x"), pa.int64()),
            ('"s"."x" = 1', "s.x", ("s", "x"), pa.int64()),
            ("\"s.x\" = 'a'", "s\\.x", ("s.x",), pa.string()),
            ("`s.x` = 'a'", "s\\.x", ("s.x",), pa.string()),
            ('"qty.units" = 1', "qty\\.units", ("qty.units",), pa.int32()),
            ("qty.units = 1", "qty\\.units", ("qty.units",), pa.int32()),
        ]:
            p = only(ex.bound(text, schema))
            assert (p.term.name, p.term.path, p.term.type) == (name, path, t), (text, schema)
        with pytest.raises(ExpressionError, match="the number 1 does not fit column '\"s.x\"' \\(string\\)"):
            ex.bound('"s.x" = 1', schema)
    assert ex.binding.top_level_names(leaves) == ["s", "s.x", "qty.units"]


# ------------------------------------------------------------------ long chains and deep trees (#33 item 3)
def depth(e: ex.Expression) -> int:
    return ex.tree.fold(e, lambda _: 0, lambda _, kids: 1 + max(kids))


def test_long_chains_parse_and_bind_balanced() -> None:
    text = " or ".join(f"q = {k % 100}" for k in range(1500))
    parsed = ex.parse(text)
    assert depth(parsed) == 11  # ceil(log2(1500))
    bound = b(text)
    assert depth(bound) == 11
    assert str(bound) == text.replace(" or ", " OR ")  # the chain prints as written
    assert [str(c) for c in ex.conjuncts(b(" and ".join(f"q != {k}" for k in range(100))))] == [f"q != {k}" for k in range(100)]


def test_the_limits_name_themselves() -> None:
    limit = ex.tree.MAX_TERMS
    ex.parse(" or ".join(["q = 1"] * limit))
    with pytest.raises(ExpressionError, match=f"too many predicates \\(more than {limit:,}") as info:
        ex.parse(" or ".join(["q = 1"] * (limit + 1)))
    assert info.value.position == len("q = 1 or ") * limit  # the first predicate past the limit
    with pytest.raises(ExpressionError, match="too many predicates"):
        ex.parse(" or ".join(["q between 1 and 2"] * (limit // 2 + 1)))  # a BETWEEN is two
    with pytest.raises(ExpressionError, match="too many predicates"):
        ex.bind(ex.or_(*[ex.predicate("q", "=", 1)] * (limit + 1)), SCHEMA)


def left_deep(kind, terms):
    out = terms[0]
    for t in terms[1:]:
        out = kind(out, t)
    return out


def test_api_trees_of_any_depth_bind_shallow_or_fail_clearly() -> None:
    ors = left_deep(ex.Or, [ex.predicate("q", "=", k % 100) for k in range(3000)])
    assert depth(ors) == 2999
    bound = ex.bind(ors, SCHEMA)
    assert depth(bound) == 12 and str(bound) == " OR ".join(f"q = {k % 100}" for k in range(3000))
    right = ex.Or(ex.predicate("q", "=", 1), ex.predicate("q", "=", 2))
    for k in range(3000):
        right = ex.And(ex.predicate("u", ">", k), right)
    assert depth(ex.bind(right, SCHEMA)) <= 13
    nots = ex.predicate("q", "<", 5)
    for _ in range(10_000):
        nots = ex.Not(nots)
    assert ex.bind(nots, SCHEMA) == b("q < 5")  # NOT NOT x is x
    assert ex.bind(ex.Not(nots), SCHEMA) == b("not q < 5")
    assert str(ex.rewrite_not(ex.Not(nots))) == "q >= 5"  # iterative too
    assert ex.tree.references(ors) == [ex.col("q")]
    alternating = ex.predicate("q", "=", 0)
    for k in range(3000):
        alternating = (ex.And if k % 2 else ex.Or)(alternating, ex.predicate("q", "=", 1))
    with pytest.raises(ExpressionError, match=f"nests too deeply \\(more than {ex.tree.MAX_DEPTH} levels of AND, OR and NOT"):
        ex.bind(alternating, SCHEMA)
    assert len(str(alternating)) > 3000 * 10 and repr(alternating).startswith("And(left=Or(left=And(")  # no RecursionError


def test_nesting_within_the_limits_evaluates() -> None:
    text = "q = 0"
    for k in range(ex.parser.MAX_NESTING - 1):
        text = f"q = {k % 100} {'or' if k % 2 else 'and'} ({text})"
    expr = b(text)
    assert depth(expr) == ex.parser.MAX_NESTING - 1
    metrics = ex.ColumnMetrics(rows=10, nulls=0, nans=0, lower=50, upper=60)
    assert ex.InclusiveMetricsEvaluator(expr).eval(lambda ref: metrics, rows=10) in (True, False)
    assert ex.tree.rewrite_not(ex.Not(expr)) is not None


# ------------------------------------------------------------------ numbers beyond float64 (#33 item 12)
@pytest.mark.parametrize("number", ["1e400", "-1e400", "2e308", "1E+999", "1" + "0" * 400])
def test_a_number_beyond_float64_is_an_error_naming_it(number: str) -> None:
    with pytest.raises(ExpressionError, match="is out of range \\(beyond float64") as info:
        ex.parse(f"price > {number}")
    assert info.value.position == len("price > ")
    assert number[:20] in str(info.value)


def test_float_literals_at_the_edges() -> None:
    assert only(b("price < 1.7976931348623157e308")).literals[0].value == 1.7976931348623157e308
    assert only(b("price < inf")).literals[0].value == float("inf")  # written as inf: a value
    assert only(b("price > 1e-400")).literals[0].value == 0.0  # the nearest float, as documented
    for text in ("f32 > 1e39", "f16 < -70000"):  # finite, but beyond the column's float width
        with pytest.raises(ExpressionError, match="is out of the range of column"):
            b(text)
    for column, value in (("f32", 1e39), ("price", 10**400)):
        with pytest.raises(ExpressionError, match="is out of the range of column"):
            ex.bind(ex.predicate(column, ">", value), SCHEMA)
    assert only(ex.bind(ex.predicate("f32", "<", float("inf")), SCHEMA)).literals[0].value == float("inf")
