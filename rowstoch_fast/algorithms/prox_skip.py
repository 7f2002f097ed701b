"""Decentralized ProxSkip (Mishchenko, Malinovsky, Stich & Richtarik 2022): gossip skipped at random, with a control
variate that keeps the local steps exact."""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_positive_float
from .._hashing import uniform_hash
from ._base import Optimizer
from ._local import steps_to_budget

__all__ = ["ProxSkip"]

#: The last key of the coins' hashes (the networks' draws have node ids there, below 2^62).
_COIN_KEY = 2**63 - 2
#: Iterations whose coins are drawn together (:meth:`ProxSkip._coin_block`).
_COIN_BLOCK = 4096


class ProxSkip(Optimizer):
    r"""Decentralized ProxSkip: every iteration a local gradient step corrected by a control variate; a gossip
    round only with probability ``p`` (one coin for the whole network).

    Implements, with :math:`W_a = I - (I - W) / (2 \chi)`, :math:`y_0 = 0` and a coin :math:`\theta_t` that is 1
    with probability :math:`p`:

    .. math::

        z_t &= x_t - \mathrm{lr}\, g(x_t) - y_t \\
        \theta_t = 1 &: \quad x_{t+1} = W_a z_t, \quad y_{t+1} = y_t + \beta (z_t - x_{t+1})
            \qquad \text{(a communication round)} \\
        \theta_t = 0 &: \quad x_{t+1} = z_t, \quad y_{t+1} = y_t \qquad \text{(a local step)}

    This is the reference's decentralized method (its ProxSkip with the consensus constraint's "prox" a gossip
    step, Scaffnew's control variate ``h = -y / lr``) in the form decent-bench 0.3.0 writes it; with
    ``beta = p`` (the default) the control variate's update is the reference's ``h+ = h + (p / lr) (x+ - x_hat)``.
    Exact: the control variate removes the drift of heterogeneous data (for ``lr`` small enough), with about
    ``p`` times fewer rounds than gradient steps.

    The coins are a counter-based hash of ``(seed, t)``: the same on every process and backend, and reproducible;
    a comparison's repetitions toss the same coins (they set the iterations, which the repetitions share: give
    ``seed`` to toss others).
    ``rowstoch compare`` gives it as many iterations as it takes for its coins to make exactly the budget's
    rounds; :attr:`communication_rounds` and :meth:`traffic` count the rounds made.

    Parameters
    ----------
    W : MixingMatrix or array_like
        Symmetric and doubly stochastic: an undirected graph's weights, as the reference's analysis assumes. A
        directed graph's doubly stochastic weights are refused: their complex eigenvalues make the recursion
        unstable at small steps (on the directed exponential graph of 16 nodes with ``p = 0.25`` and ``lr =
        1e-3``, ``W_a``'s eigenvalues ``0.663 +- 0.209i`` grow the disagreement about ``e^{0.013}``-fold an
        iteration: 20,000 iterations on a quadratic end at ``1e106``, where ``lr = 0.1`` converges).
    x0 : array_like, shape (d,), (n, d) or (reps, n, d)
    lr : float
    comm_probability : float, default 0.25
        ``p`` in (0, 1].
    dual_step : float, optional
        ``beta > 0``; default ``p``.
    chi : float, default 1.0
        ``chi >= 1`` (``W_a = (I + W) / 2`` at 1).
    seed : int, default 0
        The coins' seed.
    backend, check_finite, comm, partition
        As in :class:`~rowstoch_fast.PullDiagGT`.

    References
    ----------
    K. Mishchenko, G. Malinovsky, S. Stich and P. Richtarik, "ProxSkip: Yes! Local gradient steps provably lead
    to communication acceleration! Finally!", ICML 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import ProxSkip, topology
    >>> W = topology.ring(6, directed=False, weights="metropolis")
    >>> b = np.arange(6.0)[:, None]
    >>> opt = ProxSkip(W, np.zeros(1), lr=0.2, comm_probability=0.25)
    >>> for _ in range(4000):
    ...     _ = opt.step(lambda X: X - b)
    >>> bool(np.allclose(opt.x, b.mean())), 900 < opt.communication_rounds < 1100
    (True, True)
    """

    name = "prox-skip"
    family = "primal-dual, local updates (random)"
    order = 166
    exact = True
    matrices = ("W",)
    symmetric = True
    needs_steady = True  # (links that stay lost for rounds, Gilbert-Elliott, make small steps diverge)
    in_paper_preset = False
    in_robustness = False
    state = ("x", "y")
    hyper = ("lr", "comm_probability", "dual_step", "chi", "seed")
    scratch = 3

    def __init__(self, W, x0, lr, backend="auto", *, comm_probability=0.25, dual_step=None, chi=1.0, seed=0,
                 check_finite=True, comm=None, partition=None):
        self._start(x0, {"W": W}, backend, check_finite, comm, partition, lr=lr, comm_probability=comm_probability,
                    dual_step=dual_step, chi=chi, seed=seed)

    @staticmethod
    def _check_p(p):
        p = check_positive_float(p, "comm_probability")
        if p > 1:
            raise ValueError(f"comm_probability must be in (0, 1], got {p}")
        return p

    @classmethod
    def draws_for(cls, options=None):
        """False: its coins set its iterations (:meth:`iterations_for`), which a comparison's repetitions share, so
        they toss the same coins (:meth:`Optimizer.draws_for`)."""
        return False

    def _check_hyper(self, lr, comm_probability=0.25, dual_step=None, chi=1.0, seed=0):
        self.lr = self._check_lr(lr)
        self.comm_probability = self._check_p(comm_probability)
        self.dual_step = self.comm_probability if dual_step is None else check_positive_float(dual_step, "dual_step")
        self.chi = check_positive_float(chi, "chi")
        if self.chi < 1:
            raise ValueError(f"chi must be >= 1, got {self.chi}")
        self.seed = check_int(seed, "seed", minimum=0, maximum=2**63 - 1)
        return {"lr": self.lr, "comm_probability": self.comm_probability, "dual_step": self.dual_step,
                "chi": self.chi, "seed": self.seed}

    @staticmethod
    def coins(seed, p, T):
        """``theta_0 .. theta_{T-1}``: whether each iteration communicates (bool array)."""
        return ProxSkip.coins_at(seed, p, np.arange(T, dtype=np.int64))

    @staticmethod
    def coins_at(seed, p, t):
        """``theta_t`` of the iterations ``t`` (an int64 array)."""
        return uniform_hash(seed, t, _COIN_KEY) < p

    @classmethod
    def iterations_for(cls, budget, rounds=1, options=None):
        """The iterations whose coins make exactly ``budget`` communication rounds."""
        options = options or {}
        p, seed = cls._check_p(options.get("comm_probability", 0.25)), int(options.get("seed", 0))
        return steps_to_budget(lambda t: cls.coins_at(seed, p, t), budget, p, "comm_probability", p)

    def _talks(self, t):
        start, coins, _ = self._coin_block(t)
        return bool(coins[t - start])

    def _rounds_before(self, t):
        """The rounds made before iteration ``t``."""
        start, _, before = self._coin_block(t)
        return int(before[t - start])

    def _coin_block(self, t):
        """``(start, coins, before)`` of the block of ``_COIN_BLOCK`` iterations that holds ``t``: its coins and the
        rounds made before each of them (drawn once a block: a coin a step took two hashes of NumPy scalars, 130 of
        a 180 us step at 16 nodes). The next block counts on from this one; another one (a resume, a jump) counts
        the coins before it."""
        block = self.__dict__.get("_coins")
        if block is not None and block[0] <= t < block[0] + _COIN_BLOCK:
            return block
        start = t - t % _COIN_BLOCK
        if block is not None and start == block[0] + _COIN_BLOCK:
            counted = int(block[2][-1] + block[1][-1])
        else:
            counted = sum(int(self._coin_range(a, min(a + 2**20, start)).sum()) for a in range(0, start, 2**20))
        coins = self._coin_range(start, start + _COIN_BLOCK)
        before = counted + np.concatenate(([0], np.cumsum(coins[:-1], dtype=np.int64)))
        self._coins = (start, coins, before)
        return self._coins

    def _coin_range(self, start, stop):
        """The coins of iterations ``start .. stop - 1`` (``coins`` of them)."""
        return uniform_hash(self.seed, np.arange(start, stop, dtype=np.int64), _COIN_KEY) < self.comm_probability

    def _talking_iterations(self):
        return self._rounds_before(self.iteration)

    def _network_time(self, t):
        """The index of the round iteration ``t`` makes (if its coin says so): a time-varying network advances by
        round."""
        return self._rounds_before(t)

    def _advance(self, grad_fn, cur, nxt, t):
        ops = self._ops
        g, z, wz = self._work
        g = self._gradient_read(grad_fn, cur["x"], g, t, checked_next=True)
        talks = self._talks(t)
        if not talks:
            z = nxt["x"]  # (a local step: x_{t+1} = z_t, written where it stays)
        finite = ops.combine(z, [1.0, self._lr_coef(), -1.0], [cur["x"], g, cur["y"]])
        self._check_iterates(finite, t, z)
        if not talks:
            self._carry(cur, nxt, "y")
            self._verified_last(finite, nxt["x"], t + 1)
            return
        ops.mix(self.W, z, wz)
        a = 0.5 / self.chi
        finite = ops.combine(nxt["x"], [1.0 - a, a], [z, wz])
        self._check_iterates(finite, t, nxt["x"])
        ops.combine(nxt["y"], [1.0, self.dual_step, -self.dual_step], [cur["y"], z, nxt["x"]], check=False)
