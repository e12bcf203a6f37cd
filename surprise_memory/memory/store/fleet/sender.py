"""The background sender that delivers a robot's committed episodes to the fleet store.

:class:`FleetSender` runs one thread. It takes the oldest episode the
:class:`~.ledger.DeliveryLedger` says is waiting, reads it from the robot's local store
(record, JPEG bytes, stored embeddings) and imports it into the fleet store as it is (its
id kept, the robot's budget applied there), then marks it delivered; in order, one at a
time. While nothing waits it checks the link every ``fleet_heartbeat_seconds``, so a
dropped link is on the diagnostics before an episode needs it.

* **Idempotent.** A delivery whose answer was lost (the link cut during the ``COMMIT``)
  is sent again; if the first one committed, the fleet store refuses the id and the
  sender finds it there, this robot's: delivered. An id another robot's episode holds
  there is a refusal for good (below).
* **Never blocks the robot.** The thread is the only one that waits for the link; the
  episode writer commits locally and returns.
* **Backs off.** After a failure it waits ``fleet_heartbeat_seconds``, doubling up to 5x,
  and tries again; the first answer resets the wait.
* **Names what it gives up.** An episode the fleet store refuses for good (another
  embedder, an invalid record, its id held there by another robot's episode), or that
  left the robot before it could be sent, is marked as not sent with the reason and
  handed to ``on_not_sent``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError, StoreError, StoreUnreachableError
from surprise_memory.memory.store.fleet.ledger import DeliveryLedger, Pending
from surprise_memory.memory.store.fleet.link import LinkMonitor
from surprise_memory.memory.store.interface import EpisodeStoreBackend

__all__ = ["FleetSender"]

_MAX_BACKOFF = 5.0  # x fleet_heartbeat_seconds


class FleetSender:
    """Delivers the ledger's waiting episodes from the local store to the fleet store.

    Args:
        local: The robot's local store (the episodes are read from it).
        ledger: What waits, what was delivered.
        open_remote: Opens the fleet store (called in the sender's thread; may raise
            :class:`~surprise_memory.errors.StoreError`).
        monitor: The link's state, shared with the retrievals.
        heartbeat_s: ``fleet_heartbeat_seconds``.
        on_not_sent: Called with an episode id and the reason it will never be sent.
        on_sent: Called with each delivered episode id.

    """

    def __init__(
        self,
        local: EpisodeStoreBackend,
        ledger: DeliveryLedger,
        open_remote: Callable[[], EpisodeStoreBackend],
        monitor: LinkMonitor,
        *,
        heartbeat_s: float,
        on_not_sent: Callable[[str, str], None],
        on_sent: Callable[[str], None] = lambda _id: None,
    ) -> None:
        self._local = local
        self._ledger = ledger
        self._open_remote = open_remote
        self._monitor = monitor
        self.heartbeat_s = heartbeat_s
        self._on_not_sent = on_not_sent
        self._on_sent = on_sent
        self._remote: EpisodeStoreBackend | None = None
        self.in_flight: str | None = None  # the episode being delivered (not to be evicted)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-sender", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread.is_alive()

    def reconfigure_remote(self, config: StoreConfig) -> None:
        """New settings for the open connection to the fleet store (the next opens read them)."""
        remote = self._remote
        if remote is not None:
            remote.reconfigure(config)

    def wake(self) -> None:
        """An episode was committed: send it now rather than at the next heartbeat."""
        self._wake.set()

    def close(self, timeout: float) -> bool:
        """Stop after the call in progress (each is bounded); whether the thread ended.

        Args:
            timeout: Longest wait for the thread, seconds. What was not delivered stays in
                the ledger and goes at the next start.

        """
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        if self._remote is not None:
            self._remote.close()
            self._remote = None
        return True

    # ----------------------------------------------------------------- the thread
    def _run(self) -> None:
        backoff = self.heartbeat_s
        while not self._stop.is_set():
            pending = self._ledger.next_pending()
            try:
                remote = self._connected()
                if pending is None:
                    with self._monitor.call(remote, check=True):
                        ping = getattr(remote, "ping", remote.refresh)  # one round trip
                        ping()
                else:
                    self._deliver(remote, pending)
                backoff = self.heartbeat_s
                if self._ledger.next_pending() is not None:
                    continue  # the backlog goes out back to back
            except StoreError as exc:
                if isinstance(exc, StoreUnreachableError):
                    self._drop_remote()
                self._pause(backoff)
                backoff = min(2 * backoff, _MAX_BACKOFF * self.heartbeat_s)
                continue
            except Exception as exc:  # a bug must not end the deliveries: report, go on
                self._monitor.refuse(f"fleet sender: {type(exc).__name__}: {exc}")
                self._pause(_MAX_BACKOFF * self.heartbeat_s)
                continue
            self._pause(self.heartbeat_s)

    def _pause(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _connected(self) -> EpisodeStoreBackend:
        if self._remote is None:
            with self._monitor.call():
                self._remote = self._open_remote()
        return self._remote

    def _drop_remote(self) -> None:
        remote, self._remote = self._remote, None
        if remote is not None:
            remote.close()

    def _deliver(self, remote: EpisodeStoreBackend, pending: Pending) -> None:
        """Send one episode; mark it delivered, or not sent for good (named).

        Raises:
            StoreError: The link failed or the server refused for now: try again later.

        """
        ep_id = pending.episode_id
        self.in_flight = ep_id
        try:
            self._send(remote, ep_id)
        finally:
            self.in_flight = None

    def _send(self, remote: EpisodeStoreBackend, ep_id: str) -> None:
        try:
            record = self._local.get(ep_id)
            jpegs = record.load_jpegs()
            embeddings = self._local.embeddings(ep_id)
        except StoreError as exc:
            if ep_id in self._local or self._stop.is_set():
                raise  # unreadable now (closing, a disk error): try again later
            self._give_up(ep_id, f"gone from the robot's store before it was sent ({exc})")
            return
        try:
            with self._monitor.call(remote):
                remote.import_episode(
                    record, jpegs, embeddings, origin_ns=self._local.origin_ns, budget=True
                )
        except InputError as exc:  # another embedder, an invalid record: never accepted
            self._give_up(ep_id, f"refused by the fleet store: {exc}")
            return
        except StoreUnreachableError:
            raise  # it may have committed: the next try finds out
        except StoreError as exc:
            # an earlier try whose answer was lost committed it: the id is there, this
            # robot's; another robot's episode holding the id is a refusal for good
            with self._monitor.call(remote):
                holder = remote.get(ep_id).robot_id if ep_id in remote else None
            if holder is None:
                raise
            if holder != record.robot_id:
                self._give_up(ep_id, f"refused by the fleet store: {exc}")
                return
        self._ledger.mark_sent(ep_id)
        self._on_sent(ep_id)

    def _give_up(self, episode_id: str, reason: str) -> None:
        if self._ledger.is_pending(episode_id):  # not given up meanwhile by an eviction
            self._ledger.mark_not_sent(episode_id, reason)
            self._on_not_sent(episode_id, reason)
