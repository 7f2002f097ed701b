"""rowstoch_fast: decentralized optimization over row-stochastic (directed) networks.

Fast C++ kernels (``rowstoch_fast._core``) under a NumPy/SciPy API for the
Pull-Diag protocol, Pull-Diag-GT and MG-Pull-Diag-GT of
"Linear Speedup and Near-Optimal Rates for Decentralized Optimization over
Row-Stochastic Networks" (ICML 2025).
"""

import logging as _logging
import os as _os
import pkgutil as _pkgutil


def _installed_copy():
    """The installed package (``pip install .``) when this is its source folder without the compiled extension
    (Python run from the repository's root finds the folder first): its module spec, or None."""
    import importlib.machinery
    import os
    import sys

    def compiled(folder):
        return any(os.path.exists(os.path.join(folder, "_core" + s)) for s in importlib.machinery.EXTENSION_SUFFIXES)

    here = os.path.dirname(os.path.abspath(__file__))
    if compiled(here):
        return None
    parent = os.path.dirname(here)
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != parent]
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec(__name__, elsewhere)
            elif hasattr(finder, "find_spec"):
                spec = finder.find_spec(__name__, None)
            else:
                continue
        except Exception:  # noqa: BLE001 - a finder that cannot answer: try the next
            continue
        folder = spec and spec.submodule_search_locations and list(spec.submodule_search_locations)
        if folder and os.path.abspath(folder[0]) != here and compiled(folder[0]):
            return spec
    return None


def _use_installed(spec):
    """Import the installed package ``spec`` under this name (``import rowstoch_fast`` returns what sys.modules
    holds at the end); warn where its version is not this source's (an older install used in its place)."""
    import importlib.util
    import os
    import sys
    import warnings

    installed = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = installed
    spec.loader.exec_module(installed)
    here, there = os.path.dirname(os.path.abspath(__file__)), list(spec.submodule_search_locations)[0]
    versions = []
    for folder in (here, there):
        try:
            with open(os.path.join(folder, "_version.py")) as f:
                versions.append(f.read())
        except OSError:
            versions.append(None)
    if versions[0] != versions[1]:
        warnings.warn(f"rowstoch_fast: this source folder ({here}) has no compiled extension; imported the installed "
                      f"rowstoch_fast {installed.__version__} at {there}, whose version differs: pip install . again "
                      "(or pip install -e .) to use this source", UserWarning, stacklevel=3)


_spec = _installed_copy()
if _spec is not None:
    _use_installed(_spec)
    # (the rest of this file then runs against the installed package: `from . import` finds its modules there)

try:
    from . import _core
except ImportError as _exc:
    if isinstance(_exc.__context__, KeyboardInterrupt):  # (a Ctrl-C as the extension started: said "missing")
        raise KeyboardInterrupt from None
    if _spec is None and "cannot import name '_core'" not in str(_exc):  # (built, but it does not load)
        raise ImportError(f"rowstoch_fast's compiled extension (_core) does not load ({_exc}): reinstall the "
                          "package for this Python and NumPy (pip install --force-reinstall rowstoch_fast, or "
                          "pip install -e . in its source folder)") from _exc
    raise ImportError(
        "rowstoch_fast's compiled extension (_core) is missing: this is the package's source folder, not built. "
        "Build it in place (pip install -e .), or pip install . and import it from another folder") from _exc


def _adaptive_threads_as_said():
    """``ROWSTOCH_ADAPTIVE_THREADS`` read as its words say: 0, false, no or off turn the kernels' contention
    back-off off, 1, true, yes or on (or nothing, the default) keep it (the compiled reading looked at the first
    character alone: ``false`` and ``off`` left it on, ``01`` turned it off); any other value keeps it, with a
    warning. It changes only the time, never a result."""
    from ._checks import NO, YES

    value = _os.environ.get("ROWSTOCH_ADAPTIVE_THREADS", "")
    word = value.strip().lower()
    if not word:  # (unset, or set to nothing: the default)
        return
    if word not in YES | NO:
        import warnings

        warnings.warn(f"ROWSTOCH_ADAPTIVE_THREADS={value!r} is neither 0, false, no, off nor 1, true, yes, on: the "
                      "contention back-off stays on", RuntimeWarning, stacklevel=3)
    _core.set_adaptive_threads(word not in NO)


def _threads_as_said():
    """``OMP_NUM_THREADS`` past what the kernels run (at most 4 threads per processor, at least 64: libgomp crashed
    or exited on counts such as 200000) is said: the kernels had run their cap without a word. Only the time
    depends on it."""
    value = _os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    threads = _core.get_num_threads()
    if value.isdigit() and int(value) > threads and _core.build_info()["openmp"]:
        import warnings

        cap = max(64, 4 * (_os.cpu_count() or 1))
        why = "at most 4 per processor, at least 64" if threads >= cap else \
            "OpenMP's default, one per core: it did not take that value"  # (a count past 2^64 it cannot read had
        # been said "they use 2 (at most 4 per processor, at least 64)", helper 196)
        warnings.warn(f"OMP_NUM_THREADS={value} is more threads than the kernels run: they use {threads} ({why})",
                      RuntimeWarning, stacklevel=3)


#: Whether this process was forked (``os.fork``, multiprocessing's "fork" start method) from one whose kernels
#: could run on threads (an OpenMP build): its kernels then run on one (:func:`_one_thread_after_fork`).
_FORKED_FROM_THREADS = False


def _one_thread_after_fork():
    """In a child forked from this process: the kernels on one thread. GNU OpenMP cannot start a team in a child
    forked after its parent ran one: the child's first parallel kernel waited for ever (``multiprocessing.Pool``
    with the "fork" start method, Linux's default before Python 3.14, after a run in the parent). One thread per
    worker is also what a pool of processes on the cores wants; :func:`set_num_threads` then refuses more."""
    global _FORKED_FROM_THREADS
    if _core.build_info()["openmp"]:  # (whatever the count now: a team may have run at an earlier one)
        _FORKED_FROM_THREADS = True
        _core.set_num_threads(1)


_adaptive_threads_as_said()
_threads_as_said()
if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_one_thread_after_fork)
from . import algorithms, composite, objectives, topology  # noqa: E402
from .errors import DivergenceError, GrowthWarning, NetworkIgnoredWarning
from .metrics import NetworkMetrics
from .mixing import MixingMatrix
from .protocol import ConsensusResult, a_protocol, pull_diag
from ._version import __version__
from .runner import Algorithm, History, run
from .user_metrics import MetricState, register_metric

#: The package's logger ("rowstoch_fast"): silent unless configured (``logging.basicConfig(level="INFO")``, or the
#: command line's ``-v``); warnings go through :mod:`warnings`.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

# every registered algorithm under its class name (rf.PullDiagGT, rf.DSGD, ...): the registry's, not a list here
globals().update({_name: getattr(algorithms, _name) for _name in algorithms.CLASSES})

__all__ = [
    *algorithms.CLASSES,
    "MixingMatrix",
    "NetworkMetrics",
    "DivergenceError",
    "GrowthWarning",
    "NetworkIgnoredWarning",
    "pull_diag",
    "a_protocol",
    "ConsensusResult",
    "Algorithm",
    "History",
    "run",
    "register_metric",
    "MetricState",
    "objectives",
    "composite",
    "topology",
    "build_info",
    "set_num_threads",
    "get_num_threads",
    "get_include",
    "get_cmake_dir",
    "__version__",
]


#: Submodules reachable as attributes without being imported by ``import rowstoch_fast`` (``rf.network.Lossy``,
#: ``rf.compare.compare``; ``rf.torch`` imports PyTorch, ``rf.backends`` CuPy only when asked for a GPU): every
#: public module of the package.
_LAZY = tuple(sorted(_m.name for _m in _pkgutil.iter_modules(__path__) if not _m.name.startswith("_")))


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def set_num_threads(n):
    """Use ``n`` threads in the compiled kernels (OpenMP) from now on; returns the previous number.

    The default is ``OMP_NUM_THREADS`` or all cores. On a busy machine fewer
    threads can be faster (bench/RESULTS.md); MPI ranks share a node's cores
    by default. A process forked from one whose kernels could use threads
    (``os.fork``, ``multiprocessing``'s "fork" start method) runs them on one
    thread, and more are refused there (RuntimeError): GNU OpenMP cannot
    start threads in such a child (its first parallel kernel would wait for
    ever). Workers started with the "spawn" or "forkserver" method have their
    own threads.

    Examples
    --------
    >>> import rowstoch_fast as rf
    >>> before = rf.set_num_threads(1)
    >>> rf.get_num_threads()
    1
    >>> _ = rf.set_num_threads(before)
    """
    from ._checks import check_int

    n = check_int(n, "n", minimum=1, maximum=4096)
    if n > 1 and _FORKED_FROM_THREADS:
        raise RuntimeError(f"set_num_threads({n}): this process was forked from one whose kernels ran on threads, "
                           "and OpenMP cannot start threads in such a child (its first parallel kernel would wait "
                           "for ever): its kernels run on one thread; start the workers with the 'spawn' or "
                           "'forkserver' method (multiprocessing.get_context('spawn')) for threads of their own")
    previous = _core.get_num_threads()
    _core.set_num_threads(n)
    return previous


def get_num_threads():
    """The number of threads the compiled kernels use (:func:`set_num_threads`)."""
    return _core.get_num_threads()


def build_info():
    """How the compiled kernels were built (OpenMP, compiler, flags, threads).

    Examples
    --------
    >>> sorted(build_info())[:3]
    ['compiler', 'flags', 'max_threads']
    """
    return dict(_core.build_info())


def get_include():
    """The folder to put on a C++ compiler's include path to use the kernels (``#include "rowstoch/mix.hpp"``),
    as ``numpy.get_include()`` and ``pybind11.get_include()`` do: header-only templated C++17, no Python, OpenMP
    where the compiler is given ``-fopenmp`` (serial without it).

    Examples
    --------
    >>> import os
    >>> os.path.isfile(os.path.join(get_include(), "rowstoch", "mix.hpp"))
    True
    """
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_cmake_dir():
    """The folder of the CMake package configuration (``find_package(rowstoch CONFIG)`` with ``rowstoch_DIR`` set to
    it; the target ``rowstoch::kernels``).

    Examples
    --------
    >>> import os
    >>> os.path.isfile(os.path.join(get_cmake_dir(), "rowstochConfig.cmake"))
    True
    """
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "cmake", "rowstoch")
