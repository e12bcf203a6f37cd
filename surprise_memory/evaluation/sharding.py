"""Kinetics-GEBD detection in shards of videos: a job run here or on Ray, resumable.

The videos to detect (those of the annotation file with a file) are cut, in the
annotation file's order, into shards of ``shard_size`` videos; one shard is one task of a
job (:mod:`surprise_memory.offline.jobs`), run by a :class:`GebdShardWorker` that loads
the video encoder once. The predictions of a video depend on that video alone (the
detector's scorer and gate are reset per video, and the encoder's windows never mix two
videos), so sharded or not, on one machine or many, the predictions are the same and so
is the F1 table.

A video that fails (unreadable file, decoder error, GPU out of memory) is reported with
its error and counts as missed (no prediction), like a missing file; the others go on.

With a checkpoint folder, each finished shard is kept as ``DIR/<shard>.json`` (its
videos and their predictions); a re-run with the same settings takes those instead of
detecting again and redoes the rest, including a shard with failed videos. ``DIR/job.json``
holds the settings; other settings are refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.evaluation.detector import GebdDetector, detect_video
from surprise_memory.offline.inputs import FoundRecording
from surprise_memory.offline.jobs import JobProgress, TaskResult, guarded, run_locally
from surprise_memory.offline.run_record import write_json

if TYPE_CHECKING:
    from surprise_memory.config import EncoderConfig
    from surprise_memory.offline.jobs import ProgressSnapshot
    from surprise_memory.offline.ray_runner import ClusterOptions

__all__ = [
    "GebdPredictions",
    "GebdShard",
    "GebdShardWorker",
    "ShardCheckpoints",
    "detect_in_shards",
    "plan_shards",
    "video_files",
]

_CHECKPOINT_FORMAT = "surprise_memory.gebd_shards/1"


@dataclass(frozen=True)
class GebdShard:
    """Videos detected by one task.

    Attributes:
        key: ``shard-<index>-<8 hex of its video ids>``.
        videos: ``(video id, file path)`` in order.

    """

    key: str
    videos: tuple[tuple[str, str], ...]

    @property
    def units(self) -> int:
        """Videos in the shard (the progress unit)."""
        return len(self.videos)


def plan_shards(videos: Sequence[tuple[str, Path]], size: int) -> list[GebdShard]:
    """Cut ``(video id, path)`` pairs, in order, into shards of ``size`` videos.

    Raises:
        ConfigError: ``size`` < 1.

    """
    if size < 1:
        raise ConfigError(f"shard_size={size}: must be >= 1")
    shards = []
    for start in range(0, len(videos), size):
        part = tuple((vid, str(path)) for vid, path in videos[start : start + size])
        digest = hashlib.sha256("\n".join(v for v, _ in part).encode("utf-8")).hexdigest()
        shards.append(GebdShard(f"shard-{start // size:05d}-{digest[:8]}", part))
    return shards


def video_files(found: Sequence[FoundRecording]) -> dict[str, Path]:
    """``{video id: file}`` of video files, the id being the file name without its suffix.

    When one id has several files, the suffix earliest in
    :data:`~surprise_memory.sources.video.VIDEO_SUFFIXES` wins (``.mp4`` first), as
    :func:`~surprise_memory.evaluation.detector.find_video` picks; then the first found.
    """
    from surprise_memory.sources.video import VIDEO_SUFFIXES

    def rank(path: Path) -> int:
        suffix = path.suffix.lower()
        return VIDEO_SUFFIXES.index(suffix) if suffix in VIDEO_SUFFIXES else len(VIDEO_SUFFIXES)

    files: dict[str, Path] = {}
    for rec in found:
        vid = rec.path.stem
        if vid not in files or rank(rec.path) < rank(files[vid]):
            files[vid] = rec.path
    return files


class GebdShardWorker:
    """Detects the videos of a shard with a video encoder loaded once.

    Args:
        encoder_config: The video encoder's settings.
        detector_settings: :class:`~surprise_memory.evaluation.detector.GebdDetector`'s
            keyword arguments.

    Raises:
        ModelLoadError: The weights cannot be loaded.

    """

    def __init__(self, encoder_config: EncoderConfig, detector_settings: Mapping[str, Any]) -> None:
        from surprise_memory.perception.encoders import VideoEncoder

        self.config = encoder_config
        self.encoder = VideoEncoder.from_config(encoder_config)
        self.detector = GebdDetector(**detector_settings)

    def run(self, shard: GebdShard, report: Callable[[int], None]) -> TaskResult:
        """Detect each video of the shard; a failing video is recorded, the rest go on.

        Returns:
            ``value``: ``causal`` and ``offline`` predictions ``{video id: [seconds]}`` and
            ``failed`` ``{video id: error}``; ``ok`` when no video failed.

        """
        causal: dict[str, list[float]] = {}
        offline: dict[str, list[float]] = {}
        failed: dict[str, str] = {}
        for done, (vid, path) in enumerate(shard.videos, 1):
            one = guarded(vid, partial(self._detect, vid, Path(path)))
            if one.ok:
                causal[vid], offline[vid] = one.value["causal"], one.value["offline"]
            else:
                failed[vid] = one.error
            report(done)
        return TaskResult(
            shard.key,
            ok=not failed,
            units=len(shard.videos),
            error=f"{len(failed)} of {len(shard.videos)} videos failed" if failed else "",
            value={
                "model": self.encoder.model_name,
                "causal": causal,
                "offline": offline,
                "failed": failed,
            },
        )

    def _detect(self, vid: str, path: Path) -> TaskResult:
        found = detect_video(path, self.encoder, self.config, self.detector)
        value = {"causal": list(found.causal_s), "offline": list(found.offline_s)}
        return TaskResult(vid, ok=True, units=1, value=value)


class ShardCheckpoints:
    """Finished shards kept in a folder, for a re-run to take instead of detecting again.

    Args:
        folder: The checkpoint folder (created); None = no checkpoints.
        fingerprint: The settings the shards were detected with (plain JSON).

    Raises:
        StoreError: The folder holds shards of other settings, or cannot be written.

    """

    def __init__(self, folder: Path | None, fingerprint: Mapping[str, Any]) -> None:
        self.folder = folder
        if folder is None:
            return
        job = folder / "job.json"
        want = {"format": _CHECKPOINT_FORMAT, **json.loads(json.dumps(fingerprint))}
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if job.is_file():
                have = json.loads(job.read_text(encoding="utf-8"))
                if have != want:
                    differ = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
                    raise StoreError(
                        f"{folder} holds shards detected with other settings "
                        f"({', '.join(differ)}); give a new --checkpoint folder"
                    )
            else:
                write_json(job, want)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot use the checkpoint folder {folder}: {exc}") from exc

    def load(self, shard: GebdShard) -> TaskResult | None:
        """The shard's result from an earlier run, when it finished with no failed video."""
        if self.folder is None:
            return None
        path = self.folder / f"{shard.key}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if data.get("videos") != [list(v) for v in shard.videos] or data.get("failed"):
            return None
        value = {k: data[k] for k in ("model", "causal", "offline")}
        value["failed"] = {}
        return TaskResult(shard.key, ok=True, units=len(shard.videos), value=value)

    def save(self, shard: GebdShard, result: TaskResult) -> None:
        """Keep a finished shard (with its failures, which a re-run redoes)."""
        if self.folder is None or not result.value:
            return
        data = {"videos": [list(v) for v in shard.videos], **result.value}
        write_json(self.folder / f"{shard.key}.json", data)


@dataclass
class GebdPredictions:
    """The predictions of all shards, in the shards' order.

    Attributes:
        causal: ``{video id: [seconds]}`` of the causal gate.
        offline: The same for the offline variant.
        failed: ``{video id: error}`` of the videos that failed (no prediction).
        from_checkpoint: Shards taken from the checkpoint folder.
        model: The video encoder's name (``model_name``), None when no shard ran.

    """

    causal: dict[str, list[float]] = field(default_factory=dict)
    offline: dict[str, list[float]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    from_checkpoint: int = 0
    model: str | None = None


def detect_in_shards(
    shards: Sequence[GebdShard],
    encoder_config: EncoderConfig,
    detector_settings: Mapping[str, Any],
    *,
    checkpoints: ShardCheckpoints | None = None,
    cluster: ClusterOptions | None = None,
    listener: Callable[[ProgressSnapshot], None] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> GebdPredictions:
    """Detect every shard (here, or on Ray with ``cluster``) and merge the predictions.

    Args:
        shards: The shards (:func:`plan_shards`).
        encoder_config: The video encoder's settings.
        detector_settings: The detector's keyword arguments.
        checkpoints: Finished shards to take, and where to keep new ones.
        cluster: Run on Ray with these options; None = here, one shard after the other.
        listener: Progress listener.
        on_start: Called once the workers have loaded their models, with a line about them.

    Returns:
        The merged predictions.

    Raises:
        ModelLoadError: The encoder's weights cannot be loaded.

    """
    ckpt = checkpoints or ShardCheckpoints(None, {})
    results: dict[str, TaskResult] = {}
    todo = []
    for shard in shards:
        kept = ckpt.load(shard)
        if kept is not None:
            results[shard.key] = kept
        else:
            todo.append(shard)
    by_key = {s.key: s for s in todo}

    def on_result(result: TaskResult) -> None:
        results[result.key] = result
        ckpt.save(by_key[result.key], result)

    progress = JobProgress(todo, listener)
    args = (encoder_config, dict(detector_settings))
    if cluster is None:
        run_locally(GebdShardWorker, args, todo, on_result, progress, on_start=on_start)
    else:
        from surprise_memory.offline.ray_runner import run_on_ray

        want_gpu = encoder_config.encoder_device != "cpu"
        run_on_ray(
            GebdShardWorker,
            args,
            todo,
            on_result,
            cluster,
            want_gpu=want_gpu,
            progress=progress,
            on_start=on_start,
        )
    merged = GebdPredictions(from_checkpoint=len(shards) - len(todo))
    for shard in shards:
        result = results[shard.key]
        merged.causal.update(result.value.get("causal", {}))
        merged.offline.update(result.value.get("offline", {}))
        merged.failed.update(result.value.get("failed", {}))
        merged.model = merged.model or result.value.get("model")
        if not result.value:  # the whole shard was lost (its worker died)
            merged.failed.update({vid: result.error for vid, _ in shard.videos})
    return merged
