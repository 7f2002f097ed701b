"""MPI backend: (MG-)Pull-Diag-GT with the network's nodes partitioned over MPI ranks.

Each rank owns a set of nodes (its rows of ``A``, ``x``, ``y``, ``g`` and of the
exact tracker). One communication round is one halo exchange of the rows that
cross the partition, with MPI neighbourhood collectives on a distributed graph
communicator (``Create_dist_graph_adjacent`` + ``Neighbor_alltoallv``),
followed by the compiled CSR kernel on the rank's rows. ``mpi4py`` is imported
only when this backend is used (importing it starts MPI).

Every collective decision (bad input, a failing ``grad_fn``, NaN/Inf) is
agreed on by all ranks first, so an error on one rank makes every rank raise,
never hang.
"""

from __future__ import annotations

import time

import numpy as np

from . import _core
from ._checks import as_float_array, check_int, check_positive_float, nodes_first
from .gt import DivergenceError, PullDiagGT, exclusive, matrix_from_state
from .mixing import MixingMatrix
from .tracker import DEFAULT_BLOCK, freeze_step

__all__ = ["Halo", "DistributedPullDiagGT", "RemoteError", "contiguous_partition"]


class RemoteError(RuntimeError):
    """Another rank failed; raised on the ranks that did not fail themselves."""


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("backend='mpi' needs mpi4py and an MPI library: pip install 'rowstoch_fast[mpi]'") from exc
    return MPI


def collective(comm, fn, *args, **kwargs):
    """Run ``fn`` on every rank; if it raises on any rank, raise on all (the original error where it happened)."""
    error = None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
        error, result = exc, None
    messages = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    failed = [(r, m) for r, m in enumerate(messages) if m is not None]
    if error is not None:
        raise error
    if failed:
        r, m = failed[0]
        raise RemoteError(f"rank {r} failed: {m}")
    return result


def contiguous_partition(n, size):
    """Owner rank of every node: ``size`` contiguous blocks of (almost) equal size."""
    owner = np.empty(n, dtype=np.int64)
    for r, block in enumerate(np.array_split(np.arange(n), size)):
        owner[block] = r
    return owner


class Halo:
    """A rank's share of the network and its halo-exchange plan.

    Attributes
    ----------
    local_nodes : ndarray
        Global ids of the nodes this rank owns (ascending).
    halo_nodes : ndarray
        Global ids of the remote nodes its rows of ``A`` read, grouped by owner.
    indptr, indices, data : ndarray
        This rank's rows of ``A``; column ``c < len(local_nodes)`` is a local
        node, ``c >= len(local_nodes)`` is ``halo_nodes[c - len(local_nodes)]``.
    """

    def __init__(self, A, comm, owner):
        MPI = _mpi()
        n, size, rank = A.n, comm.Get_size(), comm.Get_rank()
        self.comm = comm
        self.owner = owner
        self.local_nodes = np.flatnonzero(owner == rank).astype(np.int64)
        rows = A.csr[self.local_nodes]
        cols = np.unique(rows.indices).astype(np.int64)
        remote = cols[owner[cols] != rank]
        self.halo_nodes = np.ascontiguousarray(remote[np.lexsort((remote, owner[remote]))])
        nl, nh = len(self.local_nodes), len(self.halo_nodes)
        position = np.full(n, -1, dtype=np.int64)
        position[self.local_nodes] = np.arange(nl)
        position[self.halo_nodes] = nl + np.arange(nh)
        local = rows.tocsr()
        local.sort_indices()
        self.indptr = local.indptr.astype(np.int64)
        self.indices = position[local.indices].astype(np.int64)
        self.data = np.ascontiguousarray(local.data)
        self.ncols = nl + nh
        # who sends me what: my halo, grouped by owner
        recv_counts = np.bincount(owner[self.halo_nodes], minlength=size).astype(np.int64)
        # tell every owner which of its nodes I need; learn which of mine the others need
        send_counts = np.asarray(comm.alltoall(recv_counts.tolist()), dtype=np.int64)
        wanted = np.empty(int(send_counts.sum()), dtype=np.int64)
        comm.Alltoallv([self.halo_nodes, (recv_counts, _displs(recv_counts)), MPI.INT64_T],
                       [wanted, (send_counts, _displs(send_counts)), MPI.INT64_T])
        self.send_index = position[wanted]  # local rows to pack, grouped by destination rank
        self.sources = np.flatnonzero(recv_counts).tolist()
        self.destinations = np.flatnonzero(send_counts).tolist()
        self.recv_counts = recv_counts[self.sources]
        self.send_counts = send_counts[self.destinations]
        self.graph = comm.Create_dist_graph_adjacent(self.sources, self.destinations, reorder=False)
        self.messages = 0
        self.bytes_sent = 0
        self.comm_seconds = 0.0  # time in halo exchanges (packing included)
        self.compute_seconds = 0.0  # time in the local CSR kernel

    @property
    def n_local(self):
        """Number of nodes this rank owns."""
        return len(self.local_nodes)

    def exchange(self, ext):
        """Fill the halo rows ``ext[n_local:]`` of an ``(n_local + n_halo, w)`` block from their owners."""
        MPI = _mpi()
        w = ext.shape[1]
        send = np.ascontiguousarray(ext[self.send_index])
        recv = ext[self.n_local:]
        mtype = MPI.DOUBLE if ext.dtype == np.float64 else MPI.FLOAT
        sc, rc = self.send_counts * w, self.recv_counts * w
        self.graph.Neighbor_alltoallv([send, (sc, _displs(sc)), mtype], [recv, (rc, _displs(rc)), mtype])
        self.messages += len(self.destinations)
        self.bytes_sent += send.nbytes

    def gossip(self, ext, out, rounds):
        """``out <- (A^R z)_local`` for ``z`` whose local rows are ``ext[:n_local]`` (``ext`` is clobbered)."""
        for r in range(rounds):
            t0 = time.perf_counter()
            self.exchange(ext)
            t1 = time.perf_counter()
            _core.mix(self.indptr, self.indices, self.data, ext, out, check_indices=False, ncols=self.ncols)
            if r + 1 < rounds:
                ext[: self.n_local] = out
            self.comm_seconds += t1 - t0
            self.compute_seconds += time.perf_counter() - t1


def _share_cores(comm):
    """Unless OMP_NUM_THREADS says otherwise, split this machine's cores between the ranks on it.

    Several ranks per machine each running one OpenMP thread per core would oversubscribe the cores
    (and OpenMP's spinning threads then slow every rank down).
    """
    import os

    if os.environ.get("OMP_NUM_THREADS"):
        return
    local = comm.Split_type(_mpi().COMM_TYPE_SHARED)
    try:
        _core.set_num_threads(max(1, (os.cpu_count() or 1) // local.Get_size()))
    finally:
        local.Free()


def _displs(counts):
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else np.zeros(0, np.int64)


def distributed_diag_table(A, halo, rounds, n_records, block=DEFAULT_BLOCK):
    """``table[t, l] = [A^(t R)]_{ii}`` for this rank's nodes ``i = local_nodes[l]``, by the paper's Algorithm 1.

    Node ``i`` holds row ``i`` of ``V_k = A^k`` and gossips it: ``V_{k+1} = A V_k``
    with one halo exchange per step. Columns are advanced in blocks of
    ``block`` (every rank walks the same blocks, so the exchanges match).
    """
    nl = halo.n_local
    table = np.empty((n_records, nl))
    table[0] = 1.0
    steps = (n_records - 1) * rounds
    for j0 in range(0, A.n, block):
        b = min(block, A.n - j0)
        ext = np.zeros((halo.ncols, b))
        mine = (halo.local_nodes >= j0) & (halo.local_nodes < j0 + b)
        rows = np.flatnonzero(mine)
        ext[rows, halo.local_nodes[rows] - j0] = 1.0  # V_0 = I, my rows, columns J
        out = np.empty((nl, b))
        for k in range(1, steps + 1):
            halo.exchange(ext)
            _core.mix(halo.indptr, halo.indices, halo.data, ext, out, check_indices=False, ncols=halo.ncols)
            ext[:nl] = out
            if k % rounds == 0:
                table[k // rounds, rows] = out[rows, halo.local_nodes[rows] - j0]
    return table


class DistributedPullDiagGT(PullDiagGT):
    """:class:`PullDiagGT` on MPI: create it with ``PullDiagGT(..., backend="mpi")`` on every rank.

    ``A`` and ``x0`` are given in full on every rank; each rank keeps the rows of
    its own nodes. ``opt.x``, ``opt.y`` and ``grad_fn`` see only those rows
    (``opt.local_nodes`` holds their global ids); :meth:`gather_x` assembles the
    full iterate on rank 0.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Defaults to ``MPI.COMM_WORLD``.
    partition : array_like of int, shape (n,), optional
        Owner rank of every node (default: contiguous blocks). Every rank must
        own at least one node.

    Attributes
    ----------
    messages, bytes_sent : int
        Halo-exchange messages and bytes this rank has sent (tracker included).
    """

    def __init__(self, A, x0, lr, rounds=1, tracker="exact", backend="mpi", *, check_finite=True, comm=None,
                 partition=None):
        MPI = _mpi()
        self.comm = MPI.COMM_WORLD if comm is None else comm
        # Local checks first, agreed on by every rank; only then the collective set-up.
        A, x0, owner = collective(self.comm, self._validate, A, x0, lr, rounds, tracker, check_finite, partition)
        _share_cores(self.comm)
        self._setup_distributed(A, x0, owner)

    def _validate(self, A, x0, lr, rounds, tracker, check_finite, partition):
        """Argument checks with no communication (run on every rank, then agreed on)."""
        A = A if isinstance(A, MixingMatrix) else MixingMatrix(A)
        if A.dtype != np.float64:
            raise TypeError("backend='mpi' runs in float64; pass a float64 MixingMatrix")
        self.lr = check_positive_float(lr, "lr")
        self.rounds = check_int(rounds, "rounds", minimum=1)
        if tracker not in ("exact", "perron"):
            raise ValueError(f"tracker must be 'exact' or 'perron', got {tracker!r}")
        x0 = nodes_first(as_float_array(x0, "x0", np.float64, ndim=(1, 2, 3)), A.n)
        if x0.shape[-2] != A.n:
            raise ValueError(f"x0 has {x0.shape[-2]} nodes (rows) but A has {A.n}")
        size = self.comm.Get_size()
        if partition is None:
            if A.n < size:
                raise ValueError(f"A has {A.n} nodes but there are {size} ranks; every rank needs a node")
            owner = contiguous_partition(A.n, size)
        else:
            owner = np.asarray(partition)
            if owner.shape != (A.n,) or not np.issubdtype(owner.dtype, np.integer):
                raise ValueError(f"partition must be {A.n} integer owner ranks, got shape {owner.shape}")
            if owner.min() < 0 or owner.max() >= size:
                raise ValueError(f"partition names ranks outside 0..{size - 1}")
            empty = np.setdiff1d(np.arange(size), owner)
            if empty.size:
                raise ValueError(f"partition leaves rank {empty[0]} without nodes")
            owner = owner.astype(np.int64)
        self.check_finite = bool(check_finite)
        self._tracker_kind = tracker
        return A, x0, owner

    def _setup_distributed(self, A, x0, owner):
        self._A = A
        self._halo = Halo(A, self.comm, owner)
        self._reps_shape = x0.shape
        self._reps = x0.shape[0] if x0.ndim == 3 else 1
        self._d = x0.shape[-1]
        nl = self._halo.n_local
        self._shape = (self._reps, nl, self._d) if x0.ndim == 3 else (nl, self._d)
        pi = A.pi
        if self._tracker_kind == "perron":
            table = np.stack([np.ones(nl), pi[self._halo.local_nodes]])
        else:
            k_star = freeze_step(A.metrics().beta, float(pi.min()))
            table = distributed_diag_table(A, self._halo, self.rounds, -(-k_star // self.rounds) + 1)
        zero = self.comm.allreduce(int(np.argwhere(table <= 0)[0][0]) if (table <= 0).any() else -1, op=_mpi().MAX)
        if zero >= 0:
            t = zero
            raise ValueError(f"diag(A^{t * self.rounds}) has a zero (a node without self loop), so D_{t}^-1 of "
                             "Pull-Diag-GT is undefined; use rounds > 1 or tracker='perron'")
        self._scales = 1.0 / table
        w = self._reps * self._d
        self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt = (np.zeros((nl, w)) for _ in range(6))
        self._xw, self._xw_alt, self._psi = (np.zeros((nl, w)) for _ in range(3))
        self._ext = np.zeros((self._halo.ncols, w))
        self._pi_local = pi[self._halo.local_nodes]
        local = x0[..., self._halo.local_nodes, :]
        self._to_internal(local, self._x)
        self.iteration = 0
        self._initialized = False

    # ------------------------------------------------------------------ overrides
    @property
    def local_nodes(self):
        """Global ids of this rank's nodes (the rows of ``x``, ``y`` and of ``grad_fn``'s input)."""
        return self._halo.local_nodes

    @property
    def messages(self):
        """Halo-exchange messages this rank has sent (tracker included)."""
        return self._halo.messages

    @property
    def bytes_sent(self):
        """Bytes this rank has sent in halo exchanges (tracker included)."""
        return self._halo.bytes_sent

    @property
    def tracker(self):
        return _TrackerView(self._tracker_kind, self._scales)

    def _scale(self, t):
        return self._scales[min(t, len(self._scales) - 1)]

    def _first_bad_global(self, *bufs):
        """Smallest global id of a node with a NaN/Inf in any of ``bufs`` over all ranks (or -1)."""
        local = [int(self._halo.local_nodes[r]) for r in (_core.first_nonfinite(b) for b in bufs) if r >= 0]
        MPI = _mpi()
        found = self.comm.allreduce(min(local) if local else self.n, op=MPI.MIN)
        return -1 if found == self.n else found

    def _gradient(self, grad_fn, x_buf, out, iteration):
        collective(self.comm, PullDiagGT._gradient_local, self, grad_fn, x_buf, out)
        if self.check_finite:
            bad = self._first_bad_global(out)
            if bad >= 0:
                raise DivergenceError.gradient(iteration, bad, self.iteration)

    @exclusive
    def initialize(self, grad_fn):
        if self._initialized:
            raise RuntimeError("PullDiagGT is already initialized")
        self._gradient(grad_fn, self._x, self._g, 0)
        self._y[...] = self._g
        with np.errstate(over="ignore", invalid="ignore"):
            np.subtract(self._x, self.lr * self._y, out=self._xw)
        self._initialized = True

    @exclusive
    def step(self, grad_fn):
        if not self._initialized:
            self.initialize(grad_fn)
        t, R, nl, halo = self.iteration, self.rounds, self._halo.n_local, self._halo
        ext = self._ext
        ext[:nl] = self._xw
        halo.gossip(ext, self._x_alt, R)  # x_{t+1} = A^R (x_t - lr y_t)
        self._gradient(grad_fn, self._x_alt, self._g_alt, t + 1)
        _core.gt_tracker_input(self._y, self._g_alt, self._g, self._scale(t + 1), self._scale(t), self._psi)
        ext[:nl] = self._psi
        halo.gossip(ext, self._y_alt, R)  # y_{t+1} = A^R (y_t + D_{t+1}^-1 g_{t+1} - D_t^-1 g_t)
        finite = _core.gt_descent_input(self._x_alt, self._y_alt, self.lr, self._xw_alt)
        if self.check_finite and not self.comm.allreduce(finite, op=_mpi().LAND):
            bad = self._first_bad_global(self._x_alt, self._y_alt, self._xw_alt)
            raise DivergenceError.iterate(t + 1, bad, self.lr)
        (self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt, self._xw, self._xw_alt, self.iteration) = (
            self._x_alt, self._x, self._y_alt, self._y, self._g_alt, self._g, self._xw_alt, self._xw, t + 1)
        return self

    def centroid(self):
        """``pi^T x`` over all ranks (every rank gets it)."""
        local = self._pi_local @ self._x
        total = np.empty_like(local)
        self.comm.Allreduce(local, total, op=_mpi().SUM)
        return total.reshape(self._reps, self._d) if len(self._reps_shape) == 3 else total

    def _gather(self, buf):
        parts = self.comm.gather((self._halo.local_nodes, np.asarray(self._user_view(buf))), root=0)
        if self.comm.Get_rank() != 0:
            return None
        full_shape = self._reps_shape[:-2] + (self.n, self._d)
        full = np.empty(full_shape)
        for nodes, block in parts:
            full[..., nodes, :] = block
        return full

    def gather_x(self):
        """The full ``x`` (shape of ``x0``) on rank 0; ``None`` on the other ranks."""
        return self._gather(self._x)

    def gather_y(self):
        """The full ``y`` on rank 0; ``None`` on the other ranks."""
        return self._gather(self._y)

    def gather(self, array):
        """Assemble a per-rank array of local rows (shape of ``opt.x``) into the full one on rank 0."""
        buf = np.zeros_like(self._x)
        self._to_internal(np.asarray(array), buf)
        return self._gather(buf)

    def _gather_internal(self, buf):
        """Gather a node-major block into the full node-major (n, reps*d) array on rank 0."""
        full = self._gather(buf)
        if full is None:
            return None
        return np.ascontiguousarray(full.swapaxes(0, 1).reshape(self.n, -1)) if full.ndim == 3 else full

    @exclusive
    def state_dict(self):
        """Collective: the single-process :meth:`PullDiagGT.state_dict` of the whole network, on rank 0.

        Every rank must call it; rank 0 gets the dict (the same format as a
        single-process run, so either backend can resume it), the others ``None``.
        """
        blocks = {name: self._gather_internal(getattr(self, "_" + name)) for name in ("x", "y", "g", "xw")}
        if self.comm.Get_rank() != 0:
            return None
        c = self._A.csr
        shape = tuple(self._reps_shape[:-2]) + (self.n, self._d)
        return {
            "format": np.array("rowstoch_fast.PullDiagGT/1"),
            "indptr": c.indptr.copy(), "indices": c.indices.copy(), "data": c.data.copy(),
            "shape": np.array(shape, dtype=np.int64),
            "lr": np.array(self.lr), "rounds": np.array(self.rounds), "tracker": np.array(self._tracker_kind),
            "iteration": np.array(self.iteration), "initialized": np.array(self._initialized),
            "check_finite": np.array(self.check_finite), **blocks,
        }

    @classmethod
    def from_state_dict(cls, state, A=None, *, lr=None, comm=None, partition=None):
        """Collective: continue a saved run (from either backend) with the nodes partitioned over the ranks.

        Every rank passes the same ``state`` (e.g. each loads the same ``.npz``).
        """
        A = matrix_from_state(state, A)
        n = A.n
        shape = tuple(int(v) for v in state["shape"])
        reps, d = (shape[0] if len(shape) == 3 else 1), shape[-1]
        x_full = np.asarray(state["x"]).reshape(n, reps, d)
        x0 = x_full.swapaxes(0, 1) if len(shape) == 3 else x_full[:, 0, :]
        opt = cls(A, x0, float(state["lr"]) if lr is None else lr, int(state["rounds"]), str(state["tracker"]),
                  check_finite=bool(state.get("check_finite", True)), comm=comm, partition=partition)
        rows = opt.local_nodes
        for name in ("x", "y", "g", "xw"):
            getattr(opt, "_" + name)[...] = np.asarray(state[name])[rows]
        opt.iteration = int(state["iteration"])
        opt._initialized = bool(state.get("initialized", True))
        if lr is not None:
            np.subtract(opt._x, opt.lr * opt._y, out=opt._xw)
        return opt

    def __repr__(self):
        return (f"DistributedPullDiagGT(n={self.n}, rank={self.comm.Get_rank()}/{self.comm.Get_size()}, "
                f"local nodes={self._halo.n_local}, rounds={self.rounds}, iteration={self.iteration})")


class _TrackerView:
    def __init__(self, kind, scales):
        self.kind = kind
        self._scales = scales
        self.frozen_at = len(scales) - 1

    def scale(self, t):
        return self._scales[min(t, len(self._scales) - 1)]
