"""The analyze action under ``--analyze-root`` cannot be sent out of the roots by a table's own
metadata (issue #33): a Delta table inside the root whose add action names a file outside
(``../``, an absolute ``file://`` URI), or an Iceberg table whose manifest does, fails its job
with one line naming the entry; the outside file's values are never published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flight_testkit import running_server

from tests.engine.sources.test_locations import SECRET, delta_naming, iceberg_naming, secret_file

pytestmark = pytest.mark.ray


def test_a_table_naming_files_outside_the_roots_fails_its_job(tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    root = tmp_path / "root"
    outside = secret_file(tmp_path / "outside")
    tables = {
        "up": (delta_naming(root / "up", "../../outside/x.parquet"), "Delta add action '../../outside/x.parquet'"),
        "uri": (delta_naming(root / "uri", f"file://{outside}"), f"Delta add action 'file://{outside}'"),
        "ice": (iceberg_naming(root / "lake", outside), f"Iceberg manifest entry (data file) 'file://{outside}'"),
    }
    store = str(tmp_path / "store")
    with running_server(store, poll_interval=0, analyze_roots=(str(root),)) as server, MetastoreClient(server.location) as c:
        for name, (uri, entry) in tables.items():
            status = c.wait_analyze(c.analyze(uri, name=name), timeout=300)
            assert status["state"] == "failed", status
            assert entry in status["error"] and "outside the table's location or a data root" in status["error"], status
            assert "\n" not in status["error"] and SECRET not in json.dumps(status)
        assert c.tables().num_rows == 0  # nothing published
