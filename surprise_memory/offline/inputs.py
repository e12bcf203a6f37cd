"""Many recordings for one command: the inputs expanded, each recording named and given its robot.

An input is one of:

* a recording: a rosbag2 folder (``metadata.yaml``) or one of its ``.db3``/``.mcap``
  files, a ROS 1 ``.bag``, or a video file (:data:`~surprise_memory.sources.VIDEO_SUFFIXES`);
* a folder of recordings, searched at every depth (hidden entries skipped; a rosbag2
  folder is one recording, never searched inside);
* a glob (``fleet/*/2024-*``, ``**`` at any depth), whose matches are as above (matches
  that are not recordings, e.g. ground-truth JSON files, are passed over);
* ``@FILE``: a text file listing inputs of the kinds above, one per line (``#`` starts a
  comment; relative paths are relative to the file's folder).

Each recording gets a **key**, its path relative to the input that found it (a folder, or
a glob's fixed part; a recording given by itself keeps its name): the name of its run
folder under the output (``OUT/robot_a/run1``), stable across re-runs of the same
command. Two recordings with one key are refused: their outputs would collide.

Each recording gets a **robot id**, the first of: the mapping file's (``--robot-ids``:
lines ``PATTERN ROBOT_ID``, the pattern a path or glob, a folder standing for every
recording below it); the one given for the whole job (``--robot-id``); the bag's
``custom_data.robot_id`` (what ``ros2 bag record --custom-data robot_id=...`` writes into
``metadata.yaml``); the name of the recording's folder (``fleet/robot_a/run1`` ->
``robot_a``; characters a robot id cannot hold become ``_``).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from surprise_memory.errors import InputError
from surprise_memory.memory.retrieval import check_robot_id
from surprise_memory.sources.bag import BAG_SUFFIXES
from surprise_memory.sources.video import VIDEO_SUFFIXES

__all__ = [
    "FoundRecording",
    "RobotIdMap",
    "bag_robot_id",
    "expand_inputs",
    "folder_robot_id",
    "is_many",
    "recording_path",
    "resolve_robot_id",
]

_GLOB_CHARS = re.compile(r"[*?[]")
_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class FoundRecording:
    """One recording an input named.

    Attributes:
        path: What :func:`~surprise_memory.sources.open_source` opens (absolute): a
            rosbag2 folder, a ``.bag`` or other bag file, or a video file.
        key: Its run folder's name under the output, ``/``-separated.

    """

    path: Path
    key: str


def recording_path(path: Path) -> Path | None:
    """The recording that ``path`` is, or None when it is none (a plain folder, other files).

    A ``.db3``/``.mcap`` file in a rosbag2 folder stands for the folder; one without a
    ``metadata.yaml`` beside it is still a recording (its processing will say what is
    missing).
    """
    if path.is_dir():
        return path if (path / "metadata.yaml").is_file() else None
    suffix = path.suffix.lower()
    if suffix in (".db3", ".mcap") and (path.parent / "metadata.yaml").is_file():
        return path.parent
    if suffix in BAG_SUFFIXES or suffix in VIDEO_SUFFIXES:
        return path
    return None


def is_many(inputs: Sequence[str]) -> bool:
    """Whether these inputs ask for the many-recordings command (not one recording).

    True for several inputs, a glob, an ``@FILE`` list, or a folder that is not itself a
    recording; a single recording (or a path that does not exist, which the one-recording
    command reports) is False.
    """
    if len(inputs) != 1:
        return True
    item = inputs[0]
    if item.startswith("@") or _GLOB_CHARS.search(item):
        return True
    path = Path(item).expanduser()
    return path.is_dir() and recording_path(path) is None


def expand_inputs(inputs: Sequence[str], *, videos_only: bool = False) -> list[FoundRecording]:
    """The recordings the inputs name, in the inputs' order (each folder's by key), once each.

    Args:
        inputs: Recordings, folders, globs and ``@FILE`` lists (see the module doc).
        videos_only: Keep video files only (GEBD's inputs).

    Returns:
        The recordings, duplicates (the same path named twice) dropped.

    Raises:
        InputError: An input does not exist, a glob or folder names no recording, a list
            file cannot be read, or two recordings would share a key.

    """
    found: list[FoundRecording] = []
    for item in _expand_lists(inputs):
        hits = list(_expand_one(item))
        if videos_only:
            hits = [h for h in hits if h.path.suffix.lower() in VIDEO_SUFFIXES]
        if not hits:
            kind = "video" if videos_only else "recording"
            raise InputError(f"input {item!r} names no {kind}")
        found += hits
    seen: dict[Path, FoundRecording] = {}
    by_key: dict[str, Path] = {}
    for rec in found:
        if rec.path in seen:
            continue
        other = by_key.get(rec.key)
        if other is not None:
            raise InputError(
                f"{other} and {rec.path} would both be stored as {rec.key!r}; give their "
                "common parent folder as the input, so that their keys keep the folders apart"
            )
        seen[rec.path] = rec
        by_key[rec.key] = rec.path
    return list(seen.values())


def _expand_lists(inputs: Sequence[str]) -> Iterator[str]:
    for item in inputs:
        if not item.startswith("@"):
            yield item
            continue
        listing = Path(item[1:]).expanduser()
        try:
            lines = listing.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InputError(f"cannot read the list of inputs {str(listing)!r}: {exc}") from exc
        for line in lines:
            entry = line.split("#", 1)[0].strip()
            if entry:
                path = Path(entry).expanduser()
                yield str(path if path.is_absolute() else listing.parent / path)


def _expand_one(item: str) -> Iterator[FoundRecording]:
    if _GLOB_CHARS.search(item):
        base = _glob_base(item)
        matches = sorted(glob.glob(os.path.expanduser(item), recursive=True))
        for match in matches:
            path = Path(match)
            rec = recording_path(path)
            if rec is not None:
                yield _found(rec, base)
            elif path.is_dir():
                yield from _search(path, base)
        return
    path = Path(item).expanduser()
    if not path.exists():
        raise InputError(f"input {item!r} does not exist")
    rec = recording_path(path)
    if rec is not None:
        yield _found(rec, rec.parent)
    elif path.is_dir():
        yield from _search(path, path)
    else:
        raise InputError(
            f"input {item!r} is of no known kind: expected a recording (rosbag2 folder, "
            f"{'/'.join(BAG_SUFFIXES)} file, video {' '.join(VIDEO_SUFFIXES)}), a folder, "
            "a glob or @FILE"
        )


def _glob_base(pattern: str) -> Path:
    """The fixed folder a glob starts from: its parts before the first with a wildcard."""
    parts = Path(os.path.expanduser(pattern)).parts
    fixed: list[str] = []
    for part in parts[:-1]:
        if _GLOB_CHARS.search(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _search(folder: Path, base: Path) -> Iterator[FoundRecording]:
    yield from sorted(_walk(folder, base), key=lambda f: f.key)


def _walk(folder: Path, base: Path) -> Iterator[FoundRecording]:
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(top)
        if here != folder and (here / "metadata.yaml").is_file():
            dirs[:] = []  # a rosbag2 folder is one recording
            yield _found(here, base)
            continue
        for name in sorted(files):
            if name.startswith("."):
                continue
            rec = recording_path(here / name)
            if rec is not None:
                yield _found(rec, base)


def _found(rec: Path, base: Path) -> FoundRecording:
    path = rec.resolve()
    try:
        key = path.relative_to(base.resolve()).as_posix()
    except ValueError:
        key = path.name
    return FoundRecording(path, key if key not in ("", ".") else path.name)


# --------------------------------------------------------------------------------------------
# Robot ids
# --------------------------------------------------------------------------------------------


class RobotIdMap:
    """The ``--robot-ids`` mapping file: ``PATTERN ROBOT_ID`` per line, first match wins.

    A pattern is a path or a glob (relative ones are relative to the file's folder); it
    matches a recording at that path, or any recording below it (a folder).

    Args:
        rules: ``(absolute pattern, robot id)`` in file order.

    """

    def __init__(self, rules: Sequence[tuple[str, str]]) -> None:
        self._rules = list(rules)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RobotIdMap:
        """Read a mapping file.

        Raises:
            InputError: The file cannot be read, a line is not ``PATTERN ROBOT_ID``, or
                a robot id breaks the id rule (the line is named).

        """
        file = Path(path).expanduser()
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InputError(f"cannot read the robot id mapping {str(file)!r}: {exc}") from exc
        rules = []
        for n, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.rsplit(maxsplit=1)
            if len(parts) != 2:
                raise InputError(f"{file}:{n}: expected 'PATTERN ROBOT_ID', got {text!r}")
            pattern, robot = parts
            check_robot_id(robot, f"{file}:{n}: robot id")
            pat = Path(pattern).expanduser()
            absolute = pat if pat.is_absolute() else file.parent / pat
            rules.append((os.path.abspath(absolute), robot))
        return cls(rules)

    def lookup(self, recording: Path) -> str | None:
        """The robot id of the first rule matching the recording, None when none does."""
        target = str(recording)
        for pattern, robot in self._rules:
            if (
                target == pattern
                or target.startswith(pattern.rstrip("/") + "/")
                or fnmatch.fnmatchcase(target, pattern)
                or fnmatch.fnmatchcase(target, pattern.rstrip("/") + "/*")
            ):
                return robot
        return None


def bag_robot_id(recording: Path) -> str | None:
    """``custom_data.robot_id`` of a rosbag2 folder's ``metadata.yaml``, None when absent.

    Raises:
        InputError: The value is there but is not a valid robot id.

    """
    meta = recording / "metadata.yaml"
    if not meta.is_file():
        return None
    import yaml

    try:
        data = yaml.safe_load(meta.read_text(encoding="utf-8"))
        custom = data["rosbag2_bagfile_information"].get("custom_data") or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError):
        return None  # unreadable metadata: processing the bag reports it
    robot = custom.get("robot_id") if isinstance(custom, dict) else None
    if robot is None:
        return None
    return check_robot_id(robot, f"{meta}: custom_data.robot_id")


def folder_robot_id(recording: Path) -> str | None:
    """The recording's folder name as a robot id (other characters become ``_``)."""
    name = _NOT_ID_CHARS.sub("_", recording.parent.name).lstrip("_.-")[:64]
    return name or None


def resolve_robot_id(
    recording: Path, mapping: RobotIdMap | None, given: str | None
) -> tuple[str | None, str]:
    """The robot id of a recording and where it came from (see the module doc).

    Args:
        recording: The recording's path (absolute).
        mapping: The ``--robot-ids`` file, if any.
        given: The job's ``--robot-id``, if any.

    Returns:
        ``(robot id, source)``, the source one of ``mapping``, ``option``, ``metadata``,
        ``folder``; ``(None, "host")`` when nothing names one (the store then uses the
        host name).

    Raises:
        InputError: The bag's metadata holds an invalid robot id.

    """
    for source, robot in (
        ("mapping", mapping.lookup(recording) if mapping is not None else None),
        ("option", given or None),
    ):
        if robot is not None:
            return robot, source
    robot = bag_robot_id(recording) if recording.is_dir() else None
    if robot is not None:
        return robot, "metadata"
    robot = folder_robot_id(recording)
    return (robot, "folder") if robot is not None else (None, "host")
