"""Per-link running sums on the GPU (issue 52, item 1): ``link_sums`` against CuPy's generic operations.

Usage (a machine with an NVIDIA GPU and CuPy; bench/gpu_check.sh's ``links`` stage)::

    python bench/gpu_links.py [--check-log2n 12] [--log2n 16 20] [--d 10] [--rounds 5] [--json out.json]

1. *Same bits*: robust gradient-push and R-FAST on the exponential graph of 2^check-log2n nodes (static, 10%
   Bernoulli losses, sleep over losses, Gilbert-Elliott losses), 20 steps of a constant gradient on the CPU and
   on the GPU: every iterate and every per-link block compared bit for bit (``link_sums`` and ``link_sums2`` are
   the CPU's sweep, same operations, same order); the generic operations' largest relative difference beside it.
2. *Speed*: one step at n = 2^log2n on ``Lossy(A, 0.1)``, interleaved medians (synchronised after each call):
   SGP, robust gradient-push through ``link_sums`` (``sweep``), ``link_sums2`` (``fused``: a round's quantities
   in one launch, one loop over a row's links), each with the flags' pass wide (eight links a thread) and
   narrow (a link a thread: the kernel before), and with ``--generic`` the generic operations; Push-Pull,
   R-FAST the same ways. Targets: robust gradient-push within 2x of SGP, R-FAST within 2x of Push-Pull.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402
from algorithms_step import make_contenders  # noqa: E402

from rowstoch_fast import topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY  # noqa: E402
from rowstoch_fast.backends import cupy as backend  # noqa: E402
from rowstoch_fast.network import Lossy, Sleepy  # noqa: E402

METHODS = ("robust-gradient-push", "r-fast")
SWEEPS = ("sweep", "fused")


def _state(opt):
    return {k: np.array(v.get() if hasattr(v, "get") else v) for k, v in opt.state_dict().items()
            if hasattr(v, "shape")}


def check(log2n, d, steps=20):
    """Rows (method, network, bits equal, max |gpu - cpu|, generic's largest relative difference)."""
    cupy = backend.require_cupy()
    A = topology.exponential(2**log2n)
    nets = {"static": A, "lossy": Lossy(A, 0.1, seed=4), "sleepy-lossy": Sleepy(Lossy(A, 0.2, seed=3), 0.8, seed=4),
            "bursty": Lossy(A, 0.9, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3)}
    rng = np.random.default_rng(0)
    x0, g = rng.standard_normal((A.n, d)), rng.standard_normal((A.n, d))
    gd = cupy.asarray(g)
    rows = []
    for name in METHODS:
        cls = REGISTRY[name]
        for label, net in nets.items():
            runs = {}
            for path in ("cpu", *SWEEPS, "generic"):
                backend.LINK_KERNEL = "fused" if path == "cpu" else path
                opt = cls.build(net, x0 if path == "cpu" else cupy.asarray(x0), 0.01, tracker="perron",
                                backend="cpu" if path == "cpu" else "cupy")
                xs, states = [], []
                for _ in range(steps):
                    opt.step((lambda X: g) if path == "cpu" else (lambda X: gd))
                    xs.append(np.array(opt.gather_x()))
                states = _state(opt)
                runs[path] = (xs, states)
            backend.LINK_KERNEL = "fused"
            (cx, cs), (gx, _) = runs["cpu"], runs["generic"]
            generic = max(float(np.linalg.norm(a - b) / np.linalg.norm(a)) for a, b in zip(cx, gx))
            held = sum(int((cs[k] != 0).any(axis=1).sum()) for k in cs if k.startswith("pending_"))
            for path in SWEEPS:
                sx, ss = runs[path]
                same = all(np.array_equal(a, b) for a, b in zip(cx, sx)) and all(
                    np.array_equal(cs[k], ss[k]) for k in cs)
                worst = max(float(np.max(np.abs(a - b))) for a, b in zip(cx, sx))
                rows.append({"method": name, "network": label, "path": path, "bits_equal": same,
                             "max_abs_diff": worst, "generic_rel": generic, "links_holding_mass": held})
                print(f"check {name:22s} {label:13s} {path:6s} {'bit for bit' if same else 'DIFFERENT BITS'}  "
                      f"max |gpu - cpu| = {worst:.3g}; generic rel {generic:.3g}; links holding mass {held}",
                      flush=True)
    return rows


def speed(log2n, d, rounds, generic=False):
    """Median ms per step of each contender on Lossy(A, 0.1) at n = 2^log2n."""
    net = Lossy(topology.exponential(2**log2n), 0.1, seed=0)

    def on(path, passes, fn):
        def go():
            backend.LINK_KERNEL, backend._WIDE_HELD_OUT = path, passes == "wide"
            try:
                fn()
            finally:
                backend.LINK_KERNEL, backend._WIDE_HELD_OUT = "fused", True
        return go

    contenders = {}
    for name in ("sgp", "robust-gradient-push", "push-pull", "r-fast"):
        if name in METHODS:
            for path in SWEEPS + (("generic",) if generic else ()):
                for passes in ("wide", "narrow") if path != "generic" else ("wide",):
                    backend.LINK_KERNEL, backend._WIDE_HELD_OUT = path, passes == "wide"
                    label = f"{name} ({path}{', narrow' if passes == 'narrow' else ''})"
                    contenders[label] = on(path, passes, make_contenders(name, net, d, backend="cupy")["rowstoch"])
            backend.LINK_KERNEL, backend._WIDE_HELD_OUT = "fused", True
        else:
            contenders[name] = make_contenders(name, net, d, backend="cupy")["rowstoch"]
    med, _ = interleaved(contenders, rounds=rounds, min_time=0.05, min_calls=4)
    ms = {k: v * 1e3 for k, v in med.items()}
    print(f"n = 2^{log2n}, d = {d}, Lossy(exponential, 0.1): median ms per step over {rounds} interleaved rounds",
          flush=True)
    base = {"robust-gradient-push": "sgp", "r-fast": "push-pull"}
    for k, v in ms.items():
        name = k.split(" ")[0]
        ratio = f"  {v / ms[base[name]]:6.2f}x {base[name]}" if name in base else ""
        print(f"  {k:40s} {v:9.3f} ms{ratio}", flush=True)
    return {"log2n": log2n, "d": d, "median_ms": ms}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check-log2n", type=int, default=12)
    p.add_argument("--log2n", type=int, nargs="*", default=[16, 20])
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--generic", action="store_true", help="time the generic operations too (slow at 2^20)")
    args = p.parse_args(argv)
    result = {"machine": machine_info(), "check": check(args.check_log2n, args.d),
              "speed": [speed(k, args.d, args.rounds, args.generic) for k in args.log2n]}
    if args.json:
        save_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
