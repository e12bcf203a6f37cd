"""``synthetic-trained-tiny`` vs random weights on held-out synthetic scenes.

Run: ``python benchmarks/bench_synthetic_models.py [--scenes 20] [--first-seed 1000]``
(inside the venv). For each held-out scene (the demo's 60 s layout: an object appears,
the light changes, the camera pans, a person crosses; seeds never trained on), the offline
pipeline runs with the gate as shipped (the scorer's and gate's defaults; the trained video
model's ``clip_frames``, from its card, for both columns), then:

* event F1 at +-1 s: a scripted event is found when a decided event lies within 1 s of
  its start (and, second figure, of its span, start to end); micro-averaged over scenes;
* text recall@1 and @5 per event kind: the held-out paraphrases of each kind
  (``HELD_OUT_QUERIES``), ranked over the scene's episodes; a hit is an episode of that
  event.

Columns: the shipped ``synthetic-trained-tiny`` models, and the same architectures with
random weights (``random:tiny`` V-JEPA-2, a random ``PE-Core-synthetic-tiny``). Each column's
gate runs at its own calibrated gamma: the trained model's from its card, the random one's
calibrated here by the same rule on the same quiet validation scenes
(:mod:`surprise_memory.offline.synthetic.calibration`). These are
small models trained on synthetic scenes, not the paper's models: the figures say nothing
about V-JEPA-2 or PE-Core. Prints the machine, versions and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.synthetic import model_scene
from surprise_memory.offline.synthetic.calibration import calibrate_video_model
from surprise_memory.offline.synthetic.evaluation import SceneEvaluation, evaluate_scene, f1_counts
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    SYNTHETIC_WEIGHTS,
)

# the trained video model's clip length and gamma (its card's "recommended"); the random
# column's gamma is calibrated below
RECOMMENDED = json.loads((SYNTHETIC_WEIGHTS / "MODEL_CARD.json").read_text(encoding="utf-8"))[
    "recommended"
]
COMMON = {"encoder_device": "cpu", "embedder_device": "cpu", **RECOMMENDED}
MODELS: dict[str, dict[str, Any]] = {
    SYNTHETIC_MODEL_NAME: {
        **COMMON,
        "encoder_weights": SYNTHETIC_MODEL_NAME,
        "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
        "embedder_weights": SYNTHETIC_MODEL_NAME,
    },
    "random": {
        **COMMON,
        "encoder_weights": "random:tiny",
        "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
        "embedder_weights": "random",
    },
}


def summarise(results: list[SceneEvaluation]) -> dict[str, Any]:
    """F1 (start and span) and recall@1/@5 per kind over the scenes."""
    decided = sum(len(r.events_s) for r in results)
    scripted = sum(len(r.kinds) for r in results)
    out: dict[str, Any] = {
        "f1_start": f1_counts(sum(r.found for r in results), scripted, decided),
        "f1_span": f1_counts(sum(r.found_in_span for r in results), scripted, decided),
        "found_start": sum(r.found for r in results),
        "found_span": sum(r.found_in_span for r in results),
        "scripted": scripted,
        "decided": decided,
        "recall": {},
    }
    kinds = dict.fromkeys(k for r in results for k in r.kinds)
    for kind in kinds:
        ranks = [rank for r in results for (k, _), rank in r.ranks.items() if k == kind]
        if ranks:
            out["recall"][kind] = (
                sum(rank == 1 for rank in ranks) / len(ranks),
                sum(rank is not None and rank <= 5 for rank in ranks) / len(ranks),
                len(ranks),
            )
    return out


def main() -> None:
    """Run both columns and print the tables."""
    import open_clip
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenes", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument(
        "--models", default=",".join(MODELS), help="columns to run, comma-separated (default all)"
    )
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs")
    print(f"load average at start: {os.getloadavg()}")
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"open_clip {open_clip.__version__}, python {platform.python_version()}"
    )
    table: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            settings = MODELS[name]
            if name == "random":
                gamma, record = calibrate_video_model(
                    settings["encoder_weights"], settings["clip_frames"]
                )
                settings = {**settings, "gamma": gamma}
                print(f"random, quiet episodes per minute: {record['episodes_per_minute']}")
            pipeline = OfflinePipeline(PipelineSettings.from_mapping(settings))
            results = []
            t0 = time.perf_counter()
            for i in range(args.scenes):
                scene = model_scene(args.first_seed + i)
                r = evaluate_scene(pipeline, scene, Path(tmp) / f"{name}-{i}", text_on_random=True)
                results.append(r)
                print(
                    f"{name} seed {scene.seed}: found {r.found}/{len(r.kinds)} (span "
                    f"{r.found_in_span}), {len(r.events_s)} events "
                    f"{[round(t, 1) for t in r.events_s]}",
                    flush=True,
                )
            table[name] = summarise(results)
            table[name]["gamma"] = settings.get("gamma", 1.0)
            print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    names = list(table)
    print("\n| figure | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    print("| gate gamma (calibrated) | " + " | ".join(str(table[n]["gamma"]) for n in names) + " |")
    for key, label in (
        ("f1_start", "event F1, +-1 s of the start"),
        ("f1_span", "event F1, +-1 s of the span"),
    ):
        cells = []
        for n in names:
            p, r, f = table[n][key]
            found = table[n]["found_start" if key == "f1_start" else "found_span"]
            cells.append(
                f"{f:.2f} (P {p:.2f}, R {r:.2f}; {found}/{table[n]['scripted']} found, "
                f"{table[n]['decided']} decided)"
            )
        print(f"| {label} | " + " | ".join(cells) + " |")
    for kind in table[names[0]]["recall"]:
        cells = []
        for n in names:
            r1, r5, count = table[n]["recall"].get(kind, (float("nan"), float("nan"), 0))
            cells.append(f"{r1:.2f} / {r5:.2f} ({count} queries)")
        print(f"| text recall@1 / @5, {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
