"""``surprise-memory process`` (a bag or a video into a store) and ``report`` (its HTML page)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from surprise_memory.cli.batch import add_batch_options, run_many
from surprise_memory.cli.cluster import split_ray_value
from surprise_memory.cli.options import add_config_options, given, note
from surprise_memory.errors import InputError
from surprise_memory.offline.pipeline import PIPELINE_CONFIGS

__all__ = ["add_process_commands"]

# Settings the offline command replaces by its own options.
_PROCESS_EXCLUDED = {
    "store_path": "the store is --out",
    "odom_topic": "poses come from --pose-topic",
    "pose_covariance_topic": "poses come from --pose-topic",
}


def add_process_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``process`` and ``report`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of the subcommands that show their defaults.

    """
    p = sub.add_parser(
        "process",
        help="run the full pipeline over a bag or a video (or many) into a new store",
        description="Decode -> windows -> batched V-JEPA-2 -> surprise -> gate -> episodes -> "
        "store, streaming in constant memory. Writes STORE/scores.csv (per-frame stamp_ns, "
        "score, kl, tau, triggered) and STORE/run.json (settings, models, summary). Many "
        "recordings: see the 'many recordings' options.",
    )
    p.add_argument(
        "input",
        nargs="*",  # not "+": `--ray fleet/` may swallow the only one (split_ray_value)
        metavar="INPUT",
        help="rosbag2 folder/.db3/.mcap, ROS 1 .bag, video; or a folder of them, a glob, @FILE",
    )
    p.add_argument(
        "--out",
        "-o",
        required=True,
        metavar="STORE",
        help="new store folder (many recordings: a folder of stores, or postgresql://...)",
    )
    p.add_argument(
        "--image-topic",
        help="camera topic of a bag (needed when it has several image topics, unless "
        "--cameras or --all-cameras takes several)",
    )
    p.add_argument(
        "--all-cameras",
        action="store_true",
        help="a bag of several cameras: process every image topic, each a camera named after "
        "its topic (/front/image_raw: front), each with its own surprise, into one store; "
        "--cameras NAME[:topic=T][:yaw=DEG],... takes those named",
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
    add_batch_options(p)
    add_config_options(p, PIPELINE_CONFIGS, excluded=tuple(_PROCESS_EXCLUDED))
    p.set_defaults(func=_cmd_process)

    r = sub.add_parser(
        "report",
        help="write a self-contained HTML report (and PNG curve) of a processed store",
        formatter_class=fmt,
    )
    r.add_argument("store", metavar="STORE", help="store folder written by process")
    r.add_argument("--out", "-o", metavar="HTML", help="report file (default: STORE/report.html)")
    r.set_defaults(func=_cmd_report)


def _cmd_process(args: argparse.Namespace) -> int:
    from surprise_memory.offline.pipeline import (
        OfflinePipeline,
        PipelineSettings,
        Progress,
        process,
    )

    values = given(args, PIPELINE_CONFIGS)
    if args.budget_from:  # equal-budget baselines: the rate of an earlier run
        from surprise_memory.offline.run_record import budget_from

        if "baseline_episodes_per_minute" in values:
            raise InputError("give --budget-from or --baseline-episodes-per-minute, not both")
        values["baseline_episodes_per_minute"] = budget_from(args.budget_from)
    if args.device:
        values.setdefault("encoder_device", args.device)
        values.setdefault("embedder_device", args.device)
    settings = PipelineSettings.from_mapping(values)
    if settings.episode.frame_history_seconds < (
        settings.episode.episode_before_seconds
        + settings.gate.nms_seconds
        + (settings.budget.budget_delay_seconds if settings.budget.max_episodes_per_minute else 0)
        + settings.episode.episode_after_seconds
    ):
        note(
            "frame_history_seconds is shorter than episode_before + nms_seconds + "
            "episode_after: early frames of an episode may be gone when its event is decided"
        )
    from surprise_memory.memory.store import is_postgres_url
    from surprise_memory.offline.inputs import is_many

    address, swallowed = split_ray_value(args.ray)
    args.ray, args.input = address, ([swallowed] if swallowed else []) + args.input
    if not args.input:
        raise InputError("process needs an INPUT: a recording, a folder, a glob or @FILE")
    many = address is not None or is_many(args.input) or is_postgres_url(args.out)
    if many and (args.all_cameras or settings.cameras.cameras):
        raise InputError(
            "--cameras / --all-cameras take one recording into a store folder: not with many "
            "recordings, --ray or a postgresql:// --out"
        )
    if many:
        return run_many(args, settings)
    from surprise_memory.sources import open_source

    args.input = args.input[0]
    if args.all_cameras or settings.cameras.cameras:
        return _process_cameras(args, settings)
    open_source(Path(args.input), args.image_topic, fps=args.fps)  # input errors before models
    pipeline = OfflinePipeline(settings)
    for role in ("encoder", "embedder"):
        m = getattr(pipeline, role)
        flag = "" if m.pretrained else "   <-- UNTRAINED (random weights)"
        note(f"{role}: {m.model_name} on {m.device}{flag}")
    bar: Any = None

    def opened(source: Any, lookup: Any) -> None:
        nonlocal bar
        note(f"input: {source.describe()}")
        note(f"poses: {lookup.describe() if lookup is not None else 'none (no --pose-topic)'}")
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


def _process_cameras(args: argparse.Namespace, settings: Any) -> int:
    """``process BAG --cameras ...`` / ``--all-cameras``: each camera's topic, one store."""
    from surprise_memory.offline.cameras import bag_cameras, process_cameras
    from surprise_memory.offline.pipeline import OfflinePipeline
    from surprise_memory.sources.bag import bag_image_topics

    if args.image_topic:
        raise InputError("--image-topic reads one camera: not with --cameras / --all-cameras")
    if args.all_cameras and settings.cameras.cameras:
        raise InputError("--all-cameras or --cameras, not both")
    cameras = None if args.all_cameras else list(settings.cameras.specs)
    bag_cameras(bag_image_topics(args.input), cameras)  # input errors before the models
    pipeline = OfflinePipeline(settings)

    def opened(source: Any, lookup: Any) -> None:
        note(f"input: {source.describe()}")

    summaries = process_cameras(
        args.input,
        args.out,
        cameras,
        pipeline=pipeline,
        pose_topic=args.pose_topic,
        fps=args.fps,
        on_open=opened,
    )
    for name, summary in summaries.items():
        print(f"{'all cameras' if not name else 'camera ' + name}:\n{summary.format()}")
    if pipeline.untrained:
        print("NOTE: random (untrained) weights: events and retrieval are not meaningful")
    print(f"store {args.out}  (each camera's scores and run record: {args.out}/cameras/NAME/)")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from surprise_memory.offline.report import write_report

    html, png = write_report(args.store, args.out)
    print(f"report {html}\ncurve  {png}")
    return 0
