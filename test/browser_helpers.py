"""Helpers of the memory browser tests: a small real store, the server process, Chromium.

* :func:`processed_store`: a synthetic recording (rosbag2 with odometry) through
  ``process``, the demo's path at a test's size: episodes with poses, ``run.json`` and
  ``scores.csv``, tiny random models.
* :func:`serve`: ``surprise-memory serve STORE --port 0`` as its own process (the command
  a person runs), its URL read from the first line it prints; stopped with SIGINT, as
  Ctrl-C does, and its exit status checked.
* :func:`chrome`: Debian's headless Chromium through ``/usr/bin/chromedriver``, named
  explicitly so that Selenium Manager never runs (it would try to download a driver).
* :func:`copy_episode`: a new episode for a store made of an existing one's frames and
  embeddings (same embedder), as a running memory node would add.
* :class:`EventStream`: the page's live stream (``/api/live``) read as a client.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlsplit
from urllib.request import Request, urlopen

import pytest
from synthetic_frames import OFFLINE

from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.store import EpisodeStoreBackend
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag
from surprise_memory.perception.frames import Frame

CHROMEDRIVER = "/usr/bin/chromedriver"
TINY_SETTINGS = {
    **OFFLINE,
    "gamma": 0.5,  # more events on a short scene: more episodes to browse
    "encoder_batch": 8,
}


def processed_store(folder: Path, seconds: float = 12.0, **settings: Any) -> Path:
    """A store written by ``process`` from a synthetic bag with odometry; returns its folder.

    Args:
        folder: Where the bag and the store go.
        seconds: Length of the recording (12 s: four episodes with the tiny settings).
        settings: Settings over :data:`TINY_SETTINGS` (e.g. ``episode_frames``); the store
            holds the surprise episodes only unless ``place_keyframes=True`` (the route's
            place keyframes beside them).

    """
    scene = SyntheticScene(seed=4, duration_s=seconds, width=96, height=72)
    bag = write_synthetic_bag(folder / "recording", scene)
    store = folder / "store"
    values = {**TINY_SETTINGS, "place_keyframes": False, **settings}
    pipeline = OfflinePipeline(PipelineSettings.from_mapping(values))
    process(bag.path, store, pipeline=pipeline, pose_topic="/odom")
    return store


def image_search_ids(store: EpisodeStoreBackend, jpeg: bytes, k: int = 12) -> list[str]:
    """The episodes an image query ranks first, embedded here as the CLI embeds it."""
    import io

    import numpy as np
    from PIL import Image

    from surprise_memory.memory.query_embedder import store_query_embedder
    from surprise_memory.memory.retrieval import RetrievalQuery

    model = store_query_embedder(store, "cpu", text=False)
    with Image.open(io.BytesIO(jpeg)) as img:
        rgb = np.array(img.convert("RGB"))
    query = RetrievalQuery(
        embedding=model.embed_images([rgb])[0], embedder_model=model.model_name, max_results=k
    )
    return [h.episode.id for h in store.retrieve(query)]


def copy_episode(
    store: EpisodeStoreBackend,
    source_id: str,
    new_id: str,
    shift_s: float,
    camera: CameraView | None = None,
    pose_trust: PoseTrust | None = None,
) -> str:
    """Add ``new_id``: ``source_id``'s frames and embeddings, ``shift_s`` seconds later
    (seen by ``camera``: None = the source's; with ``pose_trust``: None = the source's)."""
    rec = store.get(source_id)
    shift = round(shift_s * 1e9)
    frames = [
        Frame(img, stamp + shift)
        for img, stamp in zip(rec.load_images(), rec.frame_stamps_ns, strict=True)
    ]
    store.add(
        frames,
        store.embeddings(source_id),
        stamp_ns=rec.stamp_ns + shift,
        surprise=rec.surprise,
        threshold=rec.threshold,
        pose=rec.pose if rec.pose_valid else None,
        embedder_model=rec.embedder_model,
        embedder_pretrained=rec.embedder_pretrained,
        encoder_model=rec.encoder_model,
        encoder_pretrained=rec.encoder_pretrained,
        episode_id=new_id,
        robot_id=rec.robot_id,
        camera=rec.camera if camera is None else camera,
        pose_trust=rec.pose_trust if pose_trust is None else pose_trust,
    )
    return new_id


@dataclass
class Server:
    """A running ``surprise-memory serve``."""

    proc: subprocess.Popen[str]
    url: str  # http://127.0.0.1:PORT/

    def get(self, path: str, **kw: Any) -> tuple[int, bytes, dict[str, str]]:
        """(status, body, headers) of a request; 4xx/5xx are answers, not exceptions."""
        return fetch(self.url + path.lstrip("/"), **kw)

    def json(self, path: str, **kw: Any) -> tuple[int, Any]:
        """(status, parsed JSON body)."""
        status, body, _ = self.get(path, **kw)
        return status, json.loads(body)


def fetch(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None, timeout: float = 60
) -> tuple[int, bytes, dict[str, str]]:
    """One HTTP request with urllib: (status, body, headers)."""
    req = Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except HTTPError as err:
        return err.code, err.read(), dict(err.headers)


@contextlib.contextmanager
def serve(
    store: str,
    cwd: Path,
    *options: str,
    start_timeout: float = 90.0,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    """Run ``surprise-memory serve`` on ``store``; stop it with SIGINT, check it exits cleanly.

    Run from ``cwd`` (not the repository), so the colcon install is what is imported: the
    page's static files are checked to be installed with the package. ``env``: its
    environment (default: this process's).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "surprise_memory", "serve", store, "--port", "0", *options],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], start_timeout)
        line = proc.stdout.readline() if ready else ""
        found = re.search(r"read-only at (http://\S+/)", line)
        if found is None:
            proc.kill()
            pytest.fail(f"serve did not start: {line!r}\n{proc.stderr.read()}")
        yield Server(proc, found.group(1))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail("serve did not stop within 15 s of SIGINT")
    err = proc.stderr.read() if proc.stderr else ""
    # Ctrl-C ends the command as it ends every other: "interrupted", status 130
    assert proc.returncode == 130 and "interrupted" in err, f"exit {proc.returncode}:\n{err}"
    assert "Traceback" not in err, err


def chrome(profile: Path) -> Any:
    """Headless Chromium driven by Debian's chromedriver (fails, never skips, when missing)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None or not os.path.isfile(CHROMEDRIVER):
        pytest.fail(
            "Chromium and its driver are needed: apt-get install -y chromium chromium-driver "
            "(tools/setup_system.sh)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--window-size=1400,1500",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def images_loaded(page: Any, selector: str) -> bool:
    """Whether the page has images at ``selector`` and every one of them loaded."""
    from selenium.webdriver.common.by import By

    images = page.find_elements(By.CSS_SELECTOR, selector)
    return bool(images) and all(
        page.execute_script("return arguments[0].complete && arguments[0].naturalWidth", i)
        for i in images
    )


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    """Poll ``condition()`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


class EventStream:
    """The server-sent events of ``/api/live``, read with a raw HTTP connection."""

    def __init__(
        self, server_url: str, timeout: float = 30.0, headers: dict[str, str] | None = None
    ) -> None:
        parts = urlsplit(server_url)
        self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self._conn.request("GET", "/api/live", headers=headers or {})
        self._resp = self._conn.getresponse()
        assert self._resp.status == 200, self._resp.status
        assert self._resp.getheader("content-type", "").startswith("text/event-stream")

    def next(self) -> tuple[str, Any]:
        """The next event's name and data (comments and ``retry`` lines skipped)."""
        name, data = "", ""
        while True:
            line = self._resp.readline().decode("utf-8")
            if not line:
                raise EOFError("the event stream ended")
            line = line.rstrip("\n")
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = line[len("data: ") :]
            elif line == "" and name:
                return name, json.loads(data)

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
