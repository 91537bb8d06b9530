"""What readers get: a table's published statistics as one typed value.

The lookups, the CLI and the Flight server read a :class:`PublishedState`, built
from a catalog state (engine/catalog/publish.py) or, for a table published before
the catalog existed, from its job's output. ``as_manifest()`` is its JSON form
(the shape earlier versions handed readers as a dict, still used for JSON output).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.exceptions import CatalogCorruptError


@dataclass(frozen=True)
class CatalogPosition:
    """Which catalog transaction a state is."""

    txn_id: int
    txn_uuid: str
    committed_at: str  # ISO 8601


@dataclass(frozen=True)
class PublishedPartition:
    key: str
    rows: int
    job_id: str  # the job that computed its files (inherited partitions: an earlier one)
    snapshot_id: str
    files: Mapping[str, str]  # file name -> URI
    data_fingerprint: str = ""  # of its data files (engine/sources/fingerprints.py); "" when unknown


@dataclass(frozen=True)
class PublishedState:
    table: str
    job_id: str
    snapshot_id: str
    run_uri: str  # the publishing job's run directory
    schema_fingerprint: str
    rows: int
    columns: tuple[Mapping[str, str], ...]  # {"name", "type"} per leaf column
    table_files: Mapping[str, str]  # file name -> URI
    partitions: tuple[PublishedPartition, ...]
    tombstones: tuple[str, ...] = ()
    catalog: CatalogPosition | None = None  # None: a table published before the catalog
    #: file URI -> content checksum recorded when it was written (files without one: not checked)
    checksums: Mapping[str, str] = field(default_factory=dict)
    #: the rest of what the job recorded: bins, created_at, user_statistics, table_uri, ...
    properties: Mapping[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema (decoded once: every lookup object asks for it).

        A state published without one (by hand, through the catalog API) cannot be read:
        CatalogCorruptError says so in one line, naming the table and its transaction."""
        encoded = self.properties.get("schema")
        if not encoded:
            at = f" (catalog transaction {self.catalog.txn_id})" if self.catalog else ""
            raise CatalogCorruptError(
                f"the published statistics of table {self.table!r}{at} record no schema: the state was published without one; analyze the table again"
            )
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(encoded)))

    @property
    def bins(self) -> int | None:
        return self.properties.get("bins")

    @property
    def created_at(self) -> str | None:
        return self.properties.get("created_at")

    @property
    def table_uri(self) -> str | None:
        """Where the analyzed table's data is (None when not recorded: a DataFrame)."""
        return self.properties.get("table_uri") or None

    @staticmethod
    def from_manifest(doc: Mapping[str, Any]) -> PublishedState:
        catalog = doc.get("catalog")
        return PublishedState(
            table=doc["table"],
            job_id=doc["job_id"],
            snapshot_id=doc["snapshot"],
            run_uri=doc["run_uri"],
            schema_fingerprint=doc.get("schema_fingerprint", ""),
            rows=int(doc.get("rows") or 0),
            columns=tuple(doc.get("columns") or ()),
            table_files=dict(doc.get("table_files") or {}),
            partitions=tuple(
                PublishedPartition(
                    p["key"], int(p["rows"]), p.get("job_id", doc["job_id"]), p.get("snapshot", doc["snapshot"]), dict(p.get("files") or {})
                )
                for p in doc["partitions"]
            ),
            tombstones=tuple(doc.get("tombstones") or ()),
            catalog=CatalogPosition(int(catalog["txn_id"]), catalog["txn_uuid"], catalog["committed_at"]) if catalog else None,
            checksums=dict(doc.get("checksums") or {}),
            properties={k: v for k, v in doc.items() if k not in _OWN},
        )

    def as_manifest(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.properties)
        doc.update(
            table=self.table,
            job_id=self.job_id,
            snapshot=self.snapshot_id,
            run_uri=self.run_uri,
            schema_fingerprint=self.schema_fingerprint,
            rows=self.rows,
            columns=[dict(c) for c in self.columns],
            table_files=dict(self.table_files),
            partitions=[
                {"key": p.key, "rows": p.rows, "job_id": p.job_id, "snapshot": p.snapshot_id, "files": dict(p.files)} for p in self.partitions
            ],
            tombstones=list(self.tombstones),
            checksums=dict(self.checksums),
        )
        if self.catalog is not None:
            doc["catalog"] = {"txn_id": self.catalog.txn_id, "txn_uuid": self.catalog.txn_uuid, "committed_at": self.catalog.committed_at}
        return doc


_OWN = frozenset(
    {
        "table",
        "job_id",
        "snapshot",
        "run_uri",
        "schema_fingerprint",
        "rows",
        "columns",
        "table_files",
        "partitions",
        "tombstones",
        "catalog",
        "checksums",
    }  # fmt: skip
)
