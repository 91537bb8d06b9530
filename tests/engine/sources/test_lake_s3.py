"""Iceberg, Delta and Hudi tables on a real S3-compatible server (moto on loopback),
analyzed into an S3 store; statistics against DuckDB over the format's own read."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine import fileio
from engine.api import analyze, open_statistics
from engine.cli.console import metastore
from engine.sources import TableFormat, detect_format, snapshots_since
from tests.engine.sources.lake_helpers import batch, check_statistics

pytestmark = pytest.mark.ray


def test_delta_on_s3(s3_server: str, ray_runtime: None) -> None:
    from deltalake import DeltaTable, write_deltalake

    uri = "s3://bucket/lake/delta_orders"
    options = {**fileio.object_store_options(uri), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(uri, batch(2_000, seed=1), partition_by=["part"], storage_options=options)
    DeltaTable(uri, storage_options=options).delete("id % 5 = 0")
    assert detect_format(uri) is TableFormat.DELTA
    result = analyze(uri, store="s3://bucket/stats", user_statistics=[])
    data = DeltaTable(uri, storage_options=options).to_pyarrow_table()
    assert result.snapshot == "1" and result.rows == data.num_rows == 1_600
    assert check_statistics(open_statistics("s3://bucket/stats", "delta_orders"), data) > 0
    assert snapshots_since(uri, "0") == 1


def test_iceberg_on_s3(s3_server: str, ray_runtime: None, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "s3test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse="s3://bucket/warehouse", **fileio.pyiceberg_properties("s3://bucket")
    )
    catalog.create_namespace("db")
    data = batch(2_000, seed=2)
    table = catalog.create_table("db.events", schema=data.schema)
    table.append(data)
    table.delete("id < 500")
    location = table.location()
    assert location.startswith("s3://") and detect_format(location) is TableFormat.ICEBERG
    result = analyze(location, store="s3://bucket/stats", user_statistics=[])
    live = catalog.load_table("db.events").scan().to_arrow()
    assert result.rows == live.num_rows == 1_500
    assert check_statistics(open_statistics("s3://bucket/stats", "events"), live) > 0


def test_hudi_on_s3(s3_server: str, ray_runtime: None, tmp_path: Path) -> None:
    import hudi

    from tests.engine.sources.test_hudi import ZIPS, _id

    zipped = [z for z in ZIPS if _id(z) == "avro/v6_trips_8i3d"]
    if not zipped:
        pytest.skip("the shared Hudi tables are not available (../shared)")
    with zipfile.ZipFile(zipped[0]) as f:
        f.extractall(tmp_path)
    local = tmp_path / "v6_trips_8i3d"
    uri = "s3://bucket/lake/v6_trips_8i3d"
    fs, path = fileio.resolve(uri)
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    assert detect_format(uri) is TableFormat.HUDI
    result = analyze(uri, store="s3://bucket/stats", user_statistics=[])
    import pyarrow as pa

    data = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(str(local)).build().read())
    assert result.rows == data.num_rows == 5
    assert check_statistics(open_statistics("s3://bucket/stats", "v6_trips_8i3d"), data) > 0


@pytest.fixture
def lake_tables(s3_server: str, tmp_path: Path) -> dict[str, str]:
    """A Delta and an Iceberg table on the S3 server (written with its credentials)."""
    from deltalake import write_deltalake
    from pyiceberg.catalog.sql import SqlCatalog

    delta = f"s3://bucket/lake/creds_delta_{tmp_path.name}"
    options = {**fileio.object_store_options(delta), "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    write_deltalake(delta, batch(300, seed=3), partition_by=["part"], storage_options=options)
    catalog = SqlCatalog(
        "creds", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"s3://bucket/wh_{tmp_path.name}", **fileio.pyiceberg_properties("s3://bucket")
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.creds", schema=batch(1, seed=0).schema)
    table.append(batch(300, seed=4))
    return {"delta": delta, "iceberg": table.location()}


def test_missing_credentials_are_one_clear_line_naming_the_table(lake_tables: dict[str, str], ray_runtime: None, tmp_path: Path, monkeypatch) -> None:
    from moto import settings

    from engine.exceptions import AccessDeniedError, StatisticsNotFoundError

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # like a private bucket: no anonymous reads
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to find here
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    store = str(tmp_path / "store")
    for uri in lake_tables.values():
        with pytest.raises(AccessDeniedError, match="no S3 credentials found") as refused:
            analyze(uri, store=store, user_statistics=[])
        assert str(refused.value).startswith(f"{uri}: ")
    # a local table into an S3 store: the store is named
    local = tmp_path / "local"
    local.mkdir()
    pq.write_table(batch(100, seed=5), local / "a.parquet")
    with pytest.raises(AccessDeniedError, match=r"^store s3://bucket/stats-nocreds: no S3 credentials found"):
        analyze(str(local), store="s3://bucket/stats-nocreds", user_statistics=[])
    with pytest.raises(StatisticsNotFoundError):
        open_statistics(store, "creds")  # nothing published
    cli = CliRunner().invoke(metastore, ["analyze", lake_tables["delta"], "--store", store])
    assert cli.exit_code != 0
    assert cli.stderr.strip().count("\n") == 0 and lake_tables["delta"] in cli.stderr and "no S3 credentials found" in cli.stderr


def test_refused_credentials_are_one_clear_line_naming_the_table(lake_tables: dict[str, str], ray_runtime: None, tmp_path: Path, monkeypatch) -> None:
    from moto import settings

    from engine.exceptions import AccessDeniedError

    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks signatures: "testing" is no key it knows
    store = str(tmp_path / "store")
    for uri in lake_tables.values():
        with pytest.raises(AccessDeniedError, match="refused the request .access denied") as refused:
            analyze(uri, store=store, user_statistics=[])
        assert str(refused.value).startswith(f"{uri}: ")
    cli = CliRunner().invoke(metastore, ["analyze", lake_tables["iceberg"], "--store", store])
    assert cli.exit_code != 0
    assert cli.stderr.strip().count("\n") == 0 and lake_tables["iceberg"] in cli.stderr and "access denied" in cli.stderr
    with pytest.raises(AccessDeniedError, match=r"^store s3://bucket/stats: the object store refused"):
        open_statistics("s3://bucket/stats", "delta_orders")


def test_cli_and_flight_analyze_tables_on_s3(lake_tables: dict[str, str], ray_runtime: None, tmp_path: Path) -> None:
    """The same tables through the CLI (table and store on S3) and the Flight analyze action
    (an S3 root the operator allows): the statistics of the format's own read."""
    import json
    import time

    from deltalake import DeltaTable
    from pyarrow import flight
    from pyiceberg.table import StaticTable

    from flight_server.server import MetastoreFlightServer, ServerConfig

    delta, iceberg = lake_tables["delta"], lake_tables["iceberg"]
    store = f"s3://bucket/stats-cli-{tmp_path.name}"
    cli = CliRunner().invoke(metastore, ["analyze", delta, "--store", store])
    assert cli.exit_code == 0, cli.output
    name = delta.rsplit("/", 1)[1]
    data = DeltaTable(delta, storage_options=fileio.object_store_options(delta)).to_pyarrow_table()
    assert check_statistics(open_statistics(store, name), data) > 0
    shown = CliRunner().invoke(metastore, ["show", name, "--store", store])
    assert shown.exit_code == 0 and "snapshot 0" in shown.output, shown.output

    server = MetastoreFlightServer(ServerConfig(store=store, port=0, poll_interval=0, analyze_roots=("s3://bucket/",)))
    client = flight.connect(server.location)

    def action(kind: str, body: dict) -> dict:
        return json.loads(list(client.do_action(flight.Action(kind, json.dumps(body).encode())))[0].body.to_pybytes())

    try:
        job = action("analyze", {"table_uri": iceberg})
        deadline = time.monotonic() + 300
        while (status := action("analyze_status", {"job": job["job"]}))["state"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert status["state"] == "succeeded", status
    finally:
        client.close()
        server.shutdown()
    metadata = sorted(fileio.list_files(f"{iceberg}/metadata"), key=lambda f: f.path)
    newest = [f.path for f in metadata if f.path.endswith(".metadata.json")][-1]
    live = (
        StaticTable.from_metadata(
            f"s3://{newest.split('://', 1)[-1]}" if "://" in newest else f"s3://{newest}", properties=fileio.pyiceberg_properties(iceberg)
        )
        .scan()
        .to_arrow()
    )
    assert status["result"]["rows"] == live.num_rows == 300
    assert check_statistics(open_statistics(store, "creds"), live) > 0
