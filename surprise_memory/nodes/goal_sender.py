"""A navigation goal from a host node to Nav2, followed to its outcome.

* :class:`GoalSender`: sends a ``geometry_msgs/PoseStamped`` goal through Nav2's
  ``NavigateToPose`` action (``goal_action_type``, where it is installed) or publishes it
  on the goal topic (what RViz's goal tool does) once Nav2's ``bt_navigator`` subscribes
  it, and follows it in a :class:`~surprise_memory.memory.navigation_goals.GoalBook`: its
  id, state, feedback and outcome; one goal at a time (a new one preempts ours); a goal
  cancelled by id. A goal that reaches no navigator is refused ("not sent"); one the
  navigator has not answered within the timeout is "pending", and cancelled at once if
  the navigator accepts it late: never reported as not sent while it may run. The
  action's status topic also tells of an acceptance whose answer was lost on the way
  (DDS drops a service response to a client its navigator has not discovered yet, as
  under load or over a slow link): such a goal is followed (or cancelled) as if answered.

It takes a host node (the memory node, or the CLI's short-lived node) whose executor spins
in another thread than the caller's: it waits with deadlines, from any thread. The tf
lookup a goal may need first is :mod:`surprise_memory.nodes.tf_lookup`.
"""

from __future__ import annotations

import importlib
import threading
import time
import uuid
from typing import Any

from geometry_msgs.msg import PoseStamped
from rclpy.duration import Duration

from surprise_memory.config import NavigationConfig
from surprise_memory.errors import ConfigError
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.navigation_goals import CANCELLED_STATES, GoalBook, GoalStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.nodes.messages import pose_from_msg, pose_to_msg, time_to_ns
from surprise_memory.nodes.qos import GOAL

__all__ = [
    "NAV2_ACTION_TYPE",
    "GoalSender",
    "action_type",
    "goal_msg",
    "navigate_to_pose_action",
]

_POLL_S = 0.02
NAV2_ACTION_TYPE = "nav2_msgs/action/NavigateToPose"
"""Nav2's action type, the default of ``goal_action_type``."""

# action_msgs/GoalStatus codes of a result, and CancelGoal's return codes (1, ERROR_REJECTED,
# is a refusal, as is 0 with our goal left out of goals_canceling: see _cancel_verdict)
_RESULT_STATES = {4: "succeeded", 5: "canceled", 6: "aborted"}
_CANCEL_UNKNOWN_GOAL, _CANCEL_TERMINATED = 2, 3


def action_type(name: str) -> Any:
    """The action type ``package/action/Name``, or None where it is not installed."""
    package, _, type_name = name.partition("/action/")
    try:
        return getattr(importlib.import_module(f"{package}.action"), type_name)
    except (ImportError, AttributeError, ValueError):
        return None


def navigate_to_pose_action() -> Any:
    """Nav2's ``NavigateToPose`` action type, or None where ``nav2_msgs`` is not installed."""
    return action_type(NAV2_ACTION_TYPE)


def _seconds(duration: Any) -> float:
    return float(duration.sec) + float(duration.nanosec) * 1e-9


def _cancel_verdict(gid: str, future: Any) -> str:
    """What the navigator said to our cancel of goal ``gid``: a key of :data:`_CANCEL_SAID`."""
    response = future.result() if future.exception() is None else None
    if response is None:
        return "failed"
    ours = uuid.UUID(gid).bytes
    if any(bytes(g.goal_id.uuid) == ours for g in response.goals_canceling):
        return "accepted"
    code = int(response.return_code)
    if code == _CANCEL_TERMINATED:
        return "ended"
    if code == _CANCEL_UNKNOWN_GOAL:
        return "unknown goal"
    return "refused"  # ERROR_REJECTED (rclcpp), or return code 0 without our goal (rclpy)


_CANCEL_SAID = {
    "accepted": "the navigator accepted the cancel",
    "ended": "the navigator says the goal has ended (its result tells how)",
    "unknown goal": "the navigator does not know the goal: not confirmed",
    "refused": "the navigator refused the cancel",
    "failed": "the cancel request failed: not confirmed",
}
"""The goal's message after the navigator answered a cancel, by :func:`_cancel_verdict`."""


def goal_msg(node: Any, pose: Pose) -> PoseStamped:
    """A goal pose as Nav2 takes it: in its frame, stamped now by the node's clock (as RViz)."""
    msg = PoseStamped(pose=pose_to_msg(pose))
    msg.header.frame_id = pose.frame_id
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


class GoalSender:
    """Sends goals to Nav2 (the action, or the goal topic) and follows them.

    Long class: each goal's whole life on both transports (send, a late answer, feedback,
    result, cancel, preemption) goes through one goal book under one lock; the topic path
    apart in a class of its own is the next split.

    Every goal gets an id (the action goal's UUID, chosen here; a made one on the topic)
    and a :class:`~surprise_memory.memory.navigation_goals.GoalStatus` in :attr:`book`,
    updated from the navigator's answers, feedback and result. One goal at a time: when a
    goal is accepted (or acknowledged on the topic), the earlier goal that may still run
    is marked "preempted by <id>" and, through the action, cancelled (Nav2 preempts by
    itself; a navigator that queues would not).

    Args:
        node: The host node.
        config: ``goal_transport``, ``goal_action``, ``goal_action_type``, ``goal_topic``,
            ``navigator_node``, ``goal_timeout_seconds`` (the wait for a late cancel).
        callback_group: Of the action client (its answers must be taken by another
            executor thread than the one waiting in :meth:`send`).
        book: Where the goals are followed (a new one by default).

    Raises:
        ConfigError: ``goal_transport: action`` where the action type is not installed.

    """

    def __init__(
        self,
        node: Any,
        config: NavigationConfig,
        callback_group: Any = None,
        book: GoalBook | None = None,
    ) -> None:
        kind = config.goal_action_type
        action = None if config.goal_transport == "topic" else action_type(kind)
        if action is None and config.goal_transport == "action":
            raise ConfigError(
                f"goal_transport=action: the action type {kind} is not installed (install "
                "Nav2, or use goal_transport topic or auto)"
            )
        self.book = book if book is not None else GoalBook()
        """The goals sent, and where each stands."""
        self._node = node
        self._action: Any = action
        self._kind = kind.rsplit("/", 1)[-1]
        self._action_name = ""
        self._client: Any = None
        self._status_sub: Any = None
        self._publisher: Any = None
        self._navigator = config.navigator_node
        self._late_wait_s = config.goal_timeout_seconds
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}  # accepted goals not finished: id -> handle
        self._waiting: dict[str, str] = {}  # sent, not answered: id -> "waiting" | "late"
        self._answered: dict[str, threading.Event] = {}  # id -> set once answered, either way
        if action is not None:
            from action_msgs.msg import GoalStatusArray
            from rclpy.action.client import ActionClient
            from rclpy.qos import qos_profile_action_status_default

            self._client = ActionClient(
                node, action, config.goal_action, callback_group=callback_group
            )
            self._action_name = node.resolve_topic_name(config.goal_action)
            # the navigator's list of the goals it holds: an acceptance whose answer was lost
            self._status_sub = node.create_subscription(
                GoalStatusArray,
                f"{self._action_name}/_action/status",
                self._on_status,
                qos_profile_action_status_default,
                callback_group=callback_group,
            )
        else:
            self._publisher = node.create_publisher(PoseStamped, config.goal_topic, GOAL)
        self.via = (
            f"action {self._action_name}"
            if self._client is not None
            else f"topic {self._publisher.topic_name}"
        )
        """How goals go: ``action /navigate_to_pose`` or ``topic /goal_pose``."""

    # ------------------------------------------------------------------ sending
    def send(self, goal: PoseStamped, timeout_s: float, episode_id: str = "") -> GoalStatus:
        """Send one goal; returns its status when the navigator answered or the time ran out.

        Through the action: waits for the server, then for its answer: ``running``
        (accepted), ``rejected``, or ``pending`` (no answer within ``timeout_s``: the goal
        is followed on, and cancelled at once if the navigator accepts it late). On the
        topic: waits for ``navigator_node`` to subscribe, then for the subscribers to
        acknowledge the message (reliable QoS): ``sent``.

        Raises:
            GoalRefusedError: Nothing was sent: no action server, or no navigator on the
                topic, within ``timeout_s``.

        """
        status = GoalStatus(
            goal_id=str(uuid.uuid4()),
            episode_id=episode_id,
            sent_via=self.via,
            goal=pose_from_msg(goal.pose, goal.header.frame_id),
            sent_ns=time_to_ns(goal.header.stamp),
        )
        if self._client is not None:
            return self._send_action(goal, status, timeout_s)
        return self._send_topic(goal, status, timeout_s)

    def _navigator_on_topic(self) -> tuple[bool, list[str]]:
        """Whether ``navigator_node`` subscribes the goal topic, and who does."""
        names = []
        for info in self._node.get_subscriptions_info_by_topic(self._publisher.topic_name):
            ns = info.node_namespace.rstrip("/")
            names.append(f"{ns}/{info.node_name}")
        want = self._navigator
        found = any(n == want or n.rsplit("/", 1)[-1] == want for n in names)
        return found, sorted(set(names))

    def _send_topic(self, goal: PoseStamped, status: GoalStatus, timeout_s: float) -> GoalStatus:
        topic = self._publisher.topic_name
        deadline = time.monotonic() + timeout_s
        while not (found := self._navigator_on_topic())[0]:
            if time.monotonic() >= deadline:
                others = ", ".join(found[1]) or "none"
                raise GoalRefusedError(
                    f"the navigator {self._navigator!r} does not subscribe {topic} within "
                    f"{timeout_s:g} s (subscribers: {others}): is Nav2 running (same "
                    "ROS_DOMAIN_ID; navigator_node)? Goal not sent"
                )
            time.sleep(_POLL_S)
        self.book.add(status)
        self._publisher.publish(goal)
        left = max(deadline - time.monotonic(), 0.5)
        if not self._publisher.wait_for_all_acked(Duration(seconds=left)):
            # published: the navigator may have it; nothing on a topic says so
            return self._preempting(
                status.goal_id,
                state="unknown",
                message=f"published on {topic}, not acknowledged within {timeout_s:g} s: "
                "the navigator may or may not have it (a topic cannot be cancelled)",
            )
        return self._preempting(
            status.goal_id,
            state="sent",
            message=f"sent on {topic} to {self._navigator} (a topic reports no outcome)",
        )

    def _preempting(self, goal_id: str, **changes: Any) -> GoalStatus:
        """Set the goal's state; any earlier goal that may still run is preempted by it."""
        now = self.book.update(goal_id, force=True, **changes)
        assert now is not None
        for earlier in self.book.preempt_others(goal_id):
            with self._lock:
                handle = self._handles.pop(earlier.goal_id, None)
                if self._waiting.get(earlier.goal_id) == "waiting":
                    self._waiting[earlier.goal_id] = "late"  # cancelled if accepted late
            if handle is not None:  # a navigator that queues would run it next
                handle.cancel_goal_async()
        return now

    def _send_action(self, goal: PoseStamped, status: GoalStatus, timeout_s: float) -> GoalStatus:
        from unique_identifier_msgs.msg import UUID

        name = self._action_name
        start = time.monotonic()
        if not self._client.wait_for_server(timeout_sec=timeout_s):
            raise GoalRefusedError(
                f"no {self._kind} server on {name} within {timeout_s:g} s: is Nav2 running? "
                "Goal not sent"
            )
        gid = status.goal_id
        request = self._action.Goal()
        request.pose = goal
        answered = threading.Event()
        self.book.add(status)
        with self._lock:
            self._waiting[gid] = "waiting"
            self._answered[gid] = answered
        future = self._client.send_goal_async(
            request,
            feedback_callback=lambda msg: self._on_feedback(gid, msg),
            goal_uuid=UUID(uuid=list(uuid.UUID(gid).bytes)),
        )
        future.add_done_callback(lambda f: self._on_answer(gid, f))
        answered.wait(max(timeout_s - (time.monotonic() - start), 0.5))
        with self._lock:
            late = self._waiting.get(gid) == "waiting"
            if late:
                self._waiting[gid] = "late"
        if late:
            now = self.book.update(
                gid,
                message=f"the navigator ({name}) did not answer within {timeout_s:g} s; if it "
                "accepts later, the goal is cancelled at once (navigation_status tells)",
            )
            assert now is not None
            return now
        now = self.book.get(gid)
        assert now is not None
        return now

    # ------------------------------------------------------------------ the navigator's answers
    def _on_answer(self, gid: str, future: Any) -> None:
        """The goal's answer (executor thread): accepted, rejected, or failed."""
        handle: Any = future.result() if future.exception() is None else None
        if handle is None:
            self._answer(gid, None, f"failed: {future.exception()}")
        else:
            self._answer(gid, handle, "" if handle.accepted else "rejected the goal")

    def _on_status(self, msg: Any) -> None:
        """The navigator's list of its goals (executor thread).

        One of ours there was accepted, answered or not (a rejected goal is never listed).
        """
        from rclpy.action.client import ClientGoalHandle

        for entry in msg.status_list:
            goal_id = entry.goal_info.goal_id
            gid = str(uuid.UUID(bytes=bytes(goal_id.uuid)))
            with self._lock:
                unanswered = gid in self._waiting
            if unanswered:
                response = self._action.Impl.SendGoalService.Response(
                    accepted=True, stamp=entry.goal_info.stamp
                )
                handle = ClientGoalHandle(self._client, goal_id, response)
                self._answer(gid, handle, "", seen="its answer lost, seen on its status topic")

    def _answer(self, gid: str, handle: Any, refused: str, seen: str = "") -> None:
        """Take the navigator's answer once, from its response or its status topic."""
        with self._lock:
            waited = self._waiting.pop(gid, None)
            if waited is None:
                return  # answered already: the other way told first
            answered = self._answered.pop(gid)
            if not refused:
                self._handles[gid] = handle
        how = f" ({seen})" if seen else ""
        if refused:
            self.book.update(gid, state="rejected", message=f"the navigator {refused}")
        elif waited == "late":
            self.book.update(gid, force=True, message=f"accepted late{how}: cancelling it")
            self._cancel_late(gid, handle, how)
        else:
            self._preempting(gid, state="running", message=f"accepted by the navigator{how}")
        if not refused:
            handle.get_result_async().add_done_callback(lambda f: self._on_result(gid, f))
        answered.set()

    def _cancel_late(self, gid: str, handle: Any, how: str) -> None:
        """Cancel a goal accepted after its caller was answered; unknown if not acknowledged."""
        acknowledged = threading.Event()

        def on_cancel(future: Any) -> None:
            if _cancel_verdict(gid, future) != "accepted":
                return  # the timer below says what that means
            acknowledged.set()
            late = f"accepted after the answer's timeout{how}; cancelled at once, acknowledged"
            now = self.book.get(gid)
            if now is not None and now.state == "preempted":  # its caller knows that
                self.book.update(gid, force=True, message=late)
                return
            self.book.update(
                gid,
                force=True,
                state="cancelled_after_late_acceptance",
                message=f"the navigator {late}",
            )

        handle.cancel_goal_async().add_done_callback(on_cancel)

        def unacknowledged() -> None:
            if not acknowledged.is_set():
                self.book.update(
                    gid,
                    force=True,
                    state="unknown",
                    message="the navigator accepted it late and did not acknowledge its cancel "
                    f"within {self._late_wait_s:g} s: it may run; cancel it on the navigator",
                )

        timer = threading.Timer(self._late_wait_s, unacknowledged)
        timer.daemon = True
        timer.start()

    def _on_feedback(self, gid: str, msg: Any) -> None:
        fb = msg.feedback
        changes: dict[str, Any] = {}
        if hasattr(fb, "distance_remaining"):
            changes["distance_remaining_m"] = float(fb.distance_remaining)
        if hasattr(fb, "estimated_time_remaining"):
            changes["eta_s"] = _seconds(fb.estimated_time_remaining)
        if hasattr(fb, "navigation_time"):
            changes["navigation_time_s"] = _seconds(fb.navigation_time)
        if hasattr(fb, "number_of_recoveries"):
            changes["recoveries"] = int(fb.number_of_recoveries)
        self.book.update(gid, **changes)

    def _on_result(self, gid: str, future: Any) -> None:
        with self._lock:
            self._handles.pop(gid, None)
        response = future.result() if future.exception() is None else None
        if response is None:
            self.book.update(gid, state="unknown", message="no result from the navigator")
            return
        state = _RESULT_STATES.get(int(response.status), "unknown")
        detail = getattr(response.result, "error_msg", "")
        code = getattr(response.result, "error_code", 0)
        message = "the navigator's result"
        if detail or code:
            message += f": error {code} {detail}".rstrip()
        now = self.book.get(gid)
        # "unknown" was what could be said without a result; a result says more
        self.book.update(
            gid, force=now is not None and now.state == "unknown", state=state, message=message
        )

    # ------------------------------------------------------------------ cancelling
    def cancel(self, goal_id: str, timeout_s: float) -> tuple[bool, GoalStatus]:
        """Cancel one of our goals: by id, or the current one ("").

        A cancel counts only when the navigator says so for this goal: it is in the
        answer's ``goals_canceling``, or its result comes back CANCELED. rclcpp's server
        (Nav2) refuses with ``ERROR_REJECTED``; rclpy's leaves the goal out of
        ``goals_canceling`` with return code 0: both are a refusal. Otherwise the goal's
        message says what the navigator said (refused, no answer within ``timeout_s``, an
        unknown goal) and its state stays what the navigator reports; an answer that comes
        after ``timeout_s`` still updates the message.

        Returns:
            Whether the navigator confirmed the cancel (or the goal had ended: nothing
            runs), and the goal's status after it (its result waited for up to
            ``timeout_s`` once the cancel is confirmed).

        Raises:
            GoalRefusedError: No goal of ours has that id (or none is current); a goal on
                the topic (no cancel there).

        """
        status = self.book.get(goal_id) if goal_id else self.book.active()
        if status is None:
            which = f"no goal {goal_id} was sent by this node" if goal_id else "no goal runs"
            raise GoalRefusedError(f"{which}: nothing to cancel")
        gid = status.goal_id
        if status.done:
            return True, status
        if self._client is None:
            raise GoalRefusedError(
                f"goal {gid} went on {self._publisher.topic_name}: a topic has no cancel (use "
                "goal_transport action, or stop the robot through Nav2)"
            )
        with self._lock:
            handle = self._handles.get(gid)
            if handle is None and self._waiting.get(gid) == "waiting":
                self._waiting[gid] = "late"  # not answered yet: cancelled once accepted
        if handle is None:
            now = self.book.update(
                gid,
                message="cancel asked before the navigator answered the goal: not confirmed; "
                "cancelled when it accepts",
            )
            assert now is not None
            return False, now
        answered = threading.Event()
        verdicts: list[str] = []

        def on_answer(future: Any) -> None:
            verdict = _cancel_verdict(gid, future)
            with self._lock:  # one message: the answer's, or the caller's "no answer"
                verdicts.append(verdict)
                self.book.update(gid, message=_CANCEL_SAID[verdict])
            answered.set()

        handle.cancel_goal_async().add_done_callback(on_answer)
        answered.wait(timeout_s)
        with self._lock:
            verdict = verdicts[0] if verdicts else ""
            if not verdict:
                self.book.update(
                    gid,
                    message=f"the navigator did not answer the cancel within {timeout_s:g} s: "
                    "not confirmed",
                )
        if verdict in ("accepted", "ended"):  # the result follows
            self.book.wait(gid, timeout_s)
        now = self.book.get(gid) or status  # (forgotten only after 64 newer goals)
        confirmed = verdict == "accepted" or now.state in CANCELLED_STATES
        return confirmed or (verdict == "ended" and now.done), now

    def destroy(self) -> None:
        """Remove the action client (not in the node's lists) and the status subscription."""
        if self._client is not None:
            self._client.destroy()
            self._client = None
            self._node.destroy_subscription(self._status_sub)
