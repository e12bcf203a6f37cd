"""An LLM agent tool over the episodic memory, in the shape DAAAM's agent tools take.

The tool is an OpenAI function schema (``"strict": true``: every parameter required,
nullable where optional, no extra properties) plus ``execute(**kwargs)`` returning a
JSON-able dict. Conventions follow DAAAM's: times are seconds since the start of the
recording (the store's first episode, or an origin given to the tool), positions are
``[x, y, z]`` in metres, and images are returned as
``{"_images": [{"base64": ..., "label": ...}]}`` (the stored JPEG bytes, base64-encoded,
not re-encoded). DAAAM itself is not imported.

The tool works against any :class:`EpisodeRetriever` — :class:`surprise_memory.memory.store.
EpisodeStore` is one, and a ROS service client can be another — and, for text queries,
a callable that embeds text with the same model as the store's frame embeddings.
Errors in a call (bad times, a text query without a text embedder, a model mismatch) come
back as ``{"error": ..., "episodes": []}`` so the agent can read them and retry; they are
never raised into the agent loop.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.retrieval import RetrievalQuery, check_robot_id
from surprise_memory.memory.store import EpisodeRetriever, HasTimeOrigin, RetrievalHit
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["EpisodicMemoryTool", "TextEmbedder"]


TextEmbedder = Callable[[str], npt.NDArray[np.float32]]
"""Embeds a text query into the store's embedding space, e.g. PE-Core's text tower."""


# strict function calling: every parameter is required (optional ones are nullable)
_PARAMETERS = (
    "query",
    "start_time",
    "end_time",
    "position",
    "radius",
    "max_results",
    "include_images",
)


class EpisodicMemoryTool:
    """Search the robot's surprise-gated episodic memory, for an LLM agent.

    Args:
        retriever: The memory (an :class:`~surprise_memory.memory.store.EpisodeStore` or a client).
        embed_text: Text-to-vector function of the store's embedder; None = no text queries.
        embedder_model: Model name of ``embed_text`` (checked against the store's).
        embedder_pretrained: Whether ``embed_text``'s model has its trained weights (None =
            not checked).
        origin_ns: Start of the recording, int ns; None = the retriever's ``origin_ns``
            (the store's earliest episode), else 0.
        max_results_cap: Most episodes one call may return.
        robot_id: Search only this robot's episodes (a fleet's shared memory holds many
            robots'); None = every robot's. Each episode's JSON names its robot.
        image_episodes: With images, how many of the best episodes send frames.
        frames_per_episode: With images, frames sent per episode (evenly spaced).
        name: Function name shown to the agent.

    Raises:
        InputError: Inconsistent arguments (a text embedder without its model name, limits
            below 1).

    """

    def __init__(
        self,
        retriever: EpisodeRetriever,
        *,
        embed_text: TextEmbedder | None = None,
        embedder_model: str | None = None,
        embedder_pretrained: bool | None = None,
        origin_ns: int | None = None,
        max_results_cap: int = 20,
        robot_id: str | None = None,
        image_episodes: int = 3,
        frames_per_episode: int = 3,
        name: str = "search_episodic_memory",
    ) -> None:
        if embed_text is not None and not embedder_model:
            raise InputError("embed_text needs embedder_model, the name of the model it runs")
        for label, value in (
            ("max_results_cap", max_results_cap),
            ("image_episodes", image_episodes),
            ("frames_per_episode", frames_per_episode),
        ):
            if value < 1:
                raise InputError(f"{label}={value}: must be >= 1")
        self._retriever = retriever
        self._embed_text = embed_text
        self._embedder_model = embedder_model
        self._embedder_pretrained = embedder_pretrained
        self._origin_ns = origin_ns
        self._cap = max_results_cap
        self._robot_id = None if robot_id is None else check_robot_id(robot_id)
        self._image_episodes = image_episodes
        self._frames_per_episode = frames_per_episode
        self._name = name

    @property
    def name(self) -> str:
        """The function name."""
        return self._name

    @property
    def origin_ns(self) -> int:
        """The time origin used for every time in and out of the tool, int ns."""
        if self._origin_ns is not None:
            return self._origin_ns
        if isinstance(self._retriever, HasTimeOrigin):
            origin = self._retriever.origin_ns
            if origin is not None:
                return origin
        return 0

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (strict)."""
        nullable_number = {"type": ["number", "null"]}
        text_note = (
            "" if self._embed_text is not None else " (text search unavailable here: pass null)"
        )
        return {
            "type": "function",
            "function": {
                "name": self._name,
                "description": (
                    "Search the robot's episodic memory: short clips (8 frames) stored when "
                    "something surprising happened. Filter by what was seen (text), by time "
                    "and by place; combine freely. Without text, results come nearest first "
                    "when a position is given, else newest first. Times are seconds since "
                    "the start of the recording; positions are [x, y, z] in metres in the "
                    "map frame."
                ),
                "strict": True,
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": ["string", "null"],
                            "description": "What to look for, in words, e.g. 'a golf cart "
                            "stopping'; null for no text search" + text_note + ".",
                        },
                        "start_time": {
                            **nullable_number,
                            "description": "Earliest episode time in seconds since the "
                            "recording started; null = open.",
                        },
                        "end_time": {
                            **nullable_number,
                            "description": "Latest episode time in seconds since the "
                            "recording started; null = open.",
                        },
                        "position": {
                            "type": ["array", "null"],
                            "items": {"type": "number"},
                            "description": "[x, y, z] in metres to search around; null = "
                            "anywhere. Episodes without a known pose are left out.",
                        },
                        "radius": {
                            **nullable_number,
                            "description": "Keep episodes within this many metres of "
                            "position; null = no limit (sorted by distance).",
                        },
                        "max_results": {
                            "type": ["integer", "null"],
                            "description": f"How many episodes, 1 to {self._cap}; null = 5.",
                        },
                        "include_images": {
                            "type": "boolean",
                            "description": f"Return frames of the best {self._image_episodes} "
                            "episodes as images.",
                        },
                    },
                    "required": list(_PARAMETERS),
                    "additionalProperties": False,
                },
            },
        }

    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call of the tool.

        Args:
            **kwargs: The arguments of the schema (missing ones count as null).

        Returns:
            ``{"episodes": [...], "count": n}`` (plus ``"_images"`` when asked and found),
            or ``{"error": message, "episodes": []}``.

        """
        try:
            query, include_images = self._build_query(kwargs)
            hits = self._retriever.retrieve(query, include_images=include_images)
        except SurpriseMemoryError as exc:
            return {"error": str(exc), "episodes": []}
        origin = self.origin_ns
        result: dict[str, Any] = {
            "episodes": [self._episode_json(h, origin) for h in hits],
            "count": len(hits),
        }
        if include_images:
            images = self._images(hits, origin)
            if images:
                result["_images"] = images
        return result

    def _build_query(self, kwargs: dict[str, Any]) -> tuple[RetrievalQuery, bool]:
        unknown = sorted(set(kwargs) - set(_PARAMETERS))
        if unknown:
            raise InputError(f"unknown arguments {unknown}; allowed: {sorted(_PARAMETERS)}")
        text = kwargs.get("query")
        embedding = None
        if text is not None:
            if not isinstance(text, str):
                raise InputError(f"query={text!r}: must be a string or null")
            if text.strip():
                if self._embed_text is None:
                    raise InputError(
                        "text search is not available (no text embedder configured); search "
                        "by time or position instead"
                    )
                embedding = np.asarray(self._embed_text(text), dtype=np.float32)
        origin = self.origin_ns
        start_ns = self._time_ns("start_time", kwargs.get("start_time"), origin)
        end_ns = self._time_ns("end_time", kwargs.get("end_time"), origin)
        position = kwargs.get("position")
        near = None
        if position is not None:
            if (
                not isinstance(position, Sequence)
                or isinstance(position, str)
                or len(position) != 3
            ):
                raise InputError(f"position={position!r}: must be [x, y, z] in metres or null")
            near = (position[0], position[1], position[2])
        radius = kwargs.get("radius")
        if radius is not None and near is None:
            raise InputError("radius given without a position")
        max_results = kwargs.get("max_results")
        if max_results is None:
            max_results = min(5, self._cap)
        if isinstance(max_results, bool) or not isinstance(max_results, int):
            raise InputError(f"max_results={max_results!r}: must be an integer or null")
        if not 1 <= max_results <= self._cap:
            raise InputError(f"max_results={max_results}: must be between 1 and {self._cap}")
        include_images = kwargs.get("include_images", False)
        if not isinstance(include_images, bool):
            raise InputError(f"include_images={include_images!r}: must be true or false")
        query = RetrievalQuery(
            embedding=embedding,
            embedder_model=self._embedder_model if embedding is not None else None,
            embedder_pretrained=self._embedder_pretrained if embedding is not None else None,
            start_ns=start_ns,
            end_ns=end_ns,
            near=near,
            radius_m=radius,
            max_results=max_results,
            robot_id=self._robot_id,
        )
        return query, include_images

    @staticmethod
    def _time_ns(name: str, seconds: Any, origin: int) -> int | None:
        if seconds is None:
            return None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise InputError(f"{name}={seconds!r}: must be seconds (a number) or null")
        if not math.isfinite(seconds) or seconds < 0:
            raise InputError(
                f"{name}={seconds!r}: must be >= 0 seconds since the start of the recording"
            )
        # at least 1 ns: 0 means "open" to the query, but 0 s here means the origin itself
        return max(origin + round(seconds * NS_PER_SECOND), 1)

    @staticmethod
    def _seconds(stamp_ns: int, origin: int) -> float:
        return round((stamp_ns - origin) / NS_PER_SECOND, 3)

    def _episode_json(self, hit: RetrievalHit, origin: int) -> dict[str, Any]:
        ep = hit.episode
        return {
            "id": ep.id,
            "time": self._seconds(ep.stamp_ns, origin),
            "start_time": self._seconds(ep.start_ns, origin),
            "end_time": self._seconds(ep.end_ns, origin),
            "position": [round(v, 3) for v in ep.pose.position] if ep.pose_valid else None,
            "frame": ep.pose.frame_id if ep.pose_valid else None,
            "surprise": round(ep.surprise, 4),
            "similarity": None if hit.score is None else round(hit.score, 4),
            "distance": None if hit.distance_m is None else round(hit.distance_m, 3),
            "frame_times": [self._seconds(s, origin) for s in ep.frame_stamps_ns],
            "robot": ep.robot_id,
        }

    def _images(self, hits: Sequence[RetrievalHit], origin: int) -> list[dict[str, str]]:
        images = []
        for hit in hits[: self._image_episodes]:
            n = len(hit.jpegs)
            if n == 0:
                continue
            picks = sorted(
                {int(i) for i in np.linspace(0, n - 1, min(self._frames_per_episode, n)).round()}
            )
            for i in picks:
                t = self._seconds(hit.episode.frame_stamps_ns[i], origin)
                images.append(
                    {
                        "base64": base64.b64encode(hit.jpegs[i]).decode("ascii"),
                        "label": f"episode {hit.episode.id}, frame {i + 1}/{n}, t={t:.1f} s",
                    }
                )
        return images
