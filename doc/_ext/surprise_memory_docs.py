"""Sphinx extension: the pages of the surprise_memory docs that are generated from the code.

* ``.. surprise-memory-settings::`` renders the settings of the one configuration schema
  (:mod:`surprise_memory.config`) as tables: for one node (``:node: scorer_node``), or every
  component config when no node is named. Name, type, default, allowed values, whether a
  running node accepts a change, and the description all come from the declarations.
* ``.. surprise-memory-cli::`` renders the ``--help`` of ``surprise-memory`` and of each of
  its subcommands from the real argument parser.
* ``.. surprise-memory-interfaces::`` renders every ``msg/*.msg`` and ``srv/*.srv`` file of
  the package as it is (the files are the reference of the topics and the service).
* At start the API pages (``api/``) are written, one per module of the package, so a new
  module is documented without anyone adding a page.
* A public class or function without a docstring is a warning (an error under ``-W``), so
  the API reference cannot silently grow blank entries.
* A reference to a name by the path users import it from (``surprise_memory.memory.store.
  open_store``, re-exported by the package) resolves to the page of the module that defines
  it, where autodoc documents it once.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOG = logging.getLogger(__name__)
PACKAGE = "surprise_memory"

# Modules that are not API: generated interface packages (action: the tests' only), the
# ``python -m`` entry.
_NOT_API = (f"{PACKAGE}.msg", f"{PACKAGE}.srv", f"{PACKAGE}.action", f"{PACKAGE}.__main__")
# Names built on access that need a package we do not require (documented in the guide).
_OPTIONAL = {f"{PACKAGE}.integrations.daaam.EpisodicMemory": "needs DAAAM installed"}


def api_modules() -> list[str]:
    """Every importable module of the package that belongs in the API reference, sorted."""
    import surprise_memory

    names = [PACKAGE]
    for info in pkgutil.walk_packages(surprise_memory.__path__, prefix=f"{PACKAGE}."):
        if not info.name.startswith(_NOT_API) and ".msg." not in info.name:
            names.append(info.name)
    return sorted(names)


def _write_if_changed(path: Path, text: str) -> None:
    # rewriting an unchanged page would make Sphinx rebuild it every time
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_api_pages(app: Sphinx) -> None:
    """Write ``api/index.rst`` and one ``api/<module>.rst`` per module (builder-inited)."""
    if not app.config.surprise_memory_api_pages:
        return
    out = Path(app.srcdir) / "api"
    out.mkdir(exist_ok=True)
    modules = api_modules()
    for name in modules:
        title = f"``{name}``"
        _write_if_changed(
            out / f"{name}.rst",
            f"{title}\n{'=' * len(title)}\n\n.. automodule:: {name}\n",
        )
    for stale in out.glob("*.rst"):
        if stale.stem not in modules and stale.name != "index.rst":
            stale.unlink()
    lines = [
        "API reference",
        "=============",
        "",
        "Every module of the package, from its docstrings (generated at build time). The",
        "core (everything but ``surprise_memory.nodes`` and ``surprise_memory.agents.ros_client``)",
        "never imports rclpy.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
        *(f"   {name}" for name in modules),
        "",
    ]
    _write_if_changed(out / "index.rst", "\n".join(lines))


def _public_undocumented(what: str, name: str, obj: Any) -> bool:
    if name.startswith("_") or what not in ("module", "class", "exception"):
        return False
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return False
    module = getattr(obj, "__module__", "")
    if module.split(".")[0] != PACKAGE or module.startswith(_NOT_API):
        return False  # another library's, or generated from msg/srv
    return not inspect.getdoc(obj)


def check_docstring(  # noqa: PLR0917 - autodoc-skip-member's signature
    app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    """Warn about a public member without a docstring (autodoc-skip-member)."""
    if _public_undocumented(what, name, obj):
        where = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', name)}"
        LOG.warning("public name without a docstring: %s", where)
    return None  # autodoc decides as usual


def _defining_path(target: str) -> str | None:
    """The dotted path where ``target`` (a public import path of ours) is defined, if other."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        if inspect.ismodule(obj):
            real = obj.__name__
        else:
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if not module or not qualname:
                return None
            real = f"{module}.{qualname}"
        return real if real != target else None
    return None


def resolve_reexport(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a py reference to a re-exported name at its defining module (missing-reference)."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith(f"{PACKAGE}."):
        return None
    domain = env.get_domain("py")
    real = _defining_path(target)
    if real is None:
        # data (a constant has no __module__): the one documented name of that spelling
        # inside the package the target names
        package, _, name = target.rpartition(".")
        found = [
            o for o in domain.objects if o.startswith(f"{package}.") and o.endswith(f".{name}")
        ]
        if len(found) != 1:
            return None
        real = found[0]
    return domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], real, node, contnode
    )


def _allowed(spec: Any) -> str:
    if spec.choices is not None:
        return ", ".join(spec.choices)
    if spec.low is None and spec.high is None:
        return ""
    low = "" if spec.low is None else f"{spec.low:g}"
    high = "" if spec.high is None else f"{spec.high:g}"
    return f"{low} .. {high}"


def _cell(content: str, *, literal: bool = False) -> nodes.entry:
    para = nodes.paragraph()
    if content:
        para += nodes.literal(text=content) if literal else nodes.Text(content)
    return nodes.entry("", para)


_COLUMNS = (
    ("name", 22),
    ("type", 7),
    ("default", 14),
    ("allowed", 14),
    ("live", 6),
    ("description", 37),
)


def settings_table(config_type: Any) -> nodes.table:
    """The table of one config class: its settings in declaration order, one row each.

    Built as docutils nodes (not parsed text), so it reads the same from a Markdown (MyST)
    or a reStructuredText page.
    """
    from surprise_memory.config import settings_of

    table = nodes.table(classes=["settings-table"])
    doc = (inspect.getdoc(config_type) or "").splitlines()[0].replace("``", "")
    title = nodes.title()
    title += nodes.literal(text=config_type.__name__)
    title += nodes.Text(f": {doc}")
    table += title
    group = nodes.tgroup(cols=len(_COLUMNS))
    table += group
    for _, width in _COLUMNS:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += nodes.row("", *(_cell(name) for name, _ in _COLUMNS))
    group += head
    body = nodes.tbody()
    for spec in settings_of(config_type):
        body += nodes.row(
            "",
            _cell(spec.name, literal=True),
            _cell(spec.type.__name__),
            _cell(repr(spec.default), literal=True),
            _cell(_allowed(spec)),
            _cell("no" if spec.read_only else "yes"),
            _cell(spec.description),
        )
    group += body
    return table


class SettingsDirective(SphinxDirective):
    """``.. surprise-memory-settings::``: tables of the declared settings.

    Options: ``:node: NAME`` for the configs that node declares; ``:offline:`` for the
    configs no node declares (settings of the offline command only); neither for all.
    """

    option_spec = {"node": directives.unchanged, "offline": directives.flag}  # noqa: RUF012

    def run(self) -> list[nodes.Node]:
        """Render the tables."""
        from surprise_memory.config import ALL_CONFIGS, NODE_CONFIGS

        node = self.options.get("node")
        if node is not None and node not in NODE_CONFIGS:
            raise self.error(f"unknown node {node!r}; nodes: {', '.join(NODE_CONFIGS)}")
        if node is not None:
            configs: Any = NODE_CONFIGS[node]
        elif "offline" in self.options:
            declared = {c for cs in NODE_CONFIGS.values() for c in cs}
            configs = [c for c in ALL_CONFIGS if c not in declared]
        else:
            configs = ALL_CONFIGS
        return [settings_table(cls) for cls in configs]


class CliDirective(SphinxDirective):
    """``.. surprise-memory-cli::``: the help of the command and of each subcommand."""

    def run(self) -> list[nodes.Node]:
        """Render ``surprise-memory --help`` and ``surprise-memory <command> --help``."""
        from surprise_memory.cli import build_parser

        os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal; fix it for the page
        parser = build_parser()
        result: list[nodes.Node] = [nodes.literal_block(text=parser.format_help())]
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for command, subparser in sub.choices.items():
            section = nodes.section(ids=[f"command-{command}"], names=[f"command {command}"])
            section += nodes.title(text=f"surprise-memory {command}")
            section += nodes.literal_block(text=subparser.format_help())
            result.append(section)
        return result


class InterfacesDirective(SphinxDirective):
    """``.. surprise-memory-interfaces::``: each message and service definition, verbatim."""

    def run(self) -> list[nodes.Node]:
        """A section per ``.msg``/``.srv`` file of the package root (the folder above doc/)."""
        root = Path(self.env.app.confdir).parent
        result: list[nodes.Node] = []
        for kind in ("msg", "srv"):
            for path in sorted((root / kind).glob(f"*.{kind}")):
                self.env.note_dependency(str(path))
                name = f"surprise_memory/{kind}/{path.stem}"
                section = nodes.section(ids=[nodes.make_id(name)], names=[name])
                section += nodes.title(text=name)
                section += nodes.literal_block(text=path.read_text(encoding="utf-8"))
                result.append(section)
        if not result:
            raise self.error(f"no msg/ or srv/ files under {root}")
        return result


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directives and the build hooks."""
    app.add_config_value("surprise_memory_api_pages", True, "env", types=[bool])
    app.add_directive("surprise-memory-settings", SettingsDirective)
    app.add_directive("surprise-memory-cli", CliDirective)
    app.add_directive("surprise-memory-interfaces", InterfacesDirective)
    app.connect("builder-inited", write_api_pages)
    app.connect("autodoc-skip-member", check_docstring)
    app.connect("missing-reference", resolve_reexport)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
