"""The fenced code examples of README.md and docs/*.md, as data: where each is, its language,
its code, and whether it runs (``<!-- not run: reason -->`` on the line before says it does not).

Read by tests/docs/test_examples.py, which runs them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The languages of examples: every fenced block in one of them runs, or says why not.
PYTHON = "python"
SHELL = frozenset({"sh", "bash", "console"})

#: How a command line of the CLI starts in the docs; the rest of the line is its arguments.
COMMAND_PREFIXES = ("$ metastore ", "metastore ", ".venv/bin/metastore ")

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One fenced block: ``doc`` relative to the repository, ``line`` its opening fence (1-based)."""

    doc: str
    line: int
    language: str
    code: str
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    """README.md and every docs/*.md and docs/*/*.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs").glob("*/*.md"))]


def blocks(path: Path) -> list[Example]:
    """Every fenced block of one Markdown file, in order (its indentation removed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = str(path.relative_to(REPO))
    found: list[Example] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, start, body = len(fence["indent"]), i, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:])
            i += 1
        found.append(Example(doc, start + 1, fence["language"], "\n".join(body) + "\n", _reason(lines, start)))
        i += 1
    return found


def _reason(lines: list[str], fence: int) -> str | None:
    """The reason of a ``<!-- not run: ... -->`` comment on the last non-blank line before a fence."""
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = _NOT_RUN.match(lines[j]) if j >= 0 else None
    return match["reason"] if match else None


def examples() -> list[Example]:
    """The Python and shell blocks of every document."""
    return [b for path in documents() for b in blocks(path) if b.language == PYTHON or b.language in SHELL]


def shell_commands(code: str) -> list[str]:
    """The command lines of a shell block: continuations joined, blank and comment-only lines dropped."""
    joined: list[str] = []
    pending = ""
    for raw in code.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line and not line.startswith("#"):
            joined.append(line)
    return joined


def metastore_arguments(command: str) -> list[str] | None:
    """The arguments of a ``metastore ...`` command line (comments dropped), or None for another command."""
    for prefix in COMMAND_PREFIXES:
        if command.startswith(prefix):
            return shlex.split(command[len(prefix) :], comments=True)
    return None


_ASSIGNMENT = re.compile(r"^(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>\S*)\s+")
_EXPORT = re.compile(r"^export\s+(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>\S*)\s*(?:#.*)?$")


@dataclass(frozen=True)
class Command:
    """A command line of a shell block: ``metastore ARGS`` (``arguments``), maybe after
    ``VAR=value`` assignments for it alone (``environment``); or ``export VAR=value``
    (``arguments`` None, ``environment`` for every later line)."""

    arguments: list[str] | None
    environment: dict[str, str]

    @property
    def export(self) -> bool:
        return self.arguments is None


def parse_command(line: str) -> Command | None:
    """A metastore command line (with its ``VAR=value`` prefixes) or an ``export``; None: another command."""
    exported = _EXPORT.match(line)
    if exported:
        return Command(None, {exported["name"]: exported["value"]})
    environment = {}
    while (assignment := _ASSIGNMENT.match(line)) is not None:
        environment[assignment["name"]] = assignment["value"]
        line = line[assignment.end() :]
    arguments = metastore_arguments(line)
    return None if arguments is None else Command(arguments, environment)
