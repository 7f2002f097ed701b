"""Metrics of a row-stochastic network (Section 2.2) and the rates that depend on them.

* ``pi``: the Perron (equilibrium) vector, ``pi^T A = pi^T``, ``sum(pi) = 1``.
* ``beta = ||A - 1 pi^T||_pi``, the generalized spectral gap being ``1 - beta``.
* ``kappa = max(pi) / min(pi)``, the equilibrium skewness.
* ``theta(horizon)``: ``max_{1<=k<=horizon} max_i 1/[A^k]_ii`` (Assumption 4).

Small matrices use exact dense linear algebra; large ones use ARPACK on
sparse operators (with the rank-one correction applied matrix-free, never a
dense ``n x n``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ._checks import check_int, check_positive_float, require_memory

__all__ = [
    "NetworkMetrics",
    "compute_metrics",
    "metrics_memory",
    "perron_vector",
    "lower_bound",
    "pull_diag_gt_bound",
    "mg_pull_diag_gt_bound",
    "recommended_rounds",
    "lemma5_threshold",
    "BetaNotConverged",
]

#: Up to this many nodes the metrics are computed with dense LAPACK.
DENSE_MAX_N = 2000
#: The work the sparse computation of beta may do before it gives up (:class:`BetaNotConverged`): its Krylov steps
#: (products with the operator) times ``n``. A graph whose gap ``1 - beta`` is tiny (a ring of ``n`` nodes: about
#: ``pi^2 / n^2``) needs steps without end; a ring of 8,000 nodes converges in 4.5e8 (about half a minute on a
#: laptop core). A count, not a clock: the same answer on every machine and every MPI rank.
BETA_MAX_WORK = 5e8


class BetaNotConverged(RuntimeError):
    """The sparse computation of ``beta`` did not converge within :data:`BETA_MAX_WORK`."""


@dataclass(frozen=True, eq=False)
class NetworkMetrics:
    """The metrics of a mixing matrix (Section 2.2, Lemma 7, Theorems 1-3).

    Attributes
    ----------
    n : int
    pi : ndarray
        Perron vector (read-only), ``pi^T A = pi^T``, ``sum(pi) = 1``.
    beta : float
        ``||A - 1 pi^T||_pi``, computed on first use (a singular value
        problem: the expensive part of the metrics at large ``n``; ``pi``,
        ``kappa`` and the self loops come without it).
    kappa : float
        ``max(pi) / min(pi)``.
    spectral_gap : float
        ``1 - beta`` (computes ``beta``).
    nodes_without_self_loop : tuple of int
        Nodes with ``a_ii = 0``: non-empty means Assumption 4 (bounded
        diagonals) fails and Pull-Diag-GT with ``R = 1`` is undefined.
    method : str
        ``"dense"`` or ``"sparse"``.
    """

    n: int
    pi: np.ndarray = field(repr=False)
    kappa: float
    nodes_without_self_loop: tuple = field(repr=False)
    method: str
    _matrix: object = field(repr=False, compare=False)
    _beta: list = field(default_factory=list, repr=False, compare=False)

    @property
    def beta(self):
        """``||A - 1 pi^T||_pi`` (computed once, on first use)."""
        if not self._beta:
            with self._matrix._cache_lock:
                if not self._beta:
                    try:
                        self._beta.append(_beta_of(self._matrix, self.pi, self.method))
                    except BetaNotConverged as exc:  # (kept: another reader does not run it all again)
                        self._beta.append(exc)
        if isinstance(self._beta[0], BetaNotConverged):
            raise self._beta[0]
        return self._beta[0]

    @property
    def spectral_gap(self):
        """``1 - beta``."""
        return 1.0 - self.beta

    def __repr__(self):
        # (beta as far as it is known: printing it had computed it, 25 s on a ring of 16,384 nodes and then a
        # BetaNotConverged raised in place of the object's text, helper 267)
        if not self._beta:
            beta = "beta=<not computed yet: .beta computes it>"
        elif isinstance(self._beta[0], BetaNotConverged):
            beta = "beta=<did not converge: .beta raises why>"
        else:
            beta = f"beta={self._beta[0]!r}, spectral_gap={1.0 - self._beta[0]!r}"
        return f"NetworkMetrics(n={self.n}, kappa={self.kappa!r}, {beta}, method={self.method!r})"

    @property
    def self_loops(self):
        """True when every node has a self loop (Assumption 4 can hold)."""
        return not self.nodes_without_self_loop

    @property
    def lemma5_threshold(self):
        """``(2 ln kappa + 2 ln n) / (1 - beta)``: beyond it, ``1/[A^k]_ii <= 2 n kappa`` (Lemma 7 of the ICML
        version; the name keeps an earlier numbering)."""
        return lemma5_threshold(self.n, self.beta, self.kappa)

    def recommended_rounds(self):
        """Gossip rounds ``R = ceil(3 (1 + ln kappa + ln n) / (1 - beta))`` of Theorem 3."""
        return recommended_rounds(self.n, self.beta, self.kappa)

    def theta(self, horizon=None):
        """``max_{1<=k<=horizon} max_i 1/[A^k]_ii`` (Assumption 4); ``inf`` if a diagonal is 0.

        Parameters
        ----------
        horizon : int, optional
            Largest power. Defaults to the step from which ``diag(A^k)`` equals
            ``pi`` in float64 (see :func:`rowstoch_fast.tracker.freeze_step`).
        """
        from .tracker import diag_powers, freeze_step

        if horizon is not None:
            horizon = check_int(horizon, "horizon", minimum=1)
        if (self._matrix.csr.diagonal() <= 0).any():  # [A^1]_ii = 0 for every horizon (a matrix without a self loop
            # and beta = 1 had asked for a horizon of 3.8e16 steps, then refused it)
            return math.inf
        if horizon is None:
            if not self.has_gap:
                raise ValueError(f"theta() needs a horizon: beta = {self.beta:.6g}, so no power of A is known to "
                                 "have diag(A^k) = pi; pass theta(horizon=...)")
            horizon = freeze_step(self.beta, float(self.pi.min()))
        from .tracker import check_diag_work

        check_diag_work(self._matrix, horizon, f"theta(horizon={horizon})")
        diags, _ = diag_powers(self._matrix, 1, horizon + 1, max_work=math.inf)
        low = diags[1:].min()
        return math.inf if low <= 0 else float(1.0 / low)

    def lower_bound(self, L, Delta, sigma, K):
        """Theorem 1's lower bound on ``E||grad f||^2`` after ``K`` iterations (up to constants)."""
        return lower_bound(L, Delta, sigma, K, n=self.n, beta=self.beta, kappa=self.kappa)

    def pull_diag_gt_bound(self, L, Delta, sigma, K, C_A):
        """Theorem 2's rate for Pull-Diag-GT (up to constants); ``C_A`` as in Appendix C."""
        return pull_diag_gt_bound(L, Delta, sigma, K, n=self.n, C_A=C_A)

    def mg_pull_diag_gt_bound(self, L, Delta, sigma, K):
        """Theorem 3's rate for MG-Pull-Diag-GT with the recommended ``R`` (up to constants)."""
        return mg_pull_diag_gt_bound(L, Delta, sigma, K, n=self.n, beta=self.beta, kappa=self.kappa)

    @property
    def has_gap(self):
        """True when ``beta < 1``: Lemma 7 and Theorems 1-3 apply (without self loops beta can be 1)."""
        return self.beta < 1.0 - 1e-12

    def as_dict(self):
        """Scalar metrics as a plain dict (for tables and JSON); threshold and R are None without a gap."""
        return {
            "n": self.n,
            "beta": self.beta,
            "spectral_gap": self.spectral_gap,
            "kappa": self.kappa,
            "min_pi": float(self.pi.min()),
            "max_pi": float(self.pi.max()),
            "self_loops": self.self_loops,
            "lemma5_threshold": self.lemma5_threshold if self.has_gap else None,
            "recommended_rounds": self.recommended_rounds() if self.has_gap else None,
            "method": self.method,
        }


# ---------------------------------------------------------------------- rates
#: The largest iteration count and number of nodes the rates take (far past any run: 10**400 had met an
#: OverflowError in a square root).
MAX_COUNT = 2**63 - 1


def _check_rate_args(L, Delta, sigma, K):
    return (
        check_positive_float(L, "L"),
        check_positive_float(Delta, "Delta"),
        check_positive_float(sigma, "sigma", allow_zero=True),
        check_int(K, "K", minimum=1, maximum=MAX_COUNT),  # (10**400 had met an OverflowError in its square root)
    )


def _check_network(n, beta, kappa, what):
    """``n`` nodes (an integer >= 1), ``beta`` in [0, 1) and ``kappa = max pi / min pi >= 1``, or a clear error."""
    n = check_int(n, "n", minimum=1, maximum=MAX_COUNT)
    beta = check_positive_float(beta, "beta", allow_zero=True)
    kappa = check_positive_float(kappa, "kappa")
    if kappa < 1.0:
        raise ValueError(f"kappa = max(pi) / min(pi) is at least 1, got {kappa!r}")
    _require_gap(beta, what)
    return n, beta, kappa


def _require_gap(beta, what):
    """Theorems 1-3 need ``beta < 1``; without self loops ``||A - 1 pi^T||_pi`` can be 1 (no gap)."""
    if not beta < 1.0 - 1e-12:
        raise ValueError(
            f"{what} needs a generalized spectral gap 1 - beta > 0, but beta = {float(beta):.6g}: this matrix "
            "contracts in no single step in the pi-norm (it happens without self loops); add self loops "
            "(e.g. MixingMatrix.from_edges(..., self_loops=True)) or choose the number of gossip rounds yourself")


def lemma5_threshold(n, beta, kappa):
    """``(2 ln kappa + 2 ln n) / (1 - beta)`` (Lemma 7).

    Raises ValueError when ``beta >= 1`` (no spectral gap).

    Examples
    --------
    >>> round(lemma5_threshold(16, 0.6, 1.0), 4)
    13.8629
    """
    n, beta, kappa = _check_network(n, beta, kappa, "Lemma 7's threshold")
    return (2 * math.log(kappa) + 2 * math.log(n)) / (1 - beta)


def recommended_rounds(n, beta, kappa):
    """``R = ceil(3 (1 + ln kappa + ln n) / (1 - beta))`` (Theorem 3).

    Raises ValueError when ``beta >= 1`` (no spectral gap).

    Examples
    --------
    >>> recommended_rounds(16, 0.6, 1.0)
    29
    """
    n, beta, kappa = _check_network(n, beta, kappa, "Theorem 3's number of gossip rounds R")
    return max(1, math.ceil(3 * (1 + math.log(kappa) + math.log(n)) / (1 - beta)))


def lower_bound(L, Delta, sigma, K, *, n, beta, kappa):
    """Theorem 1: ``sigma sqrt(L Delta) / sqrt(n K) + (1 + ln kappa) L Delta / ((1 - beta) K)``.

    The bound holds up to an absolute constant.

    Examples
    --------
    >>> round(lower_bound(1.0, 1.0, 0.0, 100, n=16, beta=0.5, kappa=1.0), 6)
    0.02
    """
    L, Delta, sigma, K = _check_rate_args(L, Delta, sigma, K)
    n, beta, kappa = _check_network(n, beta, kappa, "Theorem 1's bound")
    return sigma * math.sqrt(L * Delta) / math.sqrt(n * K) + (1 + math.log(kappa)) * L * Delta / ((1 - beta) * K)


def pull_diag_gt_bound(L, Delta, sigma, K, *, n, C_A):
    """Theorem 2: ``sigma sqrt(L Delta) / sqrt(n K) + L Delta (1 + C_A) / K``.

    ``C_A`` is the network constant of Appendix C (a rational function of
    kappa, beta and theta that the paper does not give in closed form), so it
    is an argument.
    """
    L, Delta, sigma, K = _check_rate_args(L, Delta, sigma, K)
    n = check_int(n, "n", minimum=1, maximum=MAX_COUNT)
    C_A = check_positive_float(C_A, "C_A", allow_zero=True)
    return sigma * math.sqrt(L * Delta) / math.sqrt(n * K) + L * Delta * (1 + C_A) / K


def mg_pull_diag_gt_bound(L, Delta, sigma, K, *, n, beta, kappa):
    """Theorem 3: ``sigma sqrt(L Delta) / sqrt(n K) + (1 + ln kappa + ln n) L Delta / ((1 - beta) K)``."""
    L, Delta, sigma, K = _check_rate_args(L, Delta, sigma, K)
    n, beta, kappa = _check_network(n, beta, kappa, "Theorem 3's bound")
    return sigma * math.sqrt(L * Delta) / math.sqrt(n * K) + (
        1 + math.log(kappa) + math.log(n)
    ) * L * Delta / ((1 - beta) * K)


# ---------------------------------------------------------------------- computation
def perron_vector(A):
    """The Perron vector ``pi`` of a :class:`~rowstoch_fast.MixingMatrix` alone (no ``beta``): read-only.

    Exact dense LU on the bordered system for ``n <= DENSE_MAX_N``; beyond,
    power steps ``pi <- A^T pi`` on the compiled kernel until
    ``||A^T pi - pi||_1 <= PERRON_TOL`` (1e-14), with ARPACK for slowly mixing
    networks (after ``PERRON_POWER_STEPS`` steps). Where a node is heard by many
    (a star's centre), both thresholds are raised to the rounding floor of its
    sum (``4 k eps`` for ``k`` weights). ValueError when the residual stays
    above ``PERRON_ACCEPT`` (1e-12): a periodic or reducible matrix. This is the ``pi`` of
    :meth:`~rowstoch_fast.MixingMatrix.metrics`, computed once per matrix
    (``A.pi``); it costs a fraction of the full metrics, whose ``beta`` needs a
    singular value decomposition.
    """
    n = _matrix_arg(A).n
    need = 3 * n * n * 8 if n <= DENSE_MAX_N else 2 * 20 * 16 * n + 3 * A.nnz * 12
    require_memory(need, f"the Perron vector of a network of n = {n} nodes")
    csr = A.csr if A.dtype == np.float64 else A.csr.astype(np.float64)  # read only: no copy needed
    pi = _perron_dense(csr.toarray()) if n <= DENSE_MAX_N else _perron_sparse(csr)
    if not (pi > 0).all() and (not (np.isfinite(pi) & (pi >= 0)).all() or _reducible(csr)):  # (a reducible matrix
        # built with validate=False: pi = [1, 0], then kappa inf with NumPy's divide-by-zero warning and "array must
        # not contain infs or NaNs" from beta; a strongly connected one's 0 is an entry that underflowed float64,
        # kept, kappa inf, as before: helper 217's birth-death chain of 3,000 nodes)
        i = int(np.argmin(pi > 0))
        raise _imprimitive(f"pi[{i}] = {pi[i]:.3g}: node {i} is never heard from in the limit")
    pi.setflags(write=False)
    return pi


def _reducible(csr):
    """Whether the graph of ``csr`` is not strongly connected."""
    from scipy.sparse.csgraph import connected_components

    return connected_components(csr, directed=True, connection="strong")[0] > 1


def _imprimitive(why):
    """The ValueError of a matrix with no unique positive Perron vector (one built with ``validate=False``)."""
    return ValueError(f"the Perron vector of A is not unique and positive: A is reducible or periodic ({why}); "
                      "MixingMatrix(..., validate=True) names the node that breaks it")


def _matrix_arg(A):
    # what a MixingMatrix's class has (asked of the class: ``pi`` is computed when read); this module sits below
    # rowstoch_fast.mixing, which imports it
    if not all(hasattr(type(A), key) for key in ("csr", "pi", "metrics", "stochastic")):
        raise TypeError(f"A must be a MixingMatrix (rowstoch_fast.MixingMatrix(W) builds one from an array), got "
                        f"{type(A).__name__}")
    return A


def metrics_memory(n, nnz=0):
    """Bytes :func:`compute_metrics` needs for ``n`` nodes and ``nnz`` weights (``pi`` included), roughly.

    Dense: a few ``n x n`` copies; sparse: ARPACK's ~20 Krylov vectors (complex) for ``pi`` and ~20 for ``beta``.
    """
    n, nnz = check_int(n, "n", minimum=1), check_int(nnz, "nnz", minimum=0)
    return 6 * n * n * 8 if n <= DENSE_MAX_N else (2 * 20 * 16 + 12 * 8) * n + 3 * nnz * 12


def compute_metrics(A):
    """:class:`NetworkMetrics` of a :class:`~rowstoch_fast.MixingMatrix` (its ``pi`` is ``A.pi``; ``beta`` is
    computed when first read)."""
    n = _matrix_arg(A).n
    require_memory(metrics_memory(n, A.nnz), f"the metrics of a network of n = {n} nodes")
    no_loop = tuple(int(i) for i in np.flatnonzero(A.csr.diagonal() <= 0))
    return NetworkMetrics(n=n, pi=A.pi, kappa=A.kappa, nodes_without_self_loop=no_loop,
                          method="dense" if n <= DENSE_MAX_N else "sparse", _matrix=A)


def _beta_of(A, pi, method):
    csr = A.csr.astype(np.float64)
    beta = _beta_dense(csr.toarray(), pi) if method == "dense" else _beta_sparse(csr, pi)
    return min(beta, 1.0)  # the norm of a row-stochastic matrix's deviation; above 1 only by rounding


def _perron_dense(A):
    """Solve ``(A^T - I) pi = 0, 1^T pi = 1`` by LU on the bordered system (exact to rounding)."""
    import scipy.linalg as la

    n = A.shape[0]
    M = A.T - np.eye(n)
    M[-1, :] = 1.0  # replace one (redundant) balance equation by the normalisation
    rhs = np.zeros(n)
    rhs[-1] = 1.0
    try:
        pi = la.solve(M, rhs)  # (an ill-conditioned system, a near-reducible matrix's, warns as before; pi is checked)
    except la.LinAlgError:  # (SciPy's "singular matrix detected" had named nothing: eye(2))
        raise _imprimitive("(A^T - I) pi = 0 has more than one solution with sum(pi) = 1") from None
    return _polish(sp.csr_array(A), pi)


#: ``A.pi`` for large ``n``: power steps until ``||A^T pi - pi||_1 <= PERRON_TOL`` (``sum(pi) = 1``) ...
PERRON_TOL = 1e-14
#: ... for at most this many steps on the compiled kernels, then ARPACK, then power steps again; a residual
#: above ``PERRON_ACCEPT`` after all that raises (periodic or reducible matrix, or a spectral gap too small).
PERRON_POWER_STEPS = 3000
PERRON_ACCEPT = 1e-12
#: ARPACK's restarts for ``A.pi`` are bounded so that its products (about 20 a restart) stay within this many
#: multiply-adds (5,000 restarts at most): a minute or so on one core (helper 231: unbounded, a grid of 10^6 nodes
#: ran past 590 s).
PERRON_MAX_WORK = 2e10


def _perron_sparse(csr):
    import scipy.sparse.linalg as spla  # (here, not at import: with scipy.linalg, 80 ms of every start)

    n = csr.shape[0]
    v0 = np.full(n, 1.0 / n)
    colsum = np.bincount(csr.indices, weights=csr.data, minlength=n)
    if np.all(np.abs(colsum - 1.0) <= 1e-13):
        # doubly stochastic (1^T A = 1^T): pi = 1/n; the polishing step's residual test confirms it in one product
        return _polish(csr, v0)
    At = sp.csr_array(csr.T)  # A^T in CSR: the compiled mixing kernel runs pi <- A^T pi
    floor = _rounding_floor(At)
    counts = np.diff(csr.indptr).astype(np.float64)  # (a random walk on an undirected graph with self loops, each
    # row's weights equal, the in-degree rule's on a grid or a nearest-neighbour graph: pi is in proportion to the
    # rows' entries; one product confirms it, where a grid of 10^6 nodes had run power steps and ARPACK past 590 s,
    # helper 231)
    guess = counts / counts.sum()
    if float(np.abs(At @ guess - guess).sum()) <= max(PERRON_TOL, floor):
        return guess
    pi, residual, steps = _power(At, v0, PERRON_POWER_STEPS, tol=max(PERRON_TOL, floor))
    if residual <= max(PERRON_TOL, floor):
        return pi
    try:  # slow mixing: a Krylov method, warm-started from the power iterate, its restarts bounded by the work
        _, vec = spla.eigs(At, k=1, which="LM", v0=pi, tol=0,
                           maxiter=int(np.clip(PERRON_MAX_WORK / (20.0 * max(1, At.nnz)), 10, 5000)))
        guess = np.abs(vec[:, 0].real)
        pi, residual, more = _power(At, guess / guess.sum(), PERRON_POWER_STEPS, tol=max(PERRON_TOL, floor))
        steps += more
    except spla.ArpackNoConvergence:
        pass
    if residual > max(PERRON_ACCEPT, floor):
        raise ValueError(f"the Perron vector of A did not converge: ||A^T pi - pi||_1 = {residual:.1e} after "
                         f"{steps} power steps and ARPACK, its restarts bounded by metrics.PERRON_MAX_WORK = "
                         f"{PERRON_MAX_WORK:.0e} multiply-adds (is A periodic or reducible? MixingMatrix(..., "
                         f"validate=True) checks it; or its spectral gap too small for this n)")
    return pi


def _rounding_floor(At):
    """The rounding floor of ``||A^T pi - pi||_1`` (``sum(pi) = 1``).

    Entry ``i`` of ``A^T pi`` sums the ``k_i`` weights that other nodes give node ``i`` with a relative error up
    to ``k_i eps``; the l1 error is then about ``max_i k_i eps`` (a star's centre: ``n - 1``). Four times that is
    a residual no power step can push lower: a star of 100,000 nodes stops at 1.8e-12, above ``PERRON_ACCEPT``.
    """
    longest = int(np.diff(At.indptr).max()) if At.shape[0] else 0
    return 4.0 * longest * np.finfo(np.float64).eps


def _power(At, pi, max_steps, tol=PERRON_TOL):
    """Power steps ``pi <- A^T pi / sum`` on the compiled kernel: ``(pi, residual, steps)``."""
    from . import _core

    x = np.ascontiguousarray(np.abs(pi) / np.abs(pi).sum(), dtype=np.float64).reshape(-1, 1)
    y = np.empty_like(x)
    residual = previous = np.inf
    for step in range(1, max_steps + 1):
        _core.mix(At.indptr, At.indices, At.data, x, y, check_indices=False)
        y /= y.sum()
        residual = float(np.abs(y - x).sum())
        x, y = y, x
        # below tol, go on while the residual still halves: stop at the rounding floor, not just under tol
        if residual <= tol and (residual > 0.5 * previous or residual <= 4 * np.finfo(np.float64).eps):
            break
        previous = residual
    return x[:, 0].copy(), residual, step


def _polish(csr, pi, rtol=PERRON_TOL, max_steps=10000):
    """A few power steps ``pi <- A^T pi`` until the residual is at rounding level (ValueError if it is not
    reached)."""
    At = csr.T  # a CSC view: no copy, and each entry of A^T pi sums in the same order as a CSR transpose would
    pi = np.abs(pi) / np.abs(pi).sum()
    residual = np.inf
    for _ in range(max_steps):
        nxt = At @ pi
        nxt /= nxt.sum()
        residual = np.abs(nxt - pi).sum()
        if residual <= rtol:
            return nxt
        pi = nxt
    if residual <= PERRON_ACCEPT:
        return pi
    raise ValueError(f"the Perron vector of A did not converge: ||A^T pi - pi||_1 = {residual:.1e} after "
                     f"{max_steps} power steps (is A periodic or reducible?)")


def _beta_dense(A, pi):
    import scipy.linalg as la

    s = np.sqrt(pi)
    M = (A - np.outer(np.ones(len(pi)), pi)) * s[:, None] / s[None, :]
    return float(la.norm(M, 2))


def _beta_sparse(csr, pi):
    """Largest singular value of ``Pi^{1/2} (A - 1 pi^T) Pi^{-1/2}`` without forming it."""
    import scipy.sparse.linalg as spla

    n = csr.shape[0]
    s = np.sqrt(pi)
    At = sp.csr_array(csr.T)

    def matvec(v):
        v = np.ravel(v)
        u = v / s
        return s * (csr @ u - pi @ u)

    def rmatvec(v):
        v = np.ravel(v)
        w = s * v
        return (At @ w - pi * w.sum()) / s

    steps = [0, max(1, int(BETA_MAX_WORK // n))]  # (done, allowed)

    def counted(f):
        def call(v):
            steps[0] += 1
            if steps[0] > steps[1]:
                raise _TooMuchWork
            return f(v)
        return call

    op = spla.LinearOperator((n, n), matvec=counted(matvec), rmatvec=counted(rmatvec), dtype=np.float64)
    rng = np.random.default_rng(0)
    try:  # (a Krylov space of 64: 3-6x faster than the default 20 where the top singular values crowd near 1)
        sv = spla.svds(op, k=1, which="LM", return_singular_vectors=False, v0=rng.standard_normal(n), tol=1e-10,
                       ncv=min(64, n - 1))
    except (_TooMuchWork, spla.ArpackNoConvergence):
        raise _not_converged(n, steps[1]) from None
    except spla.ArpackError:  # (a breakdown, "no shifts could be applied": few distinct singular values, e.g. a
        try:                  # star's; the power method, on what is left of the same budget)
            return _top_singular_value(op, rng.standard_normal(n))
        except _TooMuchWork:
            raise _not_converged(n, steps[1], "Krylov and power-method") from None
    return float(sv[0])


def _not_converged(n, allowed, kind="Krylov"):
    return BetaNotConverged(
        f"beta of this network (n = {n}) did not converge in {allowed} {kind} steps (metrics.BETA_MAX_WORK = "
        f"{BETA_MAX_WORK:g} over n): its gap 1 - beta is too small to resolve (a ring of n nodes has about pi^2 / "
        f"n^2 = {math.pi ** 2 / n ** 2:.2g}); what needs it: an mg- method's rounds (give them: --mg-rounds, "
        f"rounds=R), the exact tracker's work check (--tracker perron); or raise BETA_MAX_WORK")


def _top_singular_value(op, v, rtol=1e-13):
    """The largest singular value of ``op`` by the power method on ``op^T op`` from ``v``: ``||op v||`` once it
    changes by less than ``rtol`` (relative) on two steps in a row. ``op``'s products count against its budget (its
    :class:`_TooMuchWork` ends the search)."""
    v = v / np.linalg.norm(v)
    last, calm = -1.0, 0
    while True:
        w = op.matvec(v)
        sigma = float(np.linalg.norm(w))
        u = op.rmatvec(w)
        size = float(np.linalg.norm(u))
        if sigma == 0.0 or size == 0.0:
            return sigma
        calm = calm + 1 if abs(sigma - last) <= rtol * sigma else 0
        if calm >= 2:
            return sigma
        last, v = sigma, u / size


class _TooMuchWork(Exception):
    pass


def metrics_table(named):
    """A text table of the metrics of ``(name, MixingMatrix)`` pairs, or of a dict ``{name: MixingMatrix}`` (each
    column as wide as its widest cell)."""
    header = ["graph", "n", "beta", "1-beta", "kappa", "R (Thm 3)", "loops"]
    rows, notes, no_gap = [], [], False
    named = list(named.items() if isinstance(named, dict) else named)  # (helper 199: a dict had met "not enough
    # values to unpack", its keys read as pairs)
    for k, pair in enumerate(named):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and hasattr(pair[1], "metrics")):
            raise TypeError(f"named[{k}] must be a (name, MixingMatrix) pair, got {type(pair).__name__} "
                            f"{pair!r:.60}")
    for name, A in named:
        m = A.metrics()
        try:
            beta, gap = f"{m.beta:.4f}", _gap_text(m.spectral_gap) if m.has_gap else "0"
            R = str(m.recommended_rounds()) if m.has_gap else "n/a"
            no_gap |= not m.has_gap
        except BetaNotConverged as exc:  # (the row's other columns are known: shown, and why beta is not)
            beta, gap, R = "?", "?", "?"
            notes.append(f"?: {exc}")
        rows.append([str(name), str(m.n), beta, gap, f"{m.kappa:.4f}", R, "yes" if m.self_loops else "no"])
    widths = [max(len(row[k]) for row in [header] + rows) for k in range(len(header))]
    for k, floor in enumerate((24, 6, 8, 8, 8, 9, 5)):  # (the former fixed layout, as the floor)
        widths[k] = max(widths[k], floor)

    def line(cells):
        return cells[0].ljust(widths[0]) + "".join("  " + c.rjust(w) for c, w in zip(cells[1:], widths[1:]))

    text = [line(header), "-" * len(line(header))] + [line(row) for row in rows]
    if no_gap:
        text.append("n/a: beta = 1 (no spectral gap, typically missing self loops): Theorem 3's R is undefined")
    return "\n".join(text + notes)


def _gap_text(gap):
    """``1 - beta`` with four decimals, or in scientific notation where they would show 0.0000."""
    return f"{gap:.4f}" if gap >= 1e-3 or gap == 0 else f"{gap:.3g}"
