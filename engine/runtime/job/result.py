"""What an analyze job tells its caller (the API, the CLI, Spark, the Flight analyze action)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AnalyzeResult:
    table: str
    job_id: str
    store: str
    snapshot: str
    partitions: int
    rows: int
    columns: int
    elapsed_s: float
    run_uri: str = ""  # where this job's files are
    timings: dict[str, float] = field(default_factory=dict)
    #: per column consolidated by the "redis" frequency strategy: scenario, positives, fields sent, attempts
    frequencies: dict[str, Any] = field(default_factory=dict)
    inherited: int = 0  # partitions whose statistics carried over from an earlier job (not profiled)
    recomputed: int = 0  # partitions profiled by this job
    rebinned: int = 0  # inherited partitions whose histograms were re-binned on new table edges
    recompute_reasons: dict[str, str] = field(default_factory=dict)  # partition key -> why it was profiled
    warnings: list[str] = field(default_factory=list)  # e.g. a damaged partial state (the partition was recomputed)
    #: the histograms were binned in phase 1 on edges guessed from metadata, which proved right
    histograms_guessed: bool = False
    #: Ray node id -> phase-1 tasks of this job that ran there (how far the job spread)
    nodes: dict[str, int] = field(default_factory=dict)
    #: the job whose table-level files this job carried over, nothing having changed ("": merged anew)
    carried_over: str = ""
    #: segments of the table's frequencies now: 1 after a full reduction, more after appends
    #: (only the appended values were reduced: docs/FORMAT.md, "Table frequencies in segments")
    frequency_segments: int = 1
    #: inherited partitions whose own partial state this job loaded (an append merging the table's
    #: merged state loads none: ``table_state``)
    states_loaded: int = 0
    #: an append merged the table's merged state (one file) instead of every inherited partition's state
    table_state: bool = False
    #: where the tasks ran: "ray", or "local" (this process: engine/runtime/placement.py)
    runtime: str = "ray"
