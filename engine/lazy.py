"""A package's names loaded from their modules on first use (PEP 562 ``__getattr__``).

Why: the read-side commands must start fast (issue #20), and a package whose
``__init__`` imports every module it re-exports makes ``import engine.catalog`` load
rebuild, inheritance and the table sources that ``show`` never calls. The packages
that re-export lazily (engine.catalog, engine.expressions) share this one loader.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def attribute_loader(package: str, names: Mapping[str, str], namespace: dict[str, object]) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``: ``names`` maps each lazy name to its module; a
    loaded name is stored in ``namespace`` (the package's globals), so it is looked up once."""

    def load(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return load
