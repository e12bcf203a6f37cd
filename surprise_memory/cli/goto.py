"""``surprise-memory goto``: send the robot to where an episode happened (a Nav2 goal).

Two ways, one output:

* by default through the running memory node's ``go_to_episode`` service, which embeds a
  text query with its own model, looks tf up and sends the goal with its settings;
* with ``--store``, from this process: it opens the store itself, chooses the episode
  and sends the goal with the navigation settings given here (tf2_ros where the frames
  differ). For a store on disk with no memory node running (a bag processed offline).

A surprise episode's place is looked up too: one line says how old the latest view of it
is and whether it still looks the same
(:func:`~surprise_memory.memory.place_status.place_status_line`), where the store keeps
place keyframes: with ``--store`` from the store opened here, through the service from the
status the node puts in its answer's episode (``place_status_*``, interface version 7).

``--dry-run`` chooses the episode and prints the goal without sending it. Every goal sent
has an id (printed); ``--wait`` follows it to its outcome with a progress line (Nav2's
distance remaining), ``--status [ID]`` and ``--cancel [ID]`` ask the memory node about its
goal by id, or the current one. The exit status is 0 when the goal was accepted (with
``--wait``: succeeded), 1 otherwise (refused, rejected, pending, aborted, ...); for
``--cancel``, 0 only when the navigator confirmed the cancel (with ``--wait``: the goal
ended cancelled). rclpy is imported only when the command talks to ROS, so the core stays
ROS-free.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from surprise_memory.agents.navigation_tool import NavigationResult, goal_json, status_json
from surprise_memory.cli.options import (
    add_config_options,
    add_place_status_options,
    add_time_place_options,
    given,
    place_status_config,
)
from surprise_memory.cli.store import _store_origin
from surprise_memory.config import NavigationConfig, PlacesConfig
from surprise_memory.errors import InputError
from surprise_memory.memory.navigation import GoalQuery, GoalRefusedError, choose_episode, plan_goal
from surprise_memory.memory.navigation_goals import CANCELLED_STATES, GoalStatus, cancel_line
from surprise_memory.memory.place_status import episode_place_status, place_status_line
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.pose import yaw_of
from surprise_memory.memory.pose_trust import TrustRule
from surprise_memory.memory.query_embedder import store_query_embedder
from surprise_memory.memory.retrieval import parse_point
from surprise_memory.stamps import NS_PER_SECOND, parse_time

__all__ = ["add_goto_command"]

SERVICE = "/surprise_memory/go_to_episode"
_SELECTORS = "--id, --start/--end or --near"
_POLL_S = 0.5  # how often --wait asks for the goal's status


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
        "unless --allow-other-robots, for a time in the future, for a frame that has "
        "no transform to the navigation frame, or for a pose in odom (a frame of its "
        "session) stored in another session, or, unless --trust-pose, for a pose recorded "
        "on another map or more uncertain than max_goal_uncertainty_m. Prints the goal's "
        "id; --wait follows it to its outcome, --status/--cancel ask about (or cancel) a "
        "goal by id. With --store, a line says when the episode's place was last seen and "
        "whether it still looks the same (where the store keeps place keyframes). "
        "Exit 0: accepted (with --wait: succeeded); 1: anything else.",
    )
    g.add_argument("text", nargs="?", help="what happened, in words")
    g.add_argument("--id", dest="episode_id", metavar="ID", help="the episode's id")
    add_time_place_options(g)
    g.add_argument("--robot-id", help="whose episodes (default: this robot's own)")
    g.add_argument("--camera", help="only the episodes this camera saw (e.g. front)")
    g.add_argument(
        "--allow-other-robots", action="store_true", help="allow another robot's episode"
    )
    g.add_argument("--dry-run", action="store_true", help="print the goal, send nothing")
    g.add_argument(
        "--trust-pose",
        action="store_true",
        help="go even to an episode recorded on another map than --map-id, or whose pose "
        "was more uncertain than --max-goal-uncertainty-m (both refused otherwise)",
    )
    g.add_argument(
        "--wait",
        action="store_true",
        help="follow the goal until it ends, with a progress line (distance remaining); "
        "exit 0 only if it succeeded",
    )
    g.add_argument(
        "--status",
        nargs="?",
        const="",
        metavar="GOAL_ID",
        help="print where the memory node's goal stands (default: the latest); with "
        "--wait, until it ends",
    )
    g.add_argument(
        "--cancel",
        nargs="?",
        const="",
        metavar="GOAL_ID",
        help="cancel the memory node's goal by id (default: the current one); exit 0 only "
        "when the navigator confirms it; with --wait, follow the goal to its end (exit 0 if "
        "it ended cancelled)",
    )
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
    add_place_status_options(g)
    g.set_defaults(func=_cmd_goto)


def _cmd_goto(args: argparse.Namespace) -> int:
    settings = given(args, [NavigationConfig])
    if args.status is not None or args.cancel is not None:
        return _status_or_cancel(args)
    if args.wait and args.dry_run:
        raise InputError("--wait follows a goal sent: not with --dry-run")
    if args.store is not None:
        return _goto_from_store(args, NavigationConfig.from_mapping(settings))
    places = sorted(given(args, [PlacesConfig]))
    if places:
        raise InputError(
            f"{', '.join('--' + n.replace('_', '-') for n in places)}: the place's status is "
            "looked up with --store only (through the memory node, with the node's settings)"
        )
    node_side = sorted(set(settings) - {"goal_standoff_meters"})
    if node_side:
        raise InputError(
            f"{', '.join('--' + n.replace('_', '-') for n in node_side)}: the memory "
            "node's parameters decide these; give them with --store"
        )
    return _goto_through_service(args, settings.get("goal_standoff_meters"))


def _exit_status(result: NavigationResult, final: GoalStatus | None) -> int:
    """0: a dry run, a goal accepted (or sent on the topic), or with --wait one that succeeded."""
    if final is not None:
        return 0 if final.state in {"succeeded", "sent"} else 1
    return 0 if not result.sent_via or result.state in ("running", "sent") else 1


def _follow(status_of: Any, first: GoalStatus, as_json: bool, shown: str = "") -> GoalStatus:
    """Ask for the goal's status until it ends; a progress line whenever it changes.

    Args:
        status_of: goal id -> :class:`GoalStatus` (the node's service, or this process's).
        first: The goal as sent.
        as_json: No progress lines (the final status goes into the JSON).
        shown: The progress line printed already (not printed again).

    """
    status = first
    while True:
        line = status.progress_line()
        if line != shown and not as_json:
            print(line, flush=True)
            shown = line
        if status.done:
            return status
        if status.state == "sent":  # a topic reports no outcome: nothing to wait for
            if not as_json:
                print(f"goal {status.goal_id}: sent on a topic, which reports no outcome")
            return status
        time.sleep(_POLL_S)
        status = status_of(status.goal_id)


def _status_or_cancel(args: argparse.Namespace) -> int:
    """``--status [ID]`` / ``--cancel [ID]``: through the memory node's services."""
    from surprise_memory.agents.ros_navigation import GoToEpisodeClient

    if args.store is not None:
        raise InputError("--status and --cancel ask the memory node: not with --store")
    if args.status is not None and args.cancel is not None:
        raise InputError("--status or --cancel, not both")
    with _ros_node() as node:
        client = GoToEpisodeClient(node, args.service, timeout=args.timeout)
        try:
            if args.cancel is not None:
                return _cancel(client, args)
            status = client.navigation_status(args.status)
            if args.wait:
                status = _follow(client.navigation_status, status, args.json)
            if args.json:
                print(json.dumps(status_json(status), indent=2))
            elif not args.wait:
                print(status.progress_line())
            return 0 if status.state != "unknown" else 1
        finally:
            client.destroy()


def _cancel(client: Any, args: argparse.Namespace) -> int:
    """``--cancel [ID]``: 0 only where the navigator confirmed it (or the goal had ended).

    With ``--wait``, a goal that still runs is followed to its end: 0 if it ended
    cancelled, 1 otherwise (a refused cancel, then the goal's success, say).
    """
    stopped, status = client.stop_navigation(args.cancel)
    head = cancel_line(stopped, status)
    if not args.json:
        print(head, flush=True)
    code = 0 if stopped else 1
    if args.wait and not status.done:
        shown = status.progress_line()  # in the head
        status = _follow(client.navigation_status, status, args.json, shown)
        code = 0 if status.state in CANCELLED_STATES else 1
    if args.json:
        print(json.dumps({"cancelled": stopped, "cancel": head, **status_json(status)}, indent=2))
    return code


@contextmanager
def _ros_node() -> Iterator[Any]:
    """A node of this process, spun in a thread, so that waits with deadlines work."""
    import rclpy

    from surprise_memory.nodes.executor import CallbackPool

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(f"surprise_memory_goto_{time.monotonic_ns()}", context=context)
    # the nodes' executor: the goal sender's action client is destroyed while it spins
    executor = CallbackPool(2, context=context)
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


def _goto_from_store(args: argparse.Namespace, config: NavigationConfig) -> int:
    from surprise_memory.memory.store import is_postgres_url, open_store
    from surprise_memory.memory.store.records import host_robot_id, host_session_id

    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    places = place_status_config(args)  # a bad value is refused before the store opens
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
        episode, _ = choose_episode(store, query, own, now)  # a store opened here is whole
        place = _place_json(episode_place_status(store, episode, places), episode.stamp_ns, now)
    with ExitStack() as stack:
        nodes: list[Any] = []  # a ROS node of this process, opened when first needed

        def node() -> Any:
            if not nodes:
                nodes.append(stack.enter_context(_ros_node()))
            return nodes[0]

        def transform_of(frame: str, stamp_ns: int) -> tuple[Any, str]:
            from surprise_memory.nodes.tf_lookup import TransformLookup

            with TransformLookup(node()) as tf:
                return tf.lookup(
                    config.navigation_frame, frame, stamp_ns, config.goal_timeout_seconds
                )

        goal = plan_goal(
            episode,
            config.navigation_frame,
            own_robot=own,
            now_ns=now,
            session_id=host_session_id(),
            fixed_frames=config.fixed_frame_names,
            standoff_m=config.goal_standoff_meters,
            allow_other_robots=args.allow_other_robots,
            transform_of=transform_of,
            facing=config.goal_facing,
            trust=TrustRule(config.map_id, config.max_goal_uncertainty_m, args.trust_pose),
        )
        if args.dry_run:
            _print(_result(goal, None), args.json, place=place)
            return 0
        return _send(node(), goal, config, args, place)


def _place_json(
    status: PlaceStatus | None, episode_stamp_ns: int, now_ns: int
) -> dict[str, Any] | None:
    """How old the latest view of a surprise episode's place is, for the output.

    None where that is unknown (:func:`~surprise_memory.memory.place_status.episode_place_status`).
    """
    if status is None:
        return None
    return {
        "place_key": status.place_key,
        "last_seen_ns": status.last_seen_ns,
        "similarity": status.similarity,
        "still_there": status.still_there,
        "view_id": status.view_id,
        "text": place_status_line(status, episode_stamp_ns, now_ns),
    }


def _send(
    node: Any,
    goal: Any,
    config: NavigationConfig,
    args: argparse.Namespace,
    place: dict[str, Any] | None,
) -> int:
    """Send the goal from this process (as the memory node would), print, and follow it.

    A goal the navigator has not answered is followed for ``--timeout`` s more, so that
    a late acceptance is cancelled here (the process must live to ask for the cancel);
    after that no one follows it, and both lines say so. With ``--wait`` an answered goal
    is followed to its end. ``place``: the episode's place status (:func:`_place_json`).
    """
    from surprise_memory.nodes.goal_sender import GoalSender, goal_msg

    sender = GoalSender(node, config)
    try:
        msg = goal_msg(node, goal.pose)
        more = f"{args.timeout:g} s"
        if_late = (
            f"if it accepts within {more} more, this process asks it at once to cancel the "
            "goal; after that this process has ended, and the goal may run"
        )
        status = sender.send(msg, config.goal_timeout_seconds, goal.episode.id, if_late)
        result = _result(goal, status)
        if not (args.json and args.wait):  # with both: one JSON at the end
            _print(result, args.json, place=place)
        final = None
        if status.state == "pending":
            final = sender.settle(status.goal_id, args.timeout) or status
            follows = args.wait and final.state != "pending"
            if not (follows and final.done):  # (a line for it comes with the following)
                print(_last_line(final, more, ends=not follows), file=sys.stderr)
        if args.wait and (final or status).state != "pending":

            def status_of(gid: str) -> GoalStatus:
                now = sender.book.wait(gid, _POLL_S, until_done=False)
                assert now is not None
                return now

            final = _follow(status_of, final or status, args.json)
        if args.json and args.wait:
            _print(result, True, final, place)
        return _exit_status(result, final)
    finally:
        sender.destroy()


def _last_line(status: GoalStatus, more: str, ends: bool) -> str:
    """What became of a goal that was pending (``goto --store``).

    Args:
        status: The goal after :meth:`GoalSender.settle`.
        more: How long this process followed it (``--timeout``), as said.
        ends: This process ends now (rather than follows the goal with ``--wait``).

    """
    line = status.progress_line()
    if status.state == "pending":
        return (
            f"{line}: no answer within {more} more; this process ends, so if the navigator "
            "accepts it later, the goal may run"
        )
    if status.done:  # its message is in the line
        return line
    return f"{line} ({status.message})" + (
        "; this process ends and follows it no further" if ends else ""
    )


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
        camera=args.camera,
    )


def _result(goal: Any, status: GoalStatus | None) -> NavigationResult:
    ep = goal.episode
    if status is None:
        done = "dry run: not sent"
    else:
        done = f"goal {status.goal_id} via {status.sent_via}: {status.state}"
        done += f" ({status.message})" if status.message else ""
    return NavigationResult(
        episode_id=ep.id,
        robot_id=ep.robot_id,
        episode_stamp_ns=ep.stamp_ns,
        episode_pose=ep.pose,
        goal=goal.pose,
        sent_via=status.sent_via if status is not None else "",
        message=done + (f"; {goal.note}" if goal.note else ""),
        goal_id=status.goal_id if status is not None else "",
        state=status.state if status is not None else "",
    )


def _goto_through_service(args: argparse.Namespace, standoff: float | None) -> int:
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
            result = client.go_to(
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
                camera=query.camera,
                trust_pose=args.trust_pose,
            )
            # the node's clock is this machine's on a robot (a simulation's ages read odd)
            place = _place_json(result.place_status, result.episode_stamp_ns, time.time_ns())
            if not (args.json and args.wait):  # with both: one JSON at the end
                _print(result, args.json, place=place)
            final = None
            if args.wait and result.goal_id:
                first = client.navigation_status(result.goal_id)
                final = _follow(client.navigation_status, first, args.json)
                if args.json:
                    _print(result, True, final, place)
            return _exit_status(result, final)
        except GoalRefusedError as exc:
            if args.text and "random weights" in str(exc):
                raise GoalRefusedError(f"{exc} ({_SELECTORS} here)") from None
            raise
        finally:
            client.destroy()


def _print(
    result: NavigationResult,
    as_json: bool,
    final: GoalStatus | None = None,
    place: dict[str, Any] | None = None,
) -> None:
    """The chosen episode, the goal and what became of it; ``place``: its place's status."""
    episode = {
        "id": result.episode_id,
        "robot": result.robot_id,
        "stamp_ns": result.episode_stamp_ns,
        **goal_json(result.episode_pose),
    }
    if as_json:
        out: dict[str, Any] = {
            "episode": episode,
            "goal": goal_json(result.goal),
            "goal_id": result.goal_id,
            "state": result.state,
            "sent_via": result.sent_via,
            "message": result.message,
        }
        if result.preempted:
            out["preempted"] = result.preempted
        if final is not None:
            out["outcome"] = status_json(final)
        if place is not None:
            out["place_status"] = place
        print(json.dumps(out, indent=2))
        return
    print(
        f"episode {result.episode_id} (robot {result.robot_id}, stamp "
        f"{result.episode_stamp_ns / NS_PER_SECOND:.3f} s): {_pose_text(result.episode_pose)}"
    )
    print(f"goal: {_pose_text(result.goal)}")
    print(result.message)
    if place is not None:
        print(place["text"])


def _pose_text(pose: Any) -> str:
    x, y, z = pose.position
    yaw = math.degrees(yaw_of(pose))
    return f"({x:.2f}, {y:.2f}, {z:.2f}) yaw {yaw:.1f} deg in {pose.frame_id}"
