"""Content checksums of statistics files: taken when a file is written, recorded in the
catalog (``FileRef.checksum``), checked by ``verify`` and on a file's first read.

The form is ``"crc32:<8 hex digits>"``: CRC-32 (zlib's polynomial, as the catalog's
own frame) of the whole file. Why CRC-32 and not a cryptographic or a 64-bit hash:
the threat is damage (bit rot, truncation, a torn copy), not an adversary, and a
CRC *guarantees* what a hash only makes likely: every single-bit error, every odd
number of bit errors and every burst of up to 32 bits is detected, for files of
any size a statistics file has. It is computed by zlib-ng (``zlib_ng.crc32``: the same
CRC-32 and the same values as the standard library's ``zlib.crc32``, with the CPU's
carry-less multiply: 23 GB/s against 4.2 GB/s here). Every read of a partition's value
counts checks the whole file first (20 MB a partition of the bench table), and an append
re-analyze reads 16 of them plus the table's 177 MB: the standard library's CRC was
0.2 CPU s of such a job, a sixth of it. A file whose catalog entry has no checksum
(written before this existed) is not checked. The algorithm is named in the value, so
another can be added later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, BinaryIO

from zlib_ng.zlib_ng import crc32

from engine.exceptions import InvalidArgumentError, StatisticsFileCorruptError

ALGORITHM = "crc32"
_FORM = re.compile(r"crc32:[0-9a-f]{8}")
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class WrittenFile:
    """What the catalog records of a file just written: its size and content checksum,
    taken from the bytes written, before they reach the store (the writers build a file
    in memory and send it once: engine/files/writer.py, engine/files/partial_state.py)."""

    size: int
    checksum: str

    @staticmethod
    def of(data: bytes | memoryview) -> WrittenFile:
        return WrittenFile(len(data), of_bytes(data))

    def ref(self, path: str) -> dict[str, Any]:
        """The ``{"path", "size", "checksum"}`` form ``publish_job`` and the manifest take."""
        return {"path": path, "size": self.size, "checksum": self.checksum}


class Checksummed:
    """A file-like sink that passes bytes on to ``inner`` and takes their size and checksum on
    the way, so a large file (a table's value counts: ~180 MB for the bench table) is written
    as it is made instead of first being built whole in memory."""

    closed = False

    def __init__(self, inner: Any) -> None:
        self.inner, self._crc, self.size = inner, 0, 0

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self._crc = crc32(view, self._crc)
        self.size += view.nbytes
        self.inner.write(data)
        return view.nbytes

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def written(self) -> WrittenFile:
        return WrittenFile(self.size, f"{ALGORITHM}:{self._crc & 0xFFFFFFFF:08x}")


def of_bytes(data: bytes | memoryview) -> str:
    """The checksum of a whole file's content."""
    return f"{ALGORITHM}:{crc32(data) & 0xFFFFFFFF:08x}"


def parse(value: str, what: str = "") -> str:
    """``value`` if it is a checksum this Metastore can check (else InvalidArgumentError)."""
    if not _FORM.fullmatch(value):
        raise InvalidArgumentError(f"unknown checksum {value!r}{f' of {what}' if what else ''}: expected crc32:<8 hex digits>")
    return value


def of_stream(stream: BinaryIO) -> tuple[str, int]:
    """(checksum, size) of everything ``stream`` has left, read in chunks."""
    crc, size = 0, 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        crc = crc32(chunk, crc)
        size += len(chunk)
    return f"{ALGORITHM}:{crc & 0xFFFFFFFF:08x}", size


def of_file(uri: str) -> tuple[str, int]:
    """(checksum, size) of a file in the store (read whole)."""
    from engine import fileio

    with fileio.open_input(uri) as f:
        return of_stream(f)


def read_checked(uri: str, expected: str = "") -> bytes:
    """A whole file's bytes, checked against ``expected`` (the checksum recorded when it was
    written; "": none): StatisticsFileCorruptError naming the file if they differ."""
    from engine import fileio

    with fileio.open_input(uri) as f:
        data = f.read()
    if expected and of_bytes(data) != expected:
        check(uri, expected)  # raises, naming the file
    return data


def check(uri: str, expected: str, size: int | None = None) -> None:
    """Read ``uri`` whole and raise StatisticsFileCorruptError naming it if its content
    does not match ``expected`` (and ``size``, when given). ``expected`` "": nothing to check."""
    if not expected:
        return
    got, got_size = of_file(uri)
    if size is not None and got_size != size:
        raise StatisticsFileCorruptError(
            f"statistics file damaged: {uri}: {got_size} bytes, the catalog recorded {size} (truncated or extended)", uri=uri
        )
    if got != expected:
        raise StatisticsFileCorruptError(
            f"statistics file damaged: {uri}: checksum {got}, the catalog recorded {expected} when it was written", uri=uri
        )
