"""FedNova (Wang, Liu, Liang, Joshi & Poor 2020): normalized averaging for clients of unequal local work."""

from __future__ import annotations

from ._base import Optimizer
from ._federated import FEDERATED_HYPER, Federated
from ._local import DEFAULT_LOCAL_STEPS

__all__ = ["FedNova"]


class FedNova(Federated, Optimizer):
    r"""FedAvg whose server normalizes each client's update by its number of local steps: with clients of unequal
    work (``client_steps``) FedAvg converges to the minimiser of a sum weighted by the steps (objective
    inconsistency); FedNova's is that of ``(1/n) sum_i f_i``.

    Implements the reference's plain form (local SGD, no momentum, equal client weights), per round with the server
    model :math:`s` and the chosen clients :math:`S`:

    .. math::

        y_i &\leftarrow s, \text{ then } \tau_i \text{ times: } \quad y_i \leftarrow y_i - \mathrm{lr}\, g_i(y_i)
            \qquad (i \in S) \\
        \tau_{\mathrm{eff}} &= \frac{1}{|S|} \sum_{i \in S} \tau_i \\
        s &\leftarrow s + \tau_{\mathrm{eff}}\, \frac{1}{|S|} \sum_{i \in S} \frac{y_i - s}{\tau_i}

    With every :math:`\tau_i = K` it is :class:`~rowstoch_fast.FedAvg` (a test checks it). decent-bench 0.3.0's
    ``FedNova`` without momentum or proximal term writes the same update where the clients hold equal numbers of
    samples (as this package's objectives give them); it weights the clients by their sample counts
    (:math:`p_i = n_i / \sum_{j \in S} n_j`) where they differ. The normalization by :math:`\tau_i` is
    first-order in ``lr``: what is left of the inconsistency is ``O(lr)`` (the example).

    Parameters
    ----------
    n, x0, lr, local_steps, participation, client_steps, selection, client_weights, seed
        As in :class:`~rowstoch_fast.FedAvg` (``client_steps``: the ``tau_i``, ``K`` for all by default).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    J. Wang, Q. Liu, H. Liang, G. Joshi and H. V. Poor, "Tackling the objective inconsistency problem in
    heterogeneous federated optimization", NeurIPS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import FedNova
    >>> b = np.arange(8.0)[:, None]
    >>> opt = FedNova(8, np.zeros(1), lr=0.01, local_steps=8, client_steps=[1, 2, 3, 4, 5, 6, 7, 8])
    >>> for _ in range(8000):
    ...     _ = opt.step(lambda X: X - b)
    >>> round(float(opt.x.mean()), 2)  # 3.5 as lr -> 0; FedAvg ends at 4.65, near the steps-weighted 4.67
    3.47
    """

    name = "fednova"
    family = "federated"
    order = 164
    goal_conditions = " (uniform or fair selection; another point otherwise)"  # (its normalized steps correct
    # unequal client_steps; clients chosen by size still weigh the average)
    state = ("x", "server")
    hyper = (*FEDERATED_HYPER, "seed")
    scratch = 3

    def __init__(self, n, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0,
                 client_steps=None, selection="uniform", client_weights=None, seed=0, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {}, backend, check_finite, comm, partition, n=n, lr=lr, local_steps=local_steps,
                    participation=participation, client_steps=client_steps, selection=selection,
                    client_weights=client_weights, seed=seed)

    def _check_hyper(self, n, lr, **federated):
        return self._check_federated(n, lr, **federated)

    def _aggregate(self, cur, nxt, chosen, u, t):
        if self.client_steps is None:  # (every tau_i = K: FedAvg's average)
            self._step_server(cur, nxt, u, t)
            return
        _, mask = self._round_selection(t)
        tau_eff = float(self.client_steps[mask].mean())
        normalized = self._work[1]  # (y_i - s) / tau_i
        self._ops.combine(normalized, [self._inverse_steps(t)], [u], check=False)
        self._step_server(cur, nxt, normalized, t, tau_eff)
