"""Trusted poses: the uncertainty's definition, goto's refusal rule, both stores keep both.

The uncertainty is checked against covariances whose ellipse is known by construction (a
rotation of a diagonal one); the store tests run on the SQLite folder and on a real
PostgreSQL (``store_backends.pg_server``), and open stores written by the schema before
(SQLite 7, PostgreSQL 6) with both fields unknown.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from test_store import as_version_7

from surprise_memory.errors import InputError
from surprise_memory.memory.navigation import GoalRefusedError, plan_goal
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import (
    PoseTrust,
    TrustRule,
    position_sigma_m,
    trust_refusal,
)
from surprise_memory.memory.store import DB_NAME, EpisodeStore, EpisodeStoreBackend, open_store
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.perception.frames import Frame

S = 1_000_000_000


def _covariance(sx: float, sy: float, angle: float, *, yaw_var: float = 0.3) -> list[float]:
    """A 6x6 ROS covariance whose xy ellipse has semi-axes sx, sy turned by ``angle``."""
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[c, -s], [s, c]])
    xy = rot @ np.diag([sx**2, sy**2]) @ rot.T
    cov = np.zeros((6, 6))
    cov[:2, :2] = xy
    cov[2, 2], cov[5, 5] = 99.0, yaw_var  # z and yaw say nothing of the ground position
    return [float(v) for v in cov.ravel()]


@pytest.mark.parametrize(
    ("sx", "sy", "angle"),
    [(0.1, 0.1, 0.0), (0.5, 0.2, 0.0), (0.2, 0.5, 0.0), (0.5, 0.2, 0.7), (1.5, 0.01, 2.0)],
)
def test_the_uncertainty_is_the_ellipses_semi_major_axis(
    sx: float, sy: float, angle: float
) -> None:
    assert position_sigma_m(_covariance(sx, sy, angle)) == pytest.approx(max(sx, sy), rel=1e-9)


@pytest.mark.parametrize(
    "cov",
    [
        [-1.0] + [0.0] * 35,  # ROS: unknown
        [0.0] * 36,  # a driver that estimates nothing
        [0.0] * 14 + [5.0] + [0.0] * 21,  # only z: nothing of the ground position
        [math.nan] + [0.0] * 35,
    ],
)
def test_a_covariance_that_says_nothing_is_unknown(cov: list[float]) -> None:
    assert position_sigma_m(cov) is None


def test_a_covariance_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(InputError, match="36"):
        position_sigma_m([0.1] * 9)


@pytest.mark.parametrize(
    ("trust", "rule", "refused"),
    [
        (PoseTrust(0.3, "lab"), TrustRule("lab", 0.5), None),
        (PoseTrust(0.3, "lab"), TrustRule("hall", 0.5), "map 'lab'"),
        (PoseTrust(0.8, "lab"), TrustRule("lab", 0.5), "0.80 m"),
        (PoseTrust(0.8, "lab"), TrustRule("lab", 0.0), None),  # 0: no limit
        (PoseTrust(None, ""), TrustRule("lab", 0.5), None),  # unknown is not refused
        (PoseTrust(0.3, "lab"), TrustRule("", 0.5), None),  # robot's map unknown
    ],
)
def test_the_refusal_rule(trust: PoseTrust, rule: TrustRule, refused: str | None) -> None:
    reason = trust_refusal(trust, rule)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None and refused in reason and "\n" not in reason


def _add(store: EpisodeStoreBackend, t: float, trust: PoseTrust | None) -> EpisodeRecord:
    rng = np.random.default_rng(round(t))
    stamp = round(t * S)
    frames = [
        Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), stamp + (i - 4) * S // 10)
        for i in range(8)
    ]
    return store.add(
        frames, rng.standard_normal((8, 16)), stamp_ns=stamp, surprise=1.0,
        embedder_model="PE-Core-L-14-336", embedder_pretrained=True,
        pose=Pose(1.0, 2.0, 0.0, frame_id="map"), robot_id="alpha", pose_trust=trust,
    )  # fmt: skip


def test_both_stores_keep_the_trust(store_location: str) -> None:
    with open_store(store_location) as store:
        known = _add(store, 1.0, PoseTrust(0.25, "lab"))
        unknown = _add(store, 2.0, None)
        assert known.pose_trust == PoseTrust(0.25, "lab")
    with open_store(store_location) as store:
        assert store.get(known.id).pose_trust == PoseTrust(0.25, "lab")
        assert store.get(unknown.id).pose_trust == PoseTrust()
        hits = {h.episode.id: h.episode.pose_trust for h in store.search()}
        assert hits == {known.id: PoseTrust(0.25, "lab"), unknown.id: PoseTrust()}
        brief = {s.id: (s.pose_sigma_m, s.map_id) for s in store.summaries()}
        assert brief[known.id] == (0.25, "lab")
        assert math.isnan(brief[unknown.id][0]) and brief[unknown.id][1] == ""


@pytest.mark.parametrize(
    "bad", [PoseTrust(-0.1, ""), PoseTrust(math.inf, ""), PoseTrust(0.1, "a\nb")]
)
def test_a_bad_trust_is_refused(store_location: str, bad: PoseTrust) -> None:
    with open_store(store_location) as store:
        with pytest.raises(InputError):
            _add(store, 1.0, bad)
        assert list(store.episode_ids()) == []


def test_a_schema_7_store_opens_with_unknown_trust(tmp_path: Path) -> None:
    with EpisodeStore(tmp_path) as store:
        old = _add(store, 1.0, PoseTrust(0.25, "lab"))
    as_version_7(tmp_path / DB_NAME)
    with EpisodeStore(tmp_path) as store:
        assert store.get(old.id).pose_trust == PoseTrust()
        new = _add(store, 2.0, PoseTrust(0.5, "lab"))
        assert store.get(new.id).pose_trust == PoseTrust(0.5, "lab")
    conn = sqlite3.connect(tmp_path / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    conn.close()


def test_a_schema_6_postgres_store_opens_with_unknown_trust(pg_url: str) -> None:
    from test_store_postgres import as_schema_6

    with open_store(pg_url) as store:
        old = _add(store, 1.0, PoseTrust(0.25, "lab"))
    as_schema_6(pg_url)
    with open_store(pg_url) as store:
        assert store.get(old.id).pose_trust == PoseTrust()
        new = _add(store, 2.0, PoseTrust(0.5, "lab"))
        assert store.get(new.id).pose_trust == PoseTrust(0.5, "lab")


def _plan(episode: EpisodeRecord, rule: TrustRule) -> str:
    goal = plan_goal(
        episode, "map", own_robot="alpha", now_ns=10 * S, session_id="s", fixed_frames=("map",),
        standoff_m=0.0, trust=rule,
    )  # fmt: skip
    return goal.note


def test_plan_goal_refuses_what_it_cannot_trust(tmp_path: Path) -> None:
    with EpisodeStore(tmp_path) as store:
        lost = _add(store, 1.0, PoseTrust(2.0, "lab"))
        other = _add(store, 2.0, PoseTrust(0.1, "hall"))
        tf_pose = _add(store, 3.0, None)
    with pytest.raises(GoalRefusedError, match=r"uncertain by 2\.00 m.*--trust-pose"):
        _plan(lost, TrustRule("lab", 1.0))
    with pytest.raises(GoalRefusedError, match="recorded on map 'hall'"):
        _plan(other, TrustRule("lab", 1.0))
    assert "trusted anyway" in _plan(lost, TrustRule("lab", 1.0, override=True))
    assert "uncertainty unknown" in _plan(tf_pose, TrustRule("lab", 1.0))


def test_a_migration_carries_the_trust(tmp_path: Path, pg_url: str) -> None:
    from surprise_memory.memory.store.migrate import migrate_store

    with EpisodeStore(tmp_path / "src") as store:
        known = _add(store, 1.0, PoseTrust(0.25, "lab"))
        unknown = _add(store, 2.0, None)
    report = migrate_store(tmp_path / "src", pg_url)
    assert report.episodes == 2
    with open_store(pg_url, read_only=True) as copy:
        assert copy.get(known.id).pose_trust == PoseTrust(0.25, "lab")
        assert copy.get(unknown.id).pose_trust == PoseTrust()
