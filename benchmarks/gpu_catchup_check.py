"""GPU check of the live encoder at M = 64 (issue 16): catch-up batches and the speed options.

Prepared for a lent GPU machine, one short run::

    python benchmarks/gpu_catchup_check.py            # ViT-L fpc64-256, random weights, bf16
    python benchmarks/gpu_catchup_check.py --smoke    # tiny preset on the CPU (any machine)

Three parts, each printed as a table (and written to ``$OUT/gpu_catchup_check.json`` after
every row, so a run cut short keeps its figures):

1. **forward**: for each speed option (eager bf16; SDPA flash / efficient / cudnn; CUDA
   graphs; torch.compile modes; FP8 via torchao, where installed and the card has FP8),
   the live path at batch 1 and at catch-up batches 2, 4 and 8 (``LiveWindowEncoder``:
   M + B - 1 distinct frames uploaded from pinned memory, windows gathered on the device),
   and the offline path at batch 8 (``encode_windows``: eight host windows): windows/s,
   ms per window, the fraction of the card's dense bf16 peak, peak GPU memory, the
   one-time cost (compile, graph capture) and the largest deviation of the embeddings
   from the eager bf16 ones (max |dz| / max |z| and the smallest cosine similarity).
2. **live**: a synthetic 30 Hz camera (320x240 frames, real time) for ``--live-seconds``
   into the encoder node's own objects (``CatchUpBatcher`` in the camera thread,
   ``LiveWindowEncoder`` in a worker thread, exactly as ``encoder_node`` wires them), per
   option: windows encoded and dropped, batch sizes, windows/s. With ``--dds`` (rclpy
   and the colcon install present) the installed ``encoder_node`` runs instead, in its
   own process with the same settings, fed over DDS (reliable camera QoS), and its
   ``/diagnostics`` counters are read. The lent GPU image has Python 3.12 and no ROS 2,
   so there the live part runs without ``--dds`` unless ROS is brought along.

FLOPs per window are counted from the model config (2 per multiply-add: the linear
layers, attention's two matrix products, the patch embedding); for ViT-L at M = 64,
256 px that is 11.6 TFLOP. The peak figures used (dense bf16, no sparsity, the vendor
data sheets): H100 SXM / H200: 989 TFLOP/s, H100 PCIe: 756, H100 NVL: 835, A100: 312,
L40S: 362, L4: 121; other cards print no fraction.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.perception.catchup import CatchUpBatcher
from surprise_memory.perception.encoders import (
    FastForward,
    ForwardOptions,
    LiveWindowEncoder,
    VideoEncoder,
)
from surprise_memory.perception.frames import Frame

BF16_PEAK_TFLOPS = {  # dense, from the data sheets; matched against the device name
    "H200": 989.0,
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,  # SXM (HBM3)
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
}
VARIANTS: dict[str, dict[str, Any]] = {
    "eager": {},
    "sdpa-flash": {"sdpa_backend": "flash"},
    "sdpa-efficient": {"sdpa_backend": "efficient"},
    "sdpa-cudnn": {"sdpa_backend": "cudnn"},
    "cuda-graphs": {"cuda_graphs": True},
    "compile": {"compile": True},
    "compile-max-autotune-no-cg": {"compile": True, "compile_mode": "max-autotune-no-cudagraphs"},
    "compile-reduce-overhead": {"compile": True, "compile_mode": "reduce-overhead"},
    "fp8": {"fp8": True},
    "fp8-compile": {"fp8": True, "compile": True},
}
DEFAULT_VARIANTS = "eager,sdpa-flash,sdpa-cudnn,cuda-graphs,compile,fp8-compile"


def peak_tflops(name: str) -> float | None:
    """Dense bf16 peak of a card by its name (None when unknown)."""
    for key, value in BF16_PEAK_TFLOPS.items():
        if key in name:
            return value
    return None


def flops_per_window(config: Any, frames: int) -> float:
    """Multiply-adds x 2 of one encoder forward over a window of ``frames`` frames."""
    d, layers = config.hidden_size, config.num_hidden_layers
    tokens = (frames // config.tubelet_size) * (config.crop_size // config.patch_size) ** 2
    mlp = int(d * config.mlp_ratio)
    per_layer = 2 * tokens * (4 * d * d + 2 * d * mlp) + 4 * tokens * tokens * d
    patch = 2 * tokens * d * 3 * config.tubelet_size * config.patch_size**2
    return float(layers * per_layer + patch)


def sync() -> None:
    """Wait for the GPU (no-op on the CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Any, reps: int) -> float:
    """Median seconds per call after one warm call."""
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def deviation(z: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """max |z - ref| / max |ref| and the smallest cosine similarity of matching rows."""
    cos = (z * ref).sum(1) / (np.linalg.norm(z, axis=1) * np.linalg.norm(ref, axis=1))
    return {
        "max_rel_dev": float(np.abs(z - ref).max() / np.abs(ref).max()),
        "min_cosine": float(cos.min()),
    }


class Check:
    """The shared model, inputs and results of one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cuda = torch.cuda.is_available() and not args.smoke
        weights = "random:tiny" if args.smoke else "random"
        self.frames = 8 if args.smoke else args.frames
        t0 = time.perf_counter()
        self.encoder = VideoEncoder(
            weights, device="cuda" if self.cuda else "cpu", batch_size=8, dtype="auto"
        )
        self.build_s = time.perf_counter() - t0
        self.live = LiveWindowEncoder(self.encoder)
        gpu = torch.cuda.get_device_name() if self.cuda else "none"
        self.peak = peak_tflops(gpu) if self.cuda else None
        self.flops = flops_per_window(self.encoder.model.config, self.frames)
        c = self.encoder.crop_size
        rng = np.random.default_rng(0)
        self.distinct = rng.integers(0, 256, (self.frames + 7, c, c, 3), dtype=np.uint8)
        self.pinned = self.live.host_buffer(self.distinct.shape)
        self.pinned[:] = self.distinct
        self.windows = [self.distinct[b : b + self.frames].copy() for b in range(8)]
        self.reference: dict[int, np.ndarray] = {}
        self.results: dict[str, Any] = {
            "machine": {
                "gpu": gpu,
                "bf16_peak_tflops": self.peak,
                "cpu": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "model": self.encoder.model_name,
            "frames": self.frames,
            "tflop_per_window": self.flops / 1e12,
            "model_build_s": self.build_s,
            "forward": [],
            "live": [],
        }
        print(json.dumps(self.results["machine"]), flush=True)
        print(f"{self.encoder.model_name}: {self.flops / 1e12:.2f} TFLOP per window", flush=True)

    def save(self) -> None:
        """Write the results so far to $OUT (or --out)."""
        out = self.args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
        if out is not None:
            path = out / "gpu_catchup_check.json" if out.is_dir() else out
            path.write_text(json.dumps(self.results, indent=1, default=str))

    def use(self, name: str) -> float:
        """Swap the encoder's forward to variant ``name``; return the set-up seconds."""
        t0 = time.perf_counter()
        options = ForwardOptions(**VARIANTS[name])
        enc = self.encoder
        # the benchmark swaps the forward on one loaded model instead of building ViT-L
        # once per option (about 20 s each)
        enc._fast = FastForward(enc.model, options, enc.device, enc.dtype, 8)
        self.live.warm_up(self.frames, 8)
        sync()
        return time.perf_counter() - t0

    def row(self, variant: str, path: str, batch: int, seconds: float, z: np.ndarray) -> None:
        """Print and keep one row of the forward table."""
        per_window = seconds / batch
        frac = self.flops / per_window / (self.peak * 1e12) if self.peak else None
        key = batch if path == "live" else -batch
        if variant == "eager":
            self.reference[key] = z
        dev = deviation(z, self.reference[key]) if key in self.reference else {}
        mem = torch.cuda.max_memory_allocated() / 2**30 if self.cuda else 0.0
        rec = {
            "variant": variant,
            "path": path,
            "batch": batch,
            "windows_per_s": batch / seconds,
            "ms_per_window": per_window * 1e3,
            "fraction_of_bf16_peak": frac,
            "peak_gpu_mem_gib": mem,
            **dev,
        }
        self.results["forward"].append(rec)
        print(
            f"{variant:28} {path:7} B={batch:<2} {batch / seconds:8.2f} windows/s "
            f"{per_window * 1e3:8.2f} ms/window  "
            f"{'' if frac is None else f'{100 * frac:5.1f} % of peak'}  mem {mem:6.2f} GiB  "
            f"dev {dev.get('max_rel_dev', 0.0):.2e} cos {dev.get('min_cosine', 1.0):.6f}",
            flush=True,
        )
        self.save()

    def forward(self, variant: str) -> None:
        """Part 1 for one variant."""
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            setup = self.use(variant)
        except (SurpriseMemoryError, RuntimeError, ImportError) as err:
            print(f"{variant:28} unavailable: {type(err).__name__}: {err}", flush=True)
            self.results["forward"].append({"variant": variant, "unavailable": str(err)})
            self.save()
            return
        print(f"{variant:28} set-up incl. warm-up (compile/capture) {setup:.1f} s", flush=True)
        for batch in (1, 2, 4, 8):
            index = np.arange(self.frames)[None, :] + np.arange(batch)[:, None]
            frames = self.pinned[: self.frames + batch - 1]
            z = self.live.encode(frames, index)
            s = timed(lambda i=index, f=frames: self.live.encode(f, i), self.args.reps)
            self.row(variant, "live", batch, s, z)
        z = self.encoder.encode_windows(self.windows, prepared=True)
        s = timed(lambda: self.encoder.encode_windows(self.windows, prepared=True), self.args.reps)
        self.row(variant, "offline", 8, s, z)

    def live_camera(self, variant: str) -> None:
        """Part 2 for one variant: a real-time 30 Hz camera into the node's objects."""
        try:
            self.use(variant)
        except (SurpriseMemoryError, RuntimeError, ImportError) as err:
            print(f"live {variant}: unavailable ({err})", flush=True)
            return
        config = EncoderConfig(clip_frames=self.frames, encoder_batch=8, encoder_queue=16)
        enc = self.encoder
        batcher = CatchUpBatcher(
            config, (enc.crop_size, enc.crop_size), enc.prepare_frame, self.live.host_buffer
        )
        stop = threading.Event()
        sizes: list[int] = []
        encoded = [0]

        def worker() -> None:
            while not stop.is_set() or len(batcher.queue):
                batch = batcher.next_batch(timeout=0.1)
                if batch is not None and batch.windows:
                    self.live.encode(batch.frames, batch.index)
                    encoded[0] += int(batch.valid.sum())
                    sizes.append(len(batch.windows))

        rng = np.random.default_rng(1)
        scene = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        n = int(30 * self.args.live_seconds)
        t0 = time.perf_counter()
        for i in range(n):  # 30 Hz in real time; the camera never waits for the encoder
            delay = t0 + i / 30 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            off = i % 200
            batcher.push(Frame(np.ascontiguousarray(scene[off : off + 240, off : off + 320]), i))
        stop.set()
        thread.join()
        wall = time.perf_counter() - t0
        rec = {
            "variant": variant,
            "camera_hz": 30,
            "windows": n,
            "encoded": encoded[0],
            "dropped": batcher.dropped,
            "windows_per_s": encoded[0] / wall,
            "batch_mean": float(np.mean(sizes)) if sizes else 0.0,
            "batch_max": max(sizes, default=0),
            "over_dds": False,
        }
        self.results["live"].append(rec)
        print("live", json.dumps(rec), flush=True)
        self.save()


SETTING_OF_OPTION = {
    "compile": "encoder_compile",
    "compile_mode": "encoder_compile_mode",
    "cuda_graphs": "encoder_cuda_graphs",
    "sdpa_backend": "encoder_sdpa_backend",
    "fp8": "encoder_fp8",
}


def live_dds(args: argparse.Namespace, variant: str, frames: int) -> dict[str, Any]:
    """Part 2 over DDS: the installed encoder_node, a 30 Hz rclpy camera, its diagnostics."""
    import subprocess
    import sys
    import tempfile

    import rclpy
    import yaml
    from ament_index_python.packages import get_package_prefix
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from surprise_memory.msg import FrameEmbedding
    from surprise_memory.nodes.messages import image_msg_from_rgb

    camera = "/bench_camera/image_raw"
    params = {
        "encoder_weights": "random:tiny" if args.smoke else "random",
        "encoder_device": "cpu" if args.smoke else "cuda",
        "clip_frames": frames,
        "encoder_batch": 8,
        "encoder_queue": 16,
        **{SETTING_OF_OPTION[k]: v for k, v in VARIANTS[variant].items()},
        "qos_overrides": {
            camera: {"subscription": {"reliability": "reliable", "depth": 1000}},
        },
    }
    exe = Path(get_package_prefix("surprise_memory")) / "lib" / "surprise_memory" / "encoder_node"
    reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    got: list[Any] = []
    diag: dict[str, str] = {}

    def on_diag(msg: Any) -> None:
        for status in msg.status:
            if status.name.endswith("encoder_node"):
                diag.update({kv.key: kv.value for kv in status.values})

    def spin(node: Any, seconds: float, done: Any = lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not done():
            rclpy.spin_once(node, timeout_sec=0.01)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "params.yaml")
        path.write_text(yaml.safe_dump({"/**/encoder_node": {"ros__parameters": params}}))
        cmd = [sys.executable, str(exe), "--ros-args", "--params-file", str(path)]
        cmd += ["-r", "__ns:=/surprise_memory", "-r", f"image:={camera}"]
        log = open(Path(tmp, "node.log"), "w")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
        rclpy.init()
        node = Node("gpu_catchup_check")
        try:
            node.create_subscription(
                FrameEmbedding, "/surprise_memory/embedding", got.append, reliable
            )
            node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
            pub = node.create_publisher(Image, camera, reliable)
            spin(node, 300.0, lambda: pub.get_subscription_count() > 0 or proc.poll() is not None)
            if proc.poll() is not None:
                raise RuntimeError(
                    f"encoder_node exited: {Path(tmp, 'node.log').read_text()[-800:]}"
                )
            rng = np.random.default_rng(1)
            scene = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
            n = int(30 * args.live_seconds)
            t0 = time.perf_counter()
            for i in range(n):
                rgb = np.ascontiguousarray(scene[i % 200 : i % 200 + 240, i % 200 : i % 200 + 320])
                pub.publish(image_msg_from_rgb(rgb, 10**18 + i * 10**9 // 30, "camera"))
                spin(node, t0 + (i + 1) / 30 - time.perf_counter())
            wall = time.perf_counter() - t0

            def settled() -> bool:
                return len(got) + int(diag.get("windows_dropped", 0)) >= n and int(
                    diag.get("windows_encoded", -1)
                ) == len(got)

            spin(node, 30.0, settled)
        finally:
            node.destroy_node()
            rclpy.shutdown()
            proc.send_signal(2)
            proc.wait(timeout=20)
            log.close()
    return {
        "variant": variant,
        "camera_hz": 30,
        "windows": n,
        "encoded": len(got),
        "dropped": int(diag.get("windows_dropped", 0)),
        "windows_per_s": len(got) / wall,
        "batch_max": int(diag.get("batch_max", 0)),
        "batches": int(diag.get("batches", 0)),
        "latency_p95_ms": diag.get("latency_p95_ms"),
        "over_dds": True,
    }


def main() -> None:
    """Run the parts asked for; print tables, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny preset on the CPU")
    parser.add_argument("--frames", type=int, default=64, help="M (default 64)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help=", ".join(VARIANTS))
    parser.add_argument("--live-variants", default="eager,cuda-graphs")
    parser.add_argument("--live-seconds", type=float, default=20.0)
    parser.add_argument("--budget-s", type=float, default=480.0, help="start no part after")
    parser.add_argument("--out", type=Path, default=None, help="JSON file or folder")
    parser.add_argument(
        "--dds", action="store_true", help="live part over DDS with the installed encoder_node"
    )
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a GPU, or use --smoke for the CPU path")
    t_start = time.perf_counter()
    check = Check(args)
    variants = [v for v in args.variants.split(",") if v]
    live = [v for v in args.live_variants.split(",") if v]
    # FP8 swaps the linear layers of the shared model in place: it runs last of all
    plain = [v for v in variants if not VARIANTS[v].get("fp8")]
    steps = [("forward", v) for v in plain] + [("live", v) for v in live]
    steps += [("forward", v) for v in variants if v not in plain]
    for part, variant in steps:
        if time.perf_counter() - t_start > args.budget_s:
            print(f"budget spent: {part} {variant} not run", flush=True)
            continue
        if part == "forward":
            check.forward(variant)
        elif args.dds:  # its own process loads its own model
            try:
                rec = live_dds(args, variant, check.frames)
            except Exception as err:  # report, keep the other figures
                rec = {
                    "variant": variant,
                    "over_dds": True,
                    "error": f"{type(err).__name__}: {err}",
                }
            check.results["live"].append(rec)
            print("live", json.dumps(rec), flush=True)
            check.save()
        else:
            check.live_camera(variant)


if __name__ == "__main__":
    main()
