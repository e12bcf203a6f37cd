"""How a node runs: ``main()`` with clean shutdown, the stamp-order watch, camera frames in."""

from __future__ import annotations

from typing import Any

from rclpy.node import Node

from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.nodes.diagnostics import NodeStats

__all__ = ["StampOrder", "frame_from_msg", "held_frame_from_msg", "run_node"]


def run_node(factory: Any, args: list[str] | None = None) -> int:
    """``main()`` of a node: init, build, spin until Ctrl-C or shutdown, clean up.

    A node whose parameters are invalid, or whose model or store cannot be opened, exits
    with status 2 and a one-line reason instead of a stack trace. ``factory()`` builds the
    node; its ``close()`` method, if it has one, runs before the node is destroyed. A node
    with an ``executor_threads`` attribute above 1 is spun by a multi-threaded executor
    (its callback groups say what may run in parallel).
    """
    import signal
    import sys

    import rclpy

    from surprise_memory.nodes.executor import CallbackPool
    from surprise_memory.nodes.heap import fix_mmap_threshold

    fix_mmap_threshold()  # frames freed go back to the system: no creeping RSS over days
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    # The first SIGINT/SIGTERM raises KeyboardInterrupt instead of shutting the context down
    # at once, so that close() can still publish what is pending (the gate's last event,
    # episodes); spin_once with a timeout returns to Python often enough for it to land.
    # Every later signal (launch escalates SIGINT -> SIGTERM while close() still works) is
    # only noted: raising it inside close() would unwind past the executor and the worker
    # threads and abort the process (exit -6, "terminate called without an active
    # exception"). Set both explicitly: a process started in the background inherits SIGINT
    # ignored.
    signals = {"count": 0}

    def interrupt(signum: int, frame: Any) -> None:
        signals["count"] += 1
        if signals["count"] == 1:
            raise KeyboardInterrupt
        if signals["count"] == 2:  # once: launch may send several
            print(
                f"signal {signum} while shutting down: still finishing (pending work is bounded)",
                file=sys.stderr,
            )

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = factory()
        if not _autostart(node):
            node.destroy_node()
            rclpy.try_shutdown()
            return 2
    except SurpriseMemoryError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    except KeyboardInterrupt:  # stopped while loading models: nothing pending yet
        rclpy.try_shutdown()
        return 0
    threads = getattr(node, "executor_threads", 1)
    # CallbackPool: rclpy's MultiThreadedExecutor without its busy loop (nodes/executor.py)
    executor = CallbackPool(threads) if threads > 1 else SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        signals["count"] = max(signals["count"], 1)  # from here on, no signal raises
        close = getattr(node, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:  # shutting down anyway: report, do not trace
                print(f"while closing: {type(exc).__name__}: {exc}", file=sys.stderr)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        # the interpreter's own exit (joining threads, freeing models) restores the default
        # handlers, under which a late SIGTERM would kill a process that finished cleanly
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return 0


def _autostart(node: Any) -> bool:
    """Configure and activate a managed node with ``autostart`` (False: configure failed).

    A failed configure under autostart ends the process (status 2, one line saying why),
    as a plain node that cannot start does; without autostart the node waits,
    unconfigured, for a lifecycle manager.
    """
    import sys

    from rclpy.lifecycle import TransitionCallbackReturn

    from surprise_memory.nodes.lifecycle import ManagedNode

    if not isinstance(node, ManagedNode) or not node.autostart:
        return True
    if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
        print(f"cannot start {node.get_name()}: {node.failure}", file=sys.stderr)
        return False
    node.trigger_activate()
    return True


class StampOrder:
    """Watches that a stream's stamps increase, as every node's core objects require.

    ``check(stamp)``: an equal stamp is a duplicate (rejected and counted: False); an
    earlier one means time went backwards (a bag restarted or looped): one warning, a
    counted reset, ``on_reset()``, and the item is accepted as the start of a new sequence.
    ``commit(stamp)`` records an item the node actually used.
    """

    def __init__(self, node: Node, stats: NodeStats, on_reset: Any) -> None:
        self._node = node
        self._stats = stats
        self._on_reset = on_reset
        self._last: int | None = None

    def check(self, stamp_ns: int) -> bool:
        """True when the item may be used (after a reset if time went backwards)."""
        last = self._last
        if last is None or stamp_ns > last:
            return True
        if stamp_ns == last:
            self._stats.reject("duplicate_stamp", f"stamp {stamp_ns} ns seen twice")
            return False
        self._node.get_logger().warning(
            f"time went backwards ({last} -> {stamp_ns} ns): a bag restarted or looped? "
            "Starting a new sequence."
        )
        self._stats.count("resets")
        self._on_reset()
        return True

    def commit(self, stamp_ns: int) -> None:
        """Record the stamp of an item that was used."""
        self._last = stamp_ns


def frame_from_msg(msg: Any, stats: NodeStats) -> Any:
    """A camera message as a core Frame, or None (counted and logged) when unusable."""
    from surprise_memory.perception.frames import frame_from_image_msg

    stats.count("frames_in")
    try:
        return frame_from_image_msg(msg)
    except SurpriseMemoryError as exc:
        stats.reject("image", str(exc))
        return None


def held_frame_from_msg(msg: Any, compressed: bool, stats: NodeStats) -> Any:
    """A camera message as the frame a memory keeps, or None (counted and logged).

    With ``image_transport: compressed`` (``compressed``) the bytes are kept as they came
    (a :class:`~surprise_memory.perception.frames.CompressedFrame`); only the frames an
    episode keeps are decoded. Otherwise the decoded frame (:func:`frame_from_msg`).
    """
    from surprise_memory.perception.frames import compressed_frame_from_msg

    if not compressed:
        return frame_from_msg(msg, stats)
    stats.count("frames_in")
    try:
        return compressed_frame_from_msg(msg)
    except SurpriseMemoryError as exc:
        stats.reject("image", str(exc))
        return None
