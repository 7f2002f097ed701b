"""Late messages: :class:`Delayed` (each link's message arrives up to ``max_delay`` iterations late).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_choice, check_int, MAX_KEY, require_memory
from ..errors import UsageError
from .._history import History
from .base import as_network
from .messages import _Messages
from .options import Option


class Delayed(_Messages):
    """Messages that arrive late: the message of each link (``j -> i``) sent in iteration ``s`` arrives
    ``tau`` iterations later, ``tau`` drawn per link, round and message (``delay="uniform"``: uniform over
    ``0 .. max_delay``; ``"fixed"``: always ``max_delay``), and a receiver uses the newest message that has
    arrived (its own value is current):

        y_i = m_ii x_i(t) + sum_{j != i} m_ij x_j(t - a_ij(t)),   a_ij(t) = min{k : tau_ij(t - k) <= k}

    Before iteration ``max_delay`` a link with nothing arrived yet uses the initial message. The draws are
    counter-based (``seed, 3 2^61 + s, r, i, j``): every backend and MPI rank, and a resumed run, see the same
    delays. ``max_delay = 0`` is the base network, bit for bit. It composes with losses and sleep inside
    (whose weights it applies) and with compression outside: ``Compressed(Delayed(Lossy(A, 0.1), 3), "topk",
    k=2)`` (the delayed messages are the compressed ones).

    What was sent is state: each mixed quantity keeps its last ``max_delay + 1`` iterations of messages
    (``(max_delay + 1) n d`` values per quantity and round; checked against the memory before it is
    allocated), held by the optimizer and saved in its ``state_dict`` (a resume continues bit for bit). Calls
    of :meth:`mix` outside an optimizer share the network's own history: make them in iteration order (one that
    skips or goes back to an iteration other than 0, or mixes a block of another width or over another number of
    rounds, starts it again from its messages, with a RuntimeWarning; ``state={}`` keeps a history of your own).

    Parameters
    ----------
    A : MixingMatrix or network
    max_delay : int >= 0
        The bound ``D`` on a message's delay, in iterations.
    delay : {"uniform", "fixed"}
    seed : int

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Delayed
    >>> net = Delayed(topology.ring(4), max_delay=2, delay="fixed")
    >>> [float(net.mix(np.full((4, 1), float(t)), t)[0, 0]) for t in range(4)]  # half own x(t), half x(t - 2)
    [0.0, 0.5, 1.0, 2.0]
    """

    layer = "delayed"
    order = 30
    keeps_symmetry = True
    stateful = True
    late = True

    DELAYS = ("uniform", "fixed")
    #: How each kind of delay keeps its history (:class:`~rowstoch_fast._history.History`), on every backend: a
    #: fixed delay's links all read one iteration's block, contiguous when the blocks are iteration by iteration
    #: (its gathers then as local as the static mix's); uniform delays read every block, node by node keeping a
    #: node's messages side by side (bench/RESULTS.md section 16 measured both).
    ORDER = {"uniform": "node", "fixed": "iteration"}
    #: Whether a round over static weights draws its ages in the mixing pass (:meth:`mix_block`), by kind of
    #: delay: uniform delays (their ages change every round); a fixed delay's index is the same every
    #: ``max_delay + 1`` iterations and is kept instead (:meth:`index`).
    FUSED = {"uniform": True, "fixed": False}

    def __init__(self, A, max_delay, delay="uniform", seed=0):
        self.base = as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        if isinstance(max_delay, (bool, np.bool_)) or not isinstance(max_delay, (int, np.integer)):
            raise TypeError(f"max_delay must be an integer number of iterations, got {max_delay!r}")
        self.max_delay = check_int(max_delay, "max_delay", minimum=0, maximum=2**20)
        check_choice(delay, "delay", self.DELAYS)
        self.delay = delay
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        inner = self.base
        while isinstance(inner, _Messages):
            if isinstance(inner, Delayed):
                raise ValueError("a network takes one Delayed layer (its bound is the largest delay)")
            inner = inner.base

    def _parameters(self):
        return {"max_delay": self.max_delay, "delay": self.delay, "seed": self.seed}

    @property
    def draws(self):
        return self.delay == "uniform" and self.max_delay > 0  # (a fixed delay draws nothing)

    def omega(self, d):
        return 0.0

    def delta(self, d):
        return 1.0

    def check_restored(self, state, n_block, width, rounds):
        """A ValueError naming the state's keys unless the history a checkpoint restored into ``state``
        (``state["restored"]``: its keys' prefix) holds what this quantity's step sends: ``n_block`` nodes'
        messages of ``width`` values over ``max_delay + 1`` iterations of ``rounds`` rounds (a history of another
        layout was replaced by a fresh one, and the run went on from other messages)."""
        prefix, ring = state.get("restored"), state.get("ring")
        if prefix is None or ring is None:
            return
        got, want = (ring.n_block, ring.D, ring.rounds, ring.buffer.shape[1]), (n_block, self.max_delay, rounds, width)
        if got != want:
            raise ValueError(f"state[{prefix + 'messages'!r}] / [{prefix + 'layout'!r}]: a history of {got[0]} nodes' "
                             f"messages of {got[3]} values, max delay {got[1]}, {got[2]} round(s); this step sends "
                             f"{want[0]} nodes' messages of {want[3]} values over max delay {want[1]} and {want[2]} "
                             "round(s): the state is not this run's, or is damaged")
        del state["restored"]

    def ring(self, state, t, n_own, n_block, width, rounds, dtype, require=None, xp=np):
        """The history of the quantity ``state`` holds (a dict), made where it is missing or of another shape:
        ``n_own`` own rows, then ``(max_delay + 1) rounds`` blocks of ``n_block`` rows of ``width`` values, in
        arrays of ``xp`` (a history restored on the host moves there)."""
        self.check_restored(state, n_block, width, rounds)
        ring = state.get("ring")
        shape = (n_own + (self.max_delay + 1) * rounds * n_block, width)
        order = self.ORDER[self.delay]
        if ring is not None and type(ring.buffer) is not type(xp.empty(0)):
            ring.buffer = xp.asarray(ring.buffer)
        if ring is not None and ring.order != order and ring.buffer.shape == shape:  # (a restored history)
            moved = History(n_own, n_block, width, self.max_delay, rounds, ring.buffer.dtype, xp, order)
            moved.buffer[:n_own] = ring.buffer[:n_own]
            moved.slots()[...] = ring.slots()
            moved.last, moved.fresh = ring.last, ring.fresh
            ring = state["ring"] = moved
        if ring is None or ring.buffer.shape != shape or ring.buffer.dtype != np.dtype(dtype):
            from .._checks import require_memory

            nbytes = shape[0] * shape[1] * np.dtype(dtype).itemsize
            (require or require_memory)(nbytes, f"Delayed(max_delay={self.max_delay}): the messages of the last "
                                                f"{self.max_delay + 1} iterations of {n_block} nodes x {width} values "
                                                f"x {rounds} rounds", "use a smaller max_delay")
            ring = state["ring"] = History(n_own, n_block, width, self.max_delay, rounds, dtype, xp, order)
        ring.start(t)
        return ring

    def ages(self, indptr, indices, t, r, row_ids=None, col_ids=None):
        """The age of the message each stored entry reads in round ``r`` of iteration ``t`` (``_core.delay_ages``)."""
        from .. import _core

        ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
        return _core.delay_ages(indptr, indices, self.seed, t, r, self.max_delay, fixed=self.delay == "fixed", **ids)

    def mix_block(self, indptr, indices, data, block, out, t, r, layout, row_ids=None, col_ids=None, lossy=None):
        """``out <-`` round ``r`` of iteration ``t`` of the CSR weights over ``block``, the history laid out as
        ``layout`` (:meth:`index`'s), each entry reading the newest message of its link that has arrived: the
        ages drawn in the pass (``_core.mix_delayed``; the same sums as the mix over :meth:`index`). ``lossy``:
        the round's losses and sleep, ``{"loss_seed", "p", "renormalise", "awake", "bad"}`` (``_core.mix_lossy``'s
        draws on the senders' ids)."""
        from .. import _core

        ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
        return _core.mix_delayed(indptr, indices, data, block, out, self.seed, t, r, self.max_delay,
                                 self.delay == "fixed", layout, **ids, **(lossy or {}))

    def index(self, indptr, indices, t, r, layout, row_ids=None, col_ids=None):
        """``(indptr, index)``: the row of the stacked block each stored entry reads in round ``r`` of iteration
        ``t`` (``_core.delay_ages``; ``layout``: ``(n_own, n_block, rounds[, node_major])``, the history's
        :meth:`~rowstoch_fast._history.History.layout`), with an ``indptr`` of its integer
        type. Fixed delays: computed once per block of the window and kept."""
        from .. import _core

        fixed = self.delay == "fixed"
        key = None
        if fixed and t >= self.max_delay:  # (every entry reads the block of t - D: one index per block)
            cache = self.__dict__.setdefault("_fixed_index", {})
            key = (id(indices), (t - self.max_delay) % (self.max_delay + 1), r, layout)
            if key in cache:
                return cache[key][1]
        ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
        index = _core.delay_ages(indptr, indices, self.seed, t, r, self.max_delay, fixed=fixed, layout=layout, **ids)
        if index.dtype != np.asarray(indptr).dtype:
            indptr = np.asarray(indptr, dtype=index.dtype)
        if key is not None:
            if len(cache) > 64:
                cache.clear()
            cache[key] = (indices, (indptr, index))  # (indices kept alive: their id stays unique)
        return indptr, index

    @property
    def effect(self):
        """In a diagnosis's words (:attr:`Network.effect`; None at ``max_delay = 0``, the base network)."""
        if self.max_delay == 0:
            return None
        late = f"up to {self.max_delay}" if self.delay == "uniform" else f"{self.max_delay}"
        return f"delays its messages ({late} iteration{'s' if self.max_delay > 1 else ''} late)"

    def __repr__(self):
        return f"Delayed({self.base!r}, max_delay={self.max_delay}, delay={self.delay!r}, seed={self.seed})"

    # ---- its options (rowstoch run / compare, [communication] in an experiment file)
    listed = 50
    SEED_FLAGS = ("--max-delay",)
    DRAWN = "delays"
    MAX_DELAY = 2**20  # (iterations: the command line's bound)
    OPTIONS = (
        Option("max_delay", int, None, "messages arrive up to this many iterations late; receivers use the newest "
                                       "arrived (network.Delayed)"),
        Option("delay", str, "uniform", "with --max-delay: each message's delay uniform over 0..max-delay, or always "
                                        "it", choices=DELAYS),
    )

    @classmethod
    def examples(cls, base):
        return {"delayed": cls(base, 2, seed=9), "fixed-delay": cls(base, 1, delay="fixed", seed=10)}

    @classmethod
    def options_in_use(cls, ns):
        return ns.max_delay is not None

    @classmethod
    def options_drawn(cls, ns):
        return cls.DRAWN if cls.options_in_use(ns) and ns.delay != "fixed" else None  # (fixed: no draw)

    @classmethod
    def check_options(cls, ns, d=None):
        if ns.max_delay is not None and not 0 <= ns.max_delay <= cls.MAX_DELAY:
            raise UsageError(f"--max-delay must be an integer in 0..{cls.MAX_DELAY} (iterations), got {ns.max_delay}")

    @classmethod
    def check_sizes(cls, ns, n, width, itemsize):
        if ns.max_delay:  # (one quantity's history at least; the optimizer checks all of them when it is built)
            require_memory((ns.max_delay + 2) * n * width * itemsize,
                           f"the histories of the delayed messages (max_delay={ns.max_delay}, {n} nodes x {width} "
                           "values)", "use a smaller max_delay")

    @classmethod
    def from_options(cls, net, ns, seed):
        return cls(net, ns.max_delay, delay=ns.delay, seed=seed)

    @classmethod
    def unread_options(cls, ns):
        return [(("--delay",), ns.max_delay is None, "without --max-delay")]

    @classmethod
    def options_words(cls, ns):
        if not ns.max_delay:  # (0: the base network, bit for bit; "uniform delays of 0-0 iterations" had said it)
            return None
        unit = "iteration" if ns.max_delay == 1 else "iterations"  # (the unit said: "delays up to 3" of what)
        if ns.delay == "fixed":  # (every message exactly max_delay iterations late: "up to" would misname it)
            return f"fixed delays of {ns.max_delay} {unit}"
        return f"{ns.delay} delays of 0-{ns.max_delay} {unit}"

    @classmethod
    def options_record(cls, ns):
        return {"max_delay": ns.max_delay, "delay": ns.delay} if ns.max_delay is not None else {}
