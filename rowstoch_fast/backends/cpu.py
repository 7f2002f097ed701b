"""CPU backend: every node's rows in host memory, the compiled C++ kernels (OpenMP) for mixing and updates."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._checks import as_float_array
from ..mixing import MixingMatrix
from ..tracker import DiagTracker, NetworkTracker
from .base import Backend, _drawn_in_sweep

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
        """:meth:`Backend.running_sums` in one compiled sweep over the links for all of ``blocks``
        (``rowstoch/links.hpp``): a receiver takes the delivered shares plus the mass that waited on the links
        whose message arrived, and only the links whose message was lost keep anything. The same values as the
        generic operations up to the order of two sums (rounding; bit for bit those of the two CSR passes this
        replaced), identical on every partition of the nodes.

        Where the links keep nothing but what was lost (no delays, no noise on the links) the mass is held only by
        the links that hold any (:class:`_LinkMass`: their ids and rows, in link order; the dense blocks the
        algorithm allocated stay untouched, :meth:`gather_links` writes them out), so that a round reads those
        rows and writes the lost links' rows as two streams (``_core.running_sums_compact``). Otherwise (and under
        MPI, whose checkpoints read the dense blocks) the dense blocks are kept exact and the sweep touches a row
        only where it holds or gets mass (``_core.running_sums``, flags per link). Either way a round costs about
        one mix plus the lost links' rows, never a pass over the whole block; Bernoulli losses right over the
        matrix are drawn by the compact sweep itself (the draws of ``Lossy.arrived``). Compressed messages: the
        sweep reads ``[own rows; messages]`` (a self loop its own row); delays and noise as the generic ones (their
        late mass added after the sweep)."""
        links = self._link_arrays(C)
        indptr, indices, row_ids, col_ids = links["host"]
        compact = self._keeps_links_compact() and not _late_links(net)
        draw = _drawn_in_sweep(net, t, r) if compact and row_ids is None else None
        if draw is None:
            deliver = self._delivered(links, net, t, r)
        else:  # (Bernoulli losses over the matrix: drawn by the sweep itself, into a buffer kept for them)
            deliver = links.get("arrived")
            if deliver is None:
                deliver = links["arrived"] = np.empty(links["nnz"], dtype=bool)
        data, awake = self._link_weights(C, links, net, t)
        widths = [src.shape[1] for src, _, _, _ in blocks]
        quantities, late_args = [], []
        for k, (src, out, pending, pending_out) in enumerate(blocks):
            state = self.channel(net)  # (each block a quantity of its own: its draws, its history)
            ext, index = self._link_source(C, src), indices
            msg = self._link_message(net, src, t, state)
            if msg is not None:  # [own rows; messages] (the halo block is shared: each half copied out of it)
                stacked = self._link_work((2 * ext.shape[0], ext.shape[1]), k)
                stacked[:len(ext)] = ext
                stacked[len(ext):] = self._link_source(C, msg)
                if "own_and_messages" not in links:
                    from ..network import own_and_messages

                    links["own_and_messages"] = own_and_messages(indptr, indices, row_ids, col_ids, len(ext))
                ext, index = stacked, links["own_and_messages"]
            elif ext is not src and widths[k] in widths[k + 1:]:  # (a shared halo block the next one overwrites)
                ext = ext.copy()
            mass_in, mass_out = self._link_mass(pending), self._link_mass(pending_out)
            if compact:
                ids, rows = mass_in.compact(pending)
                new_ids, new_rows = mass_out.room(pending_out)
                quantities.append((ext, out, ids, rows, new_ids, new_rows))
            else:
                quantities.append((ext, out, pending, pending_out, mass_in.dense(pending), mass_out.dense(pending_out)))
            late_args.append((msg, state, out, pending_out, mass_out))
        sweep_indptr = indptr
        if index.dtype != indptr.dtype:  # (the sweep reads one index type: both as int64, converted once)
            wide = links.get("wide")
            if wide is None or wide[0] is not index:
                wide = links["wide"] = (index, indptr.astype(np.int64), index.astype(np.int64))
            sweep_indptr, index = wide[1], wide[2]
        ncols = quantities[0][0].shape[0]
        if compact:
            held = _core.running_sums_compact(sweep_indptr, index, data, deliver, quantities, check_indices=False,
                                              ncols=ncols, draw=draw)
            for _, _, _, _, mass_out in late_args:
                mass_out.wrote_compact(held)
            return
        for *_, mass_out in late_args:  # (before the sweep writes: a failure leaves the flags conservative)
            mass_out.writes_dense()
        _core.running_sums(sweep_indptr, index, data, deliver, quantities, check_indices=False, ncols=ncols)
        for msg, state, out, pending_out, mass_out in late_args:
            late = None if msg is None else self._late_mass(links, net, t, r, deliver, msg, data, awake, state)
            if late is not None:  # (a delayed or noisy link keeps part of what arrived)
                mass_out.held[...] = 1  # (any link may now hold mass)
                every = links.get("every")
                if every is None:
                    every = links["every"] = np.arange(links["nnz"], dtype=np.int64)
                ones = links.get("ones")
                if ones is None:
                    ones = links["ones"] = np.ones(links["nnz"], dtype=self.dtype)
                extra = self._link_work(out.shape, "late")
                _core.mix(indptr, every, ones, late, extra, check_indices=False, ncols=links["nnz"])
                out -= extra
                pending_out += late

    def _keeps_links_compact(self):
        """Whether the per-link mass may live in :class:`_LinkMass`' compact form between rounds: where this
        class's :meth:`gather_links` writes checkpoints (a subclass that reads the dense blocks itself, the MPI
        backend, keeps them exact)."""
        cls = type(self)
        return cls.gather_links is CpuBackend.gather_links and cls.link_zeros is CpuBackend.link_zeros

    def _link_mass(self, block):
        """The :class:`_LinkMass` of the per-link block ``block`` (kept between calls, known by the block's
        identity: a block this backend has not seen is read as it is; so a block written other than by a round
        must be a new array: the algorithms' ``_load_extra`` put a loaded state into new blocks)."""
        return self._per_block("_link_masses", block, lambda: _LinkMass(block.shape[0]))

    def flush_links(self):
        """Write each per-link block's mass out of its compact form into the block itself, and forget the forms
        kept between rounds (the next round reads the blocks as they are: :meth:`_link_mass`): before an optimizer
        is copied or pickled, whose copy then holds the mass in its blocks (a weak reference cannot be copied)."""
        cache = self.__dict__.pop("_link_masses", None)
        for ref, mass in (cache or {}).values():
            block = ref()
            if block is not None:
                mass.dense(block)  # (writes the compact form out where it is the one up to date)

    def __getstate__(self):
        self.flush_links()
        state = dict(self.__dict__)
        state.pop("_link_work_blocks", None)  # (scratch)
        return state

    def link_zeros(self, C, width):
        """A zero block of one row per stored entry of ``C`` (per-link state), known to :meth:`running_sums` to
        hold nothing (its pages are not touched while the mass is kept compact)."""
        block = np.zeros((self._link_arrays(C)["nnz"], width), dtype=self.dtype)
        mass = self._link_mass(block)
        mass.held, mass.m = np.zeros(block.shape[0], dtype=np.uint8), 0
        return block

    def gather_links(self, C, block):
        """A per-link block in the order of ``C``'s stored entries, as a new host array (the mass the links hold,
        written out of its compact form where :meth:`running_sums` keeps it so)."""
        entry = self.__dict__.get("_link_masses", {}).get(id(block))
        if entry is not None and entry[0]() is block and not entry[1].dense_valid:
            return entry[1].written_out(block)
        return np.array(block)

    def _link_work(self, shape, slot=0):
        """A work block of ``shape`` (kept between calls; ``slot``: another block of the same shape)."""
        cache = self.__dict__.setdefault("_link_work_blocks", {})
        if (shape, slot) not in cache:
            cache[shape, slot] = np.empty(shape, dtype=self.dtype)
        return cache[shape, slot]

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

    def take_samples(self, table, idx, out):
        """:meth:`Backend.take_samples` in one compiled pass (``_core.sample_rows``: whole rows copied on the
        kernels' threads; NumPy's ``take`` and fancy assignment were half of LT-ADMM-VR's step at 2^16 nodes)."""
        if not self._sample_rows(table, idx, out, put=False):
            super().take_samples(table, idx, out)

    def put_samples(self, table, idx, values):
        """:meth:`Backend.put_samples` in one compiled pass (see :meth:`take_samples`)."""
        if not self._sample_rows(table, idx, values, put=True):
            super().put_samples(table, idx, values)

    @staticmethod
    def _sample_rows(table, idx, block, put):
        """The compiled copy where the blocks allow it (C-contiguous, one dtype); False: NumPy's instead."""
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu":  # (floats and the rest: NumPy's path, which refuses them)
            return False
        if idx.dtype not in (np.int64, np.int32):
            idx = idx.astype(np.int64)
        if not (type(table) is np.ndarray and type(block) is np.ndarray and table.flags.c_contiguous
                and block.flags.c_contiguous and block.dtype == table.dtype and table.dtype.isnative):
            return False
        _core.sample_rows(table, np.ascontiguousarray(idx), block, put)
        return True

    # ------------------------------------------------------------------ reductions and results
    def first_nonfinite(self, *blocks):
        """The smallest node id with a NaN/Inf in any of ``blocks`` (over all processes), or -1."""
        if len(blocks) == 1:
            return _core.first_nonfinite(blocks[0])
        rows = [r for r in (_core.first_nonfinite(b) for b in blocks) if r >= 0]
        return min(rows) if rows else -1

    #: Blocks already hold every node in host memory: gathering may hand out a view (``copy=False``).
    gathers_in_place = True
    keeps_blocks = True

    def gather(self, block, copy=True):
        """The full ``(n, w)`` block as a host array on the root process (None on the others); ``copy=False``
        may return a read-only view of ``block``."""
        if copy:
            return np.array(block)
        view = block.view()
        view.flags.writeable = False
        return view


def _late_links(net):
    """Whether the links of ``net`` keep part of what arrived (a delayed layer, or noise on the links): the
    running sums then hold mass on links whose message arrived."""
    if not hasattr(net, "encode"):
        return False
    return net.delayed() is not None or any(not layer.silent for layer in net.noisy_links())


class _LinkMass:
    """The mass a per-link block holds, in the forms :meth:`CpuBackend.running_sums` keeps between rounds: the dense
    block itself (``dense_valid``; ``held``: which of its rows may be non-zero, None where unknown) and/or the
    compact form (``m`` links hold mass: ``ids[:m]``, increasing, and their rows ``rows[:m]``; None where unknown).
    At least one form is up to date; the other is rebuilt from it when a round needs it (once, when a run changes
    form: never in a run that keeps one)."""

    __slots__ = ("nnz", "dense_valid", "held", "m", "ids", "rows")

    def __init__(self, nnz):
        self.nnz, self.dense_valid, self.held, self.m, self.ids, self.rows = nnz, True, None, None, None, None

    def _storage(self, block):
        if self.ids is None or self.rows.shape[1] != block.shape[1]:
            self.ids = np.empty(self.nnz, dtype=np.int64)  # (room for every link; pages touched as used)
            self.rows = np.empty((self.nnz, block.shape[1]), dtype=block.dtype)
        return self.ids, self.rows

    def compact(self, block):
        """``(ids, rows)``: the links holding mass and their rows (read by a round), from the dense block if the
        compact form is not up to date (the rows with any non-zero bit)."""
        ids, rows = self._storage(block)
        if self.m is None:
            bits = block.view(np.uint64 if block.dtype.itemsize == 8 else np.uint32)
            found = np.flatnonzero((bits != 0).any(axis=1))
            self.m = len(found)
            ids[:self.m] = found
            rows[:self.m] = block[found]
        return ids[:self.m], rows[:self.m]

    def room(self, block):
        """``(ids, rows)`` with room for every link, for a round to write this block's new mass into."""
        self.m = None  # (written now: until wrote_compact, neither form is known)
        self.dense_valid, self.held = False, None
        return self._storage(block)

    def wrote_compact(self, m):
        self.m = int(m)

    def dense(self, block):
        """The dense block's flags (which rows may hold mass), after writing the compact form out into it if that
        is the one up to date."""
        if not self.dense_valid:
            block[...] = 0
            held = np.zeros(self.nnz, dtype=np.uint8)
            if self.m:
                block[self.ids[:self.m]] = self.rows[:self.m]
                held[self.ids[:self.m]] = 1
            self.dense_valid, self.held = True, held
        if self.held is None:
            self.held = np.ones(self.nnz, dtype=np.uint8)
        return self.held

    def writes_dense(self):
        """A round is about to write the dense block (its flags brought up to date by the sweep)."""
        if self.held is None:
            self.held = np.ones(self.nnz, dtype=np.uint8)
        self.dense_valid, self.m = True, None

    def written_out(self, block):
        """The dense block's values as a new array (from the compact form)."""
        full = np.zeros(block.shape, dtype=block.dtype)
        full[self.ids[:self.m]] = self.rows[:self.m]
        return full
