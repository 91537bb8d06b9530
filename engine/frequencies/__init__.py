"""Exact table-level frequencies by the distributed Bloom/Redis algorithm (docs/FREQUENCIES.md).

Pure kernels: :mod:`.keys` (values as Redis fields), :mod:`.hashing` (64-bit
value hashes), :mod:`.bloom` (a blocked Bloom filter), :mod:`.plan` (which
scenario a column takes). Edges: :mod:`.redis_ops` (namespaced keys and the
idempotent server-side scripts), :mod:`.coordinator` (the "monostore" Ray
actor that owns Redis and the Bloom filters), :mod:`.job` (the partition tasks
and the driver).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.lazy import attribute_loader

# Names load on first use (PEP 562): the job's modules import Ray and Redis, which
# engine.options (FrequencySettings, from .settings) and a job run in process never need.
if TYPE_CHECKING:
    from engine.frequencies.job import ColumnFrequencies, ColumnInput, FrequencyError, consolidate, start_coordinator, table_frequencies
    from engine.frequencies.plan import PartitionCounts
    from engine.frequencies.settings import FrequencySettings

_LAZY = {
    "ColumnFrequencies": "engine.frequencies.job",
    "ColumnInput": "engine.frequencies.job",
    "FrequencyError": "engine.frequencies.job",
    "consolidate": "engine.frequencies.job",
    "start_coordinator": "engine.frequencies.job",
    "table_frequencies": "engine.frequencies.job",
    "FrequencySettings": "engine.frequencies.settings",
    "PartitionCounts": "engine.frequencies.plan",
}

__all__ = [
    "ColumnFrequencies",
    "ColumnInput",
    "FrequencyError",
    "FrequencySettings",
    "PartitionCounts",
    "consolidate",
    "start_coordinator",
    "table_frequencies",
]

__getattr__ = attribute_loader(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
