"""The package layout keeps one job per file: no oversized module or class without a reason.

A module over :data:`MAX_MODULE_LINES` lines, or a class over :data:`MAX_CLASS_LINES`,
must say why in its docstring, on a line starting with ``Long module:`` / ``Long class:``;
otherwise it holds several jobs and should be split (STYLE.md, issue 10).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "surprise_memory"  # the source tree, not the colcon install
MODULES = sorted(
    p
    for p in PACKAGE.rglob("*.py")
    if not {"msg", "srv", "__pycache__"} & set(p.relative_to(PACKAGE).parts)
)
# the live pipeline first, in the order data flows, then the rest
STAGES = ("perception", "surprise", "memory", "agents", "nodes", "offline", "evaluation")


def _says_why(doc: str | None, marker: str) -> bool:
    return any(line.strip().startswith(marker) for line in (doc or "").splitlines())


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_class_sizes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        assert _says_why(ast.get_docstring(tree), "Long module:"), (
            f"{path.name}: {lines} lines; split it or say why in its docstring"
        )
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size > MAX_CLASS_LINES:
                assert _says_why(ast.get_docstring(node), "Long class:"), (
                    f"{path.name}: class {node.name} has {size} lines; split it or say why"
                )


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(p.relative_to(PACKAGE))
        for p in MODULES
        if p.name != "__main__.py" and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert not missing


def test_stages_are_packages_that_describe_themselves() -> None:
    for stage in STAGES:
        init = PACKAGE / stage / "__init__.py"
        assert init.is_file(), f"{stage}/ is not a package"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{stage}/__init__.py: no docstring"


def test_readme_layout_lists_every_stage_in_pipeline_order() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1]
    positions = [layout.find(f"surprise_memory/{stage}/") for stage in STAGES[:4]]
    assert all(p >= 0 for p in positions), dict(zip(STAGES, positions, strict=False))
    assert positions == sorted(positions), "the Layout section should read as the pipeline"
