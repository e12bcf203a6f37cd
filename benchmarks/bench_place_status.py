"""Is it still there? The product's rule on the QA world's still-there questions (issue 47).

Run: ``python benchmarks/bench_place_status.py --keep W [--seeds 0,...,9]
[--validation-seeds 900,901,902] [--minutes 20] [--pass-seconds S] [--json out.json]``
(inside the venv);
``W`` is ``bench_qa_places.py``'s ``--keep`` folder, whose stores are reused (built here
when missing).

A person asks where the robot saw a thing, then whether it is still there. For each
landmark the second round's world shows twice (the questions' *still there* split:
removed or moved before the second pass, or left standing), in each memory that keeps
place keyframes (``place``, ``surprise+place``):

1. *the record that showed it*: the store's best answer to the thing's name among the
   records of its first sighting (the ground truth's window), as a person's search finds
   it;
2. *its place status*: :func:`~surprise_memory.memory.place_status.place_status`, what
   the memory node, the agent tool, MCP and ``goto`` report: the best cosine of a view of
   the latest pass by that record's place with the record's picture
   (``--pass-seconds``: ``place_status_pass_seconds``; 0 = the newest view alone).

``place_still_there_similarity`` is fitted on the validation worlds only (the cut that
answers the most of their questions right); reported: the accuracy of the reported worlds
at that cut and at the setting's default, mean ± sample standard deviation over worlds,
and how often no newer view was found (the status unknown: counted wrong).

These are small models trained on synthetic scenes and a world of ours, not CODa and the
paper's models.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import argparse
import json
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_qa import Models, _load, _parse_seeds
from bench_qa_places import build_memories

from surprise_memory.config.places import PlacesConfig
from surprise_memory.evaluation.qa.thresholds import fit_yes_threshold
from surprise_memory.memory.place_status import place_status, places_as_stored
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.stamps import NS_PER_SECOND

PLACE_MEMORIES = ("place", "surprise+place")


def statuses(
    seed: int, minutes: int, root: Path, models: Models, config: PlacesConfig
) -> list[dict[str, Any]]:
    """Each still-there landmark of world ``seed`` in each memory: its place status."""
    truth, stores, _ = build_memories(seed, minutes, root, models, {})
    origin = int(truth["start_ns"])
    asked = [lm for lm in truth["landmarks"] if lm["seen"] and lm.get("revisit_view")]
    names = sorted({lm["kind"] for lm in asked})
    vectors = dict(zip(names, models.embedder.embed_text(names), strict=True))
    out = []
    for memory in PLACE_MEMORIES:
        with EpisodeStore(stores[memory], read_only=True) as store:
            grid = places_as_stored(store, config)
            for lm in asked:
                first = lm["seen"][0]
                query = RetrievalQuery(
                    embedding=vectors[lm["kind"]],
                    embedder_model=models.embedder.model_name,
                    start_ns=origin + int(first["start_s"] * NS_PER_SECOND),
                    end_ns=origin + int(first["end_s"] * NS_PER_SECOND),
                    max_results=1,
                )
                hits = store.retrieve(query)
                status = None
                if hits and grid is not None:
                    status = place_status(store, hits[0].episode, grid)
                out.append({
                    "seed": seed,
                    "memory": memory,
                    "landmark": lm["id"],
                    "thing": lm["kind"],
                    "stays": lm["fate"] == "stays",
                    "record_kind": hits[0].episode.kind if hits else None,
                    "similarity": None if status is None else status.similarity,
                })  # fmt: skip
    return out


def accuracy(rows: Sequence[Mapping[str, Any]], cut: float) -> float:
    """Share answered right at ``cut``: still there when the similarity reaches it."""
    right = [r["similarity"] is not None and (r["similarity"] >= cut) == r["stays"] for r in rows]
    return float(np.mean(right)) if right else float("nan")


def summary(
    validation: Sequence[Mapping[str, Any]], reported: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Per memory: the fitted cut, and the reported worlds' accuracy at it and the default."""
    default = PlacesConfig().place_still_there_similarity
    out: dict[str, Any] = {}
    for memory in PLACE_MEMORIES:
        val = [r for r in validation if r["memory"] == memory]
        rep = [r for r in reported if r["memory"] == memory]
        fit = fit_yes_threshold((r["similarity"], r["stays"]) for r in val)
        cut = float(fit["threshold"] if fit["threshold"] is not None else default)
        seeds = sorted({r["seed"] for r in rep})
        per_world = {
            name: [accuracy([r for r in rep if r["seed"] == s], c) for s in seeds]
            for name, c in (("fitted", cut), ("default", default))
        }
        sims = {
            side: [r["similarity"] for r in val + rep if r["stays"] is side and r["similarity"]]
            for side in (True, False)
        }
        out[memory] = {
            "fitted_cut": cut,
            "validation_accuracy": fit["accuracy"],
            "n_validation": len(val),
            "n_reported": len(rep),
            "unknown": sum(r["similarity"] is None for r in rep),
            **{
                f"accuracy_{name}": [float(np.mean(v)), float(np.std(v, ddof=1))]
                for name, v in per_world.items()
            },
            "similarity_stays": np.percentile(sims[True], [10, 50, 90]).tolist(),
            "similarity_gone": np.percentile(sims[False], [10, 50, 90]).tolist(),
        }
    return out


def main() -> None:
    """Validation worlds first (the cut), then the reported worlds; the table."""
    import torch

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9", help="world seeds reported")
    parser.add_argument("--validation-seeds", default="900,901,902", help="seeds to fit on")
    parser.add_argument("--minutes", type=int, default=20, help="length of each world")
    parser.add_argument("--keep", type=Path, required=True, help="bench_qa_places.py's folder")
    parser.add_argument(
        "--pass-seconds",
        type=float,
        default=PlacesConfig().place_status_pass_seconds,
        help="place_status_pass_seconds (0: the newest view alone)",
    )
    parser.add_argument("--json", type=Path, help="write the summary and the rows here")
    args = parser.parse_args()
    config = PlacesConfig(place_status_pass_seconds=args.pass_seconds)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs")
    print(f"python {platform.python_version()}, torch {torch.__version__}; load {_load()}")
    print(f"place_status_pass_seconds {args.pass_seconds:g}")
    models = Models.shipped()
    validation = [
        row
        for seed in _parse_seeds(args.validation_seeds)
        for row in statuses(seed, args.minutes, args.keep / "validation", models, config)
    ]
    reported = [
        row
        for seed in _parse_seeds(args.seeds)
        for row in statuses(seed, args.minutes, args.keep, models, config)
    ]
    result = summary(validation, reported)
    default = PlacesConfig().place_still_there_similarity
    print(
        "\n| memory | cut fitted on validation | accuracy at it | at the default "
        f"{default:g} | unknown | similarity p10/50/90, stays | gone |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for memory, r in result.items():
        stays, gone = (
            " / ".join(f"{v:.2f}" for v in r[k]) for k in ("similarity_stays", "similarity_gone")
        )
        print(
            f"| {memory} | {r['fitted_cut']:.3f} (validation {r['validation_accuracy']:.2f}, "
            f"n={r['n_validation']}) | {r['accuracy_fitted'][0]:.2f} ± "
            f"{r['accuracy_fitted'][1]:.2f} | {r['accuracy_default'][0]:.2f} ± "
            f"{r['accuracy_default'][1]:.2f} | {r['unknown']} of {r['n_reported']} | "
            f"{stays} | {gone} |"
        )
    print(f"\nload at the end {_load()}")
    if args.json:
        rows = {"validation": validation, "reported": reported}
        args.json.write_text(json.dumps({"summary": result, **rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
