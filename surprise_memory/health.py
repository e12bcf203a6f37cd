"""A node's health as robots read it: OK / WARN / ERROR with the reasons (ROS-free).

The live nodes publish ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` with the
conventions of ``diagnostic_updater``: one status per node, a level, a message that says
why, and key-values (the counters). The rules that pick the level live here, apart from
rclpy, so they are tested directly; ``surprise_memory.nodes.diagnostics`` only gathers the
inputs (counters, publisher counts, thread states) and publishes.

The levels (documented in doc/guides/nodes.md, "Diagnostics"):

* **ERROR** — the node cannot do its job: a worker thread died while the node runs (the
  encoder's model thread, the memory node's episode writer), or the store refused a write
  in the last period (full disk, unwritable folder).
* **WARN** — the node runs but its output is degraded or missing an input: windows or
  episodes dropped in the last period, untrained (random) weights, event poses fallen back
  from tf to odometry or to none, an input topic with no publisher ("no encoder") or
  silent for longer than ``input_silent_seconds``, camera frames lost (or the encoder's
  windows missing frames) above ``camera_loss_warn``.
* **WARN** also when place keyframes are on, frames came, none was kept in the last period
  and most were refused for their pose (none, stale, invalid, of another boot, a jump).
* **OK** — none of the above; the message reads ``running``.

The message lists the reasons of the worst level first, then the lesser ones, joined by
``"; "``, so a robot's monitor shows every reason on one line (diagnostic_updater merges
the summaries of several checks the same way: worst level, messages joined).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "Finding",
    "InputWatch",
    "Level",
    "PeriodCounts",
    "camera_loss_finding",
    "counted_finding",
    "pose_finding",
    "summarize",
    "untrained_finding",
    "window_span_finding",
    "worker_finding",
]

LARGE_FRAMES_DOC = "doc/guides/large-frames.md"
"""Where a robot's operator reads what to set when camera frames are lost."""


class Level(enum.IntEnum):
    """The levels of ``diagnostic_msgs/DiagnosticStatus`` (same numbers)."""

    OK = 0
    WARN = 1
    ERROR = 2


@dataclass(frozen=True)
class Finding:
    """One reason for a level above OK."""

    level: Level
    reason: str


def summarize(findings: Iterable[Finding | None]) -> tuple[Level, str]:
    """The node's level and message from its findings.

    Args:
        findings: What the checks found; ``None`` entries (a check that found nothing) are
            skipped.

    Returns:
        The worst level (OK when there is no finding) and the message: the reasons, each
        once, worst level first, in the order given within a level, joined by ``"; "``;
        ``running`` when OK.

    """
    # each reason once: in pipeline_node two parts may find the same (untrained encoder)
    unique = dict.fromkeys(f for f in findings if f is not None)
    found = sorted(unique, key=lambda f: -f.level)
    if not found:
        return Level.OK, "running"
    return found[0].level, "; ".join(f.reason for f in found)


class PeriodCounts:
    """What each counter added since the previous diagnostics period.

    Counters only grow; a level must say what happens now (windows dropped in the last
    period), not what happened once an hour ago.
    """

    def __init__(self) -> None:
        self._previous: dict[str, int] = {}

    def advance(self, counts: Mapping[str, int]) -> dict[str, int]:
        """Return each counter's increase since the last call, and remember the counts.

        Args:
            counts: The counters now.

        Returns:
            Counter name -> increase (0 for a counter that did not move).

        """
        delta = {k: v - self._previous.get(k, 0) for k, v in counts.items()}
        self._previous = dict(counts)
        return delta


def counted_finding(delta: Mapping[str, int], key: str, level: Level, what: str) -> Finding | None:
    """A finding when a counter grew in the last period.

    Args:
        delta: Counter increases of the period (:meth:`PeriodCounts.advance`).
        key: The counter (e.g. ``windows_dropped``, ``rejected_store``).
        level: The level it means.
        what: What the counted items are, for the message ("windows dropped").

    Returns:
        ``"<n> <what> in the last period"`` at ``level``, or None when it did not grow.

    """
    n = delta.get(key, 0)
    if n <= 0:
        return None
    return Finding(level, f"{n} {what} in the last period")


def untrained_finding(component: str, pretrained: bool) -> Finding | None:
    """WARN when a model runs with untrained (random) weights: its output is meaningless."""
    if pretrained:
        return None
    return Finding(Level.WARN, f"{component} weights are untrained")


def worker_finding(name: str, alive: bool) -> Finding | None:
    """ERROR when a worker thread that must run while the node runs has died."""
    if alive:
        return None
    return Finding(Level.ERROR, f"{name} thread is dead")


def pose_finding(source: str | None) -> Finding | None:
    """WARN when the latest event's pose did not come from tf.

    Args:
        source: ``pose_source`` of the latest event (``tf``, ``odometry``, or the reason
            there was none); None before the first event.

    Returns:
        None for tf (or no event yet); WARN "pose from odometry" or "no pose" otherwise.

    """
    if source is None or source == "tf":
        return None
    if source == "odometry":
        return Finding(Level.WARN, "event poses from odometry (tf unavailable)")
    return Finding(Level.WARN, f"events without pose: {source}")


class InputWatch:
    """An input topic: whether anyone publishes it, and when it last delivered.

    Args:
        topic: The topic as the node names it (for the message).
        missing: What its absence means, first in the message ("no encoder").
        silent_after_s: WARN when nothing arrived for this long (since the last message,
            or since the watch started); None for sparse topics (events) where silence is
            normal and only a missing publisher counts.
        start_ns: When the watch started (steady clock, nanoseconds).

    """

    def __init__(
        self, topic: str, missing: str, silent_after_s: float | None, start_ns: int
    ) -> None:
        self.topic = topic
        self.missing = missing
        self.silent_after_s = silent_after_s
        self._last_ns = start_ns
        self._received = False

    def seen(self, now_ns: int) -> None:
        """Note a message that arrived at ``now_ns`` (steady clock)."""
        self._last_ns = now_ns
        self._received = True

    def restart(self, now_ns: int) -> None:
        """Start counting silence afresh (the node was paused and resumed)."""
        self._last_ns = now_ns

    def check(self, publishers: int, now_ns: int) -> Finding | None:
        """WARN when the topic has no publisher, or has been silent too long.

        Args:
            publishers: Publishers of the topic now (``Node.count_publishers``).
            now_ns: Now, on the clock given to :meth:`seen`.

        Returns:
            A finding that reads ``<missing>: no publisher on '<topic>'`` or
            ``<missing>: nothing on '<topic>' for <s> s``, or None.

        """
        if publishers == 0:
            return Finding(Level.WARN, f"{self.missing}: no publisher on '{self.topic}'")
        if self.silent_after_s is None:
            return None
        age_s = (now_ns - self._last_ns) / NS_PER_SECOND
        if age_s <= self.silent_after_s:
            return None
        since = "" if self._received else " since start"
        return Finding(
            Level.WARN, f"{self.missing}: nothing on '{self.topic}' for {age_s:.0f} s{since}"
        )


def camera_loss_finding(
    fraction_lost: float,
    received_hz: float | None,
    camera_hz: float | None,
    warn_above: float,
    *,
    in_transport: float | None = None,
) -> Finding | None:
    """WARN when the node lost more than ``warn_above`` of the camera's frames.

    Args:
        fraction_lost: Frames lost over frames the camera published, in the last period
            (:mod:`surprise_memory.nodes.delivery`: by sequence numbers or stamps).
        received_hz: Frames received per second of camera time in the period (None:
            unknown yet).
        camera_hz: The camera's estimated rate (None: unknown yet).
        warn_above: ``camera_loss_warn``.
        in_transport: The share the middleware reported lost in transport (None: the RMW
            does not report it); the rest was overwritten in the node's own queue (a node
            too slow for the camera), or the camera never sent it.

    Returns:
        A WARN naming the share lost, the rates and the shares in transport and in the
        node's queue, and the page to read (e.g. "camera frames lost: 81% in the last
        period (5.7 of 30.0 Hz received; 80% in transport, 1% in this node's queue or
        never sent); see doc/guides/large-frames.md"), or None.

    """
    if fraction_lost <= warn_above:
        return None
    details = []
    if received_hz is not None and camera_hz is not None:
        details.append(f"{received_hz:.1f} of {camera_hz:.1f} Hz received")
    if in_transport is not None:
        queue = max(0.0, fraction_lost - in_transport)
        details.append(
            f"{in_transport:.0%} in transport, {queue:.0%} in this node's queue or never sent"
        )
    said = f" ({'; '.join(details)})" if details else ""
    return Finding(
        Level.WARN,
        f"camera frames lost: {fraction_lost:.0%} in the last period{said}; see {LARGE_FRAMES_DOC}",
    )


def window_span_finding(
    figures: tuple[float, float, float] | None, warn_above: float
) -> Finding | None:
    """WARN when the encoder's windows missed more than ``warn_above`` of their frames.

    Args:
        figures: :meth:`surprise_memory.perception.delivery.WindowSpan.take` of the period:
            (share of frames missing, mean span s, mean span s at the input rate), or None.
        warn_above: ``camera_loss_warn``.

    Returns:
        A WARN saying how far apart the windows' frames were, or None.

    """
    if figures is None or figures[0] <= warn_above:
        return None
    missing, span_s, nominal_s = figures
    return Finding(
        Level.WARN,
        f"encoder windows span {span_s:.2f} s instead of {nominal_s:.2f} s ({missing:.0%} "
        f"of their frames missing: the model sees another time scale); see "
        f"{LARGE_FRAMES_DOC}",
    )
