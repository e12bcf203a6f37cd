"""The shipped Fast DDS profile for large frames, and the environment the launch file gives.

Whether the profile makes frames arrive is measured over DDS by the soak
(``test/test_soak.py``) and ``benchmarks/bench_frame_delivery.py``; here: what it holds,
and which variables name it for which ROS distribution and RMW.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from surprise_memory.errors import ConfigError
from surprise_memory.middleware import (
    FASTDDS_PROFILE,
    profile_environment,
    profile_variables,
    shipped_profile,
)

CONFIG = Path(__file__).resolve().parents[1] / "config"
NS = {"dds": "http://www.eprosima.com"}


def test_the_shipped_profile_gives_every_participant_a_segment_for_several_large_frames() -> None:
    root = ET.parse(shipped_profile(CONFIG)).getroot()
    participant = root.find(".//dds:participant", NS)
    assert participant is not None and participant.get("is_default_profile") == "true"
    assert participant.findtext(".//dds:useBuiltinTransports", namespaces=NS) == "false"
    used = [t.text for t in participant.findall(".//dds:userTransports/dds:transport_id", NS)]
    kinds = {
        d.findtext("dds:transport_id", namespaces=NS): d
        for d in root.findall(".//dds:transport_descriptor", NS)
    }
    assert sorted(kinds[t].findtext("dds:type", namespaces=NS) for t in used) == ["SHM", "UDPv4"]
    shm = next(kinds[t] for t in used if kinds[t].findtext("dds:type", namespaces=NS) == "SHM")
    segment = int(shm.findtext("dds:segment_size", namespaces=NS) or 0)
    assert segment >= 2 * 1920 * 1080 * 3  # two 1080p rgb8 frames; five 720p, 18 VGA


def test_auto_gives_the_shipped_profile_unless_the_robot_names_its_own(tmp_path: Path) -> None:
    shipped = str(CONFIG / FASTDDS_PROFILE)
    assert profile_environment("auto", CONFIG, {}) == {"FASTDDS_DEFAULT_PROFILES_FILE": shipped}
    assert profile_environment(" auto ", CONFIG, {"ROS_DISTRO": "jazzy"}) == {
        "FASTDDS_DEFAULT_PROFILES_FILE": shipped,
        "FASTRTPS_DEFAULT_PROFILES_FILE": shipped,
    }
    own = {"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/robot/dds.xml"}
    assert profile_environment("auto", CONFIG, own) == {}  # inherited as it is
    mine = tmp_path / "mine.xml"
    mine.write_text("<dds/>")
    assert profile_environment(str(mine), CONFIG, own) == {
        "FASTDDS_DEFAULT_PROFILES_FILE": str(mine)
    }
    assert profile_environment("none", CONFIG, {}) == {}
    assert profile_environment("", CONFIG, {}) == {}


def test_no_fast_dds_profile_for_another_rmw_and_an_error_for_a_missing_file() -> None:
    cyclone = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert profile_environment("auto", CONFIG, cyclone) == {}
    assert profile_environment("auto", CONFIG, {"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"})
    with pytest.raises(ConfigError, match="no such file"):
        profile_environment("/nowhere/profile.xml", CONFIG, {})
    with pytest.raises(ConfigError, match="no such file"):
        profile_environment("auto", "/nowhere", {})


@pytest.mark.parametrize(
    ("distro", "variables"),
    [
        ("humble", 2),
        ("jazzy", 2),
        ("kilted", 1),
        ("rolling", 1),
        (None, 1),  # the PyPI wheels here set no ROS_DISTRO: Fast DDS 3.x
    ],
)
def test_fast_dds_2_reads_the_old_variable_and_3_the_new(
    distro: str | None, variables: int
) -> None:
    found = profile_variables("/p.xml", distro)
    assert found["FASTDDS_DEFAULT_PROFILES_FILE"] == "/p.xml"
    assert len(found) == variables
