"""The records' full pass (``_core.logistic_full_grad``, the gradient alone) on the default comparison's problem
(16 nodes, 204,800 samples, d = 10), by the number of replicas; with ``--against DIR``, interleaved with another
build's ``_core`` (the extension file in DIR, loaded beside this one) and checked to give the same bits.

    python bench/full_pass.py [--replicas 4,5,22,26] [--calls 20] [--against /tmp/oldcore]

Prints the median of ``--calls`` calls per replica count, ns per sample and replica, and the ratio to the other
build (bench/RESULTS.md section 38b).
"""

import argparse
import glob
import importlib.machinery
import importlib.util
import os
import time

import numpy as np

from rowstoch_fast import _core
from rowstoch_fast.objectives import NonconvexLogistic


def other_core(folder):
    """The ``_core`` extension in ``folder``, loaded under another package name (its init is ``PyInit__core``)."""
    path = glob.glob(os.path.join(folder, "_core*.so"))[0]
    loader = importlib.machinery.ExtensionFileLoader("other_build._core", path)
    spec = importlib.util.spec_from_file_location("other_build._core", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", default="4,5,22,26")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--against", default=None, help="a folder holding another build's _core*.so")
    args = p.parse_args()
    f = NonconvexLogistic.synthetic(16, total=204800, d=10, rho=0.01, batch=200, seed=42, heterogeneity=0.0)
    builds = {"this": _core}
    if args.against:
        builds["other"] = other_core(args.against)
    rng = np.random.default_rng(0)
    print(f"threads {_core.get_num_threads()}, SIMD width {_core.get_simd_width()}, load "
          f"{os.getloadavg()[0]:.2f}")
    for reps in (int(r) for r in args.replicas.split(",")):
        X = rng.standard_normal((reps, 16, 10)) * 0.3
        out = {name: core.logistic_full_grad(f.H, f.Y, f.n, f.rho, X) for name, core in builds.items()}
        if "other" in out:
            assert np.array_equal(out["this"], out["other"]), "the two builds differ"
        times = {name: [] for name in builds}
        for k in range(args.calls):  # (interleaved, the order alternating)
            for name in (list(builds) if k % 2 else list(builds)[::-1]):
                start = time.perf_counter()
                builds[name].logistic_full_grad(f.H, f.Y, f.n, f.rho, X)
                times[name].append(time.perf_counter() - start)
        line = f"replicas {reps:>3}: " + "  ".join(
            f"{name} {np.median(t) * 1e3:.2f} ms ({np.median(t) / (reps * len(f.Y)) * 1e9:.2f} ns/sample-replica)"
            for name, t in times.items())
        if "other" in times:
            line += f"  this/other {np.median(times['this']) / np.median(times['other']):.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
