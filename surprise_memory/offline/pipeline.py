"""The offline path: a bag or a video file through the same core objects as the live nodes.

Per camera frame, in stamp order, exactly what the nodes do:

* encoder node: ``WindowSampler.push(frame)``; when it returns a window, the window is
  encoded (``prepared=True``, the sampler already holds ``prepare_frame`` output) and its
  embedding carries the window's stamp;
* scorer node: ``SurpriseScorer.update(z)``, then ``SurpriseGate.push(stamp, score, kl)``
  (or the :class:`~surprise_memory.surprise.baseline.BaselineGate` with ``gate_mode``
  uniform/random), and the gate's candidates through the
  :class:`~surprise_memory.surprise.trigger_filter.TriggerFilter` (habituation, rate budget;
  both off by default);
* memory node: ``EpisodeAssembler.add_frame(frame)`` for every camera frame (full
  resolution), ``add_trigger`` for each event, and each finished episode is embedded
  (``ImageTextEmbedder.embed_images``) and added to the :class:`EpisodeStore`.

The only difference is batching: windows are collected (copied out of the ring buffer) until
``encoder_batch`` of them are waiting, encoded in one forward pass, and then the frames of the
batch are *replayed in their original order* through the scorer, gate and assembler. The
order of operations is therefore the live one (a frame reaches the assembler before the
events its window decides, as on the robot where the event arrives after the frame), and
batching changes embeddings only by float rounding.

Memory is constant in the length of the input: the source is read lazily, one batch of
windows (``encoder_batch`` x M prepared frames) and the frames that arrived with them are
held, the assembler keeps ``frame_history_seconds``, and the per-frame scores are written to
``STORE/scores.csv`` as soon as the gate can no longer turn them into events.

Outputs beside the store: ``scores.csv`` (``stamp_ns,score,kl,tau,triggered,suppressed``, one
row per scored frame) and ``run.json`` (settings, model names, "untrained" when weights were
random, input, counts, summary, the events and the suppressed candidates); their names,
formats, writers and readers are in :mod:`surprise_memory.offline.run_record`, and
:mod:`surprise_memory.offline.report` reads them.

Long module: the pass (``_Run``) mirrors the three nodes' order of operations step by step,
and reads best beside the settings and the entry points that drive it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from surprise_memory.config import CameraSpec
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.episodes import EpisodeAssembler, EpisodeFrames
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.redaction import FaceRedactor
from surprise_memory.offline.pipeline_settings import PIPELINE_CONFIGS, PipelineSettings
from surprise_memory.offline.places import OfflinePlaces
from surprise_memory.offline.run_record import (
    RUN_FORMAT,
    RUN_RECORD,
    SCORES_CSV,
    RunSummary,
    ScoresWriter,
    finite_or_none,
    versions,
    write_json,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.baseline import BaselineGate
from surprise_memory.surprise.decisions import Decision
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.scorer import SurpriseScorer
from surprise_memory.surprise.trigger_filter import TriggerFilter

if TYPE_CHECKING:
    from surprise_memory.memory.store import EpisodeStoreBackend
    from surprise_memory.perception.encoders import ImageTextEmbedder, VideoEncoder
    from surprise_memory.sources import PoseLookup

__all__ = [
    "PIPELINE_CONFIGS",
    "OfflinePipeline",
    "PipelineSettings",
    "Progress",
    "process",
]

_MAX_PENDING_FRAMES = 4096  # frames held between two encodes, at most (input_fps skips)


@dataclass(frozen=True)
class Progress:
    """Where a run is, handed to the progress callback after every frame."""

    frames: int
    events: int
    episodes: int
    stamp_ns: int


class OfflinePipeline:
    """Source -> windows -> batched encoder -> scorer -> gate -> episodes -> store.

    Args:
        settings: All settings (defaults = the nodes' defaults).
        encoder: A loaded video encoder to use instead of building one from
            ``settings.encoder`` (its batch size is ignored: ``encoder_batch`` decides).
        embedder: A loaded embedder to use instead of building one from ``settings.embedder``.
        seed: Seed of random (untrained) weights.

    Raises:
        ModelLoadError: Weights cannot be loaded, or ``redact_faces`` is on and the face
            model is missing.
        ConfigError: A setting is invalid (e.g. ``clip_frames`` not a multiple of the
            tubelet size).

    """

    def __init__(
        self,
        settings: PipelineSettings | None = None,
        *,
        encoder: VideoEncoder | None = None,
        embedder: ImageTextEmbedder | None = None,
        seed: int = 0,
    ) -> None:
        from surprise_memory.perception.encoders import ImageTextEmbedder, VideoEncoder

        self.settings = settings or PipelineSettings()
        t0 = time.perf_counter()
        self.encoder = encoder or VideoEncoder.from_config(self.settings.encoder, seed=seed)
        self.embedder = embedder or ImageTextEmbedder.from_config(self.settings.embedder, seed=seed)
        # a missing face model fails here, before any frame is read
        self.redactor = FaceRedactor.from_config(self.settings.episode)
        self.load_s = time.perf_counter() - t0
        self.encoder.make_sampler(self.settings.encoder)  # checks clip_frames vs tubelet now

    @property
    def untrained(self) -> bool:
        """True when either model has random weights."""
        return not (self.encoder.pretrained and self.embedder.pretrained)

    def models(self) -> dict[str, dict[str, Any]]:
        """Model names and whether they are trained, for the run record."""
        return {
            "encoder": {
                "name": self.encoder.model_name,
                "pretrained": self.encoder.pretrained,
                "dim": self.encoder.dim,
                "device": str(self.encoder.device),
                "dtype": str(self.encoder.dtype).removeprefix("torch."),
            },
            "embedder": {
                "name": self.embedder.model_name,
                "pretrained": self.embedder.pretrained,
                "dim": self.embedder.dim,
                "device": str(self.embedder.device),
                "dtype": str(self.embedder.dtype).removeprefix("torch."),
            },
        }

    def run(
        self,
        frames: Iterable[Frame],
        store_path: str | os.PathLike[str],
        *,
        pose_lookup: PoseLookup | None = None,
        input_info: Mapping[str, Any] | None = None,
        progress: Callable[[Progress], None] | None = None,
        store: EpisodeStoreBackend | None = None,
        episode_tag: str | None = None,
        camera: CameraSpec | None = None,
    ) -> RunSummary:
        """Process a stream of frames into a new store (constant memory).

        Args:
            frames: Camera frames, stamps strictly increasing (a source, read lazily).
            store_path: The store folder, created if missing (with ``store``: the folder of
                ``scores.csv`` and ``run.json``). It must not hold a run or episodes already.
            pose_lookup: Pose of the robot at each event's stamp; None = no pose
                (``pose_valid`` false).
            input_info: Description of the input for the run record.
            progress: Called after every frame.
            store: An open store (e.g. a fleet's PostgreSQL) to add the episodes to, closed
                by the caller; its settings (robot id) are recorded.
            episode_tag: Episode ids ``ep-<stamp, 19 digits>-<tag>``, so that a re-run finds
                what an interrupted run stored; None = random ids.
            camera: The camera of the frames (its name, frame and mounting yaw go with
                each episode); None = the one unnamed camera.

        Returns:
            The summary (also written to ``STORE/run.json``).

        Raises:
            StoreError: The store cannot be written, or it already holds a run.

        """
        from surprise_memory.memory.store import EpisodeStore

        root = Path(store_path).expanduser()
        if (root / RUN_RECORD).exists():
            raise StoreError(
                f"{root} already holds an offline run ({RUN_RECORD}); give a new --out folder"
            )
        own: EpisodeStore | None = None
        if store is None:
            own = store = EpisodeStore(root, self.settings.store)
        try:
            if own is not None and len(own):
                raise StoreError(
                    f"{root} already holds {len(own)} episodes; offline runs write a new store"
                )
            root.mkdir(parents=True, exist_ok=True)
            where = str(own.path) if own is not None else getattr(store, "location", str(root))
            return _Run(
                self,
                store,
                root,
                where,
                pose_lookup=pose_lookup,
                input_info=dict(input_info or {}),
                progress=progress,
                episode_tag=episode_tag,
                camera=camera or CameraSpec(),
            ).go(frames)
        finally:
            if own is not None:
                own.close()


class _Run:
    """State of one pass (kept apart so a pipeline's models can serve several runs)."""

    def __init__(
        self,
        pipeline: OfflinePipeline,
        store: EpisodeStoreBackend,
        folder: Path,
        location: str,
        *,
        pose_lookup: PoseLookup | None,
        input_info: dict[str, Any],
        progress: Callable[[Progress], None] | None,
        episode_tag: str | None,
        camera: CameraSpec,
    ) -> None:
        s = pipeline.settings
        self.p = pipeline
        self.store = store
        self.folder = folder
        self.episode_tag = episode_tag
        if camera.name and episode_tag:  # two cameras may trigger at one stamp
            self.episode_tag = f"{episode_tag}-{camera.name}"
        self.camera = camera
        self.pose_lookup = pose_lookup
        self.progress = progress
        self.sampler = pipeline.encoder.make_sampler(s.encoder)
        self.scorer = SurpriseScorer.from_config(s.scorer)
        self.gate: SurpriseGate | BaselineGate = (
            SurpriseGate.from_config(s.gate)
            if s.baseline.gate_mode == "surprise"
            else BaselineGate(s.baseline)
        )
        self.filter = TriggerFilter(s.habituation, s.budget, self.gate.max_delay_ns)
        model = (pipeline.embedder.model_name, pipeline.embedder.pretrained)
        self.places = OfflinePlaces(s.places, store, self._pose_at, self._embed, self._view,
                                    embedder=model, id_tag=self.episode_tag)  # fmt: skip
        self.assembler = EpisodeAssembler(s.episode)
        self.batch = s.encoder.encoder_batch
        self.pending: list[tuple[Frame, npt.NDArray[np.uint8] | None, int]] = []
        self.windows_waiting = 0
        self.summary = RunSummary(load_s=pipeline.load_s)
        self.events: list[dict[str, Any]] = []
        self.suppressed: list[dict[str, Any]] = []
        self.episode_ids: list[str] = []
        delay = self.gate.max_delay_ns + self.filter.max_delay_ns
        self.scores = ScoresWriter(folder / SCORES_CSV, delay)
        self.record: dict[str, Any] = {
            "format": RUN_FORMAT,
            "status": "running",
            "started_wall_ns": time.time_ns(),
            "input": input_info,
            "settings": {
                **s.as_dict(),
                "store": {**store.config.as_dict(), "store_path": location},
            },
            "models": pipeline.models(),
            "untrained": pipeline.untrained,
            "scores_csv": SCORES_CSV,
            "versions": versions(),
        }
        write_json(folder / RUN_RECORD, self.record)

    def go(self, frames: Iterable[Frame]) -> RunSummary:
        sm = self.summary
        t0 = time.perf_counter()
        try:
            for frame in frames:
                try:
                    window = self.sampler.push(frame)
                except InputError:
                    sm.rejected += 1
                    continue
                if sm.first_stamp_ns is None:
                    sm.first_stamp_ns = frame.stamp_ns
                    self.store.note_origin(frame.stamp_ns)  # the store's time origin
                    if isinstance(self.gate, BaselineGate):  # slots from the first frame
                        self.gate.start(frame.stamp_ns)
                sm.last_stamp_ns = frame.stamp_ns
                if window is not None and window.padded:
                    sm.padded_windows += 1  # never scored, so not encoded either
                    window = None
                if window is None:
                    self.pending.append((frame, None, frame.stamp_ns))
                else:  # the ring buffer's view is overwritten by the next push: copy it
                    self.pending.append((frame, np.array(window.frames), window.stamp_ns))
                    self.windows_waiting += 1
                if self.windows_waiting >= self.batch or len(self.pending) >= _MAX_PENDING_FRAMES:
                    self._drain()
            self._drain()
            # end of stream: as the scorer node's close()
            now = self.gate.last_stamp_ns if isinstance(self.gate, SurpriseGate) else None
            for decision in self.filter.push(now or 0, self.gate.flush(), self._position):
                self._on_decision(decision)
            for decision in self.filter.flush():
                self._on_decision(decision)
            for episode in self.assembler.flush():
                self._store(episode)
        finally:
            self.scores.close()
        sm.wall_s = time.perf_counter() - t0
        self._finish()
        return sm

    def _drain(self) -> None:
        """Encode the waiting windows at once, then replay their frames in order."""
        pending, self.pending = self.pending, []
        self.windows_waiting = 0
        windows = [w for _, w, _ in pending if w is not None]
        embeddings = (
            self.p.encoder.encode_windows(windows, prepared=True) if windows else np.empty((0, 0))
        )
        k = 0
        sm = self.summary
        for frame, window, stamp in pending:
            sm.frames += 1
            try:  # memory node: every camera frame, full resolution
                done = self.assembler.add_frame(frame)
            except InputError:
                sm.rejected += 1
                done = []
            for episode in done:
                self._store(episode)
            self.places.push(frame, self.camera.name)
            if window is not None:
                z = embeddings[k]
                k += 1
                sm.windows += 1
                self._score(stamp, z)
            if self.progress is not None:
                self.progress(Progress(sm.frames, sm.events, sm.episodes, frame.stamp_ns))

    def _score(self, stamp_ns: int, z: npt.NDArray[np.float32]) -> None:
        sm = self.summary
        deviation = None
        mu = self.scorer.mean  # before z enters: habituation compares d = z - mu
        if self.filter.needs_latent and self.scorer.ready and z.shape == mu.shape:
            deviation = np.asarray(z, dtype=np.float64) - mu
        try:
            result = self.scorer.update(z)
        except InputError:
            sm.rejected += 1
            return
        if result is None:
            return
        try:
            triggers = self.gate.push(stamp_ns, result.score, result.kl)
        except InputError:
            sm.rejected += 1
            return
        sm.scored += 1
        if deviation is not None:
            self.filter.observe(stamp_ns, deviation)
        self.scores.add(stamp_ns, result.score, result.kl, self.gate.threshold)
        for decision in self.filter.push(stamp_ns, triggers, self._position):
            self._on_decision(decision)
        self.scores.settle(stamp_ns)

    def _pose_at(self, stamp_ns: int) -> Pose | None:
        if self.pose_lookup is None:
            return None
        try:
            return self.pose_lookup.at(stamp_ns)
        except InputError:  # older than the samples the lookup still holds
            return None

    def _position(self, stamp_ns: int) -> tuple[float, float, float] | None:
        pose = self._pose_at(stamp_ns)
        return None if pose is None else pose.position

    def _on_decision(self, decision: Decision) -> None:
        trigger = decision.trigger
        self.summary.candidates += 1
        if not decision.kept:
            self.scores.mark(trigger, decision.reason)
            if decision.reason == "habituation":
                self.summary.suppressed_habituation += 1
            else:
                self.summary.suppressed_budget += 1
            self.suppressed.append(
                {
                    "stamp_ns": trigger.stamp_ns,
                    "score": trigger.score,
                    "threshold": finite_or_none(trigger.threshold),
                    "reason": decision.reason,
                    "habituation": finite_or_none(decision.habituation),
                    "similar_to_ns": decision.similar_to_ns,
                }
            )
            return
        self._on_trigger(trigger)

    def _on_trigger(self, trigger: SurpriseTrigger) -> None:
        self.summary.events += 1
        self.scores.mark(trigger)
        self.events.append(
            {
                "stamp_ns": trigger.stamp_ns,
                "score": trigger.score,
                "kl": finite_or_none(trigger.kl),
                "threshold": finite_or_none(trigger.threshold),
                "decided_ns": trigger.decided_ns,
                **({"camera": self.camera.name} if self.camera.name else {}),
            }
        )
        for episode in self.assembler.add_trigger(trigger):
            self._store(episode)

    def _store(self, episode: EpisodeFrames) -> None:
        trig = episode.trigger
        pose = self._pose_at(trig.stamp_ns)
        trust = None  # the recording's covariance there, where its pose topic has one
        if pose is not None and self.pose_lookup is not None:
            trust = PoseTrust(self.pose_lookup.sigma_at(trig.stamp_ns))
        frames, embeddings = self._embed(list(episode.frames))
        camera = self._view(pose, frames[0].frame_id)
        record = self.store.add(
            frames,
            embeddings,
            stamp_ns=trig.stamp_ns,
            surprise=trig.score,
            threshold=trig.threshold,
            pose=pose,
            embedder_model=self.p.embedder.model_name,
            embedder_pretrained=self.p.embedder.pretrained,
            encoder_model=self.p.encoder.model_name,
            encoder_pretrained=self.p.encoder.pretrained,
            episode_id=self.episode_tag and f"ep-{trig.stamp_ns:019d}-{self.episode_tag}",
            # a recording's odom is its own boot's, not this machine's: session unknown
            session_id="",
            camera=camera,
            pose_trust=trust,
        )
        self.summary.episodes += 1
        self.summary.stored_frames += len(frames)
        self.episode_ids.append(record.id)

    def _embed(self, frames: list[Frame]) -> tuple[list[Frame], npt.NDArray[np.float32]]:
        """Frames as stored (faces blurred before the embedder and the store see them)."""
        if self.p.redactor is not None:
            redacted = self.p.redactor.redact(frames)
            frames = list(redacted.frames)
            self.summary.redacted_frames += redacted.frames_with_faces
            self.summary.redacted_faces += redacted.faces
        return frames, self.p.embedder.embed_images(frames)

    def _view(self, pose: Pose | None, frame_id: str) -> CameraView:
        """The camera's view at ``pose``: its optical frame's pose from the mounting yaw."""
        spec = self.camera
        camera_pose = None
        if pose is not None and spec.yaw_deg is not None:  # the mounting yaw given
            camera_pose = compose(pose, mounting_pose(spec.yaw_deg))
        return CameraView(spec.name, spec.frame or frame_id, camera_pose)

    def _finish(self) -> None:
        sm = self.summary
        if sm.first_stamp_ns is not None and sm.last_stamp_ns is not None:
            sm.duration_s = (sm.last_stamp_ns - sm.first_stamp_ns) / NS_PER_SECOND
        minutes = sm.duration_s / 60.0
        sm.episodes_per_minute = sm.episodes / minutes if minutes > 0 else 0.0
        sm.stored_fraction = sm.stored_frames / sm.frames if sm.frames else 0.0
        sm.throughput_fps = sm.frames / sm.wall_s if sm.wall_s > 0 else 0.0
        sm.place_keyframes = self.places.stored
        sm.place_skipped = dict(self.places.skipped)
        self.record.update(
            status="complete",
            finished_wall_ns=time.time_ns(),
            summary=sm.as_dict(),
            events=self.events,
            suppressed=self.suppressed,
            episodes=self.episode_ids,
        )
        write_json(self.folder / RUN_RECORD, self.record)


def process(
    input_path: str | os.PathLike[str],
    store_path: str | os.PathLike[str],
    settings: PipelineSettings | None = None,
    *,
    image_topic: str | None = None,
    pose_topic: str | None = None,
    fps: float | None = None,
    pipeline: OfflinePipeline | None = None,
    progress: Callable[[Progress], None] | None = None,
    on_open: Callable[[Any, PoseLookup | None], None] | None = None,
    store: EpisodeStoreBackend | None = None,
    episode_tag: str | None = None,
    input_notes: Mapping[str, Any] | None = None,
    camera: CameraSpec | None = None,
) -> RunSummary:
    """Process a bag or a video file into a new store (the ``process`` command).

    Args:
        input_path: rosbag2 folder or file, ROS 1 ``.bag``, or video file.
        store_path: New store folder (with ``store``: of ``scores.csv``, ``run.json``).
        settings: All settings (ignored when ``pipeline`` is given).
        image_topic: Camera topic of a bag (detected when the bag has one).
        pose_topic: Odometry/pose/``/tf`` topic of a bag for the episodes' poses; None = none.
        fps: Keep at most this many frames per second of the input (None/0: all).
        pipeline: A pipeline with loaded models (tests, several inputs).
        progress: Called after every frame.
        on_open: Called with the source and pose lookup once opened (the CLI prints them).
        store: See :meth:`OfflinePipeline.run`.
        episode_tag: See :meth:`OfflinePipeline.run`.
        input_notes: More facts about the input for the run record's ``input``.
        camera: The camera whose topic this is (see :meth:`OfflinePipeline.run`).

    Returns:
        The run summary.

    Raises:
        InputError: The input cannot be read, or a pose topic was given for a video.
        StoreError: The store cannot be written, or holds a run already.
        ModelLoadError: Weights cannot be loaded.

    """
    from surprise_memory.sources import BagSource, open_source

    source = open_source(Path(input_path), image_topic, fps=fps)
    lookup: PoseLookup | None = None
    if pose_topic and not isinstance(source, BagSource):
        raise InputError(
            f"pose topic {pose_topic!r} was given for the video file {str(input_path)!r}; "
            "poses come only from bags"
        )
    pipe = pipeline or OfflinePipeline(settings)
    if pose_topic and isinstance(source, BagSource):
        cfg = pipe.settings.pose
        lookup = source.pose_lookup(
            pose_topic,
            map_frame=cfg.map_frame,
            base_frame=cfg.robot_frame,
            max_gap_ns=round(cfg.pose_tolerance_seconds * NS_PER_SECOND),
        )
    if on_open is not None:
        on_open(source, lookup)
    info = {
        "path": str(Path(input_path).resolve()),
        "kind": "bag" if isinstance(source, BagSource) else "video",
        "stream": source.stream_name,
        "description": source.describe(),
        "pose_topic": pose_topic or None,
        "pose_frames": lookup.describe() if lookup is not None else None,
        "fps": fps or None,
        **(input_notes or {}),
    }
    try:
        summary = pipe.run(
            source,
            store_path,
            pose_lookup=lookup,
            input_info=info,
            progress=progress,
            store=store,
            episode_tag=episode_tag,
            camera=camera,
        )
    finally:
        if lookup is not None:
            lookup.close()
    run_path = Path(store_path).expanduser() / RUN_RECORD
    record = json.loads(run_path.read_text(encoding="utf-8"))
    record["input"]["source_stats"] = source.stats.as_dict()
    write_json(run_path, record)
    return summary
