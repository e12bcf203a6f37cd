"""Before a goal is sent, the navigator must have heard this client.

``ActionClient.wait_for_server`` is true once *this* side of DDS has matched the action
server's endpoints. The server may not have matched ours yet, and a request sent in
between is dropped by the DDS (rmw_fastrtps's service check looks from the client's side
only; ros2/rmw_fastrtps#392 is the open issue). Seen here (2026-11-29, new ``goto``
processes against an rclpy navigator, two CPU-bound processes beside them): of the goals
sent after ``wait_for_server`` had waited 1.5-2.3 s (discovery still under way), 2 of 3
never reached the navigator, whose executor stood idle; ``goto`` then truthfully said
"pending", and the robot would not have moved. Such losses failed 3 of 5 fresh-clone CI
runs before this handshake.

A goal cannot simply be sent again: Nav2's server (rclcpp_action) throws on a goal id it
already holds, and a new id would run twice where the first was only slow. So nothing of
the goal is sent until the server has answered a request of this client: a request for
the result of a goal id nobody holds, which every ROS 2 action server answers at once with
``STATUS_UNKNOWN`` (rclcpp_action silently; rclpy's server logs a warning). A probe that
is lost costs nothing and is sent again. rcl_action creates a client's goal service
before its result service, and DDS announces and matches a participant's endpoints in
that order, so an answered result request means the server has matched the goal
request's writer and the response's reader too (Fast DDS's discovery delivers a
participant's endpoint announcements reliably and in order).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from surprise_memory.memory.navigation import GoalRefusedError

__all__ = ["FIRST_PROBE_WAIT_S", "LONGEST_PROBE_WAIT_S", "navigator_hears_us", "reach_navigator"]

FIRST_PROBE_WAIT_S = 0.2
"""How long the first probe waits for its answer; each next one waits twice as long."""
LONGEST_PROBE_WAIT_S = 1.6
"""The longest wait for one probe's answer: a slow link still gets probes often enough."""


def reach_navigator(client: Any, action: Any, server: str, timeout_s: float) -> None:
    """Wait for the action server, then for it to hear this client.

    Args:
        client: The ``rclpy.action.ActionClient``.
        action: The action type.
        server: What a refusal calls it (``NavigateToPose server on /navigate_to_pose``).
        timeout_s: The longest wait, for both.

    Raises:
        GoalRefusedError: No server, or one that answered nothing, within ``timeout_s``:
            nothing of the goal was sent.

    """
    start = time.monotonic()
    if not client.wait_for_server(timeout_sec=timeout_s):
        raise GoalRefusedError(
            f"no {server} within {timeout_s:g} s: is Nav2 running? Goal not sent"
        )
    if not navigator_hears_us(client, action, max(timeout_s - (time.monotonic() - start), 0.5)):
        raise GoalRefusedError(
            f"the {server} was found but did not answer a first request within "
            f"{timeout_s:g} s (a loaded machine may still be discovering this process: try "
            "again, or give it longer; else the server is stuck). Goal not sent"
        )


def navigator_hears_us(client: Any, action: Any, timeout_s: float) -> bool:
    """Wait until the action server has answered a request of this client.

    Args:
        client: The ``rclpy.action.ActionClient`` (its server already found by
            ``wait_for_server``); its node's executor spins in another thread.
        action: The action type (its ``Impl`` message types).
        timeout_s: The longest wait, all probes together.

    Returns:
        True when a probe was answered: a goal request sent now reaches the server.

    """
    from rclpy.action.client import ClientGoalHandle
    from unique_identifier_msgs.msg import UUID

    deadline = time.monotonic() + timeout_s
    wait_s = FIRST_PROBE_WAIT_S
    # a handle of a goal nobody holds: rclpy asks results only of accepted goals' handles
    accepted = action.Impl.SendGoalService.Response(accepted=True)
    while True:
        nobody = ClientGoalHandle(client, UUID(uuid=list(uuid.uuid4().bytes)), accepted)
        answered = threading.Event()
        future = nobody.get_result_async()
        future.add_done_callback(_setter(answered))
        left = deadline - time.monotonic()
        if answered.wait(max(min(wait_s, left), 0.0)):
            return True
        future.cancel()  # lost on the way: forget it (its entry in the client goes too)
        if time.monotonic() >= deadline:
            return False
        wait_s = min(2 * wait_s, LONGEST_PROBE_WAIT_S)


def _setter(event: threading.Event) -> Callable[[Any], None]:
    """A done-callback that sets ``event``."""
    return lambda _future: event.set()
