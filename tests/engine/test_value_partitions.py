"""Value partitions end to end on Ray: analyze(value_partitions=True), the file, the lookup, the CLI.

A generated table with skewed, all-distinct, almost-distinct, all-equal,
partition-local and "in the first k partitions" columns (ints, strings, dates,
decimals, booleans, binary, with nulls, and an empty partition) is analyzed with
the setting; every stored value's distribution must equal DuckDB's
``GROUP BY (partition, value)`` over the same files.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine import values as value_forms
from engine.api import analyze, open_statistics, value_partitions
from engine.cli.console import metastore
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError, UnsupportedOptionsError
from engine.files import layout
from engine.lookup import ABSENT, AT_MOST_ONCE, FOUND
from engine.stats import valuepartitions as vp

pytestmark = pytest.mark.ray

TABLE = "vp"
SIZES = [2500, 4000, 1500, 3000, 2000, 3500, 0]  # the last partition is empty
KEYS = [f"p={j}" for j in range(len(SIZES))]
P = len(SIZES)
SCHEMA = pa.schema(
    [
        ("skew", pa.int64()),
        ("uid", pa.int64()),
        ("near", pa.string()),
        ("same", pa.string()),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("tier", pa.string()),
        ("flag", pa.bool_()),
        ("blob", pa.binary()),
        ("local", pa.string()),
    ]
)
COLUMNS = SCHEMA.names + ["p"]  # p: the Hive partition column (an integer)


def _with_nulls(rng: np.random.Generator, values: list, share: float) -> list:
    return [None if rng.random() < share else v for v in values]


def generate(root: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    n = sum(SIZES)
    # global columns, split into partitions by row ranges (values cross partitions)
    skew = np.minimum(rng.zipf(1.3, n), 5000).astype(np.int64)
    near = np.array([f"n{x:06d}" for x in rng.permutation(n)], dtype=object)
    copies = rng.random(n) < 0.03
    near[copies] = near[rng.integers(0, n, copies.sum())]  # duplicates, across partitions
    amount = [Decimal(int(x)) / 4 for x in rng.integers(0, 300, n)]
    start = 0
    for j, size in enumerate(SIZES):
        rows = slice(start, start + size)
        start += size
        day = [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(5 * j, 5 * j + 40, size)]
        tiers = [f"t{k}" for k in range(j + 1, 7)] or ["t_none"]  # t{k}: in the first k partitions
        data = {
            "skew": _with_nulls(rng, skew[rows].tolist(), 0.1),
            "uid": list(range(100_000 * j, 100_000 * j + size)),  # unique, ranges by partition
            "near": near[rows].tolist(),
            "same": _with_nulls(rng, ["same"] * size, 0.05),
            "day": day,
            "amount": [a.quantize(Decimal("0.01")) for a in amount[rows]],
            "tier": [tiers[i % len(tiers)] for i in range(size)],
            "flag": _with_nulls(rng, (rng.random(size) < 0.3).tolist(), 0.2),
            "blob": [bytes([int(x) % (3 + j)]) * 2 for x in rng.integers(0, 50, size)],
            "local": [f"L{j}_{i % 50}" for i in range(size)],
        }
        d = root / KEYS[j]
        d.mkdir(parents=True)
        t = pa.table(data, schema=SCHEMA)
        if size > 1000:  # two files
            pq.write_table(t.slice(0, size // 3), d / "a.parquet")
            pq.write_table(t.slice(size // 3), d / "b.parquet")
        else:
            pq.write_table(t, d / "a.parquet")


def oracle(root: Path, column: str, t: pa.DataType) -> dict[str, dict[str, int]]:
    """text form -> {partition key: count}, by DuckDB over the data files."""
    con = duckdb.connect()
    q = f'"{column}"'
    if column == "p":  # the partition column: from the path
        sql = (
            f"SELECT regexp_extract(filename, '/(p=[0-9]+)/', 1) AS k, regexp_extract(filename, '/p=([0-9]+)/', 1)::BIGINT AS v, "
            f"count(*) AS n FROM read_parquet('{root}/*/*.parquet', filename=true, hive_partitioning=false) GROUP BY ALL"
        )
    else:
        sql = (
            f"SELECT regexp_extract(filename, '/(p=[0-9]+)/', 1) AS k, {q} AS v, count(*) AS n "
            f"FROM read_parquet('{root}/*/*.parquet', filename=true, hive_partitioning=false) WHERE {q} IS NOT NULL GROUP BY ALL"
        )
    got = con.sql(sql).to_arrow_table()
    texts = value_forms.encode(got["v"].combine_chunks().cast(t)).to_pylist()
    out: dict[str, dict[str, int]] = {}
    for text, k, n in zip(texts, got["k"].to_pylist(), got["n"].to_pylist()):
        out.setdefault(text, {})[k] = n
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vp_data") / TABLE
    generate(root)
    return root


@pytest.fixture(scope="module")
def analyzed(ray_runtime: None, table: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("vp_store")
    result = analyze(str(table), store=str(store), user_statistics=[], value_partitions=True)
    return store, result, open_statistics(str(store), TABLE)


def _types(ts) -> dict[str, pa.DataType]:
    return {c: ts.column_type(c) for c in COLUMNS}


def check_file(ts, root: Path) -> dict[str, int]:
    """Every stored distribution against the oracle; returns how many dense and sparse rows."""
    uri = ts.file_uri(layout.FREQUENCIES_FILE)
    pf = pq.ParquetFile(uri)
    md = layout.decode_metadata(pf.metadata.metadata)
    keys = json.loads(md[layout.PARTITIONS_KEY])
    assert keys == [p.key for p in ts.partitions()] == KEYS
    t = pf.read()
    assert t.schema.names == ["column", "value", "frequency", vp.COLUMN]
    assert t.schema.field(vp.COLUMN).type == vp.DISTRIBUTION_TYPE
    seen = {"dense": 0, "sparse": 0}
    index = ts.frequency_index()
    for column, type_ in _types(ts).items():
        first, groups, n_rows, kind = index[column]
        rows = t.filter(pa.compute.equal(t["column"], column))
        assert rows.num_rows == n_rows
        want = oracle(root, column, type_)
        if kind == layout.FREQ_COMPLETE:
            assert set(rows["value"].to_pylist()) == set(want), column
        elif kind == layout.FREQ_DUPLICATES_ONLY:
            assert set(rows["value"].to_pylist()) == {v for v, d in want.items() if sum(d.values()) > 1}, column
        else:
            assert rows.num_rows == 0 and all(sum(d.values()) == 1 for d in want.values()), column
        for r in rows.to_pylist():
            dist = r[vp.COLUMN]
            pairs = vp.decode(dist, P)
            got = {keys[i]: c for i, c in pairs}
            assert got == want[r["value"]], (column, r["value"])
            assert sum(got.values()) == r["frequency"]
            dense = dist["index"] is None
            assert dense == (3 * len(got) >= 2 * P), (column, r["value"])
            if dense:
                assert len(dist["count"]) == P
            else:
                assert dist["index"] == sorted(dist["index"])
            seen["dense" if dense else "sparse"] += 1
    return seen


# ---------------------------------------------------------------- the file
def test_every_distribution_matches_duckdb(analyzed, table: Path) -> None:
    _, result, ts = analyzed
    assert result.partitions == P and result.rows == sum(SIZES)
    kinds = {c: ts.frequency_index()[c][3] for c in COLUMNS}
    assert kinds["uid"] == layout.FREQ_ALL_DISTINCT and kinds["near"] == layout.FREQ_DUPLICATES_ONLY
    assert kinds["skew"] == kinds["same"] == kinds["tier"] == layout.FREQ_COMPLETE
    seen = check_file(ts, table)
    assert seen["dense"] > 50 and seen["sparse"] > 300  # both forms exercised


def test_partition_files_and_the_default_are_unchanged(analyzed, table: Path, tmp_path: Path) -> None:
    _, _, ts = analyzed
    for key in KEYS:  # partition level: never the extra column
        f = pq.ParquetFile(ts.file_uri(layout.FREQUENCIES_FILE, key))
        assert f.schema_arrow.names == layout.FREQUENCIES_SCHEMA.names
        assert layout.PARTITIONS_KEY.encode() not in f.metadata.metadata
    off = analyze(str(table), store=str(tmp_path / "off"), user_statistics=[])
    plain = open_statistics(str(tmp_path / "off"), off.table)
    f = pq.ParquetFile(plain.file_uri(layout.FREQUENCIES_FILE))
    assert f.schema_arrow.names == layout.FREQUENCIES_SCHEMA.names
    assert layout.PARTITIONS_KEY.encode() not in f.metadata.metadata
    # the same rows as with the setting, but for the extra column
    with_vp = pq.read_table(ts.file_uri(layout.FREQUENCIES_FILE)).drop_columns([vp.COLUMN])
    assert pq.read_table(plain.file_uri(layout.FREQUENCIES_FILE)).equals(with_vp)
    with pytest.raises(StatisticsNotFoundError, match="without value partitions.*--value-partitions"):
        plain.value_partitions("skew", 1)


# ---------------------------------------------------------------- lookups
@pytest.mark.parametrize(
    "column, value",
    [
        ("skew", 1), ("skew", "1"), ("skew", 37), ("same", "same"), ("tier", "t1"), ("tier", "t5"), ("local", "L3_7"),
        ("day", dt.date(2024, 1, 20)), ("day", "2024-01-20"), ("amount", Decimal("12.25")), ("amount", "12.25"),
        ("flag", True), ("flag", "false"), ("blob", b"\x01\x01"), ("blob", "0101"), ("p", 3), ("p", "5"),
    ],
)  # fmt: skip
def test_lookup_of_stored_values(analyzed, table: Path, column: str, value: Any) -> None:
    store, _, ts = analyzed
    t = ts.column_type(column)
    got = value_partitions(str(store), TABLE, column, value)
    want = oracle(table, column, t)[got.text]
    assert got.status == FOUND and got.kind == layout.FREQ_COMPLETE
    assert dict(got.partitions) == want and [k for k, _ in got.partitions] == [k for k in KEYS if k in want]
    assert got.frequency == sum(want.values()) and got.table_partitions == P
    assert got.value == value_forms.decode_scalar(got.text, t).as_py()


def test_lookup_of_duplicates_absent_and_implicit_values(analyzed, table: Path) -> None:
    store, _, ts = analyzed
    want = oracle(table, "near", pa.string())
    dup = next(v for v, d in sorted(want.items()) if len(d) > 1)
    single = next(v for v, d in sorted(want.items()) if sum(d.values()) == 1)
    got = ts.value_partitions("near", dup)
    assert got.status == FOUND and dict(got.partitions) == want[dup] and got.kind == layout.FREQ_DUPLICATES_ONLY
    # a value seen once: not stored at table level; found in the exact value counts of its partition
    got = ts.value_partitions("near", single)
    assert got.status == FOUND and got.frequency == 1 and dict(got.partitions) == want[single] and "occurs 1 time" in got.note
    assert got.candidates is None
    # a complete column without the value: it does not occur
    got = ts.value_partitions("tier", "t9")
    assert got.status == ABSENT and got.frequency == 0 and got.partitions == ()
    # an all-distinct column: candidates by min/max name the one partition (uid ranges by partition), its counts hold it
    got = ts.value_partitions("uid", 300_123, candidates=True)
    assert got.status == FOUND and got.kind == layout.FREQ_ALL_DISTINCT and got.candidates == ("p=3",) and got.partitions == (("p=3", 1),)
    got = ts.value_partitions("uid", 300_000 + SIZES[3], candidates=True)  # past p=3's range, in no other
    assert got.status == ABSENT and got.frequency == 0 and got.partitions == ()
    got = ts.value_partitions("uid", 99_999, candidates=True)  # in no partition's range: absent
    assert got.status == ABSENT and got.frequency == 0 and got.candidates == ()


def test_partitions_of_a_value_that_occurs_once(analyzed, table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #28: ``partitions-of`` printed "partitions 0 of 7" for a value of a mostly distinct
    column that occurs once (the table's frequencies store only repeated values). It names
    the partition that holds it (DuckDB's), from the exact value counts of the partitions
    whose min/max admit it; a value in none is absent."""
    store, _, _ = analyzed
    run = lambda *args: CliRunner().invoke(metastore, ["--store", str(store), *args])  # noqa: E731
    want = oracle(table, "near", pa.string())
    singles = [v for v, d in sorted(want.items()) if sum(d.values()) == 1][:: max(1, len(want) // 40)][:8]
    assert len({k for v in singles for k in want[v]}) > 1  # in several partitions
    for value in singles:
        result = run("-o", "json", "partitions-of", TABLE, "near", value)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert doc["status"] == "found" and doc["frequency"] == 1 and doc["kind"] == layout.FREQ_DUPLICATES_ONLY
        assert doc["partitions"] == [{"partition": k, "count": 1} for k in want[value]]
    (key,) = want[singles[0]]
    result = run("partitions-of", TABLE, "near", singles[0])
    assert result.exit_code == 0 and "1 of 7" in result.stdout and "0 of 7" not in result.stdout and key in result.stdout
    # absent: within partitions' min/max but in none of their value counts (a value the duplicates replaced)
    absent = next(f"n{x:06d}" for x in range(sum(SIZES)) if f"n{x:06d}" not in want)
    doc = json.loads(run("-o", "json", "partitions-of", TABLE, "near", absent, "--candidates").stdout)
    assert doc["candidates"] and doc["status"] == "absent" and doc["frequency"] == 0 and doc["partitions"] == []
    # past the candidates it looks up, the answer stays "at most once", and the text says the partition is not recorded
    monkeypatch.setattr("engine.lookup.valueparts.RESOLVE_CANDIDATES", 0)
    result = run("partitions-of", TABLE, "near", singles[0])
    assert result.exit_code == 0 and "not recorded (at most 1 of 7)" in result.stdout and "0 of 7" not in result.stdout
    assert json.loads(run("-o", "json", "partitions-of", TABLE, "near", singles[0]).stdout)["status"] == AT_MOST_ONCE


def test_lookup_errors(analyzed) -> None:
    _, _, ts = analyzed
    with pytest.raises(InvalidArgumentError, match="no nulls"):
        ts.value_partitions("skew", None)
    with pytest.raises(InvalidArgumentError, match="'day'.*2024-13-01"):
        ts.value_partitions("day", "2024-13-01")
    with pytest.raises(InvalidArgumentError, match="'skew'"):
        ts.value_partitions("skew", "twelve")
    with pytest.raises(InvalidArgumentError, match="no column 'nope'"):
        ts.value_partitions("nope", 1)


def test_lookup_reads_only_the_row_groups_that_can_hold_the_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A column of 300,000 stored rows (the head group and three more): a value is looked
    for only in the row groups whose min/max admit it, and its distribution read from one."""
    from engine.files import writer
    from engine.files.layout import FileIdentity
    from engine.lookup import files as lookup_files
    from engine.lookup import valueparts

    n = 300_000
    values = pa.array([f"v{i:07d}" for i in range(n)])
    entries = vp.Entries(np.arange(n, dtype=np.int64), (np.arange(n) % 5).astype(np.int32), np.full(n, 2, np.int64))
    rows = pa.table({"column": pa.array(["c"] * n), "value": values, "frequency": pa.array(np.full(n, 2), pa.int64())})
    rows = rows.append_column(vp.FIELD, vp.build(entries, n, 5))
    uri = str(tmp_path / "frequencies.parquet")
    ident = FileIdentity("t", "/t", "table", "", "s", "j", "now")
    writer.write_frequencies(uri, [("c", layout.FREQ_DUPLICATES_ONLY, rows)], ident, partitions=[f"k={i}" for i in range(5)])
    f = lookup_files.open_file(uri)
    assert f.pf.metadata.num_row_groups == 4
    reads: list[tuple[int, tuple[str, ...]]] = []
    original = lookup_files.StatisticsFile.read_row_group
    monkeypatch.setattr(lookup_files.StatisticsFile, "read_row_group", lambda self, g, cols: reads.append((g, cols)) or original(self, g, cols))
    got = valueparts.find_value(f, "v0200001", range(0, 4))
    assert got == (2, {"index": [1], "count": [2]})
    assert reads == [(2, ("value",))]
    reads.clear()
    assert valueparts.find_value(f, "w", range(0, 4)) is None and reads == []


# ---------------------------------------------------------------- inheritance
def test_inherited_partitions_give_the_same_distributions(ray_runtime: None, table: Path, tmp_path: Path) -> None:
    data = tmp_path / TABLE
    shutil.copytree(table, data)
    store = tmp_path / "store"
    first = analyze(str(data), store=str(store), user_statistics=[])  # without the setting: the partitions do not depend on it
    assert first.recomputed == P
    second = analyze(str(data), store=str(store), user_statistics=[], value_partitions=True)
    assert second.inherited == P and second.recomputed == 0
    ts = open_statistics(str(store), TABLE)
    check_file(ts, data)
    # change one partition; the others are inherited and the file equals a fresh analyze's
    f = data / "p=2" / "a.parquet"
    t = pq.read_table(f)
    time.sleep(0.01)
    pq.write_table(t.set_column(t.schema.get_field_index("tier"), "tier", pa.array(["t1"] * t.num_rows)), f)
    third = analyze(str(data), store=str(store), user_statistics=[], value_partitions=True)
    assert third.inherited == P - 1 and third.recomputed == 1
    ts = open_statistics(str(store), TABLE)
    check_file(ts, data)
    fresh = analyze(str(data), store=str(tmp_path / "fresh"), user_statistics=[], value_partitions=True, inherit=False)
    assert fresh.inherited == 0
    want = open_statistics(str(tmp_path / "fresh"), TABLE)
    assert pq.read_table(ts.file_uri(layout.FREQUENCIES_FILE)).equals(pq.read_table(want.file_uri(layout.FREQUENCIES_FILE)))
    assert dict(ts.value_partitions("tier", "t1").partitions)["p=2"] == t.num_rows == 500  # not there before


# ---------------------------------------------------------------- the Redis strategy
def test_redis_strategy_is_refused_before_any_work(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # a table that does not exist: the options are refused before the table is even opened
    with pytest.raises(UnsupportedOptionsError, match="reduce"):
        analyze(str(tmp_path / "no_such_table"), store=str(store), frequencies="redis", value_partitions=True)
    assert not store.exists()
    result = CliRunner().invoke(
        metastore, ["--store", str(store), "analyze", str(tmp_path / "no_such_table"), "--frequencies", "redis", "--value-partitions"]
    )
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: value partitions (--value-partitions) need the 'reduce' frequency strategy")
    assert not store.exists()


# ---------------------------------------------------------------- CLI
def test_cli_analyze_flag_and_partitions_of(ray_runtime: None, table: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    run = lambda *args: CliRunner().invoke(metastore, ["--store", store, *args])  # noqa: E731
    result = run("-o", "json", "analyze", str(table), "--name", TABLE, "--value-partitions", "--no-user-stats")
    assert result.exit_code == 0, result.output
    want = oracle(table, "tier", pa.string())["t3"]
    result = run("partitions-of", TABLE, "tier", "t3", "--output", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["status"] == "found" and doc["frequency"] == sum(want.values())
    assert doc["partitions"] == [{"partition": k, "count": want[k]} for k in KEYS if k in want]
    result = run("partitions-of", TABLE, "tier", "t3")
    assert result.exit_code == 0
    assert f"{sum(want.values()):,}" in result.stdout and "3 of 7" in result.stdout
    for k in want:
        assert k in result.stdout and f"{want[k]:,}" in result.stdout
    result = run("partitions-of", TABLE, "uid", "100005", "--candidates")
    assert result.exit_code == 0 and "occurs 1 time" in result.stdout and "1 of 7" in result.stdout and "p=1" in result.stdout
    result = CliRunner().invoke(metastore, ["partitions-of", "--help"])
    assert result.exit_code == 0 and "Usage: metastore partitions-of" in result.stdout and "--candidates" in result.stdout
    result = run("partitions-of", TABLE, "day", "2024-02-30")
    assert result.exit_code == 1 and result.stderr.startswith("error: column 'day'")
