"""Ask/tell: a step whose gradients are computed outside the optimizer's call (another process, a simulator, an
autodiff framework's own loop), and ``x`` set by the user.

``X = opt.ask()`` returns the points where the next gradients are needed and ``opt.tell(G)`` hands them over.
Both run :meth:`Optimizer.step` itself, with a ``grad_fn`` of their own: ``ask``'s stops the step where it needs
gradients (an exception: a step that raises changes nothing, and re-running it from the same state computes the
same points), ``tell``'s returns ``G`` there, so the step then is the one ``step(grad_fn)`` makes, bit for bit
(tests: every algorithm, with and without a network layer, on every backend). The price is the part of a step
before its gradients, computed twice (measured in bench/RESULTS.md section 20); no thread, nothing held between
calls.
"""

from __future__ import annotations

import numpy as np

from .._checks import fmt_value

__all__ = ["AskTell"]


#: What a RuntimeError says where the MPI ranks call step(), ask() and tell() apart (one cancelled and asks again, or
#: tells without a pending ask, while the others tell; one steps while the others ask):
#: :meth:`~rowstoch_fast.backends.base.Backend.agreed`'s rule.
APART = "step(), ask() and tell() must be called on every MPI rank alike"


class _Asked(Exception):
    """Raised by ``ask``'s ``grad_fn`` where the step needs gradients (an Exception: under MPI every rank raises
    it at the same call, and the ranks agree as for any error)."""

    def __init__(self, points):
        super().__init__("ask(): the points where the step needs gradients")
        self.points = points


class _Probe:
    """The ``grad_fn`` of ``ask`` (no answers: stop at the first gradient) and of ``tell`` (answer with ``G``,
    then stop at a second gradient if the step needs one: a method's first step, which starts at ``x0``). A rate
    assigned between ``ask`` and ``tell`` is made the rate when ``G`` is handed over: the part of the step before
    its gradients ran with the rate the points were asked with."""

    told = True  # (the step's checks then name tell(G), not grad_fn)

    def __init__(self, answer=None, opt=None):
        self.answer, self.opt = answer, opt

    def __call__(self, X):
        if self.answer is None:
            raise _Asked(X)
        G, self.answer = self.answer, None
        lr = self.opt.__dict__.pop("_lr_next", None) if self.opt is not None else None
        if lr is not None:
            self.opt._use_lr(lr, state=False)
        return G


class AskTell:
    """The ask/tell interface of :class:`~rowstoch_fast.algorithms.Optimizer` and the setter of ``x``."""

    _asked = None  # (points, the state they were computed from) between ask and tell

    def _asked_points(self):
        """The points asked, while they are the step's (None otherwise)."""
        asked = self._asked
        return asked[0] if asked is not None and asked[1] == self._state_token() else None

    def _before_step(self, grad_fn):
        """A step not made by ask/tell: the points asked are dropped (a rate put off for them applies now)."""
        if not isinstance(grad_fn, _Probe) and (self._asked is not None or "_lr_next" in self.__dict__):
            stepped = self._asked is not None
            self.cancel()  # (a rate put off and no points: a resumed state's, saved between ask and tell)
            self._stepped_over = stepped  # (tell's words: helper 252's tell after a step had read "without a pending
            # ask()")

    def _state_token(self):
        """What the points of ``ask`` depend on: the iteration, whether iteration 0 is set up, the state blocks
        and the writes to them (``x`` set, a resume)."""
        return (self.iteration, self._initialized, id(self._cur), self.__dict__.get("_writes", 0))

    def ask(self):
        """The points where the next gradients are needed: a read-only array of the shape of ``x``.

        Compute the gradients there in any way (another process, a simulator,
        an autodiff framework's own loop) and hand them to :meth:`tell`; the
        pair makes the step :meth:`step` makes with a ``grad_fn`` returning
        them, bit for bit. Asking again before telling returns the same points.

        Returns
        -------
        ndarray (NumPy, or CuPy on the GPU backend)
            Read-only and valid until :meth:`tell` (or another step): copy it to
            keep it. A method that starts from the gradients at ``x0`` (gradient
            tracking) asks at ``x0`` first, then at the point each step needs.

        Raises
        ------
        TypeError
            For an optimizer that takes a per-sample oracle (GT-SAGA).
        Any exception of the step
            :class:`~rowstoch_fast.DivergenceError` where the part of the step
            before its gradients fails; the state stays at the last finished
            iteration.

        Notes
        -----
        ``ask`` runs the step up to its gradients and stops it there (a step
        that stops changes nothing); ``tell`` runs it again with them. Between
        the two, ``opt.lr = ...`` is allowed: it becomes the rate when ``tell``
        hands ``G`` to the step (what the step computes from ``G`` uses it; the
        points were made with the rate before, and ``opt.lr`` reads that one
        until then). Stepping the optimizer
        otherwise, setting ``x`` or resuming makes ``tell`` refuse the points
        (ask again). Under MPI every rank asks and tells (its own rows).

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
        points = self._asked_points()
        if points is not None:
            self._unseen = False  # (handed out: tell may take gradients at them)
            return points
        if self.gradients != "batch":
            what = "a per-sample oracle" if self.gradients == "samples" else "an oracle of local prox(V, step)"
            raise TypeError(f"{type(self).__name__} takes {what}, not gradients at points: "
                            "ask()/tell() is for grad_fn-style methods; use step(oracle)")
        self._ops.agreed(APART, f"ask() at iteration {self.iteration}", lambda: None)  # (under MPI: a rank that
        # cancelled and asks again while the others tell ran its step's exchanges once more than they did, a hang)
        self._asked = None
        self._stepped_over = False
        for _ in range(2):  # (a step that needs no gradient: the next one does)
            try:
                self.step(_Probe())
            except _Asked as stop:
                self._asked = (stop.points, self._state_token())
                self._unseen = False
                return stop.points
        raise RuntimeError(f"{type(self).__name__}.step asked for no gradient twice running")

    def tell(self, G):
        """Hand over the gradients at the points of :meth:`ask`: the step is made.

        Parameters
        ----------
        G : array_like
            Of the shape of ``x`` (NumPy, or CuPy on the GPU backend; what a
            ``grad_fn`` returns). With ``rounds = R > 1`` the average of ``R``
            samples (eq. 12b), as for :meth:`step`.

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
            If no :meth:`ask` is waiting for gradients, or the optimizer changed
            since (stepped, ``x`` set, resumed): ask again.
        ValueError, TypeError
            For ``G`` of the wrong shape, None, or not numeric (the points stay
            asked, for a corrected ``G``).
        DivergenceError
            For a NaN/Inf in ``G`` or what the step makes of it; the state stays
            at the last finished iteration.
        """
        asked = self._asked
        self._ops.agreed(APART, f"tell() at iteration {self.iteration}" + (" without a pending ask()" if asked is None
                                                                          else ""),
                         self._check_tell, asked, G)  # (under MPI: a refusal on every rank, not a hang in the step)
        self._asked = None
        self._telling = True  # (a NaN in G is the caller's gradients, not a grad_fn's: helper 252)
        try:
            self.step(_Probe(G, self))
        except _Asked as stop:  # (a second gradient in the same step: asked now, handed out by the next ask())
            self._asked = (stop.points, self._state_token())
            self._unseen = True
        finally:
            self._telling = False

    def _check_tell(self, asked, G):
        """That ``tell(G)`` has points asked (``asked``), still the step's, and a ``G`` that fits them."""
        if asked is None and self.__dict__.get("_stepped_over"):
            raise RuntimeError(f"{type(self).__name__}.tell(G): step() ran since ask() and dropped its points, so G "
                               "is not at the optimizer's next points: call X = opt.ask() again, then opt.tell(G) "
                               "with the gradients at X")
        if asked is None:
            raise RuntimeError(f"{type(self).__name__}.tell(G) without a pending ask(): call X = opt.ask(), "
                               "compute the gradients G at X, then opt.tell(G)")
        if self.__dict__.get("_unseen") and asked[1] == self._state_token():  # (a second tell after the first
            # step's gradients at x0 was taken as the gradients at x1, which no ask() had handed out: two workers
            # sharing an optimizer lost a step without a word, helper 196)
            raise RuntimeError(f"{type(self).__name__}.tell(G): the step needs gradients at new points (a method "
                               "that starts from the gradients at x0 asks twice, at x0 and at x1) that no ask() has "
                               "handed out yet: call X = opt.ask() for them, then opt.tell(G) with the gradients at X")
        if asked[1] != self._state_token():
            self.cancel()
            raise RuntimeError(f"{type(self).__name__}.tell(G): the optimizer changed since ask() (stepped, x set or "
                               "resumed), so G is not at its points: call X = opt.ask() again")
        self._check_told(G)

    def cancel(self):
        """Drop the points :meth:`ask` is waiting for gradients at (:meth:`ask` computes them again; a rate
        assigned since applies now). Nothing to do when none are asked. ``close()`` is the same."""
        self._asked = None
        self._unseen = False
        self._stepped_over = False  # (an explicit cancel: tell then says "without a pending ask()")
        lr = self.__dict__.pop("_lr_next", None)
        if lr is not None:
            self._settle()
            self._use_lr(lr)

    close = cancel

    def _check_told(self, G):
        """What ``tell`` got, checked before the step sees it (a wrong ``G`` leaves the points asked)."""
        if G is None:
            raise TypeError(f"tell(G): G must be the gradients at the points of ask(), an array of shape "
                            f"{self._shape}, got None")
        if type(G) is tuple and len(G) == 2 and np.ndim(G[1]) == 0:  # (a (gradient, loss) pair: NumPy's
            # "inhomogeneous shape" otherwise; a tuple of rows is an array)
            raise TypeError(f"tell(G): G must be the gradients alone, an array of shape {self._shape}, got a tuple "
                            f"of {len(G)} (the gradients and a loss?)")
        shape = getattr(G, "shape", None)
        try:
            shape = tuple(shape) if shape is not None else np.shape(G)
        except ValueError:  # (a ragged list)
            raise TypeError(f"tell(G): G must be an array of shape {self._shape}, got a ragged "
                            f"{type(G).__name__}") from None
        if shape != self._shape:
            raise ValueError(f"tell(G): G has shape {shape}, expected {self._shape} (the shape of ask()'s points)")
        kind = getattr(getattr(G, "dtype", None), "kind", None) or np.asarray(G).dtype.kind
        if kind not in "fiu":
            raise TypeError(f"tell(G): G must be a real numeric array, got dtype {getattr(G, 'dtype', kind)}")

    def _set_x(self, X):
        """``opt.x = X``: before the first step, any ``x0`` of the same shape; later, for methods whose only
        state is ``x``."""
        self._settle()

        def checked(X):
            if self._initialized and tuple(self.state) != (self.model,):
                raise RuntimeError(
                    f"{type(self).__name__}.x can be set before the first step only: after it, its other state "
                    f"({', '.join(s for s in self.state if s != self.model)}) was derived from x and would no longer "
                    "match; build a new optimizer from X, or edit its state_dict()")
            self._check_x(X)

        self._ops.call(checked, X)  # (under MPI: every rank's rows checked, a refusal raised on all; the refusal
        # after the first step too: raised on one rank alone, a rank asking meanwhile had waited for good, helper 222)
        block, scratch = self._cur[self.model], self._nxt[self.model]
        block[...] = scratch  # (_check_x wrote the checked values there)
        self._writes = self.__dict__.get("_writes", 0) + 1  # (points asked before are no longer the step's)

    def _check_x(self, X):
        """``X`` checked and written into the scratch copy of the model block (the block itself stays as it was
        until every rank agrees)."""
        arr = self._ops.user_array(X, "x")
        if tuple(arr.shape) != self._shape:
            raise ValueError(f"x must have shape {self._shape} (the shape of x0"
                             f"{', this rank' + chr(39) + 's rows' if self.local_nodes is not None else ''}), "
                             f"got {tuple(arr.shape)}")
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"x must be a real numeric array, got dtype {arr.dtype}")
        scratch = self._nxt[self.model]  # written first: a non-finite X leaves x as it was
        scratch[...] = self._internal(arr)
        if not bool(np.isfinite(scratch).all()):  # (a host or device array: NumPy dispatches to CuPy)
            raise ValueError(f"x must be finite, got {fmt_value(X) if np.ndim(X) == 0 else 'a NaN or Inf'}")
