"""Place keyframes: which camera frames become the latest view of a place.

Beside the paper's surprise episodes (kind ``"episode"``), the store keeps place keyframes
(kind ``"place"``): one frame, its embedding, pose, camera and stamp per place *cell* (a
square of ``place_cell_m`` on the pose frame's x-y grid) and viewing *sector* (one of
``place_sectors`` equal slices of the camera's viewing yaw, else the robot's). A place is
named by its :func:`place_key`; the store keeps at most ``place_history`` records per key
and robot, so their number grows with the area covered, not with time.

:class:`PlaceKeyframeSelector` decides, frame by frame, in O(1) and bounded memory, which
frames to keep; it never touches the store (the store is the truth about what exists):

* a frame is kept when its place was not kept within ``place_revisit_seconds`` (a new
  place, a place the robot came back to, or one it has stood in that long), and its camera
  kept nothing within ``place_min_interval_seconds``;
* a camera stays in its place until it is a quarter of a cell (or of a sector) beyond
  it (:data:`HYSTERESIS`): a robot driving along a cell's edge, wobbling across it, would
  otherwise make the places of both rows (measured: 106 places per 100 m of corridor
  instead of 55, benchmarks/bench_place_keyframes.py);
* nothing is kept without a trustworthy pose: none, not finite, without a frame, stale
  (its own stamp far from the frame's) or from another session; and after a pose jump
  (a relocalisation, or a change of the pose's frame) nothing is kept until the pose has
  been continuous for ``place_settle_seconds``, so a jump does not flood the memory with
  the cells it crossed. Every frame not kept is counted under its reason
  (:attr:`PlaceKeyframeSelector.skipped`, for ``/diagnostics``).

Use::

    selector = PlaceKeyframeSelector(PlacesConfig())
    decision = selector.push(stamp_ns, pose, camera="front", view_yaw=camera_view.yaw)
    if decision is not None:
        store.add(..., kind="place", place_key=decision.place_key, pose=decision.pose)
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from surprise_memory.config.places import PlacesConfig
from surprise_memory.errors import InputError
from surprise_memory.health import Finding, Level
from surprise_memory.memory.pose import Pose, yaw_of
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "EPISODE",
    "HYSTERESIS",
    "PLACE",
    "POSE_PROBLEMS",
    "RECENT_PLACES",
    "RECORD_KINDS",
    "SKIP_REASONS",
    "SKIP_REASON_TEXT",
    "PlaceCell",
    "PlaceKeyframeDecision",
    "PlaceKeyframeSelector",
    "PlaceStatus",
    "check_record_kind",
    "parse_place_key",
    "place_cell",
    "place_key",
    "place_keyframes_finding",
    "sector_of",
]

EPISODE = "episode"
"""The kind of a stored record that is a surprise episode (the paper's)."""
PLACE = "place"
"""The kind of a stored record that is a place keyframe (one frame, the view of a place)."""
RECORD_KINDS = (EPISODE, PLACE)
"""Every kind a stored record may have (``EpisodeRecord.kind``)."""

_PLACE_KEY_MAX = 256

RECENT_PLACES = 65_536
"""Places whose last keyframe time the selector remembers (least recently kept forgotten
first): about 1 MiB; a forgotten place is kept again on the next visit, which the store's
bounded history absorbs."""

SKIP_REASONS = (
    "disabled",
    "no_pose",
    "invalid_pose",
    "stale_pose",
    "other_session",
    "time_back",
    "pose_jump",
    "settling",
    "too_soon",
    "recent_place",
)
"""Why a frame was not kept, the keys of :attr:`PlaceKeyframeSelector.skipped`:
``disabled`` (``place_keyframes`` off), ``no_pose``, ``invalid_pose`` (not finite, a zero
rotation, no frame), ``stale_pose``, ``other_session`` (a pose of another boot),
``time_back`` (a stamp before its camera's previous one: the camera's state starts
anew), ``pose_jump`` (the frame of a jump), ``settling`` (after a jump),
``too_soon`` (its camera kept a frame within ``place_min_interval_seconds``),
``recent_place`` (its place was kept within ``place_revisit_seconds``: the usual case)."""

SKIP_REASON_TEXT = {
    "disabled": "place_keyframes is off",
    "no_pose": "no pose (no tf, no odometry)",
    "invalid_pose": "invalid pose (not finite, no rotation or no frame)",
    "stale_pose": "stale pose (its stamp further than place_pose_max_age_seconds from the frame's)",
    "other_session": "pose from another boot",
    "time_back": "camera time went back",
    "pose_jump": "pose jump (relocalisation)",
    "settling": "settling after a pose jump (place_settle_seconds)",
    "too_soon": "its camera kept one within place_min_interval_seconds",
    "recent_place": "its places were kept within place_revisit_seconds",
}
"""What each of :data:`SKIP_REASONS` means, as ``/diagnostics`` says it."""

POSE_PROBLEMS = frozenset(SKIP_REASONS) - {"disabled", "too_soon", "recent_place"}
"""Reasons that mean the pose cannot be trusted (a WARN when they keep every frame out);
the others are the usual case (the robot is in places it has a recent view of)."""

HYSTERESIS = 0.25
"""How far (a fraction of a cell's side, of a sector's width) a camera goes beyond its
place before it is in the next one."""

_TWO_PI = 2.0 * math.pi


@dataclass(frozen=True)
class PlaceCell:
    """A place: a cell of the pose frame's grid and a viewing sector.

    Attributes:
        frame_id: The pose frame (``map``); places of different frames never compare.
        cell_m: Side of the cell in metres (part of the key: a store may hold keys of
            several cell sizes after a settings change, never confused).
        ix: Cell column, ``floor(x / cell_m)``.
        iy: Cell row, ``floor(y / cell_m)``.
        sector: Viewing sector, ``0 .. sectors - 1`` (0 centred on yaw 0, counter-clockwise).
        sectors: Sectors per cell.

    """

    frame_id: str
    cell_m: float
    ix: int
    iy: int
    sector: int
    sectors: int

    @property
    def key(self) -> str:
        """The place key (:func:`place_key`)."""
        return place_key(self)

    def with_sector(self, sector: int) -> PlaceCell:
        """The same cell seen in another sector (taken modulo ``sectors``)."""
        return PlaceCell(
            self.frame_id, self.cell_m, self.ix, self.iy, sector % self.sectors, self.sectors
        )

    def shifted(self, dx: int, dy: int) -> PlaceCell:
        """The cell ``dx`` columns and ``dy`` rows away, same sector."""
        return PlaceCell(
            self.frame_id, self.cell_m, self.ix + dx, self.iy + dy, self.sector, self.sectors
        )


def sector_of(yaw: float, sectors: int) -> int:
    """The sector of a yaw in radians: ``sectors`` equal slices, sector 0 centred on yaw 0."""
    width = _TWO_PI / sectors
    return int(((yaw + width / 2.0) % _TWO_PI) // width) % sectors


def place_cell(pose: Pose, yaw: float, cell_m: float, sectors: int) -> PlaceCell:
    """The place of a pose looking along ``yaw`` (radians, in the pose's frame)."""
    return PlaceCell(
        pose.frame_id,
        cell_m,
        math.floor(pose.x / cell_m),
        math.floor(pose.y / cell_m),
        sector_of(yaw, sectors),
        sectors,
    )


def place_key(cell: PlaceCell) -> str:
    """The key of a place: ``<frame>@<cell_m>m:<ix>,<iy>:<sector>/<sectors>``.

    E.g. ``map@2m:12,-3:5/8``. The store indexes it; :func:`parse_place_key` reads it back.
    """
    return f"{cell.frame_id}@{cell.cell_m:g}m:{cell.ix},{cell.iy}:{cell.sector}/{cell.sectors}"


def parse_place_key(key: str) -> PlaceCell:
    """The place a key names (the inverse of :func:`place_key`).

    Raises:
        InputError: ``key`` is not a place key.

    """
    try:
        frame, rest = key.rsplit("@", 1)
        size, cell, sector = rest.split(":")
        ix, iy = cell.split(",")
        s, n = sector.split("/")
        if not size.endswith("m") or not frame:
            raise ValueError(size)
        parsed = PlaceCell(frame, float(size[:-1]), int(ix), int(iy), int(s), int(n))
    except (AttributeError, ValueError):
        raise InputError(
            f"place key {key!r}: expected <frame>@<cell>m:<ix>,<iy>:<sector>/<sectors>"
        ) from None
    if not (0 <= parsed.sector < parsed.sectors and parsed.cell_m > 0.0):
        raise InputError(f"place key {key!r}: sector or cell size out of range")
    return parsed


def check_record_kind(kind: object, place_key: object, *, pose_valid: bool) -> str:
    """Check a record's kind and place key (what the store checks on every add).

    Args:
        kind: ``"episode"`` or ``"place"``.
        place_key: The place's key (:func:`place_key`) for a place, "" for an episode.
        pose_valid: Whether the record has a pose (a place needs one).

    Returns:
        The kind.

    Raises:
        InputError: An unknown kind, a place without a key or a pose, an episode with a
            key, or a key that is not a printable string of at most 256 characters.

    """
    if kind not in RECORD_KINDS:
        raise InputError(f"kind={kind!r}: must be one of {', '.join(RECORD_KINDS)}")
    if not isinstance(place_key, str) or len(place_key) > _PLACE_KEY_MAX:
        raise InputError(f"place_key={place_key!r}: must be a string of at most 256 characters")
    if kind == EPISODE and place_key:
        raise InputError(f"place_key={place_key!r}: an episode has none (kind={PLACE!r} has)")
    if kind == PLACE and (not place_key or not place_key.isprintable()):
        raise InputError(f"place_key={place_key!r}: a place needs its printable key")
    if kind == PLACE and not pose_valid:
        raise InputError("a place keyframe needs a pose (pose=None given)")
    return str(kind)


@dataclass(frozen=True)
class PlaceKeyframeDecision:
    """A frame to keep as a place keyframe.

    Attributes:
        stamp_ns: The frame's stamp, int ns.
        camera: The camera that saw it.
        pose: The robot's pose at the frame (what the store records).
        yaw: The viewing yaw the sector was taken from, radians.
        cell: Its place.
        place_key: ``cell.key``, what the store bounds the history by.

    """

    stamp_ns: int
    camera: str
    pose: Pose
    yaw: float
    cell: PlaceCell
    place_key: str


@dataclass
class _CameraState:
    """What the selector remembers of one camera: its last frame's pose and its last keep."""

    last_stamp_ns: int
    last_pose: Pose | None = None
    last_pose_ns: int = 0
    continuous_since_ns: int | None = None  # None: no jump yet (trusted from the start)
    last_kept_ns: int | None = None
    place: PlaceCell | None = None  # where it was at its last frame with a usable pose


def _sticky(last: PlaceCell | None, cell: PlaceCell, pose: Pose, yaw: float) -> PlaceCell:
    """``cell``, unless the pose is still within :data:`HYSTERESIS` of the ``last`` place."""
    if last is None or (last.frame_id, last.cell_m, last.sectors) != (
        cell.frame_id, cell.cell_m, cell.sectors,
    ):  # fmt: skip
        return cell
    size, margin = last.cell_m, last.cell_m * HYSTERESIS
    ix, iy = cell.ix, cell.iy
    if (last.ix * size - margin <= pose.x < (last.ix + 1) * size + margin
            and last.iy * size - margin <= pose.y < (last.iy + 1) * size + margin):  # fmt: skip
        ix, iy = last.ix, last.iy
    width = _TWO_PI / last.sectors
    sector = cell.sector
    if abs(math.remainder(yaw - last.sector * width, _TWO_PI)) <= width * (0.5 + HYSTERESIS):
        sector = last.sector
    if (ix, iy, sector) == (cell.ix, cell.iy, cell.sector):
        return cell
    return PlaceCell(cell.frame_id, cell.cell_m, ix, iy, sector, cell.sectors)


def _pose_usable(pose: Pose) -> bool:
    """A finite pose with a real rotation and a frame."""
    q2 = pose.qx**2 + pose.qy**2 + pose.qz**2 + pose.qw**2
    return pose.is_finite() and q2 > 0.0 and isinstance(pose.frame_id, str) and bool(pose.frame_id)


class PlaceKeyframeSelector:
    """Decides which camera frames become place keyframes (see the module docstring).

    Streaming, like the gate: :meth:`push` one frame, get the decision back; :meth:`reset`
    forgets everything (time jumped back, a new recording). O(1) per frame; memory bounded
    by the cameras and :data:`RECENT_PLACES`.

    Args:
        config: The place settings.
        session_id: This session (the machine's boot); a pose tagged with another is not
            used (a pose in ``odom`` of another boot is not this one's).

    """

    def __init__(self, config: PlacesConfig | None = None, *, session_id: str = "") -> None:
        self._config = config or PlacesConfig()
        self._session_id = session_id
        self._cameras: dict[str, _CameraState] = {}
        self._recent: OrderedDict[str, int] = OrderedDict()
        self._skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._kept = 0
        self._apply(self._config)

    def _apply(self, config: PlacesConfig) -> None:
        self._config = config
        self._revisit_ns = round(config.place_revisit_seconds * NS_PER_SECOND)
        self._interval_ns = round(config.place_min_interval_seconds * NS_PER_SECOND)
        self._settle_ns = round(config.place_settle_seconds * NS_PER_SECOND)
        self._max_age_ns = round(config.place_pose_max_age_seconds * NS_PER_SECOND)

    @property
    def config(self) -> PlacesConfig:
        """The settings in force."""
        return self._config

    def reconfigure(self, config: PlacesConfig) -> None:
        """Use new settings from the next frame on.

        A change of the cell size or sectors changes every key: the places remembered are
        forgotten (the store keeps the old keys' records until their history bound).
        """
        old = self._config
        self._apply(config)
        if (old.place_cell_m, old.place_sectors) != (config.place_cell_m, config.place_sectors):
            self._recent.clear()

    @property
    def kept(self) -> int:
        """Frames kept since construction."""
        return self._kept

    @property
    def skipped(self) -> Mapping[str, int]:
        """Frames not kept since construction, by reason (:data:`SKIP_REASONS`)."""
        return dict(self._skipped)

    @property
    def places_remembered(self) -> int:
        """Places whose last keyframe time is held (at most :data:`RECENT_PLACES`)."""
        return len(self._recent)

    def reset(self) -> None:
        """Forget the cameras' poses and the places kept (the counters stay)."""
        self._cameras.clear()
        self._recent.clear()

    def _skip(self, reason: str) -> None:
        self._skipped[reason] += 1

    def push(
        self,
        stamp_ns: int,
        pose: Pose | None,
        camera: str = "",
        *,
        view_yaw: float | None = None,
        pose_stamp_ns: int | None = None,
        pose_session_id: str | None = None,
    ) -> PlaceKeyframeDecision | None:
        """Decide about one camera frame.

        Args:
            stamp_ns: The frame's stamp, int ns (each camera's in non-decreasing order).
            pose: The robot's pose at the frame, in a fixed frame; None = unknown.
            camera: The camera's name ("" = the one unnamed camera).
            view_yaw: Where the camera looked, radians in the pose's frame
                (:attr:`~surprise_memory.memory.camera_view.CameraView.yaw`); None = the
                robot's yaw.
            pose_stamp_ns: The stamp of the pose sample used; None = exactly the frame's.
            pose_session_id: The session the pose belongs to; None = this one.

        Returns:
            The decision to keep the frame, or None (counted under its reason).

        Raises:
            InputError: ``stamp_ns`` is not an int.

        """
        if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, int):
            raise InputError(f"stamp_ns={stamp_ns!r}: must be int nanoseconds")
        reason = self._refusal(stamp_ns, pose, camera, pose_stamp_ns, pose_session_id)
        if reason is not None:
            self._skip(reason)
            return None
        assert pose is not None
        yaw = yaw_of(pose) if view_yaw is None or not math.isfinite(view_yaw) else view_yaw
        cfg = self._config
        state = self._cameras[camera]
        cell = _sticky(state.place, place_cell(pose, yaw, cfg.place_cell_m, cfg.place_sectors),
                       pose, yaw)  # fmt: skip
        state.place = cell
        key = cell.key
        last = self._recent.get(key)
        if last is not None and 0 <= stamp_ns - last < self._revisit_ns:
            self._skip("recent_place")
            return None
        self._recent[key] = stamp_ns
        self._recent.move_to_end(key)
        if len(self._recent) > RECENT_PLACES:
            self._recent.popitem(last=False)
        state.last_kept_ns = stamp_ns
        self._kept += 1
        return PlaceKeyframeDecision(stamp_ns, camera, pose, yaw, cell, key)

    def _refusal(
        self,
        stamp_ns: int,
        pose: Pose | None,
        camera: str,
        pose_stamp_ns: int | None,
        pose_session_id: str | None,
    ) -> str | None:
        """Why the frame cannot be kept whatever its place (a :data:`SKIP_REASONS` key)."""
        if not self._config.place_keyframes:
            return "disabled"
        state = self._cameras.get(camera)
        if state is None:
            state = self._cameras[camera] = _CameraState(stamp_ns)
        elif stamp_ns < state.last_stamp_ns:
            self._cameras[camera] = _CameraState(stamp_ns)  # time jumped back: start anew
            return "time_back"
        state.last_stamp_ns = stamp_ns
        reason = self._pose_problem(stamp_ns, pose, pose_stamp_ns, pose_session_id)
        if reason is not None or pose is None:
            return reason
        if self._jumped(state, stamp_ns, pose):
            state.continuous_since_ns = stamp_ns
            return "pose_jump"
        return self._held_back(state, stamp_ns)

    def _held_back(self, state: _CameraState, stamp_ns: int) -> str | None:
        """Settling after a jump, or its camera kept a frame too recently (else None)."""
        since = state.continuous_since_ns
        if since is not None and stamp_ns - since < self._settle_ns:
            return "settling"
        if state.last_kept_ns is not None and stamp_ns - state.last_kept_ns < self._interval_ns:
            return "too_soon"
        return None

    def _pose_problem(
        self,
        stamp_ns: int,
        pose: Pose | None,
        pose_stamp_ns: int | None,
        pose_session_id: str | None,
    ) -> str | None:
        """Why ``pose`` cannot place the frame, or None when it can."""
        if pose is None:
            return "no_pose"
        if not isinstance(pose, Pose) or not _pose_usable(pose):
            return "invalid_pose"
        if pose_stamp_ns is not None and abs(stamp_ns - pose_stamp_ns) > self._max_age_ns:
            return "stale_pose"
        if pose_session_id is not None and pose_session_id != self._session_id:
            return "other_session"
        return None

    def _jumped(self, state: _CameraState, stamp_ns: int, pose: Pose) -> bool:
        """Whether ``pose`` jumped from the camera's previous one; remembers it either way."""
        prev, prev_ns = state.last_pose, state.last_pose_ns
        state.last_pose, state.last_pose_ns = pose, stamp_ns
        if prev is None:
            return False
        if prev.frame_id != pose.frame_id:
            return True
        moved = math.hypot(pose.x - prev.x, pose.y - prev.y)
        if moved <= self._config.place_max_jump_m:
            return False
        dt = (stamp_ns - prev_ns) / NS_PER_SECOND
        return moved > self._config.place_max_speed_mps * dt


def place_keyframes_finding(
    kept: int, skipped: Mapping[str, int], detail: str = ""
) -> tuple[Finding | None, str]:
    """What the place keyframes did in the last period, and a WARN when the pose kept them out.

    Args:
        kept: Frames kept as place keyframes in the period.
        skipped: Frames not kept in the period, by reason
            (:data:`SKIP_REASONS`).
        detail: Why the pose source had no pose, appended to a ``no_pose`` reason (e.g.
            ``tf: LookupException; no odometry on '/odom'``).

    Returns:
        A WARN when none was kept and the most frequent reason is a pose problem
        (:data:`POSE_PROBLEMS`), else None; and the status
        for ``/diagnostics``: ``"<n> kept"``, ``"none kept: <reason>"`` or ``"no frames"``.

    """
    if kept > 0:
        return None, f"{kept} kept"
    counted = {reason: n for reason, n in skipped.items() if n > 0}
    if not counted:
        return None, "no frames"
    reason = max(counted, key=lambda r: counted[r])
    why = SKIP_REASON_TEXT.get(reason, reason)
    if reason == "no_pose" and detail:
        why = f"{why}: {detail}"
    status = f"none kept: {why}"
    if reason not in POSE_PROBLEMS:
        return None, status
    return Finding(Level.WARN, f"place keyframes {status}"), status


@dataclass(frozen=True)
class PlaceStatus:
    """What the memory knows now of an episode's place.

    Attributes:
        place_key: The episode's own place (its cell and viewing sector).
        last_seen_ns: When the place was last seen: the newest view's stamp, or the
            episode's own when no view is newer (int ns).
        similarity: Best cosine of a view of the latest pass by the place (the views
            within ``place_status_pass_seconds`` before the newest) with the episode's
            trigger frame; None when no view is newer than the episode.
        still_there: ``similarity >= place_still_there_similarity``; None when no view
            is newer (not seen since: unknown).
        view_id: The id of that best view (a place keyframe); None when none is newer.

    """

    place_key: str
    last_seen_ns: int
    similarity: float | None
    still_there: bool | None
    view_id: str | None = None
