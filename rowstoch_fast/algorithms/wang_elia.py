"""Wang & Elia (2010, 2011): distributed optimization as a control loop with an integral state."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["WangElia"]


class WangElia(Optimizer):
    r"""The Wang-Elia method: a proportional-integral consensus loop around gradient descent.

    Implements, with :math:`K = (I - W) / 2` and :math:`z_0 = 0`:

    .. math::

        x_{k+1} &= x_k - K (x_k + z_k) - \mathrm{lr}\, g(x_k) \\
        z_{k+1} &= z_k + K x_k

    (the form decent-bench 0.3.0 computes). The integral state ``z`` accumulates the disagreement, so at a fixed
    point ``K x = 0`` (consensus) and the gradients sum to zero: exact, for ``lr`` small enough. ``x_k + z_k`` and
    ``x_k`` are sent in the same round (one message of ``2 d`` values per link).

    ``W`` must be symmetric: each mode of the loop, ``[[1 - mu, -mu], [mu, 1]]`` for an eigenvalue ``mu`` of ``K``,
    contracts (``|lambda|^2 = 1 - mu + mu^2``) for real ``mu`` in ``(0, 1)``; a directed graph's complex ``mu``
    makes the loop itself grow (spectral radius 1.15 on the directed 16-node ring's doubly stochastic weights,
    1.087 on the exponential graph's, with no gradient), as Gharesifard and Cortés showed of these dynamics on
    weight-balanced digraphs. There a large rate's gradients held it at best far from consensus (a consensus error
    of 1.8 at the rate tuned on the directed 16-node exponential graph) and the tuner took it past its grid, on
    the ring, to a rate whose nodes' iterates ran off.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    J. Wang and N. Elia, "Control approach to distributed optimization", Allerton Conference on Communication,
    Control, and Computing, 2010; "A control perspective for centralized and distributed convex optimization",
    IEEE Conference on Decision and Control, 2011. B. Gharesifard and J. Cortés, "Distributed continuous-time
    convex optimization on weight-balanced digraphs", IEEE Trans. Automatic Control 59(3), 2014 (their failure on
    directed graphs).

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import WangElia, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = WangElia(W, np.zeros(1), lr=0.1)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "wang-elia"
    family = "primal-dual (control)"
    order = 167
    exact = True
    symmetric = True  # (a directed graph's complex eigenvalues make its loop grow: the class docstring)
    needs_timely = True  # (a delay of one round makes its loop grow: spectral radius 1.052 as lr -> 0)
    matrices = ("W",)
    state = ("x", "z")
    scratch = 3

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _traffic_per_iteration(self):
        return [("W", 1, 2 * self._reps * self._d)]  # (x + z and x, in the same round)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g, u, w = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        ops.combine(u, [1.0, 1.0], [cur["x"], cur["z"]], check=False)  # x + z
        ops.mix(self.W, u, w)
        finite = ops.combine(nxt["x"], [1.0, -0.5, 0.5, self._lr_coef()], [cur["x"], u, w, g])  # x - K u - lr g
        self._check_iterates(finite, t, nxt["x"])
        ops.mix(self.W, cur["x"], w)
        finite = ops.combine(nxt["z"], [1.0, 0.5, -0.5], [cur["z"], cur["x"], w])  # z + K x
        self._check_iterates(finite, t, nxt["z"])
