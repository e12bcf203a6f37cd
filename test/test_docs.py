"""The documentation (``doc/``) builds with warnings as errors; its generated pages match the code.

One Sphinx build of the real ``doc/`` (as rosdoc2 or ``sphinx-build -W`` would run it) per
module; then the pages are read as HTML and, once, in Debian's headless Chromium: the
index opens, the search finds a parameter, and the parameter page lists every declared
parameter of every node. A second, tiny build checks that the strictness is real: a broken
reference to one of our names fails it.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from surprise_memory.cli import build_parser
from surprise_memory.config import ALL_CONFIGS, NODE_CONFIGS, settings_of

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc"
sys.path.insert(0, str(DOC / "_ext"))

import surprise_memory_docs  # noqa: E402 - the extension, from doc/_ext

SPHINX = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-j", "auto", "-b", "html"]


def _sphinx(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # run from the output folder: the checkout (which lacks the generated msg/srv modules)
    # must not shadow the colcon install on sys.path; -j auto: the extensions are parallel
    # safe (the site: 50 s on one process, 38 s on two here)
    return subprocess.run(
        [*SPHINX, "-q", str(source), str(out)],
        cwd=out.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    source = work / "doc"
    # a copy, so the generated api/ pages are not written into the checkout
    shutil.copytree(DOC, source, ignore=shutil.ignore_patterns("api", "_build", "__pycache__"))
    for kind in ("msg", "srv"):  # the interfaces page reads the package's definitions
        shutil.copytree(ROOT / kind, work / kind)
    (work / "benchmarks").mkdir()  # the results page includes the benchmarks' record
    shutil.copy(ROOT / "benchmarks" / "RESULTS.md", work / "benchmarks" / "RESULTS.md")
    out = work / "html"
    proc = _sphinx(source, out)
    assert proc.returncode == 0, f"sphinx -W failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


# the first cell of each row of a settings table: the setting's name
_ROW_NAME = re.compile(
    r'<tr class="row-(?:even|odd)"><td><p><code[^>]*><span class="pre">(\w+)</span>'
)


def _section(page_html: str, anchor: str) -> str:
    """The HTML of the section whose id is ``anchor`` (up to the next section of any level)."""
    start = page_html.index(f'id="{anchor}"')
    end = page_html.find("<section", start + 1)
    return page_html[start : end if end > 0 else None]


@pytest.mark.parametrize("node", list(NODE_CONFIGS))
@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_the_parameter_page_lists_every_parameter_of_each_node(site: Path, node: str) -> None:
    page = (site / "reference" / "parameters.html").read_text(encoding="utf-8")
    section = _section(page, node.replace("_", "-"))
    listed = _ROW_NAME.findall(section)
    declared = [s.name for cls in NODE_CONFIGS[node] for s in settings_of(cls)]
    assert listed == declared
    for spec in (s for cls in NODE_CONFIGS[node] for s in settings_of(cls)):
        row = section[section.index(f'<span class="pre">{spec.name}</span>') :]
        row = row[: row.index("</tr>")]
        assert repr(spec.default) in html.unescape(re.sub(r"<[^>]+>", "", row)), spec.name


@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_every_component_config_is_documented(site: Path) -> None:
    text = _text(site / "reference" / "parameters.html")
    for cls in ALL_CONFIGS:
        assert cls.__name__ in text


@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_the_cli_page_is_the_parsers_help(site: Path) -> None:
    text = _text(site / "reference" / "cli.html")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for command, subparser in sub.choices.items():
        assert f"surprise-memory {command}" in text
        for action in subparser._actions:
            for option in action.option_strings:
                assert option in text, (command, option)


@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_the_interfaces_page_has_every_definition(site: Path) -> None:
    text = _text(site / "reference" / "interfaces.html")
    for path in [*ROOT.glob("msg/*.msg"), *ROOT.glob("srv/*.srv")]:
        assert f"surprise_memory/{path.parent.name}/{path.stem}" in text
        first = next(line for line in path.read_text().splitlines() if line.strip())
        assert first.strip() in text, path.name


@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_every_module_has_an_api_page(site: Path) -> None:
    modules = surprise_memory_docs.api_modules()
    assert "surprise_memory.surprise.gate" in modules
    for name in modules:
        assert (site / "api" / f"{name}.html").is_file(), name
    gate = _text(site / "api" / "surprise_memory.surprise.gate.html")
    assert "SurpriseGate" in gate and "1.4826" in gate  # the class and its docstring's rule


def _chromium_dom(url: str, profile: Path) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (Debian) is needed")
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=15000",  # let the page's scripts (the search) finish
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout


@pytest.mark.ros  # the API pages import the nodes (rclpy): the main stage only
def test_the_site_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    index = _chromium_dom((site / "index.html").as_uri(), tmp_path / "p1")
    assert "<title>surprise_memory" in index
    # Sphinx's search runs in the page's JavaScript over searchindex.js
    found = _chromium_dom((site / "search.html").as_uri() + "?q=nms_seconds", tmp_path / "p2")
    results = found[found.index('class="search"') :]
    assert "reference/parameters.html" in results
    params = _chromium_dom((site / "reference" / "parameters.html").as_uri(), tmp_path / "p3")
    shown = set(_ROW_NAME.findall(params))
    assert shown == {s.name for cls in ALL_CONFIGS for s in settings_of(cls)}


def test_a_broken_reference_fails_the_build(tmp_path: Path) -> None:
    source = tmp_path / "doc"
    source.mkdir()
    shutil.copy(DOC / "conf.py", source / "conf.py")
    shutil.copytree(DOC / "_ext", source / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    with (source / "conf.py").open("a", encoding="utf-8") as conf:
        conf.write("\nsurprise_memory_api_pages = False  # this check needs no API pages\n")
    (source / "index.md").write_text(
        "# Probe\n\n{func}`surprise_memory.stamps.parse_time` resolves; "
        "{func}`surprise_memory.stamps.no_such_function` must not.\n\n"
        "```{eval-rst}\n.. automodule:: surprise_memory.stamps\n```\n",
        encoding="utf-8",
    )
    proc = _sphinx(source, tmp_path / "html")
    assert proc.returncode != 0
    assert "surprise_memory.stamps.no_such_function" in proc.stderr
    assert "parse_time" not in proc.stderr


def test_a_public_function_without_docstring_is_reported() -> None:
    def undocumented() -> None:
        pass

    def documented() -> None:
        """Has one."""

    for fn in (undocumented, documented):
        fn.__module__ = "surprise_memory.stamps"
    check = surprise_memory_docs._public_undocumented
    assert check("module", "undocumented", undocumented)
    assert not check("module", "documented", documented)
    assert not check("module", "_private", undocumented)


def _code_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", markdown, flags=re.S)


def test_the_readme_robot_quick_start_is_the_robot_pages_first_block() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (DOC / "guides" / "robot-setup.md").read_text(encoding="utf-8")
    quick = readme.split("## On a robot", 1)[1]
    assert _code_blocks(quick)[0] == _code_blocks(page)[0]
    # every platform's block runs the set-up step the robot stage runs (tools/test_robot.sh)
    stage = (ROOT / "tools" / "test_robot.sh").read_text(encoding="utf-8")
    assert "bash src/surprise_memory/tools/setup_robot.sh venv" in stage
    blocks = [b for b in _code_blocks(page) if "ros2 launch" in b]
    assert len(blocks) == 3  # Ubuntu 24.04, Ubuntu 22.04, Jetson
    for block in blocks:
        assert "bash src/surprise_memory/tools/setup_robot.sh venv" in block
        assert "python -m colcon build --packages-select surprise_memory" in block


def test_every_link_of_the_readme_and_the_guides_leads_somewhere() -> None:
    for page in [ROOT / "README.md", *DOC.rglob("*.md")]:
        if "_build" in page.parts:
            continue
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: {target}"
