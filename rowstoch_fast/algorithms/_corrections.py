"""The corrections that make row- or column-stochastic mixing unbiased, shared by the algorithms that use them:
push-sum weights (SGP, Push-DIGing) and the rows of the Pull-Diag family's diagonal tracker."""

from __future__ import annotations

from ..mixing import MixingMatrix

__all__ = ["PushWeights", "tracker_row"]


class PushWeights:
    """Push-sum weights ``nxt <- C^rounds cur`` (one value per node) and their reciprocals.

    The weights do not depend on the data, and once a step leaves them unchanged bit for bit they are a
    fixed point of the (deterministic) kernel: from then on they are copied instead of mixed, with the same
    bits, and their reciprocal is computed once. Only on a static matrix: on a time-varying network a round
    that changes nothing (every node asleep) says nothing of the next. The test reads the weights: where the
    backend defers its checks (a GPU) it runs every ``check_every`` steps, on the steps those checks are
    read, so that it costs no device synchronisation of its own. It is agreed on by every MPI rank.
    """

    def __init__(self, ops, C, rounds):
        self.ops, self.C, self.rounds = ops, C, rounds
        self.work = ops.zeros(1) if rounds > 1 else None
        self.frozen = False
        self._inverse = None
        self._may_freeze = isinstance(C, MixingMatrix)

    def advance(self, cur, nxt, iteration):
        """``nxt <- C^rounds cur`` in step ``iteration`` (a copy once the weights are frozen)."""
        if self.frozen:
            nxt[...] = cur
            return
        ops = self.ops
        ops.mix(self.C, cur, nxt, self.rounds, self.work)
        if self._may_freeze and (iteration + 1) % ops.check_every == 0:
            self.frozen = ops.all_true(bool((nxt == cur).all()))

    def inverse(self, w):
        """``1 / w`` as a per-node coefficient (computed once when the weights are frozen)."""
        if not self.frozen:
            return 1.0 / w[:, 0]
        if self._inverse is None:
            self._inverse = 1.0 / w[:, 0]
        return self._inverse


def tracker_row(opt, t, coef):
    """``coef * opt._tracker.scale(t)`` (one value per node); once the tracker has frozen, computed once per
    ``coef`` for the rest of the run (on a GPU a launch and an allocation less per step)."""
    tracker = opt._tracker
    frozen = getattr(tracker, "frozen_at", None)
    if frozen is None or t < frozen:
        scaled = getattr(tracker, "scaled", None)  # the GPU's tracker multiplies its table once
        return coef * tracker.scale(t) if scaled is None else scaled(t, coef)
    cached = opt.__dict__.get("_frozen_row")
    if cached is None or cached[0] != coef:
        cached = opt._frozen_row = (coef, coef * tracker.scale(frozen))
    return cached[1]
