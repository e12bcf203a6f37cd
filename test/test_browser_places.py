"""The memory browser's place keyframes (issue 47): their own map layer, search results
marked by kind, and an episode's "is it still there?" from ``/api/episodes/{id}/place``.

One store written here with the store's own ``add`` (episodes and place keyframes as in
test_store_places.py, embeddings chosen so that each episode's place was seen again
alike, changed, faded or not at all), one ``surprise-memory serve`` process (with a
still-there threshold of its own, 0.4) and one headless Chromium for the module; the JSON
answers are read over HTTP, the page as a person sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from browser_helpers import Server, chrome, serve, wait_for
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from test_browser_page import BLUE
from test_store_places import AT, DIM, _episode, _place

from surprise_memory.browser.views import place_status_view
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.places import PlaceStatus
from surprise_memory.memory.store import EpisodeStore

S = 1_000_000_000
CHANGED = yaw_pose(21.0, 5.0, 0.0, 0.0, "map")
FADED = yaw_pose(61.0, 5.0, 0.0, 0.0, "map")
UNSEEN = yaw_pose(41.0, 5.0, 0.0, 0.0, "map")
THRESHOLD = "0.4"  # serve's --place-still-there-similarity (the default is 0.8)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four episodes in ``map``: seen again alike (cosine 1), changed (0.5: the same at
    the server's 0.4), faded (0.2: different), never again; and three place keyframes."""
    folder = tmp_path_factory.mktemp("browser_places") / "store"
    rng = np.random.default_rng(470)
    same, other = _unit(rng.standard_normal(DIM)), rng.standard_normal(DIM)
    other = _unit(other - (other @ same) * same)

    def mix(cosine: float) -> np.ndarray:
        return cosine * same + np.sqrt(1 - cosine**2) * other

    shown = np.tile(same, (8, 1))
    with EpisodeStore(folder) as s:
        ids = {
            "kept": _episode(s, rng, 10.0, AT, embeddings=shown).id,
            "changed": _episode(s, rng, 12.0, CHANGED, embeddings=shown).id,
            "faded": _episode(s, rng, 14.0, FADED, embeddings=shown).id,
            "unseen": _episode(s, rng, 16.0, UNSEEN).id,
            "view_kept": _place(s, rng, 10.0 + 3 * 3600, AT, embedding=same).id,
            "view_changed": _place(s, rng, 12.0 + 600, CHANGED, embedding=mix(0.5)).id,
            "view_faded": _place(s, rng, 14.0 + 90, FADED, embedding=mix(0.2)).id,
        }
    return {"folder": folder, "ids": ids}


@pytest.fixture(scope="module")
def server(store: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    options = ("--live-poll-seconds", "0.2", "--place-still-there-similarity", THRESHOLD)
    with serve(str(store["folder"]), tmp_path_factory.mktemp("cwd"), *options) as s:
        yield s


@pytest.fixture(scope="module")
def page(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chrome(tmp_path_factory.mktemp("profile"))
    try:
        driver.get(server.url)
        wait_for(lambda: driver.execute_script("return window.sm.ready"), 60, "the first load")
        yield driver
    finally:
        driver.quit()


# --- the JSON, over HTTP -----------------------------------------------------------------


def test_the_place_endpoint_says_when_each_episodes_place_was_last_seen(
    server: Server, store: dict[str, Any]
) -> None:
    ids = store["ids"]

    def status(name: str) -> dict[str, Any]:
        code, body = server.json(f"api/episodes/{ids[name]}/place")
        assert code == 200, body
        assert body["id"] == ids[name]
        return body

    kept = status("kept")["status"]
    assert kept["still_there"] is True and kept["similarity"] == pytest.approx(1.0, abs=2e-3)
    assert kept["view_id"] == ids["view_kept"] and kept["place_key"] == "map@2m:1,2:0/8"
    assert kept["later_s"] == pytest.approx(3 * 3600)
    assert int(kept["last_seen_ns"]) == round((10.0 + 3 * 3600) * S)  # exact, as a string
    changed = status("changed")["status"]  # 0.5 >= serve's 0.4: the option reached it
    assert changed["still_there"] is True and changed["similarity"] == pytest.approx(0.5, 2e-2)
    faded = status("faded")["status"]
    assert faded["still_there"] is False and faded["similarity"] == pytest.approx(0.2, abs=2e-2)
    unseen = status("unseen")
    assert unseen["status"]["still_there"] is None and unseen["status"]["similarity"] is None
    assert unseen["status"]["later_s"] == 0.0 and unseen["reason"] is None
    view = status("view_kept")
    assert view["kind"] == "place" and view["status"] is None
    assert view["reason"] == "a place keyframe: a view of map@2m:1,2:0/8"
    code, body = server.json("api/episodes/ep-0000000000000000001-abcdef/place")
    assert code == 404 and "no episode" in body["error"]


def test_the_timeline_search_and_episode_say_each_records_kind(
    server: Server, store: dict[str, Any]
) -> None:
    ids = store["ids"]
    _, timeline = server.json("api/timeline")
    kinds = dict(zip(timeline["id"], timeline["kind"], strict=True))
    assert kinds == {
        i: "place" if name.startswith("view") else "episode" for name, i in ids.items()
    }
    code, bad = server.json("api/search?kind=all")
    assert code == 400 and "kind 'all'" in bad["error"]
    _, places = server.json("api/search?start=0&kind=place")
    assert {h["kind"] for h in places["hits"]} == {"place"} and len(places["hits"]) == 3
    _, found = server.json("api/search?start=0&k=20")
    by_id = {h["id"]: h for h in found["hits"]}
    assert by_id[ids["view_faded"]]["kind"] == "place"
    assert by_id[ids["view_faded"]]["place_key"] == "map@2m:30,2:0/8"
    assert by_id[ids["faded"]]["kind"] == "episode" and by_id[ids["faded"]]["place_key"] == ""
    _, ep = server.json(f"api/episodes/{ids['view_kept']}")
    assert ep["kind"] == "place" and ep["place_key"] == "map@2m:1,2:0/8"


def test_a_store_without_place_keyframes_says_why_no_status(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    with EpisodeStore(tmp_path / "s") as s:
        rec = _episode(s, rng, 1.0, AT)
        none = place_status_view(rec, None, rec.stamp_ns, kept=False)
        assert none["status"] is None and "keeps no place keyframes" in none["reason"]
        posed = PlaceStatus("map@2m:1,2:0/8", rec.stamp_ns + 5 * S, 0.9, True, "v")
        view = place_status_view(rec, posed, rec.stamp_ns, kept=True)
        assert view["status"]["later_s"] == 5.0 and view["status"]["last_seen_t"] == 5.0
        assert view["reason"] is None


# --- the page ----------------------------------------------------------------------------


def _note(page: Any) -> str:
    return str(page.find_element(By.ID, "map-note").text)


def test_the_map_draws_place_keyframes_as_their_own_layer(page: Any) -> None:
    assert page.find_element(By.ID, "episode-count").text == "4"
    assert page.find_element(By.ID, "place-count").text == "3"
    assert page.find_element(By.ID, "place-count-box").is_displayed()
    toggle = page.find_element(By.ID, "map-places")
    assert toggle.is_selected()  # shown by default
    assert page.execute_script("return window.sm.placeMarks") == 3
    assert _note(page).startswith('4 episodes posed in "map"; 3 place keyframes;')
    on_timeline = page.execute_script(BLUE, "#timeline")
    toggle.click()
    wait_for(lambda: page.execute_script("return window.sm.placeMarks") == 0, 10, "hidden")
    assert "3 place keyframes (hidden)" in _note(page)
    # the timeline drops their squares too (the first robot's colour, fewer pixels)
    assert page.execute_script(BLUE, "#timeline") < on_timeline - 20
    toggle.click()
    wait_for(lambda: page.execute_script("return window.sm.placeMarks") == 3, 10, "shown")
    # the latest episodes are the surprise episodes; the views are on the map
    recent = page.find_elements(By.CSS_SELECTOR, "#recent .hit")
    assert len(recent) == 4 and {r.get_attribute("data-kind") for r in recent} == {"episode"}


def test_search_results_are_marked_place_or_episode(page: Any, store: dict[str, Any]) -> None:
    ids = store["ids"]
    page.find_element(By.ID, "clear-btn").click()
    page.find_element(By.ID, "q-start").send_keys("0")
    page.find_element(By.ID, "search-btn").click()
    msg = wait_for(
        lambda: (
            "ranked by" in page.find_element(By.ID, "search-msg").text
            and page.find_element(By.ID, "search-msg").text
        ),
        30,
        "the search",
    )
    assert msg.startswith("7 results (4 episodes, 3 place keyframes), ranked by time")
    cards = {
        c.get_attribute("data-id"): c for c in page.find_elements(By.CSS_SELECTOR, "#results .hit")
    }
    view = cards[ids["view_changed"]]
    assert view.get_attribute("data-kind") == "place" and "place" in view.get_attribute("class")
    assert view.text.startswith("place · ")
    assert cards[ids["changed"]].get_attribute("data-kind") == "episode"
    assert cards[ids["changed"]].text.startswith("episode · ")
    # the kind filter: the place keyframes only (the form's own select, as --kind)
    Select(page.find_element(By.ID, "q-kind")).select_by_visible_text("place keyframes")
    page.find_element(By.ID, "search-btn").click()
    wait_for(
        lambda: page.find_element(By.ID, "search-msg").text.startswith("3 results (0 episodes"),
        30,
        "the places' search",
    )
    kinds = [
        c.get_attribute("data-kind") for c in page.find_elements(By.CSS_SELECTOR, "#results .hit")
    ]
    assert kinds == ["place"] * 3
    Select(page.find_element(By.ID, "q-kind")).select_by_visible_text("both")
    page.find_element(By.ID, "search-btn").click()
    wait_for(
        lambda: page.find_element(By.ID, "search-msg").text.startswith("7 results"), 30, "both"
    )


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("kept", "last seen 3 h later (10800.4 s): still looks the same (similarity 1.00)"),
        ("changed", "last seen 10 min later (602.4 s): still looks the same (similarity 0.50)"),
        ("faded", "last seen 1 min 30 s later (94.4 s): looks different now (similarity 0.20)"),
        ("unseen", "not seen since the episode: still there unknown"),
        ("view_kept", "a place keyframe: a view of map@2m:1,2:0/8"),
    ],
)
def test_an_episode_shows_whether_its_place_still_looks_the_same(
    page: Any, store: dict[str, Any], name: str, want: str
) -> None:
    ident = store["ids"][name]
    page.execute_script("document.querySelector('#search-btn').scrollIntoView()")
    card = wait_for(
        lambda: page.find_elements(By.CSS_SELECTOR, f'#results .hit[data-id="{ident}"]'),
        30,
        "the search results",
    )[0]
    card.click()
    wait_for(
        lambda: (
            page.find_element(By.ID, "ep-title").text == ident
            and page.find_element(By.ID, "ep-place").text not in ("", "…")
        ),
        30,
        "the place's status",
    )
    assert page.find_element(By.ID, "ep-place").text == want
    kind = "place keyframe, the view of" if name.startswith("view") else "surprise episode"
    assert kind in page.find_element(By.ID, "ep-meta").text
