"""The memory node's ``retrieve_episodes`` service from any rclpy program.

* :class:`EpisodicMemoryClient`: the service call in plain Python types, with deadlines
  and type-checked arguments.
* :class:`RosEpisodeRetriever`: the same service behind the
  :class:`~surprise_memory.memory.store.EpisodeRetriever` interface that the store
  implements, so :class:`~surprise_memory.agents.tool.EpisodicMemoryTool` serves an agent
  on another machine exactly as it serves one next to the store.
* :class:`~surprise_memory.nodes.service_caller.ServiceCaller` (re-exported here): the
  call itself, from a private node, so it works from any callback of the caller's node.

Records of both kinds come back (``kinds``): surprise episodes and place keyframes, each
hit's record saying its ``kind``; with ``place_status``, each episode's "still there"
(:class:`~surprise_memory.memory.places.PlaceStatus`). A node before interface version 7
answers episodes only, without a kind: they read as episodes.

Images travel as the store holds them: JPEG bytes (``sensor_msgs/CompressedImage``), never
decoded on the way; :meth:`RetrievedEpisode.decode_images` decodes them where wanted.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from rclpy.node import Node

from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import EPISODE, RECORD_KINDS, PlaceStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.query_embedder import canonical_model_name
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeRecord, RetrievalHit, RetrievalHits, decode_jpeg
from surprise_memory.msg import Episode
from surprise_memory.nodes.messages import (
    image_msg_from_rgb,
    ns_to_time,
    place_status_from_msg,
    pose_from_msg,
    record_kind_from_msg,
    time_to_ns,
)
from surprise_memory.nodes.service_caller import ServiceCaller
from surprise_memory.srv import RetrieveEpisodes

__all__ = [
    "EpisodicMemoryClient",
    "RetrievedEpisode",
    "RetrievedEpisodes",
    "RosEpisodeRetriever",
    "ServiceCaller",
]

_Request = RetrieveEpisodes.Request
_PRETRAINED_CODE = {
    None: _Request.PRETRAINED_UNKNOWN,
    True: _Request.PRETRAINED_TRUE,
    False: _Request.PRETRAINED_FALSE,
}


@dataclass(frozen=True)
class RetrievedEpisode:
    """One episode as returned by the service, in plain Python types (times in int ns).

    ``score`` is the cosine similarity for text/image/embedding queries, the distance in
    metres for place-only queries, and 0 otherwise. ``jpegs`` holds the stored JPEG bytes
    of each frame when asked for (:meth:`decode_images` gives RGB arrays). ``kind`` is
    ``"episode"`` or ``"place"`` (a place keyframe, of the place ``place_key``);
    ``place_status`` is an episode's "still there" when it was asked for, else None.
    """

    id: str
    stamp_ns: int
    start_ns: int
    end_ns: int
    pose: Pose
    pose_valid: bool
    surprise: float
    threshold: float
    frame_stamps_ns: tuple[int, ...]
    frame_uris: tuple[str, ...]
    score: float
    jpegs: tuple[bytes, ...] = ()
    robot_id: str = ""
    camera: CameraView = field(default_factory=CameraView)
    pose_trust: PoseTrust = field(default_factory=PoseTrust)
    kind: str = EPISODE
    place_key: str = ""
    place_status: PlaceStatus | None = None

    @classmethod
    def from_msg(cls, msg: Episode, score: float) -> RetrievedEpisode:
        """Convert a surprise_memory/Episode message (interface version 6 or later).

        A version 6 message (no kind, no place status) reads as an episode without status.

        Raises:
            InputError: The message names an unknown kind or still-there value.

        """
        camera_pose = None
        if msg.camera_pose_valid:
            camera_pose = pose_from_msg(msg.camera_pose, msg.header.frame_id)
        return cls(
            id=msg.id,
            robot_id=msg.robot_id,
            stamp_ns=time_to_ns(msg.header.stamp),
            start_ns=time_to_ns(msg.start),
            end_ns=time_to_ns(msg.end),
            pose=pose_from_msg(msg.pose, msg.header.frame_id),
            pose_valid=bool(msg.pose_valid),
            surprise=float(msg.surprise),
            threshold=float(msg.threshold),
            frame_stamps_ns=tuple(time_to_ns(t) for t in msg.frame_stamps),
            frame_uris=tuple(msg.frame_uris),
            score=float(score),
            jpegs=tuple(bytes(img.data) for img in msg.frames),
            camera=CameraView(msg.camera, msg.camera_frame_id, camera_pose),
            pose_trust=PoseTrust(
                float(msg.pose_sigma_m) if msg.pose_sigma_valid else None, msg.map_id
            ),
            kind=record_kind_from_msg(msg),
            place_key=msg.place_key,
            place_status=place_status_from_msg(msg),
        )

    def decode_images(self) -> list[npt.NDArray[np.uint8]]:
        """The frames as (H, W, 3) uint8 RGB arrays (empty without images).

        Raises:
            StoreError: A frame is not a valid JPEG.

        """
        return [decode_jpeg(data, self.id) for data in self.jpegs]


class RetrievedEpisodes(list[RetrievedEpisode]):
    """The episodes of one answer, best first; :attr:`partial` says when it is partial.

    Args:
        episodes: The episodes.
        partial: Empty when the answer covers the whole memory; else why it does not (a
            node whose fleet store is unreachable answers from the robot's own episodes).

    """

    def __init__(self, episodes: Sequence[RetrievedEpisode] = (), partial: str = "") -> None:
        super().__init__(episodes)
        self.partial = partial


def _check_type(name: str, value: Any, types: type | tuple[type, ...], what: str) -> None:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise TypeError(f"{name}={value!r}: expected {what}")
    if not isinstance(value, types):
        raise TypeError(f"{name} is a {type(value).__name__}: expected {what}")


def _request_kinds(kinds: Collection[str] | None) -> list[str]:
    """The request's ``kinds`` (None = both), checked here so nothing bad is sent."""
    if kinds is None:
        return list(RECORD_KINDS)
    if isinstance(kinds, str) or not isinstance(kinds, Collection):
        raise TypeError(f"kinds={kinds!r}: expected a collection of {RECORD_KINDS} or None")
    unknown = [k for k in kinds if k not in RECORD_KINDS]
    if unknown or not kinds:
        raise InputError(f"kinds={kinds!r}: one or both of {', '.join(RECORD_KINDS)}")
    return sorted(set(kinds))


class EpisodicMemoryClient:
    """Client of ``retrieve_episodes``, usable from any callback of the caller's node.

    Args:
        node: The host node (its context and namespace are used; nothing is added to it).
        service: Name of the service (default: the launch file's namespace); a relative
            name resolves in the host node's namespace.
        timeout: Default seconds to wait for the service and for an answer.

    """

    def __init__(
        self,
        node: Node,
        service: str = "/surprise_memory/retrieve_episodes",
        timeout: float = 5.0,
    ) -> None:
        self._timeout = timeout
        self._caller = ServiceCaller(node, RetrieveEpisodes, service)
        self._origin_ns: int | None = None

    @property
    def origin_ns(self) -> int | None:
        """The store's time origin as of the last answer, int ns (None: none known)."""
        return self._origin_ns

    def retrieve(
        self,
        text: str | None = None,
        *,
        image: npt.NDArray[np.uint8] | None = None,
        embedding: npt.ArrayLike | None = None,
        embedding_model: str | None = None,
        embedding_pretrained: bool | None = None,
        start: int | None = None,
        end: int | None = None,
        near: Sequence[float] | None = None,
        radius: float | None = None,
        k: int = 10,
        include_images: bool = False,
        timeout: float | None = None,
        near_frame: str | None = None,
        robot_id: str | None = None,
        camera: str | None = None,
        kinds: Collection[str] | None = (EPISODE,),
        place_status: bool = False,
    ) -> RetrievedEpisodes:
        """Ask the memory node for episodes; best first (``.partial`` says if partial).

        Args:
            text: Free-text query, embedded by the node.
            image: Query image, (H, W, 3) uint8 RGB.
            embedding: A query embedding made here, (D,) floats, from the store's model.
            embedding_model: The model that made ``embedding`` (required with it).
            embedding_pretrained: Whether that model had trained weights (None = not checked).
            start: Earliest trigger stamp, int ns (None = open).
            end: Latest trigger stamp, int ns (None = open).
            near: (x, y, z) in metres in ``near_frame``; with ``radius``, a place filter.
            radius: Metres around ``near`` (None: sort by distance only).
            k: Most episodes to return.
            include_images: Also return the stored frames (JPEG bytes).
            timeout: Seconds to wait (default: the client's).
            near_frame: The frame of ``near``; None = the poses' frame when they have one.
            robot_id: Only this robot's episodes (a fleet store); None = every robot's.
            camera: Only the episodes this camera saw; None (or "") = every camera's.
            kinds: Which records: ``"episode"`` (surprise episodes, the default) and/or
                ``"place"`` (place keyframes); None = both, as in the core's query.
            place_status: Also ask each episode's "still there" (its ``place_status``).

        Raises:
            TypeError: An argument has the wrong type (nothing was sent).
            ValueError: An argument has a wrong value (``InputError`` is one).
            ServiceTimeoutError: The service is not there or did not answer in time.
            InputError: The node refused the request (its message says why).

        """
        request = self._request(
            text=text,
            image=image,
            embedding=embedding,
            embedding_model=embedding_model,
            embedding_pretrained=embedding_pretrained,
            start=start,
            end=end,
            near=near,
        )
        if near is None and radius is not None:
            raise InputError("radius needs near")
        if radius is not None:
            _check_type("radius", radius, (int, float), "metres (a number) or None")
            request.radius = float(radius)
        if near_frame is not None:
            _check_type("near_frame", near_frame, str, "a frame name or None")
            if near is None:
                raise InputError("near_frame needs near")
            request.location_frame = near_frame
        if robot_id is not None:
            _check_type("robot_id", robot_id, str, "a robot id or None")
            request.robot_id = robot_id
        if camera is not None:
            _check_type("camera", camera, str, "a camera name or None")
            request.camera = camera
        _check_type("k", k, int, "an int >= 1")
        if k < 1:
            raise InputError(f"k={k}: must be >= 1")
        request.max_results = k
        _check_type("include_images", include_images, bool, "a bool")
        request.include_images = include_images
        request.kinds = _request_kinds(kinds)
        _check_type("place_status", place_status, bool, "a bool")
        request.include_place_status = place_status
        if timeout is not None:
            _check_type("timeout", timeout, (int, float), "seconds")
        response = self._caller.call(request, self._timeout if timeout is None else float(timeout))
        if not response.success:
            raise InputError(f"retrieve_episodes refused the request: {response.message}")
        self._origin_ns = time_to_ns(response.origin) or None
        return RetrievedEpisodes(
            [
                RetrievedEpisode.from_msg(ep, score)
                for ep, score in zip(response.episodes, response.scores, strict=True)
            ],
            partial=response.partial,
        )

    @staticmethod
    def _request(
        *,
        text: Any,
        image: Any,
        embedding: Any,
        embedding_model: Any,
        embedding_pretrained: Any,
        start: Any,
        end: Any,
        near: Any,
    ) -> RetrieveEpisodes.Request:
        """The request's query fields, each checked before it touches the message."""
        request = _Request()
        if text is not None:
            _check_type("text", text, str, "a str or None")
            request.text = text
        if image is not None:
            _check_type("image", image, np.ndarray, "an (H, W, 3) uint8 array or None")
            request.image = image_msg_from_rgb(image)
        if embedding is not None:
            vec = np.asarray(embedding)
            if vec.ndim != 1 or vec.size == 0 or not np.issubdtype(vec.dtype, np.number):
                raise InputError(f"embedding of shape {vec.shape}: expected (D,) numbers")
            if not isinstance(embedding_model, str) or not embedding_model:
                raise InputError("an embedding needs embedding_model, the model that made it")
            request.embedding = vec.astype(np.float32).tolist()
            request.embedding_model = canonical_model_name(embedding_model)
            if embedding_pretrained not in _PRETRAINED_CODE:
                raise TypeError(f"embedding_pretrained={embedding_pretrained!r}: a bool or None")
            request.embedding_pretrained = _PRETRAINED_CODE[embedding_pretrained]
        for name, value in (("start", start), ("end", end)):
            if value is None:
                continue
            _check_type(name, value, (int, np.integer), "int nanoseconds or None")
            if value < 0:
                raise InputError(f"{name}={value}: must be >= 0 ns")
            setattr(request, name, ns_to_time(int(value)))
        if near is not None:
            if not isinstance(near, Sequence | np.ndarray) or isinstance(near, str):
                raise TypeError(f"near={near!r}: expected (x, y, z) in metres")
            xyz = [float(v) for v in near]
            if len(xyz) != 3 or not all(math.isfinite(v) for v in xyz):
                raise InputError(f"near={near!r}: expected three finite numbers (x, y, z)")
            request.use_location = True
            request.location.x, request.location.y, request.location.z = xyz
        return request

    def destroy(self) -> None:
        """Remove the service client and its private node (idempotent)."""
        self._caller.destroy()


class RosEpisodeRetriever:
    """:class:`~surprise_memory.memory.store.EpisodeRetriever` over ``retrieve_episodes``.

    Answers the same :class:`~surprise_memory.memory.retrieval.RetrievalQuery` as a store,
    with the same hits (an episode's ``root`` is None: its frames are on the other
    machine; with images, ``jpegs`` holds them). It also knows the store's time origin
    and lets the node embed a text query (``retrieve_text``), so an agent needs no model.

    The service sends one number per episode; ``score`` is it for a ranked query, and
    ``distance_m`` is recomputed here from the episode's pose when the query has a place.
    The query's ``kinds`` go with it (None = surprise episodes and place keyframes, as a
    store answers); each hit's record says its ``kind``. With ``place_status``, every
    answer asks for each episode's "still there" too (:attr:`RetrievalHit.place_status`,
    judged with the node's place settings and, with a robot filter, that robot's views).

    The service finds episodes by query, not by id: :meth:`lookup` finds one again by the
    trigger stamp and robot of an earlier answer, remembered for the last
    ``remembered_episodes`` episodes this retriever returned (an agent gets an episode's
    id from a search before it asks for the episode).

    Args:
        client: The service client.
        timeout: Seconds per call (None = the client's).
        remembered_episodes: How many returned episodes :meth:`lookup` can find again.
        place_status: Ask, with every answer, each episode's place status (a few store
            reads on the node per episode returned).

    """

    def __init__(
        self,
        client: EpisodicMemoryClient,
        timeout: float | None = None,
        remembered_episodes: int = 4096,
        place_status: bool = False,
    ) -> None:
        _check_type("place_status", place_status, bool, "a bool")
        self._client = client
        self._timeout = timeout
        self._place_status = place_status
        self._seen: OrderedDict[str, tuple[int, str]] = OrderedDict()  # id -> (stamp, robot)
        self._seen_cap = max(1, remembered_episodes)
        self._seen_lock = threading.Lock()

    @property
    def origin_ns(self) -> int | None:
        """The store's time origin (asked from the node once, then kept up to date).

        Raises:
            ServiceTimeoutError: The node did not answer.

        """
        if self._client.origin_ns is None:
            self._client.retrieve(k=1, timeout=self._timeout)
        return self._client.origin_ns

    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Answer a query through the node (see :meth:`EpisodeStore.retrieve`).

        Raises:
            InputError: The node refused the query (e.g. another embedder than the store's).
            ServiceTimeoutError: The node did not answer in time.

        """
        return self._ask(query, include_images, text=None)

    def retrieve_text(
        self, text: str, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Like :meth:`retrieve`, ranked by ``text``, which the node embeds with its model.

        Raises:
            InputError: ``query`` has an embedding too, or the node refused the query.
            ServiceTimeoutError: The node did not answer in time.

        """
        if query.embedding is not None:
            raise InputError("a text query and a query embedding together: give one")
        return self._ask(query, include_images, text=text)

    def retrieve_image(
        self, image: npt.NDArray[np.uint8], query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Like :meth:`retrieve`, ranked by ``image`` ((H, W, 3) RGB), embedded by the node.

        Raises:
            InputError: ``query`` has an embedding too, or the node refused the query.
            ServiceTimeoutError: The node did not answer in time.

        """
        if query.embedding is not None:
            raise InputError("a query image and a query embedding together: give one")
        return self._ask(query, include_images, image=image)

    def lookup(self, episode_id: str, *, include_images: bool = False) -> RetrievalHit:
        """An episode this retriever returned before, asked again by its stamp and robot.

        Raises:
            StoreError: The id is not among the episodes remembered, or the node no longer
                holds it (evicted).
            ServiceTimeoutError: The node did not answer in time.

        """
        with self._seen_lock:
            seen = self._seen.get(episode_id)
        if seen is None:
            raise StoreError(
                f"episode {episode_id!r} is unknown here: search for it first (through the "
                "memory node, an episode is found again by what a search returned)"
            )
        stamp, robot = seen
        query = RetrievalQuery(start_ns=stamp, end_ns=stamp, robot_id=robot or None)
        hits = self._ask(query, include_images, max_results=64)
        for hit in hits:
            if hit.episode.id == episode_id:
                return hit
        raise StoreError(f"episode {episode_id!r} is no longer in the memory (evicted)")

    def _remember(self, episodes: Sequence[RetrievedEpisode]) -> None:
        with self._seen_lock:
            for ep in episodes:
                self._seen[ep.id] = (ep.stamp_ns, ep.robot_id)
                self._seen.move_to_end(ep.id)
            while len(self._seen) > self._seen_cap:
                self._seen.popitem(last=False)

    def _ask(
        self,
        query: RetrievalQuery,
        include_images: bool,
        text: str | None = None,
        image: npt.NDArray[np.uint8] | None = None,
        max_results: int | None = None,
    ) -> list[RetrievalHit]:
        if not isinstance(query, RetrievalQuery):
            raise InputError(f"query is a {type(query).__name__}: expected RetrievalQuery")
        found = self._client.retrieve(
            text,
            image=image,
            embedding=query.embedding,
            embedding_model=query.embedder_model,
            embedding_pretrained=query.embedder_pretrained,
            start=query.start_ns,
            end=query.end_ns,
            near=query.near,
            radius=query.radius_m,
            k=max_results or query.max_results or 10,
            include_images=include_images,
            timeout=self._timeout,
            near_frame=query.near_frame,
            robot_id=query.robot_id,
            camera=query.camera,
            kinds=query.kinds,  # None = both, the core's meaning
            place_status=self._place_status,
        )
        self._remember(found)
        ranked = query.embedding is not None or bool(text) or image is not None
        return RetrievalHits([self._hit(ep, query, ranked) for ep in found], found.partial)

    @staticmethod
    def _hit(ep: RetrievedEpisode, query: RetrievalQuery, ranked: bool) -> RetrievalHit:
        distance = None
        if query.near is not None and ep.pose_valid:
            distance = float(np.linalg.norm(np.subtract(ep.pose.position, query.near)))
        record = EpisodeRecord(
            id=ep.id,
            stamp_ns=ep.stamp_ns,
            start_ns=ep.start_ns,
            end_ns=ep.end_ns,
            pose=ep.pose,
            pose_valid=ep.pose_valid,
            surprise=ep.surprise,
            threshold=ep.threshold,
            frame_stamps_ns=ep.frame_stamps_ns,
            frame_paths=ep.frame_uris,
            encoder_model="",
            encoder_pretrained=True,
            embedder_model=query.embedder_model or "",
            embedder_pretrained=bool(query.embedder_pretrained),
            created_wall_ns=0,
            robot_id=ep.robot_id,
            camera=ep.camera,
            pose_trust=ep.pose_trust,
            kind=ep.kind,
            place_key=ep.place_key,
        )
        return RetrievalHit(
            episode=record,
            score=ep.score if ranked else None,
            distance_m=distance,
            jpegs=ep.jpegs,
            place_status=ep.place_status,
        )
