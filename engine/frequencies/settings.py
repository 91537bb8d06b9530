"""The knobs of the distributed frequency algorithm (:class:`FrequencySettings`), in a module of
their own that imports nothing heavy: engine.options holds them, and the console and the Flight
client import engine.options for the analyze defaults at start-up (no numpy, no pyarrow)."""

from __future__ import annotations

from dataclasses import dataclass

#: The most fields one Redis hash holds.
REDIS_HASH_LIMIT = 2**32 - 1


@dataclass(frozen=True)
class FrequencySettings:
    """Knobs of the distributed frequency algorithm (all have sane defaults)."""

    #: a partition with distinct / non-null >= this is "almost all distinct"
    distinct_ratio: float = 0.99
    #: fields per Redis hash; a setting so tests reach the batched path with small data
    hash_limit: int = REDIS_HASH_LIMIT
    #: target false-positive rate of the Bloom filter
    bloom_fpr: float = 0.001
    #: the most memory one column's Bloom filter may take in the coordinator
    bloom_max_bytes: int = 64 * 2**20
    #: consolidate hash-ordered string/binary counts by their 8-byte theta hashes (then resolve
    #: the stored ones to values); False sends the values' bytes (the exact fallback on a collision)
    hash_fields: bool = True
    #: values per streamed batch (one server-side script call or one filter update)
    batch_size: int = 50_000
    #: hashes per call to the coordinator's Bloom filter (8 bytes each; fewer, larger actor calls)
    bloom_batch_size: int = 1 << 20
    #: values per partition sampled for the batched path's split points
    sample_size: int = 1_000
    #: times a column's stage is rerun after the coordinator or Redis lost its state
    max_attempts: int = 3
    #: fewer distinct values than this never take the Bloom path (small columns keep complete frequencies)
    min_bloom_distinct: int = 1024
    #: fault injection for tests: a partition task exits after this many batches, once (marker file)
    crash_after_batches: int = 0
    crash_marker: str = ""

    def __post_init__(self) -> None:
        if not 0 < self.distinct_ratio <= 1:
            raise ValueError(f"distinct_ratio must be in (0, 1], got {self.distinct_ratio}")
        if self.hash_limit < 1:
            raise ValueError(f"hash_limit must be positive, got {self.hash_limit}")
        if not 0 < self.bloom_fpr < 1:
            raise ValueError(f"bloom_fpr must be in (0, 1), got {self.bloom_fpr}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
