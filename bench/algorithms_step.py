"""One iteration of every algorithm (constant gradient) against the scipy.sparse composition of its own equations.

Usage::

    python bench/algorithms_step.py [--log2n 16] [--d 10] [--rounds 5] [--json bench/algorithms_step.json] [--only a,b]
    python bench/algorithms_step.py --loss 0.1 --together --only sgp,robust-gradient-push,push-pull,r-fast

For each algorithm of ``rowstoch_fast.algorithms.REGISTRY`` on the directed exponential graph (row-stochastic
``A`` and its out-degree weighted ``C``; an undirected network's method on the Metropolis W of the same graph
with every link both ways), interleaved in one run, medians over rounds:

* ``rowstoch``: ``opt.step(grad)`` with a constant gradient (the whole step: gradient copy and NaN check,
  mixing, element-wise updates, commit; trackers frozen, ``tracker="perron"``); a local-update method (and
  ProxSkip) timed over whole rounds of 4 steps and reported per step;
* ``scipy``: the same update written directly with ``scipy.sparse`` products and NumPy expressions.

``--backend cupy`` times the steps on a GPU (synchronised after each) and nothing else. ``--loss P``: the
network is ``Lossy(A, P, seed=0)`` (Bernoulli losses; the scipy compositions, lossless, are then left out).
``--together``: the ``--only`` algorithms' steps timed against each other in one interleaved run (each one's
ratio to the first), e.g. robust gradient-push against SGP on the same lossy network.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _harness import interleaved, machine_info, save_json  # noqa: E402

from rowstoch_fast import _core, topology  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY, names  # noqa: E402
from rowstoch_fast import MixingMatrix  # noqa: E402
from rowstoch_fast.mixing import metropolis_weights, out_degree_weights  # noqa: E402
from rowstoch_fast.composite import L1  # noqa: E402
from rowstoch_fast._hashing import uniform_hash  # noqa: E402


def numpy_draws(samples, n, k):
    """``draw_samples(samples, (n,), k)`` written in NumPy, as a user of scipy would (the package's are compiled)."""
    u = uniform_hash(0, k, 0, np.arange(n, dtype=np.int64), 2**63 - 1)
    return np.minimum((u * samples).astype(np.int64), samples - 1)


def saga(st, g):
    """SAGA's estimate with the sample's gradient ``g`` (the table of ``st``, one sample drawn per node; the table,
    its mean and the draw counter moved on)."""
    table, rows = st["table"], np.arange(g.shape[0])
    idx = numpy_draws(table.shape[0], g.shape[0], st["k"])
    old = table[idx, rows]
    estimate = g - old + st["mean"]
    st["mean"] = st["mean"] + (g - old) / table.shape[0]
    table[idx, rows] = g
    st["k"] += 1
    return estimate


def scipy_step(name, S, SC, s, lr, st, g):
    """The algorithm's update in scipy.sparse + NumPy (state dict ``st``; ``s``: the frozen 1/diag(D))."""
    if name == "pull-diag-gt":
        st["x"] = S @ (st["x"] - lr * st["y"])
        st["y"] = S @ (st["y"] + s[:, None] * g - s[:, None] * st["g"])
    elif name == "frost":
        x = S @ st["x"] - lr * st["y"]
        st["y"] = S @ st["y"] + s[:, None] * g - s[:, None] * st["g"]
        st["x"] = x
    elif name == "pull-diag-gd":
        st["x"] = S @ st["x"] - lr * (s[:, None] * g)
    elif name == "dsgd":
        st["x"] = S @ (st["x"] - lr * g)
    elif name == "push-pull":
        st["x"] = S @ (st["x"] - lr * st["y"])
        st["y"] = SC @ st["y"] + g - st["g"]
    elif name == "push-diging":
        st["u"] = SC @ (st["u"] - lr * st["y"])
        st["v"] = SC @ st["v"]
        st["x"] = st["u"] / st["v"]
        st["y"] = SC @ st["y"] + g - st["g"]
    elif name == "sgp":
        st["x"] = SC @ (st["x"] - lr * g)
        st["w"] = SC @ st["w"]
        st["z"] = st["x"] / st["w"]
    elif name == "centralized":
        st["x"] = st["x"] - lr * g.mean(axis=0)
    elif name == "abm":
        x = S @ st["x"] - lr * st["y"] + 0.2 * (st["x"] - st["x_prev"])  # (ABm's default momentum)
        st["y"] = SC @ st["y"] + g - st["g"]
        st["x_prev"], st["x"] = st["x"], x
    elif name == "add-opt":
        st["x"] = SC @ st["x"] - lr * st["w"]
        st["v"] = SC @ st["v"]
        st["z"] = st["x"] / st["v"]
        st["w"] = SC @ st["w"] + g - st["g"]
    elif name == "sonata":  # (alpha = 1, the L1 prox as for the proximal methods below; w = phi y)
        xt = soft(st["x"] - lr * (st["w"] / st["v"]), lr * PROX_L1)
        v = SC @ st["v"]
        st["x"] = (SC @ (st["v"] * xt)) / v
        st["w"] = SC @ (st["w"] + g - st["g"])
        st["v"] = v
    elif name == "dgd":  # below, S is the undirected graph's W
        st["x"] = S @ st["x"] - lr * g
    elif name == "diging":
        st["x"] = S @ st["x"] - lr * st["y"]
        st["y"] = S @ st["y"] + g - st["g"]
    elif name == "aug-dgm":
        st["x"] = S @ (st["x"] - lr * st["y"])
        st["y"] = S @ (st["y"] + g - st["g"])
    elif name == "simple-gt":  # (u = x - y of decent-bench's y+ = x - lr g, x+ = W x + y+ - y)
        wx = S @ st["x"]
        st["x"], st["u"] = wx - lr * g + st["u"], st["u"] + wx - st["x"]
    elif name == "extra":
        wx = S @ st["x"]
        st["x"], st["x_prev"], st["wx_prev"] = (st["x"] + wx - 0.5 * (st["x_prev"] + st["wx_prev"])
                                                - lr * (g - st["g_prev"]), st["x"], wx)
    elif name == "nids":
        z = 2 * st["x"] - st["x_prev"] - lr * (g - st["g_prev"])
        st["x"], st["x_prev"] = 0.5 * (z + S @ z), st["x"]
    elif name == "exact-diffusion":
        psi = st["x"] - lr * g
        phi = psi + st["x"] - st["psi"]
        st["x"], st["psi"] = 0.5 * (phi + S @ phi), psi
    elif name == "pg-extra":  # (the proximal methods with an L1 regularizer, PROX_L1: a soft threshold)
        wx = S @ st["x"]
        st["z"] = wx + st["z"] - 0.5 * (st["x_prev"] + st["wx_prev"]) - lr * (g - st["g_prev"])
        st["x"], st["x_prev"], st["wx_prev"], st["g_prev"] = soft(st["z"], lr * PROX_L1), st["x"], wx, g
    elif name == "prox-nids":
        u = 2 * st["x"] - st["x_prev"] - lr * (g - st["g_prev"])
        st["z"] = st["z"] - st["x"] + 0.5 * (u + S @ u)
        st["x"], st["x_prev"], st["g_prev"] = soft(st["z"], lr * PROX_L1), st["x"], g
    elif name == "prox-exact-diffusion":
        z = st["x"] - lr * g - st["q"]
        wz = S @ z
        st["q"] = st["q"] + 0.5 * (z - wz)
        st["x"] = soft(0.5 * (z + wz), lr * PROX_L1)
    elif name == "dlm":  # (S: W; penalty c = 1)
        st["x"] = st["x"] - lr * (g + st["s"] + st["alpha"])
        st["s"] = st["x"] - S @ st["x"]
        st["alpha"] = st["alpha"] + st["s"]
    elif name == "wang-elia":
        u = st["x"] + st["z"]
        st["x"], st["z"] = st["x"] - 0.5 * (u - S @ u) - lr * g, st["z"] + 0.5 * (st["x"] - S @ st["x"])
    elif name in ("local-dsgd", "k-gt", "led", "prox-skip", "dinno", "lt-admm", "lt-admm-vr"):  # (one gradient step
        # per call, K = 4)
        k, K = st["k"], 4
        talks = COINS[k % len(COINS)] if name == "prox-skip" else (k + 1) % K == 0
        if name == "local-dsgd":
            v = st["x"] - lr * g
            st["x"] = S @ v if talks else v
        elif name == "k-gt":
            if k % K == 0:
                st["x_round"] = st["x"]
            st["x"] = st["x"] - lr * (g + st["c"])
            if talks:
                u = st["x_round"] - st["x"]
                st["x"] = S @ (st["x_round"] - u)
                st["c"] = st["c"] - (u - S @ u) / (K * lr)
        elif name == "led":
            phi = st["x"] - lr * g - st["y"] / (2 * K)
            if talks:
                st["x"] = S @ phi
                st["y"] = st["y"] + phi - st["x"]
            else:
                st["x"] = phi
        elif name == "dinno":  # (rho = 0.5; a round starts with its communication)
            if k % K == 0:
                st["wx"] = S @ st["x"]
                st["p"] = st["p"] + 0.5 * (st["x"] - st["wx"])
                st["x_round"] = st["x"]
            wii = S.diagonal()[:, None]
            d = 1.0 - wii
            q = g + st["p"] + 0.5 * (2 * d * st["x"] - (d - wii) * st["x_round"] - st["wx"])
            st["x"] = st["x"] - lr * q
        elif name in ("lt-admm", "lt-admm-vr"):  # (rho = 1, alpha = 0.5, beta = lr; a round starts with its
            # communication)
            if k % K == 0:
                wii = st.get("wii")
                if wii is None:
                    wii = st["wii"] = S.diagonal()[:, None]
                wx = S @ st["x"]
                st["z"], st["e"] = 0.5 * st["e"] + (wx - wii * st["x"]), st["e"] + (wx - st["x"])
                st["c"] = (1.0 - wii) * st["x"] - st["z"]
            v = g
            if name == "lt-admm-vr":  # (the table of m = 4 samples per node, one drawn per node; refreshed at the
                table, rows = st["table"], np.arange(g.shape[0])  # new phi: the same constant g here)
                idx = numpy_draws(table.shape[0], g.shape[0], k)
                old = table[idx, rows]
                v = g - old + st["mean"]
                st["mean"] = st["mean"] + (g - old) / table.shape[0]
                table[idx, rows] = g
            st["x"] = st["x"] - lr * v - lr * st["c"]
        else:
            z = st["x"] - lr * g - st["y"]
            if talks:
                st["x"] = 0.5 * (z + S @ z)
                st["y"] = st["y"] + 0.25 * (z - st["x"])
            else:
                st["x"] = z
        st["k"] = k + 1
    elif name == "admm":  # (S: W; the prox of the linear f_i: v - t g; lr = 1e-3, d_i = 1 - w_ii)
        d = 1.0 - S.diagonal()
        v = (st["u"] + (1.0 - 2.0 * (1.0 - d))[:, None] * st["x"] - st["beta"]) * (0.5 / d)[:, None]
        st["x"] = v - (lr / d)[:, None] * g
        st["u"] = S @ st["x"]
        st["beta"] = st["beta"] + st["x"] - st["u"]
    elif name == "atg":  # (rho = 1, alpha = 0.5, gamma = 0.1; the link sums of y and s)
        wii = st.get("wii")
        if wii is None:
            wii = st["wii"] = S.diagonal()[:, None]
        scale = 1.0 / (2.0 - wii)  # 1 / (1 + rho d_i)
        y, v = scale * (st["x"] + st["zy"]), scale * (g + st["zs"])
        st["x"] = 0.9 * st["x"] + 0.1 * y - lr * v
        for u, z, e in ((y, "zy", "ey"), (v, "zs", "es")):
            wu = S @ u
            st[z], st[e] = 0.5 * st[e] + (wu - wii * u), st[e] + (wu - u)
    elif name in ("gt-svrg", "gt-sarah"):  # (one sample per node, drawn; no snapshot in the timed steps)
        idx = numpy_draws(st["table"].shape[0], g.shape[0], st["k"])
        sample = st["table"][idx, np.arange(g.shape[0])]
        if name == "gt-svrg":
            st["x"] = S @ st["x"] - lr * st["y"]
            v = g - sample + st["full"]
            st["y"] = S @ st["y"] + v - st["v"]
        else:
            v = g - sample + st["v"]
            st["y"] = S @ st["y"] + v - st["v"]
            st["x"] = S @ st["x"] - lr * st["y"]
        st["v"], st["k"] = v, st["k"] + 1
    elif name == "gt-saga":  # (S: W; the table of m = 4 samples per node, one drawn per node)
        st["x"] = S @ st["x"] - lr * st["y"]
        g_new = saga(st, g)
        st["y"] = S @ st["y"] + g_new - st["g"]
        st["g"] = g_new
    elif name == "push-saga":  # (SC: C; the table as GT-SAGA's, one sample drawn per node)
        st["x"] = SC @ (st["x"] - lr * st["w"])
        st["v"] = SC @ st["v"]
        st["z"] = st["x"] / st["v"]
        g_new = saga(st, g)
        st["w"] = SC @ (st["w"] + g_new - st["g"])
        st["g"] = g_new
    elif name == "choco-sgd":  # (uncompressed, gamma = 1)
        h = st["x"] - lr * g
        st["x_hat"] = st["x_hat"] + (h - st["x_hat"])
        st["x"] = h + (S @ st["x_hat"] - st["x_hat"])
    elif name == "compressed-push-pull":  # (uncompressed, gamma = a = 1)
        def exchange(M, v, key):
            q = v - st["h" + key]
            hat, hat_w = st["h" + key] + q, st["h" + key + "w"] + M @ q
            st["h" + key], st["h" + key + "w"] = hat, hat_w
            return hat - hat_w
        x = st["x"] - exchange(S, st["x"], "x") - lr * st["y"]
        st["y"] = st["y"] - exchange(SC, st["y"], "y") + g - st["g"]
        st["x"] = x
    elif name == "robust-gradient-push":  # running sums per link, every message arriving (lossless)
        h = st["x"] - lr * g
        st["x"], st["pending_x"] = running_sums(SC, h, st["pending_x"])
        st["w"], st["pending_w"] = running_sums(SC, st["w"], st["pending_w"])
        st["z"] = st["x"] / st["w"]
    elif name == "r-fast":
        v = st["x"] - lr * st["y"]
        change, st["v"] = v - st["v"], v
        delivered, st["pending_x"] = running_sums(S, change, st["pending_x"])
        st["x"] = st["x"] + delivered
        y, st["pending_y"] = running_sums(SC, st["y"], st["pending_y"])
        st["y"] = y + g - st["g"]
    else:
        return False  # no transcription here: the table says so
    return True


#: ProxSkip's coins (p = 0.25, seed 0: its defaults), as the SciPy transcription reads them.
COINS = REGISTRY["prox-skip"].coins(0, 0.25, 4096)

#: The weight of the L1 regularizer the proximal methods (``composite``) step with here.
PROX_L1 = 1e-3


def soft(v, t):
    """The soft threshold, ``prox`` of ``t ||.||_1``, as NumPy writes it."""
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def running_sums(M, src, pending, cache={}):
    """Per-link running sums over the CSR ``M`` with every message arriving, as one writes them with SciPy: the
    shares taken, plus the undelivered mass per link, which then stays only on the links that lost (none). The
    link-to-receiver sum is built once per matrix."""
    if id(M) not in cache:
        rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
        cache[id(M)] = (M, sp.csr_matrix((np.ones(M.nnz), (rows, np.arange(M.nnz))), shape=(M.shape[0], M.nnz)),
                        np.zeros(M.nnz, dtype=bool))  # (no message lost)
    _, to_receiver, kept = cache[id(M)]
    taken = M @ src + to_receiver @ pending
    return taken, np.where(kept[:, None], pending + M.data[:, None] * src[M.indices], 0.0)


def undirected(A, cache={}):
    """The Metropolis-Hastings W of ``A``'s graph with every link both ways (computed once per matrix)."""
    if id(A) not in cache:
        links = (A.csr + A.csr.T).tocsr()
        links.data[:] = 1.0
        cache[id(A)] = metropolis_weights(MixingMatrix(links, normalize=True))
    return cache[id(A)]


def make_contenders(name, A, d, lr=1e-3, seed=0, backend="cpu"):
    rng = np.random.default_rng(seed)
    n = A.n
    g = rng.standard_normal((n, d))
    cls = REGISTRY[name]
    if not cls.applies_to(A):  # an undirected network's method: the same graph made undirected, Metropolis W
        if not isinstance(A, MixingMatrix):
            return {}  # (not on a lossy directed network: left out of the table)
        A = undirected(A)
    x0 = rng.standard_normal((n, d))
    sync, asarray = (lambda: None), np.asarray
    if backend == "cupy":
        import cupy

        g, x0 = cupy.asarray(g), cupy.asarray(x0)
        sync, asarray = cupy.cuda.Device().synchronize, cupy.asarray
    options = {"regularizer": L1(PROX_L1)} if cls.composite else {}  # (a proximal method: its prox step too)
    opt = cls.build(A, x0, lr, tracker="perron", backend=backend, **options)
    if cls.gradients == "samples":  # (GT-SAGA: a constant per-sample gradient, four samples per node)
        from rowstoch_fast.objectives import SampleOracle

        grad = SampleOracle(lambda X, idx: g, samples=4)
    elif cls.gradients == "prox":  # (ADMM: the local prox of the linear f_i(x) = g_i^T x, v - t g_i)
        import types

        grad = types.SimpleNamespace(prox=lambda V, t: V - asarray(t)[..., None] * g)  # (t: one per node)
    else:
        grad = lambda X: g  # noqa: E731
    opt.step(grad)
    opt.step(grad)  # (past the first step, which some methods take apart)

    K = steps_per_call(cls)

    def ours():
        for _ in range(K):
            opt.step(grad)
        sync()

    if backend != "cpu" or not isinstance(A, MixingMatrix):  # (a lossy network: no lossless composition)
        return {"rowstoch": ours}
    S = sp.csr_matrix(A.csr)
    SC = sp.csr_matrix(out_degree_weights(A).csr)
    s = 1.0 / A.pi
    # the algorithm's own state blocks, shaped as it declares them (push-sum weights: one value per node, ones)
    st = {k: np.ones((n, 1)) if k in cls.narrow else rng.standard_normal((n, d)) for k in cls.state}
    st.setdefault("g", rng.standard_normal((n, d)))  # (the previous gradient, kept as state or not)
    st.update({"table": rng.standard_normal((4, n, d)), "k": 0,
               "pending_x": np.zeros((S.nnz if name == "r-fast" else SC.nnz, d)),
               "pending_y": np.zeros((SC.nnz, d)), "pending_w": np.zeros((SC.nnz, 1))})
    if not scipy_step(name, S, SC, s, lr, dict(st), g):
        return {"rowstoch": ours}

    def scipy():
        for _ in range(K):
            scipy_step(name, S, SC, s, lr, st, g)

    return {"rowstoch": ours, "scipy": scipy}


def steps_per_call(cls):
    """The steps one timed call takes: a whole round of a local-update method (K = 4 steps, one of them
    communicating: the median of single steps saw only the local ones; ProxSkip's coins, p = 1/4, talk once in
    four on average), else one."""
    return 4 if "local_steps" in cls.hyper or cls.name == "prox-skip" else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--log2n", type=int, default=16)
    p.add_argument("--d", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--only", default=None, help="comma-separated names (default: every registered algorithm)")
    p.add_argument("--backend", default="cpu", choices=["cpu", "cupy"],
                   help="cupy: the steps on a GPU (synchronised), without the scipy compositions")
    p.add_argument("--loss", type=float, default=0.0, help="Bernoulli loss probability of every message (Lossy)")
    p.add_argument("--together", action="store_true",
                   help="time the --only algorithms against each other in one interleaved run")
    args = p.parse_args(argv)
    info = machine_info()
    A = topology.exponential(2**args.log2n)
    A.pi
    if args.loss:
        from rowstoch_fast.network import Lossy

        A = Lossy(A, args.loss, seed=0)
    print(f"# {info['cpu']}, {info['cores']} cores, kernels on {_core.get_num_threads()} threads; "
          f"exponential(2^{args.log2n}), d = {args.d}, loss {args.loss}; load {os.getloadavg()[0]:.2f}")
    if args.together:
        chosen = args.only.split(",") if args.only else names()
        med, _ = interleaved({name: make_contenders(name, A, args.d, backend=args.backend)["rowstoch"]
                              for name in chosen}, rounds=args.rounds, min_time=0.05, min_calls=4)
        med = {k: v / steps_per_call(REGISTRY[k]) for k, v in med.items()}  # (per step)
        print(f"| algorithm | ms per step | / {chosen[0]} |")
        print("|---|---|---|")
        for name in chosen:
            print(f"| {name} | {med[name] * 1e3:.3f} | {med[name] / med[chosen[0]]:.2f}x |", flush=True)
        if args.json:
            save_json(args.json, {"machine": info, "backend": args.backend, "n": 2**args.log2n, "d": args.d,
                                  "loss": args.loss, "rows": [{"algorithm": k, "seconds": med[k]} for k in chosen]})
        return
    print("| algorithm | rowstoch ms | scipy ms | speedup |")
    print("|---|---|---|---|")
    rows = []
    for name in args.only.split(",") if args.only else names():  # every registered algorithm
        contenders = make_contenders(name, A, args.d, backend=args.backend)
        if not contenders:
            print(f"| {name} | (does not run on this network) | | |", flush=True)
            continue
        med, _ = interleaved(contenders, rounds=args.rounds, min_time=0.05, min_calls=4)
        med = {k: v / steps_per_call(REGISTRY[name]) for k, v in med.items()}  # (per step)
        rows.append({"algorithm": name, "seconds": med})
        if "scipy" not in med:
            print(f"| {name} | {med['rowstoch'] * 1e3:.3f} | (no scipy transcription in scipy_step) | |", flush=True)
            continue
        print(f"| {name} | {med['rowstoch'] * 1e3:.3f} | {med['scipy'] * 1e3:.3f} | "
              f"{med['scipy'] / med['rowstoch']:.2f}x |", flush=True)
    if args.json:
        save_json(args.json, {"machine": info, "backend": args.backend, "n": A.n, "d": args.d, "rows": rows})


if __name__ == "__main__":
    main()
