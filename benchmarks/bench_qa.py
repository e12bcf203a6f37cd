"""The paper's ablation on our synthetic QA world: surprise vs uniform vs random memory.

Run: ``python benchmarks/bench_qa.py [--seeds 0,1,2,3,4] [--validation-seeds 900,901,902]
[--minutes 20] [--embedding-dtype float16] [--plot qa.png] [--json qa.json]`` (inside the
venv; about 2 minutes per world on a quiet 2-core CPU). ``--embedding-dtype`` picks the
stores' on-disk frame vectors (the store's ``embedding_dtype``; float16 by default). A
list (``--embedding-dtype float32,float16,int8``) sets the compact vectors' answers beside
the others' on the same episodes: the stores are built once, in the first dtype, and each
further dtype asks a copy of them made by the product's ``migrate`` (which re-encodes the
vectors as that dtype's store keeps them), its yes-thresholds fitted on its own copies of
the validation stores; the tables are printed per dtype, then each further dtype's paired
difference from the first, per gate and column, beside the first's spread over the worlds.

For each world seed (:func:`~surprise_memory.offline.synthetic.qa_world.qa_world`: a
20-minute route through many places, dozens of scripted events, long quiet stretches),
the offline pipeline runs the ``synthetic-trained-tiny`` models (the card's clip length
and gamma) four times over the same frames and poses:

* ``surprise``: the paper's gate;
* ``uniform`` and ``random``: the equal-budget gates (``gate_mode``) at the surprise
  run's episodes per minute on that world (``--budget-from``);
* ``ceiling``: uniform at 15 episodes per minute, an episode every 4 s, so every frame
  lies in some episode's 4-second span (a store-everything memory, 20 % of frames).

Then the world's questions (:func:`~surprise_memory.evaluation.qa.world_questions.world_questions`:
when, where, did you see, how long between; phrasings none of the models' training
captions) are asked of each store by the ``retrieval`` answerer through ``eval-qa``'s run
machinery, and scored as ReMEmbR's ``eval.py`` scores them. The yes-threshold of each
gate's memory is fitted on the validation seeds only (its own stores there), never on
the seeds reported. Reported per gate: question accuracy, positional error (m), temporal
error (min), each as mean and sample standard deviation over the seeds; episodes per
minute and % of frames stored; and, to show causes, the share of the questions' events
that lie in a stored episode's span, and the share of time and position answers taken
from the asked event's own episode (within 5 s, or 2.5 m, of it). The time the retrieval
answerer takes per world is printed with the machine's load (the goal: a 20-minute world
in 2 minutes).

These are small models trained on synthetic scenes, not the paper's V-JEPA-2 and
PE-Core, and a world of ours, not CODa: the figures are our synthetic world's, beside the
paper's (DAAAM + surprise 0.796 / 36.57 m / 1.510 min; DAAAM 0.711 / 41.75 m / 1.792 min;
uniform and random 0.761 question accuracy).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers/huggingface_hub are imported
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surprise_memory.config import StoreConfig, settings_of
from surprise_memory.evaluation.qa.answerers import Memory, RetrievalAnswerer
from surprise_memory.evaluation.qa.questions import Question
from surprise_memory.evaluation.qa.run import QaRun, run_questions
from surprise_memory.evaluation.qa.scoring import spread
from surprise_memory.evaluation.qa.thresholds import fit_yes_threshold
from surprise_memory.evaluation.qa.world_questions import world_questions
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.memory.store.migrate import migrate_store
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.synthetic.qa_world import QaWorld, qa_world
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    SYNTHETIC_WEIGHTS,
    ImageTextEmbedder,
    VideoEncoder,
)
from surprise_memory.sources.pose_lookup import SampledPoseLookup
from surprise_memory.stamps import NS_PER_SECOND

GATES = ("surprise", "uniform", "random", "ceiling")
CEILING_PER_MINUTE = 15.0  # an episode every 4 s: its +-2 s spans tile the recording
COLUMNS = ("question_accuracy", "positional_error_m", "temporal_error_min")
PAPER = {
    "DAAAM + surprise": (0.796, 36.57, 1.510),
    "DAAAM": (0.711, 41.75, 1.792),
    "uniform (equal budget)": (0.761, None, None),
    "random (equal budget)": (0.761, None, None),
}
RECOMMENDED: dict[str, Any] = json.loads(
    (SYNTHETIC_WEIGHTS / "MODEL_CARD.json").read_text(encoding="utf-8")
)["recommended"]
BASE: dict[str, Any] = {
    # the gates' memories hold what each gate stored, no place keyframes (their ablation,
    # at equal stored frames, is bench_qa_places.py, which adds them itself)
    "place_keyframes": False,
    "encoder_device": "cpu",
    "embedder_device": "cpu",
    "encoder_batch": 8,
    "encoder_weights": SYNTHETIC_MODEL_NAME,
    "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
    "embedder_weights": SYNTHETIC_MODEL_NAME,
    **RECOMMENDED,
}


@dataclass
class GateRun:
    """One gate's store on one world, and its questions' records."""

    gate: str
    seed: int
    store: Path
    episodes_per_minute: float
    stored_fraction: float
    process_s: float
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    answer_s: float = 0.0
    covered: float = 0.0

    @property
    def on_event(self) -> float | None:
        """Share of time and position answers taken from the asked event's own episode.

        An answer within 5 s of the event's start, or within 2.5 m of where the robot was
        then (5 s of driving), came from an episode of that event.
        """
        hits = [
            abs(r["answer"]["time_s"] - r["truth"]["time_s"]) <= 5.0
            if r["type"] == "time"
            else r["score"]["value"] <= 2.5
            for r in self.records
            if r["type"] in ("time", "position") and r["answer"]
        ]
        return sum(hits) / len(hits) if hits else None


(_DTYPE,) = (s for s in settings_of(StoreConfig) if s.name == "embedding_dtype")
EMBEDDING_DTYPES: tuple[str, ...] = _DTYPE.choices or ()


def _settings(gate: str, rate: float, embedding_dtype: str | None = None) -> PipelineSettings:
    values = dict(BASE)
    if embedding_dtype is not None:
        values["embedding_dtype"] = embedding_dtype
    if gate != "surprise":
        values["gate_mode"] = "uniform" if gate == "ceiling" else gate
        values["baseline_episodes_per_minute"] = CEILING_PER_MINUTE if gate == "ceiling" else rate
    return PipelineSettings.from_mapping(values)


@dataclass(frozen=True)
class Models:
    """The shipped small models, loaded once."""

    encoder: VideoEncoder
    embedder: ImageTextEmbedder

    @classmethod
    def shipped(cls) -> Models:
        """The synthetic-trained-tiny encoder and embedder, on the CPU."""
        return cls(
            VideoEncoder(str(SYNTHETIC_WEIGHTS / "video"), device="cpu"),
            ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME, device="cpu"),
        )


def build_stores(
    world: QaWorld, root: Path, models: Models, embedding_dtype: str | None = None
) -> dict[str, GateRun]:
    """Each gate's store of ``world`` under ``root`` (the surprise run sets the budget).

    ``embedding_dtype``: the stores' on-disk frame vectors (None: the store's default).
    """
    odometry = list(world.odometry())
    runs: dict[str, GateRun] = {}
    rate = 0.0
    for gate in GATES:
        pipeline = OfflinePipeline(
            _settings(gate, rate, embedding_dtype),
            encoder=models.encoder,
            embedder=models.embedder,
        )
        poses = SampledPoseLookup(odometry, frame_id="odom", child_frame_id="base_link")
        store = root / f"{world.seed}-{gate}"
        t0 = time.perf_counter()
        summary = pipeline.run(
            world.frames(), store, pose_lookup=poses, input_info={"qa_world": world.seed}
        )
        runs[gate] = GateRun(
            gate,
            world.seed,
            store,
            summary.episodes_per_minute,
            summary.stored_fraction,
            time.perf_counter() - t0,
        )
        if gate == "surprise":
            rate = summary.episodes_per_minute
    return runs


def copy_stores(runs: Mapping[str, GateRun], embedding_dtype: str) -> dict[str, GateRun]:
    """Each gate's store copied by ``migrate`` into a store keeping ``embedding_dtype``.

    The same episodes, their vectors re-encoded as that dtype's store keeps them: what a
    robot's store of that dtype would hold for the same frames.
    """
    copies = {}
    for gate, run in runs.items():
        store = run.store.with_name(f"{run.store.name}-{embedding_dtype}")
        migrate_store(run.store, store, config=StoreConfig(embedding_dtype=embedding_dtype))
        copies[gate] = GateRun(
            gate, run.seed, store, run.episodes_per_minute, run.stored_fraction, run.process_s
        )
    return copies


def as_each_dtype(runs: dict[str, GateRun], dtypes: Sequence[str]) -> dict[str, dict[str, GateRun]]:
    """``runs`` (stores in ``dtypes[0]``) and their copies in each further dtype."""
    return {d: runs if i == 0 else copy_stores(runs, d) for i, d in enumerate(dtypes)}


def coverage(store: Path, world_truth: Mapping[str, Any], questions: Sequence[Question]) -> float:
    """Share of the questions' events whose start lies in some stored episode's span."""
    starts = sorted({e["start_s"] for e in world_truth["events"] if _asked_about(e, questions)})
    if not starts:
        return 0.0
    origin = int(world_truth["start_ns"])
    with EpisodeStore(store, read_only=True) as s:
        records = [s.get(i) for i in s.episode_ids()]
    spans = [
        ((x.start_ns - origin) / NS_PER_SECOND, (x.end_ns - origin) / NS_PER_SECOND)
        for x in records
    ]
    inside = sum(any(a <= t <= b for a, b in spans) for t in starts)
    return inside / len(starts)


def _asked_about(event: Mapping[str, Any], questions: Sequence[Question]) -> bool:
    truths = {q.truth.time_s for q in questions if q.truth.time_s is not None}
    return event["kind"] != "camera_pan" or event["start_s"] in truths


def answer(
    runs: Mapping[str, GateRun],
    questions: list[Question],
    embedder: ImageTextEmbedder,
    thresholds: Mapping[str, float],
    root: Path,
) -> None:
    """Ask ``questions`` of each gate's store with the retrieval answerer; keep the records."""
    for gate, run in runs.items():
        with EpisodeStore(run.store, read_only=True) as store:
            memory = Memory.searched_by(store, embedder)
            folder = root / f"qa-{run.seed}-{gate}"
            qa = QaRun.create(
                folder, questions, {"answerer": {"name": "retrieval"}, "memories": {}}
            )
            answerer = RetrievalAnswerer(thresholds.get(gate, 0.5))
            t0 = time.perf_counter()
            run.summary = run_questions(qa, answerer, {questions[0].sequence: memory})
            run.answer_s = time.perf_counter() - t0
            run.records = list(qa.records().values())


def _binary_pairs(runs: Sequence[GateRun], questions: Mapping[str, Question]) -> list[Any]:
    return [
        (r["details"].get("best_similarity"), bool(questions[r["id"]].truth.yes))
        for run in runs
        for r in run.records
        if r["type"] == "binary"
    ]


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _table(results: Mapping[str, list[GateRun]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for gate, runs in results.items():
        row = {c: spread(r.summary["all"][c]["mean"] for r in runs) for c in COLUMNS}
        row["episodes_per_minute"] = spread(r.episodes_per_minute for r in runs)
        row["stored_percent"] = spread(100.0 * r.stored_fraction for r in runs)
        row["covered"] = spread(r.covered for r in runs)
        row["on_event"] = spread(r.on_event for r in runs)
        row["answer_s"] = spread(r.answer_s for r in runs)
        for category in ("object", "person", "light", "turn"):
            row[f"accuracy_{category}"] = spread(
                r.summary["by_category"].get(category, {}).get("question_accuracy", {}).get("mean")
                for r in runs
            )
            row[f"temporal_{category}"] = spread(
                r.summary["by_category"].get(category, {}).get("temporal_error_min", {}).get("mean")
                for r in runs
            )
        table[gate] = row
    return table


def _cell(figure: Mapping[str, Any], digits: int) -> str:
    if figure["mean"] is None:
        return "-"
    return f"{figure['mean']:.{digits}f} ± {figure['std']:.{digits}f}"


def _print_tables(table: Mapping[str, Mapping[str, Any]], seeds: Sequence[int], dtype: str) -> None:
    print(
        f"\n## Our synthetic QA world, {len(seeds)} seeds ({', '.join(map(str, seeds))}), "
        f"frame vectors as {dtype}\n"
    )
    print(
        "| memory | question accuracy | positional error (m) | temporal error (min) "
        "| episodes/min | % frames stored | questioned events in an episode "
        "| time/place answers from the event's episode |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for gate, row in table.items():
        print(
            f"| {gate} | {_cell(row['question_accuracy'], 3)} | "
            f"{_cell(row['positional_error_m'], 1)} | {_cell(row['temporal_error_min'], 2)} | "
            f"{_cell(row['episodes_per_minute'], 2)} | {_cell(row['stored_percent'], 2)} | "
            f"{_cell(row['covered'], 2)} | {_cell(row['on_event'], 2)} |"
        )
    print("\nBy category (question accuracy / temporal error, min):\n")
    print("| memory | object | person | light | turn |")
    print("|---|---|---|---|---|")
    for gate, row in table.items():
        cells = [
            f"{_cell(row[f'accuracy_{c}'], 2)} / {_cell(row[f'temporal_{c}'], 2)}"
            for c in ("object", "person", "light", "turn")
        ]
        print(f"| {gate} | " + " | ".join(cells) + " |")
    print("\nSurprise against the equal-budget gates (relative, + = surprise better):\n")
    for other in ("uniform", "random"):
        parts = []
        for c in COLUMNS:
            s, o = table["surprise"][c]["mean"], table[other][c]["mean"]
            if s is None or o is None or o == 0:
                parts.append(f"{c}: -")
                continue
            gain = (s - o) / o if c == "question_accuracy" else (o - s) / o
            parts.append(f"{c}: {100 * gain:+.0f} %")
        print(f"* vs {other}: " + ", ".join(parts))
    print("\nThe paper (OC-NaVQA, DAAAM's agent, CODa), for comparison:\n")
    print("| method | question accuracy | positional error (m) | temporal error (min) |")
    print("|---|---|---|---|")
    for name, (acc, pos, tem) in PAPER.items():
        print(
            f"| {name} | {acc} | {pos if pos is not None else '-'} | "
            f"{tem if tem is not None else '-'} |"
        )


def _plot(table: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gates = list(table)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    labels = ("question accuracy (higher is better)", "positional error, m", "temporal error, min")
    for ax, column, label in zip(axes, COLUMNS, labels, strict=True):
        means = [table[g][column]["mean"] or 0.0 for g in gates]
        stds = [table[g][column]["std"] or 0.0 for g in gates]
        ax.bar(gates, means, yerr=stds, capsize=4, color=["C3", "C0", "C1", "C7"])
        ax.set_title(label, fontsize=10)
    fig.suptitle("Our synthetic QA world (synthetic-trained-tiny, retrieval answerer)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def _parse_seeds(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main() -> None:
    """Build the stores, fit the thresholds on validation, answer, print the tables."""
    import torch

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4", help="world seeds reported")
    parser.add_argument("--validation-seeds", default="900,901,902", help="seeds to fit on")
    parser.add_argument("--minutes", type=int, default=20, help="length of each world")
    parser.add_argument("--plot", type=Path, help="write the bar chart here (PNG)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", type=Path, help="keep the stores and runs in this folder")
    parser.add_argument(
        "--embedding-dtype",
        type=_parse_dtypes,
        default=[_DTYPE.default],
        help="the stores' on-disk frame vectors (the store's embedding_dtype, one of "
        f"{', '.join(EMBEDDING_DTYPES)}; default {_DTYPE.default}); a comma-separated list "
        "asks migrated copies of the first's stores in each further one",
    )
    args = parser.parse_args()
    seeds, validation = _parse_seeds(args.seeds), _parse_seeds(args.validation_seeds)
    if set(seeds) & set(validation):
        parser.error("the reported seeds and the validation seeds must differ")
    dtypes: list[str] = args.embedding_dtype
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs")
    print(f"python {platform.python_version()}, torch {torch.__version__}; load {_load()}")
    print(f"frame vectors stored as {', '.join(dtypes)}")
    models = Models.shipped()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        fitted = _validate(validation, args.minutes, root / "validation", models, dtypes)
        results: dict[str, dict[str, list[GateRun]]] = {d: {g: [] for g in GATES} for d in dtypes}
        for seed in seeds:
            asked = _one_world(seed, args.minutes, root, models, fitted, dtypes=dtypes)
            for dtype, runs in asked.items():
                for gate, run in runs.items():
                    results[dtype][gate].append(run)
    tables = {d: _table(results[d]) for d in dtypes}
    for dtype in dtypes:
        _print_tables(tables[dtype], seeds, dtype)
    for dtype in dtypes[1:]:
        _print_paired(results[dtypes[0]], results[dtype], dtypes[0], dtype)
    answer_s = [r.answer_s for by_gate in results.values() for rs in by_gate.values() for r in rs]
    print(
        f"\nretrieval answerer: {max(answer_s):.1f} s at most for one {args.minutes}-min "
        f"world's questions (median {sorted(answer_s)[len(answer_s) // 2]:.1f} s); "
        f"load at the end {_load()}"
    )
    if args.plot:
        _plot(tables[dtypes[0]], args.plot)
    if args.json:
        out = {
            "seeds": seeds,
            "validation_seeds": validation,
            "embedding_dtypes": dtypes,
            "thresholds": fitted,
            "tables": tables,
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


def _parse_dtypes(text: str) -> list[str]:
    dtypes = [d.strip() for d in text.split(",") if d.strip()]
    wrong = [d for d in dtypes if d not in EMBEDDING_DTYPES]
    if not dtypes or wrong or len(set(dtypes)) < len(dtypes):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give distinct dtypes among {', '.join(EMBEDDING_DTYPES)}"
        )
    return dtypes


def _print_paired(
    first: Mapping[str, list[GateRun]],
    other: Mapping[str, list[GateRun]],
    first_dtype: str,
    dtype: str,
) -> None:
    """Per gate and column: ``dtype``'s answers minus ``first_dtype``'s, world by world."""
    print(
        f"\n{dtype} minus {first_dtype}, the same episodes (mean ± sd of the per-world "
        f"differences; in brackets the spread of {first_dtype}'s figure over the worlds):\n"
    )
    print("| memory | question accuracy | positional error (m) | temporal error (min) |")
    print("|---|---|---|---|")
    for gate in first:
        cells = []
        for column, digits in zip(COLUMNS, (3, 1, 2), strict=True):
            pairs = [
                (a.summary["all"][column]["mean"], b.summary["all"][column]["mean"])
                for a, b in zip(first[gate], other[gate], strict=True)
            ]
            diff = spread(b - a for a, b in pairs if a is not None and b is not None)
            base = spread(a for a, _ in pairs)
            cells.append(f"{_cell(diff, digits)} ({_cell(base, digits)})")
        print(f"| {gate} | " + " | ".join(cells) + " |")


def _one_world(
    seed: int,
    minutes: int,
    root: Path,
    models: Models,
    thresholds: Mapping[str, Mapping[str, float]],
    *,
    dtypes: Sequence[str],
) -> dict[str, dict[str, GateRun]]:
    """One reported world's stores, in each dtype, asked its questions: dtype -> gate -> run."""
    world = qa_world(seed, 60.0 * minutes)
    truth = world.ground_truth()
    questions = world_questions(truth, seed)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    by_dtype = as_each_dtype(build_stores(world, root, models, dtypes[0]), dtypes)
    for dtype, runs in by_dtype.items():
        answer(runs, questions, models.embedder, thresholds[dtype], root / dtype)
        for run in runs.values():
            run.covered = coverage(run.store, truth, questions)
        line = ", ".join(
            f"{g} {r.episodes_per_minute:.2f}/min acc {_fmt(r, 'question_accuracy', 2)} "
            f"pos {_fmt(r, 'positional_error_m', 1)} tem {_fmt(r, 'temporal_error_min', 2)}"
            for g, r in runs.items()
        )
        print(
            f"world {seed} ({dtype}): {len(truth['events'])} events, {len(questions)} "
            f"questions, {time.perf_counter() - t0:.0f} s; {line}",
            flush=True,
        )
    return by_dtype


def _fmt(run: GateRun, column: str, digits: int) -> str:
    value = run.summary["all"][column]["mean"]
    return "-" if value is None else f"{value:.{digits}f}"


def _validate(
    seeds: Sequence[int],
    minutes: int,
    root: Path,
    models: Models,
    dtypes: Sequence[str],
) -> dict[str, dict[str, float]]:
    """Each dtype's and gate's yes-threshold, fitted on its own stores of the validation worlds."""
    per_gate: dict[str, dict[str, list[GateRun]]] = {d: {g: [] for g in GATES} for d in dtypes}
    questions: dict[str, Question] = {}
    for seed in seeds:
        world = qa_world(seed, 60.0 * minutes)
        asked = world_questions(world.ground_truth(), seed)
        questions.update({q.id: q for q in asked})
        root.mkdir(parents=True, exist_ok=True)
        by_dtype = as_each_dtype(build_stores(world, root, models, dtypes[0]), dtypes)
        for dtype, stores in by_dtype.items():
            answer(stores, asked, models.embedder, {}, root / dtype)
            for gate, run in stores.items():
                per_gate[dtype][gate].append(run)
    fitted: dict[str, dict[str, float]] = {d: {} for d in dtypes}
    for dtype, by_gate in per_gate.items():
        for gate, runs in by_gate.items():
            fit = fit_yes_threshold(_binary_pairs(runs, questions))
            fitted[dtype][gate] = float(fit["threshold"] if fit["threshold"] is not None else 0.5)
            print(
                f"validation {gate} ({dtype}): threshold {fitted[dtype][gate]:.3f} "
                f"(accuracy {fit['accuracy']:.2f} on {fit['n']} binary questions)",
                flush=True,
            )
    return fitted


if __name__ == "__main__":
    main()
