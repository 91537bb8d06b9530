"""``exact=True`` subsets for the lookups: importing this module registers the Ray job of
engine/runtime/subset.py with them (``engine.lookup.use_subset_runner``), which they cannot
import (they sit below the runtime). The openers above import it: engine.api, the CLI, Flight,
Spark. Importing it loads no Ray: the job module loads when a subset is first computed.
"""

from __future__ import annotations

from engine.expressions.tree import Expression
from engine.lookup import TableStatistics, use_subset_runner


def compute(ts: TableStatistics, where: Expression, columns: list[str] | None) -> TableStatistics:
    """The subset of ``ts``'s rows matching ``where``, computed (or from the cache) for ``columns``."""
    from engine.runtime.subset import compute_subset  # Ray: loaded when first asked

    return compute_subset(ts, where, columns)


use_subset_runner(compute)
