"""docs/ARCHITECTURE.md against the code: its layer drawing is .importlinter's layers contract,
layer for layer, and every file or folder it names exists."""

from __future__ import annotations

import configparser
import re

from tests.docs.examples import REPO, blocks

ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
ROOTS = ("engine", "flight_server", "spark_bridge", "tests", "scripts", "bench", "docs")
_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:py|proto)|(?:" + "|".join(ROOTS) + r")/[\w./-]*)")


def _layers(text: str) -> list[str]:
    """Layers as `a | b` with single spaces, in order."""
    return [" | ".join(part.strip() for part in line.split("|")) for line in text]


def test_the_layer_drawing_is_the_import_contract() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    contract = [line for line in config["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    section = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1]
    drawing = next(b for b in blocks(ARCHITECTURE) if b.code.strip() and section.find(b.code) >= 0)
    drawn = [re.split(r"\s{2,}", line.strip())[0] for line in drawing.code.splitlines() if line.strip()]
    assert _layers(drawn) == _layers(contract)


def test_every_named_path_exists() -> None:
    files = [str(p.relative_to(REPO)) for root in ROOTS for p in (REPO / root).rglob("*") if "__pycache__" not in p.parts]
    missing = []
    for name in sorted(set(_PATH.findall(ARCHITECTURE.read_text(encoding="utf-8")))):
        name = name.rstrip("/.")
        if name.startswith(tuple(f"{root}/" for root in ROOTS)):
            found = (REPO / name).exists()
        else:  # a top-level file (setup.py), or a path within a package the paragraph names: some file ends so
            found = (REPO / name).is_file() or any(f == name or f.endswith("/" + name) for f in files)
        if not found:
            missing.append(name)
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"
