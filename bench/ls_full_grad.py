"""Least squares' full gradients in C++ against NumPy's batched products (the path before).

Usage::

    PYTHONPATH=. OMP_NUM_THREADS=1 python bench/ls_full_grad.py [--log2n 4,12,18] [--reps 1,8,22] [--d 10]
        [--rounds 3]

Interleaved medians of ``_core.least_squares_grad`` (what ``LeastSquares.full_gradient`` runs up to
``objectives.LS_KERNEL_MAX_D``: a node's rows in chunks that stay in L1 while each replica of a group goes
through them, x and the sums in registers) and of the NumPy products it replaced (``matmul`` of (n, M, d) by
(reps, n, d, 1), then of the residuals by H), on ``LeastSquares.synthetic(n, d=d)`` (M = 32 rows per node); the
two agree to rounding (asserted, 1e-13).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_line  # noqa: E402

from rowstoch_fast import _core  # noqa: E402
from rowstoch_fast.objectives import LeastSquares  # noqa: E402


def numpy_products(f, X):
    """The products before the kernel (objectives.LeastSquares._grad's NumPy path)."""
    r = np.matmul(f.H, X[..., None])[..., 0] - f.y
    return np.matmul(r[..., None, :], f.H)[..., 0, :] / f.M


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", default="4,12,18")
    p.add_argument("--reps", default="1,8,22")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--d", default="10", help="row lengths (comma-separated); past LS_KERNEL_MAX_D both are NumPy's")
    args = p.parse_args(argv)
    print(machine_line())
    print("| n | d | replicas | C++ | NumPy | ratio |\n|---|---|---|---|---|---|")
    for log2n, d in ((a, b) for a in map(int, args.log2n.split(",")) for b in map(int, args.d.split(","))):
        f = LeastSquares.synthetic(2**log2n, d=d)
        for reps in map(int, args.reps.split(",")):
            X = np.random.default_rng(0).standard_normal((reps, f.n, f.d))
            kernel = lambda: _core.least_squares_grad(f.H, f.y, X)  # noqa: E731 (the kernel itself, at any d)
            got, want = kernel(), numpy_products(f, X)
            assert np.abs(got - want).max() <= 1e-13 * max(1.0, np.abs(want).max())
            t, _ = interleaved({"kernel": kernel, "numpy": lambda: numpy_products(f, X)},
                               rounds=args.rounds, min_calls=2 if log2n > 14 else 4)
            print(f"| 2^{log2n} | {d} | {reps} | {t['kernel'] * 1e3:.3f} ms | {t['numpy'] * 1e3:.3f} ms | "
                  f"{t['numpy'] / t['kernel']:.2f}x |")


if __name__ == "__main__":
    main()
