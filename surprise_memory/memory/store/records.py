"""What the store holds and returns, and the checks on what :meth:`EpisodeStore.add` receives.

* :class:`EpisodeRecord`: one stored episode (metadata and where its frames are).
* :class:`RetrievalHit`: one episode answering a query, with its score and distance.
* :func:`decode_jpeg`: stored JPEG bytes -> RGB array.
* :func:`check_frames`, :func:`check_episode_fields`, :func:`check_pose` and
  :func:`checked_episode_id`: the validation of an add, before anything is written; each
  raises :class:`~surprise_memory.errors.InputError` naming the field and the rule.
"""

from __future__ import annotations

import dataclasses
import io
import math
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

import numpy as np
import numpy.typing as npt
from PIL import Image

from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import EPISODE, PlaceStatus, check_record_kind
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust, check_pose_trust
from surprise_memory.memory.retrieval import check_robot_id
from surprise_memory.memory.store.camera_columns import check_camera, pose_values
from surprise_memory.memory.store.frame_files import EPISODE_ID_RE, FRAMES_DIR, FrameFiles
from surprise_memory.memory.store.search import EmbeddingIndex
from surprise_memory.memory.store.sessions import check_session_id, host_session_id
from surprise_memory.perception.frames import Frame

__all__ = [
    "EpisodeRecord",
    "JpegSource",
    "RetrievalHit",
    "check_episode_fields",
    "check_frame_index",
    "check_frames",
    "check_pose",
    "check_session_id",
    "checked_episode_id",
    "checked_import",
    "checked_origin",
    "decode_jpeg",
    "episode_values",
    "host_robot_id",
    "host_session_id",
    "is_episode_id",
    "new_episode",
    "resolve_robot_id",
    "with_source",
]


def is_episode_id(value: object) -> bool:
    """Whether ``value`` is a valid episode id, and so a safe folder name under ``frames/``."""
    return isinstance(value, str) and EPISODE_ID_RE.fullmatch(value) is not None


class JpegSource(Protocol):
    """Where a backend that keeps frames outside the file system reads them from."""

    def read_jpegs(self, episode_id: str) -> list[bytes]:
        """The JPEG bytes of each frame of an episode, in order.

        Raises:
            StoreError: The episode is gone or the read failed.

        """
        ...


@dataclass(frozen=True)
class EpisodeRecord:
    """One stored episode, as added and as returned by a query.

    Attributes:
        id: Episode id (unique in the store; also its folder name under ``frames/``).
        stamp_ns: Trigger stamp (the peak frame's), int ns.
        start_ns: Stamp of the first frame, int ns.
        end_ns: Stamp of the last frame, int ns.
        pose: Robot pose at the trigger stamp and its frame (identity when not valid).
        pose_valid: Whether ``pose`` was known; place queries skip episodes without it.
        surprise: Surprise s(t) of the trigger frame.
        threshold: Gate threshold tau at the trigger (NaN when unknown).
        frame_stamps_ns: Stamp of each frame, int ns, in order.
        frame_paths: Each frame's JPEG, relative to the store folder (``frames/<id>/NN.jpg``;
            in a database backend the same names, as the frames' logical names).
        encoder_model: Model that scored surprise (e.g. the V-JEPA-2 hub id).
        encoder_pretrained: Whether that encoder had its trained weights.
        embedder_model: Model of the frame embeddings (e.g. ``PE-Core-L-14-336``).
        embedder_pretrained: Whether that embedder had its trained weights.
        created_wall_ns: Wall-clock time of the add, int ns since the epoch.
        robot_id: The robot that recorded it.
        session_id: The session that stored it (:func:`host_session_id`: the boot of the
            machine), "" = unknown (stored before sessions were recorded, or from a
            recording whose session is not this machine's): a pose in a frame that starts
            anew each session (``odom``) is only meaningful within its own session.
        camera: The camera that saw it (its name, optical frame and pose at the trigger).
        kind: ``"episode"`` (a surprise episode, the paper's) or ``"place"`` (a place
            keyframe: one frame, the latest view of a place;
            :mod:`~surprise_memory.memory.places`).
        place_key: A place keyframe's place (:func:`~surprise_memory.memory.places.place_key`);
            "" for an episode.
        pose_trust: The pose's uncertainty and map (unknown by default;
            :mod:`~surprise_memory.memory.pose_trust`).
        root: The store folder, to load the frames (not part of equality).
        jpeg_source: Where the frames are read from when they are not files (the
            PostgreSQL backend); not part of equality.

    """

    id: str
    stamp_ns: int
    start_ns: int
    end_ns: int
    pose: Pose
    pose_valid: bool
    surprise: float
    threshold: float
    frame_stamps_ns: tuple[int, ...]
    frame_paths: tuple[str, ...]
    encoder_model: str
    encoder_pretrained: bool
    embedder_model: str
    embedder_pretrained: bool
    created_wall_ns: int
    robot_id: str = ""
    session_id: str = ""
    camera: CameraView = field(default_factory=CameraView)
    kind: str = EPISODE
    place_key: str = ""
    pose_trust: PoseTrust = field(default_factory=PoseTrust)
    root: Path | None = field(default=None, repr=False, compare=False)
    jpeg_source: JpegSource | None = field(default=None, repr=False, compare=False)

    def frame_files(self) -> list[Path]:
        """Absolute paths of the frame JPEGs, each checked to lie in the store's frames folder.

        The paths come from the database, which someone else may have written: an absolute
        path, a ``..`` or a link leading out of ``frames/`` is refused, never read.

        Raises:
            StoreError: The record does not know its store folder (e.g. its frames are in a
                database: use :meth:`load_jpegs`), or a path leads outside it.

        """
        if self.root is None:
            raise StoreError(
                f"episode {self.id}: no store folder known (frames in a database?), "
                "cannot locate frame files; use load_jpegs()"
            )
        frames_dir = (self.root / FRAMES_DIR).resolve()
        out = []
        for p in self.frame_paths:
            path = (self.root / p).resolve()
            if PurePosixPath(p).is_absolute() or not path.is_relative_to(frames_dir):
                raise StoreError(
                    f"episode {self.id}: frame path {p!r} leads outside {frames_dir}; refusing "
                    "to read it (was the database written by something else?)"
                )
            out.append(path)
        return out

    def frame_uris(self) -> list[str]:
        """Where each frame is: its file's absolute path, or its name in a database store."""
        if self.root is None:
            return list(self.frame_paths)
        return [str(p) for p in self.frame_files()]

    def load_jpegs(self) -> list[bytes]:
        """The stored JPEG bytes of each frame, in order.

        Raises:
            StoreError: A file is missing or unreadable (e.g. the episode was evicted).

        """
        if self.jpeg_source is not None:
            return self.jpeg_source.read_jpegs(self.id)
        out = []
        for path in self.frame_files():
            try:
                out.append(path.read_bytes())
            except OSError as exc:
                raise StoreError(f"episode {self.id}: cannot read frame {path}: {exc}") from exc
        return out

    def load_images(self) -> list[npt.NDArray[np.uint8]]:
        """The frames decoded as (H, W, 3) uint8 RGB arrays, in order.

        Raises:
            StoreError: A file is missing, unreadable or not a valid JPEG.

        """
        return [decode_jpeg(data, self.id) for data in self.load_jpegs()]


@dataclass(frozen=True)
class RetrievalHit:
    """One episode answering a query.

    Attributes:
        episode: The episode.
        score: Max cosine over its frames with the query embedding; None without one.
        distance_m: Distance of its pose to the query location in metres; None without one.
        jpegs: The frames' JPEG bytes when the query asked for images, else empty.
        place_status: When its place was last seen and whether it still looks so, where
            the answer was asked for it
            (:func:`~surprise_memory.memory.place_status.with_place_status`); else None.

    """

    episode: EpisodeRecord
    score: float | None
    distance_m: float | None
    jpegs: tuple[bytes, ...] = ()
    place_status: PlaceStatus | None = None


def episode_values(rec: EpisodeRecord) -> tuple[object, ...]:
    """An episode's row values, ``stamp_ns`` to ``created_wall_ns``, as both backends store them.

    The column order of both stores' ``episodes`` table: stamps, position, orientation,
    pose frame and validity, surprise, threshold (NaN, "no threshold", as NULL), the two
    models and whether they were trained, and the wall time of the write.
    """
    return (
        rec.stamp_ns,
        rec.start_ns,
        rec.end_ns,
        *pose_values(rec.pose),
        rec.pose_valid,
        rec.surprise,
        None if math.isnan(rec.threshold) else rec.threshold,
        rec.encoder_model,
        rec.encoder_pretrained,
        rec.embedder_model,
        rec.embedder_pretrained,
        rec.created_wall_ns,
    )


def decode_jpeg(data: bytes, label: str = "") -> npt.NDArray[np.uint8]:
    """Decode JPEG bytes to an (H, W, 3) uint8 RGB array.

    Args:
        data: The JPEG bytes.
        label: What they are (e.g. the episode id), for the error message.

    Returns:
        The image, (H, W, 3) uint8 RGB.

    Raises:
        StoreError: The bytes are not a decodable image.

    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise StoreError(f"{label or 'frame'}: stored JPEG cannot be decoded: {exc}") from exc


def check_frames(frames: Sequence[Frame]) -> None:
    """Check an episode's frames: at least one, each an RGB uint8 :class:`Frame`, in time order.

    Args:
        frames: The frames given to an add.

    Raises:
        InputError: No frame, a frame of another type, shape or dtype, a bad stamp, or
            stamps out of order.

    """
    if len(frames) == 0:
        raise InputError("an episode needs at least one frame, got none")
    prev: int | None = None
    for i, fr in enumerate(frames):
        if not isinstance(fr, Frame):
            raise InputError(f"frame {i} is a {type(fr).__name__}: expected surprise_memory.Frame")
        rgb = fr.rgb
        if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8:
            raise InputError(
                f"frame {i}: rgb must be a uint8 array, got {getattr(rgb, 'dtype', type(rgb))}"
            )
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
            raise InputError(f"frame {i}: rgb has shape {rgb.shape}: expected (H, W, 3)")
        if isinstance(fr.stamp_ns, bool) or not isinstance(fr.stamp_ns, int | np.integer):
            raise InputError(f"frame {i}: stamp_ns={fr.stamp_ns!r} must be int nanoseconds")
        if fr.stamp_ns < 0:
            raise InputError(f"frame {i}: stamp_ns={fr.stamp_ns} must be >= 0")
        if prev is not None and fr.stamp_ns < prev:
            raise InputError(
                f"frame {i}: stamp_ns={fr.stamp_ns} is before frame {i - 1}'s {prev}: "
                "frames must be in time order"
            )
        prev = int(fr.stamp_ns)


def check_frame_index(index: object, count: int, episode_id: str) -> int:
    """Check that ``index`` names one of an episode's ``count`` frames.

    Returns:
        The index.

    Raises:
        InputError: ``index`` is not an int in ``0 .. count - 1``.

    """
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise InputError(f"frame {index!r} of episode {episode_id}: it has frames 0..{count - 1}")
    return index


def check_episode_fields(
    *,
    stamp_ns: int,
    surprise: float,
    threshold: float,
    embedder_model: str,
    encoder_model: str,
) -> None:
    """Check the scalar fields of an add (see :meth:`EpisodeStore.add` for their meaning).

    Raises:
        InputError: ``stamp_ns`` is not a non-negative int, ``surprise`` not a finite
            number, ``threshold`` not a number, ``embedder_model`` not a non-empty string
            or ``encoder_model`` not a string.

    """
    if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, int | np.integer):
        raise InputError(f"stamp_ns={stamp_ns!r}: must be int nanoseconds")
    if stamp_ns < 0:
        raise InputError(f"stamp_ns={stamp_ns}: must be >= 0")
    if not isinstance(surprise, int | float | np.number) or not math.isfinite(surprise):
        raise InputError(f"surprise={surprise!r}: must be a finite number")
    if not isinstance(threshold, int | float | np.number):
        raise InputError(f"threshold={threshold!r}: must be a number (NaN = unknown)")
    if not isinstance(embedder_model, str) or not embedder_model:
        raise InputError(f"embedder_model={embedder_model!r}: must be a non-empty string")
    if not isinstance(encoder_model, str):
        raise InputError(f"encoder_model={encoder_model!r}: must be a string")


def check_pose(pose: Pose | None) -> None:
    """Check an episode's pose: None (unknown) or a finite :class:`Pose` with a real rotation.

    Raises:
        InputError: Not a :class:`Pose`, a non-finite value, the zero quaternion, or a
            ``frame_id`` that is not a string.

    """
    if pose is None:
        return
    if not isinstance(pose, Pose):
        raise InputError(
            f"pose is a {type(pose).__name__}: expected surprise_memory.memory.pose.Pose or None"
        )
    if not pose.is_finite():
        raise InputError(f"pose {pose}: values must be finite")
    if pose.qx**2 + pose.qy**2 + pose.qz**2 + pose.qw**2 == 0.0:
        raise InputError("pose orientation is the zero quaternion")
    if not isinstance(pose.frame_id, str):
        raise InputError(f"pose frame_id={pose.frame_id!r}: must be a string")


def checked_episode_id(episode_id: str | None, stamp_ns: int) -> str:
    """The id of a new episode: the one given, checked, or one generated from the stamp.

    Args:
        episode_id: The id asked for; None = ``ep-<stamp, 19 digits>-<6 random hex>``.
        stamp_ns: The episode's trigger stamp, int ns.

    Returns:
        The id (1-128 letters, digits, ``_ . -``, starting with a letter or digit; safe
        as a folder name).

    Raises:
        InputError: The given id breaks that rule.

    """
    if episode_id is None:
        episode_id = f"ep-{int(stamp_ns):019d}-{secrets.token_hex(3)}"
    if not is_episode_id(episode_id):
        raise InputError(
            f"episode_id={episode_id!r}: use 1-128 letters, digits, '_', '.', '-' "
            "starting with a letter or digit"
        )
    return episode_id


def checked_origin(stamp_ns: int) -> int:
    """A frame stamp offered as the store's time origin (``note_origin``), checked.

    Args:
        stamp_ns: The stamp, int ns; 0 is valid (a video's first frame is at 0 ns).

    Returns:
        The stamp as a Python int.

    Raises:
        InputError: ``stamp_ns`` is not an integer, or is negative.

    """
    if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, int | np.integer):
        raise InputError(f"stamp_ns={stamp_ns!r}: must be an integer number of nanoseconds")
    if stamp_ns < 0:
        raise InputError(f"stamp_ns={stamp_ns}: must be >= 0")
    return int(stamp_ns)


def host_robot_id() -> str:
    """The robot id of this machine: its host name up to the first dot (``robot`` if unusable)."""
    name = socket.gethostname().split(".")[0]
    try:
        return check_robot_id(name)
    except InputError:
        return "robot"


def resolve_robot_id(robot_id: str | None, configured: str) -> str:
    """The robot id of a new episode: the one given, else the configured one, else the host's.

    Args:
        robot_id: The id passed to the add (None = not given).
        configured: ``StoreConfig.robot_id`` (empty = not set).

    Returns:
        The checked id.

    Raises:
        InputError: The id given breaks the rule of :func:`check_robot_id`.

    """
    if robot_id is not None:
        return check_robot_id(robot_id)
    return configured or host_robot_id()


def new_episode(
    frames: Sequence[Frame],
    embeddings: npt.ArrayLike,
    *,
    stamp_ns: int,
    surprise: float,
    embedder_model: str,
    embedder_pretrained: bool,
    encoder_model: str,
    encoder_pretrained: bool,
    threshold: float,
    pose: Pose | None,
    episode_id: str | None,
    robot_id: str | None,
    configured_robot_id: str,
    session_id: str | None = None,
    camera: CameraView | None = None,
    kind: str = EPISODE,
    place_key: str = "",
    pose_trust: PoseTrust | None = None,
) -> tuple[EpisodeRecord, npt.NDArray[np.float32]]:
    """Check what an add received and make its record (both backends' first step).

    Args:
        frames: See :meth:`surprise_memory.memory.store.interface.EpisodeStoreBackend.add`, like
            every argument up to ``robot_id``.
        embeddings: One per frame.
        stamp_ns: Trigger stamp, int ns.
        surprise: Surprise at the trigger.
        embedder_model: Model of the embeddings.
        embedder_pretrained: Whether it had trained weights.
        encoder_model: Model that scored surprise.
        encoder_pretrained: Whether it had trained weights.
        threshold: Gate threshold at the trigger (NaN = unknown).
        pose: Pose at the trigger, None = unknown.
        episode_id: Id asked for, None = generated.
        robot_id: Robot asked for, None = ``configured_robot_id`` or the host's.
        configured_robot_id: ``StoreConfig.robot_id``.
        session_id: The session that recorded it; None = this machine's
            (:func:`host_session_id`), "" = unknown (e.g. a recording from elsewhere).
        camera: The camera that saw it (None = the one unnamed camera, pose unknown).
        kind: ``"episode"`` or ``"place"`` (see :class:`EpisodeRecord`).
        place_key: A place's key; "" for an episode.
        pose_trust: The pose's uncertainty and map (None = unknown).

    Returns:
        The record (frame paths ``frames/<id>/NN.jpg``, no ``root`` or ``jpeg_source``
        yet) and the unit-norm embeddings, (frames, D) float32.

    Raises:
        InputError: A frame, the embeddings, a field, the pose (or its trust), the kind or
            an id is invalid.

    """
    check_frames(frames)
    unit = EmbeddingIndex.normalise(embeddings)
    if unit.shape[0] != len(frames):
        raise InputError(
            f"{unit.shape[0]} embeddings for {len(frames)} frames: expected one per frame"
        )
    check_episode_fields(
        stamp_ns=stamp_ns,
        surprise=surprise,
        threshold=threshold,
        embedder_model=embedder_model,
        encoder_model=encoder_model,
    )
    check_pose(pose)
    kind = check_record_kind(kind, place_key, pose_valid=pose is not None)
    camera = CameraView() if camera is None else check_camera(camera)
    episode_id = checked_episode_id(episode_id, stamp_ns)
    stamps = tuple(int(fr.stamp_ns) for fr in frames)
    record = EpisodeRecord(
        id=episode_id,
        stamp_ns=int(stamp_ns),
        start_ns=stamps[0],
        end_ns=stamps[-1],
        pose=pose if pose is not None else Pose(),
        pose_valid=pose is not None,
        surprise=float(surprise),
        threshold=float(threshold),
        frame_stamps_ns=stamps,
        frame_paths=tuple(FrameFiles.relative_paths(episode_id, len(frames))),
        encoder_model=encoder_model,
        encoder_pretrained=bool(encoder_pretrained),
        embedder_model=embedder_model,
        embedder_pretrained=bool(embedder_pretrained),
        created_wall_ns=time.time_ns(),
        robot_id=resolve_robot_id(robot_id, configured_robot_id),
        session_id=host_session_id() if session_id is None else check_session_id(session_id),
        camera=camera,
        kind=kind,
        place_key=place_key,
        pose_trust=PoseTrust() if pose_trust is None else check_pose_trust(pose_trust),
    )
    return record, unit


def with_source(
    record: EpisodeRecord, *, root: Path | None = None, jpeg_source: JpegSource | None = None
) -> EpisodeRecord:
    """The record with where its frames are read from set (a folder or a backend)."""
    return dataclasses.replace(record, root=root, jpeg_source=jpeg_source)


def checked_import(
    record: EpisodeRecord, jpegs: Sequence[bytes], embeddings: npt.ArrayLike
) -> npt.NDArray[np.float32]:
    """Check an episode copied from another store (``import_episode``); its embeddings.

    Args:
        record: The episode as the source store returned it.
        jpegs: Its frames' JPEG bytes.
        embeddings: Its stored embeddings, one per frame.

    Returns:
        The embeddings as a (frames, D) float32 array, values unchanged.

    Raises:
        InputError: Counts of frames, JPEGs and embeddings differ, a JPEG is empty, the
            embeddings are not finite non-zero rows, or the id, robot id, camera, pose
            trust or kind is invalid.

    """
    checked_episode_id(record.id, record.stamp_ns)
    check_record_kind(record.kind, record.place_key, pose_valid=record.pose_valid)
    check_robot_id(record.robot_id)
    check_session_id(record.session_id)
    check_camera(record.camera)
    check_pose_trust(record.pose_trust)
    EmbeddingIndex.normalise(embeddings)  # the checks; the values are kept as given
    emb = np.asarray(embeddings, dtype=np.float32)
    n = len(record.frame_stamps_ns)
    if len(jpegs) != n or emb.shape[0] != n or not all(jpegs):
        raise InputError(
            f"episode {record.id}: {n} frame stamps, {len(jpegs)} JPEGs (empty ones "
            f"refused), {emb.shape[0]} embeddings: expected one of each per frame"
        )
    return emb
