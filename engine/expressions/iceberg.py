"""Iceberg row filters (pyiceberg's unbound expressions) as ours, so a planner passes its filter through.

pyiceberg is optional here: only an object that is a pyiceberg expression is
converted, and pyiceberg is imported only then. A name is split on dots like ours
(pyiceberg's parser keeps ``"a.b"`` and ``a.b`` alike; the binder finds a top-level
column of that name when no struct path matches).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from engine.exceptions import ExpressionError
from engine.expressions.tree import (
    FALSE,
    TRUE,
    And,
    Expression,
    Literal,
    LiteralKind,
    Not,
    Op,
    Or,
    Predicate,
    col,
)

_OPS = {
    "EqualTo": Op.EQ,
    "NotEqualTo": Op.NE,
    "LessThan": Op.LT,
    "LessThanOrEqual": Op.LE,
    "GreaterThan": Op.GT,
    "GreaterThanOrEqual": Op.GE,
    "In": Op.IN,
    "NotIn": Op.NOT_IN,
    "IsNull": Op.IS_NULL,
    "NotNull": Op.NOT_NULL,
    "IsNaN": Op.IS_NAN,
    "NotNaN": Op.NOT_NAN,
    "StartsWith": Op.STARTS_WITH,
    "NotStartsWith": Op.NOT_STARTS_WITH,
}


def is_iceberg_expression(expr: object) -> bool:
    return type(expr).__module__.startswith("pyiceberg.expressions")


def from_iceberg(expr: Any) -> Expression:
    """An unbound pyiceberg ``BooleanExpression`` as an unbound expression of ours."""
    name = type(expr).__name__
    if name == "And":
        return And(from_iceberg(expr.left), from_iceberg(expr.right))
    if name == "Or":
        return Or(from_iceberg(expr.left), from_iceberg(expr.right))
    if name == "Not":
        return Not(from_iceberg(expr.child))
    if name == "AlwaysTrue":
        return TRUE
    if name == "AlwaysFalse":
        return FALSE
    op = _OPS.get(name)
    if op is None or not hasattr(expr, "term"):
        raise ExpressionError(f"unsupported Iceberg expression {name} (bound expressions: pass the unbound filter)")
    ref = col(expr.term.name)
    if hasattr(expr, "literals"):
        values = sorted((_literal(lit.value) for lit in expr.literals), key=lambda lit: str(lit.value))
        return Predicate(op, ref, tuple(values))
    if hasattr(expr, "literal"):
        return Predicate(op, ref, (_literal(expr.literal.value),))
    return Predicate(op, ref)


def _literal(value: object) -> Literal:
    if isinstance(value, bool):
        return Literal(LiteralKind.BOOLEAN, value)
    if isinstance(value, str):
        return Literal(LiteralKind.STRING, value)
    if isinstance(value, (int, Decimal)):
        return Literal(LiteralKind.NUMBER, str(value))
    if isinstance(value, float):
        return Literal(LiteralKind.NUMBER, repr(value))
    return Literal(LiteralKind.PYTHON, value)
