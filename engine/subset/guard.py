"""Who may compute a subset, and how much: the hook a server sets around a request
(docs/reference/FLIGHT.md, "Exact subsets").

``compute_subset`` (engine/runtime/subset.py) asks the guard of the current context before it
runs a job (``computing``: may refuse, raising, or wait; the job runs inside it) and tells it
when a cached entry answered (``used``). Without a guard (the API, the CLI: the user's own
data in the user's own process) nothing is limited. A context variable, so each request
thread of a server carries its own client's guard through the lookups that reach the job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["SubsetGuard", "current", "guarded"]


class SubsetGuard(Protocol):
    def computing(self, table: str, root: str) -> AbstractContextManager[None]:
        """Around the job computing a subset of ``table`` into the predicate's directory ``root``."""
        ...

    def used(self, table: str, root: str) -> None:
        """A cached entry under ``root`` answered."""
        ...


_GUARD: ContextVar[SubsetGuard | None] = ContextVar("metastore_subset_guard", default=None)


def current() -> SubsetGuard | None:
    return _GUARD.get()


@contextlib.contextmanager
def guarded(guard: SubsetGuard | None) -> Iterator[None]:
    """``guard`` for the computations started in this context (None: none)."""
    token = _GUARD.set(guard)
    try:
        yield
    finally:
        _GUARD.reset(token)
