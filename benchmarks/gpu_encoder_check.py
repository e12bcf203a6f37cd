"""GPU check of the V-JEPA-2 ViT-L fpc64 encoder: windows/s in bf16 at batch 1 and 8, with and
without torch.compile, and the wrapper overhead ratio vs the bare forward.

Prepared for a lent GPU machine (one short run): ``python benchmarks/gpu_encoder_check.py``.
Random weights of the real ViT-L architecture (no download needed; the cost does not
depend on the weights). Prints one table and, when ``$OUT`` is set, writes
``$OUT/gpu_encoder_check.json``. Budget: about 3-5 minutes on an H100 (model init ~20 s,
each compile ~1 min).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

from surprise_memory.perception.encoders import VideoEncoder


def timed(fn: Any, reps: int) -> float:
    """Median seconds per call after two warm-up calls (CUDA synchronised)."""
    fn()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(compile_model: bool, frames: int, batches: list[int], reps: int) -> list[dict[str, Any]]:
    """Rows of the table for one encoder (compiled or not)."""
    t0 = time.perf_counter()
    enc = VideoEncoder(
        "random", device="cuda", dtype="bfloat16", batch_size=max(batches), compile=compile_model
    )
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    c = enc.crop_size
    rows = []
    for batch in batches:
        wins = [rng.integers(0, 256, (frames, c, c, 3), dtype=np.uint8) for _ in range(batch)]
        pixels = enc.preprocess(wins, prepared=True)

        def bare(pixels: torch.Tensor = pixels) -> object:
            with torch.inference_mode():
                return enc.model(pixel_values_videos=pixels, skip_predictor=True)

        def wrapped(wins: list[np.ndarray] = wins) -> object:
            return enc.encode_windows(wins, prepared=True)

        t_first = time.perf_counter()
        wrapped()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t_first
        w = timed(wrapped, reps)
        b = timed(bare, reps)
        rows.append(
            {
                "compile": compile_model,
                "batch": batch,
                "frames": frames,
                "windows_per_s": batch / w,
                "wrapper_ms": w * 1e3,
                "bare_ms": b * 1e3,
                "overhead_ratio": w / b,
                "first_call_s": first_s,
                "build_s": build_s,
                "max_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
            }
        )
        print(
            f"compile={compile_model!s:5} B={batch:<2} {batch / w:8.2f} windows/s  "
            f"wrapper {w * 1e3:8.1f} ms  bare {b * 1e3:8.1f} ms  ratio {w / b:5.3f}  "
            f"first call {first_s:6.1f} s  mem {rows[-1]['max_mem_gib']:.1f} GiB",
            flush=True,
        )
    return rows


def main() -> None:
    """Run the check and print/write the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled runs")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check needs a GPU")
    info = {
        "gpu": torch.cuda.get_device_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    print(json.dumps(info), flush=True)
    rows = run(False, args.frames, [1, 8], args.reps)
    torch.cuda.empty_cache()
    if not args.no_compile:
        try:
            rows += run(True, args.frames, [1, 8], args.reps)
        except Exception as err:  # report, keep the eager figures
            print(f"torch.compile failed: {type(err).__name__}: {err}", flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "gpu_encoder_check.json").write_text(json.dumps({**info, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
