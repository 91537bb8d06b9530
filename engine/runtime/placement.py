"""Where a job's tasks run: on Ray, or in this process (the in-process executor).

Starting a local Ray costs seconds (5-10 s on a quiet 2-core machine, more on a loaded
one) and the work of a small table milliseconds, so ``auto`` (the default: ``--runtime``,
``METASTORE_RUNTIME``) runs a small table's tasks in this process, one after the other,
without importing Ray. The task functions, their order and the files they write are
the same either way (tests/engine/test_runtime_choice.py compares the bytes).

``auto`` takes Ray when any of these holds, in this order:

1. this process already runs Ray (a server, a notebook that analyzed before): no start to save;
2. ``RAY_ADDRESS`` names a cluster: the user asked for its nodes;
3. the job needs Ray: the ``redis`` frequency strategy (its coordinator is a Ray actor);
4. the table is not small: more than :data:`LOCAL_MAX_BYTES` of data files, or more than
   :data:`LOCAL_MAX_ROWS` rows (counted from the listing or footers, where known).

Otherwise this process. docs/SCALING.md ("When Ray starts") says the same for users.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine import config
from engine.exceptions import InvalidArgumentError
from engine.options import Runtime
from engine.runtime.ray_runtime import ray_running
from engine.sources.base import Partition

#: a table of at most this many bytes of data files runs in this process under ``auto``:
#: its work (~1-2 s of one core at 64 MiB of Parquet) stays below what starting Ray costs
LOCAL_MAX_BYTES = 64 * 1024 * 1024
#: ... and of at most this many rows (where the listing or the footers know them)
LOCAL_MAX_ROWS = 2_000_000


def requested(runtime: Runtime | str | None) -> Runtime:
    """The runtime asked for: ``runtime`` when given (an option), else ``METASTORE_RUNTIME``, else auto."""
    if runtime is not None and Runtime.parse(runtime) is not Runtime.AUTO:
        return Runtime.parse(runtime)
    named = config.get(config.RUNTIME)
    if named is None:
        return Runtime.AUTO
    try:
        return Runtime(named.lower())
    except ValueError:
        raise InvalidArgumentError(f"{config.RUNTIME.name} must be one of {', '.join(r.value for r in Runtime)}, not {named!r}") from None


def is_small(partitions: Sequence[Partition]) -> bool:
    """At most LOCAL_MAX_BYTES of data files and (where known) LOCAL_MAX_ROWS rows."""
    if sum(p.size for p in partitions) > LOCAL_MAX_BYTES:
        return False
    return sum(p.row_count or 0 for p in partitions) <= LOCAL_MAX_ROWS


def choose(runtime: Runtime | str | None, partitions: Sequence[Partition], needs_ray: bool = False) -> Runtime:
    """RAY or LOCAL for a job over ``partitions`` (``needs_ray``: a part of the job only Ray runs)."""
    asked = requested(runtime)
    if asked is not Runtime.AUTO:
        return asked
    if needs_ray or ray_running() or config.get(config.RAY_ADDRESS):
        return Runtime.RAY
    return Runtime.LOCAL if is_small(partitions) else Runtime.RAY
