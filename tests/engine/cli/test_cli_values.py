"""`metastore show` and `preview --html` on the values other tools write: nanosecond timestamps
(pandas, DuckDB's TIMESTAMP_NS), zone-aware ones, time64[ns], durations, dates and timestamps
beyond Python's years 1..9999 (issue #28). Oracle: the values pyarrow.compute and DuckDB give,
read back from what the CLI printed by numpy and pandas' own parsers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore

REPO = Path(__file__).resolve().parents[3]
ZONE = "Europe/Berlin"


def run(store: str, *args: str):
    result = CliRunner().invoke(metastore, ["--store", store, *args])
    assert result.exit_code == 0, (args, result.output, result.exception)
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def tables(ray_runtime, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:  # noqa: ANN001
    """Three tables analyzed into one store: ``pandas`` (DataFrame.to_parquet: ns timestamps, naive
    and zone-aware), ``duck`` (DuckDB COPY: TIMESTAMP_NS, TIME) and ``arrow`` (pyarrow: time64[ns],
    duration[ns], far dates and timestamps)."""
    import duckdb

    from engine.api import analyze

    root = tmp_path_factory.mktemp("values")
    (root / "pandas").mkdir()
    naive = pd.to_datetime(["2024-01-01 00:00:00.000000001", "2024-01-02 00:00:00", "2023-06-30 12:00:00.5"], format="ISO8601")
    pd.DataFrame({"ts": naive, "tz": naive.tz_localize("UTC").tz_convert(ZONE)}).to_parquet(root / "pandas" / "a.parquet")
    (root / "duck").mkdir()
    duckdb.connect().sql(
        "COPY (SELECT make_timestamp_ns(1704067200123456789 + i * 1000000000) AS ts, "
        f"TIME '12:34:56.123456' + to_seconds(i) AS tm FROM range(3) t(i)) TO '{root / 'duck' / 'a.parquet'}'"
    )
    (root / "arrow").mkdir()
    day_ms = 86_400_000
    pq.write_table(
        pa.table(
            {
                "t64": pa.array([1, 86_399_999_999_999, 5], pa.time64("ns")),
                "dur": pa.array([1, -5, 10**18], pa.duration("ns")),
                "d64": pa.array([-36_000_000 * day_ms, 0, 7_300_000 * day_ms], pa.date64()),
                "d32": pa.array([-1_000_000, 3_000_000, 3_000_000], pa.date32()),  # a far date twice: in the frequencies
                "far": pa.array([-(2**62), 0, 2**62], pa.timestamp("us")),
                "far_tz": pa.array([-(2**62), 0, 2**62], pa.timestamp("us", "UTC")),
            }
        ),
        root / "arrow" / "a.parquet",
    )
    (root / "names").mkdir()  # a top-level column with a dot in its name, a struct leaf, and both spellings of s.x
    pq.write_table(
        pa.table(
            {
                "qty.units": pa.array([5, 7, 7], pa.int64()),
                "s": pa.array([{"x": 1}, {"x": 2}, None], pa.struct([("x", pa.int64())])),
                "s.x": pa.array(["a", "b", "b"]),
            }
        ),
        root / "names" / "a.parquet",
    )
    store = str(root / "store")
    for name in ("pandas", "duck", "arrow", "names"):
        analyze(str(root / name), store=store, user_statistics=[])
    return SimpleNamespace(root=root, store=store)


def _extremes(tables: SimpleNamespace, table: str, column: str) -> tuple[int, int]:
    """min and max storage integers of a column, by pyarrow.compute on the data (their order is the values')."""
    a = pq.read_table(tables.root / table / "a.parquet").column(column).combine_chunks()
    mm = pc.min_max(a.view(pa.int32() if a.type.bit_width == 32 else pa.int64()))
    return mm["min"].as_py(), mm["max"].as_py()


def _overview(tables: SimpleNamespace, table: str) -> dict[str, dict]:
    doc = json.loads(run(tables.store, "show", table, "-o", "json").stdout)
    return {c["column"]: c for c in doc["columns"]}


def test_ns_timestamps_of_pandas_exact_in_json_and_text(tables) -> None:  # noqa: ANN001
    cols = _overview(tables, "pandas")
    text = run(tables.store, "show", "pandas").stdout
    for column in ("ts", "tz"):
        for key, n in zip(("min", "max"), _extremes(tables, "pandas", column)):
            shown = cols[column][key]
            if column == "ts":
                assert np.datetime64(shown, "ns") == np.datetime64(n, "ns"), (key, shown)
                expected = np.datetime_as_string(np.datetime64(n, "ns")).replace("T", " ").rstrip("0").rstrip(".")
            else:  # the zone's local time with its UTC offset, as pandas computes it
                local = pd.Timestamp(n, tz=ZONE)
                assert pd.Timestamp(shown).value == n and pd.Timestamp(shown).utcoffset() == local.utcoffset(), (key, shown)
                fraction = f".{n % 10**9:09d}" if n % 10**9 else ""
                expected = local.strftime("%Y-%m-%d %H:%M:%S") + fraction + local.strftime("%z")
            assert expected in text, (column, key, expected, text)
    assert cols["ts"]["min"] == "2023-06-30T12:00:00.500000000"


def test_duckdb_timestamp_ns_and_time(tables) -> None:  # noqa: ANN001
    import duckdb

    cols = _overview(tables, "duck")
    path = tables.root / "duck" / "a.parquet"
    lo, hi, tlo, thi = (
        duckdb.connect().sql(f"SELECT epoch_ns(min(ts)), epoch_ns(max(ts)), min(tm)::VARCHAR, max(tm)::VARCHAR FROM '{path}'").fetchall()[0]
    )
    assert np.datetime64(cols["ts"]["min"], "ns") == np.datetime64(lo, "ns")
    assert np.datetime64(cols["ts"]["max"], "ns") == np.datetime64(hi, "ns")
    assert (cols["tm"]["min"], cols["tm"]["max"]) == (tlo, thi)
    detail = run(tables.store, "show", "duck", "--column", "ts", "--column", "tm").stdout
    assert "2024-01-01 00:00:00.123456789" in detail and "2024-01-01 00:00:02.123456789" in detail
    doc = json.loads(run(tables.store, "show", "duck", "--column", "ts", "-o", "json").stdout)
    stats = doc["columns"][0]["statistics"]
    assert np.datetime64(stats["max"], "ns") == np.datetime64(hi, "ns")
    edges = [b["lower"] for b in doc["columns"][0]["histogram"]["buckets"]]
    assert np.datetime64(edges[0], "ns") == np.datetime64(lo, "ns")


def test_pyarrow_time_duration_and_far_dates(tables) -> None:  # noqa: ANN001
    cols = _overview(tables, "arrow")
    for key, n in zip(("min", "max"), _extremes(tables, "arrow", "t64")):
        assert np.datetime64(f"1970-01-01T{cols['t64'][key]}", "ns") == np.datetime64(n, "ns")
    for key, n in zip(("min", "max"), _extremes(tables, "arrow", "dur")):
        assert pd.Timedelta(cols["dur"][key]).value == n
    for column in ("d64", "d32"):
        for key, n in zip(("min", "max"), _extremes(tables, "arrow", column)):
            stored = pq.read_schema(tables.root / "arrow" / "a.parquet").field(column).type  # Parquet DATE: date32
            days = n // 86_400_000 if stored == pa.date64() else n
            assert np.datetime64(cols[column][key], "D") == np.datetime64(days, "D"), (column, key)
    for column in ("far", "far_tz"):
        for key, n in zip(("min", "max"), _extremes(tables, "arrow", column)):
            shown = cols[column][key]
            assert shown.endswith("Z") == (column == "far_tz"), shown  # beyond Python's years: in UTC
            assert np.datetime64(shown.rstrip("Z"), "us") == np.datetime64(n, "us"), (column, key)
    text = run(tables.store, "show", "arrow").stdout
    people = [cols[c][k].replace("T", " ") for c in ("d64", "d32", "far", "far_tz", "t64", "dur") for k in ("min", "max")]
    for expected in people:  # the text view shows the same values (a space for the T)
        assert expected in text, (expected, text)
    detail = run(tables.store, "show", "arrow", "--column", "d64", "--column", "far", "--column", "dur").stdout
    for expected in [cols[c][k].replace("T", " ") for c in ("d64", "far", "dur") for k in ("min", "max")]:
        assert expected in detail, (expected, detail)
    top = json.loads(run(tables.store, "show", "arrow", "--column", "d32", "-o", "json").stdout)["columns"][0]["top_frequencies"]
    assert [(v["value"], v["frequency"]) for v in top["values"]] == [(cols["d32"]["max"], 2), (cols["d32"]["min"], 1)]
    assert np.datetime64(cols["d32"]["max"], "D") == np.datetime64(3_000_000, "D")


def test_preview_html_of_far_dates_and_ns_values(tables) -> None:  # noqa: ANN001
    for table, needles in (
        ("arrow", ["-96595-05-08", "23:59:59.999999999"]),
        ("pandas", ["2023-06-30 12:00:00.500000000", "2024-01-02 01:00:00+0100"]),
    ):
        out = tables.root / f"{table}.html"
        run(tables.store, "preview", table, "--html", str(out))
        page = out.read_text()
        for needle in needles:
            assert needle in page, (table, needle)


def test_read_commands_without_pandas_show_ns_values(tables) -> None:  # noqa: ANN001
    """The console script keeps pandas out (start-up): the values are formatted without it."""
    code = (
        "import json, sys\nsys.argv = ['metastore'] + json.loads(sys.argv[1])\nfrom engine.cli.console import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\nprint('pandas' in sys.modules)\n"
    )
    for args in (["show", "pandas"], ["show", "pandas", "-o", "json"], ["show", "arrow", "--column", "dur"]):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(["--store", tables.store, *args])], capture_output=True, text=True,
            cwd=str(REPO), env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[-1] == "False", out.stdout
        assert "12:00:00.500000000" in out.stdout or "23:59:59.999999995" in out.stdout, out.stdout


# ---------------------------------------------------------------- names as in the data (issue #28)
def test_show_names_columns_as_in_the_data(tables) -> None:  # noqa: ANN001
    text = run(tables.store, "show", "names").stdout
    assert "qty.units" in text and "qty\\.units" not in text and "s > x" in text
    doc = json.loads(run(tables.store, "show", "names", "-o", "json").stdout)
    schema = pq.read_schema(tables.root / "names" / "a.parquet")
    expected = [
        (f.name, [f.name]) if not pa.types.is_struct(f.type) else (f"{f.name} > {f.type.field(0).name}", [f.name, f.type.field(0).name])
        for f in schema
    ]
    assert sorted((c["column"], c["path"]) for c in doc["columns"]) == sorted(expected)
    # --column takes the name as in the data, the display form, and the stored forms, as before
    for asked, shown, path in (("qty.units", "qty.units", ["qty.units"]), ("qty\\.units", "qty.units", ["qty.units"]),
                               ("s > x", "s > x", ["s", "x"]), ("s.x", "s > x", ["s", "x"]), ("s\\.x", "s.x", ["s.x"])):  # fmt: skip
        got = json.loads(run(tables.store, "show", "names", "--column", asked, "-o", "json").stdout)["columns"][0]
        assert (got["column"], got["path"], got["statistics"]["column"]) == (shown, path, shown), asked
        detail = run(tables.store, "show", "names", "--column", asked).stdout
        assert detail.lstrip().startswith(f"{shown} ("), (asked, detail)
    top = json.loads(run(tables.store, "show", "names", "--column", "s\\.x", "-o", "json").stdout)["columns"][0]["top_frequencies"]
    assert top["values"][0] == {"value": "b", "frequency": 2, "share": 2 / 3}  # the top-level string column, not the leaf


def test_preview_html_names_columns_as_in_the_data(tables) -> None:  # noqa: ANN001
    out = tables.root / "names.html"
    run(tables.store, "preview", "names", "--html", str(out))
    page = out.read_text()
    assert ">qty.units</h3>" in page and ">s &gt; x</h3>" in page and ">s.x</h3>" in page
    assert "qty\\.units</h3>" not in page


def test_flight_answers_on_these_tables(tables) -> None:  # noqa: ANN001
    """Flight: ns and far values are answered (typed too); answers name columns as in the data,
    and requests still take the stored names."""
    from flight_server.server import MetastoreFlightServer, ServerConfig

    server = MetastoreFlightServer(ServerConfig(store=tables.store, host="127.0.0.1", port=0))
    try:
        _flight_answers(tables, server.location)
    finally:
        server.shutdown()


def _flight_answers(tables: SimpleNamespace, location: str) -> None:
    from flight_server.client import MetastoreClient

    with MetastoreClient(location, timeout=60) as client:
        for table in ("pandas", "duck", "arrow"):
            stats = client.statistics(table)
            assert stats.num_rows == len(pq.read_schema(tables.root / table / "a.parquet"))
        edges = client.histogram("pandas", "ts", bins=(0, 1))
        lo, _ = _extremes(tables, "pandas", "ts")
        assert edges.column("lower").type == pa.timestamp("ns") and edges.column("lower").cast(pa.int64()).to_pylist() == [lo]
        typed = client.top_frequencies("arrow", "d32", k=3, typed=True)
        assert typed.column("value").type == pa.date32()
        assert typed.column("value").cast(pa.int32()).to_pylist() == [3_000_000, -1_000_000] and typed.column("frequency").to_pylist() == [2, 1]
        names = client.statistics("names")
        assert names.column("column").to_pylist() == ["qty.units", "s > x", "s.x"]
        for asked, shown in ((["qty\\.units", "s.x", "s\\.x"], ["qty.units", "s > x", "s.x"]), (["qty.units", "s > x"], ["qty.units", "s > x"])):
            got = client.statistics("names", asked)
            assert got.column("column").to_pylist() == shown, asked
            assert got.column("row_count").to_pylist() == [3] * len(asked)
        assert client.top_frequencies("names", "s\\.x", k=1).column("value").to_pylist() == ["b"]
        assert client.top_frequencies("names", "s > x", k=5, typed=True).schema.field("value").type == pa.int64()  # the leaf
        assert client.histogram("names", "qty.units").num_rows > 0
        infos = {json.loads(i.app_metadata)["table"]: json.loads(i.app_metadata) for i in client._client.list_flights(b"", client._options)}
        assert infos["names"]["column_names"] == ["qty.units", "s > x", "s.x"]


def test_exact_quantiles_of_far_dates_and_ns_timestamps(tables) -> None:  # noqa: ANN001
    """metastore quantiles (a distributed sort): p=0 and p=1 are pyarrow's min and max, exactly."""
    for table, column, unit in (("arrow", "d32", "D"), ("duck", "ts", "ns")):
        path = str(tables.root / table)
        doc = json.loads(run(tables.store, "quantiles", path, column, "-q", "0", "-q", "1", "-o", "json").stdout)
        got = [np.datetime64(q["value"], unit) for q in doc["quantiles"]]
        assert got == [np.datetime64(n, unit) for n in _extremes(tables, table, column)], (column, doc["quantiles"])
        text = run(tables.store, "quantiles", path, column, "-q", "1").stdout
        assert doc["quantiles"][1]["value"].replace("T", " ") in text
