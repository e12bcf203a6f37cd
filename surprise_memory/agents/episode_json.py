"""A stored record as every agent tool gives it: its JSON, its frames, its kind.

The search tool (:class:`~surprise_memory.agents.tool.EpisodicMemoryTool`), ``get_episode``
(:class:`~surprise_memory.agents.episode_tool.GetEpisodeTool`) and the MCP server built on
them all answer with :func:`episode_json` and :func:`frame_images`, so an agent reads one
shape wherever a record comes from. Times are seconds since the tool's origin, positions
metres, angles degrees.

A record is a surprise episode (kind ``"episode"``: an 8-frame clip of something that
surprised the robot) or a place keyframe (kind ``"place"``: one frame, the view of a place
the robot passed); :func:`record_kinds` reads the ``kinds`` argument that chooses between
them. Where the answer was asked whether an episode's place still looks so (the hit's
``place_status``, :class:`~surprise_memory.memory.places.PlaceStatus`, filled in this
process or by the memory node), the JSON says when the place was last seen and whether
it still looked the same then.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from surprise_memory.errors import InputError
from surprise_memory.memory.places import PLACE, RECORD_KINDS
from surprise_memory.memory.store import RetrievalHit
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["episode_json", "frame_images", "known_at", "record_kinds", "seconds_since"]


def seconds_since(stamp: int, origin: int) -> float:
    """``stamp`` (int ns) as seconds since ``origin`` (int ns), to the millisecond."""
    return round((stamp - origin) / NS_PER_SECOND, 3)


def record_kinds(value: Any) -> frozenset[str] | None:
    """The ``kinds`` argument of a search as a query's kinds (None: both kinds).

    Args:
        value: None, or a non-empty list of ``"episode"`` and/or ``"place"``.

    Raises:
        InputError: Not such a list (the message names the kinds there are).

    """
    if value is None:
        return None
    allowed = f"a list of {', '.join(repr(k) for k in RECORD_KINDS)}, or null for both"
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise InputError(f"kinds={value!r}: must be {allowed}")
    unknown = [k for k in value if not isinstance(k, str) or k not in RECORD_KINDS]
    if unknown:
        raise InputError(f"kinds: no kind {unknown[0]!r}; must be {allowed}")
    return frozenset(value)


def known_at(hits: Sequence[RetrievalHit], now: int | None) -> list[RetrievalHit]:
    """``hits`` without the place statuses that rest on a view after ``now`` (int ns).

    The memory keeps only a place's newest views, so what the place looked like at ``now``
    is not known once a later view replaced them; that later view must not leak into an
    answer given at ``now`` (DAAAM asks each question at the robot's time then). None =
    no limit.
    """
    return [
        dataclasses.replace(h, place_status=None)
        if now is not None and h.place_status is not None and h.place_status.last_seen_ns > now
        else h
        for h in hits
    ]


def episode_json(hit: RetrievalHit, origin: int) -> dict[str, Any]:
    """A record as the agent tools give it: times in seconds since ``origin``, metres.

    Args:
        hit: The record (its score and distance when it came from a query, its place's
            status when that was asked).
        origin: Time zero, int ns.

    Returns:
        ``id``, ``kind`` (``"episode"`` or ``"place"``), ``place`` (a place keyframe's
        place key; an episode's own place when its status is known, else null),
        ``time``, ``start_time``, ``end_time``, ``position`` (null without a pose),
        ``frame``, ``surprise``, ``similarity``, ``distance``, ``frame_times``, ``robot``,
        ``camera`` (null: the one unnamed camera), ``view_yaw`` (where it looked, degrees
        about z in ``frame``), ``pose_uncertainty_m`` and ``map`` (null when unknown);
        with a place status also ``last_seen`` (when the place was last seen, seconds
        since ``origin``; the episode's own time when not seen since), ``still_there``
        (whether that view still looks like the episode; null: not seen since) and
        ``view_similarity`` (the cosine behind it; null: not seen since).

    """
    ep = hit.episode
    status = hit.place_status
    place: str | None = ep.place_key if ep.kind == PLACE else None
    if place is None and status is not None:
        place = status.place_key
    found: dict[str, Any] = {
        "id": ep.id,
        "kind": ep.kind,
        "place": place,
        "time": seconds_since(ep.stamp_ns, origin),
        "start_time": seconds_since(ep.start_ns, origin),
        "end_time": seconds_since(ep.end_ns, origin),
        "position": [round(v, 3) for v in ep.pose.position] if ep.pose_valid else None,
        "frame": ep.pose.frame_id if ep.pose_valid else None,
        "surprise": round(ep.surprise, 4),
        "similarity": None if hit.score is None else round(hit.score, 4),
        "distance": None if hit.distance_m is None else round(hit.distance_m, 3),
        "frame_times": [seconds_since(s, origin) for s in ep.frame_stamps_ns],
        "robot": ep.robot_id,
        "camera": ep.camera.name or None,
        "view_yaw": None if ep.camera.yaw is None else round(math.degrees(ep.camera.yaw), 1),
        **ep.pose_trust.as_json(),
    }
    if status is not None:
        found["last_seen"] = seconds_since(status.last_seen_ns, origin)
        found["still_there"] = status.still_there
        found["view_similarity"] = (
            None if status.similarity is None else round(status.similarity, 4)
        )
    return found


def frame_images(hit: RetrievalHit, origin: int, frames: int | None = None) -> list[dict[str, str]]:
    """A record's frames as DAAAM takes images: ``{"base64", "label"}``, the stored JPEGs.

    Args:
        hit: The record, with its JPEG bytes (``hit.jpegs``; none: no image).
        origin: Time zero of the labels' times, int ns.
        frames: How many, evenly spaced (first and last among them); None = every frame.

    Returns:
        One dict per frame, labelled ``episode <id>, frame i/n, t=<s> s`` (``place <id>,
        ...`` for a place keyframe).

    """
    n = len(hit.jpegs)
    if n == 0:
        return []
    count = n if frames is None else min(frames, n)
    picks = sorted({int(i) for i in np.linspace(0, n - 1, count).round()})
    images = []
    for i in picks:
        t = seconds_since(hit.episode.frame_stamps_ns[i], origin)
        images.append(
            {
                "base64": base64.b64encode(hit.jpegs[i]).decode("ascii"),
                "label": f"{hit.episode.kind} {hit.episode.id}, frame {i + 1}/{n}, t={t:.1f} s",
            }
        )
    return images
