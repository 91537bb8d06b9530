"""The registry of statistics: each one a module of this package holding a ``Measure``
(engine/measures/base.py) named ``MEASURE``.

The column profile (engine/stats/profile.py), the partial state, the statistics file
layout, the subset merge and the previews iterate the registry, so a new statistic is
one module here plus its entry in docs/FORMAT.md. Modules are found by listing the
package (``base`` is the shape, not a statistic) and kept in name order, which is the
order of their columns in statistics.parquet after the built-in ones; a statistic from
before the registry (``column_after``, ``state_after``) keeps its columns' place instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import cache
from typing import Any

import pyarrow as pa

from engine.measures.base import Measure

__all__ = [
    "Measure",
    "configured",
    "display",
    "measures",
    "names",
    "statistics_columns",
    "with_state_fields",
    "with_statistics_columns",
]

_NOT_MEASURES = frozenset({"base"})


@cache
def measures() -> tuple[type[Measure[Any]], ...]:
    """Every registered statistic, in name order."""
    import pkgutil  # here: a lookup imports one statistic's module (moments' decode_sum), not the registry

    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _NOT_MEASURES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        measure = getattr(module, "MEASURE", None)
        if isinstance(measure, type) and issubclass(measure, Measure):
            found.append(measure)
    return tuple(found)


def names() -> tuple[str, ...]:
    return tuple(m.name for m in measures())


def configured() -> tuple[str, ...]:
    """The statistics the partial-state config names: those whose state is not in every
    partial state of version 1 (``Measure.state_after``)."""
    return tuple(m.name for m in measures() if m.state_after is None)


def statistics_columns() -> tuple[pa.Field, ...]:
    """The statistics.parquet columns of the registered statistics, in the registry's name
    order (their order in the file is ``with_statistics_columns``')."""
    return tuple(f for m in measures() for f in m.columns)


def with_statistics_columns(builtin: Sequence[pa.Field]) -> list[pa.Field]:
    """statistics.parquet's columns: the built-in ones with every registered statistic's
    placed (after its ``column_after``, else at the end in name order)."""
    return _placed(builtin, [(m.column_after, m.columns) for m in measures()])


def with_state_fields(builtin: Sequence[pa.Field]) -> list[pa.Field]:
    """partial_state.arrow's columns: the built-in ones with every registered statistic's
    state fields (``<name>_<field>``) placed (after its ``state_after``, else at the end)."""
    return _placed(builtin, [(m.state_after, tuple(f.with_name(f"{m.name}_{f.name}") for f in m.state_fields)) for m in measures()])


def _placed(builtin: Sequence[pa.Field], parts: Sequence[tuple[str | None, Sequence[pa.Field]]]) -> list[pa.Field]:
    """``builtin`` with each part's fields after the column it names (which may be another
    part's), then the parts that name none, in their order."""
    out = list(builtin)
    pending = [p for p in parts if p[0] is not None]
    while pending:
        names = [f.name for f in out]
        ready = [p for p in pending if p[0] in names]
        if not ready:
            raise ValueError(f"no column {pending[0][0]!r} to place a statistic's columns after")
        for after, fields in ready:
            i = [f.name for f in out].index(after) + 1
            out[i:i] = fields
        pending = [p for p in pending if p not in ready]
    out.extend(f for after, fields in parts if after is None for f in fields)
    return out


def display() -> tuple[tuple[str, str, str], ...]:
    """(statistics column, label, format) of every registered statistic the previews show, in
    name order; format as ``Measure.formats`` ("": the previews' number form)."""
    return tuple((column, label, m.formats.get(column, "")) for m in measures() for column, label in m.display)
