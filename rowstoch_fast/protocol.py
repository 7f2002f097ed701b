"""Consensus protocols: the plain A-protocol (eq. 2) and the Pull-Diag protocol (eq. 5)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _core
from ._checks import as_float_array, check_int, require_memory
from ._device import device_operations, is_device_array
from .mixing import as_matrix
from .tracker import DEFAULT_BLOCK

__all__ = ["ConsensusResult", "pull_diag", "a_protocol"]


@dataclass(frozen=True, eq=False)
class ConsensusResult:
    """Outcome of a consensus protocol run for ``iterations`` steps.

    Attributes
    ----------
    errors : ndarray, shape (iterations + 1,)
        ``||z^(k) - 1 1^T z / n||_F`` for ``k = 0..iterations`` (Figure 1 of the paper).
    z : ndarray
        The final iterate ``z^(K)``, shape of the input.
    average : ndarray
        The desired global average ``1^T z / n``.
    """

    errors: np.ndarray
    z: np.ndarray = field(repr=False)
    average: np.ndarray = field(repr=False)


def _prepare(A, Z, iterations):
    A = as_matrix(A, stochastic="row")
    iterations = check_int(iterations, "iterations", minimum=0)
    require_memory(8 * (iterations + 1), f"{iterations} iterations (an error per iteration)", "lower iterations")
    Z = as_float_array(Z, "Z", np.float64, ndim=(1, 2))
    if Z.shape[0] != A.n:
        raise ValueError(f"Z has {Z.shape[0]} rows but A has {A.n} nodes")
    with np.errstate(over="ignore", invalid="ignore"):  # (1e308s had returned errors [inf, inf, inf, nan] with
        # NumPy's warnings alone, helper 213)
        spread = np.linalg.norm(Z - Z.mean(axis=0)) if Z.size else 0.0
    if not np.isfinite(spread):
        raise ValueError(f"Z's values are too large to be averaged and measured in float64 (the largest is "
                         f"{float(np.max(np.abs(Z))):.3g}: its mean or distance to it overflows): scale them down")
    return A.astype(np.float64) if A.dtype != np.float64 else A, Z, iterations


def a_protocol(A, Z, iterations):
    """Plain gossip ``z^(k+1) = A z^(k)`` (eq. 2): converges to ``1 pi^T z``, not the mean.

    Parameters
    ----------
    A : MixingMatrix or array_like
    Z : array_like, shape (n,) or (n, d)
        Initial values, one row per node.
    iterations : int, >= 0

    Returns
    -------
    ConsensusResult
        ``errors`` are measured against the mean, so they level off at
        ``||1 pi^T z - 1 1^T z / n||`` unless ``pi`` is uniform.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> A = topology.star(4)          # pi is not uniform: the hub weighs more
    >>> res = a_protocol(A, [1.0, 0.0, 0.0, 0.0], 60)
    >>> bool(res.errors[-1] > 0.1)
    True
    """
    A, Z, K = _prepare(A, Z, iterations)
    Z2 = Z.reshape(A.n, -1)
    mean = Z2.mean(axis=0)
    errors = np.empty(K + 1)
    cur, nxt = Z2.copy(), np.empty_like(Z2)
    c = A.csr
    errors[0] = np.linalg.norm(cur - mean)
    for k in range(1, K + 1):
        _core.mix(c.indptr, c.indices, c.data, cur, nxt, check_indices=False)
        cur, nxt = nxt, cur
        errors[k] = np.linalg.norm(cur - mean)
    return ConsensusResult(errors=errors, z=cur.reshape(Z.shape), average=mean.reshape(Z.shape[1:]))


def pull_diag(A, Z, iterations, *, block=DEFAULT_BLOCK):
    """The Pull-Diag protocol (eq. 5): ``z^(k) = A^k Diag(n A^k)^{-1} z`` -> ``1 1^T z / n``.

    ``V_k = A^k`` is advanced in column blocks (memory ``O(n * block)``): column
    block ``J`` of ``V_k`` holds the diagonals ``[A^k]_jj`` of its own nodes and
    contributes ``V_k[:, J] (z_J / (n [A^k]_JJ))`` to ``z^(k)``, so no ``n x n``
    matrix is ever stored. ``z^(0) = z``.

    Parameters
    ----------
    A : MixingMatrix or array_like
        Must have positive ``diag(A^k)`` for ``k = 1..iterations`` (true when every
        node has a self loop).
    Z : array_like, shape (n,) or (n, d)
    iterations : int, >= 0
    block : int
        Columns of ``A^k`` advanced together.

    Returns
    -------
    ConsensusResult

    Raises
    ------
    ValueError
        If some ``[A^k]_ii = 0`` (``D_k`` is then not invertible).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> res = pull_diag(topology.star(4), [1.0, 0.0, 0.0, 0.0], 60)
    >>> bool(res.errors[-1] < 1e-12), res.average
    (True, array(0.25))
    """
    block = check_int(block, "block", minimum=1)
    if is_device_array(Z):  # the CuPy backend: same loop, device arrays and kernel
        cuda = device_operations()
        xp = cuda.require_cupy()
        A = as_matrix(A, stochastic="row")
        A = A if A.dtype == np.float64 else A.astype(np.float64)
        K = check_int(iterations, "iterations", minimum=0)
        Z = xp.ascontiguousarray(Z, dtype=xp.float64)
        if Z.ndim not in (1, 2) or Z.shape[0] != A.n:
            raise ValueError(f"Z must have shape (n,) or (n, d) with n = {A.n}, got {tuple(Z.shape)}")

        def mix_into(W, out):
            cuda._mix_into(A, W, out)
    else:
        xp = np
        A, Z, K = _prepare(A, Z, iterations)
        c = A.csr

        def mix_into(W, out):
            _core.mix(c.indptr, c.indices, c.data, W, out, check_indices=False)
    n = A.n
    Z2 = Z.reshape(n, -1)
    mean = Z2.mean(axis=0)
    require_memory(8 * K * n * Z2.shape[1], f"pull_diag over {K} iterations (z^(k) for every k)", "lower iterations")
    zk = xp.zeros((K, n, Z2.shape[1]))
    for j0 in range(0, n, block):
        b = min(block, n - j0)
        cols = xp.arange(b)
        W = xp.zeros((n, b))
        W[j0 + cols, cols] = 1.0  # V_0[:, J] = I[:, J]
        nxt = xp.empty_like(W)
        for k in range(1, K + 1):
            mix_into(W, nxt)
            W, nxt = nxt, W
            dk = W[j0 + cols, cols]
            if bool((dk <= 0).any()):
                i = j0 + int(xp.flatnonzero(dk <= 0)[0])
                raise ValueError(
                    f"[A^{k}]_{i}{i} = 0 (node {i}): D_{k} of Pull-Diag is not invertible; "
                    "give every node a self loop"
                )
            zk[k - 1] += W @ (Z2[j0:j0 + b] / (n * dk)[:, None])
    errors = xp.empty(K + 1)
    errors[0] = xp.linalg.norm(Z2 - mean)
    if K:
        errors[1:] = xp.linalg.norm((zk - mean).reshape(K, -1), axis=1)
    final = zk[-1] if K else Z2
    return ConsensusResult(errors=errors, z=final.reshape(Z.shape).copy(), average=mean.reshape(Z.shape[1:]))
