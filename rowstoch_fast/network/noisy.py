"""Noisy messages: :class:`Noisy` (Gaussian noise per received copy or per message).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_choice, check_int, check_positive_float, MAX_KEY, per_node_text, per_node_values
from ..errors import UsageError
from .base import _own_draws, as_network
from .messages import _Messages
from .options import ends, node_option, node_spec, node_values, Option, recorded, refused_node, shown


#: The largest |z| of the normal draws, sqrt(-2 ln 2^-53) (Box-Muller of u = 1 - uniform_hash >= 2^-53): noise of
#: ``sigma`` is at most ``Z_MAX sigma`` in magnitude.
Z_MAX = math.sqrt(-2.0 * math.log(2.0**-53))


def sigma_problem(sigma, dtype):
    """Why noise of ``sigma`` cannot be sent in ``dtype`` (its draws would be infinite), or None: ``sigma``
    finite, ``>= 0`` and at most the largest finite value over :data:`Z_MAX`."""
    top = float(np.finfo(dtype).max)
    if not (math.isfinite(sigma) and sigma >= 0):
        return f"must be a finite number >= 0, got {sigma}"
    if sigma > top / Z_MAX:
        return (f"must be at most {top / Z_MAX:.4g} for {np.dtype(dtype).name} values (their largest finite value "
                f"{top:.4g} over {Z_MAX:.4f}, the largest |z| of the normal draws: larger noise is not "
                f"representable), got {sigma:g}")
    return None


class Noisy(_Messages):
    """Additive Gaussian noise on the values received: a receiver gets ``x_j + sigma z`` (``z`` standard normal,
    from the counter-based hash: the same draws on every backend, MPI rank and thread count, their normals the same
    bits on the CPU and under MPI, a few ulp apart on the GPU, whose log and cosine are CUDA's); a node's own value
    is exact. ``per="link"``
    (default): every receiver's copy of a message has noise of its own (``z`` drawn per link, value and the
    iteration the message was sent, so a delayed message keeps its noise), ``y_i = m_ii x_i + sum_{j != i} m_ij
    (q_j + sigma z_ij)``, added through the round's own weights (losses and renormalisation included);
    ``per="message"``: the noise is on what is sent, the same for all its receivers (``q_j + sigma z_j``). ``sigma
    = 0`` is the base network, bit for bit. See :class:`_Messages`.

    Parameters
    ----------
    A : MixingMatrix or network
    sigma : float >= 0, or an array of n of them
        Standard deviation of the noise on each value, at most the largest finite value of the network's dtype over
        :data:`Z_MAX` (about 2.1e307 in float64, 4.0e37 in float32: the noise itself stays finite). An array
        gives each node its own, the noise on what it sends (heterogeneous devices): ``per="link"``, on each copy
        of it; ``per="message"``, on the message itself. Equal values are the single number's draws, bit for bit;
        the CuPy backend's kernels read each sender's sigma.
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
    DRAWN = "noise"
    order = 40
    keeps_symmetry = True
    draws_per_value = True

    @property
    def alters_messages(self):
        """Noise per message changes what is sent; noise per link, what each receiver gets."""
        return self.per == "message"

    PER = ("link", "message")

    def __init__(self, A, sigma, seed=0, per="link"):
        self.base = as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        check_choice(per, "per", self.PER, f"per must be 'link' (noise on each received copy) or 'message' (on "
                                           f"what is sent), got {per!r}")
        top = float(np.finfo(self.dtype).max) / Z_MAX
        each = per_node_values(sigma, "sigma", self.n, lambda v: (v >= 0) & (v <= top),
                               f"a finite number >= 0 and at most {top:.4g} (larger noise overflows the largest "
                               f"finite value)")
        self.sigma = each if each is not None else check_positive_float(sigma, "sigma", allow_zero=True)
        problem = None if each is not None else sigma_problem(self.sigma, self.dtype)
        if problem:
            raise ValueError(f"sigma {problem}")
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        self.per = per
        _own_draws(self)

    @property
    def silent(self):
        """Whether no noise is added (``sigma`` 0, for every node): the base network, bit for bit."""
        return bool(np.all(self.sigma == 0))

    def sigma_of(self, senders, dtype):
        """The noise's standard deviation of each received copy whose sender is ``senders`` (global node ids), a
        column in ``dtype`` to scale the unit draws by (one value: a scalar of ``dtype``)."""
        if np.ndim(self.sigma) == 0:
            return np.asarray(self.sigma, dtype=dtype)
        return self.sigma[np.asarray(senders, dtype=np.int64)].astype(dtype)[:, None]

    def _parameters(self):
        return {"sigma": self.sigma, "seed": self.seed, "per": self.per}

    @property
    def draws(self):
        return not self.silent

    @property
    def draw_key(self):  # (a link's noise is keyed by its sender too, a message's by the sender alone)
        return (self.layer, self.per)


    def _kernel_arguments(self):
        return 5, 0, self.sigma, False

    def omega(self, d):
        return 0.0

    def delta(self, d):
        return 1.0

    @property
    def effect(self):
        """In a diagnosis's words (:attr:`Network.effect`; None where ``silent``)."""
        if self.silent:
            return None
        return (f"adds noise to {'each received copy' if self.per == 'link' else 'each message'} "
                f"(sigma = {per_node_text(self.sigma)})")

    def __repr__(self):
        return f"Noisy({self.base!r}, sigma={per_node_text(self.sigma)}, seed={self.seed}, per={self.per!r})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    listed = 40
    SEED_FLAGS = ("--noise",)
    OPTIONS = (Option("noise", float, None, "standard deviation of Gaussian noise on every message (network.Noisy); "
                                            "one per node (the sender's): FIRST..LAST or @FILE",
                      cli_type=node_option("--noise"), toml_kind="float|nodes"),)

    @classmethod
    def examples(cls, base):
        return {"noisy": cls(base, 0.01, seed=7), "noisy-message": cls(base, 0.01, seed=8, per="message"),
                "per-node-noise": cls(base, np.linspace(0.0, 0.02, base.n), seed=9)}  # (the sender's sigma)

    @classmethod
    def options_in_use(cls, ns):
        return ns.noise is not None

    @classmethod
    def check_options(cls, ns, d=None):
        ns.noise = node_spec(ns.noise, "--noise")
        for end in () if ns.noise is None else ends(ns.noise):
            problem = sigma_problem(end, getattr(ns, "dtype", None) or "float64")
            if problem:
                node = refused_node(ns.noise, lambda v: v != end)
                raise UsageError(f"--noise {problem}" + (f" ({node})" if node else ""))

    @classmethod
    def from_options(cls, net, ns, seed):
        return cls(net, node_values(node_spec(ns.noise, "--noise"), net.n, "--noise"), seed=seed)

    @classmethod
    def options_words(cls, ns):
        return f"message noise sigma {shown(ns.noise)}" if ns.noise is not None else None

    @classmethod
    def options_record(cls, ns):
        return {"noise": recorded(ns.noise)} if ns.noise is not None else {}
