"""``rowstoch run --backend cupy`` against ``--backend cpu`` end to end: wall time, set-up and run (issue 14).

Usage::

    python bench/gpu_e2e.py [--sizes 4096,32768] [--iterations 300] [--out DIR]

For each n, fresh processes run the paper's logistic problem (400 samples per node, batch 200, d = 10) with
Pull-Diag-GT (``--tracker perron``: the exact tracker's table is host work, O(n nnz) per power, whatever the
backend): on the CPU, on the GPU with an empty CuPy kernel cache (NVRTC compiles), and
on the GPU again (warm cache). Each run reports its set-up (network, objective, optimizer, first gradients,
kernels) and its run time on its summary line; the rest of the wall time is interpreter start and imports
before the command starts, and writing the outputs after it. Prints a markdown table and writes
``DIR/gpu_e2e.json``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _harness import save_json  # noqa: E402

LINE = re.compile(r"communication rounds, ([0-9.]+) s; set-up ([0-9.]+) s\)")


def one(n, iterations, backend, cache_dir, out):
    total = 400 * n  # the paper's 400 samples per node (204,800 at n = 512), batch 200
    cmd = [sys.executable, "-m", "rowstoch_fast.cli", "run", "--n", str(n), "--total", str(total),
           "--iterations", str(iterations), "--record-every", str(iterations // 3), "--backend", backend,
           "--tracker", "perron",
           "--no-progress", "--out", out, "--overwrite"]  # (one folder for every run: each replaces the last)
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=600)
    wall = time.perf_counter() - t
    m = LINE.search(res.stdout)
    if res.returncode != 0 or m is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    run_s, setup_s = float(m.group(1)), float(m.group(2))
    return {"n": n, "backend": backend, "wall": wall, "setup": setup_s, "run": run_s,
            "other": wall - setup_s - run_s, "total_samples": total}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,32768")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--out", default=os.path.dirname(__file__))
    args = p.parse_args(argv)
    try:
        from rowstoch_fast.backends.cupy import require_cupy

        require_cupy()
        backends = [("cpu", None), ("cupy", "cold"), ("cupy", "warm")]
    except (RuntimeError, ImportError) as exc:
        print(f"gpu_e2e: no GPU here ({exc}); CPU runs only")
        backends = [("cpu", None)]
    rows = []
    print(f"| n | backend | wall s | set-up s | run s ({args.iterations} iterations) | imports + writing s |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        cold = os.path.join(tmp, "cold-cache")
        for n in (int(s) for s in args.sizes.split(",")):
            for backend, cache in backends:
                if cache == "cold":
                    cache_dir = cold + str(n)
                elif cache == "warm":
                    cache_dir = cold + str(n)  # the one the cold run filled
                else:
                    cache_dir = os.path.join(tmp, "unused")
                r = one(n, args.iterations, backend, cache_dir, os.path.join(tmp, "out"))
                r["cache"] = cache
                rows.append(r)
                label = backend + (f" ({cache} kernel cache)" if cache else "")
                print(f"| {n} | {label} | {r['wall']:.2f} | {r['setup']:.2f} | {r['run']:.2f} | {r['other']:.2f} |",
                      flush=True)
    save_json(os.path.join(args.out, "gpu_e2e.json"), {"iterations": args.iterations, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
