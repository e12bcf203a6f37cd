"""The robot install route: what tools/setup_robot.sh keeps and installs, which tests the
robot stage runs (``--ros-free``), and the rclpy API of the oldest supported distro.

tools/test_robot.sh runs the set-up itself under Debian's system Python and the ROS-free
suite under the venv it makes; these tests check the decisions behind it on their own.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from ros_free import ROS_MODULES, ros_imports

REPO = Path(__file__).resolve().parent.parent
TEST_DIR = REPO / "test"


def _robot_env() -> ModuleType:
    spec = importlib.util.spec_from_file_location("robot_env", REPO / "tools" / "robot_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


robot_env = _robot_env()
PINS = ["torch==2.14.1", "torchvision==0.29.1"]


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        # Debian 12 / Ubuntu with no torch: the system's numpy kept, torch from the pins
        (
            {"numpy": "1.24.2", "torch": None, "torchvision": None},
            ["numpy==1.24.2", *PINS],
        ),
        # Jetson, JetPack 6: NVIDIA's torch 2.5 kept, so transformers stays at 4
        (
            {"numpy": "1.21.5", "torch": "2.5.0a0+872d972e41.nv24.08", "torchvision": "0.20.0a0"},
            [
                "numpy==1.21.5",
                "torch==2.5.0a0+872d972e41.nv24.08",
                "torchvision==0.20.0a0",
                "transformers<5  # transformers 5 needs torch >= 2.6",
            ],
        ),
        # a robot's own newer torch (no torchvision yet: pip resolves one for it)
        ({"numpy": "1.26.4", "torch": "2.8.0+cu126"}, ["numpy==1.26.4", "torch==2.8.0+cu126"]),
        # no numpy at all (not a ROS machine): nothing to keep but torch
        ({"numpy": None, "torch": None}, PINS),
    ],
)
def test_constraints_keep_what_the_robot_has(
    installed: dict[str, str | None], expected: list[str]
) -> None:
    assert robot_env.constraints_for(installed, PINS) == expected


@pytest.mark.parametrize(
    ("version", "release"),
    [
        ("2.14.1", (2, 14, 1)),
        ("2.5.0a0+872d972e41.nv24.08", (2, 5, 0)),
        ("2.6.0+cu124", (2, 6, 0)),
        ("2.10", (2, 10)),
        ("garbage", ()),
    ],
)
def test_release_reads_local_and_pre_release_versions(version: str, release: tuple[int]) -> None:
    assert robot_env.release(version) == release


def test_requirements_are_setup_cfg_ranges_with_torch_and_opencv_apart() -> None:
    ranges = robot_env.package_ranges(REPO / "setup.cfg")
    names = [robot_env._name(r) for r in ranges]
    assert {"numpy", "torch", "transformers", "opencv-python-headless"} <= set(names)
    own_torch_and_cv2 = robot_env.requirements_for(ranges, None, has_cv2=True)
    assert own_torch_and_cv2[:2] == ["torch", "torchvision"]  # the constraints keep the robot's
    assert not any(r.startswith(("opencv", "torch>", "torchvision>")) for r in own_torch_and_cv2)
    assert "transformers>=4.57" in own_torch_and_cv2
    bare = robot_env.requirements_for(ranges, PINS, has_cv2=False)
    assert bare[:2] == PINS
    assert sum(r.startswith("opencv-python-headless") for r in bare) == 1


RAISED_ABOVE_APT = {"pillow": (9, 1)}
"""Floors above Ubuntu 22.04's apt version, so that the set-up step installs a newer one into
the venv: transformers uses PIL.Image.Resampling (Pillow 9.1); 22.04 has 9.0.1."""


def test_setup_cfg_floors_admit_the_robots_apt_versions() -> None:
    # Ubuntu 22.04 (Humble, JetPack 6) has numpy 1.21, matplotlib 3.5, PyYAML 5.4;
    # JetPack 6's NVIDIA torch is a 2.4/2.5 pre-release build: a floor above them would make
    # pip replace the system's package (numpy: break ROS's compiled modules). Pillow is the
    # exception, on purpose (CI's 22.04 stage shows the encoder failing with 9.0.1)
    floors = {}
    for spec in robot_env.package_ranges(REPO / "setup.cfg"):
        name, _, floor = spec.partition(">=")
        floors[robot_env._name(name)] = floor
    have = {
        "numpy": "1.21.5",
        "pillow": "9.0.1",
        "matplotlib": "3.5.1",
        "pyyaml": "5.4.1",
        "torch": "2.4.0a0",
        "torchvision": "0.19.0a0",
    }
    for name, version in have.items():
        if name in RAISED_ABOVE_APT:
            assert robot_env.release(floors[name]) == RAISED_ABOVE_APT[name], name
            assert robot_env.release(floors[name]) > robot_env.release(version), name
            continue
        assert robot_env.release(floors[name]) <= robot_env.release(version), (name, floors[name])
        if "a0" in version:  # a pre-release build passes only a floor that names one
            assert "a0" in floors[name], (name, floors[name])


def test_plan_writes_the_constraints_of_this_interpreter(tmp_path: Path) -> None:
    # the real command line, under this interpreter: it keeps this numpy and this torch
    constraints = tmp_path / "constraints.txt"
    out = subprocess.run(
        [
            *(sys.executable, str(REPO / "tools" / "robot_env.py"), "plan"),
            *("--setup-cfg", str(REPO / "setup.cfg")),
            *("--torch-pins", str(REPO / "requirements" / "torch.txt")),
            *("--constraints", str(constraints)),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    kept = constraints.read_text().splitlines()
    assert kept[0].startswith("# kept from")
    assert f"numpy=={metadata.version('numpy')}" in kept
    assert f"torch=={metadata.version('torch')}" in kept
    assert out[:2] == ["torch", "torchvision"]  # this interpreter has torch: kept, not pinned
    assert "transformers>=4.57" in out


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_ros_imports_sees_module_level_imports_only(tmp_path: Path) -> None:
    assert ros_imports(_write(tmp_path / "a.py", "import rclpy.node\n")) == ["rclpy.node"]
    assert ros_imports(_write(tmp_path / "b.py", "from surprise_memory.msg import Episode\n"))
    guarded = "try:\n    from sensor_msgs.msg import Image\nexcept ImportError:\n    pass\n"
    assert ros_imports(_write(tmp_path / "c.py", guarded)) == [
        "sensor_msgs.msg",
        "sensor_msgs.msg.Image",
    ]
    lazy = "def test_x():\n    import rclpy\n"  # needs the marker, not the whole module out
    assert ros_imports(_write(tmp_path / "d.py", lazy)) == []
    core = "from surprise_memory.nodes.params_file import one_process_parameters\nimport numpy\n"
    assert ros_imports(_write(tmp_path / "e.py", core)) == []
    assert ros_imports(_write(tmp_path / "f.py", "from surprise_memory.nodes import qos\n"))


CORE_TEST_MODULES = (
    "test_surprise.py",
    "test_gate.py",
    "test_robust.py",
    "test_store.py",
    "test_store_postgres.py",
    "test_retrieval.py",
    "test_sources.py",
    "test_pipeline_offline.py",
    "test_video_encoder.py",
    "test_image_text_embedder.py",
    "test_gebd.py",
    "test_report.py",
    "test_cli.py",
    "test_config.py",
    "test_core_imports.py",
    "test_robot_install.py",
)
"""What the robot stage must run (scorer, gate, store, retrieval, offline sources and
pipeline, encoders, evaluation, report): a ROS import slipping into one would drop it."""


def test_the_package_s_ros_modules_are_left_out() -> None:
    # test_core_imports names the package's modules that need ROS 2; a test importing one
    # cannot run in the robot stage
    from test_core_imports import ROS_MODULES as PACKAGE_ROS_MODULES

    assert {f"surprise_memory.{m}" for m in PACKAGE_ROS_MODULES} <= ROS_MODULES


def test_the_robot_stage_keeps_the_core_tests() -> None:
    leaking = {name: ros_imports(TEST_DIR / name) for name in CORE_TEST_MODULES}
    assert not {k: v for k, v in leaking.items() if v}, "ROS 2 imported at module level"
    assert ros_imports(TEST_DIR / "test_scorer_node.py")  # and the node tests stay out


NEWER_THAN_HUMBLE = frozenset(
    {
        "rclpy.clock_type",
        "rclpy.event_handler",
        "rclpy.logging_service",
        "rclpy.parameter_client",
        "rclpy.parameter_event_handler",
        "rclpy.service_introspection",
        "rclpy.type_description_service",
        "rclpy.type_hash",
    }
)
"""rclpy modules of Jazzy and later that Humble's rclpy lacks (read from ros2/rclpy's
humble and rolling branches); nodes/clock.py imports ``ClockType`` with a guard."""


def _unguarded_imports(tree: ast.Module) -> list[str]:
    """Modules imported outside a ``try`` whose ``except`` catches ImportError."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    names = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return names


def test_no_rclpy_module_newer_than_humble() -> None:
    found = []
    for path in [*(REPO / "surprise_memory").rglob("*.py"), *(REPO / "launch").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.relative_to(REPO)}: {name}"
            for name in _unguarded_imports(tree)
            if name in NEWER_THAN_HUMBLE
        ]
    assert not found, "rclpy API that ROS 2 Humble lacks: guard it (try/except ImportError)"


def test_the_humble_guard_is_seen() -> None:
    guarded = "try:\n    from rclpy.clock_type import ClockType\nexcept ImportError:\n    pass\n"
    assert "rclpy.clock_type" not in _unguarded_imports(ast.parse(guarded))
    bare = "from rclpy.clock_type import ClockType\n"
    assert "rclpy.clock_type" in _unguarded_imports(ast.parse(bare))


def _rosdep_python_keys() -> set[str]:
    import xml.etree.ElementTree as ET

    root = ET.parse(REPO / "package.xml").getroot()
    tags = ("depend", "exec_depend", "test_depend", "build_depend")
    return {e.text.strip() for tag in tags for e in root.iter(tag) if e.text}


def _apt_list(script: Path) -> list[str]:
    """The APT_PACKAGES=(...) array of a shell script."""
    text = script.read_text(encoding="utf-8")
    start = text.index("APT_PACKAGES=(") + len("APT_PACKAGES=(")
    return text[start : text.index(")", start)].split()


def test_the_robot_stage_installs_package_xml_s_rosdep_keys() -> None:
    # tools/test_robot.sh writes by hand what `rosdep install` would bring for the Python
    # keys of package.xml: a key added there must reach the robot stage too
    keys = {k for k in _rosdep_python_keys() if k.startswith("python3-")}
    assert keys >= {"python3-numpy", "python3-yaml", "python3-pil", "python3-pytest"}
    apt = _apt_list(REPO / "tools" / "test_robot.sh")
    assert len(apt) == len(set(apt))
    assert set(apt) == keys | {"python3-venv"}  # and the venv module for the set-up step


def test_the_apt_list_reader_sees_a_missing_key(tmp_path: Path) -> None:
    script = _write(
        tmp_path / "s.sh", "APT_PACKAGES=(python3-venv python3-numpy\n  python3-yaml)\n"
    )
    assert _apt_list(script) == ["python3-venv", "python3-numpy", "python3-yaml"]


LAST_TORCH_WITH_CP310 = (2, 14)
"""torch 2.15 publishes no cp310 wheel: Ubuntu 22.04 and JetPack 6 (Python 3.10) stay below."""


def _pins_for(path: Path, python: str) -> dict[str, str]:
    """name -> version of a requirements file's ``==`` lines whose marker holds on ``python``."""
    pins = {}
    for line in robot_env._spec_lines(path.read_text(encoding="utf-8")):
        spec, _, marker = line.partition(";")
        if marker:
            op, _, version = marker.replace("python_version", "").strip().partition(" ")
            wanted = tuple(int(p) for p in version.strip().strip("\"'").split("."))
            have = tuple(int(p) for p in python.split("."))
            if not {"<": have < wanted, ">=": have >= wanted}[op]:
                continue
        name, _, version = spec.strip().partition("==")
        assert robot_env._name(name) not in pins, f"{path.name}: two pins of {name} on {python}"
        pins[robot_env._name(name)] = version
    return pins


@pytest.mark.parametrize("python", ["3.10", "3.11", "3.12"])
def test_each_python_gets_one_pin_of_each_package(python: str) -> None:
    # the optional parts' files: on 3.10 their `; python_version < "3.11"` fallbacks
    for name in ("browser.txt", "ray.txt", "store.txt", "test.txt", "torch.txt"):
        pins = _pins_for(REPO / "requirements" / name, python)
        assert pins, name
    torch = _pins_for(REPO / "requirements" / "torch.txt", python)["torch"]
    if python == "3.10":  # a torch bump must keep a 3.10 line
        assert robot_env.release(torch)[:2] <= LAST_TORCH_WITH_CP310, torch


def test_python_3_10_gets_its_fallbacks() -> None:
    on310 = _pins_for(REPO / "requirements" / "browser.txt", "3.10")
    on311 = _pins_for(REPO / "requirements" / "browser.txt", "3.11")
    assert on310["starlette"] != on311["starlette"]  # 1.8 and later need Python 3.11
    assert _pins_for(REPO / "requirements" / "test.txt", "3.10")["sphinx"].startswith("8.")


def _platform_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "platform_table", REPO / "tools" / "platform_table.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


platform_table = _platform_table()
GUIDE = REPO / "doc" / "guides" / "robot-setup.md"


def test_the_guide_s_ubuntu_22_04_column_has_every_row_the_stage_checks() -> None:
    # CI's 22.04 stage compares these cells with its venv; a row missing from the guide, or a
    # cell left unfilled, would be reported there: here it is found without that stage
    text = GUIDE.read_text(encoding="utf-8")
    rows, _, index = platform_table.table(text, "Ubuntu 22.04")
    cells = {line.strip("|").split("|")[0].strip(): line for line in rows[2:]}
    have = platform_table.cells()
    assert set(have) <= set(cells)
    doc = {row: platform_table._split(cells[row])[index] for row in have}
    assert doc["Python"] == "3.10"
    assert doc["numpy (kept)"] == "1.21.5 (apt)"  # 22.04's numpy, kept under ROS
    assert doc["Pillow"].endswith("(venv)")  # apt's 9.0.1 lacks Image.Resampling
    assert not doc["optional parts"].startswith("no ")


def test_the_platform_check_reports_a_wrong_cell(tmp_path: Path) -> None:
    have = platform_table.cells()  # this interpreter's, in a table written for it
    assert have["Python"] == "{}.{}".format(*sys.version_info[:2])
    assert have["numpy (kept)"].startswith(metadata.version("numpy") + " (")
    text = "intro\n\n| | Here | There |\n| --- | --- | --- |\n| ROS 2 | Kilted | Humble |\n"
    written = platform_table.write(text, "Here", have)
    assert written.startswith("intro\n") and "| ROS 2 | Kilted | Humble |" in written
    assert platform_table.compare(written, "Here", have) == []
    wrong = written.replace(have["torch"], "9.9.9 (venv)")
    assert platform_table.compare(wrong, "Here", have) == [
        f"torch: the guide says '9.9.9 (venv)', this robot has {have['torch']!r}"
    ]
    doc = _write(tmp_path / "guide.md", wrong)
    tool = str(REPO / "tools" / "platform_table.py")
    proc = subprocess.run(
        [sys.executable, tool, "check", "--column", "Here", doc],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "torch: the guide says" in proc.stdout
