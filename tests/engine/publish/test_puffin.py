"""The Puffin container (engine/publish/puffin.py), read back by the spec's layout."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.publish.puffin import Blob, write_puffin


@settings(deadline=None, max_examples=40)
@given(st.lists(st.tuples(st.binary(max_size=300), st.booleans()), max_size=5))
def test_blobs_at_their_offsets(contents: list[tuple[bytes, bool]]) -> None:
    blobs = [Blob("t", (i + 1,), 7, 3, data, {"k": str(i)}, "zstd" if z else None) for i, (data, z) in enumerate(contents)]
    f = write_puffin(blobs, {"created-by": "test"})
    data = f.data
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    size, flags = struct.unpack("<iI", data[-12:-4])
    assert flags == 0 and f.footer_size == size + 16
    meta = json.loads(data[-12 - size : -12])
    assert data[-16 - size : -12 - size] == b"PFA1" and meta["properties"] == {"created-by": "test"}
    for (content, zipped), b in zip(contents, meta["blobs"], strict=True):
        stored = data[b["offset"] : b["offset"] + b["length"]]
        if zipped:
            assert b["compression-codec"] == "zstd"
            stored = pa.decompress(stored, len(content), codec="zstd", asbytes=True)
        else:
            assert "compression-codec" not in b
        assert stored == content
