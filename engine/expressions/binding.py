"""Binding: an unbound expression against a table's Arrow schema.

Each column path is resolved to a column Metastore keeps statistics for (a
top-level column or a struct leaf), and each literal is converted to a value of
that column's type without loss: a number that does not fit (1.5 for an integer
column, 300 for int8, 1.005 for decimal(5, 2)) or a text that is not a value of
the type is an error naming the column, the type and the position, never rounded
or truncated. Floats are the one rounding: a float literal is the nearest value
at the column's width, as the text forms of docs/VALUE_FORMS.md are.

Literals of each kind (``tree.LiteralKind``):

- a quoted string or a bare word: the value itself for string columns; for every
  other type its text form (``'2024-10-01'``, ``'2024-01-01T12:00:00Z'`` for a
  zoned timestamp, ``'ff00'`` for binary);
- a number: integers, floats, decimals exactly; for dates, times, timestamps and
  durations the storage count of the type's unit;
- true / false: boolean columns only;
- a Python value or pyarrow scalar (the API): as ``pa.scalar(value, type)``, checked
  to round-trip exactly, or a str as above.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Hashable
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.columns import LEAF_SCHEMA_KEY, column_name, column_path
from engine.exceptions import ExpressionError, InvalidArgumentError
from engine.expressions.tree import (
    SET,
    UNARY,
    BoundLiteral,
    BoundReference,
    Expression,
    Literal,
    LiteralKind,
    Op,
    Predicate,
    Reference,
    predicates,
    reshape,
)
from engine.types import is_binary_like, is_exact_number, is_string_like


def bind(expr: Expression, schema: pa.Schema, text: str | None = None) -> Expression:
    """``expr`` with every predicate bound to ``schema``. ``text``: the source the
    expression was parsed from, for errors that point at a position.

    The result has its AND / OR chains balanced and double NOTs dropped (``tree.reshape``),
    so however deep the given tree, the bound one is shallow enough for the evaluators
    (which recurse); ExpressionError past ``tree.MAX_TERMS`` / ``tree.MAX_DEPTH``."""
    return reshape(expr, _Binder(schema, text).leaf)


def is_bound(expr: Expression) -> bool:
    return all(p.bound for p in predicates(expr))


def resolve(schema: pa.Schema, path: tuple[str, ...]) -> tuple[str, tuple[str, ...], pa.DataType] | None:
    """(statistics name, path, type) of the column at ``path``, or None.

    ``schema``: the table's Arrow schema, where a path walks struct fields from a
    top-level column; or the statistics' schema of leaf columns (``TableStatistics.schema``:
    one field per leaf, named by ``engine.columns.column_name``, so field ``x`` of struct
    ``s`` is ``s.x`` and a top-level column ``s.x`` is ``s\\.x``). The statistics name is
    ``column_name(path)`` either way. A path of several names that is no struct leaf also
    finds the top-level column of those names joined by dots (``qty.units`` written
    unquoted), so a name with dots needs quotes only where a struct path of that spelling
    exists.
    """
    found = _resolve_path(schema, path)
    if found is None and len(path) > 1:
        found = _resolve_path(schema, (".".join(path),))
    if found is None:
        return None
    return column_name(found[0]), found[0], found[1]


def _resolve_path(schema: pa.Schema, path: tuple[str, ...]) -> tuple[tuple[str, ...], pa.DataType] | None:
    if _is_leaf_schema(schema):
        idx = schema.get_field_index(column_name(path))
        return (path, schema.field(idx).type) if idx >= 0 else None
    fields: Any = schema
    t: pa.DataType | None = None
    for i, part in enumerate(path):
        idx = fields.get_field_index(part) if isinstance(fields, pa.Schema) else _struct_index(fields, part)
        if idx < 0:
            return None
        t = fields.field(idx).type
        if i < len(path) - 1:
            if not mt.is_struct(t):
                return None
            fields = t
    return (path, t) if t is not None else None


def top_level_names(schema: pa.Schema) -> list[str]:
    """The names of ``schema``'s top-level columns, as in the data (of a schema of leaf
    columns: each leaf's first path component, once)."""
    if not _is_leaf_schema(schema):
        return list(schema.names)
    return list(dict.fromkeys(column_path(n)[0] for n in schema.names))


def _is_leaf_schema(schema: pa.Schema) -> bool:
    """Whether ``schema`` is a statistics schema of leaf columns (engine.columns.LEAF_SCHEMA_KEY)."""
    return bool(schema.metadata) and schema.metadata.get(LEAF_SCHEMA_KEY) is not None


def _struct_index(t: pa.StructType, name: str) -> int:
    try:
        return t.get_field_index(name)
    except (KeyError, ValueError):
        return -1


def shown(ref: BoundReference) -> str:
    """A bound column as errors name it: ``'price'``, ``'address.city'``, and a name with a
    dot as the language quotes it (``'"qty.units"'``)."""
    plain = all("." not in p and "\\" not in p for p in ref.path)
    return repr(".".join(ref.path) if plain else str(ref))


#: literal kinds whose values (str, bool) make a predicate's binding a function of its text
_TEXT_KINDS = frozenset({LiteralKind.STRING, LiteralKind.NUMBER, LiteralKind.BOOLEAN})


class _Binder:
    def __init__(self, schema: pa.Schema, text: str | None) -> None:
        self.schema = schema
        self.text = text
        # a long chain repeats columns and often whole predicates: each is resolved and bound once
        self._columns: dict[tuple[str, ...], tuple[str, tuple[str, ...], pa.DataType] | None] = {}
        self._bound: dict[Hashable, Predicate] = {}

    def error(self, message: str, position: int) -> ExpressionError:
        return ExpressionError(message, position if self.text is not None else -1, self.text)

    def leaf(self, e: Expression) -> Expression:
        if not isinstance(e, Predicate) or e.bound:
            return e
        key: Hashable = id(e)  # the same object (an API caller's repeated term): alive while binding
        if all(isinstance(lit, Literal) and lit.kind in _TEXT_KINDS for lit in e.literals):
            key = (e.op, e.term, tuple((lit.kind, lit.value) for lit in e.literals))  # the same text
        got = self._bound.get(key)
        if got is None:
            got = self._bound[key] = self.predicate(e)
        return got

    def predicate(self, p: Predicate) -> Predicate:
        if p.bound:
            return p
        ref = p.term
        assert isinstance(ref, Reference)
        if ref.path not in self._columns:
            self._columns[ref.path] = resolve(self.schema, ref.path)
        found = self._columns[ref.path]
        if found is None:
            raise self.error(f"unknown column {str(ref)!r}{self._hint(ref)}", ref.position)
        name, path, t = found
        t = mt.without_dictionary(t)
        bref = BoundReference(name, path, t)
        if mt.is_struct(t) or mt.is_list(t) or mt.is_large_list(t) or mt.is_map(t) or not value_forms.has_text_form(t):
            if p.op in (Op.IS_NULL, Op.NOT_NULL) and not mt.is_struct(t):
                return Predicate(p.op, bref)
            what = "a struct: name one of its fields (parent.child)" if mt.is_struct(t) else "no comparable values"
            raise self.error(f"column {shown(bref)} ({t}) has {what}", ref.position)
        if p.op in (Op.IS_NAN, Op.NOT_NAN) and not mt.is_floating(t):
            raise self.error(f"{p.op.value} needs a float column; {shown(bref)} is {t} (it holds no NaN)", ref.position)
        if p.op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH) and not (is_string_like(t) or is_binary_like(t)):
            raise self.error(f"{p.op.value} needs a string or binary column; {shown(bref)} is {t}", ref.position)
        if p.op in UNARY:
            return Predicate(p.op, bref)
        lits = []
        seen = set()
        for lit in p.literals:
            b = self.literal(lit, bref)
            key = _dedupe_key(b.value)
            if p.op in SET and key in seen:
                continue
            seen.add(key)
            lits.append(b)
        return Predicate(p.op, bref, tuple(lits))

    def _hint(self, ref: Reference) -> str:
        leaf = _is_leaf_schema(self.schema)
        wanted = column_name(ref.path).lower()
        for f in self.schema:
            path = column_path(f.name) if leaf else (f.name,)
            if column_name(path).lower() == wanted:
                return f" (did you mean {str(Reference(path))!r}? names are case-sensitive)"
        if len(ref.path) == 1 and "." in ref.path[0]:
            return " (a quoted name is one column; write parent.child for a struct field)"
        return ""

    def literal(self, lit: object, ref: BoundReference) -> BoundLiteral:
        if isinstance(lit, BoundLiteral):
            return lit
        if not isinstance(lit, Literal):
            lit = Literal(LiteralKind.PYTHON, lit)
        t = ref.type
        try:
            scalar = _convert(lit, t)
        except _Mismatch as exc:
            hint = f" (quote strings: {str(lit)!r})" if is_string_like(t) and lit.kind is LiteralKind.NUMBER else exc.hint
            raise self.error(f"{exc} column {shown(ref)} ({t}){hint}", lit.position) from None
        except (InvalidArgumentError, pa.ArrowException, TypeError, ValueError, OverflowError, InvalidOperation) as exc:
            what = str(lit) if lit.kind is not LiteralKind.PYTHON else repr(lit.value)
            raise self.error(f"{what} is not a value of column {shown(ref)} ({t}): {_one_line(exc)}", lit.position) from None
        text = value_forms.encode_scalar(scalar)
        assert text is not None
        return BoundLiteral(scalar, comparable(scalar), text)


class _Mismatch(Exception):
    """A literal of the wrong kind for the column (its message is completed by the binder)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def _convert(lit: Literal, t: pa.DataType) -> pa.Scalar:
    kind, v = lit.kind, lit.value
    if kind is LiteralKind.PYTHON:
        return _from_python(v, t)
    if kind is LiteralKind.BOOLEAN:
        if not mt.is_boolean(t):
            raise _Mismatch(f"the boolean {lit} does not fit")
        return pa.scalar(bool(v), t)
    if kind is LiteralKind.STRING:
        if is_string_like(t):
            return pa.scalar(v, t)
        return value_forms.decode_scalar(v, t)
    # a number
    if is_string_like(t) or is_binary_like(t) or mt.is_boolean(t):
        raise _Mismatch(f"the number {v} does not fit")
    return _from_number(v, t)


def _from_number(text: str, t: pa.DataType) -> pa.Scalar:
    if mt.is_floating(t):
        return _finite(value_forms.decode_scalar(_float_text(text), t), text)
    if text.lower() in ("nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"):
        raise _Mismatch(f"{text} is a float and does not fit")
    d = Decimal(text)
    if mt.is_decimal(t):
        scalar = pa.scalar(d, t)  # pyarrow refuses a rescale that loses digits and a precision overflow
        if scalar.as_py() != d:
            raise _Mismatch(f"{text} does not fit exactly")
        return scalar
    if d != d.to_integral_value():
        raise _Mismatch(f"{text} is not a whole number and does not fit")
    n = int(d)
    if mt.is_integer(t):
        return pa.scalar(n, t)
    if mt.is_temporal(t):  # the storage count of the type's unit
        storage = pa.int32() if mt.is_temporal32(t) else pa.int64()
        return pa.array([n], storage).view(t)[0]
    raise _Mismatch(f"the number {text} does not fit")


def _finite(scalar: pa.Scalar, text: str) -> pa.Scalar:
    """``scalar``, unless a finite number became infinite at the column's width (1e400, or
    1e39 for float32): an error, as in the parser and Flight's JSON, never a silent inf."""
    if math.isinf(scalar.as_py()) and _float_text(text) not in ("inf", "-inf"):
        raise _Mismatch(f"number {text if len(text) <= 40 else text[:39] + '…'} is out of the range of")
    return scalar


def _float_text(text: str) -> str:
    low = text.lower().lstrip("+")
    return {"infinity": "inf", "-infinity": "-inf"}.get(low, low)


def _from_python(v: Any, t: pa.DataType) -> pa.Scalar:
    if isinstance(v, pa.Scalar):
        if v.type == t:
            return v
        out = v.cast(t)
        if out.cast(v.type) != v:
            raise _Mismatch(f"{v} does not fit exactly")
        return out
    if isinstance(v, str) and not is_string_like(t):
        return value_forms.decode_scalar(v, t)
    if v is None:
        raise _Mismatch("None (null) never equals a value of", "; use IS NULL / IS NOT NULL")
    if is_string_like(t) and not isinstance(v, str):
        raise _Mismatch(f"{v!r} is not a string and does not fit")
    if isinstance(v, bool) != mt.is_boolean(t):
        raise _Mismatch(f"{v!r} does not fit")
    if isinstance(v, float) and is_exact_number(t):
        if not math.isfinite(v) or v != int(v) or mt.is_decimal(t):
            return _from_number(repr(v), t) if math.isfinite(v) else _raise(f"{v!r} does not fit")
        v = int(v)
    if isinstance(v, (int, float)) and mt.is_floating(t):
        text = repr(float(v)) if isinstance(v, float) else str(v)
        return _finite(value_forms.decode_scalar(_float_text(text), t), text)
    if isinstance(v, int) and mt.is_temporal(t):
        return _from_number(str(v), t)
    if isinstance(v, Decimal) and not mt.is_decimal(t):
        return _from_number(str(v), t)
    scalar = pa.scalar(v, t)
    if isinstance(v, (int, Decimal)) and scalar.as_py() != v:
        raise _Mismatch(f"{v!r} does not fit exactly")
    if isinstance(v, dt.datetime) and mt.is_timestamp(t) and (v.tzinfo is None) != (t.tz is None):
        raise _Mismatch(f"{v!r} is {'naive' if v.tzinfo is None else 'zoned'}, the column is not, and does not fit")
    return scalar


def _raise(message: str) -> pa.Scalar:
    raise _Mismatch(message)


def comparable(scalar: pa.Scalar) -> Any:
    """A Python value that orders like the column's values: temporal values as their
    storage count (exact for nanoseconds), floats as float (NaN kept: callers refuse or
    skip it), binaries as bytes, everything else ``as_py()``; a null is None. The one such
    form: predicates' literals, stored bounds and the Flight service's histogram bounds."""
    t = scalar.type
    if not scalar.is_valid:
        return None
    if mt.is_temporal(t):
        storage = pa.int32() if mt.is_temporal32(t) else pa.int64()
        return pa.array([scalar], t).view(storage)[0].as_py()
    if mt.is_floating(t):
        return float(scalar.as_py())
    if is_binary_like(t):
        return bytes(scalar.as_py())
    return scalar.as_py()


def _dedupe_key(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and value == 0:
        return ("zero", math.copysign(1, value))
    return value


def _one_line(exc: BaseException) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
