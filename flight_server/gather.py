"""Rows of a prepared table, gathered with the GIL held: :class:`RowsTable` and :func:`take_rows`.

A statistics answer from a prepared entry (flight_server/prepared.py) is ~10 rows of a
~1,000-row, ~32-column table. ``pyarrow.compute``'s take of them cost 125-180 µs CPU, ~4 µs
of compute dispatch per column, and ran without the GIL: under 16 closed-loop clients
(bench/bench_flight.py) the handler then waited behind the others to take the GIL back, and
statistics answers were ~1.4x slower than the other kinds. Every pure-pyarrow way around it
(one-row batches, a take of a struct, concat, from_buffers, other allocators) failed
(bench/HISTORY.md, Flight).

So the gather is done by a small C extension, ``flight_server/_gather.c``, that talks the
Arrow C Data Interface only: a stable C ABI of two structs, exchanged with pyarrow as
PyCapsules (``__arrow_c_array__``) and one struct address (``pa.RecordBatch._import_from_c``).
It never links to libarrow nor includes its headers, so it does not depend on the pyarrow
version (docs/ARCHITECTURE.md, Libraries). A table is exported once, when it is prepared
(prepared tables are immutable and cached); a request copies its rows into new malloc'd
buffers in plain loops (a few µs, the GIL held throughout) and pyarrow imports them (the
import releases the GIL only for its own few µs; its release callbacks free the buffers).

Types gathered: fixed-width primitives (integers, floats, dates, times, timestamps,
durations, decimals, fixed-size binary), booleans, null, utf8/binary and their large
variants, with validity bitmaps and sliced inputs. A table with any other column type
(list, struct, dictionary, view types...) is taken by ``pyarrow.compute`` as before
(:func:`take_rows`), as is every table when the extension is missing (an install without a
C compiler): the server says so once at start (:data:`AVAILABLE`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

try:
    from flight_server._gather import Gatherer
except ImportError:  # built by `pip install -e .` (setup.py); without it: pc.take
    Gatherer = None  # type: ignore[assignment,misc]

#: whether the C extension is here (the server warns at start when it is not)
AVAILABLE = Gatherer is not None

_TAKE_IN_RANGE = pc.TakeOptions(boundscheck=False)  # prepared rows: positions of the table itself


def take_rows(table: pa.Table, rows: list[int]) -> pa.Table:
    """``table``'s rows at ``rows`` (positions within it, repeats allowed), in that order, as a
    one-chunk table with ``table``'s schema and metadata, by ``pyarrow.compute`` (the fallback
    of :class:`RowsTable`, and its oracle in tests).

    One call into Arrow, so one release of the GIL: a take of a record batch and then
    ``Table.from_batches`` released it twice. The positions stay ``pa.array(rows, pa.int64())``:
    ``pa.Array.from_buffers`` validates the array without the GIL (bench/HISTORY.md).
    """
    return pc.call_function("take", [table, pa.array(rows, pa.int64())], _TAKE_IN_RANGE)


def _gatherer(table: pa.Table) -> Gatherer | None:
    """The table exported to a :class:`Gatherer`, or None: a type it does not gather, or no extension."""
    if Gatherer is None or table.num_rows == 0:
        return None
    batches = table.to_batches()
    batch = batches[0] if len(batches) == 1 else table.combine_chunks().to_batches()[0]
    schema_capsule, array_capsule = batch.__arrow_c_array__()
    try:
        return Gatherer(schema_capsule, array_capsule, pa.RecordBatch._import_from_c, table.schema)
    except TypeError:  # a column type _gather.c does not copy
        return None


class RowsTable:
    """An immutable table prepared for :meth:`take`: exported once to the C gatherer if it can
    (``export``; False for a table used once: the export costs more than one ``pc.take``)."""

    __slots__ = ("_gatherer", "table")

    def __init__(self, table: pa.Table, export: bool = True) -> None:
        self.table = table
        self._gatherer = _gatherer(table) if export else None

    @property
    def gathers(self) -> bool:
        """Whether :meth:`take` copies in C (else ``pyarrow.compute``)."""
        return self._gatherer is not None

    def take(self, rows: list[int]) -> pa.Table:
        """:func:`take_rows` of the table: the same answer (tests/flight_server/test_gather.py).
        IndexError for a row outside the table."""
        gatherer = self._gatherer
        if gatherer is None:
            return take_rows(self.table, rows)
        return pa.Table.from_batches([gatherer.take(rows)])


__all__ = ["AVAILABLE", "RowsTable", "take_rows"]
