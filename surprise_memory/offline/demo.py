"""The README's main job: a synthetic robot recording through the whole pipeline.

Run with ``make demo`` (``tools/demo.sh``: sets up, builds, runs this) or
``python -m surprise_memory.offline.demo [--out DIR]``. It

1. writes a synthetic camera recording as a real rosbag2 (``sensor_msgs/Image`` and
   ``nav_msgs/Odometry``; a scene with an object appearing, a light change, a camera turn
   and a person-like shape crossing) and its ground truth beside it;
2. runs the offline pipeline on it (the same core objects as the nodes) into an episode
   store, with the poses from the odometry;
3. prints the events next to the ground-truth times, a few retrievals (by time, by place;
   by text only with trained weights), and writes the HTML report.

Weights. The paper's models are used when they are reachable without a network: in the
local Hugging Face cache, or given as folders (``--encoder-weights``/``--embedder-weights``).
Otherwise the demo uses the project's own small models, ``synthetic-trained-tiny``: the tiny
V-JEPA-2 and a small PE-Core trained on synthetic scenes like the demo's (never on the
demo's seed; see :mod:`surprise_memory.offline.synthetic.training`). They are *not* the
paper's models and the demo says so. ``--random-weights`` runs the untrained tiny presets
of the same architectures instead (``random:tiny`` V-JEPA-2, ``PE-Core-tiny-random``);
``--full-size`` builds the real architectures with random weights (slow: for a GPU).

It reports each scripted event as found (an event within 1 s of its span, from start to
end: a camera pan or a person seen mid-crossing is that pan or crossing; an instant event's
span is its start) or missed,
answers a few sentences with an episode (text retrieval; not with random weights), in the
terminal and in the report ("Asked in words", each answer right or wrong against the ground
truth), and shows ``surprise-memory goto "<text>" --dry-run`` choosing an episode.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from surprise_memory.errors import SurpriseMemoryError
from surprise_memory.stamps import NS_PER_SECOND, ns_to_seconds

__all__ = ["DEMO_QUERIES", "main", "resolve_weights"]

DEMO_QUERIES = (
    ("person_crosses", "a person crossing"),
    ("light_change", "when the lights went down"),
)
"""The sentences the demo answers, with the scripted event each describes (paraphrases
that no training caption uses)."""

_MARKER = ".surprise_memory_demo"
_BAG = "recording"
_STORE = "store"


def _cached(repo: str, names: tuple[str, ...]) -> bool:
    """True when every file of ``names`` (or its alternatives, '|') is in the local HF cache."""
    from huggingface_hub import try_to_load_from_cache

    for name in names:
        if not any(isinstance(try_to_load_from_cache(repo, alt), str) for alt in name.split("|")):
            return False
    return True


def resolve_weights(
    encoder_weights: str | None,
    embedder_weights: str | None,
    full_size: bool,
    random_weights: bool = False,
) -> dict[str, Any]:
    """Pick the weights: given folders, else the local cache, else ``synthetic-trained-tiny``.

    ``random_weights`` (or ``full_size``) replaces the synthetic models by random ones.

    Returns:
        ``encoder_weights``, ``embedder_model``, ``embedder_weights`` settings,
        ``trained_encoder`` / ``trained_embedder`` flags and ``synthetic`` (the names of
        the parts that are the project's synthetic-trained models).

    """
    from surprise_memory.perception.encoders import (
        PE_CORE_L14,
        SYNTHETIC_EMBEDDER_MODEL,
        SYNTHETIC_MODEL_NAME,
        SYNTHETIC_WEIGHTS,
        TINY_EMBEDDER_MODEL,
        TINY_VIDEO_WEIGHTS,
        VJEPA2_VITL_FPC64,
    )

    synthetic_ok = not (random_weights or full_size) and (SYNTHETIC_WEIGHTS / "video").is_dir()
    out: dict[str, Any] = {"synthetic": []}
    if encoder_weights:
        out["encoder_weights"] = encoder_weights
    elif _cached(
        VJEPA2_VITL_FPC64, ("config.json", "model.safetensors|model.safetensors.index.json")
    ):
        out["encoder_weights"] = VJEPA2_VITL_FPC64
    elif synthetic_ok:
        out["encoder_weights"] = SYNTHETIC_MODEL_NAME
        out["synthetic"].append("video encoder")
    else:
        out["encoder_weights"] = "random" if full_size else TINY_VIDEO_WEIGHTS
    out["trained_encoder"] = not out["encoder_weights"].startswith("random")

    out["embedder_model"] = PE_CORE_L14
    if embedder_weights:
        out["embedder_weights"] = embedder_weights
    else:
        import open_clip

        repo = str(open_clip.get_pretrained_cfg(PE_CORE_L14, "meta").get("hf_hub", "")).strip("/")
        names = (
            "open_clip_model.safetensors|open_clip_pytorch_model.safetensors|"
            "open_clip_pytorch_model.bin",
        )
        if repo and _cached(repo, names):
            out["embedder_weights"] = "meta"
        elif synthetic_ok:
            out["embedder_model"] = SYNTHETIC_EMBEDDER_MODEL
            out["embedder_weights"] = SYNTHETIC_MODEL_NAME
            out["synthetic"].append("embedder")
        else:
            out["embedder_weights"] = "random"
            if not full_size:
                out["embedder_model"] = TINY_EMBEDDER_MODEL
    out["trained_embedder"] = out["embedder_weights"] != "random"
    return out


def _prepare_out(out: Path) -> None:
    """Create the output folder; clear a previous demo's outputs, never anything else."""
    if out.exists() and any(out.iterdir()):
        if not (out / _MARKER).exists():
            raise SurpriseMemoryError(
                f"{out} exists and was not written by the demo; give another --out folder"
            )
        for name in (_BAG, f"{_BAG}.ground_truth.json", _STORE, "report.html", "report.png"):
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / _MARKER).write_text(
        "written by python -m surprise_memory.offline.demo\n", encoding="utf-8"
    )


def _banner(lines: list[str]) -> None:
    width = max(len(line) for line in lines) + 4
    print("!" * width)
    for line in lines:
        print(f"! {line:<{width - 4}} !")
    print("!" * width)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m surprise_memory.offline.demo", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--out", default="demo_output", help="output folder (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the recording")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic scene")
    parser.add_argument("--encoder-weights", help="V-JEPA-2 folder (or hub id when cached)")
    parser.add_argument("--embedder-weights", help="PE-Core-L-14-336 checkpoint file or folder")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument(
        "--full-size", action="store_true", help="real architectures even with random weights"
    )
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="untrained tiny models instead of the synthetic-trained ones",
    )
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except SurpriseMemoryError as exc:
        print(f"demo: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    from surprise_memory.config.browser import BrowserConfig
    from surprise_memory.memory.store import EpisodeStore
    from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process
    from surprise_memory.offline.report import TextAnswer, write_report
    from surprise_memory.offline.synthetic import model_scene, write_synthetic_bag
    from surprise_memory.offline.synthetic.evaluation import MATCH_S, episode_event, match_events

    t_start = time.perf_counter()
    out = Path(args.out).resolve()
    _prepare_out(out)
    print(f"demo output folder: {out}")

    scene = model_scene(args.seed, args.seconds)
    rec = write_synthetic_bag(out / _BAG, scene)
    truth = json.loads(rec.ground_truth.read_text(encoding="utf-8"))
    print(
        f"1. synthetic recording: rosbag2 {rec.path} ({rec.frames} frames "
        f"{scene.width}x{scene.height} at {scene.fps:g} Hz, {rec.odometry} odometry messages); "
        f"ground truth {rec.ground_truth}"
    )

    w = resolve_weights(
        args.encoder_weights, args.embedder_weights, args.full_size, args.random_weights
    )
    values: dict[str, Any] = {
        "encoder_weights": w["encoder_weights"],
        "embedder_model": w["embedder_model"],
        "embedder_weights": w["embedder_weights"],
        "encoder_device": args.device,
        "embedder_device": args.device,
    }
    import torch

    on_cpu = args.device == "cpu" or (args.device == "auto" and not torch.cuda.is_available())
    if w["trained_encoder"] and on_cpu and "video encoder" not in w["synthetic"]:
        # ViT-L on 64-frame windows is minutes per window on a CPU: encode 16-frame windows
        # twice a second, and shorten the scorer's and gate's warm-up to match.
        values.update(clip_frames=16, input_fps=2.0, window=16, warmup=8)
        print(
            "   trained V-JEPA-2 on a CPU: demo-scale settings clip_frames=16, input_fps=2, "
            "window=16, warmup=8 (the paper's are 64/all/64/32; use a GPU for those)"
        )
    if w["synthetic"]:
        from surprise_memory.perception.encoders import SYNTHETIC_MODEL_NAME, SYNTHETIC_WEIGHTS

        card = json.loads((SYNTHETIC_WEIGHTS / "MODEL_CARD.json").read_text(encoding="utf-8"))
        if "video encoder" in w["synthetic"]:
            values.update(card.get("recommended", {}))
        _banner(
            [
                f"{SYNTHETIC_MODEL_NAME} ({' and '.join(w['synthetic'])}): small models trained",
                "on synthetic scenes, not the paper's models (V-JEPA-2 / PE-Core weights were",
                "not found). They show the pipeline end to end on this synthetic world only.",
                f"Settings of the trained video model: {card.get('recommended', {})}.",
                "--random-weights: untrained models; --encoder-weights/--embedder-weights: yours.",
            ]
        )
    untrained = not (w["trained_encoder"] and w["trained_embedder"])
    if untrained:
        which = [
            name
            for name, ok in (
                ("video encoder", w["trained_encoder"]),
                ("embedder", w["trained_embedder"]),
            )
            if not ok
        ]
        _banner(
            [
                f"RANDOM WEIGHTS ({' and '.join(which)}): no trained weights were found in the",
                "local Hugging Face cache and no folder was given, so this demo runs UNTRAINED",
                "models. The events below show the pipeline working, not the method's quality.",
                "Give --encoder-weights/--embedder-weights folders for the real thing.",
                f"Architectures: {'full size' if args.full_size else 'TINY presets'} "
                f"(video {w['encoder_weights']}, embedder {w['embedder_model']}).",
            ]
        )
    settings = PipelineSettings.from_mapping(values)
    pipeline = OfflinePipeline(settings)
    print(f"   video encoder: {pipeline.encoder.model_name}")
    print(f"   embedder:      {pipeline.embedder.model_name}")

    store_dir = out / _STORE
    print(f"2. processing the bag into {store_dir} ...")
    summary = process(rec.path, store_dir, pipeline=pipeline, pose_topic="/odom")
    print("   " + summary.format().replace("\n", "\n   "))

    run = json.loads((store_dir / "run.json").read_text(encoding="utf-8"))
    origin = scene.start_ns
    events = [(e["stamp_ns"] - origin) / NS_PER_SECOND for e in run["events"]]
    print(f"3. scripted events, found when an event lies within {MATCH_S:g} s of the span:")
    matches = match_events(
        events, [ev["start_s"] for ev in truth["events"]], [ev["end_s"] for ev in truth["events"]]
    )
    for ev, near in zip(truth["events"], matches, strict=True):
        found = (
            "MISSED" if near is None else f"found at {near:6.1f} s ({near - ev['start_s']:+.1f} s)"
        )
        span = f"{ev['start_s']:6.1f} s" + (
            f" to {ev['end_s']:.1f} s" if ev["end_s"] > ev["start_s"] else ""
        )
        print(f"   {ev['name']:<15} at {span:<15} {found}")
    n_found = sum(m is not None for m in matches)
    extra = len(events) - n_found
    print(
        f"   found {n_found} of {len(matches)} scripted events; {extra} other event(s) "
        f"among the {len(events)} the gate decided"
    )

    print("4. retrievals:")
    answers: list[TextAnswer] = []
    with EpisodeStore(store_dir, read_only=True) as store:
        ev1 = truth["events"][1]
        hits = store.search(
            start_ns=origin + round((ev1["start_s"] - 2) * NS_PER_SECOND),
            end_ns=origin + round((ev1["end_s"] + 5) * NS_PER_SECOND),
            max_results=3,
        )
        print(f"   by time, {ev1['start_s'] - 2:.0f}..{ev1['end_s'] + 5:.0f} s ({ev1['name']}):")
        _print_hits(hits, origin)
        ev0 = truth["events"][0]
        x, y, z = ev0["position"]
        hits = store.search(near=(x, y, z), max_results=3)
        print(f"   by place, nearest to ({x:.1f}, {y:.1f}) m where the {ev0['name']} happened:")
        _print_hits(hits, origin)
        if w["trained_embedder"]:
            for kind, text in DEMO_QUERIES:
                q = pipeline.embedder.embed_text([text])[0]
                hits = store.search(
                    embedding=q, embedder_model=pipeline.embedder.model_name, max_results=2
                )
                top = (
                    episode_event((hits[0].episode.stamp_ns - origin) / NS_PER_SECOND, truth)
                    if hits
                    else None
                )
                verdict = "right" if top == kind else f"WRONG (wanted the {kind} episode)"
                answers.append(
                    TextAnswer(
                        text,
                        hits[0].episode.id if hits else None,
                        f"{verdict}: the {top or 'no scripted'} episode",
                    )
                )
                print(
                    f"   by text {text!r}: first hit is the {top or 'no scripted'} episode, "
                    + verdict
                )
                _print_hits(hits, origin)
        else:
            print(
                "   by text: skipped (the embedder has random weights; text would rank at random)"
            )
    if answers:
        text = answers[0].text
        # the recording's odom is its own (a session of its own): fixed for this dry run
        goto = ["--dry-run", "--navigation-frame", "odom", "--fixed-frames", "odom"]
        shown = " ".join(goto)
        print(f'   goto by text: surprise-memory goto "{text}" --store {store_dir} {shown}')
        _goto_dry_run(store_dir, text, pipeline.embedder, origin)

    html_path, png_path = write_report(store_dir, answers=answers)
    print(f"5. report: {html_path}  (curve {png_path})")
    print(
        f"   query it yourself: surprise-memory query {store_dir} --start 20 --end 40 "
        "(after `source tools/activate.sh` in your shell)"
    )
    page = BrowserConfig()
    print(
        f"6. browse it: surprise-memory serve {store_dir}\n"
        f"   then open http://{page.host}:{page.port}/ (timeline, search, map, the frames)"
    )
    print(f"demo finished in {time.perf_counter() - t_start:.0f} s")
    if untrained:
        print("REMINDER: random weights were used; see the banner above.")
    return 0


def _goto_dry_run(store_dir: Path, text: str, embedder: Any, origin: int) -> None:
    """What ``goto TEXT --store DIR --dry-run`` in the recording's ``odom`` does, printed.

    The same core calls as the command (the episode chosen by the text, the session
    checked, the goal made); ``odom`` is the recording's own frame, fixed for this dry run.
    """
    from surprise_memory.config import NavigationConfig
    from surprise_memory.memory.navigation import GoalQuery, choose_episode, plan_goal
    from surprise_memory.memory.store import EpisodeStore
    from surprise_memory.memory.store.records import host_robot_id, host_session_id

    standoff = NavigationConfig().goal_standoff_meters
    query = GoalQuery(embedding=embedder.embed_text([text])[0], embedder_model=embedder.model_name)
    own, now = host_robot_id(), time.time_ns()
    try:
        with EpisodeStore(store_dir, read_only=True) as store:
            episode, _ = choose_episode(store, query, own, now)  # its own folder: whole
        goal = plan_goal(
            episode,
            "odom",
            own_robot=own,
            now_ns=now,
            session_id=host_session_id(),
            fixed_frames=("odom",),
            standoff_m=standoff,
        )
    except SurpriseMemoryError as exc:
        print(f"   goto: no goal: {exc}")
        return
    x, y, z = goal.pose.position
    short = f", {standoff:g} m short" if standoff else ""
    print(
        f"   episode {episode.id} (t = {ns_to_seconds(episode.stamp_ns - origin):.1f} s): goal "
        f"({x:.2f}, {y:.2f}, {z:.2f}) in {goal.pose.frame_id}{short}; dry run, not sent"
    )


def _print_hits(hits: list[Any], origin: int) -> None:
    if not hits:
        print("     (none)")
    for h in hits:
        ep = h.episode
        pos = (
            "no pose"
            if not ep.pose_valid
            else "({:.1f}, {:.1f}, {:.1f}) m".format(*ep.pose.position)
        )
        extra = "" if h.score is None else f" cosine {h.score:.3f}"
        extra += "" if h.distance_m is None else f" {h.distance_m:.1f} m away"
        print(
            f"     {ns_to_seconds(ep.stamp_ns - origin):6.1f} s  surprise {ep.surprise:.2f}  "
            f"{pos}{extra}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
