"""Run a job's tasks on a Ray cluster: one worker per actor, models loaded once per actor.

The cluster is a local one (``--ray``: Ray's own rule, the cluster ``ray start`` left on
this machine or a new one for the job) or an existing one (``--ray ADDRESS``). Each
worker is an actor holding its own resources (``num_gpus``, fractional when two small
models share a GPU, and ``num_cpus``); Ray places the actors, and each idle actor is given
the next task, so a long recording never holds back the others. Results come back to the
driver, which records them as they arrive (:mod:`surprise_memory.offline.jobs`).

Failures: a task's own error comes back as a failed result (the actor lives on); an actor
that dies (killed for memory, a crash of native code) fails the task it held, is replaced,
and the job goes on; a worker that cannot even load its models fails the job at once
(every task would fail the same way). On an interrupt (Ctrl-C) the actors are killed and
the interrupt goes on to the caller, which has recorded every result so far.

Ray is imported here only, and this module only by the ``--ray`` paths: it stays an
optional extra (``pip install .[ray]``).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from surprise_memory.errors import ConfigError, SurpriseMemoryError
from surprise_memory.offline.jobs import (
    JobProgress,
    JobTask,
    TaskResult,
    TaskWorker,
    describe_error,
    run_task,
)

__all__ = ["LOCAL", "ClusterOptions", "ProgressBoard", "WorkerHost", "connect", "run_on_ray"]

LOCAL = "local"
"""``ClusterOptions.address`` of the local cluster (``--ray`` without an address)."""

_POLL_S = 0.5  # how often the driver looks at the running tasks' progress
_EXIT_WAIT_S = 30.0  # bound on waiting for killed workers to be gone
_REPORT_S = 1.0  # how often a worker tells the driver how far it is
T = TypeVar("T", bound=JobTask)


@dataclass(frozen=True)
class ClusterOptions:
    """Where and how wide a job runs on Ray.

    Attributes:
        address: :data:`LOCAL`, ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``.
        workers: Actors (each loads the models once); None = as many as the cluster's
            resources hold, at most one per task.
        gpus: GPUs per worker (fractional to share one); None = 1 when the cluster has
            GPUs and the models may use them, else 0.
        cpus: CPUs per worker (its torch threads).

    Raises:
        ConfigError: A count is out of range.

    """

    address: str = LOCAL
    workers: int | None = None
    gpus: float | None = None
    cpus: float = 1.0

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"workers={self.workers}: must be >= 1")
        if self.gpus is not None and not (math.isfinite(self.gpus) and self.gpus >= 0):
            raise ConfigError(f"gpus per worker={self.gpus}: must be >= 0")
        if not (math.isfinite(self.cpus) and self.cpus > 0):
            raise ConfigError(f"cpus per worker={self.cpus}: must be > 0")

    def resources(self, cluster: dict[str, float], want_gpu: bool) -> tuple[float, float]:
        """``(num_gpus, num_cpus)`` per worker on a cluster with these total resources."""
        gpus = self.gpus
        if gpus is None:
            gpus = 1.0 if want_gpu and cluster.get("GPU", 0.0) >= 1 else 0.0
        return gpus, self.cpus

    def worker_count(self, cluster: dict[str, float], gpus: float, cpus: float, tasks: int) -> int:
        """How many actors to start: as asked, else what the cluster holds; never more than tasks.

        Raises:
            ConfigError: The cluster cannot hold even one such worker, or fewer than asked.

        """
        fit = int(cluster.get("CPU", 0.0) // cpus)
        if gpus > 0:
            fit = min(fit, int(cluster.get("GPU", 0.0) // gpus))
        have = f"{cluster.get('CPU', 0):g} CPUs, {cluster.get('GPU', 0):g} GPUs"
        if fit < 1:
            raise ConfigError(
                f"the Ray cluster ({have}) cannot hold one worker of {gpus:g} GPU and "
                f"{cpus:g} CPU; lower --worker-gpus / --worker-cpus or add nodes"
            )
        if self.workers is not None and self.workers > fit:
            raise ConfigError(
                f"--workers {self.workers}: the Ray cluster ({have}) holds {fit} workers of "
                f"{gpus:g} GPU and {cpus:g} CPU"
            )
        return max(1, min(self.workers or fit, tasks))


@contextmanager
def connect(address: str) -> Iterator[Any]:
    """Connect this process to Ray (start a local cluster if Ray's rule says so).

    Inside a process already connected (a test that started a cluster), that connection
    is used and left open; otherwise it is closed on exit (a cluster started here stops).

    Args:
        address: :data:`LOCAL`, or the address of an existing cluster.

    Yields:
        The ``ray`` module.

    Raises:
        SurpriseMemoryError: Ray is not installed, or the cluster cannot be reached.

    """
    try:
        import ray
    except ImportError as exc:
        raise SurpriseMemoryError(
            f"--ray needs Ray ({exc}); pip install -r requirements/ray.txt "
            "(or pip install 'surprise-memory[ray]')"
        ) from None
    if ray.is_initialized():
        yield ray
        return
    try:
        ray.init(address=None if address == LOCAL else address, log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SurpriseMemoryError(f"cannot connect to the Ray cluster {address!r}: {exc}") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


class ProgressBoard:
    """The units done by each running task, as the workers last reported (a tiny actor)."""

    def __init__(self) -> None:
        self._units: dict[str, int] = {}

    def report(self, key: str, units: int) -> None:
        """A worker's count for its task."""
        self._units[key] = units

    def take(self) -> list[tuple[str, int]]:
        """The counts reported since the last call."""
        items, self._units = list(self._units.items()), {}
        return items


class WorkerHost:
    """The actor around a worker: builds it once, runs tasks, reports progress, never raises.

    Args:
        factory: The worker class.
        factory_args: Its arguments.
        board: The job's :class:`ProgressBoard` actor.

    """

    def __init__(
        self, factory: Callable[..., TaskWorker[Any]], factory_args: tuple[Any, ...], board: Any
    ) -> None:
        self._board = board
        self._error: Exception | None = None
        self._worker: TaskWorker[Any] | None = None
        try:
            self._worker = factory(*factory_args)
        except Exception as exc:
            self._error = exc

    def ready(self) -> Exception | None:
        """None once the models are loaded, else the error that prevented it."""
        return self._error

    def run(self, task: JobTask) -> TaskResult:
        """Run one task (:func:`~surprise_memory.offline.jobs.run_task`)."""
        if self._worker is None:
            return TaskResult(task.key, ok=False, error=describe_error(self._error or Exception()))
        last = [0.0]

        def report(units: int) -> None:
            now = time.monotonic()
            if now - last[0] >= _REPORT_S:
                last[0] = now
                self._board.report.remote(task.key, units)

        return run_task(self._worker, task, report)


def run_on_ray(
    factory: Callable[..., TaskWorker[T]],
    factory_args: tuple[Any, ...],
    tasks: Sequence[T],
    on_result: Callable[[TaskResult], None],
    options: ClusterOptions,
    *,
    want_gpu: bool,
    progress: JobProgress | None = None,
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Run the tasks on Ray, each idle worker taking the next one.

    Args:
        factory: The worker class (importable by the workers: the package is installed
            on every node).
        factory_args: Its arguments (plain data; sent to each actor).
        tasks: The tasks, in order of submission.
        on_result: Called in this process with each result as soon as it arrives.
        options: The cluster and the workers' resources.
        want_gpu: Whether the models may use a GPU (the default ``gpus`` then asks for one).
        progress: Fed with the workers' reports and the results.
        on_start: Called once the workers have loaded their models, with a line saying
            where they run and how long the loading took.

    Raises:
        SurpriseMemoryError: Ray is missing or the cluster unreachable.
        ConfigError: The cluster cannot hold the workers asked for.
        Exception: What a worker raised while loading its models (e.g. ``ModelLoadError``).

    """
    if not tasks:
        return
    with connect(options.address) as ray:
        cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
        gpus, cpus = options.resources(cluster, want_gpu)
        count = options.worker_count(cluster, gpus, cpus, len(tasks))
        t0 = time.monotonic()
        board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        host = ray.remote(WorkerHost).options(num_gpus=gpus, num_cpus=cpus, max_restarts=0)
        actors: list[Any] = []
        try:

            def start() -> Any:
                actor = host.remote(factory, factory_args, board)
                actors.append(actor)
                return actor

            free = [start() for _ in range(count)]
            for error in ray.get([a.ready.remote() for a in free]):
                if error is not None:
                    raise error
            if on_start is not None:
                on_start(
                    f"Ray: {count} worker{'s' if count > 1 else ''} of {gpus:g} GPU and "
                    f"{cpus:g} CPU (cluster: "
                    f"{cluster.get('CPU', 0):g} CPUs, {cluster.get('GPU', 0):g} GPUs), "
                    f"models loaded in {time.monotonic() - t0:.1f} s"
                )
            _dispatch(
                ray, tasks, free, start=start, board=board, on_result=on_result, progress=progress
            )
        finally:
            for actor in [*actors, board]:
                ray.kill(actor)
            _await_exit(ray, actors)


def _await_exit(ray: Any, actors: list[Any]) -> None:
    """Wait (at most ``_EXIT_WAIT_S``) until the killed actors can run nothing more.

    ``ray.kill`` only asks: a worker that was finishing a recording when the job was
    interrupted could complete it after the caller had recorded it as interrupted. A call
    queued behind the running task resolves only once that task ended or the actor died.
    """
    if actors:
        ray.wait([a.ready.remote() for a in actors], num_returns=len(actors), timeout=_EXIT_WAIT_S)


def _dispatch(
    ray: Any,
    tasks: Sequence[T],
    free: list[Any],
    *,
    start: Callable[[], Any],
    board: Any,
    on_result: Callable[[TaskResult], None],
    progress: JobProgress | None,
) -> None:
    """Give each free actor the next task until all are done; replace actors that die."""
    from ray.exceptions import RayActorError, RayError

    todo = deque(tasks)
    running: dict[Any, tuple[Any, T]] = {}
    replacements = 2 * len(free)  # a crash per task would otherwise loop without end
    while todo or running:
        while free and todo:
            actor, task = free.pop(), todo.popleft()
            running[actor.run.remote(task)] = (actor, task)
        if not running:  # every actor died and none may be replaced
            for task in todo:
                _finish(
                    TaskResult(task.key, ok=False, error="no Ray worker left"), on_result, progress
                )
            return
        ready, _ = ray.wait(list(running), num_returns=1, timeout=_POLL_S)
        if progress is not None:
            progress.update(ray.get(board.take.remote()))
        for ref in ready:
            actor, task = running.pop(ref)
            try:
                result = ray.get(ref)
            except RayActorError as exc:  # the process died: this task is lost, not the job
                result = TaskResult(
                    task.key, ok=False, error=f"Ray worker died: {describe_error(exc)}"
                )
                ray.kill(actor)
                actor = None
                if replacements > 0:
                    replacements -= 1
                    actor = start()
            except RayError as exc:
                result = TaskResult(task.key, ok=False, error=describe_error(exc))
            if actor is not None:
                free.append(actor)
            _finish(result, on_result, progress)


def _finish(
    result: TaskResult, on_result: Callable[[TaskResult], None], progress: JobProgress | None
) -> None:
    on_result(result)  # recorded first: an interrupt from the progress view loses nothing
    if progress is not None:
        progress.finish(result)
