"""Ask/tell: a step whose gradients are computed outside the optimizer's call (another process, a simulator, an
autodiff framework's own loop), and ``x`` set by the user.

``X = opt.ask()`` returns the points where the next gradients are needed and ``opt.tell(G)`` hands them over.
The step itself is :meth:`Optimizer.step`, run unchanged on a helper thread whose ``grad_fn`` waits for
:meth:`tell`: the same operations in the same order on the same values, so ``ask``/``tell`` equals ``step``
bit for bit on every backend (tests: every algorithm, with and without a network layer). Only one thread runs
at a time: the caller's waits while the step computes, the step's waits while the caller computes ``G``.
"""

from __future__ import annotations

import queue
import threading

import numpy as np

from .._checks import fmt_value

__all__ = ["AskTell"]

_GRADIENT, _DONE, _FAILED = "gradient", "done", "failed"


class _Cancelled(Exception):
    """Raised inside a step by its ``grad_fn`` when the caller cancels it (a step's exception leaves the state
    at the last finished iteration)."""


_CANCEL = object()


class _Session:
    """One step in flight: its thread, and the two one-slot mailboxes between it and the caller."""

    def __init__(self, opt):
        self.to_caller = queue.Queue(maxsize=1)  # (kind, payload) from the step
        self.to_step = queue.Queue(maxsize=1)    # the gradients the caller tells
        self.point = None                        # the X the step waits on (between ask and tell)
        xp = opt._ops.xp if opt.backend == "cupy" else None  # (CuPy's current device is per thread)
        device = (xp, xp.cuda.runtime.getDevice()) if xp is not None else None
        self.thread = threading.Thread(target=self._run, args=(opt, device), daemon=True,
                                       name=f"{type(opt).__name__}.ask")
        self.thread.start()

    def _gradient(self, X):
        self.to_caller.put((_GRADIENT, X))
        G = self.to_step.get()
        if G is _CANCEL:
            raise _Cancelled
        return G

    def _run(self, opt, device):
        try:
            if device is not None:
                xp, number = device
                xp.cuda.Device(number).use()
            opt.step(self._gradient)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            self.to_caller.put((_FAILED, exc))
        else:
            self.to_caller.put((_DONE, None))

    def next(self):
        """The step's next message, waited for (Ctrl-C in the caller leaves the step where it is)."""
        kind, payload = self.to_caller.get()
        self.point = payload if kind == _GRADIENT else None
        return kind, payload


class AskTell:
    """The ask/tell interface of :class:`~rowstoch_fast.algorithms.Optimizer` and the setter of ``x``."""

    _ask_session = None

    def ask(self):
        """The points where the next gradients are needed: a read-only array of the shape of ``x``.

        Compute the gradients there in any way (another process, a simulator,
        an autodiff framework's own loop) and hand them to :meth:`tell`; the
        pair is one call of ``grad_fn`` inside :meth:`step`, and a sequence of
        ``ask``/``tell`` gives the iterates of :meth:`step` bit for bit. Asking
        again before telling returns the same points.

        Returns
        -------
        ndarray (NumPy, or CuPy on the GPU backend)
            Read-only and valid until :meth:`tell`: copy it to keep it. The
            first ask is at ``x0`` for the methods that start from a gradient
            there (gradient tracking), then at the point each step needs.

        Raises
        ------
        TypeError
            For an optimizer that takes a per-sample oracle (GT-SAGA).
        Any exception of the step
            :class:`~rowstoch_fast.DivergenceError` and the like come out of
            ``ask`` or ``tell``, whichever is waiting when the step raises
            them; the state then stays at the last finished iteration.

        Notes
        -----
        The step runs on a helper thread while the caller computes nothing,
        and the caller waits while the step runs: one of them at a time. While
        a step waits for :meth:`tell`, the optimizer's other calls (``step``,
        ``state_dict``, ...) raise RuntimeError; :meth:`cancel` drops it. Under MPI every rank asks and
        tells (its own rows), as with ``step``.

        Examples
        --------
        >>> import numpy as np
        >>> from rowstoch_fast import PullDiagGT, topology
        >>> b = np.arange(8.0)[:, None]
        >>> opt = PullDiagGT(topology.exponential(8), np.zeros((8, 1)), lr=0.1)
        >>> for _ in range(200):
        ...     X = opt.ask()
        ...     opt.tell(X - b)  # the gradients of (x - b_i)^2 / 2, computed by the caller
        >>> bool(np.allclose(opt.x, b.mean()))
        True
        """
        session = self._ask_session
        if session is not None:
            if session.point is not None:
                return session.point
            kind, payload = self._wait(session)  # (a step whose tell was interrupted: its next message)
            if kind == _GRADIENT:
                return payload
        if self.gradients != "batch":
            raise TypeError(f"{type(self).__name__} takes a per-sample oracle, not gradients at points: "
                            "ask()/tell() is for grad_fn-style methods; use step(oracle)")
        if self.backend == "mpi":
            self._check_mpi_threads()
        for _ in range(2):  # (a step that asked for nothing: start the next one)
            session = self._ask_session = _Session(self)
            kind, payload = self._wait(session)
            if kind == _GRADIENT:
                return payload
        raise RuntimeError(f"{type(self).__name__}.step asked for no gradient twice running")

    def tell(self, G):
        """Hand over the gradients at the points of :meth:`ask` and let the step go on.

        Parameters
        ----------
        G : array_like
            Of the shape of ``x`` (NumPy, or CuPy on the GPU backend; what a
            ``grad_fn`` returns). With ``rounds = R > 1`` the average of ``R``
            samples (eq. 14b), as for :meth:`step`.

        Returns
        -------
        None
            When the step has finished (``iteration`` one higher), or when it
            needs gradients at a second point: the first step of a method that
            starts from the gradients at ``x0`` (gradient tracking) asks twice,
            at ``x0`` and at ``x1``, so ``k`` iterations take ``k + 1`` tells
            there. :meth:`ask` then returns the next points.

        Raises
        ------
        RuntimeError
            If no :meth:`ask` is waiting for gradients.
        ValueError, TypeError
            For ``G`` of the wrong shape, or None: the step waits on, for a
            corrected ``G``. What the step raises with ``G`` (TypeError for a
            non-numeric array, :class:`~rowstoch_fast.DivergenceError` for a
            NaN/Inf) ends the step instead, the state staying at the last
            finished iteration.
        """
        session = self._ask_session
        if session is None or session.point is None:
            raise RuntimeError(f"{type(self).__name__}.tell(G) without a pending ask(): call X = opt.ask(), "
                               "compute the gradients G at X, then opt.tell(G)")
        self._check_told(G)
        session.point = None
        session.to_step.put(G)
        self._wait(session)

    def cancel(self):
        """Drop the step waiting for :meth:`tell`: the optimizer stays at its last finished iteration (a step
        that raises changes nothing), and :meth:`ask` starts that step again, at the same points. Nothing to do
        when no step waits. Collective under MPI (every rank cancels).

        Examples
        --------
        >>> import numpy as np
        >>> from rowstoch_fast import DGD, topology
        >>> opt = DGD(topology.ring(4), np.ones((4, 1)), lr=0.1)
        >>> X = opt.ask()
        >>> opt.cancel()
        >>> opt.iteration, bool(np.array_equal(opt.ask(), X))
        (0, True)
        """
        session = self._ask_session
        if session is None:
            return
        if session.point is None:  # (a tell interrupted while the step ran: let it reach its next message)
            try:
                kind, _ = self._wait(session)
            except _Cancelled:
                return
            if kind != _GRADIENT:
                return
        session.point = None
        session.to_step.put(_CANCEL)
        try:
            self._wait(session)
        except _Cancelled:
            pass

    def _wait(self, session):
        """The step's next message; the session ends with the step (its exception raised here)."""
        kind, payload = session.next()
        if kind != _GRADIENT:
            session.thread.join()
            self._ask_session = None
            if kind == _FAILED:
                raise payload
        return kind, payload

    def _check_told(self, G):
        """What ``tell`` got, checked before the step sees it (a wrong ``G`` leaves the step waiting)."""
        if G is None:
            raise TypeError(f"tell(G): G must be the gradients at the points of ask(), an array of shape "
                            f"{self._shape}, got None")
        shape = getattr(G, "shape", None)
        shape = tuple(shape) if shape is not None else np.shape(G)
        if shape != self._shape:
            raise ValueError(f"tell(G): G has shape {shape}, expected {self._shape} (the shape of ask()'s points)")

    def _waiting_step(self):
        """A sentence for the calls refused while a step waits for :meth:`tell` (None when none waits)."""
        session = self.__dict__.get("_ask_session")
        if session is None:
            return None
        return (f"a step started by {type(self).__name__}.ask() is waiting for tell(G): finish it with "
                "opt.tell(G) first")

    def _check_mpi_threads(self):
        from mpi4py import MPI

        if MPI.Query_thread() < MPI.THREAD_SERIALIZED:
            raise RuntimeError("ask()/tell() under MPI runs the step on a helper thread, which needs MPI "
                               f"initialised with thread support >= MPI_THREAD_SERIALIZED (got level "
                               f"{MPI.Query_thread()}); mpi4py asks for MPI_THREAD_MULTIPLE unless "
                               "mpi4py.rc.thread_level says otherwise")

    def _set_x(self, X):
        """``opt.x = X``: before the first step, any ``x0`` of the same shape; later, for methods whose only
        state is ``x``."""
        self._settle()
        if self._initialized and tuple(self.state) != (self.model,):
            raise RuntimeError(
                f"{type(self).__name__}.x can be set before the first step only: after it, its other state "
                f"({', '.join(s for s in self.state if s != self.model)}) was derived from x and would no longer "
                "match; build a new optimizer from X, or edit its state_dict()")
        arr = self._ops.user_array(X, "x")
        if tuple(arr.shape) != self._shape:
            raise ValueError(f"x must have shape {self._shape} (the shape of x0"
                             f"{', this rank' + chr(39) + 's rows' if self.local_nodes is not None else ''}), "
                             f"got {tuple(arr.shape)}")
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"x must be a real numeric array, got dtype {arr.dtype}")
        block = self._cur[self.model]
        scratch = self._nxt[self.model]  # written first: a non-finite X leaves x as it was
        scratch[...] = self._internal(arr)
        if not bool(np.isfinite(scratch).all()):  # (a host or device array: NumPy dispatches to CuPy)
            raise ValueError(f"x must be finite, got {fmt_value(X) if np.ndim(X) == 0 else 'a NaN or Inf'}")
        block[...] = scratch
