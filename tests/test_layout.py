"""The architecture the layout promises: no import cycles, algorithms and backends apart."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).parent.parent / "rowstoch_fast"


def module_name(path):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path, top_level_only=False):
    """Modules of the package that ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("rowstoch_fast"):
                if node.module:  # "from .x import y": module x
                    found.add(target)
                else:  # "from . import cupy, _core": those submodules (the package is already importing)
                    found |= {f"{target}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("rowstoch_fast")}
    return found


def graph(top_level_only):
    return {module_name(p): imports(p, top_level_only) for p in PACKAGE.rglob("*.py")}


def test_no_import_cycles_at_import_time():
    g = graph(top_level_only=True)
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for dep in g.get(m, ()):
            if dep == m or dep not in g:
                continue
            if state.get(dep) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep not in state:
                visit(dep, stack + [dep])
        state[m] = "done"

    for m in g:
        if m not in state:
            visit(m, [m])


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
    for name in ("runner.py", "compare.py"):
        text = (PACKAGE / name).read_text()
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
