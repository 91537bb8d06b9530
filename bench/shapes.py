"""Tables of other shapes than the bench table, for bench_analyze.py's ``--shape`` (issue #30).

- ``wide``: 200 columns of mixed types (integers, floats with nulls and NaN, strings of few
  and of many values, timestamps, dates, decimals, booleans), by default 500,000 rows;
- ``longstrings``: long strings, 200-2,000 characters: a mostly distinct one, one of 1,000
  values, one with 20% nulls, beside an id and a short category; by default 300,000 rows;
- ``mostlynull``: every column but ``id`` 95% null (numbers, floats, strings, timestamps,
  dates, decimals, booleans); by default 2,000,000 rows.

Each is deterministic (its seed, rows and partitions give the same files), written as
hive partitions ``part=NN`` (zstd, as the bench table) and cached under ``<data>/<shape>``
with a stamp, like ``common.ensure_data``. Every shape has an ``id`` column (int64, unique,
never null): the floor checks its count. Not a benchmark (``run_all.py`` runs bench_*.py).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import ROW_GROUP_SIZE, SEED, log

SHAPES_VERSION = 1
#: the default rows and partitions of each shape (the bench table's are common.TABLE_ROWS/PARTITIONS)
DEFAULTS: dict[str, tuple[int, int]] = {"wide": (500_000, 8), "longstrings": (300_000, 8), "mostlynull": (2_000_000, 8)}
WIDE_COLUMNS = 200
LONG_MIN, LONG_MAX = 200, 2_000
NULL_SHARE = 0.95
_EPOCH_US = 1_700_000_000_000_000
_YEAR_US = 365 * 86_400 * 1_000_000


def _masked(rng: np.random.Generator, values: pa.Array, share: float) -> pa.Array:
    """``values`` with a ``share`` of them null (drawn by ``rng``)."""
    if share <= 0:
        return values
    mask = pa.array(rng.random(len(values)) < share)
    return pc.if_else(mask, pa.scalar(None, values.type), values)


def _ints(rng: np.random.Generator, n: int, high: int) -> pa.Array:
    return pa.array(rng.integers(0, high, n, dtype=np.int64))


def _floats(rng: np.random.Generator, n: int) -> pa.Array:
    x = rng.lognormal(3.0, 1.0, n).round(2)
    x[rng.random(n) < 1e-4] = np.nan
    return pa.array(x)


def _words(rng: np.random.Generator, n: int, pool: int, prefix: str) -> pa.Array:
    """Strings ``<prefix><k>`` of ``pool`` values (made by Arrow: no Python string per row)."""
    keys = pc.cast(pa.array(rng.integers(0, pool, n)), pa.string())
    return pc.binary_join_element_wise(prefix, keys, "")


def _times(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(_EPOCH_US + rng.integers(0, _YEAR_US, n), pa.timestamp("us", tz="UTC"))


def _dates(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array((19_000 + rng.integers(0, 3_650, n)).astype(np.int32), pa.date32())


def _decimals(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.integers(0, 10_000_000, n).astype(np.int32)).cast(pa.decimal128(18, 2))


def _bools(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.random(n) < 0.3)


#: the wide table's column kinds, in turn: name prefix and generator
_WIDE_KINDS: list[tuple[str, Callable[[np.random.Generator, int], pa.Array]]] = [
    ("int", lambda rng, n: _ints(rng, n, 1_000_000)),
    ("small", lambda rng, n: _ints(rng, n, 100)),
    ("float", lambda rng, n: _masked(rng, _floats(rng, n), 0.05)),
    ("cat", lambda rng, n: _words(rng, n, 500, "c")),
    ("text", lambda rng, n: _words(rng, n, 5_000_000, "t")),
    ("time", _times),
    ("date", _dates),
    ("dec", _decimals),
    ("flag", _bools),
    ("real", lambda rng, n: pa.array(rng.normal(0, 1, n).astype(np.float32))),
]


def _wide(rng: np.random.Generator, first: int, n: int) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {"id": pa.array(np.arange(first, first + n, dtype=np.int64))}
    for i in range(WIDE_COLUMNS - 1):
        prefix, gen = _WIDE_KINDS[i % len(_WIDE_KINDS)]
        out[f"{prefix}_{i:03d}"] = gen(rng, n)
    return out


_TEXT_POOL = 1 << 22  # characters of the text long strings are cut from


def _long_strings(rng: np.random.Generator, base: str, n: int) -> pa.Array:
    starts = rng.integers(0, len(base) - LONG_MAX, n)
    lengths = rng.integers(LONG_MIN, LONG_MAX + 1, n)
    return pa.array([base[s : s + k] for s, k in zip(starts.tolist(), lengths.tolist(), strict=True)], pa.string())


def _longstrings(rng: np.random.Generator, first: int, n: int) -> dict[str, pa.Array]:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz     ", dtype=np.uint8)
    base = letters[np.random.default_rng(SEED).integers(0, len(letters), _TEXT_POOL)].tobytes().decode()
    pool = _long_strings(np.random.default_rng(SEED + 1), base, 1_000)
    return {
        "id": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "category": _words(rng, n, 50, "k"),
        "doc": _long_strings(rng, base, n),
        "template": pool.take(pa.array(rng.integers(0, len(pool), n))),
        "note": _masked(rng, _long_strings(rng, base, n), 0.2),
    }


def _mostlynull(rng: np.random.Generator, first: int, n: int) -> dict[str, pa.Array]:
    columns = {
        "user_id": _ints(rng, n, 1_000_000),
        "quantity": pa.array(rng.integers(0, 500, n).astype(np.int32)),
        "price": _floats(rng, n),
        "score": pa.array(rng.normal(0, 1, n).astype(np.float32)),
        "city": _words(rng, n, 200, "city"),
        "comment": _words(rng, n, 50_000_000, "m"),
        "event_time": _times(rng, n),
        "event_date": _dates(rng, n),
        "amount": _decimals(rng, n),
        "flag": _bools(rng, n),
    }
    out = {"id": pa.array(np.arange(first, first + n, dtype=np.int64))}
    out.update((k, _masked(rng, v, NULL_SHARE)) for k, v in columns.items())
    return out


_GENERATORS: dict[str, Callable[[np.random.Generator, int, int], dict[str, pa.Array]]] = {
    "wide": _wide,
    "longstrings": _longstrings,
    "mostlynull": _mostlynull,
}


def _write(root: Path, shape: str, rows: int, partitions: int) -> None:
    gen = _GENERATORS[shape]
    first = 0
    for p in range(partitions):
        n = rows // partitions + (1 if p < rows % partitions else 0)
        pdir = root / f"part={p:02d}"
        pdir.mkdir(parents=True)
        rng = np.random.default_rng([SEED, SHAPES_VERSION, p])
        table = pa.table(gen(rng, first, n))
        pq.write_table(table, pdir / "data-0.parquet", compression="zstd", row_group_size=ROW_GROUP_SIZE)
        first += n


def ensure_shape(data_dir: Path, shape: str, rows: int, partitions: int) -> tuple[Path, dict[str, Any]]:
    """The ``shape`` table under data_dir/<shape>/table, generated only when missing or stale."""
    base = data_dir / shape
    table_dir, stamp_path = base / "table", base / "table.json"
    wanted = {"shape": shape, "rows": rows, "partitions": partitions, "seed": SEED, "version": SHAPES_VERSION}
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        stamp = None
    if stamp is not None and stamp.get("params") == wanted and any(table_dir.rglob("*.parquet")):
        log(f"data: reusing {table_dir} ({shape}, {rows:,} rows, {partitions} partitions)")
        return table_dir, {**stamp, "generated_now": False}
    log(f"data: generating the {shape} table, {rows:,} rows in {partitions} partitions under {table_dir} ...")
    stamp_path.unlink(missing_ok=True)
    shutil.rmtree(table_dir, ignore_errors=True)
    t0 = time.perf_counter()
    _write(table_dir, shape, rows, partitions)
    files = sorted(table_dir.rglob("*.parquet"))
    stamp = {
        "params": wanted,
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "generate_s": round(time.perf_counter() - t0, 3),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
    log(f"data: {len(files)} files, {stamp['bytes'] / 2**20:.0f} MiB in {stamp['generate_s']:.1f} s")
    return table_dir, {**stamp, "generated_now": True}
