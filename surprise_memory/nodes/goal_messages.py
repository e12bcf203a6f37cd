"""A goal's status as a message and back (``NavigationGoalStatus``).

The memory node answers ``navigation_status`` and ``cancel_navigation`` with it; the
clients (:mod:`surprise_memory.agents.ros_navigation`, ``surprise-memory goto``) read it
back into a :class:`~surprise_memory.memory.navigation_goals.GoalStatus`.
"""

from __future__ import annotations

import math

from builtin_interfaces.msg import Duration
from geometry_msgs.msg import PoseStamped

from surprise_memory.memory.navigation_goals import GOAL_STATES, GoalStatus
from surprise_memory.msg import NavigationGoalStatus
from surprise_memory.nodes.messages import ns_to_time, pose_from_msg, pose_to_msg, time_to_ns
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["goal_status_from_msg", "goal_status_to_msg"]


def _duration(seconds: float) -> Duration:
    if not math.isfinite(seconds) or seconds < 0:
        return Duration()
    ns = round(seconds * NS_PER_SECOND)
    return Duration(sec=ns // NS_PER_SECOND, nanosec=ns % NS_PER_SECOND)


def _seconds(duration: Duration, known: bool) -> float:
    if not known:
        return math.nan
    return float(duration.sec) + float(duration.nanosec) / NS_PER_SECOND


def goal_status_to_msg(status: GoalStatus | None) -> NavigationGoalStatus:
    """The status as a message (an empty one, ``goal_id`` "", for None)."""
    msg = NavigationGoalStatus()
    msg.distance_remaining = math.nan
    if status is None:
        return msg
    msg.goal_id = status.goal_id
    msg.episode_id = status.episode_id
    msg.sent_via = status.sent_via
    msg.state = status.state
    msg.preempted_by = status.preempted_by
    msg.done = status.done
    msg.message = status.message
    msg.distance_remaining = float(status.distance_remaining_m)
    msg.estimated_time_remaining = _duration(status.eta_s)
    msg.navigation_time = _duration(status.navigation_time_s)
    msg.number_of_recoveries = max(min(status.recoveries, 32767), -32768)
    if status.goal is not None:
        msg.goal = PoseStamped(pose=pose_to_msg(status.goal))
        msg.goal.header.frame_id = status.goal.frame_id
        msg.goal.header.stamp = ns_to_time(max(status.sent_ns, 0))
    msg.sent = ns_to_time(max(status.sent_ns, 0))
    return msg


def goal_status_from_msg(msg: NavigationGoalStatus) -> GoalStatus | None:
    """The message as a status (None for an empty one or an unknown state)."""
    if not msg.goal_id or msg.state not in GOAL_STATES:
        return None
    feedback = math.isfinite(msg.distance_remaining)
    return GoalStatus(
        goal_id=msg.goal_id,
        episode_id=msg.episode_id,
        sent_via=msg.sent_via,
        state=msg.state,
        preempted_by=msg.preempted_by,
        message=msg.message,
        distance_remaining_m=float(msg.distance_remaining),
        eta_s=_seconds(msg.estimated_time_remaining, feedback),
        navigation_time_s=_seconds(msg.navigation_time, feedback),
        recoveries=int(msg.number_of_recoveries),
        goal=pose_from_msg(msg.goal.pose, frame) if (frame := msg.goal.header.frame_id) else None,
        sent_ns=time_to_ns(msg.sent),
    )
