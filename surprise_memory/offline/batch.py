"""Many recordings through the offline pipeline: the job, its worker, its record, resumable.

Where the results go:

* ``--out FOLDER``: each recording gets its own store ``FOLDER/<key>/`` (SQLite, JPEGs,
  ``scores.csv``, ``run.json``, as ``process`` writes for one recording), and the job one
  ``FOLDER/summary.json``;
* ``--out postgresql://...``: every recording's episodes go into that one store, with the
  recording's robot id (:mod:`surprise_memory.offline.inputs`); its ``scores.csv`` and
  ``run.json`` go to ``RECORDS/<key>/`` and the summary to ``RECORDS/summary.json``
  (``--records RECORDS``, by default ``surprise_memory_runs/<host>_<database>`` in the
  current folder: :func:`default_records`).

A recording is written into ``ROOT/.partial/<key>/`` and moved to ``ROOT/<key>/`` once its
run is complete, so ``ROOT/<key>/run.json`` with status ``complete`` is the one proof that
a recording is done. A re-run of the same command skips those and redoes the others: the
partial folder of an interrupted or failed attempt is removed first and, in PostgreSQL,
the episodes it stored too. They are found by their ids, ``ep-<stamp>-<tag>``, the tag
being 16 hex digits of the SHA-256 of the recording's path; the same ids also stop a
recording from being added twice to one store (the second add of an id fails).

Only the job that is running may move a recording into place: each run of a job writes
its own token into ``ROOT/.partial/<key>.commit``, a worker moves its folder into place
holding that file locked and only if it still holds its job's token, and an interrupted
job replaces the token of every unfinished recording (under the same lock) before it
writes its summary. A worker that outlives the interrupt (``ray.kill`` only asks; under
load the process may run on for a while) then finds its run refused instead of completing
it after the summary said it was not: the summary says what the folders will say.

A re-run must use the settings of the first: ``summary.json`` keeps them, and a change
(other gamma, other models) is refused with the settings that differ: a changed memory is
a new output, not a resumed one.

The paths are read and written by the workers: on a cluster of several machines the
inputs and ``--out``/``--records`` folders must be at the same path on every node (a
shared file system); with PostgreSQL only the records folder needs to be.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.memory.store import describe_location, is_postgres_url, open_store
from surprise_memory.offline.inputs import FoundRecording, RobotIdMap, resolve_robot_id
from surprise_memory.offline.jobs import JobProgress, TaskResult, run_locally
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process
from surprise_memory.offline.run_record import RUN_RECORD, versions, write_json
from surprise_memory.sources.video import VIDEO_SUFFIXES

if TYPE_CHECKING:
    from surprise_memory.offline.ray_runner import ClusterOptions

__all__ = [
    "BATCH_FORMAT",
    "COMMIT_SUFFIX",
    "INTERRUPTED",
    "PARTIAL",
    "SUMMARY_JSON",
    "BatchJob",
    "BatchRecord",
    "Recording",
    "RecordingWorker",
    "default_records",
    "plan_recordings",
    "run_batch",
]

BATCH_FORMAT = "surprise_memory.batch/1"
"""Value of the ``format`` key of ``summary.json``."""
COMMIT_SUFFIX = ".commit"
"""Suffix of the file beside a partial folder naming the job run that may commit it."""
INTERRUPTED = "interrupted"
"""A commit file's text once the job was interrupted: no worker may commit."""
SUMMARY_JSON = "summary.json"
"""File name of the job's summary in the output (or records) folder."""
PARTIAL = ".partial"
"""Folder of the runs under way, under the output (or records) folder."""


@dataclass(frozen=True)
class Recording:
    """One recording of a job (a task).

    Attributes:
        path: The recording (absolute).
        key: Its run folder's name under the job's root.
        robot_id: The robot id its episodes get; None = the store's (the host name).
        robot_id_source: Where the id came from (see
            :func:`~surprise_memory.offline.inputs.resolve_robot_id`).
        units: Its estimated frames (for the progress view), None when unknown.

    """

    path: Path
    key: str
    robot_id: str | None
    robot_id_source: str
    units: int | None = None

    @property
    def tag(self) -> str:
        """The suffix of its episodes' ids: 16 hex digits of the SHA-256 of its path."""
        return hashlib.sha256(str(self.path).encode("utf-8")).hexdigest()[:16]

    @property
    def is_video(self) -> bool:
        """Whether it is a video file (no topics, no poses)."""
        return self.path.suffix.lower() in VIDEO_SUFFIXES


@dataclass(frozen=True)
class BatchJob:
    """What every worker of a job needs (plain data: it is sent to each Ray actor).

    Attributes:
        settings: The pipeline settings (``store.robot_id`` is the job's ``--robot-id``).
        out: The output: a folder of stores, or a PostgreSQL URI.
        root: Where the run folders and ``summary.json`` go: ``out``, or the records folder.
        image_topic: Camera topic of the bags.
        pose_topic: Pose topic of the bags (videos have none).
        fps: Keep at most this many frames per second.

    """

    settings: PipelineSettings
    out: str
    root: Path
    image_topic: str | None = None
    pose_topic: str | None = None
    fps: float | None = None

    @classmethod
    def make(
        cls,
        settings: PipelineSettings,
        out: str,
        records: str | None = None,
        **inputs: Any,
    ) -> BatchJob:
        """A job writing to ``out`` (records in ``records`` for PostgreSQL).

        Args:
            settings: The pipeline settings.
            out: A folder of stores, or a PostgreSQL URI.
            records: With PostgreSQL, the records folder; None = :func:`default_records`.
            **inputs: ``image_topic``, ``pose_topic``, ``fps``.

        Raises:
            ConfigError: A records folder for a folder output (the folder holds them).

        """
        if is_postgres_url(out):
            root = Path(records) if records else default_records(out)
        else:
            if records:
                raise ConfigError("--records is for a postgresql:// --out; a folder holds them")
            root = Path(out)
        return cls(settings, out, root.expanduser().resolve(), **inputs)

    @property
    def postgres(self) -> bool:
        """Whether the episodes go to one PostgreSQL store."""
        return is_postgres_url(self.out)

    def run_dir(self, key: str) -> Path:
        """A completed recording's folder."""
        return self.root / key

    def partial_dir(self, key: str) -> Path:
        """A recording's folder while it runs."""
        return self.root / PARTIAL / key

    @contextlib.contextmanager
    def commit_file(self, key: str) -> Iterator[IO[str]]:
        """The file naming the job run that may move ``key`` into place, held locked.

        Yields:
            The file, open for reading and writing at its start (its text: the token of
            the run allowed to commit, or :data:`INTERRUPTED`).

        """
        path = self.partial_dir(key)
        path = path.with_name(path.name + COMMIT_SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+", encoding="utf-8") as file:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)  # released when the file is closed
            file.seek(0)
            yield file

    def allow_commits(self, keys: Sequence[str], token: str) -> None:
        """Let the run with ``token`` (and only it) move these recordings into place."""
        for key in keys:
            with self.commit_file(key) as file:
                file.truncate(0)
                file.write(token)

    def fingerprint(self) -> dict[str, Any]:
        """Everything that must not change between a job and its re-runs (plain JSON)."""
        settings = self.settings.as_dict()
        settings["store"] = {
            k: v for k, v in settings["store"].items() if k not in ("store_path", "robot_id")
        }
        data = {
            "store": describe_location(self.out),
            "settings": settings,
            "image_topic": self.image_topic,
            "pose_topic": self.pose_topic,
            "fps": self.fps,
        }
        return dict(json.loads(json.dumps(data)))


def default_records(url: str) -> Path:
    """``surprise_memory_runs/<host>_<database>`` here: where a PostgreSQL job keeps its records.

    The same command run again from the same folder finds them (and resumes); elsewhere,
    give ``--records``.
    """
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    query = parse_qs(parts.query)
    host = parts.hostname or Path(query.get("host", ["local"])[0]).name or "local"
    database = parts.path.lstrip("/") or query.get("dbname", ["postgres"])[0]
    return Path("surprise_memory_runs") / re.sub(r"[^A-Za-z0-9_.-]", "_", f"{host}_{database}")


def plan_recordings(
    found: Sequence[FoundRecording],
    *,
    mapping: RobotIdMap | None = None,
    robot_id: str | None = None,
    image_topic: str | None = None,
    fps: float | None = None,
) -> list[Recording]:
    """Give each found recording its robot id and estimated frames.

    A recording that cannot be opened is estimated at 0 frames (it will fail at once, and
    processing it will report why).

    Raises:
        InputError: A bag's metadata holds an invalid robot id.

    """
    from surprise_memory.errors import SurpriseMemoryError
    from surprise_memory.sources import open_source

    plan = []
    for rec in found:
        robot, source = resolve_robot_id(rec.path, mapping, robot_id)
        try:
            topic = None if rec.path.suffix.lower() in VIDEO_SUFFIXES else image_topic
            units = open_source(rec.path, topic, fps=fps).estimated_frames
        except SurpriseMemoryError:
            units = 0
        plan.append(Recording(rec.path, rec.key, robot, source, units))
    return plan


class RecordingWorker:
    """Processes recordings one at a time with models loaded once (a job's worker).

    Args:
        job: The job.
        token: The job run's token (:attr:`BatchRecord.token`): a recording is moved into
            place only while its commit file holds it.

    Raises:
        ModelLoadError: The weights cannot be loaded.

    """

    def __init__(self, job: BatchJob, token: str) -> None:
        self.job = job
        self.token = token
        self.pipeline = OfflinePipeline(job.settings)

    def run(self, rec: Recording, report: Callable[[int], None]) -> TaskResult:
        """Process one recording into its partial folder, then move that into place.

        Returns:
            The result, with the run's summary.

        Raises:
            SurpriseMemoryError: The recording or the store failed (the job reports it).

        """
        job = self.job
        partial, final = job.partial_dir(rec.key), job.run_dir(rec.key)
        if final.exists():
            raise StoreError(f"{final} exists already; a completed run is not redone")
        if partial.exists():  # an earlier attempt was interrupted or failed
            self._forget(rec, partial)
        partial.mkdir(parents=True)
        cfg = job.settings.store
        if rec.robot_id is not None:
            cfg = dataclasses.replace(cfg, robot_id=rec.robot_id)
        with open_store(job.out if job.postgres else partial, cfg) as store:
            summary = process(
                rec.path,
                partial,
                image_topic=None if rec.is_video else job.image_topic,
                pose_topic=None if rec.is_video else job.pose_topic,
                fps=job.fps,
                pipeline=self.pipeline,
                progress=lambda p: report(p.frames),
                store=store,
                episode_tag=rec.tag,
                input_notes={
                    "key": rec.key,
                    "robot_id": rec.robot_id,
                    "robot_id_source": rec.robot_id_source,
                },
            )
        with job.commit_file(rec.key) as commit:
            if commit.read() != self.token:  # interrupted: its summary says not complete
                raise StoreError(
                    f"{rec.path}: processed after its job was interrupted; not moved into "
                    "place (the next run processes it again)"
                )
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial, final)
        return TaskResult(
            rec.key, ok=True, units=summary.frames, value={"summary": summary.as_dict()}
        )

    def _forget(self, rec: Recording, partial: Path) -> None:
        """Remove what an earlier attempt at ``rec`` left: its folder and stored episodes."""
        if self.job.postgres:
            suffix = f"-{rec.tag}"
            with open_store(self.job.out, self.job.settings.store) as store:
                store.delete([i for i in store.episode_ids() if i.endswith(suffix)])
        shutil.rmtree(partial)


class BatchRecord:
    """The job's ``summary.json``: every recording's state, kept current as results arrive.

    Args:
        job: The job.
        recordings: This run's recordings.

    Raises:
        StoreError: The root holds a single run's store, a summary of other settings, or
            a run folder that is not a completed run of its recording.

    """

    def __init__(self, job: BatchJob, recordings: Sequence[Recording]) -> None:
        self.job = job
        self.path = job.root / SUMMARY_JSON
        if (job.root / RUN_RECORD).is_file():
            raise StoreError(f"{job.root} holds the store of one `process` run; give a new folder")
        old = self._load()
        self.entries: dict[str, dict[str, Any]] = dict(old.get("recordings", {}))
        self.recordings = list(recordings)
        self.todo: list[Recording] = []
        self.token = uuid.uuid4().hex  # this run's: only its workers may commit
        self.started_wall_ns = time.time_ns()
        self._versions = versions()
        for rec in self.recordings:
            entry = {
                "input": str(rec.path),
                "robot_id": rec.robot_id,
                "robot_id_source": rec.robot_id_source,
                "run_dir": str(job.run_dir(rec.key)),
            }
            if self._completed(rec):
                prev = self.entries.get(rec.key, {})
                self.entries[rec.key] = {**prev, **entry, "status": "complete", "skipped": True}
            else:
                self.entries[rec.key] = {**entry, "status": "pending"}
                self.todo.append(rec)
        job.allow_commits([rec.key for rec in self.todo], self.token)
        self.write()

    def _load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            old = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read the job summary {self.path}: {exc}") from exc
        if not isinstance(old, dict) or old.get("format") != BATCH_FORMAT:
            raise StoreError(f"{self.path} is not a job summary (format {BATCH_FORMAT})")
        diffs = _differences(old.get("job", {}), self.job.fingerprint())
        if diffs:
            raise StoreError(
                f"{self.job.root} holds a job run with other settings ({'; '.join(diffs[:6])}); "
                "re-runs resume a job with its own settings: give a new --out for new settings"
            )
        return old

    def _completed(self, rec: Recording) -> bool:
        run_dir = self.job.run_dir(rec.key)
        if not run_dir.exists():
            return False
        try:
            run = json.loads((run_dir / RUN_RECORD).read_text(encoding="utf-8"))
            ok = run["status"] == "complete" and run["input"]["path"] == str(rec.path)
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise StoreError(
                f"{run_dir} exists but holds no completed run of {rec.path}; move it away, "
                "or give another output"
            )
        return True

    def add(self, result: TaskResult) -> None:
        """Record one recording's result (and write the summary)."""
        entry = self.entries[result.key]
        entry.pop("skipped", None)
        if result.ok:
            sm = result.value.get("summary", {})
            entry.update(status="complete", error="", **_counts(sm))
        else:
            entry.update(status="failed", error=result.error, frames=result.units)
        self.write()

    def close(self, interrupted: bool = False) -> None:
        """The last write: recordings not finished are ``interrupted`` (or stay pending).

        Interrupted, each unfinished recording's commit file is set to :data:`INTERRUPTED`
        first (waiting for a worker that is moving its folder into place), so what the
        summary says of it is what its folder will say. Also removes the commit files of
        the recordings that ended, and the empty folders the moved runs left under
        ``.partial`` (here, once no worker runs, rather than by each worker, whose
        neighbours may be creating one).
        """
        for rec in self.todo:
            entry = self.entries[rec.key]
            if interrupted and entry["status"] == "pending":
                # a worker may have finished it unheard, or be finishing it now: once the
                # commit file says interrupted, no worker can move it into place any more
                self.job.allow_commits([rec.key], INTERRUPTED)
                entry["status"] = "complete" if self._completed(rec) else "interrupted"
            else:
                path = self.job.partial_dir(rec.key)
                path.with_name(path.name + COMMIT_SUFFIX).unlink(missing_ok=True)
        self.write()
        partial = self.job.root / PARTIAL
        for top, _dirs, _files in os.walk(partial, topdown=False):
            with contextlib.suppress(OSError):  # not empty: a failed run's, kept to look at
                os.rmdir(top)

    @property
    def failed(self) -> list[tuple[str, str]]:
        """``(input, error)`` of this run's recordings that did not complete."""
        keys = [r.key for r in self.recordings]
        return [
            (self.entries[k]["input"], self.entries[k].get("error", ""))
            for k in keys
            if self.entries[k]["status"] != "complete"
        ]

    @property
    def complete(self) -> bool:
        """Whether every recording of this run is complete."""
        return not self.failed

    def totals(self) -> dict[str, int]:
        """Counts over this run's recordings.

        Returns:
            ``recordings``, ``complete`` (of which ``skipped``: complete from an earlier
            run), ``failed``, and the ``frames`` and ``episodes`` of the complete ones.

        """
        this = [self.entries[r.key] for r in self.recordings]
        done = [e for e in this if e["status"] == "complete"]
        return {
            "recordings": len(this),
            "complete": len(done),
            "skipped": sum(bool(e.get("skipped")) for e in done),
            "failed": sum(e["status"] == "failed" for e in this),
            "frames": sum(e.get("frames") or 0 for e in done),
            "episodes": sum(e.get("episodes") or 0 for e in done),
        }

    def write(self) -> None:
        """Write ``summary.json`` atomically."""
        data = {
            "format": BATCH_FORMAT,
            "job": self.job.fingerprint(),
            "started_wall_ns": self.started_wall_ns,
            "written_wall_ns": time.time_ns(),
            "versions": self._versions,
            "totals": self.totals(),
            "complete": self.complete,
            "recordings": self.entries,
        }
        self.job.root.mkdir(parents=True, exist_ok=True)
        write_json(self.path, data)


def _counts(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("frames", "events", "episodes", "duration_s", "wall_s", "throughput_fps")
    return {k: summary.get(k) for k in keys}


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """The leaves where two fingerprints differ, as ``name old -> new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            out += _differences(old.get(k), new.get(k), f"{where}.{k}" if where else k)
        return out
    return [] if old == new else [f"{where} {old!r} -> {new!r}"]


def run_batch(
    job: BatchJob,
    recordings: Sequence[Recording],
    *,
    cluster: ClusterOptions | None = None,
    listener: Callable[[Any], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> BatchRecord:
    """Run a job: the recordings not yet complete, here or on Ray, recorded as they end.

    Args:
        job: The job.
        recordings: Its recordings (those complete from an earlier run are skipped).
        cluster: Run on Ray with these options; None = one after the other, here.
        listener: Progress listener (:class:`~surprise_memory.offline.jobs.ProgressSnapshot`).
        on_start: Called once the workers have loaded their models, with a line about them.

    Returns:
        The job's record (``complete``, ``failed``).

    Raises:
        StoreError: See :class:`BatchRecord`; or the PostgreSQL store cannot be opened.
        ModelLoadError: The weights cannot be loaded.

    """
    record = BatchRecord(job, recordings)
    if job.postgres and record.todo:  # an unreachable server fails the job, not each task
        open_store(job.out, job.settings.store).close()
    progress = JobProgress(record.todo, listener)
    interrupted = True
    try:
        if cluster is None:
            worker_args = (job, record.token)
            run_locally(
                RecordingWorker, worker_args, record.todo, record.add, progress, on_start=on_start
            )
        else:
            from surprise_memory.offline.ray_runner import run_on_ray

            s = job.settings
            want_gpu = any(
                d != "cpu" for d in (s.encoder.encoder_device, s.embedder.embedder_device)
            )
            run_on_ray(
                RecordingWorker,
                (job, record.token),
                record.todo,
                record.add,
                cluster,
                want_gpu=want_gpu,
                progress=progress,
                on_start=on_start,
            )
        interrupted = False
    finally:
        record.close(interrupted=interrupted)
    return record
