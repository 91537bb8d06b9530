"""Layout primitives of the text views: how wide a table would be, eliding a long value,
breaking a path only after a ``/``, a table of data files, one block per row when a table
is too wide, a key/value grid and a section heading (engine/cli/plain.py draws them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.cli.plain import Console, Rule, Table, Text, box
from engine.display import cut


def natural_width(headers: Sequence[str], rows: Sequence[Sequence[str]], gap: int = 3) -> int:
    """Cells a table needs to show every header and cell on one line (``gap`` between columns)."""
    widths = [max([len(h)] + [max((len(line) for line in str(r[i]).split("\n")), default=0) for r in rows]) for i, h in enumerate(headers)]
    return sum(widths) + gap * (len(widths) - 1)


#: longest value a key/value view shows whole; a longer one is elided with its length
LONG_VALUE = 60


def elide(text: str, limit: int = LONG_VALUE) -> str:
    """``text`` whole if it fits ``limit`` cells, else its start and its length: ``aaaa… (2,000 chars)``
    (a long value takes one line, not thirty; --output json has it whole)."""
    if len(text) <= limit:
        return text
    suffix = f"… ({len(text):,} chars)"
    if limit - len(suffix) < 4:
        return cut(text, limit)
    return text[: limit - len(suffix)] + suffix


def wrap_path(path: str, width: int) -> str:
    """``path`` in lines of at most ``width`` cells broken only after a ``/``, never inside a
    name (a name longer than ``width`` keeps a line of its own, and overflows)."""
    parts = path.split("/")
    pieces = [p + "/" for p in parts[:-1]] + [parts[-1]]
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    if line or not lines:
        lines.append(line)
    return "\n".join(lines)


def files_table(console: Console, title: str, headers: list[str], rows: list[tuple[str, list[str]]]) -> None:
    """Data files as a table of ``path`` then ``headers``, each path broken only after a ``/``
    (``wrap_path``): copied from the terminal, every name is whole. A name wider than the
    path column: one block per file, its path on lines of its own (overflowing if need be)."""
    widths = [max([len(h)] + [len(cells[i]) for _, cells in rows]) for i, h in enumerate(headers)]
    if headers[-1] == "reason":  # the reason folds (at spaces); the path keeps the most of the line
        widths[-1] = min(widths[-1], max(12, console.width // 4))
    path_w = console.width - sum(widths) - 2 * len(headers)  # a 2-cell gap before each other column
    longest_name = max((len(name) + 1 for path, _ in rows for name in path.split("/")), default=0)
    if longest_name > path_w:
        console.print(Text(title, style="table.title"))
        for path, cells in rows:
            console.print(Text(wrap_path(path, console.width)), soft_wrap=True)
            console.print(Text("  " + " · ".join(f"{h} {c}" for h, c in zip(headers, cells) if c), style="dim"))
        return
    t = Table(
        box=box.SIMPLE_HEAD, title=Text(title, style="table.title"), title_justify="left", pad_edge=False, show_edge=False, padding=(0, 2, 0, 0)
    )
    wrapped = [wrap_path(path, path_w) for path, _ in rows]
    t.add_column("path", no_wrap=True, min_width=max((len(line) for w in wrapped for line in w.splitlines()), default=4))
    for h, w in zip(headers, widths):
        if h == "reason":
            t.add_column(h, overflow="fold", max_width=w)
        else:
            t.add_column(h, no_wrap=True, min_width=w, justify="right" if h in ("rows", "size") else "left")
    for path, (_, cells) in zip(wrapped, rows):
        t.add_row(Text(path), *cells)
    console.print(t)


def print_records(console: Console, headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None, keys: int = 1) -> None:
    """Rows too wide for the terminal, one block per row: the first ``keys`` cells (the
    non-empty ones) as its heading, then ``header  value`` lines (values fold, never cut;
    empty ones left out), so every value stays readable at any width."""
    if title:
        console.print(Text(title, style="bold"))
    for row in rows:
        named = [f"{h} {v}" if h else str(v) for h, v in zip(headers[:keys], row[:keys]) if v is not None and str(v) != ""]
        console.print(Text(" · ".join(named), style="bold"))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="cyan", no_wrap=True)
        grid.add_column(overflow="fold")
        for h, v in zip(headers[keys:], row[keys:]):
            if v is not None and str(v) != "":
                grid.add_row("  " + h, v if isinstance(v, Text) else Text(str(v)))
        console.print(grid)


def kv_grid(pairs: Sequence[tuple[str, Any]]) -> Table:
    """Key/value lines: keys in bold cyan, values folding (never cut)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(key, value if isinstance(value, Text) else Text(str(value)))
    return grid


def heading(console: Console, text: str) -> None:
    """A blank line, then ``text`` in bold on a rule."""
    console.print()
    console.print(Rule(Text(text, style="bold"), align="left"))
