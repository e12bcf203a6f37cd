"""What the page's requests answer, as plain JSON-ready data (no web framework here).

Times go to the page as seconds from the store's time origin (the first frame its writer
saw, as the CLI, the report and the agent tool count them); the absolute stamps travel as
strings of integer nanoseconds, since a JavaScript number cannot hold them exactly. JSON
has no NaN: an unknown value (a threshold never set) is ``null``.

* :func:`search_query`: the page's search fields -> a validated
  :class:`~surprise_memory.memory.retrieval.RetrievalQuery`;
* :func:`timeline_columns`: episode summaries as columns (the timeline, the map, and the
  live feed's additions);
* :func:`episode_view` and :func:`hit_views`: one episode, and search results (each
  saying its kind: a surprise ``episode`` or a ``place`` keyframe);
* :func:`place_status_view`: whether an episode's place was seen since, and still looks so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.pose import yaw_of
from surprise_memory.memory.retrieval import RetrievalQuery, parse_point
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.stamps import NS_PER_SECOND, parse_time

__all__ = [
    "DEFAULT_RESULTS",
    "episode_view",
    "frame_url",
    "hit_views",
    "parse_count",
    "place_status_view",
    "search_query",
    "seconds",
    "thumbnail_url",
    "timeline_columns",
]

DEFAULT_RESULTS = 12
"""Results of a search when the page does not say."""

_COUNT = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() also takes "²"


def parse_count(text: str) -> int | None:
    """A whole number >= 0 written in ASCII digits, or None for anything else.

    ``str.isdigit`` accepts superscripts ("²") and other digits that ``int`` refuses, so a
    check with it let such a number through to a crash (a 500); this one never raises.
    """
    return int(text) if _COUNT.fullmatch(text) else None


def seconds(stamp_ns: int, origin_ns: int | None) -> float:
    """A stamp as seconds from the origin (from 0 ns when the store has none yet)."""
    return (stamp_ns - (origin_ns or 0)) / NS_PER_SECOND


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def frame_url(episode_id: str, index: int) -> str:
    """Where the page loads one frame of an episode (the id is URL-quoted)."""
    return f"/api/episodes/{quote(episode_id, safe='')}/frames/{index}"


def thumbnail_url(rec: EpisodeRecord) -> str:
    """Where the page loads an episode's picture: its trigger frame (one rule everywhere)."""
    return frame_url(rec.id, trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns))


def _field(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def search_query(
    params: Mapping[str, str],
    origin_ns: int | None,
    *,
    max_results_cap: int,
    embedding: npt.NDArray[np.float32] | None = None,
    embedder_model: str | None = None,
) -> RetrievalQuery:
    """The query of the page's search fields (empty fields are no filter).

    Args:
        params: ``start``, ``end`` (seconds from the origin, ``<int>ns`` or ISO 8601 with a
            zone), ``near`` (``x,y[,z]`` metres), ``near_frame``, ``radius`` (metres),
            ``robot_id``, ``k`` (results, 1..``max_results_cap``), ``kind`` (``episode``,
            ``place`` or ``both``, the default).
        origin_ns: The store's time origin, for relative times.
        max_results_cap: The store's cap on results.
        embedding: The text or image query vector, if any.
        embedder_model: The model that made ``embedding``.

    Returns:
        The validated query.

    Raises:
        InputError: A field is malformed (the message names it and what is expected).

    """
    start = _field(params, "start")
    end = _field(params, "end")
    near = _field(params, "near")
    radius = _field(params, "radius")
    k_text = _field(params, "k")
    start_ns = None if start is None else max(parse_time(start, origin_ns), 1)
    end_ns = None if end is None else max(parse_time(end, origin_ns), 1)
    if start_ns is not None and end_ns is not None and end_ns < start_ns:
        raise InputError(f"time range {start!r}..{end!r}: the end is before the start")
    radius_m = None
    if radius is not None:
        try:
            radius_m = float(radius)
        except ValueError:
            radius_m = math.nan
        if not math.isfinite(radius_m) or radius_m <= 0:
            raise InputError(f"radius {radius!r}: expected a distance in metres above 0")
        if near is None:
            raise InputError("a radius needs a place (near: x,y)")
    kind = _field(params, "kind") or "both"
    if kind not in ("episode", "place", "both"):
        raise InputError(f"kind {kind!r}: expected episode, place or both")
    k = DEFAULT_RESULTS
    if k_text is not None:
        k_value = parse_count(k_text)
        if k_value is None or not 1 <= k_value <= max_results_cap:
            raise InputError(f"k {k_text!r}: expected a number of results, 1..{max_results_cap}")
        k = k_value
    return RetrievalQuery(
        embedding=embedding,
        embedder_model=embedder_model,
        start_ns=start_ns,
        end_ns=end_ns,
        near=None if near is None else parse_point(near, "near"),
        near_frame=_field(params, "near_frame"),
        radius_m=radius_m,
        max_results=k,
        robot_id=_field(params, "robot_id"),
        camera=_field(params, "camera"),
        kinds=None if kind == "both" else frozenset({kind}),
    )


def timeline_columns(
    summaries: Sequence[EpisodeSummary], origin_ns: int | None
) -> dict[str, list[Any]]:
    """Episodes as columns (smaller and faster to encode than one object each).

    Returns:
        ``id``, ``robot``, ``t`` (seconds), ``surprise``, ``threshold`` (null = unknown),
        ``x``, ``y``, ``z`` and ``frame`` (null without a pose), ``camera`` ("" = the one
        unnamed camera), ``view`` (where the camera looked, degrees about z in
        ``frame``; null when unknown) and ``kind`` (``episode`` or ``place``), one entry
        per episode.

    """
    names = (
        "id", "robot", "t", "surprise", "threshold", "x", "y", "z", "frame", "camera", "view",
        "kind",
    )  # fmt: skip
    if not summaries:
        return {name: [] for name in names}
    columns = zip(*summaries, strict=True)
    ids, robots, stamps, surprise, threshold, valid, x, y, z, frames, cameras, yaws, kinds, *_ = (
        columns
    )
    posed = np.asarray(valid, dtype=bool)
    tau = np.asarray(threshold, dtype=np.float64)
    view = np.asarray(yaws, dtype=np.float64)
    t = (np.asarray(stamps, dtype=np.int64) - (origin_ns or 0)) / NS_PER_SECOND
    # ms, mm and 1e-4 of a score are finer than the page shows: shorter JSON, sent faster
    return {
        "id": list(ids),
        "robot": list(robots),
        "t": _rounded(t, 3),
        "surprise": _rounded(np.asarray(surprise, dtype=np.float64), 4),
        "threshold": _rounded(tau, 4, np.isfinite(tau)),
        "x": _rounded(np.asarray(x, dtype=np.float64), 3, posed),
        "y": _rounded(np.asarray(y, dtype=np.float64), 3, posed),
        "z": _rounded(np.asarray(z, dtype=np.float64), 3, posed),
        "frame": [f if ok else None for f, ok in zip(frames, valid, strict=True)],
        "camera": list(cameras),
        "view": _rounded(np.degrees(view), 1, posed & np.isfinite(view)),
        "kind": list(kinds),
    }


def _rounded(
    values: npt.NDArray[np.float64], digits: int, known: npt.NDArray[np.bool_] | None = None
) -> list[float | None]:
    """Values rounded to ``digits`` decimals, None where not ``known``."""
    out: list[float | None] = np.round(values, digits).tolist()
    if known is not None:
        for i in np.flatnonzero(~known).tolist():
            out[i] = None
    return out


def episode_view(
    rec: EpisodeRecord,
    origin_ns: int | None,
    why: list[str],
    snapshots: Sequence[SnapshotNote] = (),
) -> dict[str, Any]:
    """One episode for its page: frames, times, pose, surprise, models, why it was kept.

    ``snapshots``: the bag snapshots asked for it (their wall-clock ns as strings).
    """
    pose = rec.pose
    return {
        "id": rec.id,
        "kind": rec.kind,
        "place_key": rec.place_key,
        "robot_id": rec.robot_id,
        "t": seconds(rec.stamp_ns, origin_ns),
        "stamp_ns": str(rec.stamp_ns),
        "start_t": seconds(rec.start_ns, origin_ns),
        "end_t": seconds(rec.end_ns, origin_ns),
        "frames": [frame_url(rec.id, i) for i in range(len(rec.frame_stamps_ns))],
        "frame_t": [seconds(s, origin_ns) for s in rec.frame_stamps_ns],
        "trigger_frame": trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns),
        "pose": {
            "valid": rec.pose_valid,
            "frame": pose.frame_id,
            "position": list(pose.position),
            "orientation": [pose.qx, pose.qy, pose.qz, pose.qw],
            "yaw_deg": math.degrees(yaw_of(pose)),
        },
        "camera": {
            "name": rec.camera.name,
            "frame": rec.camera.frame_id,
            "view_yaw_deg": None if rec.camera.yaw is None else math.degrees(rec.camera.yaw),
        },
        "pose_trust": _trust_view(rec),
        "surprise": rec.surprise,
        "threshold": _finite(rec.threshold),
        "encoder": {"model": rec.encoder_model, "pretrained": rec.encoder_pretrained},
        "embedder": {"model": rec.embedder_model, "pretrained": rec.embedder_pretrained},
        "created_wall_ns": str(rec.created_wall_ns),
        "why": why,
        "snapshots": [
            {**n.as_dict(), "requested_ns": str(n.requested_ns), "answered_ns": str(n.answered_ns)}
            for n in snapshots
        ],
    }


def _trust_view(rec: EpisodeRecord) -> dict[str, Any]:
    """How far an episode's pose can be trusted: uncertainty (null = unknown), map, a line."""
    trust = rec.pose_trust
    return {"sigma_m": trust.sigma_m, "map_id": trust.map_id, "text": trust.describe()}


def hit_views(hits: Sequence[RetrievalHit], origin_ns: int | None) -> list[dict[str, Any]]:
    """Search results, best first: each with its score, distance and thumbnail."""
    out = []
    for hit in hits:
        rec = hit.episode
        out.append(
            {
                "id": rec.id,
                "kind": rec.kind,
                "place_key": rec.place_key,
                "robot_id": rec.robot_id,
                "t": seconds(rec.stamp_ns, origin_ns),
                "score": hit.score,
                "distance_m": hit.distance_m,
                "surprise": rec.surprise,
                "position": list(rec.pose.position) if rec.pose_valid else None,
                "frame": rec.pose.frame_id if rec.pose_valid else None,
                "camera": rec.camera.name,
                "pose_trust": _trust_view(rec),
                "thumbnail": thumbnail_url(rec),
            }
        )
    return out


def place_status_view(
    rec: EpisodeRecord, status: PlaceStatus | None, origin_ns: int | None, *, kept: bool
) -> dict[str, Any]:
    """Whether an episode's place was seen since, for its page.

    Args:
        rec: The record asked about.
        status: Its :func:`~surprise_memory.memory.place_status.place_status` (None: not
            asked, or no pose).
        origin_ns: The store's time origin.
        kept: Whether the store holds any place keyframe at all.

    Returns:
        ``kind``; ``status``: null or ``place_key``, ``last_seen_t`` (seconds from the
        origin), ``last_seen_ns`` (a string), ``later_s`` (seconds after the episode),
        ``similarity`` and ``still_there`` (null: not seen since), ``view_id``;
        ``reason``: why there is no status (null when there is one).

    """
    out: dict[str, Any] = {"id": rec.id, "kind": rec.kind, "status": None, "reason": None}
    if status is not None:
        out["status"] = {
            "place_key": status.place_key,
            "last_seen_t": seconds(status.last_seen_ns, origin_ns),
            "last_seen_ns": str(status.last_seen_ns),
            "later_s": (status.last_seen_ns - rec.stamp_ns) / NS_PER_SECOND,
            "similarity": status.similarity,
            "still_there": status.still_there,
            "view_id": status.view_id,
        }
    elif rec.kind != "episode":
        out["reason"] = f"a place keyframe: a view of {rec.place_key}"
    elif not kept:
        out["reason"] = "this store keeps no place keyframes (a live memory node keeps them)"
    else:
        out["reason"] = "no pose: its place is unknown"
    return out
