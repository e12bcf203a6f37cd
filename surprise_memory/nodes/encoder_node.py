"""encoder_node: camera frames in; one V-JEPA-2 FrameEmbedding per encoder window out."""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import NODE_CONFIGS, CameraConfig, NodeConfig
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.delivery import CameraDelivery
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.encoder_part import EncoderPart
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.qos import RELIABLE, subscribe_camera
from surprise_memory.nodes.runtime import StampOrder, frame_from_msg, run_node


class EncoderNode(ManagedNode):
    """Buffers camera frames and encodes each window of the M newest with V-JEPA-2.

    The work is :class:`~surprise_memory.nodes.encoder_part.EncoderPart` (shared with
    ``pipeline_node``); this node converts the camera messages (``/diagnostics``:
    frames_in, and the camera's delivery: :mod:`~surprise_memory.nodes.delivery`) and
    publishes each embedding on ``embedding``, in stamp order.
    """

    def __init__(self) -> None:
        super().__init__("encoder_node", NODE_CONFIGS["encoder_node"])

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: load the model (slow, can fail), start its thread, publisher."""
        self._camera = CameraConfig.from_mapping(values)
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._camera_watch = self._stats.watch_input("image", "no camera", streaming=True)
        self._pub = self.create_publisher(FrameEmbedding, "embedding", RELIABLE)
        self._delivery = CameraDelivery(self._stats, self._camera.camera_loss_warn)
        self._part = EncoderPart(self, self._stats, self._pub.publish, self._delivery)
        self._part.setup(values)
        self._order = StampOrder(self, self._stats, self._part.reset)
        self.apply_parts(values, self._stats, self._part.appliers())

    def subscribe(self) -> None:
        """Activate: camera frames in."""
        self._stats.restart_inputs()
        subscribe_camera(self, self._camera, self._on_image, self._delivery)

    def teardown(self) -> None:
        """Cleanup: stop the model thread and drop the model (its GPU memory goes back)."""
        if "_part" in self.__dict__:
            self._part.teardown()

    def flush(self) -> None:
        """Stop the model thread (the windows still queued are not encoded)."""
        self._part.flush()

    def _on_image(self, msg: Image | CompressedImage) -> None:
        self._stats.seen(self._camera_watch)
        frame = frame_from_msg(msg, self._stats)
        if frame is None or not self._order.check(frame.stamp_ns):
            return
        self._delivery.observe(frame.stamp_ns)
        if self._part.push(frame):
            self._order.commit(frame.stamp_ns)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory encoder_node``."""
    return run_node(EncoderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
