"""encoder_node: camera frames in; one V-JEPA-2 FrameEmbedding per encoder window out.

Several cameras (``cameras``): one subscription each, one model for all of them.
"""

from __future__ import annotations

from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import NODE_CONFIGS, NodeConfig
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.camera_inputs import CameraInputs
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.encoder_part import EncoderPart
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.qos import RELIABLE
from surprise_memory.nodes.runtime import frame_from_msg, run_node


class EncoderNode(ManagedNode):
    """Buffers camera frames and encodes each window of the M newest with V-JEPA-2.

    The work is :class:`~surprise_memory.nodes.encoder_part.EncoderPart` (shared with
    ``pipeline_node``); this node converts the camera messages (``/diagnostics``:
    frames_in, and each camera's delivery: :mod:`~surprise_memory.nodes.delivery`) and
    publishes each embedding on ``embedding``, in stamp order per camera.
    """

    def __init__(self) -> None:
        super().__init__("encoder_node", NODE_CONFIGS["encoder_node"])

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: load the model (slow, can fail), start its thread, publisher."""
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._cameras = CameraInputs(self, self._stats, values, self._reset)
        self._pub = self.create_publisher(FrameEmbedding, "embedding", RELIABLE)
        self._part = EncoderPart(self, self._stats, self._pub.publish, self._cameras.deliveries())
        self._part.setup(values)
        self.apply_parts(values, self._stats, self._part.appliers())

    def _reset(self, camera: str) -> None:
        self._part.reset(camera)

    def subscribe(self) -> None:
        """Activate: camera frames in."""
        self._stats.restart_inputs()
        self._cameras.subscribe(self._on_image)

    def teardown(self) -> None:
        """Cleanup: stop the model thread and drop the model (its GPU memory goes back)."""
        if "_part" in self.__dict__:
            self._part.teardown()

    def flush(self) -> None:
        """Stop the model thread (the windows still queued are not encoded)."""
        self._part.flush()

    def _on_image(self, camera: str, msg: Image | CompressedImage) -> None:
        frame = frame_from_msg(msg, self._stats)
        order = self._cameras[camera].order
        if frame is None or not order.check(frame.stamp_ns):
            return
        self._cameras[camera].delivery.observe(frame.stamp_ns)
        if self._part.push(frame, camera):
            order.commit(frame.stamp_ns)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory encoder_node``."""
    return run_node(EncoderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
