"""The ``retrieve_episodes`` service inside a node: text, image, time and place queries.

:class:`RetrievalPart` is created by :class:`~surprise_memory.nodes.memory_part.MemoryPart`,
so ``memory_node`` and ``pipeline_node`` both serve it, on their store and with their
embedder; :func:`query_from_request` turns a request into the core's
:class:`~surprise_memory.memory.retrieval.RetrievalQuery`. The request's ``kinds`` choose
surprise episodes, place keyframes or both (empty: episodes, as before interface version
7), and ``include_place_status`` fills each episode's "still there"
(:func:`~surprise_memory.memory.place_status.with_place_status`, with the node's place
settings in force).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from surprise_memory.config import PlacesConfig
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.place_status import with_place_status
from surprise_memory.memory.places import EPISODE, PLACE, RECORD_KINDS
from surprise_memory.memory.query_embedder import canonical_model_name
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStoreBackend, RetrievalHit, partial_of
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import episode_to_msg, ns_to_time, time_to_ns
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.perception.frames import rgb_from_image_msg
from surprise_memory.srv import RetrieveEpisodes

__all__ = ["RetrievalPart", "kinds_from_request", "query_from_request"]


class RetrievalPart:
    """Serves ``retrieve_episodes``: answers text, image, time and place queries.

    Invalid requests get ``success=false`` and a reason (counted as ``retrievals_refused``),
    other failures (a torch error) too (counted as ``rejected_retrieval``); the node keeps
    serving. An answer from part of the memory (a fleet store the robot cannot reach)
    says so in ``partial``.

    Args:
        node: The host node.
        stats: The host's counters.
        store: The episode store.
        embedder: Embeds text and image queries.
        embed_lock: Held while the embedder runs (the episode writer shares it).
        places_config: The node's place settings in force (cell size, sectors, the
            still-there radius and threshold), asked at each request that wants place
            status: they change live.

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        store: EpisodeStoreBackend,
        embedder: ImageTextEmbedder,
        embed_lock: threading.Lock,
        *,
        places_config: Callable[[], PlacesConfig] = PlacesConfig,
    ) -> None:
        self._node = node
        self._stats = stats
        self._store = store
        self._embedder = embedder
        self._embed_lock = embed_lock
        self._places_config = places_config

    def subscribe(self) -> None:
        """Activate: create the service."""
        # queries (which may run the text/image tower) in their own group and thread, so a
        # retrieval never holds up the camera callback; the store and the embedder lock
        # make the two safe together
        self._node.create_service(
            RetrieveEpisodes,
            "retrieve_episodes",
            self._on_retrieve,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _on_retrieve(
        self, request: RetrieveEpisodes.Request, response: RetrieveEpisodes.Response
    ) -> RetrieveEpisodes.Response:
        response.interface_version = RetrieveEpisodes.Request.INTERFACE_VERSION
        try:
            hits = self._store.retrieve(
                query_from_request(request, self._embedder, self._embed_lock),
                include_images=request.include_images,
            )
            if request.include_place_status:  # a few reads per hit returned, not per candidate
                hits = with_place_status(
                    self._store, hits, self._places_config(), robot_id=request.robot_id or None
                )
            for hit in hits:  # the stored JPEGs as they are: no decoding, no raw rgb8
                response.episodes.append(episode_to_msg(hit.episode, hit.jpegs, hit.place_status))
                response.scores.append(_hit_score(hit))
        except Exception as exc:  # a bad query or a torch error never ends the node
            response.success = False
            response.episodes, response.scores = [], []
            response.message = str(exc)
            if isinstance(exc, SurpriseMemoryError):
                self._stats.count("retrievals_refused")
            else:
                response.message = f"{type(exc).__name__}: {exc}"
                self._stats.reject("retrieval", response.message)
            return response
        origin = self._store.origin_ns
        if origin is not None:
            response.origin = ns_to_time(origin)
        response.success = True
        response.partial = partial_of(hits)
        response.message = _counted(hits)
        if response.partial:
            response.message += f" (partial: {response.partial})"
        if (request.text or request.image.width) and not self._embedder.pretrained:
            response.message += " (untrained embedder: similarity scores are not meaningful)"
        self._stats.count("retrievals")
        return response


def query_from_request(
    request: RetrieveEpisodes.Request, embedder: ImageTextEmbedder, embed_lock: threading.Lock
) -> RetrievalQuery:
    """A validated core query from a service request (zero fields = not given).

    A query embedding from the caller ranks as it is (its model must be the store's);
    else ``text`` or ``image`` is embedded here with the node's embedder (under
    ``embed_lock``: the episode writer uses the same model).

    Raises:
        InputError: The request mixes query kinds, names an unknown pretrained flag or
            an unknown record kind.

    """
    has_image = bool(request.image.width or request.image.height or request.image.data)
    if len(request.embedding) and has_image:
        raise InputError("give a query embedding or an image query, not both")
    if request.text and has_image:
        raise InputError("give a text or an image query, not both")
    embedding = None
    model: str | None = embedder.model_name
    pretrained: bool | None = embedder.pretrained
    if len(request.embedding):
        embedding = np.asarray(request.embedding, dtype=np.float32)
        model = canonical_model_name(request.embedding_model)
        pretrained = _PRETRAINED.get(request.embedding_pretrained)
        if request.embedding_pretrained not in _PRETRAINED:
            raise InputError(
                f"embedding_pretrained={request.embedding_pretrained}: expected one of "
                f"{sorted(_PRETRAINED)} (UNKNOWN, TRUE, FALSE)"
            )
    elif request.text:
        with embed_lock:
            embedding = embedder.embed_text([request.text])[0]
    elif has_image:
        rgb = rgb_from_image_msg(request.image)
        with embed_lock:
            embedding = embedder.embed_images([rgb])[0]
    loc = request.location
    return RetrievalQuery(
        embedding=embedding,
        embedder_model=model if embedding is not None else None,
        embedder_pretrained=pretrained if embedding is not None else None,
        start_ns=time_to_ns(request.start) or None,
        end_ns=time_to_ns(request.end) or None,
        near=(loc.x, loc.y, loc.z) if request.use_location else None,
        near_frame=request.location_frame or None if request.use_location else None,
        radius_m=request.radius if request.use_location and request.radius != 0 else None,
        max_results=request.max_results or None,
        robot_id=request.robot_id or None,
        camera=request.camera or None,
        kinds=kinds_from_request(request.kinds),
    )


def kinds_from_request(kinds: Sequence[str]) -> frozenset[str]:
    """The record kinds a request asks for; empty = surprise episodes only.

    Empty keeps a caller before interface version 7 (which knew no kinds, and whose
    answers held episodes only) getting the same answers.

    Raises:
        InputError: A kind is neither ``"episode"`` nor ``"place"``.

    """
    unknown = [kind for kind in kinds if kind not in RECORD_KINDS]
    if unknown:
        raise InputError(
            f"kinds={list(kinds)!r}: unknown kind(s) {unknown!r}; each must be one of "
            f"{', '.join(RECORD_KINDS)} (empty = {EPISODE} only)"
        )
    return frozenset(kinds) or frozenset({EPISODE})


_PRETRAINED = {
    RetrieveEpisodes.Request.PRETRAINED_UNKNOWN: None,
    RetrieveEpisodes.Request.PRETRAINED_TRUE: True,
    RetrieveEpisodes.Request.PRETRAINED_FALSE: False,
}


def _counted(hits: Sequence[RetrievalHit]) -> str:
    """What an answer holds: "3 episode(s)", or "3 episode(s), 2 place keyframe(s)"."""
    places = sum(hit.episode.kind == PLACE for hit in hits)
    counted = f"{len(hits) - places} episode(s)"
    return f"{counted}, {places} place keyframe(s)" if places else counted


def _hit_score(hit: RetrievalHit) -> float:
    if hit.score is not None:
        return hit.score
    return hit.distance_m if hit.distance_m is not None else 0.0
