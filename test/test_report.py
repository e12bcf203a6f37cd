"""The report, looked at in a real headless Chromium (Debian's ``chromium`` package).

The page is screenshotted three times: as written, with the surprise plot hidden, and with
the thumbnails hidden (``visibility: hidden`` keeps the layout, so only those pixels
change). The differences must be plot-sized and thumbnail-sized regions with content. The
test fails, never skips, when Chromium is missing: CI installs it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from synthetic_frames import OFFLINE

from surprise_memory.errors import StoreError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
from surprise_memory.offline.report import THUMB_WIDTH, TextAnswer, write_report
from surprise_memory.offline.run_record import load_run_record
from surprise_memory.offline.synthetic import SyntheticScene, synthetic_frames

WIDTH, HEIGHT = 1280, 2400


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("chromium is not installed: `apt-get install -y chromium` (Debian) is needed")


def screenshot(html: Path, png: Path, profile: Path) -> np.ndarray:
    subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={WIDTH},{HEIGHT}",
            html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    settings = PipelineSettings.from_mapping({**OFFLINE, "episode_frames": 4})
    path = tmp_path_factory.mktemp("report") / "store"
    scene = SyntheticScene(seed=3, duration_s=10.0, width=96, height=72)
    OfflinePipeline(settings).run(synthetic_frames(scene), path)
    return path


def diff_box(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """(changed pixels, width, height) of the region where two screenshots differ."""
    changed = np.abs(a - b).sum(axis=2) > 24
    ys, xs = np.nonzero(changed)
    if ys.size == 0:
        return 0, 0, 0
    return int(changed.sum()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


def test_report_in_headless_chromium(store: Path, tmp_path: Path) -> None:
    html_path, png_path = write_report(store, tmp_path / "report.html")
    page = html_path.read_text(encoding="utf-8")
    assert png_path.read_bytes().startswith(b"\x89PNG")
    # self-contained: every src/href is inline data or a link within the page
    assert not re.findall(r'(?:src|href)="(?!data:|#)', page)
    assert "http://" not in page and "https://" not in page and "@import" not in page
    run = load_run_record(store)
    with EpisodeStore(store, read_only=True) as s:
        frames = sum(len(s.get(i).frame_paths) for i in s.episode_ids())
    assert frames > 0
    assert page.count('class="thumb"') == frames
    assert 'id="untrained"' in page and "UNTRAINED" in page
    assert run["models"]["encoder"]["name"] in page

    full = screenshot(html_path, tmp_path / "full.png", tmp_path / "p1")
    style = "</style>"
    no_plot = tmp_path / "no_plot.html"
    no_plot.write_text(page.replace(style, "#surprise-plot{visibility:hidden}" + style, 1))
    no_thumbs = tmp_path / "no_thumbs.html"
    no_thumbs.write_text(page.replace(style, "img.thumb{visibility:hidden}" + style, 1))
    without_plot = screenshot(no_plot, tmp_path / "no_plot.png", tmp_path / "p2")
    without_thumbs = screenshot(no_thumbs, tmp_path / "no_thumbs.png", tmp_path / "p3")
    assert full.shape == without_plot.shape == (HEIGHT, WIDTH, 3)

    # the plot: a 1200x360 figure drawn in the page (blue curve, orange tau, red events)
    count, w, h = diff_box(full, without_plot)
    assert w >= 1000 and h >= 300 and count > 20_000, (count, w, h)
    region = full[np.abs(full - without_plot).sum(axis=2) > 24]
    reddish = (region[:, 0] > 180) & (region[:, 1] < 90) & (region[:, 2] < 90)
    assert (run["summary"]["events"] == 0) or reddish.sum() > 20, "no event marker drawn"

    # the thumbnails: each frame shown THUMB_WIDTH px wide, with image content
    count, w, h = diff_box(full, without_thumbs)
    assert w >= 4 * THUMB_WIDTH and count > frames * THUMB_WIDTH * 40, (count, w, h)
    changed = np.abs(full - without_thumbs).sum(axis=2) > 24
    assert full[changed].std(axis=0).mean() > 10, "thumbnails look blank"

    # the untrained banner is at the top, in red
    top = full[:250]
    banner = (top[..., 0] > 170) & (top[..., 1] < 70) & (top[..., 2] < 70)
    assert banner.sum() > 10_000


def test_report_of_a_folder_without_a_run(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"run\.json"):
        write_report(tmp_path)


def test_report_times_count_from_the_store_origin(store: Path) -> None:
    from surprise_memory.offline.report import render_html, time_origin_ns

    with EpisodeStore(store, read_only=True) as s:
        origin = time_origin_ns(s)
        assert origin == s.origin_ns == load_run_record(store)["summary"]["first_stamp_ns"]
        first = min((s.get(i) for i in s.episode_ids()), key=lambda r: r.stamp_ns)
    page = render_html(store, b"")
    assert f"t = {(first.stamp_ns - origin) / 1e9:.2f} s (stamp {first.stamp_ns} ns)" in page
    # each episode's picture is marked: its trigger's frame (the rule of every view)
    trigger = first.frame_stamps_ns[trigger_frame_index(first.frame_stamps_ns, first.stamp_ns)]
    episodes = page.count('<div class="episode"')
    assert episodes > 0 and page.count('<figure class="trigger">') == episodes
    assert f"<b>{(trigger - origin) / 1e9:.2f} s, trigger</b>" in page


def test_the_sentences_asked_link_to_the_episode_each_ranked_first(
    store: Path, tmp_path: Path
) -> None:
    with EpisodeStore(store, read_only=True) as s:
        records = sorted((s.get(i) for i in s.episode_ids()), key=lambda r: r.stamp_ns)
    assert records, "the fixture stored no episode"
    last = len(records)
    answers = [
        TextAnswer("a person <crossing>", records[-1].id, "right: the person episode"),
        TextAnswer("nothing like it", None),
    ]
    page = write_report(store, tmp_path / "r.html", answers)[0].read_text(encoding="utf-8")
    table = page[page.index('<table id="answers">') :]
    table = table[: table.index("</table>")]
    assert "a person &lt;crossing&gt;" in table and "right: the person episode" in table
    assert f'<a href="#episode-{last}">#{last}</a>' in table and "no episode" in table
    assert f'<div class="episode" id="episode-{last}">' in page
    assert "Asked in words" not in write_report(store, tmp_path / "plain.html")[0].read_text(
        encoding="utf-8"
    )
