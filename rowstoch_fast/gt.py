"""Pull-Diag-GT (eq. 8) and MG-Pull-Diag-GT (eq. 14) as an embeddable ask/tell stepper."""

from __future__ import annotations

import functools
import threading

import numpy as np

from . import _core
from ._backend import resolve_backend
from ._checks import (as_float_array, check_csr_arrays, check_int, check_positive_float, fmt_bytes, nodes_first,
                      require_memory)
from .mixing import MixingMatrix
from .tracker import DiagTracker

__all__ = ["PullDiagGT", "DivergenceError", "StepperBase", "exclusive", "matrix_from_state"]

_OWNER_LOCK = threading.Lock()


def exclusive(method):
    """Let one thread at a time into an optimizer's ``method``.

    An optimizer holds one state; two threads stepping it at once would
    interleave half-steps and silently lose iterations. A call made while
    another thread is inside ``step``/``initialize``/``state_dict`` of the same
    optimizer raises RuntimeError instead. (Calls from the same thread nest.)
    """
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        me = threading.get_ident()
        with _OWNER_LOCK:
            owner, depth = self.__dict__.get("_owner"), self.__dict__.get("_owner_depth", 0)
            if owner is not None and owner != me:
                raise RuntimeError(
                    f"{type(self).__name__}.{method.__name__}() called from a second thread while another thread "
                    "is using this optimizer; an optimizer is not thread-safe: give each thread its own "
                    "(they may share one MixingMatrix), or serialise the calls with a lock")
            self._owner, self._owner_depth = me, depth + 1
        try:
            return method(self, *args, **kwargs)
        finally:
            with _OWNER_LOCK:
                self._owner_depth -= 1
                if self._owner_depth == 0:
                    self._owner = None

    return guarded

STATE_FORMAT = "rowstoch_fast.PullDiagGT/1"


class DivergenceError(FloatingPointError):
    """An iterate or a gradient became NaN or Inf.

    The optimizer keeps its last finite state (``opt.x``, ``opt.y`` and
    ``opt.iteration`` are those before the failed step), so it can be saved,
    inspected, or resumed with a smaller learning rate via
    ``PullDiagGT.from_state_dict(opt.state_dict(), lr=...)``.

    Attributes
    ----------
    iteration : int
        The iteration that failed (the step from ``iteration`` to ``iteration + 1``).
    node : int
        The first node with a non-finite value.
    what : str
        ``"gradient"`` or ``"iterate"``.
    """

    def __init__(self, message, *, iteration, node, what):
        super().__init__(message)
        self.iteration = iteration
        self.node = node
        self.what = what

    @classmethod
    def gradient(cls, iteration, node, kept):
        """``grad_fn`` returned NaN/Inf at ``iteration`` for ``node``; the state of iteration ``kept`` is kept."""
        return cls(f"grad_fn returned a non-finite gradient at iteration {iteration}, first at node {node}; "
                   f"the optimizer keeps its last finite state (iteration {kept})",
                   iteration=iteration, node=int(node), what="gradient")

    @classmethod
    def iterate(cls, iteration, node, lr):
        """``x`` or ``y`` became NaN/Inf at ``iteration`` (first at ``node``); the previous state is kept."""
        return cls(f"iterates became non-finite at iteration {iteration}, first at node {node} (lr = {lr} too large?); "
                   f"the optimizer keeps its last finite state (iteration {iteration - 1})",
                   iteration=iteration, node=int(node), what="iterate")


class StepperBase:
    """What the CPU, MPI and CuPy steppers share: the public state and the layout.

    Internal blocks are node-major ``(rows, reps * d)`` (NumPy or CuPy arrays);
    users see ``(rows, d)`` or ``(reps, rows, d)``.
    """

    @property
    def A(self):
        """The mixing matrix."""
        return self._A

    @property
    def n(self):
        """Number of nodes."""
        return self._A.n

    @property
    def tracker(self):
        """The :class:`~rowstoch_fast.tracker.DiagTracker` (``"exact"`` or ``"perron"``)."""
        return self._tracker

    @property
    def x(self):
        """Local models ``x_t``, shape of ``x0`` (read-only view, valid until the next step)."""
        return self._user_view(self._x)

    @property
    def y(self):
        """Gradient trackers ``y_t`` (read-only view, valid until the next step)."""
        return self._user_view(self._y)

    @property
    def communication_rounds(self):
        """Gossip rounds used so far: ``R`` per iteration."""
        return self.iteration * self.rounds


    def _to_internal(self, arr, out):
        """Copy a user-shaped array into a node-major internal block."""
        if len(self._shape) == 3:
            out.reshape(out.shape[0], self._reps, self._d)[...] = arr.swapaxes(0, 1)
        else:
            out[...] = arr

    def _user_view(self, buf):
        """A user-shaped view of an internal block (read-only for NumPy arrays)."""
        view = buf.reshape(buf.shape[0], self._reps, self._d).swapaxes(0, 1) if len(self._shape) == 3 else buf.view()
        if isinstance(view, np.ndarray):
            view.flags.writeable = False
        return view


def matrix_from_state(state, A=None):
    """The :class:`MixingMatrix` a ``state_dict`` was saved with, its CSR validated first (a malformed one
    crashes SciPy); or ``A`` after checking that it is that matrix. Also checks ``state["shape"]``."""
    import scipy.sparse as sp

    data, indptr, indices = (np.asarray(state[k]) for k in ("data", "indptr", "indices"))
    if indptr.ndim != 1 or indptr.size < 2:
        raise ValueError(f"state['indptr'] must be a 1-D array of n + 1 >= 2 entries, got shape {indptr.shape}")
    n = indptr.size - 1
    check_csr_arrays(indptr, indices, n, n, "state (the saved matrix)", data)
    shape = np.asarray(state["shape"])
    if shape.ndim != 1 or shape.size not in (2, 3) or not np.issubdtype(shape.dtype, np.integer) or (shape < 1).any():
        raise ValueError(f"state['shape'] must be (n, d) or (reps, n, d), got {shape.tolist()}")
    if int(shape[-2]) != n:
        raise ValueError(f"state['shape'] has {int(shape[-2])} nodes but the saved matrix has {n}")
    csr = sp.csr_array((data, indices, indptr), shape=(n, n))
    if A is None:
        return MixingMatrix(csr, dtype=data.dtype)
    if not isinstance(A, MixingMatrix) or A.n != n or (A.csr != csr).nnz:
        raise ValueError("A is not the matrix this state was saved with")
    return A


class PullDiagGT(StepperBase):
    """(MG-)Pull-Diag-GT: gradient tracking over a row-stochastic network, one ``step`` at a time.

    Implements, for ``t = 0, 1, ...`` (eq. 14; eq. 8 is ``rounds=1``)::

        x_{t+1} = A^R (x_t - lr y_t)
        g_{t+1} = grad_fn(x_{t+1})
        y_{t+1} = A^R (y_t + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t)

    with ``D_t = Diag(A^(tR))`` (``D_0 = I``) and ``y_0 = g_0 = grad_fn(x_0)``.
    The mixing runs in the compiled kernels with no allocation per step.

    Parameters
    ----------
    A : MixingMatrix or array_like
        The mixing matrix (anything :class:`MixingMatrix` accepts).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
        Initial models: a vector broadcast to every node, one row per node, or
        ``reps`` independent repetitions run together (they share every pass
        over the CSR structure and the tracker).
    lr : float
        Step size ``alpha > 0``.
    rounds : int, default 1
        Gossip steps ``R`` per communication phase. ``R > 1`` is MG-Pull-Diag-GT:
        ``grad_fn`` should then return the average of ``R`` stochastic gradients
        (eq. 14b), so that samples and communication rounds per iteration match.
    tracker : {"exact", "perron"}, default "exact"
        ``"exact"`` follows ``Diag(A^(tR))`` as the paper does (computed once
        per matrix, frozen once it equals ``pi`` in float64); ``"perron"`` uses
        ``diag(pi)`` from ``t = 1`` on (the exact tracker's limit), for very
        large ``n``.
    backend : {"auto", "cpu", "cupy", "mpi"}, default "auto"
        ``"auto"`` picks from the type of ``x0`` (a CuPy array selects
        ``"cupy"``: :class:`~rowstoch_fast.cuda.CupyPullDiagGT`); ``"mpi"`` partitions the nodes
        over MPI ranks (:class:`~rowstoch_fast.distributed.DistributedPullDiagGT`,
        extra keywords ``comm`` and ``partition``).
    check_finite : bool, default True
        Raise :class:`DivergenceError` as soon as a gradient or iterate is NaN/Inf.

    Notes
    -----
    Memory: ten blocks of ``n x (reps * d)`` values of ``A.dtype`` (iterates,
    trackers, gradients, their previous values and three work blocks), plus
    the exact tracker's table. A request that cannot fit raises MemoryError
    before anything is allocated.

    Thread safety: one optimizer must be stepped by one thread at a time (a
    concurrent ``step`` raises RuntimeError); several optimizers may run in
    parallel threads on the same :class:`MixingMatrix`.

    Attributes
    ----------
    iteration : int
        Completed iterations ``t``.
    communication_rounds : int
        ``R`` per iteration, counted as the paper does.

    Examples
    --------
    Minimise ``(1/n) sum_i 1/2 ||x - b_i||^2`` over the directed exponential graph:

    >>> import numpy as np
    >>> from rowstoch_fast import PullDiagGT, topology
    >>> A = topology.exponential(8)
    >>> b = np.arange(8.0)[:, None]
    >>> opt = PullDiagGT(A, np.zeros(1), lr=0.1)
    >>> for _ in range(300):
    ...     _ = opt.step(lambda X: X - b)
    >>> np.allclose(opt.x, b.mean())
    True
    """

    def __new__(cls, A=None, x0=None, lr=None, rounds=1, tracker="exact", backend="auto", **kwargs):
        if cls is PullDiagGT and backend == "mpi":
            from .distributed import DistributedPullDiagGT

            return super().__new__(DistributedPullDiagGT)
        if cls is PullDiagGT and x0 is not None and resolve_backend(backend, x0) == "cupy":
            from .cuda import CupyPullDiagGT  # not a subclass: built here, __init__ is not re-run

            return CupyPullDiagGT(A, x0, lr, rounds, tracker, **kwargs)
        return super().__new__(cls)

    def __init__(self, A, x0, lr, rounds=1, tracker="exact", backend="auto", *, check_finite=True):
        if resolve_backend(backend, x0) != "cpu":
            raise ValueError(f"backend {backend!r} is not handled by {type(self).__name__}")
        A = A if isinstance(A, MixingMatrix) else MixingMatrix(A)
        x0 = nodes_first(as_float_array(x0, "x0", A.dtype, ndim=(1, 2, 3)), A.n)
        if x0.shape[-2] != A.n:
            raise ValueError(f"x0 has {x0.shape[-2]} nodes (rows) but A has {A.n}")
        if x0.shape[-1] == 0 or (x0.ndim == 3 and x0.shape[0] == 0):
            raise ValueError(f"x0 must not be empty, got shape {x0.shape}")
        self._setup(A, lr, rounds, tracker, x0.shape, check_finite)
        self._to_internal(x0, self._x)

    def _setup(self, A, lr, rounds, tracker, shape, check_finite):
        self._A = A
        self.lr = check_positive_float(lr, "lr")
        self.rounds = check_int(rounds, "rounds", minimum=1)
        self._tracker = DiagTracker(A, self.rounds, tracker)
        self._shape = tuple(shape)
        self._reps = shape[0] if len(shape) == 3 else 1
        self._d = shape[-1]
        self.check_finite = bool(check_finite)
        n, w = A.n, self._reps * self._d
        block = n * w * np.dtype(A.dtype).itemsize
        require_memory(10 * block, f"{type(self).__name__} on n = {n} nodes with {self._reps} x {self._d} values "
                       f"per node (10 blocks of {fmt_bytes(block)})",
                       "use float32, fewer repetitions or a smaller d")
        bufs = [np.zeros((n, w), dtype=A.dtype) for _ in range(10)]
        self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt = bufs[:6]
        self._xw, self._xw_alt, self._psi, self._work = bufs[6:]
        self.iteration = 0
        self._initialized = False

    def centroid(self):
        """``pi^T x_t``: the centroid ``w_t`` of the analysis (Lemma 1), shape (d,) or (reps, d)."""
        c = self._A.pi @ self._x
        return c.reshape(self._reps, self._d) if len(self._shape) == 3 else c

    def __repr__(self):
        return (
            f"PullDiagGT(n={self.n}, shape={self._shape}, lr={self.lr}, rounds={self.rounds}, "
            f"tracker={self._tracker.kind!r}, iteration={self.iteration})"
        )

    # ------------------------------------------------------------------ stepping
    def _gradient_local(self, grad_fn, x_buf, out):
        G = grad_fn(self._user_view(x_buf))
        G = np.asarray(G)
        if G.shape != self._shape:
            raise ValueError(f"grad_fn returned shape {G.shape}, expected {self._shape} (the shape of x)")
        if not (np.issubdtype(G.dtype, np.floating) or np.issubdtype(G.dtype, np.integer)):
            raise TypeError(f"grad_fn must return a real numeric array, got dtype {G.dtype}")
        self._to_internal(G, out)

    def _gradient(self, grad_fn, x_buf, out, iteration):
        self._gradient_local(grad_fn, x_buf, out)
        if self.check_finite:
            row = _core.first_nonfinite(out)
            if row >= 0:
                raise DivergenceError.gradient(iteration, row, self.iteration)

    @exclusive
    def initialize(self, grad_fn):
        """Set ``y_0 = g_0 = grad_fn(x_0)`` (done by the first :meth:`step` if not called)."""
        if self._initialized:
            raise RuntimeError("PullDiagGT is already initialized")
        self._gradient(grad_fn, self._x, self._g, 0)
        self._y[...] = self._g
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            np.subtract(self._x, self.lr * self._y, out=self._xw)
        if self.check_finite and _core.first_nonfinite(self._xw) >= 0:
            raise DivergenceError(
                f"x0 - lr * g0 is not finite at node {_core.first_nonfinite(self._xw)} (lr too large?)",
                iteration=0, node=int(_core.first_nonfinite(self._xw)), what="iterate",
            )
        self._initialized = True

    @exclusive
    def step(self, grad_fn):
        """Run one iteration; the first call also sets ``y_0 = g_0 = grad_fn(x_0)``.

        Parameters
        ----------
        grad_fn : callable
            ``grad_fn(X) -> G``: stacked (stochastic) gradients at the rows of
            ``X`` (shape of ``x0``; ``X`` is a read-only view). For ``rounds > 1``
            return the average of ``R`` samples (eq. 14b).

        Returns
        -------
        PullDiagGT
            ``self``, so calls can be chained.

        Raises
        ------
        DivergenceError
            If a gradient or an iterate is NaN/Inf; the state stays at the last
            finite iterate.
        RuntimeError
            If another thread is stepping this optimizer at the same time.
        """
        if not self._initialized:
            self.initialize(grad_fn)
        c = self._A.csr
        t = self.iteration
        R = self.rounds
        # x phase: x_{t+1} = A^R (x_t - lr y_t); xw holds x_t - lr y_t.
        _core.mix_power(c.indptr, c.indices, c.data, self._xw, R, self._x_alt, self._work, check_indices=False)
        self._gradient(grad_fn, self._x_alt, self._g_alt, t + 1)
        # y phase: y_{t+1} = A^R (y_t + D_{t+1}^{-1} g_{t+1} - D_t^{-1} g_t), and x_{t+1} - lr y_{t+1}
        finite = _core.gt_y_phase(
            c.indptr, c.indices, c.data, R, self.lr,
            self._x_alt, self._y, self._g_alt, self._g,
            self._tracker.scale(t + 1), self._tracker.scale(t),
            self._y_alt, self._xw_alt, self._psi, self._work, check_indices=False,
        )
        if not finite and self.check_finite:
            rows = [r for r in (_core.first_nonfinite(self._x_alt), _core.first_nonfinite(self._y_alt)) if r >= 0]
            bad = min(rows) if rows else _core.first_nonfinite(self._xw_alt)
            raise DivergenceError.iterate(t + 1, bad, self.lr)
        # Commit in one statement with no calls (no signal can land half-way), so a
        # Ctrl-C or an exception anywhere above leaves the previous state intact.
        (self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt, self._xw, self._xw_alt, self.iteration) = (
            self._x_alt, self._x, self._y_alt, self._y, self._g_alt, self._g, self._xw_alt, self._xw, t + 1)
        return self

    # ------------------------------------------------------------------ persistence
    @exclusive
    def state_dict(self):
        """Everything needed to resume bit-identically, as NumPy arrays and scalars.

        The dict can be written with ``np.savez`` and read back with
        ``dict(np.load(path))``.

        Examples
        --------
        >>> import numpy as np
        >>> from rowstoch_fast import PullDiagGT, topology
        >>> opt = PullDiagGT(topology.ring(4), np.zeros(2), lr=0.1)
        >>> _ = opt.step(lambda X: X - 1.0)
        >>> opt2 = PullDiagGT.from_state_dict(opt.state_dict())
        >>> _ = opt.step(lambda X: X - 1.0); _ = opt2.step(lambda X: X - 1.0)
        >>> bool(np.array_equal(opt.x, opt2.x))
        True
        """
        c = self._A.csr
        return {
            "format": np.array(STATE_FORMAT),
            "indptr": c.indptr.copy(),
            "indices": c.indices.copy(),
            "data": c.data.copy(),
            "shape": np.array(self._shape, dtype=np.int64),
            "lr": np.array(self.lr),
            "rounds": np.array(self.rounds),
            "tracker": np.array(self._tracker.kind),
            "iteration": np.array(self.iteration),
            "initialized": np.array(self._initialized),
            "check_finite": np.array(self.check_finite),
            "x": self._x.copy(),
            "y": self._y.copy(),
            "g": self._g.copy(),
            "xw": self._xw.copy(),
        }

    @classmethod
    def from_state_dict(cls, state, A=None, *, lr=None):
        """Rebuild an optimizer from :meth:`state_dict` (optionally with a new ``lr``).

        Parameters
        ----------
        state : mapping
            As returned by :meth:`state_dict` (or loaded from an ``.npz``).
        A : MixingMatrix, optional
            Reuse this matrix (and its cached tracker) instead of rebuilding it
            from the state; it must be the same matrix.
        lr : float, optional
            Continue with another step size (the saved ``x - lr y`` is then
            recomputed).
        """
        missing = {"format", "indptr", "indices", "data", "shape", "lr", "rounds", "tracker", "iteration", "x", "y", "g", "xw"} - set(state)
        if missing:
            raise ValueError(f"state is missing {sorted(missing)}; pass the dict returned by PullDiagGT.state_dict()")
        if str(state["format"]) != STATE_FORMAT:
            raise ValueError(f"state has format {str(state['format'])!r}, expected {STATE_FORMAT!r}")
        A = matrix_from_state(state, A)
        opt = cls.__new__(cls)
        opt._setup(A, float(state["lr"]), int(state["rounds"]), str(state["tracker"]),
                   tuple(int(s) for s in state["shape"]), bool(state.get("check_finite", True)))
        for name in ("x", "y", "g", "xw"):
            arr = np.asarray(state[name])
            buf = getattr(opt, "_" + name)
            if arr.shape != buf.shape:
                raise ValueError(f"state[{name!r}] has shape {arr.shape}, expected {buf.shape}")
            buf[...] = arr
        opt.iteration = int(state["iteration"])
        opt._initialized = bool(state.get("initialized", True))
        if lr is not None:
            opt.lr = check_positive_float(lr, "lr")
            np.subtract(opt._x, opt.lr * opt._y, out=opt._xw)
        return opt
