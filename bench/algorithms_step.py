"""One iteration of every algorithm (constant gradient) against the scipy.sparse composition of its own equations.

Usage::

    python bench/algorithms_step.py [--log2n 16] [--d 10] [--rounds 5] [--json bench/algorithms_step.json]

For each algorithm of ``rowstoch_fast.algorithms.REGISTRY`` on the directed exponential graph (row-stochastic
``A`` and its out-degree weighted ``C``), interleaved in one run, medians over rounds:

* ``rowstoch``: ``opt.step(grad)`` with a constant gradient (the whole step: gradient copy and NaN check,
  mixing, element-wise updates, commit; trackers frozen, ``tracker="perron"``);
* ``scipy``: the same update written directly with ``scipy.sparse`` products and NumPy expressions.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402

from rowstoch_fast import _core, topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY, names  # noqa: E402
from rowstoch_fast.mixing import out_degree_weights  # noqa: E402


def scipy_step(name, S, SC, s, lr, st, g):
    """The algorithm's update in scipy.sparse + NumPy (state dict ``st``; ``s``: the frozen 1/diag(D))."""
    if name == "pull-diag-gt":
        st["x"] = S @ (st["x"] - lr * st["y"])
        st["y"] = S @ (st["y"] + s[:, None] * g - s[:, None] * st["g"])
    elif name == "frost":
        x = S @ st["x"] - lr * st["y"]
        st["y"] = S @ st["y"] + s[:, None] * g - s[:, None] * st["g"]
        st["x"] = x
    elif name == "pull-diag-gd":
        st["x"] = S @ st["x"] - lr * (s[:, None] * g)
    elif name == "dsgd":
        st["x"] = S @ (st["x"] - lr * g)
    elif name == "push-pull":
        st["x"] = S @ (st["x"] - lr * st["y"])
        st["y"] = SC @ st["y"] + g - st["g"]
    elif name == "push-diging":
        st["u"] = SC @ (st["u"] - lr * st["y"])
        st["v"] = SC @ st["v"]
        st["x"] = st["u"] / st["v"]
        st["y"] = SC @ st["y"] + g - st["g"]
    elif name == "sgp":
        st["x"] = SC @ (st["x"] - lr * g)
        st["w"] = SC @ st["w"]
        st["z"] = st["x"] / st["w"]
    elif name == "centralized":
        st["x"] = st["x"] - lr * g.mean(axis=0)
    else:
        return False  # no transcription here: the table says so
    return True


def make_contenders(name, A, d, lr=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    n = A.n
    g = rng.standard_normal((n, d))
    cls = REGISTRY[name]
    opt = cls.build(A, rng.standard_normal((n, d)), lr, tracker="perron")
    opt.step(lambda X: g)
    S = sp.csr_matrix(A.csr)
    SC = sp.csr_matrix(out_degree_weights(A).csr)
    s = 1.0 / A.pi
    # the algorithm's own state blocks, shaped as it declares them (push-sum weights: one value per node, ones)
    st = {k: np.ones((n, 1)) if k in cls.narrow else rng.standard_normal((n, d)) for k in cls.state}
    st.setdefault("g", rng.standard_normal((n, d)))  # (the previous gradient, kept as state or not)
    if not scipy_step(name, S, SC, s, lr, dict(st), g):
        return {"rowstoch": lambda: opt.step(lambda X: g)}
    return {"rowstoch": lambda: opt.step(lambda X: g), "scipy": lambda: scipy_step(name, S, SC, s, lr, st, g)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=16)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    info = machine_info()
    A = topology.exponential(2**args.log2n)
    A.pi
    print(f"# {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads; "
          f"exponential(2^{args.log2n}), d = {args.d}")
    print("| algorithm | rowstoch ms | scipy ms | speedup |")
    print("|---|---|---|---|")
    rows = []
    for name in names():  # every registered algorithm
        med, _ = interleaved(make_contenders(name, A, args.d), rounds=args.rounds, min_time=0.05, min_calls=4)
        rows.append({"algorithm": name, "seconds": med})
        if "scipy" not in med:
            print(f"| {name} | {med['rowstoch'] * 1e3:.3f} | (no scipy transcription in scipy_step) | |", flush=True)
            continue
        print(f"| {name} | {med['rowstoch'] * 1e3:.3f} | {med['scipy'] * 1e3:.3f} | "
              f"{med['scipy'] / med['rowstoch']:.2f}x |", flush=True)
    if args.json:
        save_json(args.json, {"machine": info, "n": A.n, "d": args.d, "rows": rows})


if __name__ == "__main__":
    main()
