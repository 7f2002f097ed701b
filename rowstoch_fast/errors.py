"""The exceptions every layer may raise (imports nothing from the package)."""

from __future__ import annotations

__all__ = ["DivergenceError", "GrowthWarning", "MetricValueError", "NetworkIgnoredWarning", "RemoteError", "UsageError"]


class DivergenceError(FloatingPointError):
    """An iterate or a gradient became NaN or Inf.

    The optimizer keeps its last finite state (``opt.x`` and ``opt.iteration``
    are those before the failed step), so it can be saved, inspected, or
    resumed with a smaller learning rate via
    ``type(opt).from_state_dict(opt.state_dict(), lr=...)``.

    Attributes
    ----------
    iteration : int
        The iteration that failed (the step from ``iteration`` to ``iteration + 1``).
    node : int
        The first node with a non-finite value.
    what : str
        ``"gradient"``, ``"iterate"``, ``"weights"`` (a push-sum method whose weights lost messages
        drained), or ``"tracker"`` (a Pull-Diag tracker's diagonal fell below the smallest float, or its scale
        past the precision of the gradients it scales: :meth:`overscaled`).
    """

    def __init__(self, message, *, iteration, node, what):
        super().__init__(message)
        self.iteration = iteration
        self.node = node
        self.what = what

    def __reduce__(self):
        # (BaseException's rebuilds it as cls(*args), without the keyword-only arguments: pickle and copy had
        # raised TypeError, and a process pool sweeping rates broke, or waited for ever, at the first divergent
        # rate, helper 267; its __dict__ keeps what run() and compare() attach: history, frame)
        return (_rebuilt, (type(self), self.args[0] if self.args else "", self.iteration, self.node, self.what),
                self.__dict__)

    @classmethod
    def gradient(cls, iteration, node, kept, told=False):
        """``grad_fn`` returned NaN/Inf at ``iteration`` for ``node`` (``told``: the gradients given to
        ``tell(G)``); the state of iteration ``kept`` is kept."""
        source = "the gradients told (tell(G)) hold" if told else "grad_fn returned"
        return cls(f"{source} a non-finite gradient at iteration {iteration}, first at node {node}; "
                   f"the optimizer keeps its last finite state (iteration {kept})",
                   iteration=iteration, node=int(node), what="gradient")

    @classmethod
    def iterate(cls, iteration, node, lr, others=""):
        """An iterate became NaN/Inf at ``iteration`` (first at ``node``); the previous state is kept. ``others``:
        the method's other settings, which may be the cause (``"mu = 1e+300"``)."""
        others = f"; or one of its other settings: {others}" if others else ""
        return cls(f"iterates became non-finite at iteration {iteration}, first at node {node} (lr = {lr} too "
                   f"large?{others}); "
                   f"the optimizer keeps its last finite state (iteration {iteration - 1})",
                   iteration=iteration, node=int(node), what="iterate")


    @classmethod
    def overscaled(cls, iteration, node, peak, lr, rounds=1):
        """An iterate became NaN/Inf at ``iteration`` (first at ``node``) after the Pull-Diag tracker's scale
        ``1/[D_t]_ii`` on a network whose rounds differ reached ``peak``, past the inverse of float64's precision:
        the rounds' product reaches back to a node ever less, and no rate makes up for it (helper 242:
        MG-Pull-Diag-GT under sleep, its scales at 1e177-1e288, had been told "lr = 1e-09 too large?" at every rate
        from 1e-12 to 10). ``rounds``: the method's gossip rounds per iteration (fewer are suggested where more
        than one)."""
        fewer = f"fewer gossip rounds per iteration (rounds = {rounds}) or " if rounds > 1 else ""
        return cls(f"iterates became non-finite at iteration {iteration}, first at node {node}, with the tracker's "
                   f"scale 1/[D_t]_ii (D_t the diagonal of the rounds' product since iteration 0) up to {peak:.3g}: "
                   f"past 1/eps = 4.5e+15, the gradients it scales swamp every other term in float64, and no rate "
                   f"(lr = {lr}) makes up for it; the rounds' product reaches back to a node ever less (a node asleep "
                   f"or cut off through an iteration's gossip rounds, a long directed path): try {fewer}a method "
                   f"without a diagonal tracker; the optimizer keeps its last finite state (iteration "
                   f"{iteration - 1})", iteration=iteration, node=int(node), what="tracker")

    @classmethod
    def overflow(cls, iteration, node, dtype, lr):
        """The iterate of ``iteration`` is beyond the range of the objective's ``dtype`` (first at ``node``): a
        float64 optimizer's model that a float32 objective cannot take. The optimizer stays at ``iteration``."""
        return cls(f"iterates at iteration {iteration} are beyond the objective's {dtype} range, first at node "
                   f"{node} (lr = {lr} too large?); the optimizer stays at iteration {iteration}, whose gradients "
                   "the objective cannot take", iteration=iteration, node=int(node), what="iterate")

    @classmethod
    def _weights(cls, iteration, node, said, kept):
        """The error of a push-sum method whose weights made its step unstable (:meth:`starved`, :meth:`stranded`):
        ``said`` between where it failed and the state kept; a gradient failed first where ``kept`` (the iteration
        whose state is kept) is given, else the iterates."""
        what = "iterates became non-finite" if kept is None else "grad_fn returned a non-finite gradient"
        kept = iteration - 1 if kept is None else kept
        return cls(f"{what} at iteration {iteration}, first at node {node}, {said}; the optimizer keeps its last "
                   f"finite state (iteration {kept})", iteration=iteration, node=int(node), what="weights")

    @classmethod
    def starved(cls, iteration, node, total, n, weakest, smallest, cause="loses messages", kept=None):
        """A push-sum method's iterates became NaN/Inf after lost messages drained its weights (``cause``: what
        the network does that loses them, :func:`~rowstoch_fast.network.losses_of`); with ``kept`` (the iteration
        whose state is kept), its gradient at them did first."""
        return cls._weights(iteration, node, f"with the push-sum weights down to {total:.3g} of their {n} (node "
                            f"{weakest}: {smallest:.3g}): the network {cause}, and each lost message takes its share "
                            f"of the weights with it, so every node's effective step lr / w grows without bound; a "
                            f"smaller lr only delays it (run where no message is lost, or use a loss-robust method, "
                            f"robust-gradient-push or r-fast, or one that pulls with a row-stochastic matrix)", kept)

    @classmethod
    def stranded(cls, iteration, node, weakest, smallest, cause="loses messages", kept=None, level=1.0):
        """A loss-robust push-sum method's (running sums per link) iterates became NaN/Inf while a node's weight was
        near 0 (``smallest``, at node ``weakest``): its in-links had delivered nothing for many rounds in a row, so
        its effective step lr / w outgrew its gradient (``cause``: what the network does, as for :meth:`starved`;
        the mass is not lost, it waits on the links; ``level``: the weight it settles at where no message is lost,
        ``n pi``). Robust gradient-push under bursty losses had been told
        "lr too large?" at every rate (helper 171: a node's weight 4.4e-8 after a burst of 12-15 lost rounds)."""
        return cls._weights(iteration, node, f"with node {weakest}'s push-sum weight down to {smallest:.3g} "
                            f"({level:.3g} where no message is lost): the network {cause}, and {STRANDED_WHY}", kept)


#: Why a loss-robust push-sum method's node whose weight fell near 0 fails, and what to try: the end of
#: :meth:`DivergenceError.stranded` and of the comparison's diagnosis of such a run that grew without a NaN or Inf
#: (:func:`rowstoch_fast.compare.verdict.status_of`).
STRANDED_WHY = ("while none of a node's in-links delivers, each round keeps only its own share of its weight (the rest "
                "waits on the links), so its effective step lr / w outgrows its gradient; a smaller lr only delays it "
                "where such runs are long (shorter runs of losses may hold, or another loss-robust method: r-fast)")


class GrowthWarning(RuntimeWarning):
    """An optimizer's iterate grew more than its ``growth_limit`` (``1e6``) times its level at iteration 16 without
    a NaN or Inf: the run is very likely diverging (a step size too large).

    Warned once per optimizer by :meth:`~rowstoch_fast.algorithms.Optimizer.step`; set ``opt.growth_limit =
    None`` (or filter this category) where an iterate that large is meant.
    """


class NetworkIgnoredWarning(RuntimeWarning):
    """A method that averages exactly (a server, an all-reduce: the federated methods, ``centralized``) was given a
    network with a communication model (losses, sleep, compression, noise, delays) that it does not run over: its
    results are those of no model at all. Warned by :func:`~rowstoch_fast.run` and
    :func:`~rowstoch_fast.compare.compare`; filter this category where that is meant.
    """


class MetricValueError(TypeError):
    """A metric of the user's (:func:`~rowstoch_fast.register_metric`) returned something that is not one real
    number; the message names the metric and what it returned (``rowstoch`` prints it as one line, exit 2, at
    whatever record it happens)."""


class RemoteError(RuntimeError):
    """Another MPI rank failed; raised on the ranks that did not fail themselves."""


class UsageError(ValueError):
    """A bad argument, name or input file (:mod:`rowstoch_fast.io`, :func:`rowstoch_fast.topology.by_name`,
    the command line): the message names the option or file and what is wrong; ``rowstoch`` prints it as one
    line and exits with status 2."""


def _rebuilt(cls, message, iteration, node, what):
    """A :class:`DivergenceError` (or a subclass) unpickled or copied: :meth:`DivergenceError.__reduce__`."""
    return cls(message, iteration=iteration, node=node, what=what)
