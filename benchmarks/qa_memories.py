"""The memories of the place ablation (``bench_qa_places.py``), built over one world.

One pass of the offline pipeline gives the paper's surprise episodes; the other memories
are built from the same rendered frames and poses without the video encoder, which
their decisions do not use:

* ``place``: place keyframes, :class:`~surprise_memory.memory.places.PlaceKeyframeSelector`
  (the real selector, at its default settings unless given) pushed every frame with the
  robot's pose; the last ``place_history`` keyframes of each place are kept (an earlier
  one a revisit replaced is gone from the memory, also for questions asked before the
  revisit: slightly pessimistic for the place memories);
* ``surprise+place``: the surprise store with the place keyframes added;
* ``uniform`` and ``random``: :class:`~surprise_memory.surprise.baseline.BaselineGate`
  triggers at the rate that stores as many frames as ``surprise+place``, assembled by the
  pipeline's :class:`~surprise_memory.memory.episodes.EpisodeAssembler` (8 frames around
  each trigger, as the pipeline assembles them);
* ``ceiling``: uniform at 15 episodes a minute (an episode every 4 s: every frame lies in
  an episode's span), the store-everything memory of ``bench_qa.py``.

Every frame stored is embedded by the same small image embedder as the pipeline's.
"""

from __future__ import annotations

import bisect
import shutil
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surprise_memory.config import BaselineConfig, EpisodeConfig
from surprise_memory.memory.episodes import EpisodeAssembler
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.perception.frames import Frame
from surprise_memory.surprise.baseline import BaselineGate

CEILING_PER_MINUTE = 15.0


@dataclass(frozen=True)
class Keyframe:
    """A place keyframe: the frame's index in the world's stream, its pose and place."""

    index: int
    pose: Pose
    place_key: str


def pose_at(odometry: Sequence[tuple[int, Pose]], stamps: Sequence[int], stamp_ns: int) -> Pose:
    """The odometry sample nearest ``stamp_ns`` (``stamps``: the samples' stamps, sorted)."""
    i = bisect.bisect_left(stamps, stamp_ns)
    near = min(
        (j for j in (i - 1, i) if 0 <= j < len(stamps)), key=lambda j: abs(stamps[j] - stamp_ns)
    )
    return odometry[near][1]


def place_keyframes(
    frames: Sequence[Frame], odometry: Sequence[tuple[int, Pose]], settings: dict[str, Any]
) -> tuple[list[Keyframe], dict[str, int]]:
    """The place keyframes of a stream, the last ``place_history`` per place.

    Returns:
        The keyframes in time order, and the selector's counts of frames not kept.

    """
    from surprise_memory.config import StoreConfig
    from surprise_memory.config.places import PlacesConfig
    from surprise_memory.memory.places import PlaceKeyframeSelector

    config = PlacesConfig.from_mapping(settings)
    history = StoreConfig.from_mapping(settings).place_history  # the store's bound
    selector = PlaceKeyframeSelector(config)
    stamps = [s for s, _ in odometry]
    kept: dict[str, deque[Keyframe]] = defaultdict(lambda: deque(maxlen=history))
    for index, frame in enumerate(frames):
        pose = pose_at(odometry, stamps, frame.stamp_ns)
        decision = selector.push(frame.stamp_ns, pose, pose_stamp_ns=frame.stamp_ns)
        if decision is not None:
            kept[decision.place_key].append(Keyframe(index, decision.pose, decision.place_key))
    out = sorted((k for history in kept.values() for k in history), key=lambda k: k.index)
    return out, dict(selector.skipped)


def add_keyframes(
    store_path: Path,
    frames: Sequence[Frame],
    keyframes: Sequence[Keyframe],
    embedder: ImageTextEmbedder,
) -> None:
    """Add ``keyframes`` to the store in ``store_path`` (created when missing) as places."""
    if not keyframes:
        return
    embeddings = embedder.embed_images([frames[k.index].rgb for k in keyframes])
    with EpisodeStore(store_path) as store:
        for k, embedding in zip(keyframes, embeddings, strict=True):
            frame = frames[k.index]
            store.add(
                [frame],
                embedding[None, :],
                stamp_ns=frame.stamp_ns,
                surprise=0.0,  # a place keyframe is not a surprise
                embedder_model=embedder.model_name,
                embedder_pretrained=embedder.pretrained,
                pose=k.pose,
                episode_id=f"place-{frame.stamp_ns}",
                session_id="",
                **_place_kind(store, k.place_key),
            )


def _place_kind(store: Any, key: str) -> dict[str, Any]:
    """``kind``/``place_key`` where the store records them (the place store's columns)."""
    import inspect

    names = inspect.signature(store.add).parameters
    return {"kind": "place", "place_key": key} if "kind" in names else {}


def baseline_episodes(
    store_path: Path,
    frames: Sequence[Frame],
    odometry: Sequence[tuple[int, Pose]],
    embedder: ImageTextEmbedder,
    *,
    mode: str,
    per_minute: float,
    seed: int,
) -> int:
    """A uniform or random memory of ``frames`` at ``per_minute``; returns frames stored."""
    gate = BaselineGate(
        BaselineConfig(gate_mode=mode, baseline_episodes_per_minute=per_minute, baseline_seed=seed)
    )
    gate.start(frames[0].stamp_ns)
    assembler = EpisodeAssembler(EpisodeConfig())
    stamps = [s for s, _ in odometry]
    built = []
    for frame in frames:
        built += assembler.add_frame(frame)
        for trigger in gate.push(frame.stamp_ns, 0.0):
            built += assembler.add_trigger(trigger)
    for trigger in gate.flush():
        built += assembler.add_trigger(trigger)
    built += assembler.flush()
    stored = 0
    with EpisodeStore(store_path) as store:
        for episode in built:
            images = [f.rgb for f in episode.frames]
            stamp = episode.trigger.stamp_ns
            store.add(
                list(episode.frames),
                embedder.embed_images(images),
                stamp_ns=stamp,
                surprise=0.0,
                embedder_model=embedder.model_name,
                embedder_pretrained=embedder.pretrained,
                pose=pose_at(odometry, stamps, stamp),
                session_id="",
            )
            stored += len(images)
    return stored


def copy_store(source: Path, target: Path) -> None:
    """A copy of the store folder ``source`` at ``target``."""
    shutil.copytree(source, target)


def stored_frames(store_path: Path) -> int:
    """Frames held by the store in ``store_path``."""
    with EpisodeStore(store_path, read_only=True) as store:
        return sum(len(store.get(i).frame_stamps_ns) for i in store.episode_ids())
