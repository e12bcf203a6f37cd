"""``surprise-memory goto``: send the robot to where an episode happened (a Nav2 goal).

Two ways, one output:

* by default through the running memory node's ``go_to_episode`` service, which embeds a
  text query with its own model, looks tf up and sends the goal with its settings;
* with ``--store``, from this process: it opens the store itself, chooses the episode
  and sends the goal with the navigation settings given here (tf2_ros where the frames
  differ). For a store on disk with no memory node running (a bag processed offline).

``--dry-run`` chooses the episode and prints the goal without sending it. rclpy is
imported only when the command talks to ROS, so the core stays ROS-free.
"""

from __future__ import annotations

import argparse
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from surprise_memory.agents.navigation_tool import NavigationResult, goal_json
from surprise_memory.cli.options import add_config_options, add_time_place_options, given
from surprise_memory.cli.store import _store_origin
from surprise_memory.config import NavigationConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.navigation import (
    GoalQuery,
    GoalRefusedError,
    choose_episode,
    goal_from_episode,
)
from surprise_memory.memory.pose import yaw_of
from surprise_memory.memory.query_embedder import store_query_embedder
from surprise_memory.memory.retrieval import parse_point
from surprise_memory.stamps import NS_PER_SECOND, parse_time

__all__ = ["add_goto_command"]

SERVICE = "/surprise_memory/go_to_episode"
_SELECTORS = "--id, --start/--end or --near"


def add_goto_command(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``goto`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    g = sub.add_parser(
        "goto",
        help="send the robot to where an episode happened (a Nav2 goal)",
        formatter_class=fmt,
        description="Choose an episode (by id, or the best hit of a text, time window or "
        "place) and send a navigation goal at the robot's pose then: through the memory "
        "node's go_to_episode service, or with --store from this process. Times as in "
        "`query`. A text query needs the store's embedder to have trained weights (with "
        "random weights, e.g. the demo's store, pick the episode by --id, --start/--end or "
        "--near). No goal is sent for an episode without a pose, for another robot's "
        "unless --allow-other-robots, for a time in the future, or for a frame that has "
        "no transform to the navigation frame.",
    )
    g.add_argument("text", nargs="?", help="what happened, in words")
    g.add_argument("--id", dest="episode_id", metavar="ID", help="the episode's id")
    add_time_place_options(g)
    g.add_argument("--robot-id", help="whose episodes (default: this robot's own)")
    g.add_argument(
        "--allow-other-robots", action="store_true", help="allow another robot's episode"
    )
    g.add_argument("--dry-run", action="store_true", help="print the goal, send nothing")
    g.add_argument("--json", action="store_true", help="print JSON")
    g.add_argument(
        "--store",
        metavar="STORE",
        help="open this store (folder or postgresql:// URI) and send the goal from here, "
        "instead of asking the memory node",
    )
    g.add_argument("--device", default="auto", help="with --store: the text embedder's device")
    g.add_argument("--service", default=SERVICE, help="the memory node's go_to_episode")
    g.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the node")
    add_config_options(g, [NavigationConfig])
    g.set_defaults(func=_cmd_goto)


def _cmd_goto(args: argparse.Namespace) -> int:
    settings = given(args, [NavigationConfig])
    if args.store is not None:
        result = _goto_from_store(args, NavigationConfig.from_mapping(settings))
    else:
        node_side = sorted(set(settings) - {"goal_standoff_meters"})
        if node_side:
            raise InputError(
                f"{', '.join('--' + n.replace('_', '-') for n in node_side)}: the memory "
                "node's parameters decide these; give them with --store"
            )
        result = _goto_through_service(args, settings.get("goal_standoff_meters"))
    _print(result, args.json)
    return 0


@contextmanager
def _ros_node() -> Iterator[Any]:
    """A node of this process, spun in a thread, so that waits with deadlines work."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"surprise_memory_goto_{time.monotonic_ns()}", context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        thread.join(timeout=5.0)


def _goto_from_store(args: argparse.Namespace, config: NavigationConfig) -> NavigationResult:
    from surprise_memory.memory.store import is_postgres_url, open_store
    from surprise_memory.memory.store.records import host_robot_id

    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    with open_store(args.store, read_only=True) as store:
        origin = _store_origin(store)
        embedding, model = None, None
        if args.text:
            try:
                embedder = store_query_embedder(store, args.device, text=True)
            except InputError as exc:
                raise InputError(f"{exc} Or pick the episode by {_SELECTORS}.") from None
            embedding, model = embedder.embed_text([args.text])[0], embedder.model_name
        query = _query(args, origin, embedding, model)
        own, now = host_robot_id(), time.time_ns()
        episode = choose_episode(store, query, own, now)
    frame = episode.pose.frame_id
    needs_tf = episode.pose_valid and bool(frame) and frame != config.navigation_frame
    with _ros_node() if needs_tf or not args.dry_run else nullcontext() as node:
        transform, note = None, ""
        if needs_tf:
            from surprise_memory.nodes.goal_sender import TransformLookup

            with TransformLookup(node) as tf:
                transform, note = tf.lookup(
                    config.navigation_frame, frame, episode.stamp_ns, config.goal_timeout_seconds
                )
        goal = goal_from_episode(
            episode,
            config.navigation_frame,
            transform=transform,
            standoff_m=config.goal_standoff_meters,
            own_robot=own,
            allow_other_robots=args.allow_other_robots,
            now_ns=now,
            note=note,
        )
        via = "" if args.dry_run else _send(node, goal.pose, config)
    return _result(goal, via)


def _send(node: Any, pose: Any, config: NavigationConfig) -> str:
    """Send the goal from this process (as the memory node would); returns how it went."""
    from surprise_memory.nodes.goal_sender import GoalSender, goal_msg

    sender = GoalSender(node, config)
    try:
        return sender.send(goal_msg(node, pose), config.goal_timeout_seconds)
    finally:
        sender.destroy()


def _query(
    args: argparse.Namespace, origin: int | None, embedding: Any, model: str | None
) -> GoalQuery:
    start = parse_time(args.start, origin) if args.start else None
    end = parse_time(args.end, origin) if args.end else None
    return GoalQuery(
        episode_id=args.episode_id,
        embedding=embedding,
        embedder_model=model,
        start_ns=start if start is None else max(start, 1),
        end_ns=end if end is None else max(end, 1),
        near=parse_point(args.near) if args.near else None,
        near_frame=args.near_frame,
        radius_m=args.radius,
        robot_id=args.robot_id,
        allow_other_robots=args.allow_other_robots,
    )


def _result(goal: Any, via: str) -> NavigationResult:
    ep = goal.episode
    done = f"sent via {via}" if via else "dry run: not sent"
    return NavigationResult(
        episode_id=ep.id,
        robot_id=ep.robot_id,
        episode_stamp_ns=ep.stamp_ns,
        episode_pose=ep.pose,
        goal=goal.pose,
        sent_via=via,
        message=done + (f"; {goal.note}" if goal.note else ""),
    )


def _goto_through_service(args: argparse.Namespace, standoff: float | None) -> NavigationResult:
    from surprise_memory.agents.ros_client import EpisodicMemoryClient
    from surprise_memory.agents.ros_navigation import GoToEpisodeClient

    with _ros_node() as node:
        origin = None
        if args.start or args.end:  # relative times count from the store's origin
            retrieve = args.service.rsplit("/", 1)[0] + "/retrieve_episodes"
            memory = EpisodicMemoryClient(node, retrieve, timeout=args.timeout)
            try:
                memory.retrieve(k=1)
                origin = memory.origin_ns
            finally:
                memory.destroy()
        query = _query(args, origin, None, None)
        client = GoToEpisodeClient(node, args.service, timeout=args.timeout)
        try:
            return client.go_to(
                episode_id=query.episode_id,
                text=args.text,
                start=query.start_ns,
                end=query.end_ns,
                near=query.near,
                near_frame=query.near_frame,
                radius=query.radius_m,
                robot_id=query.robot_id,
                allow_other_robots=query.allow_other_robots,
                standoff_m=standoff,
                dry_run=args.dry_run,
            )
        except GoalRefusedError as exc:
            if args.text and "random weights" in str(exc):
                raise GoalRefusedError(f"{exc} ({_SELECTORS} here)") from None
            raise
        finally:
            client.destroy()


def _print(result: NavigationResult, as_json: bool) -> None:
    episode = {
        "id": result.episode_id,
        "robot": result.robot_id,
        "stamp_ns": result.episode_stamp_ns,
        **goal_json(result.episode_pose),
    }
    if as_json:
        out = {
            "episode": episode,
            "goal": goal_json(result.goal),
            "sent_via": result.sent_via,
            "message": result.message,
        }
        print(json.dumps(out, indent=2))
        return
    print(
        f"episode {result.episode_id} (robot {result.robot_id}, stamp "
        f"{result.episode_stamp_ns / NS_PER_SECOND:.3f} s): {_pose_text(result.episode_pose)}"
    )
    print(f"goal: {_pose_text(result.goal)}")
    print(result.message)


def _pose_text(pose: Any) -> str:
    x, y, z = pose.position
    yaw = math.degrees(yaw_of(pose))
    return f"({x:.2f}, {y:.2f}, {z:.2f}) yaw {yaw:.1f} deg in {pose.frame_id}"
