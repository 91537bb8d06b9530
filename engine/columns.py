"""The columns Metastore computes statistics for: top-level columns and struct leaves.

A column is a *path*: the top-level column, then the struct fields below it.
Paths are sequences, never dotted strings: a top-level column named ``s.x`` and
field ``x`` of a struct ``s`` are the paths ``("s.x",)`` and ``("s", "x")``. The
statistics files store a path as one text (the ``column`` name,
:func:`column_name`): the components joined by ``.``, with a ``.`` or ``\\``
inside a component escaped by a ``\\``, so ``s\\.x`` and ``s.x``. Names without
dots or backslashes (nearly all) are stored as they are; :func:`column_path` reads
a name back into its path. Lists, maps and unions stay one column that is marked
unsupported. A leaf remembers its top-level column so reads project only that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.exceptions import InvalidArgumentError


def _escape(component: str) -> str:
    return component.replace("\\", "\\\\").replace(".", "\\.")


def column_name(path: Sequence[str]) -> str:
    """The stored text form of a column path (``("s", "x")`` -> ``s.x``, ``("s.x",)`` -> ``s\\.x``)."""
    if isinstance(path, str):
        raise TypeError("column_name takes a path (a sequence of names), not a str")
    if not path:
        raise InvalidArgumentError("a column path has at least one component")
    return ".".join(_escape(c) for c in path)


#: schema metadata marking a schema of leaf columns named by :func:`column_name` (the statistics'
#: schema, ``TableStatistics.schema``): the predicate binder then reads ``s\\.x`` as the
#: top-level column ``s.x`` and ``s.x`` as field ``x`` of struct ``s``
LEAF_SCHEMA_KEY = b"metastore.leaf_names"


def mark_leaf_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` (one field per leaf column, named by :func:`column_name`) marked as such."""
    return schema.with_metadata({**(schema.metadata or {}), LEAF_SCHEMA_KEY: b"1"})


def column_path(name: str) -> tuple[str, ...]:
    """The path a stored column name stands for (the inverse of :func:`column_name`).

    A backslash before any character keeps that character; an unescaped dot
    separates components. (A trailing lone backslash is kept as it is.)
    """
    parts: list[str] = []
    cur: list[str] = []
    i, n = 0, len(name)
    while i < n:
        ch = name[i]
        if ch == "\\" and i + 1 < n:
            cur.append(name[i + 1])
            i += 2
            continue
        if ch == ".":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return tuple(parts)


#: What joins a struct leaf's path in its display form: ``s > x`` (field ``x`` of struct ``s``).
LEAF_SEPARATOR = " > "


def display_name(column: str | Sequence[str]) -> str:
    """The name people (and JSON consumers) read: a column as it is in the data.

    Takes the stored name (``qty\\.units``, ``s.x``) or a path. A top-level column is its
    name as in the data (``qty.units``, never the storage form ``qty\\.units``); a struct
    leaf is its path joined by :data:`LEAF_SEPARATOR` (``s > x``), so it is told apart from
    a top-level column literally named ``s.x``. JSON documents add the path as a list.
    """
    path = column_path(column) if isinstance(column, str) else tuple(column)
    return LEAF_SEPARATOR.join(path)


def display_path(column: str | Sequence[str]) -> list[str]:
    """The path of a column (stored name or path) as a list: the unambiguous form in JSON documents."""
    return list(column_path(column) if isinstance(column, str) else column)


def parse_display_name(text: str) -> tuple[str, ...] | None:
    """The path a display form of a struct leaf stands for (``s > x`` -> ``("s", "x")``), None for a name without the separator."""
    if LEAF_SEPARATOR not in text:
        return None
    return tuple(text.split(LEAF_SEPARATOR))


@dataclass(frozen=True)
class LeafColumn:
    name: str  # name in the statistics files: column_name((top, *path)), unique in a table
    top: str  # top-level column to read
    path: tuple[str, ...]  # struct field path below `top`
    type: pa.DataType

    @property
    def full_path(self) -> tuple[str, ...]:
        return (self.top, *self.path)

    def extract(self, array: pa.Array) -> pa.Array:
        """This leaf's values from a batch of its top-level column (struct nulls become nulls)."""
        for name in self.path:
            array = pc.struct_field(array, name)
        return array


def leaf_columns(schema: pa.Schema) -> list[LeafColumn]:
    out: list[LeafColumn] = []

    def walk(top: str, path: tuple[str, ...], t: pa.DataType) -> None:
        if mt.is_struct(t) and t.num_fields:
            for i in range(t.num_fields):
                f = t.field(i)
                walk(top, path + (f.name,), f.type)
        else:
            out.append(LeafColumn(column_name((top, *path)), top, path, t))

    for f in schema:
        walk(f.name, (), f.type)
    return out


def select(leaves: list[LeafColumn], names: list[str] | None) -> list[LeafColumn]:
    """Leaves named by leaf name (the stored text form), by path (a tuple), or by top-level
    column (its name as in the data, selecting every leaf below it), or by a struct leaf's
    display form (``s > x``, :func:`display_name`), in table order.

    A leaf name wins over a top-level name: with a top-level column ``s.x`` and a struct
    ``s`` with field ``x``, ``"s.x"`` is the struct's field, ``"s\\.x"`` or ``("s.x",)``
    the top-level column.
    """
    if not names:
        return leaves
    by_name = {l.name: l for l in leaves}
    by_display = {display_name(l.full_path): l for l in leaves if l.path}  # "s > x": what people read
    tops: dict[str, list[LeafColumn]] = {}
    for l in leaves:
        tops.setdefault(l.top, []).append(l)
    wanted: set[str] = set()
    unknown = []
    for n in names:
        if not isinstance(n, str):
            n = column_name(tuple(n))
        if n in by_name:
            wanted.add(n)
        elif n in tops:
            wanted.update(l.name for l in tops[n])
        elif n in by_display:
            wanted.add(by_display[n].name)
        else:
            unknown.append(n)
    if unknown:
        raise InvalidArgumentError(f"unknown column(s): {', '.join(map(repr, unknown))}")
    return [l for l in leaves if l.name in wanted]
