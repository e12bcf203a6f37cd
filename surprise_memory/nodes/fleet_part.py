"""The fleet link on a node's ``/diagnostics``: its state, the backlog, what was never sent.

:class:`FleetDiagnostics` is created by :class:`~surprise_memory.nodes.memory_part.MemoryPart`
(so ``memory_node`` and ``pipeline_node`` both report it) when ``store_path`` names a fleet
store. It reads the :class:`~surprise_memory.memory.store.fleet.FleetStore`'s status from
memory (never a call over the link), adds its findings and ``fleet.*`` key-values to every
status, publishes a status at once when the link's state changes (a dropped link is on
``/diagnostics`` within a second of being found, not at the next period), and names in
the log every episode that will never reach the server.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from surprise_memory.health import Finding, Level, counted_finding, worker_finding
from surprise_memory.memory.store.fleet import FleetStore, fleet_findings
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["FleetDiagnostics"]


class FleetDiagnostics:
    """Reports a fleet store's link and backlog on the host node's ``/diagnostics``.

    Args:
        node: The host node (its logger).
        stats: The host's counters and status.

    """

    def __init__(self, node: Any, stats: NodeStats) -> None:
        self._node = node
        self._stats = stats
        self._store: FleetStore | None = None
        self._state = ""  # the link's state as last published
        self.closing = False

    def watch(self, store: FleetStore) -> None:
        """Report this store from now on."""
        self._store = store
        self._stats.add_check(self._check)
        self._stats.add_values(self._values)

    def on_not_sent(self, episode_id: str, reason: str) -> None:
        """An episode that will never reach the fleet store: counted, and named in the log."""
        self._stats.count("rejected_fleet")
        self._node.get_logger().error(f"episode {episode_id} not sent to the fleet store: {reason}")

    def poll(self) -> None:
        """Publish a status now if the link's state changed since the last one."""
        if self._store is not None and self._store.status().link.state != self._state:
            self._stats.publish()

    def _check(self, delta: Mapping[str, int]) -> list[Finding | None]:
        assert self._store is not None
        status = self._store.status()
        self._state = status.link.state
        return [
            worker_finding("fleet sender", self._store.sender_alive or self.closing),
            *fleet_findings(status, time.time_ns()),
            counted_finding(
                delta, "rejected_fleet", Level.ERROR, "episode(s) never sent to the fleet store"
            ),
        ]

    def _values(self) -> dict[str, object]:
        assert self._store is not None
        status = self._store.status()
        link, backlog = status.link, status.backlog
        oldest, rtt = backlog.oldest_wall_ns, link.round_trip_s
        age = "" if oldest is None else f"{max(0, time.time_ns() - oldest) / NS_PER_SECOND:.1f}"
        return {
            "fleet.link": link.state,
            "fleet.link_since_s": f"{link.since_s:.1f}",
            "fleet.round_trip_ms": "" if rtt is None else f"{rtt * 1e3:.1f}",
            "fleet.backlog_episodes": backlog.episodes,
            "fleet.backlog_bytes": backlog.nbytes,
            "fleet.oldest_unsent_s": age,
            "fleet.sent": backlog.sent,
            "fleet.not_sent": backlog.not_sent,
            "fleet.store": status.location,
        }
