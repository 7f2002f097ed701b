"""Where a uniformly delayed round's time goes (issue 52, item 3: uniform delays within 3x of the static round).

    python bench/delay_floor.py [--log2n 16,18] [--d 10] [--max-delay 3] [--rounds 5]

Interleaved medians, exponential graph, on the kernels' threads (OMP_NUM_THREADS):

- ``static``: ``MixingMatrix.mix`` (the reference);
- ``round``: one whole round of ``Delayed(A, D)`` (uniform delays): the history's update and the pass;
- ``pass``: the pass alone (``_core.mix_delayed`` over the history, ages drawn in it);
- ``pass, no draws``: the same pass with a fixed delay over the same node-by-node history (every link reads one
  slot: no hashes, the same layout): what the history's layout costs by itself;
- ``pass, one block``: a fixed delay over a history laid out iteration by iteration (every link reads one
  contiguous block of n rows, as the static mix reads X): the layout a uniform delay cannot use;
- ``ages``: the draws alone (``_core.delay_ages``: every link's age, written).

The floor of today's design is ``pass, no draws``: a link of a uniform delay reads a row of one of D + 1 blocks,
so the pass gathers from (D + 1) n d values (84 MB at n = 2^18, d = 10: more than this VM's 32 MB L3) where the
static mix gathers from n d.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402

from rowstoch_fast import _core, topology  # noqa: E402
from rowstoch_fast.network import Delayed  # noqa: E402


def contenders(n, d, D):
    A = topology.exponential(n)
    c = A.tocsr()
    X = np.random.default_rng(0).standard_normal((n, d))
    out = np.empty_like(X)
    net = Delayed(A, D, seed=1)
    clock = [0]

    def whole():
        net.mix(X, clock[0], out=out)
        clock[0] += 1

    for _ in range(D + 2):
        whole()
    ring = net._own_state["ring"]
    H, layout = ring.buffer, ring.layout()  # (n own rows, then the history node by node)
    by_iteration = np.random.default_rng(1).standard_normal(H.shape)
    one_block = layout[:3] + (False,)  # (the same block laid out iteration by iteration)
    t = 10 * (D + 1)
    return {
        "static": lambda: A.mix(X, out=out),
        "round": whole,
        "pass": lambda: _core.mix_delayed(c.indptr, c.indices, c.data, H, out, 1, t, 0, D, False, layout),
        "pass, no draws": lambda: _core.mix_delayed(c.indptr, c.indices, c.data, H, out, 1, t, 0, D, True, layout),
        "pass, one block": lambda: _core.mix_delayed(c.indptr, c.indices, c.data, by_iteration, out, 1, t, 0, D, True,
                                                     one_block),
        "ages": lambda: _core.delay_ages(c.indptr, c.indices, 1, t, 0, D, fixed=False),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", default="16,18")
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--max-delay", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    print(machine_info())
    for k in (int(v) for v in args.log2n.split(",")):
        times, _ = interleaved(contenders(2 ** k, args.d, args.max_delay), rounds=args.rounds, min_time=0.3)
        static = times["static"]
        print(f"\nn = 2^{k}, d = {args.d}, max_delay = {args.max_delay}\n| part | ms | vs static |\n|---|---|---|")
        for name, s in times.items():
            print(f"| {name} | {s * 1e3:.2f} | {s / static:.2f}x |")


if __name__ == "__main__":
    main()
