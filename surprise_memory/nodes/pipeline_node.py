"""pipeline_node: encoder, scorer and memory in one process, one subscription per camera.

For the common robot with one GPU: each camera frame is converted once and handed in
memory to the encoder's window buffer and to the memory's frame history (each camera's
own, one model batching every camera's windows); each embedding
is handed to the scorer and each event to the memory without crossing DDS. The topics,
the service and the diagnostics counters are those of the three-node split
(``encoder_node``, ``scorer_node``, ``memory_node``), which stays for distributed setups;
on the same frames both give the same embeddings, scores, events and episodes.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import NODE_CONFIGS, NodeConfig
from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.camera_inputs import CameraInputs
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.encoder_part import EncoderPart
from surprise_memory.nodes.lifecycle import ManagedNode
from surprise_memory.nodes.memory_part import MemoryPart
from surprise_memory.nodes.qos import RELIABLE
from surprise_memory.nodes.runtime import frame_from_msg, run_node
from surprise_memory.nodes.scorer_part import ScorerPart
from surprise_memory.perception.frames import CompressedFrame, Frame, compressed_frame_from_msg

HANDOVER_DEPTH = 100
"""Embeddings waiting between the model thread and the scorer: the depth of the split's
``embedding`` topic (``qos.RELIABLE``). The scorer takes microseconds per embedding, so
the queue is empty but for bursts; an overflow drops the oldest, counted
(``embeddings_dropped``)."""


class PipelineNode(ManagedNode):
    """The three nodes' work in one managed node, frames and results handed over in memory.

    Threads: the camera callback, the scorer and the memory's event and episode intake
    run in the executor's default callback group (one at a time, as in the split
    nodes); the model runs in the encoder's thread and hands each embedding over through
    a bounded queue and a guard condition, so the scorer and its pose lookups stay in the
    executor thread that also delivers ``/tf`` and odometry; retrievals and the episode
    writer have their own threads, as in ``memory_node``.

    ``embedding`` is published only while something subscribes to it (the scorer gets
    the embeddings directly); ``surprise``, ``events``, ``episodes``,
    ``retrieve_episodes`` and ``/diagnostics`` (one status, ``pipeline_node``) are as in
    the split. Parameters: the union of the three nodes' (one name, one default).
    """

    executor_threads = 2  # the pipeline in one group, retrievals in another

    def __init__(self) -> None:
        super().__init__("pipeline_node", NODE_CONFIGS["pipeline_node"])

    def setup(self, values: dict[str, Any]) -> None:
        """Configure: open the store, load both models (slow; any can fail), publishers."""
        self._stats = NodeStats(self, NodeConfig.from_mapping(values))
        self._cameras = CameraInputs(self, self._stats, values, self._reset)
        self._embedding_pub = self.create_publisher(FrameEmbedding, "embedding", RELIABLE)
        self._handover: deque[FrameEmbedding] = deque()
        self._handover_lock = threading.Lock()
        self._guard = self.create_guard_condition(self._score_handed_over)
        self._memory = MemoryPart(self, self._stats, own_poses=False)
        self._scorer = ScorerPart(self, self._stats, on_event=self._memory.on_event)
        deliveries = self._cameras.deliveries()
        self._encoder = EncoderPart(self, self._stats, self._hand_over, deliveries)
        self._memory.setup(values)  # first: the store fails fast
        self._scorer.setup(values)
        self._memory.use_poses(self._scorer.poses)  # place keyframes: the scorer's tf, odometry
        self._encoder.setup(values)  # last: its thread starts emitting
        appliers = {
            **self._encoder.appliers(),
            **self._scorer.appliers(),
            **self._memory.appliers(),
        }
        self.apply_parts(values, self._stats, appliers)

    def subscribe(self) -> None:
        """Activate: cameras (and odometry) in, retrievals served."""
        self._stats.restart_inputs()
        self._scorer.subscribe()
        self._memory.subscribe()
        self._cameras.subscribe(self._on_image)

    def teardown(self) -> None:
        """Cleanup: stop the model thread, store what is pending, drop both models."""
        if "_encoder" in self.__dict__:
            self._encoder.teardown()
        if "_memory" in self.__dict__:
            self._memory.teardown()

    def flush(self) -> None:
        """Shutdown: score what the model finished, then store every pending episode.

        The gate's pending events become episodes, stored before the store closes.
        """
        self._encoder.flush()
        self._score_handed_over()
        self._scorer.flush()
        self._memory.flush()

    def _reset(self, camera: str) -> None:
        """A camera's time went backwards: new sequences for its encoder and memory.

        The scorer resets itself when the embeddings' stamps go back, as in the split:
        windows of the old sequence may still be on their way through the model.
        """
        self._encoder.reset(camera)
        self._memory.reset(camera)

    def _on_image(self, camera: str, msg: Image | CompressedImage) -> None:
        frame = frame_from_msg(msg, self._stats)  # decoded once, for the encoder
        order = self._cameras[camera].order
        if frame is None or not order.check(frame.stamp_ns):
            return
        order.commit(frame.stamp_ns)
        self._cameras[camera].delivery.observe(frame.stamp_ns)
        kept: Frame | CompressedFrame = frame
        if self._cameras.compressed:  # the history keeps the bytes, as memory_node does
            try:
                kept = compressed_frame_from_msg(msg)
            except SurpriseMemoryError as exc:
                self._stats.reject("image", str(exc))
                return
        self._encoder.push(frame, camera)
        self._memory.add_frame(kept, camera)

    def _hand_over(self, msg: FrameEmbedding) -> None:
        """From the model thread: queue an embedding for the scorer and wake the executor."""
        with self._handover_lock:
            if len(self._handover) >= HANDOVER_DEPTH:
                self._handover.popleft()
                self._stats.count("embeddings_dropped")
            self._handover.append(msg)
        self._guard.trigger()

    def _score_handed_over(self) -> None:
        """Executor thread: score every embedding handed over, oldest first."""
        while True:
            with self._handover_lock:
                if not self._handover:
                    return
                msg = self._handover.popleft()
            if self._embedding_pub.get_subscription_count():
                self._embedding_pub.publish(msg)
            self._scorer.on_embedding(msg)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory pipeline_node``."""
    return run_node(PipelineNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
