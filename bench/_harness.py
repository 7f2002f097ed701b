"""Shared benchmark helpers: interleaved timing, medians, machine description, bandwidth probes.

The machine this project is developed on is shared and noisy, so contenders are
always timed interleaved (a round runs every contender once, in a shuffled
order) and we report medians over rounds and ratios from the same run.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import threading
import time

import numpy as np

#: Problem sizes (log2 n) of the pytest-benchmark suites; the default is a quick smoke.
BENCH_LOG2N = [int(v) for v in os.environ.get("ROWSTOCH_BENCH_LOG2N", "10").split(",")]

def machine_info():
    """CPU, cores, thread settings and library versions, for every saved result."""
    import scipy

    import rowstoch_fast

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "rowstoch_fast": rowstoch_fast.__version__,
        "build": rowstoch_fast.build_info(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "gpu": None,
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [{k: p.get(k) for k in ("internal_api", "num_threads", "version")} for p in threadpool_info()]
    except ImportError:
        pass
    return info


def per_call(fn, calls):
    """Seconds per call of ``fn(k)`` over ``k = 0 .. calls - 1`` (each call its own iteration, as a run's are)."""
    start = time.perf_counter()
    for k in range(calls):
        fn(k)
    return (time.perf_counter() - start) / calls


def machine_line():
    """One line: the machine's name, cores, ``OMP_NUM_THREADS`` and load (printed first by the scripts)."""
    return (f"machine: {os.uname().nodename}, {os.cpu_count()} cores, OMP_NUM_THREADS="
            f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load {os.getloadavg()[0]:.2f}")


def interleaved(contenders, rounds=5, min_time=0.1, min_calls=4, seed=0):
    """Median seconds per call of each callable, timed in interleaved blocks.

    Each round runs every contender once, in shuffled order, as a block of
    back-to-back calls lasting at least ``min_time`` seconds (and ``min_calls``
    calls). A block's sample is the median of its second half of calls, so the
    first calls after switching library (another library's thread pool still
    spinning, caches cold) do not count. The result is the median over rounds.
    ``contenders`` maps a name to a zero-argument callable.
    """
    rng = random.Random(seed)
    names = list(contenders)
    samples = {k: [] for k in names}
    for f in contenders.values():  # warm-up: page in buffers, start thread pools
        f()
    for _ in range(rounds):
        rng.shuffle(names)
        for k in names:
            f = contenders[k]
            times = []
            start = time.perf_counter()
            while len(times) < min_calls or time.perf_counter() - start < min_time:
                t = time.perf_counter()
                f()
                times.append(time.perf_counter() - t)
            samples[k].append(statistics.median(times[len(times) // 2:]))
    return {k: statistics.median(v) for k, v in samples.items()}, samples


def _threaded(fn, parts, threads):
    ts = [threading.Thread(target=fn, args=(p,)) for p in parts[:threads]]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def bandwidth(threads=2, mib=512, rounds=5):
    """Measured memory bandwidth (GB/s) of this machine with ``threads`` threads: copy (read+write) and read."""
    n = mib * 2**20 // 8
    src = np.ones(n)
    dst = np.empty(n)
    halves = np.array_split(np.arange(n), threads)
    bounds = [(h[0], h[-1] + 1) for h in halves]
    copy_parts = [(src[a:b], dst[a:b]) for a, b in bounds]
    read_parts = [src[a:b] for a, b in bounds]

    def do_copy():
        _threaded(lambda p: np.copyto(p[1], p[0]), copy_parts, threads)

    def do_read():
        _threaded(lambda p: np.add.reduce(p), read_parts, threads)

    med, _ = interleaved({"copy": do_copy, "read": do_read}, rounds=rounds, min_time=0.3)
    return {"copy_GBps": 2 * n * 8 / med["copy"] / 1e9, "read_GBps": n * 8 / med["read"] / 1e9}


def gpu_bandwidth(mib=1024, rounds=5):
    """Device-to-device copy bandwidth (GB/s, bytes read + written) of CuPy's current GPU, or None without one."""
    try:
        from rowstoch_fast.backends.cupy import require_cupy

        cp = require_cupy()
    except (RuntimeError, ImportError):
        return None
    n = mib * 2**20 // 8
    src = cp.ones(n)
    dst = cp.empty_like(src)

    def copy():
        cp.copyto(dst, src)
        cp.cuda.Device().synchronize()

    med, _ = interleaved({"copy": copy}, rounds=rounds, min_time=0.2)
    return 2 * n * 8 / med["copy"] / 1e9


def save_json(path, payload):
    with open(path, "w") as f:
        json.dump(payload, f, indent=1, default=str)
