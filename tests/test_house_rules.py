"""Size rules a reader can rely on (issue #32): no function over 100 lines
and no module over 800 lines in engine/, flight_server/, spark_bridge/ (generated protobuf
modules aside)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "flight_server", "spark_bridge")
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 800


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py") if not p.name.endswith("_pb2.py"))


def test_the_packages_have_modules() -> None:
    assert len(_modules()) > 100  # the walk found the code (a wrong root would pass the rules vacuously)


def test_no_module_over_800_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in _modules() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_over_100_lines() -> None:
    long = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                # from its def line: a click command's option decorators are not its body
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(REPO)}:{node.lineno} {node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
