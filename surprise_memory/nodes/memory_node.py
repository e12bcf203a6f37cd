"""memory_node: camera + SurpriseEvent in; stored episodes out; retrievals and goals served."""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import NODE_CONFIGS, NodeConfig
from surprise_memory.msg import SurpriseEvent
from surprise_memory.nodes.camera_inputs import CameraInputs
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.memory_part import MemoryPart
from surprise_memory.nodes.qos import LATCHED, overridable
from surprise_memory.nodes.runtime import held_frame_from_msg, run_node

CONFIGS = NODE_CONFIGS["memory_node"]


class MemoryNode(ManagedNode):
    """Keeps the recent camera frames, stores an episode per event, answers retrievals.

    Subscribes the cameras and ``events``; publishes ``episodes``, ``episode_markers`` and
    ``episode_preview/compressed``, and serves ``retrieve_episodes`` and ``go_to_episode``
    (an episode as a Nav2 goal). The work is
    :class:`~surprise_memory.nodes.memory_part.MemoryPart` (shared with ``pipeline_node``).
    """

    executor_threads = 2  # camera/events/timer in one group, retrievals in another

    def __init__(self) -> None:
        super().__init__("memory_node", CONFIGS)

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: open the store, load the embedder (slow; either can fail), writer."""
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._cameras = CameraInputs(self, self._stats, values, self._reset)
        self._events_watch = self._stats.watch_input("events", "no scorer", streaming=False)
        self._part = MemoryPart(self, self._stats)
        self._part.setup(values)
        self.apply_parts(values, self._stats, self._part.appliers())

    def _reset(self, camera: str) -> None:
        self._part.reset(camera)

    def subscribe(self) -> None:
        """Activate: cameras and events in, retrievals served."""
        self._stats.restart_inputs()
        self._cameras.subscribe(self._on_image)
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

    def _on_image(self, camera: str, msg: Image | CompressedImage) -> None:
        frame = held_frame_from_msg(msg, self._cameras.compressed, self._stats)
        order = self._cameras[camera].order
        if frame is None or not order.check(frame.stamp_ns):
            return
        order.commit(frame.stamp_ns)
        self._cameras[camera].delivery.observe(frame.stamp_ns)
        self._part.add_frame(frame, camera)

    def _on_event(self, msg: SurpriseEvent) -> None:
        self._stats.seen(self._events_watch)
        self._part.on_event(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory memory_node``."""
    return run_node(MemoryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
