"""The memory as a Model Context Protocol server, on the official ``mcp`` SDK.

The tools are the agent tools themselves, served as they are, not described again:

* ``search_episodic_memory``: :class:`~surprise_memory.agents.tool.EpisodicMemoryTool`
  (text, image, time window, place, robot, kinds: surprise episodes and place keyframes;
  each episode's place status, ``last_seen`` and ``still_there``, where the tool has it);
* ``get_episode``: :class:`~surprise_memory.agents.episode_tool.GetEpisodeTool`;
* with navigation allowed, ``navigate_to_episode``, ``navigation_status`` and
  ``stop_navigation`` (:mod:`surprise_memory.agents.navigation_tool`).

Each tool's MCP ``inputSchema`` is its strict JSON schema (``parameters``), its
description the same text followed by :data:`~surprise_memory.agents.mcp_approval.DATA_NOTE`,
and a call goes to its ``execute``, which validates the arguments and never raises: its
``{"error": ...}`` comes back as a tool result with ``isError`` set (the model reads why
and can correct itself); an unknown tool or an argument object that is not an object is a
JSON-RPC error. A result's JSON is both the text content and the structured content, the
tool's answer inside the one field ``memory_data`` (episode text is data, never
instructions: :func:`~surprise_memory.agents.mcp_approval.as_memory_data`); its
``"_images"`` (the stored JPEGs) become MCP image content, each after its label (in the
same field).

Resources: ``memory://summary`` (what the memory holds and how to query it), and each
episode, ``memory://episodes/{episode_id}`` (its JSON and every frame as a JPEG blob,
``memory://episodes/{episode_id}/frames/{n}``), read through ``get_episode``; the listing
names the newest surprise episodes (up to the search's cap; the place keyframes, one per
place passed, would crowd them out, and are read by their id alike).

``navigate_to_episode`` sends a goal only after the person approved it (MCP elicitation,
:class:`~surprise_memory.agents.mcp_approval.NavigationApproval`), unless approval was
switched off explicitly. Every navigation call (goals sent, statuses, stops) is logged
with its arguments and answer. :func:`surprise_memory.access.token_gate` guards the HTTP
transport. The calls run in worker threads (at most ``worker_threads`` at once): the
store, its query embedder and the ROS clients are blocking.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from surprise_memory.agents.episode_tool import GetEpisodeTool
from surprise_memory.agents.function_tool import FunctionTool
from surprise_memory.agents.mcp_approval import (
    APPROVAL_NOTE,
    DATA_FIELD,
    DATA_NOTE,
    NavigationApproval,
    as_memory_data,
)
from surprise_memory.agents.navigation_tool import NavigateToEpisodeTool
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.memory.places import EPISODE

__all__ = [
    "EPISODE_URI_TEMPLATE",
    "SUMMARY_URI",
    "MemoryMcpServer",
    "ServedMemory",
    "tool_result",
]

log = logging.getLogger(__name__)

SUMMARY_URI = "memory://summary"
"""The resource that says what the memory holds and how to query it."""

EPISODE_URI_TEMPLATE = "memory://episodes/{episode_id}"
"""One episode as a resource: its JSON and its frames."""

_EPISODE_URI = re.compile(r"^memory://episodes/([^/]+)$")
_JSON = "application/json"


@dataclass(frozen=True)
class ServedMemory:
    """What one server offers: the tools over one memory, and what its summary says.

    Attributes:
        search: The search tool (its origin, ``now`` and robot hold for every tool).
        episode: ``get_episode`` over the same memory.
        navigation: The navigation tools (empty: read-only).
        describe: The memory's facts for the summary (where it is, how many episodes, ...).
        refresh: Called before each request (a read-only store catches up with its
            writer); None = nothing to do.
        robot_pose: The robot's current pose, where known (told to a person approving a
            goal); None = never known.

    """

    search: EpisodicMemoryTool
    episode: GetEpisodeTool
    navigation: Sequence[FunctionTool] = ()
    describe: Callable[[], dict[str, Any]] = field(default=dict)
    refresh: Callable[[], object] | None = None
    robot_pose: Callable[[], Any] | None = None

    @property
    def tools(self) -> list[FunctionTool]:
        """Every tool served, the search first."""
        return [self.search, self.episode, *self.navigation]


def _without_images(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "_images"}


def tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A tool's ``execute`` answer as an MCP tool result.

    Args:
        result: The JSON-able dict (``"error"`` in it: a failed call; ``"_images"``: the
            frames, ``{"base64", "label"}`` each, JPEG).

    Returns:
        The JSON, the answer in its data field (text and structured content), then each
        image's label (in the same field) and the image.

    """
    body = as_memory_data(_without_images(result))
    content: list[Any] = [types.TextContent(type="text", text=json.dumps(body))]
    for image in result.get("_images", []):
        label = json.dumps({DATA_FIELD: {"image_label": image["label"]}})
        content.append(types.TextContent(type="text", text=label))
        content.append(
            types.ImageContent(type="image", data=image["base64"], mime_type="image/jpeg")
        )
    return types.CallToolResult(content=content, structured_content=body, is_error="error" in body)


class MemoryMcpServer:
    """The MCP server over one :class:`ServedMemory` (an SDK low-level ``Server``).

    Args:
        served: The memory and its tools.
        name: The server's name in the MCP handshake.
        version: Its version there.
        worker_threads: Most calls running at once.
        approval: Who approves ``navigate_to_episode``'s goals (default: the person, asked
            through the client).

    """

    def __init__(
        self,
        served: ServedMemory,
        *,
        name: str = "surprise-memory",
        version: str = "",
        worker_threads: int = 4,
        approval: NavigationApproval | None = None,
    ) -> None:
        self._served = served
        self._approval = approval if approval is not None else NavigationApproval()
        self._tools = {tool.name: tool for tool in served.tools}
        self._navigation = {tool.name for tool in served.navigation}
        self._limiter = anyio.CapacityLimiter(worker_threads)
        self.server: Server[Any] = Server(
            name,
            version=version,
            instructions=self._instructions(),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
        )

    def _instructions(self) -> str:
        search = self._served.search.name
        text = (
            "The robot's surprise-gated episodic memory: 8-frame episodes stored when "
            "something surprising happened, and place keyframes, the latest view of every "
            f"place it passed. Find them with {search} (words, a picture, a time window, a "
            "place, a robot, kinds), look at one with get_episode. Times are seconds since "
            "the start of the recording; positions [x, y, z] in metres. " + DATA_NOTE
        )
        if self._navigation:
            text += (
                " navigate_to_episode sends the robot to where an episode happened; follow "
                "the goal with navigation_status, cancel it with stop_navigation."
            )
            if self._approval.mode == "elicit":
                text += " " + APPROVAL_NOTE
        return text

    def _description(self, tool: FunctionTool) -> str:
        """The tool's own description, then what the MCP server adds (data, approval)."""
        text = f"{tool.description} {DATA_NOTE}"
        if isinstance(tool, NavigateToEpisodeTool) and self._approval.mode == "elicit":
            text += " " + APPROVAL_NOTE
        return text

    async def _run(self, call: Callable[[], Any]) -> Any:
        refresh = self._served.refresh

        def job() -> Any:
            if refresh is not None:
                refresh()
            return call()

        return await anyio.to_thread.run_sync(job, limiter=self._limiter)

    # ------------------------------------------------------------------ tools
    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=self._description(tool),
                    input_schema=tool.parameters,
                    annotations=types.ToolAnnotations(
                        read_only_hint=tool.name not in self._navigation,
                        destructive_hint=False,
                        open_world_hint=tool.name in self._navigation,
                    ),
                )
                for tool in self._tools.values()
            ]
        )

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self._tools.get(params.name)
        if tool is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; this server has {sorted(self._tools)}",
            )
        arguments = params.arguments or {}
        if isinstance(tool, NavigateToEpisodeTool):
            result = await self._approval.navigate(ctx, tool, arguments, self._run)
        else:
            result = await self._run(partial(tool.execute, **arguments))
        if tool.name in self._navigation:  # what an agent made the robot do, on the record
            log.info(
                "%s(%s) -> %s",
                tool.name,
                json.dumps(arguments),
                json.dumps(_without_images(result)),
            )
        return tool_result(result)

    # ------------------------------------------------------------------ resources
    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        search = self._served.search
        newest = await self._run(
            partial(search.execute, max_results=search.max_results_cap, kinds=[EPISODE])
        )
        resources = [
            types.Resource(
                uri=SUMMARY_URI,
                name="memory summary",
                description="What the memory holds and how to query it.",
                mime_type=_JSON,
            )
        ]
        for ep in newest.get("episodes", []):
            resources.append(
                types.Resource(
                    uri=EPISODE_URI_TEMPLATE.format(episode_id=ep["id"]),
                    name=f"episode {ep['id']}",
                    description=f"robot {ep['robot']}, t={ep['time']} s, "
                    f"{len(ep['frame_times'])} frames",
                    mime_type=_JSON,
                )
            )
        return types.ListResourcesResult(resources=resources)

    async def _list_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=EPISODE_URI_TEMPLATE,
                    name="episode",
                    description="One episode: its JSON, then every frame as a JPEG.",
                    mime_type=_JSON,
                )
            ]
        )

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == SUMMARY_URI:
            summary = await self._run(self._summary)
            text = json.dumps(summary, indent=2)
            contents: list[Any] = [types.TextResourceContents(uri=uri, mime_type=_JSON, text=text)]
            return types.ReadResourceResult(contents=contents)
        found = _EPISODE_URI.match(uri)
        if found is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"no resource {uri!r}: this server has {SUMMARY_URI} and {EPISODE_URI_TEMPLATE}",
            )
        episode = self._served.episode
        result = await self._run(
            partial(episode.execute, episode_id=found.group(1), include_images=True)
        )
        if "error" in result:
            raise MCPError(types.INVALID_PARAMS, f"{uri}: {result['error']}")
        body = {**_without_images(result), "frames": [i["label"] for i in result["_images"]]}
        text = json.dumps(as_memory_data(body))
        contents = [types.TextResourceContents(uri=uri, mime_type=_JSON, text=text)]
        for n, image in enumerate(result["_images"], 1):
            contents.append(
                types.BlobResourceContents(
                    uri=f"{uri}/frames/{n}", mime_type="image/jpeg", blob=image["base64"]
                )
            )
        return types.ReadResourceResult(contents=contents)

    def _summary(self) -> dict[str, Any]:
        search = self._served.search
        newest = search.execute(kinds=[EPISODE])
        return {
            **self._served.describe(),
            "time_origin_ns": search.origin_ns,
            "text_search": search.can_search_text,
            "image_search": search.can_search_images,
            "robot": search.robot_id,
            "tools": sorted(self._tools),
            "navigation": bool(self._navigation),
            "newest_episodes": [ep["id"] for ep in newest.get("episodes", [])],
        }
