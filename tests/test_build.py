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


# A module named _core, as small as a pybind11 module gets, that raises as the extension's set_num_threads does,
# with its numbers formatted through the C++ runtime's locale facets (what a second, static copy breaks).
PROBE_CORE = textwrap.dedent("""
    #include <pybind11/pybind11.h>
    #include <sstream>
    PYBIND11_MODULE(_core, m) {
        m.def("set_num_threads", [](long t) {
            if (t < 1) { std::ostringstream s; s << "threads must be >= 1, got " << t; throw pybind11::value_error(s.str()); }
        });
    }
""")

# setup.py's own build (its setup(...) call as written: its extension, whose sources become the probe's, and its
# build_ext command: the link flags, the post-build check, the relink)
BUILD_WITH_SETUP = textwrap.dedent("""
    import sys
    import setuptools
    setup_py, source, lib, tmp = sys.argv[1:]
    real_setup, called = setuptools.setup, []
    setuptools.setup = lambda **kwargs: called.append(kwargs)  # (setup.py's `from setuptools import setup`)
    exec(compile(open(setup_py).read(), setup_py, "exec"), {"__file__": setup_py, "__name__": "__main__"})
    (kwargs,) = called
    (ext,) = kwargs["ext_modules"]
    ext.sources, ext.depends = [source], []
    real_setup(**kwargs, script_args=["-q", "build_ext", "--build-lib", lib, "--build-temp", tmp])
""")


@linux_only
def test_static_runtime_requests_are_overridden_and_a_static_compiler_healed(tmp_path):
    """One build, through setup.py's own build step, with both ways a static C++ runtime gets asked for:
    LDFLAGS=-static-libstdc++ (what broke the GPU machine) is dropped, and a C++ compiler whose driver adds
    -static-libstdc++ by itself (a wrapper, as the GPU machine's gcc 13 behaves) makes the build link again with
    the shared runtime named explicitly; the runtime stays shared and C++ errors keep their numbers. (Where this
    compiler cannot link its runtime statically, the LDFLAGS half alone.) The build is of a one-function module
    named ``_core``, not of the whole extension: how a build links does not depend on what it compiles, and the
    whole one took 38 s of CI's time (the installed extension is checked by the tests above)."""
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
    source = tmp_path / "probe_core.cpp"
    source.write_text(PROBE_CORE)
    build = subprocess.run(
        [sys.executable, "-c", BUILD_WITH_SETUP, str(ROOT / "setup.py"), str(source), str(tmp_path / "lib"),
         str(tmp_path / "tmp")],
        cwd=ROOT, env=dict(os.environ, ROWSTOCH_DISABLE_OPENMP="1", ROWSTOCH_OPT_LEVEL="0", **env),
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (so,) = (tmp_path / "lib" / "rowstoch_fast").glob("_core*")
    assert "ignoring -static-libstdc++" in build.stdout
    if static_compiler:
        assert "linking again with -Wl,-Bdynamic -lstdc++" in build.stdout
    assert _setup_module().check_shared_runtime(str(so)) == []
    _assert_errors_keep_their_numbers(so)


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
