"""Merging sorted runs: the table reduction's value counts are one sorted run a partition.

The partitions' value counts of a number or time column are each sorted by value, and a
string column's are each sorted by hash. Merging them was a stable sort of the runs laid
end to end (numpy's timsort finds the runs, then merges them; as an argsort it reaches
every key through an index). These kernels merge the runs pairwise, bottom up, carrying
what goes with the keys (``log2(runs)`` sequential passes, each choice a select):

- :func:`merge_order`: the permutation a stable sort of the concatenated runs gives (equal
  keys keep their order: an earlier run's first), and the keys in that order;
- :func:`merge_counts`: the sorted distinct keys and their summed counts, what sorting and
  then summing equal neighbours gives.

Many keys (:data:`BUCKET_AT`) are merged bucket by bucket instead, in one pass over memory
(:func:`_bucket_merge`): a monotone map of a key to one of about two slots a key (its
offset from the smallest key, shifted or scaled) groups the slots into buckets of a few
hundred keys, each a slice of every run; a bucket's slices are scattered by slot into a
buffer in cache and insertion sorted (a key moves only within its slot), or merged
pairwise when a slot is crowded (skewed keys). The same order, 1.5-3x faster than the
pairwise merges on the bench table's reductions (4.8 M hashes: 69 against 128-215 ms).

Keys are integers or floats without NaN. Runs that turn out not to be sorted are sorted
by numpy instead (the same result, slower). Compiled with numba and cached on disk, like
engine.stats.murmur.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _runs_sorted(keys, bounds):
    for r in range(len(bounds) - 1):
        for i in range(bounds[r] + 1, bounds[r + 1]):
            if keys[i] < keys[i - 1] or keys[i] != keys[i]:
                return False
        if bounds[r + 1] > bounds[r] and keys[bounds[r]] != keys[bounds[r]]:
            return False
    return True


@njit(inline="always")
def _merge_two(sk, sv, dk, dv, lo, mid, hi):
    """Merge the runs [lo, mid) and [mid, hi) of ``sk``/``sv`` into ``dk``/``dv`` at ``lo``;
    equal keys take the left run's first (stable). The choice is a select, not a branch:
    random keys would mispredict half of the branches."""
    p = lo
    q = mid
    o = lo
    while p < mid and q < hi:
        a = sk[p]
        b = sk[q]
        va = sv[p]
        vb = sv[q]
        right = b < a
        dk[o] = b if right else a
        dv[o] = vb if right else va
        o += 1
        q += right
        p += 1 - right
    while p < mid:
        dk[o] = sk[p]
        dv[o] = sv[p]
        p += 1
        o += 1
    while q < hi:
        dk[o] = sk[q]
        dv[o] = sv[q]
        q += 1
        o += 1


@njit(cache=True, nogil=True)
def _merge_passes(keys, values, bounds, k0, v0, k1, v1):
    """Stable pairwise merges of the runs ``keys[bounds[r]:bounds[r + 1]]``, ``values``
    carried along, through the buffers ``k0``/``v0`` and ``k1``/``v1``: (keys, values) in
    merged order, in one of them. The first pass reads the inputs."""
    b = bounds.copy()
    runs = len(b) - 1
    first = True
    while first or runs > 1:
        nb = np.empty(runs // 2 + runs % 2 + 1, np.int64)
        nb[0] = b[0]
        j = 0
        for r in range(0, runs, 2):
            lo = b[r]
            mid = b[r + 1]
            hi = b[r + 2] if r + 1 < runs else mid
            if first:
                _merge_two(keys, values, k1, v1, lo, mid, hi)
            else:
                _merge_two(k0, v0, k1, v1, lo, mid, hi)
            j += 1
            nb[j] = hi
        first = False
        k0, k1 = k1, k0
        v0, v1 = v1, v0
        b = nb
        runs = j
    return k0, v0


def _merge_runs(keys: np.ndarray, values: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_merge_passes` with buffers numpy allocates (numba's own allocations made the
    merge half as slow again: 0.155 against 0.09 s for 16 runs of 312,500 hashes)."""
    n = len(keys)
    return _merge_passes(keys, values, bounds, np.empty(n, keys.dtype), np.empty(n, np.int64), np.empty(n, keys.dtype), np.empty(n, np.int64))


@njit(cache=True, nogil=True)
def _fold(keys, counts):
    """Sorted keys with equal neighbours folded into one, their counts summed (in place:
    returns how many are left at the front)."""
    g = 0
    for i in range(1, len(keys)):
        if keys[i] == keys[g]:
            counts[g] += counts[i]
        else:
            g += 1
            keys[g] = keys[i]
            counts[g] = counts[i]
    return g + 1 if len(keys) else 0


#: A bucket whose finer slots hold more keys than this is merged pairwise (skewed keys:
#: an insertion sort of a slot would be quadratic).
_SLOT_LIMIT = 64

#: Fewer keys than this are merged pairwise (:func:`_merge_runs`), more are bucketed
#: (:func:`_bucket_merge`).
BUCKET_AT = 65_536


@njit(inline="always")
def _slot(x, lo, shift, flo, scale, top):
    """The finer slot of key ``x``, monotone in ``x``: integers' offset from ``lo`` shifted
    right (``shift >= 0``, unsigned arithmetic, so any width and sign), floats' offset from
    ``flo`` scaled (IEEE rounding is monotone; clamped to ``top``)."""
    if shift >= 0:
        return np.int64((np.uint64(x) - lo) >> np.uint64(shift))
    t = (np.float64(x) - flo) * scale
    return np.int64(t if t < top else top)


@njit(cache=True, nogil=True)
def _slot_counts(keys, bounds, ptr, stop, counts, b, plan):
    """Each run's keys in bucket ``b`` (from ``ptr``, up to ``stop``), counted by slot in
    ``counts``, which becomes the slots' starts: (the bucket's size, its largest slot)."""
    lo, shift, flo, scale, top, sub_bits = plan
    mask = (1 << sub_bits) - 1
    counts[:] = 0
    for r in range(len(ptr)):
        p = ptr[r]
        e = bounds[r + 1]
        while p < e:
            f = _slot(keys[p], lo, shift, flo, scale, top)
            if (f >> sub_bits) != b:
                break
            counts[f & mask] += 1
            p += 1
        stop[r] = p
    most = 0
    total = 0
    for d in range(len(counts)):
        c = counts[d]
        most = max(most, c)
        counts[d] = total
        total += c
    return total, most


@njit(cache=True, nogil=True)
def _slot_sort(keys, values, ptr, stop, starts, plan, sk, sv):
    """The bucket's keys (and values; none: their positions) scattered by slot into
    ``sk``/``sv`` in run order, then insertion sorted: a stable sort, each key moving
    only within its slot."""
    lo, shift, flo, scale, top, sub_bits = plan
    mask = (1 << sub_bits) - 1
    carry = len(values) > 0
    m = 0
    for r in range(len(ptr)):
        for p in range(ptr[r], stop[r]):
            k = keys[p]
            d = _slot(k, lo, shift, flo, scale, top) & mask
            i = starts[d]
            starts[d] = i + 1
            sk[i] = k
            sv[i] = values[p] if carry else p
            m += 1
    for i in range(1, m):
        k = sk[i]
        v = sv[i]
        j = i
        while j > 0 and sk[j - 1] > k:
            sk[j] = sk[j - 1]
            sv[j] = sv[j - 1]
            j -= 1
        sk[j] = k
        sv[j] = v


@njit(cache=True, nogil=True)
def _slices_merged(keys, values, ptr, stop, sk, sv):
    """The bucket's keys (and values; none: their positions) in ``sk``/``sv``, its runs'
    slices merged pairwise (:func:`_merge_passes`): a heavy bucket's stable sort."""
    runs = len(ptr)
    carry = len(values) > 0
    m = 0
    lb = np.empty(runs + 1, np.int64)
    for r in range(runs):
        lb[r] = m
        for p in range(ptr[r], stop[r]):
            sk[m] = keys[p]
            sv[m] = values[p] if carry else p
            m += 1
    lb[runs] = m
    mk, mv = _merge_passes(sk[:m], sv[:m], lb, np.empty(m, keys.dtype), np.empty(m, np.int64), np.empty(m, keys.dtype), np.empty(m, np.int64))
    sk[:m] = mk
    sv[:m] = mv


@njit(cache=True, nogil=True)
def _bucket_merge(keys, values, bounds, plan, buckets, out_k, out_v, fold):
    """The runs ``keys[bounds[r]:bounds[r + 1]]`` stably sorted into ``out_k``/``out_v``,
    their ``values`` carried (none: their positions), bucket by bucket: a bucket holds the
    keys of a range of slots (:func:`_slot`), a slice of each run since the runs are
    sorted; its slices are sorted in a scratch buffer in cache (:func:`_slot_sort`, or
    :func:`_slices_merged` when a slot is crowded), then written out in order, with
    ``fold`` equal neighbours folded into one, their values summed. Returns how many keys
    were written. One pass over memory where pairwise merges take ``log2(runs)``."""
    ptr = bounds[:-1].copy()
    stop = np.empty(len(ptr), np.int64)
    counts = np.empty(1 << plan[5], np.int64)
    sk = np.empty(1024, keys.dtype)
    sv = np.empty(1024, np.int64)
    g = 0
    for b in range(buckets):
        m, most = _slot_counts(keys, bounds, ptr, stop, counts, b, plan)
        if m == 0:
            continue
        if m > len(sk):
            sk = np.empty(2 * m, keys.dtype)
            sv = np.empty(2 * m, np.int64)
        if most > _SLOT_LIMIT:
            _slices_merged(keys, values, ptr, stop, sk, sv)
        else:
            _slot_sort(keys, values, ptr, stop, counts, plan, sk, sv)
        for i in range(m):
            k = sk[i]
            if fold and g > 0 and out_k[g - 1] == k:
                out_v[g - 1] += sv[i]
            else:
                out_k[g] = k
                out_v[g] = sv[i]
                g += 1
        ptr[:] = stop
    return g


def _bucket_plan(keys: np.ndarray, bounds: np.ndarray) -> tuple[tuple[np.uint64, int, float, float, float, int], int] | None:
    """How :func:`_bucket_merge` splits sorted runs' keys: (its slot plan, the number of
    buckets), about two slots a key and a few hundred keys a bucket; None when it would not
    pay (few keys, every key equal, many runs, floats spanning infinities)."""
    n = len(keys)
    runs = len(bounds) - 1
    if n < BUCKET_AT:
        return None
    firsts = bounds[:-1][bounds[1:] > bounds[:-1]]
    lo, hi = keys[firsts].min(), keys[bounds[1:][bounds[1:] > bounds[:-1]] - 1].max()
    bits = n.bit_length()  # 2**bits slots: between one and two a key
    if keys.dtype.kind in "iu":
        span = int(hi) - int(lo)
        shift = max(0, span.bit_length() - bits)
        fine = 1 << (span >> shift).bit_length()
        plan = (np.uint64(int(lo) % 2**64), shift, 0.0, 0.0, 0.0)
    else:
        fspan = float(hi) - float(lo)
        if not np.isfinite(fspan) or fspan <= 0:
            return None
        fine = 1 << bits
        plan = (np.uint64(0), -1, float(lo), fine / fspan, float(fine - 1))
    if fine < 2:
        return None
    buckets = 1 << (max(1, min(fine >> 9, n // (2 * runs))).bit_length() - 1)  # runs' visits: at most n / 2
    sub_bits = (fine // buckets).bit_length() - 1
    if sub_bits > 14:
        return None
    return (*plan, sub_bits), buckets


#: Fewer keys than this are sorted by numpy (an argsort, then the counts summed): in cache,
#: it is as fast or faster (the bench table's reductions: 0.007 against 0.015 s for 800,000
#: int32 keys of 50,000 values; 0.137 against 0.114 s for 4.3 M int64 keys).
_MERGE_AT = 1_000_000


def run_bounds(lengths: list[int] | np.ndarray) -> np.ndarray:
    """Where each run starts, and the end: the cumulative ``lengths`` from 0 (int64)."""
    bounds = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(np.asarray(lengths, np.int64), out=bounds[1:])
    return bounds


def merge_order(keys: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the keys sorted, the permutation that sorts them) for ``keys`` made of sorted runs
    starting at ``bounds`` (:func:`run_bounds`): what ``np.argsort(keys, kind="stable")`` and
    ``keys[order]`` give, equal keys in their order."""
    bounds = np.asarray(bounds, np.int64)
    if len(keys) == 0 or len(bounds) <= 2 or not _runs_sorted(keys, bounds):
        order = np.argsort(keys, kind="stable")
        return keys[order], order
    split = _bucket_plan(keys, bounds)
    if split is None:
        return _merge_runs(keys, np.arange(len(keys)), bounds)
    merged, order = np.empty_like(keys), np.empty(len(keys), np.int64)
    _bucket_merge(keys, np.zeros(0, np.int64), bounds, split[0], split[1], merged, order, False)
    return merged, order


def merge_counts(keys: np.ndarray, counts: np.ndarray | None, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct ``keys`` and their summed ``counts`` (int64; None: each 1), for
    ``keys`` made of sorted runs starting at ``bounds`` (:func:`run_bounds`).

    Counts of 1 (None) take numpy's stable sort of the keys alone (a timsort: it finds the
    runs and merges them, faster than carrying counts that are all 1; faster than the bucket
    merge too, even with the counts read from a zero-stride view of one 1: 0.024 against
    0.075 CPU-s for the bench table's ids, whose runs interleave). Distinct keys, the common
    case of such columns, are told by one compare of neighbours before any starts are listed
    (the starts were 40 MB of int64 for 5 M keys: 0.014 against 0.003 CPU-s)."""
    bounds = np.asarray(bounds, np.int64)
    if counts is None or len(keys) == 0 or bool((counts == 1).all()):
        s = np.sort(keys, kind="stable")
        new = s[1:] != s[:-1]
        if new.all():
            return s, np.ones(len(s), np.int64)
        starts = np.flatnonzero(np.concatenate(([True], new)))
        return s[starts], np.diff(np.append(starts, len(s))).astype(np.int64)
    c = counts.astype(np.int64, copy=False)
    split = _bucket_plan(keys, bounds) if len(keys) >= _MERGE_AT and _runs_sorted(keys, bounds) else None
    if split is not None:
        merged, summed = np.empty_like(keys), np.empty(len(keys), np.int64)
        g = _bucket_merge(keys, c, bounds, split[0], split[1], merged, summed, True)
        return merged[:g], summed[:g]  # views: a copy of millions of keys costs more than the unused tail
    if len(keys) >= _MERGE_AT and _runs_sorted(keys, bounds):
        merged, summed = _merge_runs(keys, c, bounds)
    else:
        order = np.argsort(keys, kind="stable")
        merged, summed = keys[order], c[order]
    g = _fold(merged, summed)
    return merged[:g].copy(), summed[:g].copy()
