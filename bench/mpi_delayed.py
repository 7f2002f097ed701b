"""Delayed messages under MPI: a rank keeping its halo's messages against every node's (all-gathered).

Usage (rank 0 prints)::

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m mpi4py bench/mpi_delayed.py [--log2n 16] [--d 10] [--rounds 7]

DSGD over ``Delayed(G, 3)`` (uniform delays) on a ring and on the exponential graph, constant gradients (only
the network is timed): two optimizers on the same network, one as the backend runs it (the halo's messages
exchanged with the neighbours, ``MpiBackend._mix_delayed``), one made to all-gather every node's messages each
round (how every delayed round ran before; ``network.fixed_links`` patched to say no), stepped alternately;
medians of ``--rounds`` rounds of 5 steps, in ms per step, and whether both give the same iterates.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import rowstoch_fast.network as network
from rowstoch_fast import DSGD, topology


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=16)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    n, d = 2**args.log2n, args.d
    halo_links = network.fixed_links
    for name, A in (("ring", topology.ring(n)), ("exponential", topology.exponential(n))):
        net = network.Delayed(A, 3, seed=1)
        G = np.ones((n, d))
        opts = {"halo": DSGD(net, np.zeros(d), lr=1e-3, backend="mpi"),
                "all-gather": DSGD(net, np.zeros(d), lr=1e-3, backend="mpi")}

        def step(which):
            network.fixed_links = halo_links if which == "halo" else (lambda M: False)
            try:
                opts[which].step(lambda X: G[: X.shape[0]])
            finally:
                network.fixed_links = halo_links

        times = {k: [] for k in opts}
        for k in opts:
            step(k)
        for _ in range(args.rounds):
            for k in opts:
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(5):
                    step(k)
                comm.Barrier()
                times[k].append((time.perf_counter() - t0) / 5 * 1e3)
        same = np.array_equal(opts["halo"].gather_x(), opts["all-gather"].gather_x())
        if comm.Get_rank() == 0:
            med = {k: float(np.median(v)) for k, v in times.items()}
            print(f"{name:12s} n = 2^{args.log2n}, d = {d}, {comm.Get_size()} ranks: halo {med['halo']:.2f} ms, "
                  f"all-gather {med['all-gather']:.2f} ms per step ({med['all-gather'] / med['halo']:.2f}x); "
                  f"same iterates: {same}", flush=True)


if __name__ == "__main__":
    main()
