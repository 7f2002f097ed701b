"""The CuPy backend against the hardware (issue 14): mixing bandwidth, per-iteration overhead, the logistic oracle.

Usage (on a machine with an NVIDIA GPU and CuPy; ``bench/gpu_check.sh`` runs it)::

    python bench/gpu_kernels.py [--sections bits,mix,overhead,oracle] [--out DIR] [--quick]

Sections (each prints a markdown table; everything lands in ``DIR/gpu_kernels.json``):

* ``bits``: the mixing kernels (``entry``, ``row``, ``circ``: ``ROWSTOCH_CUDA_MIX``'s) give the same iterates,
  bit for bit, as each other and as the CPU kernels (float64; float32 within 1e-5);
* ``mix``: one MG-Pull-Diag-GT iteration (eq. 12 without the gradient, exponential graph, d = 10, R = 10) at
  n = 2^20 and 2^22 with each mixing kernel, against the cupyx ``csr_matrix @ X`` composition of the same
  equations and against the device's copy bandwidth (compulsory traffic as in ``bench/scaling.py``, the
  CSR included, also for ``row`` and ``circ``, which read one weight per row or none and no indices: their
  GB/s are those of the same work), and the R gossip rounds alone;
* ``overhead``: the same iteration at n = 2^10 .. 2^16, where launches and synchronisation dominate: the
  default (graphs of the R rounds, NaN/Inf flag read every 32 steps), without graphs, and with a read of
  the flag after every step (the 2026-11 behaviour), next to the CPU kernels;
* ``oracle``: the logistic oracle (Appendix E.2: 400 samples per node, batch 200, d = 10) at n = 512 and
  2^15 on the GPU against the CPU kernels on every core of this host, and a whole Pull-Diag-GT step at
  n = 512;
* ``probe`` (not in the default list; for a profiler): three rounds of ``A X`` at n = 2^20, d = 10 with the
  ``entry``, the ``row`` and the ``circ`` kernel, printing the compulsory bytes of one round, so that
  ``ncu --kernel-name regex:csr_mix`` (``bench/gpu_check.sh``, stage ``ncu``) can set the DRAM and L2 bytes it
  counts against them;
* ``probe-oracle`` (likewise, for ``ncu --kernel-name regex:logistic_grad``): gradient calls at n = 512 and
  2^15, and where a call's time goes (waited for, the host's part, back to back between CUDA events);
* ``probe-host``: the host's part of a gradient call and of a Pull-Diag-GT step at n = 512, split into the
  kernel launches and the rest, a profile of the step's Python, and what a few CuPy calls cost alone.

GPU times are taken over several steps between two synchronisations (a run does not synchronise per
step); contenders are interleaved (``_harness.interleaved``) and medians are reported.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import gpu_bandwidth, interleaved, machine_info, save_json  # noqa: E402
from scaling import composed, traffic  # noqa: E402

from rowstoch_fast import PullDiagGT, _core, topology  # noqa: E402
from rowstoch_fast.objectives import NonconvexLogistic  # noqa: E402
from rowstoch_fast.backends import cupy as gpu  # noqa: E402

KINDS = tuple(k for k in gpu._MIX_KERNELS if k != "auto")  # (the package's: entry1 / entry-u1 left it, RESULTS 13)


def _steps(cp, opt, G, k, kind=None, sync=True):
    """A callable running ``k`` steps of ``opt`` (gradient: the constant G) with the mixing kernel ``kind``."""
    def run():
        if kind is not None:
            gpu.MIX_KERNEL = kind
        for _ in range(k):
            opt.step(lambda X: G)
        if sync:
            cp.cuda.Device().synchronize()
    return run


def _problem(cp, log2n, d, seed):
    """The exponential graph on 2^log2n nodes, n, a generator and a constant device gradient."""
    A = topology.exponential(2**log2n)
    rng = np.random.default_rng(seed)
    return A, A.n, rng, cp.asarray(rng.standard_normal((A.n, d)))


def section_bits(cp, out):
    rows = []
    for dtype, tol in ((np.float64, 0.0), (np.float32, 1e-5)):
        for n, d, reps in ((2**12 + 3, 10, 1), (2**12, 3, 2), (2**10, 20, 1)):
            A = topology.exponential(n).astype(dtype)
            rng = np.random.default_rng(n + d)
            x0 = rng.standard_normal((reps, n, d) if reps > 1 else (n, d))
            G = rng.standard_normal(x0.shape)
            cpu = PullDiagGT(A, x0.astype(dtype), lr=1e-3, rounds=4)
            for _ in range(6):
                cpu.step(lambda X: X - G.astype(dtype))
            want = cpu.gather_x()
            Gd = cp.asarray(G.astype(dtype))
            for kind in KINDS:
                gpu.MIX_KERNEL = kind
                dev = PullDiagGT(A, cp.asarray(x0.astype(dtype)), lr=1e-3, rounds=4)
                for _ in range(6):
                    dev.step(lambda X: X - Gd)
                got = dev.gather_x()
                err = float(np.max(np.abs(got - want)) / max(1e-300, float(np.max(np.abs(want)))))
                same = bool(np.array_equal(got, want))
                ok = same if tol == 0.0 else err <= tol
                rows.append({"dtype": np.dtype(dtype).name, "n": n, "d": d, "reps": reps, "kernel": kind,
                             "bit_identical": same, "max_rel_err": err, "ok": ok})
    gpu.MIX_KERNEL = "auto"
    print("| dtype | n | d x reps | kernel | bit-identical to the CPU | max rel. error | ok |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dtype']} | {r['n']} | {r['d']} x {r['reps']} | {r['kernel']} | {r['bit_identical']} | "
              f"{r['max_rel_err']:.1e} | {'yes' if r['ok'] else '**NO**'} |")
    out["bits"] = rows


def section_mix(cp, out, sizes, copy_bw, d=10, R=10):
    import cupyx.scipy.sparse as csp

    print(f"\n| n | contender | ms/iteration | GB/s | % of copy bandwidth ({copy_bw:.0f} GB/s) | vs cupyx |")
    print("|---|---|---|---|---|---|")
    rows = []
    for log2n in sizes:
        A, n, rng, G = _problem(cp, log2n, d, seed=0)
        contenders = {}
        k = 5
        for kind in KINDS:
            gpu.MIX_KERNEL = kind
            opt = PullDiagGT(A, cp.asarray(rng.standard_normal((n, d))), lr=1e-3, rounds=R, tracker="perron")
            opt.step(lambda X: G)
            contenders[f"step-{kind}"] = _steps(cp, opt, G, k, kind)
            ops = opt._ops
            src, dst, work = cp.asarray(rng.standard_normal((n, d))), cp.empty((n, d)), cp.empty((n, d))

            def mix_only(kind=kind, ops=ops, src=src, dst=dst, work=work):
                gpu.MIX_KERNEL = kind
                for _ in range(k):
                    ops.mix(A, src, dst, R, work)
                cp.cuda.Device().synchronize()
            contenders[f"rounds-only-{kind}"] = mix_only
        S = csp.csr_matrix(A.csr)
        s = cp.asarray(1.0 / A.metrics().pi)
        x, y = cp.asarray(rng.standard_normal((n, d))), cp.asarray(rng.standard_normal((n, d)))
        one = composed(lambda v: S @ v, x, y, G, s, 1e-3, R)

        def cupyx_k():
            for _ in range(k):
                one()
            cp.cuda.Device().synchronize()
        contenders["cupyx"] = cupyx_k
        med, _ = interleaved(contenders, rounds=3, min_time=0.05, min_calls=2)
        bytes_full = traffic(A, d, R)
        for name in sorted(med):
            t = med[name] / k
            bytes_ = bytes_full / 2 if name.startswith("rounds-only") else bytes_full
            row = {"n": n, "contender": name, "seconds": t, "GBps": bytes_ / t / 1e9,
                   "fraction_of_copy_bandwidth": bytes_ / t / 1e9 / copy_bw,
                   "vs_cupyx": (med["cupyx"] / k) / t if not name.startswith("rounds-only") else None}
            rows.append(row)
            vs = f"{row['vs_cupyx']:.2f}x" if row["vs_cupyx"] else "-"
            print(f"| 2^{log2n} | {name} | {t * 1e3:.3f} | {row['GBps']:.0f} | "
                  f"{100 * row['fraction_of_copy_bandwidth']:.0f}% | {vs} |", flush=True)
        contenders.clear()
        cp.get_default_memory_pool().free_all_blocks()
    gpu.MIX_KERNEL = "auto"
    out["mix"] = rows


def section_overhead(cp, out, sizes, d=10, R=10):
    print(f"\n| n | contender | ms/iteration (R = {R}) |")
    print("|---|---|---|")
    rows = []
    for log2n in sizes:
        A, n, rng, G = _problem(cp, log2n, d, seed=1)
        k = 50
        contenders = {}
        for name, graphs, every in (("default", True, 32), ("no-graphs", False, 32), ("sync-every-step", False, 1)):
            opt = PullDiagGT(A, cp.asarray(rng.standard_normal((n, d))), lr=1e-3, rounds=R, tracker="perron")
            opt._ops.use_graphs, opt._ops.check_every = graphs, every

            def run(opt=opt, every=every):
                for _ in range(k):
                    opt.step(lambda X: G)
                    if every == 1:
                        opt.x  # noqa: B018 - what a per-step check costs: a read of the flag
                cp.cuda.Device().synchronize()
            contenders[name] = run
        Gh = rng.standard_normal((n, d))
        cpu = PullDiagGT(A, rng.standard_normal((n, d)), lr=1e-3, rounds=R, tracker="perron")

        def cpu_run():
            for _ in range(k):
                cpu.step(lambda X: Gh)
        contenders["cpu"] = cpu_run
        med, _ = interleaved(contenders, rounds=3, min_time=0.05, min_calls=2)
        for name in ("default", "no-graphs", "sync-every-step", "cpu"):
            t = med[name] / k
            rows.append({"n": n, "contender": name, "seconds": t})
            print(f"| 2^{log2n} | {name} | {t * 1e3:.4f} |", flush=True)
    out["overhead"] = rows


PIPELINED = 20  # calls or steps between two synchronisations in the oracle's "back to back" rows
#: How the oracle's contenders are timed (``_harness.interleaved``'s rounds and least time and calls per round; the
#: test that runs this script on the emulated kernels takes one call of each).
ORACLE_TIMING = dict(rounds=3, min_time=0.1, min_calls=3)


def section_oracle(cp, out, sizes, M=400, B=200, d=10):
    """The gradient and a Pull-Diag-GT step, each waited for (a synchronisation after every call) and
    ``PIPELINED`` in a row with one synchronisation (as a run goes), against the CPU kernels."""
    print(f"\n| n | what | GPU ms | CPU ms ({_core.get_num_threads()} threads) | GPU speed-up |")
    print("|---|---|---|---|---|")
    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        f = NonconvexLogistic.synthetic(n, total=n * M, d=d, batch=B, seed=0)
        made = time.perf_counter() - t0
        rng = np.random.default_rng(2)
        X = rng.standard_normal((n, d)) * 0.1
        Xd = cp.asarray(X)
        it = [0]
        want = f.stochastic_gradient(X, 5, seed=1)
        got = f.stochastic_gradient(Xd, 5, seed=1).get()
        same = bool(np.array_equal(got, want))

        def on_gpu():
            it[0] += 1
            f.stochastic_gradient(Xd, it[0], seed=1)
            cp.cuda.Device().synchronize()

        def on_gpu_pipelined():  # as in a run: no synchronisation per call
            for _ in range(PIPELINED):
                it[0] += 1
                f.stochastic_gradient(Xd, it[0], seed=1)
            cp.cuda.Device().synchronize()

        def on_cpu():
            it[0] += 1
            f.stochastic_gradient(X, it[0], seed=1)
        contenders = {"gpu": on_gpu, "gpu-pipelined": on_gpu_pipelined, "cpu": on_cpu}
        if n <= 4096:
            A = topology.exponential(n)
            og = PullDiagGT(A, Xd, lr=1e-4)
            oc = PullDiagGT(A, X, lr=1e-4)
            steps = [0]

            def step_gpu():
                steps[0] += 1
                og.step(lambda Z: f.stochastic_gradient(Z, steps[0], seed=1))
                cp.cuda.Device().synchronize()

            def step_gpu_pipelined():
                for _ in range(PIPELINED):
                    steps[0] += 1
                    og.step(lambda Z: f.stochastic_gradient(Z, steps[0], seed=1))
                cp.cuda.Device().synchronize()

            def step_cpu():
                steps[0] += 1
                oc.step(lambda Z: f.stochastic_gradient(Z, steps[0], seed=1))
            contenders.update({"step-gpu": step_gpu, "step-gpu-pipelined": step_gpu_pipelined, "step-cpu": step_cpu})
        med, _ = interleaved(contenders, **ORACLE_TIMING)
        for name in ("gpu-pipelined", "step-gpu-pipelined"):
            if name in med:
                med[name] /= PIPELINED
        for what, g, c in (("gradient", "gpu", "cpu"), (f"gradient, {PIPELINED} back to back", "gpu-pipelined", "cpu"),
                           ("Pull-Diag-GT step", "step-gpu", "step-cpu"),
                           (f"Pull-Diag-GT step, {PIPELINED} in a row", "step-gpu-pipelined", "step-cpu")):
            if g not in med:
                continue
            row = {"n": n, "what": what, "gpu_seconds": med[g], "cpu_seconds": med[c], "speedup": med[c] / med[g],
                   "bit_identical": same, "data_seconds": made}
            rows.append(row)
            print(f"| {n} | {what} | {med[g] * 1e3:.3f} | {med[c] * 1e3:.3f} | {med[c] / med[g]:.1f}x |", flush=True)
        print(f"(n = {n}: GPU gradients bit-identical to the CPU's: {same})")
    out["oracle"] = rows


def section_probe(cp, out, log2n=20, d=10, R=3):
    A, n, rng, _ = _problem(cp, log2n, d, seed=3)
    X = cp.asarray(rng.standard_normal((n, d)))
    isz = A.csr.indices.itemsize
    block = 2 * n * d * 8
    rows = []
    for kind, csr in (("entry", (n + 1) * isz + A.nnz * (isz + 8)), ("row", (n + 1) * isz + A.nnz * isz + n * 8),
                      ("circ", 0)):
        gpu.MIX_KERNEL = kind
        gpu.mix_power(A, X, R)
        cp.cuda.Device().synchronize()
        rows.append({"kernel": kind, "n": n, "d": d, "rounds": R, "compulsory_bytes_per_round": csr + block})
        print(f"probe: {R} rounds of the '{kind}' kernel at n = 2^{log2n}, d = {d}: compulsory "
              f"{(csr + block) / 1e6:.1f} MB per round (CSR {csr / 1e6:.1f} MB, X and Y {block / 1e6:.1f} MB)",
              flush=True)
    gpu.MIX_KERNEL = "auto"
    out["probe"] = rows


def section_probe_oracle(cp, out, sizes=(512, 2**15), M=400, B=200, d=10, calls=20):
    """Gradient calls for ``ncu --kernel-name regex:logistic_grad``, and where a call's time goes: a call
    waited for (launch + kernel + synchronisation), the host's part alone (the call returns once the kernel
    is queued) and calls back to back between two CUDA events (per call the larger of the host's part and
    the kernel); medians of the last half of ``calls``."""
    rows = []
    sync = cp.cuda.Device().synchronize

    def median(times):
        return float(np.median(times[calls // 2:]))
    for n in sizes:
        f = NonconvexLogistic.synthetic(n, total=n * M, d=d, batch=B, seed=0)
        Xd = cp.asarray(np.random.default_rng(2).standard_normal((n, d)) * 0.1)
        waited, host = [], []
        for k in range(calls):
            t0 = time.perf_counter()
            f.stochastic_gradient(Xd, k, seed=1)
            t1 = time.perf_counter()
            sync()
            waited.append(time.perf_counter() - t0)
            host.append(t1 - t0)
        row = {"n": n, "call_seconds": median(waited), "host_seconds": median(host)}
        Event = getattr(cp.cuda, "Event", None)
        if Event is not None:
            start, end = Event(), Event()
            start.record()
            for k in range(calls):
                f.stochastic_gradient(Xd, k, seed=1)
            end.record()
            end.synchronize()
            row["back_to_back_seconds"] = cp.cuda.get_elapsed_time(start, end) / 1e3 / calls
        rows.append(row)
        print(f"probe-oracle: n = {n}: a call waited for {row['call_seconds'] * 1e3:.3f} ms, its host part "
              f"{row['host_seconds'] * 1e3:.3f} ms"
              + (f", back to back {row['back_to_back_seconds'] * 1e3:.3f} ms per call"
                 if "back_to_back_seconds" in row else ""), flush=True)
    out["probe_oracle"] = rows


PROFILE_LINES = 30  # functions listed in probe-host's profile of the step


def section_probe_host(cp, out, n=512, M=400, B=200, d=10, calls=400):
    """Where the host's time goes at the paper's n = 512, where launches are asynchronous and the host's part
    can bound a run: per gradient call and per Pull-Diag-GT step, the host's total, the time spent inside the
    kernel launches (CuPy's handling of the arguments and the driver's launch; graph launches excluded) and
    the rest (the package's Python, CuPy's allocations); and what a few CuPy calls cost alone. Medians over
    ``calls`` calls, a synchronisation every 50 calls (outside the timings)."""
    import collections

    f = NonconvexLogistic.synthetic(n, total=n * M, d=d, batch=B, seed=0)
    Xd = cp.asarray(np.random.default_rng(2).standard_normal((n, d)) * 0.1)
    og = PullDiagGT(topology.exponential(n), Xd, lr=1e-4)
    spent = collections.defaultdict(list)
    real = gpu._kernel

    def timed(name):
        fn = real(name)

        def launch(*args, **kwargs):
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            spent[name].append(time.perf_counter() - t0)
        return launch

    def per_call(call):
        times = []
        for k in range(calls):
            if k % 50 == 0:
                cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            call(k)
            times.append(time.perf_counter() - t0)
        cp.cuda.Device().synchronize()
        return float(np.median(times))

    rows = []
    gpu._kernel = timed
    try:
        for what, call in (("gradient call", lambda k: f.stochastic_gradient(Xd, k + 1, seed=1)),
                           ("Pull-Diag-GT step", lambda k: og.step(lambda Z: f.stochastic_gradient(Z, k + 1, seed=1)))):
            per_call(call)  # warm
            spent.clear()
            total = per_call(call)
            launches = {name: (len(t) / calls, float(np.median(t))) for name, t in spent.items()}
            inside = sum(count * t for count, t in launches.values())
            rows.append({"what": what, "host_seconds": total, "launch_seconds": inside, "launches": launches})
            print(f"probe-host: n = {n}: {what}: host {total * 1e6:.1f} us, inside launches {inside * 1e6:.1f} us ("
                  + ", ".join(f"{name} x{c:g} {t * 1e6:.1f} us" for name, (c, t) in launches.items())
                  + f"), the rest {(total - inside) * 1e6:.1f} us", flush=True)
    finally:
        gpu._kernel = real
    import cProfile
    import pstats

    profile = cProfile.Profile()  # which Python functions the rest is (CuPy's Cython calls show as builtins)
    profile.enable()
    for k in range(calls):
        og.step(lambda Z, k=k: f.stochastic_gradient(Z, k + 1, seed=1))
    profile.disable()
    cp.cuda.Device().synchronize()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (primitive calls, calls, own, cumulative, callers)}
    top = sorted(stats.items(), key=lambda item: -item[1][2])[:PROFILE_LINES]
    table = [{"function": f"{os.path.basename(key[0])}:{key[1]}({key[2]})", "calls_per_step": v[1] / calls,
              "own_us_per_step": v[2] / calls * 1e6, "cumulative_us_per_step": v[3] / calls * 1e6}
             for key, v in top]
    out["probe_host_profile"] = table
    print(f"probe-host: cProfile of {calls} Pull-Diag-GT steps at n = {n} (profiling slows Python), per step:")
    print("| function | calls | own us | cumulative us |\n|---|---|---|---|")
    for row in table:
        print(f"| {row['function']} | {row['calls_per_step']:g} | {row['own_us_per_step']:.1f} | "
              f"{row['cumulative_us_per_step']:.1f} |")
    micro = {"cupy.cuda.runtime.getDeviceCount()": cp.cuda.runtime.getDeviceCount,
             "backends.cupy.require_cupy()": gpu.require_cupy,
             "cupy.empty_like(X)": lambda: cp.empty_like(Xd),
             "cupy.ascontiguousarray(X, dtype=X.dtype)": lambda: cp.ascontiguousarray(Xd, dtype=Xd.dtype),
             "cupy.cuda.Device().synchronize() (idle GPU)": lambda: cp.cuda.Device().synchronize()}
    for name, fn in micro.items():
        t = per_call(lambda k, fn=fn: fn())
        rows.append({"what": name, "host_seconds": t})
        print(f"probe-host: {name}: {t * 1e6:.2f} us", flush=True)
    out["probe_host"] = rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", default="bits,mix,overhead,oracle")
    p.add_argument("--out", default=os.path.dirname(__file__))
    p.add_argument("--quick", action="store_true", help="smaller sizes (a dry run)")
    args = p.parse_args(argv)
    try:
        cp = gpu.require_cupy()
    except (RuntimeError, ImportError) as exc:
        print(f"gpu_kernels: no GPU here ({exc}); nothing to measure")
        return 0
    sections = args.sections.split(",")
    info = machine_info()
    info["gpu"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    copy_bw = gpu_bandwidth()
    print(f"# GPU {info['gpu']} (copy {copy_bw:.0f} GB/s), CPU {info['cpu']} ({info['cores']} cores, "
          f"{_core.get_num_threads()} threads), CuPy {cp.__version__}")
    out = {"machine": info, "gpu_copy_GBps": copy_bw}
    quick = args.quick
    plan = {"bits": lambda: section_bits(cp, out),
            "mix": lambda: section_mix(cp, out, (14, 16) if quick else (20, 22), copy_bw),
            "overhead": lambda: section_overhead(cp, out, (10, 12) if quick else (10, 12, 14, 16)),
            "oracle": lambda: section_oracle(cp, out, (64, 512) if quick else (512, 2**15)),
            "probe": lambda: section_probe(cp, out, 14 if quick else 20),
            "probe-oracle": lambda: section_probe_oracle(cp, out, (64, 512) if quick else (512, 2**15)),
            "probe-host": lambda: section_probe_host(cp, out, 64 if quick else 512)}
    failed = []
    for name in sections:
        try:  # a failing section leaves the others' numbers
            plan[name]()
        except Exception:  # noqa: BLE001 - report and go on
            traceback.print_exc()
            failed.append(name)
        gpu.MIX_KERNEL = "auto"
        save_json(os.path.join(args.out, "gpu_kernels.json"), out)
    if failed:
        print(f"gpu_kernels: sections that failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
