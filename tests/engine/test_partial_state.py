"""The partial-state files of a partition: every column type round-trips, bad files are refused by name.

Pure logic (no Ray): states come from ``ColumnProfile`` over generated columns,
are written with ``engine.files.partial_state`` and read back; the decoded state
must equal the original field by field, finalize to the same statistics row and
merge with another partition's state to the same table state.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import values as value_forms
from engine.exceptions import InvalidArgumentError
from engine.files import partial_state
from engine.files.layout import FileIdentity
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import TOP1_SHARE, ZERO_COUNT, UserStatistic
from engine.stats.valuecounts import HASH, counts_hashed, counts_sorted

N = 400
USER = [ZERO_COUNT, TOP1_SHARE]


def _columns() -> dict[str, pa.Array]:
    rng = np.random.default_rng(11)
    ints = rng.integers(-1000, 1000, N)
    mask = rng.random(N) < 0.1

    def nulls(values: list, t: pa.DataType) -> pa.Array:
        return pa.array([None if m else v for v, m in zip(values, mask)], type=t)

    big = [int(v) for v in rng.integers(2**61, 2**62, N)]  # sums beyond int64
    big[0], big[1] = -(2**63), 2**63 - 1
    _base = dt.datetime(2024, 1, 1)
    return {
        "b": nulls([bool(v % 2) for v in ints], pa.bool_()),
        "i8": nulls([int(v % 100) for v in ints], pa.int8()),
        "i32": nulls(ints.tolist(), pa.int32()),
        "i64": pa.array(big, pa.int64()),
        "u64": pa.array([2**64 - 1] + [int(v) for v in rng.integers(0, 2**63, N - 1, dtype=np.uint64)], pa.uint64()),
        "f16": pa.array(rng.random(N).astype(np.float16)),
        "f32": nulls(rng.random(N).astype(np.float32).tolist(), pa.float32()),
        "f64": pa.array(np.concatenate([[np.nan, np.inf, -0.0], rng.normal(size=N - 3)])),
        "f64_inf": pa.array([math.inf, -math.inf, 1.0] * (N // 3) + [2.0] * (N % 3)),
        "dec": nulls([Decimal(int(v)) / 100 for v in ints], pa.decimal128(10, 2)),
        "dec256": pa.array([Decimal(10**60 + int(v)) for v in ints], pa.decimal256(70, 0)),
        "d32": nulls([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in ints], pa.date32()),
        "t64": nulls([dt.time(abs(int(v)) % 24, 5, 6, 123) for v in ints], pa.time64("us")),
        "ts_tz": pa.array(rng.integers(0, 2**62, N), pa.int64()).view(pa.timestamp("ns", tz="Europe/Paris")),
        "dur": nulls(ints.tolist(), pa.duration("ms")),
        "s": nulls([f"v{v % 37}é" for v in ints], pa.string()),
        "ls": nulls([f"w{v}" for v in ints], pa.large_string()),
        "bin": nulls([bytes([abs(int(v)) % 256, 0xFF]) for v in ints], pa.binary()),
        "fsb": nulls([int(v % 50).to_bytes(2, "little", signed=True) for v in ints], pa.binary(2)),
        "dict": pa.array([f"k{v % 5}" for v in ints]).dictionary_encode(),
        "all_null": pa.array([None] * N, pa.int64()),
        "nul": pa.nulls(N),
        "lst": pa.array([[int(v)] for v in ints], pa.list_(pa.int64())),  # unsupported: counts only
    }


IDENTITY = FileIdentity("t", "file:///t", "partition", "p=1", "snap", "job", "2024-01-01T00:00:00.000+00:00")


def _profile(name: str, arr: pa.Array) -> tuple[ColumnProfile, ColumnState, pa.Table | None]:
    """A partition's finalized state of one column, as profile_partition computes it."""
    p = ColumnProfile(name, arr.type, USER)
    column = p.prepare(arr)
    state = p.update(p.zero(), column)
    values_state = p.values.update(p.values.zero(), column) if p.values else None
    _, counts = p.finalize_partition(state, values_state, column)
    return p, state, counts


def _f(x: float | None) -> Any:
    return None if x is None else float(x).hex()


def _key(state: ColumnState) -> tuple:
    """Everything a state holds, comparable (NaN-safe, scalars by type and text form)."""
    mm = state.minmax

    def sc(s: pa.Scalar | None) -> Any:
        return None if s is None else (str(s.type), value_forms.encode_scalar(s))

    m, ln = state.measures.get("moments"), state.measures.get("lengths")
    return (
        state.counts,
        sc(mm.min),
        sc(mm.max),
        None if m is None else (m.n, _f(m.mean), _f(m.m2), repr(m.sum), type(m.sum).__name__),
        ln,
        None if state.kll is None else state.kll.blob,
        None if state.finite_range is None else tuple(map(_f, state.finite_range)),
        state.theta,
        state.distinct,
        sorted((k, repr(v)) for k, v in state.user.items()),
    )


def _row_key(row: dict[str, Any]) -> dict[str, Any]:
    def norm(v: Any) -> Any:
        if isinstance(v, pa.Scalar):
            return (str(v.type), value_forms.encode_scalar(v))
        if isinstance(v, float):
            return v.hex()
        return v

    return {k: norm(v) for k, v in row.items()}


def _write_two(tmp_path) -> tuple[dict, dict, list[ColumnProfile]]:
    cols = _columns()
    halves = [{n: a.slice(0, N // 2) for n, a in cols.items()}, {n: a.slice(N // 2) for n, a in cols.items()}]
    written = []
    cfg = partial_state.config(0.5, USER)
    for i, half in enumerate(halves):
        profiled = {n: _profile(n, a) for n, a in half.items()}
        profiles = [profiled[n][0] for n in cols]
        states = {n: profiled[n][1] for n in cols}
        counts = {n: profiled[n][2] for n in cols if profiled[n][0].discrete}
        d = tmp_path / f"p{i}"
        d.mkdir()
        partial_state.write(str(d), IDENTITY, N // 2, profiles, states, counts, USER, cfg)
        written.append((str(d), profiles, states, counts))
    return written, cfg, written[0][1]


def test_every_type_round_trips_state_and_counts(tmp_path) -> None:
    written, cfg, _ = _write_two(tmp_path)
    decoded = []
    for d, profiles, states, counts in written:
        state_uri, counts_uri = partial_state.uris(d)
        assert open(state_uri, "rb").read(6) == b"ARROW1"  # Arrow IPC: data, never pickle
        rows, got = partial_state.read_states(state_uri, profiles, USER, cfg)
        assert rows == N // 2
        for p in profiles:
            assert _key(got[p.name]) == _key(states[p.name]), p.name
            assert _row_key(p._common(got[p.name])) == _row_key(p._common(states[p.name])), p.name
        discrete = [p for p in profiles if p.discrete]
        assert {p.name for p in discrete} == set(counts)
        got_counts = partial_state.read_counts(counts_uri, discrete, cfg)
        for name, c in counts.items():
            assert got_counts[name].schema.field("value").type == c.schema.field("value").type, name
            assert got_counts[name].select(["value", "count"]).to_pylist() == c.select(["value", "count"]).to_pylist(), name
            assert counts_sorted(got_counts[name]) == counts_sorted(c), name
            # strings in hash order keep their hashes (the table reduction's hash merge needs them)
            assert counts_hashed(got_counts[name]) == counts_hashed(c), name
            if counts_hashed(c):
                assert got_counts[name][HASH].to_pylist() == c[HASH].to_pylist(), name
        decoded.append(got)
    # merging decoded states gives the table state merging the originals gives
    for p in written[0][1]:
        a, b = written[0][2][p.name], written[1][2][p.name]
        da, db = decoded[0][p.name], decoded[1][p.name]
        merged, merged_decoded = p.merge(a, b), p.merge(da, db)
        # KLL merges compact at random: compare everything else
        k1, k2 = list(_key(merged)), list(_key(merged_decoded))
        k1[5] = k2[5] = None
        assert k1 == k2, p.name


def test_counts_take_their_narrowest_type_and_read_back_as_int64(tmp_path) -> None:
    """Each column's counts are stored in the narrowest unsigned type (a count beyond
    2^32 stays int64), and files of the earlier layout (int64 counts, LZ4) still load."""
    p = ColumnProfile("c", pa.int64())
    wide = {1: 1, 2: 255, 3: 256, 4: 65_536, 5: 2**32 + 7}
    cases = {f"c{k}": {v: 1 for v in range(k)} | ({k: top} if k > 1 else {}) for k, top in wide.items()}
    profiles = [ColumnProfile(n, pa.int64()) for n in cases]
    counts = {n: pa.table({"value": pa.array(list(c), pa.int64()), "count": pa.array(list(c.values()), pa.int64())}) for n, c in cases.items()}
    states = {n: p.zero() for n in cases}
    cfg = partial_state.config(0.5, [])
    partial_state.write(str(tmp_path), IDENTITY, 10, profiles, states, counts, [], cfg)
    _, counts_uri = partial_state.uris(str(tmp_path))
    stored = pa.ipc.open_file(pa.memory_map(counts_uri)).schema
    assert [stored.field(n).type.value_type.field("count").type for n in cases] == [pa.uint8(), pa.uint8(), pa.uint16(), pa.uint32(), pa.int64()]
    got = partial_state.read_counts(counts_uri, profiles, cfg)
    for n in cases:
        assert got[n]["count"].type == pa.int64() and got[n].to_pylist() == counts[n].to_pylist(), n
    # the earlier layout: int64 counts in LZ4-compressed buffers (read into memory: the file is rewritten)
    table = pa.ipc.open_file(pa.BufferReader(open(counts_uri, "rb").read())).read_all()
    arrays = []
    for n in cases:
        entries = table.column(n).chunk(0).flatten()
        inner = pa.StructArray.from_arrays([entries.field("value"), entries.field("count").cast(pa.int64())], names=["value", "count"])
        arrays.append(pa.LargeListArray.from_arrays(pa.array([0, len(inner)], pa.int64()), inner))
    old = pa.Table.from_arrays(arrays, names=list(cases)).replace_schema_metadata(table.schema.metadata)
    with pa.OSFile(counts_uri, "wb") as sink, pa.ipc.new_file(sink, old.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(old)
    got = partial_state.read_counts(counts_uri, profiles, cfg)
    assert all(got[n].to_pylist() == counts[n].to_pylist() for n in cases)


def test_hash_ordered_string_counts_keep_their_hashes(tmp_path) -> None:
    """String counts a partition task made (in hash order, with their hashes) read back
    hashed, so an inherited partition takes the table reduction's hash merge; the
    reduction over read-back counts equals the one over the originals."""
    from engine.runtime.tasks.reduce import reduce_counts

    rng = np.random.default_rng(5)
    cfg = partial_state.config(0.5, [])
    made, read = [], []
    for i in range(2):
        column = pa.array([f"s{v}" for v in rng.integers(0, 3000, 5000)] + [None, "é"], pa.string())
        p = ColumnProfile("s", column.type)
        state, _, counts, _ = p.profile_column_view(column)
        assert counts_hashed(counts)
        partial_state.write(str(tmp_path / f"p{i}"), IDENTITY, len(column), [p], {"s": state}, {"s": counts}, [], cfg)
        got = partial_state.read_counts(partial_state.uris(str(tmp_path / f"p{i}"))[1], [p], cfg)["s"]
        assert counts_hashed(got)
        assert got.select(["value", "count", HASH]).to_pylist() == counts.select(["value", "count", HASH]).to_pylist()
        made.append({"s": counts})
        read.append({"s": got})
    fresh, fresh_rows, _ = reduce_counts([("s", pa.string(), None)], 0.5, *made)
    again, again_rows, _ = reduce_counts([("s", pa.string(), None)], 0.5, *read)
    assert fresh.value == again.value
    assert fresh_rows[0][2].equals(again_rows[0][2])
    # oracle: the stored rows are every distinct value with its total count
    total = pa.concat_tables([m["s"].select(["value", "count"]) for m in made]).group_by("value").aggregate([("count", "sum")])
    assert sorted(zip(*again_rows[0][2].select(["value", "frequency"]).to_pydict().values())) == sorted(
        zip(*total.select(["value", "count_sum"]).to_pydict().values())
    )


def _rewrite_metadata(uri: str, **changes: str) -> None:
    table = pa.ipc.open_file(pa.BufferReader(open(uri, "rb").read())).read_all()  # not mapped: the file is rewritten
    md = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    md.update(changes)
    table = table.replace_schema_metadata(md)
    with pa.OSFile(uri, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def test_bad_files_are_refused_naming_the_file(tmp_path) -> None:
    written, cfg, profiles = _write_two(tmp_path)
    d0, d1 = written[0][0], written[1][0]
    s0, c0 = partial_state.uris(d0)
    s1, c1 = partial_state.uris(d1)
    discrete = [p for p in profiles if p.discrete]

    with pytest.raises(partial_state.PartialStateError, match="missing: .*nowhere/partial_state.arrow"):
        partial_state.read_states(str(tmp_path / "nowhere" / "partial_state.arrow"), profiles, USER, cfg)
    data = open(s0, "rb").read()
    open(s0, "wb").write(data[: len(data) // 2])  # truncated
    with pytest.raises(partial_state.PartialStateError, match=f"damaged: {s0}"):
        partial_state.read_states(s0, profiles, USER, cfg)
    open(c0, "wb").write(b"\x80\x04garbage")  # not Arrow (a pickle header, say): refused, never run
    with pytest.raises(partial_state.PartialStateError, match=f"damaged: {c0}"):
        partial_state.read_counts(c0, discrete, cfg)

    _rewrite_metadata(s1, **{"metastore.partial_state_version": "99"})
    with pytest.raises(partial_state.PartialStateError, match=f"newer version: {s1}: version 99"):
        partial_state.read_states(s1, profiles, USER, cfg)
    with pytest.raises(partial_state.PartialStateError, match=f"other analysis options: {c1}"):
        partial_state.read_counts(c1, discrete, partial_state.config(0.7, USER))
    with pytest.raises(partial_state.PartialStateError, match=f"other columns: {c1}"):
        partial_state.read_counts(c1, discrete[1:], cfg)
    with pytest.raises(partial_state.PartialStateError, match="not a partial_state file"):
        partial_state.read_states(c1, profiles, USER, cfg)


def test_the_table_state_round_trips_the_merged_state_and_every_partitions_kll(tmp_path) -> None:
    """The table's merged state (what an append merges its new partitions into): the merged
    states as they were, no merged KLL sketch but every partition's, in order; refused by name
    when it is of another kind, other options or damaged."""
    written, cfg, profiles = _write_two(tmp_path)
    merged = {p.name: p.merge(written[0][2][p.name], written[1][2][p.name]) for p in profiles}
    # every partition's sketch in order, those without one left out (as bins.merge keeps them)
    parts = {p.name: [b for w in written if (b := w[2][p.name].kll.blob) is not None] for p in profiles if p.kll is not None}
    assert sum(len(b) == 2 for b in parts.values()) >= 5
    uri = str(tmp_path / partial_state.TABLE_STATE_FILE)
    done = partial_state.write_table_state(uri, IDENTITY, N, profiles, merged, parts, USER, cfg)
    rows, got, klls = partial_state.read_table_state(uri, profiles, USER, cfg, done.checksum)
    assert rows == N
    assert klls == {p.name: parts.get(p.name, []) for p in profiles}
    for p in profiles:
        want = ColumnState(**{**vars(merged[p.name])})
        if p.kll is not None:
            assert got[p.name].kll is not None and got[p.name].kll.blob is None, p.name  # the parts stand for it
            want.kll = got[p.name].kll
        assert _key(got[p.name]) == _key(want), p.name
    with pytest.raises(partial_state.PartialStateError, match="not a partial_state file"):
        partial_state.read_states(uri, profiles, USER, cfg)
    with pytest.raises(partial_state.PartialStateError, match=f"other analysis options: {uri}"):
        partial_state.read_table_state(uri, profiles, USER, partial_state.config(0.7, USER))
    data = open(uri, "rb").read()
    open(uri, "wb").write(data[:-64])
    with pytest.raises(partial_state.PartialStateError, match=f"damaged: {uri}"):
        partial_state.read_table_state(uri, profiles, USER, cfg, done.checksum)


def test_config_names_what_partition_files_depend_on() -> None:
    base = partial_state.config(0.5, USER)
    assert partial_state.config(0.5, USER) == base
    assert partial_state.config(0.6, USER) != base
    assert partial_state.config(0.5, [ZERO_COUNT]) != base
    assert partial_state.unserializable(USER) == []
    plain = UserStatistic("plain", compute=len, merge=lambda a, b: a + b, result_type=pa.int64())
    assert partial_state.unserializable([ZERO_COUNT, plain]) == ["plain"]
    with pytest.raises(InvalidArgumentError, match="both serialize and deserialize"):
        UserStatistic("half", compute=len, merge=lambda a, b: a + b, result_type=pa.int64(), serialize=lambda s: b"")


_keys = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**40), st.dictionaries(_keys, st.integers(min_value=1, max_value=2**40), max_size=70))
def test_top1_share_state_round_trips(n: int, counters: dict) -> None:
    state = (n, counters)
    back = TOP1_SHARE.deserialize(TOP1_SHARE.serialize(state))
    assert back[0] == n
    assert list(back[1].items()) == list(counters.items())
    assert [type(k) for k in back[1]] == [type(k) for k in counters]
    assert ZERO_COUNT.deserialize(ZERO_COUNT.serialize(n)) == n
