"""Standard directed and undirected networks as :class:`~rowstoch_fast.MixingMatrix` objects.

Every builder works in O(nnz) (vectorised NumPy), so ``exponential(2**20)``
takes seconds. Unless stated otherwise the weights follow the paper's
in-degree rule ``a_ij = 1 / (1 + d_i^in)`` over the in-neighbours and the self
loop (Section 2.1). Every builder also takes ``stochastic="column"``: the same
graph with out-degree weights (sender ``j`` gives ``1 / (1 + d_j^out)`` to
itself and to each out-neighbour), the column-stochastic ``C`` of push-based
methods.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import scipy.sparse as sp

from ._checks import (check_bool, check_choice, check_int, check_positive_float, did_you_mean, make_rng,
                      require_memory)
from .errors import UsageError
from .mixing import DEGREE_BUILD_BYTES_PER_ENTRY, STOCHASTIC, MixingMatrix, metropolis_weights, out_degree_weights

__all__ = [
    "exponential",
    "ring",
    "grid",
    "torus",
    "geometric",
    "nearest_neighbor",
    "erdos_renyi",
    "complete",
    "star",
    "paper_graphs",
    "paper_ring",
    "by_name",
    "NAMES",
    "DIRECTED_NAMES",
    "PAPER_NAMES",
    "PAPER_WEIGHTS",
]

#: The most nodes a generator takes: beyond it the nodes' indices overflow int64 before the memory check refuses
#: the network (helper 218: ``ring(2**63, directed=False)`` raised "Python int too large to convert to C long"),
#: and no machine holds such a network.
MAX_NODES = 2**62

_MAX_TRIES = 100


#: ``weights=`` of every builder: the paper's in-degree rule, or Metropolis-Hastings (undirected graphs).
WEIGHTS = ("in-degree", "metropolis")


def _both_kinds(builder):
    """Give ``builder`` the keywords ``stochastic="row"|"column"`` (column: out-degree weights, same graph) and
    ``weights="in-degree"|"metropolis"`` (metropolis: the doubly stochastic W of an undirected graph)."""
    @functools.wraps(builder)
    def build(*args, stochastic="row", weights="in-degree", **kwargs):
        check_choice(stochastic, "stochastic", STOCHASTIC, f"stochastic must be 'row' or 'column', got {stochastic!r}")
        check_choice(weights, "weights", WEIGHTS)
        if weights == "metropolis" and stochastic != "row":
            raise ValueError("weights='metropolis' is doubly stochastic (both row and column sums are 1): drop "
                             "stochastic='column'")
        A = builder(*args, **kwargs)
        if weights == "metropolis":
            try:
                return metropolis_weights(A)
            except ValueError as exc:
                raise ValueError(f"{builder.__name__}: {exc} (pass directed=False where the builder takes it)") \
                    from None
        return out_degree_weights(A) if stochastic == "column" else A

    sig = inspect.signature(builder)  # (help(), IDEs and Sphinx showed the builder's own signature only)
    extra = [inspect.Parameter("stochastic", inspect.Parameter.KEYWORD_ONLY, default="row"),
             inspect.Parameter("weights", inspect.Parameter.KEYWORD_ONLY, default="in-degree")]
    build.__signature__ = sig.replace(parameters=list(sig.parameters.values()) + extra)
    build.__doc__ = (builder.__doc__ or "") + (
        "\n    With ``stochastic=\"column\"`` the same graph with out-degree weights (column-stochastic); with\n"
        "    ``weights=\"metropolis\"`` (undirected graphs) its doubly stochastic Metropolis-Hastings matrix\n"
        "    (:func:`~rowstoch_fast.mixing.metropolis_weights`).\n")
    return build


def _check_directed(directed, name):
    if not isinstance(directed, (bool, np.bool_)):
        raise TypeError(f"{name}: directed must be True or False, got {directed!r}")
    return bool(directed)


def _reserve(entries, what):
    """Fail at once (MemoryError) when a network of about ``entries`` weights cannot be built here."""
    require_memory(float(entries) * DEGREE_BUILD_BYTES_PER_ENTRY, what)


def _in_degree(n, src, dst, **kw):
    """MixingMatrix with a_ij = 1/(1 + d_i^in) for edges j -> i (src -> dst), self loops added."""
    return MixingMatrix.from_edges(n, np.stack([src, dst], axis=1), "in-degree", **kw)


#: Bytes a weight of a circulant digraph takes while :func:`_circulant` writes it (its columns, their sort, the
#: weights).
CIRCULANT_BYTES = 24.0


def _circulant(n, hops, what):
    """In-degree weights on the circulant digraph where node ``i`` hears from itself and ``i - h (mod n)``.

    ``hops`` are distinct offsets in ``1 .. n-1``, so every row holds ``1 + len(hops)`` distinct columns and
    the weights are ``1 / (1 + len(hops))``. The CSR is written directly, rows sorted, in O(nnz) memory
    (about 24 bytes per weight, against ~140 through an edge list); it equals what
    :meth:`MixingMatrix.from_edges` builds from the same edges, bit for bit (tested).
    """
    width = hops.size + 1
    nnz = n * width
    require_memory(nnz * CIRCULANT_BYTES, what)
    itype = np.int32 if nnz < 2**31 else np.int64
    offsets = np.concatenate([[0], hops]).astype(itype)
    cols = np.empty((n, width), dtype=itype)
    np.subtract(np.arange(n, dtype=itype)[:, None], offsets[None, :], out=cols)  # one contiguous pass
    for c, h in enumerate(hops.tolist(), start=1):
        cols[:h, c] += n  # rows i < h wrap around (2n entries in all)
    cols.sort(axis=1)
    indptr = np.arange(0, nnz + 1, width, dtype=itype)
    data = np.full(nnz, 1.0 / width)
    return MixingMatrix._from_valid_csr(indptr, cols.reshape(-1), data, n)


@_both_kinds
def exponential(n, directed=True):
    """The paper's directed exponential graph: node ``i`` sends to ``(i + 2^k) mod n`` for ``2^k < n``.

    ``directed=False``: the undirected exponential graph, ``i`` and ``(i +- 2^k) mod n`` linked both ways.

    With in-degree weights every row and column holds ``1 + floor(log2(n-1)) + 1``
    equal weights, so ``A`` is doubly stochastic and ``kappa = 1``. Built directly
    in O(nnz) (``exponential(2**22)`` in seconds).

    Examples
    --------
    >>> A = exponential(16)
    >>> A.nnz, round(A.metrics().beta, 6)
    (80, 0.6)
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    hops = 1 << np.arange(max(n - 1, 1).bit_length(), dtype=np.int64)
    hops = hops[hops < n]
    if not _check_directed(directed, "exponential"):
        hops = np.unique(np.concatenate([hops, n - hops]))
    return _circulant(n, hops, f"exponential({n})")


@_both_kinds
def ring(n, directed=True):
    """Directed ring: node ``i`` sends to ``i + 1 (mod n)``; ``a_ii = a_i,i-1 = 1/2``.

    ``directed=False``: the undirected ring, ``i`` linked both ways to ``i +- 1``
    (weights ``1/3``; ``weights="metropolis"`` gives the same doubly stochastic matrix).

    Examples
    --------
    >>> ring(3).toarray()
    array([[0.5, 0. , 0.5],
           [0.5, 0.5, 0. ],
           [0. , 0.5, 0.5]])
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    hops = np.arange(1, min(n, 2), dtype=np.int64)
    if not _check_directed(directed, "ring"):
        hops = np.unique(np.concatenate([hops, n - hops]))
    return _circulant(n, hops, f"ring({n})")


def _undirected(n, u, v):
    return np.concatenate([u, v]), np.concatenate([v, u])


@_both_kinds
def grid(rows, cols=None):
    """Undirected ``rows x cols`` grid (4-neighbour), in-degree weights. Both sides are given (``grid(4, 4)``:
    16 nodes); :func:`by_name` (``by_name("grid", 16)``) builds the square grid of ``n`` nodes, as ``--topology
    grid --n 16`` does.

    Examples
    --------
    >>> grid(2, 2).toarray()[0]
    array([0.33333333, 0.33333333, 0.33333333, 0.        ])
    """
    _both_sides(rows, cols, "grid")
    rows = check_int(rows, "rows", minimum=1)
    cols = check_int(cols, "cols", minimum=1)
    _reserve(5 * rows * cols, f"grid({rows}, {cols})")
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return _in_degree(rows * cols, *_undirected(rows * cols, u, v))


@_both_kinds
def torus(rows, cols=None):
    """Undirected ``rows x cols`` torus: the grid with its rows and columns wrapped around, in-degree weights
    (every node has 4 neighbours where ``rows, cols >= 3``, so the matrix is doubly stochastic). Both sides are
    given, as for :func:`grid` (``by_name("torus", n)``: the square torus of ``n`` nodes).

    Examples
    --------
    >>> torus(3, 3).toarray()[0].round(2).tolist()
    [0.2, 0.2, 0.2, 0.2, 0.0, 0.0, 0.2, 0.0, 0.0]
    """
    _both_sides(rows, cols, "torus")
    rows = check_int(rows, "rows", minimum=1)
    cols = check_int(cols, "cols", minimum=1)
    _reserve(5 * rows * cols, f"torus({rows}, {cols})")
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    u = np.concatenate([idx.ravel(), idx.ravel()])
    v = np.concatenate([np.roll(idx, -1, axis=1).ravel(), np.roll(idx, -1, axis=0).ravel()])
    keep = u != v  # a side of length 1 wraps onto itself
    return _in_degree(rows * cols, *_undirected(rows * cols, u[keep], v[keep]))


def _both_sides(rows, cols, name):
    """Refuse ``name(rows)`` without ``cols`` in words that say what the sides are and where a grid of ``n``
    nodes is built (helper 246: ``grid(10)``, as ``--topology grid --n 10`` reads, had met Python's "missing 1
    required positional argument: 'cols'")."""
    if cols is None:
        raise TypeError(f"{name}(rows, cols) takes both sides of the {name} (e.g. {name}(4, 4): 16 nodes), got "
                        f"{name}({rows!r}); by_name({name!r}, n) builds the square {name} of n nodes, as --topology "
                        f"{name} --n n does")


def _in_degree_if_connected(n, src, dst):
    """The in-degree matrix of these edges, or None when the graph is not strongly connected (the matrix's own
    O(nnz) validation decides: no separate COO graph, no second build)."""
    try:
        return _in_degree(n, src, dst)
    except ValueError as exc:
        if "strongly connected" in str(exc):
            return None
        raise


@_both_kinds
def geometric(n, radius, seed=None):
    """Random geometric graph: ``n`` uniform points in the unit square, undirected edges within ``radius``.

    Points are redrawn (from the same generator) until the graph is connected;
    after 100 tries a ValueError asks for a larger radius.

    Examples
    --------
    >>> geometric(50, 0.3, seed=0).n
    50
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    radius = check_positive_float(radius, "radius")
    _reserve(n + min(float(n) * n, float(n) * n * np.pi * min(radius, 2.0) ** 2), f"geometric({n}, radius={radius})")
    rng = make_rng(seed)
    from scipy.spatial import cKDTree  # (here, not at import: 70 ms of every start)

    for _ in range(_MAX_TRIES):
        pts = rng.random((n, 2))
        pairs = cKDTree(pts).query_pairs(radius, output_type="ndarray").astype(np.int64)
        src, dst = _undirected(n, pairs[:, 0], pairs[:, 1])
        A = _in_degree_if_connected(n, src, dst)
        if A is not None:
            return A
    raise ValueError(f"geometric(n={n}, radius={radius}) stayed disconnected in {_MAX_TRIES} draws; use a larger radius")


@_both_kinds
def nearest_neighbor(n, k=3, seed=None):
    """Each of ``n`` uniform random points links both ways to its ``k`` nearest others.

    Redrawn until connected (as :func:`geometric`). This is the paper's
    nearest-neighbour construction on random positions.

    Examples
    --------
    >>> nearest_neighbor(30, 3, seed=1).n
    30
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    k = check_int(k, "k", minimum=1)
    if k >= n:
        raise ValueError(f"k must be < n, got k={k} with n={n}")
    _reserve(n * (2 * k + 3), f"nearest_neighbor({n}, k={k})")
    rng = make_rng(seed)
    from scipy.spatial import cKDTree

    for _ in range(_MAX_TRIES):
        pts = rng.random((n, 2))
        _, nb = cKDTree(pts).query(pts, k=k + 1)
        u = np.repeat(np.arange(n, dtype=np.int64), k)
        v = nb[:, 1:].ravel().astype(np.int64)
        src, dst = _undirected(n, u, v)
        A = _in_degree_if_connected(n, src, dst)
        if A is not None:
            return A
    raise ValueError(f"nearest_neighbor(n={n}, k={k}) stayed disconnected in {_MAX_TRIES} draws; use a larger k")


def _edge_probability(n):
    """The edge probability of :func:`erdos_renyi` where none is given (``--topology erdos_renyi``):
    ``min(1, 2 ln n / n)``."""
    return min(1.0, 2.0 * np.log(max(n, 2)) / n)


@_both_kinds
def erdos_renyi(n, p=None, seed=None, directed=True):
    """Directed Erdos-Renyi graph (each ordered pair ``j -> i`` with probability ``p``), in-degree weights.
    ``p=None``: the command line's ``min(1, 2 ln n / n)``, twice the threshold of
    connectivity, ``ln n / n``.

    ``directed=False``: the undirected Erdos-Renyi graph (each unordered pair with probability ``p``), redrawn
    until connected as :func:`geometric` is.

    If the draw is not strongly connected it is repaired by linking its strongly
    connected components in a cycle (one random edge between consecutive
    components), so the result always satisfies Assumption 1. For n > 4096 the
    matrix is built first and its own CSR gives the components (O(nnz), no
    second graph), so a repaired large graph differs from what versions before
    2026-11-26 drew (connected draws, and every n <= 4096, are unchanged).

    Examples
    --------
    >>> erdos_renyi(40, 0.05, seed=3).n
    40
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    p = check_positive_float(_edge_probability(n) if p is None else p, "p")
    if p > 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    _reserve(n + p * n * (n - 1), f"erdos_renyi({n}, p={p})")
    rng = make_rng(seed)
    if not _check_directed(directed, "erdos_renyi"):
        for _ in range(_MAX_TRIES):
            m = rng.binomial(n * (n - 1) // 2, p)
            a, b = rng.integers(0, n, m), rng.integers(1, n, m)
            b = (a + b) % n
            A = _in_degree_if_connected(n, *_undirected(n, a.astype(np.int64), b.astype(np.int64)))
            if A is not None:
                return A
        raise ValueError(f"erdos_renyi(n={n}, p={p}, directed=False) stayed disconnected in {_MAX_TRIES} draws; "
                         "use a larger p")
    if n <= 4096:
        mask = rng.random((n, n)) < p
        np.fill_diagonal(mask, False)
        src, dst = np.nonzero(mask)
    else:  # O(nnz): draw the edge count, then endpoints (duplicates merged)
        m = rng.binomial(n * (n - 1), p)
        src = rng.integers(0, n, m)
        dst = (src + rng.integers(1, n, m)) % n
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    from scipy.sparse import csgraph  # (here, not at import: it brings scipy.sparse.linalg and scipy.linalg)

    if n > 4096:  # the matrix itself first (no COO detour): its CSR is the graph whose components we need
        A = MixingMatrix.from_edges(n, np.stack([src, dst], axis=1), "in-degree", validate=False)
        ncomp, labels = csgraph.connected_components(A.csr, directed=True, connection="strong")
        if ncomp == 1:
            return A  # strongly connected, self loops, rows summing to 1 by construction: valid
    else:  # small n: the components numbered as they always were (the repair's draws, and so the graph, depend
        # on that numbering; larger graphs are numbered from the matrix's in-neighbour lists since 2026-11-26)
        g = sp.coo_array((np.ones(len(src)), (src, dst)), shape=(n, n))
        ncomp, labels = csgraph.connected_components(g, directed=True, connection="strong")
    if ncomp > 1:
        # one random node of each component, in component order: the draws of rng.choice(component) one
        # component after another, made in one vectorised call (same numbers, O(n) instead of O(n ncomp))
        members = np.argsort(labels, kind="stable")
        sizes = np.bincount(labels, minlength=ncomp)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        reps = members[starts + rng.integers(0, sizes)]
        extra_src = np.asarray(reps, dtype=np.int64)
        extra_dst = np.roll(extra_src, -1)
        src, dst = np.concatenate([src, extra_src]), np.concatenate([dst, extra_dst])
    return _in_degree(n, src, dst)


@_both_kinds
def complete(n):
    """Complete graph with self loops: ``A = 1 1^T / n`` (``beta = 0``, ``kappa = 1``).

    Examples
    --------
    >>> complete(2).toarray()
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    require_memory(float(n) * n * CIRCULANT_BYTES, f"complete({n})")  # (_circulant's check, before its hops)
    return _circulant(n, np.arange(1, n, dtype=np.int64), f"complete({n})")  # (the circulant of every hop, written
    # directly: through an edge list it had peaked at about 82 bytes a weight where 48 were checked, and a second
    # check counted the edges twice, refusing complete(8000) that fits; helper 231)


@_both_kinds
def star(n):
    """Undirected star: hub 0 exchanges with every leaf; in-degree weights.

    Examples
    --------
    >>> star(3).toarray()
    array([[0.33333333, 0.33333333, 0.33333333],
           [0.5       , 0.5       , 0.        ],
           [0.5       , 0.        , 0.5       ]])
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    _reserve(3 * n, f"star({n})")
    leaves = np.arange(1, n, dtype=np.int64)
    return _in_degree(n, *_undirected(n, np.zeros_like(leaves), leaves))


# ---------------------------------------------------------------------- the paper's 16-node graphs
def paper_graphs():
    """The paper's four 16-node test matrices (Appendix E.1), rebuilt as the authors' code built them.

    Weights are drawn from NumPy's legacy generator in the authors' order
    (``np.random.RandomState(seed)``, kept local), then rows are normalised
    (the recipe of each: :func:`paper_ring`, ``_paper_grid``, ``_paper_geometric``,
    ``_paper_nearest_neighbor``). Against the metrics the paper prints:

    ================= ============== ============= ==================
    graph             kappa printed  beta printed  kappa, beta here
    ================= ============== ============= ==================
    ring              2              0.924         2.000, 0.981
    grid              6.25           0.887         6.2493, 0.8879
    geometric         3              0.916         3.000, 0.9156
    nearest neighbour 1.74           0.907         1.7396, 0.9065
    ================= ============== ============= ==================

    The ring's published construction gives beta 0.981, not the 0.924 printed; its diagonals
    ``[A^k]_ii`` dip to about 2.5e-5 around k = 16 (1 / min diag about 39,000 against
    1 / min(pi) about 24.5): the instability that multi-step gossip removes.

    Returns
    -------
    dict
        Keys ``"ring"``, ``"grid"``, ``"geometric"``, ``"nearest_neighbor"``.

    Examples
    --------
    >>> g = paper_graphs()
    >>> sorted(g)
    ['geometric', 'grid', 'nearest_neighbor', 'ring']
    >>> round(g["grid"].metrics().kappa, 4)
    6.2493
    """
    return _PaperGraphs({
        "ring": paper_ring(16),
        "grid": MixingMatrix(_paper_grid(), normalize=True),
        "geometric": MixingMatrix(_paper_geometric(), normalize=True),
        "nearest_neighbor": MixingMatrix(_paper_nearest_neighbor(), normalize=True),
    })


class _PaperGraphs(dict):
    """:func:`paper_graphs`'s dict, whose missing key names the four (a bare ``KeyError: 'rign'`` had said nothing
    of them, helper 246)."""

    def __missing__(self, key):
        from ._checks import did_you_mean

        raise KeyError(f"{key!r} is not one of the paper's graphs{did_you_mean(str(key), list(self))}: "
                       f"{', '.join(self)}")


def paper_ring(n=16):
    """The paper's directed ring (Appendix E.1, Figure 2's second half) on ``n`` nodes: node ``i`` sends to
    ``i + 1 (mod n)`` with weight 1/2, and node ``m = n // 2`` also hears node 0, its three weights 1/3 each.

    At ``n = 16`` this is :func:`paper_graphs`'s ``"ring"`` (kappa 2); ``n = 1`` is the single node.

    Parameters
    ----------
    n : int
        1, or at least 4 (on 2 or 3 nodes the chord is a link of the ring itself).

    Returns
    -------
    MixingMatrix

    Examples
    --------
    >>> round(paper_ring(5).metrics().kappa, 6)
    2.0
    """
    n = check_int(n, "n", minimum=1, maximum=MAX_NODES)
    if n in (2, 3):
        raise ValueError(f"paper_ring: n must be 1 or at least 4 (on {n} nodes the chord 0 -> {n // 2} is a link "
                         f"of the ring itself), got {n}")
    if n == 1:
        return MixingMatrix(np.ones((1, 1)))
    require_memory(2 * n * 24.0, f"paper_ring({n})")
    import scipy.sparse as sp

    i = np.arange(n)
    rows, cols = np.concatenate([i, i, [n // 2]]), np.concatenate([i, (i - 1) % n, [0]])
    vals = np.full(rows.size, 0.5)
    vals[(rows == n // 2)] = 1.0 / 3.0  # row m hears m - 1, itself and node 0
    return MixingMatrix(sp.csr_matrix((vals, (rows, cols)), shape=(n, n)))


def _paper_ring(n=16):
    B = np.eye(n) / 2
    for i in range(n - 1):
        B[i, i + 1] = 0.5
    B[n - 1, 0] = 0.5
    m = n // 2
    B[0, m] = B[m - 1, m] = B[m, m] = 1.0 / 3.0
    return B.T


def _paper_grid():
    rs = np.random.RandomState(1)
    A = np.zeros((16, 16))
    for r in range(4):
        for c in range(4):
            v = 4 * r + c
            A[v, v] = rs.randint(1, 11)
            if c < 3:
                A[v, v + 1] = rs.randint(1, 11)
                A[v + 1, v] = rs.randint(1, 11)
            if r < 3:
                A[v, v + 4] = rs.randint(1, 11)
                A[v + 4, v] = rs.randint(1, 11)
    return A


def _nx_graph_edges(edge_list, nodes=()):
    """Edges in the order networkx's ``Graph.edges()`` yields them (adjacency insertion order)."""
    adj = {u: {} for u in nodes}
    for u, v in edge_list:
        adj.setdefault(u, {})
        adj.setdefault(v, {})
        adj[u][v] = adj[v][u] = None
    seen, out = set(), []
    for u, nbrs in adj.items():
        out.extend((u, v) for v in nbrs if v not in seen)
        seen.add(u)
    return out


def _paper_geometric():
    pts = np.array([(1, 2), (3, 5), (5, 1), (6, 6), (8, 3), (2, 8), (9, 9), (4, 4),
                    (7, 2), (1, 7), (6, 9), (3, 1), (9, 5), (5, 5), (7, 7), (2, 3)], dtype=float)
    n = len(pts)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if np.linalg.norm(pts[i] - pts[j]) <= 3]
    rs = np.random.RandomState(48)
    A = np.zeros((n, n))
    for i, j in _nx_graph_edges(pairs, nodes=range(n)):  # nodes 0..n-1 added first
        A[i, j] = A[j, i] = rs.choice([1, 2])
    for i in range(n):
        A[i, i] = rs.choice([1, 2])
    return A


def _paper_nearest_neighbor():
    pos = np.array([(0, 0), (1, 2), (3, 1), (5, 4), (7, 3), (8, 7), (2, 6), (4, 5),
                    (6, 6), (9, 1), (11, 3), (13, 2), (2, 9), (6, 9), (8, 10), (12, 8)], dtype=float)
    n = len(pos)
    succ = {u: {} for u in range(n)}  # a DiGraph's successor dicts, nodes added first
    for u in range(n):
        dist = np.linalg.norm(pos - pos[u], axis=1)
        others = [v for v in np.argsort(dist, kind="stable") if v != u][:3]
        for v in others:
            succ[u][int(v)] = None
            succ[int(v)][u] = None
        succ[u][u] = None
    rs = np.random.RandomState(42)
    A = np.zeros((n, n))
    for u in range(n):
        for v in succ[u]:
            A[u, v] = rs.choice([1, 2])
    for i in range(n):
        A[i, i] = rs.choice([1, 2])
    return A


#: The topologies :func:`by_name` builds (``rowstoch --topology``).
NAMES = ("exponential", "ring", "grid", "torus", "geometric", "nearest_neighbor", "erdos_renyi", "complete", "star")
#: The topologies whose default form is directed (``--undirected`` links their edges both ways).
DIRECTED_NAMES = ("exponential", "ring", "erdos_renyi")
#: The topologies :func:`by_name` draws (``seed`` picks the draw).
SEEDED_NAMES = ("geometric", "nearest_neighbor", "erdos_renyi")
#: The paper's 16-node graphs by name (:func:`paper_graphs`).
PAPER_NAMES = ("paper-ring", "paper-grid", "paper-geometric", "paper-nearest_neighbor")
#: How :func:`paper_graphs` weights each of them, in a caption's words (the authors' recipe: shared/paper_graphs.md;
#: the captions had said "in-degree weights" for all four).
PAPER_WEIGHTS = {"paper-ring": "in-degree weights",
                 "paper-grid": "random integer weights 1-10, rows normalized",
                 "paper-geometric": "random weights 1 or 2, rows normalized",
                 "paper-nearest_neighbor": "random weights 1 or 2, rows normalized"}


def _too_few():
    raise ValueError("it links each node to its nearest others and needs --n 2 or more")


def by_name(name, n, seed=0, undirected=False, weights="in-degree"):
    """The topology ``name`` (one of :data:`NAMES` or :data:`PAPER_NAMES`) on ``n`` nodes, with the command
    line's defaults for the extra parameters (radius, neighbours, edge probability); ``undirected`` links the
    edges of the directed ones both ways, ``weights="metropolis"`` gives an undirected graph's doubly
    stochastic W. A bad name or size raises :class:`~rowstoch_fast.errors.UsageError` naming it (its
    messages name the command line's options, which TOML files and keyword arguments share).

    Examples
    --------
    >>> by_name("ring", 4).n
    4
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a topology's name (a str), got {type(name).__name__}")
    undirected = check_bool(undirected, "undirected")  # (a string "False" had linked the edges both ways)
    kw = {} if check_choice(weights, "weights", WEIGHTS) == "in-degree" else {"weights": weights}
    if name.startswith("paper-") and name not in PAPER_NAMES:
        raise UsageError(f"unknown paper graph {name!r}; choose from {', '.join(PAPER_NAMES)}")
    if name not in NAMES + PAPER_NAMES:
        raise UsageError(f"unknown topology {name!r}{did_you_mean(name, NAMES + PAPER_NAMES)}; choose from "
                         f"{', '.join(NAMES + PAPER_NAMES)}")
    try:  # (helper 199: grid's n = 16.0 and True had built a 4 x 4 grid and one node, -4 failed in a square root)
        n = check_int(n, "--n", minimum=1)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if name.startswith("paper-"):
        key = name[len("paper-"):]
        graphs = paper_graphs()
        if undirected or kw:
            raise UsageError(f"--topology {name} is the paper's own matrix: drop --undirected and --weights")
        if n != graphs[key].n:  # (helper 199: by_name("paper-ring", 5) had returned its 16 nodes, n ignored)
            raise UsageError(f"--topology {name} is the paper's {graphs[key].n}-node graph; it takes no other --n "
                             f"(got {n})")
        return graphs[key]
    if undirected:
        if name in DIRECTED_NAMES:
            kw["directed"] = False
        else:
            raise UsageError(f"--undirected is for {', '.join(DIRECTED_NAMES)}; --topology {name} is "
                             "undirected already")
    if name in ("grid", "torus"):
        side = math.isqrt(n)  # (exact: 10**40 had failed in NumPy's square root)
        if side * side != n:
            raise UsageError(f"--topology {name} needs a square --n, got {n}")
        try:
            return (grid if name == "grid" else torus)(side, side, **kw)
        except ValueError as exc:
            raise UsageError(f"cannot build {name} with n={n}: {exc}".replace(
                " (pass directed=False where the builder takes it)", "")) from exc
    builders = {
        "exponential": lambda: exponential(n, **kw),
        "ring": lambda: ring(n, **kw),
        "geometric": lambda: geometric(n, radius=min(1.5, 2.0 * np.sqrt(np.log(max(n, 2)) / n)), seed=seed,
                                                **kw),
        "nearest_neighbor": lambda: nearest_neighbor(n, min(3, n - 1), seed=seed, **kw) if n > 1 else
        _too_few(),
        "erdos_renyi": lambda: erdos_renyi(n, seed=seed, **kw),
        "complete": lambda: complete(n, **kw),
        "star": lambda: star(n, **kw),
    }
    try:
        return builders[name]()
    except (ValueError, TypeError) as exc:  # (the Python keyword named as the option that sets it)
        text = str(exc).replace("pass directed=False where the builder takes it", "add --undirected")
        raise UsageError(f"cannot build {name} with n={n}: {text}") from exc
