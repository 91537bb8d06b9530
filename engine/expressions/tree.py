"""Predicate expressions as values: unbound (names and literals as written) and bound
(a column of the table's schema and literals of its type).

The shape follows pyiceberg's expressions (``And``/``Or``/``Not`` over predicates on
a reference; bind, then visit), with our own literal forms: every value is a value
of the column's Arrow type (uint64, float16, decimal256, nanosecond timestamps with
zones, durations included), compared losslessly. docs/PREDICATES.md says why this
is not pyiceberg's tree itself.

Semantics are SQL's: a comparison with a null is not true, so nulls match only
``IS NULL``; NaN matches only ``IS NAN`` and ``!=`` / ``NOT IN`` (and, as engines
order NaN differently, whatever an engine says for ``<``, ``>``: the evaluators
never prune on an order comparison where NaN may be present).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


class Op(enum.Enum):
    """Predicate operators; the value is the operator as the language writes it."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "IN"
    NOT_IN = "NOT IN"
    IS_NULL = "IS NULL"
    NOT_NULL = "IS NOT NULL"
    IS_NAN = "IS NAN"
    NOT_NAN = "IS NOT NAN"
    STARTS_WITH = "STARTS WITH"
    NOT_STARTS_WITH = "NOT STARTS WITH"


#: operators that take no literal
UNARY = frozenset({Op.IS_NULL, Op.NOT_NULL, Op.IS_NAN, Op.NOT_NAN})
#: operators that take a list of literals
SET = frozenset({Op.IN, Op.NOT_IN})
#: order comparisons (an engine's NaN ordering decides them for NaN)
ORDER = frozenset({Op.LT, Op.LE, Op.GT, Op.GE})

#: NOT op  ==  NEGATED[op], under SQL's three-valued logic (nulls are false on both sides)
NEGATED = {
    Op.EQ: Op.NE,
    Op.NE: Op.EQ,
    Op.LT: Op.GE,
    Op.GE: Op.LT,
    Op.LE: Op.GT,
    Op.GT: Op.LE,
    Op.IN: Op.NOT_IN,
    Op.NOT_IN: Op.IN,
    Op.IS_NULL: Op.NOT_NULL,
    Op.NOT_NULL: Op.IS_NULL,
    Op.IS_NAN: Op.NOT_NAN,
    Op.NOT_NAN: Op.IS_NAN,
    Op.STARTS_WITH: Op.NOT_STARTS_WITH,
    Op.NOT_STARTS_WITH: Op.STARTS_WITH,
}


class LiteralKind(enum.Enum):
    """How a literal was written: the binder converts each kind to the column's type."""

    STRING = "string"  # 'quoted' or a bare word (2024-10-01, Berlin): the value itself for string columns, else its text form
    NUMBER = "number"  # 12, -1.5e3, nan, inf: exact decimal text, converted without rounding where the type is exact
    BOOLEAN = "boolean"  # true / false
    PYTHON = "python"  # a Python value or pyarrow scalar given through the API


@dataclass(frozen=True)
class Literal:
    """An unbound literal: what was written (``text``) or given (``value``)."""

    kind: LiteralKind
    value: Any  # the text for STRING / NUMBER, a bool for BOOLEAN, the object for PYTHON
    position: int = field(default=-1, compare=False)

    def __str__(self) -> str:
        if self.kind is LiteralKind.STRING:
            return quote_string(self.value)
        if self.kind is LiteralKind.BOOLEAN:
            return "true" if self.value else "false"
        if self.kind is LiteralKind.NUMBER:
            return str(self.value)
        return repr(self.value)


@dataclass(frozen=True)
class Reference:
    """An unbound column: the path of names (a struct leaf is its parent's name, then the field's)."""

    path: tuple[str, ...]
    position: int = field(default=-1, compare=False)

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        return ".".join(quote_name(p) for p in self.path)


@dataclass(frozen=True)
class BoundReference:
    """A column of the table: its statistics name (struct leaves joined by ``.``), path and type."""

    name: str
    path: tuple[str, ...]
    type: pa.DataType

    def __str__(self) -> str:
        return ".".join(quote_name(p) for p in self.path)


@dataclass(frozen=True)
class BoundLiteral:
    """A literal of the column's type: the Arrow scalar and its comparable Python value
    (temporal values as their storage count, so nanoseconds stay exact)."""

    scalar: pa.Scalar
    value: Any
    text: str  # the value's text form (docs/VALUE_FORMS.md)

    def __str__(self) -> str:
        t = self.scalar.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t):
            return self.text  # numbers, nan, inf, -inf, true, false read back as written
        return quote_string(self.text)


@dataclass(frozen=True)
class Predicate:
    """``term op literals``: unbound (Reference, Literal) or bound (BoundReference, BoundLiteral)."""

    op: Op
    term: Reference | BoundReference
    literals: tuple[Any, ...] = ()

    @property
    def bound(self) -> bool:
        return isinstance(self.term, BoundReference)

    def negate(self) -> Predicate:
        return Predicate(NEGATED[self.op], self.term, self.literals)

    def __str__(self) -> str:
        if self.op in UNARY:
            return f"{self.term} {self.op.value}"
        if self.op in SET:
            return f"{self.term} {self.op.value} ({', '.join(map(str, self.literals))})"
        return f"{self.term} {self.op.value} {self.literals[0]}"


@dataclass(frozen=True)
class And:
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"{_wrap(self.left, Or)} AND {_wrap(self.right, Or)}"


@dataclass(frozen=True)
class Or:
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"{self.left} OR {self.right}"


@dataclass(frozen=True)
class Not:
    child: Expression

    def __str__(self) -> str:
        return f"NOT {_wrap(self.child, (And, Or))}"


@dataclass(frozen=True)
class AlwaysTrue:
    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True)
class AlwaysFalse:
    def __str__(self) -> str:
        return "false"


Expression = And | Or | Not | Predicate | AlwaysTrue | AlwaysFalse

TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


def _wrap(expr: Expression, kinds: Any) -> str:
    return f"({expr})" if isinstance(expr, kinds) else str(expr)


# ------------------------------------------------------------------ names and strings
_BARE_NAME_FIRST = "_$"


def is_bare_name(name: str) -> bool:
    """Whether ``name`` can be written without quotes (a word that is no keyword)."""
    from engine.expressions.parser import KEYWORDS

    return (
        bool(name)
        and (name[0].isalpha() or name[0] == "_")
        and all(c.isalnum() or c in _BARE_NAME_FIRST for c in name)
        and name.upper() not in KEYWORDS
    )


def quote_name(name: str) -> str:
    return name if is_bare_name(name) else '"' + name.replace('"', '""') + '"'


def quote_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# ------------------------------------------------------------------ construction (the API's form)
def col(name: str | tuple[str, ...]) -> Reference:
    """A column by name: ``"price"``, a struct leaf ``"address.city"``, or a path tuple
    (``("a.b",)`` for a top-level column whose name holds a dot)."""
    return Reference(tuple(name.split(".")) if isinstance(name, str) else tuple(name))


def _ref(column: str | tuple[str, ...] | Reference) -> Reference:
    return column if isinstance(column, Reference) else col(column)


def _lit(value: Any) -> Literal:
    return value if isinstance(value, Literal) else Literal(LiteralKind.PYTHON, value)


def predicate(column: str | tuple[str, ...] | Reference, op: Op | str, *values: Any) -> Predicate:
    """``predicate("price", ">=", 100)``: one predicate; values are Python values of the
    column's type, pyarrow scalars, or (as str) the value's text form."""
    op = op if isinstance(op, Op) else op_from_symbol(op)
    if op in UNARY and values:
        raise ValueError(f"{op.value} takes no value")
    if op not in UNARY and op not in SET and len(values) != 1:
        raise ValueError(f"{op.value} takes one value")
    if op in SET and not values:
        raise ValueError(f"{op.value} takes at least one value")
    return Predicate(op, _ref(column), tuple(_lit(v) for v in values))


def between(column: str | tuple[str, ...] | Reference, lo: Any, hi: Any) -> And:
    return And(predicate(column, Op.GE, lo), predicate(column, Op.LE, hi))


def and_(*exprs: Expression) -> Expression:
    if not exprs:
        return TRUE
    out = exprs[0]
    for e in exprs[1:]:
        out = And(out, e)
    return out


def or_(*exprs: Expression) -> Expression:
    if not exprs:
        return FALSE
    out = exprs[0]
    for e in exprs[1:]:
        out = Or(out, e)
    return out


_SYMBOLS = {"==": Op.EQ, "<>": Op.NE, "is_null": Op.IS_NULL, "not_null": Op.NOT_NULL, "is_nan": Op.IS_NAN, "not_nan": Op.NOT_NAN}


def op_from_symbol(symbol: str) -> Op:
    """An operator from its symbol (``=``, ``==``, ``!=``, ``<>``, ``<`` ...) or name (``in``,
    ``is null``, ``starts with``, and the old Flight names ``is_null`` / ``not_null``)."""
    s = " ".join(symbol.split())
    if s in _SYMBOLS:
        return _SYMBOLS[s]
    for op in Op:
        if op.value == s.upper():
            return op
    raise ValueError(f"unknown operator {symbol!r}")


# ------------------------------------------------------------------ rewriting
def rewrite_not(expr: Expression) -> Expression:
    """The same expression with every NOT pushed into the predicates (De Morgan), so a
    visitor that can only say "might match" never has to negate a "might"."""
    return _push(expr, negate=False)


def _push(expr: Expression, negate: bool) -> Expression:
    if isinstance(expr, Not):
        return _push(expr.child, not negate)
    if isinstance(expr, And):
        left, right = _push(expr.left, negate), _push(expr.right, negate)
        return Or(left, right) if negate else And(left, right)
    if isinstance(expr, Or):
        left, right = _push(expr.left, negate), _push(expr.right, negate)
        return And(left, right) if negate else Or(left, right)
    if isinstance(expr, Predicate):
        return expr.negate() if negate else expr
    if isinstance(expr, AlwaysTrue):
        return FALSE if negate else TRUE
    if isinstance(expr, AlwaysFalse):
        return TRUE if negate else FALSE
    raise TypeError(f"not an expression: {expr!r}")


def conjuncts(expr: Expression) -> list[Expression]:
    """The top-level AND terms of ``expr`` (itself when it is no AND)."""
    if isinstance(expr, And):
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def references(expr: Expression) -> list[Any]:
    """The distinct columns an expression names, in first-use order."""
    out: dict[Any, None] = {}

    def walk(e: Expression) -> None:
        if isinstance(e, (And, Or)):
            walk(e.left)
            walk(e.right)
        elif isinstance(e, Not):
            walk(e.child)
        elif isinstance(e, Predicate):
            out.setdefault(e.term, None)

    walk(expr)
    return list(out)
