"""The project's own small models (``synthetic-trained-tiny``), end to end on held-out scenes.

* the training script's own check: a short run lowers both losses; its captions keep the
  held-out paraphrases out; the gate's gamma calibration replays the gate exactly and the
  card's gamma follows its rule;
* the shipped weights: under 10 MB, checksums as the model card says, loaded through the
  same code path as a user's local checkpoint, named as what they are;
* one held-out scene (``model_scene``, the demo's and the benchmark's layout, a seed never
  trained on) through the offline pipeline with the shipped models, the gate at the card's
  settings: every scripted event is found; then the held-out paraphrases of each event
  kind rank the episodes the same way in the store (in this process), through
  ``goto "<text>" --dry-run``, through the memory node's retrieval service over DDS,
  through the agent tool, and in the browser's text search in Chromium: prompt handling,
  tokenisation, normalisation and max-over-frames agree on every path.

The paraphrases of each event kind (the demo's two sentences among them) must rank their
event's episode first (each kind's recall@1 over 20 held-out scenes is in
benchmarks/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import open_clip
import pytest
import synthetic_frames as sf
import torch
from browser_helpers import chrome, serve, wait_for
from rclpy.node import Node
from ros_helpers import serving_memory_node
from selenium.webdriver.common.by import By
from trained_models import KINDS, SEED, SETTINGS, build_trained_store

from surprise_memory.agents.ros_client import EpisodicMemoryClient
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.cli import main as cli_main
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.run_record import SCORES_CSV, read_scores
from surprise_memory.offline.synthetic import MODEL_SCENE, ground_truth, model_scene, render_frame
from surprise_memory.offline.synthetic.calibration import (
    PAPER_EPISODES_PER_MINUTE,
    calibrate_gamma,
    quiet_event_rates,
    quiet_scenes,
)
from surprise_memory.offline.synthetic.captions import (
    HELD_OUT_QUERIES,
    TRAIN_PHRASES,
    frame_facts,
)
from surprise_memory.offline.synthetic.evaluation import episode_event
from surprise_memory.offline.synthetic.training import (
    CUE_FACTS,
    HELD_OUT_SEED_BASE,
    MODEL_CARD,
    TRAIN_SEED_BASE,
    TRAINING_PERSON_FROM,
    ShiftedImages,
    TrainingSettings,
    _embedder_data,
    _unknown_words,
    cue_rms,
    random_event_scene,
    train_embedder,
    train_video,
)
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    SYNTHETIC_WEIGHTS,
    ImageTextEmbedder,
    VideoEncoder,
)
from surprise_memory.stamps import NS_PER_SECOND

NS = "/surprise_memory_synthetic"
QUERIES = [q for kind in KINDS for q in HELD_OUT_QUERIES[kind]]
EXPECTED_KIND = {q: kind for kind in KINDS for q in HELD_OUT_QUERIES[kind]}
"""The event whose episode each paraphrase must rank first on this scene (the demo's two
sentences among them). Over 20 held-out scenes recall@1 is 0.82 for the pan, 0.87 for the
light and 0.90 for the object, not everywhere the issue's 0.9 (benchmarks/RESULTS.md,
seventh pass): on this scene every paraphrase ranks its event first, on others a pan's
blurred frame can still pass for a flicker."""


# ---------------------------------------------------------------------- training
def test_training_scenes_differ_from_the_measured_ones_only_where_the_person_steps_out() -> None:
    trained, measured = random_event_scene(TRAIN_SEED_BASE), model_scene(HELD_OUT_SEED_BASE)
    assert trained.person_from == TRAINING_PERSON_FROM != measured.person_from
    for option, value in MODEL_SCENE.items():
        if option != "person_from":
            assert getattr(trained, option) == getattr(measured, option) == value, option


def test_a_short_training_run_lowers_both_losses() -> None:
    settings = TrainingSettings(
        scenes=1,
        seconds=8.0,
        embedder_scenes=1,
        video_steps=20,
        video_batch=8,
        embedder_steps=20,
        embedder_batch=16,
        embedder_warmup=2,
    )
    _, video = train_video(settings)
    _, _, (before, after) = train_embedder(settings)
    assert sum(video[-3:]) / 3 < 0.9 * video[0]
    assert after < 0.95 * before  # the same batch, before and after


def test_the_cue_free_twin_takes_away_the_flicker_and_the_blur_only() -> None:
    scene = random_event_scene(TRAIN_SEED_BASE)
    facts = [frame_facts(scene, i) for i in range(scene.frame_count)]
    limit = TrainingSettings().embedder_cue_min_rms

    def shows(i: int) -> float:
        return cue_rms(render_frame(scene, i).rgb, render_frame(scene, i, cues=False).rgb)

    assert shows(facts.index(["street"])) == 0.0  # nothing to take away
    for cue in CUE_FACTS:
        frames = [i for i, f in enumerate(facts) if cue in f]
        assert max(shows(i) for i in frames) > 2 * limit, cue
    # a flicker fades in and out: its first frame shows nothing yet
    assert shows(next(i for i, f in enumerate(facts) if "dimming" in f)) < limit


def test_the_embedder_captions_a_cue_where_it_shows_and_trains_its_cue_free_twin() -> None:
    settings = TrainingSettings(embedder_scenes=1, seconds=12.0)

    def cue_facts(**changes: Any) -> list[list[str]]:
        return _embedder_data(dataclasses.replace(settings, **changes), (64, 64))[1]

    def with_cue(facts: list[list[str]]) -> list[int]:
        return [j for j, f in enumerate(facts) if any(k in CUE_FACTS for k in f)]

    every = cue_facts(embedder_counterfactuals=False, embedder_cue_min_rms=0.0)
    visible = cue_facts(embedder_counterfactuals=False)
    assert 0 < len(with_cue(visible)) < len(with_cue(every))  # the unseen ones lose the caption
    facts = cue_facts()
    assert len(with_cue(facts)) == len(with_cue(visible))
    for j in with_cue(facts):  # just before each: its twin, captioned with the rest
        rest = [k for k in facts[j] if k not in CUE_FACTS] or ["street"]
        assert facts[j - 1] == rest


def test_shifted_images_are_crops_of_the_padded_frames_fresh_and_reproducible() -> None:
    x = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8)
    assert torch.equal(ShiftedImages(x, 0, 1)[[0, 1]], x)
    shifted, again = ShiftedImages(x, 2, 5), ShiftedImages(x, 2, 5)
    first = shifted[[0, 1]]
    assert torch.equal(first, again[[0, 1]])  # seeded: a training run is reproducible
    padded = torch.nn.functional.pad(x, (2, 2, 2, 2), mode="reflect")
    crops = [padded[:, :, dy : dy + 8, dx : dx + 8] for dy in range(5) for dx in range(5)]
    for i in range(2):
        assert any(torch.equal(first[i], crop[i]) for crop in crops)
    assert any(not torch.equal(shifted[[0, 1]], first) for _ in range(5))  # fresh offsets


def test_the_training_scripts_switches_read_as_switches() -> None:
    script = Path(__file__).resolve().parents[1] / "tools" / "train_synthetic_models.py"
    usage = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--no-embedder-counterfactuals" in usage  # not type=bool, which reads "False" as true


def test_held_out_paraphrases_never_appear_in_training() -> None:
    def captions(colours: tuple[str, ...]) -> set[str]:
        return {p.format(c=c).lower() for ps in TRAIN_PHRASES.values() for p in ps for c in colours}

    # the colour names frame_facts gives a ball (colour_name), and phrase()'s fallback
    named = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink", "grey")
    exact = captions((*named, "coloured"))
    trained = captions(named)
    for queries in HELD_OUT_QUERIES.values():
        assert not {q.lower() for q in queries} & exact
        for query in queries:  # nor inside a caption training uses
            assert not [p for p in trained if query.lower() in p], query


def test_unknown_words_are_inserted_before_the_end_of_text() -> None:
    tokenizer = open_clip.get_tokenizer(SYNTHETIC_EMBEDDER_MODEL)
    tokens = tokenizer(["a person walking", "the camera pans"])
    eot = tokenizer.eot_token_id
    noisy = _unknown_words(tokens, np.random.default_rng(0), 1.0, eot)
    for before, after in zip(tokens.tolist(), noisy.tolist(), strict=True):
        n = before.index(eot)
        assert after.index(eot) == n + 1 and after[0] == before[0]  # one token more, SOT kept
        assert (
            0 < len(set(after[1 : n + 1]) - set(before[1:n])) <= 1
            and after[n + 2 :] == before[n + 1 : -1]
        )
    assert torch.equal(_unknown_words(tokens, np.random.default_rng(0), 0.0, eot), tokens)


# ---------------------------------------------------------------------- the gate's gamma
def test_calibrate_gamma_takes_the_smallest_gamma_at_or_under_the_rate() -> None:
    rates = {1.0: 6.7, 1.25: 4.3, 1.5: 1.95, 1.75: 1.06, 2.0: 0.44}
    assert calibrate_gamma(rates) == 1.75  # the paper's 1.28 per minute
    assert calibrate_gamma(rates, per_minute=2.0) == 1.5
    assert calibrate_gamma(rates, per_minute=1.06) == 1.75  # at the rate counts
    assert calibrate_gamma({1.0: 3.0, 2.0: 2.0}, per_minute=1.0) is None


def test_quiet_rates_replay_the_gate_and_the_card_keeps_its_rule(tmp_path: Path) -> None:
    pipeline = OfflinePipeline(PipelineSettings.from_mapping({**SETTINGS, "gamma": 1.0}))
    (scene,) = quiet_scenes(1, 40.0)
    rates = quiet_event_rates(pipeline, [scene], tmp_path)
    # the replay at the pipeline's own gamma decides what the pipeline itself decided
    folder = next(tmp_path.iterdir())
    stamps = read_scores(folder / SCORES_CSV)["stamp_ns"]
    minutes = (stamps[-1] - stamps[0]) / (60 * NS_PER_SECOND)
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert round(rates[1.0] * minutes) == len(run["events"]) > 0
    values = [rates[g] for g in sorted(rates)]  # a higher tau keeps a subset of the peaks
    assert all(a >= b for a, b in itertools.pairwise(values)) and values[-1] < values[0]
    card = json.loads((SYNTHETIC_WEIGHTS / MODEL_CARD).read_text(encoding="utf-8"))
    recorded = {float(g): r for g, r in card["calibration"]["episodes_per_minute"].items()}
    assert card["recommended"]["gamma"] == calibrate_gamma(recorded)
    assert recorded[1.0] > PAPER_EPISODES_PER_MINUTE  # why this model does not run at 1.0


# ---------------------------------------------------------------------- the shipped weights
def test_the_shipped_weights_are_small_named_and_match_their_card() -> None:
    import hashlib

    card = json.loads((SYNTHETIC_WEIGHTS / MODEL_CARD).read_text(encoding="utf-8"))
    assert card["name"] == SYNTHETIC_MODEL_NAME and "not the paper's models" in card["what"]
    files = sorted(p for p in SYNTHETIC_WEIGHTS.rglob("*") if p.is_file() and p.name != MODEL_CARD)
    assert sum(p.stat().st_size for p in files) <= 10 * 2**20
    assert {str(p.relative_to(SYNTHETIC_WEIGHTS)) for p in files} == set(card["sha256"])
    for p in files:
        assert (
            hashlib.sha256(p.read_bytes()).hexdigest()
            == card["sha256"][str(p.relative_to(SYNTHETIC_WEIGHTS))]
        )


def test_they_load_by_name_or_as_a_local_folder_under_their_own_name() -> None:
    by_name = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME, device="cpu")
    by_path = ImageTextEmbedder(
        SYNTHETIC_EMBEDDER_MODEL, str(SYNTHETIC_WEIGHTS / "embedder"), device="cpu"
    )
    assert by_name.pretrained and by_name.model_name == by_path.model_name
    assert by_name.model_name == f"{SYNTHETIC_EMBEDDER_MODEL}:{SYNTHETIC_MODEL_NAME}"
    text = ["a person crossing"]
    assert (by_name.embed_text(text) == by_path.embed_text(text)).all()
    video = VideoEncoder(str(SYNTHETIC_WEIGHTS / "video"), device="cpu")
    assert video.pretrained and video.model_name == f"VJEPA2-tiny:{SYNTHETIC_MODEL_NAME}"
    assert "PE-Core-L" not in by_name.model_name and "vitl" not in video.model_name


# ---------------------------------------------------------------------- a held-out scene
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_trained_store(tmp_path_factory.mktemp("synthetic_models") / "store")


@pytest.fixture(scope="module")
def first(store: Path) -> dict[str, str]:
    """Each query's first episode, as the store ranks it in this process."""
    embedder = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME, device="cpu")
    out = {}
    with EpisodeStore(store, read_only=True) as s:
        for text in QUERIES:
            q = embedder.embed_text([text])[0]
            hits = s.search(embedding=q, embedder_model=embedder.model_name, max_results=3)
            out[text] = hits[0].episode.id
    assert len(set(out.values())) >= 2, "the queries do not all pick one episode"
    return out


def test_each_paraphrase_ranks_its_events_episode_first(store: Path, first: dict[str, str]) -> None:
    scene = model_scene(SEED)
    truth = ground_truth(scene)
    with EpisodeStore(store, read_only=True) as s:
        for text, episode in first.items():
            offset = (s.get(episode).stamp_ns - scene.start_ns) / NS_PER_SECOND
            shown = episode_event(offset, truth)
            assert shown == EXPECTED_KIND[text], (text, shown)


@pytest.mark.parametrize("text", QUERIES[::3])
def test_goto_by_text_chooses_the_stores_first_episode(
    store: Path, first: dict[str, str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["goto", text, "--store", str(store), "--dry-run", "--json"]
    frames = ["--navigation-frame", "odom", "--fixed-frames", "odom"]  # a recording's odom
    assert cli_main([*args, *frames, "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["episode"]["id"] == first[text]
    assert "dry run" in out["message"]


def test_the_agent_tool_answers_as_the_store(store: Path, first: dict[str, str]) -> None:
    embedder = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME, device="cpu")
    with EpisodeStore(store, read_only=True) as s:
        tool = EpisodicMemoryTool(
            s,
            embed_text=lambda t: embedder.embed_text([t])[0],
            embedder_model=embedder.model_name,
            embedder_pretrained=True,
        )
        for text in QUERIES:
            args: dict[str, Any] = dict.fromkeys(
                ("start_time", "end_time", "position", "radius"), None
            )
            result = tool.execute(query=text, max_results=1, include_images=False, **args)
            assert "error" not in result, result
            assert result["episodes"][0]["id"] == first[text], text


@pytest.fixture(scope="module")
def ros_host(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """The installed memory_node serving ``store`` with the shipped embedder, over DDS."""
    params = sf.node_params(
        str(store),
        embedder_model=SYNTHETIC_EMBEDDER_MODEL,
        embedder_weights=SYNTHETIC_MODEL_NAME,
    )
    work = tmp_path_factory.mktemp("memory_node")
    with serving_memory_node(params, work, NS, "synthetic_models_test") as node:
        yield node


def test_the_retrieval_service_answers_as_the_store(first: dict[str, str], ros_host: Node) -> None:
    client = EpisodicMemoryClient(ros_host, f"{NS}/retrieve_episodes", 60.0)
    try:
        for text in QUERIES:
            found = client.retrieve(text=text, k=3)
            assert found, text
            assert found[0].id == first[text], text
    finally:
        client.destroy()


def test_the_browser_text_search_answers_as_the_store(
    store: Path, first: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    with serve(str(store), tmp_path_factory.mktemp("cwd")) as server:
        driver = chrome(tmp_path_factory.mktemp("profile"))
        try:
            driver.get(server.url)
            wait_for(lambda: driver.execute_script("return window.sm.ready"), 60, "first load")
            assert driver.find_element(By.ID, "synthetic").is_displayed()
            assert "not the paper's models" in driver.find_element(By.ID, "synthetic").text
            assert not driver.find_element(By.ID, "text-note").is_displayed()
            for text in QUERIES[::3]:
                box = driver.find_element(By.ID, "q-text")
                box.clear()
                box.send_keys(text)
                driver.execute_script("document.getElementById('search-msg').textContent = ''")
                driver.find_element(By.ID, "search-btn").click()
                wait_for(
                    lambda: "ranked by text" in driver.find_element(By.ID, "search-msg").text,
                    60,
                    f"the text search {text!r}",
                )
                hit = driver.find_element(By.CSS_SELECTOR, "#results .hit")
                assert hit.get_attribute("data-id") == first[text], text
        finally:
            driver.quit()
