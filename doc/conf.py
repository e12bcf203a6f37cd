"""Sphinx configuration of the surprise_memory documentation (built by rosdoc2 or sphinx-build).

Build it with ``python -m sphinx -W --keep-going -b html doc build/doc`` in an environment
where the package and its generated messages import (``source install/setup.bash``); the
test suite does exactly that (``test/test_docs.py``). The parameter tables, the command
line reference and the API pages are generated from the code at build time by
``_ext/surprise_memory_docs.py``, so they cannot drift from it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "surprise_memory"
author = "surprise_memory maintainers"
copyright = "2026, surprise_memory maintainers"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
    "surprise_memory_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Google-style docstrings (Args/Returns/Raises), as the code writes them.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields: autodoc documents the attributes themselves
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
# ignore-module-all: a package documents what it defines, not what its __init__ re-exports
# (each name once, on the page of the module that defines it)
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}

# A reference to one of our own names that does not resolve is an error (the build runs
# with -W); references into other libraries are not checked (no intersphinx inventories:
# the build must work offline, as on a robot).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!surprise_memory\b).*"),
    (r"py:(class|obj)", r"surprise_memory\..*\.[A-Z](_co|_contra)?"),  # type variables
    (r"py:class", r"surprise_memory\.(msg|srv)\..*"),  # generated: see the interfaces page
]

html_theme = "sphinx_rtd_theme"
html_title = "surprise_memory"
html_static_path: list[str] = []
