"""Fixtures of the catalog tests: every store-facing test runs on a local directory and on S3 (moto)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `slow` is documented as excluded from the default run (pyproject.toml); the
    # catalog's long property runs honour that unless selected with -m slow.
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: select with -m slow")
    for item in items:
        if "slow" in item.keywords and _HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(params=["local", "s3"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store: a local directory, or ``s3://bucket/<unique prefix>`` on the moto server."""
    if request.param == "local":
        yield str(tmp_path / "store")
    else:
        request.getfixturevalue("s3_server")
        yield f"s3://bucket/catalog-tests/{uuid.uuid4().hex}"


@pytest.fixture
def s3_store(s3_server: str) -> str:
    return f"s3://bucket/catalog-tests/{uuid.uuid4().hex}"
