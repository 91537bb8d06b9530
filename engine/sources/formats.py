"""Which table format a location holds, and which of its snapshots a caller asked for.

Detection looks only at the format's own markers, never at data files: a Delta
table has ``_delta_log/``, a Hudi table ``.hoodie/``, an Iceberg table location
``metadata/*.metadata.json``. A location with both Delta's and Hudi's markers is
refused (which one is live cannot be told), and an Iceberg marker beside either
is refused the same way. Everything else is a plain Parquet directory.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow.fs as pafs

from engine import fileio
from engine.exceptions import InvalidArgumentError, InvalidTableLayoutError
from engine.sources import registry

__all__ = ["SnapshotSelector", "TableFormat", "detect_format", "newest_metadata_file", "parse_as_of"]


class TableFormat(enum.Enum):
    """The formats of the registry (engine/sources/registry.py), as a type: the same names in the same order."""

    PARQUET = "parquet"
    ICEBERG = "iceberg"
    DELTA = "delta"
    HUDI = "hudi"

    @classmethod
    def parse(cls, value: str | TableFormat) -> TableFormat:
        if isinstance(value, TableFormat):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise InvalidArgumentError(f"format must be one of {', '.join(registry.NAMES)}, not {value!r}") from None


@dataclass(frozen=True)
class SnapshotSelector:
    """Which snapshot of a table to analyze: the latest (both None), one by the format's
    own id (Iceberg snapshot id, Delta version, Hudi instant), or the newest one committed
    at or before ``as_of`` (milliseconds since the epoch, UTC)."""

    at_snapshot: str | None = None
    as_of_ms: int | None = None

    def __post_init__(self) -> None:
        if self.at_snapshot is not None and self.as_of_ms is not None:
            raise InvalidArgumentError("at_snapshot and as_of are exclusive: give one of them")

    @property
    def latest(self) -> bool:
        return self.at_snapshot is None and self.as_of_ms is None


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_as_of(value: str | float | datetime | None) -> int | None:
    """``as_of`` as milliseconds since the epoch: a datetime (naive = UTC), an ISO 8601
    text (``2024-05-01`` or ``2024-05-01T12:00:00+02:00``) or a number of milliseconds."""
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    if _ISO_DATE.match(text):
        try:
            return parse_as_of(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            pass
    raise InvalidArgumentError(f"as_of: {value!r} is not a timestamp (ISO 8601, e.g. 2024-05-01T12:00:00Z, or epoch milliseconds)")


def _entries(uri: str) -> dict[str, pafs.FileType]:
    fs, root = fileio.resolve(uri)
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    except (OSError, NotADirectoryError):
        return {}
    return {info.base_name: info.type for info in infos}


def newest_metadata_file(table_uri: str) -> str | None:
    """The newest ``metadata/*.metadata.json`` of an Iceberg table location, by version number
    (``v3.metadata.json``, ``00003-<uuid>.metadata.json``; ``version-hint.text`` wins if present)."""
    metadata_uri = fileio.join(table_uri, "metadata")
    names = [n for n, t in _entries(metadata_uri).items() if t == pafs.FileType.File]
    if "version-hint.text" in names:
        hint = fileio.read_bytes(fileio.join(metadata_uri, "version-hint.text")).decode("utf-8").strip()
        for candidate in (hint, f"v{hint}.metadata.json", f"{hint}.metadata.json"):
            if candidate in names:
                return fileio.join(metadata_uri, candidate)
    best: tuple[int, str] | None = None
    for name in names:
        if not name.endswith(".metadata.json"):
            continue
        m = re.match(r"v?(\d+)", name)
        if m is None:
            continue
        key = (int(m.group(1)), name)
        best = key if best is None or key > best else best
    return None if best is None else fileio.join(metadata_uri, best[1])


def detect_format(uri: str) -> TableFormat:
    """The format of the table at ``uri`` from its metadata markers (see module docstring)."""
    entries = _entries(uri)
    found = [
        e
        for e in registry.detected()
        if entries.get(e.marker or "") == pafs.FileType.Directory and (not e.metadata_file or newest_metadata_file(uri) is not None)
    ]
    if len(found) > 1:
        names = " and ".join(e.title for e in found)
        raise InvalidTableLayoutError(
            f"{uri}: is both a {names} table ({', '.join(e.marker_text for e in found)}); which one is live cannot be told: pass format= to choose"
        )
    return TableFormat(found[0].name if found else registry.FALLBACK)
