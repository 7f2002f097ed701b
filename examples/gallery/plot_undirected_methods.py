"""
The undirected network's methods on a least-squares problem
===========================================================

On an undirected ring with Metropolis weights (doubly stochastic ``W``), DGD stops at an ``O(lr)`` distance from
the minimiser, while the exact methods (DIGing, EXTRA, NIDS, Exact Diffusion) reach it; GT-SAGA reaches it with
one sampled gradient per node and iteration (a per-sample oracle of the finite sum).
"""

import matplotlib.pyplot as plt
import numpy as np

import rowstoch_fast as rf

W = rf.topology.ring(16, directed=False, weights="metropolis")
f = rf.objectives.LeastSquares.synthetic(16, samples_per_node=8, d=3, heterogeneity=1.0, seed=1)
x_star = f.optimum().x

fig, ax = plt.subplots(figsize=(6, 3.5))
for name in ("dgd", "diging", "extra", "nids", "exact-diffusion", "gt-saga"):
    cls = rf.algorithms.REGISTRY[name]
    opt = cls.build(W, f.x0(), 0.05)
    grad = f.oracle(seed=0) if cls.gradients == "samples" else f.full_gradient
    errors = []
    for _ in range(1500):
        opt.step(grad)
        errors.append(np.abs(opt.x - x_star).max())
    ax.semilogy(errors, label=name)
ax.set_xlabel("iteration")
ax.set_ylabel("max_i ||x_i - x*||")
ax.legend(fontsize=8)
fig.tight_layout()
