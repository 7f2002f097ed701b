"""Obviously-correct dense NumPy/SciPy transcriptions of the paper's equations.

Every fast path of the package is tested against these. They favour
readability over speed: dense ``n x n`` matrices, Python loops, no caching.
Equation numbers refer to the ICML 2025 paper.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as la


def mix(A, X):
    """A-protocol (eq. 1): ``A X``."""
    return np.asarray(A) @ np.asarray(X)


def mix_power(A, X, R):
    """``A^R X`` by repeated products."""
    Y = np.array(X, dtype=np.result_type(A, X))
    for _ in range(R):
        Y = np.asarray(A) @ Y
    return Y


def perron(A):
    """Left Perron vector: ``pi^T A = pi^T``, ``sum(pi) = 1`` (Proposition 1), via ``scipy.linalg.eig``."""
    w, vl = la.eig(np.asarray(A, dtype=np.float64), left=True, right=False)
    k = int(np.argmin(np.abs(w - 1.0)))
    pi = np.abs(vl[:, k].real)
    return pi / pi.sum()


def beta(A, pi=None):
    """``||A - 1 pi^T||_pi = ||Pi^{1/2} (A - 1 pi^T) Pi^{-1/2}||_2`` (Section 2.2)."""
    A = np.asarray(A, dtype=np.float64)
    pi = perron(A) if pi is None else pi
    P = np.diag(np.sqrt(pi))
    Pinv = np.diag(1.0 / np.sqrt(pi))
    return float(np.linalg.norm(P @ (A - np.outer(np.ones(len(pi)), pi)) @ Pinv, 2))


def kappa(pi):
    """``max(pi) / min(pi)``."""
    return float(np.max(pi) / np.min(pi))


def diag_powers(A, K, stride=1):
    """Rows ``diag(A^(m * stride))``, ``m = 0..K``, by the paper's ``V_{k+1} = A V_k`` with ``V_0 = I``."""
    A = np.asarray(A, dtype=np.float64)
    V = np.eye(A.shape[0])
    out = [np.diag(V).copy()]
    for _ in range(K):
        for _ in range(stride):
            V = A @ V
        out.append(np.diag(V).copy())
    return np.array(out)


def a_protocol(A, Z, K):
    """Iterates ``z^(k) = A^k z``, ``k = 0..K`` (eq. 2)."""
    A = np.asarray(A, dtype=np.float64)
    zs = [np.array(Z, dtype=np.float64)]
    for _ in range(K):
        zs.append(A @ zs[-1])
    return np.array(zs)


def pull_diag(A, Z, K):
    """Pull-Diag protocol (eq. 5): ``V_k = A^k``, ``D_k = Diag(n V_k)``, ``z^(k) = V_k D_k^{-1} z`` for ``k = 1..K``.

    ``z^(0) = z`` (the initial values).
    """
    A = np.asarray(A, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    n = A.shape[0]
    V = np.eye(n)
    zs = [Z.copy()]
    for _ in range(K):
        V = A @ V
        D = np.diag(n * np.diag(V))
        zs.append(V @ np.linalg.solve(D, Z))
    return np.array(zs)


def pull_diag_gt(A, x0, lr, grad_fn, T, R=1):
    """(MG-)Pull-Diag-GT, eq. (8) for ``R = 1`` and eq. (14) in general, dense.

    ``x^(t+1) = A^R (x^(t) - lr y^(t))``,
    ``y^(t+1) = A^R (y^(t) + D_{t+1}^{-1} g^(t+1) - D_t^{-1} g^(t))``,
    ``D_t = Diag(A^(tR))`` (``D_0 = I``), ``y^(0) = g^(0) = grad_fn(x^(0))``.

    Returns the lists of iterates ``x^(t)`` and ``y^(t)``, ``t = 0..T``.
    """
    A = np.asarray(A, dtype=np.float64)
    AR = np.linalg.matrix_power(A, R)
    x = np.array(x0, dtype=np.float64)
    g = np.asarray(grad_fn(x), dtype=np.float64)
    y = g.copy()
    V = np.eye(A.shape[0])  # Tilde D_t = A^(tR)
    xs, ys = [x.copy()], [y.copy()]
    for _ in range(T):
        D_old = np.diag(V).copy()
        x = AR @ (x - lr * y)
        V = AR @ V
        D_new = np.diag(V).copy()
        g_new = np.asarray(grad_fn(x), dtype=np.float64)
        y = AR @ (y + g_new / D_new[:, None] - g / D_old[:, None])
        g = g_new
        xs.append(x.copy())
        ys.append(y.copy())
    return xs, ys
