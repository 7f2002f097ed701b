"""How the extension is linked (issue 10, item 1).

An extension that carries its own static copy of libstdc++ shares locale facet
ids with the process's shared libstdc++ (loaded by SciPy or matplotlib): C++
error messages then lose their numbers (GCC 12) or crash the interpreter
(GCC >= 13). The build must keep the runtime shared whatever the environment
says, export only ``PyInit__core``, and refuse a result that breaks either.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import rowstoch_fast._core as core

ROOT = pathlib.Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF linking checks are Linux-only")


def _setup_module():
    spec = importlib.util.spec_from_file_location("rowstoch_setup_for_tests", ROOT / "setup.py")
    src = (ROOT / "setup.py").read_text()
    # the module without its final setup(...) call
    module = importlib.util.module_from_spec(spec)
    exec(compile(src.rsplit("\nsetup(", 1)[0], str(ROOT / "setup.py"), "exec"), module.__dict__)
    return module


def _can_build():
    return (ROOT / "setup.py").exists() and importlib.util.find_spec("pybind11") is not None and (
        shutil.which(os.environ.get("CXX", "c++")) is not None)


PROBE = textwrap.dedent("""
    import importlib.util, sys
    import scipy.sparse.csgraph  # loads the process's shared libstdc++ first
    spec = importlib.util.spec_from_file_location("_core", sys.argv[1])
    core = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(core)
    for bad in (0, -7):
        try:
            core.set_num_threads(bad)
        except ValueError as exc:
            print(exc)
""")


@linux_only
def test_installed_extension_links_runtime_shared_and_exports_only_init():
    if shutil.which("readelf") is None or shutil.which("nm") is None:
        pytest.skip("binutils (readelf, nm) not installed")
    assert _setup_module().check_shared_runtime(core.__file__) == []


def test_cpp_error_message_keeps_its_numbers():
    out = subprocess.run([sys.executable, "-c", PROBE, core.__file__], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "got 0" in out.stdout and "got -7" in out.stdout, out.stdout


@linux_only
@pytest.mark.slow
def test_static_runtime_requests_are_overridden_and_a_static_compiler_healed(tmp_path):
    """One build (each is half a minute at -O0) with both ways a static C++ runtime gets asked for:
    LDFLAGS=-static-libstdc++ (what broke the GPU machine) is dropped, and a C++ compiler whose driver adds
    -static-libstdc++ by itself (a wrapper, as the GPU machine's gcc 13 behaves) makes the build link again with
    the shared runtime named explicitly; the runtime stays shared and C++ errors keep their numbers. (Where this
    compiler cannot link its runtime statically, the LDFLAGS half alone.)"""
    if not _can_build():
        pytest.skip("no C++ compiler or pybind11 to build the extension with")
    real = shutil.which(os.environ.get("CXX", "c++"))
    wrapper = tmp_path / "static-cxx"
    wrapper.write_text(f'#!/bin/sh\nexec "{real}" "$@" -static-libstdc++\n')
    wrapper.chmod(0o755)
    probe = subprocess.run([str(wrapper), "-shared", "-fPIC", "-x", "c++", "-", "-o", str(tmp_path / "p.so")],
                           input="int f() { return 0; }\n", capture_output=True, text=True)
    static_compiler = probe.returncode == 0
    env = {"LDFLAGS": "-static-libstdc++", **({"CXX": str(wrapper), "CC": str(wrapper)} if static_compiler else {})}
    build, so = _build(tmp_path, **env)
    assert "ignoring -static-libstdc++" in build.stdout
    if static_compiler:
        assert "linking again with -Wl,-Bdynamic -lstdc++" in build.stdout
    assert _setup_module().check_shared_runtime(str(so)) == []
    _assert_errors_keep_their_numbers(so)


def _build(tmp_path, **env):
    """Build the extension into ``tmp_path`` with these environment variables (serially, at -O0: what is checked
    is how it links, and -O0 compiles in a fifth of -O3's time); (result, path)."""
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=ROOT, env=dict(os.environ, ROWSTOCH_DISABLE_OPENMP="1", ROWSTOCH_OPT_LEVEL="0", **env),
        capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (so,) = (tmp_path / "lib" / "rowstoch_fast").glob("_core*")
    return build, so


def _assert_errors_keep_their_numbers(so):
    out = subprocess.run([sys.executable, "-c", PROBE, str(so)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "got 0" in out.stdout and "got -7" in out.stdout, out.stdout


@linux_only
def test_check_refuses_a_statically_linked_runtime(tmp_path):
    """The post-build check itself: a library with libstdc++ linked in statically is refused."""
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if cxx is None or shutil.which("readelf") is None or shutil.which("nm") is None:
        pytest.skip("needs a C++ compiler and binutils")
    src = tmp_path / "lib.cpp"
    src.write_text('#include <string>\n#include <stdexcept>\n'
                   'extern "C" int f(int x) { if (x < 0) throw std::runtime_error(std::to_string(x)); return x; }\n')
    lib = tmp_path / "lib.so"
    r = subprocess.run([cxx, "-shared", "-fPIC", "-static-libstdc++", str(src), "-o", str(lib)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"this compiler cannot link libstdc++ statically: {r.stderr[-300:]}")
    problems = _setup_module().check_shared_runtime(str(lib))
    assert any("statically" in p for p in problems), problems


def test_a_bad_optimisation_level_is_refused_naming_the_variable(tmp_path):
    if not _can_build():
        pytest.skip("no C++ compiler or pybind11 to build the extension with")
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=ROOT, env=dict(os.environ, ROWSTOCH_OPT_LEVEL="fast"), capture_output=True, text=True, timeout=300)
    assert build.returncode != 0 and "ROWSTOCH_OPT_LEVEL must be 0, 1, 2 or 3, got 'fast'" in build.stderr
