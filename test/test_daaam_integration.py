"""The tool as DAAAM's agent sees it: OpenAI strict-mode schema rules, and DAAAM itself.

The schema checks run everywhere. The DAAAM tests run only where DAAAM is importable
(it is not on a package registry): they register the tool in DAAAM's unmodified
``ToolRegistry`` and run DAAAM's own tool loop (``run_anthropic_tool_loop``) with a
scripted stand-in for the LLM client, no network.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
T0 = 1_673_884_185_589_118_000  # DAAAM's START_TIMES[0] for CODa sequence 0, in ns
MODEL = "PE-Core-L-14-336"
DIM = 4

# what OpenAI's strict mode accepts (structured outputs: supported schemas)
_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
_KEYWORDS = {
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "const",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "$defs",
    "$ref",
}


def strict_violations(schema: dict[str, Any], path: str = "$") -> list[str]:
    """What in a JSON schema breaks OpenAI's strict function-calling rules (empty = none)."""
    out = [f"{path}: unsupported keyword {k}" for k in schema if k not in _KEYWORDS]
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    out += [f"{path}: unsupported type {t}" for t in types if t not in _TYPES]
    if "object" in types:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            out.append(f"{path}: additionalProperties must be false")
        if sorted(schema.get("required", [])) != sorted(props):
            out.append(f"{path}: every property must be required")
        for name, sub in props.items():
            out += strict_violations(sub, f"{path}.{name}")
    if "array" in types:
        if "items" not in schema:
            out.append(f"{path}: an array needs items")
        else:
            out += strict_violations(schema["items"], f"{path}[]")
    return out


@pytest.fixture
def store(tmp_path: Path) -> EpisodeStore:
    with EpisodeStore(tmp_path) as st:
        st.note_origin(T0)
        for i, concept in enumerate(range(DIM)):
            t = T0 + (20 + 40 * i) * S
            emb = np.tile(np.eye(DIM)[concept], (8, 1))
            st.add(
                [Frame(np.full((8, 8, 3), 40 * i, np.uint8), t + j * S // 10) for j in range(8)],
                emb,
                stamp_ns=t + 3 * S // 10,
                surprise=1.0,
                pose=Pose(float(i), 0.0, 0.0, frame_id="map"),
                embedder_model=MODEL,
                embedder_pretrained=True,
                episode_id=f"ep{i}",
            )
        yield st


def _embed(text: str) -> np.ndarray:
    return np.eye(DIM, dtype=np.float32)[int(text[-1])]  # "concept 2" -> axis 2


def test_flat_signature_meets_openai_strict_rules(store: EpisodeStore) -> None:
    for tool in (
        EpisodicMemoryTool(store),
        EpisodicMemoryTool(store, embed_text=_embed, embedder_model=MODEL),
    ):
        sig = tool.signature
        json.dumps(sig)
        assert set(sig) == {"type", "name", "description", "parameters", "strict"}
        assert sig["type"] == "function" and sig["strict"] is True
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", sig["name"]) and sig["name"] == tool.name
        assert strict_violations(sig["parameters"]) == []
        # every optional argument can be null; only include_images is a plain value
        props = sig["parameters"]["properties"]
        assert {n for n, p in props.items() if "null" not in p["type"]} == {"include_images"}
        # the nested chat-completions form holds the same function
        nested = tool.schema
        assert nested["type"] == "function"
        assert nested["function"] == {k: v for k, v in sig.items() if k != "type"}
    # the checker itself catches what strict mode refuses
    bad = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}
    assert strict_violations(bad) == [
        "$: additionalProperties must be false",
        "$: every property must be required",
        "$.a: unsupported keyword default",
    ]


def test_the_integration_module_imports_without_daaam() -> None:
    import surprise_memory.integrations.daaam as integration

    if importlib.util.find_spec("daaam") is None:
        with pytest.raises(ImportError, match="needs DAAAM"):
            integration.EpisodicMemory  # noqa: B018 - the access builds the class


def _daaam() -> Any:
    reason = "DAAAM is not importable here (it is not on a package registry; see README)"
    pytest.importorskip("daaam.scene_understanding.interfaces", reason=reason)
    return pytest.importorskip("daaam.scene_understanding.tools.registry", reason=reason)


def test_registers_in_daaams_registry_and_answers_through_its_loop(store: EpisodeStore) -> None:
    registry_mod = _daaam()
    from daaam.scene_understanding.interfaces import Tool
    from daaam.scene_understanding.providers import run_anthropic_tool_loop

    from surprise_memory.integrations.daaam import EpisodicMemory

    tool = EpisodicMemory(
        store, embed_text=_embed, embedder_model="PE-Core-L14-336", origin=T0 / S, now=150.0
    )
    assert isinstance(tool, Tool)
    registry = registry_mod.ToolRegistry()
    registry.register_tool(tool)
    registry.set_scene_graph(None)
    registry.set_embedding_handlers(None, None)
    (sig,) = registry.get_openai_tools()
    assert (
        sig["name"] == "search_episodic_memory"
        and sig["parameters"]["additionalProperties"] is False
    )

    calls = [
        {"query": "concept 1", "max_results": 1, "include_images": True},
        {"query": None, "start_time": 0, "end_time": 70, "max_results": 5},
        {
            "query": "concept 3",
            "max_results": 3,
        },  # ep3: 140.3 s, its last frame 140.7 s, before now
        {"query": None, "start_time": "bogus"},  # an error, answered, not raised
    ]
    client = _ScriptedClient(calls)
    parsed, history, _ = run_anthropic_tool_loop(
        client,
        "claude-scripted",
        "system",
        [{"role": "user", "content": [{"type": "text", "text": "When did I see concept 1?"}]}],
        [
            {
                "name": sig["name"],
                "description": sig["description"],
                "input_schema": sig["parameters"],
            }
        ],
        registry,
        10,
        dict,
        "",
        logging.getLogger("daaam-test"),
    )
    results = client.tool_results
    assert [e["id"] for e in results[0]["episodes"]] == ["ep1"]
    assert results[0]["episodes"][0]["time"] == pytest.approx(60.3)
    assert "_images" not in results[0]  # DAAAM strips them from the text it sends
    assert [e["id"] for e in results[1]["episodes"]] == ["ep1", "ep0"]
    assert results[2]["episodes"][0]["id"] == "ep3"
    assert "error" in results[3]
    assert parsed == {"answer": "ep1"} and history["final_response"] == parsed


class _ScriptedClient:
    """Anthropic's client surface that DAAAM's loop uses, answering from a fixed script."""

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self._calls = calls
        self.tool_results: list[dict[str, Any]] = []
        self.messages = SimpleNamespace(create=self._create, parse=self._parse)

    def _create(self, *, messages: list[dict[str, Any]], **_: Any) -> Any:
        last = messages[-1]["content"]
        if isinstance(last, list):
            self.tool_results += [
                json.loads(b["content"]) for b in last if b.get("type") == "tool_result"
            ]
        usage = SimpleNamespace(input_tokens=1, output_tokens=1)
        n = len(self.tool_results)
        if n < len(self._calls):
            args = {"query": None, "start_time": None, "end_time": None, "position": None}
            args |= {"radius": None, "max_results": None, "include_images": False}
            block = SimpleNamespace(
                type="tool_use",
                id=f"call{n}",
                name="search_episodic_memory",
                input=args | self._calls[n],
            )
            return SimpleNamespace(content=[block], stop_reason="tool_use", usage=usage)
        text = SimpleNamespace(type="text", text="ep1")
        return SimpleNamespace(content=[text], stop_reason="end_turn", usage=usage)

    def _parse(self, **_: Any) -> Any:
        usage = SimpleNamespace(input_tokens=1, output_tokens=1)
        text = SimpleNamespace(type="text", text="ep1")
        return SimpleNamespace(parsed_output={"answer": "ep1"}, content=[text], usage=usage)
