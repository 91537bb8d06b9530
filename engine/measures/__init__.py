"""The registry of statistics: each one a module of this package holding a ``Measure``
(engine/measures/base.py) named ``MEASURE``.

The column profile (engine/stats/profile.py), the partial state, the statistics file
layout, the subset merge and the previews iterate the registry, so a new statistic is
one module here plus its entry in docs/FORMAT.md. Modules are found by listing the
package (``base`` is the shape, not a statistic) and kept in name order, which is the
order of their columns in statistics.parquet.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import pyarrow as pa

from engine.measures.base import Measure

__all__ = ["Measure", "display", "measures", "names", "state_fields", "statistics_columns"]

_NOT_MEASURES = frozenset({"base"})


@cache
def measures() -> tuple[type[Measure], ...]:
    """Every registered statistic, in name order."""
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


def statistics_columns() -> tuple[pa.Field, ...]:
    """The statistics.parquet columns of the registered statistics, in file order."""
    return tuple(f for m in measures() for f in m.columns)


def state_fields() -> tuple[pa.Field, ...]:
    """The partial_state.arrow columns of the registered statistics (``<name>_<field>``)."""
    return tuple(f.with_name(f"{m.name}_{f.name}") for m in measures() for f in m.state_fields)


def display() -> tuple[tuple[str, str], ...]:
    """(statistics column, label) of every registered statistic the previews show."""
    return tuple(d for m in measures() for d in m.display)
