"""Jobs of many independent tasks (recordings, shards of videos): one worker shape, two runners.

A job is a list of tasks, each with a ``key``, and a worker class whose constructor loads
the models once and whose ``run(task, report)`` does one task and returns a
:class:`TaskResult`. :func:`run_locally` runs the tasks one after the other with one worker
in this process; :func:`surprise_memory.offline.ray_runner.run_on_ray` runs them on a Ray
cluster with one worker per actor. Both call :func:`run_task` (so a failing task becomes a
failed result with its error, and the others go on), both feed one :class:`JobProgress`
(tasks and units done, throughput, ETA), and both hand each result to the caller as soon
as it arrives (the caller records it, so an interrupted job resumes from there).

Nothing here imports Ray.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from surprise_memory.errors import SurpriseMemoryError

__all__ = [
    "JobProgress",
    "JobTask",
    "ProgressSnapshot",
    "TaskResult",
    "TaskWorker",
    "describe_error",
    "guarded",
    "run_locally",
    "run_task",
]

_log = logging.getLogger(__name__)


class JobTask(Protocol):
    """One task of a job: a key unique in the job, and its size if known."""

    @property
    def key(self) -> str:
        """The task's name in the job (a recording's output name, a shard's name)."""
        ...

    @property
    def units(self) -> int | None:
        """Work units the task holds (frames, videos), None when unknown."""
        ...


T = TypeVar("T", bound=JobTask)
T_contra = TypeVar("T_contra", bound=JobTask, contravariant=True)


@dataclass
class TaskResult:
    """What one task gave: done or failed, the units processed, and its payload.

    Attributes:
        key: The task's key.
        ok: True when the task completed.
        units: Units processed (frames, videos).
        error: Why it failed (type and message; empty when ``ok``).
        value: The task's results (plain data: it crosses processes).

    """

    key: str
    ok: bool
    units: int = 0
    error: str = ""
    value: dict[str, Any] = field(default_factory=dict)


class TaskWorker(Protocol[T_contra]):
    """A worker: built once (models loaded), then given one task at a time."""

    def run(self, task: T_contra, report: Callable[[int], None]) -> TaskResult:
        """Do one task; call ``report(units done so far)`` now and then."""
        ...


def run_task(
    worker: TaskWorker[T], task: T, report: Callable[[int], None] | None = None
) -> TaskResult:
    """Run one task; any exception becomes a failed result naming it (the worker lives on).

    Args:
        worker: The worker.
        task: The task.
        report: Progress callback, ``report(units done so far)``.

    Returns:
        The worker's result, or a failed one (see :func:`guarded`).

    """
    return guarded(task.key, lambda: worker.run(task, report or _ignore))


def guarded(key: str, call: Callable[[], TaskResult]) -> TaskResult:
    """``call()``, or a failed result with the error's type and message if it raises.

    A corrupt input, a decoder error or a GPU out of memory must not stop a job of
    thousands of tasks: the error is logged with its traceback and returned, so the job
    reports it with the task's key and goes on.
    """
    try:
        return call()
    except SurpriseMemoryError as exc:  # a bad input, a store refusal: the message says it all
        _log.warning("task %s failed: %s", key, describe_error(exc))
        return TaskResult(key, ok=False, error=describe_error(exc))
    except Exception as exc:  # any other failure of one task too is reported, not raised
        _log.warning("task %s failed:\n%s", key, traceback.format_exc())
        _release_gpu_memory()
        return TaskResult(key, ok=False, error=describe_error(exc))


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, for summaries."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _ignore(_units: int) -> None:
    return None


def _release_gpu_memory() -> None:
    """After a failure (e.g. CUDA out of memory), give back the cached blocks."""
    import sys

    torch = sys.modules.get("torch")  # only when a model was ever loaded
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class ProgressSnapshot:
    """Where a job is.

    Attributes:
        tasks: Tasks to run in this job (not counting those done by an earlier run).
        done: Tasks finished (completed or failed).
        failed: Tasks that failed.
        units: Units processed so far, running tasks included.
        units_total: Units of all tasks, None when some size is unknown.
        elapsed_s: Seconds since the job started.
        rate: Units per second so far.
        eta_s: Seconds left at that rate, None when unknown.

    """

    tasks: int
    done: int
    failed: int
    units: int
    units_total: int | None
    elapsed_s: float
    rate: float
    eta_s: float | None

    def format(self, task_noun: str, unit: str) -> str:
        """One line: ``3/10 recordings (1 failed), 1200/4000 frames, 40.0 frames/s, ETA 70 s``."""
        total = "" if self.units_total is None else f"/{self.units_total}"
        eta = "" if self.eta_s is None else f", ETA {self.eta_s:.0f} s"
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (
            f"{self.done}/{self.tasks} {task_noun}{failed}, {self.units}{total} {unit}, "
            f"{self.rate:.1f} {unit}/s{eta}"
        )


class JobProgress:
    """Tasks and units done over a whole job, fed by either runner.

    Args:
        tasks: The tasks of this job (their ``units`` give the total when all are known).
        listener: Called with a snapshot at each change (a progress bar); None = none.
        clock: Seconds, monotonic (tests may pass their own).

    """

    def __init__(
        self,
        tasks: Sequence[JobTask],
        listener: Callable[[ProgressSnapshot], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        sizes = [t.units for t in tasks]
        self._tasks = len(tasks)
        self._units_total = None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)
        self._listener = listener
        self._clock = clock
        self._start = clock()
        self._finished_units = 0
        self._running: dict[str, int] = {}
        self._done = 0
        self._failed = 0

    def update(self, running: Iterable[tuple[str, int]]) -> None:
        """Units done so far by running tasks, as ``(key, units)`` pairs."""
        changed = False
        for key, units in running:
            if self._running.get(key, -1) < units:
                self._running[key] = units
                changed = True
        if changed:
            self._notify()

    def finish(self, result: TaskResult) -> None:
        """A task ended: its units count as done, its running count is dropped."""
        self._running.pop(result.key, None)
        self._finished_units += result.units
        self._done += 1
        self._failed += not result.ok
        self._notify()

    def snapshot(self) -> ProgressSnapshot:
        """Where the job is now."""
        elapsed = max(self._clock() - self._start, 1e-9)
        units = self._finished_units + sum(self._running.values())
        rate = units / elapsed
        eta = None
        if self._units_total is not None and rate > 0:
            eta = max(self._units_total - units, 0) / rate
        return ProgressSnapshot(
            tasks=self._tasks,
            done=self._done,
            failed=self._failed,
            units=units,
            units_total=self._units_total,
            elapsed_s=elapsed,
            rate=rate,
            eta_s=eta,
        )

    def _notify(self) -> None:
        if self._listener is not None:
            self._listener(self.snapshot())


def run_locally(
    factory: Callable[..., TaskWorker[T]],
    factory_args: tuple[Any, ...],
    tasks: Sequence[T],
    on_result: Callable[[TaskResult], None],
    progress: JobProgress | None = None,
    *,
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Run the tasks one after the other with one worker built here.

    Args:
        factory: The worker class (or a function making one).
        factory_args: Its arguments (the models are loaded once, before the first task).
        tasks: The tasks, in order.
        on_result: Called with each result as soon as its task ends.
        progress: Fed with every report and result.
        on_start: Called once the worker has loaded its models, with a line saying so.

    Raises:
        Exception: Whatever building the worker raises (e.g. ``ModelLoadError``): without
            models no task can run.

    """
    if not tasks:
        return
    t0 = time.monotonic()
    worker = factory(*factory_args)
    if on_start is not None:
        on_start(f"1 worker here, models loaded in {time.monotonic() - t0:.1f} s")
    for task in tasks:

        def report(units: int, key: str = task.key) -> None:
            if progress is not None:
                progress.update([(key, units)])

        result = run_task(worker, task, report)
        on_result(result)  # recorded first: an interrupt from the progress view loses nothing
        if progress is not None:
            progress.finish(result)
