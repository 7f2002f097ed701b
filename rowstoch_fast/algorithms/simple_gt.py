"""SimpleGT (decent-bench 0.3.0's ``SimpleGT``): gradient tracking with one variable sent per iteration over a
doubly stochastic W, exact through a conserved sum."""

from __future__ import annotations

from ._base import Optimizer

__all__ = ["SimpleGT"]


class SimpleGT(Optimizer):
    r"""SimpleGT: gradient tracking that sends only the model, its correction carried by the last local step.

    Implements, with :math:`y_0 = x_0`:

    .. math::

        y_{k+1} &= x_k - \mathrm{lr}\, g(x_k) \\
        x_{k+1} &= W x_k + y_{k+1} - y_k

    This class keeps :math:`u_k = x_k - y_k` in place of ``y`` (:math:`u_0 = 0`), the same iterates written as

    .. math::

        x_{k+1} &= W x_k - \mathrm{lr}\, g(x_k) + u_k \\
        u_{k+1} &= u_k + (W x_k - x_k)

    so that the state holds the small consensus correction rather than two copies of the model whose difference
    is ``lr g`` (float32 iterates of the ``y`` form were 2.3e-5 from float64 in the registry's float32 test, these
    4.9e-6; in either form a rounding error that enters the conserved sum below moves the fixed point by about
    itself over ``lr`` times the curvature). The dense twin, :func:`rowstoch_fast._reference.simple_gt`, is
    decent-bench's ``y`` form. Eliminating ``u`` gives
    :math:`x_{k+2} = (I + W) x_{k+1} - x_k - \mathrm{lr}\,(g(x_{k+1}) - g(x_k))`,
    :math:`x_1 = W x_0 - \mathrm{lr}\, g(x_0)`: EXTRA's recursion (Shi, Ling, Wu & Yin 2015, eq. 3) with
    :math:`\tilde W = I` in place of :math:`(I + W) / 2`, a choice outside EXTRA's conditions
    (:math:`\mathrm{null}(I - \tilde W) = \mathrm{span}(1)`), so EXTRA's analysis does not cover it.

    Exact: on a doubly stochastic ``W`` the sum :math:`1^T u_k = 1^T (x_k - y_k)` is conserved (``= 0``), so at a
    fixed point ``W x = x`` (consensus) and :math:`1^T u = 0` give :math:`\sum_i g_i(x) = 0`. Without gradients
    the consensus error does not decay (each eigenvalue :math:`\lambda` of ``W`` gives the roots of
    :math:`\mu^2 - (1 + \lambda) \mu + 1`, whose product is 1): the damping comes from the gradient differences.
    With one curvature ``h`` at every node the roots are those of
    :math:`\mu^2 - (1 + \lambda - \mathrm{lr}\, h) \mu + 1 - \mathrm{lr}\, h`, inside the unit circle for every real
    :math:`\lambda \in [\lambda_{\min}, 1)` iff :math:`0 < \mathrm{lr}\, h < (3 + \lambda_{\min}) / 2` (a ring's
    Metropolis ``W``: ``lr h < 4/3``, checked numerically). A complex :math:`\lambda` (a directed graph's doubly
    stochastic ``W``) puts a root outside it for small ``lr`` (the run diverges), so ``W`` must be symmetric. No
    published step-size condition for heterogeneous ``f_i`` is known to us. One round and one gradient per
    iteration.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Doubly stochastic and symmetric (see :class:`~rowstoch_fast.DGD`).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
        ``rho`` in decent-bench (its default ``0.001`` is no default here: ``lr`` is always given).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    None known: decent-bench 0.3.0's ``SimpleGT`` (``decent_bench/algorithms/p2p/_simple_gt.py``, alias
    ``SimpleGradientTracking``) cites no paper, and a search found no published source of this form. The
    recursion it reduces to is that of W. Shi, Q. Ling, G. Wu and W. Yin, "EXTRA: An exact first-order algorithm
    for decentralized consensus optimization", SIAM J. Optim. 25(2), 2015, with ``W_tilde = I``.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import SimpleGT, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = SimpleGT(W, np.zeros(1), lr=0.2)
    >>> for _ in range(3000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean()))
    True
    """

    name = "simple-gt"
    family = "gradient tracking"
    order = 131
    exact = True
    symmetric = True  # (a directed graph's complex eigenvalues make it diverge: the class docstring)
    needs_steady = True  # (rounds that change, or delays, make its undamped modes grow at small steps)
    needs_timely = True
    matrices = ("W",)
    state = ("x", "u")  # (u = x - y of decent-bench's form)
    scratch = 1

    def __init__(self, W, x0, lr, backend="auto", *, check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g = self._gradient_read(grad_fn, cur["x"], self._work[0], t)
        ops.mix(self.W, cur["x"], nxt["x"])
        finite = ops.combine(nxt["u"], [1.0, 1.0, -1.0], [cur["u"], nxt["x"], cur["x"]])  # u + (W x - x)
        self._check_iterates(finite, t, nxt["u"])
        finite = ops.combine(nxt["x"], [1.0, self._lr_coef(), 1.0], [nxt["x"], g, cur["u"]])  # W x - lr g + u
        self._check_iterates(finite, t, nxt["x"])
