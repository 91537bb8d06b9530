"""Strings held in several Arrow arrays, compared and gathered where they lie.

The table-level reduction of a string column merges the partitions' value
counts by hash. Concatenating the partitions' values first copies the whole
column (185 MB for the 2.5M distinct comments of the benchmark table), and
taking them into hash order copies it again: in a fresh Ray worker, whose heap
has not grown yet, that memory is faulted in page by page, and the reduction
took twice as long as in a warm one (1.8 against 0.6 CPU-s; every CLI analyze
starts a fresh runtime). What the reduction needs is to compare the rows that
share a hash and to copy out the rows it stores. The compare is a kernel on the
arrays' own buffers (in a Ray task, the object store's shared memory), indexed
by row number in the virtual concatenation of the arrays; the copy is Arrow's take
of the arrays as one chunked array, which does not concatenate them either.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.arrowcompute import byte_buffers
from engine.stats import runmerge


@intrinsic
def _pointer(typingctx, address):
    """An integer address as a void pointer, for ``numba.carray`` over a buffer it does not own."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


@njit(inline="always")
def _row(part_of, offsets, addresses, row):
    """(address of the first byte, length) of global ``row``; ``offsets`` holds each part's
    offsets one after another, so part p's entries are shifted by p."""
    p = part_of[row]
    at = row + p
    return addresses[p] + offsets[at], offsets[at + 1] - offsets[at]


@njit(inline="always")
def _equal(a, b, n):
    x = numba.carray(_pointer(a), (n,), np.uint8)  # type: ignore[call-arg]  # numba passes an intrinsic's typing context
    y = numba.carray(_pointer(b), (n,), np.uint8)
    for k in range(n):
        if x[k] != y[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _group(order, hashes, counts, by_row, part_of, offsets, addresses, rows, summed, firsts):
    """Walk the rows in hash order: each new hash starts a group (its first row, count
    and hash go to ``rows``/``summed``/``firsts``); a row with its predecessor's hash must
    hold the same bytes and adds its count. ``counts`` are in hash order, or with ``by_row``
    those of the global rows (read through ``order``: no gather of them first). Returns the
    number of groups, or, if two different values share a hash, ``-1 - i``, ``i`` the
    second one's position in ``order``."""
    g = -1
    prev = np.uint64(0)
    for i in range(len(order)):
        r = order[i]
        h = hashes[i]
        if g < 0 or h != prev:
            g += 1
            rows[g] = r
            summed[g] = counts[r] if by_row else counts[i]
            firsts[g] = h
            prev = h
            continue
        a, na = _row(part_of, offsets, addresses, order[i - 1])
        b, nb = _row(part_of, offsets, addresses, r)
        if na != nb or not _equal(a, b, na):
            return -1 - i
        summed[g] += counts[r] if by_row else counts[i]
    return g + 1


class SharedHash(ValueError):
    """Two different values share a hash; ``position`` is the second one's in the merge order."""

    def __init__(self, position: int) -> None:
        super().__init__(f"two different values share a hash (merge position {position})")
        self.position = position


class StringParts:
    """Several string or binary arrays of one type, without nulls, seen as one.

    Keeps the arrays alive: the kernels read their buffers by address.
    """

    def __init__(self, arrays: list[pa.Array | pa.ChunkedArray], type_: pa.DataType) -> None:
        self.type = type_
        arrays = [(a.chunk(0) if a.num_chunks == 1 else a.combine_chunks()) if isinstance(a, pa.ChunkedArray) else a for a in arrays]
        self._arrays = arrays
        buffers = [byte_buffers(a) for a in arrays]
        self._part_of = np.repeat(np.arange(len(arrays), dtype=np.int32), [len(a) for a in arrays])
        # each part's offsets index its own data: concatenated as they are (int32 for the
        # narrow types), not widened (an int64 copy of 5 M offsets was 40 MB of fresh memory)
        self._offsets = np.concatenate([o for o, _ in buffers]) if buffers else np.zeros(0, np.int64)
        self._addresses = np.array([d.ctypes.data for _, d in buffers], np.int64)

    def __len__(self) -> int:
        return len(self._part_of)

    def _grouped(self, order: np.ndarray, hashes: np.ndarray, counts: np.ndarray, by_row: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(order)
        rows, summed, firsts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, hashes.dtype)
        g = _group(order, hashes, counts.astype(np.int64, copy=False), by_row, self._part_of, self._offsets, self._addresses, rows, summed, firsts)
        if g < 0:
            raise SharedHash(-1 - g)
        return rows[:g], summed[:g], firsts[:g]

    def group(self, order: np.ndarray, hashes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows merged by hash. ``order`` puts the global rows in hash order; ``hashes``
        and ``counts`` are in that order too. Returns the first row of each group of
        equal hashes and the group's summed count; raises :class:`SharedHash` if a
        group holds two different values."""
        rows, summed, _ = self._grouped(order.astype(np.int64, copy=False), hashes, counts, False)
        return rows, summed

    def merge_runs(self, hashes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows merged by hash when each part is a run in hash order: ``hashes`` and ``counts``
        those of the global rows. The runs are merged (engine.stats.runmerge: the order of a
        stable sort), then grouped as :meth:`group` does. Returns the first row of each
        group, its summed count and its hash; raises :class:`SharedHash` as :meth:`group` does."""
        merged, order = runmerge.merge_order(hashes, runmerge.run_bounds([len(a) for a in self._arrays]))
        return self._grouped(order.astype(np.int64, copy=False), merged, counts, True)

    def take(self, rows: np.ndarray) -> pa.Array:
        """The values at these global rows, as one array of the parts' type: Arrow's take of
        the parts as one chunked array, which gathers from the chunks without concatenating
        them (pyarrow 26; 3-4x faster than a numba gather of the bench table's comments,
        whose merged rows interleave 16 parts: 0.064 against 0.24 s for 2.5 M rows)."""
        taken = pa.chunked_array(self._arrays, self.type).take(pa.array(rows.astype(np.int64, copy=False)))
        if taken.num_chunks == 1:
            return taken.chunk(0)
        if taken.num_chunks == 0:
            return pa.array([], self.type)
        try:
            return taken.combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowCapacityError):  # beyond one array of 32-bit offsets: Arrow chunks it
            return taken  # a ChunkedArray, as before
