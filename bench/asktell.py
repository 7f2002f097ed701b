"""What ask/tell costs against step: the same optimizer stepped both ways, interleaved, medians of rounds.

    python bench/asktell.py [--n 16] [--d 10] [--steps 2000] [--rounds 7]
"""

import argparse
import time

import numpy as np

from rowstoch_fast import PullDiagGT, topology


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args()
    A = topology.exponential(a.n)
    b = np.random.default_rng(0).standard_normal((a.n, a.d))

    def grad(X):
        return X - b

    times = {"step": [], "ask/tell": []}
    for _ in range(a.rounds):
        opt = PullDiagGT(A, np.zeros((a.n, a.d)), lr=0.05)
        t = time.perf_counter()
        for _ in range(a.steps):
            opt.step(grad)
        times["step"].append((time.perf_counter() - t) / a.steps)
        opt = PullDiagGT(A, np.zeros((a.n, a.d)), lr=0.05)
        t = time.perf_counter()
        while opt.iteration < a.steps:
            opt.tell(grad(opt.ask()))
        times["ask/tell"].append((time.perf_counter() - t) / a.steps)
        opt.close()
    med = {k: float(np.median(v)) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:>9}: {v * 1e6:8.1f} us per step (median of {a.rounds}; {min(times[k]) * 1e6:.1f}-"
              f"{max(times[k]) * 1e6:.1f})")
    print(f"ask/tell / step: {med['ask/tell'] / med['step']:.2f}x (n = {a.n}, d = {a.d})")


if __name__ == "__main__":
    main()
