"""The ablation at equal stored frames on the QA world's second round (issue 47).

Run: ``python benchmarks/bench_qa_places.py [--seeds 0,...,9] [--validation-seeds
900,901,902] [--minutes 20] [--json out.json] [--plot out.png]`` (inside the venv).

Each world (:func:`~surprise_memory.offline.synthetic.qa_places.qa_places_world`: the
first QA world's streets and events, landmarks standing by them, and a second pass on
which some are gone) is rendered once; the memories (``qa_memories.py``): ``surprise``
(the paper: the offline pipeline with the ``synthetic-trained-tiny`` models), ``place``
(place keyframes by the real selector), ``surprise+place`` (ours), ``uniform`` and
``random`` at the frames ``surprise+place`` stores, and the ``ceiling`` (an episode every
4 s). Their questions (:func:`~surprise_memory.evaluation.qa.place_questions.place_questions`:
every question; the *overall* columns on the subset in OC-NaVQA's mix) are asked by the
``retrieval`` answerer through ``eval-qa``'s run machinery. A text question ("what stood
at ...: A or B?") is judged right when the answer is the true choice (the bench is the
judge, exact match of a closed choice).

The yes-threshold with its place margin (what a place keyframe must match by, more than
an episode) and the still-there threshold with its drop (how much less than the place's
earlier views the latest pass may match) of each memory are fitted on the validation
seeds only (its own stores there), never on the seeds reported; the generic threshold (a
question whose words embed like an empty caption is a no: a property of the words and the
embedder) once for all memories, on all their validation answers. Reported per
memory, as mean ± sample standard deviation over the reported seeds: the three columns
overall, on static questions and on event questions; accuracy on still-there questions;
the false-yes rate on lures; per type; frames stored. Results are written after each
world (``--json``), so a run cut short still leaves its table.

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
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench_qa import BASE, Models, _load, _parse_seeds
from qa_memories import (
    CEILING_PER_MINUTE,
    add_keyframes,
    baseline_episodes,
    copy_store,
    place_keyframes,
    stored_frames,
)

from surprise_memory.evaluation.qa.answerers import AnswerResult, Memory, RetrievalAnswerer
from surprise_memory.evaluation.qa.place_questions import place_questions, split_of
from surprise_memory.evaluation.qa.questions import Question
from surprise_memory.evaluation.qa.run import QaRun, run_questions
from surprise_memory.evaluation.qa.scoring import (
    QuestionScore,
    ScoredAnswer,
    columns_of,
    spread,
)
from surprise_memory.evaluation.qa.thresholds import (
    best_by_kind,
    fit_generic_threshold,
    fit_still_drop,
    fit_yes_threshold,
    fit_yes_thresholds,
    reaches_yes,
)
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.synthetic.qa_places import qa_places_world
from surprise_memory.perception.encoders import ImageTextEmbedder
from surprise_memory.sources.pose_lookup import SampledPoseLookup

MEMORIES = ("surprise", "place", "surprise+place", "uniform", "random", "ceiling")
COLUMNS = ("question_accuracy", "positional_error_m", "temporal_error_min")
SPLITS = ("all", "static", "event")


class ChoiceJudge:
    """The retrieval answerer, with a text answer judged by exact match of its choice."""

    name = "retrieval"

    def __init__(self, inner: RetrievalAnswerer) -> None:
        self._inner = inner

    def settings(self) -> dict[str, Any]:
        """The inner answerer's settings."""
        return {**self._inner.settings(), "text_judge": "exact match of the choice"}

    def answer(self, question: Question, memory: Memory) -> AnswerResult:
        """Answer; a text question's answer is judged against the true choice."""
        result = self._inner.answer(question, memory)
        if question.type == "text" and result.answer is not None and result.answer.text:
            truth = (question.truth.text or "").strip().lower()
            result.judged = result.answer.text.strip().lower() == truth
        return result


def build_memories(
    seed: int, minutes: int, root: Path, models: Models, place_settings: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Path], dict[str, int]]:
    """The world of ``seed``: its ground truth, each memory's store, frames stored.

    Another process of this bench may build the same folder (``--build-only``): the one
    that takes ``<seed>.lock`` builds and writes ``<seed>.built.json``; the other waits
    for it and reuses the stores.
    """
    world = qa_places_world(seed, 60.0 * minutes)
    truth = world.ground_truth()
    stores = {m: root / f"{seed}-{m.replace('+', '-')}" for m in MEMORIES}
    done = root / f"{seed}.built.json"
    root.mkdir(parents=True, exist_ok=True)
    try:
        (root / f"{seed}.lock").mkdir()
    except FileExistsError:
        while not done.exists():
            time.sleep(10.0)
        return truth, stores, json.loads(done.read_text(encoding="utf-8"))
    count = _build(world, stores, minutes, models, place_settings)
    done.write_text(json.dumps(count), encoding="utf-8")
    return truth, stores, count


def _build(
    world: Any,
    stores: Mapping[str, Path],
    minutes: int,
    models: Models,
    place_settings: Mapping[str, Any],
) -> dict[str, int]:
    seed = world.seed
    frames = list(world.frames())
    odometry = list(world.odometry())
    pipeline = OfflinePipeline(
        PipelineSettings.from_mapping(BASE), encoder=models.encoder, embedder=models.embedder
    )
    poses = SampledPoseLookup(odometry, frame_id="odom", child_frame_id="base_link")
    pipeline.run(iter(frames), stores["surprise"], pose_lookup=poses)
    keyframes, _ = place_keyframes(frames, odometry, dict(place_settings))
    add_keyframes(stores["place"], frames, keyframes, models.embedder)
    copy_store(stores["surprise"], stores["surprise+place"])
    add_keyframes(stores["surprise+place"], frames, keyframes, models.embedder)
    count = {m: stored_frames(stores[m]) for m in ("surprise", "place", "surprise+place")}
    per_minute = count["surprise+place"] / 8.0 / minutes  # 8 frames an episode
    for mode in ("uniform", "random"):
        count[mode] = baseline_episodes(
            stores[mode],
            frames,
            odometry,
            models.embedder,
            mode=mode,
            per_minute=per_minute,
            seed=seed,
        )
    count["ceiling"] = baseline_episodes(
        stores["ceiling"],
        frames,
        odometry,
        models.embedder,
        mode="uniform",
        per_minute=CEILING_PER_MINUTE,
        seed=seed,
    )
    count["all_frames"] = len(frames)
    return count


def ask(
    store: Path,
    questions: list[Question],
    embedder: ImageTextEmbedder,
    thresholds: Mapping[str, float],
    folder: Path,
) -> list[dict[str, Any]]:
    """Every question asked of one store; the records."""
    with EpisodeStore(store, read_only=True) as opened:
        memory = Memory.searched_by(opened, embedder)
        qa = QaRun.create(folder, questions, {"answerer": {"name": "retrieval"}, "memories": {}})
        answerer = ChoiceJudge(
            RetrievalAnswerer(
                thresholds.get("yes", 0.5),
                still_threshold=thresholds.get("still", thresholds.get("yes", 0.5)),
                generic_threshold=thresholds.get("generic"),
                place_margin=thresholds.get("place_margin", 0.0),
                still_drop=thresholds.get("still_drop"),
            )
        )
        run_questions(qa, answerer, {questions[0].sequence: memory})
        return list(qa.records().values())


def figures(
    records: Sequence[Mapping[str, Any]], questions: Mapping[str, Question], mixed: set[str]
) -> dict[str, Any]:
    """One memory's figures on one world (see the module docstring)."""
    scored = [
        ScoredAnswer(
            questions[r["id"]],
            0,
            QuestionScore(r["score"]["measure"], r["score"]["value"], r["score"]["status"]),
        )
        for r in records
    ]
    out: dict[str, Any] = {}
    groups = {
        "all": [s for s in scored if s.question.id in mixed],
        "static": [s for s in scored if split_of(s.question) == "static"],
        "event": [s for s in scored if split_of(s.question) == "event"],
    }
    for name, items in groups.items():
        cols = columns_of(items)
        out[name] = {c: cols[c] for c in (*COLUMNS, "text_accuracy")}
        out[name]["n"] = len(items)
    by_id = {r["id"]: r for r in records}
    still = [by_id[q] for q in by_id if split_of(questions[q]) == "still_there"]
    lures = [by_id[q] for q in by_id if split_of(questions[q]) == "lure"]
    out["still_there"] = _share(r["score"]["value"] == 1 for r in still)
    out["lure_false_yes"] = _share(bool(r["answer"] and r["answer"]["yes"]) for r in lures)
    out["n_still"], out["n_lure"] = len(still), len(lures)
    for kind in ("binary", "position", "time", "duration", "text"):
        cols = columns_of(s for s in scored if s.question.type == kind)
        key = {
            "binary": "question_accuracy",
            "position": "positional_error_m",
            "time": "time_error_min",
            "duration": "duration_error_min",
            "text": "text_accuracy",
        }[kind]
        out[f"type_{kind}"] = cols[key]
    return out


def _share(values: Any) -> float | None:
    kept = list(values)
    return sum(kept) / len(kept) if kept else None


def _binary_details(
    records: Sequence[Mapping[str, Any]], questions: Mapping[str, Question]
) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """``(split, details, true answer is yes)`` of the binary questions answered."""
    for r in records:
        q = questions[r["id"]]
        if q.type == "binary" and not r.get("error"):
            yield split_of(q), r["details"], bool(q.truth.yes)


def fit_thresholds(
    records: Sequence[Mapping[str, Any]], questions: Mapping[str, Question]
) -> dict[str, float]:
    """A memory's yes-, place- and still-there thresholds from its validation records."""
    yes, still = [], []
    for split, d, truth in _binary_details(records, questions):
        if split != "still_there":
            yes.append((*best_by_kind(d), truth))
        elif "last_pass_similarity" in d:
            still.append((d["last_pass_similarity"], d.get("earlier_similarity"), truth))
    fit_yes = fit_yes_thresholds(yes)
    fit_still = fit_yes_threshold((now, truth) for now, _, truth in still)
    still_threshold = float(fit_still["threshold"] if fit_still["threshold"] is not None else 0.5)
    fit_drop = fit_still_drop(still, still_threshold)
    return {
        "yes": float(fit_yes["threshold"] if fit_yes["threshold"] is not None else 0.5),
        "place_margin": float(fit_yes["place_margin"]),
        "still": still_threshold,
        "still_drop": fit_drop["threshold"],
        "n_yes": fit_yes["n"],
        "n_still": fit_still["n"],
    }


def fit_generic(
    pooled: Mapping[str, Sequence[Mapping[str, Any]]],
    questions: Mapping[str, Question],
    thresholds: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """One generic threshold for every memory, from all memories' validation records.

    Whether a question's words embed like an empty caption is a property of the words and
    the embedder, not of what a memory holds (the product has one ``qa_generic_threshold``
    per embedder), so it is fitted once, on every memory's binary questions that reach
    that memory's own yes-threshold and margin.
    """
    answers = [
        (reaches_yes(d, t["yes"], t["place_margin"]), d.get("generic_cos"), truth)
        for memory, t in thresholds.items()
        for split, d, truth in _binary_details(pooled[memory], questions)
        if split != "still_there"
    ]
    return fit_generic_threshold(answers)


def one_world(
    seed: int,
    minutes: int,
    root: Path,
    models: Models,
    *,
    thresholds: Mapping[str, Mapping[str, float]],
    place_settings: Mapping[str, Any],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Question], set[str], dict[str, int]]:
    """Build one world's memories and ask its questions of each; the records."""
    t0 = time.perf_counter()
    truth, stores, count = build_memories(seed, minutes, root, models, place_settings)
    built = time.perf_counter() - t0
    questions = place_questions(truth, seed, mix=False)
    mixed = {q.id for q in place_questions(truth, seed)}
    records = {
        m: ask(
            stores[m], questions, models.embedder, thresholds.get(m, {}), root / f"qa-{seed}-{m}"
        )
        for m in MEMORIES
    }
    print(
        f"world {seed}: {len(truth['landmarks'])} landmarks, {len(questions)} questions "
        f"({len(mixed)} in the mix), frames {count}; built {built:.0f} s, all "
        f"{time.perf_counter() - t0:.0f} s, load {_load()}",
        flush=True,
    )
    return records, {q.id: q for q in questions}, mixed, count


def table(per_world: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Mean and spread over worlds of every figure, per memory."""
    out: dict[str, dict[str, Any]] = {}
    for memory in MEMORIES:
        rows = [w["figures"][memory] for w in per_world]
        row: dict[str, Any] = {}
        for split in SPLITS:
            for column in COLUMNS:
                row[f"{split}:{column}"] = spread(r[split][column] for r in rows)
        for key in (
            "still_there",
            "lure_false_yes",
            "type_binary",
            "type_position",
            "type_time",
            "type_duration",
            "type_text",
        ):
            row[key] = spread(r[key] for r in rows)
        row["frames_percent"] = spread(
            100.0 * w["frames"][memory] / w["frames"]["all_frames"] for w in per_world
        )
        row["n_still"] = sum(r["n_still"] for r in rows)
        row["n_lure"] = sum(r["n_lure"] for r in rows)
        out[memory] = row
    return out


def _cell(figure: Mapping[str, Any], digits: int) -> str:
    if figure["mean"] is None:
        return "-"
    return f"{figure['mean']:.{digits}f} ± {figure['std']:.{digits}f}"


def print_table(rows: Mapping[str, Mapping[str, Any]], seeds: Sequence[int]) -> None:
    """The Markdown tables of RESULTS.md."""
    print(f"\n## QA world, second round: {len(seeds)} seeds ({', '.join(map(str, seeds))})\n")
    heads = " | ".join(f"{s} acc / pos (m) / tem (min)" for s in SPLITS)
    print(f"| memory | % frames | {heads} | still there | lure false-yes |")
    print("|---" * (4 + len(SPLITS)) + "|")
    for memory, row in rows.items():
        cells = [
            " / ".join(_cell(row[f"{s}:{c}"], d) for c, d in zip(COLUMNS, (2, 1, 2), strict=True))
            for s in SPLITS
        ]
        print(
            f"| {memory} | {_cell(row['frames_percent'], 1)} | "
            + " | ".join(cells)
            + f" | {_cell(row['still_there'], 2)} (n={row['n_still']}) | "
            f"{_cell(row['lure_false_yes'], 2)} (n={row['n_lure']}) |"
        )
    print("\nPer type (binary accuracy, position m, time min, duration min, text accuracy):\n")
    print("| memory | binary | position | time | duration | text |")
    print("|---|---|---|---|---|---|")
    for memory, row in rows.items():
        cells = [
            _cell(row[f"type_{k}"], d)
            for k, d in (("binary", 2), ("position", 1), ("time", 2), ("duration", 2), ("text", 2))
        ]
        print(f"| {memory} | " + " | ".join(cells) + " |")
    print("\nsurprise+place against uniform and random (relative, + = ours better):\n")
    for other in ("uniform", "random", "ceiling"):
        parts = []
        for split in SPLITS:
            for column in COLUMNS:
                a = rows["surprise+place"][f"{split}:{column}"]["mean"]
                b = rows[other][f"{split}:{column}"]["mean"]
                if a is None or b is None or b == 0:
                    parts.append(f"{split} {column}: -")
                    continue
                gain = (a - b) / b if column == "question_accuracy" else (b - a) / b
                parts.append(f"{split} {column}: {100 * gain:+.0f} %")
        print(f"* vs {other}: " + "; ".join(parts))


def plot(rows: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    """Accuracy, positional and temporal error per memory and split, and the still-there
    accuracy and lures' false-yes rate per memory, as bars (mean, error bar: sd)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    labels = ("question accuracy", "positional error, m", "temporal error, min")
    width = 0.8 / len(MEMORIES)
    panels: list[tuple[list[str], Sequence[str], str]] = [
        ([f"{s}:{column}" for s in SPLITS], SPLITS, label)
        for column, label in zip(COLUMNS, labels, strict=True)
    ]
    panels.append((["still_there", "lure_false_yes"], ("still there", "lure false-yes"),
                   "still there: accuracy; lures: false yes"))  # fmt: skip
    for ax, (keys, ticks, label) in zip(axes, panels, strict=True):
        for k, memory in enumerate(MEMORIES):
            means = [rows[memory][key]["mean"] or 0.0 for key in keys]
            stds = [rows[memory][key]["std"] or 0.0 for key in keys]
            xs = [i + (k - len(MEMORIES) / 2 + 0.5) * width for i in range(len(keys))]
            ax.bar(xs, means, width, yerr=stds, capsize=2, label=memory)
        ax.set_xticks(range(len(keys)), ticks)
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=7)
    fig.suptitle("QA world, second round (synthetic-trained-tiny, retrieval answerer)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main() -> None:
    """Validation worlds first (thresholds), then the reported worlds, a table after each."""
    import torch

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9", help="world seeds reported")
    parser.add_argument("--validation-seeds", default="900,901,902", help="seeds to fit on")
    parser.add_argument("--minutes", type=int, default=20, help="length of each world")
    parser.add_argument("--place-cell-m", type=float, default=None, help="place cell size")
    parser.add_argument("--json", type=Path, help="write the figures here (after each world)")
    parser.add_argument("--plot", type=Path, help="write the bar chart here (PNG)")
    parser.add_argument("--keep", type=Path, help="keep the stores and runs in this folder")
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="only build the stores of --seeds in --keep (a second process speeding up a "
        "run that uses the same --keep folder)",
    )
    parser.add_argument(
        "--thresholds-from",
        type=Path,
        help="a --json file of an earlier run with the same validation seeds: its fitted "
        "thresholds, instead of fitting them again",
    )
    args = parser.parse_args()
    seeds, validation = _parse_seeds(args.seeds), _parse_seeds(args.validation_seeds)
    if set(seeds) & set(validation):
        parser.error("the reported seeds and the validation seeds must differ")
    place_settings: dict[str, Any] = {}
    if args.place_cell_m is not None:
        place_settings["place_cell_m"] = args.place_cell_m
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs")
    print(f"python {platform.python_version()}, torch {torch.__version__}; load {_load()}")
    models = Models.shipped()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if args.build_only:
            for seed in seeds:
                build_memories(seed, args.minutes, root, models, place_settings)
                print(f"world {seed} built, load {_load()}", flush=True)
            return
        pooled: dict[str, list[dict[str, Any]]] = {m: [] for m in MEMORIES}
        asked: dict[str, Question] = {}
        earlier: dict[str, Any] = {}
        if args.thresholds_from:
            earlier = json.loads(args.thresholds_from.read_text(encoding="utf-8"))
            if earlier["validation_seeds"] != validation:
                parser.error(f"{args.thresholds_from} was fitted on other validation seeds")
        for seed in [] if earlier else validation:
            records, questions, _, _ = one_world(
                seed,
                args.minutes,
                root / "validation",
                models,
                thresholds={},
                place_settings=place_settings,
            )
            asked.update(questions)
            for memory in MEMORIES:
                pooled[memory] += records[memory]
        thresholds = earlier.get("thresholds")
        if not thresholds:
            thresholds = {m: fit_thresholds(pooled[m], asked) for m in MEMORIES}
            generic = fit_generic(pooled, asked, thresholds)
            for fitted in thresholds.values():
                fitted.update(generic=generic["threshold"], n_generic=generic["n"])
        for memory, fitted in thresholds.items():
            print(f"validation {memory}: {fitted}", flush=True)
        per_world: list[dict[str, Any]] = []
        for seed in seeds:
            records, questions, mixed, count = one_world(
                seed,
                args.minutes,
                root,
                models,
                thresholds=thresholds,
                place_settings=place_settings,
            )
            per_world.append(
                {
                    "seed": seed,
                    "frames": count,
                    "figures": {m: figures(records[m], questions, mixed) for m in MEMORIES},
                }
            )
            rows = table(per_world)
            if args.json:
                out = {
                    "seeds": [w["seed"] for w in per_world],
                    "validation_seeds": validation,
                    "minutes": args.minutes,
                    "place_settings": place_settings,
                    "thresholds": thresholds,
                    "table": rows,
                    "worlds": per_world,
                }
                args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print_table(rows, [w["seed"] for w in per_world])
    print(f"\nload at the end {_load()}")
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
