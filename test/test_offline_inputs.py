"""Many inputs: folders, globs and @FILE lists expanded to recordings; keys; robot ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from surprise_memory.errors import InputError
from surprise_memory.offline.inputs import (
    RobotIdMap,
    bag_robot_id,
    expand_inputs,
    folder_robot_id,
    is_many,
    recording_path,
    resolve_robot_id,
)
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag

SCENE = SyntheticScene(seed=0, duration_s=1.0, width=16, height=16)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fleet/{a/r1 (rosbag2, robot_id "alpha" in metadata), a/r2.mcap-folder, b/x.bag,
    b/deep/v.mp4, notes.txt, .hidden/r.bag} and a lone video."""
    root = tmp_path_factory.mktemp("inputs")
    fleet = root / "fleet"
    (fleet / "a").mkdir(parents=True)
    write_synthetic_bag(fleet / "a/r1", SCENE, custom_data={"robot_id": "alpha"})
    write_synthetic_bag(fleet / "a/r2", SCENE, storage="mcap")
    (fleet / "b/deep").mkdir(parents=True)
    write_synthetic_bag(fleet / "b/x.bag", SCENE, storage="ros1")
    (fleet / "b/deep/v.mp4").write_bytes(b"not decoded here")
    (fleet / "notes.txt").write_text("not a recording\n")
    (fleet / ".hidden").mkdir()
    (fleet / ".hidden/r.bag").write_bytes(b"skipped")
    (root / "lone.mkv").write_bytes(b"video")
    return root


def keys(found: list) -> list[str]:
    return [f.key for f in found]


def test_a_folder_is_searched_at_every_depth_and_a_bag_folder_is_one_recording(
    tree: Path,
) -> None:
    found = expand_inputs([str(tree / "fleet")])
    assert keys(found) == ["a/r1", "a/r2", "b/deep/v.mp4", "b/x.bag"]
    assert found[0].path == (tree / "fleet/a/r1").resolve() and found[0].path.is_absolute()
    # a storage file stands for its rosbag2 folder; a recording given alone keeps its name
    one = expand_inputs([str(tree / "fleet/a/r2/r2.mcap")])
    assert [(f.path.name, f.key) for f in one] == [("r2", "r2")]
    assert keys(expand_inputs([str(tree / "lone.mkv")])) == ["lone.mkv"]


def test_globs_and_lists_expand_in_order_once_each(tree: Path) -> None:
    found = expand_inputs([str(tree / "fleet/*/r*"), str(tree / "fleet/a/r1")])
    assert keys(found) == ["a/r1", "a/r2"]  # the repeat of a/r1 is dropped
    deep = expand_inputs([str(tree / "fleet/**/*.mp4")])
    assert keys(deep) == ["b/deep/v.mp4"]
    listing = tree / "list.txt"
    listing.write_text("# the lone video first\nlone.mkv\n\nfleet/b   # a folder\n")
    assert keys(expand_inputs([f"@{listing}"])) == ["lone.mkv", "deep/v.mp4", "x.bag"]
    assert keys(expand_inputs([str(tree / "fleet")], videos_only=True)) == ["b/deep/v.mp4"]


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda t: [str(t / "missing")], "does not exist"),
        (lambda t: [str(t / "fleet/notes.txt")], "of no known kind"),
        (lambda t: [str(t / "fleet/*.none")], "names no recording"),
        (lambda t: [f"@{t / 'nolist.txt'}"], "cannot read the list"),
        (lambda t: [str(t / "fleet/a/r1"), str(t / "fleet/a/r2"), str(t / "other/r1")], "both"),
    ],
)
def test_bad_inputs_are_refused_with_the_reason(tree: Path, make: object, needle: str) -> None:
    (tree / "other/r1").mkdir(parents=True, exist_ok=True)
    (tree / "other/r1/metadata.yaml").write_text("not read here\n")
    with pytest.raises(InputError, match=needle):
        expand_inputs(make(tree))  # type: ignore[operator]


def test_is_many_tells_one_recording_from_a_job(tree: Path) -> None:
    assert not is_many([str(tree / "fleet/a/r1")])
    assert not is_many(["missing.bag"])  # the one-recording command reports it
    assert is_many([str(tree / "fleet")]) and is_many(["a", "b"])
    assert is_many(["fleet/*"]) and is_many(["@list.txt"])
    assert recording_path(tree / "fleet") is None
    assert recording_path(tree / "fleet/a/r1/r1.db3") == tree / "fleet/a/r1"


def test_robot_ids_by_precedence(tree: Path) -> None:
    r1, r2 = (tree / "fleet/a/r1").resolve(), (tree / "fleet/a/r2").resolve()
    mapping_file = tree / "robots.txt"
    mapping_file.write_text(f"fleet/a/r2  mapped-2   # a recording\n{tree}/fleet/b  bee\n")
    mapping = RobotIdMap.load(mapping_file)
    assert resolve_robot_id(r2, mapping, "given") == ("mapped-2", "mapping")
    assert resolve_robot_id(r1, mapping, "given") == ("given", "option")
    assert resolve_robot_id(r1, mapping, None) == ("alpha", "metadata")
    assert resolve_robot_id(r2, None, None) == ("a", "folder")
    x = (tree / "fleet/b/x.bag").resolve()
    assert resolve_robot_id(x, mapping, None) == ("bee", "mapping")  # below a mapped folder
    globbed = RobotIdMap([(str(tree / "fleet/*/r?"), "g")])
    assert globbed.lookup(r1) == "g" and globbed.lookup(x) is None
    assert bag_robot_id(r2) is None and bag_robot_id(x) is None
    assert folder_robot_id(Path("/data/robot 7 (old)/run")) == "robot_7__old_"


def test_a_bad_robot_id_names_its_source(tree: Path) -> None:
    bad = tree / "bad.txt"
    bad.write_text("fleet/a  no spaces allowed!\n")
    with pytest.raises(InputError, match=r"bad.txt:1: robot id"):
        RobotIdMap.load(bad)
    with pytest.raises(InputError, match="expected 'PATTERN ROBOT_ID'"):
        bad.write_text("lonely\n")
        RobotIdMap.load(bad)
    rec = tree / "badmeta"
    write_synthetic_bag(rec, SCENE, custom_data={"robot_id": "-x"})
    with pytest.raises(InputError, match=r"custom_data.robot_id"):
        bag_robot_id(rec)
