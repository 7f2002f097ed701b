"""What the algorithms ask of a network: the matrix under its layers (:func:`base_matrix`, :func:`source_of`),
its weights without the message layers (:func:`weights_of`), its links (:func:`links_of`, :func:`fixed_links`,
:func:`out_links`), its undirected form (:func:`as_undirected`), the same network with new per-value draws
(:func:`reseeded`) or new draws of every layer (:func:`redrawn`, :func:`draws`), what loses messages
(:func:`losses_of`).
"""

from __future__ import annotations

import numpy as np

from .._checks import MAX_KEY, check_int
from ..mixing import MixingMatrix, as_matrix
from .base import Network
from .messages import _Messages


def network_checked(net, name="net"):
    """``net`` if it is a MixingMatrix or a network, else a TypeError naming ``name`` (an array had met an
    AttributeError, or passed through as if it were a network)."""
    if not isinstance(net, (MixingMatrix, Network)):
        raise TypeError(f"{name} must be a MixingMatrix or a network (rowstoch_fast.network), got "
                        f"{type(net).__name__}")
    layer, depth = net, 0
    while isinstance(layer, Network) and layer.acts_on != "matrices" and depth < 64:
        if not hasattr(layer, "base"):  # (a subclass of the user's with n, matrix and map alone had met "'Net'
            # object has no attribute 'base'" in the first step, helper 196)
            raise TypeError(f"{name}: {type(layer).__name__} is a Network that is neither a layer over another (its "
                            "base: the network it wraps, as Lossy(A, 0.1).base is A) nor a source of matrices "
                            "(acts_on = 'matrices' with its matrices, as Schedule); build it from those, or wrap "
                            "a Schedule of its matrices")
        layer, depth = layer.base, depth + 1
    return net


def base_matrix(net):
    """The static matrix under a network's losses and sleep (a schedule's first one): its physical links."""
    network_checked(net)
    while not isinstance(net, MixingMatrix):
        net = net.base if hasattr(net, "base") else net.matrix(0)
    return net


def losses_of(net):
    """What the layers of ``net`` do that loses messages, as they declare it (:attr:`Network.loses`), outermost
    first: those set to lose some (not ``lossless``); an empty list where no message is lost (one node: none is
    sent)."""
    found = []
    if getattr(net, "n", None) == 1:  # (`run --n 1 --loss 0.5` had been told "this network loses messages")
        return found
    while isinstance(net, Network):
        if net.loses and not getattr(net, "lossless", False):
            found.append(net.loses)
        net = getattr(net, "base", None)
    return found


def late(net):
    """Whether a layer of ``net`` may deliver a message in a later round than it was sent (:attr:`Network.late`:
    delays)."""
    while isinstance(net, Network):
        if net.late:
            return True
        net = getattr(net, "base", None)
    return False


def effects_of(net):
    """What the layers of ``net`` do to the messages they pass on, as they declare it (:attr:`Network.effect`),
    outermost first; an empty list where none changes them."""
    found = []
    while isinstance(net, Network):
        if net.effect:
            found.append(net.effect)
        net = getattr(net, "base", None)
    return found


def out_links(M):
    """Each node's out-links in the :class:`MixingMatrix` ``M`` (the stored entries of its column, a weighted self
    loop not counted): the messages it sends in one exchange, an int64 array of ``n``."""
    M = as_matrix(M, "M")
    csr = M.csr
    return (np.bincount(csr.indices, minlength=M.n) - (csr.diagonal() > 0)).astype(np.int64)


def source_of(net):
    """``(source, varying)``: the static matrix or the :class:`Schedule` under every layer of ``net`` (what its
    rounds are drawn from), and whether a layer that drops or gates links (``acts_on == "links"``: losses, sleep)
    is among its layers: the rounds an undirected method keeps symmetric."""
    network_checked(net)
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
    state: running sums, buffers): a static matrix, or a network whose layers on the links say so
    (:attr:`Network.reports_arrivals`, read off the outermost of them: :class:`Lossy` over a static matrix,
    :class:`Sleepy` over one or over those losses), under message layers (compression, noise, delays) or not.
    Schedules have not. Decided by what the layers declare, never by their types: a new layer is answered for
    as it declares."""
    M = weights_of(network_checked(M, "M"))
    return not isinstance(M, Network) or bool(M.reports_arrivals)


def as_undirected(net):
    """What an undirected method (a doubly stochastic ``W``) runs ``net`` as: losses or sleep (over a matrix or a
    schedule, under message layers or not) under the undirected rule (:meth:`Network.undirected`); a matrix,
    a schedule alone, message layers over a static matrix and a network already under the rule as they are.
    Raises the rule's ValueError where it cannot apply."""
    if (not isinstance(network_checked(net), Network) or net.stochastic == "doubly"
            or isinstance(weights_of(net), MixingMatrix)):
        return net
    return net.undirected()


def weights_of(net):
    """The network whose weights ``net`` applies: ``net`` without its message layers (compression, noise): what
    the diagonal trackers of the Pull-Diag methods follow (their messages travel uncompressed)."""
    network_checked(net)
    return net.core() if isinstance(net, _Messages) else net


def links_of(net):
    """``net`` without the layers that change what a sender sends (:class:`Compressed`, :class:`Noisy` with
    ``per="message"``), keeping what happens on the links (delays, noise on each received copy, and the core's
    losses, sleep and schedules): how the messages of a method that compresses them itself (CHOCO-SGD,
    Compressed Push-Pull: ``Q`` applied once, through :meth:`_Messages.encode`) reach their receivers. ``net``
    itself where it has no such layer; the stripped network is kept on ``net`` (one object per network)."""
    if not isinstance(network_checked(net), _Messages):
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


def reseeded(net, shift):
    """``net`` with every message layer that draws per value sent (:attr:`_Messages.draws_per_value`: compression,
    noise) seeded ``seed + shift`` (wrapped to the seeds' range): the same network whose replicas draw messages
    that no replica at the same position of ``net`` draws (those draws follow a replica's position in its
    block). The layers under them (losses, sleep, delays: drawn per link, the same for every replica) are kept,
    and so is ``net`` itself where no layer draws per value (:func:`redrawn` draws every layer anew)."""
    return _shifted(net, check_int(shift, "shift"), lambda layer: isinstance(layer, _Messages) and
                    layer.draws_per_value)


def redrawn(net, shift):
    """``net`` with every layer that draws (:attr:`Network.draws`: losses, sleep, random delays, a compression's
    random choices, noise) seeded ``seed + shift`` (wrapped to the seeds' range): the same network model, on draws
    of its own. ``net`` itself where no layer draws (a matrix, a schedule, topk compression, a fixed delay).

    ``rowstoch compare`` runs repetition ``r`` on ``redrawn(net, r)`` (each repetition on its own draw of the
    network, one at a time) and its tuner on draws of its own; :func:`draws` says whether they differ.

    Examples
    --------
    >>> from rowstoch_fast import topology
    >>> from rowstoch_fast.network import Compressed, Lossy, redrawn
    >>> net = Compressed(Lossy(topology.ring(4), 0.1, seed=3), "topk", k=1)
    >>> redrawn(net, 5)  # topk draws nothing: its seed is kept
    Compressed(Lossy(MixingMatrix(n=4, nnz=8, dtype=float64), p=0.1, seed=8, model='bernoulli'), 'topk', k=1, seed=0)
    """
    return _shifted(network_checked(net), check_int(shift, "shift"), lambda layer: layer.draws)  # (helper 199:
    # redrawn("x", 1) had returned "x")


def draws(net):
    """Whether a layer of ``net`` draws anything from its seed (:attr:`Network.draws`): whether
    :func:`redrawn` changes it."""
    while isinstance(getattr(net, "base", None), (Network, MixingMatrix)):
        if net.draws:
            return True
        net = net.base
    return False


def _shifted(net, shift, drawn):
    """``net`` with the seeds of its layers where ``drawn(layer)`` shifted by ``shift`` (the others rebuilt over
    what they wrap, or kept where nothing under them changed)."""
    base = getattr(net, "base", None)
    if not isinstance(base, (Network, MixingMatrix)) or shift == 0:  # (a matrix, a schedule of matrices: no draws)
        return net
    inner = _shifted(base, shift, drawn)
    if inner is base and not drawn(net):
        return net
    seed = getattr(net, "seed", None)
    if drawn(net):
        seed = (int(seed) + int(shift)) % (MAX_KEY + 1)
    try:
        return net._twin(inner, seed)
    except (TypeError, NotImplementedError) as exc:  # (a user's layer, or subclass whose constructor takes other
        # arguments)
        raise TypeError(f"{type(net).__name__} cannot be drawn anew ({exc}): define its draws (False where it draws "
                        f"nothing) or _twin(base, seed) (the layer over base with another seed)") from None
