"""Fixtures of the predicate tests: a DuckDB connection per module (the row-level oracle)."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    c = duckdb.connect()
    yield c
    c.close()
