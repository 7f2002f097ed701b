"""FedOpt (Reddi, Charles, Zaheer, Garrett, Rush, Konecny, Kumar & McMahan 2021): adaptive server optimizers."""

from __future__ import annotations

from .._checks import check_choice, check_positive_float
from ._base import Optimizer
from ._federated import FEDERATED_HYPER, Federated
from ._local import DEFAULT_LOCAL_STEPS

__all__ = ["FedOpt"]

#: The second-moment rules of the server optimizers, ``v <- rule(v, D2)`` with ``D2 = Delta^2``.
SERVER_OPTIMIZERS = ("adam", "adagrad", "yogi")


class FedOpt(Federated, Optimizer):
    r"""FedAvg's clients with an adaptive optimizer on the server (FedAdam, FedAdagrad, FedYogi): the chosen
    clients' average update :math:`\Delta` is the server's pseudo-gradient.

    Implements the reference's Algorithm 2, per round with the server model :math:`s` and the chosen clients
    :math:`S`:

    .. math::

        y_i &\leftarrow s, \text{ then } K \text{ times: } \quad y_i \leftarrow y_i - \mathrm{lr}\, g_i(y_i)
            \qquad (i \in S) \\
        \Delta &= \frac{1}{|S|} \sum_{i \in S} (y_i - s) \\
        m &\leftarrow \beta_1 m + (1 - \beta_1) \Delta \\
        v &\leftarrow \begin{cases}
            v + \Delta^2 & \text{(adagrad)} \\
            \beta_2 v + (1 - \beta_2) \Delta^2 & \text{(adam)} \\
            v - (1 - \beta_2) \Delta^2 \operatorname{sign}(v - \Delta^2) & \text{(yogi)}
        \end{cases} \\
        s &\leftarrow s + \mathrm{server\_lr}\, \frac{m}{\sqrt{v} + \tau}

    element by element, with :math:`m = v = 0` at the start (as decent-bench 0.3.0's ``FedAdam`` / ``FedAdagrad`` /
    ``FedYogi``, which write the same updates; the reference allows any :math:`v_{-1} \ge \tau^2`). Its steps are
    about ``server_lr`` per coordinate whatever the size of :math:`\Delta`: with a constant ``server_lr`` it ends in a
    neighbourhood of the minimiser of size about ``server_lr``, not ``O(lr)``. ``rowstoch compare`` tunes ``lr``
    only: ``server_lr`` decides its place (on a held-out least-squares problem, 400 rounds: 2.7e-5 at the default
    0.01, 2.1e-10 at 1.0, no progress at 0.001; bench/RESULTS.md section 26): give it (``[algorithms.fedopt]
    server_lr = ...``) or compare several.

    Parameters
    ----------
    n, x0, lr, local_steps, participation, client_steps, selection, client_weights, seed
        As in :class:`~rowstoch_fast.FedAvg`.
    server_optimizer : {"adam", "adagrad", "yogi"}, default "adam"
    server_lr : float, default 0.01
        ``eta``, the server's step size.
    beta1 : float, default 0.9
    beta2 : float, default 0.99
        The moments' coefficients, in ``[0, 1)`` (``beta2``: unused by adagrad).
    tau : float, default 1e-3
        The adaptivity (``> 0``).
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    S. J. Reddi, Z. Charles, M. Zaheer, Z. Garrett, K. Rush, J. Konecny, S. Kumar and H. B. McMahan, "Adaptive
    federated optimization", ICLR 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import FedOpt
    >>> b = np.arange(8.0)[:, None]
    >>> opt = FedOpt(8, np.zeros(1), lr=0.1, server_optimizer="yogi", server_lr=0.05)
    >>> for _ in range(2000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(abs(opt.x.mean() - 3.5) < 0.05)
    True
    """

    name = "fedopt"
    family = "federated"
    order = 165
    bias = "a server_lr-wide neighbourhood of the"
    state = ("x", "server", "m", "v")
    hyper = (*FEDERATED_HYPER, "server_optimizer", "server_lr", "beta1", "beta2", "tau", "seed")
    scratch = 3

    def __init__(self, n, x0, lr, backend="auto", *, local_steps=DEFAULT_LOCAL_STEPS, participation=1.0,
                 client_steps=None, selection="uniform", client_weights=None, server_optimizer="adam",
                 server_lr=0.01, beta1=0.9, beta2=0.99, tau=1e-3, seed=0, check_finite=True, comm=None,
                 partition=None):
        self._start(x0, {}, backend, check_finite, comm, partition, n=n, lr=lr, local_steps=local_steps,
                    participation=participation, client_steps=client_steps, selection=selection,
                    client_weights=client_weights, server_optimizer=server_optimizer, server_lr=server_lr,
                    beta1=beta1, beta2=beta2, tau=tau, seed=seed)

    def _check_hyper(self, n, lr, server_optimizer="adam", server_lr=0.01, beta1=0.9, beta2=0.99, tau=1e-3,
                     **federated):
        hyper = self._check_federated(n, lr, **federated)
        check_choice(server_optimizer, "server_optimizer", SERVER_OPTIMIZERS)
        self.server_optimizer = server_optimizer
        self.server_lr = check_positive_float(server_lr, "server_lr")
        for name, value in (("beta1", beta1), ("beta2", beta2)):
            value = check_positive_float(value, name, allow_zero=True)
            if value >= 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
            setattr(self, name, value)
        self.tau = check_positive_float(tau, "tau")
        return {**hyper, "server_optimizer": self.server_optimizer, "server_lr": self.server_lr, "beta1": self.beta1,
                "beta2": self.beta2, "tau": self.tau}

    def _aggregate(self, cur, nxt, chosen, u, t):
        xp = self._ops.xp
        delta = self._mean_of_chosen(u)
        m = self.beta1 * cur["m"][0] + (1.0 - self.beta1) * delta
        v, d2 = cur["v"][0], delta * delta
        if self.server_optimizer == "adagrad":
            v = v + d2
        elif self.server_optimizer == "adam":
            v = self.beta2 * v + (1.0 - self.beta2) * d2
        else:
            v = v - (1.0 - self.beta2) * d2 * xp.sign(v - d2)
        self._server_to("m", nxt, m, t)
        self._server_to("v", nxt, v, t)
        self._server_to("server", nxt, cur["server"][0] + self.server_lr * m / (xp.sqrt(v) + self.tau), t)
