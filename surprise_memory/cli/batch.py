"""``surprise-memory process`` over many recordings: folders, globs, ``@FILE``, on Ray or here.

The work is :mod:`surprise_memory.offline.batch`'s; this module reads the options, prints
what will run, shows the job's progress and ends with the failures and an exit status
that says whether every recording completed (0) or not (:data:`~.options.EXIT_INCOMPLETE`).
"""

from __future__ import annotations

import argparse
from typing import Any

from surprise_memory.cli.cluster import add_cluster_options, cluster_options, progress_view
from surprise_memory.cli.options import EXIT_INCOMPLETE, note

__all__ = ["add_batch_options", "run_many"]


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """Add the options of the many-recordings form of ``process``."""
    g = parser.add_argument_group(
        "many recordings",
        "Several INPUTs, a folder of recordings, a glob or @FILE (a list, one input a line) "
        "process each recording found: with --out FOLDER into FOLDER/<name>/ (a store each) "
        "and FOLDER/summary.json; with --out postgresql://... into that one store, each "
        "recording's episodes under its robot id. Re-running the same command skips the "
        "recordings that completed and redoes the others. Exit status 3: some recordings "
        "failed (listed in the summary).",
    )
    g.add_argument(
        "--records",
        metavar="DIR",
        help="with a postgresql:// --out: the folder of each recording's scores.csv and "
        "run.json and of the job's summary.json (default: surprise_memory_runs/<host>_<db> "
        "here; a re-run finds them there)",
    )
    g.add_argument(
        "--robot-ids",
        metavar="FILE",
        help="robot id of each recording: lines 'PATTERN ROBOT_ID' (a path, folder or glob); "
        "else --robot-id, else the bag's custom_data robot_id, else its folder's name",
    )
    add_cluster_options(parser, "recording")


def run_many(args: argparse.Namespace, settings: Any) -> int:
    """Run ``process`` over many recordings; returns the exit status.

    Args:
        args: The parsed options (``args.input`` a list).
        settings: The :class:`~surprise_memory.offline.pipeline.PipelineSettings`.

    Raises:
        InputError: An input names nothing, or two recordings collide.
        StoreError: The output holds something else (see ``BatchRecord``).
        ConfigError: Bad job options (``--records`` missing, workers).

    """
    from surprise_memory.memory.store import describe_location
    from surprise_memory.offline.batch import BatchJob, plan_recordings, run_batch
    from surprise_memory.offline.inputs import RobotIdMap, expand_inputs

    cluster = cluster_options(args)
    job = BatchJob.make(
        settings,
        args.out,
        args.records,
        image_topic=args.image_topic,
        pose_topic=args.pose_topic,
        fps=args.fps,
    )
    found = expand_inputs(args.input)
    mapping = RobotIdMap.load(args.robot_ids) if args.robot_ids else None
    recordings = plan_recordings(
        found,
        mapping=mapping,
        robot_id=settings.store.robot_id or None,
        image_topic=args.image_topic,
        fps=args.fps,
    )
    if job.postgres:
        note(f"records (scores.csv, run.json, summary.json): {job.root}")
    robots = sorted({r.robot_id or "(host name)" for r in recordings})
    note(
        f"{len(recordings)} recordings of {len(robots)} robots ({', '.join(robots[:8])}"
        f"{' ...' if len(robots) > 8 else ''}) -> {describe_location(args.out)}"
    )
    total = None
    if all(r.units is not None for r in recordings):
        total = sum(r.units or 0 for r in recordings)
    listener, close = progress_view(total, "frame", "recordings", not args.no_progress)
    try:
        record = run_batch(job, recordings, cluster=cluster, listener=listener, on_start=note)
    finally:
        close()
    totals = record.totals()
    print(
        f"recordings  {totals['complete']}/{totals['recordings']} complete "
        f"({totals['skipped']} from an earlier run), {totals['failed']} failed"
    )
    print(f"episodes    {totals['episodes']} from {totals['frames']} frames")
    for path, error in record.failed:
        print(f"FAILED      {path}: {error or 'not run'}")
    print(f"summary {record.path}")
    return 0 if record.complete else EXIT_INCOMPLETE
