"""CallbackPool: the nodes' multi-threaded executor hands each ready callback over once.

rclpy's MultiThreadedExecutor (Kilted 9.x) submits a task again every time it finds it
ready and not yet started, looping without waiting (ros2/rclpy#1452): the pool's queue
fills with copies while the spinning thread holds the GIL. Here a listener whose callback
takes 10 ms hears a talker at 200 Hz in the same process: the pool's queue never holds
more than the few callbacks really waiting, every message handled runs its callback once,
and a coroutine callback waiting on a future is resumed once the future is done.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.node import Node
from rclpy.task import Future
from std_msgs.msg import String

from surprise_memory.nodes.executor import CallbackPool


class PoolSpin:
    """The pool spun in a thread of its own, as a node's is, keeping in :attr:`failed` what
    rclpy's executor would end the node with, instead of ending."""

    def __init__(self, pool: CallbackPool) -> None:
        self.failed: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, args=(pool,), daemon=True)
        self._thread.start()

    def _spin(self, pool: CallbackPool) -> None:
        while not self._stop.is_set() and not self.failed:
            try:
                pool.spin_once(timeout_sec=0.02)
            except Exception as exc:
                self.failed.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


def assert_ticks_go_on(ticks: list[float], spinning: PoolSpin, more: int = 5) -> None:
    """The node's other callbacks still run: ``more`` ticks within 10 s, nothing raised."""
    before = len(ticks)
    deadline = time.monotonic() + 10.0
    while len(ticks) < before + more and time.monotonic() < deadline and not spinning.failed:
        time.sleep(0.02)
    assert not spinning.failed, spinning.failed
    assert len(ticks) >= before + more


def test_each_ready_callback_is_handed_to_the_pool_once() -> None:
    context = Context()
    rclpy.init(context=context)
    talker = Node("pool_talker", context=context)
    listener = Node("pool_listener", context=context)
    pub = talker.create_publisher(String, "pool_chatter", 1000)
    count = [0]
    heard: list[str] = []

    def say() -> None:
        count[0] += 1
        pub.publish(String(data=str(count[0])))

    def hear(msg: String) -> None:
        heard.append(msg.data)
        time.sleep(0.01)  # a callback that takes a while: the pool lags behind the spin

    talker.create_timer(0.005, say)
    listener.create_subscription(String, "pool_chatter", hear, 1000)
    pool = CallbackPool(2, context=context)
    pool.add_node(talker)
    pool.add_node(listener)
    longest = 0
    try:
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            pool.spin_once(timeout_sec=0.05)
            longest = max(longest, pool._executor._work_queue.qsize())
        while pool._executor._work_queue.qsize():  # let the queued ones finish
            pool.spin_once(timeout_sec=0.05)
    finally:
        pool.shutdown()
        talker.destroy_node()
        listener.destroy_node()
        rclpy.shutdown(context=context)
    assert heard, "nothing heard"
    assert len(heard) == len(set(heard))  # each message's callback ran once
    assert [int(h) for h in heard] == sorted(int(h) for h in heard)  # in order
    assert longest <= 3, longest  # the talker's timer and the listener, not copies


def test_a_coroutine_callback_waiting_on_a_future_is_resumed() -> None:
    context = Context()
    rclpy.init(context=context)
    node = Node("pool_coroutine", context=context)
    group = ReentrantCallbackGroup()
    later: Future[str] = Future()
    got: list[str] = []

    async def wait_for_it() -> None:
        if not got:
            got.append("started")
            got.append(await later)

    node.create_timer(0.01, wait_for_it, callback_group=group)
    node.create_timer(
        0.2, lambda: later.done() or later.set_result("resumed"), callback_group=group
    )
    pool = CallbackPool(2, context=context)
    pool.add_node(node)
    try:
        end = time.monotonic() + 10.0
        while len(got) < 2 and time.monotonic() < end:
            pool.spin_once(timeout_sec=0.05)
    finally:
        pool.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert got == ["started", "resumed"]


def test_an_action_client_destroyed_while_its_message_waits_for_a_worker_stops_nothing() -> None:
    """ros2/rclpy#1385: the navigator's status message for an action client waits for the
    pool's one worker, and the client is destroyed meanwhile; its take then fails ("action
    client pointer is invalid"). rclpy's executor would raise that from its spin and stop
    the node; the pool logs it, skips it, and goes on spinning."""
    from rclpy.action import ActionClient
    from rclpy.qos import qos_profile_action_status_default

    from surprise_memory.action import TestNavigateToPose

    context = Context()
    rclpy.init(context=context)
    node = Node("pool_action_client", context=context)
    navigator = Node("pool_navigator", context=context)
    status = navigator.create_publisher(
        TestNavigateToPose.Impl.GoalStatusMessage,
        "/pool/navigate/_action/status",
        qos_profile_action_status_default,  # what the action client subscribes with
    )
    client = ActionClient(node, TestNavigateToPose, "/pool/navigate")
    started, hold, ticks = threading.Event(), threading.Event(), []

    def busy() -> None:  # holds the one worker until the client is gone
        if not started.is_set():
            started.set()
            hold.wait(10.0)
        ticks.append(time.monotonic())

    # a group of its own: the client's (the node's default group) may run beside it
    node.create_timer(0.02, busy, callback_group=MutuallyExclusiveCallbackGroup())
    pool = CallbackPool(1, context=context)
    pool.add_node(node)
    spinning = PoolSpin(pool)
    try:
        assert started.wait(10.0)
        deadline = time.monotonic() + 10.0  # the status reaches the client, and waits
        while pool._executor._work_queue.qsize() < 1 and time.monotonic() < deadline:
            status.publish(TestNavigateToPose.Impl.GoalStatusMessage())
            time.sleep(0.05)
        assert pool._executor._work_queue.qsize() >= 1, "the status message never waited"
        client.destroy()
        time.sleep(0.3)  # the spin leaves its wait set: the client's handle is freed
        hold.set()
        assert_ticks_go_on(ticks, spinning)
    finally:
        spinning.stop()
        pool.shutdown()
        node.destroy_node()
        navigator.destroy_node()
        rclpy.shutdown(context=context)


class SlowToForget(Node):
    """A node whose ``remove_waitable`` waits for :attr:`go_on`: ``ActionClient.destroy``
    frees the client's handle and then takes the client off its node's list, and the
    moment between the two is held open here."""

    def __init__(self, name: str, *, context: Context) -> None:
        super().__init__(name, context=context)
        self.removing, self.go_on = threading.Event(), threading.Event()

    def remove_waitable(self, waitable: Any) -> None:
        self.removing.set()
        self.go_on.wait(10.0)
        super().remove_waitable(waitable)


def test_an_action_client_destroyed_as_the_wait_set_is_built_stops_nothing() -> None:
    """ros2/rclpy#1385, the spin's side: an action client whose handle is freed but which is
    still on its node's list is added to the next wait set ("Failed to add
    'rcl_action_client_t' to wait set: action client pointer is invalid"), which would end
    rclpy's spin; the pool gives that spin up, counts it, and spins on once the client is
    off the list."""
    from rclpy.action import ActionClient

    from surprise_memory.action import TestNavigateToPose

    context = Context()
    rclpy.init(context=context)
    node = SlowToForget("pool_forgetting", context=context)
    client = ActionClient(node, TestNavigateToPose, "/pool/forgotten")
    ticks: list[float] = []
    node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
    pool = CallbackPool(2, context=context)
    pool.add_node(node)
    destroying = threading.Thread(target=client.destroy, daemon=True)
    spinning = PoolSpin(pool)
    try:
        deadline = time.monotonic() + 10.0
        while len(ticks) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(ticks) >= 3, "the node's timer never ran"
        destroying.start()
        assert node.removing.wait(10.0)  # freed (once the spin's wait let go), still listed
        deadline = time.monotonic() + 10.0
        while (
            pool.destroyed_in_wait_set < 3 and time.monotonic() < deadline and not spinning.failed
        ):
            time.sleep(0.01)
        assert not spinning.failed, spinning.failed
        assert pool.destroyed_in_wait_set >= 3  # the window was hit, spin after spin
        node.go_on.set()
        destroying.join(timeout=10.0)
        assert_ticks_go_on(ticks, spinning)  # once the client is off the list
    finally:
        node.go_on.set()
        spinning.stop()
        pool.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
