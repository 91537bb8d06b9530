"""End to end: analyze the sample table on Ray, then check every published statistic against DuckDB.

The table-level files and one partition's files are compared with DuckDB over
the same Parquet files; the lookups are compared with full reads of the files.
"""

from __future__ import annotations

import json
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from statistics_oracle import PCTS, decode, oracle_row, q, stat_rows

from engine import types as mt
from engine import values as value_forms
from engine.api import open_statistics
from engine.files import layout, writer
from engine.stats.histograms import HistogramSpec
from engine.stats.user import TOP1_CAPACITY
from engine.stats.valuecounts import PERCENTILES

pytestmark = pytest.mark.ray

PARTITION = "part=01"  # two files
#: fewer distinct values than this keep complete frequencies even when mostly distinct
MIN_DUPLICATES_ONLY = writer.MIN_DUPLICATES_ONLY


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sample(analyzed_sample):
    table, store, result = analyzed_sample
    return table, store, result, open_statistics(store, result.table)


@pytest.fixture(scope="module")
def duck(sample):
    table = sample[0]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # the engine infers the partition column as int64 ("00", "01", ... are integers)
    con.execute(f"CREATE VIEW t AS SELECT * REPLACE (part::BIGINT AS part) FROM read_parquet('{table}/*/*.parquet', hive_partitioning = true)")
    con.execute(
        f"CREATE VIEW p AS SELECT * REPLACE (part::BIGINT AS part) FROM read_parquet('{table}/{PARTITION}/*.parquet', hive_partitioning = true)"
    )
    yield con
    con.close()


def read_file(ts, name: str, partition: str | None = None) -> pa.Table:
    return pq.read_table(ts.file_uri(name, partition))


# ---------------------------------------------------------------- DuckDB reference
def check_row(con, rel: str, row: dict, t: pa.DataType, level: str) -> None:
    """One statistics.parquet row against DuckDB; ``level`` is "table" or "partition"."""
    name = row["column"]
    ref = oracle_row(con, rel, name, t)
    ctx = (level, name)
    assert row["type"] == mt.type_name(t), ctx
    assert row["unsupported"] is None, ctx
    assert row["row_count"] == ref["row_count"], ctx
    assert row["null_count"] == ref["null_count"], ctx
    assert row["nan_count"] == ref.get("nan_count"), ctx
    if mt.is_orderable(t):
        assert decode(row["min"], t) == ref["min"], ctx
        assert decode(row["max"], t) == ref["max"], ctx
    # exact at table level too: discrete columns, numbers and times (from the reductions)
    exact = level == "partition" or mt.is_discrete(t) or mt.has_percentiles(t)
    if exact:
        assert row["distinct_count"] == ref["distinct_count"], ctx
        assert row["distinct_count_exact"] is True, ctx
    else:  # theta sketch estimate (lg_k = 12: ~1.6% standard error)
        assert row["distinct_count"] == pytest.approx(ref["distinct_count"], rel=0.05), ctx
        if row["distinct_count_exact"]:
            assert row["distinct_count"] == ref["distinct_count"], ctx
    if mt.is_numeric(t):
        if pa.types.is_integer(t):
            assert int(row["sum"]) == int(ref["sum"]), ctx
        elif pa.types.is_decimal(t):
            assert Decimal(row["sum"]) == ref["sum"], ctx
        else:
            assert float(row["sum"]) == pytest.approx(ref["sum"], rel=1e-9), ctx
        assert row["mean"] == pytest.approx(ref["mean"], rel=1e-9), ctx
        assert row["stddev"] == pytest.approx(ref["stddev"], rel=1e-7), ctx
        assert row["zero_count"] == ref["zero_count"], ctx
    else:
        assert row["sum"] is None and row["mean"] is None and row["zero_count"] is None, ctx
    if mt.has_length(t):
        assert row["avg_len"] == pytest.approx(ref["avg_len"], rel=1e-12), ctx
        assert row["max_len"] == ref["max_len"], ctx
    if mt.has_percentiles(t):
        got = [decode(row[k], t) for k in PCTS]
        if exact:
            assert row["percentiles_exact"] is True, ctx
            assert got == ref["percentiles"], ctx
        else:
            assert row["percentiles_exact"] is False, ctx
            err = row["percentiles_rank_error"]
            assert 0 < err < 0.05, ctx
            check_ranks(con, rel, name, t, got, err, ref["valid"])
    if mt.is_discrete(t) and ref["valid"]:
        share = ref["top"] / ref["valid"]
        got_share = row["top1_share"]
        if got_share is None:
            assert share <= 1 / (TOP1_CAPACITY + 1), ctx
        else:  # Misra-Gries: a lower bound within 1/(k+1)
            assert share - 1 / (TOP1_CAPACITY + 1) - 1e-12 <= got_share <= share + 1e-12, ctx
    elif not mt.is_discrete(t):
        assert row["top1_share"] is None, ctx


def check_ranks(con, rel, name, t, got, err, n) -> None:
    """Approximate percentiles: the rank of each value is within twice the sketch's rank error."""
    c = q(name)
    floating = pa.types.is_floating(t)
    valid = f"{c} IS NOT NULL" + (f" AND NOT isnan({c})" if floating else "")
    for p, v in zip(PERCENTILES, got):
        below, at_most = con.execute(
            f"SELECT count(*) FILTER (WHERE {c} < $v), count(*) FILTER (WHERE {c} <= $v) FROM {rel} WHERE {valid}",
            {"v": v},
        ).fetchone()
        assert below / n - 2 * err <= p <= at_most / n + 2 * err, (name, p, v, below / n, at_most / n)


# ---------------------------------------------------------------- statistics.parquet
def test_result(sample):
    table, store, result, ts = sample
    assert result.partitions == 4 and result.rows == 60_000
    assert result.columns == len(ts.schema) == 13
    assert ts.job_id == result.job_id and ts.snapshot == result.snapshot
    assert [(p.key, p.rows) for p in ts.partitions()] == [(f"part=0{i}", 15_000) for i in range(4)]


def test_table_statistics_match_duckdb(sample, duck):
    ts = sample[3]
    rows = stat_rows(ts)
    assert list(rows) == ts.schema.names  # one row per column, in table order
    for f in ts.schema:
        check_row(duck, "t", rows[f.name], f.type, "table")


def test_partition_statistics_match_duckdb(sample, duck):
    ts = sample[3]
    rows = stat_rows(ts, PARTITION)
    assert list(rows) == ts.schema.names
    for f in ts.schema:
        check_row(duck, "p", rows[f.name], f.type, "partition")


def test_statistics_kinds_and_histogram_bins(sample):
    ts = sample[3]
    rows = stat_rows(ts)
    kinds = {name: r["frequencies"] for name, r in rows.items()}
    assert kinds["id"] == layout.FREQ_ALL_DISTINCT
    assert {k for k, v in kinds.items() if v is not None} == {f.name for f in ts.schema if mt.is_discrete(f.type)}
    for f in ts.schema:
        bins = rows[f.name]["histogram_bins"]
        assert (bins is not None) == (mt.histogram_domain(f.type) is not None), f.name
        assert bins is None or 1 <= bins <= 1000
    # one bin per day of 2024, the range's end widened to 23 steps of 16 days (engine/stats/histograms.py)
    assert rows["event_date"]["histogram_bins"] == 368
    assert rows["part"]["histogram_bins"] == 4


# ---------------------------------------------------------------- frequencies.parquet
def frequencies_of(ts, column: str, partition: str | None = None) -> tuple[str, list[tuple]]:
    t = read_file(ts, layout.FREQUENCIES_FILE, partition)
    mine = t.filter(pc.equal(t["column"], column))
    kind = ts.frequency_index(partition)[column][3]
    values = value_forms.decode(mine["value"].combine_chunks(), ts.column_type(column)).to_pylist()
    return kind, list(zip(values, mine["frequency"].to_pylist()))


def duck_frequencies(con, rel: str, column: str, min_count: int = 0) -> list[tuple]:
    c = q(column)
    return [
        tuple(r)
        for r in con.execute(
            f"SELECT {c}, count(*) AS n FROM {rel} WHERE {c} IS NOT NULL GROUP BY {c} HAVING count(*) > {min_count} ORDER BY n DESC, {c}"
        ).fetchall()
    ]


@pytest.mark.parametrize("level", ["table", "partition"])
def test_frequencies_match_duckdb(sample, duck, level):
    ts = sample[3]
    partition, rel = (None, "t") if level == "table" else (PARTITION, "p")
    rows = stat_rows(ts, partition)
    ratio = 0.5
    for f in ts.schema:
        if not mt.is_discrete(f.type):
            continue
        kind, freq = frequencies_of(ts, f.name, partition)
        r = rows[f.name]
        assert r["frequencies"] == kind, f.name
        non_null = r["row_count"] - r["null_count"]
        distinct = r["distinct_count"]
        if distinct == non_null and distinct:
            assert kind == layout.FREQ_ALL_DISTINCT and freq == [], f.name
        elif distinct >= ratio * non_null and distinct >= MIN_DUPLICATES_ONLY:
            assert kind == layout.FREQ_DUPLICATES_ONLY, f.name
            assert freq == duck_frequencies(duck, rel, f.name, min_count=1), f.name
        else:
            assert kind == layout.FREQ_COMPLETE, f.name
            assert freq == duck_frequencies(duck, rel, f.name), f.name
            assert sum(n for _, n in freq) == non_null
    if level == "table":
        for name in ("category", "city", "quantity"):
            kind, freq = frequencies_of(ts, name)
            ref = duck_frequencies(duck, "t", name, min_count=1 if kind == layout.FREQ_DUPLICATES_ONLY else 0)
            assert freq == ref and len(freq) > 10, name
        assert frequencies_of(ts, "id") == (layout.FREQ_ALL_DISTINCT, [])


def test_comment_frequencies(sample, duck):
    ts = sample[3]
    kind, freq = frequencies_of(ts, "comment")
    n, distinct = duck.execute("SELECT count(comment), count(DISTINCT comment) FROM t").fetchone()
    if distinct >= 0.5 * n and distinct >= MIN_DUPLICATES_ONLY:
        assert kind == layout.FREQ_DUPLICATES_ONLY
        assert freq == duck_frequencies(duck, "t", "comment", min_count=1)
        assert all(c > 1 for _, c in freq)
    else:
        assert kind == layout.FREQ_COMPLETE
        assert freq == duck_frequencies(duck, "t", "comment")


def test_frequency_index_matches_row_groups(sample):
    ts = sample[3]
    for partition in (None, PARTITION):
        pf = pq.ParquetFile(ts.file_uri(layout.FREQUENCIES_FILE, partition))
        full = pf.read()
        for column, (first, n_groups, n_rows, kind) in ts.frequency_index(partition).items():
            got = sum(pf.metadata.row_group(g).num_rows for g in range(first, first + n_groups))
            assert got == n_rows == pc.sum(pc.equal(full["column"], column)).as_py() or (n_rows == 0 and n_groups == 0)
            if n_groups:
                assert pf.metadata.row_group(first).num_rows == min(n_rows, layout.FREQUENCIES_HEAD_ROWS)
                head = pf.read_row_group(first)
                assert set(head["column"].to_pylist()) == {column}


# ---------------------------------------------------------------- histograms.parquet
def histograms(ts, partition: str | None = None) -> tuple[dict[str, HistogramSpec | None], pa.Table]:
    pf = pq.ParquetFile(ts.file_uri(layout.HISTOGRAMS_FILE, partition))
    specs = json.loads(layout.decode_metadata(pf.metadata.metadata)["metastore.histograms"])
    return {k: HistogramSpec(**v) if v else None for k, v in specs.items()}, pf.read()


def bins_of(table: pa.Table, column: str, n: int) -> pa.Table:
    col = table[column].combine_chunks().slice(0, n)
    return pa.table({k: pc.struct_field(col, k) for k in ("lower", "upper", "count")})


def test_histograms_sum_over_partitions_and_match_duckdb(sample, duck):
    ts = sample[3]
    specs, table_hist = histograms(ts)
    assert set(specs) == {f.name for f in ts.schema if mt.histogram_domain(f.type)}
    parts = [histograms(ts, p.key) for p in ts.partitions()]
    for name, spec in specs.items():
        assert spec is not None, name
        t = ts.column_type(name)
        table_bins = bins_of(table_hist, name, spec.bins)
        counts = np.array(table_bins["count"].to_pylist())
        # partitions share the table's edges; the table's counts are their sum, bin by bin
        summed = np.zeros(spec.bins, np.int64)
        for pspecs, phist in parts:
            assert pspecs[name] == spec
            pbins = bins_of(phist, name, spec.bins)
            # a partition's file leaves the (table's) edges to its spec: null, and says so
            assert pbins["lower"].null_count == pbins["upper"].null_count == spec.bins
            assert layout.decode_metadata(phist.schema.metadata)[layout.EDGES_KEY] == layout.EDGES_IN_SPEC
            summed += np.array(pbins["count"].to_pylist())
        assert summed.tolist() == counts.tolist(), name
        floating = pa.types.is_floating(t)
        c = q(name)
        valid = f"{c} IS NOT NULL" + (f" AND NOT isnan({c})" if floating else "")
        assert counts.sum() == duck.execute(f"SELECT count(*) FROM t WHERE {valid}").fetchone()[0], name
        # the edges recover DuckDB's counts
        lows, ups = table_bins["lower"].to_pylist(), table_bins["upper"].to_pylist()
        picks = sorted({0, 1, spec.bins // 2, spec.bins - 2, spec.bins - 1, *np.random.default_rng(1).integers(0, spec.bins, 5).tolist()})
        for i in (b for b in picks if 0 <= b < spec.bins):
            if spec.domain == "integer":
                n = duck.execute(f"SELECT count(*) FROM t WHERE {c} BETWEEN $lo AND $up", {"lo": lows[i], "up": ups[i]}).fetchone()[0]
                assert n == counts[i], (name, i)
            else:
                x = f"{c}::DOUBLE"
                eps = abs(spec.width) * 1e-6
                inner, outer = duck.execute(
                    f"SELECT count(*) FILTER (WHERE {x} >= $lo + $e AND {x} < $up - $e), "
                    f"count(*) FILTER (WHERE {x} >= $lo - $e AND {x} <= $up + $e) FROM t WHERE {valid}",
                    {"lo": lows[i], "up": ups[i], "e": eps},
                ).fetchone()
                assert inner <= counts[i] <= outer, (name, i, inner, counts[i], outer)
        lo, hi = decode_edge(duck, name, "min", floating), decode_edge(duck, name, "max", floating)
        assert lows[0] == lo and ups[-1] >= hi  # the end widened (engine.stats.histograms.widened_range)


def decode_edge(con, name: str, fn: str, floating: bool):
    """The column's table minimum or maximum as a histogram edge (finite values only for floats)."""
    c = q(name)
    where = f"{c} IS NOT NULL" + (f" AND isfinite({c})" if floating else "")
    v = con.execute(f"SELECT {fn}({c}) FROM t WHERE {where}").fetchone()[0]
    return float(v) if isinstance(v, Decimal) else v


# ---------------------------------------------------------------- file metadata
def test_file_metadata(sample):
    table, store, result, ts = sample
    for partition in (None, PARTITION):
        for name in layout.FILES:
            md = layout.decode_metadata(pq.read_metadata(ts.file_uri(name, partition)).metadata)
            assert md["metastore.format_version"] == layout.FORMAT_VERSION
            assert md["metastore.table"] == result.table == "sales"
            assert md["metastore.partition"] == (partition or "")
            assert md["metastore.level"] == ("partition" if partition else "table")
            assert md["metastore.snapshot"] == result.snapshot
            assert md["metastore.job_id"] == result.job_id
            assert md["metastore.kind"] == name.split(".")[0]
            assert md["metastore.created_at"]


# ---------------------------------------------------------------- lookups
def test_statistics_lookup_is_a_slice_of_the_file(sample):
    ts = sample[3]
    table_bins = read_file(ts, layout.STATISTICS_FILE, None).column("histogram_bins")
    for partition in (None, PARTITION):
        full = read_file(ts, layout.STATISTICS_FILE, partition)
        names = full["column"].to_pylist()
        if partition is not None:
            # a partition's file leaves histogram_bins to its histograms.parquet (docs/FORMAT.md): the
            # lookup gives its bins, the table's (a partition is binned on the table's edges)
            assert full.column("histogram_bins").null_count == full.num_rows
            i = full.schema.get_field_index("histogram_bins")
            full = full.set_column(i, full.schema.field(i), table_bins)
        proj = [n for n in full.column_names if n not in layout.SKETCH_COLUMNS]
        for wanted in (["price", "id", "city"], ["part"], ["amount", "category", "amount"], names[::-1]):
            got = ts.statistics(wanted, partition=partition)
            want = full.select(proj).take(pa.array([names.index(w) for w in wanted]))
            assert got.column_names == proj
            assert got.to_pylist() == want.to_pylist()
        got = ts.statistics(["score", "quantity"], partition=partition, statistics=["max", "min", "p50"])
        assert got.column_names == ["column", "max", "min", "p50"]
        assert (
            got.to_pylist()
            == full.select(["column", "max", "min", "p50"]).take(pa.array([names.index("score"), names.index("quantity")])).to_pylist()
        )
        assert ts.statistics(partition=partition).to_pylist() == full.select(proj).to_pylist()
        assert ts.statistics(["id"], partition=partition, sketches=True).column_names == full.column_names
    row = ts.column_statistics("event_date")
    assert row["min"].isoformat() == "2024-01-01" and row["max"].isoformat() == "2024-12-31"


@pytest.mark.parametrize("column", ["category", "city", "quantity", "comment", "user_id", "flag", "id"])
def test_top_frequencies_lookup_is_a_slice_of_the_file(sample, column):
    ts = sample[3]
    for partition in (None, PARTITION):
        full = read_file(ts, layout.FREQUENCIES_FILE, partition)
        mine = full.filter(pc.equal(full["column"], column)).select(["value", "frequency"])
        kind = ts.frequency_index(partition)[column][3]
        for k in (0, 1, 10, 1024, 1025, 3000, 10**9):
            got = ts.top_frequencies(column, k, partition=partition)
            assert got.to_pylist() == mine.slice(0, k).to_pylist(), (column, k)
            assert got.schema.metadata[b"kind"].decode() == kind
        typed = ts.top_frequencies(column, 5, partition=partition, typed=True)
        assert typed["value"].type == ts.column_type(column)
        assert typed["value"].to_pylist() == value_forms.decode(mine["value"].combine_chunks().slice(0, 5), ts.column_type(column)).to_pylist()


@pytest.mark.parametrize("column", ["price", "quantity", "event_time", "amount", "score", "event_date"])
def test_histogram_lookup_is_a_slice_of_the_file(sample, column):
    ts = sample[3]
    for partition in (None, PARTITION):
        spec, hist = ts.histogram_spec(column, partition), histograms(ts, partition)[1]
        full = bins_of(hist, column, spec.bins)
        if partition is not None:  # its edges are the table's (null in its file: from the spec)
            edges = bins_of(histograms(ts)[1], column, spec.bins)
            full = full.set_column(0, "lower", edges["lower"]).set_column(1, "upper", edges["upper"])
        assert ts.histogram(column, partition).select(["lower", "upper", "count"]).to_pylist() == full.to_pylist()
        for a, b in [(0, 1), (3, 17), (spec.bins - 5, spec.bins + 10), (-4, 2), (10, 10), (7, 3)]:
            got = ts.histogram(column, partition, bins=(a, b))
            lo, hi = max(a, 0), min(b, spec.bins)
            want = full.slice(lo, max(hi - lo, 0))
            assert got["bin"].to_pylist() == list(range(lo, max(hi, lo)))
            assert got.select(["lower", "upper", "count"]).to_pylist() == want.to_pylist(), (a, b)


def test_histogram_value_range_lookup(sample, duck):
    ts = sample[3]
    import datetime as dt

    cases = {
        "quantity": [(100, 200), (1, 1), (49_000, None), (None, 700), (25_000, 25_000)],
        "price": [(10.0, 20.0), (0.0, 1.0), (100.5, None)],
        "event_date": [(dt.date(2024, 3, 1), dt.date(2024, 3, 31))],
        "event_time": [(dt.datetime(2024, 6, 1, tzinfo=dt.UTC), dt.datetime(2024, 6, 2, tzinfo=dt.UTC))],
        "amount": [(Decimal("-10.00"), Decimal("10.00"))],
    }
    for column, ranges in cases.items():
        spec = ts.histogram_spec(column)
        full = bins_of(histograms(ts)[1], column, spec.bins)
        for lo, hi in ranges:
            got = ts.histogram(column, value_range=(lo, hi))
            bins = got["bin"].to_pylist()
            if not bins:  # only a range wholly outside the column's range overlaps no bin
                st = ts.column_statistics(column)
                assert (hi is not None and hi < st["min"]) or (lo is not None and lo > st["max"]), (column, lo, hi)
                continue
            assert bins == list(range(bins[0], bins[-1] + 1)) and bins, (column, lo, hi)
            assert got.select(["lower", "upper", "count"]).to_pylist() == full.slice(bins[0], len(bins)).to_pylist()
            lows, ups = got["lower"].to_pylist(), got["upper"].to_pylist()
            # the bins cover the range and no bin outside it overlaps it
            if lo is not None:
                assert lows[0] <= as_edge(lo) or bins[0] == 0
                assert bins[0] == 0 or full["upper"][bins[0] - 1].as_py() < as_edge(lo) or spec.domain == "float"
            else:
                assert bins[0] == 0
            if hi is not None:
                assert ups[-1] >= as_edge(hi) or bins[-1] == spec.bins - 1
            else:
                assert bins[-1] == spec.bins - 1
            if spec.domain == "integer" and lo is not None and hi is not None:
                # all the values in [lo, hi] are counted by the returned bins
                n = duck.execute(f"SELECT count(*) FROM t WHERE {q(column)} BETWEEN $lo AND $hi", {"lo": lo, "hi": hi}).fetchone()[0]
                assert sum(got["count"].to_pylist()) >= n


def as_edge(v):
    return float(v) if isinstance(v, (Decimal, float)) else v


def test_histogram_value_range_outside_the_table(sample):
    ts = sample[3]
    q_min = ts.column_statistics("quantity")["min"]
    assert ts.histogram("quantity", value_range=(-10, q_min - 1)).num_rows == 0
    assert ts.histogram("quantity", value_range=(60_001, None)).num_rows == 0
    assert ts.histogram("quantity", value_range=(None, q_min))["bin"].to_pylist() == [0]
    assert ts.histogram("price", value_range=(-10.0, -5.0)).num_rows == 0
    # an unbounded side reaches the end bin, where float infinities are counted
    assert ts.histogram("price", value_range=(None, -5.0))["bin"].to_pylist() == [0]


@pytest.mark.parametrize(
    "column",
    [
        pa.array([3, 1, 3, None, 7, 1, 1], pa.int64()),
        pa.array(list(range(1000)), pa.int64()),  # all distinct: no weights
        pa.array([5, -2, 5], pa.int32()),
        pa.array([19000, 19001, 19000, None], pa.int32()).cast(pa.date32()),
        pa.array([Decimal("1.25"), Decimal("-3.50"), Decimal("1.25"), None], pa.decimal128(18, 2)),
        pa.array([2**63 - 1, 0, 2**63 - 1], pa.uint64()),
        pa.array([], pa.int64()),
        pa.array([None, None], pa.int64()),
    ],
    ids=lambda c: str(c.type),
)
def test_second_wave_rebuilds_the_first_waves_binning_inputs_from_its_counts(column: pa.Array) -> None:
    """What the sorted view handed phase 2 (sorted distinct values in storage form and
    their counts) equals what the second wave rebuilds from the value counts alone."""
    from engine.runtime.tasks.profile import bin_inputs_of_counts
    from engine.stats.profile import ColumnProfile

    _, _, counts, view = ColumnProfile("c", column.type).profile_column_view(column)
    assert view is not None
    want = (view.type, view.distinct, None if len(view.distinct) == view.n else view.counts)
    got = bin_inputs_of_counts({"c": counts})["c"]
    assert got[0] == want[0]
    assert got[1].dtype == want[1].dtype and got[1].tolist() == want[1].tolist()
    assert (got[2] is None) == (want[2] is None)
    if want[2] is not None:
        assert got[2].tolist() == want[2].tolist()
