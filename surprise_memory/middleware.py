"""The middleware profile for large camera frames: which file, which variables, for which ROS.

Fast DDS (the default RMW of Humble, Jazzy and Kilted) sends a message between two
processes of one host through the *publisher's* shared-memory segment, 512 KiB by
default: a 640x480 ``rgb8`` image (921,600 bytes) does not fit, goes in fragments that
overwrite each other in the segment, and most frames are lost (measured: 19% delivered at
30 Hz; benchmarks/RESULTS.md). The shipped ``config/fastdds_large_frames.xml`` gives every
participant a 16 MiB segment (a few 1080p rgb8 frames) and keeps UDPv4 for discovery and
other hosts. It must reach the **camera driver's** process (the publisher of the frames):
on our own nodes alone it changes nothing for the frames they receive. The launch file
gives it to our nodes (their retrieval answers with images are large too), and
doc/guides/large-frames.md says what the robot sets for its driver.

Fast DDS reads the file named by ``FASTDDS_DEFAULT_PROFILES_FILE`` (3.x: Kilted and later)
or ``FASTRTPS_DEFAULT_PROFILES_FILE`` (2.x: Humble's 2.6, Jazzy's 2.14; Kilted still reads
it, with a deprecation warning). ROS-free, so the launch file, the benchmarks and the tests
share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from surprise_memory.errors import ConfigError

__all__ = [
    "FASTDDS_PROFILE",
    "PROFILE_VARIABLES",
    "profile_environment",
    "profile_variables",
    "shipped_profile",
]

FASTDDS_PROFILE = "fastdds_large_frames.xml"
"""The shipped Fast DDS profile, in the package's ``share/<pkg>/config`` (and ``config/``)."""

PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
"""The variables that name a Fast DDS profile file (3.x, 2.x)."""

_FAST_DDS_2 = frozenset({"humble", "iron", "jazzy"})  # ROS distributions with Fast DDS 2.x


def shipped_profile(config_dir: str | Path) -> Path:
    """The shipped profile in a ``config`` folder (installed share, or the source tree)."""
    return Path(config_dir) / FASTDDS_PROFILE


def profile_variables(path: str | Path, distro: str | None) -> dict[str, str]:
    """The variables that make Fast DDS read ``path`` on a ROS distribution.

    Args:
        path: The profile file.
        distro: ``ROS_DISTRO`` (None or unknown: Fast DDS 3.x, as in Kilted and later).

    Returns:
        ``FASTDDS_DEFAULT_PROFILES_FILE``, plus ``FASTRTPS_DEFAULT_PROFILES_FILE`` where
        Fast DDS is 2.x (Humble, Iron, Jazzy); Kilted's 3.x warns that the latter is
        deprecated, so it is not set there.

    """
    variables = {PROFILE_VARIABLES[0]: str(path)}
    if (distro or "").lower() in _FAST_DDS_2:
        variables[PROFILE_VARIABLES[1]] = str(path)
    return variables


def profile_environment(
    choice: str, config_dir: str | Path, environ: Mapping[str, str]
) -> dict[str, str]:
    """The environment our nodes get for the ``fastdds_profile`` launch argument.

    Args:
        choice: ``auto`` (the profile the environment already names, as a robot-wide
            setting does, else the shipped one), ``none`` or empty (leave the environment
            as it is), or the path of a profile file.
        config_dir: Where the shipped profile lies.
        environ: The launch's environment (``RMW_IMPLEMENTATION``, ``ROS_DISTRO`` and the
            profile variables are read).

    Returns:
        Variables to add to the nodes' environment (empty: nothing to add, also with an
        RMW other than Fast DDS, where a Fast DDS profile means nothing).

    Raises:
        ConfigError: A given profile file does not exist.

    """
    choice = choice.strip()
    rmw = environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") or "rmw_fastrtps_cpp"
    if choice.lower() in ("", "none") or not rmw.startswith("rmw_fastrtps"):
        return {}
    if choice.lower() == "auto":
        if any(environ.get(name) for name in PROFILE_VARIABLES):
            return {}  # the robot's own profile stands
        path = shipped_profile(config_dir)
    else:
        path = Path(choice).expanduser()
    if not path.is_file():
        raise ConfigError(f"fastdds_profile={choice!r}: no such file {path}")
    return profile_variables(path, environ.get("ROS_DISTRO"))
