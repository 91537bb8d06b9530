#!/usr/bin/env python
"""Two results of ``run_all.py`` side by side: which figures moved, as after / before ratios.

"Nothing else slower" (issue #30) needs every benchmark run before and after a change, and
a reader who can see at a glance which figure moved. Each benchmark writes its own JSON
shape, so this reads them generically: a *figure* is a number whose key, or its parent's,
names a central statistic, a time or a rate (``median_s``, ``median_cpu_s``, ``p50_ms``,
``throughput``, ``..._per_s``, ``median_s/metastore show``, ...), found at the same path in
both documents. Configuration, machine,
data and load entries are not figures. Times are better lower, rates higher; a figure is
flagged when it moved the bad way by more than ``--threshold`` (default 1.15).

The peers' figures (DuckDB, Spark, the floors) are in the same documents: code under test
does not change them, so how far they moved is the run-to-run noise to read the others by.

Usage: python bench/compare.py BEFORE.json AFTER.json [--threshold 1.15] [--all]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: keys of figures (the last key of a path)
_FIGURE = re.compile(r"(^|_)(median|p50|p90|p95|p99|mean)(_|$)|throughput|_per_s$|^rps$|ratio")
#: keys of times
_TIME = re.compile(r"_(s|ms|us)$")
#: keys of rates (better higher); every other figure is a time or a ratio to a floor (better lower)
_HIGHER = re.compile(r"throughput|_per_s$|^rps$|speedup")
#: path parts that never hold figures
_SKIP = {"config", "machine", "data", "params", "startup", "command", "returncode", "elapsed_s", "ray_start_s"}
_SKIP_PREFIX = ("load_avg", "load_before")


@dataclass(frozen=True)
class Moved:
    """One figure in both documents."""

    path: str
    before: float
    after: float
    higher_is_better: bool

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before else float("inf")

    def worse(self, threshold: float) -> bool:
        if self.before == 0 or self.after == 0:
            return False
        return self.ratio < 1 / threshold if self.higher_is_better else self.ratio > threshold


def figures(doc: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, float]]:
    """(path, value) of every figure in ``doc`` (lists of runs are not figures: their median is)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if str(key) in _SKIP or str(key).startswith(_SKIP_PREFIX):
                continue
            yield from figures(value, (*path, str(key)))
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool) and path and any(_is_figure(k) for k in path[-2:]):
        yield "/".join(path), float(doc)


def _is_figure(key: str) -> bool:
    """A key naming a figure: a central statistic, a rate or a ratio, or a time (``..._s``,
    ``..._ms``); a figure's own key or its parent's (``median_s/metastore show``)."""
    return bool(_FIGURE.search(key) or _TIME.search(key))


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[Moved]:
    """Every figure found at the same path in both run_all documents, in ``after``'s order."""
    known = dict(figures(before.get("benchmarks", before)))
    return [
        Moved(path, known[path], value, any(_HIGHER.search(k) for k in path.split("/")[-2:]))
        for path, value in figures(after.get("benchmarks", after))
        if path in known
    ]


def report(moved: list[Moved], threshold: float, show_all: bool) -> list[str]:
    """Markdown lines: the flagged figures (or all), then a one-line verdict."""
    worse = [m for m in moved if m.worse(threshold)]
    shown = moved if show_all else worse
    lines = ["| figure | before | after | after / before | better |", "|---|---|---|---|---|"]
    for m in shown:
        flag = " **worse**" if m.worse(threshold) else ""
        lines.append(f"| `{m.path}` | {m.before:.4g} | {m.after:.4g} | {m.ratio:.2f}{flag} | {'higher' if m.higher_is_better else 'lower'} |")
    verdict = f"{len(moved)} figures in both; {len(worse)} moved the bad way by more than {threshold:g}x"
    return [*(lines if shown else []), "", verdict]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Compare two run_all.py results (after / before, figure by figure).")
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--threshold", type=float, default=1.15, help="flag a figure that moved the bad way by more than this factor")
    ap.add_argument("--all", action="store_true", help="list every figure, not only the flagged ones")
    args = ap.parse_args(argv)
    docs = []
    for path in (args.before, args.after):
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"compare: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    print("\n".join(report(compare(docs[0], docs[1]), args.threshold, args.all)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
