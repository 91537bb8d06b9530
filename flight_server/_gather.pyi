"""Types of the C extension flight_server/_gather.c (see flight_server/gather.py)."""

from collections.abc import Callable
from typing import Any

import pyarrow as pa

class Gatherer:
    """An exported record batch (moved out of ``array_capsule``); TypeError: a column type it does not gather."""

    def __init__(self, schema_capsule: Any, array_capsule: Any, importer: Callable[[int, pa.Schema], pa.RecordBatch], schema: pa.Schema) -> None: ...
    @property
    def num_rows(self) -> int: ...
    def take(self, rows: list[int], /) -> pa.RecordBatch:
        """The rows at ``rows`` (repeats allowed, in order), imported by ``importer``; IndexError outside the rows."""
