"""The snapshot trigger inside a node: stored episodes ask a bag recorder for a snapshot.

:class:`SnapshotPart` is created by :class:`~surprise_memory.nodes.memory_part.MemoryPart`,
so ``memory_node`` and ``pipeline_node`` both have it; it is off while ``snapshot_service``
is empty. When to call is the core's (:class:`~surprise_memory.memory.snapshot.SnapshotPlanner`:
one call per burst, an optional aftermath call); here are the client, the timer that polls
it, and the notes written to the store (in a thread of their own: neither the camera path
nor the episode writer ever waits for the recorder or for these writes).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Mapping
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from surprise_memory.config import ComponentConfig, EpisodeConfig, SnapshotConfig, settings_of
from surprise_memory.health import Finding, Level, counted_finding
from surprise_memory.memory.snapshot import SnapshotCall, SnapshotNote, SnapshotPlanner
from surprise_memory.memory.store import EpisodeStoreBackend
from surprise_memory.memory.writer import EpisodeWriter
from surprise_memory.nodes.clock import steady_clock
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.parameters import Applier

__all__ = ["SNAPSHOT_TYPE", "SnapshotPart", "snapshot_type"]

SNAPSHOT_TYPE = "rosbag2_interfaces/srv/Snapshot"
"""The recorder's service type (request empty; response ``bool success``)."""

_POLL_S = 0.2  # the timer that makes due calls and collects answers
_PENDING_NOTES = 64  # notes waiting for the store
_CLOSE_TIMEOUT_S = 5.0
_S = 1_000_000_000


def snapshot_type() -> Any | None:
    """``rosbag2_interfaces.srv.Snapshot`` where rosbag2 is installed, else None."""
    package, _, name = SNAPSHOT_TYPE.partition("/srv/")
    try:
        return getattr(importlib.import_module(f"{package}.srv"), name)
    except (ImportError, AttributeError):
        return None


class SnapshotPart:
    """Asks the recorder for a snapshot per burst of stored episodes; notes the answers.

    Counted in the diagnostics: ``snapshots_requested``, ``snapshots_saved``,
    ``snapshots_failed`` (refused, or no answer in time) and ``snapshots_unavailable`` (no
    recorder serves the service, or rosbag2_interfaces is not installed); a missing
    recorder is a WARN, never an error of the episode.

    Args:
        node: The host node.
        stats: The host's counters.
        store: The episode store (the notes go there).

    """

    def __init__(self, node: Any, stats: NodeStats, store: EpisodeStoreBackend) -> None:
        self._node = node
        self._stats = stats
        self._store = store
        self._enabled = False
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether a snapshot service is configured."""
        return self._enabled

    def setup(self, values: Mapping[str, Any]) -> None:
        """Configure: the client, the timer and the note writer (nothing when off)."""
        self._config = SnapshotConfig.from_mapping(values)
        self._enabled = bool(self._config.snapshot_service)
        self._stats.add_values(self._applied)
        if not self._enabled:
            return
        episode = EpisodeConfig.from_mapping(values)
        need = (
            self._config.snapshot_hold_seconds
            + episode.episode_before_seconds
            + episode.episode_after_seconds
        )
        if need > self._config.snapshot_buffer_seconds:
            self._node.get_logger().warning(
                f"snapshot_hold_seconds + the episode window = {need:g} s exceeds "
                f"snapshot_buffer_seconds = {self._config.snapshot_buffer_seconds:g} s: a "
                "snapshot may no longer hold the start of its first episode"
            )
        self._type = snapshot_type()
        self._planner = SnapshotPlanner(*self._durations(self._config))
        self._inflight: tuple[SnapshotCall, int, Any, float] | None = None
        group = MutuallyExclusiveCallbackGroup()  # the timer and the client's answers
        self._client = None
        if self._type is not None:
            self._client = self._node.create_client(
                self._type, self._config.snapshot_service, callback_group=group
            )
        self._notes: EpisodeWriter[tuple[tuple[str, ...], SnapshotNote], int] = EpisodeWriter(
            lambda item: self._store.note_snapshot(*item),
            on_done=lambda item, n: None,
            on_error=lambda item, exc: self._stats.reject(
                "snapshot_note", f"{type(exc).__name__}: {exc}"
            ),
            capacity=_PENDING_NOTES,
            name="snapshot-notes",
        )
        self._node.create_timer(_POLL_S, self._on_timer, callback_group=group, clock=steady_clock())
        self._stats.set(snapshot_service=self._config.snapshot_service)
        self._stats.add_check(self._health)

    @staticmethod
    def _durations(config: SnapshotConfig) -> tuple[int, int]:
        return (
            round(config.snapshot_hold_seconds * _S),
            round(config.snapshot_aftermath_seconds * _S),
        )

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes (hold, buffer, aftermath, timeout; the service is read-only)."""
        return {SnapshotConfig: self._apply}

    def _apply(self, config: SnapshotConfig) -> None:
        self._config = config
        if self._enabled:
            self._planner.reconfigure(*self._durations(config))

    def _applied(self) -> dict[str, object]:
        """The writable settings as the next call uses them (``applied.<name>``)."""
        writable = (s.name for s in settings_of(SnapshotConfig) if not s.read_only)
        return {f"applied.{name}": getattr(self._config, name) for name in writable}

    def on_stored(self, episode_id: str) -> None:
        """An episode was stored (writer thread): it joins the next snapshot call."""
        if self._enabled:
            self._planner_add(episode_id)

    def _planner_add(self, episode_id: str) -> None:
        with self._lock:  # the writer thread adds, the timer takes
            self._planner.add(episode_id, time.monotonic_ns())

    def close(self) -> None:
        """Write the notes still queued (before the store closes)."""
        if self._enabled and "_notes" in self.__dict__:
            with self._lock:
                waiting = self._planner.waiting
            if waiting:
                self._node.get_logger().warning(
                    f"shutting down: {waiting} stored episode(s) get no snapshot (their "
                    "call was not due yet)"
                )
            self._notes.close(timeout=_CLOSE_TIMEOUT_S)

    # --- the timer (its own callback group) ---
    def _on_timer(self) -> None:
        self._collect()
        now, requested = time.monotonic_ns(), time.time_ns()  # the note's stamp: this tick's
        with self._lock:
            call = self._planner.due(now, busy=self._inflight is not None)
        if call is not None:
            self._ask(call, requested)

    def _ask(self, call: SnapshotCall, requested: int) -> None:
        self._stats.count("snapshots_requested")
        service = self._config.snapshot_service
        if self._client is None or not self._client.service_is_ready():
            why = (
                f"{SNAPSHOT_TYPE} is not installed (no rosbag2)"
                if self._client is None
                else f"no recorder serves {service} (is `ros2 bag record --snapshot-mode` running?)"
            )
            self._stats.count("snapshots_unavailable")
            self._node.get_logger().warning(
                f"snapshot for {len(call.episode_ids)} episode(s) not taken: {why}",
                throttle_duration_sec=30.0,
            )
            self._note(call, SnapshotNote(call.kind, requested, 0, False, why))
            return
        assert self._type is not None  # the client exists
        request = self._type.Request()
        future = self._client.call_async(request)
        deadline = time.monotonic() + self._config.snapshot_timeout_seconds
        self._inflight = (call, requested, future, deadline)

    def _collect(self) -> None:
        """The answer of the call in flight, if it came (or its timeout passed)."""
        if self._inflight is None:
            return
        call, requested, future, deadline = self._inflight
        if future.done():
            exc = future.exception()
            if exc is not None:
                ok, why = False, f"{type(exc).__name__}: {exc}"
            else:
                ok = bool(future.result().success)
                why = "" if ok else "the recorder answered success=false"
        elif time.monotonic() > deadline:
            assert self._client is not None
            self._client.remove_pending_request(future)
            timeout = self._config.snapshot_timeout_seconds
            service = self._config.snapshot_service
            ok, why = False, f"{service}: no answer within snapshot_timeout_seconds={timeout:g}"
        else:
            return
        self._inflight = None
        self._stats.count("snapshots_saved" if ok else "snapshots_failed")
        note = SnapshotNote(call.kind, requested, time.time_ns(), ok, why)
        log = self._node.get_logger()
        what = f"{call.kind} snapshot for {len(call.episode_ids)} episode(s)"
        if ok:
            log.info(f"{what}: saved by {self._config.snapshot_service}")
        else:
            log.warning(f"{what}: failed: {why}")
        self._note(call, note)

    def _note(self, call: SnapshotCall, note: SnapshotNote) -> None:
        if not self._notes.put((call.episode_ids, note)):
            self._stats.reject("snapshot_note", "the store cannot keep up; snapshot note dropped")

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        service = self._config.snapshot_service
        missing: Finding | None = None
        if self._client is None:
            missing = Finding(Level.WARN, f"snapshots off: {SNAPSHOT_TYPE} is not installed")
        elif not self._client.service_is_ready():
            missing = Finding(Level.WARN, f"no snapshot recorder at {service}")
        return [
            missing,
            counted_finding(delta, "snapshots_unavailable", Level.WARN, "snapshot(s) not taken"),
            counted_finding(delta, "snapshots_failed", Level.WARN, "snapshot(s) failed"),
        ]
