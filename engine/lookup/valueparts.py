"""Which partitions hold a value of a column, and how often (``TableStatistics.value_partitions``;
tables analyzed with value partitions): the ``value`` column of the column's row groups whose
min/max admit the value, then the distribution of the one row group that has it; an unstored
value from the exact value counts of the partitions whose min/max admit it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import arrowcompute as pc
from engine import expressions as ex
from engine import fileio
from engine.exceptions import InvalidArgumentError, StatisticsFileCorruptError, StatisticsNotFoundError
from engine.files import checksum, layout
from engine.lookup.files import StatisticsFile, damaged
from engine.lookup.pruning import prune_partitions
from engine.lookup.reader import StatisticsReader, py_or_scalar

#: ``ValuePartitions.status``: the value is stored with its distribution (or, unstored,
#: found in its partition's exact value counts)
FOUND = "found"
#: the value does not occur: the column's frequencies are complete and do not hold it, no
#: partition's min/max admits it, or those that do do not count it
ABSENT = "absent"
#: the column stores only values seen more than once (or none): an unstored value occurs
#: at most once, in a partition the table's frequencies do not name, and too many
#: partitions' min/max admit it to look it up in their value counts
AT_MOST_ONCE = "at_most_once"
#: an unstored value (of a mostly distinct column) is looked up in the exact value counts
#: of the partitions whose min/max admit it, up to this many (one file each); beyond, it
#: stays ``AT_MOST_ONCE``
RESOLVE_CANDIDATES = 64


@dataclass(frozen=True)
class ValuePartitions:
    """Which partitions hold a value of a column, and how often (``TableStatistics.value_partitions``).

    ``frequency`` is the value's count in the table: exact when ``status`` is
    ``found`` or ``absent`` (0), None when ``at_most_once`` (0 or 1). ``partitions``
    are (partition key, count) in table partition order, only where the value
    occurs (empty unless found). ``candidates`` (when asked for, for an
    ``at_most_once`` value) are the partitions whose min/max admit the value: if the
    value occurs, it is in one of them. ``note`` says in words what the answer means.
    """

    table: str
    column: str
    value: Any  # the value in its column's type (Python form)
    text: str  # its text form (docs/VALUE_FORMS.md), as stored
    kind: str  # the column's frequencies kind: complete, duplicates_only, all_distinct
    status: str  # FOUND, ABSENT or AT_MOST_ONCE
    frequency: int | None
    partitions: tuple[tuple[str, int], ...]
    table_partitions: int  # partitions of the table
    note: str
    candidates: tuple[str, ...] | None = None


def value_partitions(ts: StatisticsReader, column: str, value: object, candidates: bool = False) -> ValuePartitions:
    """The partitions holding ``value`` in ``column``, with its count in each
    (tables analyzed with value partitions: ``analyze(value_partitions=True)``).

    ``value``: in the column's type, or its text form as a str. Reads the footer,
    the ``value`` column of the column's row groups whose statistics admit the
    value (the head group first), and the distribution of the row group holding
    it. A value the table stores only implicitly (a mostly or all distinct
    column) occurs at most once: it is looked up in the exact value counts
    (``partial_counts.arrow``) of the partitions whose min/max admit it (one
    statistics lookup per partition, then one file per candidate), giving
    ``FOUND`` (once, in its partition) or ``ABSENT``; with more than
    ``RESOLVE_CANDIDATES`` candidates, ``AT_MOST_ONCE`` (its partition is not
    recorded). ``candidates`` lists the partitions whose min/max admit it.
    """
    from engine.stats import valuepartitions  # here: the other lookups do not need it (start-up, #20)

    column = ts.resolve_column(column)
    scalar, text = ts.value_text(column, value)
    f = ts.stored_file(layout.FREQUENCIES_FILE)
    index = f.meta_json("metastore.frequencies")
    if column not in index:
        raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
    if ts.older_segments:  # an append re-analyze wrote deltas: those never carry value partitions
        raise StatisticsNotFoundError(
            f"table {ts.table!r} (job {ts.job_id}) keeps its frequencies in {len(ts.older_segments) + 1} segments (appends "
            f"analyzed since its last full analyze), which carry no value partitions: analyze it again with value partitions "
            f"(metastore analyze --value-partitions) to look values up by partition"
        )
    if valuepartitions.COLUMN not in f.schema.names or layout.PARTITIONS_KEY not in f.kv:
        raise StatisticsNotFoundError(
            f"table {ts.table!r} (job {ts.job_id}) was analyzed without value partitions: "
            f"analyze it again with value partitions (metastore analyze --value-partitions) to look values up by partition"
        )
    keys: list[str] = f.meta_json(layout.PARTITIONS_KEY)
    first, n_groups, _, kind = index[column]
    common = dict(table=ts.table, column=column, value=py_or_scalar(scalar), text=text, kind=kind, table_partitions=len(keys))
    found = find_value(f, text, range(first, first + n_groups))
    if found is not None:
        frequency, dist = found
        pairs = tuple((keys[i], c) for i, c in valuepartitions.decode(dist, len(keys)))
        where = f"{len(pairs)} of {len(keys)} partition{'s' if len(keys) != 1 else ''}"
        return ValuePartitions(**common, status=FOUND, frequency=frequency, partitions=pairs, note=f"occurs {frequency:,} times, in {where}")
    if kind == layout.FREQ_COMPLETE:
        return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note="does not occur in the table (its frequencies are complete)")
    why = (
        "every value of the column occurs exactly once"
        if kind == layout.FREQ_ALL_DISTINCT
        else "the column stores only values that occur more than once"
    )
    found_in = _candidates(ts, column, scalar, keys)
    asked = found_in if candidates else None
    if found_in == ():
        note = "does not occur in the table (no partition's min/max admits it)"
        return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note=note, candidates=asked)
    held = _held_in(ts, column, scalar, found_in) if len(found_in) <= RESOLVE_CANDIDATES else None
    if held is not None:  # the candidates' exact value counts say where (and whether) it occurs
        if not held:
            note = f"does not occur in the table (not in the exact value counts of the {len(found_in)} partitions whose min/max admit it)"
            return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note=note, candidates=asked)
        frequency = sum(c for _, c in held)
        note = f"occurs {frequency:,} time{'s' if frequency != 1 else ''}, in {len(held)} of {len(keys)} partition{'s' if len(keys) != 1 else ''} (from the partitions' exact value counts: {why})"
        return ValuePartitions(**common, status=FOUND, frequency=frequency, partitions=held, note=note, candidates=asked)
    note = f"occurs at most once in the table ({why}): if it occurs, its one partition is not recorded"
    note += f"; partitions whose min/max admit it: {len(found_in)} of {len(keys)}"
    return ValuePartitions(**common, status=AT_MOST_ONCE, frequency=None, partitions=(), note=note, candidates=asked)


def _held_in(ts: StatisticsReader, column: str, scalar: pa.Scalar, partitions: Sequence[str]) -> tuple[tuple[str, int], ...] | None:
    """(partition, count) of those of ``partitions`` whose exact value counts (their
    ``partial_counts.arrow``) hold ``scalar``; None when one of them keeps none for the column."""
    held = []
    for key in partitions:
        counts = _partition_counts(ts, key, column)
        if counts is None:
            return None
        values = counts.field("value")
        try:
            probe = scalar if scalar.type == values.type else scalar.cast(values.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        at = pc.index(values, probe).as_py()
        if at >= 0:
            held.append((key, int(counts.field("count")[at].as_py())))
    return tuple(held)


def _partition_counts(ts: StatisticsReader, partition: str, column: str) -> pa.StructArray | None:
    """A partition's exact (value, count) entries of ``column`` from its partial state
    (checked against the checksum its statistics.parquet recorded), or None without them."""
    from engine.files.partial_state import PARTIAL_COUNTS_FILE

    f = ts.stored_file(layout.STATISTICS_FILE, partition)
    expected = layout.partial_state_checksums(f.kv).get(PARTIAL_COUNTS_FILE, "")
    uri = fileio.join(ts.file_uri(layout.FREQUENCIES_FILE, partition).rsplit("/", 1)[0], PARTIAL_COUNTS_FILE)
    try:
        data = fileio.read_bytes(uri)
    except FileNotFoundError:
        return None
    if expected and checksum.of_bytes(data) != expected:
        raise StatisticsFileCorruptError(
            f"statistics file damaged: {uri}: checksum {checksum.of_bytes(data)}, its partition's statistics.parquet recorded {expected}",
            uri=uri,
        )
    try:
        t = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except pa.ArrowInvalid as exc:
        raise damaged(uri, exc) from None
    if column not in t.schema.names or t.num_rows != 1:
        return None
    return t.column(column).combine_chunks().flatten()


def find_value(f: StatisticsFile, text: str, groups: range) -> tuple[int, dict[str, Any]] | None:
    """(frequency, distribution) of the row holding ``text``; row groups whose
    ``value`` statistics exclude it are not read."""
    from engine.stats import valuepartitions

    col = f.schema.get_field_index("value")
    for g in groups:
        stats = f.pf.metadata.row_group(g).column(col).statistics
        if stats is not None and stats.has_min_max and isinstance(stats.min, str) and isinstance(stats.max, str):
            if text < stats.min or text > stats.max:  # code point order = UTF-8 byte order
                continue
        values = f.read_row_group(g, ("value",))["value"]
        at = pc.index(values, text).as_py()
        if at >= 0:
            with f.lock:  # the row group's distributions: not kept in the row-group cache (they can be large)
                t = f.pf.read_row_group(g, columns=["frequency", valuepartitions.COLUMN])
            row = t.slice(at, 1).to_pylist()[0]
            return int(row["frequency"]), row[valuepartitions.COLUMN]
    return None


def _candidates(ts: StatisticsReader, column: str, scalar: pa.Scalar, keys: list[str]) -> tuple[str, ...]:
    """Partitions whose statistics admit ``column = value`` (the predicate evaluator)."""
    expr = ts.bind(ex.predicate(ex.col(column), ex.Op.EQ, scalar))
    wanted = set(keys)
    return tuple(p.partition for p in prune_partitions(ts, expr).partitions if p.might_match and p.partition in wanted)
