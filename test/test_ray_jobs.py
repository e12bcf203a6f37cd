"""Many recordings and GEBD shards on a real local Ray cluster (2 CPUs), started by this module.

One cluster for the module (Ray starts in seconds, the workers' models in seconds more):

* in this process, ``run_batch`` on Ray into a folder of stores: the corrupt recording is
  reported and the others complete; an interrupt (as Ctrl-C) after the first result kills
  the workers and leaves the summary saying which are done; the re-run skips those and
  equals ``process`` alone for every recording (scores.csv bytes, events, JPEG bytes,
  embeddings);
* the command, ``process --ray ADDRESS`` as another driver, into PostgreSQL: the same
  episodes, under the robot ids of the mapping file, the bag metadata and the folders;
* ``eval-gebd --ray ADDRESS``, one video per shard: the F1 tables of one pass, the broken
  video listed;
* the runner's failure paths: a worker process that dies fails only its task and is
  replaced; a worker that cannot load its models fails the job with that error.

At the end the cluster is shut down and no Ray process may be left.
"""

from __future__ import annotations

import filecmp
import json
import os
import pickle
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import ray
from batch_helpers import (
    BROKEN_VIDEO,
    CORRUPT,
    GOOD_VIDEOS,
    TINY_ARGS,
    assert_same_episodes,
    command,
    episodes,
    gebd_fixture,
    make_fleet,
    settings,
)

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ModelLoadError
from surprise_memory.evaluation import GebdDetector, detect_videos, evaluate_gebd
from surprise_memory.evaluation.sharding import GebdShard
from surprise_memory.offline.batch import BatchJob, plan_recordings, run_batch
from surprise_memory.offline.inputs import expand_inputs
from surprise_memory.offline.jobs import ProgressSnapshot, TaskResult
from surprise_memory.offline.pipeline import OfflinePipeline, process
from surprise_memory.offline.ray_runner import ClusterOptions, run_on_ray
from surprise_memory.offline.run_record import load_run_record
from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS, VideoEncoder


def _ray_pids() -> set[int]:
    out = subprocess.run(
        ["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True
    ).stdout
    pids = set()
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "ray::" in args or "/ray/" in args or "raylet" in args or "gcs_server" in args:
            pids.add(int(pid))
    return pids


def _descendants(root: int) -> set[int]:
    """The pids of every process below ``root`` (children, their children, ...)."""
    out = subprocess.run(
        ["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True
    ).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        pid, ppid = (int(v) for v in line.split())
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local cluster of 2 CPUs, 100 MiB of object store; its address for other drivers."""
    ctx = ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 2**20,
        log_to_driver=False,
    )
    try:
        yield str(ctx.address_info["gcs_address"])
    finally:
        # this cluster's processes: this driver's descendants (another Ray on the machine,
        # e.g. the other robot stage's running at once, is not this one's to end)
        ours = _ray_pids() & _descendants(os.getpid())
        ray.shutdown()
    deadline = time.monotonic() + 30
    while (left := _ray_pids() & ours) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ours and not left, f"Ray processes left after shutdown: {sorted(left)}"


KEYS = ("robot_a/run1", "robot_b/run1")  # two robots' (test_offline_batch runs all three)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fleet(tmp_path_factory.mktemp("ray_fleet"), KEYS)


@pytest.fixture(scope="module")
def alone(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each good recording through `process` alone, one after the other (the reference)."""
    root = tmp_path_factory.mktemp("alone")
    pipe = OfflinePipeline(settings())
    for key in KEYS:
        process(fleet / key, root / key, pipeline=pipe, pose_topic="/odom")
    return root


@pytest.fixture(scope="module")
def folder_job(cluster: str, fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet on Ray into a folder: interrupted after the first result, then re-run."""
    out = tmp_path_factory.mktemp("ray_out") / "stores"
    job = BatchJob.make(settings(), str(out), pose_topic="/odom")
    recordings = plan_recordings(expand_inputs([str(fleet)]))
    options = ClusterOptions(address=cluster, workers=2)

    def interrupt(snap: ProgressSnapshot) -> None:
        if snap.done >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_batch(job, recordings, cluster=options, listener=interrupt)
    first = json.loads((out / "summary.json").read_text())["recordings"]
    done_before = {k for k, e in first.items() if e["status"] == "complete"}
    # one result was in; a second worker may have finished unheard (its run folder says so)
    assert 1 <= len(done_before) <= 2 and len(first) == 3, first
    # the summary was written once the killed workers were gone: it says what the folders say
    assert done_before == {k for k in first if _run_complete(out / k)}, first
    assert all(e["status"] in ("complete", "failed", "interrupted") for e in first.values())
    assert _free_cpus() == 2  # the workers of the interrupted job are gone

    record = run_batch(job, recordings, cluster=options)
    assert not record.complete and record.failed[0][0] == str((fleet / CORRUPT).resolve())
    assert {k for k, e in record.entries.items() if e.get("skipped")} == done_before
    return out


def _run_complete(store: Path) -> bool:
    run = store / "run.json"
    return run.is_file() and json.loads(run.read_text())["status"] == "complete"


def _free_cpus() -> float:
    deadline = time.monotonic() + 20
    while (free := ray.available_resources().get("CPU", 0.0)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    return float(free)


def test_on_ray_each_recording_equals_process_alone(folder_job: Path, alone: Path) -> None:
    summary = json.loads((folder_job / "summary.json").read_text())
    assert summary["totals"]["complete"] == 2 and summary["totals"]["failed"] == 1
    assert "InputError: cannot read bag" in summary["recordings"][CORRUPT]["error"]
    for key in KEYS:
        assert filecmp.cmp(alone / key / "scores.csv", folder_job / key / "scores.csv", False)
        got, want = load_run_record(folder_job / key), load_run_record(alone / key)
        assert got["events"] == want["events"] and got["summary"]["frames"] == 60
        assert_same_episodes(episodes(folder_job / key), episodes(alone / key), same_ids=False)


def test_the_command_fills_one_postgres_store_from_ray(
    cluster: str, fleet: Path, folder_job: Path, pg_url: str, tmp_path: Path
) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text(f"{fleet}/robot_a  mapped\n")
    proc = command(
        tmp_path,
        "process",
        "--ray",
        cluster,
        str(fleet),
        "--out",
        pg_url,
        "--records",
        "records",
        "--robot-ids",
        str(robots),
        "--pose-topic",
        "/odom",
        *TINY_ARGS,
    )
    assert proc.returncode == 3, proc.stderr  # the corrupt recording
    assert "recordings  2/3 complete" in proc.stdout and "Ray: 2 workers" in proc.stderr
    expect = {"robot_a/run1": "mapped", "robot_b/run1": "beta"}  # mapping file, bag metadata
    stored = episodes(pg_url)
    assert {e["robot_id"] for e in stored} == set(expect.values())
    for key, robot in expect.items():
        tag = load_run_record(tmp_path / "records" / key)["episodes"][0].rsplit("-", 1)[1]
        mine = [e for e in stored if e["id"].endswith(tag)]
        assert all(e["robot_id"] == robot for e in mine)
        assert_same_episodes(mine, episodes(folder_job / key))  # ids equal too


def test_eval_gebd_on_ray_gives_the_one_pass_table(cluster: str, tmp_path: Path) -> None:
    videos, annotations = gebd_fixture(tmp_path)
    enc = EncoderConfig(encoder_weights=TINY_VIDEO_WEIGHTS, encoder_device="cpu", clip_frames=8)
    causal, offline, _ = detect_videos(
        GOOD_VIDEOS, videos, VideoEncoder.from_config(enc), enc, GebdDetector()
    )
    proc = command(
        tmp_path,
        "eval-gebd",
        "--ray",
        cluster,
        "--annotations",
        str(annotations),
        "--videos",
        str(videos),
        "--shard-size",
        "1",
        "--weights",
        TINY_VIDEO_WEIGHTS,
        "--clip-frames",
        "8",
        "--device",
        "cpu",
        "--out",
        "results.json",
    )
    assert proc.returncode == 3, proc.stderr
    assert f"FAILED {BROKEN_VIDEO}: InputError" in proc.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    gt = pickle.loads(annotations.read_bytes())
    assert results["results"]["causal"] == evaluate_gebd(gt, causal).as_dict()
    assert results["results"]["offline"] == evaluate_gebd(gt, offline).as_dict()
    assert list(results["failed_videos"]) == [BROKEN_VIDEO]


def test_a_worker_that_dies_fails_its_task_only_and_one_that_cannot_load_fails_the_job(
    cluster: str,
) -> None:
    """The runner's own failure paths, with a worker without models (quick to start)."""

    class Fragile:  # defined here: Ray sends it by value
        def __init__(self, load: bool) -> None:
            if not load:
                raise ModelLoadError("no weights here")

        def run(self, task: GebdShard, report: Callable[[int], None]) -> TaskResult:
            if task.key == "crash":
                os._exit(1)  # the process dies, as when the kernel kills it for memory
            report(1)
            return TaskResult(task.key, ok=True, units=1, value={"pid": os.getpid()})

    tasks = [GebdShard(key, ()) for key in ("a", "crash", "b", "c")]
    results: list[TaskResult] = []
    options = ClusterOptions(address=cluster, workers=1)
    run_on_ray(Fragile, (True,), tasks, results.append, options, want_gpu=False)
    by_key = {r.key: r for r in results}
    assert not by_key["crash"].ok and by_key["crash"].error.startswith("Ray worker died")
    assert all(by_key[k].ok for k in "abc")
    assert by_key["a"].value["pid"] != by_key["c"].value["pid"]  # a new worker took over
    with pytest.raises(ModelLoadError, match="no weights here"):
        run_on_ray(Fragile, (False,), tasks, results.append, options, want_gpu=False)
    assert _free_cpus() == 2
