"""The episodic memory as a tool of DAAAM's scene-understanding agent.

DAAAM (MIT-SPARK, "Describe Anything, Anywhere, at Any Moment") is not on a package
registry; where it is installed (``daaam`` importable), the whole integration is::

    from surprise_memory.agents.ros_navigation import GoToEpisodeClient
    from surprise_memory.integrations.daaam import (
        EpisodicMemory, NavigateToEpisode, NavigationStatus, StopNavigation,
    )

    agent.tool_registry.register_tool(EpisodicMemory(store, origin=START_TIMES[seq]))
    navigator = GoToEpisodeClient(node)
    agent.tool_registry.register_tool(NavigateToEpisode(navigator))
    agent.tool_registry.register_tool(NavigationStatus(navigator))
    agent.tool_registry.register_tool(StopNavigation(navigator))

The second tool finishes the paper's request ("take me to where it happened"):
:class:`NavigateToEpisode` is
:class:`~surprise_memory.agents.navigation_tool.NavigateToEpisodeTool`
(``navigate_to_episode(episode_id)``, through the memory node's ``go_to_episode``) as a
DAAAM ``Tool``, built the same way; :class:`NavigationStatus` (``navigation_status``) and
:class:`StopNavigation` (``stop_navigation``) follow and cancel the goal it sent.

:class:`EpisodicMemory` is :class:`~surprise_memory.agents.tool.EpisodicMemoryTool` and a
subclass of DAAAM's ``daaam.scene_understanding.interfaces.Tool``: DAAAM's registry reads
its ``name`` and flat ``signature``, calls ``execute(**json.loads(arguments))``, and hands
it the scene graph and embedding handlers, which it does not need. The class is built on
first access (module ``__getattr__``), so importing this module never imports DAAAM; where
DAAAM is missing, the access raises :class:`ImportError` saying so.

Why ``Tool.__init__`` is not called: it assigns placeholder ``name``, ``description`` and
``signature`` attributes, which here are live properties of the tool (the signature says
whether text search is available). The attributes ``Tool.__init__`` sets and that DAAAM
reads (``scene_graph``, ``config``) are set here instead.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from surprise_memory.agents.navigation_tool import (
    NavigateToEpisodeTool,
    NavigationStatusTool,
    StopNavigationTool,
)
from surprise_memory.agents.tool import EpisodicMemoryTool

__all__ = [  # noqa: F822 - built on access
    "DAAAM_TOOL_MODULE",
    "EpisodicMemory",
    "NavigateToEpisode",
    "NavigationStatus",
    "StopNavigation",
    "daaam_tool_base",
]

DAAAM_TOOL_MODULE = "daaam.scene_understanding.interfaces"
"""The DAAAM module that defines the ``Tool`` base class."""


def daaam_tool_base() -> type:
    """DAAAM's ``Tool`` base class.

    Raises:
        ImportError: DAAAM (or what its ``interfaces`` module imports) is not installed.

    """
    try:
        module = importlib.import_module(DAAAM_TOOL_MODULE)
    except ImportError as exc:
        raise ImportError(
            f"surprise_memory.integrations.daaam needs DAAAM ({DAAAM_TOOL_MODULE} could not "
            f"be imported: {exc}); install DAAAM from its repository, or use "
            "surprise_memory.agents.tool.EpisodicMemoryTool, which has the same interface "
            "without DAAAM's base class"
        ) from exc
    tool: type = module.Tool
    return tool


@functools.cache
def _daaam_tool_class(ours: type, name: str) -> type:
    """``ours`` (a tool of this package) as a subclass of DAAAM's ``Tool`` too."""
    base: Any = daaam_tool_base()

    init: Any = vars(ours)["__init__"]  # not Tool.__init__: see the module's docstring

    class DaaamTool(ours, base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            self.scene_graph = None
            self.config = None

        def _get_parameters_schema(self) -> dict[str, Any]:
            return self.parameters  # type: ignore[no-any-return]

        def _build_signature(self) -> None:
            """The signature is a property, always current: nothing to build."""

    DaaamTool.__name__ = DaaamTool.__qualname__ = name
    DaaamTool.__doc__ = f":class:`{ours.__name__}` as a DAAAM ``Tool`` (same arguments)."
    DaaamTool.__module__ = __name__
    return DaaamTool


_TOOLS = {
    "EpisodicMemory": EpisodicMemoryTool,
    "NavigateToEpisode": NavigateToEpisodeTool,
    "NavigationStatus": NavigationStatusTool,
    "StopNavigation": StopNavigationTool,
}


def __getattr__(name: str) -> Any:
    if name in _TOOLS:
        return _daaam_tool_class(_TOOLS[name], name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
