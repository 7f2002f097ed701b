"""A noisy quadratic's gradients (``Quadratic(sigma > 0)``): one draw per stream, the generators seeded in C++
(NumPy's SeedSequence and PCG64, ``_core.numpy_pcg64_states``), against the former path (a ``default_rng`` per
replica and step: ``_reference.quadratic_stochastic_gradient``), the same bits asserted, interleaved in one process.

    OMP_NUM_THREADS=1 python bench/quadratic_noise.py [--repeats 5]

Prints the median time of one gradient call with each path (and their ratio) for an evaluation's replicas (one
stream each) and a tuner's grid (11 rates x 2 streams), then a ``compare`` of four methods end to end with each
path, their records asserted equal.
"""

import argparse
import statistics
import time
import warnings

import numpy as np

import rowstoch_fast as rf
from _harness import machine_line, per_call
from rowstoch_fast import compare as cmp
from rowstoch_fast._reference import quadratic_stochastic_gradient
from rowstoch_fast.objectives import Quadratic


class Former(Quadratic):
    def stochastic_gradient(self, X, iteration, **kw):
        return quadratic_stochastic_gradient(self, X, iteration, **kw)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    print(machine_line())
    new = Quadratic.random(16, 10, seed=0, sigma=0.1)
    old = Former(new.q, new.b, sigma=new.sigma)
    for reps, period in [(1, 0), (5, 0), (22, 2)]:
        X = np.random.default_rng(0).standard_normal((reps, 16, 10))
        assert np.array_equal(new.stochastic_gradient(X, 5, rep_period=period),
                              old.stochastic_gradient(X, 5, rep_period=period))
        times = {"now": [], "former": []}
        for _ in range(args.repeats):
            for name, f in (("now", new), ("former", old)):
                times[name].append(per_call(lambda k: f.stochastic_gradient(X, k, rep_period=period), 300))
        a, b = statistics.median(times["now"]), statistics.median(times["former"])
        print(f"{reps} replicas (period {period}): {a * 1e6:.1f} us against {b * 1e6:.1f} us ({b / a:.2f}x)",
              flush=True)
    A = rf.topology.exponential(16)
    methods = ["dsgd", "diging", "pull-diag-gt", "push-pull"]
    records = {}
    for name, f in (("now", new), ("former", old)):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = cmp.compare(A, f, methods, 1000, repeats=5, progress=False, jobs=1)
        records[name] = result.drop(columns=[c for c in result.columns if "seconds" in c])
        print(f"compare ({', '.join(methods)}; 1,000 rounds, 5 repetitions, rates tuned, one process), {name}: "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    assert records["now"].equals(records["former"]), "the two paths' records differ"


if __name__ == "__main__":
    main()
