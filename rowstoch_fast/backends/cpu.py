"""CPU backend: every node's rows in host memory, the compiled C++ kernels (OpenMP) for mixing and updates."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._checks import as_float_array
from ..mixing import MixingMatrix
from ..tracker import DiagTracker, NetworkTracker
from .base import Backend

__all__ = ["CpuBackend"]


class CpuBackend(Backend):
    """The operations the algorithms use, on NumPy blocks of shape ``(rows, w)`` (node-major, C order).

    Here ``rows = n`` (every node). The MPI backend derives from this class
    and keeps one rank's rows; the CuPy backend offers the same methods on
    device arrays. Blocks are allocated by :meth:`zeros` and never
    reallocated, so no step allocates.
    """

    name = "cpu"

    def check_x0(self, x0, dtype):
        """``x0`` as a C-contiguous host array of ``dtype`` (finite; any shape, checked by the caller)."""
        return as_float_array(x0, "x0", dtype, ndim=(1, 2, 3))

    def local(self, full):
        """This process's rows of a host array whose axis 0 runs over all ``n`` nodes."""
        return np.ascontiguousarray(full, dtype=self.dtype)

    def user_array(self, G, name):
        """What ``grad_fn`` returned, as an array of this backend (host: ``np.asarray``)."""
        return np.asarray(G)

    def user_view(self, view):
        """A view handed to user code (read-only on the host)."""
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ network
    #: The iteration the optimizer is at (a time-varying network's matrices depend on it).
    t = 0

    def mix(self, M, src, out, rounds=1, work=None):
        """``out <- M^rounds src`` (``work``: a second buffer when ``rounds > 1``); a time-varying network
        (:mod:`rowstoch_fast.network`) applies the rounds of iteration :attr:`t`."""
        if not isinstance(M, MixingMatrix):
            if hasattr(M, "encode"):  # compressed, noisy or delayed messages: models of d values, histories
                return M.mix(src, self.t, rounds, out=out, d=self.message_d, state=self.channel(M))
            return M.mix(src, self.t, rounds, out=out)
        c = M.csr
        if rounds == 1:
            _core.mix(c.indptr, c.indices, c.data, src, out, check_indices=False)
        else:
            _core.mix_power(c.indptr, c.indices, c.data, src, rounds, out, work, check_indices=False)
        return out

    def gt_y_phase(self, A, rounds, lr, x, y, g_new, g_old, s_new, s_old, y_out, xw, psi, work):
        """Fused Pull-Diag-GT y phase: ``y_out <- A^R (y + s_new g_new - s_old g_old)`` and
        ``xw <- x - lr y_out`` in the last pass; False when ``xw`` has a NaN or Inf."""
        c = A.csr
        return _core.gt_y_phase(c.indptr, c.indices, c.data, rounds, lr, x, y, g_new, g_old, s_new, s_old,
                                y_out, xw, psi, work, check_indices=False)

    def running_sums(self, C, net, t, r, blocks):
        """:meth:`Backend.running_sums` through the compiled CSR pass: a receiver takes the delivered shares
        (a mix with the lost weights zeroed) plus the delivered undelivered mass (a mix over the links), and
        only the links whose message was lost keep anything. The same values as the generic operations up to
        the order of two sums (rounding), identical on every partition of the nodes. Compressed messages: the
        pass reads ``[own rows; messages]`` (a self loop its own row); delays and noise as the generic ones."""
        links = self._link_arrays(C)
        indptr, indices, row_ids, col_ids = links["host"]
        deliver = self._delivered(links, net, t, r)
        data, awake = self._link_weights(C, links, net, t)
        taken = np.ascontiguousarray(data * deliver)
        delivered = deliver.astype(self.dtype)
        kept = np.flatnonzero(~deliver)
        every = links.setdefault("every", np.arange(links["nnz"], dtype=np.int64))
        for src, out, pending, pending_out in blocks:
            state = self.channel(net)  # (each block a quantity of its own: its draws, its history)
            ext, index = self._link_source(C, src), indices
            msg = self._link_message(net, src, t, state)
            if msg is not None:  # [own rows; messages] (the halo block is shared: each half copied out of it)
                stacked = self._link_work((2 * ext.shape[0], ext.shape[1]))
                stacked[:len(ext)] = ext
                stacked[len(ext):] = self._link_source(C, msg)
                if "own_and_messages" not in links:
                    from ..network import own_and_messages

                    links["own_and_messages"] = own_and_messages(indptr, indices, row_ids, col_ids, len(ext))
                ext, index = stacked, links["own_and_messages"]
            _core.mix(indptr, index, taken, ext, out, check_indices=False, ncols=ext.shape[0])  # shares taken
            extra = self._link_work(out.shape)
            _core.mix(indptr, every, delivered, pending, extra, check_indices=False, ncols=links["nnz"])
            out += extra  # ... and the mass that waited on the links
            pending_out[...] = 0
            if kept.size:  # what stays: the lost messages' links, their old mass and this round's share
                pending_out[kept] = pending[kept] + data[kept, None] * ext[index[kept]]
            late = None if msg is None else self._late_mass(links, net, t, r, deliver, msg, data, awake, state)
            if late is not None:  # (a delayed or noisy link keeps part of what arrived)
                ones = links.setdefault("ones", np.ones(links["nnz"], dtype=self.dtype))
                _core.mix(indptr, every, ones, late, extra, check_indices=False, ncols=links["nnz"])
                out -= extra
                pending_out += late

    def _link_work(self, shape):
        """A work block of ``shape`` (kept between calls)."""
        cache = self.__dict__.setdefault("_link_work_blocks", {})
        if shape not in cache:
            cache[shape] = np.empty(shape, dtype=self.dtype)
        return cache[shape]

    def tracker(self, A, rounds, kind):
        """The diagonal tracker ``Diag(A^(tR))^-1`` (``.scale(t)``: this process's rows); on a time-varying
        network ``Diag(A_{t-1} ... A_0)^-1``."""
        if not isinstance(A, MixingMatrix):
            return NetworkTracker(A, rounds, kind)
        return DiagTracker(A, rounds, kind)

    # ------------------------------------------------------------------ element-wise
    def combine(self, out, coefs, blocks, check=True):
        """``out <- sum_t coefs[t] * blocks[t]`` (a coefficient is a float or a per-row vector of this backend;
        a block may be ``out`` itself). Returns False when ``out`` has a NaN or Inf (``check=False``: the
        caller ignores the result, and a backend that flags NaN/Inf on the device does not flag it)."""
        return _core.combine(out, coefs, blocks)

    def borrows(self, block):
        """A host array of the blocks' dtype, C-contiguous: the kernels read it where it is (one pass less
        than copying it first; its NaN/Inf check is the same compiled scan)."""
        return type(block) is np.ndarray and block.dtype == self.dtype and block.flags.c_contiguous

    def copy_in(self, out, values):
        """``out[...] = values`` (any array of out's shape); False when ``out`` then has a NaN or Inf.

        (A NumPy copy and then the compiled check: measured faster than one fused pass of ``combine``.)
        """
        out[...] = values
        return _core.first_nonfinite(out) < 0

    def is_finite(self, block):
        return _core.first_nonfinite(block) < 0

    # ------------------------------------------------------------------ reductions and results
    def first_nonfinite(self, *blocks):
        """The smallest node id with a NaN/Inf in any of ``blocks`` (over all processes), or -1."""
        if len(blocks) == 1:
            return _core.first_nonfinite(blocks[0])
        rows = [r for r in (_core.first_nonfinite(b) for b in blocks) if r >= 0]
        return min(rows) if rows else -1

    #: Blocks already hold every node in host memory: gathering may hand out a view (``copy=False``).
    gathers_in_place = True

    def gather(self, block, copy=True):
        """The full ``(n, w)`` block as a host array on the root process (None on the others); ``copy=False``
        may return a read-only view of ``block``."""
        if copy:
            return np.array(block)
        view = block.view()
        view.flags.writeable = False
        return view
