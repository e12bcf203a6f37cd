"""The surprise detector run on one video at a time, for the GEBD evaluation.

:class:`GebdDetector` runs the project's own
:class:`~surprise_memory.surprise.scorer.SurpriseScorer` and
:class:`~surprise_memory.surprise.gate.SurpriseGate`, reset per video, over the embeddings of one
video and returns boundary times in seconds, from the causal gate and from the "offline"
variant whose tau is computed over the whole video at once (:func:`offline_peaks`).
:func:`detect_video` encodes a video file and runs a detector on it; :func:`find_video`
and :func:`detect_videos` do the same for the videos of an annotation file in a folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.robust import MAD_TO_SIGMA
from surprise_memory.surprise.scorer import SurpriseScorer

if TYPE_CHECKING:
    from surprise_memory.config import EncoderConfig
    from surprise_memory.perception.encoders import VideoEncoder

__all__ = [
    "GebdDetection",
    "GebdDetector",
    "detect_video",
    "detect_videos",
    "find_video",
    "frame_stamps_ns",
    "offline_peaks",
]


def frame_stamps_ns(num_frames: int, fps: float, start_ns: int = 0) -> npt.NDArray[np.int64]:
    """Stamps of frames at a constant rate: ``start_ns + round(i * 1e9 / fps)``.

    Raises:
        ConfigError: ``fps`` not positive or ``num_frames`` negative.

    """
    if not (math.isfinite(fps) and fps > 0):
        raise ConfigError(f"fps={fps!r}: must be a positive number")
    if num_frames < 0:
        raise ConfigError(f"num_frames={num_frames!r}: must be >= 0")
    return start_ns + np.round(np.arange(num_frames) * (NS_PER_SECOND / fps)).astype(np.int64)


def offline_peaks(
    stamps_ns: npt.ArrayLike, scores: npt.ArrayLike, gamma: float, nms_seconds: float
) -> tuple[npt.NDArray[np.intp], float]:
    """The paper's offline gate: peaks of the whole series above one robust threshold.

    tau = median(s) + gamma * 1.4826 * MAD(s) over *all* the scores. Frame p is a peak iff
    s(p) > tau, it has a frame before and after it, s(p) is strictly greater than every
    earlier score within ``nms_seconds`` and than the previous frame's, and at least as
    great as every later score within ``nms_seconds`` and the next frame's. This is the
    same local suppression rule as :class:`~surprise_memory.surprise.gate.SurpriseGate` (ties go to
    the earlier frame; a suppressed peak does not free its neighbours), with tau fixed.

    Args:
        stamps_ns: Stamps of the scored frames, int ns, strictly increasing.
        scores: s(t) of those frames, finite.
        gamma: Threshold multiplier (>= 0).
        nms_seconds: Suppression radius in seconds (>= 0).

    Returns:
        The indices of the peaks, ascending, and tau (NaN for an empty series).

    Raises:
        InputError: Lengths differ, a score is not finite, or stamps do not increase.
        ConfigError: ``gamma`` or ``nms_seconds`` negative.

    """
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ConfigError(f"gamma={gamma!r}: must be >= 0")
    if not (math.isfinite(nms_seconds) and nms_seconds >= 0):
        raise ConfigError(f"nms_seconds={nms_seconds!r}: must be >= 0")
    t = np.asarray(stamps_ns, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if t.ndim != 1 or s.shape != t.shape:
        raise InputError(f"stamps {t.shape} and scores {s.shape} must be 1-D of equal length")
    if not np.isfinite(s).all():
        raise InputError(f"scores hold {int(np.count_nonzero(~np.isfinite(s)))} NaN/inf value(s)")
    if t.size > 1 and not (np.diff(t) > 0).all():
        raise InputError("stamps must be strictly increasing")
    if s.size == 0:
        return np.zeros(0, dtype=np.intp), math.nan
    med = float(np.median(s))
    tau = med + gamma * MAD_TO_SIGMA * float(np.median(np.abs(s - med)))
    radius = round(nms_seconds * NS_PER_SECOND)
    lo = np.searchsorted(t, t - radius, side="left")  # first index within the radius before
    hi = np.searchsorted(t, t + radius, side="right")  # one past the last within it after
    peaks = []
    for p in range(1, s.size - 1):
        if not s[p] > tau:
            continue
        before = s[min(lo[p], p - 1) : p]
        after = s[p + 1 : max(hi[p], p + 2)]
        if s[p] > before.max() and s[p] >= after.max():
            peaks.append(p)
    return np.asarray(peaks, dtype=np.intp), tau


@dataclass(frozen=True)
class GebdDetection:
    """Boundaries found in one video, by the causal gate and by the offline variant.

    Attributes:
        causal_s: Boundary times in seconds (from ``origin_ns``) of the causal gate.
        offline_s: Boundary times in seconds of :func:`offline_peaks` on the same scores.
        offline_threshold: tau of the offline variant (NaN when nothing was scored).
        stamps_ns: Stamps of the scored frames (the first ``window`` frames are not scored).
        scores: s(t) of the scored frames.
        frames: Number of frames given.

    """

    causal_s: tuple[float, ...]
    offline_s: tuple[float, ...]
    offline_threshold: float
    stamps_ns: npt.NDArray[np.int64] = field(repr=False)
    scores: npt.NDArray[np.float64] = field(repr=False)
    frames: int = 0

    def boundaries(self, mode: Literal["causal", "offline"]) -> tuple[float, ...]:
        """The boundaries of one variant."""
        return self.causal_s if mode == "causal" else self.offline_s


class GebdDetector:
    """The project's scorer and gate run on one video at a time, for GEBD.

    Each call resets a :class:`SurpriseScorer` and a :class:`SurpriseGate` (the same classes
    the robot runs), feeds the video's embeddings in order, and returns the peaks' stamps as
    seconds from ``origin_ns`` (GEBD times are seconds from the start of the video, so for a
    decoded file the presentation times with origin 0). Beside the causal gate it applies
    :func:`offline_peaks` to the same scores: tau over the whole video at once.

    **Short videos.** The scorer needs ``window`` earlier embeddings before it scores one,
    and the causal gate ``warmup`` scores before it may trigger; a boundary earlier than
    frame ``window + warmup - 1`` cannot be found causally (``window + 1`` offline). A video
    of at most ``window`` frames gets no score and no boundary, so the protocol counts all
    its boundaries as missed. Kinetics-GEBD clips last about 10 s, so the robot's W=64 at
    30 frames/s would blind the first 2 s: the defaults here are shorter (W=16, warm-up 8,
    suppression 0.5 s; the clips' boundaries are at least 0.6 s apart after the release's
    merging of changes within 2 x 0.3 s). These defaults are this adapter's choice, not the
    paper's; pass the robot's values to evaluate exactly the deployed detector.

    Args:
        window: W of the scorer.
        eps: Floor of the scorer's standard deviation.
        gamma: Threshold multiplier of both variants.
        history: Scores held by the causal gate for median and MAD (3000 holds a whole clip).
        warmup: Scores before the causal gate may trigger.
        nms_seconds: Suppression radius of both variants, seconds.

    Raises:
        ConfigError: A setting is out of range (checked by the scorer's and gate's configs).

    """

    def __init__(
        self,
        window: int = 16,
        *,
        eps: float = 1e-6,
        gamma: float = 1.0,
        history: int = 3000,
        warmup: int = 8,
        nms_seconds: float = 0.5,
    ) -> None:
        self._scorer = SurpriseScorer(window=window, eps=eps)
        self._gate = SurpriseGate(
            gamma=gamma, history=history, warmup=warmup, nms_seconds=nms_seconds
        )

    @property
    def window(self) -> int:
        """W of the scorer: the number of leading frames that get no score."""
        return self._scorer.window

    @property
    def settings(self) -> dict[str, Any]:
        """The scorer and gate settings, for a report."""
        return {"window": self._scorer.window, **self._gate.config.as_dict()}

    def detect(
        self,
        embeddings: npt.ArrayLike,
        stamps_ns: npt.ArrayLike,
        origin_ns: int = 0,
    ) -> GebdDetection:
        """Find the boundaries of one video from its per-frame embeddings.

        Args:
            embeddings: (N, D) array, one embedding per frame, in time order.
            stamps_ns: (N,) stamps in int nanoseconds, strictly increasing.
            origin_ns: Stamp of the video's time zero (boundary seconds are counted from it).

        Returns:
            Boundaries of both variants and the score series.

        Raises:
            InputError: Shapes disagree, an embedding holds NaN/inf, or stamps do not
                increase (the message names the frame).

        """
        z = np.asarray(embeddings, dtype=np.float64)
        t = np.asarray(stamps_ns, dtype=np.int64)
        if z.ndim != 2 or t.ndim != 1 or z.shape[0] != t.shape[0]:
            raise InputError(
                f"embeddings {z.shape} must be (N, D) with one stamp each, stamps are {t.shape}"
            )
        self._scorer.reset()
        scored_t: list[int] = []
        scores: list[float] = []
        kls: list[float] = []
        for i in range(z.shape[0]):
            try:
                r = self._scorer.update(z[i])
            except InputError as exc:
                raise InputError(f"frame {i}: {exc}") from exc
            if r is not None:
                scored_t.append(int(t[i]))
                scores.append(r.score)
                kls.append(r.kl)
        return self._gate_scores(
            np.asarray(scored_t, np.int64), np.asarray(scores), kls, origin_ns, z.shape[0]
        )

    def detect_scores(
        self, scores: npt.ArrayLike, stamps_ns: npt.ArrayLike, origin_ns: int = 0
    ) -> GebdDetection:
        """Find the boundaries of one video from surprise scores computed elsewhere.

        Args:
            scores: (N,) s(t) per scored frame.
            stamps_ns: (N,) their stamps in int nanoseconds, strictly increasing.
            origin_ns: Stamp of the video's time zero.

        Raises:
            InputError: Shapes disagree, a score is not finite, or stamps do not increase.

        """
        s = np.asarray(scores, dtype=np.float64)
        t = np.asarray(stamps_ns, dtype=np.int64)
        if s.ndim != 1 or s.shape != t.shape:
            raise InputError(f"scores {s.shape} and stamps {t.shape} must be 1-D of equal length")
        return self._gate_scores(t, s, [math.nan] * s.size, origin_ns, s.size)

    def _gate_scores(
        self,
        t: npt.NDArray[np.int64],
        s: npt.NDArray[np.float64],
        kls: Sequence[float],
        origin_ns: int,
        frames: int,
    ) -> GebdDetection:
        self._gate.reset()
        peaks: list[int] = []
        for i in range(s.size):
            try:
                peaks += [e.stamp_ns for e in self._gate.push(int(t[i]), float(s[i]), kls[i])]
            except InputError as exc:
                raise InputError(f"scored frame {i}: {exc}") from exc
        peaks += [e.stamp_ns for e in self._gate.flush()]
        cfg = self._gate.config
        idx, tau = offline_peaks(t, s, cfg.gamma, cfg.nms_seconds)
        return GebdDetection(
            causal_s=tuple((p - origin_ns) / NS_PER_SECOND for p in peaks),
            offline_s=tuple((int(t[i]) - origin_ns) / NS_PER_SECOND for i in idx),
            offline_threshold=tau,
            stamps_ns=t,
            scores=s,
            frames=frames,
        )


# --------------------------------------------------------------------------------------------
# Video files
# --------------------------------------------------------------------------------------------


def find_video(folder: Path, video_id: str) -> Path | None:
    """The file of one video in a folder: ``<video_id><suffix>`` for a video suffix.

    The suffixes are tried in the order of
    :data:`~surprise_memory.sources.video.VIDEO_SUFFIXES` (``.mp4`` first).

    Args:
        folder: The folder of the videos.
        video_id: The video's id in the annotation file.

    Returns:
        The first existing file, or None when there is none.

    """
    from surprise_memory.sources.video import VIDEO_SUFFIXES

    for ext in VIDEO_SUFFIXES:
        candidate = folder / f"{video_id}{ext}"
        if candidate.is_file():
            return candidate
    return None


def detect_video(
    path: Path, encoder: VideoEncoder, enc_cfg: EncoderConfig, detector: GebdDetector
) -> GebdDetection:
    """One embedding per frame of a video (a window ending at each frame), then detect.

    Args:
        path: The video file, decoded with its presentation times (origin 0).
        encoder: The video encoder.
        enc_cfg: The encoder settings (frames per window, sampling).
        detector: The detector run on the embeddings.

    Returns:
        The boundaries found in the video, in seconds from its start.

    Raises:
        InputError: The video cannot be read, or its embeddings are unusable.

    """
    from surprise_memory.sources import VideoSource

    z, stamps = encoder.encode_stream(VideoSource(path), enc_cfg)
    return detector.detect(z, stamps, origin_ns=0)


def detect_videos(
    video_ids: Iterable[str],
    folder: Path,
    encoder: VideoEncoder,
    enc_cfg: EncoderConfig,
    detector: GebdDetector,
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[str]]:
    """Run :func:`detect_video` on each video of a folder, in the given order.

    Args:
        video_ids: The ids to detect (an iterable, so that a progress bar can wrap it).
        folder: The folder of the videos, found by :func:`find_video`.
        encoder: The video encoder.
        enc_cfg: The encoder settings.
        detector: The detector run on each video.

    Returns:
        The causal and the offline predictions ``{video_id: [seconds, ...]}``, and the ids
        whose file was not found (they have no entry in the predictions).

    Raises:
        InputError: A video cannot be read, or its embeddings are unusable.

    """
    causal: dict[str, list[float]] = {}
    offline: dict[str, list[float]] = {}
    missing: list[str] = []
    for vid in video_ids:
        path = find_video(folder, vid)
        if path is None:
            missing.append(vid)
            continue
        found = detect_video(path, encoder, enc_cfg, detector)
        causal[vid], offline[vid] = list(found.causal_s), list(found.offline_s)
    return causal, offline, missing
