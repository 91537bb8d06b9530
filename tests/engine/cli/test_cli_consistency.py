"""One consistent CLI (issue #31 part 4): one meaning per short option, one duration syntax,
newest-first history, quantiles of a stored table's data, long values elided with their length,
paths never split inside a name, struct columns naming their fields, a useful TableStatistics repr.

The table is written by polars (a struct column, a 2,000-character value, long file names in
Hive partitions) and analyzed twice through the CLI; each test fails on the old behaviour.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import duckdb
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore
from engine.cli.options import Duration

LONG = "a" * 2_000
FILE = "data-file-with-a-rather-long-name-{p:04d}-0123456789abcdef.parquet"  # 56 characters


def run(*args: str, width: int = 80):
    return CliRunner(env={"COLUMNS": str(width)}).invoke(metastore, list(args))


def ok(*args: str, width: int = 80):
    result = run(*args, width=width)
    assert result.exit_code == 0, result.output
    return result


def _write_partition(root: Path, part: int) -> None:
    import polars as pl

    n = 40
    d = root / f"part={part:02d}"
    d.mkdir(parents=True)
    pl.DataFrame(
        {
            "id": list(range(part * n, part * n + n)),
            "price": [float((i * 7 + part) % 23) for i in range(n)],
            "note": [LONG if (i, part) == (3, 1) else f"n{i}" for i in range(n)],
            "payload": [{"a": i, "b": f"x{i}"} for i in range(n)],
        }
    ).write_parquet(d / FILE.format(p=part), statistics=False, compression="zstd")


@pytest.fixture(scope="module")
def events(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory):
    """(table path, store, first job id, second job id): analyzed with 2 partitions, then with 3."""
    root = tmp_path_factory.mktemp("cliux")
    table, store = root / "events", str(root / "store")
    for part in (0, 1):
        _write_partition(table, part)
    first = json.loads(ok("--store", store, "-o", "json", "analyze", str(table)).stdout)["job_id"]
    _write_partition(table, 2)
    second = json.loads(ok("--store", store, "-o", "json", "analyze", str(table)).stdout)["job_id"]
    return str(table), store, first, second


def _one_error(result) -> str:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.output
    return lines[-1]


# ---------------------------------------------------------------- one meaning per short option
def _short_options() -> dict[str, dict[str, str]]:
    """short option -> {command: what it sets (the parameter's name)}, over every command of the group."""
    seen: dict[str, dict[str, str]] = {}
    for name, command in metastore.commands.items():
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            shorts = [o for o in param.opts + param.secondary_opts if re.fullmatch(r"-[A-Za-z]", o)]
            for s in shorts:
                seen.setdefault(s, {})[name] = str(param.name)
    return seen


def test_every_short_option_means_one_thing_in_every_command() -> None:
    # before: -p was --partition in show/preview/query and --probability in quantiles
    for short, by_command in _short_options().items():
        assert len(set(by_command.values())) == 1, (short, by_command)
    assert _short_options()["-p"]["quantiles"] == "partition"
    assert _short_options()["-q"] == {"quantiles": "probabilities"}
    assert _short_options()["-w"].keys() >= {"show", "files", "query"}


def test_quantiles_help_says_what_replaced_dash_p() -> None:
    text = ok("quantiles", "--help").stdout
    assert "-q, --quantile, --probability P" in text and "-p, --partition KEY" in text
    assert "-p is --partition" in " ".join(text.split())


def test_dash_p_in_exact_quantiles_points_to_dash_q(tmp_path: Path) -> None:
    result = run("--store", str(tmp_path), "quantiles", str(tmp_path), "price", "-p", "0.5")
    assert result.exit_code == 2 and "probabilities are -q/--quantile" in result.stderr


def test_approximate_quantiles_of_a_partition_with_dash_p(events) -> None:
    _, store, *_ = events
    by_p = json.loads(ok("--store", store, "-o", "json", "quantiles", "events", "price", "-a", "-p", "part=01", "-q", "0.5").stdout)
    by_long = json.loads(
        ok("--store", store, "-o", "json", "quantiles", "events", "price", "-a", "--partition", "part=01", "--probability", "0.5").stdout
    )
    table = json.loads(ok("--store", store, "-o", "json", "quantiles", "events", "price", "-a", "-q", "0.5").stdout)
    assert by_p["partition"] == "part=01" and by_p["quantiles"] == by_long["quantiles"]
    assert by_p["count"] == 40 and table["count"] == 120


# ---------------------------------------------------------------- one duration syntax
@pytest.mark.parametrize(
    "text,seconds", [("30s", 30), ("15m", 900), ("1h", 3600), ("7d", 604800), ("2w", 1209600), ("3600", 3600), ("0", 0), ("1.5", 1.5)]
)
def test_duration_forms(text: str, seconds: float) -> None:
    assert Duration().convert(text, None, None) == seconds


@pytest.mark.parametrize(
    "command,option",
    [("gc", "--grace-period"), ("expire", "--grace-period"), ("expire", "--older-than"), ("config", "--retain-for"),
     ("config", "--gc-grace"), ("serve", "--poll-interval"), ("query", "--timeout")],
)  # fmt: skip
def test_every_duration_option_takes_units_and_seconds(command: str, option: str) -> None:
    # before: gc --grace-period and serve --poll-interval took seconds only, expire/config units only
    (param,) = [p for p in metastore.commands[command].params if option in p.opts]
    assert param.type.convert("1h", param, None) == 3600 and param.type.convert("3600", param, None) == 3600
    with pytest.raises(click.BadParameter, match="not a duration"):
        param.type.convert("1x", param, None)


def test_gc_grace_period_in_units_and_in_seconds(events) -> None:
    _, store, *_ = events
    for value in ("1h", "3600"):
        doc = json.loads(ok("--store", store, "-o", "json", "gc", "events", "--dry-run", "--grace-period", value).stdout)
        assert doc["grace_period_s"] == 3600
    bad = run("--store", store, "gc", "events", "--grace-period", "soon")
    assert bad.exit_code == 2 and "not a duration" in bad.stderr


def test_expire_and_config_take_plain_seconds(events, tmp_path: Path) -> None:
    _, store, *_ = events
    copy = str(tmp_path / "store")
    shutil.copytree(store, copy)
    doc = json.loads(ok("--store", copy, "-o", "json", "config", "events", "--retain-for", "86400", "--gc-grace", "60").stdout)
    assert (doc["retain_for"], doc["gc_grace"], doc["retain_for_s"]) == ("1d", "1m", 86400)
    doc = json.loads(ok("--store", copy, "-o", "json", "expire", "events", "--older-than", "604800").stdout)
    assert doc["kept_from_txn"] == 1  # nothing a week old


# ---------------------------------------------------------------- history newest first
def test_history_lists_newest_first(events) -> None:
    _, store, first, second = events
    doc = json.loads(ok("--store", store, "-o", "json", "history", "events").stdout)
    assert [t["job_id"] for t in doc["transactions"]] == [second, first]
    assert [t["current"] for t in doc["transactions"]] == [True, False]
    text = ok("--store", store, "history", "events").stdout
    assert "newest first" in text and text.index(second) < text.index(first)


# ---------------------------------------------------------------- quantiles of a stored table
def test_exact_quantiles_of_a_table_name_read_its_recorded_data(events) -> None:
    path, store, *_ = events
    doc = json.loads(ok("--store", store, "-o", "json", "quantiles", "events", "price", "-q", "0.1,0.5,0.9").stdout)
    want = duckdb.connect().sql(f"select quantile_disc(price, [0.1, 0.5, 0.9]) from read_parquet('{path}/*/*.parquet')").fetchall()[0][0]
    assert doc["exact"] and doc["table"] == "events" and doc["count"] == 120
    assert [q["value"] for q in doc["quantiles"]] == want


def test_quantiles_of_neither_a_location_nor_a_stored_table_says_what_it_takes(events) -> None:
    _, store, *_ = events
    line = _one_error(run("--store", store, "quantiles", "nosuch", "price"))
    assert "neither a table's location" in line and f"nor a table with statistics in store {store}" in line
    assert "tables in the store: events" in line  # not "table not found"


# ---------------------------------------------------------------- long values, struct fields
def test_a_long_value_is_elided_with_its_length(events) -> None:
    _, store, *_ = events
    text = ok("--store", store, "show", "events", "--column", "note").stdout
    assert "… (2,000 chars)" in text and LONG not in text
    assert len(text.splitlines()) < 40  # the value took 30 lines before
    (min_line,) = [line for line in text.splitlines() if line.startswith("min ")]
    assert len(min_line.rstrip()) <= 80 and re.search(r"\ba{20,}… \(2,000 chars\)", min_line)
    doc = json.loads(ok("--store", store, "-o", "json", "show", "events", "--column", "note").stdout)
    assert doc["columns"][0]["statistics"]["min"] == LONG  # JSON keeps it whole


def test_a_struct_column_names_its_fields(events, tmp_path: Path) -> None:
    _, store, *_ = events
    line = _one_error(run("--store", store, "show", "events", "--column", "payload"))
    assert "'payload' is a struct" in line and "'payload.a'" in line and "'payload.b'" in line
    assert "payload > a" in ok("--store", store, "show", "events", "--column", "payload.a").stdout  # a leaf as people read it
    line = _one_error(run("--store", store, "preview", "events", "--html", str(tmp_path / "p.html"), "-c", "payload"))
    assert "'payload' is a struct" in line and "'payload.a', 'payload.b'" in line


# ---------------------------------------------------------------- paths never split inside a name
def _names_whole(text: str, paths: list[str]) -> None:
    names = {n for p in paths for n in p.split("/") if n}
    words = set(re.findall(r"[^\s/]+", text))
    assert names <= words, names - words


@pytest.mark.parametrize("width", [80, 120, 200])
def test_files_pruned_keeps_every_name_whole(events, width: int) -> None:
    _, store, *_ = events
    where = "id >= 40"  # part=00 pruned
    doc = json.loads(ok("--store", store, "-o", "json", "files", "events", "--where", where).stdout)
    paths = [f["path"] for f in doc["files"]] + [f["path"] for f in doc["pruned"]]
    assert len(doc["files"]) == 2 and len(doc["pruned"]) == 1
    text = ok("--store", store, "files", "events", "--where", where, "--pruned", width=width).stdout
    _names_whole(text, paths)
    for line in text.splitlines():
        assert len(line.rstrip()) <= width, line
    assert "partition: " in text or "part=00" in text


def test_wrap_path_breaks_only_after_a_slash() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from engine.cli.layout import wrap_path

    @given(st.lists(st.text("ab=-.", min_size=1, max_size=12), min_size=1, max_size=8), st.integers(5, 40))
    def law(names: list[str], width: int) -> None:
        path = "/".join(names)
        lines = wrap_path(path, width).split("\n")
        assert "".join(lines) == path
        for line in lines[:-1]:
            assert line.endswith("/")
        for line in lines:
            assert len(line) <= width or "/" not in line.rstrip("/")  # only a single name overflows

    law()


# ---------------------------------------------------------------- the Python repr
def test_table_statistics_repr_is_cheap_and_says_what_it_is(events, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine import lookup
    from engine.lookup import files as lookup_files

    _, store, first, second = events
    ts = lookup.open_statistics(store, "events")
    monkeypatch.setattr(lookup_files, "open_file", lambda *a, **k: pytest.fail("repr read a statistics file"))
    text = repr(ts)
    assert text.startswith("<TableStatistics 'events': 120 rows, ") and "3 partitions" in text
    assert f"job {second}" in text and f"snapshot {ts.snapshot}" in text and store in text
    assert f"{len(ts.schema.names)} columns" in text
    monkeypatch.undo()
    then = lookup.open_statistics(store, "events", at_transaction=1)
    assert "80 rows" in repr(then) and "2 partitions" in repr(then) and "at transaction 1" in repr(then) and first in repr(then)
    html = ts._repr_html_()  # the notebook card of engine/ui
    assert "events" in html and "<" in html


def test_subset_repr_names_the_split_and_where_the_methods_are(events) -> None:
    from engine import lookup
    from engine.subset import Method, methods_of

    _, store, *_ = events
    ts = lookup.open_statistics(store, "events")
    sub = ts.subset("id >= 40 and id < 60")  # part=01 half, part=00 and part=02 none
    assert repr(sub) == (
        "<Subset of 'events' where id >= 40 AND id < 60: partitions 0 whole, 1 in part, 2 without a matching row; "
        "stored or estimated (methods_of(answer))>"
    )
    methods = methods_of(ts.statistics(["price"], where="id >= 40 and id < 60"))
    assert methods is not None and methods.method("price", "min") is Method.ESTIMATED  # the estimate is marked
