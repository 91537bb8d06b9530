"""The snapshot identity of a Spark DataFrame: content-based where that is cheap and sound.

A statistics snapshot names the data it describes, so that analyzing the same
data again is recognisable (and different data never looks the same). For a
DataFrame that is possible when its rows are a deterministic function of files:

- every leaf of the analyzed plan reads files (``LogicalRelation`` over a
  ``HadoopFsRelation``: ``spark.read.parquet/csv/...`` and data-source catalog
  tables) or is a constant (``Range``, ``OneRowRelation``), and
- the plan is deterministic (no ``rand()``, ``uuid()``, ``current_timestamp()``...),

then the identity is a digest of the plan text (expression ids ``#12L`` removed:
they differ between sessions) and of every input file's ``(path, size, mtime)``
(``df.inputFiles()``, statted with one recursive listing of their common folder),
plus the partitioning and schema. A rewritten or touched file changes it, as it
does a Parquet table's snapshot id.

Anything else - rows from local Python data (``LogicalRDD``, ``LocalRelation``,
whose plan text does not contain the data), Hive serde tables (``inputFiles()``
gives only their folder), JDBC or v2 sources, streams,
non-deterministic plans, files that cannot be statted - gets a *job-unique*
identity (a random id): never equal to another analyze's, so nothing can be
mistaken for unchanged data.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from engine import fileio
from spark_bridge.catalog import fileio_uri

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import DataFrame

__all__ = ["DataFrameIdentity", "FILE_RELATIONS", "CONSTANT_LEAVES", "content_digest", "dataframe_identity", "normalize_plan"]

#: plan leaves whose rows come from files (statted through df.inputFiles())
FILE_RELATIONS = frozenset({"HadoopFsRelation"})
#: plan leaves whose rows are in the plan text itself
CONSTANT_LEAVES = frozenset({"Range", "OneRowRelation"})

_EXPR_ID = re.compile(r"#\d+L?")
_IDENTITY_VERSION = "dataframe-identity-1"


@dataclass(frozen=True)
class DataFrameIdentity:
    snapshot_id: str  # 32 hex digits
    content_based: bool
    reason: str  # what it is based on, or why it is job-unique
    files: int = 0  # input files fingerprinted


def normalize_plan(plan: str) -> str:
    """A plan's text without expression ids (``id#12L`` -> ``id``), which change from session to session."""
    return _EXPR_ID.sub("", plan)


def content_digest(plan: str, files: Sequence[tuple[str, int, int | None]], partition_by: Sequence[str], schema: str) -> str:
    """The content identity: sha256 over the normalized plan, the sorted files, partitioning and schema."""
    payload = {
        "v": _IDENTITY_VERSION,
        "plan": normalize_plan(plan),
        "files": sorted([str(p), int(s), None if m is None else int(m)] for p, s, m in files),
        "partition_by": list(partition_by),
        "schema": schema,
    }
    return hashlib.sha256(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()[:32]


def _job_unique(reason: str) -> DataFrameIdentity:
    return DataFrameIdentity(uuid.uuid4().hex, False, reason)


def _leaf_kinds(plan: Any) -> list[str]:
    """The kind of every leaf of a plan: the relation's class for LogicalRelation, else the node's class."""
    leaves = plan.collectLeaves()
    kinds = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        kind = str(leaf.getClass().getSimpleName())
        if kind == "LogicalRelation":
            kind = str(leaf.relation().getClass().getSimpleName())
        kinds.append(kind)
    return kinds


def _stat_files(uris: list[str]) -> list[tuple[str, int, int | None]] | str:
    """``(uri, size, mtime_ns)`` of every file, or why they cannot be statted."""
    decoded = [fileio_uri(u) for u in uris]
    by_fs: dict[int, tuple[pafs.FileSystem, list[tuple[str, str]]]] = {}
    for uri in decoded:
        scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
        if scheme not in ("", "s3", "s3a", "s3n"):
            return f"input files on {scheme}:// are not statted"
        fs, path = fileio.resolve(uri)
        by_fs.setdefault(id(fs), (fs, []))[1].append((uri, path))
    out: list[tuple[str, int, int | None]] = []
    for fs, entries in by_fs.values():
        wanted = {path: uri for uri, path in entries}
        root = os.path.commonpath([p for p in wanted]) if len(wanted) > 1 else os.path.dirname(next(iter(wanted)))
        found = {}
        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
            if info.path in wanted and info.type == pafs.FileType.File:
                found[info.path] = (int(info.size or 0), info.mtime_ns)
        missing = [wanted[p] for p in wanted if p not in found]
        if missing:
            return f"input file {missing[0]} was not found"
        out.extend((wanted[p], size, mtime) for p, (size, mtime) in found.items())
    return out


def dataframe_identity(df: DataFrame, partition_by: Sequence[str], schema: str) -> DataFrameIdentity:
    """The snapshot identity of ``df`` (content-based if its rows are a deterministic function of files)."""
    try:
        plan = df._jdf.queryExecution().analyzed()
        kinds = _leaf_kinds(plan)
        if not bool(plan.deterministic()):
            return _job_unique("the plan is not deterministic")
        other = sorted({k for k in kinds if k not in FILE_RELATIONS and k not in CONSTANT_LEAVES})
        if other:
            return _job_unique(f"rows come from {', '.join(other)}, which has no content fingerprint")
        text = str(plan.toString())
        uris = [str(u) for u in df.inputFiles()] if any(k in FILE_RELATIONS for k in kinds) else []
    except Exception as exc:  # a JVM surprise must not fail the analyze; the id is then job-unique
        return _job_unique(f"the plan could not be inspected ({type(exc).__name__})")
    stats = _stat_files(uris) if uris else []
    if isinstance(stats, str):
        return _job_unique(stats)
    basis = f"plan and {len(stats)} input file(s)" if stats else "plan (constant rows)"
    return DataFrameIdentity(content_digest(text, stats, partition_by, schema), True, basis, len(stats))
