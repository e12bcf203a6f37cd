"""The ``surprise-memory`` command as real subprocesses, and its installability with pip.

Every command runs with ``cwd=tmp_path`` and the repository on ``PYTHONPATH`` (never from
the repository root, where ``python -m`` would shadow an installed package).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.config import (
    CameraConfig,
    DisplayConfig,
    FleetConfig,
    NavigationConfig,
    NodeConfig,
    SnapshotConfig,
    iter_settings,
)
from surprise_memory.evaluation import evaluate_gebd, load_ground_truth, load_predictions
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.synthetic import (
    SyntheticScene,
    write_synthetic_bag,
    write_synthetic_video,
)
from surprise_memory.perception.encoders import SYNTHETIC_EMBEDDER_MODEL, TINY_VIDEO_WEIGHTS

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "--weights",
    TINY_VIDEO_WEIGHTS,
    "--embedder-model",
    SYNTHETIC_EMBEDDER_MODEL,
    "--embedder-weights",
    "random",
    "--device",
    "cpu",
    "--clip-frames",
    "8",
    "--window",
    "16",
    "--warmup",
    "8",
    "--nms_seconds",  # the underscore spelling is accepted too
    "0.5",
    "--episode-frames",
    "2",
]


def run(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = env or {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "surprise_memory", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{args[0]} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def processed(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("cli")
    write_synthetic_bag(tmp / "rec", SyntheticScene(seed=2, duration_s=10.0, width=64, height=48))
    proc = run(
        tmp, "process", "rec", "--out", "store", "--pose-topic", "/odom", "--batch", "4", *TINY
    )
    return tmp, proc


def test_help_lists_every_setting_with_its_default() -> None:
    helps = {cmd: run(REPO.parent, cmd, "--help").stdout for cmd in ("process", "goto")}
    # argparse wraps lines, also at hyphens
    text, goto = ("".join(helps[cmd].split()) for cmd in ("process", "goto"))
    excluded = {"store_path", "odom_topic", "pose_covariance_topic"}
    # the live nodes' own: diagnostics, displays, the camera subscription and its loss,
    # the bag recorder's snapshot trigger, the fleet link (offline runs write directly),
    live_only = (NodeConfig, DisplayConfig, CameraConfig, SnapshotConfig, FleetConfig)
    for _cls, spec in iter_settings():  # every setting but the live nodes' own
        if spec.name in excluded or _cls in live_only:
            continue
        where = goto if _cls is NavigationConfig else text  # goals: goto's settings
        assert "--" + spec.name.replace("_", "-") in where, spec.name
        assert "".join(f"(default: {spec.default!r})".split()) in where, spec.name
    assert "--batch" in text and "--weights" in text and "--pose-topic" in text
    assert "--standoff" in goto
    # one default per option: a setting's option parses to None, which is no default
    assert "(default:None)" not in text and "(default:None)" not in goto


def test_process_then_query_and_report(
    processed: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    tmp, proc = processed
    store = tmp / "store"
    assert "episodes per minute" in proc.stdout.replace("per minute", "episodes per minute")
    assert "frames/s" in proc.stdout and "untrained" in proc.stdout.lower()
    assert (store / "scores.csv").is_file()
    run_record = json.loads((store / "run.json").read_text())
    assert run_record["status"] == "complete" and run_record["untrained"] is True
    assert run_record["settings"]["encoder"]["encoder_batch"] == 4
    assert run_record["settings"]["gate"]["nms_seconds"] == 0.5
    events = run_record["events"]
    assert events, "the scene's scripted events should trigger"

    # beside the episodes, the place keyframes the live memory node would have kept on
    # the recording's odometry (its first frame's place among them)
    with EpisodeStore(store, read_only=True) as st:
        only = RetrievalQuery(kinds=frozenset({PLACE}), max_results=100)
        places = {h.episode.id: h.episode for h in st.retrieve(only)}
    assert run_record["summary"]["place_keyframes"] == len(places) > 0
    assert min(p.stamp_ns for p in places.values()) == run_record["summary"]["first_stamp_ns"]
    assert all(p.pose_valid and len(p.frame_uris()) == 1 for p in places.values())
    assert "place keyframes" in proc.stdout
    out = run(tmp, "query", "store", "--start", "0", "--end", "100", "-k", "50", "--json")
    every = json.loads(out.stdout)["hits"]
    assert {h["id"] for h in every} >= set(places)
    hits = [h for h in every if h["id"] not in places]
    assert sorted(h["stamp_ns"] for h in hits) == sorted(e["stamp_ns"] for e in events)
    assert all(h["pose_valid"] and len(h["frames"]) == 2 for h in hits)
    first = min(h["time_s"] for h in hits)
    # one time origin: the first frame of the run, persisted in the store, shared by the
    # query command and the agent tool (the report's times are checked in test_report)
    t0 = run_record["summary"]["first_stamp_ns"]
    assert json.loads(out.stdout)["origin_ns"] == t0
    with EpisodeStore(store, read_only=True) as st:
        assert st.origin_ns == t0
        agent = EpisodicMemoryTool(st).execute(start_time=0, max_results=20)
    earliest = min(h["time_s"] for h in every)  # the first frame's place: 0.0
    assert min(e["time"] for e in agent["episodes"]) == pytest.approx(earliest, abs=1e-3)
    # a window holding only the first event, in relative seconds and in absolute ns
    one = run(
        tmp, "query", "store", "--start", f"{first - 0.05}", "--end", f"{first + 0.05}s", "--json"
    )
    assert [h["time_s"] for h in json.loads(one.stdout)["hits"]] == [first]
    ns = t0 + round(first * 1e9)
    one = run(tmp, "query", "store", "--start", f"{ns}ns", "--end", f"{ns}ns", "--json")
    assert len(json.loads(one.stdout)["hits"]) == 1
    x, y, _ = hits[0]["position"]
    near = run(tmp, "query", "store", "--near", f"{x},{y}", "--radius", "0.01", "--json")
    assert hits[0]["id"] in [h["id"] for h in json.loads(near.stdout)["hits"]]
    table = run(tmp, "query", "store", "--start", "0")
    assert "surprise" in table.stdout

    refused = run(tmp, "query", "store", "--text", "a person", check=False)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "untrained" in lines[0] and "Traceback" not in refused.stderr

    rep = run(tmp, "report", "store", "--out", "out/r.html")
    assert (tmp / "out" / "r.html").is_file() and (tmp / "out" / "r.png").is_file()
    assert "report" in rep.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["process", "missing.bag", "--out", "s"], "does not exist"),
        (["process", "notes.txt", "--out", "s", "--gamma", "-1"], "gamma=-1.0"),
        (["process", "notes.txt", "--out", "s", *TINY], "of no known kind"),
        (["query", "nowhere"], "does not exist"),
        (["report", "."], "run.json"),
        (["eval-gebd", "--annotations", "missing.pkl", "--videos", "."], "missing.pkl"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "notes.txt").write_text("not a recording\n")
    proc = run(tmp_path, *args, check=False)
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("surprise-memory: error")]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_eval_gebd_on_a_tiny_fixture(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    gt = {}
    for i, vid in enumerate(("vidA", "vidB")):
        scene = SyntheticScene(seed=10 + i, duration_s=6.0, width=64, height=48)
        write_synthetic_video(videos / f"{vid}.mp4", scene)
        times = [round(e.start_s, 2) for e in scene.scripted_events]
        gt[vid] = {
            "fps": scene.fps,
            "num_frames": scene.frame_count,
            "video_duration": scene.duration_s,
            "f1_consis_avg": 0.8,
            "substages_timestamps": [times, times[:2]],
        }
    gt["vidC"] = {**gt["vidA"], "f1_consis_avg": 0.1}  # skipped by the protocol, no file
    (tmp_path / "gt.pkl").write_bytes(pickle.dumps(gt))
    proc = run(
        tmp_path,
        "eval-gebd",
        "--annotations",
        "gt.pkl",
        "--videos",
        "videos",
        "--out",
        "results.json",
        "--save-predictions",
        "pred",
        "--weights",
        TINY_VIDEO_WEIGHTS,
        "--device",
        "cpu",
        "--clip-frames",
        "8",
        "--no-progress",
    )
    out = proc.stdout
    assert "GEBD causal" in out and "GEBD offline" in out
    assert "published" in out and "0.833" in out and "measured" in out
    assert "random:tiny" in out and "NOTE: measured with random" in out
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["results"]) == {"causal", "offline"}
    assert results["detector"]["window"] == 16  # the GEBD adapter's default
    truth = load_ground_truth(tmp_path / "gt.pkl")
    for mode in ("causal", "offline"):
        preds = load_predictions(tmp_path / f"pred.{mode}.pkl")
        assert set(preds) == {"vidA", "vidB"}
        expected = evaluate_gebd(truth, preds).as_dict()
        assert results["results"][mode]["f1"] == pytest.approx(expected["f1"])
        assert results["results"][mode]["videos"]["skipped"] == 1
    # evaluating saved predictions gives the same numbers without any model
    again = run(
        tmp_path, "eval-gebd", "--annotations", "gt.pkl", "--predictions", "pred.causal.pkl"
    )
    assert f"{results['results']['causal']['mean']['f1']:.3f}" in again.stdout


def test_pip_install_gives_the_command(tmp_path: Path) -> None:
    """A wheel built from the sources holds the package, its data and the console script.

    Installed (``--no-deps``) into a fresh venv whose site-packages reaches this
    interpreter's only through a ``.pth`` appended *after* its own (for torch & co., which a
    test must not download), ``surprise-memory --help`` runs from the wheel's copy.
    """
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(
        REPO / "surprise_memory",
        src / "surprise_memory",
        ignore=shutil.ignore_patterns("__pycache__", "msg", "srv", "_surprise_memory*"),
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", "dist", "./src"],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=180,
    )
    (wheel,) = (tmp_path / "dist").glob("surprise_memory-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        assert "surprise-memory = surprise_memory.cli:main" in zf.read(entry).decode()
    for needed in (
        "surprise_memory/cli/__init__.py",
        "surprise_memory/config/schema.py",
        "surprise_memory/__main__.py",
        "surprise_memory/offline/report.py",
        "surprise_memory/memory/store/sqlite.py",
        "surprise_memory/browser/static/index.html",  # the memory browser's page (package data)
        "surprise_memory/browser/static/app.js",
        "surprise_memory/browser/static/style.css",
    ):
        assert needed in names
    assert any(
        n.startswith("surprise_memory/perception/encoders/open_clip_configs/")
        and n.endswith(".json")
        for n in names
    )

    # the venv's own pip (ensurepip's, offline), not `pip --python` (pip >= 22.3): a robot's
    # is older (Ubuntu 22.04 seeds new venvs with pip 22.0.2)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    py = venv / "bin" / "python"
    subprocess.run(
        [py, *pip[1:], "install", "--no-deps", "--no-index", str(wheel)],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=180,
    )
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # every site folder of this interpreter: a robot's venv (--system-site-packages) takes
    # numpy & co. from the system's dist-packages, not from its own purelib
    (Path(purelib) / "zz_project_venv.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    cmd = venv / "bin" / "surprise-memory"
    assert cmd.is_file()
    proc = subprocess.run(
        [cmd, "--help"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "process" in proc.stdout and "eval-gebd" in proc.stdout
    where = subprocess.run(
        [py, "-c", "import surprise_memory.cli as c; print(c.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(venv)), where


@pytest.mark.ros  # the colcon install: the main stage only
def test_the_command_is_on_path_in_the_colcon_install() -> None:
    # issue 12, item 12: after `source install/setup.bash` (tools/activate.sh) the README's
    # `surprise-memory ...` lines work as written
    exe = shutil.which("surprise-memory")
    assert exe is not None, "surprise-memory is not on PATH in the sourced colcon install"
    prefixes = os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
    assert any(Path(exe).resolve().is_relative_to(Path(p).resolve()) for p in prefixes if p)
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "process" in out.stdout and "query" in out.stdout
