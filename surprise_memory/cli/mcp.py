"""``surprise-memory mcp``: the memory as an MCP server, for any agent that speaks MCP.

Over a store opened read-only in this process (``--store``: a folder or a
``postgresql://`` URI; text and image queries embedded here with the store's recorded
embedder), or over the memory node's services from any machine of its ROS 2 network
(``--node``: ``retrieve_episodes``, which embeds the queries, and with
``--allow-navigation`` ``go_to_episode``, ``navigation_status``, ``cancel_navigation``).
The tools and resources are :mod:`surprise_memory.agents.mcp_server`'s.

Is it still there? With ``--store`` each episode a search returns says when its place was
last seen and whether it still looked the same
(:func:`~surprise_memory.memory.place_status.with_place_status`, asked here for the hits
returned, with the radius and the similarity threshold given as options, default
:class:`~surprise_memory.config.PlacesConfig`; the cells and sectors are the store's).
With ``--node`` the search answers as the memory node's service does.

Transports: stdio (the default; the client starts this command and owns its standard input
and output: nothing else is printed there) or streamable HTTP at
``http://<http_host>:<http_port>/mcp``, whose first line on standard output is that address
(with the real port when ``--http-port 0`` asked for any free one). HTTP binds to loopback
by default; another address needs a bearer token, read from the environment variable
:data:`TOKEN_ENV` or from ``--token-file`` (never from the command line, which ``ps``
shows), and then every request must carry it (``Authorization: Bearer <token>``; else
401). A token given on loopback is required alike. rclpy is imported only with ``--node``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from surprise_memory.access import add_token_options, check_exposure, read_token, token_gate
from surprise_memory.cli.options import (
    add_config_options,
    add_place_status_options,
    given,
    note,
    place_status_config,
)
from surprise_memory.config.mcp import McpConfig
from surprise_memory.config.places import PlacesConfig
from surprise_memory.errors import ConfigError, InputError

__all__ = ["TOKEN_ENV", "add_mcp_command"]

TOKEN_ENV = "SURPRISE_MEMORY_MCP_TOKEN"
"""The environment variable that holds the HTTP transport's bearer token."""

NAMESPACE = "/surprise_memory"


def add_mcp_command(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``mcp`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    p = sub.add_parser(
        "mcp",
        help="serve the memory to MCP clients (agents): search, episodes, navigation",
        formatter_class=fmt,
        description="Serve the episodic memory over the Model Context Protocol: the tools "
        "search_episodic_memory (words, a picture, a time window, a place, a robot; surprise "
        "episodes and place keyframes, each episode saying whether its place was still "
        "there when last seen) and "
        "get_episode (its frames as images), the resources memory://summary and "
        "memory://episodes/{id}; with --node and --allow-navigation also "
        "navigate_to_episode, navigation_status and stop_navigation (each call logged "
        "on standard error; each goal approved by the person through the client unless "
        "--navigation-approval none). Times as in `query`: seconds since the store's time origin. "
        f"HTTP on another address than loopback needs a bearer token (${TOKEN_ENV} or "
        "--token-file).",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--store", metavar="STORE", help="serve this store (folder or postgresql:// URI)"
    )
    where.add_argument(
        "--node",
        action="store_true",
        help="serve the running memory node's services (over ROS 2; the node embeds queries)",
    )
    p.add_argument(
        "--namespace",
        default=NAMESPACE,
        help="with --node: the memory node's namespace (its services are there)",
    )
    p.add_argument("--robot-id", help="only this robot's episodes (default: every robot's)")
    add_token_options(p, TOKEN_ENV, "the HTTP transport")
    add_config_options(p, [McpConfig])
    add_place_status_options(p)
    p.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from surprise_memory.agents.mcp_approval import NavigationApproval
        from surprise_memory.agents.mcp_server import MemoryMcpServer
    except ImportError as exc:
        raise ConfigError(
            f"the MCP server needs the mcp SDK ({exc}); pip install -r requirements/agents.txt"
        ) from None
    config = McpConfig.from_mapping(given(args, [McpConfig]))
    token = read_token(TOKEN_ENV, args.token_file)
    if config.transport == "http":
        check_exposure(config.http_host, token, host_option="--http-host", env_var=TOKEN_ENV)
    if config.allow_navigation and not args.node:
        raise ConfigError("--allow-navigation needs --node: goals go through the memory node")
    if args.node and given(args, [PlacesConfig]):
        raise ConfigError(
            "the places settings need --store: with --node the memory node judges whether "
            "a place is still there, with its own settings"
        )
    # what agents make the robot do is logged (stderr: stdout is the stdio transport's)
    logging.getLogger("surprise_memory.agents.mcp_server").setLevel(logging.INFO)
    from surprise_memory import __version__

    with contextlib.ExitStack() as stack:
        if args.node:
            served = stack.enter_context(_node_memory(args, config))
        else:
            served = stack.enter_context(_store_memory(args, config))
        approval = NavigationApproval(
            config.navigation_approval,
            config.approval_timeout_seconds,
            origin_ns=lambda: served.search.origin_ns,
            robot_pose=served.robot_pose,
        )
        if config.allow_navigation:  # on the record from the start
            note(f"navigation approval {approval.said}")
        server = MemoryMcpServer(served, version=__version__, approval=approval)
        if config.transport == "stdio":
            _serve_stdio(server)
        else:
            _serve_http(server, config, token)
    return 0


@contextlib.contextmanager
def _store_memory(args: argparse.Namespace, config: McpConfig) -> Iterator[Any]:
    """The tools over a store opened read-only here."""
    from surprise_memory.agents.episode_tool import GetEpisodeTool, StoreEpisodeLookup
    from surprise_memory.agents.mcp_server import ServedMemory
    from surprise_memory.agents.tool import EpisodicMemoryTool
    from surprise_memory.memory.place_status import with_place_status
    from surprise_memory.memory.query_embedder import StoreQueryEmbedder
    from surprise_memory.memory.store import describe_location, is_postgres_url, open_store
    from surprise_memory.offline.report import time_origin_ns

    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    places = place_status_config(args)
    with open_store(args.store, read_only=True) as store:
        embedder = StoreQueryEmbedder(store, config.mcp_query_device)
        model = store.embedder_model  # None: an empty store (no query embedder until restart)
        search = EpisodicMemoryTool(
            store,
            embed_text=embedder.embed_text if model and store.embedder_pretrained else None,
            embed_image=embedder.embed_image if model else None,
            embedder_model=model,
            embedder_pretrained=store.embedder_pretrained,
            origin=time_origin_ns(store),
            max_results_cap=store.config.max_results_cap,
            robot_id=args.robot_id,
            image_episodes=config.image_episodes,
            frames_per_episode=config.frames_per_episode,
            # is it still there? asked here of the hits returned, from this robot's views
            place_status=functools.partial(
                with_place_status, store, config=places, robot_id=args.robot_id
            ),
        )

        def describe() -> dict[str, Any]:
            return {
                "memory": describe_location(args.store),
                "backend": "postgresql" if is_postgres_url(args.store) else "folder",
                "episodes": len(store),
                "embedder": store.embedder_model,
            }

        yield ServedMemory(
            search=search,
            episode=GetEpisodeTool(search, StoreEpisodeLookup(store)),
            describe=describe,
            refresh=store.refresh,
        )


@contextlib.contextmanager
def _node_memory(args: argparse.Namespace, config: McpConfig) -> Iterator[Any]:
    """The tools over the memory node's services (rclpy)."""
    from surprise_memory.agents.episode_tool import GetEpisodeTool
    from surprise_memory.agents.mcp_server import ServedMemory
    from surprise_memory.agents.navigation_tool import (
        NavigateToEpisodeTool,
        NavigationStatusTool,
        StopNavigationTool,
    )
    from surprise_memory.agents.ros_client import EpisodicMemoryClient, RosEpisodeRetriever
    from surprise_memory.agents.ros_navigation import GoToEpisodeClient, RobotPoseWatch
    from surprise_memory.agents.tool import EpisodicMemoryTool
    from surprise_memory.cli.goto import _ros_node

    namespace = "/" + args.namespace.strip("/") if args.namespace.strip("/") else ""
    timeout = config.service_timeout_seconds
    with _ros_node() as node:
        client = EpisodicMemoryClient(node, f"{namespace}/retrieve_episodes", timeout)
        retriever = RosEpisodeRetriever(client, place_status=True)  # judged by the node
        search = EpisodicMemoryTool(
            retriever,
            robot_id=args.robot_id,
            image_episodes=config.image_episodes,
            frames_per_episode=config.frames_per_episode,
        )
        navigation: list[Any] = []
        navigator, watch = None, None
        if config.allow_navigation:
            if config.robot_pose_topic and config.navigation_approval == "elicit":
                try:  # the pose told to the person
                    watch = RobotPoseWatch(
                        node,
                        config.robot_pose_topic,
                        on_first=lambda pose: note(
                            f"robot pose heard on {config.robot_pose_topic} (frame "
                            f"{pose.frame_id!r}): approvals are told the goal's distance"
                        ),
                    )
                except Exception as exc:  # rclpy's invalid-name errors share no base of ours
                    raise ConfigError(
                        f"--robot-pose-topic {config.robot_pose_topic!r}: {exc}"
                    ) from None
            navigator = GoToEpisodeClient(node, f"{namespace}/go_to_episode", timeout)
            navigation = [
                NavigateToEpisodeTool(navigator),
                NavigationStatusTool(navigator),
                StopNavigationTool(navigator),
            ]
            note(f"navigation allowed: goals go through {namespace}/go_to_episode, each logged")
        try:
            yield ServedMemory(
                search=search,
                episode=GetEpisodeTool(search, retriever),
                navigation=navigation,
                describe=lambda: {"memory": f"memory node {namespace or '/'}", "backend": "node"},
                robot_pose=watch.latest if watch is not None else None,
            )
        finally:
            if watch is not None:
                watch.destroy()
            if navigator is not None:
                navigator.destroy()
            client.destroy()


def _serve_stdio(server: Any) -> None:
    """Serve one client on standard input and output until it closes them."""
    import anyio
    from mcp.server.stdio import stdio_server

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.server.run(read, write, server.server.create_initialization_options())

    anyio.run(run)


def _serve_http(server: Any, config: McpConfig, token: str | None) -> None:
    """Serve streamable HTTP at ``/mcp`` until Ctrl-C or SIGTERM."""
    import uvicorn

    from surprise_memory.cli.serve import _listen
    from surprise_memory.cli.stopping import raise_for_signal

    app: Any = server.server.streamable_http_app(host=config.http_host)
    if token is not None:
        app = token_gate(app, token)
    sock = _listen(config.http_host, config.http_port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    serving = f"serving MCP (streamable HTTP) at http://{shown}:{port}/mcp (Ctrl-C stops)"
    stopped_by: list[int] = []

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:  # said once the signal handlers are in place (as serve does)
                print(serving, flush=True)

        def handle_exit(self, sig: int, frame: Any) -> None:
            stopped_by.append(sig)
            super().handle_exit(sig, frame)

    Server(
        uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
    ).run(sockets=[sock])
    raise_for_signal(stopped_by[0] if stopped_by else None)
