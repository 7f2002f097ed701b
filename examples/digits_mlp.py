"""The paper's MNIST experiment in miniature: a small MLP on scikit-learn's bundled digits.

16 nodes train one MLP each (64 -> 32 -> 10, 2,410 parameters) on their own
shard of the 8x8 handwritten digits (no download), communicating over the
paper's 16-node graphs with Pull-Diag-GT (R = 1) and MG-Pull-Diag-GT (R = 10),
through the ask/tell API: ``opt.step(grad_fn)`` with a NumPy backward pass
vectorised over nodes. Every run gets the same number of communication rounds
and samples (T = K / R iterations of R mini-batches).

Usage::

    python examples/digits_mlp.py [--rounds-budget 1000] [--graphs ring,grid]
"""

from __future__ import annotations

import argparse

import numpy as np

from rowstoch_fast import DivergenceError, PullDiagGT, topology

HIDDEN = 32


def load(n_nodes, seed=0):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    X, y = X[perm] / 16.0, y[perm]
    n_test = 297
    Xte, yte, Xtr, ytr = X[:n_test], y[:n_test], X[n_test:], y[n_test:]
    per = len(ytr) // n_nodes
    Xtr, ytr = Xtr[: per * n_nodes].reshape(n_nodes, per, 64), ytr[: per * n_nodes].reshape(n_nodes, per)
    return Xtr, ytr, Xte, yte


def unpack(P):
    """Parameter vectors (..., D) -> W1 (..., 64, H), b1, W2 (..., H, 10), b2."""
    i = 0
    out = []
    for shape in ((64, HIDDEN), (HIDDEN,), (HIDDEN, 10), (10,)):
        size = int(np.prod(shape))
        out.append(P[..., i:i + size].reshape(P.shape[:-1] + shape))
        i += size
    return out


DIM = 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10


def forward(P, X):
    W1, b1, W2, b2 = unpack(P)
    H = np.maximum(np.einsum("nbi,nih->nbh", X, W1) + b1[:, None, :], 0.0)
    logits = np.einsum("nbh,nhk->nbk", H, W2) + b2[:, None, :]
    return H, logits


def loss_and_grad(P, X, y):
    """Cross-entropy of every node's MLP on its batch (X: n x B x 64) and its gradient (n x DIM)."""
    W1, b1, W2, b2 = unpack(P)
    H, logits = forward(P, X)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    B = X.shape[1]
    nll = -np.log(np.take_along_axis(p, y[..., None], -1)[..., 0] + 1e-12).mean(-1)
    d = p.copy()
    np.put_along_axis(d, y[..., None], np.take_along_axis(d, y[..., None], -1) - 1.0, -1)
    d /= B
    gW2 = np.einsum("nbh,nbk->nhk", H, d)
    gb2 = d.sum(1)
    dH = np.einsum("nbk,nhk->nbh", d, W2) * (H > 0)
    gW1 = np.einsum("nbi,nbh->nih", X, dH)
    gb1 = dH.sum(1)
    G = np.concatenate([gW1.reshape(len(P), -1), gb1, gW2.reshape(len(P), -1), gb2], axis=1)
    return nll, G


def train(A, rounds, lr, budget, batch=16, seed=0):
    n = A.n
    Xtr, ytr, Xte, yte = load(n)
    rng = np.random.default_rng(seed)
    x0 = 0.1 * rng.standard_normal(DIM)
    opt = PullDiagGT(A, x0, lr=lr, rounds=rounds)
    per = Xtr.shape[1]

    def grad_fn(P):
        G = np.zeros_like(P)
        for _ in range(rounds):  # eq. (12b): average of R mini-batches
            idx = rng.integers(0, per, (n, batch))
            _, g = loss_and_grad(np.asarray(P), np.take_along_axis(Xtr, idx[..., None], 1), np.take_along_axis(ytr, idx, 1))
            G += g / rounds
        return G

    for _ in range(budget // rounds):
        opt.step(grad_fn)
    P = np.asarray(opt.x)
    train_loss = float(loss_and_grad(P, Xtr, ytr)[0].mean())
    _, logits = forward(np.repeat(opt.centroid()[None], 1, 0), Xte[None])
    accuracy = float((logits[0].argmax(-1) == yte).mean())
    return train_loss, accuracy


LR = {"ring": {1: 0.005, 10: 0.02}, "grid": {1: 0.02, 10: 0.03}, "geometric": {1: 0.02, 10: 0.03},
      "nearest_neighbor": {1: 0.02, 10: 0.02}}


def main(argv=None):
    p = argparse.ArgumentParser(description="Decentralized MLP on the digits data over the paper's 16-node graphs")
    p.add_argument("--rounds-budget", type=int, default=1000, help="communication rounds per run")
    p.add_argument("--graphs", default="ring,grid,geometric,nearest_neighbor")
    p.add_argument("--lr-scale", type=float, default=1.0, help="multiplies the paper's MNIST learning rates")
    args = p.parse_args(argv)
    graphs = topology.paper_graphs()
    print(f"{'graph':<18}{'R':>4}{'train loss':>12}{'test acc (centroid)':>22}")
    results = {}
    for name in args.graphs.split(","):
        for R in (1, 10):
            try:
                loss, acc = train(graphs[name], R, LR[name][R] * args.lr_scale, args.rounds_budget)
                print(f"{name:<18}{R:>4}{loss:>12.4f}{acc:>22.3f}")
            except DivergenceError as exc:
                loss, acc = float("inf"), float("nan")
                print(f"{name:<18}{R:>4}{'diverged at iteration ' + str(exc.iteration):>34}")
            results[(name, R)] = (loss, acc)
    return results


if __name__ == "__main__":
    main()
