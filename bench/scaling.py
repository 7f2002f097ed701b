"""Dense vs sparse vs GPU: throughput of one MG-Pull-Diag-GT iteration as n grows (the design card's figure).

Usage::

    python bench/scaling.py [--min-log2n 10] [--max-log2n 20] [--cpu-max-log2n N] [--R 10] [--d 10] [--out bench]
    python bench/scaling.py --plot bench/gpu/h200_run1_scaling.json bench/scaling.json   # the figure, from runs

Writes ``scaling.json`` and ``scaling.png`` (time per iteration against n) into
``--out`` and prints a markdown table. Contenders, all on the exponential graph,
one iteration = the x phase and the y phase of eq. (12) without the gradient:

* ``numpy-dense``: dense ``A^R`` products with NumPy BLAS (n <= 2^12);
* ``scipy``: ``scipy.sparse`` composition of the same equations;
* ``cpu``: rowstoch_fast's compiled phases (``PullDiagGT``'s kernels);
* ``cupy-dense``: dense products with CuPy (n <= 2^14, GPU only);
* ``cupyx``: ``cupyx.scipy.sparse.csr_matrix @ X`` composition (GPU only);
* ``cupy``: rowstoch_fast's CuPy backend (``PullDiagGT(..., backend="cupy")`` kernels).

GPU contenders run only where CuPy finds a device; they synchronise before
returning; ``--cpu-max-log2n`` leaves the CPU contenders out above that size
(on a GPU machine, to keep the run short). Throughput is node-updates per
second (n / time) and effective bandwidth is the compulsory traffic (CSR once
per gossip round, x/y blocks) over the time, next to the copy bandwidth of the
CPU and of the GPU measured here. ``bench/gpu_check.sh`` runs the GPU half and
the CuPy tests in one go.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _harness import bandwidth, gpu_bandwidth, interleaved, machine_info, save_json  # noqa: E402

from rowstoch_fast import PullDiagGT, _core, topology  # noqa: E402


def composed(matmul, x, y, G, s, lr, R, sync=lambda: None):
    """One iteration of eq. (12) written with a library's ``matmul`` (the composition the kernels replace)."""

    def run():
        w = x - lr * y
        for _ in range(R):
            w = matmul(w)
        psi = y + s[:, None] * G - s[:, None] * G
        for _ in range(R):
            psi = matmul(psi)
        sync()
        return w, psi

    return run


def cpu_contenders(A, d, R, lr=1e-3):
    n = A.n
    rng = np.random.default_rng(0)
    G = rng.standard_normal((n, d))
    opt = PullDiagGT(A, rng.standard_normal((n, d)), lr=lr, rounds=R, tracker="perron")
    opt.step(lambda X: G)
    c = A.csr

    cur, nxt = opt._cur, opt._nxt

    def cpu():
        _core.mix_power(c.indptr, c.indices, c.data, cur["xw"], R, nxt["x"], opt._scratch, check_indices=False)
        _core.gt_y_phase(c.indptr, c.indices, c.data, R, lr, nxt["x"], cur["y"], nxt["g"], cur["g"],
                         opt.tracker.scale(2), opt.tracker.scale(1), nxt["y"], cur["xw"], opt._psi, opt._scratch,
                         check_indices=False)

    S = sp.csr_matrix(c)
    s = 1.0 / A.metrics().pi
    x, y = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    out = {"cpu": cpu, "scipy": composed(lambda v: S @ v, x, y, G, s, lr, R)}
    if n <= 2**12:
        D = A.toarray()
        out["numpy-dense"] = composed(lambda v: D @ v, x, y, G, s, lr, R)
    return out


def gpu_contenders(A, d, R, lr=1e-3):
    try:
        from rowstoch_fast.backends.cupy import require_cupy

        cp = require_cupy()
    except (RuntimeError, ImportError):
        return {}
    import cupyx.scipy.sparse as csp

    n = A.n
    rng = np.random.default_rng(0)
    G = cp.asarray(rng.standard_normal((n, d)))
    opt = PullDiagGT(A, cp.asarray(rng.standard_normal((n, d))), lr=lr, rounds=R, tracker="perron")
    opt.step(lambda X: G)

    def ours():
        opt.step(lambda X: G)  # the gradient is a constant device array: the step is the network part
        cp.cuda.Device().synchronize()

    S = csp.csr_matrix(cp.asarray(A.csr.toarray()) if n <= 2**12 else csp.csr_matrix(A.csr))
    s = cp.asarray(1.0 / A.metrics().pi)
    x, y = cp.asarray(rng.standard_normal((n, d))), cp.asarray(rng.standard_normal((n, d)))
    sync = cp.cuda.Device().synchronize
    out = {"cupy": ours, "cupyx": composed(lambda v: S @ v, x, y, G, s, lr, R, sync)}
    if n <= 2**14:
        D = cp.asarray(A.toarray())
        out["cupy-dense"] = composed(lambda v: D @ v, x, y, G, s, lr, R, sync)
    return out


def traffic(A, d, R):
    isz = A.csr.indices.itemsize
    csr = (A.n + 1) * isz + A.nnz * (isz + 8)
    return 2 * R * (csr + 2 * A.n * d * 8)  # two phases of R rounds: CSR + read and write a block


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-log2n", type=int, default=10)
    p.add_argument("--max-log2n", type=int, default=20)
    p.add_argument("--R", type=int, default=10)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cpu-max-log2n", type=int, default=None, help="no CPU contenders above this size")
    p.add_argument("--out", default=os.path.dirname(__file__))
    p.add_argument("--plot", nargs="+", default=None, metavar="JSON",
                   help="draw scaling.png in --out from saved runs (several machines: one line per contender and "
                        "machine), run nothing")
    args = p.parse_args(argv)
    if args.plot:
        plot(args.plot, os.path.join(args.out, "scaling.png"))
        return
    cpu_max = args.max_log2n if args.cpu_max_log2n is None else args.cpu_max_log2n
    info = machine_info()
    try:
        from rowstoch_fast.backends.cupy import require_cupy

        cp = require_cupy()
        info["gpu"] = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except (RuntimeError, ImportError) as exc:
        info["gpu"] = f"none ({exc})"
    bw = bandwidth(threads=_core.get_num_threads())
    bw["gpu_copy_GBps"] = gpu_bw = gpu_bandwidth()
    gpu_note = f"copy {gpu_bw:.0f} GB/s" if gpu_bw else "-"
    print(f"# CPU {info['cpu']} ({info['cores']} cores, {_core.get_num_threads()} threads, copy {bw['copy_GBps']:.1f} GB/s); "
          f"GPU: {info['gpu']} ({gpu_note}); d = {args.d}, R = {args.R}, exponential graph")
    print("| n | contender | ms/iteration | node-updates/s | GB/s | % of copy bandwidth | vs scipy | vs cupyx |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for log2n in range(args.min_log2n, args.max_log2n + 1, 2):
        if log2n > cpu_max and not gpu_bw:
            continue  # nothing would run at this size
        A = topology.exponential(2**log2n)
        c = {**(cpu_contenders(A, args.d, args.R) if log2n <= cpu_max else {}), **gpu_contenders(A, args.d, args.R)}
        if not c:
            continue
        med, _ = interleaved(c, rounds=args.rounds, min_time=0.05, min_calls=2)
        bytes_ = traffic(A, args.d, args.R)
        for k, t in sorted(med.items()):
            on_gpu = k.startswith("cupy")
            copy_bw = gpu_bw if on_gpu else bw["copy_GBps"]
            row = {"n": A.n, "contender": k, "seconds": t, "updates_per_s": A.n / t, "GBps": bytes_ / t / 1e9,
                   "fraction_of_copy_bandwidth": bytes_ / t / 1e9 / copy_bw if copy_bw else None,
                   "vs_scipy": med["scipy"] / t if "scipy" in med else None,
                   "vs_cupyx": med["cupyx"] / t if on_gpu and "cupyx" in med else None}
            rows.append(row)
            cells = [f"{100 * row['fraction_of_copy_bandwidth']:.0f}%" if row["fraction_of_copy_bandwidth"] else "-",
                     f"{row['vs_scipy']:.2f}x" if row["vs_scipy"] else "-",
                     f"{row['vs_cupyx']:.2f}x" if row["vs_cupyx"] else "-"]
            print(f"| 2^{log2n} | {k} | {t * 1e3:.3f} | {A.n / t:.3g} | {bytes_ / t / 1e9:.1f} | " + " | ".join(cells)
                  + " |", flush=True)
    save_json(os.path.join(args.out, "scaling.json"), {"machine": info, "bandwidth": bw, "R": args.R, "d": args.d,
                                                        "rows": rows})
    plot([os.path.join(args.out, "scaling.json")], os.path.join(args.out, "scaling.png"))


def _machine_label(info, on_gpu):
    """Who ran a contender: the GPU's name, or the CPU with its core count."""
    if on_gpu:
        return info.get("gpu", "GPU")
    cpu = info.get("cpu", "CPU").replace("(R)", "").replace(" Processor", "").replace(" CPU", "")
    return f"{cpu}, {info.get('cores', '?')} cores"


def plot(paths, out):
    """One figure from saved runs (``scaling.json`` of this script, from any machines): every contender's time per
    iteration against n, each line labelled with the machine that ran it."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.8))
    styles = {"cupy": ("C0", "o"), "cupyx": ("C1", "s"), "cupy-dense": ("C4", "^"), "cpu": ("C2", "o"),
              "scipy": ("C3", "s"), "numpy-dense": ("C5", "^")}
    dashes = ["-", "--", ":"]
    d = R = None
    for k, path in enumerate(paths):
        with open(path) as f:
            run = json.load(f)
        d, R = run["d"], run["R"]
        for name in sorted({r["contender"] for r in run["rows"]}):
            on_gpu = name.startswith("cupy")
            pts = sorted((r["n"], r["seconds"]) for r in run["rows"] if r["contender"] == name)
            colour, marker = styles.get(name, ("k", "x"))
            label = {"cpu": "rowstoch_fast CPU kernels", "cupy": "rowstoch_fast CuPy backend",
                     "cupyx": "cupyx.scipy.sparse", "scipy": "scipy.sparse", "numpy-dense": "NumPy dense",
                     "cupy-dense": "CuPy dense"}.get(name, name)
            ax.loglog(*zip(*pts), marker=marker, linestyle=dashes[k % len(dashes)], color=colour, markersize=4,
                      label=f"{label} ({_machine_label(run['machine'], on_gpu)})")
    ax.set_xlabel("n (nodes)")
    ax.set_ylabel("seconds per MG-Pull-Diag-GT iteration")
    ax.set_title(f"One MG-Pull-Diag-GT iteration (R = {R} gossip rounds per phase, d = {d}), exponential graph",
                 fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    plt.close(fig)
    print(f"wrote {out}")

if __name__ == "__main__":
    main()
