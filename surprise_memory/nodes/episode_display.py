"""The stored episodes on the robot's displays: ``episode_markers`` and the episode preview.

:class:`EpisodeDisplay` is part of the memory node (and of ``pipeline_node``), hosted by
:class:`~surprise_memory.nodes.memory_part.MemoryPart`:

* ``episode_markers`` (``visualization_msgs/MarkerArray``, reliable, transient local, keep
  last 1): the newest ``marker_max_episodes`` episodes of this robot that have a pose, as
  an arrow and a label each (:mod:`surprise_memory.memory.episode_markers`). Every message
  is the whole set: a DELETEALL, then the markers. It is sent at configure (what the store
  already holds: a restarted node, or a display that joins late, sees them all) and after
  each stored episode, read again from the store, so an episode the disk budget evicted is
  gone from the next message whichever backend evicted it.
* ``episode_preview/compressed`` (``sensor_msgs/CompressedImage``, the stored JPEGs as they
  are; reliable, transient local, keep last 9): the frames of the newest episode, sent once
  when it is stored and then its trigger's frame again (a display rests on the newest
  image: the episode's picture, as in every view), then replayed from there at
  ``episode_preview_fps`` while something subscribes
  (the topic name follows image_transport, so RViz's Image display and ``rqt_image_view``
  find it as the ``compressed`` transport of ``episode_preview``).

Reading the store happens once per stored episode (in the writer's thread) or per settings
change, never per camera frame.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from geometry_msgs.msg import Point, Quaternion
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from surprise_memory.config import DisplayConfig
from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.memory.episode_markers import EpisodeMarker, episode_marker, newest_episodes
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.store import EpisodeRecord, EpisodeStoreBackend
from surprise_memory.memory.store.records import resolve_robot_id
from surprise_memory.nodes.clock import steady_clock
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import jpeg_msgs
from surprise_memory.nodes.qos import MARKERS, PREVIEW, overridable
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "ARROWS_NS",
    "LABELS_NS",
    "MARKERS_TOPIC",
    "PREVIEW_TOPIC",
    "EpisodeDisplay",
    "marker_array",
]

MARKERS_TOPIC = "episode_markers"
"""The markers' topic, relative to the node's namespace (``/surprise_memory``)."""

PREVIEW_TOPIC = "episode_preview/compressed"
"""The preview's topic: the ``compressed`` transport of ``episode_preview`` (image_transport's
naming, which RViz's Image display and ``rqt_image_view`` recognise)."""

ARROWS_NS = "episodes"
"""Marker namespace of the episodes' arrows (RViz lists it, so arrows and labels toggle apart)."""

LABELS_NS = "episode_labels"
"""Marker namespace of the episodes' labels."""

_WHITE = ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0)
_IDLE_PERIOD_S = 1.0  # the preview timer's period while replay is off (episode_preview_fps 0)


def marker_array(markers: Sequence[EpisodeMarker]) -> MarkerArray:
    """The whole display: a DELETEALL, then an arrow and a label per episode.

    Stamps are zero, so a display places each marker with the latest transform of its
    frame (an episode may be older than the display's tf buffer).
    """
    out = [Marker(action=Marker.DELETEALL)]
    for i, m in enumerate(markers):
        arrow = Marker(ns=ARROWS_NS, id=i, type=Marker.ARROW, action=Marker.ADD)
        arrow.header.frame_id = m.frame_id
        arrow.pose.position = Point(x=m.position[0], y=m.position[1], z=m.position[2])
        x, y, z, w = m.orientation
        arrow.pose.orientation = Quaternion(x=x, y=y, z=z, w=w)
        arrow.scale.x, arrow.scale.y, arrow.scale.z = m.length_m, m.width_m, m.width_m
        arrow.color = ColorRGBA(r=m.rgba[0], g=m.rgba[1], b=m.rgba[2], a=m.rgba[3])
        label = Marker(ns=LABELS_NS, id=i, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        label.header.frame_id = m.frame_id
        lx, ly, lz = m.label_position
        label.pose.position = Point(x=lx, y=ly, z=lz)
        label.pose.orientation.w = 1.0
        label.scale.z = m.label_height_m
        label.color = _WHITE
        label.text = m.label
        out += [arrow, label]
    return MarkerArray(markers=out)


class EpisodeDisplay:
    """Publishes the store's episodes as markers and the newest episode's frames.

    Args:
        node: The host node (publishers, timer, logger).
        stats: The host's counters (``episode_markers``: markers in the last message;
            ``rejected_display``: store reads that failed).
        store: The open store (read only here).
        config: The display settings.

    """

    def __init__(
        self, node: Any, stats: NodeStats, store: EpisodeStoreBackend, config: DisplayConfig
    ) -> None:
        self._stats = stats
        self._store = store
        self._config = config
        self._robot_id = resolve_robot_id(None, store.config.robot_id)  # whose evictions we see
        self._lock = threading.Lock()  # one refresh at a time: the newest state goes out last
        self._preview: list[CompressedImage] = []  # replaced whole, never changed in place
        self._next_frame = 0
        self._markers_pub = node.create_publisher(
            MarkerArray, MARKERS_TOPIC, MARKERS, qos_overriding_options=overridable()
        )
        self._preview_pub = node.create_publisher(
            CompressedImage, PREVIEW_TOPIC, PREVIEW, qos_overriding_options=overridable()
        )
        # wall time, like the node's other timers: the replay goes on when a bag is paused
        self._timer = node.create_timer(self._period_s(), self._on_tick, clock=steady_clock())
        stats.add_values(self._applied)

    def show_store(self) -> None:
        """Configure: the markers of what the store holds, and its newest episode's frames."""
        newest = self.refresh()
        if newest:
            self._show_frames(newest[0])

    def on_stored(self, record: EpisodeRecord) -> None:
        """An episode was stored (writer thread): markers again, and its frames."""
        self.refresh()
        self._show_frames(record)

    def reconfigure(self, config: DisplayConfig) -> None:
        """Apply new display settings live: the markers are sent again with them."""
        self._config = config
        self._timer.timer_period_ns = int(self._period_s() * NS_PER_SECOND)
        self.refresh()

    def refresh(self) -> list[EpisodeRecord]:
        """Read the newest episodes and send their markers; returns them (newest first).

        A store that cannot be read is counted (``rejected_display``) and the last markers
        stay; the node goes on.
        """
        cfg = self._config
        with self._lock:
            try:
                records = newest_episodes(
                    self._store, cfg.marker_max_episodes, robot_id=self._robot_id
                )
                origin = self._store.origin_ns
            except SurpriseMemoryError as exc:
                self._stats.reject("display", f"cannot read the episodes to show: {exc}")
                return []
            markers = [episode_marker(r, origin, cfg.marker_size_m) for r in records]
            shown = [m for m in markers if m is not None]
            self._markers_pub.publish(marker_array(shown))
        self._stats.set(episode_markers=str(len(shown)))
        return records

    def _show_frames(self, record: EpisodeRecord) -> None:
        """Send an episode's stored JPEGs once, and replay them from now on."""
        try:
            jpegs = record.load_jpegs()
        except SurpriseMemoryError as exc:  # evicted meanwhile, or unreadable
            self._stats.reject("display", f"no preview of episode {record.id}: {exc}")
            return
        frames = jpeg_msgs(jpegs, record.frame_stamps_ns, record.pose.frame_id)
        for frame in frames:
            self._preview_pub.publish(frame)
        trigger = trigger_frame_index(record.frame_stamps_ns, record.stamp_ns)
        if trigger < len(frames) - 1:  # a display shows the newest image: let it be this one
            self._preview_pub.publish(frames[trigger])
        self._preview, self._next_frame = frames, trigger + 1

    def _on_tick(self) -> None:
        """Replay the newest episode, one frame per tick, while something watches."""
        frames = self._preview
        if not frames or self._config.episode_preview_fps == 0.0:
            return
        if self._preview_pub.get_subscription_count() == 0:
            return
        self._preview_pub.publish(frames[self._next_frame % len(frames)])
        self._next_frame += 1

    def _applied(self) -> dict[str, object]:
        """The settings as the display uses them (``applied.<name>`` on ``/diagnostics``)."""
        period_s = self._timer.timer_period_ns / NS_PER_SECOND
        fps = 1.0 / period_s if self._config.episode_preview_fps > 0.0 else 0.0
        values = {**self._config.as_dict(), "episode_preview_fps": round(fps, 6)}
        return {f"applied.{k}": v for k, v in values.items()}

    def _period_s(self) -> float:
        fps = self._config.episode_preview_fps
        return 1.0 / fps if fps > 0.0 else _IDLE_PERIOD_S
