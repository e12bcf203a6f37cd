"""The retrieval answerer over a store with both kinds of records (issue 47).

A place keyframe shows the door as well as the door's episode does (better: its frame is
the door itself), so a search over both kinds ranks the place first. "When did you see
the door?" asks for an event's time: the answerer takes the episode's (searching the
surprise episodes first), and falls back to every kind only when no episode matches
("the red door" is in a place keyframe only). ROS-free, a real store folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_agent_tool_places import DOOR_AT, MODEL, T0, VOCAB, _fill, _place

from surprise_memory.evaluation.qa.answerers import Memory, RetrievalAnswerer
from surprise_memory.evaluation.qa.questions import Answer, Question
from surprise_memory.memory.store import EpisodeStore


def _embed(text: str) -> np.ndarray:
    """The store's "model": the longest known words in the query."""
    word = max((w for w in VOCAB if w in text), key=len)
    return VOCAB[word].astype(np.float32)


def _ask(store: EpisodeStore, text: str, kind: str) -> tuple[Answer | None, list[dict]]:
    memory = Memory(store, embed_text=_embed, embedder_model=MODEL, embedder_pretrained=True)
    question = Question("q", "s", text, kind, Answer(time_s=0.0), origin_ns=T0)
    # 0.8: a frame of noise alone reaches 0.58 on a word (16 dimensions), a word shown 0.9
    result = RetrievalAnswerer(yes_threshold=0.8).answer(question, memory)
    assert result.error is None, result.error
    return result.answer, result.transcript


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("answerer_kinds")
    _fill(path)
    with EpisodeStore(path) as store:  # the door itself, seen from the episode's place
        _place(store, np.random.default_rng(1), 230.0, DOOR_AT, VOCAB["door"])
    return path


def test_when_is_an_events_time_and_where_reads_both_kinds(store_dir: Path) -> None:
    with EpisodeStore(store_dir, read_only=True) as store:
        first = store.search(embedding=_embed("door"), embedder_model=MODEL, max_results=1)
        assert first[0].episode.kind == "place"  # over both kinds the place ranks first
        when, calls = _ask(store, "When did you see the door?", "time")
        assert when == Answer(time_s=100.0)  # the door's episode, not the place's 230 s
        assert [c["arguments"]["kinds"] for c in calls] == [["episode"]]
        where, calls = _ask(store, "Where did you see the door?", "position")
        assert [c["arguments"]["kinds"] for c in calls] == [None]
        assert where is not None and where.position is not None


def test_an_event_only_a_place_keyframe_holds_falls_back_to_every_kind(store_dir: Path) -> None:
    with EpisodeStore(store_dir, read_only=True) as store:
        when, calls = _ask(store, "When did you see the red door?", "time")
    assert when == Answer(time_s=220.0)  # the red door's place keyframe
    assert [c["arguments"]["kinds"] for c in calls] == [["episode"], None]
