"""The options of an analyze job, validated once, wherever the job is started from.

The API, the CLI, Spark and the Flight ``analyze`` action all build one
:class:`AnalyzeOptions` and hand it to :func:`engine.runtime.analyze.analyze_source`; a bad
value is refused here, before a table is opened or a task starts, with the same
message whichever entry point it came through.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeVar

from engine.exceptions import InvalidArgumentError, UnsupportedOptionsError
from engine.frequencies.settings import FrequencySettings

_E = TypeVar("_E", bound=enum.Enum)


def _parse(cls: type[_E], value: _E | str, what: str) -> _E:
    """``value`` as a member of the option enum ``cls``; else an error naming ``what`` and the choices."""
    try:
        return cls(value)
    except ValueError:
        raise InvalidArgumentError(f"{what} must be one of {', '.join(str(s.value) for s in cls)}, not {value!r}") from None


class FrequencyStrategy(str, enum.Enum):
    """How table-level frequencies of discrete columns are consolidated (docs/FREQUENCIES.md)."""

    #: Ray tasks merge the partitions' value counts (the default: faster on every measured case)
    REDUCE = "reduce"
    #: the Bloom filter / Redis hash algorithm (engine/frequencies)
    REDIS = "redis"

    @classmethod
    def parse(cls, value: FrequencyStrategy | str) -> FrequencyStrategy:
        return _parse(cls, value, "frequencies")


#: the histogram sizes a job may ask for
ALLOWED_BINS = (1000, 10000)


class Runtime(str, enum.Enum):
    """Where a job's tasks run (docs/SCALING.md, "When Ray starts")."""

    #: this process when the table is small and no Ray runs here (engine/runtime/placement.py), else Ray
    AUTO = "auto"
    #: Ray: started in this process, or the cluster RAY_ADDRESS names
    RAY = "ray"
    #: this process, one task after the other: Ray is neither started nor imported
    LOCAL = "local"

    @classmethod
    def parse(cls, value: Runtime | str) -> Runtime:
        return _parse(cls, value, "runtime")


@dataclass(frozen=True)
class AnalyzeOptions:
    """Every option of an analyze job with its default: the one place the defaults are
    written (the entry points' keyword defaults read them from here, ``AnalyzeOptions.bins``)."""

    bins: int = 1000  # requested bins per histogram
    #: a table-level column with distinct/non-null >= this ratio stores only duplicates
    mostly_distinct_ratio: float = 0.5
    batch_size: int = 128 * 1024
    #: top-level columns read per pass over a partition (bounds task memory)
    columns_per_pass: int = 64
    #: how table-level frequencies are consolidated; a string is accepted and parsed
    frequencies: FrequencyStrategy = FrequencyStrategy.REDUCE
    #: an existing Redis for the "redis" strategy (None: the coordinator starts its own)
    redis_url: str | None = None
    frequency_settings: FrequencySettings = field(default_factory=FrequencySettings)
    #: keep the statistics of partitions unchanged since the last analyze (docs/CATALOG.md)
    inherit: bool = True
    #: profile the discrete columns of every partition first, the other columns in a second
    #: wave, so the table reductions overlap the second wave (False: one task per partition)
    two_waves: bool = True
    #: table-level frequencies also keep each stored value's distribution over the partitions
    #: (engine/stats/valuepartitions.py, docs/FREQUENCIES.md); "reduce" strategy only
    value_partitions: bool = False
    #: a per-data-file column index for file pruning, built by the partition tasks from the
    #: files' footers or manifests (engine/fileindex, docs/FORMAT.md "File index"; every format)
    file_index: bool = True
    #: the columns that get per-file Bloom filters: none by default (they read the columns'
    #: values: measured median +65% task CPU on a 1,000,000-row sample table with its four
    #: high-cardinality columns filtered, docs/FORMAT.md); None: each partition's high-cardinality
    #: columns. A re-analyze with other ones builds inherited partitions' filters too
    bloom_columns: tuple[str, ...] | None = ()
    bloom_fpr: float = 0.01
    #: how often Ray reruns a task of the job whose worker or node died (Ray's own default, 3);
    #: a task that fails with an error of its own is never retried
    task_retries: int = 3
    #: small partitions share a task up to this many bytes of data files (each partition counted
    #: with 256 KiB more: engine/runtime/batching.py); a partition this large has a task of its
    #: own; 0: one task per partition. Lowered so that the cluster's CPUs get 2 tasks each
    task_bytes: int = 16 * 1024 * 1024
    #: where the tasks run: Ray, this process, or "auto" (this process below a size threshold:
    #: engine/runtime/placement.py); the statistics files are the same bytes either way
    runtime: Runtime = Runtime.AUTO

    def __post_init__(self) -> None:
        if self.bloom_columns is not None:
            object.__setattr__(self, "bloom_columns", tuple(self.bloom_columns))
        if not 0 < self.bloom_fpr < 1:
            raise InvalidArgumentError(f"the Bloom filters' false-positive rate must be in (0, 1), not {self.bloom_fpr}")
        object.__setattr__(self, "frequencies", FrequencyStrategy.parse(self.frequencies))
        object.__setattr__(self, "runtime", Runtime.parse(self.runtime))
        if isinstance(self.bins, bool) or self.bins not in ALLOWED_BINS:
            raise InvalidArgumentError(f"bins must be one of {', '.join(map(str, ALLOWED_BINS))}, not {self.bins}")
        if not 0 < self.mostly_distinct_ratio <= 1:
            raise InvalidArgumentError("mostly_distinct_ratio must be in (0, 1]")
        if isinstance(self.task_retries, bool) or not isinstance(self.task_retries, int) or self.task_retries < 0:
            raise InvalidArgumentError(f"task_retries must be a whole number >= 0, not {self.task_retries!r}")
        if isinstance(self.task_bytes, bool) or not isinstance(self.task_bytes, int) or self.task_bytes < 0:
            raise InvalidArgumentError(f"task_bytes must be a whole number of bytes >= 0, not {self.task_bytes!r}")
        if self.batch_size < 1 or self.columns_per_pass < 1:
            raise InvalidArgumentError("batch_size and columns_per_pass must be at least 1")
        if self.value_partitions and self.frequencies is not FrequencyStrategy.REDUCE:
            raise UnsupportedOptionsError(
                f"value partitions (--value-partitions) need the 'reduce' frequency strategy, not {self.frequencies.value!r}: "
                "the Redis strategy does not keep per-partition counts (docs/FREQUENCIES.md)"
            )
        if self.runtime is Runtime.LOCAL and self.frequencies is FrequencyStrategy.REDIS:
            raise UnsupportedOptionsError(
                "the 'redis' frequency strategy runs on Ray: use --runtime ray or auto, or --frequencies reduce (docs/SCALING.md)"
            )
