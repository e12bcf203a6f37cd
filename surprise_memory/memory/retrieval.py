"""What a retrieval query is: :class:`RetrievalQuery`, a validated request.

A query combines a text or image embedding (with the name and weights of the model that
made it), a time window, a place (location and radius) and a number of results; it is
checked on construction, so a backend receives only valid requests.
:class:`EmbedderMismatchError` is the error of a query (or an add) whose embedder is not
the store's.

The search itself lives with the store's backends: :mod:`surprise_memory.memory.store.search`
(the in-memory index of the SQLite folder) and
:mod:`surprise_memory.memory.store.postgres.search` (SQL over pgvector).
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.config import CAMERA_NAME_PATTERN, ROBOT_ID_PATTERN
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.places import RECORD_KINDS
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "EmbedderMismatchError",
    "RetrievalQuery",
    "check_robot_id",
    "one_pose_frame",
    "parse_point",
]

_ROBOT_ID_RE = re.compile(ROBOT_ID_PATTERN)
_CAMERA_RE = re.compile(CAMERA_NAME_PATTERN)


def check_robot_id(robot_id: object, name: str = "robot_id") -> str:
    """Check a robot id: 1-64 letters, digits, ``_ . -``, starting with a letter or digit.

    Host names fit the rule, so a robot's host name is a valid id.

    Args:
        robot_id: The value to check.
        name: The field's name, for the message.

    Returns:
        The id.

    Raises:
        InputError: The value breaks the rule.

    """
    if not isinstance(robot_id, str) or not _ROBOT_ID_RE.fullmatch(robot_id):
        raise InputError(
            f"{name}={robot_id!r}: use 1-64 letters, digits, '_', '.', '-' starting with a "
            "letter or digit"
        )
    return robot_id


def parse_point(text: str, name: str = "--near") -> tuple[float, float, float]:
    """Parse a place given by a person, ``x,y`` or ``x,y,z`` in metres, into a point.

    Args:
        text: The text (``3.5,-1`` or ``3.5,-1,0``; z defaults to 0).
        name: What the text was given as (an option, a form field), for the message.

    Raises:
        InputError: Not two or three finite numbers separated by commas.

    """
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) not in (2, 3) or not all(math.isfinite(v) for v in values):
        raise InputError(f"{name} {text!r}: expected x,y or x,y,z in metres (e.g. 3.5,-1,0)")
    x, y, *z = values
    return (x, y, z[0] if z else 0.0)


class EmbedderMismatchError(StoreError, InputError):
    """A query embedding comes from another model (name, weights or dimension) than the store's.

    It is both a :class:`StoreError` (the store cannot answer it) and an :class:`InputError`
    (the request is what is wrong), so either ``except`` clause catches it.
    """


def _as_int_ns(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(f"{name}={value!r}: must be an integer number of nanoseconds or None")
    value = int(value)
    if value < 0:
        raise InputError(f"{name}={value}: must be >= 0 (0 or None = open)")
    return None if value == 0 else value


@dataclass(frozen=True, eq=False)
class RetrievalQuery:
    """One retrieval request, validated on construction.

    Filters combine (AND). Ordering: with an embedding, by score (max cosine over an
    episode's frames) best first; without one, by distance to ``near`` when it is given,
    else newest trigger stamp first. Ties go to the newer episode.

    Attributes:
        embedding: Query vector, shape (D,) or (1, D), from the text or image tower of the
            embedder that made the store's frame embeddings; None = no similarity ranking.
        embedder_model: Model name of that embedder (required with ``embedding``); it must
            equal the store's.
        embedder_pretrained: Whether that embedder has its trained weights; None = not
            checked. When given it must equal the store's.
        start_ns: Earliest trigger stamp (inclusive), int ns; 0 or None = open.
        end_ns: Latest trigger stamp (inclusive), int ns; 0 or None = open.
        near: (x, y, z) in metres, in the frame ``near_frame``; episodes without a valid
            pose are left out of a query that has a place.
        near_frame: The frame of ``near`` (e.g. ``map``); only episodes whose pose is in
            this frame match. None = the frame of the matching episodes' poses when they are
            all in one frame; when they span several (tf poses in ``map``, odometry
            fallbacks in ``odom``), the store refuses the query and names the frames, since
            coordinates of different frames cannot be compared. Needs ``near``.
        radius_m: Keep episodes within this distance of ``near`` (metres, > 0); None = no
            limit (ordering by distance only). Needs ``near``.
        max_results: Number of episodes wanted (>= 1); None = the store's default. The
            store refuses more than its cap.
        robot_id: Only this robot's episodes (see :func:`check_robot_id`); None = every
            robot of the store (a fleet's shared memory).
        camera: Only the episodes this camera saw (a name of the ``cameras`` setting; ""
            = the one unnamed camera of a one-camera robot); None = every camera.
        kinds: Only records of these kinds: ``{"episode"}`` (the surprise episodes),
            ``{"place"}`` (the place keyframes) or both; None = both. Each hit's record
            says its ``kind``.

    Raises:
        InputError: A field is invalid (the message names it and the rule).

    """

    embedding: npt.NDArray[np.float32] | None = None
    embedder_model: str | None = None
    embedder_pretrained: bool | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    near: tuple[float, float, float] | None = None
    radius_m: float | None = None
    max_results: int | None = None
    robot_id: str | None = None
    near_frame: str | None = None
    camera: str | None = None
    kinds: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.embedding is not None:
            emb = np.asarray(self.embedding)
            if emb.ndim == 2 and emb.shape[0] == 1:
                emb = emb[0]
            if emb.ndim != 1 or emb.shape[0] == 0:
                raise InputError(
                    f"query embedding has shape {np.shape(self.embedding)}: expected (D,) or (1, D)"
                )
            if not np.issubdtype(emb.dtype, np.number) or np.issubdtype(
                emb.dtype, np.complexfloating
            ):
                raise InputError(f"query embedding has dtype {emb.dtype}: expected real numbers")
            emb = emb.astype(np.float32)
            if not np.all(np.isfinite(emb)):
                raise InputError("query embedding has NaN or infinite values")
            norm = float(np.linalg.norm(emb))
            if norm == 0.0:
                raise InputError("query embedding is all zeros: it has no direction to compare")
            object.__setattr__(self, "embedding", emb / norm)
            if not isinstance(self.embedder_model, str) or not self.embedder_model:
                raise InputError(
                    "a query embedding needs embedder_model (the model name that made it), "
                    f"got {self.embedder_model!r}"
                )
        if self.embedder_pretrained is not None and not isinstance(self.embedder_pretrained, bool):
            raise InputError(f"embedder_pretrained={self.embedder_pretrained!r}: must be a bool")
        start = _as_int_ns("start_ns", self.start_ns)
        end = _as_int_ns("end_ns", self.end_ns)
        if start is not None and end is not None and end < start:
            raise InputError(
                f"time window ends before it starts: end_ns={end} < start_ns={start} "
                f"({(start - end) / NS_PER_SECOND:.3f} s)"
            )
        object.__setattr__(self, "start_ns", start)
        object.__setattr__(self, "end_ns", end)
        if self.near is not None:
            try:
                near = tuple(float(v) for v in self.near)
            except (TypeError, ValueError):
                raise InputError(f"near={self.near!r}: must be three numbers (x, y, z)") from None
            if len(near) != 3 or not all(math.isfinite(v) for v in near):
                raise InputError(f"near={self.near!r}: must be three finite numbers (x, y, z)")
            object.__setattr__(self, "near", near)
        if self.near_frame is not None:
            if self.near is None:
                raise InputError(f"near_frame={self.near_frame!r} given without a location")
            if not isinstance(self.near_frame, str) or not self.near_frame:
                raise InputError(f"near_frame={self.near_frame!r}: must be a frame name or None")
        if self.radius_m is not None:
            if self.near is None:
                raise InputError(f"radius_m={self.radius_m!r} given without a location (near)")
            if isinstance(self.radius_m, bool) or not isinstance(
                self.radius_m, int | float | np.number
            ):
                raise InputError(f"radius_m={self.radius_m!r}: must be a number of metres")
            radius = float(self.radius_m)
            if not math.isfinite(radius) or radius <= 0.0:
                raise InputError(
                    f"radius_m={self.radius_m!r}: must be a finite number > 0 (None = no limit)"
                )
            object.__setattr__(self, "radius_m", radius)
        if self.max_results is not None:
            if isinstance(self.max_results, bool) or not isinstance(
                self.max_results, int | np.integer
            ):
                raise InputError(f"max_results={self.max_results!r}: must be an integer")
            if self.max_results < 1:
                raise InputError(f"max_results={self.max_results}: must be >= 1")
            object.__setattr__(self, "max_results", int(self.max_results))
        if self.robot_id is not None:
            check_robot_id(self.robot_id)
        if self.camera is not None and (
            not isinstance(self.camera, str)
            or (self.camera and not _CAMERA_RE.fullmatch(self.camera))
        ):
            raise InputError(
                f"camera={self.camera!r}: a camera name (a letter, then letters, digits or "
                "'_'), or None for every camera"
            )
        if self.kinds is not None:
            object.__setattr__(self, "kinds", _checked_kinds(self.kinds))

    @property
    def query_vector(self) -> npt.NDArray[np.float32] | None:
        """The unit-norm float32 query vector, or None."""
        return self.embedding


def _checked_kinds(kinds: object) -> frozenset[str]:
    """A query's kinds as a set: not empty, each one of :data:`RECORD_KINDS`."""
    values = (kinds,) if isinstance(kinds, str) else kinds
    got: frozenset[object] = frozenset()
    with contextlib.suppress(TypeError):  # not a collection, or unhashable members
        got = frozenset(values)  # type: ignore[call-overload]
    if not got or not got <= set(RECORD_KINDS):
        raise InputError(f"kinds={kinds!r}: a set of {', '.join(RECORD_KINDS)} (None = both)")
    return frozenset(str(k) for k in got)


def one_pose_frame(query: RetrievalQuery, frames: set[str]) -> str | None:
    """The pose frame a place query compares in, given the frames of the candidate poses.

    Args:
        query: The query (with ``near``).
        frames: The distinct frames of the valid poses the filters leave.

    Returns:
        ``query.near_frame`` when given, else the one frame of ``frames`` (None when empty).

    Raises:
        InputError: No frame given while the poses span several.

    """
    if query.near_frame is not None or len(frames) <= 1:
        return query.near_frame if query.near_frame is not None else next(iter(frames), None)
    raise InputError(
        f"the episodes' poses are in several frames ({', '.join(sorted(frames))}): give the "
        "frame of the place (near_frame), since coordinates of different frames do not compare"
    )
