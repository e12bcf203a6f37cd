"""``surprise-memory eval-gebd``: the Kinetics-GEBD evaluation of the surprise detector."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from surprise_memory.cli.cluster import (
    add_cluster_options,
    cluster_options,
    progress_view,
    split_ray_value,
)
from surprise_memory.cli.options import ALIASES, EXIT_INCOMPLETE, add_setting, given, note
from surprise_memory.config import EncoderConfig, GateConfig, ScorerConfig, settings_of
from surprise_memory.errors import InputError

__all__ = ["add_gebd_command"]


def add_gebd_command(sub: Any) -> None:
    """Add ``eval-gebd`` to the subcommands ``sub`` of the main parser."""
    g = sub.add_parser(
        "eval-gebd",
        help="Kinetics-GEBD evaluation (F1 at rel. dist. 0.05..0.50) of the surprise detector",
        description="Decode each video of the annotation file found in --videos "
        "(<video_id>.mp4/.mkv/.webm/...), encode it with the video encoder (one window per "
        "frame), run the scorer and the gate (causal, and offline with tau over the whole "
        "video), and score both by the official protocol. With --predictions, evaluate "
        "those instead of running the detector. Detector settings default to the GEBD "
        "adapter's (GebdDetector), not the robot's. The videos are detected in shards "
        "(--shard-size), here or on Ray (--ray); a video that fails counts as missed and "
        "is listed, and the exit status is then 3.",
    )
    g.add_argument("--annotations", required=True, metavar="GT.pkl", help="ground-truth pickle")
    g.add_argument(
        "--videos",
        nargs="+",
        metavar="DIR",
        help="the videos (<video_id>.mp4 ...): folders, globs, files or @FILE lists",
    )
    g.add_argument(
        "--predictions", metavar="PRED.pkl", help="evaluate these {video_id: [s, ...]} instead"
    )
    g.add_argument("--out", "-o", metavar="JSON", help="write the results as JSON")
    g.add_argument("--save-predictions", metavar="PREFIX", help="write PREFIX.{causal,offline}.pkl")
    g.add_argument("--device", help="device of the video encoder (overrides --encoder-device)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument(
        "--shard-size", type=int, default=25, metavar="N", help="videos per task (default: 25)"
    )
    g.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="keep each finished shard here; a re-run with the same DIR and settings "
        "resumes (detects only the shards not finished)",
    )
    add_cluster_options(g, "shard of videos")
    enc = g.add_argument_group("encoder settings", "Settings of the video encoder.")
    for spec in settings_of(EncoderConfig):
        add_setting(enc, spec, extra=ALIASES.get(spec.name, ()))
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
                add_setting(det, spec, default=defaults[spec.name])
    g.set_defaults(func=_cmd_eval_gebd, detector_defaults=defaults)


def _cmd_eval_gebd(args: argparse.Namespace) -> int:
    from surprise_memory.evaluation import (
        evaluate_gebd,
        format_comparison_table,
        load_ground_truth,
        load_predictions,
        measured_row,
        save_predictions,
    )

    gt = load_ground_truth(args.annotations)
    det_values = {**args.detector_defaults, **given(args, (ScorerConfig, GateConfig))}
    det_values = {k: v for k, v in det_values.items() if k in args.detector_defaults}
    runs: dict[str, Mapping[str, Sequence[float]]] = {}
    weights = "predictions file"
    settings: dict[str, Any] = {}
    missing: list[str] = []
    failed: dict[str, str] = {}
    if args.predictions:
        runs["predictions"] = load_predictions(args.predictions)
    else:
        runs, weights, settings, missing, failed = _detect(args, gt, det_values)
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
            "failed_videos": failed,
            "results": results,
            "table": [dataclasses.asdict(r) for r in rows],
        }
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"results {args.out}")
    for vid, error in failed.items():
        print(f"FAILED {vid}: {error}")
    return EXIT_INCOMPLETE if failed else 0


def _detect(
    args: argparse.Namespace, gt: Mapping[str, Any], det_values: dict[str, Any]
) -> tuple[
    dict[str, Mapping[str, Sequence[float]]], str, dict[str, Any], list[str], dict[str, str]
]:
    """Run the detector over the videos, in shards, here or on Ray.

    Returns:
        The causal and offline predictions, the encoder's name, the detector settings,
        the videos without a file, and the videos that failed with their errors.

    """
    from surprise_memory.evaluation import MIN_CONSISTENCY, GebdDetector
    from surprise_memory.evaluation.sharding import (
        ShardCheckpoints,
        detect_in_shards,
        plan_shards,
        video_files,
    )
    from surprise_memory.offline.inputs import expand_inputs

    if not args.videos:
        raise InputError("eval-gebd needs --videos DIR (or --predictions PRED.pkl)")
    address, swallowed = split_ray_value(args.ray)
    if swallowed:
        raise InputError(f"--ray {swallowed!r}: not a Ray address (auto, HOST:PORT, ray://...)")
    args.ray = address
    files = video_files(expand_inputs(args.videos, videos_only=True))
    enc_values = given(args, (EncoderConfig,))
    if args.device:
        enc_values["encoder_device"] = args.device
    enc_cfg = EncoderConfig.from_mapping(enc_values)
    detector = GebdDetector(**det_values)  # checks the settings before any model loads
    settings = {**detector.settings, "clip_frames": enc_cfg.clip_frames}
    todo = [vid for vid, v in gt.items() if v.consistency >= MIN_CONSISTENCY]
    missing = [vid for vid in todo if vid not in files]
    shards = plan_shards([(vid, files[vid]) for vid in todo if vid in files], args.shard_size)
    fingerprint = {
        "encoder": {k: v for k, v in enc_cfg.as_dict().items() if k != "encoder_device"},
        "detector": det_values,
    }
    checkpoints = ShardCheckpoints(Path(args.checkpoint) if args.checkpoint else None, fingerprint)
    listener, close = progress_view(
        len(todo) - len(missing), "video", "shards", not args.no_progress
    )
    try:
        preds = detect_in_shards(
            shards,
            enc_cfg,
            det_values,
            checkpoints=checkpoints,
            cluster=cluster_options(args),
            listener=listener,
            on_start=note,
        )
    finally:
        close()
    if preds.from_checkpoint:
        note(f"{preds.from_checkpoint} of {len(shards)} shards taken from {args.checkpoint}")
    if missing:
        note(
            f"{len(missing)} of {len(todo)} videos not found in {' '.join(args.videos)} (their "
            f"boundaries count as missed): {', '.join(missing[:5])}"
            f"{' ...' if len(missing) > 5 else ''}"
        )
    if preds.failed:
        note(f"{len(preds.failed)} videos failed (their boundaries count as missed)")
    runs: dict[str, Mapping[str, Sequence[float]]] = {
        "causal": preds.causal,
        "offline": preds.offline,
    }
    weights = preds.model or enc_cfg.encoder_weights
    return runs, weights, settings, missing, preds.failed
