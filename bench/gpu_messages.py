"""Compressed, noisy and delayed messages on the GPU (issue 37): the CuPy backend's kernels against the CPU.

Usage (a machine with an NVIDIA GPU and CuPy; bench/gpu_check.sh's ``messages`` stage)::

    python bench/gpu_messages.py [--check-log2n 12] [--log2n 18 20] [--d 10] [--json out.json]

1. *Same messages*: each network's rounds through ``CupyBackend.mix_network`` (``compress_rows``,
   ``csr_mix_messages``, ``csr_mix_circmsg``) and through the CPU's ``net.mix``, three iterations of
   two rounds on rows of two models of ``d`` values; prints the largest difference and whether the bits agree
   (they should everywhere but Gaussian noise, whose ``log`` / ``cos`` are the device's: about 1 ulp from libm,
   a few from the CPU's own polynomials, simd.hpp's ``box_muller``).
2. *Speed*: interleaved medians of one round at n = 2^log2n on the exponential graph: the static mix
   (``csr_mix`` kernels), the lossy round, compressed (QSGD 4 bits, top-2, top-2 over losses), delayed (bound
   3, uniform and fixed; each also with its history in the other order than ``Delayed.ORDER``'s; uniform also with
   its ages drawn in the pass, ``ROWSTOCH_CUDA_DELAY_AGES=pass``), noisy (per message, per received copy), and the
   host round trip the backend took
   before (``_on_host``, for top-2). Target: a compressed or delayed mix within 2x the static one.
   Per-node parameters (a loss probability, a compression's bits or k, a noise's sigma, one per node: the sender's,
   read in the kernels since 2026-12-04) against the same networks with one value, and against the host round
   trip such rounds took before (``* via host (before)``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from rowstoch_fast import topology  # noqa: E402
from rowstoch_fast.backends import cupy as backend  # noqa: E402
from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy  # noqa: E402


def networks(A):
    lossy = Lossy(A, 0.1, seed=1)
    nets = {"lossy": lossy, "qsgd-4": Compressed(A, "qsgd", bits=4, seed=1), "topk-2": Compressed(A, "topk", k=2),
            "lossy-topk-2": Compressed(lossy, "topk", k=2), "delayed-3": Delayed(A, 3, seed=1),
            "delayed-3-fixed": Delayed(A, 3, delay="fixed"), "noise-message": Noisy(A, 0.01, per="message"),
            "noise-link": Noisy(A, 0.01)}
    # the other order of each delay's history (Delayed.ORDER: uniform node by node, fixed iteration by iteration)
    for name, delay in (("delayed-3 by iteration", "uniform"), ("delayed-3-fixed by node", "fixed")):
        nets[name] = Delayed(A, 3, seed=1, delay=delay)
        nets[name].ORDER = {delay: "iteration" if delay == "uniform" else "node"}
    return nets


def per_node_networks(A, seed=1):
    """Networks with one parameter per node (heterogeneous devices; drawn once, from ``seed``)."""
    n = A.n
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 0.2, n)
    lossy = Lossy(A, p, seed=1)
    return {"lossy per node": lossy,
            "qsgd per node": Compressed(A, "qsgd", bits=rng.choice([2, 4, 8], n), seed=1),
            "topk per node": Compressed(A, "topk", k=rng.choice([1, 2, 4], n)),
            "lossy topk per node": Compressed(lossy, "topk", k=rng.choice([1, 2, 4], n)),
            "noise-link per node": Noisy(A, rng.uniform(0.0, 0.02, n)),
            "delayed-3 lossy per node": Delayed(lossy, 3, seed=1)}


def check(log2n, d):
    """(name, max |device - cpu|, bits equal) for every message network, on the device vs the host."""
    cupy = backend.require_cupy()
    n = 2**log2n
    A = topology.exponential(n)
    lossy = Lossy(A, 0.2, seed=3)
    nets = {"qsgd-3": Compressed(lossy, "qsgd", bits=3, seed=1),
            "qsgd-2-nearest": Compressed(lossy, "qsgd", bits=2, unbiased=False),
            "sign": Compressed(lossy, "sign"), "topk-3": Compressed(lossy, "topk", k=3),
            "topk-8": Compressed(lossy, "topk", k=8), "randk-2": Compressed(lossy, "randk", k=2, seed=4),
            "round-5": Compressed(lossy, "round", bits=5),
            "noise-message": Noisy(lossy, 0.1, seed=2, per="message"),
            "delayed-3": Compressed(Delayed(lossy, 3, seed=5), "topk", k=4),
            "delayed-3-fixed": Delayed(lossy, 3, delay="fixed"),
            "noise-link-delayed": Noisy(Delayed(lossy, 2, seed=5), 0.05, seed=8)}
    nets.update(per_node_networks(A, seed=3))
    rows = []
    for name, net in nets.items():
        for dtype in (np.float64, np.float32):
            dev = backend.CupyBackend()
            dev.attach(n, dtype, [A.astype(dtype)])
            dev.message_d = d
            cpu_net, dev_net = net.map(lambda M: M.astype(dtype)), net.map(lambda M: M.astype(dtype))
            rng = np.random.default_rng(1)
            state, worst, same = {}, 0.0, True
            for t in range(3):
                X = rng.standard_normal((n, 2 * d)).astype(dtype)
                want = cpu_net.mix(X, t, rounds=2, **({"d": d, "state": state} if hasattr(net, "encode") else {}))
                dev.calls = 0
                got = dev.mix_network(dev_net, t, cupy.asarray(X), cupy.zeros(X.shape, dtype=dtype), rounds=2).get()
                worst = max(worst, float(np.max(np.abs(got - want))))
                same = same and np.array_equal(got, want)
            rows.append({"network": name, "dtype": np.dtype(dtype).name, "max_abs_diff": worst, "bits_equal": same})
            print(f"check {name:20s} {np.dtype(dtype).name:8s} max |gpu - cpu| = {worst:.3g}  "
                  f"{'bit for bit' if same else 'DIFFERENT BITS'}", flush=True)
    return rows


def speed(log2n, d, rounds=7, per=20):
    """Interleaved medians (ms) of one round of each network on the device."""
    cupy = backend.require_cupy()
    n = 2**log2n
    A = topology.exponential(n)
    X = cupy.asarray(np.random.default_rng(0).standard_normal((n, d)))
    out = cupy.empty_like(X)
    dev = backend.CupyBackend()
    dev.attach(n, np.float64, [A])
    dev.message_d = d
    dev.checking = False
    t = [0]

    def run_net(net):
        def go():
            t[0] += 1
            dev.calls = 0
            dev.mix_network(net, t[0], X, out)
        return go

    def host_round_trip(net):  # what the backend did before the kernels: the CPU's pass, two copies
        def go():
            t[0] += 1
            message_d = {"d": d} if hasattr(net, "encode") else {}  # (a base network takes no message length)
            dev._on_host(out, lambda: net.mix(backend.to_cpu(X), t[0], 1, **message_d))
        return go

    def ages_in_pass(go):  # the uniform delays' ages drawn again by every thread of a row (ROWSTOCH_CUDA_DELAY_AGES)
        def run():
            kept, backend.DELAY_AGES = backend.DELAY_AGES, "pass"
            try:
                go()
            finally:
                backend.DELAY_AGES = kept
        return run

    per_node = per_node_networks(A)
    cases = {"static": lambda: backend._mix_into(A, X, out), **{k: run_net(v) for k, v in networks(A).items()},
             "delayed-3 ages in pass": ages_in_pass(run_net(Delayed(A, 3, seed=1))),
             "topk-2 via host (before)": host_round_trip(Compressed(A, "topk", k=2)),
             **{k: run_net(v) for k, v in per_node.items()},
             "lossy per node via host (before)": host_round_trip(per_node["lossy per node"]),
             "qsgd per node via host (before)": host_round_trip(per_node["qsgd per node"])}
    for go in cases.values():  # compile, allocate
        go()
    cupy.cuda.runtime.deviceSynchronize()
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for name, go in cases.items():
            reps = 2 if "host" in name else per
            cupy.cuda.runtime.deviceSynchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                go()
            cupy.cuda.runtime.deviceSynchronize()
            times[name].append((time.perf_counter() - t0) / reps * 1e3)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"n = 2^{log2n}, d = {d}, exponential graph ({A.nnz} weights); median ms per round over {rounds} "
          f"interleaved rounds of {per} calls:", flush=True)
    for k, v in med.items():
        print(f"  {k:26s} {v:9.3f} ms  {v / med['static']:6.2f}x static", flush=True)
    return {"log2n": log2n, "d": d, "nnz": int(A.nnz), "median_ms": med}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check-log2n", type=int, default=12)
    p.add_argument("--log2n", type=int, nargs="*", default=[18, 20])
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    result = {"check": check(args.check_log2n, args.d), "speed": [speed(k, args.d) for k in args.log2n]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
