"""What the message layers share (:class:`_Messages`: compression, noise, delays act on what the links carry)
and the stacked ``[own; messages]`` blocks their rounds mix.
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

from .._checks import check_int, require_memory
from .._hashing import content_round
from .._history import copy_rows
from ..mixing import MixingMatrix
from ._rounds import _mix_entries
from .base import checked_round, Network


class _Messages(Network):
    """What compression, noise and delays share: a network that changes the messages its links carry.

    Round ``r`` of iteration ``t`` applies the base network's weights to what each receiver holds: its own
    value, exact, and the messages ``Q(x_j)`` of the others::

        y_i = m_ii x_i + sum_{j != i} m_ij Q(x_j)        (M = the base's matrix of the round)

    so losses, renormalisation and sleep act as they do on the base network. ``Q`` works on *messages*: each
    node's row, cut into its models of ``d`` values (an optimizer's replicas are sent apart; a block of another
    width, a push-sum weight, is one message). Its random choices come from the counter-based hash of
    ``(seed, t, r, node, tag, column)``, so every backend, MPI rank and resumed run sends the same messages;
    compression and noise keep nothing between rounds (a :class:`Delayed` layer keeps the messages in flight,
    in checkpoints). The quantities an optimizer mixes in one iteration (Push-Pull's models and trackers, a
    push-sum's numerators and weights) are different messages: the ``q``-th of them draws its compression and
    noise as round ``r + q 2^32`` (``content_round``; the first one, and a call of :meth:`mix` outside an
    optimizer, as round ``r``), while losses, sleep and delays hit every quantity of a round alike.
    Compression, noise and delays act on what the links carry, so they go outermost:
    ``Compressed(Lossy(A, 0.1), "topk", k=2)``; several compose (the outer one first).
    """

    acts_on = "messages"
    #: A round over a lossy or sleepy network (no delays) reads ``[own; messages]`` in the compiled pass's
    #: fast cases (``_core.mix_lossy(..., stacked=True)``: the rows computed from the node ids); False: through
    #: ``own_and_messages``' index and the stacked block's node ids, the general case (the path before; bench).
    STACKED = True
    #: Such a round reads the own rows from the block itself and the messages from their own block
    #: (``_core.mix_lossy(..., messages=Q)``: the same sums, without copying the block into ``[X; Q]``); False:
    #: through the stacked copy (the path before; bench), as a round whose output is its input still does.
    SPLIT = True
    #: Whether the layer draws per value sent (compression, noise): a replica's draws then follow its position in
    #: the block, and :func:`~rowstoch_fast.network.queries.reseeded` gives the layer new ones. Delays draw per
    #: link, the same for every replica.
    draws_per_value = False

    @property
    def static(self):
        return None

    def plan(self, t):
        return None

    def matrix(self, t, r=0):
        """The weights of round ``r`` of iteration ``t``: the base network's (what is sent changes, not who
        listens to whom)."""
        return self.base.matrix(t, r)

    def _entries(self, t, r):
        raise ValueError(f"{self!r} acts on the messages the network's links carry, so it goes outermost: "
                         "wrap the losses, sleep or schedule inside it (e.g. Compressed(Lossy(A, 0.1), 'topk', k=2))")

    def map(self, f):
        return self._twin(f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f),
                          getattr(self, "seed", None))

    def _twin(self, base, seed):
        params = self._parameters()
        if "seed" in params:
            params["seed"] = seed
        return type(self)(base, **params)

    def message_length(self, width, d=None):
        """The values of one message in a row of ``width`` values: ``d`` where it divides the row (an optimizer's
        models, replica by replica), else the whole row."""
        return d if d and width % d == 0 else max(width, 1)

    def encode(self, X, out, t, r, d=None, row_ids=None, own=None):
        """``out <- Q(X)``: the messages the rows of the 2-D host block ``X`` send in round ``r`` of iteration
        ``t`` (every message layer, the outer one first; ``row_ids``: the rows' global node ids, an MPI rank's
        share); ``out`` may be ``X``. ``own``: a block that gets a copy of ``X`` in the same pass."""
        from .. import _core

        t, r = checked_round(t, r)
        src = X
        for seed, method, param, sigma, unbiased in self.encoders():
            _core.compress(src, out, method, self.message_length(X.shape[1], d), param, sigma, unbiased, seed, t, r,
                           row_ids=row_ids, own=own if src is X else None)
            src = out
        if src is X:
            for block in (out, own):
                if block is not None and block is not X:
                    copy_rows(X, block)
        return out

    def encoders(self):
        """``(seed, method, param, sigma, unbiased)`` of each layer that changes what a sender sends (compression,
        noise with ``per="message"``), the outer one first: the arguments of ``_core.compress`` and of the CUDA
        ``compress_rows``. (A delay changes when a message arrives, not what it holds; noise on the received
        copies is added by the round.)"""
        out, layer = [], self
        while isinstance(layer, _Messages):
            if layer.alters_messages:
                out.append((layer.seed, *layer._kernel_arguments()))
            layer = layer.base
        return out

    def noisy_links(self):
        """The :class:`Noisy` layers with ``per="link"`` among the message layers (noise on each received copy)."""
        layers, layer = [], self
        while isinstance(layer, _Messages):
            if getattr(layer, "per", None) == "link":
                layers.append(layer)
            layer = layer.base
        return layers

    def delayed(self):
        """The :class:`Delayed` layer among the message layers, or None."""
        layer = self
        while isinstance(layer, _Messages):
            if layer.stateful:
                return layer
            layer = layer.base
        return None

    def core(self):
        """The network under every message layer: whose weights every round applies."""
        net = self
        while isinstance(net, _Messages):
            net = net.base
        return net

    def mix(self, X, t, rounds=1, out=None, d=None, state=None):
        """The rounds of iteration ``t`` (see :meth:`Network.mix`), each ``y_i = m_ii x_i + sum_{j != i} m_ij
        Q(x_j)`` in one compiled pass over the stacked block ``[X; Q(X)]`` (own values from the first half,
        messages from the second; losses drawn on the true sender ids); ``d``: the length of one message (an
        optimizer's model; default the row; a row whose width ``d`` does not divide, a model packed with a
        push-sum weight, is one message). With a :class:`Delayed` layer the stacked block holds the messages
        of the last ``max_delay + 1`` iterations, kept in ``state`` (a dict: an optimizer passes one per quantity
        it mixes, and tells them apart: ``state["quantity"]``, ``content_round``; default the network's own,
        for calls in iteration order)."""
        t, rounds, X = self._mix_arguments(X, t, rounds, out)
        if d is not None:  # (helper 199: 2.5, 0 and True had been taken as no d, "2" met a TypeError of %)
            d = check_int(d, "d", minimum=1)
        self.check_message(X.shape[1] if X.ndim == 2 else 1, d)
        cur = X.reshape(self.n, -1)
        core, delayed, n = self.core(), self.delayed(), self.n
        if delayed is not None and state is None:
            state = self.__dict__.setdefault("_own_state", {})
            _warn_if_restarted(self, state.get("ring"), t, rounds, cur)
        ring = None if delayed is None else delayed.ring(state, t, n, n, cur.shape[1], rounds, cur.dtype)
        for r in range(rounds):
            drawn = content_round(r, state)  # (this quantity's compression and noise)
            dst = out.reshape(cur.shape) if (r == rounds - 1 and out is not None) else np.empty_like(cur)
            plain = np.ascontiguousarray(cur)
            if ring is None and self._split(core, t, plain, dst):  # (the own rows read from the block itself)
                ext = (plain, self.encode(plain, _stack_buffer(self, cur.shape, cur.dtype), t, drawn, d))
            elif ring is None:
                ext = _stack_buffer(self, (2 * n, cur.shape[1]), cur.dtype)
                self.encode(plain, ext[n:], t, drawn, d, own=ext[:n])
            else:
                ext = ring.buffer
                # (messages sent as they are go into the history straight from the block: one copy less)
                messages = _stack_buffer(self, cur.shape, cur.dtype) if self.encoders() else plain
                ring.put(t, r, self.encode(plain, messages, t, drawn, d, own=ext[:n]))
            _own_and_messages_round(core, ext, t, r, dst, delayed, rounds, self.noisy_links(),
                                    None if ring is None else ring.layout(), noise_round=drawn, stacked=self.STACKED)
            cur = dst
        if ring is not None:
            ring.done(t)
        return out if out is not None else cur.reshape(X.shape)

    def _split(self, core, t, X, out):
        """Whether a round without delays reads ``X`` and the messages apart (:attr:`SPLIT`): over losses or sleep
        (a compiled pass), where its output is not ``X`` itself."""
        return self.SPLIT and self.STACKED and not isinstance(core, MixingMatrix) and core.plan(t) is not None and \
            not np.shares_memory(X, out)

    def check_message(self, width, d=None):
        """ValueError where this compression cannot make a message of the block's (a ``k`` larger than the
        model's ``d`` values)."""
        layer = self
        while isinstance(layer, _Messages):
            k = getattr(layer, "k", None)
            L = self.message_length(width, d)
            if k is not None and np.max(k) > L and (d is None or width % d == 0):  # (a narrow block, a push-sum
                # weight beside models of d values, is sent whole)
                i = int(np.argmax(k > L)) if np.ndim(k) else None  # (per-node k: the first node's past it)
                name, big = ("k", int(k)) if i is None else (f"k[{i}] (node {i}'s)", int(k[i]))
                raise ValueError(f"{name} = {big} is more than the {L} values of one message (k must be in 1..d)")
            layer = layer.base

    def contraction(self, d):
        """``(omega, delta)`` of the messages' transformation on models of ``d`` values: the largest variance
        bound and the smallest contraction of its layers (:meth:`Compressed.omega`, :meth:`Compressed.delta`;
        noise: 0 and 1)."""
        layer, omega, delta = self, 0.0, 1.0
        while isinstance(layer, _Messages):
            omega, delta = max(omega, layer.omega(d)), min(delta, layer.delta(d))
            layer = layer.base
        return omega, delta

    def message_bytes(self, values, d, itemsize):
        """Bytes of one message of ``values`` values (models of ``d``; ``itemsize`` bytes per value) as the links
        carry it: the size of the last compression applied (noise changes no size). A message that packs models
        with a few more values (a push-sum weight: ``reps d + 1``) is its models' messages plus the rest sent
        whole, as they are compressed."""
        size, sized = self._sizes(values, d, itemsize)
        return int(size) if np.ndim(size) == 0 else sized.mean_over_links(size)  # (per-node bits or k: the mean
        # over the links of each sender's size)

    def message_bytes_by_sender(self, values, d, itemsize):
        """:meth:`message_bytes` of each sender (an int64 array of ``n``) where the nodes compress with values of
        their own (per-node ``bits`` or ``k``); None where every sender's is the same."""
        size, _ = self._sizes(values, d, itemsize)
        return None if np.ndim(size) == 0 else np.asarray(size, dtype=np.int64)

    def _sizes(self, values, d, itemsize):
        """``(bytes, the layer that sized them)`` of one message of ``values`` values: a number, or one per sender
        (an array) where the compression's parameter is per node."""
        layer, sized = self, None
        while isinstance(layer, _Messages):
            sized = layer if getattr(layer, "_bits", None) is not None else sized  # (a compression sizes them)
            layer = layer.base
        if sized is None:
            return values * itemsize, None
        if d and values > d and values % d:
            return (self._sizes(values - values % d, d, itemsize)[0] + self._sizes(values % d, d, itemsize)[0],
                    sized)
        L = self.message_length(values, d)  # (a sender sends the plain values where they are smaller)
        return -(-(values // L) * np.minimum(sized._bits(L, itemsize), 8 * itemsize * L) // 8), sized


def _warn_if_restarted(net, ring, t, rounds, X):
    """A RuntimeWarning where a call of ``net.mix`` outside an optimizer (the network's own history of messages)
    does not go on from the last one: iteration ``t`` neither the last one's nor the next (nor 0: a new run), or a
    block of another width, or another number of rounds, so that the history starts again from ``t``'s
    messages (helper 199: fixed delays of 2 mixed at t = 0, 2, 4, 6 read x(t) where the definition reads x(t - 2))."""
    if ring is None or ring.last is None:
        return
    if t == ring.last:  # (helper 252: x, then y, mixed at one iteration through one Delayed network, as gradient
        # tracking does, had read each other's messages, 2.7 off the recursion, unsaid)
        import warnings

        warnings.warn(f"{net!r}.mix: a second call at iteration {t}: without state= every call shares the network's "
                      "own history of messages, so a second quantity mixed at the same iteration (x, then y, as "
                      "gradient tracking does) reads the first one's delayed messages; pass state={} per quantity "
                      "(one dict each, kept across iterations)", RuntimeWarning, stacklevel=3)
        return
    if t == 0:
        return
    why = [f"iteration {t} after {ring.last}"] if t != ring.last + 1 else []
    if X.shape[1] != ring.buffer.shape[1]:
        why.append(f"a block of {X.shape[1]} values a node after {ring.buffer.shape[1]}")
    if rounds != ring.rounds:
        why.append(f"rounds = {rounds} after {ring.rounds}")
    if not why:  # (the values' dtype is the network's: mix converts the block to it)
        return
    import warnings

    warnings.warn(f"{net!r}.mix: {', '.join(why)}: the network's own history of messages starts again from "
                  f"iteration {t}'s, every link reading them; calls of mix outside an optimizer go in iteration "
                  f"order, one quantity at one width and number of rounds (pass state={{}} to keep a history of your "
                  f"own per quantity)", RuntimeWarning, stacklevel=3)


def _stack_buffer(owner, shape, dtype):
    """A work block of ``shape`` kept by ``owner`` between calls, one per thread (two optimizers may share a
    network in two threads)."""
    cache = owner.__dict__.setdefault("_buffers", {})
    key = (shape, np.dtype(dtype).str, threading.get_ident())
    if key not in cache:
        if len(cache) > 16:
            cache.clear()
        cache[key] = np.empty(shape, dtype=dtype)
    return cache[key]


def _narrowed(index, like):
    """``index`` (int64) in the integer type of ``like`` where every entry fits it, else int64 (an int32 CSR
    whose stacked block has 2^31 rows or more: never truncated; the caller's ``indptr`` follows the index's type,
    :func:`_same_type`)."""
    dtype = np.asarray(like).dtype
    if dtype != np.int64 and index.size and int(index.max()) > np.iinfo(dtype).max:
        return index
    return index.astype(dtype)


def _same_type(indptr, index):
    """``indptr`` in ``index``'s integer type (the compiled passes take both of one type)."""
    return indptr if np.asarray(indptr).dtype == index.dtype else np.asarray(indptr, dtype=index.dtype)


def own_and_messages(indptr, indices, row_ids, col_ids, n_own):
    """The column indices that read ``[own rows; messages]``: a self loop (row ``i``'s own node) reads its own
    row ``i`` of the first ``n_own`` rows, every other entry the message block after them (its column ``j``
    at ``n_own + j``). ``row_ids`` / ``col_ids``: global ids (None: rows and columns are the nodes). Of the
    type of ``indices``, or int64 where an index does not fit it."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    own = (rows == cols) if row_ids is None else (np.asarray(row_ids)[rows] == np.asarray(col_ids)[cols])
    return _narrowed(np.where(own, rows, cols + np.int64(n_own)), indices)


def _own_and_messages_round(core, ext, t, r, out, delayed=None, rounds=1, noisy=(), layout=None, noise_round=None,
                            stacked=True):
    """One round of ``core``'s weights over ``ext = [X; Q]`` (or ``(X, Q)``, the two apart: a lossy or sleepy round
    without delays, :meth:`_Messages._split`) into ``out`` (:meth:`_Messages.mix`); with a
    :class:`Delayed` layer, ``ext`` is its ring ``[X; the messages of the last D + 1 iterations]`` and each
    entry reads the newest message that has arrived; each of the ``noisy`` layers (:class:`Noisy`,
    ``per="link"``) then adds its noise on the received copies through the same weights (:func:`link_noise_block`;
    drawn as round ``noise_round``, default ``r``: ``content_round``). ``stacked``: a lossy round without delays
    reads ``ext`` in the compiled pass's fast cases (:attr:`_Messages.STACKED`)."""
    from .. import _core

    n = core.n
    cache = core.__dict__.setdefault("_own_and_messages", {}) if not isinstance(core, MixingMatrix) else \
        core._diag_cache.setdefault("own_and_messages", {})

    def read(csr):  # (indptr, the row each entry reads in ext)
        if delayed is None:
            if id(csr) not in cache:
                cache[id(csr)] = (csr, own_and_messages(csr.indptr, csr.indices, None, None, n))
            return csr.indptr, cache[id(csr)][1]
        return delayed.index(csr.indptr, csr.indices, t, r, layout)

    plan = None if isinstance(core, MixingMatrix) else core.plan(t)
    if isinstance(core, MixingMatrix) or plan is not None:
        c = core.csr if plan is None else plan[0](r).csr
        bad = None if plan is None or plan[4] is None else \
            plan[4].gates(c.indptr, c.indices, t, symmetric=core.stochastic == "doubly")

        def weighted(indptr, index, block, senders, dst):  # (senders: the node each row of block comes from)
            indptr = _same_type(indptr, index)
            if plan is None:
                _core.mix(indptr, index, c.data, block, dst, check_indices=False, ncols=len(block))
            else:
                _core.mix_lossy(indptr, index, c.data, block, dst, seed=plan[1], t=t, r=r, p=plan[2],
                                renormalise=core.stochastic == "row", awake=plan[3], row_ids=senders[:n],
                                col_ids=senders, ncols=len(block), bad=bad, check_indices=False,
                                symmetric=core.stochastic == "doubly")
    else:
        c, weights = core._entries(t, r)

        def weighted(indptr, index, block, senders, dst):
            dst[...] = _mix_entries(sp.csr_matrix((c.data, index, indptr), shape=(n, len(block))), weights, block,
                                    core.stochastic)

    if delayed is not None and (isinstance(core, MixingMatrix) or plan is not None) and delayed.FUSED[delayed.delay]:
        lossy = None if plan is None else {"loss_seed": plan[1], "p": plan[2], "renormalise": core.stochastic == "row",
                                           "awake": plan[3], "bad": bad, "symmetric": core.stochastic == "doubly"}
        delayed.mix_block(c.indptr, c.indices, c.data, ext, out, t, r, layout, lossy=lossy)  # (the ages drawn in
        # the mixing pass)
    elif delayed is None and plan is not None and stacked:  # (the rows of [X; Q] computed from the node ids: the
        # same sums as through own_and_messages' index and the block's ids, in the pass's fast cases)
        split = {"messages": ext[1]} if isinstance(ext, tuple) else {"stacked": True}
        _core.mix_lossy(c.indptr, c.indices, c.data, ext[0] if isinstance(ext, tuple) else ext, out, seed=plan[1],
                        t=t, r=r, p=plan[2], renormalise=core.stochastic == "row", awake=plan[3], bad=bad,
                        check_indices=False, symmetric=core.stochastic == "doubly", **split)
    else:
        node_major = layout is None or layout[3]
        cached = core.__dict__.get("_stacked_ids")
        if cached is None or cached[0] != (len(ext), node_major):  # (own rows, then the messages: each node's
            # side by side, or iteration by iteration)
            spread, nodes = np.repeat if node_major else np.tile, np.arange(n, dtype=np.int64)
            cached = core._stacked_ids = ((len(ext), node_major),
                                          np.concatenate([nodes, spread(nodes, len(ext) // n - 1)]))
        indptr, index = read(c)
        weighted(indptr, index, ext, cached[1], out)
    for layer in noisy:
        if layer.silent:  # (nothing to add: the base network's values, bit for bit)
            continue
        ages = None if delayed is None else delayed.ages(c.indptr, c.indices, t, r)
        block, index, senders = link_noise_block(layer, c.indptr, c.indices, t, r if noise_round is None else
                                                 noise_round, out.shape[1], out.dtype, n, ages=ages)
        noise = np.empty_like(out)
        weighted(c.indptr, index, block, senders, noise)
        out += noise


#: The bytes of a round's block of link noise above which :func:`link_noise_block` checks the memory first.
NOISE_BLOCK_CHECKED = 64 << 20


def link_noise_block(layer, indptr, indices, t, r, width, dtype, n_own, ages=None, row_ids=None, col_ids=None):
    """What a weighted pass needs to add ``layer``'s noise on the received copies (:class:`Noisy` with
    ``per="link"``): ``(block, index, senders)``, the block ``[zeros (n_own rows); sigma z (one row per stored
    entry)]`` (``_core.link_noise``, keyed on the global ids ``row_ids`` / ``col_ids``), the row each entry reads
    (a self loop its own zero row, the others their own noise; of the type of ``indptr``, or int64 where an index
    does not fit it) and the node each row of the block comes from."""
    from .. import _core

    ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
    nbytes = (n_own + len(indices)) * width * np.dtype(dtype).itemsize
    if nbytes > NOISE_BLOCK_CHECKED and row_ids is None:  # (a complete graph of 2,048 nodes at d = 500 had asked
        # 15.6 GiB a round and been killed by the operating system, helper 263; below this, no check each round; not
        # on an MPI rank's rows, where one rank's refusal alone would leave the others waiting)
        require_memory(2.0 * nbytes, f"Noisy(per='link'): the noise on the {len(indices)} received copies of "
                                     f"{width} values each, every round", "a sparser graph, fewer repetitions or a "
                                     "smaller d")
    block = np.empty((n_own + len(indices), width), dtype=dtype)
    block[:n_own] = 0
    # (sigma z, the product in dtype as Noisy.sigma_of's, written in place: no block of unit draws, no copy)
    _core.link_noise(indptr, indices, layer.seed, t, r, width, dtype=np.dtype(dtype),
                     ages=None if ages is None else np.ascontiguousarray(ages, dtype=np.int32),
                     sigma=layer.sigma, out=block[n_own:], **ids)
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    g_rows = rows if row_ids is None else np.asarray(row_ids)[rows]
    g_cols = cols if col_ids is None else np.asarray(col_ids)[cols]
    own = g_rows == g_cols
    index = _narrowed(np.where(own, rows, np.int64(n_own) + np.arange(len(cols), dtype=np.int64)), indptr)
    own_ids = np.arange(n_own, dtype=np.int64) if row_ids is None else np.asarray(row_ids, dtype=np.int64)
    return block, index, np.concatenate([own_ids, g_cols])
