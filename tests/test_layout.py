"""The architecture the layout promises: no import cycles, algorithms and backends apart."""

import ast
import os
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).parent.parent / "rowstoch_fast"


def module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules():
    return {module_name(p) for p in PACKAGE.rglob("*.py")}


def _dynamic_targets(node, name, package, modules):
    """The modules an ``importlib.import_module`` call ``node`` can load: its literal target, every submodule of
    ``package`` for ``f"{__name__}.{x}"``, and for any other argument every module the file names in a string
    (``_MODULES = {"cpu": "rowstoch_fast.backends.cpu", ...}``): a target the test cannot read counts as all."""
    arg = node.args[0] if node.args else None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.FormattedValue) \
            and isinstance(arg.values[0].value, ast.Name) and arg.values[0].value.id == "__name__":
        return {m for m in modules if m.rsplit(".", 1)[0] == name}
    return None  # resolved by the caller from the file's strings


def imports(path, top_level_only=False, modules=None):
    """Modules of the package that ``path`` imports (relative imports resolved; ``from .backends import cupy``
    counts ``backends.cupy``; ``importlib.import_module`` targets counted, see :func:`_dynamic_targets`)."""
    modules = _modules() if modules is None else modules
    tree = ast.parse(path.read_text())
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found, unreadable = set(), False
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("rowstoch_fast"):
                if node.module:  # "from .x import y": module x, and x.y where y is a module
                    found.add(target)
                    found |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
                else:  # "from . import cupy, _core": those submodules (the package is already importing)
                    found |= {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("rowstoch_fast")}
        elif (not top_level_only and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            targets = _dynamic_targets(node, name, package, modules)
            if targets is None:
                unreadable = True
            else:
                found |= {t for t in targets if t.startswith("rowstoch_fast")}
    if unreadable:
        found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in modules}
    return found


def graph(top_level_only):
    modules = _modules()
    return {module_name(p): imports(p, top_level_only, modules) for p in PACKAGE.rglob("*.py")}


def _cycle(g):
    """One import cycle of the graph ``g`` as a list of modules, or None."""
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for dep in sorted(g.get(m, ())):
            if dep == m or dep not in g:
                continue
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep, stack + [dep])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_no_import_cycles_at_import_time():
    cycle = _cycle(graph(top_level_only=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycles_counting_imports_inside_functions():
    """An import inside a function hides a circle from Python, not from the architecture: none anywhere."""
    cycle = _cycle(graph(top_level_only=False))
    assert cycle is None, "import cycle (imports inside functions counted): " + " -> ".join(cycle)


def test_the_import_graph_counts_import_module_targets():
    """The backends' registry and the device hook load modules by name: the graph must see those edges."""
    g = graph(top_level_only=False)
    assert "rowstoch_fast.backends.cupy" in g["rowstoch_fast.backends"]  # create's _MODULES, the device hook
    assert "rowstoch_fast.backends.cupy_logistic" in g["rowstoch_fast.backends"]
    assert "rowstoch_fast.algorithms.pull_diag_gt" in g["rowstoch_fast.algorithms"]  # f"{__name__}.{name}"


#: The layers below the backends: they reach device code through rowstoch_fast._device (a leaf), never an import.
BELOW_BACKENDS = ("rowstoch_fast.mixing", "rowstoch_fast.objectives", "rowstoch_fast.protocol",
                  "rowstoch_fast.metrics", "rowstoch_fast.topology", "rowstoch_fast.tracker", "rowstoch_fast._device")


def test_the_matrix_objective_and_protocol_layers_never_import_a_backend():
    g = graph(top_level_only=False)
    for m in BELOW_BACKENDS:
        up = {d for d in g[m] if d.startswith("rowstoch_fast.backends")}
        assert not up, f"{m} imports {sorted(up)}: use rowstoch_fast._device (is_device_array, device_operations)"
    assert g["rowstoch_fast._device"] == set(), "rowstoch_fast._device is a leaf"


def test_the_detector_finds_a_hidden_circle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(g) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_backends_loaded_by_name_never_import_the_layers_that_load_them():
    """The backend registry loads a backend by name (``create``; ``device_operations`` for a MixingMatrix given
    a device array): an edge the import graph cannot see, so what the CuPy backend reaches, imports inside
    functions included, must not lead back to the matrix layer."""
    g = graph(top_level_only=False)
    reached, todo = set(), ["rowstoch_fast.backends.cupy"]
    while todo:
        m = todo.pop()
        for dep in g.get(m, ()):
            if dep not in reached:
                reached.add(dep)
                todo.append(dep)
    for layer in ("rowstoch_fast.mixing", "rowstoch_fast.metrics", "rowstoch_fast.network"):
        assert layer not in reached, f"the CuPy backend imports {layer}, which loads it by name"


def test_algorithms_and_backends_stay_apart():
    g = graph(top_level_only=False)
    for m, deps in g.items():
        if m.startswith("rowstoch_fast.algorithms"):
            named = {d for d in deps if d.startswith("rowstoch_fast.backends.")}
            assert not named, f"{m} imports a backend by name: {named} (use rowstoch_fast.backends.create)"
        if m.startswith("rowstoch_fast.backends"):
            algos = {d for d in deps if d.startswith("rowstoch_fast.algorithms")}
            assert not algos, f"{m} imports {algos}: backends never import algorithms"


def test_the_runner_and_the_harness_never_ask_for_the_backend():
    for path in [PACKAGE / "runner.py", *sorted((PACKAGE / "compare").glob("*.py"))]:
        name, text = path.name, path.read_text()
        for needle in ('backend == "mpi"', 'backend == "cupy"', "backends.mpi", "backends.cupy", "comm.Get_rank"):
            assert needle not in text, f"{name} contains {needle!r}"


def test_submodules_are_attributes_without_importing_torch_or_cupy():
    """rf.network.Lossy raised AttributeError (rf.topology worked); reaching a submodule imports it then, and
    importing the package imports neither PyTorch nor CuPy."""
    import subprocess
    import sys

    code = ("import sys, rowstoch_fast as rf\n"
            "assert 'torch' not in sys.modules and 'cupy' not in sys.modules\n"
            "assert rf.network.Lossy and rf.compare.compare and rf.report.figure and rf.config.load\n"
            "assert 'torch' not in sys.modules and 'cupy' not in sys.modules\n"
            "assert 'network' in dir(rf)\n"
            "try:\n    rf.nope\nexcept AttributeError as e:\n    print(e)\n")
    import tempfile

    # from a neutral folder: in a source checkout the current folder would shadow the installed package
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tempfile.gettempdir())
    assert out.returncode == 0, out.stderr
    assert "has no attribute 'nope'" in out.stdout


def test_importing_from_the_source_root_finds_the_installed_package(tmp_path):
    """Python run from the repository's root after ``pip install .`` finds the source folder first, which has no
    compiled extension: it imports the installed package instead (it failed with a circular-import message)."""
    import shutil
    import subprocess
    import sys

    import rowstoch_fast

    source = tmp_path / "rowstoch_fast"
    shutil.copytree(os.path.dirname(rowstoch_fast.__file__), source,
                    ignore=shutil.ignore_patterns("_core*.so", "_core*.pyd", "__pycache__"))
    code = "import rowstoch_fast as rf; print(rf.__file__); print((rf.topology.ring(4) @ [1.0, 0, 0, 0]).tolist())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    where, mixed = out.stdout.split("\n")[:2]
    assert not where.startswith(str(tmp_path)) and mixed == "[0.5, 0.5, 0.0, 0.0]"
    out = subprocess.run([sys.executable, "-S", "-c", "import rowstoch_fast"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert "compiled extension (_core) is missing: this is the package's source folder" in out.stderr


def test_an_extension_that_does_not_load_and_a_ctrl_c_as_it_loads_are_told_apart_from_a_missing_one(tmp_path):
    """A helper's session: a Ctrl-C while the extension initialised was reported as "the compiled extension is
    missing: this is the package's source folder", as was an extension that is there but does not load (another
    Python's or NumPy's build). Now the first is a KeyboardInterrupt, the second says it does not load."""
    import importlib.machinery
    import shutil
    import subprocess
    import sys

    import rowstoch_fast

    source = tmp_path / "rowstoch_fast"
    shutil.copytree(os.path.dirname(rowstoch_fast.__file__), source,
                    ignore=shutil.ignore_patterns("_core*.so", "_core*.pyd", "__pycache__"))
    (source / ("_core" + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"not a shared library")
    command = [sys.executable, "-S", "-c", "import rowstoch_fast"]
    env = {**os.environ, "PYTHONPATH": ""}
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert "compiled extension (_core) does not load" in out.stderr and "is missing" not in out.stderr, out.stderr
    for built in source.glob("_core*"):
        built.unlink()
    (source / "_core.py").write_text("try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n"
                                     "    raise ImportError('initialization failed')\n")  # (as pybind11's start)
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert out.stderr.strip().endswith("KeyboardInterrupt") and "is missing" not in out.stderr, out.stderr


def test_the_all_extra_holds_every_extra_but_the_gpus():
    """``pip install rowstoch_fast[all]``: every optional dependency but CuPy (whose wheel must match the CUDA)."""
    import re

    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(PACKAGE.parent / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]

    def names(requirements):
        return {re.split(r"[<>=;\[ ]", r, maxsplit=1)[0] for r in requirements}

    wanted = set().union(*(names(v) for k, v in extras.items() if k in ("networkx", "plot", "mpi", "torch")))
    assert wanted <= names(extras["all"]) and not any("cupy" in n for n in names(extras["all"]))


def test_every_subpackage_is_installed():
    """``pip install .`` installs the packages pyproject.toml lists, not what the tree holds: ``experiments/``
    became a package and was missing from the installed copy (the editable install hid it)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(PACKAGE.parent / "pyproject.toml", "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    tree = {".".join(path.parent.relative_to(PACKAGE.parent).parts) for path in PACKAGE.rglob("__init__.py")
            if "include" not in path.parts and "share" not in path.parts}
    assert tree <= listed, f"not listed in pyproject.toml: {sorted(tree - listed)}"
