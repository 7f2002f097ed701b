"""Y = A X and A^R X: dense BLAS vs scipy.sparse vs rowstoch_fast (vs torch.sparse, sparse_dot_mkl where installed).

Usage::

    python bench/mix_scaling.py [--max-log2n 20] [--rounds 7] [--json bench/mix_scaling.json]

Prints a markdown table (median seconds per call, ratio to scipy in the same run,
effective bandwidth) for the exponential graph and a random graph with ~10
nonzeros per row, n = 2^10 .. 2^max, d in {1, 10, 100}, and A^10 X.
"""

from __future__ import annotations

import argparse
import os
import sys

# MKL's OpenMP threads spin for 200 ms after each call by default, which would
# steal both cores from whichever contender runs next in the interleaved loop.
os.environ.setdefault("KMP_BLOCKTIME", "0")

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _harness import bandwidth, interleaved, machine_info, save_json  # noqa: E402

from rowstoch_fast import MixingMatrix, topology, _core  # noqa: E402

DENSE_MAX_N = 2**12


def random_graph(n, per_row=10, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, n * (per_row - 1))
    dst = np.repeat(np.arange(n), per_row - 1)
    ring = np.arange(n)
    return MixingMatrix.from_edges(n, np.stack([np.concatenate([src, ring]), np.concatenate([dst, (ring + 1) % n])], 1))


def contenders(A, X, R):
    csr = A.csr
    sc = sp.csr_matrix(csr)
    out = np.empty_like(X)
    work = np.empty_like(X)
    c = {}

    def ours():
        if R == 1:
            _core.mix(csr.indptr, csr.indices, csr.data, X, out, check_indices=False)
        else:
            _core.mix_power(csr.indptr, csr.indices, csr.data, X, R, out, work, check_indices=False)
        return out

    def scipy_():
        Y = X
        for _ in range(R):
            Y = sc @ Y
        return Y

    c["rowstoch"] = ours
    c["scipy"] = scipy_
    if A.n <= DENSE_MAX_N:
        D = A.toarray()

        def dense():
            Y = X
            for _ in range(R):
                Y = D @ Y
            return Y

        c["dense"] = dense
    try:
        import torch

        T = torch.sparse_csr_tensor(torch.from_numpy(csr.indptr.astype(np.int64)), torch.from_numpy(csr.indices.astype(np.int64)),
                                    torch.from_numpy(csr.data.copy()), size=csr.shape)
        TX = torch.from_numpy(X)

        def torch_():
            Y = TX
            for _ in range(R):
                Y = T @ Y
            return Y

        c["torch"] = torch_
    except ImportError:
        pass
    try:
        from sparse_dot_mkl import dot_product_mkl

        def mkl():
            Y = X
            for _ in range(R):
                Y = dot_product_mkl(sc, Y)
            return Y

        c["mkl"] = mkl
    except ImportError:
        pass
    return c


def traffic(A, d, R):
    """(compulsory bytes, gathered bytes) of R products with an n x d block."""
    isz = A.csr.indices.itemsize
    csr_bytes = (A.n + 1) * isz + A.nnz * (isz + 8)
    compulsory = R * (csr_bytes + 2 * A.n * d * 8)
    gathered = R * (csr_bytes + A.nnz * d * 8 + A.n * d * 8)
    return compulsory, gathered


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-log2n", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--graphs", default="exponential,random10")
    args = p.parse_args(argv)
    info = machine_info()
    bw = bandwidth(threads=_core.get_num_threads())
    print(f"# machine: {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads, "
          f"OpenMP {info['build']['openmp']}; measured copy {bw['copy_GBps']:.1f} GB/s, read {bw['read_GBps']:.1f} GB/s")
    rows = []
    for graph in args.graphs.split(","):
        for log2n in range(10, args.max_log2n + 1, 2):
            n = 2**log2n
            A = topology.exponential(n) if graph == "exponential" else random_graph(n)
            cases = [(d, 1) for d in (1, 10, 100) if not (d == 100 and log2n > 18)] + [(10, 10)]
            for d, R in cases:
                X = np.random.default_rng(1).standard_normal((n, d))
                c = contenders(A, X, R)
                ref = c["scipy"]()
                for k, f in c.items():
                    got = np.asarray(f())
                    assert np.allclose(got, ref, rtol=1e-10, atol=1e-12), (k, graph, n, d, R)
                med, _ = interleaved(c, rounds=args.rounds)
                comp, gath = traffic(A, d, R)
                row = {"graph": graph, "n": n, "nnz": A.nnz, "d": d, "R": R, "seconds": med,
                       "speedup_vs_scipy": med["scipy"] / med["rowstoch"],
                       "GBps_compulsory": comp / med["rowstoch"] / 1e9, "GBps_gathered": gath / med["rowstoch"] / 1e9}
                rows.append(row)
                others = " ".join(f"{k}={v * 1e3:.3f}ms" for k, v in sorted(med.items()))
                print(f"| {graph} | 2^{log2n} | {d} | {R} | {others} | {row['speedup_vs_scipy']:.2f}x | "
                      f"{row['GBps_compulsory']:.1f} | {row['GBps_gathered']:.1f} |", flush=True)
    if args.json:
        save_json(args.json, {"machine": info, "bandwidth": bw, "rows": rows})


if __name__ == "__main__":
    main()
