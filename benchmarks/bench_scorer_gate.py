"""Per-frame cost of SurpriseScorer.update + SurpriseGate.push (goal: < 50 us at D=1024, W=64).

Run: ``python benchmarks/bench_scorer_gate.py`` (inside the venv). Prints the machine and
versions with the figures.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

import numpy as np

from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.scorer import SurpriseScorer


def bench(
    dim: int, window: int, frames: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float]:
    """Mean microseconds per frame for the scorer and for the gate.

    ``clock`` is wall time by default; ``time.process_time`` gives the CPU time of this
    process instead, which other processes on a shared CPU do not inflate.
    """
    rng = np.random.default_rng(0)
    data = rng.normal(size=(frames, dim)).astype(np.float32)
    scorer = SurpriseScorer(window=window)
    gate = SurpriseGate()
    scores = []
    t0 = clock()
    for z in data:
        r = scorer.update(z)
        if r is not None:
            scores.append(r.score)
    t1 = clock()
    for i, s in enumerate(scores):
        gate.push(i * 100_000_000, s)
    t2 = clock()
    return (t1 - t0) / frames * 1e6, (t2 - t1) / max(len(scores), 1) * 1e6


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000)
    args = parser.parse_args()
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, python {platform.python_version()}, numpy {np.__version__}")
    print(f"{'D':>6} {'W':>4} {'scorer us':>10} {'gate us':>8} {'total us':>9}")
    for dim, window in [(256, 64), (1024, 64), (1024, 256)]:
        s, g = bench(dim, window, args.frames)
        print(f"{dim:>6} {window:>4} {s:>10.1f} {g:>8.1f} {s + g:>9.1f}")


if __name__ == "__main__":
    main()
