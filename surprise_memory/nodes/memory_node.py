"""memory_node: camera + SurpriseEvent in; stored episodes out; retrieve_episodes served."""

from __future__ import annotations

import math
import queue
import threading

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock
from rclpy.clock_type import ClockType
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import CameraConfig, EmbedderConfig, EpisodeConfig, StoreConfig
from surprise_memory.errors import InputError, SurpriseMemoryError
from surprise_memory.memory.episodes import EpisodeAssembler, EpisodeFrames
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import (
    EpisodeRecord,
    RetrievalHit,
    decode_jpeg,
    describe_location,
    open_store,
)
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import (
    image_msg_from_rgb,
    ns_to_time,
    pose_from_msg,
    pose_to_msg,
    time_to_ns,
)
from surprise_memory.nodes.parameters import declare_settings
from surprise_memory.nodes.qos import RELIABLE, subscribe_camera
from surprise_memory.nodes.runtime import StampOrder, frame_from_msg, run_node
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.perception.frames import rgb_from_image_msg
from surprise_memory.srv import RetrieveEpisodes
from surprise_memory.surprise.gate import SurpriseTrigger

_PENDING_EPISODES = 32  # episodes waiting for the embedder; more means it cannot keep up


def episode_to_msg(record: EpisodeRecord, images: list[np.ndarray] | None = None) -> Episode:
    """A stored episode as a surprise_memory/Episode message."""
    msg = Episode(
        id=record.id,
        start=ns_to_time(record.start_ns),
        end=ns_to_time(record.end_ns),
        pose=pose_to_msg(record.pose),
        pose_valid=record.pose_valid,
        surprise=record.surprise,
        threshold=record.threshold,
        frame_stamps=[ns_to_time(t) for t in record.frame_stamps_ns],
        frame_uris=list(record.frame_paths),
    )
    msg.header.stamp = ns_to_time(record.stamp_ns)
    msg.header.frame_id = record.pose.frame_id
    if images:
        msg.frames = [
            image_msg_from_rgb(rgb, stamp, record.pose.frame_id)
            for rgb, stamp in zip(images, record.frame_stamps_ns, strict=False)
        ]
    return msg


class MemoryNode(Node):
    """Keeps the recent camera frames, stores an episode per event, answers retrievals.

    On each SurpriseEvent it waits for the frames after the trigger
    (``EpisodeAssembler``), embeds the episode's frames with PE-Core in its own thread,
    writes them to the store and publishes ``episodes``. ``retrieve_episodes`` answers
    text, image, time and place queries; invalid requests get ``success=false`` and a
    reason, and the node keeps serving.
    """

    executor_threads = 2  # camera/events/timer in one group, retrievals in another

    def __init__(self) -> None:
        super().__init__("memory_node")
        values = declare_settings(self, CameraConfig, EpisodeConfig, EmbedderConfig, StoreConfig)
        camera = CameraConfig.from_mapping(values)
        store_cfg = StoreConfig.from_mapping(values)
        self._embedder = ImageTextEmbedder.from_config(EmbedderConfig.from_mapping(values))
        self._embed_lock = threading.Lock()  # one model, two threads (episodes, queries)
        path = describe_location(store_cfg.store_path)  # a folder, or a URL without password
        self._store = open_store(store_cfg.store_path, store_cfg)
        self._assembler = EpisodeAssembler(EpisodeConfig.from_mapping(values))
        self._events: dict[int, SurpriseEvent] = {}  # trigger stamp -> event, until stored
        self._stats = NodeStats(self)
        self._stats.set(
            store=path, embedder=self._embedder.model_name, episodes_in_store=str(len(self._store))
        )
        self._order = StampOrder(self, self._stats, self._reset)
        self._work: queue.Queue[EpisodeFrames | None] = queue.Queue(maxsize=_PENDING_EPISODES)
        self._episode_pub = self.create_publisher(Episode, "episodes", RELIABLE)
        subscribe_camera(self, camera, self._on_image)
        self.create_subscription(SurpriseEvent, "events", self._on_event, RELIABLE)
        # queries (which may run the text/image tower) in their own group and thread, so a
        # retrieval never holds up the camera callback; the store and the embedder lock
        # make the two safe together
        self.create_service(
            RetrieveEpisodes,
            "retrieve_episodes",
            self._on_retrieve,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        # fires on wall time; compares with the node's clock (sim time during a bag replay)
        self.create_timer(1.0, self._on_timer, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._worker = threading.Thread(target=self._store_loop, name="episodes", daemon=True)
        self._worker.start()
        self.get_logger().info(f"episode store at {path} ({len(self._store)} episodes)")

    # --- camera and events (executor thread) ---
    def _on_image(self, msg: Image | CompressedImage) -> None:
        frame = frame_from_msg(msg, self._stats)
        if frame is None or not self._order.check(frame.stamp_ns):
            return
        self._order.commit(frame.stamp_ns)
        self._enqueue(self._assembler.add_frame(frame))

    def _reset(self) -> None:
        self._assembler.reset()
        self._events.clear()

    def _on_event(self, msg: SurpriseEvent) -> None:
        stamp = time_to_ns(msg.header.stamp)
        if not math.isfinite(msg.score):
            self._stats.reject("event", f"event at {stamp} ns has score {msg.score}")
            return
        self._events[stamp] = msg
        trigger = SurpriseTrigger(
            stamp_ns=stamp,
            score=msg.score,
            threshold=msg.threshold,
            decided_ns=time_to_ns(msg.decided),
            kl=msg.kl,
        )
        self._stats.count("events_in")
        self._enqueue(self._assembler.add_trigger(trigger))

    def _on_timer(self) -> None:
        # a camera that stopped: build episodes whose window ended long enough ago
        self._enqueue(self._assembler.take_ready(now_ns=self.get_clock().now().nanoseconds))

    def _enqueue(self, episodes: list[EpisodeFrames]) -> None:
        for episode in episodes:
            try:
                self._work.put_nowait(episode)
            except queue.Full:
                self._events.pop(episode.trigger.stamp_ns, None)
                self._stats.reject("episode", "the embedder cannot keep up; episode dropped")

    # --- storing (worker thread) ---
    def _store_loop(self) -> None:
        while (episode := self._work.get()) is not None:
            event = self._events.pop(episode.trigger.stamp_ns, None)
            try:
                record = self._store_episode(episode, event)
            except SurpriseMemoryError as exc:
                self._stats.reject("store", f"{type(exc).__name__}: {exc}")
                continue
            self._episode_pub.publish(episode_to_msg(record))
            self._stats.count("episodes_stored")
            self._stats.set(episodes_in_store=str(len(self._store)))
            self.get_logger().info(
                f"stored episode {record.id}: {len(record.frame_paths)} frames, "
                f"surprise {record.surprise:.3f}"
            )

    def _store_episode(self, episode: EpisodeFrames, event: SurpriseEvent | None) -> EpisodeRecord:
        with self._embed_lock:
            embeddings = self._embedder.embed_images([f.rgb for f in episode.frames])
        pose: Pose | None = None
        encoder_model, encoder_pretrained = "", True
        if event is not None:
            encoder_model, encoder_pretrained = event.encoder_model, event.encoder_pretrained
            if event.pose_valid:
                pose = pose_from_msg(event.pose, event.header.frame_id)
        trig = episode.trigger
        return self._store.add(
            list(episode.frames),
            embeddings,
            stamp_ns=trig.stamp_ns,
            surprise=trig.score,
            threshold=trig.threshold,
            pose=pose,
            embedder_model=self._embedder.model_name,
            embedder_pretrained=self._embedder.pretrained,
            encoder_model=encoder_model,
            encoder_pretrained=encoder_pretrained,
        )

    # --- retrieval (executor thread) ---
    def _on_retrieve(
        self, request: RetrieveEpisodes.Request, response: RetrieveEpisodes.Response
    ) -> RetrieveEpisodes.Response:
        try:
            hits = self._store.retrieve(
                self._query_from(request), include_images=request.include_images
            )
        except SurpriseMemoryError as exc:
            response.success = False
            response.message = str(exc)
            self._stats.count("retrievals_refused")
            return response
        for hit in hits:
            images = [decode_jpeg(j, hit.episode.id) for j in hit.jpegs]
            response.episodes.append(episode_to_msg(hit.episode, images))
            response.scores.append(_hit_score(hit))
        response.success = True
        response.message = f"{len(hits)} episode(s)"
        if (request.text or request.image.width) and not self._embedder.pretrained:
            response.message += " (untrained embedder: similarity scores are not meaningful)"
        self._stats.count("retrievals")
        return response

    def _query_from(self, request: RetrieveEpisodes.Request) -> RetrievalQuery:
        """A validated core query from a service request (zero fields = not given)."""
        if request.text and request.image.width and request.image.height:
            raise InputError("give a text or an image query, not both")
        embedding = None
        if request.text:
            with self._embed_lock:
                embedding = self._embedder.embed_text([request.text])[0]
        elif request.image.width or request.image.height or request.image.data:
            rgb = rgb_from_image_msg(request.image)
            with self._embed_lock:
                embedding = self._embedder.embed_images([rgb])[0]
        loc = request.location
        return RetrievalQuery(
            embedding=embedding,
            embedder_model=self._embedder.model_name if embedding is not None else None,
            embedder_pretrained=self._embedder.pretrained if embedding is not None else None,
            start_ns=time_to_ns(request.start) or None,
            end_ns=time_to_ns(request.end) or None,
            near=(loc.x, loc.y, loc.z) if request.use_location else None,
            radius_m=request.radius if request.use_location and request.radius != 0 else None,
            max_results=request.max_results or None,
        )

    def close(self) -> None:
        """Store the episodes still pending (end of a bag), then close the store."""
        self._enqueue(self._assembler.flush())
        try:
            self._work.put(None, timeout=30.0)
        except queue.Full:
            self.get_logger().error("episodes still queued at shutdown were not stored")
        self._worker.join(timeout=30.0)
        self._store.close()


def _hit_score(hit: RetrievalHit) -> float:
    if hit.score is not None:
        return hit.score
    return hit.distance_m if hit.distance_m is not None else 0.0


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory memory_node``."""
    return run_node(MemoryNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
