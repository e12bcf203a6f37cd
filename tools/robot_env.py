"""The robot set-up's planner and report (tools/setup_robot.sh runs it; standard library only).

It runs under the robot venv's interpreter (made with ``--system-site-packages``) before
anything is installed there, and decides:

* what to keep: the interpreter's numpy (ROS 2's compiled message modules and cv_bridge from
  apt are built against it; a numpy 2 over a numpy 1 build fails at import), and torch with
  torchvision where the robot already has them (on a Jetson, NVIDIA's CUDA build: PyPI's
  aarch64 torch would silently make the robot CPU-only). Each becomes an ``==`` line of the
  constraints file, which every later ``pip install -c`` into the venv keeps honouring.
* what to install: the package's own ranges (setup.cfg's ``install_requires``, the one
  place they are written), torch and torchvision pinned (requirements/torch.txt) where the
  robot has none, and OpenCV's wheel only where the system has no ``cv2`` (python3-opencv).

``report`` prints, for every requirement, its version and whether it was kept from the
system or installed into the venv, then the venv's other (dependency) packages.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

TORCH_NAMES = ("torch", "torchvision")
"""Kept where the robot has them, else installed from requirements/torch.txt's pins."""

OPENCV_WHEEL = "opencv-python-headless"
"""Installed only where the system has no ``cv2``."""

TRANSFORMERS_5_MIN_TORCH = (2, 6)
"""transformers 5 disables a PyTorch older than 2.6 at import (VJEPA2Model is then missing):
under a kept older torch (JetPack 6's NVIDIA builds are 2.4 and 2.5) transformers stays at 4."""


def _name(spec: str) -> str:
    """The distribution name of a requirement line, normalised (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if match is None:
        raise SystemExit(f"robot_env: no package name in {spec!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version: '2.5.0a0+872d972e41.nv24.08' -> (2, 5, 0)."""
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def _spec_lines(text: str) -> list[str]:
    """Requirement lines, comments and blank lines dropped."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def package_ranges(setup_cfg: Path) -> list[str]:
    """The ``install_requires`` lines of setup.cfg."""
    cfg = configparser.ConfigParser()
    cfg.read(setup_cfg, encoding="utf-8")
    return _spec_lines(cfg.get("options", "install_requires"))


def constraints_for(installed: dict[str, str | None], torch_pins: list[str]) -> list[str]:
    """The constraint lines that keep what the robot's Python has.

    Args:
        installed: Version of numpy, torch and torchvision in the interpreter (None: none).
        torch_pins: The pins used where it has no torch (requirements/torch.txt).

    Returns:
        ``numpy==`` the system's; torch and torchvision ``==`` the robot's own, or the
        pins; ``transformers<5`` under a kept torch older than 2.6.
    """
    keep = [] if installed.get("numpy") is None else [f"numpy=={installed['numpy']}"]
    torch = installed.get("torch")
    if torch is None:
        return keep + torch_pins  # the pins, so that a later install keeps them too
    keep += [f"{n}=={v}" for n in TORCH_NAMES if (v := installed.get(n)) is not None]
    if release(torch) < TRANSFORMERS_5_MIN_TORCH:
        keep.append("transformers<5  # transformers 5 needs torch >= 2.6")
    return keep


def requirements_for(ranges: list[str], torch_pins: list[str] | None, has_cv2: bool) -> list[str]:
    """The requirement lines to install under the constraints.

    Args:
        ranges: The package's ranges (setup.cfg).
        torch_pins: torch and torchvision pinned, or None where the robot has its own.
        has_cv2: The interpreter already imports ``cv2`` (python3-opencv, JetPack's).

    Returns:
        torch and torchvision first (pinned, or by name: the constraints keep the robot's),
        then the ranges without them, and without OpenCV's wheel where ``cv2`` is there.
    """
    wanted = list(TORCH_NAMES) if torch_pins is None else list(torch_pins)
    for spec in ranges:
        name = _name(spec)
        if name in TORCH_NAMES or (name == OPENCV_WHEEL and has_cv2):
            continue
        wanted.append(spec)
    return wanted


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def plan(setup_cfg: Path, torch_pins: Path, constraints: Path) -> list[str]:
    """Write the constraints file for this interpreter; return the requirement lines to install.

    Args:
        setup_cfg: The package's setup.cfg (its ranges).
        torch_pins: The torch/torchvision pins used where the robot has no torch.
        constraints: Where to write the constraints file.

    Returns:
        The requirements to hand to ``pip install -c constraints``.
    """
    installed = {name: _installed(name) for name in ("numpy", *TORCH_NAMES)}
    if installed["numpy"] is None:
        print(
            "setup_robot: WARNING: no numpy in this Python; pip will install one. With ROS 2 "
            "from apt, install python3-numpy first (its message modules are built against it).",
            file=sys.stderr,
        )
    pins = _spec_lines(torch_pins.read_text(encoding="utf-8"))
    header = f"# kept from {sys.executable}'s system packages (tools/robot_env.py)"
    lines = [header, *constraints_for(installed, pins)]
    constraints.write_text("\n".join(lines) + "\n", encoding="utf-8")
    has_cv2 = importlib.util.find_spec("cv2") is not None
    own_torch = installed["torch"] is not None
    return requirements_for(package_ranges(setup_cfg), None if own_torch else pins, has_cv2)


def report(setup_cfg: Path) -> None:
    """Print each requirement's version, kept (system) or installed (venv), then the rest."""
    venv = Path(sys.prefix).resolve()
    print(f"setup_robot: {sys.executable} (Python {sys.version.split()[0]})")
    listed = {"pip", "setuptools"}  # the venv's own seed, not worth a line
    for name in dict.fromkeys([*TORCH_NAMES, *map(_name, package_ranges(setup_cfg))]):
        if name == OPENCV_WHEEL and _installed(name) is None:
            import cv2  # the system's OpenCV (python3-opencv) has no wheel metadata

            print(f"  {'kept':<10} {'cv2':<17} {cv2.__version__:<14} {Path(cv2.__file__).parent}")
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print(f"  {'MISSING':<10} {name}")
            continue
        listed.add(_name(dist.metadata["Name"]))
        where = Path(str(dist.locate_file(""))).resolve()
        how = "installed" if where.is_relative_to(venv) else "kept"
        print(f"  {how:<10} {name:<17} {dist.version:<14} {where}")
    own = [p for p in sys.path if p and Path(p).resolve().is_relative_to(venv)]
    others = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in metadata.distributions(path=own)
        if _name(d.metadata["Name"]) not in listed
    )
    print(f"  installed as their dependencies ({len(others)}): {' '.join(others)}")


def main() -> None:
    """Command line: ``plan`` or ``report`` (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("plan", "report"))
    parser.add_argument("--setup-cfg", type=Path, required=True)
    parser.add_argument("--torch-pins", type=Path)
    parser.add_argument("--constraints", type=Path)
    args = parser.parse_args()
    if args.command == "report":
        report(args.setup_cfg)
        return
    if args.torch_pins is None or args.constraints is None:
        parser.error("plan needs --torch-pins and --constraints")
    print("\n".join(plan(args.setup_cfg, args.torch_pins, args.constraints)))


if __name__ == "__main__":
    main()
