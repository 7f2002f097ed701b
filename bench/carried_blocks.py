"""A block kept as the previous iterate (or a round's start) in the buffer it was in, against the copy it was.

    python bench/carried_blocks.py [--only k-gt,extra,nids,pg-extra,prox-nids,abm,dinno] [--log2n 16] [--rounds 15]

For each method, two optimizers in one process, interleaved (``bench/_harness.interleaved``): one as shipped
(``Optimizer._carry_as``: ``nxt[dst]`` takes ``cur[src]``'s buffer on the host) and one whose ``_carry_as`` copies
(the path before, a GPU's); K-GT's copy also takes its general ``lr_s`` path (``server_lr = 1 + 1e-12``: the
round's ``x_r - lr_s u`` formed, as before). A local-update method is timed over whole rounds of 4 steps. Prints
ms per step of each and their ratio; constant gradients, the directed exponential graph (an undirected method: the
Metropolis W of the same graph with every link both ways), d = 10.
"""

import argparse
import os
import sys
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import algorithms_step as steps  # noqa: E402
from _harness import interleaved, machine_info  # noqa: E402

from rowstoch_fast import _core, topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY  # noqa: E402


def copying(self, cur, nxt, pairs):
    """``_carry_as`` as it was: a block kept under its own name stays in its buffer (section 31b's ``_carry``), one
    kept under another name is copied through the backend."""
    for dst, src in pairs.items():
        if dst == src:
            nxt[dst] = cur[src]
        else:
            self._ops.combine(nxt[dst], [1.0], [cur[src]], check=False)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="k-gt,extra,nids,pg-extra,prox-nids,abm,dinno")
    p.add_argument("--log2n", type=int, default=16)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=15)
    args = p.parse_args(argv)
    n, d = 2**args.log2n, args.d
    A = topology.exponential(n)
    info = machine_info()
    print(f"# {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads; exponential(2^"
          f"{args.log2n}), d = {d}; load {os.getloadavg()[0]:.2f}")
    print("| algorithm | copied ms | kept ms | copied / kept |")
    print("|---|---|---|---|")
    for name in args.only.split(","):
        cls = REGISTRY[name]
        M = A if cls.applies_to(A) else steps.undirected(A)
        K = steps.steps_per_call(cls)
        rng = np.random.default_rng(0)
        g, x0 = rng.standard_normal((n, d)), rng.standard_normal((n, d))
        grad = lambda X: g  # noqa: E731
        calls = {}
        for tag in ("copied", "kept"):
            options = {"server_lr": 1.0 + 1e-12} if tag == "copied" and name == "k-gt" else {}
            opt = cls.build(M, x0, 1e-3, tracker="perron", **options)
            if tag == "copied":
                opt._carry_as = types.MethodType(copying, opt)
            for _ in range(2):
                opt.step(grad)
            calls[tag] = lambda opt=opt: [opt.step(grad) for _ in range(K)]
        med, _ = interleaved(calls, rounds=args.rounds, min_time=0.05, min_calls=4)
        print(f"| {name} | {med['copied'] / K * 1e3:.3f} | {med['kept'] / K * 1e3:.3f} | "
              f"{med['copied'] / med['kept']:.2f}x |", flush=True)
    print(f"# load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
