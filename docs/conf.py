"""Sphinx configuration of rowstoch_fast's documentation site.

Build: ``pip install ".[docs]" && sphinx-build -W -n -b html docs docs/_build/html`` (CI does, warnings as
errors, then checks every link inside the site with ``.ci/check_links.py``). Two pages are generated at build
time from the code: the algorithm list (from the registry) and the benchmarks' current numbers (from
``bench/RESULTS.md``); the gallery runs ``examples/gallery/plot_*.py`` on small sizes.
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


def _algorithm_list():
    """docs/guide/_algorithm_list.md: every algorithm of the registry, its matrices and fixed point, then its class
    (the docstring: equations, parameters, citation)."""
    from rowstoch_fast.algorithms import REGISTRY, names

    lines = ["| name | class | mixes with | with a constant step and exact gradients |", "|---|---|---|---|"]
    for name in names():
        cls = REGISTRY[name]
        mats = ", ".join(f"`{m}` ({ {'A': 'row', 'C': 'column', 'W': 'doubly'}[m] }-stochastic)"
                         for m in cls.matrices) or "none (exact averaging)"
        goal = "the minimiser" if cls.exact else (cls.bias + " minimiser" if cls.bias else "an O(lr) neighbourhood")
        lines.append(f"| `{name}` | [`{cls.__name__}`](#{cls.__name__.lower()}) | {mats} | {goal} |")
    lines.append("")
    for name in names():
        cls = REGISTRY[name]
        lines += [f"## {cls.__name__}", "", "```{eval-rst}", f".. autoclass:: rowstoch_fast.{cls.__name__}", "```", ""]
    return "\n".join(lines)


def _current_numbers():
    """docs/guide/_current_numbers.md: the "Current numbers" table of bench/RESULTS.md, as it stands."""
    with open(os.path.join(ROOT, "bench", "RESULTS.md")) as f:
        text = f.read()
    section = re.search(r"## Current numbers\n(.*?)\n## ", text, re.S).group(1)
    return section.strip() + "\n"


def _generate(app):
    for name, text in (("_algorithm_list.md", _algorithm_list()), ("_current_numbers.md", _current_numbers())):
        path = os.path.join(HERE, "guide", name)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)


def setup(app):
    app.connect("builder-inited", _generate)
