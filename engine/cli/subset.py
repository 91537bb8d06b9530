"""``metastore show TABLE --where EXPR [--exact]``: the statistics of a filtered subset, each
with its method (stored, estimated with bounds and assumption, computed; docs/SUBSETS.md).

``subset_doc`` builds the document both outputs print (``-o json`` prints it as it is);
``print_subset`` draws it for people: estimated values marked ``~``, their bounds listed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine import values as value_forms
from engine.columns import display_name, display_path
from engine.display import fmt_count, fmt_value, regroup
from engine.exceptions import MetastoreError, SubsetStatisticError
from engine.pyvalues import python_value, python_values
from engine.subset import Answer, Method, methods_of

if TYPE_CHECKING:
    import pyarrow as pa

    from engine.lookup import TableStatistics

#: the statistics a subset shows (the overview's)
SHOWN = ("row_count", "null_count", "nan_count", "distinct_count", "min", "max", "sum", "mean")
_VALUE = ("min", "max")


def _decode(value: object, t: pa.DataType) -> Any:
    if value is None or not isinstance(value, str):
        return value
    try:
        return python_value(value_forms.decode_scalar(value, t))
    except MetastoreError:
        return value


def _entry(value: object, answer: Answer, t: pa.DataType, typed: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": _decode(value, t) if typed else value, "method": answer.method.value}
    if answer.method is Method.ESTIMATED:
        entry["low"] = _decode(answer.low, t) if typed else answer.low
        entry["high"] = _decode(answer.high, t) if typed else answer.high
        entry["assumption"] = answer.assumption
    return entry


def subset_doc(ts: TableStatistics, where: str, exact: bool, columns: list[str] | None, top: int = 10, bins_shown: int = 20) -> dict[str, Any]:
    """The subset's statistics of ``columns`` (all if None), with top values and histograms
    when columns are named."""
    t = ts.statistics(columns, where=where, exact=exact)  # all: a statistic the subset cannot give is left out
    m = methods_of(t)
    assert m is not None
    rc = m.of("*", "row_count")
    row_count = t.column("row_count")[0].as_py() if t.num_rows else None
    doc: dict[str, Any] = {
        "table": ts.table,
        "job_id": ts.job_id,
        "snapshot": ts.snapshot,
        "where": m.where,
        "exact": exact,
        "partitions": m.partitions,
        "row_count": _entry(row_count, rc, None, False),
        "columns": [],
    }
    for row in t.to_pylist():
        name = row["column"]
        ct = ts.column_type(name)
        stats = {}
        for s in SHOWN:
            a = m.of(name, s)
            if a.method is Method.UNAVAILABLE or (row[s] is None and a.method in (Method.STORED, Method.COMPUTED) and s != "row_count"):
                continue
            stats[s] = _entry(row[s], a, ct, s in _VALUE)
        col: dict[str, Any] = {"column": display_name(name), "path": display_path(name), "type": str(ct), "statistics": stats}
        if columns is not None:
            col["top_frequencies"] = _top_doc(ts, name, top, where, exact)
            col["histogram"] = _histogram_doc(ts, name, where, exact, bins_shown)
        doc["columns"].append(col)
    reasons = {(a.statistic, a.reason) for a in m.answers.values() if a.method is Method.UNAVAILABLE and a.reason}
    doc["unavailable"] = [{"statistic": s, "reason": r} for s, r in sorted(reasons)]
    return doc


def _top_doc(ts: TableStatistics, column: str, top: int, where: str, exact: bool) -> dict[str, Any] | None:
    if top <= 0 or column not in ts.frequency_index(None):
        return None
    try:
        t = ts.top_frequencies(column, top, where=where, exact=exact)
    except SubsetStatisticError as exc:
        return {"values": [], "note": str(exc)}
    m = methods_of(t)
    assert m is not None
    ct = ts.column_type(column)
    values = []
    for v, f in zip(t.column("value").to_pylist(), t.column("frequency").to_pylist()):
        text = v if isinstance(v, str) else str(v)
        e = _entry(f, m.of(column, text), None, False)
        e = {"value": _decode(text, ct), "frequency": e.pop("value"), **e}
        values.append(e)
    return {"values": values, "note": None}


def _histogram_doc(ts: TableStatistics, column: str, where: str, exact: bool, bins_shown: int) -> dict[str, Any] | None:
    try:
        if ts.histogram_spec(column) is None:
            return None
    except MetastoreError:
        return None
    t = ts.histogram(column, where=where, exact=exact)
    m = methods_of(t)
    assert m is not None
    bins = [
        {"lower": lo, "upper": hi, "count": n}
        for lo, hi, n in zip(python_values(t.column("lower")), python_values(t.column("upper")), t.column("count").to_pylist())
    ]
    answers = [m.of(column, f"bin:{b}") for b in t.column("bin").to_pylist()]
    estimated = [a for a in answers if a.method is Method.ESTIMATED]
    return {
        "bins": len(bins),
        "counted": sum(b["count"] for b in bins),
        "low": sum(a.low if a.method is Method.ESTIMATED else b["count"] for a, b in zip(answers, bins)),
        "high": sum(a.high if a.method is Method.ESTIMATED else b["count"] for a, b in zip(answers, bins)),
        "estimated_bins": len(estimated),
        "method": "computed" if exact else ("estimated" if estimated else "stored"),
        "assumption": estimated[0].assumption if estimated else None,
        "buckets": regroup(bins, bins_shown),
    }


# ------------------------------------------------------------------ text
def _cell(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return ""
    v = entry["value"]
    text = fmt_count(v) if isinstance(v, int) and not isinstance(v, bool) else fmt_value(v)
    return ("~" + text) if entry["method"] == "estimated" else text


def print_subset(console: Console, doc: dict[str, Any]) -> None:
    console.print(Text(f"{doc['table']} where {doc['where']}", style="bold"))
    p = doc["partitions"]
    rc = doc["row_count"]
    how = rc["method"]
    if how == "estimated":
        how += f" {fmt_count(rc['low'])}..{fmt_count(rc['high'])}; {rc['assumption']}"
    console.print(
        Text(f"rows {_cell(rc)} ({how}) · partitions: {p['all']} whole, {p['some']} in part, {p['none']} without a matching row", style="dim")
    )
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    heads = ["column", "rows", "nulls", "nans", "distinct", "min", "max", "mean"]
    for h in heads:
        t.add_column(h, justify="left" if h in ("column", "min", "max") else "right", overflow="fold")
    bounds = []
    for col in doc["columns"]:
        s = col["statistics"]
        t.add_row(col["column"], *[_cell(s.get(k)) for k in ("row_count", "null_count", "nan_count", "distinct_count", "min", "max", "mean")])
        for name, e in s.items():
            if e["method"] == "estimated" and name != "row_count":
                bounds.append([col["column"], name, _cell(e), fmt_value(e.get("low")), fmt_value(e.get("high")), e.get("assumption") or ""])
    console.print(t)
    console.print(Text("~ estimated; every other value is exact (" + ("computed" if doc["exact"] else "stored") + ")", style="dim"))
    for u in doc.get("unavailable", ()):
        console.print(Text(f"{u['statistic']} not computed: {u['reason']}", style="yellow"))
    if bounds:
        b = Table(title="Bounds of the estimates", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for h in ("column", "statistic", "estimate", "low", "high", "assumption"):
            b.add_column(h, overflow="fold")
        for row in bounds:
            b.add_row(*row)
        console.print(b)
    for col in doc["columns"]:
        top = col.get("top_frequencies")
        if top is not None:
            console.print(Text(f"Top values of {col['column']}", style="bold"))
            if top.get("note"):
                console.print(Text(top["note"], style="yellow"))
            if top["values"]:
                tt = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
                for h in ("value", "count", "method", "low", "high"):
                    tt.add_column(h, overflow="fold")
                for v in top["values"]:
                    tt.add_row(fmt_value(v["value"]), fmt_count(v["frequency"]), v["method"], fmt_count(v.get("low")), fmt_count(v.get("high")))
                console.print(tt)
        hist = col.get("histogram")
        if hist is not None:
            line = f"Histogram of {col['column']}: {fmt_count(hist['counted'])} values in {hist['bins']} bins ({hist['method']}"
            if hist["method"] == "estimated":
                line += f", {fmt_count(hist['low'])}..{fmt_count(hist['high'])}; {hist['assumption']}"
            console.print(Text(line + ")", style="bold"))
            ht = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
            for h in ("lower", "upper", "count"):
                ht.add_column(h, justify="right")
            for bucket in hist["buckets"]:
                ht.add_row(fmt_value(bucket.get("lower")), fmt_value(bucket.get("upper")), fmt_count(bucket.get("count")))
            console.print(ht)
