"""Per-sample methods on the GPU (issue 52, item 2): their draws and table on the device against the host's.

Usage (a machine with an NVIDIA GPU and CuPy; bench/gpu_check.sh's ``samples`` stage)::

    python bench/gpu_samples.py [--check-log2n 12] [--log2n 20] [--d 10] [--rounds 5] [--json out.json]

1. *Same draws, same iterates*: ``draw_samples(..., device=True)`` (the ``draw_samples`` kernel) against the
   compiled host pass at 2^log2n nodes, one replica and three, with and without global node ids; GT-SAGA,
   GT-SAGA-ATC, LT-ADMM-VR, GT-SVRG, GT-SARAH and Push-SAGA, 20 steps of a sample-dependent gradient on the CPU
   and on the GPU at 2^check-log2n nodes (bits equal or not, the largest relative difference).
2. *Speed*: one step at n = 2^log2n, d = 10 on the exponential graph (interleaved medians, synchronised after
   each call): DIGing, the centralized baseline, GT-SAGA with its draws and table on the device (now) and with
   the draws made on the host and the table through generic operations (before: what ``Oracle.sample`` did
   until the draws went to the device); and the draws alone, device against host. Target: GT-SAGA within 2x of
   DIGing.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402
from algorithms_step import make_contenders, undirected  # noqa: E402

import rowstoch_fast.objectives as objectives  # noqa: E402
from rowstoch_fast import topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY  # noqa: E402
from rowstoch_fast.backends import cupy as backend  # noqa: E402
from rowstoch_fast.objectives import SampleOracle, draw_samples  # noqa: E402

METHODS = ("gt-saga", "gt-saga-atc", "lt-admm-vr", "gt-svrg", "gt-sarah", "push-saga")


def check(check_log2n, log2n, d, steps=20):
    cupy = backend.require_cupy()
    rows = []
    n = 2**log2n
    nodes = np.random.default_rng(0).integers(0, 2**40, n)
    for shape in ((n,), (3, n)):
        for ids in (None, nodes):
            for k in (0, 7):
                host = draw_samples(5, shape, k, seed=3, rep_offset=2, nodes=ids)
                dev = draw_samples(5, shape, k, seed=3, rep_offset=2, nodes=ids, device=True)
                same = bool(np.array_equal(host, dev.get()))
                rows.append({"draws": str(shape), "node_ids": ids is not None, "iteration": k, "equal": same})
                print(f"check draws {str(shape):12s} node ids {ids is not None!s:5s} iteration {k}: "
                      f"{'equal' if same else 'DIFFERENT'}", flush=True)
    A = topology.exponential(2**check_log2n)
    rng = np.random.default_rng(1)
    x0, g = rng.standard_normal((A.n, d)), rng.standard_normal((A.n, d))
    gd = cupy.asarray(g)
    for name in METHODS:
        cls = REGISTRY[name]
        M = A if cls.applies_to(A) else undirected(A)
        xs = {}
        for where in ("cpu", "cupy"):
            G = g if where == "cpu" else gd
            xp = np if where == "cpu" else cupy
            oracle = SampleOracle(lambda X, idx, G=G, xp=xp: X * 0.5 - G * (xp.asarray(idx)[:, None] + 1.0), samples=4)
            opt = cls.build(M, x0 if where == "cpu" else cupy.asarray(x0), 0.01, tracker="perron", backend=where)
            for _ in range(steps):
                opt.step(oracle)
            xs[where] = np.asarray(opt.gather_x())
        same = bool(np.array_equal(xs["cpu"], xs["cupy"]))
        rel = float(np.linalg.norm(xs["cpu"] - xs["cupy"]) / np.linalg.norm(xs["cpu"]))
        rows.append({"method": name, "bits_equal": same, "rel": rel})
        print(f"check {name:12s} {steps} steps: {'bit for bit' if same else 'different bits'}, rel {rel:.3g}",
              flush=True)
    return rows


def speed(log2n, d, rounds):
    cupy = backend.require_cupy()
    A = topology.exponential(2**log2n)
    sync = cupy.cuda.Device().synchronize
    contenders = {name: make_contenders(name, A, d, backend="cupy")["rowstoch"]
                  for name in ("diging", "centralized", "gt-saga")}
    before = make_contenders("gt-saga", A, d, backend="cupy")["rowstoch"]

    def host_draws():  # (the path before: the oracle draws on the host, the table through generic operations)
        real = objectives.is_device_array
        objectives.is_device_array = lambda x: False
        try:
            before()
        finally:
            objectives.is_device_array = real

    contenders["gt-saga (host draws)"] = host_draws
    calls = [0]

    def draws(device):
        def go():
            calls[0] += 1
            out = draw_samples(4, (A.n,), calls[0], device=device)
            if device:
                sync()
            return out
        return go

    contenders["draws on the device"] = draws(True)
    contenders["draws on the host"] = draws(False)
    med, _ = interleaved(contenders, rounds=rounds, min_time=0.05, min_calls=4)
    ms = {k: v * 1e3 for k, v in med.items()}
    print(f"n = 2^{log2n}, d = {d}, exponential graph: median ms per call over {rounds} interleaved rounds",
          flush=True)
    for k, v in ms.items():
        ratio = f"  {v / ms['diging']:6.2f}x DIGing" if k.startswith(("gt-saga", "centralized")) else ""
        print(f"  {k:24s} {v:9.3f} ms{ratio}", flush=True)
    return {"log2n": log2n, "d": d, "median_ms": ms}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check-log2n", type=int, default=12)
    p.add_argument("--log2n", type=int, default=20)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    result = {"machine": machine_info(), "check": check(args.check_log2n, args.log2n, args.d),
              "speed": speed(args.log2n, args.d, args.rounds)}
    if args.json:
        save_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
