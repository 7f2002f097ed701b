"""The straightforward research-code implementation of Pull-Diag-GT on the synthetic problem.

This is the baseline the end-to-end benchmark compares against: a dense NumPy
mixing matrix, the tracker as the paper writes it (``V <- A V`` on a dense
``n x n`` V every iteration, Appendix B), and a Python loop over nodes drawing
each mini-batch with ``rng.choice(M, B, replace=False)``. It is deliberately
not optimised: it is what a researcher would write from the paper.
"""

from __future__ import annotations

import numpy as np


def logistic_grad(H, Y, rho, x):
    z = H @ x
    coef = -Y / (1.0 + np.exp(Y * z))
    return (coef[:, None] * H).mean(0) + rho * 2 * x / (1 + x * x) ** 2


class ResearchPullDiagGT:
    """Pull-Diag-GT exactly as eq. (7) and Appendix B write it, one node at a time."""

    def __init__(self, A_dense, H, Y, rho, batch, lr, x0, seed=0):
        self.A = np.asarray(A_dense)
        self.n = self.A.shape[0]
        self.M = H.shape[0] // self.n
        self.H = H.reshape(self.n, self.M, -1)
        self.Y = Y.reshape(self.n, self.M)
        self.rho, self.batch, self.lr = rho, batch, lr
        self.rng = np.random.default_rng(seed)
        self.x = np.tile(x0, (self.n, 1))
        self.V = np.eye(self.n)
        self.D = np.ones(self.n)
        self.g = self.gradients(self.x)
        self.y = self.g.copy()

    def gradients(self, X):
        G = np.empty_like(X)
        for i in range(self.n):
            idx = self.rng.choice(self.M, self.batch, replace=False)
            G[i] = logistic_grad(self.H[i, idx], self.Y[i, idx], self.rho, X[i])
        return G

    def step(self):
        self.x = self.A @ (self.x - self.lr * self.y)
        self.V = self.A @ self.V
        D_new = np.diag(self.V).copy()
        g_new = self.gradients(self.x)
        self.y = self.A @ (self.y + g_new / D_new[:, None] - self.g / self.D[:, None])
        self.g, self.D = g_new, D_new
