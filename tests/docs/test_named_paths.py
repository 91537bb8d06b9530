"""Every dotted name of our code (``engine.lookup.open_statistics``) and every repository path
(``engine/catalog/replay.py``) README.md and docs/ name exists: a module, or a name a module
defines (a class, function, constant, an import, or an entry of a lazy ``__getattr__`` table),
or a logger the code opens (``engine.analyze``); a path is a file, a folder, a glob of some, or
a folder .gitignore keeps out of the repository."""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
from pathlib import Path

from tests.docs.examples import REPO, documents

PACKAGES = ("engine", "flight_server", "spark_bridge")
ROOTS = (*PACKAGES, "tests", "bench", "scripts", "docs")
_DOTTED = re.compile(r"(?<![\w./-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
_PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(ROOTS) + r")/[\w./-]*(?:\*\.?\w[\w./-]*)?)")  # a * only inside a glob
_LOGGER = re.compile(r"""getLogger\(\s*["']([\w.]+)["']""")


@functools.cache
def _defined(module: Path) -> frozenset[str]:
    """The names ``module`` defines at any depth, and its string constants (lazy tables name
    their attributes as strings)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return frozenset(names)


@functools.cache
def _loggers() -> frozenset[str]:
    return frozenset(name for package in PACKAGES for p in (REPO / package).rglob("*.py") for name in _LOGGER.findall(p.read_text(encoding="utf-8")))


def _resolves(name: str) -> bool:
    """A module, or a name its longest module prefix defines (the part after it: its first name)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:i])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            return i == len(parts) or parts[i] in _defined(module)
    return False


def _ignored(path: str) -> bool:
    ignored = [line.strip().strip("/") for line in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines() if line.strip().startswith("/")]
    return any(path == i or path.startswith(i + "/") for i in ignored)


def _exists(path: str) -> bool:
    if "*" in path:
        return any(fnmatch.fnmatch(str(p.relative_to(REPO)), path) for p in (REPO / path.split("/")[0]).rglob("*"))
    return (REPO / path).exists() or _ignored(path)


def test_dotted_names_in_the_docs_exist() -> None:
    missing, seen = [], 0
    for doc in documents():
        for name in sorted(set(_DOTTED.findall(doc.read_text(encoding="utf-8")))):
            seen += 1
            if not name.endswith((".py", ".md", ".proto")) and not _resolves(name) and name not in _loggers():
                missing.append(f"{doc.relative_to(REPO)}: {name}")
    assert seen > 50, seen  # the docs' names were found (a broken pattern would pass vacuously)
    assert not missing, "names of no module, attribute or logger:\n" + "\n".join(missing)


def test_paths_in_the_docs_exist() -> None:
    missing, seen = [], 0
    for doc in documents():
        for path in sorted(set(_PATH.findall(doc.read_text(encoding="utf-8")))):
            seen += 1
            if not _exists(path.rstrip("./")):
                missing.append(f"{doc.relative_to(REPO)}: {path}")
    assert seen > 100, seen
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_the_checks_catch_a_stale_name() -> None:
    """The check fails on the kind of name #32 found (options.py naming engine.job.analyze_source)."""
    assert not _resolves("engine.job.analyze_source")
    assert not _resolves("engine.lookup.no_such_function")
    assert _resolves("engine.lookup.open_statistics") and _resolves("engine.catalog.published.PublishedState")
    assert not _exists("engine/lookup.py") and _exists("engine/lookup") and _exists("bench/bench_*.py") and _exists("bench/data")
