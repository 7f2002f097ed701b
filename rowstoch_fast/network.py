"""Time-varying and unreliable directed networks: schedules, one-peer graphs, lossy links, sleeping nodes.

A *network* is anything with ``n``, ``stochastic`` (``"row"`` or ``"column"``), ``matrix(t, r=0)`` (the
matrix of gossip round ``r`` of iteration ``t``, materialised for inspection) and
``mix(X, t, rounds=1, out=None)`` (the rounds ``0 .. rounds - 1`` of iteration ``t`` applied to ``X``); a
static :class:`~rowstoch_fast.MixingMatrix` is one (every round is itself). Networks compose:
``Sleepy(Lossy(Schedule([A0, A1]), 0.1), 0.9)``.

Losses and sleep are drawn from a counter-based hash of ``(seed, iteration, round, receiver, sender)`` (or
``(seed, iteration, node)``), so a run gives the same network whatever the thread count, the backend (CPU,
MPI, CuPy: one compiled pass per round on each, :meth:`Network.plan`) or where it resumed.

Row-stochastic receivers renormalise over what arrived: node ``i`` computes
``(a_ii x_i + sum_{j arrived} a_ij x_j) / (a_ii + sum_{j arrived} a_ij)`` (the self loop always arrives), so
rows stay stochastic and a row that lost nothing is the static row, bit for bit. A column-stochastic
sender cannot know what will be lost, so its lost mass is lost (columns then sum to less than 1): the
honest model of push-sum under message loss.

Examples
--------
>>> import numpy as np
>>> from rowstoch_fast import topology
>>> from rowstoch_fast.network import Lossy, one_peer_exponential
>>> net = Lossy(topology.exponential(8), p=0.3, seed=1)
>>> Y = net.mix(np.ones((8, 2)), t=5)
>>> bool((Y == 1.0).all())  # rows renormalised over what arrived
True
>>> one_peer_exponential(8).matrix(2).toarray()[0]  # at t = 2 node 0 hears from node 0 - 4 = 4
array([0.5, 0. , 0. , 0. , 0.5, 0. , 0. , 0. ])
"""

from __future__ import annotations

import threading

import numpy as np
import scipy.sparse as sp

from ._checks import MAX_KEY, MAX_ROUNDS, as_float_array, check_int, check_out, check_positive_float
from ._hashing import MAX_T, content_round, uniform_hash
from ._history import History
from .mixing import MixingMatrix

__all__ = ["Network", "Schedule", "one_peer_exponential", "Lossy", "Sleepy", "Compressed", "Noisy", "Delayed",
           "as_network", "as_undirected", "base_matrix", "fixed_links", "weights_of", "links_of", "source_of",
           "source_matrices"]


class Network:
    """What every network of this module shares; see the module's docstring for the protocol."""

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
    #: Keeps state from one iteration to the next (the messages in flight): an optimizer's ``state_dict`` saves it.
    stateful = False

    @classmethod
    def declares(cls, prop):
        """``prop`` as this very class declares it (False where only a parent does): see :attr:`keeps_symmetry`."""
        return bool(cls.__dict__.get(prop, False))

    @property
    def dtype(self):
        """Value type of the matrices (that of the base)."""
        return self.base.dtype

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
        ``_reference.lossy_round(..., symmetric=True)``.

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
        layer = net
        while isinstance(layer, Network) and layer.acts_on != "matrices":
            if not type(layer).declares("keeps_symmetry"):  # (a subclass may have rounds of its own)
                raise ValueError(f"{self!r}: the undirected rule needs a symmetric W (or a schedule of them) under "
                                 f"losses, sleep or message layers, not a {type(layer).__name__}")
            layer.stochastic = "doubly"
            layer = layer.base
        if not isinstance(layer, (MixingMatrix, Schedule)):
            raise ValueError(f"{self!r}: the undirected rule needs a static matrix W under the network")
        return net

    def _entries(self, t, r):
        """(csr, weight of each stored entry in this round, or None for the base weights): subclasses that
        drop entries override this; the default materialises :meth:`matrix`."""
        return self.matrix(t, r).csr, None

    def plan(self, t):
        """How iteration ``t`` runs in the compiled pass (``_core.mix_lossy``), or None where it cannot:
        ``(matrix_of, seed, p, awake, chain)`` with ``matrix_of(r)`` the base MixingMatrix of round ``r``, the
        loss seed and probability, the awake mask (or None) and the Gilbert-Elliott network whose
        :meth:`Lossy.bad_states` gate the losses (or None). The MPI backend needs one."""
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
        return out


def _mix_entries(csr, weights, X, stochastic):
    """One round: ``csr`` with ``weights`` (zeros where a message was lost; None: the base weights)."""
    X2 = X.reshape(X.shape[0], -1).astype(csr.dtype, copy=False)
    shape = (csr.shape[0], *X.shape[1:])  # (a rectangular csr: Compressed's [own rows; messages])
    if weights is None:
        return (csr @ X2).reshape(shape)
    M = sp.csr_matrix((weights, csr.indices, csr.indptr), shape=csr.shape)
    if stochastic != "row":  # lost mass is lost (column), or kept on the receiver's diagonal (doubly)
        return (M @ X2).reshape(shape)
    # receivers renormalise over what arrived: numerator and denominator from one product (same order), and
    # rows that lost nothing keep the static sums, bit for bit
    changed = _changed_rows(csr, weights)
    Y = csr @ X2
    if changed.size:
        sub = M[changed]
        both = sub @ np.concatenate([X2, np.ones((X2.shape[0], 1), dtype=X2.dtype)], axis=1)
        Y[changed] = both[:, :-1] / both[:, -1:]
    return Y.reshape(shape)


def _row_counts(csr, flags):
    """How many stored entries of each row have ``flags`` set."""
    counts = np.zeros(csr.nnz + 1, dtype=np.int64)
    np.cumsum(flags, out=counts[1:])
    return counts[csr.indptr[1:]] - counts[csr.indptr[:-1]]


def _changed_rows(csr, weights):
    """Rows where some weight differs from the base (a message lost, a node asleep)."""
    return np.flatnonzero(_row_counts(csr, weights != csr.data))


def _materialise(net, csr, weights, t, r):
    """The MixingMatrix a round applies: the base where nothing changed; else the arrived weights, rows that
    changed renormalised (row-stochastic; columns of a lossy column-stochastic network sum to at most 1)."""
    if weights is None:
        return _base_matrix(net.base, t, r) if csr is _base_entries(net.base, t, r)[0] else \
            _round_matrix(csr, net.stochastic)
    data = weights.astype(csr.dtype, copy=True)
    if net.stochastic == "row":
        changed = _changed_rows(csr, weights)
        divisor = np.ones(csr.shape[0], dtype=data.dtype)
        divisor[changed] = np.add.reduceat(data, csr.indptr[:-1])[changed]
        data /= np.repeat(divisor, np.diff(csr.indptr))
    M = sp.csr_matrix((data, csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
    M.eliminate_zeros()  # the lost messages
    return _round_matrix(M, net.stochastic)


def _keep_empty_rows(csr, weights):
    """Row-stochastic rounds: a node that receives nothing this round and has no self loop keeps its value
    (its row becomes e_i, through a diagonal entry added for the round)."""
    empty = np.flatnonzero(_row_counts(csr, weights > 0) == 0)
    return (csr, weights) if empty.size == 0 else _with_diagonal(csr, weights, empty)


def _with_diagonal(csr, weights, nodes, values=None):
    """``csr`` with a diagonal entry added at ``nodes`` (base weight 0, this round's weight 1, or ``values``)."""
    rows = np.concatenate([np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr)), nodes])
    cols = np.concatenate([csr.indices.astype(np.int64), nodes])
    base = np.concatenate([csr.data, np.zeros(len(nodes), dtype=csr.dtype)])
    w = np.concatenate([weights, np.ones(len(nodes), dtype=csr.dtype) if values is None else values])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(csr.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=csr.shape[0]), out=indptr[1:])
    out = sp.csr_matrix((base[order], cols[order], indptr), shape=csr.shape)
    return out, w[order]


def _undirected_entries(csr, weights, gone, asleep=None):
    """A round of the undirected rule (:meth:`Network.undirected`) from ``gone``, the stored entries whose link is
    unused this round (self loops never): their weight moves to the receiver's diagonal (added where a row has
    none), so the round stays symmetric and doubly stochastic; a sleeping receiver's row (``asleep``) is
    ``e_i``."""
    asleep = np.zeros(csr.shape[0], dtype=bool) if asleep is None else asleep
    if not gone.any() and not asleep.any():
        return csr, weights
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    base = csr.data if weights is None else weights
    w = np.where(gone, 0.0, base).astype(csr.dtype)
    unused = np.bincount(rows, weights=np.where(gone, base, 0.0), minlength=csr.shape[0]).astype(csr.dtype)
    unused[asleep] = 0.0
    diagonal = rows == csr.indices
    w[asleep[rows] & diagonal] = 1.0
    w[diagonal] += unused[rows[diagonal]]
    has_loop = np.zeros(csr.shape[0], dtype=bool)
    has_loop[rows[diagonal]] = True
    missing = np.flatnonzero(~has_loop & ((unused != 0) | asleep))
    if missing.size:
        return _with_diagonal(csr, w, missing, np.where(asleep[missing], 1.0, unused[missing]).astype(csr.dtype))
    return csr, w


def _compiled_rounds(plan, X, t, rounds, out, renormalise, symmetric=False):
    """The rounds of iteration ``t`` through ``_core.mix_lossy`` (losses hashed in the CSR pass, rows
    renormalised there, sleeping nodes keep their values), ping-ponging buffers, the last round into ``out``
    (``X`` and ``out`` checked by :meth:`Network.mix`)."""
    from . import _core

    matrix_of, seed, p, awake, chain = plan
    Y = X.reshape(X.shape[0], -1)
    for r in range(rounds):
        c = matrix_of(r).csr
        dst = out.reshape(Y.shape) if (r == rounds - 1 and out is not None) else np.empty_like(Y)
        bad = None if chain is None else chain.gates(c.indptr, c.indices, t, symmetric=symmetric)
        _core.mix_lossy(c.indptr, c.indices, c.data, Y, dst, seed=seed, t=t, r=r, p=p, renormalise=renormalise,
                        awake=awake, bad=bad, check_indices=False, symmetric=symmetric)
        Y = dst
    return out if out is not None else Y.reshape(X.shape)


def describe(net):
    """:meth:`Network.describe` of a network, or of a :class:`MixingMatrix` (its kind, size and a SHA-1 of its
    arrays)."""
    if isinstance(net, MixingMatrix):
        sha1 = net.__dict__.get("_sha1")
        if sha1 is None:  # once per matrix (its arrays are frozen): every checkpoint's state_dict() asks again
            import hashlib

            digest = hashlib.sha1()
            c = net.csr
            for arr in (c.indptr.astype(np.int64), c.indices.astype(np.int64), c.data):
                digest.update(np.ascontiguousarray(arr).tobytes())
            sha1 = net._sha1 = digest.hexdigest()[:16]
        return {"type": "MixingMatrix", "n": int(net.n), "stochastic": net.stochastic, "sha1": sha1}
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


def base_matrix(net):
    """The static matrix under a network's losses and sleep (a schedule's first one): its physical links."""
    while not isinstance(net, MixingMatrix):
        net = net.base if hasattr(net, "base") else net.matrix(0)
    return net


def source_of(net):
    """``(source, varying)``: the static matrix or the :class:`Schedule` under every layer of ``net`` (what its
    rounds are drawn from), and whether a layer that drops or gates links (``acts_on == "links"``: losses, sleep)
    is among its layers: the rounds an undirected method keeps symmetric."""
    varying = False
    while isinstance(net, Network) and net.acts_on != "matrices":
        varying |= net.acts_on == "links"
        net = net.base
    return net, varying


def source_matrices(net):
    """The static matrices under every layer of ``net``: its matrix, or a schedule's."""
    source, _ = source_of(net)
    return list(source.matrices) if isinstance(source, Network) else [source]


def fixed_links(M):
    """Whether ``M`` has a fixed set of links whose messages an algorithm can follow one by one (per-link
    state: running sums, buffers): a static matrix, or a network that reports which messages arrived over one
    (:class:`Lossy` over a :class:`MixingMatrix`), with sleeping nodes (:class:`Sleepy` over those: a sleeping
    node's links are silent) and under message layers (compression, noise, delays) or not. Schedules have not."""
    M = weights_of(M)
    if isinstance(M, Sleepy):  # (sleep silences a node's links for an iteration; it keeps them)
        M = M.base
    return not isinstance(M, Network) or (isinstance(M, Lossy) and isinstance(M.base, MixingMatrix))


def _base_matrix(base, t, r):
    return base if isinstance(base, MixingMatrix) else base.matrix(t, r)


def _base_entries(base, t, r):
    if isinstance(base, MixingMatrix):
        return base.csr, None
    return base._entries(t, r)


def _unconnected(M, stochastic="row"):
    """A MixingMatrix that may be disconnected on its own (a schedule needs connectivity only over its period):
    the sums are checked, not the strong connectivity."""
    csr = sp.csr_matrix(M, dtype=np.float64)
    sums = np.asarray(csr.sum(axis=1 if stochastic == "row" else 0)).ravel()
    if csr.shape[0] != csr.shape[1] or (csr.data < 0).any() or not np.allclose(sums, 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"every matrix of a Schedule must be square, non-negative and {stochastic}-stochastic")
    csr.sort_indices()
    return _round_matrix(csr, stochastic)


def _round_matrix(csr, stochastic):
    """The matrix of one gossip round: no connectivity check (a round's graph need not be connected on its
    own; the network is, over time) and, under loss, columns may sum to less than 1."""
    csr = sp.csr_matrix(csr)
    return MixingMatrix._from_valid_csr(csr.indptr, csr.indices, csr.data, csr.shape[0],
                                        "row" if stochastic == "doubly" else stochastic, doubly=stochastic == "doubly")


class Schedule(Network):
    """A periodic sequence of matrices: ``A_t = matrices[t % m]`` (every gossip round of iteration ``t``).

    Parameters
    ----------
    matrices : sequence of MixingMatrix (or what MixingMatrix accepts)
        Same number of nodes, same kind (row- or column-stochastic).
    """

    acts_on = "matrices"

    def __init__(self, matrices):
        matrices = list(matrices)
        self._validated = all(isinstance(m, MixingMatrix) for m in matrices)  # checked as a whole network
        mats = []
        for k, m in enumerate(matrices):
            try:
                mats.append(m if isinstance(m, MixingMatrix) else _unconnected(m))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"matrices[{k}]: {exc}") from None
        if not mats:
            raise ValueError("Schedule needs at least one matrix")
        if len({m.n for m in mats}) > 1:
            raise ValueError(f"the matrices of a Schedule must have the same n, got {sorted({m.n for m in mats})}")
        kinds = {m.stochastic for m in mats}
        if len(kinds) > 1:
            raise ValueError("the matrices of a Schedule must all be row- or all column-stochastic")
        dtypes = {m.dtype for m in mats}
        if len(dtypes) > 1:  # a float32 round in a float64 run mixed with rounded weights
            raise TypeError(f"the matrices of a Schedule must have one dtype, got {', '.join(sorted(map(str, dtypes)))}"
                            "; convert them with .astype (mixed precision is not supported)")
        if not self._validated or len(mats) > 1:  # one validated matrix is strongly connected on its own
            _check_jointly_connected(mats)
        self.matrices = mats
        self.n = mats[0].n
        self.stochastic = kinds.pop()

    def matrix(self, t, r=0):
        return self.matrices[check_int(t, "t", minimum=0, maximum=MAX_T) % len(self.matrices)]

    @property
    def dtype(self):
        return self.matrices[0].dtype

    @property
    def static(self):
        return self.matrices[0] if len(self.matrices) == 1 and self._validated else None

    def plan(self, t):
        M = self.matrix(t)
        return (lambda r: M), 0, 0.0, None, None

    def map(self, f):
        out = Schedule([f(m) for m in self.matrices])
        out._validated = self._validated
        return out

    def __repr__(self):
        return f"Schedule({len(self.matrices)} matrices, n={self.n}, stochastic={self.stochastic!r})"


def _check_jointly_connected(mats):
    """A ValueError unless the union of the matrices' graphs is strongly connected: over one period of a
    Schedule every node must hear, through some chain of messages, from every other (Assumption 1 for a
    time-varying network; ``Schedule([I, I])`` never communicated). One pass over the entries."""
    from scipy.sparse import csgraph

    union = mats[0].csr.astype(bool).astype(np.int8)
    for m in mats[1:]:
        union = union + m.csr.astype(bool).astype(np.int8)
    count, labels = csgraph.connected_components(union, directed=True, connection="strong")
    if count > 1:
        members = np.flatnonzero(labels == labels[0])
        outside = int(np.flatnonzero(labels != labels[0])[0])
        raise ValueError(f"the matrices of a Schedule must be jointly strongly connected over its period (their "
                         f"union has {count} strongly connected components): over its {len(mats)} matrices node "
                         f"{outside} or node {int(members[0])} never hears from the other")


def one_peer_exponential(n, stochastic="row"):
    """The time-varying directed exponential graph of SGP and BlueFog: at iteration ``t`` node ``i`` hears only
    from node ``i - 2^(t mod ceil(log2 n)) (mod n)``, weights 1/2 and 1/2 (one 2-entry row per node).

    Examples
    --------
    >>> net = one_peer_exponential(16)
    >>> len(net.matrices), net.matrix(0).nnz
    (4, 32)
    """
    n = check_int(n, "n", minimum=2)
    if stochastic not in ("row", "column"):
        raise ValueError(f"stochastic must be 'row' or 'column', got {stochastic!r}")
    period = max(1, int(np.ceil(np.log2(n))))
    mats = []
    for k in range(period):
        h = (2**k) % n
        i = np.arange(n, dtype=np.int64)
        j = (i - h) % n
        rows = np.concatenate([i, i])
        cols = np.concatenate([i, j])
        M = sp.csr_matrix((np.full(2 * n, 0.5), (rows, cols)), shape=(n, n))
        mats.append(_unconnected(M if stochastic == "row" else M.T.tocsr(), stochastic))
    return Schedule(mats)


#: The most chain steps (entries x iterations) one call may advance the Gilbert-Elliott chains by: a jump to
#: t = 10**12 would have run for days (Ctrl-C is polled while they advance).
MAX_CHAIN_STEPS = 10**12
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


class Lossy(Network):
    """Each message (edge ``j -> i``, ``j != i``) of each gossip round is lost independently.

    Parameters
    ----------
    A : MixingMatrix or network
        The network whose messages get lost.
    p : float
        Loss probability in [0, 1) (``model="bernoulli"``), or the loss
        probability in the bad state, in [0, 1] (``"gilbert-elliott"``; the
        classic channel is ``p = 1``).
    seed : int
        Seed of the counter-based draws.
    model : {"bernoulli", "gilbert-elliott"}
        Independent losses, or bursty ones: each edge is a two-state Markov
        chain over the iterations (good -> bad with ``p_bad``, bad -> good
        with ``p_recover``, from its stationary distribution at iteration 0),
        losing each round's message with probability ``p`` in the bad state.
    p_bad, p_recover : float
        The chain's transition probabilities (``"gilbert-elliott"`` only).
    """

    acts_on = "links"
    keeps_symmetry = True

    def __init__(self, A, p, seed=0, model="bernoulli", p_bad=None, p_recover=None):
        self.base = _under_messages(as_network(A), "Lossy")
        self.n, self.stochastic = self.base.n, self.base.stochastic
        self.p = check_positive_float(p, "p", allow_zero=True)
        if self.p >= 1 and not (model == "gilbert-elliott" and self.p == 1):
            raise ValueError(f"p must be in [0, 1) (gilbert-elliott: [0, 1], the loss in the bad state), got {self.p}")
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        if model not in ("bernoulli", "gilbert-elliott"):
            raise ValueError(f"model must be 'bernoulli' or 'gilbert-elliott', got {model!r}")
        self.model = model
        if model == "gilbert-elliott":
            if p_bad is None or p_recover is None:
                raise ValueError("model='gilbert-elliott' needs p_bad and p_recover")
            self.p_bad = check_positive_float(p_bad, "p_bad")
            self.p_recover = check_positive_float(p_recover, "p_recover")
            if self.p_bad > 1 or self.p_recover > 1:
                raise ValueError("p_bad and p_recover must be probabilities")
        elif p_bad is not None or p_recover is not None:
            raise ValueError("p_bad and p_recover are parameters of model='gilbert-elliott'")

    def arrived(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which messages of round ``r`` of iteration ``t`` arrive, for a CSR share of the static matrix under
        this network (one bool per stored entry ``(i, j)``, the message ``j -> i``; a self loop always
        arrives): the draws the losses themselves use (:meth:`matrix`, the compiled passes, every backend),
        hashed on the global node ids ``row_ids[i]`` / ``col_ids[j]`` of an MPI rank's share. What the
        running-sum algorithms (:class:`~rowstoch_fast.RobustGradientPush`) deliver by."""
        if not isinstance(self.base, MixingMatrix):
            raise ValueError(f"{self!r}: per-message arrivals need a static matrix under the losses (a fixed set "
                             "of links), not a schedule or another network")
        return ~self._lost_entries(t, r, indptr, indices, row_ids, col_ids)

    def _lost_entries(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which stored entries' messages are lost in round ``r`` of iteration ``t`` (never a self loop): the
        compiled draws (``_core.lost_links``, the hash of :func:`uniform_hash` in C++; the NumPy transcription is
        ``_reference.lost_links``)."""
        from . import _core

        bad = self.bad_states(indptr, indices, t, row_ids=row_ids, col_ids=col_ids) \
            if self.model == "gilbert-elliott" else None
        ids = {} if row_ids is None else {"row_ids": np.ascontiguousarray(row_ids, dtype=np.int64),
                                          "col_ids": np.ascontiguousarray(col_ids, dtype=np.int64)}
        return _core.lost_links(indptr, indices, self.seed, t, r, self.p, bad=bad, **ids).view(bool)

    def _lost(self, csr, t, r):
        return self._lost_entries(t, r, csr.indptr, csr.indices)

    def _lost_back(self, csr, t, r):
        """Which stored entries' links lost their other message (``i -> j`` of the entry ``(i, j)``) in round
        ``r`` of iteration ``t``: the same draws (and chains), receiver and sender swapped."""
        return self._lost_entries(t, r, *self._back_links(csr.indptr, csr.indices))

    def _back_links(self, indptr, indices, row_ids=None, col_ids=None):
        """The other message of each stored entry of a CSR share (``i -> j`` of the entry ``(i, j)``, global ids
        ``row_ids`` / ``col_ids``) as links of their own, one row per entry: ``(indptr, indices, row_ids,
        col_ids)`` to draw or advance them by. Kept per share (with the share's arrays, so that no other array
        takes their ids), so that their Gilbert-Elliott chains are kept between calls like the others'."""
        cache = self.__dict__.setdefault("_back", {})
        key = (id(indptr), id(indices), id(row_ids), id(col_ids))
        if key not in cache:
            if len(cache) > 16:
                cache.clear()
            every = np.arange(len(indices) + 1, dtype=np.int64)
            rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
            cols = np.asarray(indices, dtype=np.int64)
            receivers = cols if col_ids is None else np.asarray(col_ids, dtype=np.int64)[cols]
            senders = rows if row_ids is None else np.asarray(row_ids, dtype=np.int64)[rows]
            cache[key] = ((every, every[:-1].copy(), receivers, senders), (indptr, indices, row_ids, col_ids))
        return cache[key][0]

    def gates(self, indptr, indices, t, row_ids=None, col_ids=None, symmetric=False):
        """The Gilbert-Elliott gates of a round's compiled pass (``bad=`` of ``_core.mix_lossy``): :meth:`bad_states`
        (bit 0), and under the undirected rule (``symmetric``) the states of each entry's other message (bit 1)."""
        bad = self.bad_states(indptr, indices, t, row_ids=row_ids, col_ids=col_ids)
        if not symmetric:
            return bad
        every, index, receivers, senders = self._back_links(indptr, indices, row_ids, col_ids)
        back = self.bad_states(every, index, t, row_ids=receivers, col_ids=senders)
        return bad | (back << 1)

    @property
    def static(self):
        base = self.base if isinstance(self.base, MixingMatrix) else self.base.static
        return base if self.p == 0 and self.model == "bernoulli" else None

    def plan(self, t):
        if not isinstance(self.base, (MixingMatrix, Schedule)):
            return None
        base = self.base
        chain = self if self.model == "gilbert-elliott" else None
        return (lambda r: _base_matrix(base, t, r)), self.seed, self.p, None, chain

    def chain_states(self, owner, size, t, advance, zeros=np.zeros):
        """The Gilbert-Elliott state (uint8, 1 = bad; ``size`` of them) of the stored entries of ``owner`` (a
        CSR share, host or device) at iteration ``t``, kept between calls: ``advance(bad, start, t, init)``
        moves them from iteration ``start - 1`` to ``t`` (``init``: from the stationary draw, ``start = 0``),
        from the last call on, or from iteration 0 the first time and when ``t`` goes back. The chains'
        definition: ``_reference.gilbert_elliott_states``."""
        chains = self.__dict__.setdefault("_chains", {})
        # one copy per thread: two optimizers sharing this network in two threads advanced one array in place,
        # without the GIL, while the other read it (their iterates differed from sequential runs)
        key = (id(owner), threading.get_ident())
        last, bad, _ = chains.get(key, (None, None, None))
        steps = t + 1 if bad is None or last > t else t - last
        if steps * max(size, 1) > MAX_CHAIN_STEPS:
            raise ValueError(f"t = {t}: the Gilbert-Elliott chains advance one iteration at a time from their last "
                             f"use ({'the start' if bad is None or last > t else f'iteration {last}'}); {steps} "
                             f"iterations of {size} chains is {steps * size:.2e} steps, more than "
                             f"{MAX_CHAIN_STEPS:.0e} (hours of work): ask for the iterations in order")
        if bad is None or last > t:
            bad = zeros(size, dtype=np.uint8)
            advance(bad, 0, t, True)
        elif last < t:
            advance(bad, last + 1, t, False)
        chains[key] = (t, bad, owner)  # (owner kept alive: its id stays unique)
        return bad

    def bad_states(self, indptr, indices, t, row_ids=None, col_ids=None):
        """:meth:`chain_states` of a host CSR share, advanced by ``_core.ge_advance`` (``row_ids`` /
        ``col_ids``: the global node ids of an MPI rank's share)."""
        from . import _core

        def advance(bad, start, stop, init):
            _core.ge_advance(indptr, indices, bad, self.seed, start, stop, self.p_bad, self.p_recover, init=init,
                             row_ids=row_ids, col_ids=col_ids)
        return self.chain_states(indices, len(indices), t, advance)

    def map(self, f):
        base = f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f)
        kw = {"p_bad": self.p_bad, "p_recover": self.p_recover} if self.model == "gilbert-elliott" else {}
        return Lossy(base, self.p, seed=self.seed, model=self.model, **kw)

    def _entries(self, t, r):
        csr, weights = _base_entries(self.base, t, r)
        if self.p == 0:
            return csr, weights
        lost = self._lost(csr, t, r)
        if self.stochastic == "doubly":  # (the undirected rule: a link used when both its messages arrived)
            return _undirected_entries(csr, weights, lost | self._lost_back(csr, t, r))
        if not lost.any():
            return csr, weights
        w = np.where(lost, 0.0, csr.data if weights is None else weights).astype(csr.dtype)
        return _keep_empty_rows(csr, w) if self.stochastic == "row" else (csr, w)

    def matrix(self, t, r=0):
        t, r = check_int(t, "t", minimum=0, maximum=MAX_T), check_int(r, "r", minimum=0, maximum=MAX_KEY)
        return _materialise(self, *self._entries(t, r), t, r)

    def __repr__(self):
        extra = f", p_bad={self.p_bad}, p_recover={self.p_recover}" if self.model == "gilbert-elliott" else ""
        return f"Lossy({self.base!r}, p={self.p}, seed={self.seed}, model={self.model!r}{extra})"


class Sleepy(Network):
    """Nodes that are not always active: a sleeping node neither sends nor updates (its row is ``e_i^T`` for that
    iteration, and its messages count as lost). Who is awake at iteration ``t`` follows an activation model,
    drawn from the counter-based hash of ``(seed, t, node)`` (every backend, MPI rank and resume draws the same):

    - ``"bernoulli"`` (default): each node awake with probability ``q``, independently per iteration;
    - ``"markov"``: each node a two-state chain, awake -> asleep with probability ``p_sleep`` and asleep -> awake
      with ``p_wake`` per iteration, starting from its stationary law (awake with ``p_wake / (p_sleep + p_wake)``);
    - ``"poisson"``: each node a Poisson clock of ``rate`` ticks per iteration, awake in iterations where it ticks
      (probability ``1 - exp(-rate)``, independently: in discrete iterations, Bernoulli with that ``q``);
    - ``"cyclic"``: node ``i`` awake when ``(i - t) % period == 0`` (``n / period`` nodes per iteration, in turn);
      only ``period = 1`` is accepted: with more groups no two linked nodes of different groups are ever awake
      together, so the network never mixes (refused, naming why).

    ``q = 1`` (always awake) is the base network itself, bit for bit. Sleep composes with losses
    (``Sleepy(Lossy(A, 0.1), 0.9)``) and schedules.

    Parameters
    ----------
    A : MixingMatrix or network
    q : float in (0, 1], optional
        ``"bernoulli"``'s probability of being awake (required there; not taken by the other models).
    seed : int
    model : {"bernoulli", "markov", "poisson", "cyclic"}
    p_sleep, p_wake : float in (0, 1]
        ``"markov"``'s transition probabilities.
    rate : float > 0
        ``"poisson"``'s ticks per iteration.
    period : int >= 1
        ``"cyclic"``'s number of groups.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Sleepy
    >>> Sleepy(topology.ring(6), model="poisson", rate=0.5, seed=1).awake(1).tolist()
    [False, False, False, False, True, True]
    >>> net = Sleepy(topology.ring(100), model="markov", p_sleep=0.1, p_wake=0.3, seed=2)
    >>> bool(0.6 < net.awake(50).mean() < 0.9)  # stationary: awake three quarters of the time
    True
    """

    acts_on = "links"
    keeps_symmetry = True

    MODELS = ("bernoulli", "markov", "poisson", "cyclic")
    _TAKES = {"bernoulli": ("q",), "markov": ("p_sleep", "p_wake"), "poisson": ("rate",), "cyclic": ("period",)}

    def __init__(self, A, q=None, seed=0, *, model="bernoulli", p_sleep=None, p_wake=None, rate=None, period=None):
        self.base = _under_messages(as_network(A), "Sleepy")
        self.n, self.stochastic = self.base.n, self.base.stochastic
        if model not in self.MODELS:
            raise ValueError(f"model must be one of {', '.join(map(repr, self.MODELS))}, got {model!r}")
        given = {"q": q, "p_sleep": p_sleep, "p_wake": p_wake, "rate": rate, "period": period}
        needed = self._TAKES[model]
        extra = [k for k, v in given.items() if v is not None and k not in needed]
        if extra:
            raise ValueError(f"model {model!r} takes {', '.join(needed)}, not {', '.join(extra)}")
        missing = [k for k in needed if given[k] is None]
        if missing:
            raise ValueError(f"model {model!r} needs {', '.join(missing)}")
        self.model = model
        for key in ("q", "p_sleep", "p_wake"):
            value = given[key]
            if value is not None:
                value = check_positive_float(value, key)
                if value > 1:
                    raise ValueError(f"{key} must be in (0, 1], got {value}")
            setattr(self, key, value)
        self.rate = None if rate is None else check_positive_float(rate, "rate")
        self.period = None if period is None else check_int(period, "period", minimum=1, maximum=2**62)
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        if self.model == "cyclic" and self.period > 1:
            # A link is used only when both its ends are awake, so only between nodes equal modulo period: over a
            # period the groups never hear from each other (on a ring every round is the identity).
            raise ValueError(f"Sleepy(model='cyclic', period={self.period}) never mixes: a sleeping node neither "
                             f"sends nor receives, so a message goes only between two nodes awake together, i.e. "
                             f"equal modulo period, and the {min(self.period, self.n)} groups never hear from each "
                             "other (no network is jointly connected under it); use period=1 (the base network) or "
                             "the bernoulli, poisson or markov model")

    @property
    def static(self):
        base = self.base if isinstance(self.base, MixingMatrix) else self.base.static
        always = (self.model == "bernoulli" and self.q == 1) or (self.model == "cyclic" and self.period == 1)
        return base if always else None

    def plan(self, t):
        if isinstance(self.base, MixingMatrix):
            matrix_of, seed, p, chain = (lambda r: self.base), 0, 0.0, None
        else:
            inner = self.base.plan(t)
            if inner is None or inner[3] is not None:
                return None
            matrix_of, seed, p, _, chain = inner
        return matrix_of, seed, p, self.awake(t), chain

    def _parameters(self):
        return {"model": self.model, **{k: getattr(self, k) for k in self._TAKES[self.model]}}

    def describe(self):
        """:meth:`Network.describe` with the model's own parameters only (``"bernoulli"``: ``q``, as before the
        other models existed, so that older checkpoints resume)."""
        out = super().describe()
        for key in ("q", "p_sleep", "p_wake", "rate", "period"):
            if out.get(key) is None:
                out.pop(key, None)
        if out.get("model") == "bernoulli":
            out.pop("model")
        return out

    def map(self, f):
        base = f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f)
        return Sleepy(base, seed=self.seed, **self._parameters())

    def arrived(self, t, r, indptr, indices, row_ids=None, col_ids=None):
        """Which messages of round ``r`` of iteration ``t`` arrive (see :meth:`Lossy.arrived`): those of the base
        network (its losses, if it is a :class:`Lossy`) between two awake nodes; a self loop always. For the
        methods that follow messages one by one (running sums: :class:`~rowstoch_fast.RobustGradientPush`,
        :class:`~rowstoch_fast.RFAST`) a sleeping node's links are silent for the iteration: what it would send
        and what is sent to it waits on the links, and it takes its own step with what it holds."""
        if isinstance(self.base, Lossy):
            arrived = self.base.arrived(t, r, indptr, indices, row_ids=row_ids, col_ids=col_ids)
        elif isinstance(self.base, MixingMatrix):
            arrived = np.ones(len(indices), dtype=bool)
        else:
            raise ValueError(f"{self!r}: per-message arrivals need a static matrix under the sleep and losses (a "
                             "fixed set of links), not a schedule or another network")
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        gi = rows if row_ids is None else np.asarray(row_ids)[rows]
        gj = np.asarray(indices, dtype=np.int64) if col_ids is None else np.asarray(col_ids)[indices]
        awake = self.awake(t)
        return arrived & ((awake[gi] & awake[gj]) | (gi == gj))

    def awake(self, t):
        """Boolean mask of the nodes awake at iteration ``t`` (read-only; the last one is kept: an iteration's
        phases ask for it several times)."""
        t = check_int(t, "t", minimum=0, maximum=MAX_T)
        cached = self.__dict__.get("_awake")
        if cached is None or cached[0] != t:
            mask = self._draw(t)
            mask.flags.writeable = False
            cached = self._awake = (t, mask)
        return cached[1]

    def _draw(self, t):
        nodes = np.arange(self.n)
        if self.model == "cyclic":
            return (nodes - t) % self.period == 0
        if self.model == "markov":
            return self._markov(t)
        q = self.q if self.model == "bernoulli" else -np.expm1(-self.rate)  # (poisson: 1 - exp(-rate))
        return uniform_hash(self.seed, 2**60 + t, nodes) < q

    def _markov(self, t):
        """The chains' states at ``t``: from the last state computed (or the stationary draw at 0), one iteration
        at a time with the draws ``uniform_hash(seed, 2^60 + s, node)`` (``_reference.markov_awake``)."""
        last = self.__dict__.get("_chain")
        if last is None or last[0] > t:
            start, state = 0, uniform_hash(self.seed, 2**62 + 1, np.arange(self.n)) < \
                self.p_wake / (self.p_sleep + self.p_wake)
        else:
            start, state = last
        if (t - start) * max(self.n, 16) > MAX_ACTIVATION_STEPS:  # (below 16 nodes an iteration costs as 16)
            raise ValueError(f"t = {t}: the activation chains advance from iteration {start} through every iteration; "
                             f"{t - start} iterations of {self.n} chains is more than {MAX_ACTIVATION_STEPS:.0e} steps "
                             f"(a minute of NumPy): ask for the iterations in order")
        nodes = np.arange(self.n)
        block = max(1, 2**20 // self.n)  # iterations drawn at once (8 MB of draws)
        for first in range(start + 1, t + 1, block):
            steps = np.arange(first, min(first + block, t + 1), dtype=np.int64)
            u = uniform_hash(self.seed, 2**60 + steps[:, None], nodes)
            state = advance_two_state(state, u, self.p_sleep, self.p_wake)
        self._chain = (t, state)
        return state.copy()

    def _entries(self, t, r):
        csr, weights = _base_entries(self.base, t, r)
        awake = self.awake(t)
        if awake.all():
            return csr, weights
        if self.stochastic == "doubly":  # (the undirected rule: a link used when both ends are awake)
            rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(csr.indptr))
            gone = ~(awake[rows] & awake[csr.indices]) & (rows != csr.indices)
            return _undirected_entries(csr, weights, gone, asleep=~awake)
        rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(csr.indptr))
        cols = csr.indices
        w = (csr.data if weights is None else weights).copy()
        if self.stochastic == "row":
            w[~awake[cols] & (rows != cols)] = 0.0  # a sleeping sender's message does not arrive
            asleep = ~awake[rows]
            w[asleep] = np.where(rows[asleep] == cols[asleep], 1.0, 0.0)  # a sleeping receiver keeps its x
            return _keep_empty_rows(csr, w.astype(csr.dtype))  # (also one without a self loop)
        w[~awake[rows] & (rows != cols)] = 0.0  # nothing reaches a sleeping receiver
        asleep = ~awake[cols]
        w[asleep] = np.where(rows[asleep] == cols[asleep], 1.0, 0.0)  # a sleeping sender keeps its mass
        has_loop = np.zeros(self.n, dtype=bool)
        has_loop[rows[rows == cols]] = True
        missing = np.flatnonzero(~awake & ~has_loop)
        if missing.size:  # a sleeping sender without a self loop gets one (weight 1: it keeps its mass)
            return _with_diagonal(csr, w.astype(csr.dtype), missing)
        return csr, w.astype(csr.dtype)

    def matrix(self, t, r=0):
        t, r = check_int(t, "t", minimum=0, maximum=MAX_T), check_int(r, "r", minimum=0, maximum=MAX_KEY)
        return _materialise(self, *self._entries(t, r), t, r)

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in self._parameters().items() if k != "model")
        model = "" if self.model == "bernoulli" else f", model={self.model!r}"
        return f"Sleepy({self.base!r}, {args}, seed={self.seed}{model})"


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
        base = f(self.base) if isinstance(self.base, MixingMatrix) else self.base.map(f)
        return type(self)(base, **self._parameters())

    def message_length(self, width, d=None):
        """The values of one message in a row of ``width`` values: ``d`` where it divides the row (an optimizer's
        models, replica by replica), else the whole row."""
        return d if d and width % d == 0 else max(width, 1)

    def encode(self, X, out, t, r, d=None, row_ids=None, own=None):
        """``out <- Q(X)``: the messages the rows of the 2-D host block ``X`` send in round ``r`` of iteration
        ``t`` (every message layer, the outer one first; ``row_ids``: the rows' global node ids, an MPI rank's
        share); ``out`` may be ``X``. ``own``: a block that gets a copy of ``X`` in the same pass."""
        from . import _core

        src = X
        for seed, method, param, sigma, unbiased in self.encoders():
            _core.compress(src, out, method, self.message_length(X.shape[1], d), param, sigma, unbiased, seed, t, r,
                           row_ids=row_ids, own=own if src is X else None)
            src = out
        if src is X:
            if out is not X:
                out[...] = X
            if own is not None:
                own[...] = X
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
        optimizer's model; default the row). With a :class:`Delayed` layer the stacked block holds the messages
        of the last ``max_delay + 1`` iterations, kept in ``state`` (a dict: an optimizer passes one per quantity
        it mixes, and tells them apart: ``state["quantity"]``, ``content_round``; default the network's own,
        for calls in iteration order)."""
        t, rounds, X = self._mix_arguments(X, t, rounds, out)
        self.check_message(X.shape[1] if X.ndim == 2 else 1, d)
        cur = X.reshape(self.n, -1)
        core, delayed, n = self.core(), self.delayed(), self.n
        ring = None if delayed is None else delayed.ring(self.__dict__.setdefault("_own_state", {}) if state is None
                                                         else state, t, n, n, cur.shape[1], rounds, cur.dtype)
        for r in range(rounds):
            drawn = content_round(r, state)  # (this quantity's compression and noise)
            if ring is None:
                ext = _stack_buffer(self, (2 * n, cur.shape[1]), cur.dtype)
                self.encode(np.ascontiguousarray(cur), ext[n:], t, drawn, d, own=ext[:n])
            else:
                ext, plain = ring.buffer, np.ascontiguousarray(cur)
                # (messages sent as they are go into the history straight from the block: one copy less)
                messages = _stack_buffer(self, cur.shape, cur.dtype) if self.encoders() else plain
                ring.put(t, r, self.encode(plain, messages, t, drawn, d, own=ext[:n]))
            dst = out.reshape(cur.shape) if (r == rounds - 1 and out is not None) else np.empty_like(cur)
            _own_and_messages_round(core, ext, t, r, dst, delayed, rounds, self.noisy_links(),
                                    None if ring is None else ring.layout(), noise_round=drawn)
            cur = dst
        if ring is not None:
            ring.done(t)
        return out if out is not None else cur.reshape(X.shape)

    def check_message(self, width, d=None):
        """ValueError where this compression cannot make a message of the block's (a ``k`` larger than the
        model's ``d`` values)."""
        layer = self
        while isinstance(layer, _Messages):
            k = getattr(layer, "k", None)
            L = self.message_length(width, d)
            if k is not None and k > L and (d is None or width % d == 0):  # (a narrow block, a push-sum weight
                # beside models of d values, is sent whole)
                raise ValueError(f"k = {k} is more than the {L} values of one message (k must be in 1..d)")
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
        layer, sized = self, None
        while isinstance(layer, _Messages):
            sized = layer if getattr(layer, "_bits", None) is not None else sized  # (a compression sizes them)
            layer = layer.base
        if sized is None:
            return values * itemsize
        if d and values > d and values % d:
            return self.message_bytes(values - values % d, d, itemsize) + self.message_bytes(values % d, d, itemsize)
        L = self.message_length(values, d)  # (a sender sends the plain values where they are smaller)
        return -(-(values // L) * min(sized._bits(L, itemsize), 8 * itemsize * L) // 8)


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


def own_and_messages(indptr, indices, row_ids, col_ids, n_own):
    """The column indices that read ``[own rows; messages]``: a self loop (row ``i``'s own node) reads its own
    row ``i`` of the first ``n_own`` rows, every other entry the message block after them (its column ``j``
    at ``n_own + j``). ``row_ids`` / ``col_ids``: global ids (None: rows and columns are the nodes)."""
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    own = (rows == cols) if row_ids is None else (np.asarray(row_ids)[rows] == np.asarray(col_ids)[cols])
    return np.where(own, rows, cols + n_own).astype(np.asarray(indices).dtype)


def _own_and_messages_round(core, ext, t, r, out, delayed=None, rounds=1, noisy=(), layout=None, noise_round=None):
    """One round of ``core``'s weights over ``ext = [X; Q]`` into ``out`` (:meth:`_Messages.mix`); with a
    :class:`Delayed` layer, ``ext`` is its ring ``[X; the messages of the last D + 1 iterations]`` and each
    entry reads the newest message that has arrived; each of the ``noisy`` layers (:class:`Noisy`,
    ``per="link"``) then adds its noise on the received copies through the same weights (:func:`link_noise_block`;
    drawn as round ``noise_round``, default ``r``: ``content_round``)."""
    from . import _core

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
        if layer.sigma == 0:  # (nothing to add: the base network's values, bit for bit)
            continue
        ages = None if delayed is None else delayed.ages(c.indptr, c.indices, t, r)
        block, index, senders = link_noise_block(layer, c.indptr, c.indices, t, r if noise_round is None else
                                                 noise_round, out.shape[1], out.dtype, n, ages=ages)
        noise = np.empty_like(out)
        weighted(c.indptr, index, block, senders, noise)
        out += noise


def link_noise_block(layer, indptr, indices, t, r, width, dtype, n_own, ages=None, row_ids=None, col_ids=None):
    """What a weighted pass needs to add ``layer``'s noise on the received copies (:class:`Noisy` with
    ``per="link"``): ``(block, index, senders)``, the block ``[zeros (n_own rows); sigma z (one row per stored
    entry)]`` (``_core.link_noise``, keyed on the global ids ``row_ids`` / ``col_ids``), the row each entry reads
    (a self loop its own zero row, the others their own noise) and the node each row of the block comes from."""
    from . import _core

    ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
    z = _core.link_noise(indptr, indices, layer.seed, t, r, width, dtype=np.dtype(dtype),
                         ages=None if ages is None else np.ascontiguousarray(ages, dtype=np.int32), **ids)
    block = np.concatenate([np.zeros((n_own, width), dtype=dtype), z * np.asarray(layer.sigma, dtype=dtype)])
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    g_rows = rows if row_ids is None else np.asarray(row_ids)[rows]
    g_cols = cols if col_ids is None else np.asarray(col_ids)[cols]
    own = g_rows == g_cols
    index = np.where(own, rows, n_own + np.arange(len(cols), dtype=np.int64)).astype(np.asarray(indptr).dtype)
    own_ids = np.arange(n_own, dtype=np.int64) if row_ids is None else np.asarray(row_ids, dtype=np.int64)
    return block, index, np.concatenate([own_ids, g_cols])


class Compressed(_Messages):
    """Every message compressed by its sender (see :class:`_Messages` for what a round computes).

    Parameters
    ----------
    A : MixingMatrix or network
        The network whose messages are compressed (losses, sleep and schedules go inside).
    method : {"qsgd", "sign", "topk", "randk", "round"}
        - ``"qsgd"`` (Alistarh et al. 2017): ``bits`` per value, ``s = 2^bits - 1`` levels of ``|v_c| /
          ||v||_2``, stochastic rounding (unbiased: ``E[Q(v)] = v``) or, ``unbiased=False``, the nearest level;
          ``bits + 1`` bits per value and the norm;
        - ``"sign"``: ``sign(v_c) ||v||_1 / d`` (biased; 1 bit per value and the norm);
        - ``"topk"``: the ``k`` values of largest magnitude, the others 0 (biased; ``k`` values and their
          32-bit indices);
        - ``"randk"``: ``k`` values at positions drawn from the shared seed (receivers draw them too: ``k``
          values), times ``d / k`` when ``unbiased`` (default);
        - ``"round"``: every value rounded to ``bits`` significant bits (deterministic, biased; sign, exponent
          and ``bits - 1`` bits). A float32 run with ``bits >= 24`` sends its values unchanged.
    bits : int in 1..32
        ``"qsgd"`` and ``"round"``.
    k : int in 1..d
        ``"topk"`` and ``"randk"`` (checked against the model's ``d`` when a run starts).
    unbiased : bool, optional
        ``"qsgd"`` and ``"randk"`` (default True); the others are biased.
    seed : int
        Seed of the random choices (``"qsgd"``, ``"randk"``).

    Notes
    -----
    ``topk`` with ``k = d``, ``randk`` with ``k = d`` and ``round`` at the run's precision send every value
    unchanged: the iterates equal the base network's, bit for bit (tests). The bytes an optimizer's
    ``traffic()`` (and ``rowstoch compare``'s tables) count are those of the compressed messages. A plain
    algorithm under compression shows its degradation; :class:`~rowstoch_fast.CHOCOSGD` compresses the
    differences to replicas it keeps, and converges. Definitions: ``_reference.compress``.

    Examples
    --------
    >>> import numpy as np
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Compressed
    >>> net = Compressed(topology.ring(4), "topk", k=1)  # node 0: half its own x, half what node 3 sends
    >>> net.mix(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]), t=0)[0].tolist()  # 3 sends [0, 8]
    [0.5, 5.0]
    """

    keeps_symmetry = True
    alters_messages = True

    METHODS = {"qsgd": 0, "sign": 1, "topk": 2, "randk": 3, "round": 4}
    _TAKES = {"qsgd": ("bits", "unbiased"), "sign": (), "topk": ("k",), "randk": ("k", "unbiased"),
              "round": ("bits",)}

    def __init__(self, A, method, *, bits=None, k=None, unbiased=None, seed=0):
        self.base = as_network(A)
        self.n, self.stochastic = self.base.n, self.base.stochastic
        if method not in self.METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, self.METHODS))}, got {method!r}")
        given = {"bits": bits, "k": k, "unbiased": unbiased}
        extra = [key for key, v in given.items() if v is not None and key not in self._TAKES[method]]
        if extra:
            takes = ", ".join(self._TAKES[method]) or "no parameter"
            raise ValueError(f"compression {method!r} takes {takes}, not {', '.join(extra)}")
        self.method = method
        self.bits = self.k = self.unbiased = None
        if "bits" in self._TAKES[method]:
            if bits is None:
                raise ValueError(f"compression {method!r} needs bits (1..32)")
            self.bits = check_int(bits, "bits", minimum=1, maximum=32)
        if "k" in self._TAKES[method]:
            if k is None:
                raise ValueError(f"compression {method!r} needs k (1..d)")
            self.k = check_int(k, "k", minimum=1, maximum=2**31 - 1)
        if "unbiased" in self._TAKES[method]:
            if unbiased is not None and not isinstance(unbiased, (bool, np.bool_)):
                raise TypeError(f"unbiased must be True or False, got {unbiased!r}")
            self.unbiased = True if unbiased is None else bool(unbiased)
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)

    def _parameters(self):
        return {"method": self.method, "seed": self.seed,
                **{key: getattr(self, key) for key in self._TAKES[self.method]}}

    def _kernel_arguments(self):
        param = self.bits if self.bits is not None else (self.k or 0)
        return self.METHODS[self.method], param, 0.0, bool(self.unbiased)

    def omega(self, d):
        """The variance bound of an unbiased compression of ``d`` values, ``E||Q(v) - v||^2 <= omega ||v||^2``
        (``"qsgd"``: ``min(d / s^2, sqrt(d) / s)``, Alistarh et al. 2017; ``"randk"``: ``d / k - 1``); 0 for
        the biased ones."""
        if self.method == "qsgd" and self.unbiased:
            s = 2.0**self.bits - 1
            return min(d / s**2, d**0.5 / s)
        if self.method == "randk" and self.unbiased:
            return d / min(self.k, d) - 1.0
        return 0.0

    def delta(self, d):
        """A contraction ``delta`` in (0, 1] of the (rescaled) compression of ``d`` values, ``||Q(v) / (1 +
        omega) - v||^2 <= (1 - delta) ||v||^2`` (Koloskova et al. 2019): ``k / d`` for top-k and biased rand-k,
        ``1 / d`` for sign, ``1 / (1 + omega)`` for the unbiased ones; nearest-level qsgd and rounding: 1 / 2."""
        if self.method in ("topk", "randk") and not (self.method == "randk" and self.unbiased):
            return min(self.k, d) / d
        if self.method == "sign":
            return 1.0 / d
        if self.unbiased:
            return 1.0 / (1.0 + self.omega(d))
        return 0.5

    def _bits(self, L, itemsize):
        """Bits of one compressed message of ``L`` values."""
        value = 8 * itemsize
        if self.method == "qsgd":
            return L * (self.bits + 1) + value
        if self.method == "sign":
            return L + value
        if self.method in ("topk", "randk"):
            k = min(self.k, L)
            return k * (value + 32) if self.method == "topk" else k * value
        exponent = 8 if itemsize == 4 else 11  # "round": sign, exponent, the significand's stored bits
        return L * min(value, 1 + exponent + self.bits - 1)

    def __repr__(self):
        args = "".join(f", {key}={getattr(self, key)!r}" for key in self._TAKES[self.method])
        return f"Compressed({self.base!r}, {self.method!r}{args}, seed={self.seed})"


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
    of :meth:`mix` outside an optimizer share the network's own history: make them in iteration order.

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

    keeps_symmetry = True
    stateful = True

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
        if delay not in self.DELAYS:
            raise ValueError(f"delay must be one of {', '.join(map(repr, self.DELAYS))}, got {delay!r}")
        self.delay = delay
        self.seed = check_int(seed, "seed", minimum=0, maximum=MAX_KEY)
        inner = self.base
        while isinstance(inner, _Messages):
            if isinstance(inner, Delayed):
                raise ValueError("a network takes one Delayed layer (its bound is the largest delay)")
            inner = inner.base

    def _parameters(self):
        return {"max_delay": self.max_delay, "delay": self.delay, "seed": self.seed}

    def omega(self, d):
        return 0.0

    def delta(self, d):
        return 1.0

    def ring(self, state, t, n_own, n_block, width, rounds, dtype, require=None, xp=np):
        """The history of the quantity ``state`` holds (a dict), made where it is missing or of another shape:
        ``n_own`` own rows, then ``(max_delay + 1) rounds`` blocks of ``n_block`` rows of ``width`` values, in
        arrays of ``xp`` (a history restored on the host moves there)."""
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
            from ._checks import require_memory

            nbytes = shape[0] * shape[1] * np.dtype(dtype).itemsize
            (require or require_memory)(nbytes, f"Delayed(max_delay={self.max_delay}): the messages of the last "
                                                f"{self.max_delay + 1} iterations of {n_block} nodes x {width} values "
                                                f"x {rounds} rounds", "use a smaller max_delay")
            ring = state["ring"] = History(n_own, n_block, width, self.max_delay, rounds, dtype, xp, order)
        ring.start(t)
        return ring

    def ages(self, indptr, indices, t, r, row_ids=None, col_ids=None):
        """The age of the message each stored entry reads in round ``r`` of iteration ``t`` (``_core.delay_ages``)."""
        from . import _core

        ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
        return _core.delay_ages(indptr, indices, self.seed, t, r, self.max_delay, fixed=self.delay == "fixed", **ids)

    def mix_block(self, indptr, indices, data, block, out, t, r, layout, row_ids=None, col_ids=None, lossy=None):
        """``out <-`` round ``r`` of iteration ``t`` of the CSR weights over ``block``, the history laid out as
        ``layout`` (:meth:`index`'s), each entry reading the newest message of its link that has arrived: the
        ages drawn in the pass (``_core.mix_delayed``; the same sums as the mix over :meth:`index`). ``lossy``:
        the round's losses and sleep, ``{"loss_seed", "p", "renormalise", "awake", "bad"}`` (``_core.mix_lossy``'s
        draws on the senders' ids)."""
        from . import _core

        ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
        return _core.mix_delayed(indptr, indices, data, block, out, self.seed, t, r, self.max_delay,
                                 self.delay == "fixed", layout, **ids, **(lossy or {}))

    def index(self, indptr, indices, t, r, layout, row_ids=None, col_ids=None):
        """``(indptr, index)``: the row of the stacked block each stored entry reads in round ``r`` of iteration
        ``t`` (``_core.delay_ages``; ``layout``: ``(n_own, n_block, rounds[, node_major])``, the history's
        :meth:`~rowstoch_fast._history.History.layout`), with an ``indptr`` of its integer
        type. Fixed delays: computed once per block of the window and kept."""
        from . import _core

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

    def __repr__(self):
        return f"Delayed({self.base!r}, max_delay={self.max_delay}, delay={self.delay!r}, seed={self.seed})"


def as_undirected(net):
    """What an undirected method (a doubly stochastic ``W``) runs ``net`` as: losses or sleep (over a matrix or a
    schedule, under message layers or not) under the undirected rule (:meth:`Network.undirected`); a matrix,
    a schedule alone, message layers over a static matrix and a network already under the rule as they are.
    Raises the rule's ValueError where it cannot apply."""
    if not isinstance(net, Network) or net.stochastic == "doubly" or isinstance(weights_of(net), MixingMatrix):
        return net
    return net.undirected()


def weights_of(net):
    """The network whose weights ``net`` applies: ``net`` without its message layers (compression, noise): what
    the diagonal trackers of the Pull-Diag methods follow (their messages travel uncompressed)."""
    return net.core() if isinstance(net, _Messages) else net


def links_of(net):
    """``net`` without the layers that change what a sender sends (:class:`Compressed`, :class:`Noisy` with
    ``per="message"``), keeping what happens on the links (delays, noise on each received copy, and the core's
    losses, sleep and schedules): how the messages of a method that compresses them itself (CHOCO-SGD,
    Compressed Push-Pull: ``Q`` applied once, through :meth:`_Messages.encode`) reach their receivers. ``net``
    itself where it has no such layer; the stripped network is kept on ``net`` (one object per network)."""
    if not isinstance(net, _Messages):
        return net
    kept, layer, stripped = [], net, False
    while isinstance(layer, _Messages):
        if not layer.alters_messages:
            kept.append(layer)
        else:
            stripped = True
        layer = layer.base
    if not stripped:
        return net
    cached = net.__dict__.get("_links_of")
    if cached is None:
        cached = layer
        for outer in reversed(kept):
            cached = type(outer)(cached, **outer._parameters())
        net._links_of = cached
    return cached
