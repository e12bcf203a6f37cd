"""The pose of a frame in the navigation frame, from tf (tf2_ros where it is installed).

:class:`TransformLookup` takes a host node whose executor spins in another thread than the
caller's; without tf2_ros every lookup is a clear refusal.
"""

from __future__ import annotations

from typing import Any

from rclpy.duration import Duration
from rclpy.time import Time

from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.pose import Pose

__all__ = ["TransformLookup"]


class TransformLookup:
    """Poses of frames in another frame, from tf (``/tf``, ``/tf_static``) heard by the node.

    Subscribes tf for as long as it is open (a context manager): a goal is rare, and
    listening all the time cost the memory node 16-60 % of a core at 130 tf messages/s
    (measured by hand, 2-core machine under load), against 0.5 % without.

    Args:
        node: The host node (its executor delivers ``/tf``, in another thread than the
            caller's).

    """

    def __init__(self, node: Any) -> None:
        self._buffer: Any = None
        self._listener: Any = None
        try:
            from tf2_ros import Buffer, TransformListener
        except ImportError:
            return
        self._buffer = Buffer()
        self._listener = TransformListener(self._buffer, node, spin_thread=False)

    def __enter__(self) -> TransformLookup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening to tf (idempotent; what was heard stays for lookups)."""
        if self._listener is not None:
            self._listener.unregister()
            self._listener = None

    def lookup(
        self, target: str, source: str, stamp_ns: int, wait_s: float = 0.0
    ) -> tuple[Pose, str]:
        """The pose of ``source`` in ``target`` at ``stamp_ns`` (``target <- source``).

        The buffer holds tf from the moment this lookup opened, an episode may be days
        old: where tf holds no transform at its stamp, the latest one is used and the
        note says so (a static transform, e.g. ``map -> odom`` with a fixed map, holds at
        every stamp; a moving one is off by the drift since the episode).

        Args:
            target: The navigation frame.
            source: The episode's frame.
            stamp_ns: The episode's stamp.
            wait_s: How long to wait for tf to connect the two frames (nothing is heard
                before the lookup opened).

        Returns:
            The transform as a pose in ``target``, and a note ("" when exact).

        Raises:
            GoalRefusedError: tf2_ros is not installed, or tf did not connect the frames
                within ``wait_s``.

        """
        if self._buffer is None:
            raise GoalRefusedError(
                f"the episode's pose is in {source!r}, navigation in {target!r}, and tf2_ros is "
                "not installed here to transform it (install tf2_ros, or navigate in "
                f"{source!r}: navigation_frame)"
            )
        from tf2_ros import ExtrapolationException, TransformException

        buffer = self._buffer
        try:
            buffer.can_transform(target, source, Time(), timeout=Duration(seconds=wait_s))
            try:
                tf = buffer.lookup_transform(target, source, Time(nanoseconds=stamp_ns))
                note = ""
            except ExtrapolationException:
                tf = buffer.lookup_transform(target, source, Time())
                note = (
                    f"{target} <- {source} from tf's latest transform: tf holds none at the "
                    "episode's time"
                )
        except TransformException as exc:
            raise GoalRefusedError(
                f"no transform from the episode's frame {source!r} to the navigation frame "
                f"{target!r} ({type(exc).__name__}: {' '.join(str(exc).split())})"
            ) from None
        t, q = tf.transform.translation, tf.transform.rotation
        return Pose(t.x, t.y, t.z, q.x, q.y, q.z, q.w, target), note
