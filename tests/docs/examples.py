"""The fenced code examples of README.md and docs/*.md, as data: where each is, its language,
its code, and whether it runs (``<!-- not run: reason -->`` on the line before says it does not).
A block that needs Spark and a table of its catalog carries ``<!-- run with Spark: TEST -->``
instead: tests/docs/test_examples.py leaves it to TEST (a test file of the repository), which
runs it in the test run's Spark session (tests/spark_bridge/test_doc_examples.py).

Read by tests/docs/test_examples.py and tests/spark_bridge/test_doc_examples.py, which run them.
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
_SPARK = re.compile(r"^\s*<!--\s*run with Spark:\s*(?P<test>\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One fenced block: ``doc`` relative to the repository, ``line`` its opening fence (1-based)."""

    doc: str
    line: int
    language: str
    code: str
    not_run: str | None
    #: the test file that runs it in Spark (``<!-- run with Spark: TEST -->``), else None
    spark_test: str | None = None

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
        before = _line_before(lines, start)
        not_run, spark = _NOT_RUN.match(before), _SPARK.match(before)
        code = "\n".join(body) + "\n"
        found.append(Example(doc, start + 1, fence["language"], code, not_run["reason"] if not_run else None, spark["test"] if spark else None))
        i += 1
    return found


def _line_before(lines: list[str], fence: int) -> str:
    """The last non-blank line before a fence ("" if none): where its ``<!-- ... -->`` marker is."""
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    return lines[j] if j >= 0 else ""


def examples() -> list[Example]:
    """The Python and shell blocks of every document."""
    return [b for path in documents() for b in blocks(path) if b.language == PYTHON or b.language in SHELL]


def spark_examples() -> dict[str, Example]:
    """The blocks marked ``<!-- run with Spark: TEST -->``, by key ``DOC#N`` (the N-th such
    block of DOC, from 1): the key the Spark test knows each by, stable while lines move."""
    keyed: dict[str, Example] = {}
    for example in examples():
        if example.spark_test is not None:
            n = sum(1 for key in keyed if key.startswith(f"{example.doc}#")) + 1
            keyed[f"{example.doc}#{n}"] = example
    return keyed


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
