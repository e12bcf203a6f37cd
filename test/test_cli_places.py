"""``surprise-memory query`` over a store of both kinds: ``--kind``, each hit's kind, and
whether a surprise episode's place still looks the same (issue 47).

The store is a real SQLite folder written here with the store's own ``add`` (place
keyframes as the selector decides their keys, as in test_store_places.py); the command
runs as a subprocess, as a person types it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_store_places import AT, DIM, _episode, _place

from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.store import EpisodeStore

REPO = Path(__file__).resolve().parents[1]
CHANGED = yaw_pose(21.0, 5.0, 0.0, 0.0, "map")  # a place seen again, looking different
UNSEEN = yaw_pose(41.0, 5.0, 0.0, 0.0, "map")  # a place never seen again


def query(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``surprise-memory query`` as its own process (the repository on the path)."""
    proc = subprocess.run(
        [sys.executable, "-m", "surprise_memory", "query", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"query exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three episodes with a pose (seen again alike, seen again changed, never seen
    again), one without, and two place keyframes taken after them."""
    folder = tmp_path_factory.mktemp("cli_places") / "store"
    rng = np.random.default_rng(47)
    same, other = _unit(rng.standard_normal(DIM)), rng.standard_normal(DIM)
    other = _unit(other - (other @ same) * same)  # orthogonal to `same`
    changed = 0.5 * same + np.sqrt(0.75) * other  # cosine 0.5 with `same`
    with EpisodeStore(folder) as s:
        ids = {
            "kept": _episode(s, rng, 10.0, AT, embeddings=np.tile(same, (8, 1))).id,
            "changed": _episode(s, rng, 12.0, CHANGED, embeddings=np.tile(same, (8, 1))).id,
            "unseen": _episode(s, rng, 14.0, UNSEEN).id,
            "no_pose": _episode(s, rng, 16.0, None).id,
            "view_kept": _place(s, rng, 10.0 + 3 * 3600, AT, embedding=same).id,
            "view_changed": _place(s, rng, 12.0 + 600, CHANGED, embedding=changed).id,
        }
    return {"folder": folder, "ids": ids}


def _hits(cwd: Path, folder: Path, *args: str) -> dict[str, dict[str, Any]]:
    out = json.loads(query(cwd, str(folder), "-k", "50", "--json", *args).stdout)
    return {h["id"]: h for h in out["hits"]}


def test_kind_picks_the_records_and_each_hit_says_its_kind(
    store: dict[str, Any], tmp_path: Path
) -> None:
    folder, ids = store["folder"], store["ids"]
    both = _hits(tmp_path, folder, "--start", "0")
    assert set(both) == set(ids.values())  # the default: both kinds
    episodes = _hits(tmp_path, folder, "--start", "0", "--kind", "episode")
    places = _hits(tmp_path, folder, "--start", "0", "--kind", "place")
    assert set(episodes) == {ids[k] for k in ("kept", "changed", "unseen", "no_pose")}
    assert set(places) == {ids["view_kept"], ids["view_changed"]}
    assert {h["kind"] for h in episodes.values()} == {"episode"}
    assert {h["place_key"] for h in episodes.values()} == {""}
    assert places[ids["view_kept"]]["kind"] == "place"
    assert places[ids["view_kept"]]["place_key"] == "map@2m:1,2:0/8"
    assert places[ids["view_changed"]]["place_key"] == "map@2m:10,2:0/8"
    # a place keyframe is a view, not asked whether it is still there
    assert all(h["place_status"] is None for h in places.values())
    # --kind with a place filter: the places near the changed episode only
    near = _hits(tmp_path, folder, "--near", "21,5", "--radius", "1", "--kind", "place")
    assert set(near) == {ids["view_changed"]}


def test_an_episode_says_when_its_place_was_last_seen_and_if_it_still_looks_so(
    store: dict[str, Any], tmp_path: Path
) -> None:
    folder, ids = store["folder"], store["ids"]
    hits = _hits(tmp_path, folder, "--start", "0", "--kind", "episode")
    kept = hits[ids["kept"]]["place_status"]
    assert kept["still_there"] is True and kept["similarity"] == pytest.approx(1.0, abs=2e-3)
    assert kept["view_id"] == ids["view_kept"]
    assert kept["last_seen_ns"] == hits[ids["kept"]]["stamp_ns"] + 3 * 3600 * 10**9
    # seconds from the store's origin, as the hit's own time_s
    assert kept["last_seen_s"] == pytest.approx(hits[ids["kept"]]["time_s"] + 3 * 3600)
    changed = hits[ids["changed"]]["place_status"]
    assert changed["still_there"] is False and changed["similarity"] == pytest.approx(0.5, 2e-2)
    unseen = hits[ids["unseen"]]["place_status"]
    assert unseen["still_there"] is None and unseen["similarity"] is None
    assert unseen["last_seen_ns"] == hits[ids["unseen"]]["stamp_ns"]  # its own: not since
    assert hits[ids["no_pose"]]["place_status"] is None  # no pose, no place

    table = query(tmp_path, str(folder), "--start", "0", "-k", "50").stdout
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["#", "kind", "time"]
    # every hit is a line; an episode's place status is the line under it
    kept_line = next(i for i, ln in enumerate(lines) if ids["kept"] in ln)
    assert lines[kept_line].split()[1] == "episode"
    assert lines[kept_line + 1].strip() == (
        f"place: last seen 3 h later, still there: yes (similarity 1.00, view {ids['view_kept']})"
    )
    changed_line = next(i for i, ln in enumerate(lines) if ids["changed"] in ln)
    assert "last seen 10 min later, still there: no (similarity 0.50" in lines[changed_line + 1]
    unseen_line = next(i for i, ln in enumerate(lines) if ids["unseen"] in ln)
    assert "not seen since the episode, still there: unknown" in lines[unseen_line + 1]
    view_line = next(ln for ln in lines if ids["view_kept"] in ln and "place map@" in ln)
    assert view_line.split()[1] == "place" and "place map@2m:1,2:0/8" in view_line


def test_the_still_there_threshold_is_an_option(store: dict[str, Any], tmp_path: Path) -> None:
    folder, ids = store["folder"], store["ids"]
    hits = _hits(
        tmp_path, folder, "--kind", "episode", "--start", "0",
        "--place-still-there-similarity", "0.4",
    )  # fmt: skip
    assert hits[ids["changed"]]["place_status"]["still_there"] is True  # 0.5 >= 0.4


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--kind", "all"], 2, "invalid choice: 'all'"),
        (["--place-still-there-similarity", "2"], 1, "place_still_there_similarity=2.0"),
        (["--place-status-radius-m", "0"], 1, "place_status_radius_m=0.0"),
    ],
)
def test_bad_kind_or_setting_is_refused_clearly(
    store: dict[str, Any], tmp_path: Path, args: list[str], code: int, needle: str
) -> None:
    proc = query(tmp_path, str(store["folder"]), *args, check=False)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_no_match_says_of_which_kind(tmp_path: Path, store: dict[str, Any]) -> None:
    far = ["--near", "500,500", "--radius", "1"]
    assert query(tmp_path, str(store["folder"]), *far, "--kind", "place").stdout.strip() == (
        "no place keyframe matches"
    )
    assert query(tmp_path, str(store["folder"]), *far).stdout.strip() == (
        "no episode or place keyframe matches"
    )


def test_a_store_without_place_keyframes_says_nothing_of_places(tmp_path: Path) -> None:
    """A store processed offline keeps no views: no "not seen since" under every episode."""
    rng = np.random.default_rng(3)
    with EpisodeStore(tmp_path / "store") as s:
        ep = _episode(s, rng, 10.0, AT).id
    out = json.loads(query(tmp_path, "store", "--json").stdout)
    assert [(h["id"], h["kind"], h["place_status"]) for h in out["hits"]] == [(ep, "episode", None)]
    table = query(tmp_path, "store").stdout.splitlines()
    assert len(table) == 2 and "place:" not in table[1]
