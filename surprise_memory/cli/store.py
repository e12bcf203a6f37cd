"""``surprise-memory query`` and ``migrate``: the commands that read or copy a store.

Both take a store as a folder (the SQLite store) or a ``postgresql://`` URI (the
PostgreSQL store, password from ``PGPASSWORD`` / ``PGPASSFILE``) and open it with
:func:`~surprise_memory.memory.store.open_store`, so they work the same on either backend.
The main parser (:mod:`surprise_memory.cli`) handles their errors like every other
subcommand's.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from surprise_memory.cli.options import (
    add_place_status_options,
    add_setting,
    add_time_place_options,
    given,
    note,
    place_status_config,
)
from surprise_memory.config import StoreConfig, settings_of
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.retrieval import parse_point
from surprise_memory.stamps import NS_PER_SECOND, duration_text, parse_time

__all__ = ["KIND_CHOICES", "add_store_commands"]

KIND_CHOICES = {"episode": frozenset({"episode"}), "place": frozenset({"place"}), "both": None}
"""``query --kind``: the record kinds each choice asks for (None: both)."""


def add_store_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``query`` and ``migrate`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    q = sub.add_parser(
        "query",
        help="retrieve episodes by text, image, time window and place",
        formatter_class=fmt,
        description="Retrieve episodes from a store. Times (--start/--end): a plain number "
        "(12.5 or 12.5s) is seconds from the store's time origin (the first frame its writer "
        "saw, the same origin as the report and the agent tool); "
        "'<int>ns' is an absolute stamp in nanoseconds since the epoch; an ISO 8601 time "
        "with a zone (2023-11-14T22:13:32Z) is absolute too. Text and image queries embed "
        "the query with the store's recorded embedder; text is refused when that embedder "
        "had random (untrained) weights. The store holds surprise episodes (kind "
        "'episode') and, from a live memory node, place keyframes (kind 'place': the latest "
        "views of every place passed); both are searched unless --kind says one, and each "
        "hit says its kind. A surprise episode with a pose also says when its place was "
        "last seen and whether it still looks the same (the place keyframes taken after it).",
    )
    q.add_argument("store", metavar="STORE", help="store folder or postgresql:// URI")
    q.add_argument("--robot-id", help="only this robot's episodes (default: every robot's)")
    q.add_argument(
        "--camera",
        help="only the episodes this camera saw (a name of the cameras setting; '' = the one "
        "unnamed camera of a one-camera robot; default: every camera's)",
    )
    q.add_argument(
        "--kind",
        choices=sorted(KIND_CHOICES),
        default="both",
        help="which records: the surprise episodes, the place keyframes, or both",
    )
    q.add_argument("--text", help="text query (needs the store's trained embedder)")
    q.add_argument("--image", metavar="PATH", help="image file as the query")
    add_time_place_options(q)
    q.add_argument(
        "-k", "--max-results", type=int, default=5, help="hits returned (of the kinds asked)"
    )
    q.add_argument("--json", action="store_true", help="print JSON instead of a table")
    q.add_argument("--device", default="auto", help="device of the query embedder")
    add_place_status_options(q)
    q.set_defaults(func=_cmd_query)

    m = sub.add_parser(
        "migrate",
        help="copy stores between folders and PostgreSQL, resumably, then verify them",
        formatter_class=fmt,
        description="Copy every episode of each SRC into DST (each a folder or a "
        "postgresql:// URI; the password from PGPASSWORD or PGPASSFILE): records, JPEG bytes "
        "and embeddings as stored, no budget applied. Several SRC load a fleet store from "
        "many robots' folders, one after another; a SRC that fails is reported and the "
        "others still go (exit 1 at the end). Run it again after an interruption to "
        "finish. Each SRC ends by checking that every episode of it is in DST with the same "
        "checksum (DST may hold other robots' episodes: a fleet store).",
    )
    m.add_argument("sources", nargs="+", metavar="SRC", help="store(s) to copy (opened read-only)")
    m.add_argument(
        "destination", metavar="DST", help="new store, a previous run's, or a fleet store"
    )
    # a new folder DST's vectors: int8 compacts a store (a fleet store keeps halfvec)
    (dtype,) = (s for s in settings_of(StoreConfig) if s.name == "embedding_dtype")
    add_setting(m, dtype)
    m.set_defaults(func=_cmd_migrate)


def _store_origin(store: Any) -> int | None:
    """The store's one time origin (the first frame seen), as the report and the agent tool use."""
    from surprise_memory.offline.report import time_origin_ns

    return time_origin_ns(store)


def _cmd_query(args: argparse.Namespace) -> int:
    from surprise_memory.memory.place_status import with_place_status
    from surprise_memory.memory.retrieval import RetrievalQuery
    from surprise_memory.memory.store import (
        describe_location,
        is_postgres_url,
        open_store,
        partial_of,
    )

    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    if args.radius is not None and args.near is None:
        raise InputError("--radius needs --near")
    if args.text is not None and args.image is not None:
        raise InputError("give --text or --image, not both")
    places = place_status_config(args)
    with open_store(args.store, read_only=True) as store:
        origin = _store_origin(store)
        start = parse_time(args.start, origin) if args.start else None
        end = parse_time(args.end, origin) if args.end else None
        near = parse_point(args.near) if args.near else None
        embedding = None
        emb_name = None
        if args.text is not None or args.image is not None:
            from surprise_memory.memory.query_embedder import store_query_embedder

            emb = store_query_embedder(store, args.device, text=args.text is not None)
            if not emb.pretrained:
                note(f"image query with the untrained embedder {emb.model_name!r} (random weights)")
            if args.text is not None:
                embedding = emb.embed_text([args.text])[0]
            else:
                embedding = emb.embed_images([_read_image(args.image)])[0]
            emb_name = emb.model_name
        query = RetrievalQuery(
            embedding=embedding,
            embedder_model=emb_name,
            start_ns=start if start is None else max(start, 1),
            end_ns=end if end is None else max(end, 1),
            near=near,
            near_frame=args.near_frame,
            radius_m=args.radius,
            max_results=args.max_results,
            robot_id=args.robot_id,
            camera=args.camera,
            kinds=KIND_CHOICES[args.kind],
        )
        hits = store.retrieve(query)
        # each surprise episode's place: the views of it taken later (a few indexed reads
        # per hit), of any robot's; none from a store that keeps no views at all
        hits = with_place_status(store, hits, places)
        snapshots = store.snapshot_notes([h.episode.id for h in hits])
    rows = [_hit_dict(h, origin, snapshots.get(h.episode.id, [])) for h in hits]
    partial = partial_of(hits)
    if args.json:
        where = describe_location(args.store)
        answer = {"store": where, "origin_ns": origin, "hits": rows}
        print(json.dumps({**answer, "partial": partial} if partial else answer, indent=2))
        return 0
    if partial:
        note(f"partial answer: {partial}")
    if not rows:
        print(
            {"episode": "no episode matches", "place": "no place keyframe matches"}.get(
                args.kind, "no episode or place keyframe matches"
            )
        )
        return 0
    _print_table(rows, hits)
    return 0


def _print_table(rows: list[dict[str, Any]], hits: Any) -> None:
    """The hits as a table: a line each, and an episode's place status on a line under it."""
    print(
        f"{'#':>2} {'kind':<7} {'time s':>8} {'score':>7} {'dist m':>7} {'surprise':>8}  pose / id"
    )
    for i, r in enumerate(rows, 1):
        score = "-" if r["score"] is None else f"{r['score']:.3f}"
        dist = "-" if r["distance_m"] is None else f"{r['distance_m']:.2f}"
        t = "-" if r["time_s"] is None else f"{r['time_s']:.2f}"
        pose = (
            "no pose"
            if not r["pose_valid"]
            else "({:.2f}, {:.2f}, {:.2f})".format(*r["position"]) + f" {r['frame_id']}"
        )
        trust = hits[i - 1].episode.pose_trust.brief() if r["pose_valid"] else ""
        pose += f" {trust}" if trust else ""
        seen = f"  camera {r['camera']}" if r["camera"] else ""
        seen += f"  place {r['place_key']}" if r["place_key"] else ""
        print(
            f"{i:>2} {r['kind']:<7} {t:>8} {score:>7} {dist:>7} {r['surprise']:>8.3f}  {pose}  "
            f"{r['id']}{seen}"
        )
        if r["place_status"] is not None:
            print(f"{'':>11}{_status_text(r['place_status'], r['stamp_ns'])}")


def _status_text(status: dict[str, Any], episode_ns: int) -> str:
    """``place: last seen 3 h later, still there: yes (similarity 0.93)``.

    Counted from the episode, not from now: the stamps may be another clock's (sim time,
    a recording's), and the store's times are all on one clock.
    """
    if status["still_there"] is None:
        return "place: not seen since the episode, still there: unknown"
    later = duration_text((status["last_seen_ns"] - episode_ns) / NS_PER_SECOND)
    answer = "yes" if status["still_there"] else "no"
    return (
        f"place: last seen {later} later, still there: {answer} "
        f"(similarity {status['similarity']:.2f}, view {status['view_id']})"
    )


def _read_image(path: str) -> Any:
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError) as exc:
        raise InputError(f"--image {path!r}: cannot read the image ({exc})") from None


def _hit_dict(hit: Any, origin: int | None, snapshots: list[Any]) -> dict[str, Any]:
    ep = hit.episode
    return {
        "id": ep.id,
        "stamp_ns": ep.stamp_ns,
        "time_s": None if origin is None else (ep.stamp_ns - origin) / NS_PER_SECOND,
        "score": hit.score,
        "distance_m": hit.distance_m,
        "surprise": ep.surprise,
        "pose_valid": ep.pose_valid,
        "position": list(ep.pose.position),
        "orientation": [ep.pose.qx, ep.pose.qy, ep.pose.qz, ep.pose.qw],
        "frame_id": ep.pose.frame_id,
        "frame_stamps_ns": list(ep.frame_stamps_ns),
        "frames": ep.frame_uris(),
        "robot_id": ep.robot_id,
        "camera": ep.camera.name,
        "camera_frame_id": ep.camera.frame_id,
        "view_yaw_deg": None if ep.camera.yaw is None else math.degrees(ep.camera.yaw),
        # the pose's horizontal 1-sigma in metres and its map (null and "": unknown)
        "pose_sigma_m": ep.pose_trust.sigma_m,
        "map_id": ep.pose_trust.map_id,
        # what a bag recorder answered when asked for a snapshot (empty: none was asked)
        "snapshots": [n.as_dict() for n in snapshots],
        # "episode" (a surprise episode) or "place" (a place keyframe, with its place's key)
        "kind": ep.kind,
        "place_key": ep.place_key,
        # a surprise episode's place, seen since? (null: a place keyframe, no pose, or a
        # store that keeps no place keyframes)
        "place_status": _status_dict(hit.place_status, origin),
    }


def _status_dict(status: Any, origin: int | None) -> dict[str, Any] | None:
    """A hit's :class:`~surprise_memory.memory.places.PlaceStatus` as JSON (None: none)."""
    if status is None:
        return None
    return {
        "place_key": status.place_key,
        "last_seen_ns": status.last_seen_ns,
        "last_seen_s": None if origin is None else (status.last_seen_ns - origin) / NS_PER_SECOND,
        "similarity": status.similarity,
        "still_there": status.still_there,
        "view_id": status.view_id,
    }


def _cmd_migrate(args: argparse.Namespace) -> int:
    from surprise_memory.memory.store.factory import describe_location
    from surprise_memory.memory.store.migrate import migrate_stores

    config = StoreConfig.from_mapping(given(args, [StoreConfig]))
    names = [describe_location(s) for s in args.sources]
    shown = [0] * len(names)

    def progress(n: int, done: int, total: int) -> None:
        if done == total or done - shown[n] >= 500:
            shown[n] = done
            of = f" ({n + 1}/{len(names)} {names[n]})" if len(names) > 1 else ""
            note(f"migrate{of}: {done}/{total} episodes")

    results = migrate_stores(args.sources, args.destination, config=config, progress=progress)
    failed = []
    for n, r in enumerate(results):
        if isinstance(r, StoreError):
            if len(names) == 1:
                raise r
            note(f"migrate ({n + 1}/{len(names)} {names[n]}): failed, the others went on: {r}")
            failed.append(names[n])
            continue
        print(
            f"{r.source} -> {r.destination}: {r.episodes} episodes ({r.copied} copied, "
            f"{r.skipped} already there), per robot {r.robots}; verified, sha256 {r.checksum}"
        )
    if failed:
        note(
            f"migrate: {len(failed)} of {len(names)} stores failed: {failed}; run the "
            "same command again once fixed (what was copied is not copied twice)"
        )
        return 1
    return 0
