"""Analyze jobs started by the ``analyze`` action: engine.api.analyze on Ray, in a background thread.

A job gets a handle (``job_id``) at once; ``status(handle)`` reports its state
(``queued``, ``running``, ``succeeded``, ``failed``), the current phase with
``done``/``total`` partitions, and the result (the AnalyzeResult as a dict) or a
one-line error. When a job succeeds, ``on_published`` is called with the table
name (the server refreshes that table's state). Finished jobs are kept for
``keep`` handles, oldest dropped first.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from engine.exceptions import MetastoreError
from engine.options import AnalyzeOptions

log = logging.getLogger("metastore.flight")


class JobError(MetastoreError):
    """An analyze action that cannot be started, or an unknown job handle."""


class AnalyzeJobs:
    def __init__(
        self,
        store: str,
        on_published: Callable[[str], None] | None = None,
        max_running: int = 2,
        keep: int = 100,
        runner: Callable[..., Any] | None = None,
        data_roots: tuple[str, ...] = (),
    ) -> None:
        """``data_roots``: where the files a table format's metadata names may lie besides the
        table's location (the server's analyze roots: engine/sources/locations.py)."""
        self.store = store
        self.data_roots = data_roots
        self.on_published = on_published
        self.max_running = max_running
        self.keep = keep
        self._runner = runner
        self._jobs: OrderedDict[str, dict[str, object]] = OrderedDict()
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def start(
        self,
        table_uri: str,
        name: str | None = None,
        bins: int = AnalyzeOptions.bins,
        columns: list[str] | None = None,
        inherit: bool = AnalyzeOptions.inherit,
        value_partitions: bool = AnalyzeOptions.value_partitions,
        **source_options: Any,
    ) -> dict[str, Any]:
        """``source_options``: open_table's format, at_snapshot, as_of, catalog (passed through)."""
        with self._lock:
            running = sum(1 for j in self._jobs.values() if j["state"] in ("queued", "running"))
            if running >= self.max_running:
                raise JobError(f"too many analyze jobs running ({running}); try again when one finishes")
            handle = "analyze-" + uuid.uuid4().hex[:12]
            job: dict[str, object] = {
                "job": handle,
                "state": "queued",
                "table_uri": table_uri,
                "name": name,
                "inherit": inherit,
                "value_partitions": value_partitions,
                "phase": None,
                "done": 0,
                "total": 0,
                "started_at": time.time(),
                "finished_at": None,
                "result": None,
                "error": None,
            }
            self._jobs[handle] = job
            while len(self._jobs) > self.keep:
                oldest = next((k for k, j in self._jobs.items() if j["state"] in ("succeeded", "failed")), None)
                if oldest is None:
                    break
                del self._jobs[oldest]
            thread = threading.Thread(
                target=self._run,
                args=(handle, table_uri, name, bins, columns, inherit, value_partitions, source_options),
                name=f"metastore-{handle}",
                daemon=True,
            )
            self._threads[handle] = thread
        thread.start()
        return dict(job)

    def status(self, handle: str) -> dict[str, Any]:
        with self._lock:
            job = self._jobs.get(handle)
            if job is None:
                raise JobError(f"unknown analyze job {handle[:80]!r}")
            return dict(job)

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(j) for j in self._jobs.values()]

    def running(self) -> int:
        with self._lock:
            return sum(1 for j in self._jobs.values() if j["state"] in ("queued", "running"))

    def join(self, timeout: float | None = None) -> None:
        """Wait for the job threads (shutdown)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads.values()):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------ the job thread
    def _update(self, handle: str, **changes: object) -> None:
        with self._lock:
            job = self._jobs.get(handle)
            if job is not None:
                job.update(changes)

    def _run(
        self,
        handle: str,
        table_uri: str,
        name: str | None,
        bins: int,
        columns: builtins.list[str] | None,  # (the class's list method shadows the builtin here)
        inherit: bool,
        value_partitions: bool,
        source_options: dict[str, Any] | None = None,
    ) -> None:
        self._update(handle, state="running", phase="starting")

        def progress(phase: str, done: int, total: int) -> None:
            self._update(handle, phase=phase, done=done, total=total)

        # a test runner gets the option only when set (runners written before it need not take it)
        extra = {"value_partitions": True} if value_partitions else {}
        extra.update(source_options or {})
        try:
            if self._runner is not None:
                result = self._runner(table_uri, self.store, bins=bins, columns=columns, name=name, progress=progress, inherit=inherit, **extra)
            else:
                from engine.api import analyze
                from engine.runtime.ray_runtime import ensure_ray

                self._update(handle, phase="starting ray")
                ensure_ray()
                result = analyze(
                    table_uri, self.store, bins=bins, columns=columns, name=name, progress=progress, inherit=inherit,
                    value_partitions=value_partitions, data_roots=self.data_roots, **(source_options or {}),
                )  # fmt: skip
            doc = asdict(result) if hasattr(result, "__dataclass_fields__") else dict(result)
            self._update(handle, result=doc, phase="publishing")
            if self.on_published is not None:
                try:
                    self.on_published(doc["table"])
                except Exception as exc:
                    log.warning("refresh after analyze %s failed: %s", handle, exc)
            self._update(handle, state="succeeded", phase="done", finished_at=time.time())
        except Exception as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            log.warning("analyze job %s failed: %s", handle, text)
            self._update(handle, state="failed", error=text[:500], finished_at=time.time())
        finally:
            with self._lock:
                self._threads.pop(handle, None)
