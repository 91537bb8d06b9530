"""Exact table-level frequencies by the distributed Bloom/Redis algorithm (docs/FREQUENCIES.md).

Pure kernels: :mod:`.keys` (values as Redis fields), :mod:`.hashing` (64-bit
value hashes), :mod:`.bloom` (a blocked Bloom filter), :mod:`.plan` (which
scenario a column takes). Edges: :mod:`.redis_ops` (namespaced keys and the
idempotent server-side scripts), :mod:`.coordinator` (the "monostore" Ray
actor that owns Redis and the Bloom filters), :mod:`.job` (the partition tasks
and the driver).
"""

from engine.frequencies.job import ColumnFrequencies, ColumnInput, FrequencyError, consolidate, start_coordinator, table_frequencies
from engine.frequencies.plan import FrequencySettings, PartitionCounts

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
