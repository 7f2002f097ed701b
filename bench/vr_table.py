"""A variance-reduced method's table of every sample at x0, taken a chunk at a time (the package's objectives'
``sample_gradients``) against one sample at a time (the same objective behind ``SampleOracle``, which has none),
interleaved in one run; medians over rounds.

    python bench/vr_table.py [--method gt-saga] [--replicas 11] [--rounds 5] [--dtype float32]

The problem is the default comparison's (nonconvex logistic, 16 nodes, 12,800 samples a node, d = 10); 11
replicas are a tuning grid's block. Both give the same table bit for bit (tests/test_objectives.py); the first
``initialize`` of a process also pays for the table's first touch, so one warm-up round runs first.
``--dtype float32``: the data and gradients in float32 under the float64 network (the chunks widen exactly).
"""

import argparse
import os
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--method", default="gt-saga")
    p.add_argument("--replicas", type=int, default=11)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    args = p.parse_args()

    import rowstoch_fast as rf
    from rowstoch_fast.objectives import NonconvexLogistic, SampleOracle
    from rowstoch_fast.runner import build_replicas

    import numpy as np

    f = NonconvexLogistic.synthetic(16, total=204800, d=10, rho=0.01, batch=200, seed=42, heterogeneity=0.0,
                                    dtype=np.dtype(args.dtype))
    A = rf.topology.exponential(16)
    oracles = {"chunks": lambda: f.oracle(seed=0),
               "per sample": lambda: SampleOracle(f.sample_gradient, f.samples_per_node, seed=0)}
    times = {name: [] for name in oracles}
    for r in range(args.rounds + 1):
        for name, make in oracles.items():
            opt = build_replicas(rf.Algorithm(A, 0.01, method=args.method), f, args.replicas)
            start = time.perf_counter()
            opt.initialize(make())
            if r:  # (round 0: the warm-up)
                times[name].append(time.perf_counter() - start)
            del opt
    print(f"{args.method}, {args.replicas} replicas x {f.samples_per_node} samples x 16 nodes, {args.dtype} data, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, load {os.getloadavg()[0]:.2f}")
    base = statistics.median(times["per sample"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:>10}: median {med:.3f} s over {len(ts)} ({', '.join(f'{t:.2f}' for t in ts)}); "
              f"{base / med:.2f}x the per-sample path's speed")


if __name__ == "__main__":
    main()
