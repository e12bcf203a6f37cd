"""PySceneDetect and our surprise pipeline side by side, on the same decoded frames.

Run (inside the venv, ``scenedetect`` installed: it is a benchmark dependency, not a
runtime one)::

    python benchmarks/peer_scenedetect.py                       # synthetic inputs
    python benchmarks/peer_scenedetect.py --video clip.mp4 --truth 2.1,5.0
    python benchmarks/peer_scenedetect.py --json peer.json

Every input is decoded **once** into RGB uint8 arrays with their stamps (synthetic inputs
are rendered straight into arrays; a video goes through the project's own
:class:`surprise_memory.sources.VideoSource`), and the same arrays feed both sides, so the
comparison measures the detectors, not the decoders. Per input it prints the boundaries
each detector found, F1 against the ground truth at the GEBD relative distances 0.05 ..
0.50 (the protocol of :mod:`surprise_memory.evaluation.protocol`, one video, one annotator)
and frames per second of each detector.

PySceneDetect side: ``ContentDetector()`` and ``AdaptiveDetector()`` with their defaults,
each fed frame by frame the way ``SceneManager.detect_scenes`` feeds them (BGR order, the
same automatic downscale to a width of about 256 px with linear interpolation, then
``post_process`` at the end). A cut at frame k is a boundary at the stamp of frame k.

Our side: an embedding per frame, then :class:`surprise_memory.evaluation.GebdDetector`
(the project's ``SurpriseScorer`` and ``SurpriseGate``), causal and offline. The embedding
is :func:`thumbnail_embedding` (documented below) by default, or, with ``--encoder-weights``
(a hub id, a local folder, or ``random:tiny`` / ``random``), V-JEPA-2 through the project's
``VideoEncoder``, one window of ``--clip-frames`` frames ending at each frame. Random
weights measure speed only. Our frames per second are given for the embedding plus
detector, and for the detector alone.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.evaluation import (
    REL_DIS_THRESHOLDS,
    GebdDetector,
    GebdVideo,
    evaluate_gebd,
    frame_stamps_ns,
)

_NS = 1_000_000_000
Embed = Callable[[npt.NDArray[np.uint8]], npt.NDArray[np.float32]]


# ------------------------------------------------------------------------------ inputs


@dataclass
class Clip:
    """One decoded input: frames (N, H, W, 3) RGB uint8, stamps (N,) int ns, truth in s."""

    name: str
    frames: npt.NDArray[np.uint8]
    stamps_ns: npt.NDArray[np.int64]
    truth_s: list[float] | None
    duration_s: float
    note: str = ""


def _scene_renderer(
    rng: np.random.Generator, height: int, width: int
) -> Callable[[int], npt.NDArray[np.float32]]:
    """A random scene: colour gradient, a moving texture (pan) and three moving blobs."""
    c0, c1 = rng.uniform(0, 255, size=(2, 3))
    angle = rng.uniform(0, 2 * math.pi)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    ramp = (np.cos(angle) * xx / width + np.sin(angle) * yy / height + 1) / 2
    base = c0 + (c1 - c0) * ramp[..., None]
    freq = rng.uniform(0.05, 0.2, size=2)
    pan = rng.uniform(-2.0, 2.0, size=2)  # pixels per frame
    tex_amp = rng.uniform(10, 30)
    blobs = [
        (
            rng.uniform(0, width),
            rng.uniform(0, height),
            rng.uniform(-3, 3),
            rng.uniform(-3, 3),
            rng.uniform(8, 20),
            rng.uniform(0, 255, size=3),
        )
        for _ in range(3)
    ]

    def render(k: int) -> npt.NDArray[np.float32]:
        tex = np.sin((xx + pan[0] * k) * freq[0]) * np.sin((yy + pan[1] * k) * freq[1])
        img = base + tex_amp * tex[..., None]
        for x0, y0, vx, vy, r, col in blobs:
            cx, cy = (x0 + vx * k) % width, (y0 + vy * k) % height
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
            img[mask] = col
        out: npt.NDArray[np.float32] = img.astype(np.float32)
        return out

    return render


def synthetic_clip(
    name: str,
    scene_lengths_s: Sequence[float],
    fades_s: Sequence[float],
    *,
    fps: float = 30.0,
    size: tuple[int, int] = (120, 160),
    noise: float = 3.0,
    seed: int = 0,
) -> Clip:
    """Render scenes joined by hard cuts (fade 0) or cross-fades, with ground truth.

    Args:
        name: Input name.
        scene_lengths_s: Length of each scene in seconds.
        fades_s: Per transition (one fewer than scenes), 0 for a hard cut, else the
            cross-fade length in seconds. The ground truth of a transition is its middle.
        fps: Frame rate.
        size: (height, width).
        noise: Standard deviation of per-pixel sensor noise (grey levels).
        seed: Random seed (scenes, motion, noise).

    """
    rng = np.random.default_rng(seed)
    h, w = size
    starts = np.concatenate([[0.0], np.cumsum(scene_lengths_s)])
    n = round(starts[-1] * fps)
    renders = [_scene_renderer(rng, h, w) for _ in scene_lengths_s]
    frames = np.empty((n, h, w, 3), np.uint8)
    truth = []
    for i in range(n):
        t = i / fps
        s = min(int(np.searchsorted(starts, t, side="right")) - 1, len(renders) - 1)
        img: npt.NDArray[np.floating[Any]] = renders[s](i)
        # a fade centred on the boundary between scene s and s+1 (or s-1 and s)
        for j, fade in enumerate(fades_s):
            edge = starts[j + 1]
            if fade > 0 and abs(t - edge) < fade / 2:
                a = (t - (edge - fade / 2)) / fade  # 0 -> 1 across the fade
                img = (1 - a) * renders[j](i) + a * renders[j + 1](i)
        img = img + rng.normal(0, noise, size=img.shape)
        frames[i] = np.clip(img, 0, 255).astype(np.uint8)
    truth = [float(e) for e in starts[1:-1]]
    kinds = ", ".join("cut" if f == 0 else f"{f:g} s fade" for f in fades_s)
    return Clip(name, frames, frame_stamps_ns(n, fps), truth, n / fps, note=kinds)


def synthetic_inputs() -> list[Clip]:
    """The built-in inputs: hard cuts, cross-fades, and both mixed."""
    return [
        synthetic_clip("synthetic-cuts", [2.5, 2.5, 2.2, 2.4, 2.4], [0, 0, 0, 0], seed=1),
        synthetic_clip("synthetic-fades", [3.0, 3.0, 3.0, 3.0], [1.0, 0.6, 1.2], seed=2),
        synthetic_clip("synthetic-mixed", [2.0, 3.0, 1.5, 2.5, 3.0], [0, 1.0, 0, 0.5], seed=3),
    ]


def decode_video(path: Path, max_frames: int | None) -> Clip:
    """Decode a video once with the project's VideoSource (stamps from presentation time)."""
    from surprise_memory.sources import VideoSource

    source = VideoSource(path)
    frames, stamps = [], []
    for frame in source:
        frames.append(frame.rgb)
        stamps.append(frame.stamp_ns)
        if max_frames is not None and len(frames) >= max_frames:
            break
    if not frames:
        raise SystemExit(f"{path}: no frame decoded")
    t = np.asarray(stamps, np.int64)
    step = int(np.median(np.diff(t))) if t.size > 1 else _NS // 30
    duration = (int(t[-1]) + step) / _NS  # GEBD times count from presentation time 0
    return Clip(path.name, np.stack(frames), t, None, duration, note=source.describe())


# ------------------------------------------------------------------------------ our side


def thumbnail_embedding(frames: npt.NDArray[np.uint8], grid: int = 8) -> npt.NDArray[np.float32]:
    """A small stand-in embedding: the frame averaged over a grid x grid raster, RGB.

    Each frame is cropped to a multiple of ``grid`` in both directions, block-averaged to
    grid x grid cells and scaled to [0, 1]: D = 3 * grid^2 (192 for grid 8). It sees
    colour layout and large motion, nothing semantic, and costs next to nothing: it is
    the documented placeholder for the V-JEPA-2 encoder in this benchmark.
    """
    n, h, w, c = frames.shape
    hh, ww = h - h % grid, w - w % grid
    blocks = frames[:, :hh, :ww].reshape(n, grid, hh // grid, grid, ww // grid, c)
    pooled: npt.NDArray[np.float32] = (blocks.mean(axis=(2, 4), dtype=np.float32) / 255.0).reshape(
        n, -1
    )
    return pooled


def video_encoder_embedding(weights: str, clip_frames: int, device: str) -> Embed:
    """V-JEPA-2 embeddings, one per frame (a window of ``clip_frames`` ending at it)."""
    from surprise_memory.config import EncoderConfig
    from surprise_memory.perception.encoders import VideoEncoder
    from surprise_memory.perception.frames import Frame

    config = EncoderConfig(encoder_weights=weights, encoder_device=device, clip_frames=clip_frames)
    encoder = VideoEncoder.from_config(config)

    def embed(frames: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        stream = (Frame(np.ascontiguousarray(f), i + 1) for i, f in enumerate(frames))
        z, _ = encoder.encode_stream(stream, config)
        return z

    return embed


@dataclass
class Run:
    """What one detector found on one input."""

    detector: str
    boundaries_s: list[float]
    seconds: float
    frames: int
    f1: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def fps(self) -> float:
        """Frames per second of the detector on this input."""
        return self.frames / self.seconds if self.seconds > 0 else math.inf


def run_ours(clip: Clip, embed: Embed, detector: GebdDetector) -> list[Run]:
    """Embed every frame, then the scorer and gate (causal and offline) on the embeddings."""
    n = len(clip.frames)
    t0 = time.perf_counter()
    z = embed(clip.frames)
    t1 = time.perf_counter()
    det = detector.detect(z, clip.stamps_ns)
    t2 = time.perf_counter()
    extra = {"embed_s": t1 - t0, "detector_only_fps": n / (t2 - t1), "dim": int(z.shape[1])}
    return [
        Run("surprise causal", list(det.causal_s), t2 - t0, n, extra=extra),
        Run("surprise offline", list(det.offline_s), t2 - t0, n, extra=extra),
    ]


# ------------------------------------------------------------------------------ peer side


def run_scenedetect(clip: Clip, which: str) -> Run:
    """Feed the frames to one PySceneDetect detector with its defaults, as SceneManager does."""
    import cv2
    from scenedetect import FrameTimecode
    from scenedetect.detectors import AdaptiveDetector, ContentDetector
    from scenedetect.scene_manager import compute_downscale_factor

    detector = ContentDetector() if which == "content" else AdaptiveDetector()
    n, h, w, _ = clip.frames.shape
    factor = compute_downscale_factor(max(w, h))
    size = (max(1, round(w / factor)), max(1, round(h / factor)))
    step = np.diff(clip.stamps_ns)
    rate = _NS / float(np.median(step)) if n > 1 else 30.0
    cuts: list[Any] = []
    t0 = time.perf_counter()
    for i in range(n):
        bgr: np.ndarray = np.ascontiguousarray(clip.frames[i, :, :, ::-1])
        if factor > 1.0:
            bgr = cv2.resize(bgr, size, interpolation=cv2.INTER_LINEAR)
        cuts += detector.process_frame(FrameTimecode(i, rate), bgr)
    cuts += detector.post_process(FrameTimecode(n - 1, rate))
    seconds = time.perf_counter() - t0
    frames_at = sorted({int(c.frame_num) for c in cuts})
    bounds = [(int(clip.stamps_ns[k]) - 0) / _NS for k in frames_at if 0 <= k < n]
    return Run(f"scenedetect {which}", bounds, seconds, n)


# ------------------------------------------------------------------------------ report


def score(clip: Clip, runs: list[Run]) -> None:
    """F1 at the GEBD thresholds against the clip's truth (one video, one annotator)."""
    if clip.truth_s is None:
        return
    gt = {clip.name: GebdVideo(clip.name, clip.duration_s, 1.0, (tuple(clip.truth_s),))}
    for run in runs:
        result = evaluate_gebd(gt, {clip.name: run.boundaries_s})
        run.f1 = [r.f1 for r in result.per_threshold]


def report(clip: Clip, runs: list[Run]) -> None:
    """Print one input's block."""
    h, w = clip.frames.shape[1:3]
    print(
        f"\n== {clip.name}: {len(clip.frames)} frames {w}x{h}, {clip.duration_s:.2f} s"
        + (f" ({clip.note})" if clip.note else "")
    )
    truth = "unknown" if clip.truth_s is None else _times(clip.truth_s)
    print(f"   truth: {truth}")
    heads = "".join(f"{t:>6.2f}" for t in REL_DIS_THRESHOLDS)
    print(f"   {'detector':<21}{'fps':>9}  {'F1 @':<5}{heads}{'  mean':>7}")
    for run in runs:
        f1 = (
            "".join(f"{v:>6.2f}" for v in run.f1) + f"{np.mean(run.f1):>7.3f}"
            if run.f1 is not None
            else "  (no ground truth)"
        )
        print(f"   {run.detector:<21}{run.fps:>9.0f}  {'':<5}{f1}")
    for run in runs:
        print(f"   {run.detector:<21} {_times(run.boundaries_s)}")
    ours = next(r for r in runs if r.detector == "surprise causal")
    print(
        f"   (ours: embedding {ours.extra['dim']}-D, "
        f"{len(clip.frames) / ours.extra['embed_s']:.0f} fps; scorer + gate alone "
        f"{ours.extra['detector_only_fps']:.0f} fps)"
    )


def _times(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]" if values else "[]"


def compare_clip(
    clip: Clip, detector: GebdDetector, embed: Embed = thumbnail_embedding
) -> list[Run]:
    """Ours (causal, offline) and both PySceneDetect detectors on one clip, scored."""
    runs = [
        *run_ours(clip, embed, detector),
        run_scenedetect(clip, "content"),
        run_scenedetect(clip, "adaptive"),
    ]
    score(clip, runs)
    return runs


def result_record(clip: Clip, runs: list[Run]) -> dict[str, Any]:
    """One input's results as plain data (the ``--json`` output)."""
    return {
        "input": clip.name,
        "frames": len(clip.frames),
        "duration_s": clip.duration_s,
        "truth_s": clip.truth_s,
        "runs": [
            {
                "detector": r.detector,
                "boundaries_s": r.boundaries_s,
                "fps": r.fps,
                "f1": r.f1,
                "mean_f1": None if r.f1 is None else float(np.mean(r.f1)),
                **r.extra,
            }
            for r in runs
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--video", type=Path, action="append", default=[], help="a video file to add (repeatable)"
    )
    parser.add_argument(
        "--truth",
        action="append",
        default=[],
        help="comma-separated boundary seconds for the matching --video",
    )
    parser.add_argument("--max-frames", type=int, default=None, help="decode at most N frames")
    parser.add_argument("--no-synthetic", action="store_true", help="skip the built-in inputs")
    parser.add_argument("--window", type=int, default=16, help="scorer W (GEBD default 16)")
    parser.add_argument("--gamma", type=float, default=1.0, help="gate gamma (paper: 1.0)")
    parser.add_argument("--warmup", type=int, default=8, help="gate warm-up scores")
    parser.add_argument("--nms", type=float, default=0.5, help="suppression radius, seconds")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--encoder-weights",
        default=None,
        help="embed with V-JEPA-2 (hub id, folder, random:tiny); default: thumbnail embedding",
    )
    parser.add_argument("--clip-frames", type=int, default=16, help="V-JEPA-2 window M")
    parser.add_argument("--device", default="auto", help="V-JEPA-2 device")
    args = parser.parse_args(argv)
    if len(args.truth) > len(args.video):
        parser.error("--truth given without a matching --video")

    import cv2
    import scenedetect

    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, numpy {np.__version__}, scenedetect "
        f"{scenedetect.__version__}, opencv {cv2.__version__}"
    )
    detector = GebdDetector(
        window=args.window, gamma=args.gamma, warmup=args.warmup, nms_seconds=args.nms
    )
    embed: Embed = thumbnail_embedding
    if args.encoder_weights:
        embed = video_encoder_embedding(args.encoder_weights, args.clip_frames, args.device)
        print(f"ours: V-JEPA-2 {args.encoder_weights} (M={args.clip_frames}) + {detector.settings}")
    else:
        print(f"ours: thumbnail embedding + GebdDetector {detector.settings}")
    clips = [] if args.no_synthetic else synthetic_inputs()
    for k, path in enumerate(args.video):
        clip = decode_video(path, args.max_frames)
        if k < len(args.truth) and args.truth[k].strip():
            clip.truth_s = [float(x) for x in args.truth[k].split(",")]
        clips.append(clip)

    results = []
    for clip in clips:
        runs = compare_clip(clip, detector, embed)
        report(clip, runs)
        results.append(result_record(clip, runs))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
