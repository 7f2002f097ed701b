"""The messages of a delayed network still in flight: one quantity's last ``D + 1`` iterations (a leaf module,
NumPy only: :class:`rowstoch_fast.network.Delayed` fills it, the backends keep and save one per quantity mixed)."""

from __future__ import annotations

import numpy as np

__all__ = ["History"]


class History:
    """One mixed quantity's messages of the last ``D + 1`` iterations (``rounds`` each), after ``n_own`` rows of
    own values: the stacked block a delayed round reads (:class:`Delayed`). The messages are node by node (a
    node's ``(D + 1) rounds`` slots side by side: a round's gathers stay as local as the static mix's), the
    message of iteration ``s`` and round ``r`` in slot ``(s mod (D + 1)) rounds + r``; ``order="iteration"``
    keeps them slot by slot instead (a fixed delay's links all read one contiguous block: its gathers as local as the
    static mix's). ``xp``: the array module of the buffer (NumPy, or CuPy for the device backend)."""

    def __init__(self, n_own, n_block, width, max_delay, rounds, dtype, xp=np, order="node"):
        if order not in ("node", "iteration"):
            raise ValueError(f"order must be 'node' or 'iteration', got {order!r}")
        self.n_own, self.n_block, self.D, self.rounds, self.order = n_own, n_block, max_delay, rounds, order
        self.buffer = xp.zeros((n_own + (max_delay + 1) * rounds * n_block, width), dtype=dtype)
        self.last = None  # the last iteration whose messages are in
        self.fresh = True

    def slots(self):
        """The messages as ``(node, iteration slot, round, value)`` (a view, whatever the order in memory)."""
        blocks = self.buffer[self.n_own:]
        if self.order == "node":
            return blocks.reshape(self.n_block, self.D + 1, self.rounds, -1)
        return blocks.reshape(self.D + 1, self.rounds, self.n_block, -1).transpose(2, 0, 1, 3)

    def layout(self):
        """``(n_own, n_block, rounds, node_major)``: what ``_core.delay_ages`` takes to index this block."""
        return self.n_own, self.n_block, self.rounds, self.order == "node"

    def start(self, t):
        """Before iteration ``t``'s messages go in: without those of ``t - 1`` (a fresh ring, or iterations out of
        order) every slot will hold ``t``'s (the initial message counts as known)."""
        self.fresh = self.fresh or self.last is None or t not in (self.last, self.last + 1)

    def put(self, t, r, messages, rows=slice(None)):
        """Round ``r``'s messages of iteration ``t`` (of the nodes ``rows``); a fresh ring gets them in every
        iteration slot of that round."""
        slots = self.slots()
        if self.fresh:
            slots[rows, :, r] = messages[:, None]
            return
        if isinstance(rows, slice):  # (the compiled copy, rows in parallel: NumPy copies a block of short
            # strided rows on one thread, a row at a time; bench/RESULTS.md sections 36, 66)
            copy_rows(messages, slots[rows, t % (self.D + 1), r])
            return
        slots[rows, t % (self.D + 1), r] = messages

    def done(self, t):
        self.last, self.fresh = t, False


def copy_rows(src, dst):
    """``dst[...] = src``: the compiled copy, rows in parallel (``_core.copy_rows``), where both are 2-D NumPy blocks of
    one shape and dtype whose rows are contiguous (:func:`_as_rows`) and that do not overlap (a delayed round's own
    rows and messages, 21 MB each at n = 2^18, d = 10); else NumPy's (another array module, layout or shape)."""
    dtype = getattr(src, "dtype", None)
    if getattr(src, "shape", None) == dst.shape and dtype == dst.dtype and dtype.isnative and not dtype.hasobject \
            and _as_rows(src) is not None and _as_rows(dst) is not None and not np.may_share_memory(src, dst):
        from . import _core

        _core.copy_rows(src, dst)
    else:
        dst[...] = src


def _as_rows(block):
    """A 2-D NumPy block whose rows are contiguous as a 1-D array of one opaque element per row (their bytes), else
    None (another array module, another shape or layout)."""
    if type(block) is not np.ndarray or block.ndim != 2 or block.strides[1] != block.itemsize or block.shape[1] == 0:
        return None
    try:
        return block.view(np.dtype((np.void, block.shape[1] * block.itemsize)))[:, 0]
    except (ValueError, TypeError):  # NumPy < 1.23 changes the item size of C-contiguous arrays only (a strided
        # block: None); Python objects are not viewed as bytes
        return None
