"""Objectives ``f(x) = (1/n) sum_i f_i(x)`` with per-node stochastic gradient oracles.

Every objective evaluates all nodes (and all batched repetitions) in one call:
``X`` has shape ``(n, d)`` or ``(reps, n, d)``. Stochastic gradients are keyed
on ``(seed, repetition, node, iteration)``, so a run is reproducible and does
not depend on the thread count, and repetition ``r`` of a batched run equals
the same repetition run alone.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from typing import NamedTuple

import numpy as np

from . import _core
from ._hashing import hash_prefix
from ._checks import (MAX_KEY, as_float_array, check_bool, check_int, check_positive_float, make_rng, precision_of,
                      require_memory)
from ._device import device_operations, is_device_array

__all__ = ["Objective", "Oracle", "SampleOracle", "Optimum", "NonconvexLogistic", "LogisticL2", "Quadratic",
           "LeastSquares", "draw_samples"]


def batch_of(objective):
    """``objective.batch``, the samples one stochastic gradient of a node draws (what the records' ``samples``
    column counts): a positive integer, else a TypeError naming the attribute (a user's ``batch = None`` failed
    deep in a run as ``int * NoneType``, and ``batch = "full"`` filled the column with repeated text)."""
    batch = getattr(objective, "batch", 1)
    whole = isinstance(batch, (int, np.integer)) or (isinstance(batch, (float, np.floating)) and
                                                     float(batch).is_integer())  # (200.0 counts 200)
    if isinstance(batch, (bool, np.bool_)) or not whole or batch < 1:
        raise TypeError(f"{type(objective).__name__}.batch must be a positive integer (the samples one stochastic "
                        f"gradient of a node draws, which the records' samples column counts), got {batch!r}")
    return int(batch)


def optimum_of(objective):
    """``objective.optimum()``, checked: an :class:`Optimum` or None (an override returning a plain tuple failed
    deep in a comparison as "'tuple' object has no attribute 'value'")."""
    best = objective.optimum()
    if best is None:
        return None
    name = type(objective).__name__
    if not isinstance(best, Optimum):
        raise TypeError(f"{name}.optimum() must return an Optimum(x, value) of rowstoch_fast.objectives, or None "
                        f"where the minimiser is unknown; got {type(best).__name__}")
    _check_minimiser(objective, best.x)
    try:
        value = float(best.value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}.optimum()'s value f* must be a real number, got {best.value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name}.optimum()'s value f* is {value} at a finite minimiser: its loss is not finite "
                         f"there (or its own optimum() returned it)")
    if type(objective).optimum is not Objective.optimum:
        key = (value, np.asarray(best.x).tobytes())
        if objective.__dict__.get("_optimum_verified") != key:
            _check_own_value(objective, best, value)
            objective.__dict__["_optimum_verified"] = key  # (once per optimum: f(x*) is a pass over the data)
    return best


def value_rounding(objective):
    """How far, relative to ``max(1, |f|)``, two values of ``objective``'s loss may differ by rounding alone in its
    dtype: ``max(1e-8, 1e4 eps)`` (1e-8 in float64, 1.2e-3 in float32, whose one step at ``|f*| = 0.1`` is 7e-9
    and whose sum over the data rounds further)."""
    return max(1e-8, 1e4 * float(np.finfo(precision_of(objective)).eps))


#: Points near x* at which :func:`value_noise` evaluates the loss (one batched pass over the data).
NOISE_POINTS = 16


def value_noise(objective, best):
    """How far ``objective``'s loss, evaluated in its dtype as the records evaluate it, rounds away from f* near
    its minimiser ``best.x``: the largest ``abs(f(x) - f*)`` over x* and :data:`NOISE_POINTS` points whose
    coordinates lie within 4 eps of x*'s, relatively (a coordinate at 0 stays there: an L1 term's kink, a bound at
    0), mapped by a composite objective's regularizer's prox with a step of eps (a box's other bounds), where the
    loss is finite; and at least one step of ``abs(f*)`` (its ulp). The points' true distance from f* is of order
    eps squared; what is left is the loss's rounding (its sum over the data included), the rounding of iterates
    at x* in that dtype, and any offset between the dtype's f(x*) and f*. Perturbed in every coordinate, a float32
    lasso with 399 of 400 coordinates at 0 had measured its kink, 700x its rounding, and a non-negative quadratic
    with 13 of 20 at the bound one finite point in 17 (helper 140)."""
    dtype = precision_of(objective)
    eps = float(np.finfo(dtype).eps)
    x = np.asarray(best.x, dtype=np.float64).reshape(-1)
    X = x * (1.0 + eps * np.random.default_rng(0).uniform(-4.0, 4.0, (NOISE_POINTS, x.size)))  # (a 0 stays 0)
    regularizer = getattr(objective, "regularizer", None)
    if regularizer is not None:  # (back into a constraint that x* touches: a box's bound; an L1's shrink by eps)
        try:
            X = np.asarray(regularizer.prox(X, eps), dtype=np.float64)
        except Exception:  # noqa: BLE001 - a Prox of the user's that refuses: the points left outside drop out
            pass
    X = np.vstack([x, X]).astype(dtype).reshape((NOISE_POINTS + 1,) + np.shape(best.x))
    with np.errstate(all="ignore"):
        values = np.asarray(objective.value_and_gradient_at(X)[0], dtype=np.float64)
    if values.shape != (NOISE_POINTS + 1,):  # (a loss of the user's that sums a batch: its "rounding" had been the
        # sum of 17 values, 2.1, and an f* 0.5 too low passed as rounding, helper 274)
        raise ValueError(f"{type(objective).__name__}.value_and_gradient_at gave values of shape {values.shape} for "
                         f"{NOISE_POINTS + 1} points: one value per point is needed to measure its rounding")
    values = values[np.isfinite(values)]  # (a point still outside a constraint: F = +inf there)
    step = float(np.spacing(np.asarray(abs(float(best.value)), dtype=dtype)))
    return max(float(np.abs(values - float(best.value)).max(initial=0.0)), step)


def past_rounding(objective, at, off, start, unmeasured=True):
    """Whether ``off``, a difference between values of ``objective``'s loss near its minimiser, is more than their
    rounding: above :func:`value_rounding` relative to the larger of ``|f(x*)|`` (``at``: the
    :class:`Optimum` with the loss's own value at x*) and the start's ``f(x0) - f(x*)`` (``start``; at most 1, and 1
    where it is not positive), and above four times the loss's rounding measured around ``at``
    (:func:`value_noise`); ``unmeasured`` where that cannot be measured (a loss of the user's that refuses points
    in a batch). Relative to ``max(1, |f|)`` alone, data in small units had hidden an f* off by 5e-9 beside a start
    1e-6 above it (helpers 265, 267); a loss of large terms that cancel at x* (f* = 0 at ``|x*| = 1e5``) rounds
    further than the dtype's relative bar."""
    unit = min(start, 1.0) if math.isfinite(start) and start > 0 else 1.0
    if off <= value_rounding(objective) * max(abs(float(at.value)), unit):
        return False
    try:
        return off > 4.0 * value_noise(objective, at)
    except Exception:  # noqa: BLE001 - a loss of the user's that refuses points in a batch
        return unmeasured


def _check_own_value(objective, best, value):
    """An ``optimum()`` of the user's: its ``value`` should be ``f(x)`` at its ``x``; a RuntimeWarning (once per
    optimum) where they differ by more than rounding (:func:`past_rounding`, from the start ``objective.x0()``, the
    runs' default; where the loss cannot measure its rounding, the bar alone). One 0.5 below f(x*) (a constant term
    dropped) set every suboptimality 0.5 too high: the tuner and the ranks worked on a metric saturated at 0.5,
    unsaid (one too high is seen as records below f*). A warning, not a refusal. Skipped where the objective has no
    loss to evaluate."""
    x = np.asarray(best.x, dtype=np.float64)
    try:
        f_x = float(objective.value_and_gradient_at(x)[0])
    except NotImplementedError:
        return
    off = abs(value - f_x)
    if not math.isfinite(f_x) or off <= value_rounding(objective) * abs(f_x):  # (a value of its own that is f(x):
        # one pass)
        return
    try:  # (the default start's suboptimality: a pass of its own)
        start = float(objective.value_and_gradient_at(np.asarray(objective.x0(), dtype=np.float64))[0]) - f_x
    except Exception:  # noqa: BLE001 - a start of the user's that its loss refuses: the bar of max(1, |f(x)|)
        start = math.nan
    if not past_rounding(objective, best._replace(value=f_x), off, start):
        return
    import warnings

    warnings.warn(f"{type(objective).__name__}.optimum()'s value f* = {value!r} is not f(x*) = {f_x!r} at its "
                  f"minimiser (off by {value - f_x:.3g}): every suboptimality f(x_bar) - f* is off by as much; "
                  f"return Optimum(x, f(x)), or override _solve() and let optimum() compute f*", RuntimeWarning,
                  stacklevel=3)


def _check_minimiser(objective, x):
    """``x``, refused (ValueError) unless a finite real array of shape ``(d,)``: a minimiser that is NaN (a Newton
    iteration that failed, a ``_solve`` of the user's) made every record of the suboptimality NaN, ``rf.run`` said
    "done" and ``compare()`` "diverged at every rate" of iterates that converged (or a refusal of "X")."""
    name, x = type(objective).__name__, np.asarray(x)
    d = getattr(objective, "d", None)
    if x.dtype.kind not in "fiu" or (d is not None and x.shape != (d,)):
        raise ValueError(f"{name}.optimum()'s minimiser must be a real array of shape (d,) = ({d},), got "
                         f"{x.dtype} of shape {x.shape} (from its _solve(), or its own optimum())")
    if not np.isfinite(x).all():
        k = int(np.flatnonzero(~np.isfinite(x))[0])
        raise ValueError(f"{name}.optimum()'s minimiser is not finite (x[{k}] = {x[k]}): its _solve() (or its own "
                         f"optimum()) failed; return None where the minimiser is unknown")
    return x


class Optimum(NamedTuple):
    """The minimiser ``x`` of ``f = (1/n) sum_i f_i`` and its value ``value = f(x)`` (:meth:`Objective.optimum`)."""

    x: np.ndarray
    value: float


class Oracle:
    """A stateful stochastic gradient oracle ``grad_fn(X) -> G`` for :meth:`PullDiagGT.step`.

    Call ``k`` (from 0) draws the samples of iteration ``k``. ``batches`` is the
    number of independent mini-batches averaged per call (``R`` for
    MG-Pull-Diag-GT, eq. 12b). The last gradient is kept in ``last``.

    Attributes
    ----------
    iteration : int
        Calls made so far (the iteration index of the next call).
    last : array or None
        The gradients of the last call (a new array per call).
    """

    #: The attributes of its position in its stream: a step that fails or is interrupted after calling it puts
    #: them back with its own state (:meth:`~rowstoch_fast.algorithms.Optimizer.step`).
    _position = ("iteration", "last")

    def __init__(self, objective, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        self.objective = objective
        self.nodes = Objective._nodes(objective, nodes)  # (checked: [1.5] had been node 1, [True, False] nodes 1, 0)
        _, self.seed, self.batches, self.rep_offset = _check_stream(0, seed, batches, rep_offset)
        self.rep_period = _check_period(rep_period)
        self.iteration = 0
        self.last = None

    def __repr__(self):
        return (f"Oracle({self.objective!r}, seed={self.seed}"
                + (f", batches={self.batches}" if self.batches != 1 else "")
                + (f", rep_offset={self.rep_offset}" if self.rep_offset else "") + f", iteration={self.iteration})")

    def __call__(self, X):
        extra = {"rep_period": self.rep_period} if self.rep_period else {}  # (an objective of older code has none)
        G = self.objective.stochastic_gradient(X, self.iteration, seed=self.seed, batches=self.batches,
                                               rep_offset=self.rep_offset, nodes=self.nodes, **extra)
        self.iteration += 1
        self.last = G
        return G

    # the per-sample protocol (variance-reduced methods, :class:`~rowstoch_fast.GTSAGA`)
    @property
    def samples(self):
        """Samples per node of a finite-sum objective (None for one without per-sample gradients)."""
        return self.objective.samples_per_node

    def sample_gradient(self, X, idx):
        """The gradient at ``X[..., i, :]`` of sample ``idx[..., i]`` of node ``i`` (no draw)."""
        return self.objective.sample_gradient(X, idx, nodes=self.nodes)

    def sample_gradients(self, X, samples):
        """The gradients at ``X`` of every node's samples ``samples`` (a 1-D array of ids), one after another:
        shape ``(len(samples),) + X.shape`` (:meth:`Objective.sample_gradients`; no draw)."""
        return self.objective.sample_gradients(X, samples, nodes=self.nodes)

    def prox(self, V, step):
        """The local proximal operators at ``V`` (:meth:`Objective.prox_local`, for the rows ``nodes``): what an
        ADMM-type method (:class:`~rowstoch_fast.ADMM`) takes instead of gradients."""
        return self.objective.prox_local(V, step, nodes=self.nodes)

    def sample(self, X):
        """Call ``k``'s draw: one sample per node and repetition, uniformly (keys ``seed``, repetition, node,
        ``k``), and its gradients at ``X``; returns ``(G, idx)`` (``idx`` on ``X``'s device: a CuPy array for a
        CuPy ``X``)."""
        idx = draw_samples(self.samples, X.shape[:-1], self.iteration, self.seed, self.rep_offset, self.nodes,
                           getattr(self, "rep_period", 0), device=is_device_array(X))
        G = self.sample_gradient(X, idx)
        self.iteration += 1
        self.last = G
        return G, idx


#: The fifth key of :func:`draw_samples`' hashes (a network's loss draws have a node id there: below 2^62).
_SAMPLE_KEY = 2**63 - 1

#: The multiply-adds one call of an optimum's solve may take (rows x d^2): a Newton Hessian or a least-squares
#: factorisation over more rows goes a chunk of rows at a time, so that Ctrl-C and SIGTERM are answered between
#: chunks (helper 263: logistic-l2 at d = 3,000 had spent 36 s a Newton step in one BLAS call, least squares at
#: 64,000 x 3,000 33 s in one LAPACK call, deaf to signals). About 0.1-0.5 s of BLAS here; problems within it take
#: the one call they always did (the same bits).
SOLVE_CALL_WORK = 1 << 30


def _rows_per_call(d):
    """The rows of a d-column matrix one call of an optimum's solve takes (:data:`SOLVE_CALL_WORK`), at least 1."""
    return max(1, SOLVE_CALL_WORK // max(1, d * d))


def _weighted_gram(H, w):
    """``H^T diag(w) H``, one BLAS call, or a sum over chunks of rows where there are more than
    :func:`_rows_per_call` (the same up to rounding)."""
    rows = _rows_per_call(H.shape[1])
    if len(H) <= rows:
        return (H.T * w) @ H
    out = np.zeros((H.shape[1], H.shape[1]))
    for a in range(0, len(H), rows):
        out += (H[a:a + rows].T * w[a:a + rows]) @ H[a:a + rows]
    return out


#: The bytes of the weighted copy of a chunk of rows that :func:`_weighted_grams` multiplies at once.
GRAM_CHUNK_BYTES = 8 << 20


def _weighted_grams(H, w):
    """``sum_m w[..., i, m] h_im h_im^T`` for every node ``i`` of ``H`` (n, M, d), shape ``w.shape[:-1] + (d, d)``:
    BLAS products over chunks of rows whose weighted copy stays within :data:`GRAM_CHUNK_BYTES` (NumPy's
    three-operand einsum had taken 8-19x the time, 66 s an ADMM step of logistic-l2 at d = 600, helper 263; the
    same up to rounding)."""
    n, M, d = H.shape
    out = np.zeros(w.shape[:-1] + (d, d))
    step = max(1, GRAM_CHUNK_BYTES // (8 * d * max(1, w.size // max(1, M))))
    for a in range(0, M, step):
        rows = H[:, a:a + step]
        out += np.matmul((rows * w[..., a:a + step, None]).swapaxes(-1, -2), rows)
    return out


def _least_squares(H, y):
    """The least-squares solution of ``H x = y`` (the smallest where the rows do not determine it): LAPACK's
    ``lstsq`` in one call, or, over more rows than :func:`_rows_per_call`, ``lstsq`` of the triangle that a QR
    factorisation of ``[H y]`` taken a chunk of rows at a time leaves (the same solutions: ``H x - y`` and its
    triangle's residual have the same norm up to a constant; the cut-off for small singular values LAPACK's own)."""
    N, d = H.shape
    rows = _rows_per_call(d + 1)
    if N > rows:
        R = np.zeros((0, d + 1))
        for a in range(0, N, rows):
            R = np.linalg.qr(np.vstack([R, np.column_stack([H[a:a + rows], y[a:a + rows]])]), mode="r")
        H, y = R[:d, :d], R[:d, d]
    eps = np.finfo(np.float64).eps
    x, _, rank, _ = np.linalg.lstsq(H, y, rcond=eps * max(N, d))
    if rank == min(H.shape):  # (nothing cut: a smaller cut-off solves the same)
        return x
    solutions = [x, np.linalg.lstsq(H, y, rcond=eps)[0]]
    # (LAPACK's cut-off drops singular values below eps max(N, d) s_max, whose directions still lower the loss:
    # at a condition of 1e14 on 128 rows f* had been 1.4% above the optimum, at 1e11 on 65,536 rows 1,900 times the
    # harness's rounding, helper 265; the smaller cut-off's solution is kept only where its residual is lower by
    # more than rounding: on data of dependent columns it is a point of norm 1e13, no better)
    residuals = [float(np.linalg.norm(H @ x - y)) for x in solutions]
    rounding = 16 * eps * (float(np.linalg.norm(y)) + max(float(np.linalg.norm(np.abs(H) @ np.abs(x)))
                                                           for x in solutions))  # (of H x's sums, at each x)
    return solutions[1] if residuals[1] < residuals[0] - rounding else solutions[0]


def draw_samples(samples, shape, iteration, seed=0, rep_offset=0, nodes=None, rep_period=0, device=False):
    """One sample index per node and repetition, uniform in ``0..samples - 1``, as int64 of ``shape`` (``(n,)`` or
    ``(reps, n)``; ``nodes``: the global ids of the rows, default all): a pure function of ``(seed, repetition,
    node, iteration)``, so a process or a GPU that owns a node draws its index alone (counter-based, like the
    networks' losses). Replica ``r`` is repetition ``rep_offset + r`` (``rep_offset + r % rep_period`` with a
    ``rep_period``). ``device=True``: the same draws made on the current GPU, a CuPy array (what an oracle does
    for a CuPy ``X``: the draws are made where the table they index lives, not copied there)."""
    samples = check_int(samples, "samples", minimum=1, maximum=2**63 - 1)
    if type(shape) is not tuple:  # (a list, a torch.Size; an int had met len())
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"shape must be a tuple (n,) or (reps, n), got {type(shape).__name__} {shape!r}")
        shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError(f"shape must be (n,) or (reps, n), got {shape!r}")
    for value, name in ((iteration, "iteration"), (seed, "seed"), (rep_offset, "rep_offset")):
        if type(value) is not int or value < 0:
            check_int(value, name, minimum=0, maximum=MAX_KEY)
    rep_period = _check_period(rep_period)
    reps = shape[0] if len(shape) == 2 else 1
    all_nodes = nodes is None
    ids = np.empty(shape[-1], dtype=np.int64) if all_nodes else np.ascontiguousarray(nodes, dtype=np.int64)
    if not all_nodes and ids.shape != (shape[-1],):
        raise ValueError(f"nodes must hold one global id per row ({shape[-1]}), got shape {ids.shape}")
    rep_ids = np.ascontiguousarray(rep_offset + _replicas(reps, rep_period), dtype=np.int64)
    # (compiled, on the kernels' threads: the chain of uniform_hash(seed, iteration, rep, node, _SAMPLE_KEY); the
    # NumPy transcription is tests/test_objectives.py's; 26-33 ms in NumPy for 2^20 nodes, GT-SAGA's step on a GPU)
    if check_bool(device, "device"):
        idx = device_operations().draw_samples(hash_prefix(seed, iteration), rep_ids, None if all_nodes else ids,
                                               shape[-1], _SAMPLE_KEY, samples)
    else:
        idx = _core.draw_samples(hash_prefix(seed, iteration), rep_ids, ids, _SAMPLE_KEY, samples, all_nodes)
    return idx.reshape(shape)


class SampleOracle:
    """A per-sample gradient oracle from a function: what :class:`~rowstoch_fast.GTSAGA` steps with when the
    problem is not one of :mod:`rowstoch_fast.objectives` (whose :meth:`Objective.oracle` has these methods).

    Parameters
    ----------
    sample_grad : callable
        ``sample_grad(X, idx) -> G``: the gradient at ``X[..., i, :]`` of sample ``idx[..., i]`` of node ``i``
        (``X`` of shape (n, d) or (reps, n, d); under MPI this process's rows, ``idx`` of ``X.shape[:-1]``, int64,
        on ``X``'s device: a CuPy array when ``X`` is one).
    samples : int
        Samples per node, ``m``: node ``i``'s function is ``(1/m) sum_l f_il``.
    seed, rep_offset, nodes
        As in :class:`Oracle` (the draws' keys; ``nodes``: the global ids of the rows ``X`` holds).

    Examples
    --------
    >>> import numpy as np
    >>> b = np.arange(12.0).reshape(4, 3)  # f_il(x) = (x - b_il)^2 / 2: 4 nodes of 3 samples, d = 1
    >>> oracle = SampleOracle(lambda X, idx: X - np.take_along_axis(b, idx[:, None], 1), samples=3)
    >>> G, idx = oracle.sample(np.zeros((4, 1)))
    >>> G.shape, idx.shape, bool((-G[:, 0] == b[np.arange(4), idx]).all())
    ((4, 1), (4,), True)
    """

    _position = Oracle._position  # (put back with a step that fails: :class:`Oracle`'s)

    def __init__(self, sample_grad, samples, seed=0, rep_offset=0, nodes=None):
        if not callable(sample_grad):
            raise TypeError(f"sample_grad must be callable (X, idx) -> G, got {type(sample_grad).__name__}")
        self.sample_grad = sample_grad
        self.samples = check_int(samples, "samples", minimum=1)
        self.nodes = None if nodes is None else np.ascontiguousarray(nodes, dtype=np.int64)
        _, self.seed, _, self.rep_offset = _check_stream(0, seed, 1, rep_offset)
        self.iteration = 0
        self.last = None

    def sample_gradient(self, X, idx):
        """``sample_grad(X, idx)``."""
        return self.sample_grad(X, idx)

    sample = Oracle.sample


#: The objective arithmetic (``f + g``, ``a * f``, ``f + r``), provided by :mod:`rowstoch_fast.composite` when it is
#: imported (``import rowstoch_fast`` imports it): this layer does not import the one built on it.
_ARITHMETIC = {}


def provide_arithmetic(add, scale):
    """Register ``add(f, other)`` and ``scale(f, a)`` (:mod:`rowstoch_fast.composite` calls this once)."""
    _ARITHMETIC.update(add=add, scale=scale)


def _arithmetic(kind):
    if not _ARITHMETIC:  # (only where rowstoch_fast.composite was never imported: import rowstoch_fast does)
        raise RuntimeError("objective arithmetic needs rowstoch_fast.composite: import rowstoch_fast first")
    return _ARITHMETIC[kind]


def _kept(array, given):
    """``array`` (checked from the caller's ``given``) as an objective keeps it: read-only, and its own copy where
    it is memory the caller can still write (the caller's array, or a view of other memory). An objective that had
    kept the caller's array followed its later changes in its gradients while its cached optimum did not: a
    converged run's suboptimality read 0.43, and DGD tied EXTRA and NIDS in a comparison (helper 267). A read-only
    array is kept as it is (data too large to hold twice: pass it read-only, e.g. a memory map opened with
    ``mode="r"``), unless it views memory that is writeable (a read-only view of the caller's writeable array had
    been kept without a copy, following the array's later changes)."""
    if array.flags.writeable and (array is given or not array.flags.owndata) or _writeable_beneath(array):
        require_memory(array.nbytes, f"a copy of the data ({array.shape[0]} x "
                       f"{array.shape[1] if array.ndim > 1 else 1} {array.dtype})",
                       "pass it read-only (array.setflags(write=False), and the array it views too) to keep it "
                       "without a copy")
        array = array.copy()
    array.setflags(write=False)
    view = array.view()  # (a view of read-only memory: ``f.y.setflags(write=True)`` cannot undo it, helper 267)
    view.setflags(write=False)
    return view


def _writeable_beneath(array):
    """Whether an array views memory that some array can still write: one of the arrays beneath it is writeable."""
    base = array.base
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return True
        base = base.base
    return False


def _handed_over(*arrays):
    """The arrays a constructor of the package made and hands to an objective (nobody else writes them): made
    read-only, so that :func:`_kept` keeps them without a copy."""
    for array in arrays:
        while isinstance(array, np.ndarray):  # (and the memory it views: a view of writeable memory can be made
            array.setflags(write=False)  # writeable again)
            array = array.base
    return arrays


class _Defined:
    """What an objective or a regularizer of the package is defined by: the attributes :attr:`_DEFINING` names,
    among them the objectives and regularizers it holds. Assigning one (``f.lam = 1.0``) drops what was derived
    from them (:attr:`_DERIVED`) and counts a change, which :meth:`Objective.optimum`'s cache reads
    (:func:`_changes`): the gradients had followed a new ``lam`` while the cached optimum kept the old one (a
    converged run's suboptimality 0.25, a composite's 3.1, helper 267). (Named, not every public attribute: a
    subclass's own counter, ``self.calls += 1`` at every pass, would have dropped the optimum at each.)"""

    #: The caches derived from what defines it (the optimum's is keyed on the stamps, :func:`_changes`).
    _DERIVED = ("_means", "_gram", "_prox_checked")
    #: The attributes that define its function (none known of a class of the user's own).
    _DEFINING = frozenset()

    def __setattr__(self, name, value):
        if name in self._DEFINING:
            state = self.__dict__
            for key in self._DERIVED:
                state.pop(key, None)
            state["_changed"] = next(_STAMPS)
        object.__setattr__(self, name, value)


#: The stamps of assignments to what defines an objective or a regularizer: one count for all, each newer than every
#: one before, so that the newest in a tree of parts moves on whatever part is assigned or swapped in (a sum of
#: counts per object had stayed the same where a part was swapped for one assigned as often: a stale f*, helper 268).
_STAMPS = itertools.count(1)


def _changes(thing, depth=0):
    """The newest stamp (:data:`_STAMPS`) of an assignment to what defines ``thing`` (an objective or a regularizer)
    or any of its parts: it moves on at every such assignment, so a cache that saw another is stale."""
    state = getattr(thing, "__dict__", {})
    newest = state.get("_changed", 0)
    if depth < 32:  # (parts of parts: f + g + L1(...); a cycle a user made stops here)
        for key in getattr(thing, "_DEFINING", ()):
            value = state.get(key)
            for part in value if isinstance(value, tuple) else (value,):
                if isinstance(part, _Defined):
                    newest = max(newest, _changes(part, depth + 1))
    return newest


class Objective(_Defined):
    """Base class: ``n`` local functions of ``x`` in ``R^d``.

    Subclasses implement :meth:`stochastic_gradient`, :meth:`full_gradient` and
    :meth:`loss`; the metrics here follow from them. Objectives add (``f + g``: node ``i`` has ``f_i + g_i``),
    scale (``a * f``) and take a regularizer (``f + L1(0.1)``: a composite objective, see
    :mod:`rowstoch_fast.composite`).

    Notes
    -----
    An objective of your own sets the attributes ``n``, ``d`` and ``dtype`` (``np.float64``) and implements:

    - ``stochastic_gradient(X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0)``:
      ``X`` arrives as ``(reps, n, d)`` (replicas of a batched run: the repetitions of a run, a tuner's
      candidate rates), or ``(n, d)``; the gradients have ``X``'s shape. Replica ``r`` draws the samples of
      repetition ``rep_offset + r`` (``rep_offset + r % rep_period`` with a ``rep_period > 0``), row ``i`` is
      node ``nodes[i]`` (node ``i`` where ``nodes`` is None), and a draw depends only on ``(seed, repetition,
      node, iteration)`` (``batches``: the average of that many independent mini-batches). Without noise,
      return :meth:`full_gradient` and set ``stream_free = True``;
    - ``full_gradient(X, nodes=None)``, and ``loss(X, nodes=None)`` of shape ``X.shape[:-1]`` (``f_i(x_i)`` of
      every row).

    Optionally: :meth:`x0` (the start; default ``0.01 N(0, I_d)``, seed 42); ``_solve()``, the minimiser of
    ``f``, shape ``(d,)`` (the harness then ranks by the suboptimality ``f(x_bar) - f*``, else by the gradient
    norm at the mean model; :meth:`optimum` caches it with ``f*``), or :meth:`optimum` itself returning an
    :class:`Optimum`; ``batch``, the samples one stochastic gradient of a node draws (the records' ``samples``
    column: a positive integer, default 1); :attr:`convex`; :attr:`samples_per_node` and ``_sample_gradient``
    for the variance-reduced methods.

    The objectives of the package keep their data read-only: an array you pass is copied where you could still
    write it (a read-only one, e.g. a memory map opened with ``mode="r"``, is kept as it is, without a copy), so
    changing yours afterwards changes nothing here. Assigning an attribute that defines ``f`` (``f.lam = 1.0``,
    a regularizer's or a part's) is taken whole: :meth:`optimum` is computed again for it.
    """

    n: int
    d: int
    #: Samples one stochastic gradient of a node draws (what the records' ``samples`` column counts).
    batch = 1

    def x0(self, seed=42, scale=0.01):
        """The start, the same on every node: ``scale * N(0, I_d)`` (seed 42), shape ``(d,)``; ``scale`` a finite
        real number >= 0."""
        return check_positive_float(scale, "scale", allow_zero=True) * make_rng(seed).standard_normal(self.d)

    def _points(self, x, name="x"):
        """``x`` as float64 points of shape (d,) or (reps, d), or a TypeError/ValueError naming ``name``: a column
        (d, 1) had broadcast into d points, a complex ``x`` lost its imaginary part with NumPy's warning only."""
        arr = np.asarray(x)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{name} must be a real array of shape (d,) = ({self.d},) or (reps, d), got dtype "
                            f"{arr.dtype}")
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.d:
            raise ValueError(f"{name} must have shape (d,) = ({self.d},) or (reps, d), got shape {arr.shape}")
        return arr.astype(np.float64, copy=False)

    #: Whether every ``f_i`` is convex: the composite and summed objectives then compute their optimum.
    convex = False
    #: Whether :meth:`stochastic_gradient` is the same function of ``X`` on every stream (seed, replica,
    #: iteration): no draw, no noise (a whole-data batch of :class:`LeastSquares`, :class:`Quadratic` without
    #: noise). Replicas of one rate then give the same trajectory: the tuner runs one (``compare.tuning``).
    stream_free = False

    @property
    def whole_data(self):
        """Whether :meth:`stochastic_gradient` is the gradient of the whole data on every stream, up to the order of
        its sums: :attr:`stream_free` objectives, and the logistic ones with a batch of every sample (their kernel
        sums a permutation of them). Replicas of one rate then run one trajectory up to rounding, and the tuner
        refines their rates as for exact gradients (``compare.tuning.exact_tuning``)."""
        return bool(self.stream_free)

    def __add__(self, other):
        return _arithmetic("add")(self, other)

    def __radd__(self, other):
        if isinstance(other, (int, float)) and not isinstance(other, bool) and other == 0:  # sum([f, g, ...])
            return self
        return _arithmetic("add")(self, other)

    def __mul__(self, a):
        return _arithmetic("scale")(self, a)

    __rmul__ = __mul__

    def stationarity(self, x, g):
        """What the harness's gradient-norm metrics take the norm of at models ``x`` with smooth gradients ``g``
        (both ``(..., d)``): ``g`` itself here; a composite objective's proximal-gradient residual."""
        return g

    #: Whether :meth:`prox_local` has a closed form or a solver here (what ADMM-type methods need).
    has_local_prox = False

    def prox_local(self, V, step, nodes=None):
        """``argmin_x f_i(x) + ||x - v_i||^2 / (2 t_i)`` of every row ``v_i`` of ``V``: the local proximal
        operator that ADMM-type methods take instead of a gradient. A CuPy ``V`` is solved on the host and
        returned on its GPU.

        Parameters
        ----------
        V : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        step : float or array
            ``t > 0``: one number, or one per row, broadcasting against ``V.shape[:-1]``.
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            The minimisers, shape of ``V``."""
        if not self.has_local_prox:
            raise TypeError(f"{type(self).__name__} has no local proximal operator (Quadratic, LeastSquares and "
                            "LogisticL2 have one)")
        nodes = self._nodes(nodes)
        device = is_device_array(V)
        Vh = self._check_X(V.get() if device else V, nodes, "V").astype(np.float64)
        t = np.asarray(step.get() if hasattr(step, "get") else step, dtype=np.float64)
        try:
            t = np.broadcast_to(t, Vh.shape[:-1])
        except ValueError:
            raise ValueError(f"step must be one number or one per row of V (shape {Vh.shape[:-1]}), got shape "
                             f"{t.shape}") from None
        if not (np.isfinite(t).all() and (t > 0).all()):
            raise ValueError("step must be positive and finite")
        own = np.arange(self.n) if nodes is None else nodes
        X = self._prox_local(Vh, t, own).astype(self.dtype)
        return device_operations().to_gpu(X) if device else X

    def _prox_local(self, V, t, own):  # pragma: no cover - with has_local_prox
        raise NotImplementedError

    def hvp(self, X, V, nodes=None):
        """Hessian-vector products ``grad^2 f_i(x_i) v_i`` of every row, in closed form where the objective has one.

        Parameters
        ----------
        X, V : array, shape (n, d) or (reps, n, d)
            The points ``x_i`` and the vectors ``v_i``, of the same shape.
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            The products, shape of ``X``."""
        raise NotImplementedError(f"{type(self).__name__} has no Hessian-vector product (Quadratic, LeastSquares, "
                                  "NonconvexLogistic and LogisticL2 have one)")

    def _nodes(self, nodes):
        """Global ids of the rows of X (all nodes when None)."""
        if nodes is None:
            return None
        given = np.asarray(nodes)
        if given.size and given.dtype.kind not in "iu":
            raise TypeError(f"nodes must be integer node ids, got dtype {given.dtype}")
        nodes = np.ascontiguousarray(given, dtype=np.int64)
        if nodes.ndim != 1 or (nodes.size and (nodes.min() < 0 or nodes.max() >= self.n)):
            raise ValueError(f"nodes must be a 1-D array of node ids in 0..{self.n - 1}")
        return nodes

    #: Value type of the data, of the ``X`` the gradients read and of what they return.
    dtype = np.dtype(np.float64)

    def _check_X(self, X, nodes=None, name="X"):
        X = as_float_array(X, name, self.dtype, ndim=(2, 3))
        m = self.n if nodes is None else len(nodes)
        if X.shape[-2:] != (m, self.d):
            raise ValueError(f"{name} must have shape (n, d) = ({m}, {self.d}) or (reps, n, d), got {X.shape}")
        return X

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None,
                            rep_period=0):  # pragma: no cover
        """Stochastic gradients of the rows of ``X``, one mini-batch a row; a draw depends only on ``(seed,
        repetition, node, iteration)``.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        iteration : int
            The step's index, a key of its draws (``>= 0``).
        seed : int
            The stream's key.
        batches : int
            The average of this many independent mini-batches (``>= 1``).
        rep_offset : int
            Replica ``r`` of ``X`` draws the samples of repetition ``rep_offset + r``.
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.
        rep_period : int
            With ``rep_period > 0``, replica ``r`` draws those of repetition ``rep_offset + r % rep_period``:
            replicas that share their streams, as a tuner's candidate rates do.

        Returns
        -------
        array
            The gradients, shape of ``X``."""
        raise NotImplementedError

    def full_gradient(self, X, nodes=None):  # pragma: no cover - abstract
        """Exact local gradients ``grad f_i(x_i)`` of every row.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            The gradients, shape of ``X``."""
        raise NotImplementedError

    #: Samples per node of a finite sum ``f_i = (1/m) sum_l f_il`` (None: no per-sample gradients).
    samples_per_node = None

    def sample_gradient(self, X, idx, nodes=None):
        """The gradient at ``X[..., i, :]`` of sample ``idx[..., i]`` of node ``i``: what variance-reduced methods
        (:class:`~rowstoch_fast.GTSAGA`) take. A CuPy ``X`` is computed on the host and returned on its GPU.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        idx : array of int, shape ``X.shape[:-1]``
            A sample of each row's node, in ``0 .. samples_per_node - 1``.
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            The gradients, shape of ``X``."""
        return self._per_sample(X, idx, nodes, "idx")

    def sample_gradients(self, X, samples, nodes=None):
        """``G[k] = sample_gradient(X, idx)`` with every entry of ``idx`` equal to ``samples[k]``: the gradients
        of each node's samples ``samples`` at ``X`` in one call (what a variance-reduced method's table or
        snapshot of all ``m`` samples takes, a chunk at a time), the same values. A CuPy ``X`` is computed on
        the host and returned on its GPU.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        samples : array of int, shape (k,)
            Sample indices, each taken at every row.
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            Shape ``(len(samples),) + X.shape``."""
        return self._per_sample(X, samples, nodes, "samples")

    def _per_sample(self, X, ids, nodes, name):
        """:meth:`sample_gradient` (``name`` "idx": a sample id per row of ``X``) or :meth:`sample_gradients`
        ("samples": a 1-D array of ids, each for every row), the ids checked, computed on the host."""
        if self.samples_per_node is None:
            raise TypeError(f"{type(self).__name__} has no per-sample gradients (it is not a finite sum); "
                            f"LeastSquares, NonconvexLogistic and LogisticL2 have them")
        nodes = self._nodes(nodes)
        device = is_device_array(X)
        Xh = self._check_X(X.get() if device else X, nodes)
        ids = np.asarray(ids.get() if hasattr(ids, "get") else ids)
        if name == "idx" and (ids.shape != Xh.shape[:-1] or ids.dtype.kind not in "iu"):
            raise ValueError(f"idx must hold integer sample ids of shape {Xh.shape[:-1]} (X's without d), got "
                             f"{ids.dtype} of shape {ids.shape}")
        if name == "samples" and (ids.ndim != 1 or ids.dtype.kind not in "iu"):
            raise ValueError(f"samples must be a 1-D array of integer sample ids, got {ids.dtype} of shape "
                             f"{ids.shape}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.samples_per_node):
            raise ValueError(f"{name} must be sample ids in 0..{self.samples_per_node - 1}")
        if name == "samples":  # (every row's id k: a leading axis of len(samples))
            ids = np.broadcast_to(ids.astype(np.int64).reshape((-1,) + (1,) * (Xh.ndim - 1)),
                                  (ids.size,) + Xh.shape[:-1])
        own = np.arange(Xh.shape[-2]) if nodes is None else nodes
        G = self._sample_gradient(Xh, ids, own)
        return device_operations().to_gpu(G) if device else G

    def _sample_gradient(self, X, idx, own):
        """:meth:`sample_gradient` on host arrays, checked (``own``: the global node id of each row; ``idx`` may
        have more leading axes than ``X``, :meth:`sample_gradients`)."""
        raise NotImplementedError  # pragma: no cover - with samples_per_node

    def loss(self, X, nodes=None):  # pragma: no cover - abstract
        """Local losses ``f_i(x_i)`` of every row.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        array
            Shape ``X.shape[:-1]``."""
        raise NotImplementedError

    def evaluate(self, X, nodes=None):
        """``(full_gradient(X), loss(X))``; objectives that share work between the two override this.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The points, one row per node (and replica).
        nodes : array of int, optional
            The global node ids of the rows of ``X`` (row ``i`` is node ``nodes[i]``: an MPI rank's share);
            default all nodes, in order.

        Returns
        -------
        G : ndarray
            Exact local gradients, shape of ``X``.
        L : ndarray
            Local losses, shape ``X.shape[:-1]``.
        """
        G, L = self.full_gradient(X, nodes), self.loss(X, nodes)
        # (an objective of the user's: a loss summed to a scalar, a gradient as a list, failed later as "axis -1 is
        # out of bounds" or "'list' object has no attribute 'mean'", naming neither the objective nor the method)
        shape, name = tuple(np.shape(X)), type(self).__name__
        if not hasattr(G, "shape") or tuple(G.shape) != shape:
            raise TypeError(f"{name}.full_gradient must return the local gradients, an array of X's shape {shape}; "
                            f"got {type(G).__name__}" + (f" of shape {tuple(G.shape)}" if hasattr(G, "shape") else ""))
        if not hasattr(L, "shape") or tuple(L.shape) != shape[:-1]:
            raise TypeError(f"{name}.loss must return the local losses f_i(x_i), an array of shape X.shape[:-1] = "
                            f"{shape[:-1]}; got {type(L).__name__}"
                            + (f" of shape {tuple(L.shape)}" if hasattr(L, "shape") else ""))
        return G, L

    def __repr__(self):
        # (short, and no pass over the data: the default <... object at 0x...> had told a notebook nothing)
        try:
            params = {"n": int(self.n), "d": int(self.d), **self._parameters()}
        except Exception:  # noqa: BLE001 - an objective of the user's without them
            return object.__repr__(self)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())})"

    def describe(self):
        """What identifies this objective (type, sizes, parameters, a fingerprint of its data) as a plain dict.

        A checkpoint stores it and :func:`~rowstoch_fast.run` refuses to resume
        one made for another objective.
        """
        digest = hashlib.sha1()
        for arr in self._data_arrays():  # (a contiguous array's own bytes, not a copy: `tobytes()` had doubled the
            # memory of 3.3 GB of data and taken 4.6-9.8 s a call, helper 263)
            digest.update(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
        return {"type": type(self).__name__, "n": int(self.n), "d": int(self.d), **self._parameters(),
                "data_sha1": digest.hexdigest()[:16], **getattr(self, "source", {}), **self._test_fingerprint()}

    def _data_arrays(self):
        return ()

    def _parameters(self):
        return {}

    def oracle(self, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        """A fresh :class:`Oracle` starting at iteration 0: ``oracle(X)`` is :meth:`stochastic_gradient` at the next
        iteration.

        Parameters
        ----------
        seed, batches, rep_offset, nodes, rep_period
            As in :meth:`stochastic_gradient`.

        Returns
        -------
        Oracle"""
        return Oracle(self, seed=seed, batches=batches, rep_offset=rep_offset, nodes=nodes, rep_period=rep_period)

    def gradient_norm(self, X):
        """The paper's metric ``||(1/n) sum_i grad f_i(x_i)||`` (Appendix E.2).

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The node models (of every replica).

        Returns
        -------
        float or array
            One value per repetition: shape ``X.shape[:-2]``."""
        return np.linalg.norm(self.full_gradient(X).mean(axis=-2), axis=-1)

    def gradient_norm_at(self, x):
        """``||grad f(x)||`` at a single point ``x`` of shape (d,) or (reps, d) (e.g. the centroid)."""
        x = self._points(x)
        X = np.broadcast_to(x[..., None, :], x.shape[:-1] + (self.n, self.d))
        return self.gradient_norm(np.ascontiguousarray(X))

    def mean_loss(self, X):
        """``(1/n) sum_i f_i(x_i)``.

        Parameters
        ----------
        X : array, shape (n, d) or (reps, n, d)
            The node models (of every replica).

        Returns
        -------
        float or array
            One value per repetition: shape ``X.shape[:-2]``."""
        return self.loss(X).mean(axis=-1)

    def gradient_at(self, x):
        """``grad f(x)`` of ``f = (1/n) sum_i f_i`` at single points ``x`` of shape (d,) or (reps, d): the same
        bits as :meth:`value_and_gradient_at`'s gradient, without the values (a third cheaper a pass for the
        logistic objectives). A subclass that defines its own ``value_and_gradient_at`` (and no
        ``gradient_at``) gets that one's gradient."""
        if type(self).value_and_gradient_at is not Objective.value_and_gradient_at:
            return self.value_and_gradient_at(x)[1]
        x = self._points(x)
        X = np.ascontiguousarray(np.broadcast_to(x[..., None, :], x.shape[:-1] + (self.n, self.d)))
        with np.errstate(over="ignore", invalid="ignore"):
            return self.full_gradient(X).mean(axis=-2)

    def value_and_gradient_at(self, x):
        """``(f(x), grad f(x))`` of ``f = (1/n) sum_i f_i`` at single points ``x`` of shape (d,) or (reps, d)
        (e.g. the mean of the node models), from one pass over the data."""
        x = self._points(x)
        X = np.ascontiguousarray(np.broadcast_to(x[..., None, :], x.shape[:-1] + (self.n, self.d)))
        with np.errstate(over="ignore", invalid="ignore"):
            G, L = self.evaluate(X)
            return L.mean(axis=-1), G.mean(axis=-2)

    def optimum(self):
        """The minimiser ``x*`` of ``f = (1/n) sum_i f_i`` and ``f* = f(x*)``, computed once, centrally, and cached.

        Closed form for :class:`Quadratic` and :class:`LeastSquares`, Newton's method to a
        gradient norm of 1e-12 for :class:`LogisticL2`; ``None`` where no minimiser is known
        (the paper's nonconvex logistic problem). The harness's suboptimality
        ``f(x_bar) - f*`` and distance ``||x_i - x*||`` come from it.

        Returns
        -------
        Optimum or None
        """
        changed = _changes(self)
        cached = self.__dict__.get("_optimum")
        if cached is None or cached[0] != changed:  # (computed for what defines f now: its parts' too)
            x = self._solve()
            if x is not None:
                _check_minimiser(self, x)
                x = np.array(x, copy=True)
                x.setflags(write=False)  # (handed out: `err = f.optimum().x; err -= x_hat` had rewritten it)
            # f* through the same code as every f(x_bar) it is subtracted from: f(x*) - f* is exactly 0
            cached = self.__dict__["_optimum"] = (changed, None if x is None else
                                                  Optimum(x, float(self.value_and_gradient_at(x)[0])))
        return cached[1]

    def _solve(self):
        """:meth:`optimum`'s minimiser, shape (d,), float64 (subclasses with a known minimiser override it)."""
        return None

    #: Held-out data ``(H_test, y_test)`` (float64, one sample per row) that the harness's test metrics measure
    #: the models on, or None (:meth:`with_test_data`).
    test_data = None
    #: What the test metrics of this kind of objective are: ``"classification"`` (``test_loss``,
    #: ``test_accuracy``), ``"regression"`` (``test_loss``, ``test_mse``) or None (it takes no test data).
    test_task = None

    def with_test_data(self, H_test, y_test):
        """A copy of this objective that holds the held-out data ``(H_test, y_test)`` (its training data, and so
        every run on it, unchanged): what the harness's ``test_loss``, ``test_accuracy`` and ``test_mse`` are
        measured on (:meth:`test_metrics`).

        Parameters
        ----------
        H_test : array_like, shape (m, d)
            Held-out features, one sample per row (finite).
        y_test : array_like, shape (m,)
            Their labels in {-1, +1} (the logistic objectives) or targets (least squares), finite.

        Returns
        -------
        Objective
            The copy (the same type), with :attr:`test_data` set.

        Raises
        ------
        TypeError
            Where the objective takes no test data (only :class:`NonconvexLogistic`, :class:`LogisticL2` and
            :class:`LeastSquares` do).
        ValueError
            A shape that is not ``(m, d)`` and ``(m,)``, a label other than -1 or +1, or a value that is not
            finite, naming the argument.

        Examples
        --------
        >>> f = LeastSquares.synthetic(n=4, samples_per_node=8, d=3, seed=0)
        >>> g = f.with_test_data(np.eye(3), np.zeros(3))
        >>> f.test_data is None, g.test_data[0].shape, float(g.test_metrics(np.zeros(3))["test_mse"])
        (True, (3, 3), 0.0)
        """
        import copy

        out = copy.copy(self)
        out.test_data = self._check_test_data((H_test, y_test))
        return out

    def _check_test_data(self, test_data):
        """``test_data`` as a pair of float64 arrays ``(H_test, y_test)`` that this objective can be tested on, or
        an error naming what is wrong."""
        if self.test_task is None:
            raise TypeError(f"{type(self).__name__} takes no test data (NonconvexLogistic, LogisticL2 and "
                            "LeastSquares do)")
        if not isinstance(test_data, (tuple, list)) or len(test_data) != 2:
            raise TypeError(f"test_data must be a pair (H_test, y_test), got {type(test_data).__name__}")
        H = as_float_array(test_data[0], "test_data H_test", np.float64, ndim=2)
        y = as_float_array(test_data[1], "test_data y_test", np.float64, ndim=1)
        if H.shape[0] == 0 or H.shape[1] != self.d:
            raise ValueError(f"test_data H_test must have shape (m, d) with m >= 1 and d = {self.d} (the "
                             f"objective's), got {H.shape}")
        if y.shape[0] != H.shape[0]:
            raise ValueError(f"test_data y_test has {y.shape[0]} entries but H_test has {H.shape[0]} rows")
        if self.test_task == "classification" and not np.isin(y, (-1.0, 1.0)).all():
            bad = int(np.flatnonzero(~np.isin(y, (-1.0, 1.0)))[0])
            raise ValueError(f"test_data y_test must hold labels -1 or +1, got y_test[{bad}] = {y[bad]:g}")
        return _kept(H, test_data[0]), _kept(y, test_data[1])

    def test_metrics(self, x):
        """The test metrics of the models ``x`` on :attr:`test_data` (what the harness records for the nodes'
        mean model ``x_bar``).

        Classification (the logistic objectives): ``test_loss``, the mean logistic loss
        ``ln(1 + exp(-y h^T x))`` over the test samples (without the regulariser), and ``test_accuracy``, the
        fraction of them with ``y h^T x > 0`` (the sign of ``h^T x`` is the predicted label; 0 counts as wrong).
        Regression (least squares): ``test_mse``, the mean of ``(h^T x - y)^2``, and ``test_loss``, half of it
        (the form of the training loss). In float64, whatever the objective's dtype.

        Parameters
        ----------
        x : array_like, shape (..., d)
            One point, one per replica, or one per node and replica.

        Returns
        -------
        dict
            ``{name: array of shape x.shape[:-1]}``; empty where the objective holds no test data.
        """
        if self.test_data is None:
            return {}
        H, y = self.test_data
        x = as_float_array(x, "x", np.float64, finite=False)
        if x.ndim == 0 or x.shape[-1] != H.shape[1]:
            raise ValueError(f"x must have a last axis of d = {H.shape[1]} values (shape (..., d)), got shape "
                             f"{x.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            z = x @ H.T  # (..., m)
            if self.test_task == "classification":
                margin = y * z
                return {"test_loss": np.logaddexp(0.0, -margin).mean(axis=-1),
                        "test_accuracy": (margin > 0).mean(axis=-1)}
            r = z - y
            mse = (r * r).mean(axis=-1)
            return {"test_loss": 0.5 * mse, "test_mse": mse}

    def _test_fingerprint(self):
        """What :meth:`describe` adds for the test data (nothing without it)."""
        if self.test_data is None:
            return {}
        digest = hashlib.sha1()
        for arr in self.test_data:
            digest.update(np.ascontiguousarray(arr).tobytes())
        return {"test_samples": int(self.test_data[0].shape[0]), "test_data_sha1": digest.hexdigest()[:16]}


class NonconvexLogistic(Objective):
    """The paper's nonconvex logistic regression (Appendix E.2).

    ``f_i(x) = (1/M) sum_l ln(1 + exp(-y_il h_il^T x)) + rho sum_j x_j^2 / (1 + x_j^2)``
    over the ``M = total / n`` samples of node ``i``. Stochastic gradients use a
    mini-batch of ``batch`` samples per node drawn without replacement, in one
    threaded C++ call for all nodes.

    Parameters
    ----------
    H : array_like, shape (n * M, d)
        Features; node ``i`` owns rows ``i M .. (i+1) M - 1``.
    Y : array_like, shape (n * M,)
        Labels in {-1, +1}.
    n : int
    rho : float, default 0.01
    batch : int, default 200
    dtype : {float64, float32}, default float64
        Value type of the data, and so of the ``X`` the gradients take and of
        what they return: float32 halves the data's memory for the largest runs
        (sums in float32, the logistic weights in float64; within 1e-5 of
        float64, tested).
    test_data : (H_test, Y_test), optional
        Held-out samples (shape ``(m, d)``, labels in {-1, +1}) that the harness
        measures the nodes' mean model on (``test_loss``, ``test_accuracy``:
        :meth:`~Objective.test_metrics`); kept in float64.

    Notes
    -----
    The mini-batch of node ``i``, repetition ``r``, iteration ``k`` and batch ``t``
    is the first ``batch`` entries of a partial Fisher-Yates shuffle driven by a
    counter-based stream keyed on ``(seed, r, i, k, t)``
    (:func:`rowstoch_fast._reference.minibatch` writes it out in Python), so it
    does not depend on the thread count or on which other nodes are evaluated.
    The kernels add in fixed orders and compute ``1 / (1 + e^z)`` with their own
    ``exp`` (within 1.5 ulp), so the AVX-512, AVX2 and baseline vector paths give
    the same bits; the CuPy kernel performs the same operations in the same order (bit for
    bit, checked on the host and on an H100).
    :meth:`evaluate` returns exact gradients and losses from one pass over the data.

    Examples
    --------
    >>> f = NonconvexLogistic.synthetic(n=4, total=800, batch=20, seed=0)
    >>> f.n, f.d, f.samples_per_node
    (4, 10, 200)
    >>> G = f.stochastic_gradient(np.zeros((4, 10)), iteration=0)
    >>> G.shape
    (4, 10)
    """

    _DEFINING = frozenset({"H", "Y", "n", "d", "rho", "dtype"})

    test_task = "classification"

    def __init__(self, H, Y, n, rho=0.01, batch=200, dtype=np.float64, test_data=None):
        from ._checks import check_dtype

        self.n = check_int(n, "n", minimum=1)
        self.dtype = np.dtype(check_dtype(dtype))
        H = _kept(as_float_array(H, "H", self.dtype, ndim=2), H)
        Y = _kept(as_float_array(Y, "Y", self.dtype, ndim=1), Y)
        _check_nonempty(H.shape, "H", self.n)
        if H.shape[0] % self.n:
            raise ValueError(f"H has {H.shape[0]} rows, which n = {self.n} nodes cannot share evenly")
        if Y.shape[0] != H.shape[0]:
            raise ValueError(f"Y has {Y.shape[0]} labels but H has {H.shape[0]} rows")
        if not np.isin(Y, (-1.0, 1.0)).all():
            raise ValueError("Y must hold labels -1 or +1")
        self.H, self.Y = H, Y
        self.d = H.shape[1]
        self.samples_per_node = H.shape[0] // self.n
        self.rho = check_positive_float(rho, "rho", allow_zero=True)
        self.batch = check_int(batch, "batch", minimum=1)
        if self.batch > self.samples_per_node:
            raise ValueError(f"batch = {self.batch} exceeds the {self.samples_per_node} samples per node")
        self.test_data = None if test_data is None else self._check_test_data(test_data)

    @classmethod
    def synthetic(cls, n, total=204800, d=10, rho=0.01, batch=200, seed=42, heterogeneity=0.0, dtype=np.float64,
                  test_samples=0):
        """Generate the data of Appendix E.2 and split it evenly over ``n`` nodes (drawn in float64, then
        rounded to ``dtype``).

        ``x_opt ~ N(0, I_d)``, ``h_l ~ N(0, I_d)``, ``y_l = 1`` if
        ``1/z_l > 1 + exp(-h_l^T x_opt)`` with ``z_l ~ U(0, 1)``, else ``-1``.
        With ``heterogeneity = sigma_h > 0`` node ``i`` labels its samples with
        its own ``x*_i = x_opt + sigma_h N(0, I_d)`` (non-iid data).

        ``test_samples = m > 0`` draws ``m`` more samples of the same law after
        the ``total`` (so the training data are those drawn without them), held
        out as :attr:`~Objective.test_data`: test sample ``j`` is labelled as node
        ``j mod n``'s samples are (the union of the nodes' distributions).

        Raises
        ------
        ValueError
            If ``total`` is not divisible by ``n`` or ``batch`` exceeds ``total / n``.

        Examples
        --------
        >>> f = NonconvexLogistic.synthetic(n=4, total=800, batch=20, seed=0, test_samples=100)
        >>> f.test_data[0].shape, sorted(f.test_metrics(f.x0()))
        ((100, 10), ['test_accuracy', 'test_loss'])
        """
        return cls._synthetic(n, total, d, batch, seed, heterogeneity, dtype, test_samples, rho=rho)

    @classmethod
    def _synthetic(cls, n, total, d, batch, seed, heterogeneity, dtype, test_samples, **regulariser):
        """The objective on :func:`_logistic_data`'s data (``regulariser``: the subclass's own weight)."""
        H, Y, x_opt, test = _logistic_data(n, total, d, batch, seed, heterogeneity, test_samples)
        _handed_over(H, Y, *(test or ()))
        obj = cls(H, Y, n, batch=batch, dtype=dtype, test_data=test, **regulariser)
        obj.x_opt = x_opt
        obj.source = {"generator": "synthetic", "total": total, "seed": seed, "heterogeneity": heterogeneity}
        return obj

    def _data_arrays(self):
        return (self.H, self.Y)

    def _regulariser(self):
        return {"rho": self.rho}

    def _parameters(self):
        return {"samples_per_node": int(self.samples_per_node), **self._regulariser(), "batch": self.batch,
                **({"dtype": "float32"} if self.dtype == np.float32 else {})}

    @property
    def whole_data(self):
        """A batch of every sample (``batch = M``): each stream's gradient sums the whole data, in its own order."""
        return self.batch == self.samples_per_node

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        """Mini-batch gradients of every node (average of ``batches`` mini-batches), shape of ``X``.

        A CuPy ``X`` is differentiated on its GPU with the same random streams.

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.stochastic_gradient`.
        """
        nodes = self._nodes(nodes)
        iteration, seed, batches, rep_offset = _check_stream(iteration, seed, batches, rep_offset)
        rep_period = _check_period(rep_period)
        if is_device_array(X):
            logistic_grad = device_operations("logistic").logistic_grad  # (the CuPy backend's launcher)

            m = self.n if nodes is None else len(nodes)
            if X.ndim not in (2, 3) or tuple(X.shape[-2:]) != (m, self.d):
                raise ValueError(f"X must have shape (n, d) = ({m}, {self.d}) or (reps, n, d), got {tuple(X.shape)}")
            if X.ndim == 3 and rep_period and X.shape[0] > rep_period:  # each period's replicas on the streams
                import cupy  # (a device X: CuPy is there)

                return cupy.concatenate([logistic_grad(self, X[a:a + rep_period], iteration, seed, batches,
                                                       rep_offset, nodes) for a in range(0, X.shape[0], rep_period)])
            return logistic_grad(self, X, iteration, seed, batches, rep_offset, nodes)
        X = self._check_X(X, nodes)
        return _core.logistic_grad(self.H, self.Y, self.n, self.rho, X, self.batch, batches, seed, iteration,
                                   rep_offset, nodes, rep_period=rep_period)

    def full_gradient(self, X, nodes=None):
        nodes = self._nodes(nodes)
        return _core.logistic_full_grad(self.H, self.Y, self.n, self.rho, self._check_X(X, nodes), nodes)

    def _sample_gradient(self, X, idx, own):
        rows = own * self.samples_per_node + idx  # node i owns rows [i M, (i + 1) M)
        h, y = self.H[rows].astype(np.float64, copy=False), self.Y[rows].astype(np.float64, copy=False)
        x = X.astype(np.float64, copy=False)  # (no copies in float64: GT-SAGA's table, 11 replicas, a fifth of it)
        with np.errstate(over="ignore", invalid="ignore"):
            coef = -y / (1.0 + np.exp(y * (h * x).sum(-1)))
            G = coef[..., None] * h + self._regulariser_gradient(x)
        return G.astype(self.dtype, copy=False)

    def _regulariser_gradient(self, x):
        """The gradient of the regulariser every sample carries (``rho sum_j x_j^2 / (1 + x_j^2)``)."""
        return self.rho * 2 * x / (1 + x * x) ** 2

    def _regulariser_curvature(self, x):
        """The regulariser's Hessian, diagonal: ``rho (2 - 6 x_j^2) / (1 + x_j^2)^3``."""
        return self.rho * (2.0 - 6.0 * x * x) / (1.0 + x * x) ** 3

    def hvp(self, X, V, nodes=None):
        """``grad^2 f_i(x_i) v_i``: ``(1/M) sum_l s_l (1 - s_l) (h_l^T v) h_l`` with ``s_l = sigma(y_l h_l^T x)``,
        plus the regulariser's diagonal curvature (in float64, returned in the data's value type).

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.hvp`."""
        nodes = self._nodes(nodes)
        X = self._check_X(X, nodes).astype(np.float64)
        V = as_float_array(V, "V", np.float64, ndim=(2, 3))
        if V.shape != X.shape:
            raise ValueError(f"V must have X's shape {X.shape}, got {V.shape}")
        own = np.arange(self.n) if nodes is None else nodes
        M = self.samples_per_node
        H = self.H.reshape(self.n, M, self.d)[own].astype(np.float64)
        Y = self.Y.reshape(self.n, M)[own].astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            s = 0.5 * (1.0 - np.tanh(0.5 * Y * np.einsum("nmd,...nd->...nm", H, X)))
            w = s * (1.0 - s) * np.einsum("nmd,...nd->...nm", H, V)
            out = np.einsum("nmd,...nm->...nd", H, w) / M + self._regulariser_curvature(X) * V
        return out.astype(self.dtype)

    def loss(self, X, nodes=None):
        return self.evaluate(X, nodes)[1]

    def evaluate(self, X, nodes=None):
        """Exact local gradients and losses from one pass over the data (they share margins and exponentials).

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.evaluate`."""
        nodes = self._nodes(nodes)
        return _core.logistic_full_grad(self.H, self.Y, self.n, self.rho, self._check_X(X, nodes), nodes,
                                        with_loss=True)


class LogisticL2(NonconvexLogistic):
    """Strongly convex L2-regularised logistic regression: a problem with a unique minimiser ``x*``.

    ``f_i(x) = (1/M) sum_l ln(1 + exp(-y_il h_il^T x)) + (lam / 2) ||x||^2``

    The same data, mini-batches and kernels as :class:`NonconvexLogistic` (its
    nonconvex regulariser off, ``rho = 0``) plus the ridge term ``lam x``; ``f`` is
    ``lam``-strongly convex, so :meth:`optimum` (Newton's method with a backtracking
    line search, to a gradient norm of 1e-12) gives the ``x*`` and ``f*`` that the
    harness's suboptimality and distance are measured against.

    Parameters
    ----------
    H, Y, n, batch, dtype, test_data
        As in :class:`NonconvexLogistic`.
    lam : float, default 0.01
        Weight of the ridge term, > 0.

    Examples
    --------
    >>> f = LogisticL2.synthetic(n=4, total=800, batch=20, seed=0, heterogeneity=1.0)
    >>> x_star, f_star = f.optimum()
    >>> bool(np.linalg.norm(f.value_and_gradient_at(x_star)[1]) < 1e-10)
    True
    """

    _DEFINING = NonconvexLogistic._DEFINING | {"lam"}

    convex = True

    def __init__(self, H, Y, n, lam=0.01, batch=200, dtype=np.float64, test_data=None):
        super().__init__(H, Y, n, rho=0.0, batch=batch, dtype=dtype, test_data=test_data)
        self.lam = check_positive_float(lam, "lam")

    @classmethod
    def synthetic(cls, n, total=204800, d=10, lam=0.01, batch=200, seed=42, heterogeneity=0.0, dtype=np.float64,
                  test_samples=0):
        """The data of :meth:`NonconvexLogistic.synthetic` (``heterogeneity`` > 0: each node labels its
        samples with its own ``x*_i``; ``test_samples``: held-out samples) with the ridge term ``lam``."""
        return cls._synthetic(n, total, d, batch, seed, heterogeneity, dtype, test_samples, lam=lam)

    def _regulariser(self):
        return {"lam": self.lam}

    def _regulariser_gradient(self, x):
        return self.lam * x

    def _regulariser_curvature(self, x):
        return np.full_like(x, self.lam)

    has_local_prox = True

    def _prox_local(self, V, t, own):
        """Newton's method on ``f_i(x) + ||x - v||^2 / (2t)`` (strongly convex), from ``v``, to a gradient norm of
        1e-12 relative to the gradient at ``v`` (at most 50 steps, each a backtracking line search on the value)."""
        M = self.samples_per_node
        every = len(own) == self.n and np.array_equal(own, np.arange(self.n))  # (every node: views, not copies
        # of all the data at each step, a third of an ADMM step at d = 10)
        H = self.H.reshape(self.n, M, self.d)
        Y = self.Y.reshape(self.n, M)
        H, Y = (H, Y) if every else (H[own], Y[own])
        H, Y = H.astype(np.float64, copy=False), Y.astype(np.float64, copy=False)
        inv = 1.0 / t[..., None]

        def value(X):
            m = Y * np.einsum("nmd,...nd->...nm", H, X)
            return (np.logaddexp(0.0, -m).mean(-1) + 0.5 * self.lam * (X * X).sum(-1)
                    + 0.5 * (inv[..., 0]) * ((X - V) ** 2).sum(-1))

        X = V.copy()
        for _ in range(50):
            m = Y * np.einsum("nmd,...nd->...nm", H, X)
            s = 0.5 * (1.0 - np.tanh(0.5 * m))  # sigma(-m)
            grad = -np.einsum("nmd,...nm->...nd", H, Y * s) / M + self.lam * X + inv * (X - V)
            if np.abs(grad).max() <= 1e-13 * (1.0 + np.abs(inv * V).max()):
                break
            hess = _weighted_grams(H, s * (1.0 - s)) / M + (self.lam + inv[..., None]) * np.eye(self.d)
            step = np.linalg.solve(hess, grad[..., None])[..., 0]
            f0, a = value(X), np.ones(X.shape[:-1])
            for _ in range(30):  # per row: halve until the value falls
                trial = X - a[..., None] * step
                worse = value(trial) > f0 + 1e-15 * np.abs(f0)
                if not worse.any():
                    break
                a = np.where(worse, 0.5 * a, a)
            X = trial
        return X

    def _ridge(self, X, nodes):
        """``lam X`` on X's own device (a CuPy X stays on its GPU)."""
        return self.lam * (X if is_device_array(X) else self._check_X(X, self._nodes(nodes)))

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        G = super().stochastic_gradient(X, iteration, seed=seed, batches=batches, rep_offset=rep_offset, nodes=nodes,
                                        rep_period=rep_period)
        G += self._ridge(X, nodes)
        return G

    def full_gradient(self, X, nodes=None):
        G = super().full_gradient(X, nodes)
        G += self._ridge(X, nodes)
        return G

    def evaluate(self, X, nodes=None):
        G, L = super().evaluate(X, nodes)
        R = self._ridge(X, nodes)
        G += R
        L += 0.5 * (R * R).sum(-1) / self.lam
        return G, L

    def _solve(self):
        H, Y = self.H.astype(np.float64), self.Y.astype(np.float64)
        N, d = H.shape

        def value(x):
            return np.logaddexp(0.0, -Y * (H @ x)).mean() + 0.5 * self.lam * x @ x

        x = np.zeros(d)
        tol = None
        for _ in range(200):
            s = 0.5 * (1.0 - np.tanh(0.5 * Y * (H @ x)))  # sigma(-y h^T x)
            grad = -(H.T @ (Y * s)) / N + self.lam * x
            norm = np.linalg.norm(grad)
            if tol is None:  # (the gradients' units: features 1e-6 times smaller, lam 1e-12 times, had stopped
                # after one step at an absolute 1e-12, f* off by 36x the harness's rounding, helper 265)
                tol = 1e-12 * min(1.0, norm)
            if norm <= tol:
                break
            hess = _weighted_gram(H, s * (1.0 - s)) / N + self.lam * np.eye(d)
            step, t, f0 = np.linalg.solve(hess, grad), 1.0, value(x)
            while value(x - t * step) > f0 - 0.25 * t * (grad @ step) and t > 1e-10:
                t *= 0.5
            x_new = x - t * step
            if np.array_equal(x_new, x):  # rounding: the gradient cannot fall further
                break
            x = x_new
        return x


def _logistic_data(n, total, d, batch, seed, heterogeneity, test_samples=0):
    """``(H, Y, x_opt, test)``: the synthetic logistic data of Appendix E.2 (:meth:`NonconvexLogistic.synthetic`),
    and ``test_samples`` more of the same law drawn after them as ``test = (H_test, Y_test)`` (None for 0)."""
    n = check_int(n, "n", minimum=1)
    total = check_int(total, "total", minimum=1)
    d = check_int(d, "d", minimum=1)
    heterogeneity = check_positive_float(heterogeneity, "heterogeneity", allow_zero=True)
    test_samples = check_int(test_samples, "test_samples", minimum=0)
    batch = check_int(batch, "batch", minimum=1)
    if total % n:
        raise ValueError(f"total = {total} samples must be divisible by n = {n}: pass total= a multiple of it (e.g. "
                         f"total={n * max(1, total // n)}, as the command line fits its default)")
    if batch > total // n:
        raise ValueError(f"batch = {batch} exceeds the {total // n} samples per node (total / n)")
    # H, its margins and the labels, with the temporaries of their generation
    require_memory(8.0 * (total + test_samples) * (2 * d + 6),
                   f"the synthetic logistic data ({total + test_samples} samples of d = {d})",
                   "lower total, test_samples or d")
    rng = make_rng(seed)
    x_opt = rng.standard_normal(d)
    H = rng.standard_normal((total, d))
    z = rng.random(total)
    x_star = None
    if heterogeneity:  # node i labels its M samples with its own x*_i
        with np.errstate(over="ignore", invalid="ignore"):
            x_star = x_opt + heterogeneity * rng.standard_normal((n, d))
            margin = np.einsum("nmd,nd->nm", H.reshape(n, total // n, d), x_star).ravel()
        if not (np.isfinite(x_star).all() and np.isfinite(margin).all()):  # (helper 199: 1e308 had labelled every
            # NaN margin -1, with a RuntimeWarning)
            raise ValueError(f"heterogeneity = {heterogeneity:g} overflows the margins h^T x*_i that label the "
                             f"samples: use a value below about {1e300 / max(d, 1):.3g}")
    else:
        margin = H @ x_opt
    Y = _logistic_labels(margin, z)
    del z, margin
    test = None
    if test_samples:  # (drawn after the training data, which stay those drawn without them)
        H_test, z = rng.standard_normal((test_samples, d)), rng.random(test_samples)
        owner = np.arange(test_samples) % n  # sample j is labelled as node j mod n's are
        margin = H_test @ x_opt if x_star is None else np.einsum("md,md->m", H_test, x_star[owner])
        test = (H_test, _logistic_labels(margin, z))
    return H, Y, x_opt, test


def _logistic_labels(margin, z):
    """``+1`` where ``1 / z > 1 + exp(-margin)`` (probability ``sigma(margin)``), else ``-1``."""
    with np.errstate(over="ignore"):
        return np.where(1.0 / np.maximum(z, 1e-300) > 1.0 + np.exp(-margin), 1.0, -1.0)


def _check_stream(iteration, seed, batches, rep_offset):
    """The arguments that pick a stochastic gradient's random stream, checked (each a 64-bit key at most)."""
    return (check_int(iteration, "iteration", minimum=0, maximum=MAX_KEY),
            check_int(seed, "seed", minimum=0, maximum=MAX_KEY), check_int(batches, "batches", minimum=1),
            check_int(rep_offset, "rep_offset", minimum=0, maximum=2**62))


def _check_period(rep_period):
    """``rep_period``: 0 (every replica its own stream) or the period after which replicas draw the same streams."""
    return check_int(rep_period, "rep_period", minimum=0, maximum=2**62)


def _replicas(reps, rep_period):
    """The repetition (stream) of each of ``reps`` replicas, from 0: ``r``, or ``r % rep_period``."""
    r = np.arange(reps, dtype=np.int64)
    return r % rep_period if rep_period else r


def _distinct(streams, rep_period):
    """The distinct streams of :func:`_replicas`' ``streams``, in order (those of the first period: replicas that
    share a stream draw it once; replica ``r`` reads ``r % len(distinct)``)."""
    return streams[:rep_period] if rep_period and rep_period < len(streams) else streams


def _check_nonempty(shape, name, n=1):
    """A data array with at least one row per node (``n`` of them) and one column, or a ValueError."""
    if shape[0] < n or shape[1] == 0:
        raise ValueError(f"{name} must have at least one row per node (n = {n}) and one column, got shape {shape}")


#: The most bytes of gathered rows :meth:`LeastSquares.stochastic_gradient` multiplies at once (whole replicas; at
#: least one): past the cache, one replica at a time was faster (d = 64, batch 127: 0.65x at once).
GATHER_BYTES = 1 << 20


_generators = threading.local()


def _numpy_normals(seed, reps, iteration, shape):
    """``default_rng([seed, r, iteration]).standard_normal(shape)`` for each ``r`` of ``reps`` in turn, the same
    values, each in one buffer (read it before the next: a stream at a time, whatever their number):
    the generators' seeding (NumPy's SeedSequence and PCG64) in C++ (``_core.numpy_pcg64_states``), and one
    PCG64 of the calling thread set to each state in turn (about 5 us a stream against 20 for ``default_rng``)."""
    entropy = np.empty((len(reps), 3), dtype=np.uint64)
    entropy[:, 0], entropy[:, 1], entropy[:, 2] = seed, reps, iteration
    states = _core.numpy_pcg64_states(entropy).tolist()
    bits = getattr(_generators, "pcg64", None)
    if bits is None:
        bits = _generators.pcg64 = np.random.PCG64(0)
        _generators.generator = np.random.Generator(bits)
    buffer = np.empty(shape)
    for hi, lo, inc_hi, inc_lo in states:
        bits.state = {"bit_generator": "PCG64", "state": {"state": hi << 64 | lo, "inc": inc_hi << 64 | inc_lo},
                      "has_uint32": 0, "uinteger": 0}
        yield _generators.generator.standard_normal(out=buffer)


#: The normals of one call of a noisy quadratic's gradient (``batches x n x d``) past which their memory is checked
#: before they are drawn (8 MiB of them: a check reads /proc, about 25-30 us, twice a 16-node call's whole time).
NOISE_CHECKED = 2**20


class Quadratic(Objective):
    """``f_i(x) = 1/2 x^T diag(q_i) x - b_i^T x`` with a known minimiser; gradient noise ``sigma N(0, I)``.

    Examples
    --------
    >>> f = Quadratic.random(n=8, d=3, seed=0)
    >>> bool(np.allclose(f.full_gradient(np.broadcast_to(f.minimizer, (8, 3))).mean(0), 0))
    True
    """

    _DEFINING = frozenset({"q", "b", "n", "d", "sigma", "dtype"})

    def __init__(self, q, b, sigma=0.0, dtype=np.float64):
        from ._checks import check_dtype

        self.dtype = np.dtype(check_dtype(dtype))
        self.q = _kept(as_float_array(q, "q", self.dtype, ndim=2), q)
        self.b = _kept(as_float_array(b, "b", self.dtype, ndim=2), b)
        if self.q.shape != self.b.shape:
            raise ValueError(f"q has shape {self.q.shape} but b has {self.b.shape}")
        _check_nonempty(self.q.shape, "q")
        if (self.q <= 0).any():
            raise ValueError("q must be positive (strongly convex f_i)")
        tiny = float(np.finfo(self.dtype).tiny)
        if (self.q < tiny).any():  # (helper 199: a subnormal q passed, and optimum() then blamed a subclass's _solve)
            i, j = np.argwhere(self.q < tiny)[0]
            raise ValueError(f"q[{i}, {j}] = {float(self.q[i, j]):.3g} is below the smallest normal {self.dtype} "
                             f"({tiny:.3g}), where a float keeps fewer digits: rescale q and b")
        with np.errstate(over="ignore", invalid="ignore"):
            x_star = Quadratic._solve(self)  # (the data's own: a subclass's _solve may read what it sets later)
        if not np.isfinite(x_star).all():  # (q = b = 1e308: their sums overflowed, the minimiser NaN)
            j = int(np.argmax(~np.isfinite(x_star)))
            raise ValueError(f"the minimiser sum(b) / sum(q) over the nodes is not finite at coordinate {j} (the "
                             f"sums or their ratio overflow float64): rescale q and b")
        self.n, self.d = self.q.shape
        self.sigma = check_positive_float(sigma, "sigma", allow_zero=True)

    @classmethod
    def random(cls, n, d, seed=0, sigma=0.0, dtype=np.float64):
        """``q_i ~ U(0.5, 2)`` and ``b_i ~ N(0, I)`` per node, gradient noise ``sigma``; ``dtype=np.float32``
        keeps the data, and so the gradients, in float32 (drawn in float64, then rounded)."""
        n, d = check_int(n, "n", minimum=1), check_int(d, "d", minimum=1)
        require_memory(3 * 8 * n * d, f"Quadratic.random(n={n}, d={d}) (q and b, n x d each)", "a smaller n or d")
        rng = make_rng(seed)
        obj = cls(*_handed_over(rng.uniform(0.5, 2.0, (n, d)), rng.standard_normal((n, d))), sigma=sigma, dtype=dtype)
        obj.source = {"generator": "random", "seed": seed}
        return obj

    def _data_arrays(self):
        return (self.q, self.b)

    def _parameters(self):
        return {"sigma": self.sigma, **({"dtype": "float32"} if self.dtype == np.float32 else {})}

    @property
    def minimizer(self):
        """``argmin (1/n) sum_i f_i = sum_i b_i / sum_i q_i`` (coordinate-wise)."""
        return self.b.sum(0) / self.q.sum(0)

    def _solve(self):
        return self.b.astype(np.float64).sum(0) / self.q.astype(np.float64).sum(0)

    def gradient_norm_at(self, x):
        """``||grad f(x)|| = ||mean(q) * x - mean(b)||`` in O(d) (the means computed once)."""
        means = self.__dict__.get("_means")
        if means is None:
            means = self._means = (self.q.mean(axis=0), self.b.mean(axis=0))
        x = self._points(x)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.linalg.norm(means[0] * x - means[1], axis=-1)

    def _qb(self, nodes):
        nodes = self._nodes(nodes)
        return (self.q, self.b, nodes) if nodes is None else (self.q[nodes], self.b[nodes], nodes)

    convex = True

    has_local_prox = True

    def _prox_local(self, V, t, own):
        """``(v / t + b_i) / (q_i + 1 / t)``, coordinate by coordinate."""
        q, b = self.q[own].astype(np.float64), self.b[own].astype(np.float64)
        inv = 1.0 / t[..., None]
        return (V * inv + b) / (q + inv)

    def hvp(self, X, V, nodes=None):
        """``grad^2 f_i(x_i) v_i = q_i * v_i``.

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.hvp`."""
        q, _, nodes = self._qb(nodes)
        self._check_X(X, nodes)
        return q * self._check_X(V, nodes, "V")

    def full_gradient(self, X, nodes=None):
        q, b, nodes = self._qb(nodes)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run gets inf: DivergenceError reports it
            return q * self._check_X(X, nodes) - b

    def loss(self, X, nodes=None):
        q, b, nodes = self._qb(nodes)
        X = self._check_X(X, nodes)
        with np.errstate(over="ignore", invalid="ignore"):
            return (0.5 * q * X * X - b * X).sum(-1)

    @property
    def stream_free(self):
        """Without gradient noise (``sigma = 0``) every stream's gradient is the exact one."""
        return self.sigma == 0

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        iteration, seed, batches, rep_offset = _check_stream(iteration, seed, batches, rep_offset)
        reps = _replicas(X.shape[0] if np.ndim(X) == 3 else 1, _check_period(rep_period))
        G = self.full_gradient(X, nodes)
        if self.sigma:
            # one draw per stream (a tuner's candidates share theirs: rep_period), every node's, then the rows asked
            distinct = _distinct(reps, rep_period)
            rows = ... if nodes is None else np.asarray(nodes)
            noise = np.empty((len(distinct), *G.shape[-2:]))
            if batches * self.n * self.d > NOISE_CHECKED:  # (a multi-round method averages ``rounds`` mini-batches
                # per call: rounds = 10**9 had met NumPy's "Unable to allocate 1.16 TiB for an array with shape
                # (1000000000, 16, 10)"; the check reads /proc, 25-30 us, too dear for every call: helper 243)
                require_memory(8 * batches * self.n * self.d, f"batches = {batches}: each gradient's noise, "
                               f"{batches} x {self.n} x {self.d} normals drawn at once,", "lower batches")
            for k, z in enumerate(_numpy_normals(seed, rep_offset + distinct, iteration, (batches, self.n, self.d))):
                np.multiply(self.sigma, (z[0] if batches == 1 else z.mean(0))[rows], out=noise[k])
            if G.ndim == 2:
                G += noise[0]
            else:
                G += noise if len(distinct) == len(reps) else noise[reps % len(distinct)]
        return G


#: The longest rows (d) whose least-squares products run in C++ (``_core.least_squares_grad``); longer ones take
#: NumPy's batched products. Measured (bench/ls_full_grad.py --d): the kernel 1.05-2.7x NumPy's at d = 8-14 over
#: 10 replicas (0.8-1.2x at one), 0.45-0.6x at d = 16 (its sums no longer fit the registers) and past it (BLAS's
#: AVX2 against the kernel's SSE2).
LS_KERNEL_MAX_D = 14


class LeastSquares(Objective):
    """``f_i(x) = 1/(2M) ||H_i x - y_i||^2`` over each node's ``M`` rows; mini-batch gradients.

    Parameters
    ----------
    H : array_like, shape (n * M, d)
        Rows; node ``i`` owns rows ``i M .. (i+1) M - 1``.
    y : array_like, shape (n * M,)
        Targets.
    n : int
    batch : int, optional
        Mini-batch per node and gradient (default ``M``: full-batch gradients).
    test_data : (H_test, y_test), optional
        Held-out rows and targets that the harness measures the nodes' mean
        model on (``test_mse``, ``test_loss``: :meth:`~Objective.test_metrics`).

    Notes
    -----
    The mini-batches of repetition ``r`` at iteration ``k`` come from
    ``numpy.random.default_rng([seed, r, k])``: its ``t``-th call
    ``random((n, M))`` draws mini-batch ``t`` of every node, node ``i``
    taking the rows of its ``batch`` smallest uniforms, smallest first
    (``argsort`` of row ``i``; ties, about one in 2^53 pairs, by index, where
    NumPy's default sort left their order to its algorithm). The
    draws are made in C++ (NumPy's SeedSequence and PCG64, bit for bit:
    :func:`rowstoch_fast._reference.least_squares_stochastic_gradient` writes
    them out with NumPy's own generators, and the tests compare the two).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> f = LeastSquares(rng.standard_normal((40, 3)), rng.standard_normal(40), n=4, batch=5)
    >>> f.stochastic_gradient(np.zeros((4, 3)), 0).shape
    (4, 3)
    """

    _DEFINING = frozenset({"H", "y", "n", "M", "d"})

    test_task = "regression"

    def __init__(self, H, y, n, batch=None, test_data=None):
        self.n = check_int(n, "n", minimum=1)
        H = _kept(as_float_array(H, "H", np.float64, ndim=2), H)
        y = _kept(as_float_array(y, "y", np.float64, ndim=1), y)
        _check_nonempty(H.shape, "H", self.n)
        if H.shape[0] % self.n or y.shape[0] != H.shape[0]:
            raise ValueError(f"H ({H.shape[0]} rows) and y ({y.shape[0]}) must split evenly over n = {self.n} nodes")
        self.M = H.shape[0] // self.n
        self.d = H.shape[1]
        self.H = H.reshape(self.n, self.M, self.d)
        self.y = y.reshape(self.n, self.M)
        self.batch = self.M if batch is None else check_int(batch, "batch", minimum=1)
        if self.batch > self.M:
            raise ValueError(f"batch = {self.batch} exceeds the {self.M} samples per node")
        self.test_data = None if test_data is None else self._check_test_data(test_data)

    @classmethod
    def synthetic(cls, n, samples_per_node=32, d=10, heterogeneity=1.0, noise=0.1, batch=None, seed=42,
                  test_samples=0):
        """Heterogeneous synthetic data: ``H_i ~ N(0, I)``, ``y_i = H_i x*_i + noise N(0, I)`` with each node's
        own ``x*_i = x_c + heterogeneity N(0, I)`` around a common ``x_c ~ N(0, I)`` (``batch=None``: full-batch
        gradients, deterministic). ``test_samples = m > 0`` draws ``m`` more rows of the same law after the
        training data (which stay those drawn without them), row ``j`` as node ``j mod n``'s, held out as
        :attr:`~Objective.test_data`.

        Examples
        --------
        >>> f = LeastSquares.synthetic(n=4, samples_per_node=8, d=3, seed=0)
        >>> f.H.shape, f.optimum().x.shape
        ((4, 8, 3), (3,))
        """
        n = check_int(n, "n", minimum=1)
        m = check_int(samples_per_node, "samples_per_node", minimum=1)
        d = check_int(d, "d", minimum=1)
        heterogeneity = check_positive_float(heterogeneity, "heterogeneity", allow_zero=True)
        noise = check_positive_float(noise, "noise", allow_zero=True)
        top = math.sqrt(float(np.finfo(np.float64).max)) * 1e-6  # (the loss grows as their square: 1e200 gave f*
        # = inf, helper 192; the command line's bound, cli._common)
        for name, value in (("heterogeneity", heterogeneity), ("noise", noise)):
            if value > top:
                raise ValueError(f"{name} must be at most {top:.3g} (the loss grows as its square, which would "
                                 f"overflow), got {value:g}")
        test_samples = check_int(test_samples, "test_samples", minimum=0)
        require_memory(8.0 * (n * m + test_samples) * (d + 3),
                       f"the synthetic least-squares data ({n * m + test_samples} rows of d = {d})")
        rng = make_rng(seed)
        x_star = rng.standard_normal(d) + heterogeneity * rng.standard_normal((n, d))
        H = rng.standard_normal((n, m, d))
        y = np.einsum("nmd,nd->nm", H, x_star) + noise * rng.standard_normal((n, m))
        test = None
        if test_samples:  # (drawn after the training data, which stay those drawn without them)
            H_test = rng.standard_normal((test_samples, d))
            owner = np.arange(test_samples) % n
            test = (H_test, np.einsum("md,md->m", H_test, x_star[owner]) + noise * rng.standard_normal(test_samples))
        obj = cls(*_handed_over(H.reshape(n * m, d), y.ravel()), n, batch=batch,
                  test_data=None if test is None else _handed_over(*test))
        obj.source = {"generator": "synthetic", "seed": seed, "heterogeneity": heterogeneity, "noise": noise}
        return obj

    def _data_arrays(self):
        return (self.H, self.y)

    def _parameters(self):
        return {"batch": self.batch}

    def _solve(self):
        """The least-squares solution over all rows (every node has ``M`` of them); the smallest one where
        the rows do not determine it."""
        return _least_squares(self.H.reshape(-1, self.d), self.y.ravel())

    def _grad(self, X, H, y, nodes=None, with_loss=False):
        """``(H_i^T (H_i x_i - y_i)) / M`` of every row of ``X`` (and with ``with_loss`` the losses, from the same
        residuals): ``H`` (n, M, d) read by every replica (``nodes``: X's rows are those nodes) or (reps, m, M, d)
        each replica's own rows. In C++ (``_core.least_squares_grad``: each row read once for a group of replicas;
        NumPy's batched products took 1.3 us a node at one replica, 2.2 us a node and replica at 22, n = 2^18);
        other arrays (another dtype, an array type of NumPy's protocols), and rows longer than
        :data:`LS_KERNEL_MAX_D` (where BLAS's wider vectors win: the kernel took 0.4-0.6x its speed at d = 16-200)
        take NumPy's products. The sums run in
        row order (float32 losses over a million rows lose about 4e-4 relative where NumPy's pairwise sums keep
        5e-8; the objective's data are float64)."""
        if all(type(a) is np.ndarray for a in (X, H, y)) and X.dtype == H.dtype == y.dtype and \
                X.dtype in (np.float32, np.float64) and H.shape[-1] <= LS_KERNEL_MAX_D:
            return _core.least_squares_grad(np.ascontiguousarray(H), np.ascontiguousarray(y),
                                            np.ascontiguousarray(X),
                                            None if nodes is None else np.ascontiguousarray(nodes, dtype=np.int64),
                                            with_loss=with_loss)
        if nodes is not None:
            H, y = H[nodes], y[nodes]
        r = np.matmul(H, X[..., None])[..., 0] - y
        G = np.matmul(r[..., None, :], H)[..., 0, :] / H.shape[-2]
        return (G, 0.5 * (r * r).mean(-1)) if with_loss else G

    @property
    def samples_per_node(self):
        """``M``: each node's rows."""
        return self.M

    convex = True

    has_local_prox = True

    def _prox_local(self, V, t, own):
        """``(H_i^T H_i / M + I / t) x = H_i^T y_i / M + v / t``: one d x d solve per row."""
        if self.__dict__.get("_prox_checked") != V.shape:  # (a d x d system per node and replica, and LAPACK's
            # copy of them: "Unable to allocate 4.77 GiB (10, 16, 2000, 2000)" for 51 MB of data had named no
            # option, helper 263; checked once a shape, not at every step)
            require_memory(2.0 * 8 * max(1, V.size // max(1, self.d)) * self.d * self.d,
                           f"the local proximal step of least squares (a {self.d} x {self.d} system per node and "
                           "repetition)", "fewer repetitions, or a smaller d")
            self._prox_checked = V.shape
        gram = self.__dict__.get("_gram")
        if gram is None:
            gram = self._gram = (np.matmul(self.H.swapaxes(1, 2), self.H) / self.M,
                                 np.matmul(self.H.swapaxes(1, 2), self.y[..., None])[..., 0] / self.M)
        G, c = gram[0][own], gram[1][own]
        inv = 1.0 / t
        A = G + inv[..., None, None] * np.eye(self.d)
        return np.linalg.solve(A, (c + inv[..., None] * V)[..., None])[..., 0]

    def hvp(self, X, V, nodes=None):
        """``grad^2 f_i(x_i) v_i = H_i^T H_i v_i / M`` (``x_i`` does not enter).

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.hvp`."""
        nodes = self._nodes(nodes)
        sel = slice(None) if nodes is None else nodes
        self._check_X(X, nodes)
        V = self._check_X(V, nodes, "V")
        H = self.H[sel]
        return np.matmul(np.matmul(H, V[..., None])[..., 0][..., None, :], H)[..., 0, :] / self.M

    def _sample_gradient(self, X, idx, own):
        h, y = self.H[own, idx], self.y[own, idx]  # (..., n, d) and (..., n)
        return h * ((h * X).sum(-1) - y)[..., None]

    def full_gradient(self, X, nodes=None):
        nodes = self._nodes(nodes)
        return self._grad(self._check_X(X, nodes), self.H, self.y, nodes)

    def loss(self, X, nodes=None):
        nodes = self._nodes(nodes)
        return self._grad(self._check_X(X, nodes), self.H, self.y, nodes, with_loss=True)[1]

    def evaluate(self, X, nodes=None):
        """Exact local gradients and losses from one pass over the data (they share the residuals).

        Parameters and returns as :meth:`~rowstoch_fast.objectives.Objective.evaluate`."""
        nodes = self._nodes(nodes)
        return self._grad(self._check_X(X, nodes), self.H, self.y, nodes, with_loss=True)

    @property
    def stream_free(self):
        """A batch of every sample (``batch = M``) draws nothing: every stream's gradient is the whole data's."""
        return self.batch == self.M

    def stochastic_gradient(self, X, iteration, *, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
        iteration, seed, batches, rep_offset = _check_stream(iteration, seed, batches, rep_offset)
        nodes = self._nodes(nodes)
        X = self._check_X(X, nodes)
        own = np.arange(self.n) if nodes is None else nodes
        reps = X.shape[0] if X.ndim == 3 else 1
        streams = _replicas(reps, _check_period(rep_period))
        if self.batch == self.M:  # every mini-batch is the whole data: no draw (the full gradient, in row order)
            return self._grad(X, self.H, self.y, nodes)
        Xr = X.reshape(reps, len(own), self.d)
        distinct = _distinct(streams, rep_period)  # (shared draws once)
        entropy = np.empty((len(distinct), 3), dtype=np.uint64)
        entropy[:, 0], entropy[:, 1], entropy[:, 2] = seed, rep_offset + distinct, iteration
        idx = _core.numpy_minibatches(entropy, self.n, self.M, batches, self.batch,
                                      np.ascontiguousarray(own, dtype=np.int64))
        # (replicas that share a stream read its draws, block by block: no copy of them per replica)
        which = streams % len(distinct) if len(distinct) < reps else None
        G = np.zeros_like(Xr)
        H, y, first = self.H.reshape(-1, self.d), self.y.reshape(-1), (own * self.M)[:, None]
        # several replicas' products at once (each replica's are one replica's products: the same bits), as many as
        # keep the gathered rows within GATHER_BYTES (larger blocks cost memory and leave the cache)
        step = max(1, GATHER_BYTES // max(1, 8 * len(own) * self.batch * self.d))
        for a in range(0, reps, step):
            for t in range(batches):
                drawn = idx[a:a + step, t] if which is None else idx[which[a:a + step], t]
                rows = drawn + first  # (replica, node, sample): rows of the whole data
                G[a:a + step] += self._grad(Xr[a:a + step], H.take(rows, axis=0), y.take(rows)) / batches
        return G.reshape(X.shape)
