"""Goals on the goal topic (what RViz's goal tool does): no id, no answer, no outcome.

:class:`GoalTopic` publishes a ``geometry_msgs/PoseStamped`` goal on ``goal_topic`` once
the navigator (``navigator_node``, Nav2's ``bt_navigator``) subscribes it, and waits for
the subscribers to acknowledge it (reliable QoS). Where Nav2's action is not installed,
:class:`~surprise_memory.nodes.goal_sender.GoalSender` sends its goals this way.
"""

from __future__ import annotations

import time
from typing import Any

from geometry_msgs.msg import PoseStamped
from rclpy.duration import Duration

from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.nodes.qos import GOAL

__all__ = ["GoalTopic"]

_POLL_S = 0.02


class GoalTopic:
    """The goal topic's publisher, and who the navigator on it is.

    Args:
        node: The host node.
        topic: The goal topic (``goal_topic``).
        navigator: The node that must subscribe it (``navigator_node``: a name, or
            ``/namespace/name``).

    """

    def __init__(self, node: Any, topic: str, navigator: str) -> None:
        self._node = node
        self._publisher = node.create_publisher(PoseStamped, topic, GOAL)
        self._navigator = navigator
        self.topic_name: str = self._publisher.topic_name
        """The topic, resolved (``/goal_pose``)."""

    def _navigator_on_topic(self) -> tuple[bool, list[str]]:
        """Whether the navigator subscribes the topic, and who does."""
        names = []
        for info in self._node.get_subscriptions_info_by_topic(self.topic_name):
            ns = info.node_namespace.rstrip("/")
            names.append(f"{ns}/{info.node_name}")
        want = self._navigator
        found = any(n == want or n.rsplit("/", 1)[-1] == want for n in names)
        return found, sorted(set(names))

    def wait_for_navigator(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the navigator to subscribe the topic.

        Raises:
            GoalRefusedError: It did not (the message lists who subscribes): not sent.

        """
        deadline = time.monotonic() + timeout_s
        while not (found := self._navigator_on_topic())[0]:
            if time.monotonic() >= deadline:
                others = ", ".join(found[1]) or "none"
                raise GoalRefusedError(
                    f"the navigator {self._navigator!r} does not subscribe {self.topic_name} "
                    f"within {timeout_s:g} s (subscribers: {others}): is Nav2 running (same "
                    "ROS_DOMAIN_ID; navigator_node)? Goal not sent"
                )
            time.sleep(_POLL_S)

    def publish(self, goal: PoseStamped, ack_s: float, timeout_s: float) -> tuple[str, str]:
        """Publish the goal and wait up to ``ack_s`` for its acknowledgement.

        Args:
            goal: The goal pose.
            ack_s: The wait for the acknowledgement.
            timeout_s: The whole wait, as the message says it.

        Returns:
            The goal's state and message: ``sent``, or ``unknown`` where no
            acknowledgement came (the navigator may or may not have it).

        """
        topic = self.topic_name
        self._publisher.publish(goal)
        if not self._publisher.wait_for_all_acked(Duration(seconds=ack_s)):
            # published: the navigator may have it; nothing on a topic says so
            return (
                "unknown",
                f"published on {topic}, not acknowledged within {timeout_s:g} s: the "
                "navigator may or may not have it (a topic cannot be cancelled)",
            )
        return "sent", f"sent on {topic} to {self._navigator} (a topic reports no outcome)"
