"""``get_episode``: one episode of the memory by its id, with all its frames.

An agent finds episodes with ``search_episodic_memory``
(:class:`~surprise_memory.agents.tool.EpisodicMemoryTool`), which sends a few frames of
the best few; ``get_episode(episode_id)`` (:class:`GetEpisodeTool`) then looks at one of
them closely: the same JSON as a search hit (:mod:`~surprise_memory.agents.episode_json`,
a place keyframe's too) and every frame, labelled. It keeps the search tool's conventions
(its time origin, its ``now``, its robot, its place status: is the place still as it
was?), since it takes them from the search tool it is built with. The episode comes from
an :class:`EpisodeLookup`: a store (:class:`StoreEpisodeLookup`) or
:class:`~surprise_memory.agents.ros_client.RosEpisodeRetriever` (the memory node's
service, which finds again the episodes its searches returned).
"""

from __future__ import annotations

from typing import Any, Protocol

from surprise_memory.agents.episode_json import episode_json, frame_images
from surprise_memory.agents.function_tool import FunctionTool
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.errors import InputError, StoreError, SurpriseMemoryError
from surprise_memory.memory.store import EpisodeStoreBackend, RetrievalHit
from surprise_memory.memory.store.records import is_episode_id

__all__ = ["EpisodeLookup", "GetEpisodeTool", "StoreEpisodeLookup"]

_PARAMETERS = ("episode_id", "include_images")


class EpisodeLookup(Protocol):
    """Finds one episode by its id."""

    def lookup(self, episode_id: str, *, include_images: bool = False) -> RetrievalHit:
        """The episode (with its JPEG bytes when asked), or raise ``StoreError``."""
        ...


class StoreEpisodeLookup:
    """:class:`EpisodeLookup` over a store (either backend), read as it is now.

    Args:
        store: The open store.

    """

    def __init__(self, store: EpisodeStoreBackend) -> None:
        self._store = store

    def lookup(self, episode_id: str, *, include_images: bool = False) -> RetrievalHit:
        """The episode, with its frames' JPEG bytes as stored when asked.

        Raises:
            StoreError: No such episode (or it was evicted), or a frame cannot be read.

        """
        if not is_episode_id(episode_id):
            raise StoreError(f"no episode {episode_id!r} in this memory")
        record = self._store.get(episode_id)
        jpegs: tuple[bytes, ...] = ()
        if include_images:
            jpegs = tuple(
                self._store.frame_jpeg(episode_id, i) for i in range(len(record.frame_stamps_ns))
            )
        return RetrievalHit(episode=record, score=None, distance_m=None, jpegs=jpegs)


class GetEpisodeTool(FunctionTool):
    """One episode by its id, with every frame, for an LLM agent (``get_episode``).

    Args:
        search: The search tool whose episodes this one returns: its time origin, ``now``
            and robot apply here too.
        lookup: Finds the episode (:class:`StoreEpisodeLookup`, or the memory node's
            :class:`~surprise_memory.agents.ros_client.RosEpisodeRetriever`).
        name: Function name shown to the agent.

    """

    def __init__(
        self, search: EpisodicMemoryTool, lookup: EpisodeLookup, *, name: str = "get_episode"
    ) -> None:
        self._search = search
        self._lookup = lookup
        super().__init__(name)

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            f"One episode of the robot's episodic memory by its id (from {self._search.name}): "
            "its times (seconds since the start of the recording), place ([x, y, z] metres), "
            "surprise and robot, and with include_images every frame as an image, labelled "
            "with its time."
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, in OpenAI's strict form."""
        return {
            "type": "object",
            "properties": {
                "episode_id": {
                    "type": "string",
                    "description": f"The episode's id, as {self._search.name} returned it.",
                },
                "include_images": {
                    "type": "boolean",
                    "description": "Return every frame of the episode as an image.",
                },
            },
            "required": list(_PARAMETERS),
            "additionalProperties": False,
        }

    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call; never raises.

        Args:
            **kwargs: ``episode_id``, ``include_images`` (missing: false).

        Returns:
            ``{"episode": {...}}`` (the search's episode JSON) plus ``"_images"`` when
            asked, or ``{"error": message}``.

        """
        try:
            return self._execute(kwargs)
        except SurpriseMemoryError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # an agent loop must never see a raise
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _execute(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(kwargs) - set(_PARAMETERS))
        if unknown:
            raise InputError(f"unknown arguments {unknown}; allowed: {list(_PARAMETERS)}")
        episode_id = kwargs.get("episode_id")
        if not isinstance(episode_id, str) or not episode_id:
            raise InputError(f"episode_id={episode_id!r}: must be an episode id (a string)")
        include_images = kwargs.get("include_images", False)
        if not isinstance(include_images, bool):
            raise InputError(f"include_images={include_images!r}: must be true or false")
        hit = self._lookup.lookup(episode_id, include_images=include_images)
        origin = self._search.origin_ns
        now = self._search.now_ns(origin)
        robot = self._search.robot_id
        # what the search tool would never return is not there for this one either
        if (now is not None and hit.episode.end_ns > now) or (
            robot is not None and hit.episode.robot_id != robot
        ):
            raise StoreError(f"no episode {episode_id!r} in this memory")
        origin = 0 if origin is None else origin
        hit = self._search.with_place_status([hit], now)[0]  # the search's own status, if any
        result: dict[str, Any] = {"episode": episode_json(hit, origin)}
        if include_images:
            result["_images"] = frame_images(hit, origin)
        return result
