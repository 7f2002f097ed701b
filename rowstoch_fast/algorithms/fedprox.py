"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar & Smith 2020): FedAvg whose clients add a proximal term."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer
from ._federated import FEDERATED_HYPER, Federated
from ._local import DEFAULT_LOCAL_STEPS

__all__ = ["FedProx"]


class FedProx(Federated, Optimizer):
    r"""FedAvg whose clients minimise :math:`f_i(y) + (\mu / 2) \|y - s\|^2` in their local steps: the proximal term
    keeps them near the server model (less client drift, for heterogeneous data and clients of unequal work).

    Implements, per round :math:`r` with the server model :math:`s_r` and the chosen clients :math:`S_r`:

    .. math::

        y_i &\leftarrow s_r, \text{ then } K \text{ times: } \quad
            y_i \leftarrow y_i - \mathrm{lr}\, \big(g_i(y_i) + \mu (y_i - s_r)\big) \qquad (i \in S_r) \\
        s_{r+1} &= \frac{1}{|S_r|} \sum_{i \in S_r} y_i

    ``mu = 0`` is :class:`~rowstoch_fast.FedAvg` (a test checks it). The local problem is solved inexactly by
    ``K`` gradient steps (``tau_i`` with ``client_steps``), as the reference's experiments do.

    Parameters
    ----------
    n, x0, lr, local_steps, participation, client_steps, selection, client_weights, seed
        As in :class:`~rowstoch_fast.FedAvg`.
    mu : float, default 0.01
        The proximal coefficient (``>= 0``).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    T. Li, A. K. Sahu, M. Zaheer, M. Sanjabi, A. Talwalkar and V. Smith, "Federated optimization in heterogeneous
    networks", MLSys 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import FedProx
    >>> b = np.arange(8.0)[:, None]
    >>> opt = FedProx(8, np.zeros(1), lr=0.1, mu=0.1)
    >>> for _ in range(400):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, 3.5))
    True
    """

    name = "fedprox"
    family = "federated"
    order = 161
    state = ("x", "server")
    hyper = (*FEDERATED_HYPER, "mu", "seed")
    scratch = 3

    def __init__(self, n, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0,
                 client_steps=None, selection="uniform", client_weights=None, mu=0.01, seed=0, check_finite=True,
                 comm=None, partition=None):
        self._start(x0, {}, backend, check_finite, comm, partition, n=n, lr=lr, local_steps=local_steps,
                    participation=participation, client_steps=client_steps, selection=selection,
                    client_weights=client_weights, mu=mu, seed=seed)

    def _check_hyper(self, n, lr, mu=0.01, **federated):
        hyper = self._check_federated(n, lr, **federated)
        self.mu = check_positive_float(mu, "mu", allow_zero=True)
        return {**hyper, "mu": self.mu}

    def _direction(self, g, cur, step):  # -lr (g + mu (y - s))
        mu = self.mu
        self._ops.combine(step, [self._lr_coef(), self._lr_coef(-mu), self._lr_coef(mu)], [g, cur["x"], cur["server"]],
                          check=False)

    def _aggregate(self, cur, nxt, chosen, u, t):
        self._step_server(cur, nxt, u, t)
