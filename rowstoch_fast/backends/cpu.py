"""CPU backend: every node's rows in host memory, the compiled C++ kernels (OpenMP) for mixing and updates."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._checks import as_float_array
from ..tracker import DiagTracker

__all__ = ["CpuBackend"]


class CpuBackend:
    """The operations the algorithms use, on NumPy blocks of shape ``(rows, w)`` (node-major, C order).

    Here ``rows = n`` (every node). The MPI backend derives from this class
    and keeps one rank's rows; the CuPy backend offers the same methods on
    device arrays. Blocks are allocated by :meth:`zeros` and never
    reallocated, so no step allocates.
    """

    name = "cpu"
    xp = np
    is_root = True

    def __init__(self, **options):
        if options:
            raise TypeError(f"backend 'cpu' takes no option {', '.join(map(repr, sorted(options)))} "
                            "(comm and partition are options of backend='mpi')")

    #: Halo messages and bytes this process has sent (only the MPI backend sends any).
    messages = 0
    bytes_sent = 0

    # ------------------------------------------------------------------ set-up
    def call(self, fn, *args):
        """Run ``fn(*args)`` (under MPI: on every rank, raising on all if it raises on one)."""
        return fn(*args)

    def check_x0(self, x0, dtype):
        """``x0`` as a C-contiguous host array of ``dtype`` (finite; any shape, checked by the caller)."""
        return as_float_array(x0, "x0", dtype, ndim=(1, 2, 3))

    def attach(self, n, dtype, matrices):
        """Prepare for these :class:`MixingMatrix` objects (on ``n`` nodes) and value type."""
        self.n = n
        self.dtype = np.dtype(dtype)
        self.rows = self.n
        self.local_nodes = None  # all nodes, in order

    def zeros(self, width):
        """A zero block of ``(rows, width)`` values."""
        return np.zeros((self.rows, width), dtype=self.dtype)

    def local(self, full):
        """This process's rows of a host array whose axis -2 (or only axis) runs over all ``n`` nodes."""
        return np.ascontiguousarray(full, dtype=self.dtype)

    def user_array(self, G, name):
        """What ``grad_fn`` returned, as an array of this backend (host: ``np.asarray``)."""
        return np.asarray(G)

    def user_view(self, view):
        """A view handed to user code (read-only on the host)."""
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ network
    def mix(self, M, src, out, rounds=1, work=None):
        """``out <- M^rounds src`` (``work``: a second buffer when ``rounds > 1``)."""
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

    def tracker(self, A, rounds, kind):
        """The diagonal tracker ``Diag(A^(tR))^-1`` (``.scale(t)``: this process's rows)."""
        return DiagTracker(A, rounds, kind)

    # ------------------------------------------------------------------ element-wise
    def combine(self, out, coefs, blocks):
        """``out <- sum_t coefs[t] * blocks[t]`` (a coefficient is a float or a per-row vector of this backend;
        a block may be ``out`` itself). Returns False when ``out`` has a NaN or Inf."""
        return _core.combine(out, coefs, blocks)

    def copy_in(self, out, values):
        """``out[...] = values`` (any array of out's shape); False when ``out`` then has a NaN or Inf.
        One pass when ``values`` is already a C-contiguous block of out's dtype."""
        if (type(values) is np.ndarray and values.dtype == out.dtype and values.flags.c_contiguous
                and values.flags.aligned and values.shape == out.shape and not np.may_share_memory(values, out)):
            return _core.combine(out, [1.0], [values])  # 1 * v == v exactly (NaN and Inf included)
        out[...] = values
        return _core.first_nonfinite(out) < 0

    def vector(self, values):
        """A per-row coefficient vector (this process's rows of a length-``n`` host vector)."""
        return np.ascontiguousarray(values, dtype=self.dtype)

    # ------------------------------------------------------------------ reductions
    def first_nonfinite(self, *blocks):
        """The smallest node id with a NaN/Inf in any of ``blocks`` (over all processes), or -1."""
        if len(blocks) == 1:
            return _core.first_nonfinite(blocks[0])
        rows = [r for r in (_core.first_nonfinite(b) for b in blocks) if r >= 0]
        return min(rows) if rows else -1

    def all_true(self, flag):
        """``flag`` on every process (under MPI: the logical and of all ranks' flags)."""
        return bool(flag)

    def weighted_sum(self, weights, block):
        """``weights^T block`` over all nodes (``weights``: this process's rows), shape (w,)."""
        return weights @ block

    def sum_rows(self, block):
        """``1^T block`` over all nodes, shape (w,)."""
        return block.sum(axis=0)

    # ------------------------------------------------------------------ results
    def gather(self, block):
        """The full ``(n, w)`` block as a host array on the root process (None on the others)."""
        return np.array(block)

    def gather_objects(self, obj):
        """``[obj]`` of every process, in rank order, on the root (None on the others)."""
        return [obj]
