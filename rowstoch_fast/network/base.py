"""What every network shares: :class:`Network` (the protocol, the properties a layer declares, the registry of
layers), :func:`describe` and the checks every layer makes of what it wraps.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from .._checks import as_float_array, check_int, check_out, MAX_KEY, MAX_ROUNDS, outside_package
from .._hashing import MAX_T
from ..mixing import asymmetric_rounds, columns_sum_to_one, first_asymmetry, MixingMatrix, off_sums
from ._rounds import _compiled_rounds, _mix_entries


#: Every network layer by its name (``"lossy"``, ``"sleepy"``, ...): filled as the modules of
#: :mod:`rowstoch_fast.network` load (each layer class with a ``layer`` name registers itself).
LAYERS = {}



def checked_round(t, r):
    """``(t, r)``, an iteration and a round of it, checked as every network's entry points check them (the
    compiled draws take unsigned counts: t = -1 had met pybind11's "incompatible function arguments")."""
    return check_int(t, "t", minimum=0, maximum=MAX_T), check_int(r, "r", minimum=0, maximum=MAX_KEY)


#: The iterations whose rounds :meth:`Network.undirected` checks are symmetric and doubly stochastic where a layer
#: from outside the package drops or gates links (each layer declares it keeps them so: ``keeps_symmetry``).
UNDIRECTED_ROUNDS_CHECKED = 4


class Network:
    """What every network of :mod:`rowstoch_fast.network` shares; see the package's docstring for the protocol.

    A layer is a subclass with a ``layer`` name in its class body: it registers itself, and its ``order`` places
    it in a composition (the matrices' source first, then the links' layers, the message layers outermost).
    """

    #: The layer's registry name (None: not a registered layer, e.g. a user's subclass).
    layer = None
    #: Place in a composition and in listings (lower: innermost).
    order = 100

    n = None
    stochastic = "row"

    # What a layer is: properties the undirected rule, the algorithms and the backends read (never a chain of
    # isinstance checks or an allow-list of types), declared by each layer in its own class body.
    #: ``"matrices"``: a source of round matrices (:class:`Schedule`); ``"links"``: drops or gates entries of the
    #: rounds (:class:`Lossy`, :class:`Sleepy`); ``"messages"``: acts on what the links carry (:class:`Compressed`,
    #: :class:`Noisy`, :class:`Delayed`; they go outermost).
    acts_on = None
    #: Under the undirected rule (:meth:`undirected`) its rounds over a symmetric doubly stochastic ``W`` stay
    #: symmetric and doubly stochastic. Read from the class that declares it only: a subclass (which may have
    #: rounds of its own) declares it again.
    keeps_symmetry = False
    #: Changes what a sender sends (compression, noise per message), rather than when or how it arrives.
    alters_messages = False
    #: What it does that loses messages, in a diagnosis's words ("loses messages"; None: it loses none), where it
    #: is set to (a layer that is ``lossless`` as set loses none): :func:`~rowstoch_fast.network.losses_of`
    #: reads it, for what a push-sum method's drained weights are blamed on.
    loses = None
    #: What it does to the messages it passes on, in a diagnosis's words ("compresses its messages (top-k, k = 2)";
    #: None: it passes them on as sent, or is set to, as a ``silent`` noise): :func:`~rowstoch_fast.network.effects_of`
    #: reads it, for what a comparison's diagnosis of a failed run names beside it.
    effect = None
    #: Keeps state from one iteration to the next (the messages in flight): an optimizer's ``state_dict`` saves it.
    stateful = False
    #: Its messages may arrive in a later round than they were sent (:class:`Delayed`): what a method that needs
    #: every message on time refuses (:attr:`~rowstoch_fast.algorithms.Optimizer.needs_timely`; read by
    #: :func:`~rowstoch_fast.network.late`).
    late = False
    #: Its rounds use one fixed set of links (a static matrix's) and its ``arrived(t, r, indptr, indices,
    #: row_ids=None, col_ids=None)`` says which of their messages arrive in each round, the layers under it
    #: included: what :func:`~rowstoch_fast.network.fixed_links` reads, so that the per-link methods (running sums
    #: and buffers per link: robust gradient-push, R-FAST) follow its messages one by one. A links layer that has
    #: ``arrived`` declares when it holds, usually as a property of what it wraps (:class:`Lossy`: over a static
    #: matrix; :class:`Sleepy`: also over a layer that reports arrivals and puts no node to sleep, since the
    #: per-link passes read one ``awake`` mask, the outermost's). A subclass inherits it with the ``arrived`` that
    #: reads its own rounds' draws; one that changes which messages arrive otherwise declares it again.
    #: ``tests/test_layers.py`` checks every example that reports arrivals against its dense definition.
    reports_arrivals = False

    # ---- its options on the command line and in experiment files (rowstoch_fast.network.options gathers them)
    #: Place of its options in ``--help``, the TOML schema and the messages (lower first).
    listed = 100
    #: Its options (:class:`~rowstoch_fast.network.options.Option`).
    OPTIONS = ()
    #: The flags whose use makes its draws read ``--network-seed``.
    SEED_FLAGS = ()
    #: What it draws, in words (``"losses"``); None where it draws nothing. A comparison runs each repetition on a
    #: draw of its own (:func:`~rowstoch_fast.network.redrawn`), and its caption says so.
    DRAWN = None

    @classmethod
    def options_in_use(cls, ns):
        """Whether one setting ``ns`` (its options as attributes) builds this layer."""
        return False

    @classmethod
    def options_seeded(cls, ns):
        """Whether this layer's draws read ``--network-seed`` in the setting ``ns`` (in use, and it draws: it
        names :attr:`SEED_FLAGS`)."""
        return bool(cls.SEED_FLAGS) and cls.options_in_use(ns)

    @classmethod
    def options_drawn(cls, ns):
        """:attr:`DRAWN` where the setting ``ns`` uses this layer (None otherwise)."""
        return cls.DRAWN if cls.options_in_use(ns) else None

    @classmethod
    def check_options(cls, ns, d=None):
        """UsageError naming the option where a value of ``ns`` is wrong (``d``: the models' size where known)."""

    @classmethod
    def check_sizes(cls, ns, n, width, itemsize):
        """MemoryError before anything is built where this layer of ``ns`` would not fit (``n`` nodes, ``width``
        values per node, ``itemsize`` bytes per value)."""

    @classmethod
    def from_options(cls, net, ns, seed):  # pragma: no cover - a layer with options defines it
        """This layer over ``net``, built from ``ns``."""
        raise NotImplementedError

    @classmethod
    def unread_options(cls, ns):
        """``(flags, unread, why)``: its options that the setting ``ns`` would not read."""
        return []

    @classmethod
    def options_words(cls, ns):
        """This layer of the setting ``ns`` in words (None where not in use)."""
        return None

    @classmethod
    def options_record(cls, ns):
        """What identifies this layer of ``ns`` in a run's configuration (compared on ``--resume``)."""
        return {}

    @classmethod
    def sweep(cls, ns, given):
        """For a layer whose first option takes a list (one setting per item): one dict of option values per
        item, checked (``given``: the options written on the command line); None for the others."""
        return None

    @classmethod
    def sweep_label(cls, ns):
        """The label of one swept setting (a column of ``rowstoch compare``'s table)."""
        return ""

    @classmethod
    def examples(cls, base):
        """``{label: network}``: this layer over ``base`` (a static matrix or a network it may wrap) in the settings
        the registry tests run (every layer, every composition the order allows, every algorithm that applies,
        every backend: :func:`rowstoch_fast.network.examples`); the first is the layer's typical use."""
        return {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("layer")
        if name:
            known = LAYERS.get(name)
            if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
                raise TypeError(f"{cls.__qualname__}: the layer name {name!r} is {known.__module__}."
                                f"{known.__qualname__}'s; give the new layer a name of its own")
            LAYERS[name] = cls
        if inspect.isfunction(cls.__dict__.get("matrix")) and outside_package(cls):  # (a plain method: a static or
            # class method, or a property, is the user's to keep as it is, helper 243)
            cls.matrix = _checked_matrix(cls.__dict__["matrix"])

    @classmethod
    def declares(cls, prop):
        """``prop`` as this very class declares it (False where only a parent does): see :attr:`keeps_symmetry`."""
        return bool(cls.__dict__.get(prop, False))

    @property
    def dtype(self):
        """Value type of the matrices (that of the base)."""
        return self.base.dtype

    def senders(self, t):
        """Boolean mask of the nodes that send at iteration ``t`` (what ``traffic()`` counts), or None where every
        node does: a layer's base's, unless the layer silences nodes itself (:class:`Sleepy`)."""
        base = getattr(self, "base", None)
        return base.senders(t) if isinstance(base, Network) else None

    def lost_keys(self, t, r):
        """The links ``j -> i`` whose message of round ``r`` of iteration ``t`` this network's losses drop, as sorted
        unique keys ``i n + j`` (int64; empty without losses): a layer that loses messages adds its own
        (:class:`Lossy`) to its base's, each message counted once where two such layers drop it; the others give
        their base's. From the draws the rounds use (the counter-based hashes), so any iteration's can be drawn
        again at any time."""
        base = getattr(self, "base", None)
        return base.lost_keys(t, r) if isinstance(base, Network) else np.zeros(0, dtype=np.int64)

    def dropped(self, t, r, senders=None):
        """How many messages of round ``r`` of iteration ``t`` this network's losses drop (:meth:`lost_keys`), of
        those the nodes of the bool mask ``senders`` send (None: every node)."""
        keys = self.lost_keys(t, r)
        return len(keys) if senders is None else int(np.asarray(senders, dtype=bool)[keys % self.n].sum())

    @property
    def static(self):
        """The :class:`MixingMatrix` this network always applies, when it never changes (no loss, nobody
        asleep, one matrix); else None. Optimizers then run the static matrix's kernels, bit for bit."""
        return None

    def matrix(self, t, r=0):  # pragma: no cover - abstract
        """The :class:`MixingMatrix` of gossip round ``r`` of iteration ``t``."""
        raise NotImplementedError

    def map(self, f):  # pragma: no cover - abstract
        """The same network (same losses, same sleep) over ``f(M)`` of each of its matrices ``M``: e.g.
        ``net.map(mixing.out_degree_weights)``, the column-stochastic twin that push-based methods run on."""
        raise NotImplementedError

    @property
    def draws(self):
        """Whether this layer draws anything from its ``seed`` (losses, sleep, random delays, a compression's
        random choices, noise): :func:`~rowstoch_fast.network.redrawn` gives it other draws. The layers under it
        are not asked (:func:`~rowstoch_fast.network.draws` is)."""
        return False

    @property
    def draw_key(self):
        """What this layer's draws are keyed by besides its seed: two layers of one ``draw_key`` on one seed draw
        the same numbers (:func:`_own_draws` refuses them). Its kind (``layer``) here; a layer whose kinds of
        draws have keys of their own says so (a compression's method, a noise's ``per``)."""
        return type(self).layer

    def _twin(self, base, seed):
        """This layer, the same in all but its seed, over ``base`` (what :func:`~rowstoch_fast.network.redrawn`
        builds); a layer that wraps another (a ``base``) defines it."""
        raise NotImplementedError("it wraps a network but defines no _twin(base, seed)")

    def undirected(self):
        """The same network (same draws) under the **undirected rule**, what a method of an undirected network
        (DGD, DIGing, EXTRA, ..., whose ``W`` must stay symmetric and doubly stochastic) runs on when its ``W``
        is under losses or sleep: the link ``i - j`` is used in a round only when both its messages (``j -> i``
        and ``i -> j``) arrive and both ends are awake, and an unused link's weight stays on each end's own value
        (``W_t[i, i] = w_ii + sum_unused w_ij``; a sleeping node's row is ``e_i``). Over a symmetric doubly
        stochastic ``W`` every round is then symmetric and doubly stochastic (Lobel & Ozdaglar 2011's random
        links). The undirected methods apply it themselves to a :class:`Lossy` or :class:`Sleepy` ``W`` (and to
        message layers over them); ``stochastic`` is then ``"doubly"``. Every loss (a bursty link's two messages
        each have their chain) and activation model, over a matrix or a :class:`Schedule` of them (a schedule
        alone is the same schedule: its rounds lose nothing). The definition:
        ``_reference.lossy_round(..., symmetric=True)``. Raises ValueError where the rule cannot keep the rounds
        doubly stochastic: a W that is not symmetric under losses or sleep, or not doubly stochastic under message
        layers alone, and a layer that does not declare that it keeps symmetry.

        Examples
        --------
        >>> import numpy as np
        >>> from rowstoch_fast import topology
        >>> from rowstoch_fast.network import Lossy
        >>> W = Lossy(topology.ring(6, directed=False), 0.3, seed=1).undirected()
        >>> M = W.matrix(4).toarray()
        >>> bool(np.allclose(M, M.T) and np.allclose(M.sum(axis=0), 1) and np.allclose(M.sum(axis=1), 1))
        True
        """
        net = self.map(lambda W: W)  # (fresh layers: their own caches)
        layer, varying, foreign = net, False, False
        while isinstance(layer, Network) and layer.acts_on != "matrices":
            if not type(layer).declares("keeps_symmetry"):  # (a subclass may have rounds of its own)
                raise ValueError(f"{self!r}: the undirected rule needs a symmetric W (or a schedule of them) under "
                                 f"losses, sleep or message layers, not a {type(layer).__name__}")
            layer.stochastic = "doubly"
            varying |= layer.acts_on == "links"
            foreign |= outside_package(type(layer))
            layer = layer.base
        if not (isinstance(layer, MixingMatrix) or getattr(layer, "acts_on", None) == "matrices"):
            raise ValueError(f"{self!r}: the undirected rule needs a static matrix W under the network")
        scheduled = isinstance(layer, Network)
        for k, W in enumerate(layer.matrices if scheduled else [layer]) if layer is not net else ():  # (helper
            # 199: a directed ring's losses had come back "doubly" stochastic with columns summing to 1.5 and 0.5;
            # a schedule alone is returned as it is, claiming nothing)
            if varying and (bad := first_asymmetry(W)) is not None:
                raise ValueError(asymmetric_rounds(bad))
            if not varying and not columns_sum_to_one(W):
                off, sums = off_sums(W.csr, "column")
                raise ValueError(f"the undirected rule needs a doubly stochastic W (an undirected graph's weights): "
                                 f"column {int(off[0])} of W{f' (the schedule matrix {k})' if scheduled else ''} sums "
                                 f"to {float(sums[off[0]]):.6g}")
        if varying and foreign:  # (a layer's keeps_symmetry is its own word: one of the user's that dropped a directed
            # link and renormalised its row ran DIGing, EXTRA and DGD 0.16 off the minimiser, silently, helper 238;
            # the package's own layers, whose registry tests check it, are trusted: the check took 2.4 s a call at
            # 10^6 nodes, called for every redrawn repetition, helper 239)
            for t in range(UNDIRECTED_ROUNDS_CHECKED):
                M = net.matrix(t)
                if (bad := first_asymmetry(M)) is not None:
                    what = asymmetric_rounds(bad)
                elif not columns_sum_to_one(M):
                    off, sums = off_sums(M.csr, "column")
                    what = f"column {int(off[0])} sums to {float(sums[off[0]]):.6g}"
                else:
                    continue
                raise ValueError(f"{self!r}: its rounds under the undirected rule are not symmetric and doubly "
                                 f"stochastic, though its layers declare keeps_symmetry: at iteration {t}, {what}")
        return net

    def _entries(self, t, r):
        """(csr, weight of each stored entry in this round, or None for the base weights): subclasses that
        drop entries override this; the default materialises :meth:`matrix`."""
        return self.matrix(t, r).csr, None

    def plan(self, t):
        """How iteration ``t`` runs in the compiled pass (``_core.mix_lossy``, and the CuPy and MPI backends' own),
        or None where it cannot (a network without one runs on the CPU only): ``(matrix_of, seed, p, awake,
        chain)`` with ``matrix_of(r)`` the MixingMatrix of round ``r`` before the random losses and sleep the plan
        draws (the base's; a layer that drops fixed links may hand its thinned, renormalised matrix here), the
        loss seed and probability (one number, or one per node: the sender's), the awake mask (or None) and the Gilbert-Elliott network whose
        :meth:`Lossy.bad_states` gate the losses (or None)."""
        return None

    def mix(self, X, t, rounds=1, out=None):
        """``A_{t,rounds-1} ... A_{t,0} X``: the gossip rounds of iteration ``t`` (``X``: shape (n,) or (n, d)),
        in the compiled pass where :meth:`plan` gives one, else through NumPy."""
        t, rounds, X = self._mix_arguments(X, t, rounds, out)
        plan = self.plan(t)
        if plan is not None:
            return _compiled_rounds(plan, X, t, rounds, out, self.stochastic == "row", self.stochastic == "doubly")
        Y = X
        for r in range(rounds):
            Y = _mix_entries(*self._entries(t, r), Y, self.stochastic)
        if out is not None:
            out[...] = Y
            return out
        return Y

    def _mix_arguments(self, X, t, rounds, out):
        """:meth:`mix`'s arguments checked: ``(t, rounds, X)`` (``X`` as a float array of the network's dtype)."""
        t = check_int(t, "t", minimum=0, maximum=MAX_T)
        rounds = check_int(rounds, "rounds", minimum=1, maximum=MAX_ROUNDS)
        X = as_float_array(X, "X", self.dtype, ndim=(1, 2), finite=False)
        if X.shape[0] != self.n:
            raise ValueError(f"X has {X.shape[0]} rows but the network has {self.n} nodes")
        check_out(out, "out", X.shape, self.dtype)
        return t, rounds, X

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n}, stochastic={self.stochastic!r})"

    def describe(self):
        """What identifies this network, as a plain dict: its type, its parameters (loss rate, seeds, model, ...)
        and what it is built on (:func:`describe`), down to a fingerprint of each matrix. An optimizer's
        ``state_dict`` stores it, and ``from_state_dict`` refuses another network, naming the field."""
        out = {"type": type(self).__name__}
        for key, value in sorted(vars(self).items()):
            if key.startswith("_"):
                continue
            if key == "base":
                out[key] = describe(value)
            elif key == "matrices":
                out[key] = [describe(m) for m in value]
            elif value is None or isinstance(value, (bool, int, float, str)):
                out[key] = value
            elif isinstance(value, np.ndarray):  # (a parameter per node: its values' fingerprint)
                out[key] = _array_fingerprint(value)
        return out


def _sha1(*arrays):
    """The first 16 hex digits of a SHA-1 of ``arrays``' bytes, in order (C order)."""
    import hashlib

    digest = hashlib.sha1()
    for arr in arrays:
        digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()[:16]


def _array_fingerprint(arr):
    """A per-node parameter in :meth:`Network.describe`: its length and a SHA-1 of its float64 values (a checkpoint
    of another heterogeneity is refused by it, without n numbers in every checkpoint)."""
    return f"{len(arr)} values, sha1 {_sha1(np.asarray(arr, dtype=np.float64))}"


def describe(net):
    """:meth:`Network.describe` of a network, or of a :class:`MixingMatrix` (its kind, size and a SHA-1 of its
    arrays)."""
    if isinstance(net, MixingMatrix):
        sha1 = net.__dict__.get("_sha1")
        if sha1 is None:  # once per matrix (its arrays are frozen): every checkpoint's state_dict() asks again
            c = net.csr
            sha1 = net._sha1 = _sha1(c.indptr.astype(np.int64), c.indices.astype(np.int64), c.data)
        return {"type": "MixingMatrix", "n": int(net.n), "stochastic": net.stochastic, "sha1": sha1}
    if not isinstance(net, Network):  # (helper 199: describe(5) had met an AttributeError)
        raise TypeError(f"net must be a network or a MixingMatrix, got {type(net).__name__}")
    return net.describe()


def first_difference(saved, current, prefix=""):
    """``(field, saved value, current value)`` of the first difference between two :func:`describe` dicts, or
    None."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for key in ["type", *sorted(set(saved) | set(current) - {"type"})]:  # another kind of network first
            found = first_difference(saved.get(key), current.get(key), f"{prefix}{key}.")
            if found:
                return found
        return None
    if isinstance(saved, list) and isinstance(current, list) and len(saved) == len(current):
        for k, (a, b) in enumerate(zip(saved, current)):
            found = first_difference(a, b, f"{prefix}{k}.")
            if found:
                return found
        return None
    return None if saved == current else (prefix.rstrip("."), saved, current)


def _checked_matrix(matrix):
    """A ``matrix(t, r)`` of a layer from outside the package, checked where it returns: a :class:`MixingMatrix`
    of the network's ``n`` (helper 238: a plain subclass whose ``matrix`` returned an ndarray had ended inside a
    step in ``AttributeError: 'numpy.ndarray' object has no attribute 'csr'``, one of 5 nodes in a matmul's
    "dimension mismatch"). The package's own layers, whose registry tests check them, are not wrapped."""

    @functools.wraps(matrix)
    def checked(self, t, *args, **kwargs):  # (as the user's takes them)
        M = matrix(self, t, *args, **kwargs)
        if isinstance(M, MixingMatrix) and (self.n is None or M.n == self.n):
            return M
        where = f"{type(self).__qualname__}.matrix({t}, {args[0] if args else kwargs.get('r', 0)})"
        if not isinstance(M, MixingMatrix):
            raise TypeError(f"{where} must return a rowstoch_fast.MixingMatrix (MixingMatrix(array) wraps an "
                            f"array or a scipy.sparse matrix), got {type(M).__name__}")
        raise ValueError(f"{where} returned a matrix of {M.n} nodes; the network has {self.n}")

    return checked


def as_network(A):
    """``A`` as a network: a network passes through; a :class:`MixingMatrix` (or anything it accepts) is the
    static network of that matrix."""
    if isinstance(A, (Network, MixingMatrix)):
        return A
    try:
        return MixingMatrix(A)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"A must be a MixingMatrix, a network or a matrix MixingMatrix accepts: {exc}") from None


def _under_messages(net, kind):
    """``net``, refused (ValueError) where it compresses, noises or delays its messages: those layers act on what
    the links carry, so they go outermost."""
    if hasattr(net, "encode"):
        raise ValueError(f"{kind} cannot wrap {net!r}: compression, noise and delays act on the messages the links "
                         f"carry, so they go outermost (e.g. Compressed({kind}(A, ...), 'topk', k=2))")
    return net


#: How far apart :func:`_own_draws` suggests two layers' seeds: a comparison runs repetition ``r`` on every seed
#: plus ``r`` (:func:`~rowstoch_fast.network.redrawn`), so seeds 5 and 6 share draws across repetitions 0 and 1.
SEED_APART = 10**6


def _own_draws(net):
    """``net``, refused (ValueError) where it draws from the seed of a layer under it of its own
    :attr:`~Network.draw_key`: the two would draw the same numbers (the draws are keyed by the seed, the iteration
    and the link or node, not by the layer), so one would hide the other (``Lossy(Lossy(A, 0.1), 0.2)`` lost 20%
    of the messages, not 28%; two noises added up fully correlated)."""
    if not net.draws or net.draw_key is None:
        return net
    inner = net.base
    while isinstance(inner, Network):
        if inner.draw_key == net.draw_key and inner.draws and getattr(inner, "seed", None) == net.seed:
            kind = type(net).__name__
            raise ValueError(f"{kind}(..., seed={net.seed}) wraps a {kind} layer of the same seed: their draws would "
                             f"be the same numbers (keyed by the seed, the iteration and the link or node), so one "
                             f"layer would hide the other; give each {kind} layer a seed of its own, further apart "
                             f"than a comparison's repetitions (repetition r runs on every seed + r: e.g. "
                             f"seed={(net.seed + SEED_APART) % (MAX_KEY + 1)})")
        inner = getattr(inner, "base", None)
    return net


#: The most chain steps (entries x iterations) one call may advance the Gilbert-Elliott chains by: about a minute
#: (1.4e8 steps a second on one core of the development VM; 10**12, the bound before, was two hours, and a jump to
#: t = 10**12 days). The CPU reads the chains backwards, about 1 / |p_bad - p_recover| steps an entry whatever the
#: jump (``_core.ge_advance``); Ctrl-C is polled while they advance.
MAX_CHAIN_STEPS = 10**10


#: The most node-iterations Sleepy(model="markov") advances its chains by in one call (blocks of iterations in
#: NumPy: ~7e7 a second on the development VM, so about a minute; a network of fewer than 16 nodes counts as 16).
MAX_ACTIVATION_STEPS = 4 * 10**9


def advance_two_state(state, u, p_leave, p_enter):
    """Two-state chains (one per column of ``u``) advanced through the rows of the draws ``u`` (iterations x
    chains): in each, a chain that is on stays on when ``u >= p_leave``, one that is off turns on when
    ``u < p_enter``, exactly as the loop ``state = where(state, u[s] >= p_leave, u[s] < p_enter)`` does, without
    the loop over iterations. Each iteration's map of {off, on} is a constant (both states go to the same one),
    the identity or the swap: the state after the block is the last constant's value, swapped once per swap
    after it (or the start, swapped once per swap in the block, where no constant came)."""
    stay, turn = u >= p_leave, u < p_enter  # the map: on -> stay, off -> turn
    constant, swap = stay == turn, turn & ~stay
    swaps_from = np.cumsum(swap[::-1], axis=0, dtype=np.int64)[::-1]  # swaps in iterations k .. end
    swaps_after = np.vstack([swaps_from[1:], np.zeros((1, u.shape[1]), dtype=np.int64)])
    steps = u.shape[0]
    last = steps - 1 - np.argmax(constant[::-1], axis=0)  # the last constant map (where any)
    cols = np.arange(u.shape[1])
    after_constant = stay[last, cols] ^ (swaps_after[last, cols] % 2 == 1)
    from_start = np.asarray(state, dtype=bool) ^ (swaps_from[0] % 2 == 1)
    return np.where(constant.any(axis=0), after_constant, from_start)


def two_state_path(state, u, p_leave, p_enter):
    """Every state of the chains of :func:`advance_two_state` through the rows of ``u`` (iterations x chains): row
    ``s`` of the result is the state after row ``s`` of ``u``, exactly as the loop ``state = where(state, u[s] >=
    p_leave, u[s] < p_enter)`` leaves it, without the loop: each iteration's state is its last constant map's value
    (at or before it), swapped once per swap since, or the start swapped once per swap since the start."""
    stay, turn = u >= p_leave, u < p_enter
    constant, swap = stay == turn, turn & ~stay
    rows = np.arange(u.shape[0])[:, None]
    last = np.maximum.accumulate(np.where(constant, rows, -1), axis=0)  # (the last constant map at or before s)
    swaps = np.cumsum(swap, axis=0, dtype=np.int64)  # (swaps in rows 0 .. s; none at a constant row)
    cols = np.arange(u.shape[1])[None, :]
    at = np.maximum(last, 0)
    after_constant = stay[at, cols] ^ ((swaps - swaps[at, cols]) % 2 == 1)
    from_start = np.asarray(state, dtype=bool)[None, :] ^ (swaps % 2 == 1)
    return np.where(last >= 0, after_constant, from_start)


def jump_two_state(state, first, last, draws, p_leave, p_enter, budget):
    """The chains of :func:`advance_two_state` advanced through the iterations ``first .. last`` (``draws(s)``: the
    rows of the draws of the iterations ``s``, an int64 array), read from the last iteration backwards: a chain's
    state is fixed by its last constant map (a draw with ``p_leave <= u < p_enter`` or ``p_enter <= u < p_leave``,
    probability ``|p_enter - p_leave|`` an iteration) and the swaps after it, so the scan stops once every chain
    has met one: about ``ln(chains) / |p_enter - p_leave|`` iterations, whatever ``last - first``; the same
    states as the walk from ``first``. Returns None where that would take more than ``budget`` iterations (the
    scan's expected length past it, or ``p_enter = p_leave``: no map is constant)."""
    gap = abs(p_enter - p_leave)
    state = np.asarray(state, dtype=bool)
    if gap == 0 or (np.log(max(state.size, 1)) + 40.0) / gap > budget:  # (P(a chain's scan goes past) < e^-40)
        return None
    value, flip, done = np.zeros_like(state), np.zeros_like(state), np.zeros_like(state)
    hi, block, scanned = last, 64, 0
    while hi >= first and not done.all():
        lo = max(first, hi - block + 1)
        u = draws(np.arange(lo, hi + 1, dtype=np.int64))
        on, off = advance_two_state(np.ones_like(state), u, p_leave, p_enter), \
            advance_two_state(np.zeros_like(state), u, p_leave, p_enter)
        fixed = (on == off) & ~done  # (a constant map in this block: the state after it, the swaps after applied)
        value[fixed] = off[fixed] ^ flip[fixed]
        done |= fixed
        flip ^= off & ~done  # (no constant map: the block swaps the state iff it sends off to on)
        scanned += hi - lo + 1
        if scanned > budget:
            return None
        hi, block = lo - 1, min(2 * block, max(64, 2**20 // max(state.size, 1)))
    return np.where(done, value, state ^ flip)
