"""The multi-threaded executor of the nodes that need one, without rclpy's busy loop.

``memory_node`` and ``pipeline_node`` serve retrievals in a thread of their own, so they
spin a multi-threaded executor. rclpy's ``MultiThreadedExecutor`` (up to Kilted's 9.x;
ros2/rclpy#1452, fixed in Rolling by #1547) hands a callback to its thread pool and, until a
worker has *started* it, gets the same task back from ``wait_for_ready_callbacks`` at once
and submits it again: the spinning thread loops without waiting, holding the GIL the
workers need to start, and the pool's queue fills with copies. Measured here with a 30 Hz
640x480 camera and nothing else to do: the memory node took 50% of a core and 83% of the
frames, its list of pending futures at times over a thousand long.

:class:`CallbackPool` submits each task once: a task that is queued or running is not
submitted again (one whose call returned, a coroutine waiting on a future, is), and the
spinning thread sleeps a moment instead of looping, so a worker gets the GIL to start it.

A callback's exception ends the spin, as in rclpy, with two exceptions, both a waitable
(an action client) destroyed while the executor holds it. rclpy guards a subscription, a
client, a service or a timer against these, but not a waitable (ros2/rclpy#1385, open): its
RCLError "action client pointer is invalid" would stop the node.

- Its take, when it was destroyed after the executor found it ready. Seen here when a goal
  sender's action client was destroyed while the navigator's status message for it was
  waiting for a worker. The take is logged and skipped.
- Its place in the next wait set. ``ActionClient.destroy`` frees the handle, then takes
  the client off the node's list; a spin that lists the node's waitables in between skips
  the freed handle's ``__enter__`` (InvalidHandle, caught by rclpy) but still adds the
  client to the wait set. Seen here (2026-12-02) in the CI of 4af7770 and beside two
  CPU-bound processes: a test's sender destroyed, and the navigator's node silent for the
  rest of its module. That spin is given up, counted and logged; the next one lists the
  node's waitables again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.executors import (
    ConditionReachedException,
    ExternalShutdownException,
    MultiThreadedExecutor,
    ShutdownException,
    TimeoutException,
)
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.logging import get_logger

__all__ = ["CallbackPool"]

_QUEUED_WAIT_S = 0.0005  # a worker's turn to start a task already handed to the pool
_LOGGER = get_logger("callback_pool")


class CallbackPool(MultiThreadedExecutor):
    """``MultiThreadedExecutor`` that hands each ready callback to its pool once.

    Args:
        num_threads: Worker threads.
        context: The context of the nodes it spins.

    """

    def __init__(self, num_threads: int, *, context: Any = None) -> None:
        super().__init__(num_threads, context=context)
        self._lock = threading.Lock()
        self._queued: set[Any] = set()  # handed to the pool, its call not returned yet
        self._finished: list[Any] = []  # (task, entity, node) done, not raised here yet
        self.destroyed_in_wait_set = 0
        """Spins given up: a waitable destroyed as it was added to the wait set."""

    def _spin_once_impl(
        self, timeout_sec: Any = None, wait_condition: Callable[[], bool] = lambda: False
    ) -> None:
        try:
            handler, entity, node = self.wait_for_ready_callbacks(timeout_sec, None, wait_condition)
        except (
            ExternalShutdownException,
            ShutdownException,
            TimeoutException,
            ConditionReachedException,
        ):
            return
        except (_rclpy.RCLError, _rclpy.InvalidHandle) as error:
            if not _destroyed(error):
                raise
            self.destroyed_in_wait_set += 1
            _LOGGER.warning(
                f"gave up a wait: a waitable was destroyed while it was being added ({error})",
                throttle_duration_sec=1.0,
            )
            time.sleep(_QUEUED_WAIT_S)  # its destroy's other half: off the node's list
            return
        with self._lock:
            finished, self._finished = self._finished, []
            queued = handler in self._queued
            if not queued:
                self._queued.add(handler)
        for task, source, its_node in finished:
            if _took_destroyed_waitable(task, source, its_node):
                its_node.get_logger().warning(
                    f"skipped a callback of {type(source).__name__}: it was destroyed after "
                    f"it was found ready ({task.exception()})"
                )
                continue
            task.result()  # a callback's exception is raised in the spinning thread
        if queued:  # given back before its call returned: a worker's turn
            time.sleep(_QUEUED_WAIT_S)
            return
        self._executor.submit(self._run, handler, entity, node)

    def _run(self, task: Any, entity: Any, node: Any) -> None:
        """A worker: run (or resume) the task, then let it be handed over again."""
        try:
            task()
        finally:
            with self._lock:
                self._queued.discard(task)
                if task.done():
                    self._finished.append((task, entity, node))


def _took_destroyed_waitable(task: Any, entity: Any, node: Any) -> bool:
    """Whether ``task`` failed taking the data of a waitable that was destroyed.

    Told by the error, not by the node's list: ``ActionClient.destroy`` frees the handle
    before it leaves the node's waitables.
    """
    error = task.exception()
    if node is None or not hasattr(entity, "take_data"):
        return False
    return _destroyed(error)


def _destroyed(error: BaseException | None) -> bool:
    """Whether ``error`` is rcl's word for a handle freed under it (destruction requested)."""
    if isinstance(error, _rclpy.InvalidHandle):
        return True
    return isinstance(error, _rclpy.RCLError) and "pointer is invalid" in str(error)
