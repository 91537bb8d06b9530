"""Types of the C extension flight_server/_gather.c (see flight_server/gather.py)."""

from typing import Any

class Gatherer:
    """An exported record batch (moved out of ``array_capsule``); TypeError: a column type it does not gather."""

    def __init__(self, schema_capsule: Any, array_capsule: Any) -> None: ...
    @property
    def num_rows(self) -> int: ...
    def take(self, rows: list[int], /) -> tuple[object, int]:
        """(owner of the new ArrowArray, its address for ``pa.RecordBatch._import_from_c``); IndexError outside the rows."""
