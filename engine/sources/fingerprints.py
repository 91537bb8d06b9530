"""Fingerprints of a source's data files: what tells an unchanged partition from a changed one.

A later analyze inherits a partition's statistics when its fingerprint is the one
the catalog recorded (engine/runtime/inheritance.py); the catalog stores them
as opaque strings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def partition_fingerprint(files: Iterable[tuple[Any, ...]]) -> str:
    """Fingerprint of one partition's data files: ``(relative path, size, mtime_ns)`` each,
    with the object store's ETag as a fourth element where there is one.

    Order-independent; the same construction as the table snapshot id of
    ``engine.sources.parquet`` (sha256 of the sorted entries as JSON, 32 hex
    digits). Any added, removed, rewritten or touched file changes it.
    """
    entries = sorted((str(p), int(s), None if m is None else int(m), *rest) for p, s, m, *rest in files)
    return _digest(entries)


def source_partition_fingerprints(source: Any) -> dict[str, str]:
    """``{partition key: fingerprint}`` of a TableSource (paths relative to the table root)."""
    root = getattr(source, "_root", None)
    prefix = root.rstrip("/") + "/" if root else ""
    out = {}
    for part in source.partitions():
        out[part.key] = partition_fingerprint(
            (f.path[len(prefix) :] if prefix and f.path.startswith(prefix) else f.path, f.size, f.mtime_ns)
            + (() if getattr(f, "etag", None) is None else (f.etag,))
            for f in part.files
        )
    return out
