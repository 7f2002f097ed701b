"""Compressed Push-Pull (CPP; Song, Shi, Pu & Yan 2024): gradient tracking over a directed network whose messages
are compressed differences to reference points."""

from __future__ import annotations

from .._checks import check_positive_float
from ..network import Network, links_of, weights_of
from ._base import message_contraction
from .push_pull import PushPull

__all__ = ["CompressedPushPull"]


class CompressedPushPull(PushPull):
    r"""Push-Pull with compressed messages: the models pulled with a row-stochastic ``A``, the gradient trackers
    pushed with a column-stochastic ``C``, every message the compressed difference to a reference point.

    Each node keeps reference points ``h`` of its model and tracker and their mixtures ``h_w`` (which it can
    follow from the compressed messages it receives). Implements, with :math:`Q` the compression of the network's
    messages (:math:`Q_A` on ``A``'s links, :math:`Q_C` on ``C``'s), :math:`y_0 = g(x_0)`, :math:`h = h_w = 0`:

    .. math::

        q_x &= Q_A(x_k - h_x), \quad \hat x = h_x + q_x, \quad \hat x_w = h_{xw} + A q_x \\
        h_x &\leftarrow (1 - a) h_x + a \hat x, \quad h_{xw} \leftarrow (1 - a) h_{xw} + a \hat x_w \\
        x_{k+1} &= x_k - \gamma (\hat x - \hat x_w) - \mathrm{lr}\, y_k \\
        q_y &= Q_C(y_k - h_y), \quad \hat y = h_y + q_y, \quad \hat y_w = h_{yw} + C q_y \\
        h_y &\leftarrow (1 - a) h_y + a \hat y, \quad h_{yw} \leftarrow (1 - a) h_{yw} + a \hat y_w \\
        y_{k+1} &= y_k - \gamma (\hat y - \hat y_w) + g(x_{k+1}) - g(x_k)

    (Song, Shi, Pu & Yan, "Compressed Gradient Tracking for Decentralized Optimization over General Directed
    Networks", IEEE TSP 2022, arXiv:2106.07243, the CPP algorithm as we transcribe it: reference points moved by
    ``a``, consensus step ``gamma``.) ``C`` being column-stochastic, ``1^T (y_hat - y_hat_w) = 0`` whatever the
    compression: the trackers keep following the sum of the gradients, and the method stays exact under
    compression, where Push-Pull over compressed messages does not. Without compression and ``gamma = 1`` it is
    the AB algorithm, ``x_{k+1} = A x_k - lr y_k``, ``y_{k+1} = C y_k + g(x_{k+1}) - g(x_k)``.

    Parameters
    ----------
    A : MixingMatrix, array_like or network
        Row-stochastic, or a network over such weights: its compression (and noise on what is sent) is applied
        to the messages ``q``. Over static weights the receivers follow ``v_hat_w = h_w + M q`` (the paper's
        form); where the links do more (:func:`~rowstoch_fast.network.links_of`: losses, sleep, schedules,
        delays, noise on each received copy) ``v_hat_w`` is the round's mixture of the receivers' copies of
        ``v_hat = h + q`` through them (each copy as of the newest message that has arrived, as if messages
        arrived in order; a difference ``q`` applied twice or never would make ``h_w`` drift without bound),
        and the method is exact only where every message arrives in its round.
    C : idem
        Column-stochastic (e.g. ``mixing.out_degree_weights(A)``, or ``net.map(mixing.out_degree_weights)``).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    gamma : float in (0, 1], optional
        Consensus step. Default: the compression's contraction ``delta`` (1 without compression, ``k / d`` for
        top-k; see :meth:`~rowstoch_fast.network.Compressed.delta`), halved for an unbiased compression of
        variance ``omega >= 1`` (``delta / (1 + min(1, omega))``): a heuristic that kept every compression of the
        tests stable at ``lr`` up to 0.1 (QSGD 1-4 bits, top-1 to top-5 of 20, sign, rand-4 of 20).
    a : float in (0, 1], optional
        How far the reference points move towards the last estimate. Default ``1 / (1 + omega)``
        (``omega``: the variance bound of an unbiased compression; 1 for the biased ones and without compression).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import CompressedPushPull, mixing, topology
    >>> from rowstoch_fast.network import Compressed
    >>> net = Compressed(topology.exponential(8), "qsgd", bits=4, seed=1)
    >>> b = np.arange(8.0)[:, None] * np.ones(4)
    >>> opt = CompressedPushPull(net, net.map(mixing.out_degree_weights), np.zeros(4), lr=0.1)
    >>> for _ in range(1500):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.abs(opt.x - b.mean()).max() < 1e-8)  # exact under 4-bit messages
    True
    """

    name = "compressed-push-pull"
    family = "gradient tracking, compressed"
    order = 41
    state = ("x", "y", "g", "hx", "hxw", "hy", "hyw")
    scratch = 3
    hyper = ("lr", "gamma", "a")
    derived_hyper = {"gamma": 1.0, "a": 1.0}
    # a method for compressed messages: on the paper's uncompressed graphs it is AB (Push-Pull at gamma = 1)
    in_paper_preset = False
    in_robustness = False

    def __init__(self, A, C, x0, lr, gamma=None, a=None, backend="auto", *, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {"A": A, "C": C}, backend, check_finite, comm, partition, lr=lr, gamma=gamma, a=a)

    def _validate(self, matrices, x0, hyper):
        omega, delta = message_contraction(matrices, x0)
        if hyper["gamma"] is None:  # (the unbiased compressions' variance: half of it; see the docstring)
            hyper = {**hyper, "gamma": delta / (1.0 + min(1.0, omega))}
        if hyper["a"] is None:
            hyper = {**hyper, "a": 1.0 / (1.0 + omega)}
        return super()._validate(matrices, x0, hyper)

    def _check_hyper(self, lr, gamma, a):
        self.lr = self._check_lr(lr)
        self.gamma = check_positive_float(gamma, "gamma")
        self.a = check_positive_float(a, "a")
        for key, value in (("gamma", self.gamma), ("a", self.a)):
            if value > 1:
                raise ValueError(f"{key} must be in (0, 1], got {value}")
        return {"lr": self.lr, "gamma": self.gamma, "a": self.a}

    # (its traffic, one message on each of A and C per iteration, and its start, y_0 = g(x_0): Push-Pull's)

    def _exchange(self, M, v, h, hw, h_out, hw_out, t):
        """``v_hat - v_hat_w`` into a work block, the reference points moved into ``h_out`` / ``hw_out``: one
        compressed message ``q = Q(v - h)`` over ``M``. (With ``v_hat = h + q`` and ``v_hat_w = h_w + M q``:
        ``h <- h + a q``, ``h_w <- h_w + a M q``, ``v_hat - v_hat_w = h + q - h_w - M q``.)"""
        ops, a = self._ops, self.a
        diff, q, mq = self._work[:3]
        ops.combine(q, [1.0, -1.0], [v, h], check=False)
        if M is not weights_of(M):
            ops.compress(M, q, q, t)  # q = Q(v - h): the message
        links = links_of(M)
        if isinstance(links, Network):  # the receivers' copies of v_hat = h + q through the links: v_hat_w (h_w
            # still moves as the paper's, the state it saves, but the round no longer reads it)
            ops.combine(diff, [1.0, 1.0], [h, q], check=False)
            ops.mix(links, diff, mq)
            ops.combine(h_out, [1.0, a], [h, q], check=False)
            ops.combine(hw_out, [1.0 - a, a], [hw, mq], check=False)
            ops.combine(diff, [1.0, -1.0], [diff, mq], check=False)
            return diff
        ops.mix(links, q, mq)  # (M q: the messages received, weighted)
        ops.combine(h_out, [1.0, a], [h, q], check=False)
        ops.combine(hw_out, [1.0, a], [hw, mq], check=False)
        ops.combine(diff, [1.0, -1.0, 1.0, -1.0], [h, hw, q, mq], check=False)  # (h - h_w first: they are close)
        return diff

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        diff = self._exchange(self.A, cur["x"], cur["hx"], cur["hxw"], nxt["hx"], nxt["hxw"], t)
        finite = ops.combine(nxt["x"], [1.0, -self.gamma, self._lr_coef()], [cur["x"], diff, cur["y"]])
        self._check_iterates(finite, t, nxt["x"])
        self._gradient(grad_fn, nxt["x"], nxt["g"], t + 1)
        diff = self._exchange(self.C, cur["y"], cur["hy"], cur["hyw"], nxt["hy"], nxt["hyw"], t)
        finite = ops.combine(nxt["y"], [1.0, -self.gamma, 1.0, -1.0], [cur["y"], diff, nxt["g"], cur["g"]])
        self._check_iterates(finite, t, nxt["y"])
