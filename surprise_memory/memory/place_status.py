"""Is it still there? When an episode's place was last seen, and whether it still looks so.

An episode (or any stored record with a pose) shows a place. The place keyframes
(:mod:`~surprise_memory.memory.places`) hold the latest views of every place the robot
passed; :func:`place_status` finds the newest view of the episode's place taken after it
and compares it with the episode's own picture:

* **the place**: the place cells within ``place_status_radius_m`` of the episode's pose
  (same frame), in the episode's viewing sector and the two beside it (the camera's
  viewing yaw where its pose is known, else the robot's), and only views whose pose is
  within that radius; read with the store's indexed
  :meth:`~surprise_memory.memory.store.interface.EpisodeStoreBackend.latest_places` (a
  few dozen place keys, never a scan of the history);
* **last seen**: the newest such view's stamp, or the episode's own when none is newer;
* **similarity**: the best cosine, over the views of the robot's latest pass by the
  place (those within ``place_status_pass_seconds`` before the newest), of a view's
  embedding (its best frame) with the embedding of the episode's trigger frame (its
  picture, :func:`~surprise_memory.memory.episodes.trigger_frame_index`). A pass, not
  its newest view: driving by, the robot looks at the place, then past it, and the
  newest view of the cells around often faces away (measured on the QA world,
  ``benchmarks/bench_place_status.py``);
* **still there**: similarity >= ``place_still_there_similarity``, chosen on the QA
  world's validation worlds; None when no view is newer than the episode.

Use::

    status = place_status(store, hit.episode, PlacesConfig())
    if status is not None and status.still_there is False:
        print(f"gone: last seen {status.last_seen_ns}, similarity {status.similarity:.2f}")
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from surprise_memory.config.places import PlacesConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.places import (
    EPISODE,
    PLACE,
    PlaceCell,
    PlaceStatus,
    parse_place_key,
    place_cell,
)
from surprise_memory.memory.pose import yaw_of
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store.hits import RetrievalHits, partial_of
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit
from surprise_memory.stamps import NS_PER_SECOND, duration_text

__all__ = [
    "PlaceStatus",
    "PlaceViews",
    "episode_place_status",
    "nearby_place_keys",
    "place_status",
    "place_status_line",
    "places_as_stored",
    "record_place",
    "with_place_status",
]


class Retrieves(Protocol):
    """A store that answers a :class:`~surprise_memory.memory.retrieval.RetrievalQuery`."""

    def retrieve(self, query: RetrievalQuery) -> Sequence[RetrievalHit]:
        """The hits of ``query``."""
        ...


class PlaceViews(Retrieves, Protocol):
    """What :func:`place_status` and :func:`with_place_status` need of a store (all have it)."""

    def latest_places(
        self, place_keys: Sequence[str], robot_id: str | None = None
    ) -> list[EpisodeRecord]:
        """The newest place keyframe of each of these places."""
        ...

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """A record's stored unit frame embeddings, (frames, D)."""
        ...


def places_as_stored(store: Retrieves, config: PlacesConfig) -> PlacesConfig | None:
    """``config`` with the store's place grid; None when the store keeps no place keyframes.

    The cell size and sectors are those of the store's newest place keyframe (its key
    names them): the writer's settings, which made the keys. A reader's own, if different,
    would name other places and find no view, so every episode would read "not seen
    since". A store without any place keyframe (processed offline, or kept by a node with
    ``place_keyframes`` off) cannot say whether a place was seen again: its readers say
    nothing of it. One indexed query (the newest record of that kind).
    """
    newest = store.retrieve(RetrievalQuery(kinds=frozenset({PLACE}), max_results=1))
    if not newest:
        return None
    try:
        grid = parse_place_key(newest[0].episode.place_key)
    except InputError:  # a damaged key: the reader's own settings, as before
        return config
    if (grid.cell_m, grid.sectors) == (config.place_cell_m, config.place_sectors):
        return config
    return dataclasses.replace(config, place_cell_m=grid.cell_m, place_sectors=grid.sectors)


def record_place(record: EpisodeRecord, config: PlacesConfig) -> PlaceCell | None:
    """The place a record shows: its pose's cell and its viewing sector; None without a pose.

    The viewing yaw is the camera's where its pose is known in the record's pose frame,
    else the robot's.
    """
    if not record.pose_valid or not record.pose.frame_id:
        return None
    camera = record.camera.pose
    same_frame = camera is not None and camera.frame_id == record.pose.frame_id
    yaw = record.camera.yaw if same_frame else None
    if yaw is None:
        yaw = yaw_of(record.pose)
    return place_cell(record.pose, yaw, config.place_cell_m, config.place_sectors)


def nearby_place_keys(cell: PlaceCell, x: float, y: float, config: PlacesConfig) -> list[str]:
    """The keys of the places that may hold views of ``cell``: near cells, near sectors.

    Args:
        cell: The place (its frame, grid and sector).
        x: The point's x in metres (the cells within ``place_status_radius_m`` of it).
        y: Its y.
        config: Radius, cell size, sectors.

    Returns:
        Keys of every cell overlapping the radius's square, in the sector and the two
        beside it; the own place first.

    """
    r, size = config.place_status_radius_m, cell.cell_m
    xs = range(math.floor((x - r) / size), math.floor((x + r) / size) + 1)
    ys = range(math.floor((y - r) / size), math.floor((y + r) / size) + 1)
    sectors = dict.fromkeys((cell.sector, cell.sector - 1, cell.sector + 1))
    keys = [cell.key]
    for s in sectors:
        for ix in xs:
            for iy in ys:
                keys.append(cell.shifted(ix - cell.ix, iy - cell.iy).with_sector(s).key)
    return list(dict.fromkeys(keys))


def place_status(
    store: PlaceViews,
    record: EpisodeRecord,
    config: PlacesConfig,
    *,
    robot_id: str | None = None,
) -> PlaceStatus | None:
    """When ``record``'s place was last seen, and whether its latest view still shows it.

    Args:
        store: The store holding the record and the place keyframes.
        record: An episode (or a place keyframe) with a pose.
        config: ``place_cell_m``, ``place_sectors``, ``place_status_radius_m``,
            ``place_status_pass_seconds`` and ``place_still_there_similarity``.
        robot_id: Only this robot's views; None = any robot's (a fleet's).

    Returns:
        The status, or None when the record has no pose (no place).

    Raises:
        StoreError: The store cannot be read.

    """
    cell = record_place(record, config)
    if cell is None:
        return None
    p = record.pose
    keys = nearby_place_keys(cell, p.x, p.y, config)
    radius = config.place_status_radius_m
    newer = [
        v
        for v in store.latest_places(keys, robot_id)
        if v.id != record.id
        and v.stamp_ns > record.stamp_ns
        and v.pose_valid
        and v.pose.frame_id == p.frame_id
        and math.hypot(v.pose.x - p.x, v.pose.y - p.y) <= radius
    ]
    if not newer:
        return PlaceStatus(cell.key, record.stamp_ns, None, None)
    newest = max(v.stamp_ns for v in newer)
    since = newest - round(config.place_status_pass_seconds * NS_PER_SECOND)
    picture = trigger_frame_index(record.frame_stamps_ns, record.stamp_ns)
    shown = _unit(store.embeddings(record.id)[picture : picture + 1])[0]
    # the best view of the latest pass; among equals, the newest
    similarity, _, view_id = max(
        (float(np.max(_unit(store.embeddings(v.id)) @ shown)), v.stamp_ns, v.id)
        for v in newer
        if v.stamp_ns >= since
    )
    still = similarity >= config.place_still_there_similarity
    return PlaceStatus(cell.key, newest, similarity, still, view_id)


def with_place_status(
    store: PlaceViews,
    hits: Sequence[RetrievalHit],
    config: PlacesConfig,
    *,
    robot_id: str | None = None,
) -> RetrievalHits:
    """``hits`` with each surprise episode's :attr:`~RetrievalHit.place_status` filled.

    A place keyframe's own status is not asked (it is the latest view, or an older one of
    a place whose newest view another hit is); a record without a pose keeps None, as does
    every hit of a store without place keyframes. A few indexed reads per hit
    (:func:`place_status`), so for the hits an answer returns, not for a ranking's
    candidates.

    Args:
        store: The store the hits came from.
        hits: The hits (a :class:`~surprise_memory.memory.store.hits.RetrievalHits` keeps
            its ``partial``).
        config: The places' settings: the radius and the still-there threshold; the cells
            and sectors are the store's (:func:`places_as_stored`).
        robot_id: Only this robot's views; None = any robot's.

    Raises:
        StoreError: The store cannot be read.

    """
    grid = places_as_stored(store, config) if hits else None
    if grid is None:
        return RetrievalHits(list(hits), partial_of(hits))
    filled = [
        dataclasses.replace(
            hit, place_status=place_status(store, hit.episode, grid, robot_id=robot_id)
        )
        if hit.episode.kind == EPISODE
        else hit
        for hit in hits
    ]
    return RetrievalHits(filled, partial_of(hits))


def episode_place_status(
    store: PlaceViews,
    record: EpisodeRecord,
    config: PlacesConfig,
    *,
    robot_id: str | None = None,
) -> PlaceStatus | None:
    """:func:`with_place_status` for one record (a goal's episode).

    None for a place keyframe (it is a view), a record without a pose, or a store that
    keeps no place keyframes (it cannot say whether a place was seen again).

    Raises:
        StoreError: The store cannot be read.

    """
    grid = places_as_stored(store, config) if record.kind == EPISODE else None
    return None if grid is None else place_status(store, record, grid, robot_id=robot_id)


def place_status_line(status: PlaceStatus, episode_stamp_ns: int, now_ns: int) -> str:
    """One line on how old the latest view of an episode's place is, as ``goto`` prints it.

    ``its place was last seen 3 h ago (still looks the same, similarity 0.93)``,
    ``... (looks different now, similarity 0.41)``, or ``its place was not seen since the
    episode (12 d ago)``. Ages count back from ``now_ns``; a stamp after it (a clock that
    is not the stamps': sim time, another machine's) is said as such, not as a negative age.

    Args:
        status: The episode's :func:`place_status`.
        episode_stamp_ns: The episode's trigger stamp, int ns.
        now_ns: The current time on the stamps' clock, int ns.

    """
    if status.still_there is None or status.similarity is None:
        return f"its place was not seen since the episode ({_ago(episode_stamp_ns, now_ns)})"
    looks = "still looks the same" if status.still_there else "looks different now"
    return (
        f"its place was last seen {_ago(status.last_seen_ns, now_ns)} "
        f"({looks}, similarity {status.similarity:.2f})"
    )


def _ago(stamp_ns: int, now_ns: int) -> str:
    """``3 h ago``; ``12 s after this machine's current time: ...`` for a stamp in its future."""
    age = (now_ns - stamp_ns) / NS_PER_SECOND
    if age < 0:
        return f"{duration_text(age)} after this machine's current time: another clock?"
    return f"{duration_text(age)} ago"


def _unit(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Rows scaled to unit length (stored embeddings are, up to float16 rounding)."""
    rows64 = np.asarray(rows, dtype=np.float64)
    norms: npt.NDArray[np.float64] = np.linalg.norm(rows64, axis=1, keepdims=True)
    return rows64 / np.maximum(norms, 1e-12)
