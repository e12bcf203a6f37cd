"""The memory browser as a person uses it: the page in a real headless Chromium.

One store (a synthetic recording with odometry through ``process``, as ``make demo``
makes it, at a test's size), one ``surprise-memory serve`` process and one browser for
the module; the tests run in order on the same page: first load, search by time, text
(refused: random weights), image and place, an episode's frames and playback, then an
episode added to the store by another process appears without a reload, and goes when
it is evicted. Fails, never skips, when Chromium or its driver is missing (CI installs
both: tools/setup_system.sh).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    Server,
    chrome,
    copy_episode,
    image_search_ids,
    images_loaded,
    processed_store,
    serve,
    wait_for,
)
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.pose import compose, yaw_of
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.store import EpisodeStore, RetrievalHit

S = 1_000_000_000

# pixels of a canvas drawn in the colour of the curve and of the first robot (#1f77b4)
BLUE = """
const c = document.querySelector(arguments[0]);
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let n = 0;
for (let i = 0; i < d.length; i += 4) {
  if (d[i + 3] > 128 && d[i] < 90 && d[i + 1] > 80 && d[i + 1] < 160 && d[i + 2] > 140) n += 1;
}
return n;
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return processed_store(tmp_path_factory.mktemp("browser_page"))


@pytest.fixture(scope="module")
def server(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(str(store), tmp_path_factory.mktemp("cwd"), "--live-poll-seconds", "0.2") as s:
        yield s


@pytest.fixture(scope="module")
def page(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chrome(tmp_path_factory.mktemp("profile"))
    try:
        driver.get(server.url)
        wait_for(
            lambda: driver.execute_script("return window.sm.ready && window.sm.live === 'on'"),
            60,
            "the page's first load and its live stream",
        )
        yield driver
    finally:
        driver.quit()


def _ids(page: Any, box: str) -> list[str]:
    return [e.get_attribute("data-id") for e in page.find_elements(By.CSS_SELECTOR, f"{box} .hit")]


def _search(page: Any, fields: dict[str, str], ranked: str) -> None:
    page.find_element(By.ID, "clear-btn").click()
    for name, value in fields.items():
        page.find_element(By.ID, name).send_keys(value)
    page.find_element(By.ID, "search-btn").click()
    wait_for(lambda: ranked in page.find_element(By.ID, "search-msg").text, 60, ranked)


def _expected(store: Path, **query: Any) -> list[RetrievalHit]:
    with EpisodeStore(store, read_only=True) as s:
        return s.search(**query)


def test_first_load_shows_the_timeline_curve_map_and_episodes(
    page: Any, server: Server, store: Path
) -> None:
    with EpisodeStore(store, read_only=True) as s:
        ids = s.episode_ids()
        assert len(ids) >= 3 and all(x.pose_valid for x in s.summaries())
    assert page.find_element(By.ID, "episode-count").text == str(len(ids))
    assert page.find_element(By.ID, "untrained").is_displayed()
    note = page.find_element(By.ID, "text-note")
    assert note.is_displayed() and "random, untrained weights" in note.text
    # the timeline holds the surprise curve and tau over ~100 frames, the map a dot per pose
    assert page.execute_script(BLUE, "#timeline") > 1000
    assert "scored frames" in page.find_element(By.ID, "timeline-note").text
    assert page.execute_script(BLUE, "#map") > 25 * len(ids)  # a dot of radius 3.5 px each
    assert f"{len(ids)} episodes posed in" in page.find_element(By.ID, "map-note").text
    assert sorted(_ids(page, "#recent")) == sorted(ids)
    wait_for(lambda: images_loaded(page, "#recent img"), 30, "the latest episodes' thumbnails")
    # each card shows the trigger's frame (the route test_browser_http checks), as search does
    srcs = page.execute_script(
        "return [...document.querySelectorAll('#recent img')].map(i => i.src)"
    )
    assert srcs and all(src.endswith("/thumbnail") for src in srcs), srcs
    # everything the page loaded came from the server: no CDN, no internet
    fetched = page.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert fetched and all(u.startswith(server.url) for u in fetched), fetched
    errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_search_by_time_lists_the_episodes_in_the_range(page: Any, store: Path) -> None:
    _search(page, {"q-start": "4", "q-end": "9.5"}, "ranked by time")
    with EpisodeStore(store, read_only=True) as s:
        origin = s.origin_ns
        assert origin is not None
    want = _expected(store, start_ns=origin + 4 * S, end_ns=origin + 95 * S // 10, max_results=12)
    assert want and _ids(page, "#results") == [h.episode.id for h in want]
    wait_for(lambda: images_loaded(page, "#results img"), 30, "the results' thumbnails")


def test_text_search_says_why_it_cannot_run_on_random_weights(page: Any) -> None:
    page.find_element(By.ID, "clear-btn").click()
    page.find_element(By.ID, "q-text").send_keys("the moment the door opened")
    page.find_element(By.ID, "search-btn").click()
    msg = page.find_element(By.ID, "search-msg")
    wait_for(lambda: "error" in msg.get_attribute("class"), 30, "the refusal")
    assert "random, untrained weights" in msg.text and "--embedder-weights" in msg.text
    assert _ids(page, "#results") == []


def test_search_by_image_finds_the_episode_of_that_frame(
    page: Any, store: Path, tmp_path: Path
) -> None:
    with EpisodeStore(store, read_only=True) as s:
        target = s.episode_ids()[2]
        jpeg = s.frame_jpeg(target, 3)
        want = image_search_ids(s, jpeg)  # as `surprise-memory query --image` ranks
    (tmp_path / "query.jpg").write_bytes(jpeg)
    page.find_element(By.ID, "clear-btn").click()
    page.find_element(By.ID, "q-image").send_keys(str(tmp_path / "query.jpg"))
    page.find_element(By.ID, "image-btn").click()
    wait_for(
        lambda: "ranked by image" in page.find_element(By.ID, "search-msg").text,
        120,  # the first image query builds the store's embedder in the server
        "the image search",
    )
    assert _ids(page, "#results") == want
    # a frame of the target itself: the top score is its own (float16-rounded) embedding's
    assert "score 1.000" in page.find_element(By.CSS_SELECTOR, "#results .hit").text


def test_search_by_place_ranks_by_distance(page: Any, store: Path) -> None:
    with EpisodeStore(store, read_only=True) as s:
        target = s.summaries()[1]
    x, y, _ = target.position
    _search(page, {"q-near": f"{x:.3f},{y:.3f}", "q-radius": "0.5"}, "ranked by distance")
    want = _expected(store, near=(x, y, 0.0), radius_m=0.5, near_frame=target.pose_frame)
    assert _ids(page, "#results")[0] == target.id
    assert _ids(page, "#results") == [h.episode.id for h in want]


def test_a_click_on_the_map_picks_a_place(page: Any) -> None:
    page.find_element(By.ID, "clear-btn").click()
    canvas = page.find_element(By.ID, "map")
    ActionChains(page).move_to_element_with_offset(canvas, -195, -195).click().perform()
    wait_for(lambda: page.find_element(By.ID, "q-near").get_attribute("value"), 10, "a place")
    wait_for(
        lambda: "ranked by distance" in page.find_element(By.ID, "search-msg").text, 30, "results"
    )


def test_an_episode_shows_its_frames_why_it_was_kept_and_plays(page: Any, store: Path) -> None:
    with EpisodeStore(store, read_only=True) as s:
        target = s.episode_ids()[1]
        rec = s.get(target)
    page.find_element(By.CSS_SELECTOR, f'#recent .hit[data-id="{target}"]').click()
    episode = page.find_element(By.ID, "episode")
    wait_for(lambda: episode.get_attribute("data-id") == target, 30, "the episode view")
    assert episode.is_displayed()
    strip = page.find_elements(By.CSS_SELECTOR, "#ep-frames img")
    assert len(strip) == len(rec.frame_paths) == 8
    wait_for(lambda: images_loaded(page, "#ep-frames img, #ep-player"), 30, "the frames")
    why = [li.text for li in page.find_elements(By.CSS_SELECTOR, "#ep-why li")]
    assert "above the threshold" in why[0] and any("random" in w for w in why)
    meta = page.find_element(By.ID, "ep-meta").text
    assert rec.robot_id in meta and "odom" in meta
    # an offline run's pose: no covariance kept, no map named (issue 48)
    assert "uncertainty unknown, map unknown" in meta
    label = page.find_element(By.ID, "ep-frame-label")
    first = label.text
    assert "(trigger)" in first
    page.find_element(By.ID, "ep-play").click()
    wait_for(lambda: label.text != first, 10, "playback to move to the next frame")
    player = page.find_element(By.ID, "ep-player").get_attribute("src")
    assert "/frames/" in player and page.execute_script(
        "return document.querySelector('#ep-player').naturalWidth"
    )
    page.find_element(By.ID, "ep-play").click()  # pause


def test_an_episode_added_by_another_process_appears_without_a_reload(
    page: Any, store: Path
) -> None:
    loads = page.execute_script("return window.sm.loads")
    with EpisodeStore(store, read_only=True) as s:
        first = s.episode_ids()[0]
        count = len(s)
    with EpisodeStore(store) as writer:  # as a running memory node would
        copy_episode(writer, first, "live-added-1", shift_s=2.0)
        card = wait_for(
            lambda: page.find_elements(By.CSS_SELECTOR, '#recent .hit[data-id="live-added-1"]'),
            15,
            "the new episode on the page",
        )[0]
        assert "new" in card.get_attribute("class")
        assert page.find_element(By.ID, "episode-count").text == str(count + 1)
        wait_for(lambda: images_loaded(page, '#recent .hit[data-id="live-added-1"] img'), 15, "img")
        writer.delete(["live-added-1"])  # evicted: it leaves the page too
        wait_for(
            lambda: page.find_element(By.ID, "episode-count").text == str(count),
            15,
            "the evicted episode to leave the page",
        )
    assert "live-added-1" not in _ids(page, "#recent")
    assert page.execute_script("return window.sm.loads") == loads  # no reload


def test_the_camera_filter_and_the_arrow_of_where_the_camera_looked(page: Any, store: Path) -> None:
    """Issue 42: a camera column and filter; the map's arrow shows the camera's direction."""
    with EpisodeStore(store, read_only=True) as s:
        first = s.get(s.episode_ids()[0])
    view = compose(first.pose, mounting_pose(90.0))  # looking left of the robot
    with EpisodeStore(store) as writer:
        copy_episode(writer, first.id, "rear-seen", 3.0, CameraView("rear", "rear_optical", view))
        try:
            select = Select(page.find_element(By.ID, "q-camera"))
            wait_for(
                lambda: "rear" in [o.text for o in select.options], 15, "the rear camera listed"
            )
            assert [o.text for o in select.options] == ["every camera", "(unnamed)", "rear"]
            select.select_by_visible_text("(unnamed)")
            posed = int(page.find_element(By.ID, "map-note").text.split()[0])
            per_dot = page.execute_script(BLUE, "#map") / posed
            assert page.execute_script("return window.sm.arrows") == 0  # direction unknown
            select.select_by_visible_text("rear")
            assert page.find_element(By.ID, "map-note").text.startswith("1 episodes posed in")
            assert page.execute_script("return window.sm.arrows") == 1
            assert page.execute_script(BLUE, "#map") > 1.3 * per_dot  # the dot and its arrow
            _search(page, {"q-start": "0"}, "ranked by time")
            assert _ids(page, "#results") == ["rear-seen"]  # the search asks for that camera
            page.find_element(By.CSS_SELECTOR, '#results .hit[data-id="rear-seen"]').click()
            wait_for(lambda: "rear (rear_optical)" in page.find_element(By.ID, "ep-meta").text,
                     15, "the episode's camera")  # fmt: skip
            yaw = round(math.degrees(yaw_of(first.pose))) + 90
            assert f"looked toward yaw {yaw}°" in page.find_element(By.ID, "ep-meta").text
            select.select_by_visible_text("every camera")
        finally:
            writer.delete(["rear-seen"])


def test_a_localised_episode_says_how_far_its_pose_can_be_trusted(page: Any, store: Path) -> None:
    """Issue 48: a pose with a covariance and a map, on the place search's hit and the
    episode view (the offline run's episodes above have neither)."""
    with EpisodeStore(store, read_only=True) as s:
        first = s.get(s.episode_ids()[0])
    trust = PoseTrust(0.42, "lab")
    with EpisodeStore(store) as writer:
        copy_episode(writer, first.id, "localised", 4.0, pose_trust=trust)
        try:
            x, y, _ = first.pose.position
            _search(page, {"q-near": f"{x:.3f},{y:.3f}", "q-radius": "0.5"}, "ranked by distance")
            assert "localised" in _ids(page, "#results")
            hit = page.find_element(By.CSS_SELECTOR, '#results .hit[data-id="localised"]')
            assert "±0.42 m (1σ), map 'lab'" in hit.text
            other = page.find_element(By.CSS_SELECTOR, f'#results .hit[data-id="{first.id}"]')
            assert "uncertainty unknown, map unknown" in other.text
            hit.click()
            wait_for(
                lambda: page.find_element(By.ID, "episode").get_attribute("data-id") == "localised",
                15,
                "the localised episode's view",
            )
            meta = page.find_element(By.ID, "ep-meta").text
            assert "pose trust ±0.42 m (1σ), map 'lab'" in meta
        finally:
            writer.delete(["localised"])
