"""The nodes' steady clock, from the rclpy of every supported distro (Humble to Kilted).

Timers that must tick while a bag replay's sim time stands still (diagnostics, the memory
node's housekeeping) run on a steady clock. ``ClockType`` moved to ``rclpy.clock_type`` after
Humble, which has it in ``rclpy.clock`` only.
"""

from __future__ import annotations

from rclpy.clock import Clock

try:
    from rclpy.clock_type import ClockType
except ImportError:  # ROS 2 Humble
    from rclpy.clock import ClockType  # type: ignore[attr-defined]

__all__ = ["steady_clock"]


def steady_clock() -> Clock:
    """A new clock on steady (monotonic) time."""
    return Clock(clock_type=ClockType.STEADY_TIME)
