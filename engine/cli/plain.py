"""The CLI's text views drawn without importing rich when no terminal shows them, as rich draws them.

Why: rich's import and its layout engine are 20-25 ms of a fresh ``metastore show``'s
start-up (issue #20). Written to a pipe or a file, rich draws no styles: the views (a
rule, key/value grids, tables with a simple head whose cells fit) are then plain text
that a few lines lay out the same way, byte for byte. The TextOutput builds its views
from the classes here (``Text``, ``Table``, ``Rule``: rich's names and arguments, the
subset the views use); :class:`Console` prints each one itself when it can, and hands
it to rich otherwise: at a terminal (colours), and for anything the plain layout does
not do (a cell that would wrap, fold or be cut, a table wider than the terminal, rich
markup or an emoji code in a string, a stdout that is not UTF-8, Jupyter). Each print
goes one way or the other whole, so the output is rich's either way;
tests/engine/cli/test_plain.py compares the two on generated views at many widths and
on every read command.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

# rich's own width of a string (wide and zero-width characters) and its line breaking:
# 1 ms, not rich.console's 12
from rich.cells import cell_len

if TYPE_CHECKING:
    from rich.box import Box as RichBox
    from rich.console import Console as RichConsole
    from rich.rule import Rule as RichRule
    from rich.table import Table as RichTable
    from rich.text import Text as RichText

divide_line: Callable[..., list[int]] | None
try:
    from rich._wrap import divide_line as _divide_line

    divide_line = _divide_line
except ImportError:  # a private module of rich 15: without it, text that wraps goes to rich
    divide_line = None


class _Unsupported(Exception):
    """Raised inside a plain layout: this print goes to rich."""


class Box:
    """A rich box by name (``rich.box.<name>``) with the characters of its eight lines."""

    def __init__(self, name: str, lines: str) -> None:
        self.name = name
        rows = lines.splitlines()
        self.top_left, self.top, self.top_divider, self.top_right = list(rows[0])
        self.head_left, _, self.head_vertical, self.head_right = list(rows[1])
        self.head_row_left, self.head_row_horizontal, self.head_row_cross, self.head_row_right = list(rows[2])
        self.mid_left, _, self.mid_vertical, self.mid_right = list(rows[3])
        self.foot_left, _, self.foot_vertical, self.foot_right = list(rows[6])
        self.bottom_left, self.bottom, self.bottom_divider, self.bottom_right = list(rows[7])

    def to_rich(self) -> RichBox:
        from rich import box

        return getattr(box, self.name)


class box:  # noqa: N801 - stands for the module rich.box
    SIMPLE_HEAD = Box("SIMPLE_HEAD", "    \n    \n ── \n    \n    \n    \n    \n    \n")


# ------------------------------------------------------------------ renderables


class Text:
    """rich.text.Text's constructor and ``append`` (styles kept for rich, unused in plain text)."""

    def __init__(self, text: str = "", style: str = "") -> None:
        self._parts: list[tuple[str, str | None]] = [(text, style)]

    def append(self, text: str, style: str | None = None) -> Text:
        self._parts.append((text, style))
        return self

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self._parts)

    def __str__(self) -> str:
        return self.plain

    def to_rich(self) -> RichText:
        from rich.text import Text as RichText

        text, style = self._parts[0]
        out = RichText(text, style=style or "")
        for text, style in self._parts[1:]:
            out.append(text, style=style)
        return out


class Rule:
    """rich.rule.Rule with a title, aligned left."""

    def __init__(self, title: Text | str, align: Literal["left", "center", "right"] = "left") -> None:
        self.title, self.align = title, align

    def to_rich(self) -> RichRule:
        from rich.rule import Rule as RichRule

        return RichRule(self.title.to_rich() if isinstance(self.title, Text) else self.title, align=self.align)


class _Column:
    LAID_OUT = frozenset({"justify", "style", "overflow", "no_wrap", "width", "min_width", "max_width"})  # any other: rich

    def __init__(self, header: Any, kwargs: dict[str, Any]) -> None:
        self.header, self.kwargs = header, kwargs
        self.laid_out = set(kwargs) <= self.LAID_OUT
        self.justify: str = kwargs.get("justify", "left")
        self.width: int | None = kwargs.get("width")
        self.min_width: int | None = kwargs.get("min_width")
        self.max_width: int | None = kwargs.get("max_width")


def _unpack(padding: int | tuple[int, ...]) -> tuple[int, int, int, int]:
    """rich.padding.Padding.unpack: (top, right, bottom, left)."""
    if isinstance(padding, int):
        return padding, padding, padding, padding
    if len(padding) == 1:
        return padding[0], padding[0], padding[0], padding[0]
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding[0], padding[1], padding[2], padding[3]
    raise ValueError(f"1, 2 or 4 integers required for padding; {len(padding)} given")


class Table:
    """rich.table.Table: the constructor arguments, ``grid``, ``add_column`` and ``add_row`` the views use."""

    _OPTIONS = ("box", "pad_edge", "show_edge", "padding", "title", "title_justify", "show_header", "collapse_padding")

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(self._OPTIONS)
        if unknown:
            raise TypeError(f"engine.cli.plain.Table does not take {sorted(unknown)}")
        self.kwargs = kwargs
        self._grid: dict[str, Any] | None = None
        self.box: Box | None = kwargs.get("box")
        self.pad_edge: bool = kwargs.get("pad_edge", True)
        self.show_edge: bool = kwargs.get("show_edge", True)
        self.padding = _unpack(kwargs.get("padding", (0, 1)))
        self.title = kwargs.get("title")
        self.title_justify: str = kwargs.get("title_justify", "center")
        self.show_header: bool = kwargs.get("show_header", True)
        self.collapse_padding: bool = kwargs.get("collapse_padding", False)
        self.columns: list[_Column] = []
        self.rows: list[tuple[Any, ...]] = []

    @classmethod
    def grid(cls, padding: int | tuple[int, ...] = 0) -> Table:
        t = cls(box=None, padding=padding, show_header=False, show_edge=False, pad_edge=False, collapse_padding=True)
        t._grid = {"padding": padding}
        return t

    def add_column(self, header: Any = "", **kwargs: Any) -> None:
        self.columns.append(_Column(header, kwargs))

    def add_row(self, *cells: Any) -> None:
        self.rows.append(cells)

    def to_rich(self) -> RichTable:
        from rich.table import Table as RichTable

        if self._grid is not None:
            t = RichTable.grid(**self._grid)
        else:
            kwargs = dict(self.kwargs)
            if kwargs.get("box") is not None:
                kwargs["box"] = kwargs["box"].to_rich()
            if kwargs.get("title") is not None:
                kwargs["title"] = _to_rich(kwargs["title"])
            t = RichTable(**kwargs)
        for c in self.columns:
            t.add_column(_to_rich(c.header), **c.kwargs)
        for row in self.rows:
            t.add_row(*(_to_rich(cell) for cell in row))
        return t


def _to_rich(obj: Any) -> Any:
    return obj.to_rich() if isinstance(obj, (Text, Rule, Table)) else obj


# ------------------------------------------------------------------ plain layout

_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # rich strips or expands these (tabs): not laid out here
_EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")  # rich.console's emoji replacement, in a str
_DIGIT_EMOJI = frozenset({"100", "1234", "+1", "__1", "-1"})  # the emoji names without a letter (rich._emoji_codes)


def _plain(obj: object) -> str:
    """The text of a str or Text as rich would draw it; _Unsupported when rich would change it."""
    if obj is None:
        return ""
    if isinstance(obj, Text):
        text = obj.plain
    elif isinstance(obj, str):  # rich reads markup and emoji codes in a str
        text = obj
        if "[" in text:
            raise _Unsupported
        for match in _EMOJI_CODE.finditer(text) if text.count(":") > 1 else ():
            name = match.group(2).lower()
            if name in _DIGIT_EMOJI or any(c.isalpha() for c in name):
                raise _Unsupported
    else:
        raise _Unsupported
    if _CONTROL.search(text):
        raise _Unsupported
    return text


def _justify(text: str, width: int, how: str) -> str:
    """A line of ``text`` justified in ``width`` cells as rich.text.Lines.justify does (it fits)."""
    if how == "left":
        return text + " " * (width - cell_len(text))
    text = text.rstrip()
    if how == "right":
        return " " * (width - cell_len(text)) + text
    if how == "center":
        left = (width - cell_len(text)) // 2
        return " " * left + text + " " * (width - left - cell_len(text))
    raise _Unsupported


def _table_lines(t: Table, console_width: int) -> list[str]:
    """rich.table.Table.__rich_console__ when every cell fits its column and the table fits the width."""
    n = len(t.columns)
    if n == 0 or t.padding[0] or t.padding[2] or any(len(row) > n for row in t.rows) or not all(c.laid_out for c in t.columns):
        raise _Unsupported
    _, pad_right, _, pad_left = t.padding
    if t.collapse_padding and pad_left != pad_right:
        raise _Unsupported
    extra = (2 if t.show_edge and t.box else 0) + (n - 1 if t.box else 0)
    max_width = console_width - extra
    texts: list[list[list[str]]] = []  # column -> row -> the cell's lines
    pads: list[tuple[int, int]] = []
    widths: list[int] = []
    for i, col in enumerate(t.columns):
        left, right = pad_left, pad_right
        if t.collapse_padding and i:
            left = max(0, left - right)
        if not t.pad_edge:
            left = 0 if i == 0 else left
            right = 0 if i == n - 1 else right
        cells = ([col.header] if t.show_header else []) + [row[i] if i < len(row) else None for row in t.rows]
        column = [_plain(c).split("\n") for c in cells]
        natural = max((cell_len(line) for lines in column for line in lines), default=0)
        if col.width is not None:
            if natural > col.width:
                raise _Unsupported
            w = col.width
        else:
            w = natural if col.min_width is None else max(natural, col.min_width)
            if col.max_width is not None and natural > col.max_width:
                raise _Unsupported
            if col.max_width is not None:
                w = min(w, col.max_width)
        if w == 0 and any(len(lines) > 1 for lines in column):
            raise _Unsupported  # line breaks in a column of no width: rich's own rules (found by hypothesis)
        texts.append(column)
        pads.append((left, right))
        widths.append((w + left + right) or 1)
    if sum(widths) > max_width:
        raise _Unsupported
    table_width = sum(widths) + extra
    lines: list[str] = []
    if t.title:  # wrapped to the table's width, each line justified
        for line in _plain(t.title).split("\n"):
            lines.extend(_justify(piece, table_width, t.title_justify) for piece in _wrap(line, table_width))
    b = t.box
    if b and t.show_edge:
        lines.append(b.top_left + b.top_divider.join(b.top * w for w in widths) + b.top_right)
    n_rows = len(t.rows) + t.show_header
    for r in range(n_rows):
        height = max(len(column[r]) for column in texts)
        header = r == 0 and t.show_header
        shaped = []  # each cell as `height` lines of its column's width
        for col, column, (left, right), w in zip(t.columns, texts, pads, widths):
            blank = [" " * w] * (height - len(column[r]))
            cell = [" " * left + _justify(line, w - left - right, col.justify) + " " * right for line in column[r]]
            shaped.append(blank + cell if header else cell + blank)  # a header sits on the rule, a cell at the top
        for line_cells in zip(*shaped):
            if not b:
                lines.append("".join(line_cells))
                continue
            first, last = r == 0, r == n_rows - 1
            edge_l, edge_r, divider = (
                (b.head_left, b.head_right, b.head_vertical)
                if first
                else ((b.foot_left, b.foot_right, b.foot_vertical) if last else (b.mid_left, b.mid_right, b.mid_vertical))
            )
            line = divider.join(line_cells)
            lines.append(edge_l + line + edge_r if t.show_edge else line)
        if b and header:
            sep = b.head_row_cross.join(b.head_row_horizontal * w for w in widths)
            lines.append(b.head_row_left + sep + b.head_row_right if t.show_edge else sep)
    if b and t.show_edge:
        lines.append(b.bottom_left + b.bottom_divider.join(b.bottom * w for w in widths) + b.bottom_right)
    return lines


def _wrap(line: str, width: int) -> list[str]:
    """rich.text.Text.wrap of one line (no justify): broken between words where rich breaks it."""
    if 0 < width and cell_len(line) <= width and len(line) <= width:
        return [line]  # a line that fits is not broken (rich's rstrip_end counts characters: a
        # combining accent makes a line longer than its cells, and trailing spaces beyond the
        # width in characters go, as below)
    if width < 1 or divide_line is None:
        raise _Unsupported
    offsets = [0, *divide_line(line, width, fold=True), len(line)]
    pieces = []
    for start, end in zip(offsets, offsets[1:]):
        piece = line[start:end]
        if len(piece) > width:  # Text.rstrip_end: whitespace beyond the width goes (by characters)
            trailing = len(piece) - len(piece.rstrip())
            piece = piece[: len(piece) - min(trailing, len(piece) - width)]
        if cell_len(piece) > width:
            raise _Unsupported
        pieces.append(piece)
    return pieces


def _rule_line(rule: Rule, width: int) -> str:
    if rule.align != "left":
        raise _Unsupported
    title = _plain(rule.title).replace("\n", " ")
    if not title:
        return "─" * width
    if cell_len(title) > max(0, width - 2) or width - 2 <= 0:
        raise _Unsupported
    return title + " " + "─" * (width - cell_len(title) - 1)


def _lines(objects: Sequence[Any], width: int, soft_wrap: bool) -> list[str]:
    """The lines rich's Console.print writes for ``objects``."""
    if not objects:
        return [""]
    if all(isinstance(o, (str, Text)) for o in objects):  # rich joins text with spaces, then wraps it
        lines = " ".join(_plain(o) for o in objects).split("\n")
        return lines if soft_wrap else [piece for line in lines for piece in _wrap(line, width)]
    if len(objects) != 1 or soft_wrap:
        raise _Unsupported
    (obj,) = objects
    if isinstance(obj, Table):
        return _table_lines(obj, width)
    if isinstance(obj, Rule):
        return [_rule_line(obj, width)]
    raise _Unsupported


# ------------------------------------------------------------------ the console


def _rich_would_use_a_terminal(stream: Any) -> bool:
    """rich.console.Console.is_terminal for ``stream``, and Jupyter (which rich draws as HTML);
    Windows too (rich's legacy console handling is not mirrored here)."""
    if hasattr(builtins, "get_ipython") or sys.platform == "win32":
        return True
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _rich_width() -> int:
    """rich.console.Console.size's width: a terminal on stdin, stdout or stderr, then COLUMNS, else 80."""
    width = None
    for fd in (0, 1, 2):
        try:
            width, _ = os.get_terminal_size(fd)
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


class Console:
    """Prints the views: plain text when rich would draw no styles and the plain layout
    covers the view, else through a rich Console (created on first need)."""

    plain_enabled = True  # the tests turn it off to get rich's output for the same views

    def __init__(self, highlight: bool = False) -> None:
        self._highlight = highlight
        self._rich: RichConsole | None = None

    @property
    def rich(self) -> RichConsole:
        """The rich Console this one hands views to (views built with rich itself print there)."""
        if self._rich is None:
            from rich.console import Console as RichConsole

            self._rich = RichConsole(highlight=self._highlight)
        return self._rich

    def _use_plain(self) -> bool:
        if not self.plain_enabled:
            return False
        stream = sys.stdout
        encoding = (getattr(stream, "encoding", "utf-8") or "utf-8").lower()
        return encoding.startswith("utf") and not _rich_would_use_a_terminal(stream)

    @property
    def width(self) -> int:
        return _rich_width() if self._use_plain() else self.rich.width

    def print(self, *objects: Any, soft_wrap: bool = False, style: str | None = None) -> None:
        if self._use_plain():
            try:
                lines = _lines(objects, _rich_width(), soft_wrap)
            except _Unsupported:
                pass
            else:
                sys.stdout.write("".join(line + "\n" for line in lines))
                sys.stdout.flush()
                return
        kwargs: dict[str, Any] = {"soft_wrap": soft_wrap}
        if style is not None:
            kwargs["style"] = style
        self.rich.print(*(_to_rich(o) for o in objects), **kwargs)

    def print_json(self, text: str) -> None:
        self.rich.print_json(text)
