"""VideoEncoder cost: wrapper overhead vs the bare VJEPA2Model forward, cost vs M and stride,
windows/s vs batch (goal: overhead ratio <= 1.05).

Run: ``python benchmarks/bench_encoders.py [--skip-vitl]`` (inside the venv). The ViT-L rows
build the real ViT-L architecture with random weights (no download) at 16 frames; on a
2-core CPU one forward takes tens of seconds. Prints the machine and versions.
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import transformers

from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS, VideoEncoder


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_s(fn: Callable[[], object], reps: int, device: torch.device) -> float:
    """Median wall time of ``fn`` over ``reps`` calls (after one warm-up call)."""
    fn()
    _sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def overhead(enc: VideoEncoder, frames: int, batch: int, reps: int) -> tuple[float, float]:
    """(wrapper s/call, bare forward s/call) on the same windows, interleaved."""
    rng = np.random.default_rng(0)
    c = enc.crop_size
    windows = [rng.integers(0, 256, (frames, c, c, 3), dtype=np.uint8) for _ in range(batch)]
    pixels = enc.preprocess(windows, prepared=True)
    model = enc.model

    def bare() -> object:
        with torch.inference_mode():
            return model(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state

    def wrapped() -> object:
        return enc.encode_windows(windows, prepared=True)

    bare_t, wrap_t = [], []
    for _ in range(reps):  # interleave so drift hits both alike
        bare_t.append(median_s(bare, 1, enc.device))
        wrap_t.append(median_s(wrapped, 1, enc.device))
    return statistics.median(wrap_t), statistics.median(bare_t)


def main() -> None:
    """Print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--reps", type=int, default=20, help="repetitions, tiny preset")
    parser.add_argument("--vitl-reps", type=int, default=2, help="repetitions, ViT-L")
    parser.add_argument("--skip-vitl", action="store_true")
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
        f"torch threads, python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    if torch.cuda.is_available():
        print(f"gpu: {torch.cuda.get_device_name()}")

    tiny = VideoEncoder(TINY_VIDEO_WEIGHTS, device=args.device, batch_size=64)
    print(
        f"\n== wrapper overhead (encode_windows from prepared uint8 vs bare forward), {tiny.dtype}"
    )
    print(f"{'model':>22} {'T':>3} {'B':>3} {'wrapper ms':>11} {'bare ms':>9} {'ratio':>6}")
    rows = [("tiny", tiny, 16, 1, args.reps), ("tiny", tiny, 16, 8, args.reps)]
    for name, enc, frames, batch, reps in rows:
        w, b = overhead(enc, frames, batch, reps)
        print(f"{name:>22} {frames:>3} {batch:>3} {w * 1e3:>11.2f} {b * 1e3:>9.2f} {w / b:>6.3f}")
    if not args.skip_vitl:
        vitl = VideoEncoder("random", device=args.device, batch_size=8)
        w, b = overhead(vitl, 16, 1, args.vitl_reps)
        print(
            f"{'ViT-L (random)':>22} {16:>3} {1:>3} {w * 1e3:>11.1f} {b * 1e3:>9.1f} {w / b:>6.3f}"
        )
        del vitl

    print("\n== tiny preset: cost per window vs M, and per frame vs stride (batch 1)")
    print(
        f"{'M':>4} {'ms/window':>10} " + " ".join(f"{'stride ' + str(s):>9}" for s in (1, 2, 4, 8))
    )
    rng = np.random.default_rng(1)
    c = tiny.crop_size
    for m in (8, 16, 32, 64):
        win = rng.integers(0, 256, (m, c, c, 3), dtype=np.uint8)
        one = functools.partial(tiny.encode_window, win, prepared=True)
        t = median_s(one, args.reps, tiny.device)
        per_frame = " ".join(f"{t / s * 1e3:>9.2f}" for s in (1, 2, 4, 8))
        print(f"{m:>4} {t * 1e3:>10.2f} {per_frame}   (ms per camera frame)")

    print("\n== tiny preset: windows/s vs batch (M = 16)")
    print(f"{'B':>4} {'windows/s':>10}")
    for batch in (1, 2, 4, 8, 16, 32):
        wins = [rng.integers(0, 256, (16, c, c, 3), dtype=np.uint8) for _ in range(batch)]
        many = functools.partial(tiny.encode_windows, wins, prepared=True)
        t = median_s(many, args.reps, tiny.device)
        print(f"{batch:>4} {batch / t:>10.1f}")


if __name__ == "__main__":
    main()
