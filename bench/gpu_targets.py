"""Issue 14's targets read off a run of ``bench/gpu_kernels.py``: met or missed, with the numbers.

Usage::

    python bench/gpu_targets.py DIR/gpu_kernels.json      # bench/gpu_check.sh runs it after the kernels stage

Prints, as markdown:

* ``bits``: whether every contender gave the CPU's iterates (float64 bit for bit, float32 to 1e-5), and
  which did not;
* ``mix`` (n >= 2^20): per n, each MG-Pull-Diag-GT iteration's share of the copy bandwidth and its speed-up
  over the cupyx composition, against the targets (>= 60% and >= 6x), the best contender first;
* ``overhead`` (n <= 2^16): per n, each contender's time per iteration against <= 0.1 ms, the fastest GPU one
  first, and where a contender beats the default (what an ``"auto"`` choice would pick, by size); then what
  one more round costs, a graph's node against a grid barrier (``round_cost``);
* ``oracle``: the gradient at the paper's n = 512 against >= 3x the CPU (waited for, and in a row) and at
  2^15 against >= 10x.

Nothing is measured here; a missing section is said to be missing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

MIX_SHARE, MIX_SPEEDUP, SMALL_MS, ORACLE_SMALL, ORACLE_LARGE = 0.60, 6.0, 0.1, 3.0, 10.0


def _log2(n):
    k = int(round(math.log2(n)))
    return f"2^{k}" if 2**k == n else str(n)


def _verdict(ok):
    return "met" if ok else "**missed**"


def bits(rows):
    bad = [r for r in rows if not r["ok"]]
    print(f"bits: {len(rows) - len(bad)} of {len(rows)} runs gave the CPU's iterates")
    for r in bad:
        print(f"- **not**: {r['kernel']} {r['dtype']} n = {r['n']} d = {r['d']} x {r['reps']} "
              f"R = {r.get('rounds', '?')} (max rel. error {r['max_rel_err']:.1e})")


def mix(rows):
    print(f"\n| n | iteration | ms | share of copy bandwidth (>= {MIX_SHARE:.0%}) | vs cupyx (>= {MIX_SPEEDUP:g}x) |")
    print("|---|---|---|---|---|")
    for n in sorted({r["n"] for r in rows}):
        steps = sorted((r for r in rows if r["n"] == n and r["contender"].startswith("step-")),
                       key=lambda r: r["seconds"])
        for r in steps:
            share, speedup = r["fraction_of_copy_bandwidth"], r["vs_cupyx"]
            print(f"| {_log2(n)} | {r['contender'][5:]} | {r['seconds'] * 1e3:.3f} | {share:.0%} "
                  f"{_verdict(share >= MIX_SHARE)} | {speedup:.2f}x {_verdict(speedup >= MIX_SPEEDUP)} |")


def overhead(rows):
    print(f"\n| n | contender | ms per iteration (<= {SMALL_MS:g}) | vs default |")
    print("|---|---|---|---|")
    wins = {}
    for n in sorted({r["n"] for r in rows}):
        mine = {r["contender"]: r["seconds"] for r in rows if r["n"] == n}
        default = mine.get("default")
        for name, t in sorted(mine.items(), key=lambda item: item[1]):
            if name == "cpu":
                print(f"| {_log2(n)} | cpu | {t * 1e3:.4f} | |")
                continue
            ratio = f"{default / t:.2f}x" if default else "-"
            print(f"| {_log2(n)} | {name} | {t * 1e3:.4f} {_verdict(t * 1e3 <= SMALL_MS)} | {ratio} |")
            if default and t < default and name not in ("default", "no-graphs", "sync-every-step"):
                wins.setdefault(name, []).append(_log2(n))
    for name, sizes in sorted(wins.items()):
        print(f"- {name} beats the default at n = {', '.join(sizes)}")
    if not wins:
        print("- no contender beats the default")


def round_cost(rows):
    print("\n| n | rounds | us per round |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {_log2(r['n'])} | {r['rounds']} | {r['seconds_per_round'] * 1e6:.2f} |")


def oracle(rows):
    print("\n| n | what | GPU speed-up over the CPU | target |")
    print("|---|---|---|---|")
    for r in rows:
        if not r["what"].startswith("gradient"):
            print(f"| {r['n']} | {r['what']} | {r['speedup']:.2f}x | |")
            continue
        target = ORACLE_SMALL if r["n"] <= 512 else ORACLE_LARGE
        print(f"| {r['n']} | {r['what']} | {r['speedup']:.2f}x | >= {target:g}x {_verdict(r['speedup'] >= target)} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", help="gpu_kernels.json of a run of bench/gpu_kernels.py")
    args = p.parse_args(argv)
    try:
        with open(args.json) as f:
            run = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"gpu_targets: cannot read {args.json}: {exc}", file=sys.stderr)
        return 2
    gpu = run.get("machine", {}).get("gpu", "an unnamed GPU")
    print(f"# Issue 14's targets on {gpu} (copy bandwidth {run.get('gpu_copy_GBps', float('nan')):.0f} GB/s)\n")
    for name, show in (("bits", bits), ("mix", mix), ("overhead", overhead), ("round_cost", round_cost),
                       ("oracle", oracle)):
        if run.get(name):
            show(run[name])
        else:
            print(f"\n({name}: not in this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
