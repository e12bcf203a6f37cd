"""Many recordings one after the other (no Ray): folder and PostgreSQL outputs, resume, refusals.

The same job on Ray is in test_ray_jobs.py; both runners share the worker tested here.
"""

from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path

import pytest
from batch_helpers import (
    CORRUPT,
    GOOD,
    REPO,
    TINY_ARGS,
    assert_same_episodes,
    command,
    episodes,
    make_fleet,
    settings,
)

from surprise_memory.cli.cluster import split_ray_value
from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.memory.places import RECORD_KINDS
from surprise_memory.offline.batch import (
    PARTIAL,
    BatchJob,
    BatchRecord,
    Recording,
    RecordingWorker,
    plan_recordings,
    run_batch,
)
from surprise_memory.offline.inputs import FoundRecording, RobotIdMap, expand_inputs
from surprise_memory.offline.pipeline import process
from surprise_memory.offline.run_record import RUN_RECORD, load_run_record


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fleet(tmp_path_factory.mktemp("batch"))


def plan(fleet: Path, *keys: str, mapping: RobotIdMap | None = None) -> list[Recording]:
    """The whole fleet, or some of its recordings under their keys in the fleet."""
    if keys:
        found = [FoundRecording((fleet / k).resolve(), k) for k in keys]
    else:
        found = expand_inputs([str(fleet)])
    return plan_recordings(found, mapping=mapping)


@pytest.fixture(scope="module")
def folder_job(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[BatchJob, Path]:
    out = tmp_path_factory.mktemp("out") / "stores"
    job = BatchJob.make(settings(), str(out), pose_topic="/odom")
    record = run_batch(job, plan(fleet))
    assert not record.complete
    return job, out


def test_a_folder_of_recordings_gives_a_store_each_and_reports_the_corrupt_one(
    folder_job: tuple[BatchJob, Path], fleet: Path, tmp_path: Path
) -> None:
    _job, out = folder_job
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is False
    totals = summary["totals"]
    assert (totals["recordings"], totals["complete"], totals["failed"]) == (4, 3, 1)
    assert totals["skipped"] == 0 and totals["frames"] == 180  # 3 x 60 frames
    bad = summary["recordings"][CORRUPT]
    assert bad["status"] == "failed" and "InputError: cannot read bag" in bad["error"]
    assert bad["input"] == str((fleet / CORRUPT).resolve())
    robots = {k: e["robot_id"] for k, e in summary["recordings"].items()}
    assert robots == {"robot_a/run1": "robot_a", "robot_a/run2": "robot_a",
                      "robot_b/run1": "beta", CORRUPT: "robot_c"}  # fmt: skip
    assert summary["recordings"]["robot_b/run1"]["robot_id_source"] == "metadata"
    assert not (out / PARTIAL / "robot_a").exists()  # completed runs were moved into place
    for key in GOOD:
        run = load_run_record(out / key)
        assert run["status"] == "complete" and run["input"]["key"] == key
        assert run["settings"]["store"]["robot_id"] == robots[key]
        eps = episodes(out / key)
        assert eps and all(e["robot_id"] == robots[key] for e in eps)
        assert summary["recordings"][key]["episodes"] == len(eps)

    # equal to `process` alone, one recording at a time: scores, events, episodes
    key = "robot_b/run1"
    alone = tmp_path / "alone"
    process(fleet / key, alone, settings(robot_id="beta"), pose_topic="/odom")
    assert filecmp.cmp(alone / "scores.csv", out / key / "scores.csv", shallow=False)
    want, got = load_run_record(alone), load_run_record(out / key)
    assert got["events"] == want["events"] and got["summary"]["frames"] == 60
    assert_same_episodes(episodes(out / key), episodes(alone), same_ids=False)
    # the place keyframes too, and every id tagged (what a re-run removes)
    every = episodes(out / key, kinds=RECORD_KINDS)
    assert_same_episodes(every, episodes(alone, kinds=RECORD_KINDS), same_ids=False)
    assert {e["kind"] for e in every} == set(RECORD_KINDS)
    tag = Recording((fleet / key).resolve(), key, None, "").tag
    assert all(e["id"].endswith(f"-{tag}") for e in every)


def test_a_rerun_skips_what_completed_and_redoes_the_rest(
    folder_job: tuple[BatchJob, Path], fleet: Path
) -> None:
    job, out = folder_job
    before = episodes(out / "robot_a/run2", kinds=RECORD_KINDS)
    # an attempt interrupted after its episodes were stored, before it was moved into place
    partial = out / PARTIAL / "robot_a/run2"
    partial.parent.mkdir(parents=True, exist_ok=True)
    os.replace(out / "robot_a/run2", partial)
    run = json.loads((partial / RUN_RECORD).read_text())
    (partial / RUN_RECORD).write_text(json.dumps({**run, "status": "running"}))
    record = run_batch(job, plan(fleet))
    entries = record.entries
    assert [k for k in entries if entries[k].get("skipped")] == ["robot_a/run1", "robot_b/run1"]
    assert entries["robot_a/run2"]["status"] == "complete" and not partial.exists()
    assert entries[CORRUPT]["status"] == "failed"
    redone = episodes(out / "robot_a/run2", kinds=RECORD_KINDS)
    assert_same_episodes(redone, before)  # redone, not doubled
    assert record.totals()["frames"] == 180


def test_a_worker_finishing_after_the_interrupt_leaves_its_recording_undone(
    fleet: Path, tmp_path: Path
) -> None:
    """``ray.kill`` only asks: on a loaded machine a worker may finish the recording it
    held after the interrupted job wrote its summary (issue 48: the re-run then skipped a
    recording the summary had not listed as complete). The summary's word stands: the
    worker's run is refused, its folder stays partial, and the next run processes it."""
    job = BatchJob.make(settings(), str(tmp_path / "out"), pose_topic="/odom")
    recs = plan(fleet, "robot_a/run1")
    record = BatchRecord(job, recs)
    worker = RecordingWorker(job, record.token)  # still running when the job is interrupted
    record.close(interrupted=True)
    summary = json.loads((job.root / "summary.json").read_text())
    assert summary["recordings"]["robot_a/run1"]["status"] == "interrupted"
    with pytest.raises(StoreError, match="processed after its job was interrupted"):
        worker.run(recs[0], lambda _units: None)
    assert not job.run_dir("robot_a/run1").exists()  # as the summary says
    again = run_batch(job, recs)
    assert again.complete and not again.entries["robot_a/run1"].get("skipped")
    assert load_run_record(job.run_dir("robot_a/run1"))["status"] == "complete"


def test_other_settings_and_foreign_folders_are_refused(
    folder_job: tuple[BatchJob, Path], fleet: Path, tmp_path: Path
) -> None:
    _job, out = folder_job
    recs = plan(fleet)
    other = BatchJob.make(settings(gamma=2.0), str(out), pose_topic="/odom")
    with pytest.raises(StoreError, match=r"settings.gate.gamma 1.0 -> 2.0"):
        BatchRecord(other, recs)
    foreign = tmp_path / "foreign"
    (foreign / "robot_a/run1").mkdir(parents=True)
    with pytest.raises(StoreError, match="holds no completed run"):
        BatchRecord(BatchJob.make(settings(), str(foreign)), recs)
    single = tmp_path / "single"
    single.mkdir()
    (single / RUN_RECORD).write_text("{}")
    with pytest.raises(StoreError, match="store of one `process` run"):
        BatchRecord(BatchJob.make(settings(), str(single)), recs)
    default = BatchJob.make(settings(), "postgresql://u@db.lan:5433/fleet?sslmode=require")
    assert default.root == Path.cwd() / "surprise_memory_runs" / "db.lan_fleet"
    socket = BatchJob.make(settings(), "postgresql://u@/sm_test_0?host=/tmp/pg-x/data")
    assert socket.root.name == "data_sm_test_0"
    with pytest.raises(ConfigError, match="--records is for"):
        BatchJob.make(settings(), str(single), str(tmp_path))


def test_postgres_fleet_store_resumes_without_doubles(
    folder_job: tuple[BatchJob, Path], fleet: Path, pg_url: str, tmp_path: Path
) -> None:
    _job, out = folder_job
    mapping_file = tmp_path / "robots.txt"
    mapping_file.write_text(f"{fleet / 'robot_a'}  alpha\n")
    keys = ("robot_a/run1", "robot_b/run1")
    recs = plan(fleet, *keys, mapping=RobotIdMap.load(mapping_file))
    assert [(r.robot_id, r.robot_id_source) for r in recs] == [
        ("alpha", "mapping"),
        ("beta", "metadata"),
    ]
    records = tmp_path / "records"
    job = BatchJob.make(settings(), pg_url, str(records), pose_topic="/odom")
    assert run_batch(job, recs).complete
    for key, robot in zip(keys, ("alpha", "beta"), strict=True):
        assert (records / key / "scores.csv").is_file()
        assert load_run_record(records / key)["settings"]["store"]["robot_id"] == robot
        # the same episodes as the folder job's store of that recording (same ids too)
        assert_same_episodes(episodes(pg_url, robot), episodes(out / key))
        assert all(e["robot_id"] == robot for e in episodes(pg_url, robot))
    total = len(episodes(pg_url, kinds=RECORD_KINDS))  # the place keyframes too

    # interrupted after storing its episodes: the re-run removes them and redoes it
    (records / PARTIAL / keys[0]).parent.mkdir(parents=True)
    os.replace(records / keys[0], records / PARTIAL / keys[0])
    record = run_batch(job, recs)
    assert record.complete and record.totals()["skipped"] == 1
    assert len(episodes(pg_url, kinds=RECORD_KINDS)) == total
    assert_same_episodes(episodes(pg_url, "alpha"), episodes(out / keys[0]))

    # another job cannot add the same recording to the store a second time
    again = BatchJob.make(settings(), pg_url, str(tmp_path / "again"), pose_topic="/odom")
    twice = run_batch(again, recs[:1])
    assert not twice.complete and "exists" in twice.failed[0][1]
    assert len(episodes(pg_url, kinds=RECORD_KINDS)) == total


def test_ray_address_or_input() -> None:
    assert split_ray_value(None) == (None, None)
    assert split_ray_value("local") == ("local", None)
    for address in ("auto", "10.0.0.5:6379", "head-node:6379", "ray://head:10001"):
        assert split_ray_value(address) == (address, None)
    assert split_ray_value("fleet/") == ("local", "fleet/")
    assert split_ray_value(str(REPO)) == ("local", str(REPO))


def test_the_command_runs_many_without_importing_ray(fleet: Path, tmp_path: Path) -> None:
    """Many inputs without --ray: one after the other here, Ray never imported, status 3."""
    args = [str(fleet / "robot_a/run1"), str(fleet / CORRUPT), "--out", "out", *TINY_ARGS]
    proc = command(tmp_path, "process", *args, ray=False)
    assert proc.returncode == 3, proc.stderr
    assert "recordings  1/2 complete" in proc.stdout
    assert f"FAILED      {(fleet / CORRUPT).resolve()}: InputError" in proc.stdout
    assert (tmp_path / "out/run1/run.json").is_file() and (tmp_path / "out/summary.json").is_file()
