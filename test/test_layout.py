"""The package layout keeps one job per file: no oversized module or class without a reason.

A module over :data:`MAX_MODULE_LINES` lines, or a class over :data:`MAX_CLASS_LINES`,
must say why in its docstring, on a line starting with ``Long module:`` / ``Long class:``;
otherwise it holds several jobs and should be split (STYLE.md, issue 10). No module may
pass :data:`HARD_MODULE_LINES`, reason or not, and no package module may import another
that imports it back, directly or around a longer loop, at module level or in a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAX_MODULE_LINES = 600
HARD_MODULE_LINES = 650
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
    assert lines <= HARD_MODULE_LINES, f"{path.name}: {lines} lines; split it"
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each package module -> the package modules it imports (any depth of the code)."""
    names = {_module_name(p): p for p in MODULES}

    def resolve(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import mod` imports the module pkg.mod, `from mod import x` mod
                targets.update(resolve(f"{node.module}.{a.name}") for a in node.names)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_in_the_package() -> None:
    assert _cycles(_import_graph()) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_loops(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert _cycles(graph) == expected


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


def test_the_layout_page_lists_every_stage_in_pipeline_order() -> None:
    layout = (ROOT / "doc" / "guides" / "layout.md").read_text(encoding="utf-8")
    positions = [layout.find(f"surprise_memory/{stage}/") for stage in STAGES[:4]]
    assert all(p >= 0 for p in positions), dict(zip(STAGES, positions, strict=False))
    assert positions == sorted(positions), "the layout page should read as the pipeline"
