"""The memory's work inside a node: frames and events in; episodes stored; retrievals served.

:class:`MemoryPart` is hosted by ``memory_node`` (camera and ``events`` subscribed) and by
``pipeline_node`` (frames and events handed over in memory). Either way it publishes
``episodes`` (and, through :class:`~surprise_memory.nodes.episode_display.EpisodeDisplay`,
``episode_markers`` and ``episode_preview/compressed``) and serves ``retrieve_episodes``
(:class:`~surprise_memory.nodes.retrieval_part.RetrievalPart`) and ``go_to_episode``
(:class:`~surprise_memory.nodes.navigation_part.NavigationPart`); with ``snapshot_service``
set, it asks a bag recorder for a snapshot per burst of stored episodes
(:class:`~surprise_memory.nodes.snapshot_part.SnapshotPart`). Each camera of the ``cameras``
setting has its own frame history, and an event's episode is made of its camera's frames
and stored with its camera, optical frame and camera pose. Every frame is also offered to
the place keyframes (:class:`~surprise_memory.nodes.places_part.PlacesPart`), written by
their own thread beside the episode writer.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.config import (
    CamerasConfig,
    ComponentConfig,
    DisplayConfig,
    EmbedderConfig,
    EpisodeConfig,
    FleetConfig,
    StoreConfig,
)
from surprise_memory.health import (
    Finding,
    Level,
    counted_finding,
    untrained_finding,
    worker_finding,
)
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.episodes import CameraClock, EpisodeAssembler, EpisodeFrames
from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.redaction import FaceRedactor
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import (
    EpisodeRecord,
    EpisodeStoreBackend,
    describe_location,
    open_robot_store,
)
from surprise_memory.memory.store.fleet import FleetStore
from surprise_memory.memory.store.records import resolve_robot_id
from surprise_memory.memory.writer import EpisodeWriter
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.camera_inputs import not_one_of
from surprise_memory.nodes.clock import steady_clock
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.episode_display import EpisodeDisplay
from surprise_memory.nodes.fleet_part import FleetDiagnostics
from surprise_memory.nodes.messages import episode_to_msg, pose_from_msg, time_to_ns
from surprise_memory.nodes.navigation_part import NavigationPart
from surprise_memory.nodes.parameters import Applier
from surprise_memory.nodes.places_part import PlacesPart
from surprise_memory.nodes.pose_source import PoseSource
from surprise_memory.nodes.qos import LATCHED, LATCHED_DEPTH, overridable
from surprise_memory.nodes.retrieval_part import RetrievalPart
from surprise_memory.nodes.snapshot_part import SnapshotPart
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.perception.frames import (
    CompressedFrame,
    Frame,
)
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["MemoryPart"]

_PENDING_EPISODES = 32  # episodes waiting for the embedder; more means it cannot keep up
_CLOSE_TIMEOUT_S = 45.0  # shutdown's wait for pending episodes (launch: sigterm_timeout 60 s)
_PLACES_CLOSE_TIMEOUT_S = 10.0  # and for pending place keyframes (at most PENDING_PLACES)


@dataclass(frozen=True)
class _TimeOrigin:
    """A first frame's stamp for the store's time origin, written by the episode writer."""

    stamp_ns: int


@dataclass(frozen=True)
class _CameraEpisode:
    """An episode's frames and the camera they came from, for the episode writer."""

    camera: str
    frames: EpisodeFrames


_WriterItem = _CameraEpisode | _TimeOrigin
_Trigger = tuple[str, int]  # a camera and a trigger stamp: one episode at most


@dataclass
class _CameraFrames:
    """One camera's frame history (the episodes' frames) and its clock."""

    assembler: EpisodeAssembler
    clock: CameraClock


class _CameraHistories(dict[str, _CameraFrames]):
    """Each camera's frame history and clock, by camera name."""

    def __init__(self, names: Sequence[str], config: EpisodeConfig) -> None:
        super().__init__({n: _CameraFrames(EpisodeAssembler(config), CameraClock()) for n in names})

    @property
    def config(self) -> EpisodeConfig:
        """The episode settings in force (every camera's)."""
        return next(iter(self.values())).assembler.config

    def reconfigure(self, config: EpisodeConfig) -> None:
        """Apply new episode settings to every camera (see ``EpisodeAssembler``)."""
        for held in self.values():
            held.assembler.reconfigure(config)

    @property
    def nbytes(self) -> int:
        """Bytes of frames held, every camera's."""
        return sum(held.assembler.history.nbytes for held in self.values())

    def ready(self, steady_ns: int) -> list[tuple[str, list[EpisodeFrames]]]:
        """Each camera's episodes ready now, judged in its own time base (its clock)."""
        return [
            (name, held.assembler.take_ready(now_ns=held.clock.now(steady_ns)))
            for name, held in self.items()
        ]

    def flush(self) -> list[tuple[str, list[EpisodeFrames]]]:
        """Each camera's pending episodes, built from what it holds (end of stream)."""
        return [(name, held.assembler.flush()) for name, held in self.items()]


def _recent_triggers(store: EpisodeStoreBackend, config: StoreConfig) -> deque[_Trigger]:
    """The cameras and trigger stamps of this robot's newest episodes (as many as replay).

    Read once at configure; the writer adds each stored episode's, so the event callback
    checks a restarted node's replayed events without calling the store.
    """
    robot = resolve_robot_id(None, config.robot_id)
    depth = min(LATCHED_DEPTH, config.max_results_cap)
    newest = store.retrieve(
        RetrievalQuery(robot_id=robot, max_results=depth, kinds=frozenset({EPISODE}))
    )
    return deque(
        ((hit.episode.camera.name, hit.episode.stamp_ns) for hit in reversed(newest)),
        maxlen=depth,
    )


def _scored_by(event: SurpriseEvent | None) -> tuple[Pose | None, str, bool, CameraView | None]:
    """What an event says of its episode: robot pose, encoder (and weights), camera."""
    if event is None:
        return None, "", True, None
    pose = pose_from_msg(event.pose, event.header.frame_id) if event.pose_valid else None
    camera_pose = None
    if event.camera_pose_valid and event.pose_valid:  # in the robot pose's frame
        camera_pose = pose_from_msg(event.camera_pose, event.header.frame_id)
    camera = CameraView(event.camera, event.camera_frame_id, camera_pose)
    return pose, event.encoder_model, event.encoder_pretrained, camera


@dataclass(frozen=True)
class _Embedding:
    """Frames as stored (faces blurred when asked) and their embeddings: the writers' work."""

    embedder: ImageTextEmbedder
    lock: threading.Lock  # one model, several threads (episodes, places, queries)
    redactor: FaceRedactor | None
    stats: NodeStats

    def __post_init__(self) -> None:
        if self.redactor is not None:  # the counters shown from the start, at 0
            self.stats.set(redact_faces="on: faces blurred before embedding and storing")
            self.stats.count("redacted_frames", 0)
            self.stats.count("redacted_faces", 0)

    @property
    def model(self) -> tuple[str, bool]:
        """The embedder's model name and whether it has its trained weights."""
        return self.embedder.model_name, self.embedder.pretrained

    def __call__(self, frames: Sequence[Frame]) -> tuple[list[Frame], npt.NDArray[np.float32]]:
        if self.redactor is not None:  # before the embedder and the store see them
            redacted = self.redactor.redact(frames)
            frames = redacted.frames
            self.stats.count("redacted_frames", redacted.frames_with_faces)
            self.stats.count("redacted_faces", redacted.faces)
        with self.lock:
            return list(frames), self.embedder.embed_images([f.rgb for f in frames])


def _add_episode(
    store: EpisodeStoreBackend,
    embed: _Embedding,
    item: _CameraEpisode,
    event: SurpriseEvent | None,
    trust: PoseTrust,
) -> EpisodeRecord:
    """Embed an episode's frames and store it with what its event says (writer thread)."""
    frames, embeddings = embed(item.frames.frames)
    pose, encoder_model, encoder_pretrained, camera = _scored_by(event)
    trig = item.frames.trigger
    model, pretrained = embed.model
    return store.add(
        frames,
        embeddings,
        stamp_ns=trig.stamp_ns,
        surprise=trig.score,
        threshold=trig.threshold,
        pose=pose,
        embedder_model=model,
        embedder_pretrained=pretrained,
        encoder_model=encoder_model,
        encoder_pretrained=encoder_pretrained,
        camera=camera or CameraView(item.camera),
        pose_trust=trust,
    )


def _pose_trust(event: SurpriseEvent | None, map_id: str) -> PoseTrust:
    """An episode's pose trust: the event's uncertainty, the map the node is on now."""
    sigma = None
    if event is not None and event.pose_valid and event.pose_sigma_valid:
        sigma = float(event.pose_sigma_m)
    return PoseTrust(sigma, map_id if event is not None and event.pose_valid else "")


class MemoryPart:
    """Keeps the recent camera frames, stores an episode per event, answers retrievals.

    On each SurpriseEvent it waits for the frames after the trigger
    (``EpisodeAssembler``), embeds the episode's frames with PE-Core in its own thread,
    writes them to the store and publishes ``episodes``. ``retrieve_episodes`` answers
    text, image, time and place queries; invalid requests get ``success=false`` and a
    reason, and the node keeps serving. Frames and events come from the host node:
    ``memory_node`` subscribes both, ``pipeline_node`` hands them over in memory.

    Args:
        node: The host node (publisher, timer, service, logger).
        stats: The host's counters.
        own_poses: Make its own pose source for the place keyframes; False: the host hands
            one over (:meth:`use_poses`: ``pipeline_node`` shares its scorer's).

    """

    def __init__(self, node: Any, stats: NodeStats, *, own_poses: bool = True) -> None:
        self._node = node
        self._stats = stats
        self._own_poses = own_poses
        self._closed = True  # nothing to store until configured

    def setup(self, values: Mapping[str, Any]) -> None:
        """Configure: open the store, load the embedder (slow; either can fail), writer."""
        store_cfg = StoreConfig.from_mapping(values)
        episodes = EpisodeConfig.from_mapping(values)
        # before the store opens: with redact_faces on, a missing face model fails
        # configure here, and no frame can ever be stored unblurred
        self._redactor = FaceRedactor.from_config(episodes)
        path = describe_location(store_cfg.store_path)  # a folder, or a URL without password
        self._fleet_diagnostics = FleetDiagnostics(self._node, self._stats)
        # first: it fails fast (a fleet store opens its local copy; the server may be down)
        self._fleet_config = FleetConfig.from_mapping(values)
        self._store = open_robot_store(
            store_cfg, self._fleet_config, on_not_sent=self._fleet_diagnostics.on_not_sent
        )
        self._closed = False
        self._recent = _recent_triggers(self._store, store_cfg)
        self._embedder = ImageTextEmbedder.from_config(EmbedderConfig.from_mapping(values))
        self._embed_lock = threading.Lock()  # one model, threads: episodes, places, queries
        self._embed = _Embedding(self._embedder, self._embed_lock, self._redactor, self._stats)
        specs = CamerasConfig.from_mapping(values).specs
        self._cameras = _CameraHistories([spec.name for spec in specs], episodes)
        self._embedder.warm_up(episodes.episode_frames)
        self._events: dict[_Trigger, SurpriseEvent] = {}  # until its episode is stored
        self._closing = False
        self._stats.set(
            store=path, embedder=self._embedder.model_name, episodes_in_store=str(len(self._store))
        )
        self._episode_pub = self._node.create_publisher(
            Episode, "episodes", LATCHED, qos_overriding_options=overridable()
        )
        display = DisplayConfig.from_mapping(values)  # episode_markers, episode_preview
        # the robot's own newest episodes: on the robot, also while a fleet link is down
        own = self._store.local if isinstance(self._store, FleetStore) else self._store
        self._display = EpisodeDisplay(self._node, self._stats, own, display)
        self._display.show_store()
        # fires on wall time; compares with the node's clock (sim time during a bag replay)
        self._node.create_timer(1.0, self._on_timer, clock=steady_clock())
        self._writer: EpisodeWriter[_WriterItem, EpisodeRecord | None] = EpisodeWriter(
            self._write,
            on_done=self._on_stored,
            on_error=self._on_store_failed,
            capacity=_PENDING_EPISODES,
        )
        self._stats.add_check(self._health)
        self._stats.add_values(self._applied)
        if isinstance(self._store, FleetStore):
            self._fleet_diagnostics.watch(self._store)
        self._retrieval = RetrievalPart(
            self._node,
            self._stats,
            self._store,
            self._embedder,
            self._embed_lock,
            # the place settings in force when asked (they change live); the places part
            # exists by the time the service is activated
            places_config=lambda: self._places.config,
        )
        self._navigation = NavigationPart(
            self._node,
            self._stats,
            store=self._store,
            embedder=self._embedder,
            embed_lock=self._embed_lock,
            places_config=lambda: self._places.config,  # as for the retrieval
        )
        self._navigation.setup(values)  # go_to_episode: an episode as a Nav2 goal
        self._snapshot = SnapshotPart(self._node, self._stats, self._store)
        self._snapshot.setup(values)  # a bag recorder's snapshot per burst of episodes
        self._places = PlacesPart(
            self._node, self._stats, values, self._store, self._embed, own_poses=self._own_poses
        )
        self._node.get_logger().info(f"episode store at {path} ({len(self._store)} episodes)")

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes (the frame history, store path and vector dtype are read-only)."""
        return {
            EpisodeConfig: self._cameras.reconfigure,
            EmbedderConfig: lambda c: setattr(self._embedder, "batch_size", c.embedder_batch),
            StoreConfig: self._store.reconfigure,
            FleetConfig: self._reconfigure_fleet,
            **self._navigation.appliers(),
            **self._snapshot.appliers(),
            DisplayConfig: self._display.reconfigure,
            **self._places.appliers(),
        }

    def use_poses(self, poses: PoseSource) -> None:
        """Take the place keyframes' poses from the host's pose source (``own_poses=False``)."""
        self._places.use_poses(poses)

    def _reconfigure_fleet(self, config: FleetConfig) -> None:
        if isinstance(self._store, FleetStore):  # a folder store: the settings are unused
            self._store.reconfigure_fleet(config)
        self._fleet_config = config

    def subscribe(self) -> None:
        """Activate: retrievals and goals served."""
        self._retrieval.subscribe()
        self._navigation.subscribe()
        self._places.subscribe()

    def teardown(self) -> None:
        """Cleanup: store what is pending, close the store, drop the embedder."""
        if "_navigation" in self.__dict__:
            self._navigation.teardown()
        self.flush()
        self.__dict__.pop("_embedder", None)

    def _applied(self) -> dict[str, object]:
        """The writable settings as the live objects use them (``applied.<name>``)."""
        values: dict[str, object] = {
            "embedder_batch": self._embedder.batch_size,
            **self._cameras.config.as_dict(),
            **self._store.config.as_dict(),
            **self._fleet_config.as_dict(),
        }
        return {f"applied.{k}": v for k, v in values.items()}

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        return [
            worker_finding("episode writer", self._writer.alive or self._closing),
            counted_finding(delta, "rejected_store", Level.ERROR, "store write(s) failed"),
            counted_finding(
                delta, "rejected_episode", Level.WARN, "episode(s) dropped (writer behind)"
            ),
            counted_finding(
                delta, "rejected_episode_frames_gone", Level.WARN, "event(s) without frames"
            ),
            untrained_finding("embedder", self._embedder.pretrained),
        ]

    # --- camera and events (executor thread) ---
    def add_frame(self, frame: Frame | CompressedFrame, camera: str = "") -> None:
        """Keep a camera's frame (its stamps increasing); build the episodes it completes."""
        held = self._cameras[camera]
        if not held.clock.started:  # the camera's first frame since the start or a reset
            self._note_origin(frame.stamp_ns)
        held.clock.observe(frame.stamp_ns, time.monotonic_ns())
        self._enqueue(camera, held.assembler.add_frame(frame))
        self._places.on_frame(frame, camera)

    def _note_origin(self, stamp_ns: int) -> None:
        """The store's time origin is the first frame it ever saw (persisted, moves earlier).

        Written by the episode writer, like every store call: the camera path never waits.
        """
        if not self._writer.put(_TimeOrigin(stamp_ns)):
            self._stats.reject("store", "the time origin was not recorded: the writer is full")

    def reset(self, camera: str = "") -> None:
        """A camera starts a new sequence (its time went back): its frame history is dropped."""
        held = self._cameras[camera]
        held.assembler.reset()
        held.clock.clear()
        self._enqueue(camera, [])  # counts the triggers the reset dropped

    def on_event(self, msg: SurpriseEvent) -> None:
        """Note an event: its episode is built once the frames after it have come."""
        stamp = time_to_ns(msg.header.stamp)
        if not math.isfinite(msg.score):
            self._stats.reject("event", f"event at {stamp} ns has score {msg.score}")
            return
        held = self._cameras.get(msg.camera)
        if held is None:
            reason = not_one_of(msg.camera, self._cameras)
            self._stats.reject("event", f"event at {stamp} ns: {reason}")
            return
        key = (msg.camera, stamp)
        if key in self._events or key in self._recent:
            # a restarted node gets the recent events again (transient local): one episode
            # per trigger, as before the restart
            self._stats.count("events_already_stored")
            return
        self._events[key] = msg
        while len(self._events) > 2 * LATCHED_DEPTH:  # triggers that got no frames
            self._events.pop(next(iter(self._events)))
        trigger = SurpriseTrigger(
            stamp_ns=stamp,
            score=msg.score,
            threshold=msg.threshold,
            decided_ns=time_to_ns(msg.decided),
            kl=msg.kl,
        )
        self._stats.count("events_in")
        self._enqueue(msg.camera, held.assembler.add_trigger(trigger))

    def _on_timer(self) -> None:
        # a camera that stopped: build episodes whose window ended long enough ago, judged
        # in the camera's time base (its stamps may come from another clock than ours)
        for name, episodes in self._cameras.ready(time.monotonic_ns()):
            self._enqueue(name, episodes)
        self._stats.set(frame_history_mb=f"{self._cameras.nbytes / 2**20:.1f}")
        self._fleet_diagnostics.poll()  # a change of the fleet link: reported now

    def _enqueue(self, camera: str, episodes: list[EpisodeFrames]) -> None:
        for trigger in self._cameras[camera].assembler.take_lost():
            self._events.pop((camera, trigger.stamp_ns), None)
            self._stats.reject(
                "episode_frames_gone",
                f"event at {trigger.stamp_ns} ns: its frames are no longer held (a slow "
                "encoder, a late start, or time went backwards); no episode",
            )
        for episode in episodes:
            if not self._writer.put(_CameraEpisode(camera, episode)):
                self._events.pop((camera, episode.trigger.stamp_ns), None)
                self._stats.reject(
                    "episode",
                    f"the episode writer cannot keep up ({_PENDING_EPISODES} waiting, the "
                    f"current one for {self._writer.busy_seconds:.1f} s: the embedder or the "
                    "store is slow); episode dropped",
                )

    # --- storing (writer thread) ---
    def _on_stored(self, item: _WriterItem, record: EpisodeRecord | None) -> None:
        if record is None:  # a time origin
            return
        self._recent.append((record.camera.name, record.stamp_ns))
        self._episode_pub.publish(episode_to_msg(record))
        self._stats.count("episodes_stored")
        self._stats.set(episodes_in_store=str(len(self._store)))
        seen = f" of camera {record.camera.name}" if record.camera.name else ""
        self._node.get_logger().info(
            f"stored episode {record.id}{seen}: {len(record.frame_paths)} frames, "
            f"surprise {record.surprise:.3f}"
        )
        self._display.on_stored(record)
        self._snapshot.on_stored(record.id)

    def _on_store_failed(self, item: _WriterItem, exc: BaseException) -> None:
        what = "cannot record the time origin: " if isinstance(item, _TimeOrigin) else ""
        self._stats.reject("store", f"{what}{type(exc).__name__}: {exc}")

    def _write(self, item: _WriterItem) -> EpisodeRecord | None:
        if isinstance(item, _TimeOrigin):
            self._store.note_origin(item.stamp_ns)
            return None
        event = self._events.pop((item.camera, item.frames.trigger.stamp_ns), None)
        trust = _pose_trust(event, self._navigation.map_id)
        return _add_episode(self._store, self._embed, item, event, trust)

    def flush(self) -> None:
        """Store the episodes still pending (end of a bag), then close the store.

        Bounded: at most ``_PENDING_EPISODES`` episodes are queued, and after
        ``_CLOSE_TIMEOUT_S`` (the launch file gives the node longer before SIGTERM) the
        worker stops after the episode it is storing; the episodes left are reported, not
        silently dropped. The worker is always joined before the store closes: a thread
        still inside the model at the interpreter's exit aborts the process.
        """
        if self._closed:
            return
        self._closed = True
        if "_writer" not in self.__dict__:  # configure failed after opening the store
            self._store.close()
            return
        self._closing = self._fleet_diagnostics.closing = True
        for name, episodes in self._cameras.flush():
            self._enqueue(name, episodes)
        left = self._writer.waiting
        if left:
            self._node.get_logger().info(f"storing {left} pending episode(s) before exiting")
        not_stored = self._writer.close(timeout=_CLOSE_TIMEOUT_S)
        if not_stored:
            self._node.get_logger().error(
                f"{not_stored} episode(s) not stored within {_CLOSE_TIMEOUT_S:.0f} s of shutdown"
            )
        if "_places" in self.__dict__ and (left := self._places.close(_PLACES_CLOSE_TIMEOUT_S)):
            self._node.get_logger().warning(f"{left} place keyframe(s) not stored at shutdown")
        if "_snapshot" in self.__dict__:
            self._snapshot.close()  # its notes, before the store closes
        self._store.close()
