"""Sphinx configuration of minismt's documentation: ``sphinx-build -W -b html docs docs/_build/html``.

The tutorials in ``tutorials/`` are Python scripts that sphinx-gallery runs when the site is built (their
output and figures go into the pages); a tutorial that raises fails the build.  Those that read the Moses and
cdec fixtures or Multi30k in ``../shared`` next to the repository are left out of the build when the folder is
absent, and the tutorials' index says so.
"""

from __future__ import annotations

import os
from pathlib import Path

import minismt

SHARED = Path(__file__).resolve().parents[2] / "shared"   # next to the repository
NEEDS_SHARED = ("plot_moses_system.py", "plot_cdec_forests.py")

project = "minismt"
author = "the minismt developers"
copyright = "2026, the minismt developers"
release = version = minismt.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx.ext.viewcode", "sphinx_gallery.gen_gallery", "myst_parser"]
myst_heading_anchors = 3            # the manual's Markdown headings can be linked
exclude_patterns = ["_build", "tutorials/README.rst"]
html_theme = "furo"
html_title = f"minismt {release}"
default_role = "code"               # `x` in docstrings is code, as in the README

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_preserve_defaults = True
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

_skipped = [] if SHARED.is_dir() else list(NEEDS_SHARED)
sphinx_gallery_conf = {
    "examples_dirs": "tutorials",
    "gallery_dirs": "generated/tutorials",
    "filename_pattern": r"/plot_",
    "ignore_pattern": "|".join(name.replace(".", r"\.") for name in _skipped) or r"^$",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "reset_modules": ("matplotlib",),
}
os.environ.setdefault("MPLBACKEND", "Agg")
rst_prolog = ".. |shared| replace:: " + (
    "``../shared`` is absent here: the tutorials that read the real Moses and cdec fixtures ("
    + ", ".join(_skipped) + ") are left out of this build." if _skipped else
    "The tutorials that read the real Moses and cdec fixtures in ``../shared`` are built too.") + "\n"
