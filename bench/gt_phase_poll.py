"""The fused tracker phase (gt_y_phase) with and without its Ctrl-C poll: two builds of _core interleaved
(section 87f of bench/RESULTS.md):

    OMP_NUM_THREADS=1 python bench/gt_phase_poll.py OLD_CORE.so NEW_CORE.so
"""
import sys, time, importlib.util, numpy as np
def load(path):
    spec = importlib.util.spec_from_file_location("_core", path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
import rowstoch_fast as rf
old, new = load(sys.argv[1]), load(sys.argv[2])
for n, R in ((16, 10), (1024, 10)):
    A = rf.topology.exponential(n); c = A.csr
    z = lambda: np.zeros((n, 10)); x, y, g1, g0 = (np.random.default_rng(k).standard_normal((n, 10)) for k in range(4))
    s = np.ones(n); outs = [z() for _ in range(4)]
    res = {"old": [], "new": []}
    for rep in range(7):
        for name, m in (("old", old), ("new", new)):
            k = 2000 if n == 16 else 200
            t = time.perf_counter()
            for _ in range(k):
                m.gt_y_phase(c.indptr, c.indices, c.data, R, 0.1, x, y, g1, g0, s, s, *outs, False)
            res[name].append((time.perf_counter() - t) / k * 1e6)
    o, w = np.median(res["old"]), np.median(res["new"])
    print(f"n={n} R={R}: old {o:.2f} us, new {w:.2f} us, new/old {w/o:.3f}")
