"""A first look at the method: surprise and gated events on a synthetic embedding stream.

Run with ``make demo`` (or ``python -m surprise_memory.demo``). A stream of 1024-d
embeddings drifts slowly, with a few scripted changes of scene; the scorer and gate run
exactly as on the robot and print the events they find next to the scripted times.
"""

from __future__ import annotations

import argparse

import numpy as np

from surprise_memory.config import GateConfig, ScorerConfig
from surprise_memory.gate import SurpriseGate
from surprise_memory.surprise import SurpriseScorer

NS = 1_000_000_000


def synthetic_stream(
    seconds: float, fps: float, changes: list[float], dim: int = 1024, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings that drift slowly and jump to a new scene at each time in ``changes``.

    Like a video encoder's window embeddings, each is a mean over the last 16 frames'
    features, so the stream is smooth except where the scene changes.
    """
    rng = np.random.default_rng(seed)
    n = round(seconds * fps)
    t = np.arange(n) / fps
    scene = rng.normal(size=dim)
    out = np.empty((n, dim), dtype=np.float32)
    drift = np.zeros(dim)
    pending = sorted(changes)
    for i in range(n):
        if pending and t[i] >= pending[0]:
            scene = rng.normal(size=dim)
            pending.pop(0)
        drift = 0.98 * drift + 0.02 * rng.normal(size=dim)
        out[i] = scene + drift + 0.05 * rng.normal(size=dim)
    kernel = np.ones(16) / 16
    smooth = np.apply_along_axis(lambda c: np.convolve(c, kernel)[:n], 0, out)
    return t, smooth.astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--fps", type=float, default=10.0)
    args = parser.parse_args(argv)
    changes = [30.0, 55.0, 90.0]
    t, z = synthetic_stream(args.seconds, args.fps, changes)
    scorer = SurpriseScorer.from_config(ScorerConfig())
    gate = SurpriseGate.from_config(GateConfig())
    events = []
    for ti, zi in zip(t, z, strict=True):
        result = scorer.update(zi)
        if result is not None:
            events += gate.push(round(ti * NS), result.score, result.kl)
    events += gate.flush()
    print(f"{len(t)} frames at {args.fps:g} Hz, scripted scene changes at {changes} s")
    for e in events:
        print(
            f"event at {e.stamp_ns / NS:7.1f} s  score {e.score:6.2f}  tau {e.threshold:5.2f}  "
            f"decided {(e.decided_ns - e.stamp_ns) / NS:.1f} s later"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
