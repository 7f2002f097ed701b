"""Build of rowstoch_fast's one compiled extension, ``rowstoch_fast._core``.

* ``-O3`` always; OpenMP when the compiler accepts it (probed, never fatal:
  without it the kernels run serially).
* No ``-march=native`` unless ``ROWSTOCH_NATIVE=1`` is set, so wheels run on
  any x86-64 / arm64 machine.
* ``ROWSTOCH_DISABLE_OPENMP=1`` forces a serial build.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _compiler_accepts(compiler, flags):
    """Try to compile and link a tiny OpenMP program with ``flags``."""
    src = "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "probe.cpp")
        with open(path, "w") as f:
            f.write(src)
        objs = compiler.compile([path], output_dir=tmp, extra_postargs=flags)
        compiler.link_executable(objs, os.path.join(tmp, "probe"), extra_postargs=flags)
        return True
    except Exception:  # noqa: BLE001 - any failure means "no OpenMP"
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    """build_ext that probes OpenMP and records the flags it used."""

    def build_extensions(self):
        # no FMA contraction (same bits on every build); errno is never read, so exp() need not set it
        compile_flags = ["-O3", "-ffp-contract=off", "-fno-math-errno"]
        link_flags = []
        if _env_flag("ROWSTOCH_NATIVE"):
            compile_flags.append("-march=native")
        if sys.platform == "darwin":
            omp = (["-Xpreprocessor", "-fopenmp"], ["-lomp"])
        else:
            omp = (["-fopenmp"], ["-fopenmp"])
        openmp = False
        if not _env_flag("ROWSTOCH_DISABLE_OPENMP"):
            openmp = _compiler_accepts(self.compiler, omp[0] + omp[1])
        if openmp:
            compile_flags += omp[0]
            link_flags += omp[1]
        else:
            print("rowstoch_fast: building without OpenMP (kernels run serially)")
        flags = " ".join(compile_flags)
        for ext in self.extensions:
            ext.extra_compile_args += compile_flags
            ext.extra_link_args += link_flags
            ext.define_macros.append(("ROWSTOCH_BUILD_FLAGS", '"%s"' % flags))
        super().build_extensions()


ext = Pybind11Extension(
    "rowstoch_fast._core",
    ["csrc/bindings.cpp"],
    include_dirs=["csrc"],
    cxx_std=17,
    depends=[os.path.join("csrc", "rowstoch", f) for f in os.listdir(os.path.join("csrc", "rowstoch"))],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
