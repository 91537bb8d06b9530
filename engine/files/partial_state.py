"""The mergeable partial state of one partition, kept next to its statistics files.

A later analyze of a newer table snapshot inherits an unchanged partition's
statistics without reading its data: it loads these two files instead and merges
them into the table level exactly as if the partition had just been profiled.

- ``partial_state.arrow``: one row per statistics column (leaf columns in table
  order), the accumulator states of ``engine.stats.profile.ColumnState``: counts,
  extremes (in the lossless text form of ``engine.values``), moments (the exact sum
  tagged by kind), lengths, the finite float range, the theta and KLL blobs, the
  exact partition distinct count, and each user statistic's state as the bytes of
  its own ``serialize``.
- ``partial_counts.arrow``: the exact value counts of the partition's reduced
  columns (``ColumnProfile.reduced``: discrete columns, numbers and times; what the
  table-level reduction of frequencies, distinct counts and percentiles consumes):
  one row, one field per such column of type
  ``large_list<struct<value: T, count: int64>>`` in the column's own type, so
  every value round-trips bit for bit and a reader takes one column without
  touching the others.

Both are Arrow IPC files (zstd-compressed buffers): plain data, nothing a reader
executes (no pickle). Their schema metadata holds the file identity of the other
statistics files (``metastore.*``), ``metastore.partial_state_version``, the
partition's row count, the columns (name and type) and the fingerprint of the
analysis options the partition's files depend on (:func:`config`). A reader
refuses a file of a newer version, of other columns or of other options with a
:class:`PartialStateError` naming the file; the analyze job then recomputes the
partition (docs/CATALOG.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engine import fileio, measures
from engine import types as mt
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.exceptions import MetastoreError
from engine.files import checksum, layout
from engine.files.checksum import WrittenFile
from engine.files.layout import FileIdentity, json_metadata
from engine.stats.moments import Counts, MinMax
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.sketches import Kll
from engine.stats.user import UserStatistic
from engine.stats.valuecounts import HASH, counts_hashed, counts_sorted, hashed_counts, narrow_count_array

PARTIAL_STATE_FILE = layout.PARTIAL_STATE_FILE
PARTIAL_COUNTS_FILE = "partial_counts.arrow"
FILES = (PARTIAL_STATE_FILE, PARTIAL_COUNTS_FILE)

#: the newest version this code reads and writes (raise it on any change of the encoding)
PARTIAL_STATE_VERSION = 1

_VERSION_KEY = "metastore.partial_state_version"
_CONFIG_KEY = "metastore.partial_state_config"
_ROWS_KEY = "metastore.rows"
_COLUMNS_KEY = "metastore.columns"
_SORTED_KEY = b"metastore.sorted"

#: a partition's partial state: its own columns with the registered statistics' states
#: (engine/measures), "<statistic>_<field>", null where the column has not the statistic;
#: the moments' (``moments_n``, ``moments_mean``, ``moments_m2``, ``moments_sum``) follow ``max``
#: and the lengths' (``lengths_n``, ``lengths_total``, ``lengths_max``) them, the others are at the end
STATE_SCHEMA = pa.schema(
    measures.with_state_fields(
        list(
            pa.schema(
                [
                    ("column", pa.string()),
                    ("type", pa.string()),
                    ("rows", pa.int64()),
                    ("nulls", pa.int64()),
                    ("nans", pa.int64()),
                    ("min", pa.string()),  # engine.values text form, in the profile's work type
                    ("max", pa.string()),
                    ("kll", pa.binary()),
                    ("finite_lo", pa.float64()),
                    ("finite_hi", pa.float64()),
                    ("theta", pa.binary()),
                    ("distinct", pa.int64()),
                    ("user", pa.map_(pa.string(), pa.binary())),  # user statistic -> its serialize() bytes
                ]
            )
        )
    )
)

#: Uncompressed: every profile task writes these files and few are read back. Most of
#: their bytes are the values of mostly distinct columns (strings, sorted keys), which
#: compress little; on a partition of the bench table LZ4 cost 46 CPU-ms for 11.5 MB,
#: no compression 8 CPU-ms for 17 MB once the counts take their narrowest type
#: (engine.stats.valuecounts.narrow_count_array). Readers take any codec (it is recorded per buffer).
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression=None)


class PartialStateError(MetastoreError):
    """A partition's partial state cannot be used: missing, damaged, of a newer version,
    or written for other columns or options. The message names the file."""


# ---------------------------------------------------------------- what the files depend on
def unserializable(user: Sequence[UserStatistic]) -> list[str]:
    """Names of the user statistics whose states cannot be stored (no serialize/deserialize)."""
    return [u.name for u in user if u.serialize is None or u.deserialize is None]


def config(mostly_distinct_ratio: float, user: Sequence[UserStatistic]) -> dict[str, Any]:
    """The analysis options a partition's files depend on, beyond its data and columns.

    Two jobs with the same config and the same columns write the same partition
    files for the same data, except histograms (which follow the table's edges,
    checked separately) and the sketches' random compaction (KLL).
    """
    return {
        "partial_state_version": PARTIAL_STATE_VERSION,
        "format_version": layout.FORMAT_VERSION,
        "mostly_distinct_ratio": float(mostly_distinct_ratio),
        "user_statistics": [u.name for u in user],
        # a partition stored before a statistic was registered has not its state: recomputed
        **({"statistics": list(measures.configured())} if measures.configured() else {}),
    }


def config_fingerprint(cfg: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def uris(directory: str) -> tuple[str, str]:
    """(partial_state.arrow, partial_counts.arrow) in a partition's directory."""
    return fileio.join(directory, PARTIAL_STATE_FILE), fileio.join(directory, PARTIAL_COUNTS_FILE)


# ---------------------------------------------------------------- encoding
def _state_row(
    profile: ColumnProfile, state: ColumnState, user: Mapping[str, UserStatistic], extremes: tuple[str | None, str | None]
) -> dict[str, Any]:
    """One column's row; ``extremes``: its min and max in text form (every column's encoded together)."""
    return {
        "column": profile.name,
        "type": mt.type_name(profile.type),
        "rows": state.counts.rows,
        "nulls": state.counts.nulls,
        "nans": state.counts.nans,
        "min": extremes[0],
        "max": extremes[1],
        "kll": state.kll.blob if state.kll is not None else None,
        "finite_lo": state.finite_range[0] if state.finite_range else None,
        "finite_hi": state.finite_range[1] if state.finite_range else None,
        "theta": state.theta,
        "distinct": state.distinct,
        "user": [(name, user[name].serialize(value)) for name, value in state.user.items()],  # type: ignore[misc]  # user statistics registered by name: their types differ per statistic
        **{f"{m.name}_{k}": v for m in profile.measures for k, v in m.encode(state.measures.get(m.name, m.zero())).items()},
    }


def _state_rows(profiles: Sequence[ColumnProfile], states: Mapping[str, ColumnState], user: Mapping[str, UserStatistic]) -> list[dict[str, Any]]:
    """The rows of ``profiles`` in order; their extremes encoded together (one encode a type)."""
    texts = value_forms.encode_scalars([x for p in profiles for x in (states[p.name].minmax.min, states[p.name].minmax.max)])
    return [_state_row(p, states[p.name], user, (texts[2 * i], texts[2 * i + 1])) for i, p in enumerate(profiles)]


def _metadata(identity: FileIdentity, kind: str, rows: int, profiles: Sequence[ColumnProfile], cfg: Mapping[str, Any]) -> dict[str, str]:
    return identity.metadata(
        kind,
        {
            _VERSION_KEY: str(PARTIAL_STATE_VERSION),
            _CONFIG_KEY: config_fingerprint(cfg),
            _ROWS_KEY: str(rows),
            _COLUMNS_KEY: json_metadata([[p.name, mt.type_name(p.type)] for p in profiles]),
        },
    )


def _write_ipc(uri: str, table: pa.Table) -> WrittenFile:
    """Written as it is made; the checksum is that of the bytes written (checksum.Checksummed)."""
    with fileio.open_output(uri) as out:
        sink = checksum.Checksummed(out)
        with pa.ipc.new_file(pa.PythonFile(sink, mode="w"), table.schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(table)
    return sink.written()


def write(
    directory: str,
    identity: FileIdentity,
    rows: int,
    profiles: Sequence[ColumnProfile],
    states: Mapping[str, ColumnState],
    counts: Mapping[str, pa.Table],
    user: Sequence[UserStatistic],
    cfg: Mapping[str, Any],
) -> dict[str, WrittenFile]:
    """Write a partition's two partial-state files into ``directory``; returns their sizes
    and checksums by file name (the partition's statistics.parquet records them).

    ``profiles``: every statistics column in table order; ``states``: their
    finalized partition states; ``counts``: the exact value counts of the discrete
    columns. The caller checks :func:`unserializable` first.
    """
    by_name = {u.name: u for u in user}
    table = pa.Table.from_pylist(_state_rows(profiles, states, by_name), schema=STATE_SCHEMA)
    state_uri, counts_uri = uris(directory)
    written = {PARTIAL_STATE_FILE: _write_ipc(state_uri, table.replace_schema_metadata(_metadata(identity, "partial_state", rows, profiles, cfg)))}
    written[PARTIAL_COUNTS_FILE] = write_counts(counts_uri, identity, rows, profiles, counts, cfg)
    return written


def write_counts(
    uri: str,
    identity: FileIdentity,
    rows: int,
    profiles: Sequence[ColumnProfile],
    counts: Mapping[str, pa.Table],
    cfg: Mapping[str, Any],
    kind: str = "partial_counts",
) -> WrittenFile:
    """Exact value counts of the discrete columns among ``profiles`` as one Arrow IPC file: a
    partition's ``partial_counts.arrow``, or (``kind="table_counts"``) the table's at a full
    analyze (engine/stats/appendcounts.py reads them after an append)."""
    fields, arrays = [], []
    discrete = [p for p in profiles if p.name in counts]
    for p in discrete:
        c = counts[p.name]
        value_type = c.schema.field("value").type
        values = contiguous(c["value"]) if c.num_rows else pa.array([], value_type)
        cnt = narrow_count_array(c["count"].to_numpy() if c.num_rows else np.zeros(0, np.int64))
        meta = {_SORTED_KEY: b"value"} if counts_sorted(c) else None
        if counts_hashed(c) and c.num_rows:
            # strings in hash order keep their hashes: an inherited partition's counts then
            # take the table reduction's hash merge like a freshly profiled one's
            hashes = contiguous(c[HASH])
            inner = pa.StructArray.from_arrays([values, cnt, hashes], names=["value", "count", HASH])
            meta = {_SORTED_KEY: b"hash"}
        else:
            inner = pa.StructArray.from_arrays([values, cnt], names=["value", "count"])
        arrays.append(pa.LargeListArray.from_arrays(pa.array([0, len(inner)], pa.int64()), inner))
        fields.append(pa.field(p.name, arrays[-1].type, metadata=meta))
    schema = pa.schema(fields, metadata=_metadata(identity, kind, rows, discrete, cfg))
    return _write_ipc(uri, pa.Table.from_arrays(arrays, schema=schema) if fields else schema.empty_table())


# ---------------------------------------------------------------- decoding
def check_file(uri: str, expected_checksum: str = "") -> pa.Buffer:
    """The bytes of a partial-state file, checked against ``expected_checksum`` (recorded in its
    partition's statistics.parquet when it was written; "" for older files): PartialStateError
    naming the file if it is missing, unreadable or damaged. What carrying an unchanged table
    over checks (engine/runtime/inheritance.py) without decoding the state."""
    try:
        data = fileio.read_buffer(uri)
    except FileNotFoundError:
        raise PartialStateError(f"partial state missing: {uri}") from None
    except OSError as exc:
        if not fileio.exists(uri):
            raise PartialStateError(f"partial state missing: {uri}") from None
        raise PartialStateError(f"partial state unreadable: {uri}: {exc}") from None
    if expected_checksum and checksum.of_bytes(data) != expected_checksum:
        raise PartialStateError(
            f"partial state damaged: {uri}: checksum {checksum.of_bytes(data)}, its partition's statistics.parquet recorded {expected_checksum}"
        )
    return data


def _read_ipc(uri: str, expected_checksum: str = "") -> pa.Table:
    data = check_file(uri, expected_checksum)
    try:
        return pa.ipc.open_file(pa.BufferReader(data)).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise PartialStateError(f"partial state damaged: {uri}: not a readable Arrow IPC file ({exc})") from None


def _check(uri: str, table: pa.Table, kind: str, profiles: Sequence[ColumnProfile], cfg: Mapping[str, Any]) -> dict[str, str]:
    md = layout.decode_metadata(table.schema.metadata)
    if md.get("metastore.kind") != kind:
        raise PartialStateError(f"partial state damaged: {uri}: not a {kind} file (kind {md.get('metastore.kind')!r})")
    try:
        version = int(md.get(_VERSION_KEY, ""))
    except ValueError:
        raise PartialStateError(f"partial state damaged: {uri}: no version") from None
    if version > PARTIAL_STATE_VERSION:
        raise PartialStateError(f"partial state of a newer version: {uri}: version {version}, this Metastore reads up to {PARTIAL_STATE_VERSION}")
    if md.get(_CONFIG_KEY) != config_fingerprint(cfg):
        raise PartialStateError(f"partial state of other analysis options: {uri}")
    want = [[p.name, mt.type_name(p.type)] for p in profiles]
    if json.loads(md.get(_COLUMNS_KEY, "null")) != want:
        raise PartialStateError(f"partial state of other columns: {uri}")
    return md


def _decode_state(profile: ColumnProfile, row: dict[str, Any], user: Mapping[str, UserStatistic]) -> ColumnState:
    state = profile.zero()
    state.counts = Counts(row["rows"], row["nulls"], row["nans"])
    if row["min"] is not None or row["max"] is not None:
        # both in one decode: a decode is a few kernel calls whatever its length (half of
        # loading an inherited partition's state went to decoding extremes one at a time)
        lo, hi = value_forms.decode(pa.array([row["min"], row["max"]], pa.string()), profile.work_type)
        state.minmax = MinMax(lo, hi)
    if profile.kll is not None:
        state.kll = Kll(row["kll"])
    if row["finite_lo"] is not None:
        state.finite_range = (row["finite_lo"], row["finite_hi"])
    state.theta = row["theta"]
    state.distinct = row["distinct"]
    for m in profile.measures:
        prefix = f"{m.name}_"
        state.measures[m.name] = m.decode({f.name: row[prefix + f.name] for f in m.state_fields})
    stored = dict(row["user"] or [])
    for u in profile.user:
        if u.name in stored:
            state.user[u.name] = user[u.name].deserialize(stored[u.name])  # type: ignore[misc]  # user statistics registered by name: their types differ per statistic
    return state


def read_states(
    uri: str, profiles: Sequence[ColumnProfile], user: Sequence[UserStatistic], cfg: Mapping[str, Any], expected_checksum: str = ""
) -> tuple[int, dict[str, ColumnState]]:
    """(row count, {column: ColumnState}) of a partition's ``partial_state.arrow``.

    Raises PartialStateError naming the file when it is missing, damaged (or its content
    differs from ``expected_checksum``, recorded when it was written), of a newer version,
    or written for other columns or options.
    """
    table = _read_ipc(uri, expected_checksum)
    md = _check(uri, table, "partial_state", profiles, cfg)
    if table.schema.remove_metadata() != STATE_SCHEMA:
        raise PartialStateError(f"partial state damaged: {uri}: unexpected schema")
    by_name = {u.name: u for u in user}
    states: dict[str, ColumnState] = {}
    rows = table.to_pylist()
    if [r["column"] for r in rows] != [p.name for p in profiles]:
        raise PartialStateError(f"partial state damaged: {uri}: rows do not match its columns")
    for p, row in zip(profiles, rows):
        try:
            states[p.name] = _decode_state(p, row, by_name)
        except Exception as exc:  # noqa: BLE001 - any undecodable value: the file is unusable
            raise PartialStateError(f"partial state damaged: {uri}: column {p.name!r}: {type(exc).__name__}: {exc}") from None
    return int(md[_ROWS_KEY]), states


def read_counts(
    uri: str,
    profiles: Sequence[ColumnProfile],
    cfg: Mapping[str, Any],
    expected_checksum: str = "",
    kind: str = "partial_counts",
    *,
    widen: bool = True,
) -> dict[str, pa.Table]:
    """{column: (value, count) table} of a partition's ``partial_counts.arrow`` (``profiles``: its
    reduced columns, ``ColumnProfile.reduced``), or of the table's counts (``kind="table_counts"``, :func:`write_counts`).
    Counts are int64, or with ``widen=False`` as stored (the narrowest unsigned type: a caller
    that only picks some of them saves widening all, 40 MB for the bench table's ids)."""
    table = _read_ipc(uri, expected_checksum)
    _check(uri, table, kind, profiles, cfg)
    out: dict[str, pa.Table] = {}
    for p in profiles:
        field = table.schema.field(p.name)
        col = table.column(p.name)
        if not mt.is_large_list(field.type) or table.num_rows != 1:
            raise PartialStateError(f"partial state damaged: {uri}: column {p.name!r} is not a list of value counts")
        entries = pa.concat_arrays([c.flatten() for c in col.chunks]) if col.num_chunks != 1 else col.chunk(0).flatten()
        order = (field.metadata or {}).get(_SORTED_KEY)
        meta = {b"sorted": b"value"} if order == b"value" else None
        try:
            count = entries.field("count")  # stored in the narrowest type
            if not mt.is_integer(count.type):
                raise TypeError(f"counts of type {count.type}")
            if widen:
                count = count.cast(pa.int64())
        except (pa.ArrowException, KeyError, TypeError) as exc:
            raise PartialStateError(f"partial state damaged: {uri}: column {p.name!r} has no integer counts ({exc})") from None
        if order == b"hash":
            try:
                hashes = entries.field(HASH).to_numpy(zero_copy_only=False)
            except (pa.ArrowException, KeyError) as exc:
                raise PartialStateError(f"partial state damaged: {uri}: column {p.name!r} is marked hashed but has no hashes ({exc})") from None
            out[p.name] = hashed_counts(entries.field("value"), count, hashes)
            continue
        out[p.name] = pa.table({"value": entries.field("value"), "count": count}, metadata=meta)
    return out


# ---------------------------------------------------------------- the table's merged state
#: the table's merged state (``table_state.arrow``, beside the table's counts): what an append
#: re-analyze merges instead of every inherited partition's ``partial_state.arrow``
TABLE_STATE_FILE = "table_state.arrow"
TABLE_STATE_KIND = "table_state"
#: its one column beyond :data:`STATE_SCHEMA`: the KLL sketches of every partition it covers
#: (in table order, partitions without one left out); their merge pools the sketches' levels
#: (engine.stats.sketches.merge_kll), so a merged sketch merged again would not give a full
#: analyze's bytes: the parts are kept instead of the merged sketch (``kll`` is null)
_KLL_PARTS = "kll_parts"
TABLE_STATE_SCHEMA = STATE_SCHEMA.append(pa.field(_KLL_PARTS, pa.large_list(pa.large_binary())))


def write_table_state(
    uri: str,
    identity: FileIdentity,
    rows: int,
    profiles: Sequence[ColumnProfile],
    states: Mapping[str, ColumnState],
    kll_parts: Mapping[str, Sequence[bytes]],
    user: Sequence[UserStatistic],
    cfg: Mapping[str, Any],
) -> WrittenFile:
    """The table's merged state of every partition it covers, in table order (``states``: what
    ``engine.stats.columnwise.merge`` gave; their KLL sketches are left out for ``kll_parts``):
    one row a column, as a partition's :data:`PARTIAL_STATE_FILE` holds its own."""
    by_name = {u.name: u for u in user}
    state_rows = _state_rows(profiles, states, by_name)
    for p, row in zip(profiles, state_rows, strict=True):
        row["kll"] = None
        row[_KLL_PARTS] = list(kll_parts.get(p.name, ()))
    table = pa.Table.from_pylist(state_rows, schema=TABLE_STATE_SCHEMA)
    return _write_ipc(uri, table.replace_schema_metadata(_metadata(identity, TABLE_STATE_KIND, rows, profiles, cfg)))


def read_table_state(
    uri: str, profiles: Sequence[ColumnProfile], user: Sequence[UserStatistic], cfg: Mapping[str, Any], expected_checksum: str = ""
) -> tuple[int, dict[str, ColumnState], dict[str, list[bytes]]]:
    """(row count, {column: merged state}, {column: its partitions' KLL sketches}) of a
    :data:`TABLE_STATE_FILE`; PartialStateError naming the file as :func:`read_states`."""
    table = _read_ipc(uri, expected_checksum)
    md = _check(uri, table, TABLE_STATE_KIND, profiles, cfg)
    if table.schema.remove_metadata() != TABLE_STATE_SCHEMA:
        raise PartialStateError(f"partial state damaged: {uri}: unexpected schema")
    by_name = {u.name: u for u in user}
    parts = table.column(_KLL_PARTS).to_pylist()
    rows = table.drop_columns([_KLL_PARTS]).to_pylist()
    if [r["column"] for r in rows] != [p.name for p in profiles]:
        raise PartialStateError(f"partial state damaged: {uri}: rows do not match its columns")
    states: dict[str, ColumnState] = {}
    klls: dict[str, list[bytes]] = {}
    for p, row, kll in zip(profiles, rows, parts):
        try:
            states[p.name] = _decode_state(p, row, by_name)
        except Exception as exc:  # noqa: BLE001 - any undecodable value: the file is unusable
            raise PartialStateError(f"partial state damaged: {uri}: column {p.name!r}: {type(exc).__name__}: {exc}") from None
        klls[p.name] = list(kll or [])
    return int(md[_ROWS_KEY]), states, klls
