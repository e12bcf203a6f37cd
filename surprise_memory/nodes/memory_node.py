"""memory_node: camera + SurpriseEvent in; stored episodes out; retrievals and goals served."""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import NODE_CONFIGS, CameraConfig, NodeConfig
from surprise_memory.msg import SurpriseEvent
from surprise_memory.nodes.delivery import CameraDelivery
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.memory_part import MemoryPart
from surprise_memory.nodes.qos import LATCHED, overridable, subscribe_camera
from surprise_memory.nodes.runtime import StampOrder, run_node

CONFIGS = NODE_CONFIGS["memory_node"]


class MemoryNode(ManagedNode):
    """Keeps the recent camera frames, stores an episode per event, answers retrievals.

    Subscribes the camera and ``events``; publishes ``episodes``, ``episode_markers`` and
    ``episode_preview/compressed``, and serves ``retrieve_episodes`` and ``go_to_episode``
    (an episode as a Nav2 goal). The work is
    :class:`~surprise_memory.nodes.memory_part.MemoryPart` (shared with ``pipeline_node``).
    """

    executor_threads = 2  # camera/events/timer in one group, retrievals in another

    def __init__(self) -> None:
        super().__init__("memory_node", CONFIGS)

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: open the store, load the embedder (slow; either can fail), writer."""
        self._camera = CameraConfig.from_mapping(values)
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._camera_watch = self._stats.watch_input("image", "no camera", streaming=True)
        self._events_watch = self._stats.watch_input("events", "no scorer", streaming=False)
        self._delivery = CameraDelivery(self._stats, self._camera.camera_loss_warn)
        self._part = MemoryPart(self, self._stats)
        self._part.setup(values)
        self._order = StampOrder(self, self._stats, self._part.reset)
        self.apply_parts(values, self._stats, self._part.appliers())

    def subscribe(self) -> None:
        """Activate: camera and events in, retrievals served."""
        self._stats.restart_inputs()
        subscribe_camera(self, self._camera, self._on_image, self._delivery)
        # transient local: events published before this node joined (or restarted) arrive
        self.create_subscription(
            SurpriseEvent,
            "events",
            self._on_event,
            LATCHED,
            qos_overriding_options=overridable(),
        )
        self._part.subscribe()

    def teardown(self) -> None:
        """Cleanup: store what is pending, close the store, drop the embedder."""
        if "_part" in self.__dict__:
            self._part.teardown()

    def flush(self) -> None:
        """Store the episodes still pending (end of a bag), then close the store."""
        self._part.flush()

    def _on_image(self, msg: Image | CompressedImage) -> None:
        self._stats.seen(self._camera_watch)
        frame = self._part.frame_from_msg(msg)
        if frame is None or not self._order.check(frame.stamp_ns):
            return
        self._order.commit(frame.stamp_ns)
        self._delivery.observe(frame.stamp_ns)
        self._part.add_frame(frame)

    def _on_event(self, msg: SurpriseEvent) -> None:
        self._stats.seen(self._events_watch)
        self._part.on_event(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory memory_node``."""
    return run_node(MemoryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
