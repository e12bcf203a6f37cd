"""From a remembered episode to a navigation goal: "take me to where it happened".

* :class:`GoalQuery`: which episode (an id, or the best hit of a text/time/place query)
  and on whose behalf (this robot's episodes unless others are asked for).
* :func:`choose_episode`: that episode, from a store, or a refusal.
* :func:`goal_from_episode`: the goal pose: the episode's stored position, in the
  navigation frame (given the transform where the frames differ), facing where the
  episode's camera looked (its optical axis on the ground; ``facing="robot"``, or a
  camera whose pose is unknown: the robot's heading then), optionally a stand-off short
  of it along that direction.
* :func:`plan_goal`: a chosen episode's goal, the session checked before any transform is
  looked up: what the memory node's ``go_to_episode``, ``surprise-memory goto`` and the
  demo call.

A goal is refused (:class:`GoalRefusedError`, an :class:`~surprise_memory.errors.InputError`)
rather than made wrong: no valid pose, a pose from another map or too uncertain unless the
caller overrides (:mod:`~surprise_memory.memory.pose_trust`), another robot's episode
unless asked, a time that has not happened yet on the robot's clock, a pose in a frame
with no transform to the navigation frame. ROS-free: the nodes look the transform up with
tf and send the goal (:mod:`surprise_memory.nodes.navigation_part`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.memory.pose_trust import TrustRule, trust_refusal
from surprise_memory.memory.retrieval import RetrievalQuery, check_robot_id
from surprise_memory.memory.store.hits import partial_of
from surprise_memory.memory.store.interface import EpisodeStoreBackend
from surprise_memory.memory.store.records import EpisodeRecord, is_episode_id
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "GoalQuery",
    "GoalRefusedError",
    "NavigationGoal",
    "check_query_times",
    "check_session",
    "choose_episode",
    "facing_pose",
    "goal_from_episode",
    "plan_goal",
    "standoff_pose",
]

_MIN_HEADING = 1e-6  # horizontal length of the forward axis below which it has no heading


class GoalRefusedError(InputError):
    """No goal for this request: the message says why and what to ask instead."""


@dataclass(frozen=True)
class NavigationGoal:
    """Where to send the robot for an episode.

    Attributes:
        episode: The chosen episode.
        pose: The goal, in the navigation frame (``pose.frame_id``), unit quaternion.
        standoff_m: How far short of the episode's pose the goal stops (metres).
        note: What else the caller should know (e.g. an approximate transform); "" = none.

    """

    episode: EpisodeRecord
    pose: Pose
    standoff_m: float = 0.0
    note: str = ""


@dataclass(frozen=True)
class GoalQuery:
    """Which episode to go to: an id, or the best hit of a query (not both).

    Attributes:
        episode_id: The episode; None = the best hit of the query fields.
        embedding: Text (or image) query vector from the store's embedder, and
        embedder_model: the name of that embedder.
        start_ns: Earliest trigger stamp, int ns (None = open).
        end_ns: Latest trigger stamp, int ns (None = open).
        near: Place (x, y, z) in metres, in ``near_frame`` (None = anywhere).
        near_frame: The frame of ``near`` (None = the poses' frame).
        radius_m: Keep episodes within this distance of ``near`` (None = nearest first).
        robot_id: Whose episodes; None = the asking robot's own.
        allow_other_robots: Whether another robot's episode may be the goal.
        camera: Only the episodes this camera saw; None = every camera's. Alone, it
            picks that camera's newest episode.

    """

    episode_id: str | None = None
    embedding: npt.NDArray[np.float32] | None = None
    embedder_model: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    near: tuple[float, float, float] | None = None
    near_frame: str | None = None
    radius_m: float | None = None
    robot_id: str | None = None
    allow_other_robots: bool = False
    camera: str | None = None

    @property
    def has_query(self) -> bool:
        """Whether any query field (text/image, time, place, camera) is given."""
        fields = (self.embedding, self.start_ns, self.end_ns, self.near, self.radius_m)
        return any(f is not None for f in (*fields, self.near_frame, self.camera))


def check_query_times(start_ns: int | None, end_ns: int | None, now_ns: int) -> None:
    """Refuse a time window that reaches past the robot's current time.

    A time that has not happened yet means the caller's clock is not the robot's (wall
    time against sim time, a wrong origin) or the question is stale: no episode chosen
    from it can be trusted.

    Raises:
        GoalRefusedError: ``start_ns`` or ``end_ns`` is after ``now_ns``.

    """
    for name, value in (("start", start_ns), ("end", end_ns)):
        if value is not None and value > now_ns:
            raise GoalRefusedError(
                f"the query's {name} time is {(value - now_ns) / NS_PER_SECOND:.1f} s after the "
                f"robot's current time ({_clock_hint(now_ns)}): it has not happened yet; ask "
                "for a past time window"
            )


def _clock_hint(now_ns: int) -> str:
    if now_ns <= 0:
        return "its clock reads 0: sim time without /clock?"
    return f"{now_ns} ns"


def choose_episode(
    store: EpisodeStoreBackend, query: GoalQuery, own_robot: str, now_ns: int
) -> tuple[EpisodeRecord, str]:
    """The episode a goal is for: by id, or the best hit of the query.

    Args:
        store: The episode store.
        query: Which episode.
        own_robot: The asking robot's id (its own episodes need no permission).
        now_ns: The robot's current time, int ns; later query times are refused.

    Returns:
        The episode (its pose not yet checked: :func:`goal_from_episode` does that), and
        why the query's answer was partial (empty when it was whole: see
        :class:`~surprise_memory.memory.store.hits.RetrievalHits`).

    Raises:
        GoalRefusedError: No selector, both an id and query fields, a time after ``now_ns``,
            another robot's episodes not allowed, or no episode matches.
        InputError: A query field is invalid.
        StoreError: No episode with that id, or the store failed.

    """
    robot = query.robot_id
    if robot is not None:
        check_robot_id(robot)
        if robot != own_robot and not query.allow_other_robots:
            raise GoalRefusedError(
                f"robot_id {robot!r} is another robot's memory (this robot is {own_robot!r}); "
                "ask with allow_other_robots to go where another robot was"
            )
    if query.episode_id is not None:
        if query.has_query:
            raise GoalRefusedError(
                "give an episode id or query fields (text, time, place), not both"
            )
        if not is_episode_id(query.episode_id):
            raise GoalRefusedError(f"episode_id={query.episode_id!r}: not an episode id")
        return store.get(query.episode_id), ""
    if not query.has_query:
        raise GoalRefusedError("say which episode: an episode id, or a text, time window or place")
    check_query_times(query.start_ns, query.end_ns, now_ns)
    if robot is None and not query.allow_other_robots:
        robot = own_robot
    hits = store.retrieve(
        RetrievalQuery(
            embedding=query.embedding,
            embedder_model=query.embedder_model,
            start_ns=query.start_ns,
            end_ns=query.end_ns,
            near=query.near,
            near_frame=query.near_frame,
            radius_m=query.radius_m,
            max_results=1,
            robot_id=robot,
            camera=query.camera,
        )
    )
    partial = partial_of(hits)
    if not hits:
        whose = "any robot's" if robot is None else f"robot {robot!r}'s"
        why = f" ({partial})" if partial else ""
        raise GoalRefusedError(f"no episode of {whose} memory matches the query{why}")
    return hits[0].episode, partial


def goal_from_episode(
    episode: EpisodeRecord,
    navigation_frame: str,
    *,
    transform: Pose | None = None,
    standoff_m: float = 0.0,
    own_robot: str | None = None,
    allow_other_robots: bool = False,
    now_ns: int | None = None,
    note: str = "",
    session_id: str | None = None,
    fixed_frames: Sequence[str] = ("map",),
    facing: str = "camera",
) -> NavigationGoal:
    """The navigation goal for an episode, or a refusal.

    Args:
        episode: The episode.
        navigation_frame: The frame the goal must be in (Nav2's global frame).
        transform: The pose of the episode's frame in ``navigation_frame``
            (``navigation_frame <- episode frame``, what tf's ``lookup_transform(
            navigation_frame, episode_frame, t)`` returns); needed when the frames differ.
        standoff_m: Stop this many metres short (see :func:`standoff_pose`).
        own_robot: The asking robot's id; None = not checked.
        allow_other_robots: Whether another robot's episode may be the goal.
        now_ns: The robot's current time; an episode not over by then is refused.
            None = not checked.
        note: Kept in the goal (e.g. how the transform was found).
        session_id: This session (the machine's boot,
            :func:`~surprise_memory.memory.store.records.host_session_id`); an episode
            posed in a frame not in ``fixed_frames`` must have been stored in it. None =
            not checked.
        fixed_frames: Frames whose origin is the same in every session (``map``).
        facing: ``camera``: the goal faces where the episode's camera looked
            (:func:`facing_pose`); ``robot``: the robot's heading then.

    Returns:
        The goal.

    Raises:
        GoalRefusedError: The episode has no valid pose, is another robot's, ends after
            ``now_ns``, is posed in a frame of another session (``odom`` after a reboot),
            or its frame is not ``navigation_frame`` and no matching transform is given;
            or the stand-off is invalid or has no heading to follow.

    """
    if own_robot is not None and episode.robot_id != own_robot and not allow_other_robots:
        raise GoalRefusedError(
            f"episode {episode.id} is robot {episode.robot_id!r}'s memory (this robot is "
            f"{own_robot!r}); ask with allow_other_robots to go where another robot was"
        )
    if now_ns is not None and episode.end_ns > now_ns:
        raise GoalRefusedError(
            f"episode {episode.id} ends {(episode.end_ns - now_ns) / NS_PER_SECOND:.1f} s after "
            f"the robot's current time ({_clock_hint(now_ns)}): its memory is on another clock"
        )
    pose = episode.pose
    if not episode.pose_valid:
        raise GoalRefusedError(
            f"episode {episode.id} has no valid pose (none was known when it was stored): "
            "there is no place to go to"
        )
    if not pose.is_finite() or _norm(_quaternion(pose)) == 0.0:
        raise GoalRefusedError(f"episode {episode.id} has an invalid stored pose: {pose}")
    if not pose.frame_id:
        raise GoalRefusedError(f"episode {episode.id}: its pose names no frame")
    if session_id is not None:
        check_session(episode, session_id, fixed_frames, navigation_frame)
    pose, facing_note = facing_pose(episode, facing)
    note = "; ".join(filter(None, [note, facing_note]))
    if pose.frame_id != navigation_frame:
        if transform is None:
            raise GoalRefusedError(
                f"episode {episode.id}'s pose is in {pose.frame_id!r}, navigation in "
                f"{navigation_frame!r}, and no transform between them is known"
            )
        if transform.frame_id != navigation_frame:
            raise GoalRefusedError(
                f"the transform given is in {transform.frame_id!r}, not in {navigation_frame!r}"
            )
        if not transform.is_finite() or _norm(_quaternion(transform)) == 0.0:
            raise GoalRefusedError(f"invalid transform {transform}")
        pose = compose(_unit(transform), pose)
    else:
        pose = _unit(pose)
    pose = standoff_pose(pose, standoff_m)
    return NavigationGoal(episode=episode, pose=pose, standoff_m=float(standoff_m), note=note)


def check_session(
    episode: EpisodeRecord, session_id: str, fixed_frames: Sequence[str], navigation_frame: str
) -> None:
    """Refuse an episode posed in a frame of another session.

    A frame such as ``odom`` starts at a new origin with each boot (or odometry restart):
    a pose in it from another session names a place that today's ``odom`` does not know,
    and today's ``map -> odom`` would send the robot somewhere else. Poses in a frame of
    ``fixed_frames`` (``map``) hold in every session.

    Args:
        episode: The episode (its ``pose.frame_id`` and ``session_id``).
        session_id: This session.
        fixed_frames: Frames whose origin is the same in every session.
        navigation_frame: The goal's frame, named in the refusal (the map frame needed).

    Raises:
        GoalRefusedError: The episode's frame is not fixed and its session is not this one
            (or unknown).

    """
    frame = episode.pose.frame_id
    if frame in fixed_frames or episode.session_id == session_id:
        return
    when = (
        f"in session {episode.session_id}"
        if episode.session_id
        else "in an unknown session (a recording, or a store older than sessions)"
    )
    fixed = ", ".join(fixed_frames) or "none"
    if navigation_frame in fixed_frames:
        needs = f"a pose in {navigation_frame!r} (store episodes in the map frame"
    else:  # the navigation frame is of the session too: no pose in it would do
        needs = f"a pose in a fixed frame ({navigation_frame!r} is not one"
    needs += f", fixed_frames: {fixed})"
    if not episode.session_id:  # a recording's own odom holds for its replay
        also = "" if navigation_frame == frame else f"--navigation-frame {frame} "
        needs += (
            f", or, for a recording whose {frame!r} is its own, {frame!r} declared fixed "
            f"({also}--fixed-frames {frame})"
        )
    raise GoalRefusedError(
        f"episode {episode.id} is posed in {frame!r}, a frame that starts anew each session, "
        f"and was stored {when}, not this one ({session_id}): its place is unknown today; "
        f"it needs {needs}"
    )


TransformOf = Callable[[str, int], tuple[Pose | None, str]]
"""``(frame, stamp_ns) -> (navigation_frame <- frame, note)``: a transform lookup (tf)."""


def plan_goal(
    episode: EpisodeRecord,
    navigation_frame: str,
    *,
    own_robot: str,
    now_ns: int,
    session_id: str,
    fixed_frames: Sequence[str],
    standoff_m: float,
    allow_other_robots: bool = False,
    transform_of: TransformOf | None = None,
    chosen: str = "",
    facing: str = "camera",
    trust: TrustRule | None = None,
) -> NavigationGoal:
    """The goal for a chosen episode (:func:`choose_episode`), or a refusal.

    A pose from another map or too uncertain (``trust``), or in a frame of another session,
    is refused before any transform is looked up (a refusal needs no wait for tf); then
    :func:`goal_from_episode`.

    Args:
        episode: The episode.
        navigation_frame: The goal's frame.
        own_robot: The asking robot's id.
        now_ns: The robot's current time, int ns.
        session_id: This session (:func:`~surprise_memory.memory.store.records.host_session_id`).
        fixed_frames: Frames whose origin is the same in every session.
        standoff_m: Stop this many metres short.
        allow_other_robots: Whether another robot's episode may be the goal.
        transform_of: Looks the transform of the episode's frame up, called only where
            that frame is not ``navigation_frame``; None = no lookup (such an episode is
            refused, as :func:`goal_from_episode` says).
        chosen: Why the episode was chosen from a partial answer (``choose_episode``'s
            second value); said in the goal's note.
        facing: Which way the goal faces (``camera`` or ``robot``: ``goal_facing``).
        trust: The map the robot is on, the largest uncertainty accepted and the override
            (:func:`~surprise_memory.memory.pose_trust.trust_refusal`); None = not checked.

    Returns:
        The goal (its note says an unknown or overridden trust).

    Raises:
        GoalRefusedError: As :func:`~surprise_memory.memory.pose_trust.trust_refusal`,
            :func:`check_session` and :func:`goal_from_episode` refuse.

    """
    frame = episode.pose.frame_id
    transform, note = None, _check_trust(episode, trust)
    if episode.pose_valid and frame:
        check_session(episode, session_id, fixed_frames, navigation_frame)
        if frame != navigation_frame and transform_of is not None:
            transform, tf_note = transform_of(frame, episode.stamp_ns)
            note = "; ".join(filter(None, [note, tf_note]))
    if chosen:
        note = "; ".join(filter(None, [note, f"the best of a partial answer: {chosen}"]))
    return goal_from_episode(
        episode,
        navigation_frame,
        transform=transform,
        standoff_m=standoff_m,
        own_robot=own_robot,
        allow_other_robots=allow_other_robots,
        now_ns=now_ns,
        note=note,
        session_id=session_id,
        fixed_frames=fixed_frames,
        facing=facing,
    )


def _check_trust(episode: EpisodeRecord, rule: TrustRule | None) -> str:
    """Refuse an untrusted pose (one line); else the note an unknown or overridden one needs."""
    if rule is None or not episode.pose_valid:
        return ""
    trust = episode.pose_trust
    reason = trust_refusal(trust, rule)
    if reason is None:
        unknown = trust.sigma_m is None or not trust.map_id
        return f"pose {trust.describe()}" if unknown else ""
    if not rule.override:
        override = "(override: --trust-pose / trust_pose)"
        raise GoalRefusedError(f"episode {episode.id} gets no goal: {reason} {override}")
    return f"pose trusted anyway (override): {reason}"


def facing_pose(episode: EpisodeRecord, facing: str = "camera") -> tuple[Pose, str]:
    """The episode's pose turned to face where its camera looked, and what was done.

    The camera's viewing direction is its optical axis projected on the ground of the
    episode pose's frame; the pose keeps the robot's position and gets that heading,
    level (a navigation goal is planar). Where the camera's pose is unknown (no tf for
    it and no mounting yaw, a store older than cameras), in another frame than the
    robot's, or looking straight down, the robot's own orientation stays.

    Args:
        episode: The episode (its valid ``pose`` and its ``camera``).
        facing: ``camera``, or ``robot`` (the robot's orientation, unchanged).

    Returns:
        The pose, and a note for the goal ("" when the robot's heading was asked for, or
        the one unnamed camera's direction is unknown).

    Raises:
        GoalRefusedError: ``facing`` is neither.

    """
    if facing not in ("camera", "robot"):
        raise GoalRefusedError(f"facing={facing!r}: camera or robot")
    pose, camera = episode.pose, episode.camera
    if facing == "robot":
        return pose, ""
    which = f"camera {camera.name!r}" if camera.name else "the camera"
    if camera.pose is None or camera.pose.frame_id != pose.frame_id or camera.yaw is None:
        # said of a named camera only: a one-camera robot's goals read as they always did
        unknown = f"{which}'s direction is unknown: facing the robot's heading"
        return pose, unknown if camera.name else ""
    heading = yaw_pose(pose.x, pose.y, pose.z, camera.yaw, pose.frame_id)
    return heading, f"facing where {which} looked"


def standoff_pose(pose: Pose, distance_m: float) -> Pose:
    """The pose ``distance_m`` metres back along its horizontal heading, same orientation.

    The heading is the pose's forward (x) axis projected on the horizontal plane of its
    frame, so a pitched or rolled camera still backs off level; the orientation is kept:
    the robot faces where it faced.

    Raises:
        GoalRefusedError: ``distance_m`` is negative or not finite, or the forward axis is
            vertical (no heading to back off along).

    """
    if not math.isfinite(distance_m) or distance_m < 0.0:
        raise GoalRefusedError(f"standoff={distance_m!r}: must be a finite number of metres >= 0")
    if distance_m == 0.0:
        return pose
    fx, fy, _ = compose(Pose(qx=pose.qx, qy=pose.qy, qz=pose.qz, qw=pose.qw), Pose(1.0)).position
    horizontal = math.hypot(fx, fy)
    if horizontal < _MIN_HEADING:
        raise GoalRefusedError(
            "the robot's forward axis was vertical at the episode: no heading to stand off along"
        )
    return Pose(
        pose.x - distance_m * fx / horizontal,
        pose.y - distance_m * fy / horizontal,
        pose.z,
        pose.qx,
        pose.qy,
        pose.qz,
        pose.qw,
        pose.frame_id,
    )


def _quaternion(pose: Pose) -> tuple[float, float, float, float]:
    return (pose.qx, pose.qy, pose.qz, pose.qw)


def _norm(q: tuple[float, float, float, float]) -> float:
    return math.sqrt(sum(c * c for c in q))


def _unit(pose: Pose) -> Pose:
    n = _norm(_quaternion(pose))
    if n == 1.0:
        return pose
    qx, qy, qz, qw = (c / n for c in _quaternion(pose))
    return Pose(pose.x, pose.y, pose.z, qx, qy, qz, qw, pose.frame_id)
