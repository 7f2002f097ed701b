"""Counter-based hashing: the keys every random draw of :mod:`rowstoch_fast.network` (losses, sleep,
Gilbert-Elliott transitions) is computed from, on every backend (a leaf module: it imports only NumPy).

A draw is a pure function of integer keys (``seed, t, r, i, j``): ``splitmix64``'s finaliser chained over them,
so that a process, a rank or a GPU thread that owns a message draws it without drawing any other.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["uniform_hash", "loss_threshold", "hash_prefix", "round_key", "content_round", "MAX_T", "QUANTITY_ROUNDS"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix64(z):
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


_MASK = (1 << 64) - 1
_START = 0x243F6A8885A308D3


def _mix64_int(z):
    """:func:`_mix64` of one key as a Python int in 0..2^64 - 1 (the same bits, without NumPy's per-call cost)."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _chain(*keys):
    """``mix64`` chained over integer keys (scalars or arrays, broadcast), as uint64. The leading integer scalars
    (a seed, an iteration) are chained as Python ints, the rest as arrays: the same bits as chaining every key as
    a uint64 array (a key wraps modulo 2^64, as NumPy's cast does)."""
    h, k = _START, 0
    while k < len(keys) and isinstance(keys[k], (int, np.integer)) and not isinstance(keys[k], (bool, np.bool_)):
        h = _mix64_int(h ^ (int(keys[k]) & _MASK))
        k += 1
    h = np.uint64(h)
    with np.errstate(over="ignore"):
        for key in keys[k:]:
            h = _mix64(np.asarray(h, dtype=np.uint64) ^ np.asarray(key).astype(np.uint64))
    return h


def uniform_hash(*keys):
    """Uniform numbers in [0, 1) from integer keys (scalars or arrays, broadcast): ``mix64`` chained over the
    keys, the top 53 bits as a double. The counter-based draws of every network of this module."""
    return (_chain(*keys) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


#: The last iteration a network draws for: below 2^60 the loss draws (keys seed, t, r), the sleep draws
#: (seed, 2^60 + t) and the Gilbert-Elliott transitions (seed, 2^61 + s; 2^62 to start) never share a key.
MAX_T = 2**60 - 1


def loss_threshold(p):
    """The integer a draw's top 53 bits are compared with for probability ``p`` (``ceil(p 2^53)``, network.hpp's
    ``loss_threshold``): a message is lost when its bits are below it."""
    return math.ceil(p * 2.0**53)


def hash_prefix(*keys):
    """The part of :func:`uniform_hash`'s chain over the leading integer ``keys`` (a draw continues it with its
    own keys), as a Python int: what a compiled draw takes (``round_key`` is that of ``(seed, t, r)``)."""
    return int(_chain(*keys))


def round_key(seed, t, r):
    """The part of :func:`uniform_hash`'s chain shared by every message of round ``r`` of iteration ``t``
    (``uniform_hash(seed, t, r, i, j)`` continues it with ``i`` and ``j``); the GPU kernel takes it."""
    return int(_chain(seed, t, r))


#: Rounds of one quantity's content draws apart from the next quantity's (``content_round``).
QUANTITY_ROUNDS = 2**32


def content_round(r, state=None):
    """The round whose keys draw the compression and noise of round ``r`` of the quantity ``state`` holds
    (``state["quantity"] = q``, the ``q``-th quantity mixed in the optimizer's iteration: a backend's
    ``channel``): ``r + q 2^32``, so that two quantities mixed in one iteration get independent draws (losses,
    sleep and delays stay keyed on ``r``: they hit every quantity of a round alike); ``r`` without a state."""
    q = state.get("quantity", 0) if state else 0
    return (r + q * QUANTITY_ROUNDS) % 2**64  # (a 64-bit key whatever the counts)
