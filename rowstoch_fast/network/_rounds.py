"""The rounds of a network on the host: one round through SciPy (``_mix_entries``), through the compiled pass
(``_compiled_rounds``: ``_core.mix_lossy``), and the round matrices and entries the layers materialise.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..mixing import MixingMatrix


def _mix_entries(csr, weights, X, stochastic):
    """One round: ``csr`` with ``weights`` (zeros where a message was lost; None: the base weights)."""
    X2 = X.reshape(X.shape[0], -1).astype(csr.dtype, copy=False)
    shape = (csr.shape[0], *X.shape[1:])  # (a rectangular csr: Compressed's [own rows; messages])
    if weights is None:
        return (csr @ X2).reshape(shape)
    M = sp.csr_matrix((weights, csr.indices, csr.indptr), shape=csr.shape)
    if stochastic != "row":  # lost mass is lost (column), or kept on the receiver's diagonal (doubly)
        return (M @ X2).reshape(shape)
    # receivers renormalise over what arrived: numerator and denominator from one product (same order), and
    # rows that lost nothing keep the static sums, bit for bit
    changed = _changed_rows(csr, weights)
    Y = csr @ X2
    if changed.size:
        sub = M[changed]
        both = sub @ np.concatenate([X2, np.ones((X2.shape[0], 1), dtype=X2.dtype)], axis=1)
        Y[changed] = both[:, :-1] / both[:, -1:]
    return Y.reshape(shape)


def _row_counts(csr, flags):
    """How many stored entries of each row have ``flags`` set."""
    counts = np.zeros(csr.nnz + 1, dtype=np.int64)
    np.cumsum(flags, out=counts[1:])
    return counts[csr.indptr[1:]] - counts[csr.indptr[:-1]]


def _changed_rows(csr, weights):
    """Rows where some weight differs from the base (a message lost, a node asleep)."""
    return np.flatnonzero(_row_counts(csr, weights != csr.data))


def _materialise(net, csr, weights, t, r):
    """The MixingMatrix a round applies: the base where nothing changed; else the arrived weights, rows that
    changed renormalised (row-stochastic; columns of a lossy column-stochastic network sum to at most 1)."""
    if weights is None:
        return _base_matrix(net.base, t, r) if csr is _base_entries(net.base, t, r)[0] else \
            _round_matrix(csr, net.stochastic)
    data = weights.astype(csr.dtype, copy=True)
    if net.stochastic == "row":
        changed = _changed_rows(csr, weights)
        divisor = np.ones(csr.shape[0], dtype=data.dtype)
        divisor[changed] = np.add.reduceat(data, csr.indptr[:-1])[changed]
        data /= np.repeat(divisor, np.diff(csr.indptr))
    M = sp.csr_matrix((data, csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
    M.eliminate_zeros()  # the lost messages
    return _round_matrix(M, net.stochastic)


def _keep_empty_rows(csr, weights):
    """Row-stochastic rounds: a node that receives nothing this round and has no self loop keeps its value
    (its row becomes e_i, through a diagonal entry added for the round)."""
    empty = np.flatnonzero(_row_counts(csr, weights > 0) == 0)
    return (csr, weights) if empty.size == 0 else _with_diagonal(csr, weights, empty)


def _with_diagonal(csr, weights, nodes, values=None):
    """``csr`` with a diagonal entry added at ``nodes`` (base weight 0, this round's weight 1, or ``values``)."""
    rows = np.concatenate([np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr)), nodes])
    cols = np.concatenate([csr.indices.astype(np.int64), nodes])
    base = np.concatenate([csr.data, np.zeros(len(nodes), dtype=csr.dtype)])
    w = np.concatenate([weights, np.ones(len(nodes), dtype=csr.dtype) if values is None else values])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(csr.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=csr.shape[0]), out=indptr[1:])
    out = sp.csr_matrix((base[order], cols[order], indptr), shape=csr.shape)
    return out, w[order]


def _undirected_entries(csr, weights, gone, asleep=None):
    """A round of the undirected rule (:meth:`Network.undirected`) from ``gone``, the stored entries whose link is
    unused this round (self loops never): their weight moves to the receiver's diagonal (added where a row has
    none), so the round stays symmetric and doubly stochastic; a sleeping receiver's row (``asleep``) is
    ``e_i``."""
    asleep = np.zeros(csr.shape[0], dtype=bool) if asleep is None else asleep
    if not gone.any() and not asleep.any():
        return csr, weights
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    base = csr.data if weights is None else weights
    w = np.where(gone, 0.0, base).astype(csr.dtype)
    unused = np.bincount(rows, weights=np.where(gone, base, 0.0), minlength=csr.shape[0]).astype(csr.dtype)
    unused[asleep] = 0.0
    diagonal = rows == csr.indices
    w[asleep[rows] & diagonal] = 1.0
    w[diagonal] += unused[rows[diagonal]]
    has_loop = np.zeros(csr.shape[0], dtype=bool)
    has_loop[rows[diagonal]] = True
    missing = np.flatnonzero(~has_loop & ((unused != 0) | asleep))
    if missing.size:
        return _with_diagonal(csr, w, missing, np.where(asleep[missing], 1.0, unused[missing]).astype(csr.dtype))
    return csr, w


def _compiled_rounds(plan, X, t, rounds, out, renormalise, symmetric=False):
    """The rounds of iteration ``t`` through ``_core.mix_lossy`` (losses hashed in the CSR pass, rows
    renormalised there, sleeping nodes keep their values), ping-ponging buffers, the last round into ``out``
    (``X`` and ``out`` checked by :meth:`Network.mix`)."""
    from .. import _core

    matrix_of, seed, p, awake, chain = plan
    Y = X.reshape(X.shape[0], -1)
    for r in range(rounds):
        c = matrix_of(r).csr
        dst = out.reshape(Y.shape) if (r == rounds - 1 and out is not None) else np.empty_like(Y)
        bad = None if chain is None else chain.gates(c.indptr, c.indices, t, symmetric=symmetric)
        _core.mix_lossy(c.indptr, c.indices, c.data, Y, dst, seed=seed, t=t, r=r, p=p, renormalise=renormalise,
                        awake=awake, bad=bad, check_indices=False, symmetric=symmetric)
        Y = dst
    return out if out is not None else Y.reshape(X.shape)


def _base_matrix(base, t, r):
    return base if isinstance(base, MixingMatrix) else base.matrix(t, r)


def _base_entries(base, t, r):
    if isinstance(base, MixingMatrix):
        return base.csr, None
    return base._entries(t, r)


def _unconnected(M, stochastic="row"):
    """A MixingMatrix that may be disconnected on its own (a schedule needs connectivity only over its period):
    the sums are checked, not the strong connectivity; a complex matrix (its imaginary parts had been dropped, with
    SciPy's ComplexWarning alone) or one of no node is refused, as MixingMatrix refuses them."""
    dtype = getattr(M, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(M).dtype
        except (ValueError, TypeError):  # (ragged rows: the reader below says it)
            pass
    if dtype is not None and np.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"W must be real, got complex dtype {dtype}")
    csr = sp.csr_matrix(M, dtype=np.float64)
    if 0 in csr.shape:
        raise ValueError(f"W must have at least one node, got shape {csr.shape}")
    sums = np.asarray(csr.sum(axis=1 if stochastic == "row" else 0)).ravel()
    if csr.shape[0] != csr.shape[1] or (csr.data < 0).any() or not np.allclose(sums, 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"every matrix of a Schedule must be square, non-negative and {stochastic}-stochastic"
                         + (" (a column-stochastic schedule takes MixingMatrix(C, stochastic='column') for each "
                            "matrix)" if stochastic == "row" and csr.shape[0] == csr.shape[1]
                            and np.allclose(np.asarray(csr.sum(axis=0)).ravel(), 1.0, rtol=0, atol=1e-12) else ""))
    csr.sort_indices()
    return _round_matrix(csr, stochastic)


def _round_matrix(csr, stochastic):
    """The matrix of one gossip round: no connectivity check (a round's graph need not be connected on its
    own; the network is, over time) and, under loss, columns may sum to less than 1."""
    csr = sp.csr_matrix(csr)
    return MixingMatrix._from_valid_csr(csr.indptr, csr.indices, csr.data, csr.shape[0],
                                        "row" if stochastic == "doubly" else stochastic, doubly=stochastic == "doubly")
