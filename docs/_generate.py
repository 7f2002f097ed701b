"""The pages of the documentation site generated from the code at build time (docs/conf.py writes them):

* ``guide/_algorithm_list.md``: every algorithm of the registry, its matrices and fixed point, then its class;
* ``guide/_current_numbers.md``: the "Current numbers" table of bench/RESULTS.md;
* ``guide/_api_reference.md``: every public name of every public module (its ``__all__``), each documented once
  and its other spellings pointing there (:func:`api_anchors` says where each is: CI checks the built site);
* ``guide/_toml_keys.md``: every key of an experiment file, from :func:`rowstoch_fast.config.schema` and the
  command line's help.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def public_modules():
    """``rowstoch_fast`` and its public submodules (no leading underscore), sorted."""
    import rowstoch_fast

    return ["rowstoch_fast"] + sorted(f"rowstoch_fast.{m.name}" for m in pkgutil.iter_modules(rowstoch_fast.__path__)
                                      if not m.name.startswith("_"))


def algorithm_list():
    """guide/_algorithm_list.md: every algorithm of the registry, its matrices and fixed point, then its class
    (the docstring: equations, parameters, citation)."""
    from rowstoch_fast.algorithms import REGISTRY, names

    lines = ["| name | class | family | graph | mixes with | problem | with a constant step and exact gradients | "
             "reference |", "|---|---|---|---|---|---|---|---|"]
    for name in names():
        cls = REGISTRY[name]
        mats = ", ".join(f"`{m}` ({ {'A': 'row', 'C': 'column', 'W': 'doubly'}[m] }-stochastic)"
                         for m in cls.matrices) or ("a server (federated)" if cls.federated else "none (exact averaging)")
        graph = "undirected" if "W" in cls.matrices else ("directed" if cls.matrices else
                                                          "star (server, clients)" if cls.federated else "none")
        problem = ("smooth + prox (composite)" if cls.composite else
                   {"samples": "finite sum (per-sample oracle)", "prox": "local prox of each f_i"}.get(cls.gradients,
                                                                                                  "smooth"))
        goal = "the minimiser" if cls.exact else (cls.bias + " minimiser" if cls.bias else "an O(lr) neighbourhood")
        lines.append(f"| `{name}` | [`{cls.__name__}`](#{cls.__name__.lower()}) | {cls.family} | {graph} | {mats} | "
                     f"{problem} | {goal} | {_citation(cls)} |")
    lines.append("")
    for name in names():
        cls = REGISTRY[name]
        lines += [f"## {cls.__name__}", "", "```{eval-rst}", f".. autoclass:: rowstoch_fast.{cls.__name__}", "```", ""]
    return "\n".join(lines)


def _citation(cls):
    """The first reference of an algorithm's docstring as "Authors (year)" (its References section)."""
    doc = inspect.getdoc(cls) or ""
    found = re.search(r"References\n-+\n(.*?)(?:\n\n|$)", doc, re.S)
    if not found:  # the module's first line: "Name (Authors year): ..."; the paper's own methods
        first = (inspect.getdoc(inspect.getmodule(cls)) or "").splitlines()[0]
        if "of the paper" in first:
            return "Liang et al. (2025)"
        cited = re.search(r"\(([^()]*?)\s(\d{4})", first)
        if not cited:
            return "-"
        surnames = [a.strip() for a in re.split(r",|&", cited.group(1).split(";")[-1]) if a.strip()]
        return f"{surnames[0] + ' et al.' if len(surnames) > 2 else ' & '.join(surnames)} ({cited.group(2)})"
    text = " ".join(found.group(1).split())
    if text.startswith("None known"):  # (a method that cites no paper: simple-gt)
        return "-"
    authors = text.split(', "')[0].split(" and ")
    surnames = [a.split()[-1] for part in authors for a in part.split(", ") if a.strip()]
    year = re.findall(r"\b(19\d\d|20\d\d)\b", text)
    names = surnames[0] + " et al." if len(surnames) > 2 else " & ".join(surnames)
    return f"{names} ({year[0] if year else 'n.d.'})"


def current_numbers():
    """guide/_current_numbers.md: the "Current numbers" table of bench/RESULTS.md, as it stands."""
    with open(os.path.join(ROOT, "bench", "RESULTS.md")) as f:
        text = f.read()
    section = re.search(r"## Current numbers\n(.*?)\n## ", text, re.S).group(1)
    return section.strip() + "\n"


def _public(module_name):
    """``[(name, object)]`` of a module's ``__all__`` (its public names), modules left out (documented as such)."""
    module = importlib.import_module(module_name)
    out = []
    for name in getattr(module, "__all__", ()):
        try:
            obj = getattr(module, name)
        except ImportError:  # (rowstoch_fast.torch's optimizer class, made on first use, needs PyTorch)
            continue
        if not isinstance(obj, types.ModuleType):
            out.append((name, obj))
    return out


def _directive(full, obj):
    if inspect.isclass(obj):
        own = all(base.__module__.startswith("rowstoch_fast") or base is object for base in obj.__mro__[1:])
        return [f".. autoclass:: {full}", "   :members:"] + (["   :inherited-members:"] if own else [])
    if callable(obj):
        return [f".. autofunction:: {full}"]
    return [f".. autodata:: {full}", "   :no-value:"]


def elsewhere():
    """The names documented on other pages: the registry's classes (the algorithms page, with their equations)."""
    from rowstoch_fast.algorithms import REGISTRY

    return {f"rowstoch_fast.{cls.__name__}": cls for cls in REGISTRY.values()}


def api_anchors():
    """``{public name: the name it is documented under}`` for every name of every public module's ``__all__``
    (the first spelling met is documented; the registry's classes are on the algorithms page)."""
    home = {id(cls): full for full, cls in elsewhere().items()}
    anchors = {}
    for module_name in public_modules():
        for name, obj in _public(module_name):
            full = f"{module_name}.{name}"
            key = id(obj) if not isinstance(obj, (int, float, str, bool, tuple)) else full  # (equal constants)
            anchors[full] = home.setdefault(key, full)
    return anchors


def api_reference():
    """guide/_api_reference.md: a section per public module (its docstring, then each public name documented where
    :func:`api_anchors` says, or pointing there)."""
    anchors, other_pages = api_anchors(), elsewhere()
    lines = []
    for module_name in public_modules():
        names = _public(module_name)
        lines += [f"## `{module_name}`", "", "```{eval-rst}", f".. py:module:: {module_name}", "",
                  _summary(importlib.import_module(module_name)), ""]
        aliases = []
        for name, obj in names:
            full = f"{module_name}.{name}"
            if anchors[full] == full and full not in other_pages:
                lines += _directive(full, obj) + [""]
            else:
                aliases.append(f"``{name}``: :py:obj:`{anchors[full]}`")
        if aliases:
            lines += ["Also here (documented under the name each links to): " + ", ".join(aliases) + ".", ""]
        lines += ["```", ""]
    return "\n".join(lines)


def _summary(module):
    """The first paragraph of a module's docstring (its sections would clash with the page's own)."""
    doc = inspect.getdoc(module) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _option_help():
    """``{argparse dest: help}`` of ``rowstoch compare`` (the options a file's keys stand for)."""
    from rowstoch_fast.cli import make_parser

    parser = make_parser()
    compare = parser._subparsers._group_actions[0].choices["compare"]
    return {a.dest: (a.help or "", a.option_strings, a.default) for a in compare._actions}


def _default_cell(default):
    """A key's default as its table shows it: TOML's spelling, empty where the option has none (None: set by
    something else, e.g. the objective's metric) (helper 266: the defaults had been in --help alone)."""
    import argparse

    if default is None or default is argparse.SUPPRESS:
        return ""
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, (list, tuple)):
        return "`[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in default) + "]`"
    if isinstance(default, str) and re.fullmatch(r"[-+]?\d+(\.\d*)?([eE][-+]?\d+)?", default):
        return f"`{default}`"  # (a number the option takes as text: --loss's "0")
    return f'`"{default}"`' if isinstance(default, str) else f"`{default}`"


def toml_keys():
    """guide/_toml_keys.md: every table and key of an experiment file, its type, its default (the option's), the
    option it stands for and what it does (that option's help)."""
    from rowstoch_fast import config

    helps = _option_help()
    kinds = {"list": "string or list of strings (empty: none)", "str|list": "string or list of strings"}
    lines = ["| table | key | type | default | option | what it sets |", "|---|---|---|---|---|---|"]
    for table, keys in config.schema().items():
        for key, (dest, kind) in keys.items():
            text, flags, default = helps.get(dest, ("", [], None))
            kind = kinds.get(kind, getattr(kind, "__name__", str(kind)))
            choices = config.CHOICES.get((table, key))
            if choices:
                text = f"one of {', '.join(map(str, choices))}. " + text
            if (table, key) == ("run", "algorithms"):  # (a set of the registry's, or names)
                text = (f"a set, one of {', '.join(config.ALGORITHM_SETS)}, or the algorithms' names (a list, or one "
                        "string separated by commas, as --algorithms); [algorithms.NAME] tables add settings or more")
            flag = next((f"`{f}`" for f in flags if f.startswith("--")), "")  # (the long option, as declared
            # first: a boolean's --X, not its --no-X, which BooleanOptionalAction lists last, helper 219)
            if (table, key) == ("run", "algorithms"):
                flag = "`--algorithms`"  # (its destination is the set's: the names go there too)
            default = "" if (table, key) == ("run", "algorithms") else _default_cell(default)
            lines.append(f"| `[{table}]` | `{key}` | {_cell(kind)} | {default} | {flag} | {_cell(text)} |")  # (a
            # kind's "|": float|nodes had split its row)
    for key, kind in config.ALGORITHM_KEYS.items():
        lines.append(f"| `[algorithms.NAME]` | `{key}` | {kind.__name__} | | | {_cell(_ALGORITHM_KEY_HELP[key])} |")
    lines.append("| `[algorithms.NAME]` | any other | the constructor's | | | a hyperparameter of the algorithm's "
                 "constructor, passed through (refused, naming the key, where it has none such) |")
    return "\n".join(lines) + "\n"


_ALGORITHM_KEY_HELP = {
    "lr": "the learning rate (given: not tuned)",
    "lr_source": "where the rate comes from, for the tables (default: given)",
    "tracker": "this algorithm's tracker: exact or perron",
    "rounds": "this algorithm's gossip rounds R per iteration (MG methods)",
}


def _cell(text):
    """Text for one cell of a Markdown table (its pipes escaped, no line breaks, no argparse formatting)."""
    return " ".join(text.replace("|", "\\|").replace("%%", "%").split())


PAGES = {"_algorithm_list.md": algorithm_list, "_current_numbers.md": current_numbers,
         "_api_reference.md": api_reference, "_toml_keys.md": toml_keys}


def write(folder=os.path.join(HERE, "guide")):
    """Write the generated pages into ``folder`` where they changed."""
    for name, make in PAGES.items():
        text = make()
        path = os.path.join(folder, name)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)


if __name__ == "__main__":  # (python docs/_generate.py: the pages a reader of the Markdown in the repository lacks;
    # from the installed package, as the site's build reads it: a checkout's own has no compiled core until built)
    write()
    print("wrote " + ", ".join(os.path.join("docs", "guide", name) for name in PAGES))
