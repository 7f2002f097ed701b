"""One step of an algorithm on a network with sleeping nodes against the same step on the static and the lossy
network: what the activation models' draws cost per step (issue 52: every communication model at the plain
path's speed).

    python bench/activation_step.py [--n 16] [--algorithm push-pull] [--rounds 5]

Interleaved medians (``_harness.interleaved``) of ``opt.step`` on least squares (d = 4, exact gradients) for the
static matrix, ``Lossy(A, 0.1)`` and ``Sleepy(A, ...)`` with each activation model (Bernoulli q = 0.8, Markov
p_sleep = p_wake = 0.2, Poisson rate 1.5), and each one's ratio to the static step.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402

from rowstoch_fast import compare as cmp, topology  # noqa: E402
from rowstoch_fast.network import Lossy, Sleepy  # noqa: E402
from rowstoch_fast.objectives import LeastSquares  # noqa: E402
from rowstoch_fast.runner import build_replicas  # noqa: E402


def stepper(net, f, algorithm):
    method = cmp.make_plan(net, f, algorithm, 100).methods[0]
    opt = build_replicas(method.algorithm(net, 0.01, "auto"), f, 1)
    oracle = f.oracle()
    opt.initialize(oracle)
    return lambda: opt.step(oracle)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--algorithm", default="push-pull")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    A = topology.exponential(args.n)
    f = LeastSquares.synthetic(args.n, samples_per_node=10, d=4, seed=0)
    nets = {"static": A, "lossy 0.1": Lossy(A, 0.1, seed=2),
            "bernoulli q 0.8": Sleepy(A, 0.8, seed=1),
            "markov 0.2 / 0.2": Sleepy(A, model="markov", p_sleep=0.2, p_wake=0.2, seed=1),
            "poisson 1.5": Sleepy(A, model="poisson", rate=1.5, seed=1)}
    times, _ = interleaved({k: stepper(net, f, args.algorithm) for k, net in nets.items()}, rounds=args.rounds)
    info = machine_info()
    print(f"{args.algorithm}, n = {args.n}, one replica; {info['cpu']}, {info['cores']} cores, "
          f"OMP_NUM_THREADS={info['OMP_NUM_THREADS']}, load {os.getloadavg()[0]:.2f}")
    for k, sec in times.items():
        print(f"  {k:<18} {sec * 1e6:8.1f} us/step  {sec / times['static']:5.2f}x static")


if __name__ == "__main__":
    main()
