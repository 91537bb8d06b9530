"""The names in a table's catalog log and what they say without reading a file.

``<table>/catalog/transactions/`` holds one file per commit (``<20-digit id>.<uuid8>.transaction``),
full states every so often (``.checkpoint``) and the records of prunes (``.pruned``); a
:class:`LogIndex` groups one listing's names by transaction id. Also here: the table-name
check, the runs' path helpers and :class:`MissingTransactions`, what the catalog's checks
(engine/catalog/verification.py, engine/catalog/integrity.py) report.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.catalog import codec
from engine.catalog.codec import CHECKPOINT, PRUNED, TRANSACTION, Name
from engine.catalog.paths import RUNS_DIR
from engine.exceptions import InvalidArgumentError

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "RUNS_PREFIX",
    "TRANSACTIONS_DIR",
    "LogIndex",
    "MissingTransactions",
    "check_table",
    "run_of",
    "transaction_name",
]

TRANSACTIONS_DIR = "transactions"
DEFAULT_CHECKPOINT_INTERVAL = 100

RUNS_PREFIX = RUNS_DIR + "/"


def run_of(path: str) -> str:
    """``runs/<job>`` of ``runs/<job>/...`` (the first two components)."""
    cut = path.find("/", len(RUNS_PREFIX))
    return path if cut < 0 else path[:cut]


def check_table(table: str) -> str:
    if not table or "/" in table or table in (".", ".."):
        raise InvalidArgumentError(f"invalid table name {table!r}")
    return table


@dataclass(frozen=True)
class MissingTransactions:
    """Transactions ``first .. last`` should be in the catalog and are not (docs/CATALOG.md)."""

    first: int
    last: int | None  # None: open-ended (some transaction after ``first - 1``; the evidence does not say how many)
    file: str  # the expected file name of ``first`` (a pattern when its uuid is unknown)
    evidence: str  # why they must exist

    @property
    def ids(self) -> str:
        if self.last is None:
            return f"{self.first} (or later)"
        return str(self.first) if self.first == self.last else f"{self.first}..{self.last}"

    def message(self, table: str) -> str:
        what = "transaction" if self.last == self.first else "transactions"
        return f"catalog of table {table!r}: {what} {self.ids} missing ({self.file}): {self.evidence}"


def transaction_name(i: int, timeline: str) -> str:
    """The file name of transaction ``i`` on ``timeline`` (a pattern when the timeline is unknown)."""
    if i == 1:
        return codec.file_name(1, codec.ROOT_UUID, TRANSACTION)
    return codec.file_name(i, codec.txn_uuid(timeline, i), TRANSACTION) if timeline else f"{i:020d}.*.{TRANSACTION}"


class LogIndex:
    """Catalog file names of one listing, by transaction id."""

    def __init__(self, names: Iterable[str], complete: bool = True) -> None:
        self.complete = complete  # holds every name of the listing
        self.txns: dict[int, list[Name]] = {}
        self.checkpoints: dict[int, list[Name]] = {}
        self.prunes: dict[int, list[Name]] = {}  # prune records, by the checkpoint id pruned before
        for raw in names:
            n = codec.parse_name(raw)
            if n is None:
                continue
            kinds = {TRANSACTION: self.txns, CHECKPOINT: self.checkpoints, PRUNED: self.prunes}
            kinds[n.kind].setdefault(n.txn_id, []).append(n)

    @classmethod
    def tail(cls, names: list[str]) -> LogIndex:
        """Only the names from the newest checkpoint on (``names`` sorted): what opening needs."""
        cut = 0
        for i in range(len(names) - 1, -1, -1):
            n = codec.parse_name(names[i])
            if n is not None and n.kind == CHECKPOINT:
                prefix = names[i][:20]
                cut = i
                while cut > 0 and names[cut - 1].startswith(prefix):
                    cut -= 1
                break
        return cls(names[cut:], complete=cut == 0)

    @staticmethod
    def last_id(names: list[str]) -> int:
        """The highest id in a sorted listing (0 if none)."""
        for i in range(len(names) - 1, -1, -1):
            n = codec.parse_name(names[i])
            if n is not None and n.kind != PRUNED:
                return n.txn_id
        return 0

    @property
    def head(self) -> int:
        return max([0, *self.txns, *self.checkpoints])
