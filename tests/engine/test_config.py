"""Configuration is read in one place (engine/config.py) and documented in one table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import config

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "flight_server", "spark_bridge")


def test_every_variable_is_documented() -> None:
    doc = (REPO / "docs" / "CONFIGURATION.md").read_text()
    for v in config.VARIABLES:
        assert f"`{v.name}`" in doc, f"{v.name} is not in docs/CONFIGURATION.md"


def test_no_other_module_reads_a_declared_variable() -> None:
    names = "|".join(re.escape(v.name) for v in config.VARIABLES)
    reads = re.compile(rf"(environ(\.get)?\(|environ\[|getenv\()\s*[\"']({names})[\"']")
    offenders = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if path == REPO / "engine" / "config.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if reads.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "read through engine.config instead:\n" + "\n".join(offenders)


def test_get_takes_the_first_non_blank_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "  ")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert config.get(config.AWS_ENDPOINT_URL_S3, config.AWS_ENDPOINT_URL) == "http://127.0.0.1:9000"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert config.get(config.AWS_ENDPOINT_URL_S3, config.AWS_ENDPOINT_URL) is None
