"""Where a GPU step's time goes, kernel by kernel, and the floor of per-link noise (issue 52's open targets).

Usage (a machine with an NVIDIA GPU and CuPy; bench/gpu_check.sh's ``profile`` stage)::

    python bench/gpu_profile.py [--log2n 20] [--d 10] [--steps 7] [--json out.json]

1. *Per-kernel time*: one step of SGP, robust gradient-push, Push-Pull and R-FAST on ``Lossy(exponential, 0.1)``
   (and DIGing, GT-SAGA on the static graph) at n = 2^log2n: every launch of kernels.cu timed with CUDA events
   recorded just before and after it on the stream; the medians over ``steps`` steps of each kernel's summed
   time per step, the step's time between its first and last event pair, and the rest (CuPy's own operations,
   the gaps between launches). The events cost a few microseconds per launch, so the step is a little slower
   than unprofiled.
2. *Per-round kernel time*: one gossip round of uniform delays (bound 3), fixed delays, lossy top-2 and link noise
   against the static round, kernel by kernel, as above (the rounds furthest from the static one).
3. *The noise floor*: the standard normals of a link-noise round (one per link and value: two hashes, a log, a
   square root and a cosine in float64, ``link_noise_value`` of kernels.cu) drawn alone, with no memory traffic
   but one store per thread, against the static round (``csr_mix``) and the noisy round at the same size: what
   the target (link noise within 2x of the static round) is up against; beside them two cheaper ways to the same
   normals, not in the package: both Box-Muller outputs of a pair of uniforms (RESULTS 40d's idea), and CUDA's
   ``normcdfinv`` of one uniform.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402
from algorithms_step import make_contenders  # noqa: E402

from rowstoch_fast import topology  # noqa: E402
from rowstoch_fast.backends import cupy as backend  # noqa: E402
from rowstoch_fast.network import Compressed, Delayed, Lossy, Noisy  # noqa: E402

LOSSY = ("sgp", "robust-gradient-push", "push-pull", "r-fast")
STATIC = ("diging", "gt-saga")


def _profiled(label, call, steps):
    """Median ms per call of each kernels.cu launch in ``call`` (CUDA events around each launch), the call's time
    from its first launch to its last, and the rest; printed under ``label``."""
    cupy = backend.require_cupy()
    real = backend._kernel
    record = []

    def timed(name):
        kernel = real(name)

        def launch(*args, **kwargs):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            kernel(*args, **kwargs)
            end.record()
            record.append((name, start, end))
        return launch

    call()
    per_step = []
    backend._kernel = timed
    try:
        for _ in range(steps):
            record.clear()
            call()
            cupy.cuda.Device().synchronize()
            kernels = {}
            for kname, s, e in record:
                kernels[kname] = kernels.get(kname, 0.0) + cupy.cuda.get_elapsed_time(s, e)
            total = cupy.cuda.get_elapsed_time(record[0][1], record[-1][2]) if record else 0.0
            per_step.append((kernels, total))
    finally:
        backend._kernel = real
    names = sorted({k for kernels, _ in per_step for k in kernels})
    med = {k: statistics.median(kernels.get(k, 0.0) for kernels, _ in per_step) for k in names}
    total = statistics.median(t for _, t in per_step)
    print(f"{label}: {total:.3f} ms from its first launch to its last (median of {steps})", flush=True)
    for k, v in sorted(med.items(), key=lambda kv: -kv[1]):
        print(f"    {k:32s} {v:8.3f} ms", flush=True)
    print(f"    {'(the rest: CuPy operations, gaps)':32s} {total - sum(med.values()):8.3f} ms", flush=True)
    return {"kernels_ms": med, "step_ms": total, "rest_ms": total - sum(med.values())}


def per_kernel(log2n, d, steps):
    A = topology.exponential(2**log2n)
    net = Lossy(A, 0.1, seed=0)
    return {name: _profiled(name, make_contenders(name, net if name in LOSSY else A, d, backend="cupy")["rowstoch"],
                            steps)
            for name in LOSSY + STATIC}


def per_round(log2n, d, steps):
    """One gossip round of each network whose GPU round is furthest from the static one (issue 52, item 3: uniform
    delays 7.8x, lossy top-2 6.0x, fixed delays 5.0x, link noise 15.3x at 2^20), kernel by kernel: where a
    redesign would save time. (A round after the first: the delays' history is full.)"""
    cupy = backend.require_cupy()
    A = topology.exponential(2**log2n)
    lossy = Lossy(A, 0.1, seed=1)
    nets = {"static": A, "delayed-3": Delayed(A, 3, seed=1), "delayed-3-fixed": Delayed(A, 3, delay="fixed"),
            "lossy-topk-2": Compressed(lossy, "topk", k=2), "noise-link": Noisy(A, 0.01, seed=4)}
    X = cupy.asarray(np.random.default_rng(0).standard_normal((A.n, d)))
    Y = cupy.empty_like(X)
    rows = {}
    for name, net in nets.items():
        ops = backend.CupyBackend()
        ops.attach(A.n, np.float64, [net])
        ops.message_d = d
        ops.checking = False  # (as bench/gpu_messages.py's rounds: no flag read per call)
        t = [0]

        def call(ops=ops, net=net, t=t):
            t[0] += 1
            ops.mix(net, X, Y) if net is A else ops.mix_network(net, t[0], X, Y)
        try:  # (a device run keeps the other rows and sections when one fails)
            for _ in range(4):  # (the history filled)
                call()
            rows[name] = _profiled(f"round of {name}, n = 2^{log2n}, d = {d}", call, steps)
        except Exception as e:  # noqa: BLE001
            print(f"round of {name}: failed: {type(e).__name__}: {e}", flush=True)
    return rows


FLOOR = r'''
extern "C" __global__ void noise_floor(unsigned long long key, long long links, long long w, double sigma,
                                       double* out) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= links * w) return;
    const long long q = tid / w, c = tid - q * w;
    const u64 link = mix64(mix64(key ^ (u64)(q >> 5)) ^ (u64)q);
    out[tid] = link_noise_value<double>(link, c, sigma);
}
// the parked idea of RESULTS 40d: both Box-Muller outputs (a pair of uniforms, one log, one square root and a
// sincos give two normals: values c and c + 1)
extern "C" __global__ void noise_floor_pairs(unsigned long long key, long long links, long long w, double sigma,
                                             double* out) {
    const long long half = (w + 1) / 2, tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= links * half) return;
    const long long q = tid / half, c = 2 * (tid - q * half);
    const u64 link = mix64(mix64(key ^ (u64)(q >> 5)) ^ (u64)q);
    const double u1 = 1.0 - message_uniform(mix64(link ^ 3ULL), (u64)c), u2 = message_uniform(mix64(link ^ 4ULL), (u64)c);
    const double r = sqrt(-2.0 * log(u1)) * sigma;
    double s, co;
    sincos(6.283185307179586 * u2, &s, &co);
    out[q * w + c] = r * co;
    if (c + 1 < w) out[q * w + c + 1] = r * s;
}
// one uniform and the inverse normal distribution function per value (CUDA's normcdfinv; a CPU twin would need an
// inverse of the same accuracy: not bit for bit, within ulps)
extern "C" __global__ void noise_floor_icdf(unsigned long long key, long long links, long long w, double sigma,
                                            double* out) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= links * w) return;
    const long long q = tid / w, c = tid - q * w;
    const u64 link = mix64(mix64(key ^ (u64)(q >> 5)) ^ (u64)q);
    const double u = (message_uniform(mix64(link ^ 3ULL), (u64)c) + 0.5 / 9007199254740992.0);
    out[tid] = normcdfinv(u) * sigma;
}
'''


def noise_floor(log2n, d, rounds):
    """Median ms of the normals alone (one per link and value), the static round and the link-noise round."""
    cupy = backend.require_cupy()
    with open(os.path.join(os.path.dirname(backend.__file__), "kernels.cu")) as f:
        module = cupy.RawModule(code=f.read() + FLOOR, options=backend._OPTIONS)
    kernel = module.get_function("noise_floor")
    pairs, icdf = module.get_function("noise_floor_pairs"), module.get_function("noise_floor_icdf")
    A = topology.exponential(2**log2n)
    links = A.csr.nnz - A.n  # (the self loops draw none)
    out = cupy.empty(links * d)
    X = cupy.asarray(np.random.default_rng(0).standard_normal((A.n, d)))
    Y = cupy.empty_like(X)
    noisy = Noisy(A, 0.01, seed=4)
    ops = backend.CupyBackend()
    ops.attach(A.n, np.float64, [A])
    ops.message_d = d
    sync = cupy.cuda.Device().synchronize
    t = [0]

    def normals():
        blocks = (links * d + 255) // 256
        kernel((blocks,), (256,), (np.uint64(12345), np.int64(links), np.int64(d), np.float64(0.01), out))
        sync()

    def normals_pairs():
        blocks = (links * ((d + 1) // 2) + 255) // 256
        pairs((blocks,), (256,), (np.uint64(12345), np.int64(links), np.int64(d), np.float64(0.01), out))
        sync()

    def normals_icdf():
        blocks = (links * d + 255) // 256
        icdf((blocks,), (256,), (np.uint64(12345), np.int64(links), np.int64(d), np.float64(0.01), out))
        sync()

    def static():
        ops.mix(A, X, Y)
        sync()

    def noise_round():
        t[0] += 1
        ops.mix_network(noisy, t[0], X, Y)
        sync()

    med, _ = interleaved({"normals alone": normals, "normals in pairs": normals_pairs,
                          "normals by normcdfinv": normals_icdf, "static round": static,
                          "link-noise round": noise_round},
                         rounds=rounds, min_time=0.05, min_calls=4)
    ms = {k: v * 1e3 for k, v in med.items()}
    print(f"n = 2^{log2n}, d = {d}: {links * d:,} normals per round; median ms over {rounds} interleaved rounds",
          flush=True)
    for k, v in ms.items():
        print(f"  {k:20s} {v:8.3f} ms  {v / ms['static round']:6.2f}x the static round", flush=True)
    return {"log2n": log2n, "d": d, "normals": links * d, "median_ms": ms}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=20)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    result = {"machine": machine_info(), "per_kernel": per_kernel(args.log2n, args.d, args.steps),
              "per_round": per_round(args.log2n, args.d, args.steps),
              "noise_floor": noise_floor(args.log2n, args.d, args.rounds)}
    if args.json:
        save_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
