"""publish_job and current_manifest: what the analyze job and the lookups will use."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest
from catalog_testkit import KINDS, job_output, write_job

from engine import fileio
from engine.catalog import Catalog, current_manifest, current_state, publish_job, schema_fingerprint
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError, StatisticsNotFoundError
from engine.lookup import TableStatistics

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.string())])
COLS = [{"name": "a", "type": "int64"}, {"name": "b", "type": "string"}]
FP = schema_fingerprint(SCHEMA)


def _extra(job: str, snap: str) -> dict:
    return {
        "format_version": "1",
        "table": "t",
        "table_uri": "/data/t",
        "snapshot": snap,
        "job_id": job,
        "created_at": "2026-01-01T00:00:00+00:00",
        "rows": 30,
        "bins": 1000,
        "columns": COLS,
        "schema": base64.b64encode(SCHEMA.serialize().to_pybytes()).decode(),
        "partitions": [],
        "user_statistics": [],
    }


def _publish_first_job(store_uri: str) -> None:
    """j1 at s1: p=0 (10 rows) and p=1 (20 rows), with the data fingerprints d-p=0 and d-p=1."""
    written = write_job(store_uri, "t", "j1", "s1", "2026-01-01T00:00:00.000+00:00", {"p=0": 10, "p=1": 20})
    publish_job(
        store_uri, job_output(store_uri, "t", "j1", "s1", [{**p, "data_fingerprint": f"d-{p['key']}"} for p in written["partitions"]], {}, FP)
    )


class CatalogStore:
    """What engine.lookup needs from a store, served by the catalog (the lead's wiring, in miniature)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def state(self, table: str):  # noqa: ANN201
        return current_state(self.root, table)


def test_publish_and_read_back(store_uri: str) -> None:
    with pytest.raises(StatisticsNotFoundError, match="no published statistics for table 't'"):
        current_manifest(store_uri, "t")
    written = write_job(store_uri, "t", "j1", "s1", "2026-01-01T00:00:00.000+00:00", {"p=0": 10, "p=1": 20}, [("a", "int64"), ("b", "string")])
    info = publish_job(store_uri, job_output(store_uri, "t", "j1", "s1", written["partitions"], {}, FP, extra=_extra("j1", "s1")))
    assert info.txn_id == 1
    m = current_manifest(store_uri, "t")
    assert (m["job_id"], m["snapshot"], m["rows"], m["bins"], m["columns"]) == ("j1", "s1", 30, 1000, COLS)
    assert m["run_uri"] == fileio.join(store_uri, "t", "runs", "j1")
    assert [(p["key"], p["rows"], p["job_id"]) for p in m["partitions"]] == [("p=0", 10, "j1"), ("p=1", 20, "j1")]
    assert m["partitions"][0]["files"]["statistics.parquet"] == fileio.join(store_uri, "t", "runs", "j1", "partitions", "p=0", "statistics.parquet")
    for uri in [*m["table_files"].values(), *(u for p in m["partitions"] for u in p["files"].values())]:
        assert fileio.exists(uri)
    assert m["catalog"]["txn_id"] == 1 and m["tombstones"] == []
    # sizes were looked up
    st = Catalog.open(store_uri, "t").state()
    assert all(r.size > 0 for e in st.partitions.values() for r in e.files.refs())
    assert st.table_statistics.schema_fingerprint == FP

    # what engine.lookup reads today works unchanged on the catalog's manifest
    stats = TableStatistics(CatalogStore(store_uri), "t")
    assert [(p.key, p.rows) for p in stats.partitions()] == [("p=0", 10), ("p=1", 20)]
    assert stats.job_id == "j1" and stats.snapshot == "s1" and stats.column_type("b") == pa.string()
    assert stats.file_uri("statistics.parquet", "p=1") == m["partitions"][1]["files"]["statistics.parquet"]
    assert stats.file_uri("histograms.parquet") == m["table_files"]["histograms.parquet"]

    # the next job: p=1 is gone upstream (tombstoned), p=2 is new; the manifest follows
    written = write_job(store_uri, "t", "j2", "s2", "2026-01-02T00:00:00.000+00:00", {"p=0": 11, "p=2": 5})
    publish_job(store_uri, job_output(store_uri, "t", "j2", "s2", written["partitions"], {}, FP, extra=_extra("j2", "s2")))
    m = current_manifest(store_uri, "t")
    assert [p["key"] for p in m["partitions"]] == ["p=0", "p=2"] and m["tombstones"] == ["p=1"]
    assert m["job_id"] == "j2" and m["catalog"]["txn_id"] == 2
    stats.refresh()
    assert [p.key for p in stats.partitions()] == ["p=0", "p=2"]


def test_publish_with_inherited_partitions(store_uri: str) -> None:
    _publish_first_job(store_uri)
    # j2 recomputes only p=1 and keeps p=0's statistics from j1
    write_job(store_uri, "t", "j2", "s2", "2026-01-02T00:00:00.000+00:00", {"p=1": 21})
    publish_job(
        store_uri,
        job_output(store_uri, "t", "j2", "s2", [{"key": "p=0", "inherited": True}, {"key": "p=1", "rows": 21, "data_fingerprint": "d2"}], {}, FP),
    )
    m = current_manifest(store_uri, "t")
    assert [(p["key"], p["job_id"], p["snapshot"]) for p in m["partitions"]] == [("p=0", "j1", "s1"), ("p=1", "j2", "s2")]
    assert m["partitions"][0]["files"]["statistics.parquet"].endswith("/runs/j1/partitions/p=0/statistics.parquet")
    assert m["rows"] == 31 and m["snapshot"] == "s2" and m["tombstones"] == []

    def publish_j3(partitions: list[dict], fingerprint: str) -> None:  # j3 with j2's table-level files
        table_files = {kind: f"runs/j2/table/{kind}.parquet" for kind in KINDS}
        publish_job(store_uri, job_output(store_uri, "t", "j3", "s3", partitions, table_files, fingerprint))

    # inheritance across a schema change is refused
    with pytest.raises(IncompatibleSchemaError, match="p=0"):
        publish_j3([{"key": "p=0", "inherited": True}], "other-schema")
    with pytest.raises(InvalidArgumentError, match="inherited but has no statistics"):
        publish_j3([{"key": "p=9", "inherited": True}], FP)
    assert Catalog.open(store_uri, "t").state().txn_id == 2


def test_an_inherited_partition_replaced_meanwhile_is_added_with_the_files_the_job_merged(store_uri: str) -> None:
    _publish_first_job(store_uri)
    first = Catalog.open(store_uri, "t").state()

    def planned(key: str) -> dict:  # what a job that planned on the first state publishes for an inherited partition
        e = first.partitions[key]
        files = {name: {"path": r.path, "size": r.size} for name, r in e.files.by_name().items()}
        return {
            "key": key,
            "inherited": True,
            "files": files,
            "rows": e.row_count,
            "data_fingerprint": e.data_fingerprint,
            "job_id": e.job_id,
            "snapshot": e.snapshot_id,
        }

    # a concurrent job replaces p=0 after j3 planned; j3 merged j1's p=0 into its table level
    write_job(store_uri, "t", "j2", "s2", "2026-01-02T00:00:00.000+00:00", {"p=0": 12})
    publish_job(store_uri, job_output(store_uri, "t", "j2", "s2", [{"key": "p=0", "rows": 12}, {"key": "p=1", "inherited": True}], {}, FP))
    write_job(store_uri, "t", "j3", "s1", "2026-01-03T00:00:00.000+00:00", {})
    info = publish_job(store_uri, job_output(store_uri, "t", "j3", "s1", [planned("p=0"), planned("p=1")], {}, FP))
    st = Catalog.open(store_uri, "t").state()
    assert st.partitions["p=0"].files == first.partitions["p=0"].files  # what j3 describes, not j2's
    assert (st.partitions["p=0"].job_id, st.partitions["p=0"].data_fingerprint, st.partitions["p=0"].added_in) == ("j1", "d-p=0", info.txn_id)
    assert st.partitions["p=1"] == first.partitions["p=1"]  # unchanged: kept, no action
    assert st.table_statistics.row_count == 30


def test_publish_checks_files(store_uri: str) -> None:
    with pytest.raises(StatisticsNotFoundError, match="statistics file missing: .*runs/nope/partitions/p=0/statistics.parquet"):
        publish_job(store_uri, job_output(store_uri, "t", "nope", "s", [{"key": "p=0", "rows": 1}], {}, FP))
    with pytest.raises(InvalidArgumentError, match="not below the table directory"):
        publish_job(
            store_uri,
            job_output(
                store_uri,
                "t",
                "j",
                "s",
                [{"key": "p=0", "rows": 1, "files": {"statistics": "s3://elsewhere/x.parquet", "frequencies": ("a", 1), "histograms": ("b", 1)}}],
                {},
                FP,
            ),
        )
    with pytest.raises(InvalidArgumentError, match="listed twice"):
        publish_job(store_uri, job_output(store_uri, "t", "j", "s", [{"key": "p=0", "rows": 1}, {"key": "p=0", "rows": 1}], {}, FP))
    assert Catalog.open(store_uri, "t").state().empty


@pytest.mark.ray
def test_publish_a_real_analyze_run(analyzed_sample, tmp_path) -> None:
    """An analyze run published through the catalog serves the same lookups as through CURRENT."""
    from engine.store import Store

    _table_path, store, result = analyzed_sample
    manifest = Store(store).current(result.table)
    publish_job(
        store,
        job_output(
            store,
            result.table,
            result.job_id,
            result.snapshot,
            [{"key": p["key"], "rows": p["rows"]} for p in manifest["partitions"]],
            {},
            schema_fingerprint(manifest["columns"]),
            extra=manifest,
        ),
    )
    via_catalog = TableStatistics(CatalogStore(store), result.table)
    via_pointer = TableStatistics(Store(store), result.table)
    assert via_catalog.partitions() == via_pointer.partitions()
    assert via_catalog.schema == via_pointer.schema
    columns = [c["name"] for c in manifest["columns"]][:5]
    assert via_catalog.statistics(columns).equals(via_pointer.statistics(columns))
    key = manifest["partitions"][0]["key"]
    assert via_catalog.statistics(columns, partition=key).equals(via_pointer.statistics(columns, partition=key))
    # the statistics files carry what rebuild needs: the rebuilt catalog agrees
    from engine.catalog import rebuild

    rebuild(store, result.table, replace=True)
    rebuilt = Catalog.open(store, result.table).state()
    published = {k: (e.files, e.row_count, e.schema_fingerprint) for k, e in rebuilt.partitions.items()}
    assert published == {
        p["key"]: (e.files, p["rows"], schema_fingerprint(manifest["columns"]))
        for p in manifest["partitions"]
        for e in [rebuilt.partitions[p["key"]]]
    }
    assert json.loads(rebuilt.table_statistics.properties["columns"]) == manifest["columns"]


def test_a_failed_current_write_after_the_commit_keeps_the_published_job(store_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """CURRENT is only a change signal: once the transaction is committed, failing to write it
    must not fail the job (whose failure handler would delete the files just published)."""
    from engine import fileio as fio
    from engine.store import Store

    written = write_job(store_uri, "t", "j1", "s1", "2026-01-01T00:00:00.000+00:00", {"p=0": 10})
    real = fio.write_bytes_atomic

    def failing(uri: str, data: bytes) -> None:
        if uri.endswith("/CURRENT"):
            raise OSError("disk full")
        real(uri, data)

    monkeypatch.setattr(fio, "write_bytes_atomic", failing)
    Store(store_uri).publish(job_output(store_uri, "t", "j1", "s1", written["partitions"], {}, FP, extra=_extra("j1", "s1")))
    st = Catalog.open(store_uri, "t").state()
    assert st.txn_id == 1 and st.job_id == "j1" and list(st.partitions) == ["p=0"]
