"""FedAvg (McMahan, Moore, Ramage, Hampson & Aguera y Arcas 2017): local SGD on the clients, the server averages."""

from __future__ import annotations

from .._checks import check_positive_float
from ._base import Optimizer
from ._federated import FEDERATED_HYPER, Federated
from ._local import DEFAULT_LOCAL_STEPS

__all__ = ["FedAvg"]


class FedAvg(Federated, Optimizer):
    r"""Federated averaging: a server and ``n`` clients; the chosen clients take ``K`` local gradient steps from the
    server model, the server moves to the average of their models.

    Implements, per round :math:`r` with the server model :math:`s_r` and the chosen clients :math:`S_r`:

    .. math::

        y_i &\leftarrow s_r, \text{ then } K \text{ times: } \quad y_i \leftarrow y_i - \mathrm{lr}\, g_i(y_i)
            \qquad (i \in S_r; \ \tau_i \text{ times with } \mathrm{client\_steps}) \\
        s_{r+1} &= s_r + \mathrm{server\_lr}\, \frac{1}{|S_r|} \sum_{i \in S_r} (y_i - s_r)

    (``server_lr = 1``: :math:`s_{r+1}` is the average of the chosen clients' models, the original FedAvg with equal
    client weights). One iteration is one local step; every row of :attr:`x` holds :math:`s_{r+1}` after the
    round's last. With data that differ between clients, the local steps pull each client towards its own minimiser
    (client drift): FedAvg ends in a neighbourhood of the minimiser of ``(1/n) sum_i f_i`` of size ``O(lr K)``
    (:class:`~rowstoch_fast.Scaffold` and :class:`~rowstoch_fast.FedDyn` correct it), where every client takes
    ``K`` steps and the clients are chosen uniformly or in turn. Unequal ``client_steps`` weigh the clients by
    their steps, and clients chosen by size (``selection="size"``) by their rates of inclusion: it then ends near
    another point, O(1) away whatever the rate (:class:`~rowstoch_fast.FedNova` corrects the first).

    See :mod:`rowstoch_fast.algorithms._federated` for how clients, the server and the counts map onto the
    engine.

    Parameters
    ----------
    n : int
        Number of clients.
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
        The server starts at the mean of the rows.
    lr : float
        The clients' step size.
    local_steps : int, default 4
        ``K``, the local steps of a round (a round is ``K`` iterations).
    participation : float, default 1.0
        The fraction of the clients chosen each round (``floor(participation n)`` of them and at least one, by
        ``selection`` from a counter-based hash of ``(seed, round)``).
    client_steps : array_like of n ints, optional
        ``tau_i in 1 .. K``: the local steps of each client (heterogeneous devices); default ``K`` for all.
    selection : {"uniform", "size", "fair"}, default "uniform"
        How a round's clients are chosen: uniformly without replacement; with probability proportional to
        ``client_weights`` (without replacement, one after the other); or the round robin of the clients chosen
        least often so far (deterministic). See :mod:`rowstoch_fast.algorithms._federated`.
    client_weights : array_like of n positive numbers, optional
        ``selection="size"``'s weights, e.g. each client's number of samples (default: equal).
    server_lr : float, default 1.0
        The server's step on the average update.
    seed : int, default 0
        The client selection's seed.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    B. McMahan, E. Moore, D. Ramage, S. Hampson and B. Aguera y Arcas, "Communication-efficient learning of deep
    networks from decentralized data", AISTATS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import FedAvg
    >>> b = np.arange(8.0)[:, None]
    >>> opt = FedAvg(8, np.zeros(1), lr=0.1, local_steps=4, participation=0.5)
    >>> for _ in range(400):
    ...     _ = opt.step(lambda X: X - b)
    >>> opt.communication_rounds, opt.traffic()["messages"]  # 100 rounds, 4 clients up and down in each
    (100, 800)
    >>> bool(np.ptp(opt.x) == 0 and abs(opt.x.mean() - 3.5) < 1.5)  # the server model, noisy by the sampling
    True
    """

    name = "fedavg"
    family = "federated"
    order = 160
    state = ("x", "server")
    hyper = (*FEDERATED_HYPER, "server_lr", "seed")
    scratch = 3

    def __init__(self, n, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0,
                 client_steps=None, selection="uniform", client_weights=None, server_lr=1.0, seed=0,
                 check_finite=True, comm=None, partition=None):
        self._start(x0, {}, backend, check_finite, comm, partition, n=n, lr=lr, local_steps=local_steps,
                    participation=participation, client_steps=client_steps, selection=selection,
                    client_weights=client_weights, server_lr=server_lr, seed=seed)

    def _check_hyper(self, n, lr, server_lr=1.0, **federated):
        hyper = self._check_federated(n, lr, **federated)
        self.server_lr = check_positive_float(server_lr, "server_lr")
        return {**hyper, "server_lr": self.server_lr}

    def _aggregate(self, cur, nxt, chosen, u, t):
        self._step_server(cur, nxt, u, t, self.server_lr)
