"""A navigation goal from a host node to Nav2, followed to its outcome.

* :class:`GoalSender`: sends a ``geometry_msgs/PoseStamped`` goal through Nav2's
  ``NavigateToPose`` action (``goal_action_type``, where it is installed) or publishes it
  on the goal topic (what RViz's goal tool does) once Nav2's ``bt_navigator`` subscribes
  it, and follows it in a :class:`~surprise_memory.memory.navigation_goals.GoalBook`: its
  id, state, feedback and outcome; one goal at a time (a new one preempts ours); a goal
  cancelled by id. A goal that reaches no navigator is refused ("not sent"); one the
  navigator has not answered within the timeout is "pending", and the navigator is asked
  at once to cancel it if it accepts late: never reported as not sent while it may run.
  The action's status topic lists an accepted goal too, usually just before the answer
  comes (rclpy publishes it first); where the answer does not come at all (DDS drops a
  service response to a client its navigator has not discovered yet, as under load or
  over a slow link), the goal is followed (or cancelled) as listed, and its message says
  that its answer did not come.

Its parts, a file each: the answers, taken once from the response or the status topic
(:mod:`surprise_memory.nodes.goal_answers`); the cancels and what the navigator said to
each (:mod:`surprise_memory.nodes.goal_cancels`); the goal topic
(:mod:`surprise_memory.nodes.goal_topic`). It takes a host node (the memory node, or the
CLI's short-lived node) whose executor spins in another thread than the caller's: it
waits with deadlines, from any thread. The tf lookup a goal may need first is
:mod:`surprise_memory.nodes.tf_lookup`; before a goal goes through the action, the
navigator must have answered a request of this client
(:mod:`surprise_memory.nodes.goal_handshake`: DDS drops a request its server has not
discovered yet).
"""

from __future__ import annotations

import importlib
import time
import uuid
from typing import Any

from geometry_msgs.msg import PoseStamped

from surprise_memory.config import NavigationConfig
from surprise_memory.errors import ConfigError
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.navigation_goals import CANCELLED_STATES, GoalBook, GoalStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.nodes.goal_answers import GoalAnswers
from surprise_memory.nodes.goal_cancels import GoalCancels
from surprise_memory.nodes.goal_handshake import reach_navigator
from surprise_memory.nodes.goal_topic import GoalTopic
from surprise_memory.nodes.messages import pose_from_msg, pose_to_msg, time_to_ns

__all__ = [
    "NAV2_ACTION_TYPE",
    "GoalSender",
    "action_type",
    "goal_msg",
    "navigate_to_pose_action",
]

NAV2_ACTION_TYPE = "nav2_msgs/action/NavigateToPose"
"""Nav2's action type, the default of ``goal_action_type``."""

# action_msgs/GoalStatus codes of a result
_RESULT_STATES = {4: "succeeded", 5: "canceled", 6: "aborted"}
_IF_LATE = "if it accepts later, the navigator is asked at once to cancel the goal"


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


def _progress(feedback: Any) -> dict[str, Any]:
    """The goal's progress in a NavigateToPose feedback (the fields it has), as book fields."""
    changes: dict[str, Any] = {}
    if hasattr(feedback, "distance_remaining"):
        changes["distance_remaining_m"] = float(feedback.distance_remaining)
    if hasattr(feedback, "estimated_time_remaining"):
        changes["eta_s"] = _seconds(feedback.estimated_time_remaining)
    if hasattr(feedback, "navigation_time"):
        changes["navigation_time_s"] = _seconds(feedback.navigation_time)
    if hasattr(feedback, "number_of_recoveries"):
        changes["recoveries"] = int(feedback.number_of_recoveries)
    return changes


def goal_msg(node: Any, pose: Pose) -> PoseStamped:
    """A goal pose as Nav2 takes it: in its frame, stamped now by the node's clock (as RViz)."""
    msg = PoseStamped(pose=pose_to_msg(pose))
    msg.header.frame_id = pose.frame_id
    msg.header.stamp = node.get_clock().now().to_msg()
    return msg


class GoalSender:
    """Sends goals to Nav2 (the action, or the goal topic) and follows them.

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
        self._topic: GoalTopic | None = None
        self._cancels = GoalCancels(self.book, config.goal_timeout_seconds)
        self._answers = GoalAnswers(self.book, self._accepted)
        if action is not None:
            from action_msgs.msg import GoalStatusArray
            from rclpy.action.client import ActionClient
            from rclpy.qos import qos_profile_action_status_default

            self._client = ActionClient(
                node, action, config.goal_action, callback_group=callback_group
            )
            self._action_name = node.resolve_topic_name(config.goal_action)
            # the navigator's list of the goals it holds: an acceptance whose answer is lost
            self._status_sub = node.create_subscription(
                GoalStatusArray,
                f"{self._action_name}/_action/status",
                self._on_status,
                qos_profile_action_status_default,
                callback_group=callback_group,
            )
        else:
            self._topic = GoalTopic(node, config.goal_topic, config.navigator_node)
        self.via = (
            f"action {self._action_name}"
            if self._topic is None
            else f"topic {self._topic.topic_name}"
        )
        """How goals go: ``action /navigate_to_pose`` or ``topic /goal_pose``."""

    # ------------------------------------------------------------------ sending
    def send(
        self, goal: PoseStamped, timeout_s: float, episode_id: str = "", if_late: str = _IF_LATE
    ) -> GoalStatus:
        """Send one goal; returns its status when the navigator answered or the time ran out.

        Through the action: waits for the server and for it to answer a first request
        (:func:`~surprise_memory.nodes.goal_handshake.reach_navigator`), then for the
        goal's answer: ``running`` (accepted), ``rejected``, or ``pending`` (no answer
        within ``timeout_s``: the goal is followed on, and the navigator asked at once to
        cancel it if it accepts late).
        On the topic: waits for ``navigator_node`` to subscribe, then for the subscribers
        to acknowledge the message (reliable QoS): ``sent``.

        Args:
            goal: The goal pose (:func:`goal_msg`).
            timeout_s: The wait for the navigator, then for its answer.
            episode_id: The episode it is for.
            if_late: What a ``pending`` goal's message says happens to a late acceptance
                (who follows the goal: the node, or a process that ends).

        Raises:
            GoalRefusedError: Nothing was sent: no action server, or one that answered
                nothing, or no navigator on the topic, within ``timeout_s``.

        """
        status = GoalStatus(
            goal_id=str(uuid.uuid4()),
            episode_id=episode_id,
            sent_via=self.via,
            goal=pose_from_msg(goal.pose, goal.header.frame_id),
            sent_ns=time_to_ns(goal.header.stamp),
        )
        if self._topic is None:
            return self._send_action(goal, status, timeout_s, if_late)
        return self._send_topic(goal, status, timeout_s)

    def _send_topic(self, goal: PoseStamped, status: GoalStatus, timeout_s: float) -> GoalStatus:
        topic = self._topic
        assert topic is not None
        deadline = time.monotonic() + timeout_s
        topic.wait_for_navigator(timeout_s)
        self.book.add(status)
        state, message = topic.publish(goal, max(deadline - time.monotonic(), 0.5), timeout_s)
        return self._preempting(status.goal_id, state=state, message=message)

    def _preempting(self, goal_id: str, **changes: Any) -> GoalStatus:
        """Set the goal's state; any earlier goal that may still run is preempted by it."""
        now = self.book.update(goal_id, force=True, **changes)
        assert now is not None
        for earlier in self.book.preempt_others(goal_id):
            handle = self._answers.finished(earlier.goal_id)
            self._answers.move_on(earlier.goal_id, f"accepted after goal {goal_id} took its place")
            if handle is not None:  # a navigator that queues would run it next
                self._cancels.preempted(earlier.goal_id, handle)
        return now

    def _send_action(
        self, goal: PoseStamped, status: GoalStatus, timeout_s: float, if_late: str
    ) -> GoalStatus:
        from unique_identifier_msgs.msg import UUID

        name = self._action_name
        start = time.monotonic()
        reach_navigator(self._client, self._action, f"{self._kind} server on {name}", timeout_s)
        gid = status.goal_id
        request = self._action.Goal()
        request.pose = goal
        self.book.add(status)
        answered = self._answers.expect(gid)
        future = self._client.send_goal_async(
            request,
            feedback_callback=lambda msg: self.book.update(gid, **_progress(msg.feedback)),
            goal_uuid=UUID(uuid=list(uuid.UUID(gid).bytes)),
        )
        future.add_done_callback(lambda f: self._on_answer(gid, f))
        answered.wait(max(timeout_s - (time.monotonic() - start), 0.5))
        pending = f"the navigator ({name}) did not answer within {timeout_s:g} s; {if_late}"
        self._answers.end_wait(gid, timeout_s, pending)
        now = self.book.get(gid)
        assert now is not None
        return now

    def settle(self, goal_id: str, timeout_s: float) -> GoalStatus | None:
        """Wait up to ``timeout_s`` for the navigator to answer the goal, and its cancel.

        Until the goal is answered and, if it was accepted late, the navigator has answered
        the cancel asked then (or the goal is done).

        Returns:
            The goal as it is then (None = not known).

        """
        deadline = time.monotonic() + timeout_s
        while True:
            # answering first, then the book: an answer or a verdict is written to the book
            # before it stops counting as awaited, so the book read after it holds the outcome
            answering = self._answers.unanswered(goal_id) or self._cancels.open(goal_id)
            now = self.book.get(goal_id)
            if now is None or now.done or not answering:
                return now
            left = deadline - time.monotonic()
            if left <= 0:
                return now
            self.book.wait(goal_id, min(left, 0.1), until_done=False)

    # ------------------------------------------------------------------ the navigator's answers
    def _on_answer(self, gid: str, future: Any) -> None:
        """The goal's answer (executor thread): accepted, rejected, or failed."""
        handle: Any = future.result() if future.exception() is None else None
        if handle is None:
            self._answers.response(gid, None, f"failed: {future.exception()}")
        else:
            self._answers.response(gid, handle, "" if handle.accepted else "rejected the goal")

    def _on_status(self, msg: Any) -> None:
        """The navigator's list of its goals (executor thread).

        One of ours there was accepted, answered or not (a rejected goal is never listed).
        """
        from rclpy.action.client import ClientGoalHandle

        for entry in msg.status_list:
            goal_id = entry.goal_info.goal_id

            def handle(goal_id: Any = goal_id, stamp: Any = entry.goal_info.stamp) -> Any:
                response = self._action.Impl.SendGoalService.Response(accepted=True, stamp=stamp)
                return ClientGoalHandle(self._client, goal_id, response)

            self._answers.listed(str(uuid.UUID(bytes=bytes(goal_id.uuid))), handle)

    def _accepted(self, gid: str, handle: Any, why: str, message: str) -> None:
        """An acceptance, taken once (the answers' lock held): followed, or its cancel asked."""
        if why:  # its caller has moved on
            now = self.book.get(gid)
            pending = now is not None and now.state == "pending"
            self.book.update(
                gid,
                force=True,
                message=f"{why}: cancelling it",
                **({"state": "running"} if pending else {}),  # (a preempted one stays)
            )
            self._cancels.late(gid, handle, why)
        else:
            self._preempting(gid, state="running", message=message)
        handle.get_result_async().add_done_callback(lambda f: self._on_result(gid, f))

    def _on_result(self, gid: str, future: Any) -> None:
        self._answers.finished(gid)
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
        self.book.update(gid, state=state, message=message)

    # ------------------------------------------------------------------ cancelling
    def cancel(self, goal_id: str, timeout_s: float) -> tuple[bool, GoalStatus]:
        """Cancel one of our goals: by id, or the current one ("").

        A cancel counts only when the navigator says so for this goal: it is in the
        answer's ``goals_canceling``, or its result comes back CANCELED (see
        :mod:`surprise_memory.nodes.goal_cancels`). Otherwise the goal's message says
        what the navigator said (refused, no answer within ``timeout_s``, an unknown
        goal) and its state stays what the navigator reports; an answer that comes after
        ``timeout_s`` still updates the message.

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
        if self._topic is not None:
            raise GoalRefusedError(
                f"goal {gid} went on {self._topic.topic_name}: a topic has no cancel (use "
                "goal_transport action, or stop the robot through Nav2)"
            )
        with self._answers.lock:
            handle = self._answers.handle(gid)
            if handle is None:  # not answered yet: cancelled once accepted
                self._answers.move_on(gid, "accepted after a cancel was asked")
        if handle is None:
            now = self.book.update(
                gid,
                message="cancel asked before the navigator answered the goal: not confirmed; "
                "if it accepts, the navigator is asked at once to cancel it",
            )
            assert now is not None
            return False, now
        verdict = self._cancels.ask(gid, handle, timeout_s)
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
