"""What the agent tools share: DAAAM's tool shape around one OpenAI function.

DAAAM's agent reads a tool's ``name`` and flat ``signature`` (OpenAI Responses form,
strict), calls ``execute(**arguments)`` and hands every tool its scene graph, embedding
handlers and configuration. :class:`FunctionTool` holds that shape once; a tool gives its
``description``, ``parameters`` (strict JSON schema) and ``execute``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FunctionTool"]


class FunctionTool:
    """Base of the agent tools: the function's name, both schema forms, DAAAM's setters.

    Args:
        name: Function name shown to the agent.

    """

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """The function name (DAAAM's registry keys its tools by it)."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        raise NotImplementedError

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, in OpenAI's strict form."""
        raise NotImplementedError

    @property
    def signature(self) -> dict[str, Any]:
        """The flat OpenAI Responses function (what DAAAM's ``Tool.signature`` holds)."""
        return {
            "type": "function",
            "name": self._name,
            "description": self.description,
            "parameters": self.parameters,
            "strict": True,
        }

    @property
    def schema(self) -> dict[str, Any]:
        """The same function in the nested chat-completions form (``{"function": {...}}``)."""
        flat = self.signature
        return {"type": "function", "function": {k: v for k, v in flat.items() if k != "type"}}

    def set_scene_graph(self, scene_graph: Any) -> None:
        """DAAAM hands every tool its scene graph at each update: not needed here."""

    def set_embedding_handlers(self, clip_handler: Any, sentence_handler: Any) -> None:
        """DAAAM's shared CLIP/sentence models: not used (a query needs the store's model)."""

    def set_config(self, config: Any) -> None:
        """DAAAM's tool configuration: nothing in it applies to these tools."""

    def execute(self, **kwargs: Any) -> dict[str, Any]:
        """Run one call; returns a JSON-able dict and never raises."""
        raise NotImplementedError
