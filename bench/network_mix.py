"""Lossy and time-varying mixing against static mixing (issue 12's speed target).

Usage::

    python bench/network_mix.py [--log2n 18] [--d 10] [--p 0.1]

Interleaved medians of one gossip round on the exponential graph: the static ``MixingMatrix.mix`` (C++
kernel), ``Lossy(A, p).mix`` and ``Lossy(A, [p] * n).mix`` (one p per node: the same draws through the pass's general case),
``Sleepy(A, 0.9).mix`` (losses and sleep drawn by hashing inside the compiled
CSR pass, rows renormalised there: ``_core.mix_lossy``), ``one_peer_exponential(n).mix`` (a
2-entry-per-row schedule) and compressed messages (``Compressed(A, "qsgd", bits=4)``, "qsgd per-node" with each
sender's bits 2, 3, 4 or 8 in turn, ``"topk", k=2`` and
``Compressed(Lossy(A, p), "topk", k=2)``: the messages encoded in C++, then one pass over ``[X; Q]``) and
delayed ones (``Delayed(A, 3)``, uniform and fixed delays: one pass over ``[X; the last 4 iterations' messages]``,
uniform delays' ages drawn in it (``_core.mix_delayed``), a fixed delay's index kept; "via index": uniform delays
through ``delay_ages``' index and a second pass, as before; the same over losses; "lossy-topk-2 via index": the
compressed round over losses through ``own_and_messages``' index and the block's node ids, the lossy pass's general
case, as before ``_core.mix_lossy(..., stacked=True)``; "lossy-topk-2 stacked": the own rows copied into the
stacked block ``[X; Q]``, as before ``_core.mix_lossy(..., messages=Q)`` read them from X). Targets: lossy at most 1.5x the static mix
(bench/RESULTS.md section 11); compressed or delayed within 2x (issue 37); over losses within 2x, uniform delays
within 3x (issue 52); Gaussian noise on each message (``Noisy(A, 0.01, per="message")``) and on each received copy
(``Noisy(A, 0.01)``: a normal per link and value) within 2x (issue 52). ``--only lossy,lossy-topk-2,...``: those rows (and the static one) only.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info  # noqa: E402

from rowstoch_fast import _core, topology  # noqa: E402
from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy, Sleepy, one_peer_exponential  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=18)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--p", type=float, default=0.1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default="", help="comma-separated rows to time beside the static one (default: all)")
    args = p.parse_args(argv)
    n = 2**args.log2n
    A = topology.exponential(n)
    X = np.random.default_rng(0).standard_normal((n, args.d))
    out = np.empty_like(X)
    lossy, sleepy, onepeer = Lossy(A, args.p, seed=1), Sleepy(A, 0.9, seed=1), one_peer_exponential(n)
    t = [0]

    def step(net):
        def run():
            t[0] += 1
            net.mix(X, t[0], out=out)
        return run

    compressed = {"qsgd-4": Compressed(A, "qsgd", bits=4, seed=1),
                  "qsgd per-node": Compressed(A, "qsgd", bits=np.resize([2, 3, 4, 8], n), seed=1),  # (each
                  # sender's bits: the batches of four messages split where they change, here at every row)
                  "topk-2": Compressed(A, "topk", k=2),
                  "lossy-topk-2": Compressed(lossy, "topk", k=2),
                  "lossy-topk-2 stacked": Compressed(lossy, "topk", k=2),
                  "lossy-topk-2 via index": Compressed(lossy, "topk", k=2), "delayed-3": Delayed(A, 3, seed=1),
                  "delayed-3-fixed": Delayed(A, 3, delay="fixed"), "delayed-3 via index": Delayed(A, 3, seed=1),
                  "lossy-delayed-3": Delayed(lossy, 3, seed=1), "lossy-delayed-3 via index": Delayed(lossy, 3, seed=1),
                  "noise-message": Noisy(A, 0.01, seed=1, per="message"), "noise-link": Noisy(A, 0.01, seed=1)}
    for k in ("delayed-3 via index", "lossy-delayed-3 via index"):  # (the two passes before: delay_ages' index,
        compressed[k].FUSED = {"uniform": False}  # then the mix)
    compressed["lossy-topk-2 via index"].STACKED = False  # (the general case: the block's node ids)
    compressed["lossy-topk-2 stacked"].SPLIT = False  # (the own rows copied into [X; Q]: the path before)
    per_node = Lossy(A, np.full(n, args.p), seed=1)  # (one p per node, all equal: the pass's general case)
    rows = {"static": lambda: A.mix(X, out=out), "lossy": step(lossy), "lossy per-node": step(per_node),
            "sleepy": step(sleepy),
            "one-peer": step(onepeer), **{k: step(v) for k, v in compressed.items()}}
    only = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = sorted(set(only) - set(rows))
    if unknown:
        p.error(f"--only: unknown rows {unknown}; rows: {', '.join(rows)}")
    if only:
        rows = {k: v for k, v in rows.items() if k == "static" or k in only}
    med, _ = interleaved(rows, rounds=args.rounds, min_time=0.3)
    info = machine_info()
    print(f"# {info['cpu']} ({info['cores']} cores, {_core.get_num_threads()} threads); n = 2^{args.log2n}, "
          f"d = {args.d}, p = {args.p}, exponential graph ({A.nnz} weights)")
    print("| mix | ms per round | vs static |")
    print("|---|---|---|")
    for k in rows:
        print(f"| {k} | {med[k] * 1e3:.2f} | {med[k] / med['static']:.2f}x |")


if __name__ == "__main__":
    main()
