"""The Pull-Diag diagonal tracker ``D_k = Diag(A^k)`` (eq. 5, 7 and 12 of the paper).

The exact tracker follows ``V_{k+1} = A V_k`` as the paper does, but keeps only
the diagonal, works in column blocks (memory ``O(n * block)``), stops at the
step where ``diag(A^k)`` provably equals ``pi`` to float64 resolution, and is
computed once per matrix and per stride (cached on the :class:`MixingMatrix`).

Why the stopping step is safe: with ``M = A^k - 1 pi^T`` and ``||M||_pi <= beta^k``
(Section 2.2), ``|[A^k]_ii - pi_i| = |e_i^T Pi^{-1/2} (Pi^{1/2} M Pi^{-1/2}) Pi^{1/2} e_i|
<= beta^k``, so once ``beta^k <= (eps / 2) min(pi)`` every diagonal equals
``pi_i`` to the last bit. A column block also stops as soon as its slice of
``V`` reaches a floating-point fixed point (bitwise equal to the previous step).
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

from . import _core
from ._checks import MAX_ROUNDS, check_int, check_positive_float, check_tracker, fmt_value, require_memory
from ._hashing import MAX_T
from .errors import DivergenceError

__all__ = ["DiagTracker", "diag_powers", "freeze_step"]

#: Default cap on the memory of one exact tracker's table (bytes); override with
#: the environment variable ROWSTOCH_TRACKER_MAX_BYTES or ``max_bytes=``.
DEFAULT_MAX_BYTES = 2 * 1024**3
#: Default cap on the multiply-adds of building one exact tracker (about 10 minutes on 2 cores);
#: override with ROWSTOCH_TRACKER_MAX_WORK or ``max_work=``.
DEFAULT_MAX_WORK = 2e12
#: How many times that bound a resumed optimizer's replay of the network tracker may take (:meth:`NetworkTracker.
#: resumed_at`: the run's own steps did that work before).
REPLAY_FACTOR = 100
#: Column block of the exact tracker: 2 * n * block values in flight.
DEFAULT_BLOCK = 256


def _max_bytes_default():
    """The memory cap of the exact tracker's blocks: ``ROWSTOCH_TRACKER_MAX_BYTES`` or :data:`DEFAULT_MAX_BYTES`."""
    from ._checks import env_number

    value = env_number("ROWSTOCH_TRACKER_MAX_BYTES", "a number of bytes", DEFAULT_MAX_BYTES, allow_inf=True)
    return value if value == float("inf") else int(value)


def max_work_default():
    """The work cap of exact diagonal computations: ``ROWSTOCH_TRACKER_MAX_WORK`` or :data:`DEFAULT_MAX_WORK`."""
    from ._checks import env_number

    return env_number("ROWSTOCH_TRACKER_MAX_WORK", "a count of multiply-adds", DEFAULT_MAX_WORK, allow_inf=True)


def _limit(value, name):
    """A limit given as an argument: a real number above 0, inf for none; NaN (which had turned the limit off, every
    comparison with it false) and a str refused naming ``name`` (helper 199)."""
    said = f"{name} must be a number above 0 (inf for no limit), got {fmt_value(value)}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(said)
    if not value > 0:
        raise ValueError(said)
    return float(value)


def check_diag_work(A, steps, what, max_work=None):
    """Refuse (ValueError naming ``what``) ``steps`` powers of ``A`` over all ``n`` columns above ``max_work``."""
    max_work = max_work_default() if max_work is None else _limit(max_work, "max_work")
    work = float(steps) * A.nnz * A.n
    if work > max_work:
        raise ValueError(f"{what} needs about {work:.1e} multiply-adds ({steps} steps of A^k over {A.n} columns) "
                         f"but the limit is {max_work:.1e} (ROWSTOCH_TRACKER_MAX_WORK)")
    return work


def _check_matrix(A, name="A"):
    """A TypeError naming ``name`` unless ``A`` is a MixingMatrix (an array had met an AttributeError)."""
    if not (hasattr(type(A), "pi") and hasattr(type(A), "csr")):  # (the class's: pi, a property, is computed)
        raise TypeError(f"{name} must be a MixingMatrix (rowstoch_fast.MixingMatrix(W) makes one of an array), got "
                        f"{type(A).__name__}")
    if getattr(A, "stochastic", "row") != "row":  # (a column-stochastic C's diagonals had been tracked as A's: the
        # trackers' limits are a row-stochastic matrix's Perron vector; a doubly stochastic one is taken as the
        # row-stochastic matrix it is, in the algorithms' words: mixing.require_stochastic, through the matrix)
        return A._as_kind("row", name)
    return A


class _Size:
    """What :func:`check_diag_work` reads of a matrix (``n``, ``nnz``) for a dense ``n x n`` block ``V_t`` advanced
    over a network: at least ``n`` multiply-adds per column and round."""

    def __init__(self, n):
        self.n = self.nnz = n


def diag_powers(A, stride, n_records, *, block=DEFAULT_BLOCK, max_work=None):
    """Diagonals of the powers of ``A``: row ``m`` is ``diag(A^(m * stride))``.

    Parameters
    ----------
    A : MixingMatrix
    stride : int, >= 1
    n_records : int, >= 1
        Rows of the result (``m = 0 .. n_records - 1``).
    block : int
        Columns of ``A^k`` advanced together (memory ``2 n block`` values).
    max_work : float, optional
        Refuse (ValueError) more than this many multiply-adds
        (``(n_records - 1) stride nnz n``); default :data:`DEFAULT_MAX_WORK`
        or ``ROWSTOCH_TRACKER_MAX_WORK``.

    Returns
    -------
    diags : ndarray, shape (n_records, n)
    steps : int
        Gossip steps actually taken (smaller than ``(n_records-1)*stride`` when
        every column block reached a floating-point fixed point early).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> d, _ = diag_powers(topology.ring(3), 1, 3)
    >>> d[:, 0]
    array([1.  , 0.5 , 0.25])
    """
    A = _check_matrix(A)
    stride = check_int(stride, "stride", minimum=1, maximum=MAX_ROUNDS)  # (the kernel's int64: 2^63 had met
    # pybind11's "incompatible function arguments")
    n_records = check_int(n_records, "n_records", minimum=1, maximum=2**63 - 1)
    block = check_int(block, "block", minimum=1, maximum=2**63 - 1)
    check_diag_work(A, (n_records - 1) * stride, f"diag_powers(stride={stride}, n_records={n_records})", max_work)
    require_memory(A.csr.data.itemsize * (n_records * A.n + 2 * A.n * min(block, A.n)),
                   f"diag_powers(n_records={n_records}) of {A.n} nodes", "fewer records")
    c = A.csr
    return _core.diag_powers(c.indptr, c.indices, c.data, stride, n_records, block, check_indices=False)


def _eccentricity(A):
    """The hops from node 0 to the farthest node it reaches along ``A``'s pattern: one breadth-first search
    (SciPy's, in C; it copies a float32 matrix's values as float64, 12 bytes a nonzero, checked first), then
    the depth of the last node of its order by pointer jumping over the predecessors (O(n log n), 32 bytes a
    node). ``csgraph.shortest_path`` copied every matrix unchecked (46 MB at 3.8e6 nonzeros; 1 GB at n = 4e6)."""
    from scipy.sparse import csgraph

    copy = 0 if A.csr.dtype == np.float64 else 12 * A.nnz
    require_memory(copy + 32 * A.n, f"the exact tracker's breadth-first search over A (n = {A.n:,}, {A.nnz:,} "
                   "nonzeros)", "use tracker='perron' (D = diag(pi), the exact tracker's limit)")
    order, pred = csgraph.breadth_first_order(A.csr, 0, directed=True, return_predecessors=True)
    depth = (pred >= 0).astype(np.int32)  # the hops from each node to pred (or its root: 0 at node 0, unreached)
    up = np.where(pred >= 0, pred, 0).astype(np.int32)  # (node 0's predecessor: itself, at depth 0)
    while True:  # doubling: depth[v] becomes the hops to up[v], up[v] its ancestor twice as far (node 0 in the end)
        step = depth[up]
        if not step.any():
            return int(depth[order[-1]])
        depth += step
        up = up[up]


def freeze_step(beta, min_pi, eps=np.finfo(np.float64).eps):
    """Smallest ``k`` with ``beta^k <= (eps/2) min(pi)``: from there on ``diag(A^k) == pi`` in float64.

    ``beta`` is nudged up by a relative 1e-6 to cover the error of its own
    numerical estimate. ValueError for ``beta >= 1`` (no spectral gap: no
    such step is known).

    Examples
    --------
    >>> freeze_step(0.5, 0.125)
    57
    """
    beta = check_positive_float(beta, "beta", allow_zero=True)
    eps = check_positive_float(eps, "eps")
    if beta >= 1.0:  # (2.5, and 1.0, had given 39070613938484168 steps)
        raise ValueError(f"beta must be in [0, 1) (the network's generalized spectral radius, below 1 where it has "
                         f"a spectral gap), got {beta}: with beta = 1 no power of A is known to have diag(A^k) = pi")
    min_pi = check_positive_float(min_pi, "min_pi")  # (0 had raised "math domain error")
    if beta <= 0.0:
        return 1
    b = min(beta * (1 + 1e-6) + 1e-15, 1 - 1e-15)
    return max(1, math.ceil(math.log(0.5 * eps * min_pi) / math.log(b)))


class DiagTracker:
    """Inverse diagonal scales ``s_t = 1 / diag(D_t)`` of (MG-)Pull-Diag-GT.

    ``D_t = Diag(A^(t R))`` for the exact tracker (``D_0 = I``), and
    ``D_t = diag(pi)`` for ``t >= 1`` for the Perron tracker (the limit of the
    exact one, cf. eq. 4).

    Parameters
    ----------
    A : MixingMatrix
    rounds : int
        Gossip steps ``R`` per iteration (stride of the table).
    kind : {"exact", "perron"}
    max_bytes : int, optional
        Refuse (MemoryError) an exact table larger than this (default 2 GiB).
    max_work : float, optional
        Refuse (ValueError) an exact tracker whose construction needs more
        multiply-adds than this (default 2e12, about 10 minutes on 2 cores).

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> tr = DiagTracker(topology.exponential(8), rounds=1)
    >>> tr.scale(0)
    array([1., 1., 1., 1., 1., 1., 1., 1.])
    >>> bool(np.allclose(tr.scale(tr.frozen_at), 8.0))
    True
    """

    def __init__(self, A, rounds=1, kind="exact", *, max_bytes=None, max_work=None):
        self.rounds = check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)
        self.kind = check_tracker(kind, "kind")
        A = _check_matrix(A)
        for value, name in ((max_bytes, "max_bytes"), (max_work, "max_work")):  # (a text or NaN had passed where
            # the table was small, and failed deep where it was not; inf: no limit)
            if value is not None and (np.ndim(value) or value != math.inf):  # (an array: named below, not "ambiguous")
                check_positive_float(value, name)
        self.n = A.n
        dtype = A.dtype
        if kind == "perron":  # needs pi only, not the metrics' beta
            self._table = np.stack([np.ones(A.n, dtype=dtype), (1.0 / A.pi).astype(dtype)])
            self.frozen_at = 1
            return
        key = self._key(self.rounds)
        if key not in A._diag_cache:  # refused in O(nnz) where even a lower bound of the work is past the limits
            self._check_lower_bound(A, max_bytes, max_work)
        metrics = A.metrics()
        with A._cache_lock:  # built once per matrix and stride, whatever the number of threads asking
            cached = A._diag_cache.get(key)
            if cached is None:
                cached = self._build(A, metrics, max_bytes, max_work)
                A._diag_cache[key] = cached
        self._table = cached
        self.frozen_at = cached.shape[0] - 1

    @staticmethod
    def _key(rounds):
        """Where the exact table of a stride is cached on its matrix (``A._diag_cache``)."""
        return ("scales", rounds)

    @classmethod
    def built(cls, A, rounds=1):
        """Whether the exact table of ``A`` for ``rounds`` is built already (cached on ``A``: a new tracker of it
        costs nothing)."""
        cache = getattr(A, "_diag_cache", None)
        if cache is None:
            raise TypeError(f"A must be a MixingMatrix, got {type(A).__name__}")
        return cls._key(check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)) in cache

    def _check_lower_bound(self, A, max_bytes, max_work):
        """Refuse at once (before the spectral gap, which ARPACK may take many minutes to find on a slowly
        mixing graph: a ring of 16,000 nodes ran for more than 590 s) a table whose size or work is past the
        limits by a lower bound: ``[A^k]_ii`` cannot have settled at ``pi_i`` before the powers of ``A`` reach
        across the graph, so the freezing step is at least half the eccentricity of node 0 (one breadth-first
        search, O(nnz))."""
        if max_bytes is None:
            max_bytes = _max_bytes_default()
        if max_work is None:
            max_work = max_work_default()
        if A.n < 2:
            return
        eccentricity = _eccentricity(A)  # <= the diameter D; and k* >= D, since for k < D
        k_low = eccentricity // 2  # some [A^k]_ij = 0 puts ||A^k - 1 pi^T||_pi >= min(pi) (half, for margin)
        t_low = -(-k_low // self.rounds)
        work = float(t_low * self.rounds) * A.nnz * A.n
        need = (t_low + 1) * A.n * np.dtype(A.dtype).itemsize
        if work > max_work or need > max_bytes:
            raise (ValueError if work > max_work else MemoryError)(
                f"the exact diagonal tracker needs at least {k_low} powers of A (messages take {eccentricity} "
                f"hops across this graph): at least {work:.1e} multiply-adds and {need / 2**30:.2f} GiB, past the "
                f"limits ({max_work:.1e}, {max_bytes / 2**30:.2f} GiB); use tracker='perron' (D = diag(pi), the "
                "exact tracker's limit) or raise ROWSTOCH_TRACKER_MAX_WORK / ROWSTOCH_TRACKER_MAX_BYTES")

    def _build(self, A, metrics, max_bytes, max_work):
        if max_bytes is None:
            max_bytes = _max_bytes_default()
        if max_work is None:
            max_work = max_work_default()
        if not metrics.has_gap:
            loops = metrics.nodes_without_self_loop
            why = (f"nodes {', '.join(map(str, loops[:5]))}{' ...' if len(loops) > 5 else ''} have no self loop"
                   if loops else "the matrix has no spectral gap in the pi-norm")
            raise ValueError(
                f"the exact diagonal tracker cannot bound how many powers of A it needs: beta = 1 ({why}); "
                "add self loops, or use tracker='perron' (D = diag(pi), the exact tracker's limit)")
        k_star = freeze_step(metrics.beta, float(metrics.pi.min()))
        t_star = -(-k_star // self.rounds)
        work = float(t_star * self.rounds) * A.nnz * A.n
        if work > max_work:
            raise ValueError(
                f"the exact diagonal tracker needs about {work:.1e} multiply-adds ({k_star} steps of A^k in "
                f"{A.n} columns) but the limit is {max_work:.1e}; use tracker='perron' (D = diag(pi), the exact "
                "tracker's limit) or raise max_work / ROWSTOCH_TRACKER_MAX_WORK"
            )
        need = (t_star + 1) * A.n * np.dtype(A.dtype).itemsize
        if need > max_bytes:
            raise MemoryError(
                f"the exact diagonal tracker needs {t_star + 1} x {A.n} values ({need / 2**30:.2f} GiB, "
                f"beta = {metrics.beta:.4g}) but the limit is {max_bytes / 2**30:.2f} GiB; "
                "use tracker='perron' (D = diag(pi), the exact tracker's limit) or raise max_bytes"
            )
        diags, _ = diag_powers(A, self.rounds, t_star + 1, max_work=math.inf)  # work checked above
        bad = np.argwhere(diags <= 0)
        if bad.size:
            t, i = (int(v) for v in bad[0])
            raise ValueError(
                f"[A^{t * self.rounds}]_{i}{i} = 0 (node {i} has no self loop), so D_{t}^-1 of Pull-Diag-GT "
                f"is undefined; use rounds > 1 such that every diag(A^(tR)) > 0, or tracker='perron'"
            )
        scales = np.divide(1.0, diags, out=diags)  # (in place: a second table had doubled the peak the limits
        # were checked for, helper 231: 3.8 GB for ring(300)'s 1.76 GiB)
        scales.setflags(write=False)
        return scales

    def scale(self, t):
        """``1 / diag(D_t)`` as a read-only array of shape (n,), ``t >= 0``."""
        if type(t) is not int or t < 0:  # (-1 had read the last row, True a (1, ...) block, 2.5 NumPy's IndexError)
            t = check_int(t.item() if isinstance(t, np.ndarray) and t.ndim == 0 else t, "t", minimum=0)
        return self._table[min(t, self._table.shape[0] - 1)]

    @property
    def max_inverse_diagonal(self):
        """``max_t max_i 1/[D_t]_ii`` over the table: the paper's theta for this stride."""
        return float(self._table.max())


class NetworkTracker:
    """``s_t = 1 / diag(D_t)`` of (MG-)Pull-Diag-GT on a time-varying network: ``D_t = Diag(V_t)`` with
    ``V_0 = I`` and ``V_{t+1} = A_t V_t``, ``A_t`` the product of the ``R`` round matrices of iteration ``t``.

    ``V_t`` is a dense ``n x n`` block advanced one iteration at a time (``scale(t)`` for increasing ``t``
    costs one network pass over ``n`` columns; an earlier ``t`` recomputes from ``V_0``, so a resumed run
    gets the same scales bit for bit). Refused beyond the exact tracker's memory and work limits, with the
    algorithms that need no diagonal tracker named.
    """

    kind = "exact"
    frozen_at = None

    def __init__(self, network, rounds=1, kind="exact", *, max_bytes=None, mix=None, xp=np, rows=None):
        self.rounds = check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)
        self.check(network, kind, max_bytes)
        self.n = network.n
        self._net = network
        self._dtype = np.dtype(network.dtype)
        # V -> A_t V (the CuPy and MPI backends pass their own rounds; None: the network's mix on the host, a
        # method, so that a copy of the optimizer pickles)
        self._mix = mix
        self._xp = xp
        self._rows = rows  # global ids of the rows of V kept here (an MPI rank's nodes); None: all
        self._restart()
        self._max = xp.ones(())

    def _host_mix(self, V, t):
        return np.ascontiguousarray(self._net.mix(V, t, self.rounds))

    def __getstate__(self):  # (a copy of the optimizer: its array module by name, a module does not pickle)
        return dict(self.__dict__, _xp=self._xp.__name__)

    def __setstate__(self, state):
        import importlib

        self.__dict__.update(state, _xp=importlib.import_module(state["_xp"]))

    @staticmethod
    def check(network, kind, max_bytes=None):
        """Refuse (TypeError) what is not a network, (ValueError) a tracker kind other than ``"exact"``, a limit that
        is not a number above 0, and (MemoryError) a V_t over the memory limit, naming the algorithms that need no
        diagonal tracker."""
        if not all(hasattr(network, name) for name in ("mix", "matrix", "n", "dtype")):  # (helper 199: an array had
            # met an AttributeError on 'n'; read by what it has: the network package imports this module's users)
            raise TypeError(f"network must be a network (rowstoch_fast.network: Lossy, Sleepy, Schedule, ...) or a "
                            f"MixingMatrix, got {type(network).__name__}")
        if check_tracker(kind) != "exact":
            raise ValueError(f"tracker={kind!r} needs a static network (diag(pi) has no meaning when A changes "
                             "with t); use tracker='exact' on a time-varying network")
        if max_bytes is None:
            max_bytes = _max_bytes_default()
        else:
            max_bytes = _limit(max_bytes, "max_bytes")
        need = 8.0 * network.n * network.n
        instead = "use an algorithm without a diagonal tracker: SGP or Push-DIGing (push-sum weights), Push-Pull, DSGD"
        if need > max_bytes:
            raise MemoryError(
                f"the exact diagonal tracker of a time-varying network keeps V_t = A_t ... A_0, {network.n} x "
                f"{network.n} values ({need / 2**30:.1f} GiB, limit {max_bytes / 2**30:.1f} GiB); on networks this "
                f"large {instead}")
        require_memory(2 * need, f"the exact diagonal tracker of a time-varying network (V_t and the next, "
                       f"{network.n} x {network.n} values each)", instead)  # (the free memory too, not the limit
        # alone: 15,000 nodes had stepped a row and ended in NumPy's bare allocation error, helper 231)

    def resumed_at(self, t):
        """A resumed optimizer stands at iteration ``t``: :meth:`scale` replays ``V_t`` up to it (and one further)
        under :data:`REPLAY_FACTOR` times the bound on a jump ahead (``ROWSTOCH_TRACKER_MAX_WORK``), work the run's
        own steps did before: a long run on a large lossy network had been refused its resume. Not without a
        bound: a state whose iteration was edited to 10**15 would replay for centuries (helper 224)."""
        t = check_int(t, "state['iteration']", minimum=0, maximum=MAX_T)
        check_diag_work(_Size(self.n), t * self.rounds, f"resuming at state['iteration'] = {t} (the tracker replays "
                        "V_t = A_(t-1) ... A_0 from V_0)", max_work_default() * REPLAY_FACTOR)
        self._resumed = t

    def _restart(self):
        xp, rows = self._xp, self._rows
        self._t = 0
        if rows is None:
            self._V = xp.eye(self.n)
        else:
            self._V = xp.zeros((len(rows), self.n))
            self._V[xp.arange(len(rows)), rows] = 1.0
        self._scales = {0: xp.ones(self._V.shape[0], dtype=self._dtype)}

    def _diag(self):
        """``diag(V_t)`` at the rows kept here."""
        if self._rows is None:
            return self._xp.diagonal(self._V).copy()
        return self._V[self._xp.arange(len(self._rows)), self._rows]

    def _zero_node(self, diag):
        """A node whose ``[V_t]_ii`` is not positive, or -1 (on a GPU not looked for: a zero shows up as Inf in
        the iterates' check instead)."""
        if self._xp is not np or not (diag <= 0).any():
            return -1
        i = int(np.argmax(diag <= 0))
        return i if self._rows is None else int(self._rows[i])

    def scale(self, t):
        """``1 / diag(D_t)`` as an array of shape (n,), ``t >= 0`` (read-only on the host)."""
        if type(t) is not int or t < 0:  # (helper 199: 2.9 had read t = 2's scales, "3" and True been taken, -1 a
            # KeyError)
            t = check_int(t.item() if isinstance(t, np.ndarray) and t.ndim == 0 else t, "t", minimum=0)
        if t > max(self._t, self.__dict__.get("_resumed", 0)) + 1:  # (a jump ahead: 10**18 had stepped V_t without
            # end; Schedule.matrix takes t <= 2^60 - 1; not the replay up to where a resumed run stands, which its
            # own steps reached before)
            check_int(t, "t", maximum=MAX_T)
            steps = t - self._t
            check_diag_work(_Size(self.n), steps * self.rounds, f"NetworkTracker.scale(t={t}) (V_t = A_(t-1) ... "
                            "A_0, advanced from the last t asked for)")
        if t < self._t - 1:  # asked for the past (a resume, a restart): replay from V_0
            self._restart()
        xp = self._xp
        while self._t < t:
            self._V = (self._mix or self._host_mix)(self._V, self._t)
            self._t += 1
            diag = self._diag()
            zero = self._zero_node(diag)
            if zero >= 0:
                product = "A_0" if self._t == 1 else f"A_{self._t - 1} ... A_0"
                if self._t > 1:  # (positive one step before: it fell below the smallest float, its rounds reaching
                    # back to the node ever less; a node asleep through all 590 rounds of an iteration cuts a ring,
                    # and a comparison of mg-pull-diag-gt under sleep had stopped on it: helper 170)
                    raise DivergenceError(
                        f"diag({product}) fell to 0 at node {zero} (below the smallest positive float): the "
                        f"tracker's scale 1/[A^k]_ii overflows, the rounds reaching back to the node ever less (a "
                        f"node asleep through an iteration's gossip rounds cuts a ring); try fewer gossip rounds "
                        f"per iteration (--mg-rounds) or a loss-robust method", iteration=self._t - 1, node=zero,
                        what="tracker")
                raise ValueError(f"diag({product}) is 0 at node {zero}: the diagonal tracker needs self loops that "
                                 "every round keeps")
            s = (1.0 / diag).astype(self._dtype)
            if xp is np:
                s.flags.writeable = False
            self._scales = {k: v for k, v in self._scales.items() if k >= self._t - 1}
            self._scales[self._t] = s
            self._max = xp.maximum(self._max, s.max())  # no host read per step
        return self._scales[t]

    @property
    def max_inverse_diagonal(self):
        """``max_i 1/[D_t]_ii`` over the iterations seen so far."""
        return float(self._max)
