"""Many recordings on Ray: recordings per minute with 1 and 2 workers and the scaling ratio;
on a GPU, the ViT-L frames/s per GPU under Ray against ``process`` alone.

Run inside the venv (Ray from requirements/ray.txt)::

    python benchmarks/bench_ray.py [--recordings 8] [--seconds 30] [--json out.json]
    python benchmarks/bench_ray.py --gpu [--json out.json]          # on a CUDA machine
    python benchmarks/bench_ray.py --gpu --smoke                    # the GPU script, tiny, on CPU

CPU mode (tiny presets, random weights, CPU): N synthetic recordings (rosbag2, 128x96 at
10 Hz, with odometry) go through ``surprise-memory process``'s job runner three ways:

* here, one after the other, without Ray (``process`` alone, models loaded once), with one
  torch thread like each worker below (on this shared 2-core machine two threads ran the
  tiny pipeline 4-5x slower than one: the cores are oversubscribed);
* on a local Ray cluster of all the machine's cores, with 1 worker of 1 CPU;
* the same with 2 workers.

Each is timed from the moment the workers have their models to the last result (the model
load, once per worker, is given apart), so recordings per minute are the steady rate; the
whole wall time is given too. The scaling ratio is 2 workers / 1 worker (2.0 = perfect).

GPU mode: V-JEPA-2 ViT-L fpc64-256 (M = 64) and PE-Core-L-14-336, random weights (the cost
does not depend on them; no download), bf16 on CUDA: frames/s of the pipeline on 320x240
recordings, ``process`` alone in this process against 1 Ray worker holding the GPU (and 2
workers of half a GPU each), with the same CPU threads (``--cpus``); the overhead is
1 - Ray / alone (goal: at most 5 %).

The machine may be shared: the load average before and after is printed with the figures.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights: never ask the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from surprise_memory.offline.batch import BatchJob, plan_recordings, run_batch
from surprise_memory.offline.inputs import expand_inputs
from surprise_memory.offline.pipeline import PipelineSettings, process
from surprise_memory.offline.run_record import load_run_record
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag

TINY = {
    "encoder_weights": "random:tiny",
    "encoder_device": "cpu",
    "clip_frames": 16,
    "embedder_model": "PE-Core-tiny-random",
    "embedder_weights": "random",
    "embedder_device": "cpu",
}
RUNS = (("alone", "here, no Ray"), ("ray_1", "Ray, 1 worker"), ("ray_2", "Ray, 2 workers"))
"""The CPU mode's three runs: key in the results and label."""
VITL = {
    "encoder_weights": "random",  # the ViT-L fpc64-256 architecture
    "encoder_device": "cuda",
    "embedder_model": "PE-Core-L-14-336",
    "embedder_weights": "random",
    "embedder_device": "cuda",
}


def write_recordings(folder: Path, count: int, seconds: float, size: tuple[int, int]) -> None:
    """``count`` synthetic rosbag2 recordings of ``seconds`` each (different seeds)."""
    for i in range(count):
        scene = SyntheticScene(seed=i, duration_s=seconds, width=size[0], height=size[1])
        write_synthetic_bag(folder / f"rec{i:03d}", scene)


def run_job(
    recordings: Path, out: Path, values: dict[str, Any], cluster: Any | None
) -> dict[str, Any]:
    """One job over the recordings; its timings and rates."""
    settings = PipelineSettings.from_mapping(values)
    job = BatchJob.make(settings, str(out), pose_topic="/odom")
    plan = plan_recordings(expand_inputs([str(recordings)]))
    ready: list[float] = []
    t0 = time.perf_counter()
    record = run_batch(
        job, plan, cluster=cluster, on_start=lambda _line: ready.append(time.perf_counter())
    )
    end = time.perf_counter()
    assert record.complete, record.failed
    runs = [load_run_record(job.run_dir(r.key)) for r in plan]
    frames = sum(r["summary"]["frames"] for r in runs)
    span = end - ready[0]
    return {
        "recordings": len(plan),
        "frames": frames,
        "wall_s": end - t0,
        "load_s": ready[0] - t0,
        "span_s": span,
        "recordings_per_min": 60 * len(plan) / span,
        "frames_per_s": frames / span,
        "per_recording_fps": [r["summary"]["throughput_fps"] for r in runs],
    }


def measure_cpu(count: int, seconds: float, cores: int) -> dict[str, Any]:
    """Here without Ray, then 1 and 2 Ray workers of 1 CPU, on the same recordings."""
    import ray
    import torch

    from surprise_memory.offline.ray_runner import ClusterOptions

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        recs = Path(tmp) / "recordings"
        write_recordings(recs, count, seconds, (128, 96))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as a Ray worker of 1 CPU (Ray sets OMP_NUM_THREADS=1)
        try:
            out["alone"] = run_job(recs, Path(tmp) / "alone", TINY, None)
        finally:
            torch.set_num_threads(threads)
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
        try:
            for workers in (1, 2):
                options = ClusterOptions(workers=workers, cpus=1)
                out[f"ray_{workers}"] = run_job(recs, Path(tmp) / f"ray{workers}", TINY, options)
        finally:
            ray.shutdown()
    out["scaling_2_over_1"] = (
        out["ray_2"]["recordings_per_min"] / out["ray_1"]["recordings_per_min"]
    )
    return out


def measure_gpu(count: int, seconds: float, values: dict[str, Any], cpus: int) -> dict[str, Any]:
    """``process`` alone on the GPU against 1 Ray worker of 1 GPU and 2 of half a GPU.

    Each worker gets ``cpus`` CPUs (Ray then gives it as many torch threads), and
    ``process`` alone runs with as many threads, so that only Ray differs.
    """
    import ray
    import torch

    from surprise_memory.offline.pipeline import OfflinePipeline
    from surprise_memory.offline.ray_runner import ClusterOptions

    gpu = values["encoder_device"] != "cpu"
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ray_gpu_") as tmp:
        recs = Path(tmp) / "recordings"
        write_recordings(recs, count, seconds, (320, 240))
        torch.set_num_threads(cpus)
        pipe = OfflinePipeline(PipelineSettings.from_mapping(values))
        alone = []
        for i in range(3):  # the first pass warms the GPU up (kernels, allocator): dropped
            summary = process(recs / "rec000", Path(tmp) / f"alone{i}", pipeline=pipe)
            alone.append(summary.throughput_fps)
        out["alone_fps"] = alone[1:]
        del pipe
        ray.init(include_dashboard=False, log_to_driver=False)
        try:
            for workers, share in ((1, 1.0), (2, 0.5)):
                options = ClusterOptions(workers=workers, gpus=share if gpu else 0.0, cpus=cpus)
                out[f"ray_{workers}"] = run_job(recs, Path(tmp) / f"ray{workers}", values, options)
        finally:
            ray.shutdown()
    base = statistics.median(out["alone_fps"])
    per_rec = sorted(out["ray_1"]["per_recording_fps"])[1:]  # without the slowest (warm-up)
    out["overhead_per_recording"] = 1 - statistics.median(per_rec) / base
    out["overhead_job"] = 1 - out["ray_1"]["frames_per_s"] / base
    return out


def report_cpu(r: dict[str, Any]) -> list[str]:
    """Lines of the CPU figures."""
    lines = []
    for name, label in RUNS:
        j = r[name]
        lines.append(
            f"{label:15s} {j['recordings_per_min']:6.1f} recordings/min "
            f"({j['frames_per_s']:.1f} frames/s over {j['span_s']:.1f} s; wall "
            f"{j['wall_s']:.1f} s, models loaded in {j['load_s']:.1f} s)"
        )
    lines.append(f"scaling 2 workers / 1 worker: {r['scaling_2_over_1']:.2f}x")
    return lines


def report_gpu(r: dict[str, Any]) -> list[str]:
    """Lines of the GPU figures."""
    base = statistics.median(r["alone_fps"])
    passes = ", ".join(f"{x:.1f}" for x in r["alone_fps"])
    return [
        f"process alone      {base:.1f} frames/s (passes {passes})",
        f"Ray, 1 worker      {r['ray_1']['frames_per_s']:.1f} frames/s over the job, per recording "
        f"{', '.join(f'{x:.1f}' for x in r['ray_1']['per_recording_fps'])}",
        f"Ray, 2 x 0.5 GPU   {r['ray_2']['frames_per_s']:.1f} frames/s over the job",
        f"overhead under Ray: {100 * r['overhead_per_recording']:.1f} % per recording, "
        f"{100 * r['overhead_job']:.1f} % over the job (goal <= 5 %)",
    ]


def main() -> int:
    """Measure, print the figures with the machine, write the JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import header, machine, versions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=8, help="recordings (CPU mode)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each recording")
    parser.add_argument("--gpu", action="store_true", help="ViT-L on CUDA: overhead under Ray")
    parser.add_argument("--smoke", action="store_true", help="--gpu with the tiny presets on CPU")
    parser.add_argument(
        "--cpus", type=int, default=4, help="--gpu: CPUs (torch threads) per worker and alone"
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    mach = machine()
    vers = versions()
    import ray

    vers["ray"] = ray.__version__
    print(header(mach, vers, quick=False), flush=True)
    if args.gpu:
        result = measure_gpu(4, args.seconds, TINY if args.smoke else VITL, args.cpus)
        lines = report_gpu(result)
    else:
        result = measure_cpu(args.recordings, args.seconds, os.cpu_count() or 1)
        lines = report_cpu(result)
    mach["load_avg_end"] = os.getloadavg()
    print("\n".join(lines))
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in mach['load_avg_end'])}")
    if args.json is not None:
        data = {"machine": mach, "versions": vers, "result": result, "lines": lines}
        args.json.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
