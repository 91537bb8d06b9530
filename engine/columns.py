"""The columns Metastore computes statistics for: top-level columns and struct leaves.

Structs are flattened to their leaf fields, named by joining the path with
``.`` (``address.city``); lists, maps and unions stay one column that is marked
unsupported. A leaf remembers its top-level column so reads project only that.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from engine.exceptions import InvalidArgumentError


@dataclass(frozen=True)
class LeafColumn:
    name: str  # name in the statistics files
    top: str  # top-level column to read
    path: tuple[str, ...]  # struct field path below `top`
    type: pa.DataType

    def extract(self, array: pa.Array) -> pa.Array:
        """This leaf's values from a batch of its top-level column (struct nulls become nulls)."""
        for name in self.path:
            array = pc.struct_field(array, name)
        return array


def leaf_columns(schema: pa.Schema) -> list[LeafColumn]:
    out: list[LeafColumn] = []

    def walk(top: str, path: tuple[str, ...], t: pa.DataType) -> None:
        if pt.is_struct(t) and t.num_fields:
            for i in range(t.num_fields):
                f = t.field(i)
                walk(top, path + (f.name,), f.type)
        else:
            out.append(LeafColumn(".".join((top,) + path), top, path, t))

    for f in schema:
        walk(f.name, (), f.type)
    return out


def select(leaves: list[LeafColumn], names: list[str] | None) -> list[LeafColumn]:
    """Leaves named (by leaf name or by top-level column), in table order."""
    if not names:
        return leaves
    wanted = set(names)
    known = {l.name for l in leaves} | {l.top for l in leaves}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidArgumentError(f"unknown column(s): {', '.join(map(repr, unknown))}")
    return [l for l in leaves if l.name in wanted or l.top in wanted]
