"""How the OpenMP settings fare when another process keeps a core busy (issue 10, item 26).

Each configuration runs the same workload in a fresh process (OpenMP reads its
environment once, at start): iterations of Pull-Diag-GT with the logistic
oracle at the paper's n = 512 setting, and plain mixing at n = 2^16. The
configurations are interleaved and repeated; medians are printed, idle and
with a busy-looping competitor process.

    python bench/busy_machine.py --repeats 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOAD = r"""
import json, sys, time
import numpy as np
import rowstoch_fast as rf
from rowstoch_fast.objectives import NonconvexLogistic
f = NonconvexLogistic.synthetic(512, seed=0)
opt = rf.PullDiagGT(rf.topology.exponential(512), f.x0(), lr=1e-4)
oracle = f.oracle(seed=0)
for _ in range(50):
    opt.step(oracle)
t = time.perf_counter()
for _ in range(2000):
    opt.step(oracle)
gt = (time.perf_counter() - t) / 2000
A = rf.topology.exponential(2**16)
X = np.ones((A.n, 10))
Y = np.empty_like(X)
for _ in range(5):
    A.mix(X, out=Y)
t = time.perf_counter()
for _ in range(100):
    A.mix(X, out=Y)
mix = (time.perf_counter() - t) / 100
print(json.dumps({"gt_ms": gt * 1e3, "mix_ms": mix * 1e3, "threads": rf._core.get_num_threads(),
                  "serial_episodes": rf._core.adaptive_threads()["serial_episodes"]}))
"""

CONFIGS = {
    "2 threads, adaptive (default)": {"OMP_NUM_THREADS": "2"},
    "2 threads, not adaptive": {"OMP_NUM_THREADS": "2", "ROWSTOCH_ADAPTIVE_THREADS": "0"},
    "2 threads, passive wait": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive",
                                "ROWSTOCH_ADAPTIVE_THREADS": "0"},
    "1 thread": {"OMP_NUM_THREADS": "1"},
}


def measure(env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "ROWSTOCH_ADAPTIVE"))}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    for busy in (False, True):
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        time.sleep(0.5 if busy else 0)
        try:
            results = {name: [] for name in CONFIGS}
            for _ in range(args.repeats):
                for name, env in CONFIGS.items():  # interleaved
                    results[name].append(measure(env))
        finally:
            if burner is not None:
                burner.kill()
                burner.wait()
        print(f"\n{'with one busy competitor process' if busy else 'idle'} (medians of {args.repeats}):")
        print(f"{'configuration':<32}{'threads':>8}{'GT step n=512 (ms)':>21}{'mix n=2^16 d=10 (ms)':>23}"
              f"{'serial episodes':>17}")
        for name, runs in results.items():
            gt = statistics.median(r["gt_ms"] for r in runs)
            mix = statistics.median(r["mix_ms"] for r in runs)
            episodes = statistics.median(r["serial_episodes"] for r in runs)
            print(f"{name:<32}{runs[0]['threads']:>8}{gt:>21.3f}{mix:>23.3f}{episodes:>17g}")


if __name__ == "__main__":
    main()
