"""Registers, stack and spills of each CUDA kernel of the CuPy backend, without a GPU.

Compiles ``rowstoch_fast/backends/kernels.cu`` as the backend does (NVRTC, the same options) for a real
architecture with ``--ptxas-options=-v`` and prints ptxas's resource report per kernel: what decides how many
warps an SM can hold (the occupancy), and whether anything spilled to local memory. Needs CuPy's NVRTC
bindings (``pip install cupy-cuda12x``, or ``cupy-cuda13x`` with an ``nvidia-cuda-nvrtc`` 13.x wheel, which
installs any NVRTC release without a device: how ptxas fits a kernel into its registers changes from one
release to the next, bench/RESULTS.md section 9h)::

    python bench/gpu_registers.py [--arch sm_90] [--match REGEX] [--check]

``--check``: exit status 1 if any kernel spills (CI runs it under CUDA 13's NVRTC). It needs only CuPy's NVRTC
bindings and this repository, not the package.

Example (2026-11-26): the logistic kernel's float64 version used 80 registers, 134 once its sums loaded 8 x 4
values ahead (H100 run 5, bench/RESULTS.md section 9b: a third less SM throughput at n = 2^15), and 64 with a
kernel per number of 32-wide coordinate groups (d <= 32: 8 values ahead).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys


#: The options the CuPy backend compiles kernels.cu with (backends/cupy.py's ``_OPTIONS``; a test checks that they
#: agree): written out so that this script runs without the package (CuPy adds ``-ftz=true``, which changes no
#: register count here).
OPTIONS = ("-std=c++14", "--fmad=false")


def resources(arch="sm_90", path=None):
    """``{kernel: {"registers": int, "stack": int, "spill_stores": int, "spill_loads": int}}`` from ptxas."""
    from cupy_backends.cuda.libs import nvrtc

    path = path or os.path.join(os.path.dirname(__file__), os.pardir, "rowstoch_fast", "backends", "kernels.cu")
    with open(path) as f:
        prog = nvrtc.createProgram(f.read(), "kernels.cu", [], [])
    try:
        nvrtc.compileProgram(prog, [*OPTIONS, f"-arch={arch}", "--ptxas-options=-v"])
    except Exception as exc:  # noqa: BLE001 - NVRTC's own error says little: add its log
        raise RuntimeError(f"NVRTC failed on kernels.cu:\n{nvrtc.getProgramLog(prog)}") from exc
    report, kernel = {}, None
    for line in nvrtc.getProgramLog(prog).splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            kernel = m.group(1)
            report[kernel] = {"registers": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0}
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and kernel:
            report[kernel].update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            report[kernel]["registers"] = int(m[1])
    return report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90", help="a real architecture, e.g. sm_80 or sm_90 (default)")
    p.add_argument("--match", default="", help="only kernels whose name matches this regular expression")
    p.add_argument("--check", action="store_true", help="exit status 1 if any kernel spills")
    args = p.parse_args(argv)
    if importlib.util.find_spec("cupy_backends") is None:
        print("gpu_registers: needs CuPy's NVRTC bindings (pip install cupy-cuda12x; no GPU needed)")
        return 0
    from cupy_backends.cuda.libs import nvrtc

    try:
        version = ".".join(map(str, nvrtc.getVersion()))
    except Exception as exc:  # noqa: BLE001 - the library itself missing (a wheel without it, an old glibc)
        why = " ".join(str(exc).split())
        print(f"gpu_registers: CuPy's NVRTC library does not load here ({type(exc).__name__}: {why}); nothing checked")
        return 0
    report = resources(args.arch)
    print(f"| kernel ({args.arch}, NVRTC {version}) | registers | stack bytes | "
          "spill stores | spill loads |")
    print("|---|---|---|---|---|")
    for name in sorted(report):
        if re.search(args.match, name):
            r = report[name]
            print(f"| {name} | {r['registers']} | {r['stack']} | {r['spill_stores']} | {r['spill_loads']} |")
    spilled = sorted(k for k, r in report.items() if r["spill_stores"] or r["spill_loads"])
    if args.check:
        print(f"gpu_registers: {len(report)} kernels, {len(spilled)} spilling{': ' if spilled else ''}"
              f"{', '.join(spilled)}")
        return 1 if spilled or not report else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
