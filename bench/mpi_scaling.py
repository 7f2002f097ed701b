"""Strong and weak scaling of the MPI backend: time per Pull-Diag-GT iteration, split into compute and communication.

Usage (one line per rank count; rank 0 prints)::

    for p in 1 2 4; do OMP_NUM_THREADS=1 mpiexec -n $p python -m mpi4py bench/mpi_scaling.py; done

Per n (exponential graph, d = 10, R = 1, perron tracker, constant gradient so
only the network part is timed): median seconds per iteration over
``--iterations``, the share spent in halo exchanges vs the local CSR kernel (on
the slowest rank), and the bytes each rank sent per iteration next to the
theory (2 R x halo rows sent x d x 8 bytes: the x and the y phase).
Weak scaling: n = 2^16 x P nodes on P ranks.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

from rowstoch_fast import PullDiagGT, topology


def one(n, d, R, iterations, comm):
    A = topology.exponential(n)
    G = np.ones((n, d))
    opt = PullDiagGT(A, np.zeros(d), lr=1e-3, rounds=R, tracker="perron", backend="mpi")
    grad = lambda X: G[: X.shape[0]]  # noqa: E731 - constant gradient: time the network part only
    opt.step(grad)
    halo = opt._ops.halo(A)
    c0, k0, b0 = halo.comm_seconds, halo.compute_seconds, halo.bytes_sent
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(iterations):
        opt.step(grad)
    comm.Barrier()
    wall = (time.perf_counter() - t) / iterations
    stats = np.array([(halo.comm_seconds - c0) / iterations, (halo.compute_seconds - k0) / iterations,
                      (halo.bytes_sent - b0) / iterations, 2 * R * len(halo.send_index) * d * 8])
    allstats = comm.gather(stats, root=0)
    return wall, allstats


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--log2n", default="16,18,20")
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--R", type=int, default=1)
    p.add_argument("--iterations", type=int, default=20)
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    P = comm.Get_size()
    cases = [("strong", 2**k) for k in map(int, args.log2n.split(","))] + [("weak", 2**16 * P)]
    for kind, n in cases:
        wall, allstats = one(n, args.d, args.R, args.iterations, comm)
        if comm.Get_rank() == 0:
            s = np.array(allstats)
            slow = int(np.argmax(s[:, 0] + s[:, 1]))
            print(f"| {kind} | {P} | 2^{n.bit_length() - 1} | {wall * 1e3:.2f} | {s[slow, 1] * 1e3:.2f} | "
                  f"{s[slow, 0] * 1e3:.2f} | {s[:, 2].max():.0f} | {s[:, 3].max():.0f} |", flush=True)


if __name__ == "__main__":
    main()
