"""
Why plain gossip is biased, and how Pull-Diag removes the bias
==============================================================

On a directed graph with row-stochastic weights, gossip ``x <- A x`` reaches the ``pi``-weighted average of the
starting values, not their mean. Pull-Diag divides by the tracked diagonal ``Diag(A^k)`` and reaches the mean
(eq. 5 of the paper).
"""

import matplotlib.pyplot as plt
import numpy as np

import rowstoch_fast as rf

A = rf.topology.erdos_renyi(64, 0.08, seed=3)  # a random directed graph, in-degree weights
X = np.random.default_rng(0).standard_normal((64, 1))
print(f"beta = {A.metrics().beta:.3f}, kappa = {A.metrics().kappa:.2f}")

plain = rf.a_protocol(A, X, 200)  # plain gossip: distance to the mean at every round
corrected = rf.pull_diag(A, X, 200)

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(plain.errors, label="gossip (A-protocol)")
ax.semilogy(corrected.errors, label="Pull-Diag")
ax.set_xlabel("gossip round k")
ax.set_ylabel("||z_k - mean(x_0)||")
ax.legend()
fig.tight_layout()
