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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import pyarrow as pa

from engine import types as mt
from engine.exceptions import ExpressionError
from engine.types import is_numeric

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression


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
        if is_numeric(t) or mt.is_boolean(t):
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


class _Folded:
    """Text and repr of a connective without recursion (deep trees: engine/expressions/tree.py fold)."""

    def __str__(self) -> str:
        return fold(self, str, _text)

    def __repr__(self) -> str:
        return fold(self, repr, _repr)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython's and hypothesis's printers: not recursively
        p.text(repr(self))


@dataclass(frozen=True, repr=False)
class And(_Folded):
    left: Expression
    right: Expression


@dataclass(frozen=True, repr=False)
class Or(_Folded):
    left: Expression
    right: Expression


@dataclass(frozen=True, repr=False)
class Not(_Folded):
    child: Expression


@dataclass(frozen=True)
class AlwaysTrue:
    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True)
class AlwaysFalse:
    def __str__(self) -> str:
        return "false"


Expression = And | Or | Not | Predicate | AlwaysTrue | AlwaysFalse
#: what a ``where=`` takes: a predicate's text (docs/PREDICATES.md), a tree of this package
#: (bound or not) or a pyiceberg ``BooleanExpression`` (an Iceberg row filter)
Where: TypeAlias = "str | Expression | BooleanExpression"
T = TypeVar("T")

TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


def fold(expr: Expression | _Folded, leaf: Callable[[Any], T], node: Callable[[Any, list[T]], T]) -> T:
    """``node(e, [results of e's children])`` bottom-up over AND, OR and NOT, ``leaf(e)`` for
    the rest: iterative, so text and repr of a tree of any depth do not exhaust the stack."""
    work: list[tuple[Any, bool]] = [(expr, False)]
    done: list[T] = []
    while work:
        e, expanded = work.pop()
        kids = (e.left, e.right) if isinstance(e, (And, Or)) else (e.child,) if isinstance(e, Not) else ()
        if not kids:
            done.append(leaf(e))
        elif expanded:
            args = done[-len(kids) :]
            del done[-len(kids) :]
            done.append(node(e, args))
        else:
            work.append((e, True))
            work.extend((k, False) for k in reversed(kids))
    return done[0]


def _text(e: Any, args: list[str]) -> str:
    if isinstance(e, And):
        return f"{_wrap(args[0], e.left, Or)} AND {_wrap(args[1], e.right, Or)}"
    if isinstance(e, Or):
        return f"{args[0]} OR {args[1]}"
    return f"NOT {_wrap(args[0], e.child, (And, Or))}"


def _repr(e: Any, args: list[str]) -> str:
    if isinstance(e, Not):
        return f"Not(child={args[0]})"
    return f"{type(e).__name__}(left={args[0]}, right={args[1]})"


def _wrap(text: str, expr: Expression, kinds: type | tuple[type, ...]) -> str:
    return f"({text})" if isinstance(expr, kinds) else text


# ------------------------------------------------------------------ names and strings
_BARE_NAME_FIRST = "_$"
#: the words of the predicate language (engine/expressions/parser.py): a name equal to one is quoted
KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "IS", "NULL", "NAN", "BETWEEN", "LIKE", "STARTS", "WITH", "TRUE", "FALSE"})


def is_bare_name(name: str) -> bool:
    """Whether ``name`` can be written without quotes (a word that is no keyword)."""
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
    (``("a.b",)`` for a top-level column whose name holds a dot). A str is read as the
    statistics files name columns (engine/columns.py): ``.`` separates struct fields,
    ``\\.`` is a dot inside a name (``"a\\.b"`` is ``("a.b",)``)."""
    if isinstance(name, str):
        from engine.columns import column_path

        return Reference(column_path(name))
    return Reference(tuple(name))


def _ref(column: str | tuple[str, ...] | Reference) -> Reference:
    return column if isinstance(column, Reference) else col(column)


def _lit(value: object) -> Literal:
    return value if isinstance(value, Literal) else Literal(LiteralKind.PYTHON, value)


def predicate(column: str | tuple[str, ...] | Reference, op: Op | str, *values: object) -> Predicate:
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


def between(column: str | tuple[str, ...] | Reference, lo: object, hi: object) -> And:
    return And(predicate(column, Op.GE, lo), predicate(column, Op.LE, hi))


def and_(*exprs: Expression) -> Expression:
    """The AND of ``exprs`` (``true`` for none), as a balanced tree: a long chain stays shallow."""
    return balanced(And, list(exprs)) if exprs else TRUE


def or_(*exprs: Expression) -> Expression:
    """The OR of ``exprs`` (``false`` for none), as a balanced tree."""
    return balanced(Or, list(exprs)) if exprs else FALSE


def balanced(kind: type[And] | type[Or], items: list[Expression]) -> Expression:
    """``items`` joined by ``kind`` in their order, as a tree of depth ceil(log2(n)):
    AND and OR are associative, so this is the chain a parser would build left-deep, without
    its depth (a 1,500-term OR is 11 levels deep, not 1,500)."""
    return _balanced_with_depth(kind, [(e, 0) for e in items])[0]


def _balanced_with_depth(kind: type[And] | type[Or], items: list[tuple[Expression, int]]) -> tuple[Expression, int]:
    if not items:
        raise ValueError("no operands")
    while len(items) > 1:
        paired: list[tuple[Expression, int]] = [(kind(a, b), max(da, db) + 1) for (a, da), (b, db) in zip(items[0::2], items[1::2])]
        if len(items) % 2:
            paired.append(items[-1])
        items = paired
    return items[0]


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


# ------------------------------------------------------------------ limits and shape
#: the most predicates (leaves) one expression may hold (a BETWEEN is two)
MAX_TERMS = 4096
#: the deepest an expression may nest once its AND / OR chains are balanced and double NOTs
#: dropped (the evaluators recurse over the tree; a chain of 4,096 terms is 12 levels)
MAX_DEPTH = 200


def reshape(expr: Expression, leaf: Callable[[Any], Expression] = lambda e: e) -> Expression:
    """``expr`` with each predicate (and constant) replaced by ``leaf(it)``, every AND / OR
    chain flattened and rebuilt balanced (associativity), and ``NOT NOT x`` as ``x``
    (true under SQL's three-valued logic). Iterative, so a tree of any depth can be given;
    ExpressionError (one line, naming the limit) for more than ``MAX_TERMS`` predicates
    or a result deeper than ``MAX_DEPTH``. Leaves are visited in their written order."""
    work: list[Any] = [expr]  # an Expression to visit, or a ("not",) / (kind, count) step
    done: list[tuple[Expression, int]] = []  # (result, depth)
    terms = 0
    while work:
        item = work.pop()
        if isinstance(item, tuple):
            if item[0] == "not":
                e, depth = done.pop()
                done.append((Not(e), _deeper(depth + 1)))
            else:
                kind, count = item
                built = done[-count:]
                del done[-count:]
                e, depth = _balanced_with_depth(kind, built)
                done.append((e, _deeper(depth)))
        elif isinstance(item, Not):
            negations = 0
            while isinstance(item, Not):
                negations, item = negations + 1, item.child
            if negations % 2:
                work.append(("not",))
            work.append(item)
        elif isinstance(item, (And, Or)):
            chain = operands(item)
            work.append((type(item), len(chain)))
            work.extend(reversed(chain))
        elif isinstance(item, (Predicate, AlwaysTrue, AlwaysFalse)):
            terms += 1
            if terms > MAX_TERMS:
                raise ExpressionError(
                    f"the expression has too many predicates (more than {MAX_TERMS:,}; IN (...) takes a long list of values as one)"
                )
            done.append((leaf(item), 0))
        else:
            raise ExpressionError(f"not an expression: {type(item).__name__}")
    return done[0][0]


def operands(e: And | Or) -> list[Expression]:
    """The operands of the chain of ``e``'s operator rooted at ``e``, left to right
    (``a AND (b AND c)`` -> a, b, c). Iterative."""
    kind = type(e)
    out: list[Expression] = []
    stack: list[Expression] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, kind):
            stack.append(x.right)
            stack.append(x.left)
        else:
            out.append(x)
    return out


def _deeper(depth: int) -> int:
    if depth > MAX_DEPTH:
        raise ExpressionError(f"the expression nests too deeply (more than {MAX_DEPTH} levels of AND, OR and NOT; docs/PREDICATES.md, Limits)")
    return depth


# ------------------------------------------------------------------ rewriting
def rewrite_not(expr: Expression) -> Expression:
    """The same expression with every NOT pushed into the predicates (De Morgan), so a
    visitor that can only say "might match" never has to negate a "might". Iterative."""
    # (node, negate) to visit, or (kind, None) to build: Any, as the two shapes share a stack
    work: list[tuple[Any, bool | None]] = [(expr, False)]
    done: list[Expression] = []
    while work:
        e, negate = work.pop()
        if negate is None:  # build: the two operands are on top of ``done``
            right, left = done.pop(), done.pop()
            done.append(e(left, right))
        elif isinstance(e, Not):
            work.append((e.child, not negate))
        elif isinstance(e, (And, Or)):
            kind = (Or if isinstance(e, And) else And) if negate else type(e)
            work.append((kind, None))
            work.append((e.right, negate))
            work.append((e.left, negate))
        elif isinstance(e, Predicate):
            done.append(e.negate() if negate else e)
        elif isinstance(e, AlwaysTrue):
            done.append(FALSE if negate else TRUE)
        elif isinstance(e, AlwaysFalse):
            done.append(TRUE if negate else FALSE)
        else:
            raise TypeError(f"not an expression: {e!r}")
    return done[0]


def conjuncts(expr: Expression) -> list[Expression]:
    """The top-level AND terms of ``expr`` (itself when it is no AND)."""
    return operands(expr) if isinstance(expr, And) else [expr]


def predicates(expr: Expression) -> Iterator[Predicate]:
    """The expression's predicates, left to right, without recursion (deep trees)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (And, Or)):
            stack.append(e.right)
            stack.append(e.left)
        elif isinstance(e, Not):
            stack.append(e.child)
        elif isinstance(e, Predicate):
            yield e


def references(expr: Expression) -> list[Any]:
    """The distinct columns an expression names, in first-use order."""
    return list(dict.fromkeys(p.term for p in predicates(expr)))
