"""Noisy messages: :class:`Noisy` (Gaussian noise per received copy or per message).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_positive_float, MAX_KEY
from ..errors import UsageError
from .base import as_network
from .messages import _Messages
from .options import Option


class Noisy(_Messages):
    """Additive Gaussian noise on the values received: a receiver gets ``x_j + sigma z`` (``z`` standard normal,
    from the counter-based hash: the same on every backend); a node's own value is exact. ``per="link"``
    (default): every receiver's copy of a message has noise of its own (``z`` drawn per link, value and the
    iteration the message was sent, so a delayed message keeps its noise), ``y_i = m_ii x_i + sum_{j != i} m_ij
    (q_j + sigma z_ij)``, added through the round's own weights (losses and renormalisation included);
    ``per="message"``: the noise is on what is sent, the same for all its receivers (``q_j + sigma z_j``). ``sigma
    = 0`` is the base network, bit for bit. See :class:`_Messages`.

    Parameters
    ----------
    A : MixingMatrix or network
    sigma : float >= 0
        Standard deviation of the noise on each value.
    seed : int
    per : {"link", "message"}

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Noisy
    >>> Y = Noisy(topology.ring(4), sigma=0.1, seed=3).mix(np.ones((4, 2)), t=0)
    >>> bool(np.abs(Y - 1).max() < 0.5)
    True
    """

    layer = "noisy"
    order = 40
    keeps_symmetry = True

    @property
    def alters_messages(self):
        """Noise per message changes what is sent; noise per link, what each receiver gets."""
        return self.per == "message"

    PER = ("link", "message")

    def __init__(self, A, sigma, seed=0, per="link"):
        self.base = as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        self.sigma = check_positive_float(sigma, "sigma", allow_zero=True)
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        if per not in self.PER:
            raise ValueError(f"per must be 'link' (noise on each received copy) or 'message' (on what is sent), "
                             f"got {per!r}")
        self.per = per

    def _parameters(self):
        return {"sigma": self.sigma, "seed": self.seed, "per": self.per}


    def _kernel_arguments(self):
        return 5, 0, self.sigma, False

    def omega(self, d):
        return 0.0

    def delta(self, d):
        return 1.0

    def __repr__(self):
        return f"Noisy({self.base!r}, sigma={self.sigma}, seed={self.seed}, per={self.per!r})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    listed = 40
    SEED_FLAGS = ("--noise",)
    OPTIONS = (Option("noise", float, None, "standard deviation of Gaussian noise on every message (network.Noisy)"),)

    @classmethod
    def examples(cls, base):
        return {"noisy": cls(base, 0.01, seed=7), "noisy-message": cls(base, 0.01, seed=8, per="message")}

    @classmethod
    def options_in_use(cls, ns):
        return ns.noise is not None

    @classmethod
    def check_options(cls, ns, d=None):
        if ns.noise is not None and not (np.isfinite(ns.noise) and ns.noise >= 0):
            raise UsageError(f"--noise must be a finite number >= 0, got {ns.noise}")

    @classmethod
    def from_options(cls, net, ns, seed):
        return cls(net, ns.noise, seed=seed)

    @classmethod
    def options_words(cls, ns):
        return f"message noise sigma {ns.noise:g}" if ns.noise is not None else None

    @classmethod
    def options_record(cls, ns):
        return {"noise": ns.noise} if ns.noise is not None else {}
