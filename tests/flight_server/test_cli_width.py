"""Text output at a terminal's width: every command rendered at 60, 80 and 200 columns.

Each command's JSON output is the oracle: the values it holds must be found in the
text output at every width (whole, where a table would have cut them: wide rows become
one block per row), and no line may be wider than the terminal.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import CliRunner
from flight_testkit import GOOD_TOKEN

from engine.cli.console import metastore
from engine.cli.output import fmt_count, fmt_value

WIDTHS = [60, 80, 200]


def _run(width: int, *args: str) -> str:
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(metastore, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _text(width: int, *args: str) -> str:
    out = _run(width, *args)
    for line in out.splitlines():
        assert len(line.rstrip()) <= width, (width, args, line)
    return out


def _flat(text: str) -> str:
    """The text with folded cells joined: runs of spaces and line breaks as one space."""
    return re.sub(r"\s+", " ", text)


def _shown(v: Any) -> str:
    """A JSON value as the text view shows it (timestamps arrive as ISO text)."""
    import datetime as dt

    if isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", v):
        return fmt_value(dt.datetime.fromisoformat(v))
    return fmt_value(v)


def _find(text: str, needles: list[str], what: Any) -> None:
    flat = _flat(text)
    missing = [n for n in needles if n and n not in text and n not in flat]
    assert not missing, (what, missing, text)


@pytest.fixture(scope="module")
def store(flight_data) -> str:  # noqa: ANN001
    return flight_data.store


@pytest.mark.parametrize("width", WIDTHS)
def test_show_overview(store: str, width: int) -> None:
    doc = json.loads(_run(width, "--store", store, "--output", "json", "show", "sales"))
    text = _text(width, "--store", store, "show", "sales")
    needles = []
    for c in doc["columns"]:
        needles += [c["column"], fmt_count(c["nulls"]), fmt_count(c["distinct"])]
        for key in ("min", "max"):
            v = _shown(c[key])
            needles.append(v if len(v) <= 16 else v[:8])  # long free text is cut, its start shown
    _find(text, needles, ("show", width))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("column", ["price", "city", "event_time"])
def test_show_column(store: str, width: int, column: str) -> None:
    doc = json.loads(_run(width, "--store", store, "--output", "json", "show", "sales", "--column", column))
    text = _text(width, "--store", store, "show", "sales", "--column", column)
    col = doc["columns"][0]
    s = col["statistics"]
    needles = [fmt_count(s["row_count"]), fmt_count(s["null_count"]), _shown(s["min"]), _shown(s["max"]), _shown(s["p50"])]
    if col.get("top_frequencies"):
        needles += [fmt_value(v["value"])[:20] for v in col["top_frequencies"]["values"][:5]]
    if col.get("histogram"):
        needles += [fmt_count(b["count"]) for b in col["histogram"]["buckets"][:5]]
    _find(text, needles, (column, width))


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_history_quantiles(store: str, width: int) -> None:
    doc = json.loads(_run(width, "--store", store, "--output", "json", "tables"))
    _find(
        _text(width, "--store", store, "tables"),
        [n for t in doc["tables"] for n in (t["table"], t["job_id"], fmt_count(t["rows"]))],
        ("tables", width),
    )
    doc = json.loads(_run(width, "--store", store, "--output", "json", "history", "sales"))
    needles = [
        n
        for t in doc["transactions"]
        for n in (t["job_id"], t["uuid"][:8], f"+{t['partitions_new']} ~{t['partitions_changed']} -{t['partitions_gone']}", f"+{t['rows_added']:,}")
    ]
    _find(_text(width, "--store", store, "history", "sales"), needles, ("history", width))
    doc = json.loads(_run(width, "--store", store, "--output", "json", "quantiles", "sales", "price", "--approximate"))
    needles = [TextOutputValue(q["value"]) for q in doc["quantiles"]]
    _find(_text(width, "--store", store, "quantiles", "sales", "price", "--approximate"), needles, ("quantiles", width))


def TextOutputValue(v: Any) -> str:  # noqa: N802 - the quantiles view shows values in full
    from engine.cli.output import TextOutput

    return TextOutput._full_value(v)


@pytest.mark.parametrize("width", WIDTHS)
def test_query_statistics_top_and_tables(flight_server, width: int) -> None:  # noqa: ANN001
    server = ["--server", flight_server.location, "--token", GOOD_TOKEN]
    doc = json.loads(_run(width, "query", "statistics", "sales", "-c", "price,city", *server, "--output", "json"))
    text = _text(width, "query", "statistics", "sales", "-c", "price,city", *server)
    needles = []
    for row in doc["rows"]:
        for name in doc["columns"]:
            v = row[name]
            if v is None or (isinstance(v, str) and len(v) > 40):
                continue
            needles.append(name)
            needles.append(f"{len(v)} bytes" if isinstance(v, bytes) else _shown(v))
    _find(text, needles, ("query statistics", width))
    doc = json.loads(_run(width, "query", "top", "sales", "-c", "city", "-k", "5", *server, "--output", "json"))
    _find(
        _text(width, "query", "top", "sales", "-c", "city", "-k", "5", *server),
        [fmt_value(r["value"]) for r in doc["rows"]] + [str(r["frequency"]) for r in doc["rows"]],
        ("top", width),
    )
    doc = json.loads(_run(width, "query", "tables", *server, "--output", "json"))
    _find(_text(width, "query", "tables", *server), [str(r[doc["columns"][0]]) for r in doc["rows"]], ("query tables", width))
