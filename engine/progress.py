"""Progress of long jobs: the callback type, and a terminal progress bar for people.

A job reports ``(phase, done, total)`` per phase; an analyze's phases (``inherit``,
``profile``, ``histograms``) count partitions, whatever the tasks, batches or waves
behind them: ``total`` is the partitions the phase works on and a partition is done
once its last task has ended. The API's ``progress=True`` draws it with rich, the
Flight server stores it in the job's status, a caller may pass any callable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported when a bar is drawn, not with the engine
    from rich.progress import TaskID

ProgressCallback = Callable[[str, int, int], None]


class RichProgress:
    """A progress bar per phase, over partitions."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(), TextColumn("partitions"), TimeElapsedColumn(),
            transient=False,
        )  # fmt: skip
        self._tasks: dict[str, TaskID] = {}
        self._progress.start()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase not in self._tasks:
            self._tasks[phase] = self._progress.add_task(phase, total=total)
        self._progress.update(self._tasks[phase], completed=done)

    def close(self) -> None:
        self._progress.stop()


@contextmanager
def progress_callback(progress: bool | ProgressCallback | None) -> Iterator[ProgressCallback | None]:
    """``True``: a terminal progress bar, closed on exit; a callable as it is; else none."""
    if progress is True:
        bar = RichProgress()
        try:
            yield bar
        finally:
            bar.close()
    else:
        yield progress or None
