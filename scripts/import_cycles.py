"""Print the import cycles among the project's own modules; exit 1 if there is any.

Every import statement counts, wherever it is: at the top, in a function, or under
``if TYPE_CHECKING:`` (a circle hidden there is still a circle). ``from pkg import name``
is an import of ``pkg.name`` when that is a module, else of ``pkg``. A package's
``__init__`` is not imported implicitly by its submodules here (only explicit imports
count), so a lazily loading ``__init__`` makes a cycle only if a submodule imports it.

    python scripts/import_cycles.py [root package ...]   (default: engine flight_server spark_bridge)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOTS = ("engine", "flight_server", "spark_bridge")


def modules(roots: list[str], repo: Path = REPO) -> dict[str, Path]:
    """Module name -> file, for every .py below the root packages."""
    out = {}
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            parts = list(path.relative_to(repo).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (any import statement in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def path_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One cycle through the component's first module (breadth-first: a shortest one)."""
    members = set(component)
    first = component[0]
    came: dict[str, str] = {}
    queue = [first]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == first:
                route = [node]
                while route[-1] != first:
                    route.append(came[route[-1]])
                return [first, *reversed(route[:-1]), first] if node != first else [first, first]
            if child not in came:
                came[child] = node
                queue.append(child)
    return component


def import_graph(roots: list[str], repo: Path = REPO) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    known = modules(roots, repo)
    return {name: imports(name, path, known) for name, path in known.items()}


def main(argv: list[str]) -> int:
    graph = import_graph(argv or list(DEFAULT_ROOTS))
    found = cycles(graph)
    for component in found:
        print(f"import cycle among {len(component)} modules: {' -> '.join(path_in(component, graph))}")
        print(f"  all of them: {', '.join(component)}")
    if not found:
        print(f"no import cycle among {len(graph)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
