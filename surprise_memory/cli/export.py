"""``surprise-memory export``: episodes as an MCAP recording (rosbag2 layout) for Foxglove.

Episodes are chosen as ``query`` chooses them (ids, text, time window, place, robot) from a
folder or PostgreSQL store and written by
:func:`~surprise_memory.offline.export.export_episodes`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from surprise_memory.cli.options import add_time_place_options, note
from surprise_memory.errors import InputError

__all__ = ["add_export_command"]


def add_export_command(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``export`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    p = sub.add_parser(
        "export",
        help="write episodes as an MCAP recording (rosbag2 layout) for Foxglove and ros2 bag",
        formatter_class=fmt,
        description="Write episodes of STORE (a folder or a postgresql:// URI) as a rosbag2 "
        "folder holding one MCAP file: the frames as sensor_msgs/CompressedImage at their "
        "stamps, the pose as PoseStamped and tf, the episode markers, the surprise score "
        "and threshold around each trigger (plottable), and each episode's metadata as "
        "diagnostic_msgs. Foxglove opens it with config/foxglove_layout.json; `ros2 bag "
        "play` and `surprise-memory process` read it too. Episodes: by --id, else as "
        "`query` chooses them (--text, --start/--end, --near/--radius, --robot-id, --camera; "
        "nothing given: the newest -k). Times as in `query`.",
    )
    p.add_argument("store", metavar="STORE", help="store folder or postgresql:// URI")
    p.add_argument("--out", required=True, metavar="DIR", help="new rosbag2 folder to write")
    p.add_argument(
        "--id", action="append", dest="ids", metavar="ID", help="an episode id (repeatable)"
    )
    p.add_argument("--text", help="text query (needs the store's trained embedder)")
    p.add_argument("--robot-id", help="only this robot's episodes (default: every robot's)")
    p.add_argument("--camera", help="only the episodes this camera saw (default: every camera's)")
    add_time_place_options(p)
    p.add_argument("-k", "--max-results", type=int, default=20, help="most episodes written")
    p.add_argument("--device", default="auto", help="device of the text query embedder")
    p.set_defaults(func=_cmd_export)


def _cmd_export(args: argparse.Namespace) -> int:
    from surprise_memory.config import DisplayConfig
    from surprise_memory.memory.retrieval import RetrievalQuery, parse_point
    from surprise_memory.memory.store import is_postgres_url, open_store
    from surprise_memory.offline.export import export_episodes
    from surprise_memory.offline.report import time_origin_ns
    from surprise_memory.offline.run_record import SCORES_CSV, read_scores
    from surprise_memory.stamps import parse_time

    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    if args.radius is not None and args.near is None:
        raise InputError("--radius needs --near")
    if args.max_results < 1:
        raise InputError(f"-k {args.max_results}: at least one episode")
    with open_store(args.store, read_only=True) as store:
        origin = time_origin_ns(store)
        if args.ids:
            records = [store.get(i) for i in dict.fromkeys(args.ids)]
        else:
            embedding, model = None, None
            if args.text is not None:
                from surprise_memory.memory.query_embedder import store_query_embedder

                emb = store_query_embedder(store, args.device, text=True)
                embedding, model = emb.embed_text([args.text])[0], emb.model_name
            start = parse_time(args.start, origin) if args.start else None
            end = parse_time(args.end, origin) if args.end else None
            query = RetrievalQuery(
                embedding=embedding,
                embedder_model=model,
                start_ns=start if start is None else max(start, 1),
                end_ns=end if end is None else max(end, 1),
                near=parse_point(args.near) if args.near else None,
                near_frame=args.near_frame,
                radius_m=args.radius,
                max_results=args.max_results,
                robot_id=args.robot_id,
                camera=args.camera,
            )
            records = [h.episode for h in store.retrieve(query)]
        if not records:
            raise InputError("no episode matches; nothing written")
        scores_csv = None if is_postgres_url(args.store) else Path(args.store) / SCORES_CSV
        scores = None
        if scores_csv is not None and scores_csv.is_file():
            scores = read_scores(scores_csv)
        summary = export_episodes(
            store,
            records,
            args.out,
            origin_ns=origin,
            scores=scores,
            marker_size_m=DisplayConfig().marker_size_m,
        )
    if scores is None:
        note("no scores.csv beside the store: the surprise topics hold each trigger's value only")
    print(f"wrote {len(summary.episodes)} episode(s) to {summary.mcap}")
    for topic, n in summary.messages.items():
        print(f"  {topic}: {n}")
    return 0
