"""Local updates: ``K`` gradient steps per communication round, each step one iteration (so ``ask`` / ``tell`` and
every oracle see one gradient per step), the rounds and the traffic counted apart."""

from __future__ import annotations

import numpy as np

from .._checks import MAX_ROUNDS, check_int

__all__ = ["LocalSteps"]

#: ``K`` where a local-update method's constructor is not given one.
DEFAULT_LOCAL_STEPS = 4


#: The most iterations :func:`steps_to_budget` draws coins for (expected): a rarer communication is refused by
#: name (a probability of 1e-9 asked for 74.5 GiB of coins at once; a run of 2^28 steps takes days anyway).
MAX_COIN_STEPS = 2**28
_COIN_CHUNK = 2**22


def steps_to_budget(coins_at, budget, p_talk, option, value):
    """The fewest steps whose coins make ``budget`` communications: ``coins_at(t)`` is the coins of steps ``t``
    (an int64 array; booleans, True where a step communicates, each with probability ``p_talk``), drawn in
    blocks of at most :data:`_COIN_CHUNK` (ProxSkip's iterations, FedPD's rounds). A ValueError naming
    ``option = value`` where the budget would take more than :data:`MAX_COIN_STEPS` steps on average."""
    if budget <= 0:
        return 0
    expected = budget / p_talk
    if expected > MAX_COIN_STEPS:
        raise ValueError(f"{option} = {value!r} makes a budget of {budget} communication rounds about "
                         f"{expected:.3g} steps, more than {MAX_COIN_STEPS:,} (2^28): choose a {option} that "
                         "communicates more often, or a smaller budget")
    start, count, chunk = 0, 0, int(min(_COIN_CHUNK, max(1024, 2 * expected)))
    while True:
        talks = np.flatnonzero(coins_at(np.arange(start, start + chunk, dtype=np.int64)))
        if count + len(talks) >= budget:
            return start + int(talks[budget - count - 1]) + 1
        count, start = count + len(talks), start + chunk


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
