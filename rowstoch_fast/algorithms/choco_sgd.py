"""CHOCO-SGD (Koloskova, Stich & Jaggi 2019): decentralized SGD with compressed messages and error feedback."""

from __future__ import annotations

from .._checks import check_positive_float
from ..network import links_of, weights_of
from ._base import Optimizer, message_contraction

__all__ = ["CHOCOSGD"]


class CHOCOSGD(Optimizer):
    r"""CHOCO-SGD over an undirected network's doubly stochastic ``W``, its messages compressed.

    Every node keeps a public copy :math:`\hat x_i` of its model, which its neighbours keep too (they add the same
    compressed updates). A node sends only the compressed difference between its model and that copy, so the
    compression error is fed back into the next message instead of being lost. Implements, with
    :math:`\hat x_0 = 0` and :math:`Q` the compression of the network's messages:

    .. math::

        x_{k+1/2} &= x_k - \mathrm{lr}\, g(x_k) \\
        q_k &= Q(x_{k+1/2} - \hat x_k) \qquad \text{(the only message: } q_k \text{, compressed)} \\
        \hat x_{k+1} &= \hat x_k + q_k / (1 + \omega) \\
        x_{k+1} &= x_{k+1/2} + \gamma (W - I) \hat x_{k+1}

    ``omega`` is the variance bound of an unbiased compression (QSGD, rescaled rand-k; 0 for the biased ones):
    the paper's rescaling that makes it a contraction.

    (Koloskova, Stich & Jaggi, "Decentralized Stochastic Optimization and Gossip Algorithms with Compressed
    Communication", ICML 2019, Algorithm 2.) Without compression and ``gamma = 1`` it is DGD adapting then
    combining: ``x_{k+1} = W (x_k - lr g(x_k))``. With a constant step it reaches an O(lr) neighbourhood of the
    minimiser of ``(1/n) sum_i f_i``; the compression sets how small ``gamma`` must be (the paper's
    ``gamma`` grows with the compressor's quality ``delta``: ``k / d`` for top-k).

    Parameters
    ----------
    W : MixingMatrix, array_like or network
        Doubly stochastic and static, or :class:`~rowstoch_fast.network.Compressed` /
        :class:`~rowstoch_fast.network.Noisy` / :class:`~rowstoch_fast.network.Delayed` over such a ``W``: its
        compression (and noise on what is sent) is applied to the messages ``q_k``; the public copies are then
        mixed through the links (:func:`~rowstoch_fast.network.links_of`): with delays, a receiver uses
        ``x_hat_j`` as of the newest message of ``j`` that has arrived (as if the messages arrived in order: a
        late channel, not a lossy one), and noise on each received copy perturbs the copy it mixes that round.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    gamma : float in (0, 1], optional
        Consensus step size. Default: the compression's contraction ``delta``
        (:meth:`~rowstoch_fast.network.Compressed.delta`: 1 without compression, ``k / d`` for top-k,
        ``1 / (1 + omega)`` for the unbiased ones), a heuristic that kept every compression of the tests and of
        ``rowstoch reproduce communication`` stable; the paper's bound is smaller still.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import CHOCOSGD, topology
    >>> from rowstoch_fast.network import Compressed
    >>> W = topology.ring(8, directed=False, weights="metropolis")
    >>> b = np.arange(8.0)[:, None] * np.ones(4)
    >>> opt = CHOCOSGD(Compressed(W, "topk", k=1), np.zeros(4), lr=0.01, gamma=0.3)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.abs(opt.x.mean(axis=0) - b.mean()).max() < 1e-3)  # one value of four sent per message
    True
    """

    name = "choco-sgd"
    family = "decentralized gradient, compressed"
    order = 115
    matrices = ("W",)
    state = ("x", "x_hat")
    scratch = 2
    hyper = ("lr", "gamma")
    derived_hyper = {"gamma": 1.0}

    def __init__(self, W, x0, lr, gamma=None, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, gamma=gamma)
        self._omega = message_contraction(self._mats, x0)[0]  # (unbiased compressions: q rescaled)

    def _validate(self, matrices, x0, hyper):
        if hyper["gamma"] is None:  # the compression's contraction on models of d values (x0's last axis)
            hyper = {**hyper, "gamma": message_contraction(matrices, x0)[1]}
        return super()._validate(matrices, x0, hyper)

    def _check_hyper(self, lr, gamma):
        self.lr = self._check_lr(lr)
        self.gamma = check_positive_float(gamma, "gamma")
        if self.gamma > 1:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma}")
        return {"lr": self.lr, "gamma": self.gamma}

    def _advance(self, grad_fn, cur, nxt, t):
        ops, W = self._ops, self.W
        g, q = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        half = nxt["x"]
        finite = ops.combine(half, [1.0, self._lr_coef()], [cur["x"], g])  # x_{k+1/2}
        self._check_iterates(finite, t, half)
        ops.combine(q, [1.0, -1.0], [half, cur["x_hat"]], check=False)
        if W is not weights_of(W):  # q_k = Q(x_{k+1/2} - x_hat_k): what the links carry
            ops.compress(W, q, q, t)
        ops.combine(nxt["x_hat"], [1.0, 1.0 / (1.0 + self._omega)], [cur["x_hat"], q], check=False)
        ops.mix(links_of(W), nxt["x_hat"], q)  # W x_hat_{k+1}: the neighbours' copies, through the links
        finite = ops.combine(half, [1.0, self.gamma, -self.gamma], [half, q, nxt["x_hat"]])
        self._check_iterates(finite, t, half)
