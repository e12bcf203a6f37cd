"""The agent tool over both kinds of records, and "is it still there?" (issue 47).

A real store folder holds three surprise episodes and, later, place keyframes: one of the
door episode's place that looks like it (still there), one of the bench episode's place
that does not (gone), none of the cart episode's place (not seen since), and the view of
a red door that never surprised the robot (a place keyframe only). A fixed word->vector
table is the store's "model", so which record a text must find is known. The tool, then
``get_episode``, then ``surprise-memory mcp --store`` over the SDK's stdio client must
filter by kind, say each record's kind and place, and each episode's place status; and
where DAAAM is importable, its own registry and tool loop must carry the same. ROS-free.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import numpy as np
import pytest
from mcp_helpers import McpCaller, stdio_session
from test_daaam_integration import _daaam, _ScriptedClient, strict_violations

from surprise_memory.agents.episode_tool import GetEpisodeTool, StoreEpisodeLookup
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.cli import main as cli_main
from surprise_memory.config import PlacesConfig
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.place_status import record_place, with_place_status
from surprise_memory.memory.places import PlaceKeyframeSelector
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore, RetrievalHits
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"
T0 = 1_700_000_000 * S
SEARCH = "search_episodic_memory"
VOCAB = {w: np.eye(DIM)[i] for i, w in enumerate(["door", "golf cart", "bench", "red door"])}
# the episodes: id, seconds after T0, where (facing +x), what its trigger frame shows
DOOR_AT = yaw_pose(3.0, 5.0, 0.0, 0.0, "map")
EPISODES = [
    ("ep_door", 100.0, DOOR_AT, "door"),
    ("ep_cart", 110.0, yaw_pose(30.0, 30.0, 0.0, 0.0, "map"), "golf cart"),
    ("ep_bench", 120.0, yaw_pose(-20.0, 4.0, 0.0, 0.0, "map"), "bench"),
]
# the door's place seen again 0.7 m away: a view of its place at the default radius (2 m),
# not at 0.5 m
DOOR_AGAIN = yaw_pose(3.5, 5.5, 0.0, 0.3, "map")
RED_DOOR_AT = yaw_pose(50.0, 0.0, 0.0, 0.0, "map")


def _embed_text(text: str) -> np.ndarray:
    return VOCAB[text].astype(np.float32)


def _frames(rng: np.random.Generator, stamps: list[int]) -> list[Frame]:
    return [Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), t) for t in stamps]


def _place(store: EpisodeStore, rng: np.random.Generator, t: float, pose: Pose, row: Any) -> str:
    """A place keyframe as the selector decides it: one frame, its pose, its place's key."""
    stamp = T0 + round(t * S)
    decision = PlaceKeyframeSelector(PlacesConfig()).push(stamp, pose)
    assert decision is not None
    return store.add(
        _frames(rng, [stamp]), np.asarray(row)[None, :], stamp_ns=stamp, surprise=0.0,
        embedder_model=MODEL, embedder_pretrained=True, pose=pose, kind="place",
        place_key=decision.place_key,
    ).id  # fmt: skip


def _fill(path: Path) -> dict[str, str]:
    """The store; the place keyframes' ids by what they show."""
    rng = np.random.default_rng(47)
    triggers = {}
    with EpisodeStore(path) as store:
        store.note_origin(T0)
        for ep_id, t, pose, concept in EPISODES:
            stamp = T0 + round(t * S)
            emb = 0.1 * rng.standard_normal((8, DIM))
            emb[4] += VOCAB[concept]  # frame 4 is at the trigger stamp: the episode's picture
            triggers[ep_id] = emb[4]
            store.add(
                _frames(rng, [stamp + (i - 4) * S // 10 for i in range(8)]), emb,
                stamp_ns=stamp, surprise=2.0, embedder_model=MODEL, embedder_pretrained=True,
                pose=pose, episode_id=ep_id,
            )  # fmt: skip
        return {
            "door": _place(store, rng, 200.0, DOOR_AGAIN, triggers["ep_door"]),
            "bench": _place(store, rng, 210.0, EPISODES[2][2], -triggers["ep_bench"]),
            "red door": _place(store, rng, 220.0, RED_DOOR_AT, VOCAB["red door"]),
        }


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("places_store")
    return path, _fill(path)


@pytest.fixture(scope="module")
def store_dir(filled: tuple[Path, dict[str, str]]) -> Path:
    return filled[0]


@pytest.fixture(scope="module")
def views(filled: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The place keyframes' ids by what they show."""
    return filled[1]


@pytest.fixture
def store(store_dir: Path) -> Iterator[EpisodeStore]:
    with EpisodeStore(store_dir, read_only=True) as opened:
        yield opened


def _tool(store: Any, *, status: bool = True, **kw: Any) -> EpisodicMemoryTool:
    filler = functools.partial(with_place_status, store, config=PlacesConfig())
    return EpisodicMemoryTool(
        store,
        embed_text=_embed_text,
        embedder_model=MODEL,
        origin=T0,
        place_status=filler if status else None,
        **kw,
    )


def _call(tool: EpisodicMemoryTool, **args: object) -> dict[str, Any]:
    """A call as a strict-mode model makes it: every argument, null where not wanted."""
    full: dict[str, object] = dict.fromkeys(tool.parameters["required"])
    full["include_images"] = False
    full.update(args)
    result = tool.execute(**full)
    json.dumps(result)  # always JSON-able
    return result


def _by_id(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert "error" not in result, result
    return {e["id"]: e for e in result["episodes"]}


# ---------------------------------------------------------------------- kinds
def test_kinds_choose_episodes_places_or_both(store: EpisodeStore, views: dict[str, str]) -> None:
    tool = _tool(store, status=False)
    # a thing that never surprised the robot: only a place keyframe shows it
    red = _call(tool, query="red door", kinds=["place"], max_results=1)["episodes"]
    assert [(e["id"], e["kind"]) for e in red] == [(views["red door"], "place")]
    assert red[0]["place"] == "map@2m:25,0:0/8" and red[0]["position"] == [50.0, 0.0, 0.0]
    assert red[0]["frame_times"] == [220.0] and red[0]["similarity"] > 0.9
    episodes = _call(tool, kinds=["episode"], max_results=10)["episodes"]
    assert [(e["id"], e["kind"], e["place"]) for e in episodes] == [
        ("ep_bench", "episode", None),  # newest first; no place status asked: no place
        ("ep_cart", "episode", None),
        ("ep_door", "episode", None),
    ]
    places = _call(tool, kinds=["place"], max_results=10)["episodes"]
    assert [e["id"] for e in places] == [views["red door"], views["bench"], views["door"]]
    assert {e["kind"] for e in places} == {"place"}
    both = [e["id"] for e in _call(tool, kinds=None, max_results=10)["episodes"]]
    assert both == [*[e["id"] for e in places], *[e["id"] for e in episodes]]
    assert [e["id"] for e in _call(tool, kinds=["place", "episode"], max_results=10)[
        "episodes"
    ]] == both  # fmt: skip
    # the text ranks across kinds: the door episode before the door's later view
    door = _call(tool, query="door", max_results=2)["episodes"]
    assert {e["kind"] for e in door} == {"episode", "place"}


def test_daaams_registry_and_loop_carry_kinds_and_the_place_status(
    store: EpisodeStore, views: dict[str, str]
) -> None:
    """DAAAM's unmodified ToolRegistry and run_anthropic_tool_loop (a scripted LLM client,
    no network), the tool built with its place status as the agents guide builds it."""
    registry_mod = _daaam()
    from daaam.scene_understanding.providers import run_anthropic_tool_loop

    from surprise_memory.integrations.daaam import EpisodicMemory

    filler = functools.partial(with_place_status, store, config=PlacesConfig())
    tool = EpisodicMemory(
        store, embed_text=_embed_text, embedder_model=MODEL, origin=T0, place_status=filler
    )
    registry = registry_mod.ToolRegistry()
    registry.register_tool(tool)
    registry.set_scene_graph(None)
    registry.set_embedding_handlers(None, None)
    (sig,) = registry.get_openai_tools()
    assert sig["name"] == SEARCH and "kinds" in sig["parameters"]["properties"]
    calls = [
        {"query": "red door", "kinds": ["place"], "max_results": 1},
        {"query": "door", "kinds": ["episode"], "max_results": 1},
        {"query": None, "kinds": ["episode"], "max_results": 10},
        {"query": None, "kinds": ["places"]},  # an error, answered, not raised
    ]
    client = _ScriptedClient(calls)
    schema = {"name": SEARCH, "description": sig["description"], "input_schema": sig["parameters"]}
    question = [{"role": "user", "content": [{"type": "text", "text": "Is the bench there?"}]}]
    run_anthropic_tool_loop(
        client, "claude-scripted", "system", question, [schema], registry, 10, dict, "",
        logging.getLogger("daaam-test"),
    )  # fmt: skip
    red, door, episodes, wrong = client.tool_results
    assert [(e["id"], e["kind"]) for e in red["episodes"]] == [(views["red door"], "place")]
    assert red["episodes"][0]["place"] == "map@2m:25,0:0/8"
    ((found),) = door["episodes"]
    assert (found["id"], found["kind"], found["still_there"], found["last_seen"]) == (
        "ep_door", "episode", True, 200.0,
    )  # fmt: skip
    by_id = {e["id"]: e for e in episodes["episodes"]}
    assert set(by_id) == {"ep_door", "ep_cart", "ep_bench"}
    assert (by_id["ep_bench"]["still_there"], by_id["ep_bench"]["last_seen"]) == (False, 210.0)
    assert (by_id["ep_cart"]["still_there"], by_id["ep_cart"]["last_seen"]) == (None, 110.0)
    assert "no kind 'places'" in wrong["error"]


@pytest.mark.parametrize(
    ("kinds", "match"),
    [
        (["places"], "no kind 'places'"),
        ("place", "must be a list of 'episode', 'place'"),
        ([], "must be a list of 'episode', 'place'"),
        ([1], "no kind 1"),
        ({"place": True}, "must be a list"),
    ],
)
def test_a_wrong_kind_is_an_error_for_the_agent(
    store: EpisodeStore, kinds: object, match: str
) -> None:
    result = _call(_tool(store), kinds=kinds)
    assert result["episodes"] == [] and match in result["error"], result


def test_the_schema_stays_strict_with_kinds(store: EpisodeStore) -> None:
    for tool in (_tool(store), EpisodicMemoryTool(store)):
        params = tool.signature["parameters"]
        assert strict_violations(params) == []
        kinds = params["properties"]["kinds"]
        assert kinds["type"] == ["array", "null"] and "kinds" in params["required"]
        assert kinds["items"] == {"type": "string", "enum": ["episode", "place"]}
        assert "red door" in kinds["description"] and "place" in tool.description


# ---------------------------------------------------------------------- is it still there?
def test_each_episode_says_whether_its_place_is_still_there(
    store: EpisodeStore, views: dict[str, str]
) -> None:
    found = _by_id(_call(_tool(store), max_results=10))
    door, cart, bench = found["ep_door"], found["ep_cart"], found["ep_bench"]
    # seen again at 200 s, looking as it did
    assert (door["still_there"], door["last_seen"]) == (True, 200.0)
    assert door["view_similarity"] == pytest.approx(1.0, abs=1e-2)
    assert door["place"] == record_place(store.get("ep_door"), PlacesConfig()).key
    # seen again at 210 s, looking otherwise
    assert (bench["still_there"], bench["last_seen"]) == (False, 210.0)
    assert bench["view_similarity"] == pytest.approx(-1.0, abs=1e-2)
    # never seen since: unknown, last seen when the episode was
    assert (cart["still_there"], cart["view_similarity"], cart["last_seen"]) == (None, None, 110.0)
    # a place keyframe has no status of its own; without a filler nothing is told
    assert "still_there" not in found[views["door"]] and found[views["door"]]["place"]
    plain = _by_id(_call(_tool(store, status=False), max_results=10))["ep_door"]
    assert not {"still_there", "last_seen", "view_similarity"} & set(plain)


def test_a_view_after_now_is_not_told(store: EpisodeStore) -> None:
    found = _by_id(_call(_tool(store, now=205.0), kinds=["episode"], max_results=10))
    assert found["ep_door"]["still_there"] is True  # its view (200 s) is before now
    assert "still_there" not in found["ep_bench"]  # its view (210 s) is not


class _FleetDown:
    """A store answering as a fleet store whose link is down: from itself, marked partial."""

    def __init__(self, store: EpisodeStore) -> None:
        self.store = store

    def retrieve(self, query: RetrievalQuery, *, include_images: bool = False) -> RetrievalHits:
        hits = self.store.retrieve(query, include_images=include_images)
        return RetrievalHits(hits, partial="fleet unreachable: robot's own episodes only")


def test_partial_answers_keep_saying_so_and_the_status_is_asked_for_the_hits_returned(
    store: EpisodeStore,
) -> None:
    asked: list[int] = []

    def filler(hits: Any) -> Any:
        asked.append(len(hits))
        return with_place_status(store, hits, PlacesConfig())

    tool = EpisodicMemoryTool(_FleetDown(store), origin=T0, now=400.0, place_status=filler)
    result = _call(tool, kinds=["episode"], max_results=2)
    assert result["partial"] == "fleet unreachable: robot's own episodes only"
    assert [(e["id"], e["still_there"]) for e in result["episodes"]] == [
        ("ep_bench", False),
        ("ep_cart", None),
    ]
    assert asked == [2]  # the two returned, not the candidates asked for beyond them


def test_get_episode_gives_the_same_json(store: EpisodeStore, views: dict[str, str]) -> None:
    search = _tool(store)
    get = GetEpisodeTool(search, StoreEpisodeLookup(store))
    door = get.execute(episode_id="ep_door", include_images=True)
    listed = _by_id(_call(search, kinds=["episode"], max_results=10))["ep_door"]
    assert door["episode"] == {**listed, "similarity": None}
    assert door["_images"][0]["label"] == "episode ep_door, frame 1/8, t=99.6 s"
    view = get.execute(episode_id=views["red door"], include_images=True)
    assert (view["episode"]["kind"], view["episode"]["place"]) == ("place", "map@2m:25,0:0/8")
    assert view["_images"][0]["label"] == f"place {views['red door']}, frame 1/1, t=220.0 s"


# ---------------------------------------------------------------------- MCP
def _answer(result: types.CallToolResult) -> dict[str, Any]:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    data: dict[str, Any] = json.loads(first.text)["memory_data"]
    return data


def _search(client: McpCaller, **args: object) -> types.CallToolResult:
    schema = client.tools()[SEARCH].input_schema
    full: dict[str, object] = dict.fromkeys(schema["required"])
    full["include_images"] = False
    return client.call(SEARCH, {**full, **args})


def test_mcp_search_filters_kinds_and_says_what_is_still_there(
    store_dir: Path, views: dict[str, str], tmp_path: Path
) -> None:
    with (
        (tmp_path / "stderr.log").open("w") as errlog,
        stdio_session(["--store", str(store_dir)], tmp_path, errlog) as client,
    ):
        schema = client.tools()[SEARCH].input_schema
        assert schema["properties"]["kinds"]["type"] == ["array", "null"]
        assert strict_violations(schema) == []
        found = _answer(_search(client, kinds=["episode"], max_results=10))
        assert [(e["id"], e["kind"], e["still_there"]) for e in found["episodes"]] == [
            ("ep_bench", "episode", False),
            ("ep_cart", "episode", None),
            ("ep_door", "episode", True),
        ]
        assert found["episodes"][2]["last_seen"] == 200.0
        places = _answer(_search(client, kinds=["place"], max_results=10))["episodes"]
        assert {(e["kind"], e["id"]) for e in places} == {("place", v) for v in views.values()}
        wrong = _search(client, kinds=["event"])
        assert wrong.is_error and "no kind 'event'" in _answer(wrong)["error"]
        # the resources list the surprise episodes, not the many place keyframes
        listed = [str(r.uri) for r in client.resources()]
        assert listed[1:] == [f"memory://episodes/{i}" for i in ("ep_bench", "ep_cart", "ep_door")]
    # the places' settings reach the status: at 0.5 m the door's later view (0.7 m away)
    # is not a view of its place
    with (
        (tmp_path / "stderr2.log").open("w") as errlog,
        stdio_session(
            ["--store", str(store_dir), "--place-status-radius-m", "0.5"], tmp_path, errlog
        ) as client,
    ):
        found = _answer(_search(client, kinds=["episode"], max_results=10))
        door = {e["id"]: e for e in found["episodes"]}["ep_door"]
        assert (door["still_there"], door["last_seen"]) == (None, 100.0)


def test_mcp_places_settings_need_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["mcp", "--node", "--place-status-radius-m", "1"]) == 1
    assert "the places settings need --store" in capsys.readouterr().err
