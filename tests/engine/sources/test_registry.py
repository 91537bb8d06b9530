"""The table format registry: every consumer's list of formats is the registry's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.sources import TableFormat, registry

REPO = Path(__file__).resolve().parents[3]


def test_enum_is_the_registry() -> None:
    assert tuple(f.value for f in TableFormat) == registry.NAMES == ("parquet", "iceberg", "delta", "hudi")


@pytest.mark.parametrize("name", registry.NAMES)
def test_each_format_has_an_opener_and_a_history(name: str) -> None:
    module = registry.implementation(name)
    assert callable(module.open_source) and callable(module.snapshots_since)


def test_console_choices_are_the_registry() -> None:
    from engine.cli.commands.analyze import analyze

    option = next(p for p in analyze.params if p.name == "table_format")
    assert tuple(option.type.choices) == registry.NAMES


def test_detection_order_and_fallback() -> None:
    assert [e.name for e in registry.detected()] == ["delta", "hudi", "iceberg"]
    assert registry.FALLBACK == "parquet" and registry.listed() == "parquet, iceberg, delta or hudi"


def test_registry_loads_no_pyarrow() -> None:
    code = "import sys; from engine.sources import registry; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), env={"PYTHONPATH": str(REPO)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
