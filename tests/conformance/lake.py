"""The conformance matrix's tables: each writer's table written and analyzed once per session
through the CLI (``metastore analyze``, in this process, on the session's Ray) into one shared
store, with the oracle's view of it; and a runner of read commands as fresh processes (the way
a user runs them: no pandas loaded, the real start-up). The fixtures ``lake`` and ``cli`` are
in tests/conftest.py, so that other test folders (tests/spark_bridge) share the same store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.conformance.oracle import read_table
from tests.conformance.writers import WRITERS, Written

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Analyzed:
    """One writer's table as the matrix uses it: the table written, the analyze's exit code
    and output, and the oracle's table (read by the format's own library)."""

    name: str
    written: Written
    exit_code: int
    output: str
    data: pa.Table


@dataclass
class Cli:
    """``metastore`` as a fresh process (this checkout's code) over the matrix's store."""

    store: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli.console", "--store", self.store, *args],
            capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300,
        )  # fmt: skip
        assert "Traceback" not in proc.stderr + proc.stdout, f"metastore {' '.join(args)}:\n{proc.stderr}"
        if check:
            assert proc.returncode == 0, f"metastore {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run("--output", "json", *args).stdout)


class Lake:
    """The writers' tables, each written and analyzed on first use."""

    def __init__(self, root: Path, store: str) -> None:
        self.root, self.store, self._done = root, store, {}

    def get(self, name: str) -> Analyzed:
        if name not in self._done:
            from click.testing import CliRunner

            from engine.cli.console import metastore

            written = WRITERS[name](self.root / name)
            result = CliRunner().invoke(metastore, ["--store", self.store, "analyze", written.path, "--name", name])
            self._done[name] = Analyzed(name, written, result.exit_code, result.output, read_table(written))
        return self._done[name]
