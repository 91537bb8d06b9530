"""User-defined summary statistics.

A user statistic is a function over an Arrow array (one batch of one column)
that returns a partial state, and a merge function over two states; the state
must be picklable because partitions compute it on Ray workers and the driver
merges it into the table's value. Each registered statistic becomes a column
of statistics.parquet at partition and table level, null where it does not apply.

A statistic may also declare ``serialize`` (state -> bytes) and ``deserialize``
(bytes -> state). A partition's state is then stored with its other partial
states, and a later analyze of an unchanged partition inherits it instead of
reading the data again (docs/CATALOG.md). Without the pair, every partition is
recomputed on every analyze. The bytes are data the statistic decodes itself:
never pickle (a store's files must not be able to run code in the reader).

A statistic may declare ``compute_counts(values, counts)`` too: the same state
from a partition's exact value counts, which the partition task holds for most
columns (numbers, times, decimals, strings). It then costs O(distinct values)
instead of a pass over the rows; ``compute`` stays the definition and serves
the other columns and batch-wise folds. Both shipped examples have it.

    from engine.stats.user import register, UserStatistic

    register(UserStatistic(
        name="negative_count",
        compute=lambda arr: pc.sum(pc.less(arr, 0)).as_py() or 0,
        merge=operator.add,
        result_type=pa.int64(),
        applies_to=engine.types.is_numeric,
    ))
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.exceptions import InvalidArgumentError


def _identity(state: Any) -> Any:
    return state


def _always(_: pa.DataType) -> bool:
    return True


@dataclass(frozen=True)
class UserStatistic:
    name: str
    compute: Callable[[pa.Array], Any]
    merge: Callable[[Any, Any], Any]
    result_type: pa.DataType
    finalize: Callable[[Any], Any] = _identity
    applies_to: Callable[[pa.DataType], bool] = _always
    description: str = ""
    #: state -> bytes and back, for inheritance of unchanged partitions (both or neither)
    serialize: Callable[[Any], bytes] | None = None
    deserialize: Callable[[bytes], Any] | None = None
    #: optional: the same state from a partition's exact value counts (sorted or
    #: hash-ordered distinct values, non-null, and their counts), which a partition
    #: task holds anyway for most columns: far cheaper than a pass over the rows
    compute_counts: Callable[[pa.Array, np.ndarray], Any] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise InvalidArgumentError(f"user statistic name {self.name!r} must be an identifier")
        if (self.serialize is None) != (self.deserialize is None):
            raise InvalidArgumentError(f"user statistic {self.name!r}: give both serialize and deserialize, or neither")


_REGISTRY: dict[str, UserStatistic] = {}


def register(stat: UserStatistic) -> UserStatistic:
    from engine.files.layout import BUILTIN_STATISTICS

    if stat.name in BUILTIN_STATISTICS:
        raise InvalidArgumentError(f"user statistic {stat.name!r} clashes with a built-in statistic")
    _REGISTRY[stat.name] = stat
    return stat


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def registered() -> list[UserStatistic]:
    """The registered statistics, in registration order."""
    return list(_REGISTRY.values())


# ---------------------------------------------------------------- shipped examples
def _is_zero(arr: pa.Array) -> pa.Array:
    from decimal import Decimal

    return pc.equal(arr, pa.scalar(Decimal(0) if mt.is_decimal(arr.type) else 0, type=arr.type))


def _zero_count(arr: pa.Array) -> int:
    return pc.sum(_is_zero(arr)).as_py() or 0


def _zero_count_of_counts(values: pa.Array, counts: np.ndarray) -> int:
    if not len(values):
        return 0
    return int(counts[_is_zero(values).to_numpy(zero_copy_only=False)].sum())


def _int_bytes(n: int) -> bytes:
    return str(int(n)).encode()


def _bytes_int(data: bytes) -> int:
    return int(data.decode())


ZERO_COUNT = UserStatistic(
    name="zero_count",
    compute=_zero_count,
    merge=operator.add,
    result_type=pa.int64(),
    applies_to=mt.is_numeric,
    description="number of values equal to zero",
    serialize=_int_bytes,
    deserialize=_bytes_int,
    compute_counts=_zero_count_of_counts,
)

#: Misra-Gries summary size of top1_share; the share is exact when the top value
#: holds more than 1/(k+1) of the values, else a lower bound within 1/(k+1).
TOP1_CAPACITY = 64


def _mg_compute(arr: pa.Array) -> tuple[int, dict[Any, int]]:
    valid = arr.drop_null()
    vc = pc.value_counts(valid)
    return _mg_of_counts(vc.field(0), vc.field(1).to_numpy(zero_copy_only=False))


def _mg_of_counts(keys: pa.Array, counts: np.ndarray) -> tuple[int, dict[Any, int]]:
    n = int(counts.sum())
    if mt.is_temporal(keys.type):  # dates beyond Python's years 1..9999 have no as_py(): count their storage
        from engine.stats.histograms import storage_type

        keys = keys.view(storage_type(keys.type))
    if len(counts) > TOP1_CAPACITY:
        # trim in numpy before any value becomes a Python object: a unique key has a
        # partition's worth of distinct values, of which at most k survive
        cut = np.partition(counts, len(counts) - TOP1_CAPACITY - 1)[len(counts) - TOP1_CAPACITY - 1]
        kept = np.flatnonzero(counts > cut)
        return n, dict(zip(keys.take(pa.array(kept)).to_pylist(), (counts[kept] - cut).tolist()))
    return n, dict(zip(keys.to_pylist(), counts.tolist()))


def _mg_trim(counters: dict[Any, int]) -> dict[Any, int]:
    if len(counters) <= TOP1_CAPACITY:
        return counters
    ranked = sorted(counters.values(), reverse=True)
    cut = ranked[TOP1_CAPACITY]  # subtract the (k+1)-th largest count (Misra-Gries merge)
    return {v: c - cut for v, c in counters.items() if c > cut}


def _mg_merge(a: tuple[int, dict[Any, int]], b: tuple[int, dict[Any, int]]) -> tuple[int, dict[Any, int]]:
    merged = dict(a[1])
    for v, c in b[1].items():
        merged[v] = merged.get(v, 0) + c
    return a[0] + b[0], _mg_trim(merged)


def _mg_share(state: tuple[int, dict[Any, int]]) -> float | None:
    n, counters = state
    if n == 0 or not counters:
        return None
    return max(counters.values()) / n


def _mg_key(v: Any) -> list[Any]:
    """A Misra-Gries counter key as tagged JSON: the keys are the Python values of Arrow scalars."""
    from decimal import Decimal

    if isinstance(v, bool):
        return ["b", v]
    if isinstance(v, int):
        return ["i", str(v)]  # text: beyond 2**53 a JSON number may not round-trip
    if isinstance(v, float):
        return ["f", v.hex()]
    if isinstance(v, str):
        return ["s", v]
    if isinstance(v, (bytes, bytearray)):
        return ["x", bytes(v).hex()]
    if isinstance(v, Decimal):
        return ["d", str(v)]
    raise TypeError(f"top1_share: cannot serialize a key of type {type(v).__name__}")


def _mg_unkey(k: list[Any]) -> Any:
    from decimal import Decimal

    tag, v = k
    decoders: dict[str, Callable[[str], Any]] = {"b": bool, "i": int, "f": float.fromhex, "s": str, "x": bytes.fromhex, "d": Decimal}
    return decoders[tag](v)


def _mg_serialize(state: tuple[int, dict[Any, int]]) -> bytes:
    import json

    n, counters = state
    return json.dumps([n, [[_mg_key(v), c] for v, c in counters.items()]], separators=(",", ":")).encode()


def _mg_deserialize(data: bytes) -> tuple[int, dict[Any, int]]:
    import json

    n, pairs = json.loads(data.decode())
    return int(n), {_mg_unkey(k): int(c) for k, c in pairs}


TOP1_SHARE = UserStatistic(
    name="top1_share",
    compute=_mg_compute,
    merge=_mg_merge,
    finalize=_mg_share,
    result_type=pa.float64(),
    applies_to=mt.is_discrete,
    description="share of the most frequent value (Misra-Gries, k=64: a lower bound within 1/65)",
    serialize=_mg_serialize,
    deserialize=_mg_deserialize,
    compute_counts=_mg_of_counts,
)


def register_examples() -> None:
    """Register the two shipped examples (part of :func:`default_statistics` anyway)."""
    for stat in (ZERO_COUNT, TOP1_SHARE):
        _REGISTRY.setdefault(stat.name, stat)


def default_statistics() -> list[UserStatistic]:
    """The user statistics a job computes unless told otherwise: the shipped examples,
    then every registered one. The same for the API, the CLI, Spark and Flight, so a
    table re-analyzed through another entry point keeps its columns (and inherits)."""
    shipped = [ZERO_COUNT, TOP1_SHARE]
    return shipped + [u for u in registered() if u.name not in {s.name for s in shipped}]
