"""Least-squares mini-batch gradients: the draws in C++ (NumPy's SeedSequence and PCG64, ``_core.numpy_minibatches``)
against the former path (a NumPy generator per replica and step, argsort, the products replica by replica), the
same bits asserted, interleaved in one process.

    OMP_NUM_THREADS=1 python bench/ls_minibatch.py [--repeats 5]

Prints, per setting, the median time of one gradient call and of one algorithm step with each path (and their
ratio), then a ``compare`` of three methods end to end with each path.
"""

import argparse
import statistics
import time
import warnings

import numpy as np

import rowstoch_fast as rf
from _harness import machine_line, per_call
from rowstoch_fast import compare as cmp
from rowstoch_fast._reference import least_squares_numpy_draws
from rowstoch_fast.objectives import LeastSquares
from rowstoch_fast.runner import build_replicas


class Former(LeastSquares):
    def stochastic_gradient(self, X, iteration, **kw):
        return least_squares_numpy_draws(self, X, iteration, **kw)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    print(machine_line())
    A = rf.topology.exponential(16)
    # (n, rows a node, d, batch, replicas, period); the last two: a helper's review found the products of every
    # replica at once 0.65x / 0.75x the former path there (large d and batch), before they went in blocks
    for n, M, d, batch, reps, period in [(16, 32, 10, 8, 5, 0), (16, 32, 10, 8, 22, 2), (16, 1000, 10, 50, 5, 0),
                                         (32, 128, 64, 127, 10, 0), (8, 1000, 200, 999, 5, 0)]:
        new = LeastSquares.synthetic(n, samples_per_node=M, d=d, batch=batch, seed=1)
        old = Former(new.H.reshape(-1, new.d), new.y.reshape(-1), n, batch=batch)
        X = np.random.default_rng(0).standard_normal((reps, n, new.d))
        assert np.array_equal(new.stochastic_gradient(X, 5, rep_period=period),
                              old.stochastic_gradient(X, 5, rep_period=period))
        grads = {"C++": [], "former": []}
        for _ in range(args.repeats):
            for name, f in (("C++", new), ("former", old)):
                grads[name].append(per_call(lambda k: f.stochastic_gradient(X, k, rep_period=period), 300))
        g_new, g_old = statistics.median(grads["C++"]), statistics.median(grads["former"])
        print(f"n = {n}, M = {M}, d = {d}, batch = {batch}, {reps} replicas (period {period}): gradient "
              f"{g_new * 1e6:.1f} us "
              f"against {g_old * 1e6:.1f} us ({g_old / g_new:.2f}x)", flush=True)
        if period or d > 10:
            continue
        A = rf.topology.exponential(n)
        steps = {"C++": [], "former": []}
        for method in ("dsgd", "diging", "pull-diag-gt"):
            for _ in range(args.repeats):
                for name, f in (("C++", new), ("former", old)):
                    m = cmp.make_plan(A, f, [method], 400, lr={method: 0.01}, repeats=reps).methods[0]
                    opt = build_replicas(m.algorithm(A, m.lr, "auto"), f, reps)
                    oracle = f.oracle(seed=0, batches=opt.rounds)
                    opt.initialize(oracle)
                    steps[name].append((method, per_call(lambda k: opt.step(oracle), 300)))
            s_new = statistics.median(t for mm, t in steps["C++"] if mm == method)
            s_old = statistics.median(t for mm, t in steps["former"] if mm == method)
            print(f"    {method} step: {s_new * 1e6:.1f} us against {s_old * 1e6:.1f} us ({s_old / s_new:.2f}x)",
                  flush=True)
    A = rf.topology.exponential(16)
    new = LeastSquares.synthetic(16, samples_per_node=32, batch=8, seed=1)
    old = Former(new.H.reshape(-1, new.d), new.y.reshape(-1), 16, batch=8)
    ends = {}
    for name, f in (("C++", new), ("former", old)):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = cmp.compare(A, f, ["dsgd", "diging", "pull-diag-gt"], 1000, repeats=5, progress=False, jobs=1)
        ends[name] = cmp.summary(result).set_index("algorithm")[["lr", "final"]]
        print(f"compare (dsgd, diging, pull-diag-gt; 1,000 rounds, 5 repetitions, rates tuned, one process), "
              f"{name}: {time.perf_counter() - start:.1f} s", flush=True)
    assert ends["C++"].equals(ends["former"]), "the two paths chose other rates or ended elsewhere"


if __name__ == "__main__":
    main()
