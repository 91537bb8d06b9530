"""engine/cli/plain.py draws the text views exactly as rich does.

rich is the oracle: each generated view (tables with a simple head or key/value grids,
their options as the views use them, cells with wide and zero-width characters, line
breaks, rich markup and emoji codes; a rule; text lines that wrap) is printed by
plain.Console into a pipe-like stream at a width, and by a rich Console of that width;
the bytes must be the same, whether plain drew it or handed it to rich. The views it
must draw itself (no rich.console import) are checked too, so a fallback for everything
would fail. The read commands end to end: tests/flight_server/test_cli_plain.py.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console as RichConsole

from engine.cli import plain

REPO = Path(__file__).resolve().parents[3]

# letters, digits, spaces, a wide CJK character, a combining accent, box and bar characters,
# markup brackets, emoji-code colons and a line break: everything the layout must measure or refuse
# (the plain ones several times over, so that most views are drawn by plain, not handed to rich)
ALPHABET = st.sampled_from(
    list("ab Z09 .,-_+") * 6 + ["中", "e\u0301", "█", "▏", "─", ":", "\n"] * 2 + ["[", "]", ":smile:", ":100:", ":32:", "[b]", "\t"]
)
CELL = st.lists(ALPHABET, max_size=8).map("".join)


@st.composite
def cells(draw: st.DrawFn) -> object:
    text = draw(CELL)
    return plain.Text(text, style=draw(st.sampled_from(["", "bold", "dim"]))) if draw(st.booleans()) else text


@st.composite
def tables(draw: st.DrawFn) -> plain.Table:
    if draw(st.booleans()):
        t = plain.Table.grid(padding=draw(st.sampled_from([(0, 2), (0, 1), 0])))
    else:
        t = plain.Table(
            box=plain.box.SIMPLE_HEAD,
            pad_edge=draw(st.booleans()),
            show_edge=draw(st.booleans()),
            padding=draw(st.sampled_from([(0, 1), (0, 1, 0, 0), (0, 2)])),
            title=draw(st.none() | CELL),
            title_justify=draw(st.sampled_from(["left", "center", "right"])),
        )
    n = draw(st.integers(1, 5))
    for _ in range(n):
        options = {
            "justify": draw(st.sampled_from(["left", "right", "center"])),
            "no_wrap": draw(st.booleans()),
            "overflow": draw(st.sampled_from(["fold", "ellipsis"])),
        }
        for key in ("width", "min_width", "max_width"):
            if draw(st.integers(0, 3)) == 0:
                options[key] = draw(st.integers(0, 12))
        t.add_column(draw(CELL), **options)
    for _ in range(draw(st.integers(0, 6))):
        t.add_row(*draw(st.lists(cells(), min_size=n, max_size=n)))
    return t


def _rich(objects: list, width: int, **kwargs: object) -> str:
    out = io.StringIO()
    RichConsole(file=out, width=width, highlight=False).print(*(plain._to_rich(o) for o in objects), **kwargs)
    return out.getvalue()


def _plain(objects: list, width: int, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> tuple[str, bool]:
    """plain.Console's output, and whether it drew the view itself."""
    monkeypatch.setenv("COLUMNS", str(width))
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    console = plain.Console(highlight=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        console.print(*objects, **kwargs)
    # plain's rich Console writes to sys.stdout as rich's default does: captured above
    return out.getvalue(), console._rich is None


WIDTHS = st.integers(8, 210)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(t=tables(), width=WIDTHS)
def test_tables_as_rich_draws_them(t: plain.Table, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    got, _ = _plain([t], width, monkeypatch)
    assert got == _rich([t], width)


@SETTINGS
@given(texts=st.lists(cells(), min_size=0, max_size=3), width=WIDTHS, soft_wrap=st.booleans())
def test_text_as_rich_draws_it(texts: list, width: int, soft_wrap: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    got, _ = _plain(texts, width, monkeypatch, soft_wrap=soft_wrap)
    assert got == _rich(texts, width, soft_wrap=soft_wrap)


@SETTINGS
@given(title=cells(), width=WIDTHS)
def test_rules_as_rich_draws_them(title: object, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rule = plain.Rule(title if isinstance(title, plain.Text) else plain.Text(title), align="left")
    got, _ = _plain([rule], width, monkeypatch)
    assert got == _rich([rule], width)


def _views() -> list[tuple[str, list]]:
    kv = plain.Table.grid(padding=(0, 2))
    kv.add_column(style="bold cyan", no_wrap=True)
    kv.add_column(overflow="fold")
    for key, value in [("row_count", "20,000"), ("distinct_count", "~7,239 (approximate)"), ("  p01", plain.Text("1.93"))]:
        kv.add_row(key, value if isinstance(value, plain.Text) else plain.Text(value))
    bars = plain.Table(box=plain.box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name in ("lower", "upper", "count", "share"):
        bars.add_column(name, justify="right", no_wrap=True)
    bars.add_column("", style="green", no_wrap=True)
    bars.add_row("0.420", "68.599", "16,937", "89.0%", "█" * 12)
    bars.add_row("1,295.812", "1,363.990", "1", "0.005%", "▏")
    titled = plain.Table(box=plain.box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title="Tables in /tmp/store", title_justify="left")
    titled.add_column("table", style="bold", overflow="fold", min_width=5)
    titled.add_column("created (UTC)", no_wrap=True, min_width=16)
    titled.add_row(plain.Text("sales"), "2026-11-25 17:32")
    narrow = plain.Table(box=plain.box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    narrow.add_column("column\ntype", overflow="fold", width=12)
    narrow.add_column("min\nmax", no_wrap=True, width=10)
    narrow.add_row(plain.Text("price").append("\ndouble", style="cyan"), plain.Text("0.42\n1363.99"))
    return [
        ("key/value grid", [kv]),
        ("histogram", [bars]),
        ("titled table", [titled]),
        ("two-line cells", [narrow]),
        ("rule", [plain.Rule(plain.Text("price (double)", style="bold"), align="left")]),
        (
            "wrapped text",
            [plain.Text("Histogram: 1,000 bins shown as 20 buckets", style="bold"), plain.Text("(19,033 values; nulls and NaN are in no bin)")],
        ),
        ("blank line", []),
    ]


@pytest.mark.parametrize("width", [60, 80, 200])
@pytest.mark.parametrize(("name", "objects"), _views(), ids=[v[0] for v in _views()])
def test_the_views_are_drawn_here(name: str, objects: list, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    got, drawn_here = _plain(objects, width, monkeypatch)
    assert got == _rich(objects, width)
    assert drawn_here, name


def test_a_view_it_cannot_draw_goes_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    t = plain.Table(box=plain.box.SIMPLE_HEAD)
    t.add_column("value", overflow="fold")
    t.add_row("a long value that has to fold " * 4)
    got, drawn_here = _plain([t], 40, monkeypatch)
    assert not drawn_here
    assert got == _rich([t], 40)
    markup, drawn_here = _plain(["[bold]x[/bold] :thumbs_up:"], 40, monkeypatch)
    assert not drawn_here and markup == _rich(["[bold]x[/bold] :thumbs_up:"], 40)


@pytest.mark.parametrize(
    ("env", "plain_drawn"), [({}, True), ({"FORCE_COLOR": "1"}, False), ({"TTY_COMPATIBLE": "1"}, False), ({"FORCE_COLOR": ""}, True)]
)
def test_a_terminal_gets_rich(env: dict, plain_drawn: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    console = plain.Console(highlight=False)
    with contextlib.redirect_stdout(io.StringIO()):
        console.print(plain.Text("x", style="bold"))
    assert (console._rich is None) is plain_drawn


def test_drawing_a_view_loads_no_rich_console() -> None:
    code = (
        "import sys\n"
        "from engine.cli import plain\n"
        "t = plain.Table(box=plain.box.SIMPLE_HEAD, pad_edge=False, show_edge=False)\n"
        "t.add_column('a', justify='right'); t.add_row('1')\n"
        "c = plain.Console(); c.print(plain.Rule(plain.Text('x'))); c.print(t); c.print(plain.Text('done'))\n"
        "print(sorted(m for m in ('rich.console', 'rich.table', 'rich.text') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
    assert out.stdout.splitlines()[:4] == ["x " + "─" * 78, "a", "─", "1"]
