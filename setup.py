"""Build of rowstoch_fast's one compiled extension, ``rowstoch_fast._core``.

* ``-O3`` (``ROWSTOCH_OPT_LEVEL=0`` .. ``3`` sets another level: a quicker build for
  link checks and sanitizers, never for wheels); OpenMP when the compiler accepts it
  (probed, never fatal: without it the kernels run serially).
* No ``-march=native`` unless ``ROWSTOCH_NATIVE=1`` is set, so wheels run on
  any x86-64 / arm64 machine.
* ``ROWSTOCH_DISABLE_OPENMP=1`` forces a serial build.
* The glue's two files (``csrc/bindings.cpp``, ``csrc/passes.cpp``) compile side by
  side, a compiler per core; ``NPY_NUM_BUILD_JOBS=N`` (a positive integer) sets how
  many (pybind11's ``ParallelCompile``).
* The C++ runtime stays a shared library on Linux whatever ``CC``, ``CXX``,
  ``LDSHARED`` or ``LDFLAGS`` say (``-static-libstdc++`` / ``-static`` are
  dropped), and the extension exports nothing but ``PyInit__core`` (a linker
  version script, plus ``--exclude-libs,ALL``). A second copy of libstdc++
  inside the extension shares locale facet ids with the process's own and
  loses numbers from messages or crashes on every C++ error (issue 10). The
  build fails on Linux if the result still links libstdc++ statically or
  exports ``std::`` symbols. A compiler that links its runtime statically on its
  own (a wrapper or specs) gets ``-Wl,-Bdynamic -lstdc++`` and a second link, then
  ``-l:libstdc++.so.6`` (where no ``libstdc++.so`` is installed to link against).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
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


#: Link flags that would put a second copy of the C++ runtime into the extension.
STATIC_RUNTIME_FLAGS = ("-static-libstdc++", "-static")


def _drop_static_runtime(compiler):
    """Remove the flags of STATIC_RUNTIME_FLAGS from every command of ``compiler`` (from CC/CXX/LDSHARED/LDFLAGS)."""
    dropped = set()
    for attr in ("compiler", "compiler_so", "compiler_cxx", "linker_so", "linker_so_cxx", "linker_exe",
                 "linker_exe_cxx"):
        cmd = getattr(compiler, attr, None)
        if isinstance(cmd, list):
            dropped.update(a for a in cmd if a in STATIC_RUNTIME_FLAGS)
            setattr(compiler, attr, [a for a in cmd if a not in STATIC_RUNTIME_FLAGS])
    return sorted(dropped)


def _tool_output(args):
    """stdout of a binutils command, or None when the tool is missing or fails."""
    try:
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def check_shared_runtime(path):
    """On Linux, raise RuntimeError if the extension at ``path`` has no NEEDED C++ runtime or exports ``std::`` symbols.

    Uses ``readelf`` and ``nm`` (binutils); when they are missing the check is skipped with a message.
    Returns the list of problems found (empty when the extension is fine).
    """
    dynamic = _tool_output(["readelf", "-dW", path])
    symbols = _tool_output(["nm", "-D", "--defined-only", "-C", path])
    if dynamic is None or symbols is None:
        print("rowstoch_fast: readelf/nm not found; cannot check how the C++ runtime is linked")
        return []
    problems = []
    if not re.search(r"\(NEEDED\).*lib(std)?c\+\+", dynamic):
        problems.append("it does not load the C++ runtime as a shared library (no NEEDED libstdc++/libc++): "
                        "the runtime was linked statically")
    exported = [line.split(None, 2)[-1] for line in symbols.splitlines() if "std::" in line]
    if exported:
        problems.append(f"it exports {len(exported)} std:: symbols (e.g. {exported[0]})")
    return problems


class BuildExt(build_ext):
    """build_ext that probes OpenMP, keeps the C++ runtime shared and records the flags it used."""

    def build_extensions(self):
        linux = sys.platform.startswith("linux")
        if linux:
            dropped = _drop_static_runtime(self.compiler)
            if dropped:
                print(f"rowstoch_fast: ignoring {' '.join(dropped)} (the C++ runtime must stay a shared library)")
        # no FMA contraction (same bits on every build); errno is never read, so exp() need not set it
        level = os.environ.get("ROWSTOCH_OPT_LEVEL", "3").strip() or "3"
        if level not in ("0", "1", "2", "3"):
            raise ValueError(f"ROWSTOCH_OPT_LEVEL must be 0, 1, 2 or 3, got {level!r}")
        compile_flags = [f"-O{level}", "-ffp-contract=off", "-fno-math-errno"]
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
        if linux:
            os.makedirs(self.build_temp, exist_ok=True)
            script = os.path.join(self.build_temp, "exports.map")
            with open(script, "w") as f:
                f.write("{ global: PyInit__core; local: *; };\n")
            link_flags += [f"-Wl,--version-script={script}", "-Wl,--exclude-libs,ALL"]
        flags = " ".join(compile_flags)
        for ext in self.extensions:
            ext.extra_compile_args += compile_flags
            ext.extra_link_args = [a for a in ext.extra_link_args if a not in STATIC_RUNTIME_FLAGS] + link_flags
            ext.define_macros.append(("ROWSTOCH_BUILD_FLAGS", '"%s"' % flags))
        super().build_extensions()
        if linux:
            problems = self._runtime_problems()
            # A compiler that links its C++ runtime statically on its own (the GPU machine's gcc 13 is a
            # wrapper adding -static-libstdc++, with no libstdc++.so to link against): name the shared
            # runtime explicitly, ahead of what the driver appends, and link again; then the runtime's file.
            base = {ext.name: list(ext.extra_link_args) for ext in self.extensions}
            for extra in (["-Wl,-Bdynamic", "-lstdc++"], ["-Wl,-Bdynamic", "-l:libstdc++.so.6"]):
                if not any("NEEDED" in p for p in problems):
                    break
                print(f"rowstoch_fast: the compiler linked the C++ runtime statically; linking again with "
                      f"{' '.join(extra)}")
                for ext in self.extensions:
                    ext.extra_link_args = base[ext.name] + extra
                    self._relink(ext)
                problems = self._runtime_problems()
            if problems:
                raise RuntimeError("rowstoch_fast: refusing the built extension: " + "; ".join(problems)
                                   + ". Build without -static-libstdc++ / -static.")

    def _relink(self, ext):
        """Link ``ext`` again from the objects the build left (no recompilation)."""
        objects = self.compiler.object_filenames(ext.sources, output_dir=self.build_temp)
        os.remove(self.get_ext_fullpath(ext.name))  # else the linker step counts it as up to date
        self.compiler.link_shared_object(
            objects + list(ext.extra_objects or []), self.get_ext_fullpath(ext.name),
            libraries=self.get_libraries(ext), library_dirs=ext.library_dirs,
            runtime_library_dirs=ext.runtime_library_dirs, extra_postargs=ext.extra_link_args,
            export_symbols=self.get_export_symbols(ext), debug=self.debug, build_temp=self.build_temp,
            target_lang=self.compiler.detect_language(ext.sources))

    def _runtime_problems(self):
        return [p for ext in self.extensions for p in check_shared_runtime(self.get_ext_fullpath(ext.name))]


# The glue in two files compiled side by side (a thread per core, or NPY_NUM_BUILD_JOBS of them): the lossy and
# delayed passes' instantiations are about half of the code, and the -O3 compile of one file took 4-5 minutes of a
# core (bench/RESULTS.md 43a). The internal header is listed in `depends` (a change rebuilds; the sdist carries it).
if __name__ == "__main__":  # (pip's backend runs this file as __main__; a test that imports it patches nothing)
    ParallelCompile("NPY_NUM_BUILD_JOBS").install()
ext = Pybind11Extension(
    "rowstoch_fast._core",
    ["csrc/bindings.cpp", "csrc/passes.cpp"],
    include_dirs=[os.path.join("rowstoch_fast", "include")],  # the kernels' headers, installed with the package
    cxx_std=17,
    depends=[os.path.join("csrc", "glue.hpp")] + [
        os.path.join("rowstoch_fast", "include", "rowstoch", f) for f in
        os.listdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "rowstoch_fast", "include", "rowstoch"))],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
