"""A robot's link to a fleet store: commit on the robot first, deliver to the server after.

* :mod:`.store`: :class:`FleetStore`, the store a live node writes to when ``store_path``
  names a PostgreSQL server: the robot's folder store as the primary, the server as a
  replica fed by a sender; retrievals merged, or partial while the server is unreachable.
* :mod:`.sender`: :class:`FleetSender`, the thread that delivers the committed episodes in
  order and idempotently, and checks the link while idle.
* :mod:`.ledger`: :class:`DeliveryLedger`, what was delivered, what waits, what will never
  be sent (a small SQLite file beside the local store; reconciled with it at open).
* :mod:`.link`: :class:`LinkMonitor`, the link's state as the calls find it, and
  :func:`fleet_findings`, what ``/diagnostics`` says about it.
"""

from surprise_memory.memory.store.fleet.ledger import Backlog, DeliveryLedger, Pending
from surprise_memory.memory.store.fleet.link import (
    FleetStatus,
    LinkMonitor,
    LinkReport,
    fleet_findings,
)
from surprise_memory.memory.store.fleet.sender import FleetSender
from surprise_memory.memory.store.fleet.store import FleetStore

__all__ = [
    "Backlog",
    "DeliveryLedger",
    "FleetSender",
    "FleetStatus",
    "FleetStore",
    "LinkMonitor",
    "LinkReport",
    "Pending",
    "fleet_findings",
]
