"""Per-call cost of the _core entry points a step calls (combine, mix, first_nonfinite), for one build:
``python bench/core_call_overhead.py DIR`` imports ``_core`` from DIR (a copy of a build's ``_core*.so``); run two
builds alternately and compare medians (bench/RESULTS.md section 25)."""

import sys
import time

import numpy as np
import scipy.sparse as sp


def main(folder):
    sys.path.insert(0, folder)
    import _core as c

    rng = np.random.default_rng(0)
    for n, d in ((16, 10), (4096, 10)):
        A = (sp.random(n, n, density=min(1.0, 4.0 / n), random_state=1, format="csr") + sp.eye(n, format="csr")).tocsr()
        A.sort_indices()
        X, Y, Z = rng.standard_normal((n, d)), np.empty((n, d)), rng.standard_normal((n, d))
        ip, ix, dat = A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data
        calls = {"combine": lambda: c.combine(Y, [1.0, -0.1], [X, Z]), "mix": lambda: c.mix(ip, ix, dat, X, Y),
                 "first_nonfinite": lambda: c.first_nonfinite(X)}
        for name, f in calls.items():
            k = 3000 if n == 16 else 300
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(k):
                    f()
                times.append((time.perf_counter() - t0) / k * 1e6)
            print(f"{n} {name} {np.median(times):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
