"""A step with its gradients scanned for NaN/Inf before the combine that reads them, against the step as it is
(the scan left to that combine's check, ``_gradient_read(..., checked_next=True)``): interleaved, one run.

    python bench/gradient_scan.py [--only dsgd,local-dsgd,prox-skip,k-gt,led] [--log2n 16] [--rounds 5]

Constant gradients, d = 10, the exponential graph (SGP on its column-stochastic twin, undirected methods on its
Metropolis weights, Pull-Diag-GD with the Perron tracker); prints each method's two medians and their ratio.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved  # noqa: E402

from rowstoch_fast import topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY  # noqa: E402
from rowstoch_fast.mixing import out_degree_weights  # noqa: E402


def stepper(name, n, d, scan):
    cls = REGISTRY[name]
    if scan:  # (the step before: every gradient scanned where it is read)
        class Scanned(cls):
            def _gradient_read(self, grad_fn, x_buf, work, iteration, checked_next=False):
                return super()._gradient_read(grad_fn, x_buf, work, iteration)
        cls = Scanned
    A = topology.exponential(n)
    M = out_degree_weights(A) if cls.matrices == ("C",) else \
        topology.exponential(n, directed=False, weights="metropolis") if cls.symmetric else A
    opt = cls.build(M, np.zeros((n, d)), 1e-3, **({"tracker": "perron"} if name == "pull-diag-gd" else {}))
    G = np.random.default_rng(0).standard_normal((n, d))
    for _ in range(4):
        opt.step(lambda X: G)
    return lambda: opt.step(lambda X: G)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="dsgd,local-dsgd,prox-skip,k-gt,led")
    p.add_argument("--log2n", type=int, default=16)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    names = args.only.split(",")
    contenders = {}
    for name in names:
        contenders[f"{name} scan"] = stepper(name, 2**args.log2n, 10, True)
        contenders[f"{name} as is"] = stepper(name, 2**args.log2n, 10, False)
    times, _ = interleaved(contenders, rounds=args.rounds)
    print(f"n = 2^{args.log2n}, d = 10, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"load {os.getloadavg()[0]:.2f}")
    for name in names:
        a, b = times[f"{name} scan"], times[f"{name} as is"]
        print(f"  {name:<14} with the scan {a * 1e3:.3f} ms, as is {b * 1e3:.3f} ms: {a / b:.2f}x")


if __name__ == "__main__":
    main()
