"""Deterministic sample tables for the demo, the tests and the benchmarks.

``generate_table`` writes a Hive-style partitioned Parquet table
(``part=00/data-0.parquet``, ``part=01/data-0.parquet``, ``part=01/data-1.parquet``, ...)
whose columns cover the statistics Metastore computes: a unique key, skewed and
low/medium/high-cardinality strings and integers, floats with nulls and NaN,
booleans, timestamps, dates and decimals.

``generate_wide_table`` writes a table with many (by default 1,000) mixed
int/float/string columns and few rows, for lookup benchmarks.

Both are

- deterministic: the same arguments give the same values, row groups and files
  (every chunk draws from its own ``numpy.random.Generator`` seeded by
  ``(seed, partition, file, chunk)``, so the output does not depend on the order or
  the process that writes it);
- vectorised: no Python loop over rows (5,000,000 rows: ~7 s on 2 cores, 260 MiB);
- chunked: one row group is built and written at a time, so memory stays at a few
  row groups whatever the number of rows.

Column by column (``rows`` = N):

========== ======================== ===================================================
column     type                     values
========== ======================== ===================================================
id         int64                    unique key 1..N in shuffled (not sorted) order
category   string                   ~1,000 distinct, Zipf-distributed (s = 1.2)
city       string                   ~50 distinct, mildly skewed
quantity   int32                    uniform on 1..50,000 (~50,000 distinct)
price      float64                  log-normal, 2 decimals; ~5% null, a few NaN
score      float32                  0..100 (beta distributed)
comment    string                   10-60 characters, ~N/2 distinct
flag       bool                     ~30% true
event_time timestamp[us, tz=UTC]    in 2024; partition p covers the p-th slice of the year
event_date date32                   the UTC date of ``event_time``
amount     decimal128(18, 2)        log-normal, ~3% negative (refunds)
user_id    int64                    uniform over 1,000,000 ids
part       (directory name)         ``00``, ``01``, ... (zero padded, at least 2 digits)
========== ======================== ===================================================

Odd-numbered partitions hold two files, even-numbered ones one file.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "SAMPLE_VERSION",
    "SAMPLE_SCHEMA",
    "PARTITION_COLUMN",
    "generate_table",
    "generate_wide_table",
    "partition_names",
]

#: Bumped whenever the values ``generate_table``/``generate_wide_table`` produce
#: change, so that caches of generated tables (the benchmarks') are rebuilt.
SAMPLE_VERSION = 1

PARTITION_COLUMN = "part"

#: Schema of the data files written by ``generate_table`` (the partition column
#: lives only in the directory names).
SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("city", pa.string(), nullable=False),
        pa.field("quantity", pa.int32(), nullable=False),
        pa.field("price", pa.float64()),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("comment", pa.string(), nullable=False),
        pa.field("flag", pa.bool_(), nullable=False),
        pa.field("event_time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("event_date", pa.date32(), nullable=False),
        pa.field("amount", pa.decimal128(18, 2), nullable=False),
        pa.field("user_id", pa.int64(), nullable=False),
    ]
)

_N_CATEGORIES = 1_000
_ZIPF_S = 1.2
_QUANTITY_MAX = 50_000
_PRICE_NULL_SHARE = 0.05
_PRICE_NAN_SHARE = 2e-5
_N_USERS = 1_000_000
_USER_ID_BASE = 10_000_000
# Drawing N keys uniformly from K = N / 1.5936 values leaves ~N/2 of them distinct
# (K * (1 - exp(-N/K)) = N/2).
_COMMENT_KEY_FACTOR = 1 / 1.5936
_COMMENT_MIN_LEN = 10
_COMMENT_MAX_LEN = 60
_US_PER_DAY = 86_400 * 1_000_000
_YEAR_START_US = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z
_YEAR_SPAN_US = 366 * _US_PER_DAY  # 2024 is a leap year

# Seed-stream salts: every kind of random draw gets its own stream.
_SALT_CHUNK = 1
_SALT_TABLE = 2
_SALT_WIDE = 3

_CITIES = [
    "Amsterdam",
    "Athens",
    "Auckland",
    "Bangkok",
    "Barcelona",
    "Beijing",
    "Berlin",
    "Bogota",
    "Boston",
    "Brussels",
    "Buenos Aires",
    "Cairo",
    "Cape Town",
    "Chicago",
    "Copenhagen",
    "Delhi",
    "Dubai",
    "Dublin",
    "Helsinki",
    "Hong Kong",
    "Istanbul",
    "Jakarta",
    "Johannesburg",
    "Lagos",
    "Lima",
    "Lisbon",
    "London",
    "Los Angeles",
    "Madrid",
    "Manila",
    "Melbourne",
    "Mexico City",
    "Milan",
    "Montreal",
    "Moscow",
    "Mumbai",
    "Nairobi",
    "New York",
    "Osaka",
    "Oslo",
    "Paris",
    "Prague",
    "Rome",
    "San Francisco",
    "Santiago",
    "Sao Paulo",
    "Seoul",
    "Singapore",
    "Sydney",
    "Zurich",
]
assert len(_CITIES) == 50

_WORDS = (
    "able about above account across action active actual added after again agent "
    "agree ahead allow almost alone along already also amount angle answer anyone "
    "apart apply area argue around arrive article aside asked attack author avoid "
    "award aware back balance base basic beach become before begin behind believe "
    "below benefit best better between beyond bill black blue board body book both "
    "box break bring brown budget build business call camera card care carry case "
    "catch cause center chair chance change charge check choice city claim class "
    "clear close coach cold color come common cost could count course cover credit "
    "cross cup current cut damage dark data deal debate decide deep defense degree "
    "delivery design detail device dinner direct doctor door down draw dream drive "
    "during early east easy edge effect effort eight either else energy enjoy enough "
    "entry error even event every exact expect extra face fact fail fall family fast "
    "field final find fine fire firm first fish five floor focus follow food force "
    "form four free fresh front full fund game garden gift glass goal good great "
    "green group grow guess half hand happy hard head heart heavy help high hold home "
    "hope hotel house huge idea image item join just keep kind kitchen late later "
    "lead learn leave left less letter level light line list little local long look "
    "lose loud lower lucky main major make manage many market match matter meal "
    "media meet member method middle might minute model money month more morning "
    "most mother move much music name nation near need never news next nice night "
    "none north note number offer office often open order other owner page paper "
    "parcel party pass past path peace people period person phone piece place plan "
    "plant play point policy poor power press price print public pull push quick "
    "quiet radio range rate reach ready real reason record refund region remain "
    "report rest result return rich right river road rock room round rule safe sale "
    "same save scene school score season seat second seller send series serve seven "
    "shape share ship short show side sign simple since single size skill small smart "
    "soft some song soon sort sound south space speak special speed spend sport "
    "spring staff stage stand start state stay step still stock store story street "
    "strong study style sure system table talk task team test thank their thing "
    "third three time today total tough town track trade train travel tree trip true "
    "try turn under unit until upon value very view visit voice wait walk wall want "
    "watch water wave week weight well west while white whole wide wife window wish "
    "within without woman wonder word work world worry write wrong yard year young"
).split()

_B36 = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)


# --------------------------------------------------------------------------- helpers


def _rng(seed: int, *stream: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), *map(int, stream)])


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A vectorised 64-bit mixer (SplitMix64 finaliser): key -> well spread hash."""
    z = x.astype(np.uint64, copy=True)
    z += np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def _check_args(path: str | os.PathLike[str], rows: int, partitions: int, seed: int) -> Path:
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    if rows >= 2**32:
        raise ValueError(f"rows must be < 2**32, got {rows}")
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return Path(path)


def partition_names(partitions: int) -> list[str]:
    """Directory values of the partition column: ``00``, ``01``, ... (at least 2 digits)."""
    width = max(2, len(str(partitions - 1)))
    return [f"{p:0{width}d}" for p in range(partitions)]


def _prepare_dir(root: Path) -> None:
    """Create ``root``; remove the ``part=*`` directories of an earlier generation."""
    root.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.is_dir() and entry.name.startswith(f"{PARTITION_COLUMN}="):
            shutil.rmtree(entry)


def _split(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal sizes, the larger ones first."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class _TableParams:
    """Table-wide constants drawn once from the seed."""

    def __init__(self, rows: int, seed: int) -> None:
        rng = _rng(seed, _SALT_TABLE)
        self.rows = rows
        # id: affine permutation i -> (a*i + b) mod N with gcd(a, N) = 1.
        # rows < 2**32 and a < N keep a*i inside uint64.
        n = max(rows, 1)
        a = int(rng.integers(n // 3, 2 * n // 3 + 1)) if n > 2 else 1
        while math.gcd(a, n) != 1:
            a += 1
        self.id_mul = a
        self.id_add = int(rng.integers(0, n))
        # category: Zipf over ranks, the names shuffled so name order != frequency order.
        ranks = np.arange(1, _N_CATEGORIES + 1, dtype=np.float64)
        weights = ranks**-_ZIPF_S
        self.category_cdf = np.cumsum(weights / weights.sum())
        names = rng.permutation(_N_CATEGORIES)
        self.category_vocab = pa.array([f"category_{k:04d}" for k in names], pa.string())
        # city: mildly skewed (weights 1/sqrt(rank)).
        cw = 1.0 / np.sqrt(np.arange(1, len(_CITIES) + 1))
        self.city_cdf = np.cumsum(cw / cw.sum())
        self.city_vocab = pa.array(list(rng.permutation(np.array(_CITIES, dtype=object))), pa.string())
        # comment: keys 0..K-1; text cut from a word pool.
        self.comment_keys = max(1, math.ceil(rows * _COMMENT_KEY_FACTOR))
        self.comment_key_width = max(4, len(np.base_repr(self.comment_keys - 1, 36)))
        words = np.array(_WORDS, dtype=object)[rng.integers(0, len(_WORDS), 1 << 18)]
        self.pool = np.frombuffer(" ".join(words).encode("ascii"), dtype=np.uint8)
        self.comment_salt = np.uint64(int(rng.integers(0, 2**63)))


def _comment_array(keys: np.ndarray, params: _TableParams) -> pa.Array:
    """Strings of 10-60 ASCII characters, a pure function of the key: the key in
    base 36 (so distinct keys give distinct strings), a space, and a slice of text."""
    n = len(keys)
    h = _splitmix64(keys.astype(np.uint64) ^ params.comment_salt)
    span = _COMMENT_MAX_LEN - _COMMENT_MIN_LEN + 1
    lengths = (_COMMENT_MIN_LEN + (h % np.uint64(span))).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    starts = offsets[:-1]

    # Prefix: fixed-width base-36 key and a space.
    w = params.comment_key_width
    k = keys.astype(np.int64)
    for i in range(w):  # loop over digit positions (<= 9), not rows
        digit = (k // 36 ** (w - 1 - i)) % 36
        data[starts + i] = _B36[digit]
    data[starts + w] = ord(" ")

    # Tail: a key-dependent slice of the word pool.
    tail_len = lengths - (w + 1)
    src = ((h >> np.uint64(8)) % np.uint64(len(params.pool) - _COMMENT_MAX_LEN)).astype(np.int64)
    tail_total = int(tail_len.sum())
    tail_starts = np.zeros(n, dtype=np.int64)
    np.cumsum(tail_len[:-1], out=tail_starts[1:])
    j = np.arange(tail_total, dtype=np.int64) - np.repeat(tail_starts, tail_len)
    data[np.repeat(starts + w + 1, tail_len) + j] = params.pool[np.repeat(src, tail_len) + j]

    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]).cast(pa.string())


def _decimal_array(cents: np.ndarray, scale_type: pa.DataType) -> pa.Array:
    """decimal128 from int64 unscaled values (16-byte little-endian two's complement)."""
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(scale_type, len(cents), [None, pa.py_buffer(words)])


def _chunk(
    params: _TableParams,
    rng: np.random.Generator,
    first_row: int,
    n: int,
    partition: int,
    partitions: int,
    force_nan: bool,
) -> pa.Table:
    # id: global affine permutation, then shuffled within the chunk.
    i = np.arange(first_row, first_row + n, dtype=np.uint64)
    nrows = np.uint64(max(params.rows, 1))
    permuted = (i * np.uint64(params.id_mul) + np.uint64(params.id_add)) % nrows
    ids = permuted.astype(np.int64)[rng.permutation(n)] + 1

    cat_idx = np.minimum(np.searchsorted(params.category_cdf, rng.random(n), side="right"), _N_CATEGORIES - 1)
    city_idx = np.minimum(np.searchsorted(params.city_cdf, rng.random(n), side="right"), len(_CITIES) - 1)
    quantity = rng.integers(1, _QUANTITY_MAX + 1, n, dtype=np.int32)

    price = np.round(rng.lognormal(3.0, 1.0, n), 2)
    price_null = rng.random(n) < _PRICE_NULL_SHARE
    nan_mask = (rng.random(n) < _PRICE_NAN_SHARE) & ~price_null
    if force_nan and n:
        pos = int(rng.integers(0, n))
        nan_mask[pos] = True
        price_null[pos] = False
    price[nan_mask] = np.nan

    score = (rng.beta(2.0, 5.0, n) * 100).astype(np.float32)
    comment_keys = rng.integers(0, params.comment_keys, n, dtype=np.int64)
    flag = rng.random(n) < 0.3

    lo = _YEAR_START_US + _YEAR_SPAN_US * partition // partitions
    hi = _YEAR_START_US + _YEAR_SPAN_US * (partition + 1) // partitions
    event_us = lo + rng.integers(0, max(hi - lo, 1), n, dtype=np.int64)
    event_day = (event_us // _US_PER_DAY).astype(np.int32)

    cents = np.round(rng.lognormal(4.0, 1.2, n) * 100).astype(np.int64)
    cents[rng.random(n) < 0.03] *= -1
    user_id = _USER_ID_BASE + rng.integers(0, _N_USERS, n, dtype=np.int64)

    columns = [
        pa.array(ids, pa.int64()),
        params.category_vocab.take(pa.array(cat_idx)),
        params.city_vocab.take(pa.array(city_idx)),
        pa.array(quantity, pa.int32()),
        pa.array(price, pa.float64(), mask=price_null),
        pa.array(score, pa.float32()),
        _comment_array(comment_keys, params),
        pa.array(flag, pa.bool_()),
        pa.array(event_us, pa.timestamp("us", tz="UTC")),
        pa.array(event_day, pa.date32()),
        _decimal_array(cents, pa.decimal128(18, 2)),
        pa.array(user_id, pa.int64()),
    ]
    return pa.Table.from_arrays(columns, schema=SAMPLE_SCHEMA)


# --------------------------------------------------------------------------- public


def generate_table(
    path: str | os.PathLike[str],
    rows: int = 5_000_000,
    partitions: int = 16,
    seed: int = 0,
    row_group_size: int = 128 * 1024,
) -> pa.Schema:
    """Write the sample table under ``path`` and return its schema.

    ``path`` is created if needed; ``part=*`` directories left there by an earlier
    call are removed first (nothing else is touched). Rows are spread evenly over
    ``partitions`` partitions; odd-numbered partitions are split over two files.
    Files are zstd-compressed with row groups of ``row_group_size`` rows.

    The returned schema is that of the data files (``SAMPLE_SCHEMA``) followed by the
    partition column ``part`` as a string (its directory values are zero padded:
    ``00``, ``01``, ...; readers that infer partition types may read it as an integer).
    """
    root = _check_args(path, rows, partitions, seed)
    if row_group_size < 1:
        raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
    _prepare_dir(root)
    params = _TableParams(rows, seed)

    first_row = 0
    for p, (pname, prows) in enumerate(zip(partition_names(partitions), _split(rows, partitions))):
        pdir = root / f"{PARTITION_COLUMN}={pname}"
        pdir.mkdir()
        nfiles = 2 if (p % 2 == 1 and prows >= 2) else 1
        for f, frows in enumerate(_split(prows, nfiles)):
            with pq.ParquetWriter(pdir / f"data-{f}.parquet", SAMPLE_SCHEMA, compression="zstd") as writer:
                nchunks = max(1, -(-frows // row_group_size))
                for c in range(nchunks):
                    n = min(row_group_size, frows - c * row_group_size)
                    rng = _rng(seed, _SALT_CHUNK, p, f, c)
                    table = _chunk(params, rng, first_row, n, p, partitions, force_nan=(c == 0))
                    writer.write_table(table, row_group_size=row_group_size)
                    first_row += n
    assert first_row == rows
    return SAMPLE_SCHEMA.append(pa.field(PARTITION_COLUMN, pa.string(), nullable=False))


def generate_wide_table(
    path: str | os.PathLike[str],
    columns: int = 1000,
    rows: int = 10_000,
    partitions: int = 1,
    seed: int = 0,
) -> pa.Schema:
    """Write a wide table (``columns`` mixed columns) under ``path``; return its schema.

    Column ``c0000``, ``c0001``, ... cycle through int64, float64 and string; each
    column has its own cardinality (from a handful to all-distinct) and ~2% nulls
    in every fifth column. Layout as ``generate_table``: ``part=NN/data-0.parquet``,
    one file (and row group) per partition, zstd. The returned schema is that of the
    files followed by the partition column ``part`` (string).
    """
    root = _check_args(path, rows, partitions, seed)
    if columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    _prepare_dir(root)

    meta = _rng(seed, _SALT_WIDE)
    vocab_size = 10_000
    words = np.array(_WORDS)[meta.integers(0, len(_WORDS), vocab_size)]
    vocab = pa.array([f"{w}_{k}" for k, w in enumerate(words)], pa.string())
    # Cardinalities from 2 to 10**6 on a log scale, one per column.
    cards = np.round(10 ** meta.uniform(np.log10(2), 6, columns)).astype(np.int64)
    kinds = [(pa.int64(), "int"), (pa.float64(), "float"), (pa.string(), "str")]
    fields = [pa.field(f"c{i:04d}", kinds[i % 3][0]) for i in range(columns)]
    schema = pa.schema(fields)

    for p, (pname, prows) in enumerate(zip(partition_names(partitions), _split(rows, partitions))):
        pdir = root / f"{PARTITION_COLUMN}={pname}"
        pdir.mkdir()
        arrays = []
        for i in range(columns):
            rng = _rng(seed, _SALT_WIDE, p, i)
            card = int(cards[i])
            mask = (rng.random(prows) < 0.02) if i % 5 == 4 else None
            kind = kinds[i % 3][1]
            if kind == "int":
                arrays.append(pa.array(rng.integers(0, card, prows, dtype=np.int64), pa.int64(), mask=mask))
            elif kind == "float":
                values = np.round(rng.normal(0.0, 1.0, prows) * card, 3)
                arrays.append(pa.array(values, pa.float64(), mask=mask))
            else:
                idx = pa.array(rng.integers(0, min(card, vocab_size), prows, dtype=np.int64), mask=mask)
                arrays.append(vocab.take(idx))
        table = pa.Table.from_arrays(arrays, schema=schema)
        pq.write_table(table, pdir / "data-0.parquet", compression="zstd", row_group_size=max(prows, 1))
    return schema.append(pa.field(PARTITION_COLUMN, pa.string(), nullable=False))
