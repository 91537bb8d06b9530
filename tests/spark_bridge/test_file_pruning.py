"""Filtered DataFrames over an analyzed table: the files to read (#15) and the subset's statistics (#16).

One generated table (3 partitions x 3 files, ids sorted across files, nulls, NaN, -0.0,
+-inf, extreme int64, timestamps, dates, strings with shared prefixes), analyzed once
with its file index. Oracles are Spark itself: ``input_file_name()`` of the rows the
filter keeps (every such file must be a candidate), the rows of the unpruned read
(the pruned read must return the same), and the rows Spark keeps against the rows our
translated predicate keeps (pyarrow, IEEE semantics: equal when the translation says
it is exact, a superset otherwise); DuckDB for the subset statistics.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.spark, pytest.mark.ray]

FILES, PER_FILE, PARTS = 9, 40, 3
I64 = (-(2**63), 2**63 - 1)
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def _file_rows(k: int) -> pa.Table:
    """File k (partition k // 3): ids k*40 .. k*40+39 (file 0 also holds int64's min, file 8 its max)."""
    ids = list(range(k * PER_FILE, (k + 1) * PER_FILE))
    if k == 0:
        ids[0] = I64[0]
    if k == FILES - 1:
        ids[-1] = I64[1]
    specials = [float("nan"), -0.0, 0.0, None, float("inf"), float("-inf")]
    price = [specials[i % 6] if i % 5 == 0 else float((i * 37 + k * 11) % 200) - 50.5 for i in range(PER_FILE)]
    cities = ["Berlin", "Bern", "Ber", "Paris", "Pa", None, "Zürich", ""]
    city = [cities[(i + k) % len(cities)] if k != 4 else "zoo" for i in range(PER_FILE)]  # file 4: one city, sorting after all others
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "price": pa.array(price, pa.float64()),
            "city": pa.array(city, pa.string()),
            "ts": pa.array([BASE + timedelta(hours=k * PER_FILE + i) for i in range(PER_FILE)], pa.timestamp("us", tz="UTC")),
            "day": pa.array([date(2024, 1, 1) + timedelta(days=k) if i % 7 else None for i in range(PER_FILE)], pa.date32()),
            "i8": pa.array([(i * 7 + k) % 120 - 60 for i in range(PER_FILE)], pa.int8()),
            "flag": pa.array([None if i % 9 == 0 else bool((i + k) % 3) for i in range(PER_FILE)], pa.bool_()),
        }
    )


def _write(root: Path) -> None:
    for k in range(FILES):
        folder = root / f"part={k // 3}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(_file_rows(k), folder / f"f{k}.parquet")


@pytest.fixture(scope="module")
def lake(spark, ray_runtime, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """The table, analyzed. Spark's Parquet filter pushdown is off while these tests run: with it,
    Spark 3.5.7 drops NaN rows that its own semantics keep (``price = NaN`` and ``price > 5``
    return no NaN row; measured, docs/SPARK.md), and the oracle must be Spark's semantics."""
    from engine.api import analyze

    root = tmp_path_factory.mktemp("pruning") / "events"
    _write(root)
    store = str(tmp_path_factory.mktemp("pruning_store"))
    analyze(str(root), store=store, user_statistics=[])
    arrow = pa.concat_tables([_file_rows(k).append_column("part", pa.array([k // 3] * PER_FILE, pa.int64())) for k in range(FILES)])
    pushdown = spark.conf.get("spark.sql.parquet.filterPushdown")
    spark.conf.set("spark.sql.parquet.filterPushdown", "false")
    try:
        yield SimpleNamespace(root=str(root), store=store, table="events", arrow=arrow, df=spark.read.parquet(str(root)))
    finally:
        spark.conf.set("spark.sql.parquet.filterPushdown", pushdown)


def _name(spark_path: str) -> str:
    return spark_path.rsplit("/", 1)[-1]


def _matching(df, cond) -> tuple[set[int], set[str]]:
    """Spark's own answer: the ids the filter keeps and the files they are in."""
    from pyspark.sql import functions as F

    rows = df.where(cond).select("id", F.input_file_name().alias("file")).collect()
    return {r.id for r in rows}, {_name(r.file) for r in rows}


def _ours(arrow: pa.Table, expr) -> set[int]:
    """The ids our (NOT-free) translated predicate keeps, IEEE semantics (engine.subset.mask per leaf)."""
    from engine import expressions as ex
    from engine.subset.mask import mask

    def ev(e) -> pa.Array:
        if isinstance(e, ex.AlwaysTrue):
            return pa.array([True] * arrow.num_rows)
        if isinstance(e, ex.AlwaysFalse):
            return pa.array([False] * arrow.num_rows)
        if isinstance(e, ex.And):
            return pc.and_(ev(e.left), ev(e.right))
        if isinstance(e, ex.Or):
            return pc.or_(ev(e.left), ev(e.right))
        assert isinstance(e, ex.Predicate), e  # NOTs are pushed into the leaves
        return mask(arrow.column(e.term.name).combine_chunks(), e)

    return set(arrow.filter(ev(expr)).column("id").to_pylist())


def _check(spark, lake, cond) -> object:
    from spark_bridge.filters import plan_files

    ids, files = _matching(lake.df, cond)
    plan = plan_files(lake.df.where(cond), store=lake.store)
    got = {_name(f) for f in plan.files}
    assert files <= got, (plan.predicate, files - got)  # never a false negative
    assert plan.pruned + len(plan.files) == FILES and not plan.unindexed
    pruned_ids = {r.id for r in plan.read(spark).where(cond).select("id").collect()}
    assert pruned_ids == ids  # the pruned read returns the same rows
    ours = _ours(lake.arrow, plan.expression)
    if plan.exact:
        assert ours == ids, (plan.predicate, sorted(ours ^ ids)[:5])
    else:
        assert ours >= ids, (plan.predicate, sorted(ids - ours)[:5])
    return plan


def test_sorted_data_prunes_exactly_what_the_ranges_allow(spark, lake) -> None:
    from pyspark.sql import functions as F

    c = F.col
    cases = [
        ((c("id") >= 50) & (c("id") < 130), {"f1.parquet", "f2.parquet", "f3.parquet"}),
        (c("id").between(0, 39), {"f0.parquet"}),  # file 0's min is int64's min, its max 39
        (c("id") > 400, {"f8.parquet"}),  # only int64's max is beyond 359
        (c("part") == 2, {"f6.parquet", "f7.parquet", "f8.parquet"}),
        (c("city") == "zoo", {"f4.parquet"}),
        (c("city").startswith("zo"), {"f4.parquet"}),
        (c("city").like("zo%"), {"f4.parquet"}),
        (c("ts") < F.lit(BASE + timedelta(hours=80)), {"f0.parquet", "f1.parquet"}),
        (c("day") == F.lit(date(2024, 1, 4)), {"f3.parquet"}),
        (c("id").isin(5, 45, 300), {"f0.parquet", "f1.parquet", "f7.parquet"}),
        # the file index has no partition values per file: in partition 2 "part = 0" is unknown, so the OR keeps f6, f7
        ((c("part") == 0) | (c("id") == 330), {"f0.parquet", "f1.parquet", "f2.parquet", "f6.parquet", "f7.parquet", "f8.parquet"}),
        # partition 1 is pruned as a whole (part = 1, ids 120..239); partition 2's ids reach int64's max
        ((c("part") == 0) | (c("id") == 1000), {"f0.parquet", "f1.parquet", "f2.parquet", "f6.parquet", "f7.parquet", "f8.parquet"}),
        (~(c("id") >= 40), {"f0.parquet"}),
        ((c("id") < 40) & (F.length("city") > 3), {"f0.parquet"}),  # the unknown conjunct drops out of the AND
        ((c("id") < 40) | (F.length("city") > 3), {f"f{k}.parquet" for k in range(FILES)}),  # and makes the OR unknown
        (~((c("id") < 40) & (F.length("city") > 3)), {f"f{k}.parquet" for k in range(FILES)}),  # NOT (a AND unknown): all
        ((c("id") == 50) & (c("part") == 2), set()),
    ]
    for cond, want in cases:
        plan = _check(spark, lake, cond)
        assert {_name(f) for f in plan.files} == want, (str(cond), plan.predicate)
    plan = _check(spark, lake, (c("id") < 40) & (F.length("city") > 3))
    assert not plan.exact and plan.untranslated == ("(length(city) > 3)",)
    empty = _check(spark, lake, (c("id") == 50) & (c("part") == 2))
    assert empty.files == () and empty.read(spark).count() == 0


def _literal(column: str):
    pools = {
        "id": st.sampled_from([*I64, -1, 0, 39, 40, 41, 100, 199, 200, 359, 360, 1000]),
        "price": st.sampled_from([float("nan"), -0.0, 0.0, float("inf"), float("-inf"), -50.5, 10.5, 100.0, 149.5, 1e300]),
        "city": st.sampled_from(["Berlin", "Bern", "Ber", "Be", "Paris", "zoo", "Zürich", "", "zzz"]),
        "ts": st.integers(-5, FILES * PER_FILE + 5).map(lambda h: BASE + timedelta(hours=h)),
        "day": st.integers(-1, FILES + 1).map(lambda d: date(2024, 1, 1) + timedelta(days=d)),
        "i8": st.integers(-61, 61),
        "part": st.integers(-1, 3),
    }
    return pools[column]


@st.composite
def _leaf(draw):
    from pyspark.sql import functions as F

    column = draw(st.sampled_from(["id", "price", "city", "ts", "day", "i8", "part", "flag"]))
    c = F.col(column)
    if column == "flag":
        return draw(st.sampled_from([c, ~c, c.isNull(), c == F.lit(False), c.eqNullSafe(F.lit(True))]))
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "in", "null", "nan", "prefix", "opaque"]))
    if kind == "cmp":
        v = F.lit(draw(_literal(column)))
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "<=>", "flip"]))
        return {
            "==": lambda: c == v, "!=": lambda: c != v, "<": lambda: c < v, "<=": lambda: c <= v,
            ">": lambda: c > v, ">=": lambda: c >= v, "<=>": lambda: c.eqNullSafe(v), "flip": lambda: v < c,
        }[op]()  # fmt: skip
    if kind == "in":
        values = draw(st.lists(_literal(column), min_size=1, max_size=4))
        if draw(st.booleans()):
            values.append(None)
        return c.isin(*[F.lit(v) for v in values])
    if kind == "null":
        return c.isNull() if draw(st.booleans()) else c.isNotNull()
    if kind == "nan":
        return F.isnan("price")
    if kind == "prefix":
        return F.col("city").startswith(draw(st.sampled_from(["B", "Ber", "Bern", "P", "zo", "Z", "", "x"])))
    return draw(st.sampled_from([(F.col("id") % 7) == 3, F.length("city") > 3, (F.col("price") + 1) > 20, F.col("id") == F.col("i8")]))


_conditions = st.recursive(
    _leaf(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda ab: ab[0] & ab[1]),
        st.tuples(inner, inner).map(lambda ab: ab[0] | ab[1]),
        inner.map(lambda a: ~a),
    ),
    max_leaves=5,
)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=15, **_SETTINGS)
@given(cond=_conditions)
def test_random_filters_never_prune_a_file_holding_a_match(spark, lake, cond) -> None:
    _check(spark, lake, cond)


@pytest.mark.slow
@settings(max_examples=150, **_SETTINGS)
@given(cond=_conditions)
def test_random_filters_never_prune_a_file_holding_a_match_many(spark, lake, cond) -> None:
    _check(spark, lake, cond)


def test_where_argument_catalog_tables_and_errors(spark, lake, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from engine.exceptions import InvalidArgumentError, TableNotFoundError
    from spark_bridge.filters import plan_files

    by_arg = plan_files(lake.df, lake.store, where=F.col("part") == 1)
    by_sql = plan_files(lake.df, lake.store, where="part = 1 AND id IS NOT NULL")
    assert {_name(f) for f in by_arg.files} == {_name(f) for f in by_sql.files} == {"f3.parquet", "f4.parquet", "f5.parquet"}
    assert by_arg.table == "events" and by_arg.exact

    # a catalog table over the same files: the catalog's location finds the table
    spark.sql("DROP TABLE IF EXISTS ms_events").collect()
    spark.sql(f"CREATE TABLE ms_events USING parquet LOCATION '{lake.root}'").collect()
    spark.sql("MSCK REPAIR TABLE ms_events").collect()
    plan = plan_files(spark.table("ms_events").where((F.col("part") >= 1) & (F.col("id") < 130)), lake.store)
    assert {_name(f) for f in plan.files} == {"f3.parquet"}

    with pytest.raises(InvalidArgumentError, match=r"^table 'other' of store .* was analyzed from .*, but the DataFrame reads "):
        from engine.api import analyze

        other = tmp_path / "other"
        pq.write_table(pa.table({"id": [1]}), tmp_path / "x.parquet")
        other.mkdir()
        shutil.copy(tmp_path / "x.parquet", other / "x.parquet")
        analyze(str(other), store=lake.store, user_statistics=[])
        plan_files(lake.df, lake.store, table="other")
    with pytest.raises(TableNotFoundError, match=r"^no table of store .* was analyzed from .*what the DataFrame reads"):
        plan_files(spark.read.parquet(str(tmp_path / "x.parquet")), lake.store)
    with pytest.raises(InvalidArgumentError, match=r"^the DataFrame is not a filtered scan of one table's files: its plan has Aggregate"):
        plan_files(lake.df.groupBy("part").count(), lake.store)
    with pytest.raises(InvalidArgumentError, match=r"^the DataFrame is not a filtered scan of one table's files: its plan has Join"):
        plan_files(lake.df.join(lake.df, "id"), lake.store)


def test_files_written_after_the_analyze_are_read_and_refuse_subset_statistics(spark, lake, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from engine.api import analyze
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.filters import plan_files, subset_statistics

    root = tmp_path / "grown"
    shutil.copytree(lake.root, root)
    store = str(tmp_path / "store")
    analyze(str(root), store=store, user_statistics=[])
    pq.write_table(_file_rows(0), root / "part=1" / "late.parquet")  # ids 0..39 again, in partition 1
    df = spark.read.parquet(str(root))
    cond = F.col("id") < 40
    plan = plan_files(df.where(cond), store)
    assert {_name(f) for f in plan.files} == {"f0.parquet", "late.parquet"}
    assert [_name(f) for f in plan.unindexed] == ["late.parquet"]
    assert plan.read(spark).where(cond).count() == df.where(cond).count() == 80
    with pytest.raises(InvalidArgumentError, match=r"statistics are older than its files: Spark reads 1 file\(s\) they do not describe"):
        subset_statistics(df.where(cond), store)


# ---------------------------------------------------------------- #16: statistics of the subset
def test_subset_statistics_of_a_filtered_dataframe(spark, lake) -> None:
    from pyspark.sql import functions as F

    from engine.api import open_statistics
    from engine.exceptions import InvalidArgumentError
    from engine.subset import Method, methods_of
    from spark_bridge.filters import dataframe_subset, subset_statistics
    from tests.engine.sources.lake_helpers import decode

    # whole partitions: stored, exact; against DuckDB over the rows Spark keeps
    cond = F.col("part") >= 1
    got = subset_statistics(lake.df.where(cond), lake.store, ["id", "price", "city"])
    rows = {r["column"]: r for r in got.to_pylist()}
    methods = methods_of(got)
    con = duckdb.connect()
    kept = lake.arrow.filter(pc.greater_equal(lake.arrow["part"], 1))
    con.register("t", kept)
    assert rows["id"]["row_count"] == lake.df.where(cond).count() == kept.num_rows
    for name in ("id", "price", "city"):
        assert methods.method(name, "row_count") is Method.STORED
        nulls, distinct = con.execute(f"SELECT count(*) - count({name}), count(DISTINCT {name}) FROM t").fetchone()
        assert rows[name]["null_count"] == nulls, name
        if name != "price":
            assert rows[name]["distinct_count"] == distinct, name
    id_min, id_max = con.execute("SELECT min(id), max(id) FROM t").fetchone()
    assert (int(rows["id"]["min"]), int(rows["id"]["max"])) == (id_min, id_max)

    # the same as the API called with the translated predicate, whatever the method
    cond = (F.col("price") > 10) & F.col("city").startswith("Ber")
    subset = dataframe_subset(lake.df.where(cond), lake.store)
    assert subset.table == "events" and subset.translation.exact
    # Spark orders NaN above every number: its price > 10 keeps NaN rows, and so does the translation
    assert "(price > 10 OR price IS NAN)" in subset.predicate and "city STARTS WITH 'Ber'" in subset.predicate
    via_spark = subset.subset.statistics(["price"]).to_pylist()
    via_api = open_statistics(lake.store, lake.table).statistics(["price"], where=subset.predicate).to_pylist()
    assert via_spark == via_api
    count = methods_of(subset.subset.statistics(["price"])).of("price", "row_count")
    truth = lake.df.where(cond).count()
    if count.method is Method.ESTIMATED:
        assert (count.low is None or count.low <= truth) and (count.high is None or truth <= count.high)
    else:
        assert via_spark[0]["row_count"] == truth

    # exact=True: computed on the candidate files; every statistic against DuckDB over the rows Spark keeps
    cond = ((F.col("price") > 10) | F.col("day").isNull()) & ~F.col("city").startswith("Ber")
    computed = subset_statistics(lake.df.where(cond), lake.store, ["id", "price", "city", "day"], exact=True)
    methods = methods_of(computed)
    ids, _ = _matching(lake.df, cond)
    kept = lake.arrow.filter(pc.is_in(lake.arrow["id"], pa.array(sorted(ids), pa.int64())))
    con = duckdb.connect()
    con.register("k", kept)
    for r in computed.to_pylist():
        name = r["column"]
        assert methods.method(name, "row_count") is Method.COMPUTED
        where = f"{name} IS NOT NULL" + (f" AND NOT isnan({name})" if name == "price" else "")
        n, nulls, distinct, lo, hi = con.execute(
            f"SELECT count(*), count(*) - count({name}), count(DISTINCT {name}) FILTER (WHERE {where}), "
            f"min({name}) FILTER (WHERE {where}), max({name}) FILTER (WHERE {where}) FROM k"
        ).fetchone()
        assert n == len(ids) and (r["row_count"], r["null_count"], r["distinct_count"]) == (n, nulls, distinct), name
        t = open_statistics(lake.store, lake.table).column_type(name)
        assert (decode(r["min"], t), decode(r["max"], t)) == (lo, hi), name

    with pytest.raises(
        InvalidArgumentError, match=r"^the DataFrame's filter has part\(s\) Metastore cannot translate exactly: \(length\(city\) > 3\); "
    ):
        subset_statistics(lake.df.where(F.length("city") > 3), lake.store)
