"""User statistics by reference: where a statistic's definition lives, recorded when a table is
analyzed, so that another process (the CLI's ``show --exact``, a Flight server) computes the
table's own user statistics over a subset (docs/SUBSETS.md, "The table's user statistics").

A reference is ``module:attribute``, the module-level name a :class:`UserStatistic` is bound
to (``engine.stats.user:ZERO_COUNT``). A statistic defined in ``__main__`` (a script, a
notebook) or not bound to a module's top-level name has none: only a process that registers
it can compute it.

Loading imports the named module, which must be installed where the reader runs, and takes
the attribute only if it is a :class:`UserStatistic` of the recorded name: a store names
code, it never carries any (no pickle).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.stats.user import UserStatistic, registered

__all__ = ["PROPERTY", "Resolved", "UnavailableStatistic", "load", "reference_of", "resolve"]

#: the table property (catalog state) recording name -> reference of each user statistic that has one
PROPERTY = "user_statistic_definitions"

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")

#: the shipped statistics, for tables analyzed before references were recorded
SHIPPED = {
    "zero_count": "engine.stats.user:ZERO_COUNT",
    "top1_share": "engine.stats.user:TOP1_SHARE",
    "tdigest_sketch": "engine.stats.tdigest:TDIGEST",
}


class UnavailableStatistic(Exception):
    """A user statistic whose definition cannot be had here; the message says why."""


def reference_of(stat: UserStatistic) -> str | None:
    """``module:attribute`` of the module-level name ``stat`` is bound to (searched in the modules
    of its functions), or None (defined in ``__main__`` or not at a module's top level)."""
    seen: set[str] = set()
    for fn in (stat.compute, stat.merge, stat.finalize, stat.compute_counts, stat.serialize, stat.deserialize, stat.applies_to):
        module = getattr(fn, "__module__", None)
        if not module or module in seen or "__main__" in module.split("."):
            continue
        seen.add(module)
        found = sys.modules.get(module)
        for name, value in vars(found).items() if found is not None else ():
            if value is stat and name.isidentifier():
                return f"{module}:{name}"
    return None


def load(reference: str, name: str) -> UserStatistic:
    """The statistic ``reference`` names, which must be a UserStatistic called ``name``;
    UnavailableStatistic (one line) otherwise."""
    module, _, attribute = reference.partition(":")
    if not _MODULE.match(module) or not attribute.isidentifier() or "__main__" in module.split("."):
        raise UnavailableStatistic(f"its recorded definition {reference[:200]!r} is not a module:attribute reference")
    try:
        found = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the reason, in one line
        detail = " ".join(str(exc).split())[:200]
        raise UnavailableStatistic(f"its definition {reference} cannot be imported here: {type(exc).__name__}: {detail}") from None
    stat = getattr(found, attribute, None)
    if not isinstance(stat, UserStatistic):
        raise UnavailableStatistic(f"its definition {reference} is not a UserStatistic")
    if stat.name != name:
        raise UnavailableStatistic(f"its definition {reference} is now the statistic {stat.name!r}")
    return stat


@dataclass(frozen=True)
class Resolved:
    """A table's user statistics as this process can compute them."""

    statistics: list[UserStatistic]
    unavailable: dict[str, str] = field(default_factory=dict)  # name -> why it cannot be computed here


def resolve(names: Sequence[str], references: Mapping[str, str] | None = None) -> Resolved:
    """The statistics ``names`` (a table's, in its order): by the table's recorded reference,
    else as this process registered them, else the shipped one of that name; the others
    with the reason they cannot be computed."""
    references = references or {}
    by_name = {u.name: u for u in registered()}
    found: list[UserStatistic] = []
    unavailable: dict[str, str] = {}
    for name in names:
        reason = None
        ref = references.get(name) or SHIPPED.get(name)
        if ref is not None:
            try:
                found.append(load(ref, name))
                continue
            except UnavailableStatistic as exc:
                reason = str(exc)
        if name in by_name:
            found.append(by_name[name])
            continue
        unavailable[name] = reason or (
            "its definition was not recorded when the table was analyzed (defined in __main__ or not at a module's "
            "top level) and this process has not registered it"
        )
    return Resolved(found, unavailable)
