"""Sphinx configuration of rowstoch_fast's documentation site.

Build: ``pip install ".[docs]" && sphinx-build -W -n -b html docs docs/_build/html`` (CI does, warnings as
errors, then checks every link inside the site with ``.ci/check_links.py``). Two pages are generated at build
time from the code (``docs/_generate.py``): the algorithm list (from the registry), the API reference (every
public name of every public module), the table of an experiment file's keys (from the schema) and the benchmarks'
current numbers (from ``bench/RESULTS.md``); the gallery runs ``examples/gallery/plot_*.py`` on small sizes.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import rowstoch_fast  # noqa: E402

project = "rowstoch_fast"
author = "the rowstoch_fast developers"
copyright = "2026, " + author
release = version = rowstoch_fast.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "numpydoc", "sphinx_gallery.gen_gallery"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "guide/_*.md", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json", "sg_execution_times.rst"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # (the README's sections start at level 2 inside a page)

autodoc_default_options = {"members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

html_theme = "pydata_sphinx_theme"
html_title = f"rowstoch_fast {version}"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2, "secondary_sidebar_items": ["page-toc"]}
html_static_path = []

sphinx_gallery_conf = {
    "examples_dirs": os.path.join(ROOT, "examples", "gallery"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"plot_",
    "download_all_examples": False,
    "show_signature": False,
    "remove_config_comments": True,
    "min_reported_time": 10,
}


def _generate(app):
    sys.path.insert(0, HERE)
    import _generate as generated  # (docs/_generate.py: the pages made from the code)

    generated.write()


def setup(app):
    app.connect("builder-inited", _generate)
