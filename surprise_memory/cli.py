"""The ``surprise-memory`` command: process, query, report, eval-gebd, migrate.

``query`` and ``migrate`` (the store commands, on either backend) live in
:mod:`surprise_memory.cli_store`.

Options of settings are generated from the one config schema (:mod:`surprise_memory.config`):
each setting ``name`` becomes ``--name-with-hyphens`` (the underscore spelling ``--name`` is
accepted too), with the setting's description, range and default in ``--help``. The
defaults are not repeated here: an option left out takes the config dataclass's default,
so the command line, the node parameters and ``config/surprise_memory.yaml`` agree.

Errors raised on purpose (:class:`~surprise_memory.errors.SurpriseMemoryError`) print one
line, ``surprise-memory: error: ...``, and exit with status 1; usage errors exit with 2.

Heavy modules (torch, the models, matplotlib) are imported only by the subcommand that
needs them, so ``--help`` and a query by time or place answer at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from surprise_memory.config import (
    ComponentConfig,
    EncoderConfig,
    GateConfig,
    ScorerConfig,
    Setting,
    settings_of,
)
from surprise_memory.errors import ConfigError, InputError, StoreError, SurpriseMemoryError
from surprise_memory.offline.pipeline import PIPELINE_CONFIGS

__all__ = ["build_parser", "main"]

PROG = "surprise-memory"

# Settings the offline command replaces by its own options.
_PROCESS_EXCLUDED = {
    "store_path": "the store is --out",
    "odom_topic": "poses come from --pose-topic",
}
_ALIASES = {"encoder_batch": ("--batch",), "encoder_weights": ("--weights",)}
_ALIASES["gate_mode"] = ("--gate",)  # --gate uniform|random: the paper's baselines


def option_strings(name: str) -> list[str]:
    """The spellings of a setting's option: ``--a-b`` first, then ``--a_b`` when different."""
    hyphen = "--" + name.replace("_", "-")
    return [hyphen] if "_" not in name else [hyphen, "--" + name]


def _help(spec: Setting, default: Any = None) -> str:
    parts = [spec.description.replace("%", "%%")]
    if spec.low is not None or spec.high is not None:
        low = "" if spec.low is None else f"{spec.low:g}"
        high = "" if spec.high is None else f"{spec.high:g}"
        parts.append(f"[{low}..{high}]")
    value = spec.default if default is None else default
    parts.append(f"(default: {value!r})")
    return " ".join(parts)


def _add_setting(
    group: argparse._ArgumentGroup,
    spec: Setting,
    *,
    extra: Sequence[str] = (),
    default: Any = None,
) -> None:
    """Add one setting as an option whose parsed default is None (= the config's default)."""
    flags = [*option_strings(spec.name), *extra]
    kwargs: dict[str, Any] = {"dest": spec.name, "default": None, "help": _help(spec, default)}
    if spec.type is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
        flags = option_strings(spec.name)[:1]  # --x / --no-x
    else:
        kwargs["type"] = spec.type
        kwargs["metavar"] = spec.name.upper() if spec.choices is None else None
        if spec.choices is not None:
            kwargs["choices"] = spec.choices
    group.add_argument(*flags, **kwargs)


def _add_config_options(
    parser: argparse.ArgumentParser,
    configs: Sequence[type[ComponentConfig]],
    excluded: Sequence[str] = (),
) -> None:
    for cls in configs:
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        group = parser.add_argument_group(f"{cls.component} settings", doc)
        for spec in settings_of(cls):
            if spec.name not in excluded:
                _add_setting(group, spec, extra=_ALIASES.get(spec.name, ()))


def _given(args: argparse.Namespace, configs: Sequence[type[ComponentConfig]]) -> dict[str, Any]:
    names = {s.name for cls in configs for s in settings_of(cls)}
    return {k: v for k, v in vars(args).items() if k in names and v is not None}


def _parse_point(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) not in (2, 3) or not all(math.isfinite(v) for v in values):
        raise InputError(f"--near {text!r}: expected x,y or x,y,z in metres (e.g. 3.5,-1,0)")
    x, y, *z = values
    return (x, y, z[0] if z else 0.0)


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``surprise-memory`` with its five subcommands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Surprise-gated episodic memory, offline: process a bag or video into an "
        "episode store, query it, report on it, evaluate on GEBD.",
        epilog="Setting options: every setting of the config schema is an option named "
        "--setting-name (the spelling --setting_name is accepted too), with the same name, "
        "default and range as the ROS node parameter.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter

    p = sub.add_parser(
        "process",
        help="run the full pipeline over a bag or a video into a new store",
        description="Decode -> windows -> batched V-JEPA-2 -> surprise -> gate -> episodes -> "
        "store, streaming in constant memory. Writes STORE/scores.csv (per-frame stamp_ns, "
        "score, kl, tau, triggered) and STORE/run.json (settings, models, summary).",
    )
    p.add_argument("input", metavar="INPUT", help="rosbag2 folder/.db3/.mcap, ROS 1 .bag, video")
    p.add_argument("--out", "-o", required=True, metavar="STORE", help="new store folder")
    p.add_argument(
        "--image-topic", help="camera topic of a bag (needed when it has several image topics)"
    )
    p.add_argument(
        "--pose-topic",
        help="odometry, PoseStamped or /tf topic of the bag for the episode poses "
        "(tf: map_frame <- robot_frame); without it episodes have no pose",
    )
    p.add_argument(
        "--fps", type=float, help="keep at most this many input frames per second (default: all)"
    )
    p.add_argument(
        "--device",
        help="device of both models (auto, cpu, cuda, cuda:N); --encoder-device and "
        "--embedder-device override it per model",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--budget-from",
        metavar="STORE",
        help="baseline_episodes_per_minute = that run's episodes per minute (run.json)",
    )
    _add_config_options(p, PIPELINE_CONFIGS, excluded=tuple(_PROCESS_EXCLUDED))
    p.set_defaults(func=_cmd_process)

    from surprise_memory.cli_store import add_store_commands  # it imports this module

    add_store_commands(sub, fmt)

    r = sub.add_parser(
        "report",
        help="write a self-contained HTML report (and PNG curve) of a processed store",
        formatter_class=fmt,
    )
    r.add_argument("store", metavar="STORE", help="store folder written by process")
    r.add_argument("--out", "-o", metavar="HTML", help="report file (default: STORE/report.html)")
    r.set_defaults(func=_cmd_report)

    g = sub.add_parser(
        "eval-gebd",
        help="Kinetics-GEBD evaluation (F1 at rel. dist. 0.05..0.50) of the surprise detector",
        description="Decode each video of the annotation file found in --videos "
        "(<video_id>.mp4/.mkv/.webm/...), encode it with the video encoder (one window per "
        "frame), run the scorer and the gate (causal, and offline with tau over the whole "
        "video), and score both by the official protocol. With --predictions, evaluate "
        "those instead of running the detector. Detector settings default to the GEBD "
        "adapter's (GebdDetector), not the robot's.",
    )
    g.add_argument("--annotations", required=True, metavar="GT.pkl", help="ground-truth pickle")
    g.add_argument("--videos", metavar="DIR", help="folder of the videos")
    g.add_argument(
        "--predictions", metavar="PRED.pkl", help="evaluate these {video_id: [s, ...]} instead"
    )
    g.add_argument("--out", "-o", metavar="JSON", help="write the results as JSON")
    g.add_argument("--save-predictions", metavar="PREFIX", help="write PREFIX.{causal,offline}.pkl")
    g.add_argument("--device", help="device of the video encoder (overrides --encoder-device)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    enc = g.add_argument_group("encoder settings", "Settings of the video encoder.")
    for spec in settings_of(EncoderConfig):
        _add_setting(enc, spec, extra=_ALIASES.get(spec.name, ()))
    det = g.add_argument_group("detector settings", "GebdDetector (scorer + gate, per video).")
    from surprise_memory.evaluation import GebdDetector

    defaults = {
        n: p.default
        for n, p in inspect.signature(GebdDetector.__init__).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    for cls in (ScorerConfig, GateConfig):
        for spec in settings_of(cls):
            if spec.name in defaults:
                _add_setting(det, spec, default=defaults[spec.name])
    g.set_defaults(func=_cmd_eval_gebd, detector_defaults=defaults)
    return parser


# ----------------------------------------------------------------------------- process


def _cmd_process(args: argparse.Namespace) -> int:
    from surprise_memory.offline.pipeline import (
        OfflinePipeline,
        PipelineSettings,
        Progress,
        process,
    )

    values = _given(args, PIPELINE_CONFIGS)
    if args.budget_from:  # equal-budget baselines: the rate of an earlier run
        from surprise_memory.offline.run_record import budget_from

        if "baseline_episodes_per_minute" in values:
            raise InputError("give --budget-from or --baseline-episodes-per-minute, not both")
        values["baseline_episodes_per_minute"] = budget_from(args.budget_from)
    if args.device:
        values.setdefault("encoder_device", args.device)
        values.setdefault("embedder_device", args.device)
    settings = PipelineSettings.from_mapping(values)
    from surprise_memory.sources import open_source

    open_source(Path(args.input), args.image_topic, fps=args.fps)  # input errors before models
    if settings.episode.frame_history_seconds < (
        settings.episode.episode_before_seconds
        + settings.gate.nms_seconds
        + (settings.budget.budget_delay_seconds if settings.budget.max_episodes_per_minute else 0)
        + settings.episode.episode_after_seconds
    ):
        _note(
            "frame_history_seconds is shorter than episode_before + nms_seconds + "
            "episode_after: early frames of an episode may be gone when its event is decided"
        )
    pipeline = OfflinePipeline(settings)
    for role in ("encoder", "embedder"):
        m = getattr(pipeline, role)
        flag = "" if m.pretrained else "   <-- UNTRAINED (random weights)"
        _note(f"{role}: {m.model_name} on {m.device}{flag}")
    bar: Any = None

    def opened(source: Any, lookup: Any) -> None:
        nonlocal bar
        _note(f"input: {source.describe()}")
        _note(f"poses: {lookup.describe() if lookup is not None else 'none (no --pose-topic)'}")
        if not args.no_progress:
            from tqdm import tqdm  # type: ignore[import-untyped]

            bar = tqdm(total=source.estimated_frames, unit="frame", desc="process", file=sys.stderr)

    last = [0]

    def progress(p: Progress) -> None:
        if bar is not None:
            bar.update(p.frames - last[0])
            last[0] = p.frames
            if p.frames % 10 == 0:
                bar.set_postfix(events=p.events, episodes=p.episodes, refresh=False)

    try:
        summary = process(
            args.input,
            args.out,
            image_topic=args.image_topic,
            pose_topic=args.pose_topic,
            fps=args.fps,
            pipeline=pipeline,
            progress=progress,
            on_open=opened,
        )
    finally:
        if bar is not None:
            bar.close()
    print(summary.format())
    if pipeline.untrained:
        print("NOTE: random (untrained) weights: events and retrieval are not meaningful")
    out = Path(args.out)
    print(f"store {out}  (scores: {out / 'scores.csv'}, run record: {out / 'run.json'})")
    return 0


def _note(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


# ----------------------------------------------------------------------------- report


def _cmd_report(args: argparse.Namespace) -> int:
    from surprise_memory.offline.report import write_report

    html, png = write_report(args.store, args.out)
    print(f"report {html}\ncurve  {png}")
    return 0


# ----------------------------------------------------------------------------- eval-gebd


def _cmd_eval_gebd(args: argparse.Namespace) -> int:
    from surprise_memory.evaluation import (
        MIN_CONSISTENCY,
        GebdDetector,
        detect_videos,
        evaluate_gebd,
        format_comparison_table,
        load_ground_truth,
        load_predictions,
        measured_row,
        save_predictions,
    )

    gt = load_ground_truth(args.annotations)
    det_values = {**args.detector_defaults, **_given(args, (ScorerConfig, GateConfig))}
    det_values = {k: v for k, v in det_values.items() if k in args.detector_defaults}
    runs: dict[str, Mapping[str, Sequence[float]]] = {}
    weights = "predictions file"
    settings: dict[str, Any] = {}
    missing: list[str] = []
    if args.predictions:
        runs["predictions"] = load_predictions(args.predictions)
    else:
        if not args.videos:
            raise InputError("eval-gebd needs --videos DIR (or --predictions PRED.pkl)")
        folder = Path(args.videos)
        if not folder.is_dir():
            raise InputError(f"--videos {str(folder)!r} is not a folder")
        enc_values = _given(args, (EncoderConfig,))
        if args.device:
            enc_values["encoder_device"] = args.device
        enc_cfg = EncoderConfig.from_mapping(enc_values)
        detector = GebdDetector(**det_values)
        from surprise_memory.perception.encoders import VideoEncoder

        encoder = VideoEncoder.from_config(enc_cfg)
        weights = encoder.model_name
        settings = {**detector.settings, "clip_frames": enc_cfg.clip_frames}
        todo = [vid for vid, v in gt.items() if v.consistency >= MIN_CONSISTENCY]
        iterator: Any = todo
        if not args.no_progress:
            from tqdm import tqdm

            iterator = tqdm(todo, unit="video", desc="eval-gebd", file=sys.stderr)
        causal, offline, missing = detect_videos(iterator, folder, encoder, enc_cfg, detector)
        runs = {"causal": causal, "offline": offline}
        if missing:
            _note(
                f"{len(missing)} of {len(todo)} videos not found in {folder} (their boundaries "
                f"count as missed): {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}"
            )
        if args.save_predictions:
            for mode, preds in runs.items():
                save_predictions(f"{args.save_predictions}.{mode}.pkl", preds)
    results: dict[str, Any] = {}
    rows = []
    for mode, preds in runs.items():
        result = evaluate_gebd(gt, preds)
        print(result.format_table(f"GEBD {mode}"))
        print()
        results[mode] = result.as_dict()
        row_mode: Literal["causal", "offline"] = "offline" if mode == "offline" else "causal"
        rows.append(
            measured_row(
                result,
                weights=weights,
                mode=row_mode,
                dataset=Path(args.annotations).name,
                settings=settings,
            )
        )
    print(format_comparison_table(rows))
    if weights.startswith("random"):
        print(
            "NOTE: measured with random (untrained) encoder weights: a smoke test, not "
            "comparable with the published number"
        )
    if args.out:
        out = {
            "annotations": str(Path(args.annotations).resolve()),
            "videos": args.videos,
            "weights": weights,
            "detector": settings,
            "missing_videos": missing,
            "results": results,
            "table": [dataclasses.asdict(r) for r in rows],
        }
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"results {args.out}")
    return 0


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage, 130 ^C)."""
    import logging

    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except (ConfigError, InputError, StoreError, SurpriseMemoryError) as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    return status


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    raise SystemExit(main())
