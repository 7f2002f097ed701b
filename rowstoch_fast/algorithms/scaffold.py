"""SCAFFOLD (Karimireddy, Kale, Mohri, Reddi, Stich & Suresh 2020): local steps corrected by control variates."""

from __future__ import annotations

from .fedavg import FedAvg

__all__ = ["Scaffold"]


class Scaffold(FedAvg):
    r"""Stochastic controlled averaging: each client corrects its local steps by the difference between the server's
    control variate :math:`c` (an estimate of the average gradient) and its own :math:`c_i` (of its gradient), which
    removes the client drift of FedAvg: with exact gradients and every client taking part it converges to the
    minimiser of ``(1/n) sum_i f_i`` itself.

    Implements (the reference's Algorithm 1 with option II), per round :math:`r` with the server model :math:`s` and
    the chosen clients :math:`S`:

    .. math::

        y_i &\leftarrow s, \text{ then } K \text{ times: } \quad
            y_i \leftarrow y_i - \mathrm{lr}\, (g_i(y_i) - c_i + c) \qquad (i \in S) \\
        c_i^+ &= c_i - c + \frac{s - y_i}{\tau_i\, \mathrm{lr}} \qquad (i \in S; \ \tau_i = K \text{ by default}) \\
        s &\leftarrow s + \mathrm{server\_lr}\, \frac{1}{|S|} \sum_{i \in S} (y_i - s) \\
        c &\leftarrow c + \frac{1}{n} \sum_{i \in S} (c_i^+ - c_i)

    with :math:`c_i = c = 0` at the start. A chosen client downloads :math:`(s, c)` and uploads
    :math:`(y_i - s, c_i^+ - c_i)`: two blocks each way (:meth:`traffic`).

    Parameters
    ----------
    n, x0, lr, local_steps, participation, client_steps, selection, client_weights, server_lr, seed
        As in :class:`~rowstoch_fast.FedAvg`.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    S. P. Karimireddy, S. Kale, M. Mohri, S. Reddi, S. Stich and A. T. Suresh, "SCAFFOLD: stochastic controlled
    averaging for federated learning", ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import Scaffold
    >>> a, b = np.linspace(0.5, 2.0, 8)[:, None], np.arange(8.0)[:, None]
    >>> opt = Scaffold(8, np.zeros(1), lr=0.1, local_steps=4)
    >>> for _ in range(2000):
    ...     _ = opt.step(lambda X: a * X - b)
    >>> bool(np.allclose(opt.x, b.sum() / a.sum()))  # the minimiser of the sum, despite the local steps
    True
    """

    name = "scaffold"
    family = "federated"
    order = 162
    exact = True
    goal_conditions = ""
    state = ("x", "server", "c", "c_server")
    scratch = 4  # (FedAvg's constructor and hyperparameters)
    upload_blocks = download_blocks = 2

    def _direction(self, g, cur, step):  # -lr (g - c_i + c)
        self._ops.combine(step, [self._lr_coef(), self._lr_coef(1.0), self._lr_coef()], [g, cur["c"], cur["c_server"]],
                          check=False)

    def _aggregate(self, cur, nxt, chosen, u, t):
        ops = self._ops
        dc = self._work[3]  # c_i+ - c_i = -c - u_i / (tau_i lr) for the chosen clients, 0 for the others
        ops.combine(dc, [self._inverse_steps(t)], [u], check=False)
        ops.combine(dc, [self._inverse_lr_coef(-1.0), -chosen], [dc, cur["c_server"]], check=False)
        self._check_iterates(ops.combine(nxt["c"], [1.0, 1.0], [cur["c"], dc]), t, nxt["c"])
        self._server_to("c_server", nxt, cur["c_server"][0] + ops.sum_rows(dc) / self.n, t)
        self._step_server(cur, nxt, u, t, self.server_lr)
