"""A recording of several cameras into one store: each camera's topic, its own surprise.

``surprise-memory process BAG --cameras front,rear`` (or ``--all-cameras``) runs the
offline pipeline once per camera over the same bag, each pass reading its camera's image
topic only: each camera has its own windows, Gaussian window, gate and episode assembly,
as on the robot, and every episode is stored with its camera (its name, its frames'
``frame_id`` or the configured ``frame=``, and, where the camera's ``yaw=`` is given, its
pose: the robot's pose from ``--pose-topic`` turned by it). One store, one set of models.

Which topic a camera reads: its ``topic=`` (with or without the leading ``/``), else the
bag's one image topic whose name gives the camera's (:func:`camera_name_of_topic`:
``/front/image_raw`` -> ``front``, ``/camera/left/image_raw`` -> ``camera_left``).
``--all-cameras`` takes every image topic, each named so.

Beside the store: ``cameras/<name>/run.json`` and ``cameras/<name>/scores.csv`` per
camera (each camera's own surprise curve), and ``run.json`` with the run's settings,
models, every camera's summary and topic, the events (each naming its camera) and the
summary of all cameras together.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from surprise_memory.config import CAMERA_NAME_PATTERN, CameraSpec
from surprise_memory.errors import InputError, StoreError
from surprise_memory.offline.pipeline import OfflinePipeline, Progress, process
from surprise_memory.offline.run_record import (
    RUN_FORMAT,
    RUN_RECORD,
    RunSummary,
    load_run_record,
    versions,
    write_json,
)
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["CAMERAS_DIR", "bag_cameras", "camera_name_of_topic", "process_cameras"]

CAMERAS_DIR = "cameras"
"""The folder, beside the store's database, of each camera's run record and scores."""

_SUFFIXES = ("/compressed", "/image_raw", "/image_rect_color", "/image_rect", "/image_color")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_NAME_RE = re.compile(CAMERA_NAME_PATTERN)


def camera_name_of_topic(topic: str) -> str:
    """The camera name a bag's image topic gives: its path less image suffixes, ``_``-joined.

    Args:
        topic: An image topic (``/front/image_raw``, ``/camera/left/image_raw/compressed``).

    Returns:
        The name (``front``, ``camera_left``); "" when nothing usable is left.

    """
    name = topic.strip("/")
    changed = True
    while changed:
        changed = False
        for suffix in (*_SUFFIXES, "/image"):
            if ("/" + name).endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    name = _NOT_NAME.sub("_", name.strip("/").replace("/", "_"))
    return name if _NAME_RE.fullmatch(name) else ""


def bag_cameras(images: Sequence[str], cameras: Sequence[CameraSpec] | None) -> list[CameraSpec]:
    """Each camera with the bag topic it reads (its ``topic`` set to it).

    Args:
        images: The bag's image topics.
        cameras: The cameras asked for (``cameras`` setting); None = every image topic.

    Returns:
        The cameras, each with its bag topic.

    Raises:
        InputError: A camera names no image topic of the bag, two cameras would read one
            topic, or (every topic) a topic gives no usable or no distinct name.

    """
    listing = ", ".join(f"{t} (camera {camera_name_of_topic(t) or '?'})" for t in images)
    out: list[CameraSpec] = []
    if cameras is None:
        for topic in images:
            name = camera_name_of_topic(topic)
            if not name:
                raise InputError(
                    f"image topic {topic!r} gives no camera name: name the cameras with "
                    "--cameras NAME:topic=TOPIC,..."
                )
            out.append(CameraSpec(name, topic))
    else:
        for spec in cameras:
            if not spec.name:
                raise InputError("--cameras: give each camera a name (e.g. --cameras front,rear)")
            if spec.topic != f"{spec.name}/image":  # its topic given
                topic = spec.topic if spec.topic.startswith("/") else f"/{spec.topic}"
                if topic not in images:
                    raise InputError(
                        f"camera {spec.name!r}: topic {topic} is not an image topic of the "
                        f"bag; its image topics: {listing or 'none'}"
                    )
            else:
                found = [t for t in images if camera_name_of_topic(t) == spec.name]
                if len(found) != 1:
                    raise InputError(
                        f"camera {spec.name!r}: {len(found)} image topics of the bag give that "
                        f"name; name its topic (--cameras {spec.name}:topic=TOPIC); its image "
                        f"topics: {listing or 'none'}"
                    )
                topic = found[0]
            out.append(CameraSpec(spec.name, topic, spec.frame, spec.yaw_deg))
    for attr in ("name", "topic"):
        values = [getattr(s, attr) for s in out]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise InputError(f"two cameras with one {attr}: {', '.join(twice)}")
    if not out:
        raise InputError("the bag has no image topic")
    return out


def _combined(parts: Sequence[RunSummary], load_s: float) -> RunSummary:
    """The summary of every camera's pass together (counts summed, one time span)."""
    sm = RunSummary(load_s=load_s)
    for name in (
        "frames",
        "windows",
        "padded_windows",
        "scored",
        "events",
        "candidates",
        "suppressed_habituation",
        "suppressed_budget",
        "episodes",
        "stored_frames",
        "redacted_frames",
        "redacted_faces",
        "rejected",
    ):
        setattr(sm, name, sum(getattr(p, name) for p in parts))
    sm.wall_s = sum(p.wall_s for p in parts)
    firsts = [p.first_stamp_ns for p in parts if p.first_stamp_ns is not None]
    lasts = [p.last_stamp_ns for p in parts if p.last_stamp_ns is not None]
    if firsts and lasts:
        sm.first_stamp_ns, sm.last_stamp_ns = min(firsts), max(lasts)
        sm.duration_s = (sm.last_stamp_ns - sm.first_stamp_ns) / NS_PER_SECOND
    minutes = sm.duration_s / 60.0
    sm.episodes_per_minute = sm.episodes / minutes if minutes > 0 else 0.0
    sm.stored_fraction = sm.stored_frames / sm.frames if sm.frames else 0.0
    sm.throughput_fps = sm.frames / sm.wall_s if sm.wall_s > 0 else 0.0
    return sm


def process_cameras(
    input_path: str | os.PathLike[str],
    store_path: str | os.PathLike[str],
    cameras: Sequence[CameraSpec] | None,
    *,
    pipeline: OfflinePipeline,
    pose_topic: str | None = None,
    fps: float | None = None,
    progress: Callable[[str, Progress], None] | None = None,
    on_open: Callable[[Any, Any], None] | None = None,
) -> dict[str, RunSummary]:
    """Process a bag's cameras into one new store (see the module doc).

    Args:
        input_path: A rosbag2 folder or file, or a ROS 1 bag.
        store_path: The new store folder.
        cameras: The cameras (the ``cameras`` setting's specs); None = every image topic.
        pipeline: The pipeline with its models loaded (one for every camera).
        pose_topic: The bag's odometry, pose or ``/tf`` topic for the poses; None = none.
        fps: Keep at most this many frames per second of each camera (None: all).
        progress: Called with the camera's name and its pass's progress after each frame.
        on_open: Called with each camera's source and pose lookup once opened.

    Returns:
        Each camera's summary, by name, and ``""``: all cameras together.

    Raises:
        InputError: Not a bag, or a camera names no topic of it.
        StoreError: The store exists with episodes or a run, or cannot be written.

    """
    from surprise_memory.memory.store import EpisodeStore
    from surprise_memory.sources.bag import bag_image_topics

    root = Path(store_path).expanduser()
    if (root / RUN_RECORD).exists():
        raise StoreError(f"{root} already holds an offline run ({RUN_RECORD}); give a new --out")
    specs = bag_cameras(bag_image_topics(Path(input_path)), cameras)  # only a bag has several
    summaries: dict[str, RunSummary] = {}
    record: dict[str, Any] = {}
    started = time.time_ns()
    with EpisodeStore(root, pipeline.settings.store) as store:
        if len(store):
            raise StoreError(f"{root} already holds {len(store)} episodes; give a new --out")
        for spec in specs:
            each: Callable[[Progress], None] | None = None
            if progress is not None:

                def each(p: Progress, name: str = spec.name) -> None:
                    assert progress is not None
                    progress(name, p)

            summaries[spec.name] = process(
                input_path,
                root / CAMERAS_DIR / spec.name,
                image_topic=spec.topic,
                pose_topic=pose_topic,
                fps=fps,
                pipeline=pipeline,
                progress=each,
                on_open=on_open,
                store=store,
                camera=spec,
            )
            record[spec.name] = load_run_record(root / CAMERAS_DIR / spec.name)
        store_settings = {**store.config.as_dict(), "store_path": str(store.path)}
    total = _combined(list(summaries.values()), pipeline.load_s)
    first = record[specs[0].name]
    events = sorted((e for r in record.values() for e in r["events"]), key=lambda e: e["stamp_ns"])
    write_json(
        root / RUN_RECORD,
        {
            "format": RUN_FORMAT,
            "status": "complete",
            "started_wall_ns": started,
            "finished_wall_ns": time.time_ns(),
            "input": {**first["input"], "stream": [s.topic for s in specs]},
            "settings": {**first["settings"], "store": store_settings},
            "models": first["models"],
            "untrained": first["untrained"],
            "versions": versions(),
            "cameras": {
                s.name: {"topic": s.topic, "summary": summaries[s.name].as_dict()} for s in specs
            },
            "summary": total.as_dict(),
            "events": events,
            "suppressed": [x for r in record.values() for x in r["suppressed"]],
            "episodes": [i for r in record.values() for i in r["episodes"]],
        },
    )
    return {**summaries, "": total}
