"""Local updates: ``K`` gradient steps per communication round, each step one iteration (so ``ask`` / ``tell`` and
every oracle see one gradient per step), the rounds and the traffic counted apart."""

from __future__ import annotations

import numpy as np

from .._checks import MAX_ROUNDS, check_int

__all__ = ["LocalSteps"]

#: ``K`` where a local-update method's constructor is not given one.
DEFAULT_LOCAL_STEPS = 4


def steps_to_budget(coins, budget, guess):
    """The fewest steps whose coins make ``budget`` communications: ``coins(T)`` is the first ``T`` steps' coins
    (booleans, True where a step communicates), drawn for ``guess`` steps and doubled until they hold ``budget``
    (ProxSkip's iterations, FedPD's rounds)."""
    if budget <= 0:
        return 0
    T = max(1, int(guess))
    while True:
        talks = np.flatnonzero(coins(T))
        if len(talks) >= budget:
            return int(talks[budget - 1]) + 1
        T *= 2


class LocalSteps:
    """Mixed into a local-update method (before :class:`~rowstoch_fast.algorithms.Optimizer`): it has the
    hyperparameter ``local_steps`` (``K``), communicates at the last of every ``K`` iterations, and
    ``rowstoch compare`` gives it ``K`` iterations per communication round of its budget."""

    local_steps = DEFAULT_LOCAL_STEPS

    @staticmethod
    def _check_local_steps(local_steps):
        return check_int(local_steps, "local_steps", minimum=1, maximum=MAX_ROUNDS)

    @classmethod
    def iterations_for(cls, budget, rounds=1, options=None):
        """``K`` gradient steps per communication round: ``budget * K`` iterations."""
        return budget * cls._check_local_steps((options or {}).get("local_steps", DEFAULT_LOCAL_STEPS))

    def _talks(self, t):
        """Iteration ``t`` ends a round of ``K`` local steps."""
        return (t + 1) % self.local_steps == 0

    def _talking_iterations(self):
        return self.iteration // self.local_steps

    def _network_time(self, t):
        """Round ``t // K``: a time-varying network advances by round (a schedule's matrices, losses and delays), not
        by local step."""
        return t // self.local_steps

    def _round_starts(self, t):
        """Iteration ``t`` is a round's first local step."""
        return t % self.local_steps == 0
