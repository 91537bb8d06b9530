"""Checksums of statistics files: zlib-ng computes them, and its values must be the standard
library's CRC-32, the one every checksum already recorded in a catalog was taken with."""

from __future__ import annotations

import io
import zlib

from hypothesis import given
from hypothesis import strategies as st

from engine.files import checksum


@given(st.binary(max_size=5_000), st.lists(st.integers(1, 700), max_size=12))
def test_checksums_equal_zlib_crc32_whole_and_streamed_in_any_pieces(data: bytes, cuts: list[int]) -> None:
    expected = f"crc32:{zlib.crc32(data) & 0xFFFFFFFF:08x}"
    assert checksum.of_bytes(data) == expected
    assert checksum.of_bytes(memoryview(data)) == expected
    assert checksum.of_stream(io.BytesIO(data)) == (expected, len(data))
    sink = io.BytesIO()
    streamed = checksum.Checksummed(sink)
    at = 0
    for n in cuts:
        streamed.write(data[at : at + n])
        at += n
    streamed.write(data[at:])
    assert streamed.written() == checksum.WrittenFile(len(data), expected)
    assert sink.getvalue() == data


def test_a_large_buffer_in_one_call() -> None:
    data = bytes(range(256)) * 40_000  # 10 MB: the vectorised path
    assert checksum.of_bytes(data) == f"crc32:{zlib.crc32(data) & 0xFFFFFFFF:08x}"
