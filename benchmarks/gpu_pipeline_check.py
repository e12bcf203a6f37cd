"""The offline pipeline with the real architectures on a GPU: frames/s of `process` and
the live path's cost per window.

Run on a CUDA machine from the repository root::

    python benchmarks/gpu_pipeline_check.py --out results.json

A 60 s synthetic recording (320x240 at 10 Hz, with odometry) is written as a rosbag2, then
processed with V-JEPA-2 ViT-L fpc64-256 (M = 64, one window per frame) and PE-Core-L-14-336,
both with random weights (cost does not depend on the weights; no download), in bf16 on
CUDA, at encoder batch 1 and 8. Also timed: one live-path window (``encode_window``) and the
scorer + gate per frame on this machine's CPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from surprise_memory.config import EncoderConfig
from surprise_memory.offline.pipeline import PipelineSettings, process
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag
from surprise_memory.perception.encoders import VideoEncoder
from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.scorer import SurpriseScorer

ENCODER = {"encoder_weights": "random", "encoder_device": "cuda"}
EMBEDDER = {
    "embedder_model": "PE-Core-L-14-336",
    "embedder_weights": "random",
    "embedder_device": "cuda",
}
SMOKE = {  # --smoke: the tiny presets on the CPU, to check the script anywhere
    "encoder_weights": "random:tiny",
    "encoder_device": "cpu",
    "embedder_model": "PE-Core-tiny-random",
    "embedder_weights": "random",
    "embedder_device": "cpu",
}


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def live_window_ms(models: dict[str, Any], repeats: int = 20) -> float:
    """Median ms of one M=64 window through ``encode_window`` (the live path)."""
    encoder = VideoEncoder.from_config(EncoderConfig.from_mapping(models))
    size = encoder.crop_size
    window = np.random.default_rng(0).integers(0, 256, (64, size, size, 3), dtype=np.uint8)
    for _ in range(3):
        encoder.encode_window(window, prepared=True)
    times = []
    for _ in range(repeats):
        _sync()
        t0 = time.perf_counter()
        encoder.encode_window(window, prepared=True)
        _sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def scorer_gate_us(frames: int = 20_000) -> float:
    """Mean µs per frame of SurpriseScorer.update + SurpriseGate.push at D=1024, W=64."""
    data = np.random.default_rng(0).normal(size=(frames, 1024)).astype(np.float32)
    scorer, gate = SurpriseScorer(window=64), SurpriseGate()
    t0 = time.perf_counter()
    for i, z in enumerate(data):
        r = scorer.update(z)
        if r is not None:
            gate.push(i * 100_000_000, r.score, r.kl)
    return (time.perf_counter() - t0) / frames * 1e6


def process_fps(bag: Path, work: Path, batch: int, models: dict[str, Any]) -> dict[str, Any]:
    """Run `process` on the bag with the given models; its summary."""
    settings = PipelineSettings.from_mapping({**models, "encoder_batch": batch})
    t0 = time.perf_counter()
    summary = process(bag, work / f"store_b{batch}", settings, pose_topic="/odom")
    record = summary.as_dict()
    record["wall_s_including_model_load"] = time.perf_counter() - t0
    return record


def main() -> None:
    """Measure and print; write JSON with --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny presets on the CPU, 10 s")
    args = parser.parse_args()
    models = SMOKE if args.smoke else {**ENCODER, **EMBEDDER}
    seconds = 10 if args.smoke else 60
    results: dict[str, Any] = {
        "models": models,
        "machine": {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }
    print(results["machine"], flush=True)

    def save(data: dict[str, Any]) -> None:  # after every step: a cut-off run keeps its figures
        if args.out:
            args.out.write_text(json.dumps(data, indent=1, default=str))

    results["scorer_gate_us_per_frame"] = scorer_gate_us()
    print("scorer+gate us/frame", results["scorer_gate_us_per_frame"], flush=True)
    results["live_window_ms_m64"] = live_window_ms(models)
    print("live window ms", results["live_window_ms_m64"], flush=True)
    save(results)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        scene = SyntheticScene(seed=0, duration_s=seconds, fps=10, width=320, height=240)
        bag = work / "recording"
        write_synthetic_bag(bag, scene)
        for batch in (1, 8):
            rec = process_fps(bag, work, batch, models)
            results[f"process_batch_{batch}"] = rec
            print(f"process batch {batch}:", json.dumps(rec, default=str)[:600], flush=True)
            save(results)


if __name__ == "__main__":
    main()
