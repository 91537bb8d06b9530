"""Spark filter conditions as predicates of ours (docs/PREDICATES.md), with Spark's semantics.

:func:`translate` takes a Spark condition captured as plain values (:class:`SparkExpr`,
built from the JVM's Catalyst expression by ``spark_bridge.scan``; plain values so this
module is pure and testable without Spark) and gives a predicate bound to the analyzed
table's Arrow schema, plus whether it is **exact** (keeps exactly the rows Spark's
condition keeps) or a **superset** (parts that could not be translated became "might
match"). Never a subset: file pruning with it has no false negatives.

How parts that cannot be translated are treated: NOTs are pushed to the leaves first
(De Morgan, as Spark's three-valued logic allows), then a leaf we cannot translate is
``true`` (might match) in whichever polarity it sits. So an unknown conjunct drops out
of an AND, an OR with an unknown branch becomes ``true``, and ``NOT (a AND unknown)``
is ``true`` too (never ``NOT a``, which would be a subset).

Spark's semantics differ from SQL's/IEEE's in three places, and the translation
spells them out so the result is exact whatever NaN order the evaluator assumes:

- NaN is the largest float and ``NaN = NaN`` is true: ``x > 5`` becomes ``x > 5 OR x IS
  NAN``, ``x < 5`` becomes ``x < 5 AND x IS NOT NAN``, ``x = NaN`` becomes ``x IS NAN``,
  ``x IN (1, NaN)`` becomes ``x IN (1) OR x IS NAN``;
- ``isnan(null)`` is false, not null: ``NOT isnan(x)`` becomes ``x IS NOT NAN OR x IS NULL``;
- ``x <=> v`` (null-safe equality): ``NOT (x <=> 5)`` is true for nulls.

Literals arrive as Spark's internal values (dates as days, timestamps as microseconds,
decimals exact) and are bound as Arrow scalars of that exact type, so the binder's
round-trip check refuses anything inexact (the leaf is then unknown). A timestamp
literal binds only to a column of the same kind (Spark ``timestamp`` to a zoned Arrow
timestamp, ``timestamp_ntz`` to a naive one). A cast of a column is translated only
when it widens an integer (``cast(int_col as bigint) > 5``); any other cast, any
arithmetic or function of a column, any comparison of two columns, is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from engine import expressions as ex
from engine import types as mt
from engine.exceptions import ExpressionError
from engine.expressions.binding import top_level_names
from engine.expressions.tree import FALSE, NEGATED, TRUE, Op, reshape

__all__ = ["COMPARISONS", "SparkExpr", "Translation", "translate"]

#: Catalyst comparison class -> operator, for ``column op literal``
COMPARISONS = {
    "EqualTo": Op.EQ,
    "LessThan": Op.LT,
    "LessThanOrEqual": Op.LE,
    "GreaterThan": Op.GT,
    "GreaterThanOrEqual": Op.GE,
}
#: ``literal op column`` is ``column FLIPPED[op] literal``
_FLIPPED = {Op.EQ: Op.EQ, Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}
#: Spark integral types by width, for widening casts
_INTEGRAL = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}
_FLOATING = ("float", "double")


@dataclass(frozen=True)
class SparkExpr:
    """A Catalyst expression as plain values.

    ``kind`` is Catalyst's class name (``And``, ``EqualTo``, ``InSet``, ...), ``Column``
    for a column of the scanned relation or a struct field of one (``path``: the names;
    None when the attribute is not one of the relation's columns), ``Literal`` for a
    literal (``value``: its Python value: str, bytes, bool, int, float, Decimal; dates
    as days and timestamps as microseconds since the epoch; None for null), or any other
    class name, which is not translated. ``InSet``'s values are in ``value`` (a tuple).
    ``type`` is Spark's type name (``int``, ``decimal(10,2)``, ``timestamp_ntz``, ...);
    ``text`` Spark's own rendering, for reports.
    """

    kind: str
    children: tuple[SparkExpr, ...] = ()
    path: tuple[str, ...] | None = None
    value: Any = None
    type: str = ""
    text: str = ""


@dataclass(frozen=True)
class Translation:
    """A Spark condition as a bound predicate: ``exact`` when it keeps exactly Spark's rows,
    else a superset, the parts that became "might match" in ``untranslated``."""

    expression: ex.Expression
    exact: bool
    untranslated: tuple[str, ...]

    @property
    def text(self) -> str:
        return str(self.expression)


def translate(condition: SparkExpr | None, schema: pa.Schema) -> Translation:
    """``condition`` (None: no filter) as a predicate bound to ``schema``; see the module docstring."""
    if condition is None:
        return Translation(TRUE, True, ())
    unknown: list[str] = []
    try:
        expr = reshape(_translate(condition, False, schema, unknown))  # chains balanced (tree.reshape)
    except (RecursionError, ExpressionError):  # a condition nested past Python's stack or our limits
        return Translation(TRUE, False, (f"{condition.kind}: nested too deeply or too many predicates (docs/PREDICATES.md, Limits)",))
    return Translation(expr, not unknown, tuple(dict.fromkeys(unknown)))


# ------------------------------------------------------------------ the tree
def _and(a: ex.Expression, b: ex.Expression) -> ex.Expression:
    if isinstance(a, ex.AlwaysFalse) or isinstance(b, ex.AlwaysFalse):
        return FALSE
    if isinstance(a, ex.AlwaysTrue):
        return b
    if isinstance(b, ex.AlwaysTrue):
        return a
    return ex.And(a, b)


def _or(a: ex.Expression, b: ex.Expression) -> ex.Expression:
    if isinstance(a, ex.AlwaysTrue) or isinstance(b, ex.AlwaysTrue):
        return TRUE
    if isinstance(a, ex.AlwaysFalse):
        return b
    if isinstance(b, ex.AlwaysFalse):
        return a
    return ex.Or(a, b)


def _translate(e: SparkExpr, negated: bool, schema: pa.Schema, unknown: list[str]) -> ex.Expression:
    """The rows where ``e`` (``NOT e`` when ``negated``) is true, or a superset of them."""
    if e.kind in ("And", "Or") and len(e.children) == 2:
        combine = _and if (e.kind == "And") != negated else _or
        out: ex.Expression | None = None
        for part in _chain(e):  # a long chain (Catalyst builds a OR b OR c left-deep) without recursing
            t = _translate(part, negated, schema, unknown)
            out = t if out is None else combine(out, t)
        assert out is not None
        return out
    if e.kind == "Not" and len(e.children) == 1:
        return _translate(e.children[0], not negated, schema, unknown)
    if e.kind == "Literal" and e.type == "boolean":
        # null is not true, and NOT null is null: false either way
        return FALSE if e.value is None else (TRUE if bool(e.value) != negated else FALSE)
    try:
        leaf = _leaf(e, negated, schema)
    except (ExpressionError, pa.ArrowException, ValueError, TypeError, OverflowError, ArithmeticError):
        leaf = None  # a literal that does not fit the column exactly
    if leaf is None:
        unknown.append(e.text or e.kind)
        return TRUE
    return leaf


def _chain(e: SparkExpr) -> list[SparkExpr]:
    """The operands of the chain of ``e``'s And / Or rooted at ``e``, left to right."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if x.kind == e.kind and len(x.children) == 2:
            stack.extend(reversed(x.children))
        else:
            out.append(x)
    return out


# ------------------------------------------------------------------ leaves
def _leaf(e: SparkExpr, negated: bool, schema: pa.Schema) -> ex.Expression | None:
    kind, kids = e.kind, e.children
    if kind == "Column" and e.type == "boolean":  # WHERE flag
        column = _column(e, schema)
        return None if column is None else _bind(column, Op.EQ, [not negated], schema)
    if kind in ("IsNull", "IsNotNull") and len(kids) == 1:
        column = _column(kids[0], schema)
        if column is None:
            return None
        is_null = (kind == "IsNull") != negated
        return _bind(column, Op.IS_NULL if is_null else Op.NOT_NULL, [], schema)
    if kind == "IsNaN" and len(kids) == 1:
        column = _column(kids[0], schema)
        if column is None:
            return None
        if not negated:
            return _bind(column, Op.IS_NAN, [], schema)
        # isnan(null) is false, so NOT isnan(x) holds for nulls
        return _or(_bind(column, Op.NOT_NAN, [], schema), _bind(column, Op.IS_NULL, [], schema))
    if kind == "StartsWith" and len(kids) == 2:
        column, lit = _column(kids[0], schema), kids[1]
        if column is None or lit.kind != "Literal" or lit.value is None:
            return None
        return _bind(column, Op.NOT_STARTS_WITH if negated else Op.STARTS_WITH, [_scalar(lit)], schema)
    if kind in COMPARISONS or kind == "EqualNullSafe":
        return _comparison(e, negated, schema)
    if kind in ("In", "InSet") and kids:
        column = _column(kids[0], schema)
        if column is None:
            return None
        if kind == "In":
            if not all(k.kind == "Literal" for k in kids[1:]):
                return None
            values = [_scalar(k) if k.value is not None else None for k in kids[1:]]
        else:
            values = [None if v is None else _scalar(SparkExpr("Literal", value=v, type=kids[0].type)) for v in e.value]
        return _membership(column, kids[0].type, values, negated, schema)
    return None


def _comparison(e: SparkExpr, negated: bool, schema: pa.Schema) -> ex.Expression | None:
    a, b = e.children
    null_safe = e.kind == "EqualNullSafe"
    op = Op.EQ if null_safe else COMPARISONS[e.kind]
    if a.kind == "Literal" and b.kind != "Literal":
        a, b, op = b, a, _FLIPPED[op]
    column = _column(a, schema)
    if column is None or b.kind != "Literal":
        return None
    if b.value is None:
        if null_safe:  # x <=> null is x IS NULL
            return _bind(column, Op.NOT_NULL if negated else Op.IS_NULL, [], schema)
        return FALSE  # a comparison with null is null: never true, nor its NOT
    op = NEGATED[op] if negated else op
    out = _ordered(column, a.type, op, b, schema)
    if null_safe and negated:  # NOT (x <=> 5) holds for nulls
        out = _or(out, _bind(column, Op.IS_NULL, [], schema))
    return out


def _ordered(column: tuple[str, ...], spark_type: str, op: Op, lit: SparkExpr, schema: pa.Schema) -> ex.Expression:
    """``column op literal`` under Spark's float order (NaN largest, NaN = NaN)."""
    value = _scalar(lit)
    if spark_type not in _FLOATING:
        return _bind(column, op, [value], schema)
    if isinstance(lit.value, float) and math.isnan(lit.value):
        return {
            Op.EQ: lambda: _bind(column, Op.IS_NAN, [], schema),
            Op.GE: lambda: _bind(column, Op.IS_NAN, [], schema),
            Op.NE: lambda: _bind(column, Op.NOT_NAN, [], schema),
            Op.LT: lambda: _bind(column, Op.NOT_NAN, [], schema),
            Op.LE: lambda: _bind(column, Op.NOT_NULL, [], schema),
            Op.GT: lambda: FALSE,
        }[op]()
    plain = _bind(column, op, [value], schema)
    if op in (Op.LT, Op.LE):
        return _and(plain, _bind(column, Op.NOT_NAN, [], schema))
    if op in (Op.GT, Op.GE):
        return _or(plain, _bind(column, Op.IS_NAN, [], schema))
    return plain  # = never holds for NaN, != always does, in Spark as in IEEE


def _membership(column: tuple[str, ...], spark_type: str, values: list[Any], negated: bool, schema: pa.Schema) -> ex.Expression:
    has_null = any(v is None for v in values)
    present = [v for v in values if v is not None]
    has_nan = spark_type in _FLOATING and any(math.isnan(v.as_py()) for v in present)
    numbers = [v for v in present if not (spark_type in _FLOATING and math.isnan(v.as_py()))]
    if not negated:
        out = _bind(column, Op.IN, numbers, schema) if numbers else FALSE
        return _or(out, _bind(column, Op.IS_NAN, [], schema)) if has_nan else out
    if has_null:  # x NOT IN (..., null) is never true
        return FALSE
    out = _bind(column, Op.NOT_IN, numbers, schema) if numbers else _bind(column, Op.NOT_NULL, [], schema)
    return _and(out, _bind(column, Op.NOT_NAN, [], schema)) if has_nan else out


# ------------------------------------------------------------------ columns and literals
def _column(e: SparkExpr, schema: pa.Schema) -> tuple[str, ...] | None:
    """The column path of a relation column, or of a widening integer cast of one."""
    if e.kind == "Cast" and len(e.children) == 1:
        inner = e.children[0]
        wide, narrow = _INTEGRAL.get(e.type), _INTEGRAL.get(inner.type)
        if wide is None or narrow is None or narrow > wide:
            return None
        return _column(inner, schema)
    if e.kind != "Column" or not e.path:
        return None
    names = top_level_names(schema)
    if e.path[0] not in names:  # Spark resolves names case-insensitively (a Hive catalog lower-cases them)
        same = [n for n in names if n.lower() == e.path[0].lower()]
        if len(same) == 1:
            return (same[0], *e.path[1:])
    return e.path


def _scalar(lit: SparkExpr) -> Any:
    """A Spark literal as a Python value or an Arrow scalar of exactly Spark's type."""
    t, v = lit.type, lit.value
    if v is None:
        return None
    if t == "date":
        return pa.scalar(int(v), pa.date32())
    if t == "timestamp":
        return pa.scalar(int(v), pa.timestamp("us", tz="UTC"))
    if t == "timestamp_ntz":
        return pa.scalar(int(v), pa.timestamp("us"))
    if t == "float":
        return pa.scalar(float(v), pa.float32())
    if t == "double":
        return pa.scalar(float(v), pa.float64())
    if t.startswith("decimal"):
        return Decimal(v) if not isinstance(v, Decimal) else v
    if t == "binary":
        return bytes(v)
    if t in _INTEGRAL:
        return int(v)
    if t in ("string", "boolean"):
        return v
    raise ValueError(f"Spark literal type {t} is not translated")


def _bind(path: tuple[str, ...], op: Op, values: list[Any], schema: pa.Schema) -> ex.Expression:
    bound = ex.bind(ex.predicate(ex.col(path), op, *values), schema)
    assert isinstance(bound, ex.Predicate) and isinstance(bound.term, ex.BoundReference)
    t = bound.term.type
    for v in values:
        if isinstance(v, pa.Scalar) and mt.is_timestamp(v.type):
            if not mt.is_timestamp(t) or (v.type.tz is None) != (t.tz is None):
                raise ValueError("a timestamp literal of the other kind (zoned / naive)")
        if isinstance(v, pa.Scalar) and mt.is_floating(v.type) and not mt.is_floating(t):
            raise ValueError("a float literal for a column that is not float")
    return bound
