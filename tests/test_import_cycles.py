"""scripts/import_cycles.py finds a circle however its imports are hidden, and only a circle."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_cycles", REPO / "scripts" / "import_cycles.py")
assert _spec is not None and _spec.loader is not None
import_cycles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_cycles)


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_hidden_by_type_checking_and_function_level_imports_is_found(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import thing\n",
            "pkg/c.py": "def f():\n    import pkg.a\n",
            "pkg/d.py": "from pkg.a import name\nimport os\n",  # into the circle, not part of it
        },
    )
    graph = import_cycles.import_graph(["pkg"], tmp_path)
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.d"] == {"pkg.a"}
    (component,) = import_cycles.cycles(graph)
    assert component == ["pkg.a", "pkg.b", "pkg.c"]
    assert import_cycles.path_in(component, graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_layers_that_point_down_have_no_circle(tmp_path: Path) -> None:
    _tree(tmp_path, {"pkg/__init__.py": "from pkg.top import x\n", "pkg/top.py": "from pkg import low\n", "pkg/low.py": "import json\n"})
    assert import_cycles.cycles(import_cycles.import_graph(["pkg"], tmp_path)) == []


def test_the_catalog_has_no_import_circle() -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "import_cycles.py"), "engine"], capture_output=True, text=True, check=False)
    assert "engine.catalog." not in out.stdout, out.stdout
