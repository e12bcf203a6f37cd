"""A robot's fleet store: :class:`FleetStore`, local first, then the fleet's server.

A live node whose ``store_path`` names a PostgreSQL server opens this store instead of
writing to the server itself (:func:`~surprise_memory.memory.store.factory.open_store`
with a :class:`~surprise_memory.config.FleetConfig`):

* **Local first.** Each episode is committed to a folder store on the robot
  (``fleet_local_store``), durable and crash-safe as any folder store, and its add
  returns; nothing the camera path waits for ever touches the network.
* **Then the fleet.** A :class:`~.sender.FleetSender` thread delivers the committed
  episodes to the server in order and idempotently (the server is a replica fed from the
  robot's store, the way ``migrate`` copies, but continuously); the
  :class:`~.ledger.DeliveryLedger` remembers what was delivered across kills and reboots.
* **Bounded.** The local copy holds at most ``fleet_local_max_bytes``: delivered episodes
  leave first (oldest first; the server keeps them); only a backlog that alone fills the
  bound loses episodes, lowest surprise first, each named as not sent.
* **Answers while the link is down.** A retrieval asks the robot's own store and the
  server, and merges the two answers; when the server cannot be reached it answers from
  the robot's own episodes (sent or not), marked partial
  (:class:`~surprise_memory.memory.store.hits.RetrievalHits`). Reading an episode that is
  not on the robot asks the server. Listings (``summaries``, ``episode_ids``, ``len``) are
  the robot's own.

Choice (issue 39): the local store is the primary and the server its replica, rather than
an outbox of unsent episodes beside a server-only store, because a robot offline must
still answer from everything it holds (its own episodes, sent or not), and one folder
store already gives the durability, the budget and the retrieval an outbox would have
to repeat. The cost on the episode path is one local commit (``benchmarks/bench_fleet_link.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from surprise_memory.config import FleetConfig, StoreConfig
from surprise_memory.config.fleet import DEFAULT_FLEET_LOCAL_STORE
from surprise_memory.errors import ConfigError, InputError, StoreError, StoreUnreachableError
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.base import StoreFront
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.fleet.ledger import DeliveryLedger, Pending
from surprise_memory.memory.store.fleet.link import (
    SLOW_ROUND_TRIP_S,
    FleetStatus,
    LinkMonitor,
    TimesExchanges,
)
from surprise_memory.memory.store.fleet.sender import FleetSender
from surprise_memory.memory.store.hits import RetrievalHits, merge_hits
from surprise_memory.memory.store.interface import EpisodeStoreBackend
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit, resolve_robot_id
from surprise_memory.memory.store.sqlite import EpisodeStore
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.perception.frames import Frame

__all__ = ["FleetStore"]

T = TypeVar("T")

OpenRemote = Callable[[StoreConfig, bool], EpisodeStoreBackend]
"""Opens the fleet store with these settings, read-only or not."""


def _local_config(config: StoreConfig) -> StoreConfig:
    """The local copy's settings: the robot's, without its budget (the fleet bound rules)."""
    return dataclasses.replace(config, max_episodes=0, max_store_bytes=0)


def _slow_after(config: StoreConfig) -> float:
    return min(SLOW_ROUND_TRIP_S, config.store_timeout_seconds / 4)


class _QueryStore:
    """The fleet store the query thread reads now, timed for the link monitor.

    A read may open a fresh connection halfway (:meth:`FleetStore._read`); the monitor
    asks whichever store is open how long its exchange has waited (while one is being
    opened: since the read began).
    """

    def __init__(self, fleet: FleetStore) -> None:
        self._fleet = fleet
        self._start = time.monotonic()

    def _timed(self) -> TimesExchanges | None:
        store = self._fleet._query_store
        return store if isinstance(store, TimesExchanges) else None

    def waiting_seconds(self) -> float:
        """How long the exchange in progress has waited (0 when none)."""
        timed = self._timed()
        if self._fleet._query_store is None:
            return time.monotonic() - self._start
        return 0.0 if timed is None else timed.waiting_seconds()

    def slowest_exchange_seconds(self) -> float:
        """The longest exchange of the read in progress, or of the last."""
        timed = self._timed()
        return 0.0 if timed is None else timed.slowest_exchange_seconds()


class FleetStore(StoreFront):
    """A robot's episode store: a local folder first, delivered to a fleet store after.

    Implements :class:`~surprise_memory.memory.store.interface.EpisodeStoreBackend` (see
    the module docstring for what each part does).

    Long class: the store interface, each method a few lines routing to the local store or
    the server.

    Args:
        location: The fleet store, as shown (no password).
        open_remote: Opens the fleet store (in the sender's thread, or for a retrieval).
        config: The robot's store settings (its budget applies on the server).
        fleet: The local copy and the link's settings.
        on_not_sent: Called with each episode id that will never be sent, and why.
        on_sent: Called with each delivered episode id (from the sender's thread).

    Raises:
        StoreError: The local store or its ledger cannot be opened (the server is not
            needed to open: a robot starts with its link down).

    """

    def __init__(
        self,
        location: str,
        open_remote: OpenRemote,
        config: StoreConfig,
        fleet: FleetConfig,
        *,
        on_not_sent: Callable[[str, str], None] = lambda _id, _why: None,
        on_sent: Callable[[str], None] = lambda _id: None,
    ) -> None:
        self.location = location
        self._open_remote = open_remote
        self._config = config
        self._read_only = False  # a robot's store is written
        self._fleet = fleet
        self._on_not_sent = on_not_sent
        self._lock = threading.Lock()  # adds and the room they make, one at a time
        self._robot = resolve_robot_id(None, config.robot_id)
        folder = fleet.fleet_local_store or DEFAULT_FLEET_LOCAL_STORE.format(robot_id=self._robot)
        self._local = EpisodeStore(Path(folder).expanduser(), _local_config(config))
        try:
            self._ledger = DeliveryLedger(self._local.path)
            self._reconcile()
        except BaseException:
            self._local.close()
            raise
        self._monitor = LinkMonitor(slow_after_s=_slow_after(config))
        # reads of the fleet store run in one thread of their own, so a caller waits at
        # most store_timeout_seconds for them, however slow the link
        self._queries = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleet-query")
        self._query_store: EpisodeStoreBackend | None = None  # used in that thread only
        self._sender = FleetSender(
            self._local,
            self._ledger,
            lambda: self._open_remote(self._config, False),
            self._monitor,
            heartbeat_s=fleet.fleet_heartbeat_seconds,
            on_not_sent=on_not_sent,
            on_sent=on_sent,
        )

    def _reconcile(self) -> None:
        """Put the ledger in step with the local store (a kill may have come in between)."""
        known = self._ledger.known()
        now = time.time_ns()
        missing = [i for i in self._local.episode_ids() if i not in known]
        self._ledger.append(
            Pending(i, self._episode_bytes(i), self._local.get(i).surprise, now) for i in missing
        )
        for ep_id in known - set(self._local.episode_ids()):
            if self._ledger.is_pending(ep_id):
                self._give_up(ep_id, "gone from the robot's store before it was sent")
            else:
                self._ledger.forget([ep_id])

    def _episode_bytes(self, episode_id: str) -> int:
        files = sum(p.stat().st_size for p in self._local.get(episode_id).frame_files())
        return files + int(self._local.embeddings(episode_id).size) * 2

    def _give_up(self, episode_id: str, reason: str) -> None:
        self._ledger.mark_not_sent(episode_id, reason)
        self._on_not_sent(episode_id, reason)

    # ----------------------------------------------------------------- the fleet's side
    def status(self) -> FleetStatus:
        """The link and the backlog now (from memory: no call is made)."""
        return FleetStatus(
            link=self._monitor.report(),
            backlog=self._ledger.backlog(),
            bound_bytes=self._fleet.fleet_local_max_bytes,
            location=self.location,
        )

    @property
    def sender_alive(self) -> bool:
        """Whether the sender's thread runs."""
        return self._sender.alive

    @property
    def local(self) -> EpisodeStore:
        """The robot's own store."""
        return self._local

    def reconfigure_fleet(self, fleet: FleetConfig) -> None:
        """Apply new fleet settings live (the local folder is fixed)."""
        if fleet.fleet_local_store != self._fleet.fleet_local_store:
            raise ConfigError("fleet_local_store is fixed while the store is open")
        self._fleet = fleet
        self._sender.heartbeat_s = fleet.fleet_heartbeat_seconds

    def _remote(self, what: str, call: Callable[[EpisodeStoreBackend], T]) -> T:
        """Run a read on the fleet store; its answer waited for ``store_timeout_seconds`` at most.

        While the link is down it fails at once; on a link slower than that (a query is a
        few round trips, opening the connection about twenty) the caller gets the failure
        in time and the read goes on in the background, so the next one finds it open.

        Raises:
            StoreUnreachableError: The link is down, went down in the call, or the answer
                did not come in time.
            StoreError: The fleet store refused.

        """
        if self._monitor.report().state in ("unreachable", "connecting"):
            raise StoreUnreachableError(f"{self.location}: cannot {what}: fleet unreachable")
        bound = self._config.store_timeout_seconds
        deadline = time.monotonic() + bound
        try:
            return self._queries.submit(self._read, call, deadline).result(timeout=bound)
        except FutureTimeout:
            why = (
                "a slow link"
                if self._monitor.report().state == "slow"
                else "the link or the server is not answering"
            )
            raise StoreUnreachableError(
                f"{self.location}: cannot {what}: no answer within {bound:g} s ({why})"
            ) from None

    def _read(self, call: Callable[[EpisodeStoreBackend], T], deadline: float) -> T:
        """In the query thread: open the fleet store once, then read; drop it on a cut.

        A read on a connection opened before (the server may have restarted since, the
        link been cut and restored) that finds the connection gone is tried once more on
        a fresh one, while the caller still waits for it (``deadline``): the link is called
        unreachable only when the fleet store did not answer that either.
        """
        try:
            with self._monitor.call(_QueryStore(self)):
                store, opened = self._query_store, self._query_store is None
                if store is None:
                    store = self._query_store = self._open_remote(self._config, True)
                try:
                    return call(store)
                except StoreUnreachableError:
                    if opened or time.monotonic() >= deadline:
                        raise
                self._close_query_store()
                store = self._query_store = self._open_remote(self._config, True)
                return call(store)
        except StoreUnreachableError:
            self._close_query_store()
            raise

    def _reconfigure_query_store(self, config: StoreConfig) -> None:
        if self._query_store is not None:
            self._query_store.reconfigure(config)

    def _close_query_store(self) -> None:
        store, self._query_store = self._query_store, None
        if store is not None:
            store.close()

    # ----------------------------------------------------------------- writing
    def add(
        self, frames: Sequence[Frame], embeddings: npt.ArrayLike, **fields: Any
    ) -> EpisodeRecord:
        """Commit an episode on the robot, then queue it for the fleet store.

        A place keyframe's older views that its add deletes (``place_history``) leave the
        queue too, superseded (not counted as not sent).

        Arguments (the episode's fields as keywords), return value and errors as
        :meth:`surprise_memory.memory.store.interface.EpisodeStoreBackend.add`.
        """
        place = None
        if fields.get("kind") == PLACE:
            place = (str(fields.get("place_key", "")), fields.get("robot_id") or self._robot)
        return self._committed(lambda: self._local.add(frames, embeddings, **fields), place)

    def import_episode(
        self,
        record: EpisodeRecord,
        jpegs: Sequence[bytes],
        embeddings: npt.ArrayLike,
        *,
        origin_ns: int | None = None,
        budget: bool = False,
    ) -> EpisodeRecord:
        """Commit a copied episode on the robot, then queue it for the fleet store."""
        return self._committed(
            lambda: self._local.import_episode(record, jpegs, embeddings, origin_ns=origin_ns)
        )

    def _committed(
        self, commit: Callable[[], EpisodeRecord], place: tuple[str, str] | None = None
    ) -> EpisodeRecord:
        """Commit on the robot; record the episode as waiting, keep the bound, wake the sender.

        ``place``: a place keyframe's (place key, robot), whose views the add may replace.
        """
        with self._lock:
            views = self._local.place_views(*place) if place is not None else []
            before = self._local.total_bytes
            record = commit()
            nbytes = self._local.total_bytes - before  # one writer: the add's own bytes
            gone = [i for i in views if i not in self._local]
            if gone:  # the add replaced older views of its place: its own size is read
                self._ledger.supersede(gone)
                nbytes = self._episode_bytes(record.id) if record.id in self._local else 0
            if record.id in self._local:
                self._ledger.append([Pending(record.id, nbytes, record.surprise, time.time_ns())])
                self._make_room(keep=record.id)
        self._sender.wake()
        return record

    def _make_room(self, keep: str) -> None:
        """Keep the local copy within ``fleet_local_max_bytes``: delivered episodes first."""
        bound = self._fleet.fleet_local_max_bytes
        while self._local.total_bytes > bound:
            delivered = self._ledger.oldest_sent()
            if delivered is not None:
                self._local.delete([delivered])
                self._ledger.forget([delivered])
                continue
            waiting = self._ledger.lowest_pending(keep={keep, self._sender.in_flight})
            if waiting is None:
                return  # the new episode alone: kept, as a store keeps the one just added
            self._local.delete([waiting.episode_id])
            self._give_up(
                waiting.episode_id,
                f"evicted on the robot before the fleet store could be reached: the backlog "
                f"passed fleet_local_max_bytes={bound}",
            )

    def delete(self, episode_ids: Sequence[str]) -> int:
        """Delete episodes from the robot's store (those not yet sent are not sent)."""
        with self._lock:
            deleted = self._local.delete(episode_ids)
            for ep_id in episode_ids:
                if self._ledger.is_pending(ep_id):
                    self._give_up(ep_id, "deleted on the robot before it was sent")
            self._ledger.forget(episode_ids)
        return deleted

    def note_origin(self, stamp_ns: int) -> None:
        """Note a frame seen on the robot (the server's origin follows with the deliveries)."""
        self._local.note_origin(stamp_ns)

    def note_snapshot(self, episode_ids: Sequence[str], note: SnapshotNote) -> int:
        """Record a snapshot note on the robot's store (not sent to the fleet store)."""
        return self._local.note_snapshot(episode_ids, note)

    def snapshot_notes(self, episode_ids: Sequence[str]) -> dict[str, list[SnapshotNote]]:
        """The snapshot notes the robot recorded."""
        return self._local.snapshot_notes(episode_ids)

    # ----------------------------------------------------------------- reading
    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """The robot's own answer merged with the fleet store's; partial when it is down.

        Raises:
            InputError: The query is invalid (or another embedder's, on either side).
            StoreError: The robot's store cannot be read.

        """
        own = self._local.retrieve(query, include_images=include_images)
        try:
            fleet = self._remote(
                "query episodes", lambda s: s.retrieve(query, include_images=include_images)
            )
        except InputError:
            raise
        except StoreError as exc:
            return RetrievalHits(
                own,
                partial=f"fleet unreachable, answered from {self._robot}'s own "
                f"{len(self._local)} episode(s) only ({exc})",
            )
        k = query.max_results or self._config.default_max_results
        return merge_hits(query, k, own, fleet)

    def latest_places(
        self, place_keys: Sequence[str], robot_id: str | None = None
    ) -> list[EpisodeRecord]:
        """The newest view of each place, of the robot's own and the fleet store's.

        The robot's own answer alone while the fleet store cannot be reached.

        Raises:
            StoreError: The robot's store cannot be read.

        """
        newest = {r.place_key: r for r in self._local.latest_places(place_keys, robot_id)}
        try:
            fleet = self._remote(
                "read place keyframes", lambda s: s.latest_places(place_keys, robot_id)
            )
        except StoreError:
            fleet = []
        for rec in fleet:
            own = newest.get(rec.place_key)
            if own is None or (rec.stamp_ns, rec.id) > (own.stamp_ns, own.id):
                newest[rec.place_key] = rec
        return [newest[k] for k in dict.fromkeys(place_keys) if k in newest]

    def get(self, episode_id: str) -> EpisodeRecord:
        """The episode: the robot's copy, else the fleet store's."""
        if episode_id in self._local:
            return self._local.get(episode_id)
        return self._remote(f"read episode {episode_id}", lambda s: s.get(episode_id))

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """The stored frame embeddings: the robot's copy, else the fleet store's."""
        if episode_id in self._local:
            return self._local.embeddings(episode_id)
        return self._remote(f"read episode {episode_id}", lambda s: s.embeddings(episode_id))

    def frame_jpeg(self, episode_id: str, index: int) -> bytes:
        """One frame's JPEG: the robot's copy, else the fleet store's."""
        if episode_id in self._local:
            return self._local.frame_jpeg(episode_id, index)
        return self._remote(f"read episode {episode_id}", lambda s: s.frame_jpeg(episode_id, index))

    def summaries(self, robot_id: str | None = None) -> list[EpisodeSummary]:
        """The robot's own episodes in brief (a listing never waits for the link)."""
        return self._local.summaries(robot_id)

    def episode_ids(self) -> list[str]:
        """Ids of the episodes the robot holds, in the order added."""
        return self._local.episode_ids()

    def refresh(self) -> bool:
        """Whether the robot's episodes changed since the previous call."""
        return self._local.refresh()

    def __len__(self) -> int:
        return len(self._local)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._local

    # ----------------------------------------------------------------- properties
    def reconfigure(self, config: StoreConfig) -> None:
        """Apply new settings live: the robot's budget on the server, limits, timeouts."""
        self._local.reconfigure(_local_config(config))
        self._config = config
        self._monitor.slow_after_s = _slow_after(config)
        self._sender.reconfigure_remote(config)
        self._queries.submit(self._reconfigure_query_store, config)

    def _current_meta(self) -> StoreMeta:
        return self._local._current_meta()  # the robot's embedder and origin

    @property
    def total_bytes(self) -> int:
        """Bytes the robot's copy holds."""
        return self._local.total_bytes

    def close(self) -> None:
        """Stop the sender (the backlog stays for the next start), close everything."""
        # a call in progress is bounded by the timeout; past it the thread is left (a daemon):
        # whatever it was sending is still waiting in the ledger, and a resend is a no-op
        self._sender.close(timeout=self._config.store_timeout_seconds)
        closed = self._queries.submit(self._close_query_store)  # after a read in progress
        with contextlib.suppress(FutureTimeout):
            closed.result(timeout=self._config.store_timeout_seconds)
        self._queries.shutdown(wait=False)
        self._ledger.close()
        self._local.close()
