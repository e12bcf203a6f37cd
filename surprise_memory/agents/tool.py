"""An LLM agent tool over the episodic memory: a drop-in tool for DAAAM's agent.

DAAAM's tools (``daaam.scene_understanding.interfaces.Tool``) expose a ``name``, a flat
``signature`` in the OpenAI Responses form (``{"type": "function", "name", "description",
"parameters", "strict": true}``), ``execute(**kwargs)`` returning a JSON-able dict, and
``set_scene_graph`` / ``set_embedding_handlers`` / ``set_config``, which the agent calls
on every tool. :class:`EpisodicMemoryTool` has all of them (the setters are no-ops: the
episodes do not live in the scene graph, and the query embedder must be the store's, not
DAAAM's CLIP), plus :attr:`~EpisodicMemoryTool.schema`, the nested chat-completions form.
DAAAM itself is not imported here; :mod:`surprise_memory.integrations.daaam` subclasses
DAAAM's ``Tool`` where DAAAM is installed.

Conventions follow DAAAM's: positions are ``[x, y, z]`` in metres; images come back as
``{"_images": [{"base64": ..., "label": ...}]}`` (the stored JPEG bytes, base64-encoded,
not re-encoded); times are seconds since an origin: DAAAM's sequence start
(``START_TIMES[seq]``, Unix seconds) given as ``origin``, else the store's own origin (the
first frame it saw). Absolute times are always accepted too (see :func:`stamp_ns`).

What ranks: a text (``query``) or a picture (``image``, base64 JPEG or PNG), embedded
here by the store's model or by the memory node; ``robot`` narrows a fleet's memory to one
robot's episodes; ``kinds`` chooses surprise episodes (events), place keyframes (the
latest view of every place passed, surprising or not: "where did you see the red door?")
or both. :func:`episode_json` and :func:`frame_images`
(:mod:`surprise_memory.agents.episode_json`, re-exported here) are a record's JSON and its
frames as every agent tool gives them (``get_episode`` too).

Is it still there? Where the hits carry their place's status
(``place_status`` of :class:`~surprise_memory.memory.store.records.RetrievalHit`: the
memory node's service fills it when asked, or ``place_status`` here, e.g.
``functools.partial(with_place_status, store, config=PlacesConfig())``), each episode's
JSON says when its place was last seen and whether it still looked the same. The status
is asked for the hits returned only (a few indexed reads each), after the causality cut.

Causality: DAAAM answers each question with the scene graph cut at the robot's current
time. ``now`` (a value or a callable) does the same here: no episode whose last frame is
after ``now`` is returned, whatever the agent asks.

Every exception of a call, ours or not (a text embedder that fails, a service that times
out), comes back as ``{"error": ..., "episodes": []}``: DAAAM's loop has no ``try`` around
a tool call, so a raised error would end the agent's answer.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from surprise_memory.agents.episode_json import (
    episode_json,
    frame_images,
    known_at,
    record_kinds,
)
from surprise_memory.agents.function_tool import FunctionTool
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.places import RECORD_KINDS
from surprise_memory.memory.query_embedder import canonical_model_name, decode_query_image
from surprise_memory.memory.retrieval import RetrievalQuery, check_robot_id
from surprise_memory.memory.store import (
    EpisodeRetriever,
    HasTimeOrigin,
    RetrievalHit,
    RetrievesByText,
    partial_of,
)
from surprise_memory.stamps import NS_PER_SECOND, parse_time

__all__ = [
    "ABSOLUTE_NS_FROM",
    "MAX_QUERY_IMAGE_BYTES",
    "EpisodicMemoryTool",
    "ImageEmbedder",
    "PlaceStatusFiller",
    "RetrievesByImage",
    "TextEmbedder",
    "TimeValue",
    "canonical_model_name",
    "episode_json",
    "frame_images",
    "origin_to_ns",
    "stamp_ns",
]


TextEmbedder = Callable[[str], npt.NDArray[np.float32]]
"""Embeds a text query into the store's embedding space, e.g. PE-Core's text tower."""

ImageEmbedder = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]
"""Embeds a query image ((H, W, 3) uint8 RGB) into the store's space: PE-Core's image tower."""


@runtime_checkable
class RetrievesByImage(Protocol):
    """A retriever that ranks by a query image it embeds itself (the memory node's service)."""

    def retrieve_image(
        self, image: npt.NDArray[np.uint8], query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Like ``retrieve``, ranked by ``image``, (H, W, 3) uint8 RGB (``query``: no embedding)."""
        ...


PlaceStatusFiller = Callable[[Sequence[RetrievalHit]], Sequence[RetrievalHit]]
"""Fills the hits' ``place_status``, e.g. ``functools.partial(with_place_status, store,
config=PlacesConfig())`` (:func:`~surprise_memory.memory.place_status.with_place_status`)."""

TimeValue = int | float | str
"""A time as the tool takes it; see :func:`stamp_ns`."""

ABSOLUTE_NS_FROM = 10**12
"""Integers from this value up are absolute stamps in ns, below it seconds.

10**12 s is 31,700 years, so no relative time nor Unix time in seconds reaches it, and
10**12 ns is 16 minutes after 1970, so no real stamp in ns falls below it.
"""

# strict function calling: every parameter is required (optional ones are nullable)
_PARAMETERS = (
    "query",
    "image",
    "start_time",
    "end_time",
    "position",
    "radius",
    "max_results",
    "include_images",
    "robot",
    "camera",
    "kinds",
)

MAX_QUERY_IMAGE_BYTES = 16 * 1024 * 1024
"""Largest query image the tool decodes (bytes after base64), as the memory browser's default."""


def origin_to_ns(origin: int | float) -> int:
    """A time origin as int ns: Unix seconds (DAAAM's ``START_TIMES``) or int ns.

    Raises:
        InputError: Not a finite, non-negative number.

    """
    if isinstance(origin, bool) or not isinstance(origin, int | float | np.integer | np.floating):
        raise InputError(f"origin={origin!r}: must be Unix seconds (a number) or int ns")
    if not math.isfinite(origin) or origin < 0:
        raise InputError(f"origin={origin!r}: must be finite and >= 0")
    if isinstance(origin, int | np.integer) and origin >= ABSOLUTE_NS_FROM:
        return int(origin)
    return round(float(origin) * NS_PER_SECOND)


def stamp_ns(name: str, value: Any, origin_ns: int | None) -> int | None:
    """A time given to the tool as int ns since the epoch (None stays None).

    * a number: seconds since ``origin_ns`` (``12.5``), except
    * an integer >= :data:`ABSOLUTE_NS_FROM`: an absolute stamp in ns;
    * a string: as the command line takes it (:func:`surprise_memory.stamps.parse_time`):
      ``"12.5"`` / ``"12.5s"`` relative, ``"1700000012500000000ns"`` or ISO 8601 with a
      zone (``"2023-01-16T15:49:45Z"``) absolute.

    Raises:
        InputError: Not a time, before the epoch, or relative with no origin known.

    """
    if value is None:
        return None
    if isinstance(value, str):
        return parse_time(value, origin_ns)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{name}={value!r}: must be seconds (a number), a time string or null")
    if isinstance(value, int) and value >= ABSOLUTE_NS_FROM:
        return value
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{name}={value!r}: must be >= 0 seconds since the start of the recording")
    if origin_ns is None:
        raise InputError(f"{name}={value!r} is relative, but no time origin is known yet")
    return origin_ns + round(value * NS_PER_SECOND)


def _parameters_schema(
    cap: int, image_episodes: int, text: bool, image: bool, robot: str | None
) -> dict[str, Any]:
    """The arguments' JSON schema: strict (all required, optional ones nullable, closed)."""
    nullable_time = {"type": ["number", "string", "null"]}
    text_note = "" if text else " (text search unavailable here: pass null)"
    image_note = "" if image else " (image search unavailable here: pass null)"
    robot_note = f" This memory answers for robot {robot!r} only." if robot is not None else ""
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": ["string", "null"],
                "description": "What to look for, in words, e.g. 'a golf cart stopping'; "
                "null for no text search" + text_note + ".",
            },
            "image": {
                "type": ["string", "null"],
                "description": "A picture to look for, base64-encoded JPEG or PNG: episodes "
                "whose frames look like it come first; null for none" + image_note + ". Give "
                "query or image, not both.",
            },
            "start_time": {
                **nullable_time,
                "description": "Earliest episode time in seconds since the recording "
                "started (or an ISO 8601 time with a zone); null = open.",
            },
            "end_time": {
                **nullable_time,
                "description": "Latest episode time in seconds since the recording "
                "started (or an ISO 8601 time with a zone); null = open.",
            },
            "position": {
                "type": ["array", "null"],
                "items": {"type": "number"},
                "description": "[x, y, z] in metres to search around; null = anywhere. "
                "Episodes without a known pose are left out.",
            },
            "radius": {
                "type": ["number", "null"],
                "description": "Keep episodes within this many metres of position; "
                "null = no limit (sorted by distance).",
            },
            "max_results": {
                "type": ["integer", "null"],
                "description": f"How many episodes, 1 to {cap}; null = 5.",
            },
            "include_images": {
                "type": "boolean",
                "description": f"Return frames of the best {image_episodes} episodes as images.",
            },
            "robot": {
                "type": ["string", "null"],
                "description": "Only this robot's episodes (a fleet's memory holds several "
                "robots'; each episode names its robot); null = every robot's." + robot_note,
            },
            "camera": {
                "type": ["string", "null"],
                "description": "Only what this camera of the robot saw (e.g. 'front'); null "
                "= every camera. Each episode names its camera and where it looked.",
            },
            "kinds": {
                "type": ["array", "null"],
                "items": {"type": "string", "enum": list(RECORD_KINDS)},
                "description": "Which records: 'episode' = surprise episodes, 8-frame clips "
                "of events (something moved, appeared, changed); 'place' = place keyframes, "
                "the latest view of every place and direction the robot passed, also of "
                "things that never surprised it ('where did you see the red door?'); null "
                "= both. Each result says its kind.",
            },
        },
        "required": list(_PARAMETERS),
        "additionalProperties": False,
    }


class EpisodicMemoryTool(FunctionTool):
    """Search the robot's surprise-gated episodic memory, for an LLM agent.

    Args:
        retriever: The memory: an :class:`~surprise_memory.memory.store.EpisodeStore`, or
            :class:`~surprise_memory.agents.ros_client.RosEpisodeRetriever` (the memory
            node's service, from any machine).
        embed_text: Text-to-vector function of the store's embedder. None = the retriever
            embeds text itself where it can (the memory node does), else no text queries.
        embedder_model: Model name of ``embed_text`` and ``embed_image`` (checked against
            the store's; ``PE-Core-L14-336`` is taken for ``PE-Core-L-14-336``).
        embedder_pretrained: Whether that model has its trained weights (None = not
            checked).
        origin: Time zero of every time in and out of the tool: Unix seconds (DAAAM's
            ``START_TIMES[seq]``) or int ns. None = the retriever's origin (the store's
            first frame seen).
        now: The robot's current time, or a callable returning it (called at each call;
            it may return None = no limit): seconds since ``origin``, or an absolute
            time (see :func:`stamp_ns`). No episode whose last frame is after it is
            returned. None = no limit.
        max_results_cap: Most episodes one call may return.
        robot_id: Search only this robot's episodes (a fleet's shared memory holds many
            robots'); None = every robot's, or the one the call's ``robot`` names. Each
            episode's JSON names its robot.
        embed_image: Image-to-vector function of the store's embedder (a query image,
            (H, W, 3) uint8 RGB). None = the retriever embeds images itself where it can
            (the memory node does), else no image queries.
        image_episodes: With images, how many of the best episodes send frames.
        frames_per_episode: With images, frames sent per episode (evenly spaced).
        name: Function name shown to the agent.
        place_status: Fills the returned hits' place status (is the episode's place still
            as it was?) in this process, for the hits returned only; None = as the
            retriever gives them (the memory node's service fills it when asked to).

    Raises:
        InputError: Inconsistent arguments (a text embedder without its model name, limits
            below 1, an invalid origin).

    """

    def __init__(
        self,
        retriever: EpisodeRetriever,
        *,
        embed_text: TextEmbedder | None = None,
        embedder_model: str | None = None,
        embedder_pretrained: bool | None = None,
        origin: int | float | None = None,
        now: TimeValue | Callable[[], TimeValue | None] | None = None,
        max_results_cap: int = 20,
        robot_id: str | None = None,
        image_episodes: int = 3,
        frames_per_episode: int = 3,
        name: str = "search_episodic_memory",
        embed_image: ImageEmbedder | None = None,
        place_status: PlaceStatusFiller | None = None,
    ) -> None:
        if (embed_text is not None or embed_image is not None) and not embedder_model:
            raise InputError("an embedder needs embedder_model, the name of the model it runs")
        for label, value in (
            ("max_results_cap", max_results_cap),
            ("image_episodes", image_episodes),
            ("frames_per_episode", frames_per_episode),
        ):
            if value < 1:
                raise InputError(f"{label}={value}: must be >= 1")
        self._retriever = retriever
        self._embed_text = embed_text
        self._embed_image = embed_image
        self._embedder_model = canonical_model_name(embedder_model) if embedder_model else None
        self._embedder_pretrained = embedder_pretrained
        self._origin_ns = None if origin is None else origin_to_ns(origin)
        self._now = now
        self._cap = max_results_cap
        self._robot_id = None if robot_id is None else check_robot_id(robot_id)
        self._image_episodes = image_episodes
        self._frames_per_episode = frames_per_episode
        self._place_status = place_status
        super().__init__(name)

    # ------------------------------------------------------------------ what DAAAM reads
    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Search the robot's episodic memory: episodes, short clips (8 frames) stored "
            "when something surprising happened (events: who came, what moved), and place "
            "keyframes, the latest view of every place the robot passed (where things are, "
            "surprising or not: 'where did you see the red door?'); choose with kinds. "
            "Filter by what was seen (text, or a picture), by time, by place and by robot; "
            "combine freely. Without text or picture, results come nearest first when a "
            "position is given, else newest first. Times are seconds since the start of "
            "the recording; positions are [x, y, z] in metres in the map frame. An episode "
            "may say when its place was last_seen and whether it was still_there then "
            "(null: not seen since)."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, in OpenAI's strict form."""
        return _parameters_schema(
            self._cap,
            self._image_episodes,
            self.can_search_text,
            self.can_search_images,
            self._robot_id,
        )

    # ------------------------------------------------------------------ times
    @property
    def can_search_text(self) -> bool:
        """Whether text queries can be answered (a text embedder, or a retriever that embeds)."""
        return self._embed_text is not None or isinstance(self._retriever, RetrievesByText)

    @property
    def can_search_images(self) -> bool:
        """Whether image queries can be answered (an image embedder, or a retriever that embeds)."""
        return self._embed_image is not None or isinstance(self._retriever, RetrievesByImage)

    @property
    def max_results_cap(self) -> int:
        """Most episodes one call may return."""
        return self._cap

    @property
    def robot_id(self) -> str | None:
        """The only robot whose episodes this tool returns (None: every robot's)."""
        return self._robot_id

    def robot_filter(self, robot: Any) -> str | None:
        """The robot a call asks for, within the tool's own (None: every robot's).

        Raises:
            InputError: Not a robot id, or another robot than the one this tool serves.

        """
        if robot is None:
            return self._robot_id
        if not isinstance(robot, str):
            raise InputError(f"robot={robot!r}: must be a robot id (a string) or null")
        robot = check_robot_id(robot)
        if self._robot_id is not None and robot != self._robot_id:
            raise InputError(f"robot={robot!r}: this memory answers for {self._robot_id!r} only")
        return str(robot)

    @property
    def origin_ns(self) -> int | None:
        """Time zero of every time in and out of the tool, int ns (None: none known yet)."""
        if self._origin_ns is not None:
            return self._origin_ns
        if isinstance(self._retriever, HasTimeOrigin):
            return self._retriever.origin_ns
        return None

    def now_ns(self, origin: int | None) -> int | None:
        """The current robot time as int ns, from ``now`` (None = no limit).

        Raises:
            InputError: ``now`` gives something that is not a time.

        """
        value = self._now() if callable(self._now) else self._now
        return stamp_ns("now", value, origin)

    def with_place_status(
        self, hits: Sequence[RetrievalHit], now: int | None = None
    ) -> list[RetrievalHit]:
        """``hits`` with their place status filled by ``place_status``.

        Without ``place_status`` they are kept as they are (the retriever's status, where
        it filled one). A status whose view is after ``now`` (int ns) is dropped
        (:func:`~surprise_memory.agents.episode_json.known_at`).
        """
        if self._place_status is not None and hits:
            hits = self._place_status(hits)
        return known_at(hits, now)

    # ------------------------------------------------------------------ calling
    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call of the tool; never raises.

        Args:
            **kwargs: The arguments of the schema (missing ones count as null).

        Returns:
            ``{"episodes": [...], "count": n}`` (plus ``"_images"`` when asked and found,
            and ``"partial"``, the reason, when the memory answered from part of itself),
            or ``{"error": message, "episodes": []}``.

        """
        try:
            return self._execute(kwargs)
        except SurpriseMemoryError as exc:
            return {"error": str(exc), "episodes": []}
        except Exception as exc:  # an agent loop must never see a raise
            return {"error": f"{type(exc).__name__}: {exc}", "episodes": []}

    def _execute(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(kwargs) - set(_PARAMETERS))
        if unknown:
            raise InputError(f"unknown arguments {unknown}; allowed: {sorted(_PARAMETERS)}")
        origin = self.origin_ns
        now = self.now_ns(origin)
        start = stamp_ns("start_time", kwargs.get("start_time"), origin)
        end = stamp_ns("end_time", kwargs.get("end_time"), origin)
        if now is not None:
            if start is not None and start > now:
                return {"episodes": [], "count": 0, "note": "start_time is after the current time"}
            end = now if end is None else min(end, now)
        k = _max_results(kwargs.get("max_results"), self._cap)
        include_images = kwargs.get("include_images", False)
        if not isinstance(include_images, bool):
            raise InputError(f"include_images={include_images!r}: must be true or false")
        robot = self.robot_filter(kwargs.get("robot"))
        text, rgb, embedding = self._similar_to(kwargs.get("query"), kwargs.get("image"))
        near = _position(kwargs.get("position"))
        radius = kwargs.get("radius")
        if radius is not None and near is None:
            raise InputError("radius given without a position")
        # an episode exists at `now` once its last frame does: ask for a few more than k,
        # since the ones whose frames run past `now` are dropped below
        extra = 2 if now is not None else 0
        query = RetrievalQuery(
            embedding=embedding,
            embedder_model=self._embedder_model if embedding is not None else None,
            embedder_pretrained=self._embedder_pretrained if embedding is not None else None,
            start_ns=None if start is None else max(start, 1),  # 0 would mean "open"
            end_ns=None if end is None else max(end, 1),
            near=near,
            radius_m=radius,
            max_results=k + extra,
            robot_id=robot,
            camera=kwargs.get("camera"),  # checked by the query
            kinds=record_kinds(kwargs.get("kinds")),
        )
        if text is not None and isinstance(self._retriever, RetrievesByText):
            hits = self._retriever.retrieve_text(text, query, include_images=include_images)
        elif rgb is not None and isinstance(self._retriever, RetrievesByImage):
            hits = self._retriever.retrieve_image(rgb, query, include_images=include_images)
        else:
            hits = self._retriever.retrieve(query, include_images=include_images)
        partial = partial_of(hits)
        if now is not None:
            hits = [h for h in hits if h.episode.end_ns <= now]
        # a few reads per hit: for the ones returned, never for the candidates
        hits = self.with_place_status(hits[:k], now)
        if origin is None:  # an empty memory has no origin: count from the epoch
            origin = 0
        result: dict[str, Any] = {
            "episodes": [episode_json(h, origin) for h in hits],
            "count": len(hits),
        }
        if partial:  # e.g. the fleet store unreachable: the robot's own episodes only
            result["partial"] = partial
        if include_images:
            images = [
                image
                for hit in hits[: self._image_episodes]
                for image in frame_images(hit, origin, self._frames_per_episode)
            ]
            if images:
                result["_images"] = images
        return result

    def _similar_to(
        self, text: Any, image: Any
    ) -> tuple[str | None, npt.NDArray[np.uint8] | None, npt.NDArray[np.float32] | None]:
        """What ranks the episodes, from the ``query`` and ``image`` arguments.

        Returns (text for the retriever to embed, image for it to embed, or the embedding
        made here); all None: nothing ranks (time or place order).
        """
        if text is not None and not isinstance(text, str):
            raise InputError(f"query={text!r}: must be a string or null")
        if image is not None and not isinstance(image, str):
            raise InputError("image: must be a base64-encoded JPEG or PNG (a string) or null")
        text = text if text and text.strip() else None
        if text is not None and image:
            raise InputError("give query (words) or image (a picture), not both")
        if text is not None:
            if self._embed_text is not None:
                return None, None, np.asarray(self._embed_text(text), dtype=np.float32)
            if isinstance(self._retriever, RetrievesByText):
                return text, None, None
            raise InputError(
                "text search is not available (no text embedder configured); search by "
                "time or position instead"
            )
        if not image:
            return None, None, None
        if not self.can_search_images:
            raise InputError("image search is not available here; search by words, time or place")
        rgb = decode_query_image(_base64_bytes(image))
        if self._embed_image is not None:
            return None, None, np.asarray(self._embed_image(rgb), dtype=np.float32)
        return None, rgb, None


def _position(position: Any) -> tuple[float, float, float] | None:
    """The ``position`` argument as a query's point (checked further by the query)."""
    if position is None:
        return None
    if not isinstance(position, Sequence) or isinstance(position, str) or len(position) != 3:
        raise InputError(f"position={position!r}: must be [x, y, z] in metres or null")
    return (position[0], position[1], position[2])


def _max_results(max_results: Any, cap: int) -> int:
    """The ``max_results`` argument, 1 to ``cap`` (null: 5, or ``cap`` when lower)."""
    if max_results is None:
        return min(5, cap)
    if isinstance(max_results, bool) or not isinstance(max_results, int):
        raise InputError(f"max_results={max_results!r}: must be an integer or null")
    if not 1 <= max_results <= cap:
        raise InputError(f"max_results={max_results}: must be between 1 and {cap}")
    return max_results


def _base64_bytes(data: str) -> bytes:
    """A base64 argument's bytes (a ``data:image/...;base64,`` prefix is allowed).

    Raises:
        InputError: Not base64, or over :data:`MAX_QUERY_IMAGE_BYTES`.

    """
    payload = data.partition(",")[2] if data.startswith("data:") else data
    if len(payload) > MAX_QUERY_IMAGE_BYTES * 4 // 3 + 4:
        raise InputError(f"image: over {MAX_QUERY_IMAGE_BYTES} bytes")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("image: not valid base64 (a base64-encoded JPEG or PNG)") from None
