"""Rendering for the ``metastore`` CLI: rich text for people, JSON for programs.

The commands build plain Python documents (dicts and lists holding ints, floats,
strings, Decimals, datetimes, ...); an :class:`Output` renders them.
:class:`TextOutput` draws rich tables and unicode bar charts (engine/cli/plain.py:
without rich itself when no terminal shows them), :class:`JsonOutput`
prints one JSON document per command, with every value that is not a JSON
number as a string (Decimal, datetime, NaN, ...) and bytes as their length.
"""

from __future__ import annotations

import datetime as dt
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import click

from engine.cli.layout import elide, heading, kv_grid, natural_width, print_records
from engine.cli.plain import Console, Table, Text, box
from engine.display import (  # noqa: F401 - re-exported: the CLI's names
    BAR_WIDTH,
    MAX_CELL,
    SKETCH_STATISTICS,
    Exact,
    bar,
    bucket_width,
    cut,
    dumps,
    fmt_count,
    fmt_datetime,
    fmt_edge,
    fmt_float,
    fmt_share,
    fmt_value,
    partitions_text,
    plural,
    regroup,
    to_jsonable,
)


# ============================================================== outputs
class Output(ABC):
    """What a command prints; one implementation per ``--output``."""

    @abstractmethod
    def status(self, message: str) -> None:
        """A line about what is happening (not part of the result)."""

    @abstractmethod
    def analyze_result(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def overview(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def column_details(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def tables(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def demo(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def history(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def gc(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def rebuild(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def verify(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def quantiles(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def value_partitions(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def retention(self, doc: dict[str, Any]) -> None: ...

    @abstractmethod
    def retention_policy(self, doc: dict[str, Any]) -> None: ...

    def subset(self, doc: dict[str, Any]) -> None:
        """``show --where``: a filtered subset's statistics with their methods (engine/cli/subset.py)."""
        raise NotImplementedError


def _overview_cells(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The overview's text cells of each column of a ``show`` document."""
    records = []
    for c in doc["columns"]:
        nans = f"+{c['nans']:,} NaN" if c.get("nans") else ""
        distinct = "" if c["distinct"] is None else ("" if c["distinct_exact"] else "~") + fmt_count(c["distinct"])
        records.append(
            {
                "column": c["column"],
                "type": c["type"],
                "rows": fmt_count(c["rows"]),
                "nulls": fmt_count(c["nulls"]) + (f" {nans}" if nans else ""),
                "nans": nans,
                "distinct": distinct,
                "min": "" if c.get("unsupported") else fmt_value(c["min"]),
                "max": "" if c.get("unsupported") else fmt_value(c["max"]),
                "mean": "" if c["mean"] is None else fmt_float(c["mean"]),
                "unsupported": c.get("unsupported"),
            }
        )
    return records


class JsonOutput(Output):
    """One JSON document per command on stdout; status lines go to stderr."""

    def status(self, message: str) -> None:
        click.echo(message, err=True)

    def _print(self, doc: object) -> None:
        click.echo(dumps(doc))

    def analyze_result(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def overview(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def column_details(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def tables(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def demo(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def history(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def gc(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def rebuild(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def verify(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def quantiles(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def value_partitions(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def retention(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def retention_policy(self, doc: dict[str, Any]) -> None:
        self._print(doc)

    def subset(self, doc: dict[str, Any]) -> None:
        self._print(doc)


class TextOutput(Output):
    """Rich tables and text histograms."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    # ------------------------------------------------------------ plumbing
    def status(self, message: str) -> None:
        self.console.print(Text(message, style="dim"))

    def _heading(self, text: str) -> None:
        heading(self.console, text)

    def _kv(self, pairs: Sequence[tuple[str, Any]]) -> Table:
        return kv_grid(pairs)

    # ------------------------------------------------------------ analyze
    def analyze_result(self, doc: dict[str, Any]) -> None:
        ray_s = doc.get("ray_start_s") or 0.0
        pairs = [
            ("table", doc["table"]),
            ("job id", doc["job_id"]),
            ("partitions", partitions_text(doc)),
            ("rows", fmt_count(doc["rows"])),
            ("columns", fmt_count(doc["columns"])),
            ("elapsed", f"{doc['elapsed_s']:.1f} s"),
            ("ray start", f"{ray_s:.1f} s" if ray_s else "0.0 s (already running)"),
            ("files", doc["files"]),
        ]
        self._heading(f"Analyzed {doc['table']}")
        self.console.print(self._kv(pairs))
        for w in doc.get("warnings") or []:
            self.console.print(Text(f"warning: {w}", style="yellow"))

    # ------------------------------------------------------------ overview
    def _overview_heading(self, doc: dict[str, Any]) -> None:
        where = f", partition {doc['partition']}" if doc.get("partition") else ""
        title = f"{doc['table']}{where}: {fmt_count(doc['rows'])} rows, {len(doc['columns'])} columns"
        self._heading(title)
        at = doc.get("at")
        at_text = f" · as of transaction {at['txn_id']} ({str(at.get('committed_at') or '')[:19].replace('T', ' ')})" if at else ""
        self.console.print(
            Text(f"job {doc['job_id']} · snapshot {doc['snapshot'][:12]} · {plural(doc['partitions'], 'partition')}{at_text}", style="dim")
        )
        stale = (doc.get("source") or {}).get("stale_by")
        if stale is not None:
            self.console.print(
                Text(
                    "up to date with the table's latest snapshot" if stale == 0 else f"stale by {plural(stale, 'snapshot')} of the table",
                    style="dim" if stale == 0 else "yellow",
                )
            )

    def overview(self, doc: dict[str, Any]) -> None:
        self._overview_heading(doc)
        # One line per column when min and max fit (22 characters: a timestamp) next to
        # everything else; else two: the type under the name, NaN under nulls, max under
        # min, and no rows column when every column has the table's row count (the title says it).
        rows_text = fmt_count(doc["rows"])
        records = _overview_cells(doc)

        def widest(key: str, header: str, *more: str) -> int:

            return max([len(header)] + [len(r[k]) for r in records for k in (key, *more)])

        gap = 3
        wide_values = widest("min", "min", "max")
        # exact values Python has no type for (nanoseconds, years beyond 9999) are never cut: their
        # last digits are what tells min from max; other values are cut with "…" to fit (--column shows them whole)
        whole = max([len(r[k]) for r, c in zip(records, doc["columns"]) for k in ("min", "max") if isinstance(c.get(k), Exact)], default=0)
        name_w = min(24, widest("column", "column"))
        type_w = min(22, widest("type", "type"))
        fixed = [name_w, type_w] + [widest(k, k) for k in ("rows", "nulls", "distinct", "mean")]
        value_w = min(max(32, whole), wide_values, (self.console.width - sum(fixed) - gap * (len(fixed) + 1)) // 2)
        narrow = value_w < min(max(22, whole), wide_values)
        show_rows = not narrow or any(r["rows"] != rows_text for r in records)
        if narrow:
            for r in records:
                r["nulls"] = r["nulls"].split(" ")[0]
            name_w = min(22, widest("column", "column", "type"))
            fixed = [name_w, widest("nulls", "nulls", "nans"), widest("distinct", "distinct"), widest("mean", "mean")]
            if show_rows:
                fixed.append(widest("rows", "rows"))
            value_w = max(10, min(max(40, whole), wide_values, self.console.width - sum(fixed) - gap * len(fixed)))
            if value_w < max(min(16, wide_values), whole):  # too narrow for a table: a block per column
                self._overview_records(records, rows_text)
                self._alerts(doc)
                return

        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        t.add_column("column\ntype" if narrow else "column", overflow="fold", width=name_w)
        if not narrow:
            t.add_column("type", style="cyan", overflow="fold", width=type_w)
        if show_rows:
            t.add_column("rows", justify="right", no_wrap=True)
        t.add_column("nulls", justify="right", no_wrap=True)
        t.add_column("distinct", justify="right", no_wrap=True)
        if narrow:
            t.add_column("min\nmax", no_wrap=True, width=value_w)
        else:
            t.add_column("min", no_wrap=True, width=value_w)
            t.add_column("max", no_wrap=True, width=value_w)
        t.add_column("mean", justify="right", no_wrap=True)
        for r in records:
            name = Text(r["column"], style="bold")
            if narrow:
                name.append("\n" + r["type"], style="cyan")
            cells: list[Text] = [name]
            if not narrow:
                cells.append(Text(r["type"]))
            if show_rows:
                cells.append(Text(r["rows"]))
            cells.append(Text(r["nulls"] + ("\n" + r["nans"] if narrow and r["nans"] else ""), style=""))
            cells.append(Text(r["distinct"]))
            if r["unsupported"]:
                note = Text(cut(f"unsupported: {r['unsupported']}", value_w), style="yellow")
                cells.extend([note] if narrow else [note, Text("")])
            elif narrow:
                cells.append(Text(elide(r["min"], value_w) + "\n" + elide(r["max"], value_w)))
            else:
                cells.extend([Text(elide(r["min"], value_w)), Text(elide(r["max"], value_w))])
            cells.append(Text(r["mean"]))
            t.add_row(*cells)
        self.console.print(t)
        self.console.print(Text("~ approximate (theta sketch); all other counts are exact", style="dim"))
        self._alerts(doc)

    def _alerts(self, doc: dict[str, Any]) -> None:
        from engine.cli.alerts import print_alerts

        print_alerts(self.console, doc)

    def _overview_records(self, records: list[dict[str, Any]], rows_text: str) -> None:
        headers = ["", "type", "rows", "nulls", "distinct", "min", "max", "mean"]
        rows = []
        for r in records:
            last = ["", "", r["mean"]] if not r["unsupported"] else [f"unsupported: {r['unsupported']}", "", ""]
            if not r["unsupported"]:
                last = [r["min"], r["max"], r["mean"]]
            rows.append([r["column"], r["type"], r["rows"], r["nulls"], r["distinct"], *last])
        keep = [i for i, h in enumerate(headers) if i == 0 or any(row[i] for row in rows)]
        if all(row[2] == rows_text for row in rows):
            keep.remove(2)  # every column has the table's row count (the title says it)
        print_records(self.console, [headers[i] for i in keep], [[row[i] for i in keep] for row in rows])
        self.console.print(Text("~ approximate (theta sketch); all other counts are exact", style="dim"))

    # ------------------------------------------------------------ one column
    def column_details(self, doc: dict[str, Any]) -> None:
        for col in doc["columns"]:
            self._column(col, doc.get("partition"))
        self._alerts(doc)

    def _column(self, col: dict[str, Any], partition: str | None, full: bool = True) -> None:
        where = f" · partition {partition}" if partition else ""
        self._heading(f"{col['column']} ({col['type']}){where}")
        if full:
            self.console.print(self._kv(self._statistics_pairs(col["statistics"])))
        else:
            self.console.print(self._brief(col["statistics"]))
        freq = col.get("top_frequencies")
        if freq is not None:
            self._frequencies(freq)
        hist = col.get("histogram")
        if hist is not None:
            self._histogram(hist)

    @staticmethod
    def _brief(stats: dict[str, Any]) -> Text:
        """The key statistics on one line (the demo's summary of a column)."""
        parts = []
        non_null = (stats.get("row_count") or 0) - (stats.get("null_count") or 0)
        parts.append(f"{non_null:,} non-null" + (f" ({stats['nan_count']:,} NaN)" if stats.get("nan_count") else ""))
        if stats.get("distinct_count") is not None:
            parts.append(("" if stats.get("distinct_count_exact") else "~") + f"{stats['distinct_count']:,} distinct")
        for key in ("min", "p50", "p99", "max", "mean"):
            if stats.get(key) is not None:
                parts.append(f"{'median' if key == 'p50' else key} {elide(fmt_value(stats[key]), MAX_CELL)}")
        return Text(" · ".join(parts), style="dim")

    @staticmethod
    def _statistics_pairs(stats: dict[str, Any]) -> list[tuple[str, Any]]:
        pairs: list[tuple[str, Any]] = []
        skip = {"column", "type", "distinct_count_exact", "percentiles_exact", "percentiles_rank_error"}
        for key, value in stats.items():
            if key in skip or value is None:
                continue
            if key in SKETCH_STATISTICS:
                pairs.append((key, f"{value:,} bytes"))
            elif key == "distinct_count":
                exact = stats.get("distinct_count_exact")
                pairs.append((key, f"{value:,} (exact)" if exact else f"~{value:,} (approximate)"))
            elif key == "p01":
                pct = [stats.get(p) for p in ("p01", "p05", "p25", "p50", "p75", "p95", "p99")]
                if stats.get("percentiles_exact"):
                    how = "exact"
                else:
                    err = stats.get("percentiles_rank_error")
                    how = f"approximate, rank error ±{err:.2%}" if err is not None else "approximate"
                pairs.append(("percentiles", f"p01..p99 ({how})"))
                for name, v in zip(("p01", "p05", "p25", "p50", "p75", "p95", "p99"), pct):
                    if v is not None:
                        pairs.append((f"  {name}", Text(elide(fmt_value(v)))))
            elif key in ("p05", "p25", "p50", "p75", "p95", "p99"):
                continue  # shown with p01
            elif key in ("row_count", "null_count", "nan_count", "max_len", "histogram_bins") and isinstance(value, int):
                pairs.append((key, fmt_count(value)))
            elif key == "sum" and isinstance(value, str):
                try:
                    pairs.append((key, fmt_float(float(value)) if "." in value or "e" in value else f"{int(value):,}"))
                except ValueError:
                    pairs.append((key, value))
            else:
                pairs.append((key, Text(elide(fmt_value(value)))))
        return pairs

    def _frequencies(self, freq: dict[str, Any]) -> None:
        self.console.print()
        values = freq["values"]
        title = f"Top {len(values)} value{'s' if len(values) != 1 else ''}" if values else "Top values"
        self.console.print(Text(title, style="bold"), Text(f"({freq['kind']} frequencies)", style="dim"))
        if freq.get("note"):
            self.console.print(Text(freq["note"], style="yellow"))
        if not values:
            if not freq.get("note"):
                self.console.print(Text("no values: the column is all null", style="yellow"))
            return
        largest = max(v["frequency"] for v in values)
        rows = [
            [str(i), elide(fmt_value(v["value"]), MAX_CELL), fmt_count(v["frequency"]), fmt_share(v.get("share"))] for i, v in enumerate(values, 1)
        ]
        bar_w = self._bar_width(rows, ["#", "value", "count", "share"], BAR_WIDTH // 2)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        t.add_column("#", justify="right", style="dim", no_wrap=True)
        t.add_column("value", overflow="ellipsis", no_wrap=True)
        t.add_column("count", justify="right", no_wrap=True)
        t.add_column("share", justify="right", no_wrap=True)
        t.add_column("", style="green", no_wrap=True)
        for row, v in zip(rows, values):
            t.add_row(row[0], Text(row[1]), row[2], row[3], bar(v["frequency"], largest, bar_w))
        self.console.print(t)

    def _bar_width(self, rows: list[list[str]], headers: list[str], most: int) -> int:
        """Cells left for the bars once the other columns (and 3-cell gaps) have their width."""
        used = sum(max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)) + 3 * len(headers)
        return max(8, min(most, self.console.width - used))

    def _histogram(self, hist: dict[str, Any]) -> None:
        self.console.print()
        buckets = hist["buckets"]
        shown = len(buckets)
        head = f"Histogram: {plural(hist['bins'], 'bin')}" + (f" shown as {shown} buckets" if shown != hist["bins"] else "")
        self.console.print(Text(head, style="bold"), Text(f"({hist['counted']:,} values; nulls and NaN are in no bin)", style="dim"))
        if not buckets:
            self.console.print(Text("no histogram: the column has no (finite) values", style="yellow"))
            return
        largest = max(b["count"] for b in buckets)
        total = hist["counted"]
        rows = []
        for b in buckets:
            w = bucket_width(b)
            share = fmt_share(b["count"] / total) if total else ""
            rows.append([fmt_edge(b["lower"], w), fmt_edge(b["upper"], w), fmt_count(b["count"]), share])
        headers = ["lower", "upper", "count", "share"]
        # narrow terminals: first the bars go, then the upper edges (each is the next lower edge)
        with_bars = natural_width(headers, rows) + 3 + 8 <= self.console.width
        if not with_bars and natural_width(headers, rows) > self.console.width:
            headers, rows = ["lower", "count", "share"], [[r[0], r[2], r[3]] for r in rows]
        bar_w = self._bar_width(rows, headers, BAR_WIDTH)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name in headers:
            t.add_column(name, justify="right", no_wrap=True)
        if with_bars:
            t.add_column("", style="green", no_wrap=True)
        for row, b in zip(rows, buckets):
            t.add_row(*row, *([bar(b["count"], largest, bar_w)] if with_bars else []))
        self.console.print(t)
        if "upper" not in headers:
            last = fmt_edge(buckets[-1]["upper"], bucket_width(buckets[-1]))
            self.console.print(Text(f"each bin ends where the next begins; the last ends at {last}", style="dim"))
        self.console.print(Text(f"upper edges are {hist['upper_edges']}", style="dim"))

    # ------------------------------------------------------------ tables
    def tables(self, doc: dict[str, Any]) -> None:
        rows = doc["tables"]
        if not rows:
            self.console.print(Text(f"no tables with published statistics in {doc['store']}"))  # a path is not markup
            return
        headers = ["table", "job id", "snapshot", "rows", "parts", "created (UTC)"]
        cells = [
            [r["table"], "damaged", "", "", "", ""]
            if r.get("error")
            else [
                r["table"],
                r["job_id"],
                (r["snapshot"] or "")[:12],
                fmt_count(r["rows"]),
                fmt_count(r["partitions"]),
                (r.get("created_at") or "")[:16].replace("T", " "),
            ]
            for r in rows
        ]
        if natural_width(headers, cells) > self.console.width:
            print_records(self.console, headers, cells, title=f"Tables in {doc['store']}")
            for r in rows:
                if r.get("error"):
                    self.console.print(Text(f"{r['table']}: {r['error']}", style="red"), soft_wrap=True)
            self.console.print(Text("snapshot ids cut to 12 characters; --output json has them in full", style="dim"))
            return
        title = Text(f"Tables in {doc['store']}", style="table.title")  # rich's title style; a path is not markup
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title=title, title_justify="left")
        t.add_column("table", style="bold", overflow="fold", min_width=min(30, max(len(r["table"]) for r in rows)))
        t.add_column("job id", no_wrap=True)
        t.add_column("snapshot", no_wrap=True)
        t.add_column("rows", justify="right", no_wrap=True, min_width=max(len(fmt_count(r.get("rows") or 0)) for r in rows))
        t.add_column("parts", justify="right", no_wrap=True)
        t.add_column("created (UTC)", no_wrap=True, min_width=16)
        damaged = []
        for r in rows:
            if r.get("error"):
                damaged.append(r)
                t.add_row(Text(r["table"]), Text("damaged", style="bold red"), "", "", "", "")
                continue
            created = r.get("created_at") or ""
            t.add_row(
                Text(r["table"]),
                r["job_id"],
                (r["snapshot"] or "")[:12],
                fmt_count(r["rows"]),
                fmt_count(r["partitions"]),
                created[:16].replace("T", " "),
            )
        self.console.print(t)
        for r in damaged:
            self.console.print(Text(f"{r['table']}: {r['error']}", style="red"), soft_wrap=True)
        self.console.print(Text("snapshot ids cut to 12 characters; --output json has them in full", style="dim"))

    # ------------------------------------------------------------ demo
    def demo(self, doc: dict[str, Any]) -> None:
        self.analyze_result(doc["analyze"])
        self.overview(doc["overview"])
        for col in doc["columns"]:
            self._column(col, None, full=False)
        if doc.get("next"):
            self.console.print()
            self.console.print(Text("Explore further:", style="bold"))
            for line in doc["next"]:
                self.console.print(Text(f"  {line}"))

    # ------------------------------------------------------------ catalog (engine/cli/catalog_text.py: loaded by those commands)
    def history(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_history

        print_history(self.console, doc)

    def gc(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_gc

        print_gc(self.console, doc)

    def verify(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_verify

        print_verify(self.console, doc)

    def retention(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_retention

        print_retention(self.console, doc)

    def retention_policy(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_retention_policy

        print_retention_policy(self.console, doc)

    def subset(self, doc: dict[str, Any]) -> None:
        from engine.cli.subset import print_subset

        print_subset(self.console.rich, doc)

    def rebuild(self, doc: dict[str, Any]) -> None:
        from engine.cli.catalog_text import print_rebuild

        print_rebuild(self.console, doc)

    # ------------------------------------------------------------ quantiles
    @staticmethod
    def _full_value(value: object) -> str:
        """A value in full (quantiles are exact: no rounding)."""
        if isinstance(value, float):
            return fmt_float(value) if not math.isfinite(value) else repr(value)
        if isinstance(value, dt.datetime):
            return fmt_datetime(value, seconds_only=False)
        return fmt_value(value)

    def quantiles(self, doc: dict[str, Any]) -> None:
        exact = doc["exact"]
        how = "exact, distributed sort" if exact else "approximate, from sketches"
        self._heading(f"Quantiles of {doc['column']} in {doc['table']} ({how})")
        pairs = [
            ("type", doc["type"]),
            ("values ranked", fmt_count(doc["count"]) + ("" if exact else " (non-null, non-NaN)")),
            ("nulls", fmt_count(doc["null_count"])),
        ]
        if doc.get("nan_count"):
            pairs.append(("NaN", fmt_count(doc["nan_count"]) + (" (ranked after every number)" if exact else " (not in sketches)")))
        if doc.get("partition"):
            pairs.append(("partition", doc["partition"]))
        if doc.get("elapsed_s") is not None:
            pairs.append(("elapsed", f"{doc['elapsed_s']:.2f} s"))
        if doc.get("ray_start_s"):
            pairs.append(("ray start", f"{doc['ray_start_s']:.1f} s (not included above)"))
        self.console.print(self._kv(pairs))
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        t.add_column("p", justify="right", no_wrap=True)
        t.add_column("value", overflow="fold")
        if exact:
            t.add_column("rank", justify="right", no_wrap=True)
        else:
            t.add_column("sketch", no_wrap=True)
            t.add_column("rank error", justify="right", no_wrap=True)
        for q in doc["quantiles"]:
            cells = [str(q["p"]), self._full_value(q["value"])]
            if exact:
                cells.append(fmt_count(q["rank"]))
            else:
                cells += [q["method"], f"±{q['rank_error']:.3%}"]
            t.add_row(*cells)
        if doc["quantiles"]:
            self.console.print(t)
        for r in doc.get("rank_of", []):
            self.console.print(
                Text(
                    f"rank of {self._full_value(r['value'])}: {fmt_count(r['below'])} values below it, {fmt_count(r['at_most'])} at or below (it occurs {fmt_count(r['at_most'] - r['below'])} times)"
                ),
            )
        for r in doc.get("value_at", []):
            self.console.print(Text(f"value at rank {fmt_count(r['rank'])}: {self._full_value(r['value'])}"))
        self.console.print(
            Text(
                "ranks are 0-based over non-null values; quantile p is the value at rank max(ceil(n*p), 1) - 1 (DuckDB's quantile_disc)"
                if exact
                else "rank error: bound on |true rank / n - p| (KLL: 99% confidence; t-digest: empirical)",
                style="dim",
            ),
        )

    # ------------------------------------------------------------ value partitions
    def value_partitions(self, doc: dict[str, Any]) -> None:
        self._heading(f"{doc['column']} = {cut(fmt_value(doc['value']))} in {doc['table']}")
        frequency = doc["frequency"]
        pairs = [
            ("text form", Text(doc["text"])),
            ("frequency", fmt_count(frequency) if frequency is not None else "0 or 1"),
            (
                "partitions",
                f"{fmt_count(len(doc['partitions']))} of {fmt_count(doc['table_partitions'])}"
                if doc["status"] != "at_most_once"
                else f"not recorded (at most 1 of {fmt_count(doc['table_partitions'])})",
            ),
            ("frequencies", doc["kind"]),
        ]
        if doc.get("at"):
            pairs.append(("state", f"transaction {doc['at'].get('txn_id')}"))
        self.console.print(self._kv(pairs))
        self.console.print(Text(doc["note"], style="yellow" if doc["status"] != "found" else ""))
        rows = doc["partitions"]
        if rows:
            largest = max(r["count"] for r in rows)
            cells = [[r["partition"], fmt_count(r["count"]), fmt_share(r["count"] / frequency) if frequency else ""] for r in rows]
            bar_w = self._bar_width(cells, ["partition", "count", "share"], BAR_WIDTH // 2)
            t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
            t.add_column("partition", overflow="fold")
            t.add_column("count", justify="right", no_wrap=True)
            t.add_column("share", justify="right", no_wrap=True)
            t.add_column("", style="green", no_wrap=True)
            for c, r in zip(cells, rows):
                t.add_row(Text(c[0]), c[1], c[2], bar(r["count"], largest, bar_w))
            self.console.print(t)
        if doc.get("candidates") is not None:
            shown = ", ".join(doc["candidates"][:20]) + (f", ... ({len(doc['candidates'])} in all)" if len(doc["candidates"]) > 20 else "")
            self.console.print(Text(f"candidate partitions (min <= value <= max): {shown or '(none: the value does not occur)'}"))


def make_output(kind: str, console: Console | None = None) -> Output:
    return JsonOutput() if kind == "json" else TextOutput(console)
