"""Time-varying and unreliable directed networks: schedules, one-peer graphs, lossy links, sleeping nodes,
compressed, noisy and late messages.

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

import importlib as _importlib
import pkgutil as _pkgutil

from .._checks import check_bool
from .._hashing import uniform_hash  # noqa: F401 (the layers' draws: tests read them here)
from .base import (LAYERS, MAX_ACTIVATION_STEPS, MAX_CHAIN_STEPS, Network, advance_two_state, as_network,  # noqa: F401
                   describe, first_difference, jump_two_state)
from ._rounds import _mix_entries  # noqa: F401
from .messages import _Messages, link_noise_block, own_and_messages  # noqa: F401
from .queries import (as_undirected, base_matrix, draws, effects_of, fixed_links, late, links_of,  # noqa: F401
                      losses_of, network_checked, out_links, redrawn, reseeded, source_matrices, source_of,
                      weights_of)
from .schedule import Schedule, one_peer_exponential  # noqa: F401

# every module of this folder is a layer (or what they share): imported here, each layer registers itself
# (Network.__init_subclass__), and every list of layers reads the registry, never a list written here
for _module in _pkgutil.iter_modules(__path__):
    _importlib.import_module(f"{__name__}.{_module.name}")
globals().update({_cls.__name__: _cls for _cls in LAYERS.values()})

__all__ = ["Network", "Schedule", "one_peer_exponential", *(cls.__name__ for cls in LAYERS.values() if cls.__name__
           != "Schedule"), "as_network", "as_undirected", "base_matrix", "fixed_links", "weights_of", "links_of",
           "out_links", "source_of", "source_matrices", "layers", "examples"]


def layers():
    """The registered layer classes in their order of composition (innermost first: the matrices' source, then
    the links' layers, then the message layers, outermost), read from the registry.

    Examples
    --------
    >>> from rowstoch_fast import network
    >>> [cls.__name__ for cls in network.layers()][:3]  # (the message layers, Compressed among them, after)
    ['Schedule', 'Lossy', 'Sleepy']
    """
    return sorted(LAYERS.values(), key=lambda cls: (cls.order, cls.__name__))


def examples(base, compositions=True):
    """``{label: network}``: every registered layer's :meth:`~Network.examples` over ``base`` (a static matrix),
    and with ``compositions`` every pair of them in composition order (each of the inner layer's examples under
    each of the outer's: ``"lossy/qsgd"`` is ``Compressed(Lossy(base, ...), ...)``). What the registry tests run,
    so that a new layer is tested wherever they are read.

    Examples
    --------
    >>> from rowstoch_fast import network, topology
    >>> nets = network.examples(topology.ring(6))
    >>> nets["lossy"], "sleepy/qsgd" in nets
    (Lossy(MixingMatrix(n=6, nnz=12, dtype=float64), p=0.3, seed=1, model='bernoulli'), True)
    """
    out = {}
    ordered = layers()
    for cls in ordered:
        own = cls.examples(base)
        taken = sorted(set(own) & set(out))
        if taken:  # (one label, one network: a second layer's would replace the first's in every test reading them)
            raise ValueError(f"{cls.__name__}.examples labels {', '.join(map(repr, taken))}, which another layer's "
                             "examples use already; give them labels of their own")
        out.update(own)
    if check_bool(compositions, "compositions"):
        for k, inner in enumerate(ordered):
            for inner_label, inner_net in inner.examples(base).items():
                for outer in ordered[k + 1:]:
                    for label, net in outer.examples(inner_net).items():
                        out[f"{inner_label}/{label}"] = net
    return out
