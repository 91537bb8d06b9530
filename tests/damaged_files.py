"""Files that are not (valid) Parquet, written beside a good one: what the bad-input tests of
the listing and of analyze feed a table (tests/engine/test_bad_input.py,
tests/engine/sources/test_footers.py)."""

from __future__ import annotations

import os
from pathlib import Path

#: the ways a file's bytes are damaged (the footer cannot be read)
DAMAGES = ("not_parquet", "empty_file", "truncated", "garbage_footer")


def write_damaged(bad: Path, good: bytes, damage: str) -> None:
    """Write ``bad`` as ``damage`` of the good Parquet file ``good`` (its bytes)."""
    if damage == "not_parquet":
        bad.write_text("id,name\n1,foo\n")
    elif damage == "empty_file":
        bad.write_bytes(b"")
    elif damage == "truncated":
        bad.write_bytes(good[: len(good) // 2])
    elif damage == "garbage_footer":  # the magic bytes are right but the footer is noise
        bad.write_bytes(good[:-200] + os.urandom(196) + good[-4:])
    else:
        raise ValueError(f"unknown damage {damage!r}")
