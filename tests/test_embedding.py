"""C++ simulators that embed the kernels: the headers installed with the package, get_include(), the CMake
package, and one version reported from one place (issue 39)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import rowstoch_fast as rf

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "cpp")


def _compiler():
    """The C++ compiler (CXX, else c++) if one runs here, else None (CI's compiler-free wheel check)."""
    cxx = os.environ.get("CXX", "c++")
    if not shutil.which(cxx):
        return None
    try:
        works = subprocess.run([cxx, "--version"], capture_output=True).returncode == 0
    except OSError:
        works = False
    return cxx if works else None


def test_the_headers_are_installed_with_the_package():
    include = rf.get_include()
    headers = sorted(os.listdir(os.path.join(include, "rowstoch")))
    assert {"mix.hpp", "gt.hpp", "network.hpp", "parallel.hpp", "hash.hpp"} <= set(headers)
    for h in headers:  # plain C++: no Python, no pybind11 in any header a simulator includes
        with open(os.path.join(include, "rowstoch", h)) as f:
            text = f.read()
        assert "pybind11" not in text and "Python.h" not in text, h
    assert os.path.isfile(os.path.join(rf.get_cmake_dir(), "rowstochConfig.cmake"))


@pytest.mark.skipif(_compiler() is None, reason="no working C++ compiler here")
def test_the_cpp_example_builds_against_get_include_and_runs(tmp_path):
    """examples/cpp/gossip_simulator.cpp, compiled with the documented include line: gossip over a
    row-stochastic matrix reaches the pi-weighted average (exit status 0)."""
    exe = tmp_path / "gossip_simulator"
    flags = ["-fopenmp"] if rf.build_info()["openmp"] else []
    subprocess.run([_compiler(), "-std=c++17", "-O2", *flags, f"-I{rf.get_include()}",
                    os.path.join(EXAMPLE, "gossip_simulator.cpp"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "round 500: max |x_i - pi^T x_0| = " in out.stdout


@pytest.mark.skipif(_compiler() is None, reason="no working C++ compiler here")
def test_the_headers_keep_their_promises_in_an_embedders_build(tmp_path):
    """A helper's embedder build with -march=native (FMA): g++ contracts a * b + c into fused multiply-adds by
    default, and a lossy round that lost nothing, the logistic gradients at two vector widths and a column of a
    mix at two block widths were no longer bit for bit what the headers promise (nor the Python package's bits).
    The documented flags (-ffp-contract=off, as the package's own build) keep them (the mix's and the lossy
    round's checked here; without the flag the first breaks); the CMake target carries the flag (below). And an
    empty block's power with R = 0 passed null pointers to memcpy (UBSan)."""
    exe = tmp_path / "invariants"
    flags = ["-fopenmp"] if rf.build_info()["openmp"] else []
    native = subprocess.run([_compiler(), "-march=native", "-x", "c++", "-fsyntax-only", os.devnull],
                            capture_output=True).returncode == 0
    build = subprocess.run([_compiler(), "-std=c++17", "-O2", *(["-march=native"] if native else []),
                            "-ffp-contract=off", *flags, f"-I{rf.get_include()}",
                            os.path.join(os.path.dirname(__file__), "embedder_invariants.cpp"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and "0 promise(s) broken" in out.stdout, out.stdout + out.stderr


EMPTY_BLOCKS = r"""
#include <cstdint>
#include <cstdio>
#include "rowstoch/samples.hpp"

int main() {  // rows and repetitions of d = 0 values: blocks that may be null, as the guide says
    const std::int64_t idx[6] = {0, 1, 0, 1, 0, 1};
    rowstoch::take_samples<double, std::int64_t>(nullptr, 3, 2, 0, idx, nullptr);
    rowstoch::put_samples<double, std::int64_t>(nullptr, 3, 2, 0, idx, nullptr);
    std::printf("ok\n");
    return 0;
}
"""


@pytest.mark.skipif(_compiler() is None, reason="no working C++ compiler here")
def test_blocks_of_no_values_may_be_null_under_ubsan(tmp_path):
    """Helper 225: ``take_samples`` / ``put_samples`` of d = 0 values called memcpy with null blocks once per
    entry (undefined even for 0 bytes; UBSan: "null pointer passed as argument 1"), where the guide allows a block
    of w = 0 to be null."""
    source, exe = tmp_path / "empty.cpp", tmp_path / "empty"
    source.write_text(EMPTY_BLOCKS)
    flags = ["-fsanitize=undefined", "-fno-sanitize-recover=all"]
    build = subprocess.run([_compiler(), "-std=c++17", "-O0", *flags, f"-I{rf.get_include()}", str(source), "-o",
                            str(exe)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"this compiler builds no UBSan program here: {build.stderr.strip()[-200:]}")
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stdout + out.stderr


@pytest.mark.skipif(_compiler() is None, reason="no working C++ compiler here")
def test_every_header_compiles_under_wpedantic_werror(tmp_path):
    """Helper 225: ``unsigned __int128`` (PCG64's state, the bounded draws) warned under -Wpedantic, so an embedder's
    -Werror -Wpedantic build could not include numpy_random.hpp or objectives.hpp; ``__extension__`` says it is
    meant."""
    headers = sorted(h for h in os.listdir(os.path.join(rf.get_include(), "rowstoch")) if h.endswith(".hpp"))
    source = tmp_path / "all.cpp"
    source.write_text("".join(f'#include "rowstoch/{h}"\n' for h in headers) + "int main() { return 0; }\n")
    out = subprocess.run([_compiler(), "-std=c++17", "-Wall", "-Wpedantic", "-Werror", "-fsyntax-only",
                          f"-I{rf.get_include()}", str(source)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.skipif(shutil.which("cmake") is None or _compiler() is None, reason="no cmake or C++ compiler")
def test_the_cmake_package_builds_the_example(tmp_path):
    """find_package(rowstoch 0.2 CONFIG) with rowstoch_DIR = get_cmake_dir(): the target rowstoch::kernels."""
    build = tmp_path / "build"
    cfg = subprocess.run(["cmake", "-S", EXAMPLE, "-B", str(build), f"-Drowstoch_DIR={rf.get_cmake_dir()}",
                          f"-DCMAKE_CXX_COMPILER={shutil.which(_compiler())}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
                         capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    assert "-ffp-contract=off" in (build / "compile_commands.json").read_text()  # (the target's: no FMA contraction)
    assert subprocess.run([str(build / "gossip_simulator")], capture_output=True).returncode == 0


def test_one_version_everywhere(tmp_path):
    """rowstoch_fast.__version__ (rowstoch_fast/_version.py), the installed metadata, `rowstoch --version` and the
    CMake package's version: the same string."""
    from importlib.metadata import version

    assert rf.__version__ == version("rowstoch_fast")
    out = subprocess.run([sys.executable, "-m", "rowstoch_fast.cli", "--version"], capture_output=True, text=True,
                         cwd=tmp_path)  # (not the source tree: the installed package)
    assert out.stdout.strip().endswith(rf.__version__)
    with open(os.path.join(rf.get_cmake_dir(), "rowstochConfigVersion.cmake")) as f:
        assert "_version.py" in f.read()  # (CMake reads it from there: the regex below is the one it uses)
    with open(os.path.join(os.path.dirname(rf.__file__), "_version.py")) as f:
        assert re.search(r'__version__ = "([^"]+)"', f.read()).group(1) == rf.__version__


FORKED_WORKER = r"""
import multiprocessing, sys
import numpy as np
import rowstoch_fast as rf

A = rf.topology.exponential(4096)
X = np.random.default_rng(0).standard_normal((4096, 10))


def child():
    Y = A.mix(X)  # (GNU OpenMP: a team in a child forked after the parent ran one waited for ever)
    try:
        rf.set_num_threads(2)
        refused = ""
    except RuntimeError as exc:
        refused = str(exc)
    return Y, rf.get_num_threads(), refused


if __name__ == "__main__":
    rf.set_num_threads(2)
    want = A.mix(X)  # (a team of two threads in the parent)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        Y, threads, refused = pool.apply_async(child).get(timeout=float(sys.argv[1]))
    assert np.array_equal(Y, want) and threads == 1, threads
    assert refused.startswith("set_num_threads(2): this process was forked") or not rf.build_info()["openmp"], refused
    assert rf.get_num_threads() == 2  # (the parent's own setting kept)
    print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_worker_forked_after_the_kernels_ran_on_threads_does_not_hang(tmp_path):
    """A ``multiprocessing.Pool`` with the "fork" start method (Linux's default before Python 3.14) after a run in
    the parent: the worker's first parallel kernel waited for ever (helper 134). The worker now runs the kernels on
    one thread, the same bits, and refuses more threads in words."""
    script = tmp_path / "forked.py"
    script.write_text(FORKED_WORKER)
    out = subprocess.run([sys.executable, str(script), "60"], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
