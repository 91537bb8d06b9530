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
    return _merge_runs(keys, np.arange(len(keys)), bounds)


def merge_counts(keys: np.ndarray, counts: np.ndarray | None, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct ``keys`` and their summed ``counts`` (int64; None: each 1), for
    ``keys`` made of sorted runs starting at ``bounds`` (:func:`run_bounds`).

    Counts of 1 (None) take numpy's stable sort of the keys alone (a timsort: it finds the
    runs and merges them, faster than carrying counts that are all 1)."""
    bounds = np.asarray(bounds, np.int64)
    if counts is None or len(keys) == 0 or bool((counts == 1).all()):
        s = np.sort(keys, kind="stable")
        starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1]))) if len(s) else np.zeros(0, np.int64)
        if len(starts) == len(s):
            return s, np.ones(len(s), np.int64)
        return s[starts], np.diff(np.append(starts, len(s))).astype(np.int64)
    c = counts.astype(np.int64, copy=False)
    if len(keys) >= _MERGE_AT and _runs_sorted(keys, bounds):
        merged, summed = _merge_runs(keys, c, bounds)
    else:
        order = np.argsort(keys, kind="stable")
        merged, summed = keys[order], c[order]
    g = _fold(merged, summed)
    return merged[:g].copy(), summed[:g].copy()
