"""The answers of a subset query as values: how each number was obtained, and its bounds.

A subset answer is the table today's lookup returns (same columns, same types) plus, in
its schema metadata under ``metastore.subset``, one JSON document with the method of
every statistic; ``methods_of(table)`` reads it back as typed values (docs/SUBSETS.md).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

#: the schema metadata key of a subset answer's methods
METADATA_KEY = "metastore.subset"


class Method(enum.Enum):
    """How a statistic of a subset was obtained."""

    STORED = "stored"  # exact, from stored statistics files (no data read)
    ESTIMATED = "estimated"  # from stored statistics under a named assumption; low/high bound it where known
    COMPUTED = "computed"  # exact, computed on the data (engine.runtime.subset)
    UNAVAILABLE = "unavailable"  # not asked for by name and not derivable without computing: left null


#: assumptions an estimate names (docs/SUBSETS.md)
INDEPENDENCE = "independence between columns"
UNIFORM_BIN = "uniform within a bin"
UNIFORM_VALUES = "uniform frequencies (rows / distinct values)"
DEFAULT_SELECTIVITY = "default selectivity 1/3 (no histogram or exact frequencies for the column)"
AT_MOST_ONCE = "a value not stored occurs at most once, half the time"
SUBSET_SPANS_RANGE = "the subset reaches the lowest (highest) value it can"
CARDENAS = "rows drawn uniformly from the values (Cardenas)"
THETA = "theta sketch union of the partitions"
PROPORTIONAL = "proportional to the matching rows"


@dataclass(frozen=True)
class Answer:
    """One statistic of one column of a subset: its value (as in the result table), how it was
    obtained and, for an estimate, the interval the true value is guaranteed to lie in
    (``low``/``high``, None where no bound is known) and the assumption behind the estimate."""

    column: str
    statistic: str
    value: Any
    method: Method
    low: Any = None
    high: Any = None
    assumption: str | None = None
    reason: str | None = None  # an unavailable answer: why (e.g. a user statistic this process cannot compute)

    @property
    def exact(self) -> bool:
        return self.method in (Method.STORED, Method.COMPUTED)

    def to_json(self) -> dict[str, Any]:
        """The method, and for an estimate its bounds and assumption (an exact answer's value is
        in the table itself)."""
        out: dict[str, Any] = {"method": self.method.value}
        if self.method is Method.ESTIMATED:
            out["low"] = _plain(self.low)
            out["high"] = _plain(self.high)
            out["assumption"] = self.assumption
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Partitions:
    """How the predicate splits the partitions: every row matches (``all``), none (``none``),
    or only the statistics of the rows can tell (``some``)."""

    all: tuple[str, ...]
    some: tuple[str, ...]
    none: tuple[str, ...]

    def to_json(self) -> dict[str, int]:
        return {"all": len(self.all), "some": len(self.some), "none": len(self.none)}


@dataclass(frozen=True)
class SubsetMethods:
    """The companion of one subset answer (read back from its schema metadata)."""

    where: str
    exact: bool
    partitions: dict[str, int]
    #: (column, statistic) -> Answer; for top frequencies statistic is the value's text form,
    #: for a histogram ``bin:<i>``
    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)

    def method(self, column: str, statistic: str) -> Method:
        return self.answers[(column, statistic)].method

    def of(self, column: str, statistic: str) -> Answer:
        return self.answers[(column, statistic)]


def _plain(value: Any) -> Any:
    """A bound as JSON: numbers as numbers where exact in JSON, everything else as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    return str(value)


@dataclass(frozen=True)
class Header:
    """What every answer table of one subset carries besides its answers: the predicate, whether
    computing was asked, how the predicate splits the partitions."""

    where: str
    exact: bool
    partitions: Partitions

    def attach(self, t: pa.Table, answers: list[Answer], kind: str) -> pa.Table:
        """``t`` with the methods document of ``answers`` added to the metadata it has: schema
        metadata travels with every Arrow stream (Flight included), so any reader of the table
        gets the methods with the numbers."""
        md = dict(t.schema.metadata or {})
        md[METADATA_KEY.encode()] = self.encode(answers, kind)
        return t.replace_schema_metadata(md)

    def encode(self, answers: list[Answer], kind: str) -> bytes:
        """The methods document, compact JSON (``methods_of`` reads it back)."""
        doc = {
            "where": self.where,
            "exact": self.exact,
            "kind": kind,
            "partitions": self.partitions.to_json(),
            "answers": [{"column": a.column, "statistic": a.statistic, **a.to_json()} for a in answers],
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def methods_of(t: pa.Table | pa.Schema) -> SubsetMethods | None:
    """The methods of a subset answer (a table or its schema); None for an ordinary lookup."""
    schema = t.schema if isinstance(t, pa.Table) else t
    raw = (schema.metadata or {}).get(METADATA_KEY.encode())
    if raw is None:
        return None
    doc = json.loads(raw)
    answers = {}
    for a in doc["answers"]:
        method = Method(a["method"])
        answers[(a["column"], a["statistic"])] = Answer(
            a["column"], a["statistic"], None, method, a.get("low"), a.get("high"), a.get("assumption"), a.get("reason")
        )
    return SubsetMethods(doc["where"], doc["exact"], doc["partitions"], answers)
