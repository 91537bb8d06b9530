"""What a finished analyze job hands the catalog: typed, with every file's size.

The job builds a :class:`JobOutput` as it writes its files (the writers return
their sizes, so nothing is listed again), :func:`engine.catalog.publish_job`
turns it into one transaction, and ``runs/<job>/manifest.json`` is its JSON form,
kept so that a job can be republished (a roll-back) and a catalog rebuilt from
the files alone.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.catalog.model import (
    FILE_INDEX_PROPERTY,
    FILE_NAMES,
    FREQUENCY_SEGMENTS_PROPERTY,
    KINDS,
    TABLE_COUNTS_PROPERTY,
    FileRef,
    StatisticsFiles,
    extra_files,
)
from engine.catalog.paths import RunLayout
from engine.exceptions import InvalidArgumentError

#: the table properties that name files (``engine.catalog.model.extra_files``)
_FILE_PROPERTIES = frozenset({FILE_INDEX_PROPERTY, FREQUENCY_SEGMENTS_PROPERTY, TABLE_COUNTS_PROPERTY})
#: manifest.json fields that are the output's own (the others are its properties)
_OWN = frozenset({"table", "job_id", "snapshot", "partitions", "table_files", "schema_fingerprint", "run_uri"})


def manifest_properties(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The table properties a manifest.json holds (what readers need beyond the catalog's own fields)."""
    return {k: v for k, v in doc.items() if k not in _OWN}


@dataclass(frozen=True)
class JobPartition:
    """One partition of the analyzed snapshot, as the job leaves it."""

    key: str
    row_count: int
    #: its three files; None only with ``inherited``: kept as the catalog has them
    files: StatisticsFiles | None
    data_fingerprint: str = ""
    #: the statistics carried over from an earlier job unchanged (no action in the transaction);
    #: with ``files`` too, kept only while the catalog still names those files
    inherited: bool = False
    job_id: str = ""  # the job that computed its files ("": this job)
    snapshot_id: str = ""  # the source snapshot they describe ("": this job's)

    def __post_init__(self) -> None:
        if self.files is None and not self.inherited:
            raise InvalidArgumentError(f"partition {self.key!r}: a recomputed partition needs its files")


@dataclass(frozen=True)
class JobOutput:
    table: str
    job_id: str
    snapshot_id: str
    schema_fingerprint: str
    partitions: tuple[JobPartition, ...]
    table_files: StatisticsFiles
    #: what readers need beyond the catalog's own fields (columns, schema, bins, ...): JSON values
    properties: Mapping[str, Any] = field(default_factory=dict)
    row_count: int | None = None  # None: the sum of the partitions'

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "properties", dict(self.properties))
        seen: set[str] = set()
        for p in self.partitions:
            if p.key in seen:
                raise InvalidArgumentError(f"partition {p.key!r} is listed twice")
            seen.add(p.key)
        if not self.schema_fingerprint:
            raise InvalidArgumentError("a job output needs its schema fingerprint (engine.catalog.schema_fingerprint)")
        refs = [ref for files in [self.table_files] + [p.files for p in self.partitions if p.files is not None] for ref in files.refs()]
        try:  # the table level's files its properties name (file index, frequency segments, table counts)
            refs += extra_files({k: json.dumps(v) for k, v in self.properties.items() if k in _FILE_PROPERTIES})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidArgumentError(
                f"the table properties {', '.join(sorted(_FILE_PROPERTIES & set(self.properties)))} must name files as "
                f'{{"path", "size", "checksum"}} ({type(exc).__name__}: {exc})'
            ) from None
        for ref in refs:
            if "://" in ref.path or ref.path.startswith("/") or ".." in ref.path.split("/"):
                raise InvalidArgumentError(f"statistics file {ref.path!r} is not below the table directory")

    def republished(self) -> JobOutput:
        """The same statistics as a new transaction names them: every partition with its own files."""
        return replace(self, partitions=tuple(replace(p, inherited=False) for p in self.partitions))

    # ------------------------------------------------------------ manifest.json
    def to_json(self) -> bytes:
        doc: dict[str, Any] = dict(self.properties)
        doc.update(
            table=self.table,
            job_id=self.job_id,
            snapshot=self.snapshot_id,
            schema_fingerprint=self.schema_fingerprint,
            rows=self.row_count if self.row_count is not None else sum(p.row_count for p in self.partitions),
            table_files=_files_doc(self.table_files),
            partitions=[_partition_doc(p) for p in self.partitions],
        )
        # one partition a line: readable, and written by json's C encoder (an indent makes
        # json.dumps fall back to its pure-Python one: ~0.15 ms a partition of the driver)
        head = json.dumps(doc | {"partitions": []}, separators=(",", ":"))
        lines = ",\n".join(json.dumps(p, separators=(",", ":")) for p in doc["partitions"])
        return (head[: -len("[]}")] + "[\n" + lines + "\n]}").encode()

    @staticmethod
    def from_json(data: bytes, size_of: Callable[[str], int], fingerprint: Callable[[list[Any]], str]) -> JobOutput:
        """Read a manifest.json, this version's or an older one (paths by the run layout,
        no sizes, no schema fingerprint: ``size_of`` and ``fingerprint`` supply them)."""
        doc = json.loads(data)
        run = RunLayout(doc["job_id"])

        def files(given: Mapping[str, Any] | None, default: Callable[[str], str]) -> StatisticsFiles:
            refs = {}
            for kind in KINDS:
                name = FILE_NAMES[kind]
                value = (given or {}).get(name) or (given or {}).get(kind)
                path = value["path"] if isinstance(value, Mapping) else (value or default(name))
                size = value.get("size") if isinstance(value, Mapping) else None
                checksum = str(value.get("checksum") or "") if isinstance(value, Mapping) else ""
                refs[kind] = FileRef(path, int(size) if size is not None else size_of(path), checksum)
            return StatisticsFiles(**refs)

        partitions = tuple(
            JobPartition(
                key=p["key"],
                row_count=int(p["rows"]),
                files=files(p.get("files"), functools.partial(run.partition_file, p["key"])),
                data_fingerprint=p.get("data_fingerprint") or "",
                inherited=bool(p.get("inherited")),
                job_id=p.get("job_id") or "",
                snapshot_id=p.get("snapshot") or "",
            )
            for p in doc["partitions"]
        )
        return JobOutput(
            table=doc["table"],
            job_id=doc["job_id"],
            snapshot_id=doc["snapshot"],
            schema_fingerprint=doc.get("schema_fingerprint") or fingerprint(doc["columns"]),
            partitions=partitions,
            table_files=files(doc.get("table_files"), run.table_file),
            properties=manifest_properties(doc),
            row_count=int(doc["rows"]) if doc.get("rows") is not None else None,
        )


def _files_doc(files: StatisticsFiles) -> dict[str, dict[str, Any]]:
    return {name: {"path": ref.path, "size": ref.size, "checksum": ref.checksum} for name, ref in files.by_name().items()}


def _partition_doc(p: JobPartition) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": p.key, "rows": p.row_count, "data_fingerprint": p.data_fingerprint}
    if p.files is not None:
        doc["files"] = _files_doc(p.files)
    if p.inherited:
        doc["inherited"] = True
    if p.job_id:
        doc["job_id"] = p.job_id
    if p.snapshot_id:
        doc["snapshot"] = p.snapshot_id
    return doc
