"""Run the numpydoc Examples sections of every public module as doctests."""

import doctest
import importlib
import pkgutil

import pytest

import rowstoch_fast

MODULES = ["rowstoch_fast"] + sorted(  # (walk_packages yields the submodules only: the top level's examples too)
    m.name for m in pkgutil.walk_packages(rowstoch_fast.__path__, "rowstoch_fast.") if not m.name.endswith("_core")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    if name == "rowstoch_fast.torch":
        pytest.importorskip("torch", reason="PyTorch not installed (rowstoch_fast[torch])")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


# ---------------------------------------------------------------------------- the generated API reference
def _docs_generator():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "_generate.py")
    spec = importlib.util.spec_from_file_location("_docs_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_documents_every_public_name_once():
    """Every name of every public module's __all__ is documented once (a directive) or points to where it is."""
    import importlib
    import re

    gen = _docs_generator()
    text, algorithms = gen.api_reference(), gen.algorithm_list()
    directives = re.findall(r"^\.\. auto(?:class|function|data):: (\S+)$", text + "\n" + algorithms, re.M)
    assert len(directives) == len(set(directives))  # (Sphinx refuses a name documented twice)
    anchors = gen.api_anchors()
    for module_name in gen.public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            try:
                if isinstance(getattr(module, name), type(module)):
                    continue
            except ImportError:  # (the torch optimizer without PyTorch)
                continue
            assert anchors[f"{module_name}.{name}"] in directives, f"{module_name}.{name}"
    assert "rowstoch_fast.algorithms.Optimizer" in directives and "rowstoch_fast.io.save_matrix" in directives


def test_the_site_check_fails_on_a_missing_name(tmp_path):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".ci", "check_api.py")
    spec = importlib.util.spec_from_file_location("_check_api", path)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    homes = sorted(set(_docs_generator().api_anchors().values()))
    page = tmp_path / "api.html"
    page.write_text("".join(f'<dt id="{h}"></dt>' for h in homes))
    assert check.main(str(tmp_path)) == 0
    page.write_text("".join(f'<dt id="{h}"></dt>' for h in homes if h != "rowstoch_fast.io.load_matrix"))
    assert check.main(str(tmp_path)) == 1


def test_every_experiment_file_key_is_in_the_generated_table():
    from rowstoch_fast import config

    table = _docs_generator().toml_keys()
    for tname, keys in config.schema().items():
        for key in keys:
            assert f"| `[{tname}]` | `{key}` |" in table, (tname, key)


def _recipe_blocks():
    import os
    import re

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "guide", "recipes.md")
    with open(path) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("k", range(11))
def test_the_recipes_run_as_written(k, tmp_path, monkeypatch, capsys):
    """docs/guide/recipes.md: eleven tasks, each block run as it is written; what it prints shows no method where a
    value was meant (``m.recommended_rounds`` printed "<bound method ...>") and no claim of the page printed False
    (200 rounds of gossip on the paper's ring were too few for "gossip ends at pi^T X")."""
    import rowstoch_fast as rf

    blocks = _recipe_blocks()
    assert len(blocks) == 11
    if "import torch" in blocks[k]:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    threads = rf.get_num_threads()
    try:
        exec(compile(blocks[k], f"recipes.md block {k + 1}", "exec"), {"__name__": "__recipe__"})
    finally:
        rf.set_num_threads(threads)
    printed = capsys.readouterr().out
    assert "<bound method" not in printed and ": False" not in printed, printed


# ---------------------------------------------------------------------------- equations as math (issue 50)
# Modules exempt from the math test (none: every registered algorithm writes its equations as math).
MATH_PENDING = set()


def _math_blocks(doc):
    """The LaTeX of every ``.. math::`` block of a docstring (its indented body)."""
    lines, blocks = doc.splitlines(), []
    for i, line in enumerate(lines):
        if line.strip() == ".. math::":
            indent = len(line) - len(line.lstrip())
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                body.append(nxt)
            blocks.append("\n".join(body).strip())
    return blocks


def _algorithm_classes():
    from rowstoch_fast.algorithms import REGISTRY

    return sorted(REGISTRY.values(), key=lambda cls: cls.name)


@pytest.mark.parametrize("cls", _algorithm_classes(), ids=lambda cls: cls.name)
def test_every_algorithm_writes_its_equations_as_math(cls):
    """Every registered algorithm's docstring has a ``.. math::`` block (the API reference renders it with
    MathJax; ``help()`` shows its LaTeX), well formed, and no update equation left as a plain-text literal block."""
    import inspect
    import re

    module = cls.__module__.rsplit(".", 1)[-1]
    if module in MATH_PENDING:
        pytest.skip(f"{module}.py: its equations are still plain text (MATH_PENDING)")
    doc = inspect.getdoc(cls)
    blocks = _math_blocks(doc)
    assert blocks and all(blocks), f"{cls.__name__} ({module}.py) has no math block"
    for latex in blocks + re.findall(r":math:`([^`]*)`", doc):
        assert latex.count("{") == latex.count("}"), (cls.__name__, latex)
        assert len(re.findall(r"\\left(?![a-z])", latex)) == len(re.findall(r"\\right(?![a-z])", latex)), latex
        assert latex.count(r"\begin{") == latex.count(r"\end{"), (cls.__name__, latex)
    literal = re.findall(r"^(?! *\.\. )[^\n]*::\n\n((?: {4,}.*\n?|\n)+)", doc, re.M)  # (literal blocks, no directive)
    assert not [b for b in literal if re.search(r"_\{?[a-z0-9+-]+\}? *=|=.*\blr\b|<-", b)], cls.__name__


def test_the_generated_table_gives_each_keys_default():
    # (they had been in --help alone, helper 266)
    table = _docs_generator().toml_keys()
    for row in ("| `[run]` | `rounds_budget` | int | `2000` |", "| `[run]` | `repeats` | int | `5` |",
                "| `[objective]` | `d` | int | `10` |", "| `[objective]` | `samples_per_node` | int | `32` |"):
        assert row in table, row


def test_the_generated_table_names_each_boolean_key_by_its_flag():
    """Helper 219: the option column of guide/_toml_keys.md showed --no-undirected, --no-normalize and --no-biased
    for the keys that set --undirected, --normalize and --biased (argparse lists a BooleanOptionalAction's --no-X
    last)."""
    table = _docs_generator().toml_keys()
    assert "| `--no-" not in table  # (the option column; a help text may name --no-X)
    for key in ("normalize", "undirected", "biased"):
        assert f"| `{key}` | bool | `false` | `--{key}` |" in table, key


def test_the_guide_names_the_communication_keys_that_take_lists():
    """harness.md's "Experiment files" said that every [communication] key may be a list (helper 219: max_delay,
    noise, awake and bits are refused): the keys it names are those the schema takes as lists."""
    import os

    from rowstoch_fast.network import options

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "guide", "harness.md")
    with open(path) as f:
        section = " ".join(f.read().split("## Experiment files")[1].split("\n## ")[0].split())
    listed = [key for key, (_, kind) in options.toml_schema().items() if str(kind).endswith("|list")]
    assert listed == ["loss", "compress"]  # (a key that takes lists now: name it in the guide too)
    assert "In `[communication]`, `loss` and `compress` alone may be lists" in section
    assert "keys may be lists" not in section
