"""Statistics tied to table snapshots: fingerprints and inheritance.

A table snapshot (``TableSource.snapshot_id``) fingerprints every data file.
Per partition, :func:`partition_fingerprint` does the same over the partition's
files, so a new snapshot's partitions whose fingerprint is unchanged can keep
their statistics (:func:`inherit`) instead of being recomputed - provided the
columns are the same (:func:`schema_fingerprint`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.catalog.model import CatalogState, PartitionEntry
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError
from engine.sources.fingerprints import partition_fingerprint, source_partition_fingerprints  # noqa: F401 - re-exported

__all__ = [
    "InheritPlan",
    "inherit",
    "partition_fingerprint",
    "schema_fingerprint",
    "source_partition_fingerprints",
]


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


def schema_fingerprint(columns: pa.Schema | Iterable[Any]) -> str:
    """Fingerprint of the columns statistics are computed for: ``(name, type)`` per leaf column, in order.

    Accepts an Arrow schema (flattened to leaf columns as statistics.parquet has
    them: ``parent.child``), the manifest's ``columns`` list (``{"name", "type"}``
    dicts) or ``(name, type)`` pairs; types as ``str(arrow type)``, which is what
    the ``type`` column of statistics.parquet holds. The same columns give the
    same fingerprint whichever form they come in.
    """
    if isinstance(columns, pa.Schema):
        from engine.columns import leaf_columns

        pairs = [(leaf.name, str(leaf.type)) for leaf in leaf_columns(columns)]
    else:
        pairs = []
        for c in columns:
            if isinstance(c, Mapping):
                pairs.append((str(c["name"]), str(c["type"])))
            else:
                name, typ = c
                pairs.append((str(name), str(typ)))
    return _digest(pairs)


@dataclass(frozen=True)
class InheritPlan:
    """What a new snapshot can keep from the previous state."""

    inherited: dict[str, PartitionEntry]  # unchanged partitions: their statistics carry over
    recompute: list[str]  # keys whose statistics must be computed
    dropped: list[str]  # live before, absent from the new snapshot (tombstone them)
    reasons: dict[str, str] = field(default_factory=dict)  # key -> why it is recomputed


def inherit(
    previous: CatalogState | None,
    new_partitions: Mapping[str, str] | Iterable[tuple[str, str]],
    schema_fingerprint: str,
    *,
    strict: bool = False,
) -> InheritPlan:
    """Decide which partitions of a new snapshot keep their statistics.

    ``new_partitions``: ``{key: partition_fingerprint}`` of the new snapshot.
    A partition is inherited when the previous state has it live, with the same
    data fingerprint, and with statistics computed for the same schema
    fingerprint. Statistics are never inherited across a schema change: such
    partitions are recomputed (reason ``"schema changed"``), and with
    ``strict=True`` the schema change raises :class:`IncompatibleSchemaError`.
    """
    new = dict(new_partitions)
    if not schema_fingerprint:
        raise InvalidArgumentError("inherit needs the new snapshot's schema fingerprint")
    live = previous.partitions if previous is not None else {}
    inherited: dict[str, PartitionEntry] = {}
    recompute: list[str] = []
    reasons: dict[str, str] = {}
    for key in sorted(new):
        old = live.get(key)
        if old is None:
            why = "tombstoned" if previous is not None and key in previous.tombstones else "new partition"
        elif old.schema_fingerprint != schema_fingerprint:
            if strict:
                raise IncompatibleSchemaError(
                    f"partition {key!r}: statistics were computed for schema {old.schema_fingerprint or '(unknown)'}, "
                    f"the new snapshot has schema {schema_fingerprint}; they cannot be inherited"
                )
            why = "schema changed"
        elif not old.data_fingerprint or not new[key]:
            why = "no data fingerprint"
        elif old.data_fingerprint != new[key]:
            why = "data changed"
        else:
            inherited[key] = old
            continue
        recompute.append(key)
        reasons[key] = why
    dropped = sorted(k for k in live if k not in new)
    return InheritPlan(inherited=inherited, recompute=recompute, dropped=dropped, reasons=reasons)
