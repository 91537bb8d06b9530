"""Lookups that read only what they return: ``TableStatistics`` (``open_statistics``).

Statistics files are immutable (unique paths per job), so their Parquet footers are cached
per process by URI and never invalidated; a lookup then reads only the row groups and the
projected columns it needs.

- ``files``: the open files, checksums checked on a file's first read, the row-group and
  merged-segment caches (``clear_cache``, ``forget``, ``cache_info``);
- ``reader``: ``StatisticsReader``, the reader core: the published state, statistics,
  frequencies (segments merged), histograms, and ``where=`` answered by engine/subset;
- ``pruning``: the partitions (and files) a predicate might match;
- ``valueparts``: which partitions hold a value (``value_partitions``);
- ``table``: ``TableStatistics``, the core with those views, the review and the notebook
  view (``use_notebook_view``), and ``open_statistics``.

The lookups import neither the runtime nor the UI: ``exact=True`` subsets are computed by the
runner engine/runtime/exact.py registers (``use_subset_runner``; the openers above import it:
engine.api, the CLI's ``show --exact``, Flight, Spark) and the notebook drawn by the view engine.api registers
(``use_notebook_view``: engine/ui/notebook.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy import attribute_loader
from engine.lookup.files import cache_info, clear_cache, damaged, forget
from engine.lookup.reader import PartitionInfo, StatisticsReader, struct_fields_hint, use_subset_runner
from engine.lookup.table import NotebookView, TableStatistics, open_statistics, use_notebook_view, value_partitions
from engine.measures.moments import decode_sum

# pruning's and value partitions' names load on first use (PEP 562): `metastore show` and a
# lookup of statistics need neither module (start-up, issue #30)
if TYPE_CHECKING:
    from engine.lookup.pruning import PartitionMatch, PartitionPruning
    from engine.lookup.valueparts import ABSENT, AT_MOST_ONCE, FOUND, RESOLVE_CANDIDATES, ValuePartitions

_LAZY = {
    "PartitionMatch": "engine.lookup.pruning",
    "PartitionPruning": "engine.lookup.pruning",
    "ABSENT": "engine.lookup.valueparts",
    "AT_MOST_ONCE": "engine.lookup.valueparts",
    "FOUND": "engine.lookup.valueparts",
    "RESOLVE_CANDIDATES": "engine.lookup.valueparts",
    "ValuePartitions": "engine.lookup.valueparts",
}

__getattr__ = attribute_loader(__name__, _LAZY, globals())

__all__ = [
    "ABSENT",
    "AT_MOST_ONCE",
    "FOUND",
    "RESOLVE_CANDIDATES",
    "NotebookView",
    "PartitionInfo",
    "PartitionMatch",
    "PartitionPruning",
    "StatisticsReader",
    "TableStatistics",
    "ValuePartitions",
    "cache_info",
    "clear_cache",
    "damaged",
    "decode_sum",
    "forget",
    "open_statistics",
    "struct_fields_hint",
    "use_notebook_view",
    "use_subset_runner",
    "value_partitions",
]
