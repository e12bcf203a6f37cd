"""Jobs of many tasks: the failure rule, the local runner, the progress view, Ray's sizing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from surprise_memory.errors import ConfigError, InputError, ModelLoadError
from surprise_memory.offline.jobs import (
    JobProgress,
    ProgressSnapshot,
    TaskResult,
    run_locally,
    run_task,
)
from surprise_memory.offline.ray_runner import ClusterOptions


@dataclass(frozen=True)
class Job:
    key: str
    units: int | None = 3
    fail: type[Exception] | None = None


class Counter:
    """Counts each task's units, one report per unit; fails where told to."""

    built = 0

    def __init__(self, step: int) -> None:
        Counter.built += 1
        self.step = step

    def run(self, task: Job, report: Callable[[int], None]) -> TaskResult:
        for n in range(1, (task.units or 0) + 1):
            report(n * self.step)
            if task.fail is not None and n == 2:
                raise task.fail(f"{task.key} broke at unit {n}")
        return TaskResult(task.key, ok=True, units=(task.units or 0) * self.step)


def test_a_failing_task_becomes_a_failed_result_naming_the_error() -> None:
    worker = Counter(1)
    assert run_task(worker, Job("a")) == TaskResult("a", ok=True, units=3)
    bad = run_task(worker, Job("b", fail=InputError))
    assert not bad.ok and bad.error == "InputError: b broke at unit 2" and bad.units == 0
    crash = run_task(worker, Job("c", fail=RuntimeError))  # any exception, not only ours
    assert crash.error == "RuntimeError: c broke at unit 2"


def test_run_locally_builds_one_worker_and_goes_on_after_a_failure() -> None:
    Counter.built = 0
    seen: list[ProgressSnapshot] = []
    tasks = [Job("a"), Job("b", fail=ValueError), Job("c", units=2)]
    progress = JobProgress(tasks, seen.append)
    results: list[TaskResult] = []
    run_locally(Counter, (1,), tasks, results.append, progress)
    assert Counter.built == 1
    assert [(r.key, r.ok, r.units) for r in results] == [
        ("a", True, 3),
        ("b", False, 0),
        ("c", True, 2),
    ]
    last = seen[-1]
    assert (last.tasks, last.done, last.failed, last.units, last.units_total) == (3, 3, 1, 5, 8)
    # a running task's reports count while it runs, then its result's units replace them
    assert [s.units for s in seen] == [1, 2, 3, 3, 4, 5, 3, 4, 5, 5]
    run_locally(Counter, (1,), [], results.append)  # nothing to do: no worker is built
    assert Counter.built == 1


def test_a_worker_that_cannot_load_fails_the_job() -> None:
    def broken(*_args: object) -> Counter:
        raise ModelLoadError("no weights")

    with pytest.raises(ModelLoadError, match="no weights"):
        run_locally(broken, (), [Job("a")], lambda _r: None)


def test_progress_rate_and_eta() -> None:
    now = [100.0]
    tasks = [Job("a", units=60), Job("b", units=40)]
    progress = JobProgress(tasks, clock=lambda: now[0])
    now[0] = 110.0
    progress.update([("a", 20), ("b", 5)])
    progress.update([("a", 10)])  # an older report never lowers the count
    snap = progress.snapshot()
    assert snap.units == 25 and snap.rate == pytest.approx(2.5)
    assert snap.eta_s == pytest.approx(75 / 2.5)
    progress.finish(TaskResult("a", ok=True, units=60))
    assert progress.snapshot().units == 65
    line = progress.snapshot().format("recordings", "frames")
    assert line.startswith("1/2 recordings, 65/100 frames, 6.5 frames/s, ETA 5 s")
    unknown = JobProgress([Job("x", units=None)]).snapshot()
    assert unknown.units_total is None and unknown.eta_s is None


def test_cluster_sizing() -> None:
    gpu_box = {"CPU": 16.0, "GPU": 2.0}
    assert ClusterOptions().resources(gpu_box, want_gpu=True) == (1.0, 1.0)
    assert ClusterOptions().resources(gpu_box, want_gpu=False) == (0.0, 1.0)
    assert ClusterOptions().resources({"CPU": 2.0}, want_gpu=True) == (0.0, 1.0)
    half = ClusterOptions(gpus=0.5, cpus=2)
    assert half.worker_count(gpu_box, 0.5, 2, tasks=100) == 4  # two small models per GPU
    assert half.worker_count(gpu_box, 0.5, 2, tasks=3) == 3  # never more than tasks
    assert ClusterOptions().worker_count({"CPU": 2.0}, 0, 1, tasks=9) == 2
    with pytest.raises(ConfigError, match="holds 2 workers"):
        ClusterOptions(workers=3).worker_count(gpu_box, 1, 1, tasks=9)
    with pytest.raises(ConfigError, match="cannot hold one worker"):
        ClusterOptions().worker_count({"CPU": 2.0}, 1, 1, tasks=9)
    for bad in ({"workers": 0}, {"gpus": -1.0}, {"cpus": 0.0}):
        with pytest.raises(ConfigError):
            ClusterOptions(**bad)  # type: ignore[arg-type]
