"""Time-varying weights: a periodic :class:`Schedule` of matrices, and :func:`one_peer_exponential`.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

import numpy as np
import scipy.sparse as sp

from .._checks import check_choice, check_int, require_memory
from .._hashing import MAX_T
from ..mixing import BUILD_BYTES_PER_ENTRY, MixingMatrix, _check_primitive, graph_period
from ._rounds import _unconnected
from .base import Network


class Schedule(Network):
    """A periodic sequence of matrices: ``A_t = matrices[t % m]`` (every gossip round of iteration ``t``).

    Parameters
    ----------
    matrices : sequence of MixingMatrix (or what MixingMatrix accepts)
        Same number of nodes, same kind (row- or column-stochastic).
    """

    layer = "schedule"
    order = 0
    acts_on = "matrices"

    def __init__(self, matrices):
        if isinstance(matrices, (str, bytes)) or not hasattr(matrices, "__iter__"):
            raise TypeError(f"matrices must be a sequence of mixing matrices, got {type(matrices).__name__}")
        if isinstance(matrices, (Mapping, Set)):  # (a dict's keys had been read as the matrices: a 1-node network)
            raise TypeError(f"matrices must be a sequence of mixing matrices in their order, got a "
                            f"{type(matrices).__name__}" + (" (pass list(d.values()))" if isinstance(matrices, Mapping)
                                                             else ""))
        matrices = list(matrices)
        self._validated = all(isinstance(m, MixingMatrix) for m in matrices)  # checked as a whole network
        mats = []
        for k, m in enumerate(matrices):
            if isinstance(m, Schedule):
                raise TypeError(f"matrices[{k}] is a Schedule: a Schedule takes matrices; list its matrices in "
                                "this one")
            if isinstance(m, Network):  # (a layer's rounds vary on their own: it goes over the schedule, not in it)
                raise TypeError(f"matrices[{k}] is a {type(m).__name__} network: a Schedule takes matrices; put the "
                                f"layer over the schedule instead, e.g. {type(m).__name__}(Schedule([...]), ...)")
            try:
                mats.append(m if isinstance(m, MixingMatrix) else _unconnected(m))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"matrices[{k}]: {exc}") from None
        if not mats:
            raise ValueError("Schedule needs at least one matrix")
        if len({m.n for m in mats}) > 1:
            raise ValueError(f"the matrices of a Schedule must have the same n, got {sorted({m.n for m in mats})}")
        kinds = {m.stochastic for m in mats}
        if len(kinds) > 1:
            raise ValueError("the matrices of a Schedule must all be row- or all column-stochastic")
        dtypes = {m.dtype for m in mats}
        if len(dtypes) > 1:  # a float32 round in a float64 run mixed with rounded weights
            raise TypeError(f"the matrices of a Schedule must have one dtype, got {', '.join(sorted(map(str, dtypes)))}"
                            "; convert them with .astype (mixed precision is not supported)")
        if not self._validated or len(mats) > 1:  # one validated matrix is strongly connected on its own
            _check_jointly_connected(mats)
            _check_mixes(mats, next(iter(kinds)))
        self.matrices = mats
        self.n = mats[0].n
        self.stochastic = kinds.pop()

    def matrix(self, t, r=0):
        return self.matrices[check_int(t, "t", minimum=0, maximum=MAX_T) % len(self.matrices)]

    @property
    def dtype(self):
        return self.matrices[0].dtype

    @property
    def static(self):
        return self.matrices[0] if len(self.matrices) == 1 and self._validated else None

    def plan(self, t):
        M = self.matrix(t)
        return (lambda r: M), 0, 0.0, None, None

    def map(self, f):
        out = Schedule([f(m) for m in self.matrices])
        out._validated = self._validated
        return out

    def __repr__(self):
        return f"Schedule({len(self.matrices)} matrices, n={self.n}, stochastic={self.stochastic!r})"

    @classmethod
    def examples(cls, base):
        """A period of two over a static ``base``: its own rounds, then one that sends nothing (the identity)."""
        if not isinstance(base, MixingMatrix):
            return {}  # (a schedule holds matrices: it is the innermost layer)
        idle = sp.identity(base.n, dtype=base.dtype, format="csr")
        stochastic = "doubly" if base.doubly else base.stochastic
        return {"schedule": cls([base, _unconnected(idle, stochastic)])}


def _check_jointly_connected(mats):
    """A ValueError unless the union of the matrices' graphs is strongly connected: over one period of a
    Schedule every node must hear, through some chain of messages, from every other (Assumption 1 for a
    time-varying network; ``Schedule([I, I])`` never communicated). One pass over the entries."""
    from scipy.sparse import csgraph

    union = mats[0].csr.astype(bool).astype(np.int8)
    for m in mats[1:]:
        union = union + m.csr.astype(bool).astype(np.int8)
    count, labels = csgraph.connected_components(union, directed=True, connection="strong")
    if count > 1:
        members = np.flatnonzero(labels == labels[0])
        outside = int(np.flatnonzero(labels != labels[0])[0])
        raise ValueError(f"the matrices of a Schedule must be jointly strongly connected over its period (their "
                         f"union has {count} strongly connected components): over its {len(mats)} matrices node "
                         f"{outside} or node {int(members[0])} never hears from the other")


#: The most entries the pattern of a Schedule's product over its period may reach while it is checked (beyond, the
#: product is not formed: its matrices without self loops are then taken as they are).
PRODUCT_CHECK_ENTRIES = 10**7


def _check_mixes(mats, kind):
    """A ValueError unless the rounds' matrices, repeated, bring the nodes to agree: one matrix must be primitive, as
    a :class:`MixingMatrix` must (``Schedule([P])`` of a periodic ``P`` had been accepted, the same ``P`` refused by
    MixingMatrix); the product over a period of several must be SIA (its powers tend to a rank-one matrix: one
    closed class of the nodes, aperiodic; ``[P, P]`` is the identity, and a product in which every node copies one
    leader is fine). Every matrix with a positive diagonal makes it so wherever the union is strongly connected
    (checked before): the product is formed only otherwise, and not where its pattern could pass
    :data:`PRODUCT_CHECK_ENTRIES` (bounded before each multiplication)."""
    if all((m.csr.diagonal() > 0).all() for m in mats):
        return
    if len(mats) == 1:
        try:
            _check_primitive(mats[0].csr)
        except ValueError as exc:
            raise ValueError(f"the Schedule's matrix must be primitive, as a MixingMatrix must: {exc}") from None
        return
    n = mats[0].n
    product = None
    for m in mats:  # the pattern of A_m ... A_1
        c = m.csr
        M = sp.csr_array((np.ones(c.nnz), c.indices.copy(), c.indptr.copy()), shape=c.shape)
        if product is not None:
            widest = int(np.diff(product.indptr).max()) if product.nnz else 0
            if min(n * n, M.nnz * widest) > PRODUCT_CHECK_ENTRIES:
                return
            product = M @ product
            product.data[:] = 1.0
        else:
            product = M
    _check_sia(product if kind == "row" else sp.csr_array(product.T), len(mats))


def _check_sia(P, period):
    """A ValueError unless the pattern ``P`` (row ``i``: whom node ``i`` hears from over one period of ``period``
    rounds) has one closed class of nodes and that class is aperiodic."""
    from scipy.sparse.csgraph import connected_components

    n = P.shape[0]
    k, labels = connected_components(P, directed=True, connection="strong")
    rows, cols = np.repeat(np.arange(n), np.diff(P.indptr)), P.indices
    leaving = labels[rows] != labels[cols]
    closed = np.setdiff1d(np.arange(k), labels[rows[leaving]])
    said = f"the product of the Schedule's {period} matrices over its period"
    if closed.size != 1:
        first = [int(np.flatnonzero(labels == c)[0]) for c in closed[:2]]
        raise ValueError(f"{said} leaves {closed.size} groups of nodes that hear only from their own group (nodes "
                         f"{first[0]} and {first[1]} among them): their values never agree")
    members = np.flatnonzero(labels == closed[0])
    cycle = graph_period(sp.csr_array(P[members][:, members])) if members.size > 1 else 1
    if cycle > 1:
        raise ValueError(f"{said} is periodic (its nodes {int(members[0])}, ... hear from one another in cycles of "
                         f"a multiple of {cycle} periods): their values rotate and never agree")


def one_peer_exponential(n, stochastic="row"):
    """The time-varying directed exponential graph of SGP and BlueFog: at iteration ``t`` node ``i`` hears only
    from node ``i - 2^(t mod ceil(log2 n)) (mod n)``, weights 1/2 and 1/2 (one 2-entry row per node).

    Examples
    --------
    >>> net = one_peer_exponential(16)
    >>> len(net.matrices), net.matrix(0).nnz
    (4, 32)
    """
    n = check_int(n, "n", minimum=2)
    check_choice(stochastic, "stochastic", ("row", "column"),
                 f"stochastic must be 'row' or 'column', got {stochastic!r}")
    period = max(1, int(np.ceil(np.log2(n))))
    require_memory(2.0 * n * (16 * period + BUILD_BYTES_PER_ENTRY), f"one_peer_exponential({n}): {period} "
                   f"matrices of {2 * n} weights")  # (each kept, 16 bytes a weight, and one being built: helper 199,
    # 10**9 had met NumPy's "Unable to allocate 7.45 GiB")
    mats = []
    for k in range(period):
        h = (2**k) % n
        i = np.arange(n, dtype=np.int64)
        j = (i - h) % n
        rows = np.concatenate([i, i])
        cols = np.concatenate([i, j])
        M = sp.csr_matrix((np.full(2 * n, 0.5), (rows, cols)), shape=(n, n))
        mats.append(_unconnected(M if stochastic == "row" else M.T.tocsr(), stochastic))
    return Schedule(mats)
