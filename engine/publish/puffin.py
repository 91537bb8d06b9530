"""Iceberg's Puffin container (format/puffin-spec.md), written: pure bytes in, bytes out.

A file is ``Magic Blob_1 ... Blob_n Footer`` with ``Magic`` the four bytes ``PFA1``;
the footer is ``Magic FooterPayload FooterPayloadSize Flags Magic``: the payload an
uncompressed UTF-8 JSON ``FileMetadata`` (``blobs``, ``properties``), its size a
4-byte little-endian signed integer, the flags four bytes (all zero: the payload is
not compressed). Each blob's ``offset`` and ``length`` are its bytes in the file as
stored (after compression); a blob compressed with ``zstd`` is one Zstandard frame with
the content size present (what Arrow's codec writes).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

MAGIC = b"PFA1"
ZSTD = "zstd"


@dataclass(frozen=True)
class Blob:
    """One blob to write: ``data`` uncompressed; ``compression`` None or ``zstd``."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    data: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    compression: str | None = ZSTD


@dataclass(frozen=True)
class PuffinFile:
    """A written file: its bytes, the footer's size (``file-footer-size-in-bytes`` of the table
    metadata's statistics entry: the whole footer, both magics included) and each blob's
    metadata as the footer holds it."""

    data: bytes
    footer_size: int
    blobs: tuple[dict[str, Any], ...]


def _compress(data: bytes, codec: str | None) -> bytes:
    if codec is None:
        return data
    if codec != ZSTD:
        raise ValueError(f"Puffin blob compression {codec!r}: only zstd (or none) is written")
    return pa.Codec(ZSTD).compress(data, asbytes=True)  # one frame, content size present


def write_puffin(blobs: Sequence[Blob], properties: Mapping[str, str]) -> PuffinFile:
    """The Puffin file holding ``blobs`` in order, with file ``properties`` (``created-by``)."""
    parts = [MAGIC]
    offset = len(MAGIC)
    metadata = []
    for b in blobs:
        stored = _compress(b.data, b.compression)
        entry: dict[str, Any] = {
            "type": b.type,
            "fields": list(b.fields),
            "snapshot-id": b.snapshot_id,
            "sequence-number": b.sequence_number,
            "offset": offset,
            "length": len(stored),
        }
        if b.compression is not None:
            entry["compression-codec"] = b.compression
        if b.properties:
            entry["properties"] = dict(b.properties)
        metadata.append(entry)
        parts.append(stored)
        offset += len(stored)
    payload = json.dumps({"blobs": metadata, "properties": dict(properties)}, separators=(",", ":")).encode()
    footer = MAGIC + payload + struct.pack("<iI", len(payload), 0) + MAGIC
    parts.append(footer)
    return PuffinFile(b"".join(parts), len(footer), tuple(metadata))
