"""MPI backend: the network's nodes partitioned over MPI ranks, for every algorithm.

Each rank owns a set of nodes (its rows of every matrix, of every block and of
the exact tracker). One communication round is one halo exchange of the rows that
cross the partition, with MPI neighbourhood collectives on a distributed graph
communicator (``Create_dist_graph_adjacent`` + ``Neighbor_alltoallv``),
followed by the compiled CSR kernel on the rank's rows. ``mpi4py`` is imported
only when this backend is used (importing it starts MPI).

Every collective decision (bad input, a failing ``grad_fn``, NaN/Inf) is
agreed on by all ranks first, so an error on one rank makes every rank raise,
never hang.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from .. import _core
from ..errors import RemoteError
from ..mixing import MixingMatrix
from .._hashing import content_round
from ..tracker import DEFAULT_BLOCK, NetworkTracker, freeze_step
from .cpu import CpuBackend

__all__ = ["Halo", "MpiBackend", "RemoteError", "contiguous_partition", "polled_barrier"]


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("backend='mpi' needs mpi4py and an MPI library: pip install 'rowstoch_fast[mpi]'") from exc
    return MPI


def polled_barrier(timeout=None):
    """Every MPI rank here before any goes on: a barrier polled from Python (``Ibarrier``, tested every 5 ms), so
    that the ranks waiting spin no core and Python's signal handlers still run while one has not come. With
    ``timeout`` (seconds): False once it passed with a rank missing (the barrier then stays pending: for the
    moment before the process ends), True when all came."""
    MPI = _mpi()
    request = MPI.COMM_WORLD.Ibarrier()
    deadline = None if timeout is None else time.monotonic() + timeout
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def collective(comm, fn, *args, tag=None, **kwargs):
    """Run ``fn`` on every rank; if it raises on any rank, raise on all (the original error where it happened).
    ``tag``: ``(rule, doing)``, what this rank is doing (text) and the rule it breaks where another rank is doing
    something else: then a RuntimeError on every rank, naming both (:meth:`MpiBackend.agreed`)."""
    error = None
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
        error, result = exc, None
    remote = remote_failure(comm, error, tag)
    if error is not None:
        raise error
    if remote is not None:
        raise remote
    return result


def _doing_code(tag):
    """A rank's doing (``tag``'s text) as an integer for :func:`remote_failure`'s first look: 0 untagged, else 1 plus
    62 bits of a hash of the text (ranks doing different things meet in the same reduction, and tell them apart but
    for a chance of 2^-62)."""
    if tag is None:
        return 0
    return 1 + (int.from_bytes(hashlib.blake2b(str(tag[1]).encode(), digest_size=8).digest(), "little") >> 2)


def remote_failure(comm, error, tag=None):
    """Collective: every rank tells the others ``error`` (its exception, or None); the
    :class:`~rowstoch_fast.errors.RemoteError` naming the first rank that failed, for a rank that did not (None for
    one that did, which raises its own, and where none did). With ``tag`` (``(rule, doing)``, :func:`collective`'s)
    the ranks' doings are compared first: where one differs from rank 0's, a RuntimeError raised on every rank.

    A first reduction of three integers (whether any rank failed; the largest and smallest doing's
    :func:`_doing_code`) ends it where no rank failed and all do the same (each step's agreement: a pickled gather of
    every rank's tuple had cost ~55-70 us a step on two ranks, 15 us this); otherwise every rank goes on to gather
    the texts."""
    code = _doing_code(tag)
    flags = np.array([error is not None, code, -code], dtype=np.int64)
    seen = np.empty(3, dtype=np.int64)
    comm.Allreduce(flags, seen, op=_mpi().MAX)
    if not seen[0] and seen[1] == -seen[2]:
        return None
    gathered = comm.allgather((tag, None if error is None else f"{type(error).__name__}: {error}"))
    tags = [t for t, _ in gathered]
    doings = [t[1] if t is not None else "another collective call" for t in tags]
    apart = next((r for r, d in enumerate(doings) if d != doings[0]), None)
    if apart is not None:  # (the rule of a rank that set one: a rank in an untagged collective, x set while the
        # others asked, had raised a TypeError, and named the other's call "None", helper 222)
        rule = next(t[0] for t in tags if t is not None)
        raise RuntimeError(f"{rule}: rank 0 called {doings[0]} and rank {apart} {doings[apart]}")
    messages = [m for _, m in gathered]
    failed = [(r, m) for r, m in enumerate(messages) if m is not None]
    if error is not None or not failed:
        return None
    r, m = failed[0]
    return RemoteError(f"rank {r} failed: {m}")


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
        self.col_ids = np.concatenate([self.local_nodes, self.halo_nodes])  # global id of every ext row
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


class _NetworkTrackerView(NetworkTracker):
    """The exact tracker of a time-varying network under MPI: this rank's rows of ``V_t = A_{t-1} ... A_0``
    (``n`` columns), advanced like the iterates (:meth:`MpiBackend.mix_network`); the checks agreed on by
    every rank."""

    def __init__(self, ops, network, rounds, kind):
        self._comm = ops.comm
        super().__init__(network, rounds, kind, rows=ops.local_nodes,
                         mix=lambda V, t: ops.mix_network(network, t, V, np.empty_like(V), rounds))

    def _zero_node(self, diag):
        return self._comm.allreduce(super()._zero_node(diag), op=_mpi().MAX)

    @property
    def max_inverse_diagonal(self):
        return self._comm.allreduce(float(self._max), op=_mpi().MAX)


class _TrackerView:
    def __init__(self, kind, scales):
        self.kind = kind
        self._scales = scales
        self.frozen_at = len(scales) - 1

    def scale(self, t):
        return self._scales[min(t, len(self._scales) - 1)]


class MpiBackend(CpuBackend):
    """The operations of :class:`~rowstoch_fast.backends.cpu.CpuBackend` on one MPI rank's nodes.

    Every block holds this rank's rows (``local_nodes``, ascending global ids);
    :meth:`mix` exchanges the halo rows of the matrix (one neighbourhood
    collective per round) and runs the compiled CSR kernel on the local rows;
    reductions and NaN/Inf checks are agreed on by all ranks.

    Parameters
    ----------
    comm : mpi4py communicator, optional
        Defaults to ``MPI.COMM_WORLD``.
    partition : array_like of int, shape (n,), optional
        Owner rank of every node (default: contiguous blocks). Every rank must
        own at least one node.
    """

    name = "mpi"
    agrees = True
    #: The CPU's fused y phase mixes all rows at once; here each round needs a halo exchange first.
    gt_y_phase = None

    def __init__(self, comm=None, partition=None):
        super().__init__()
        MPI = _mpi()
        if comm is not None and not isinstance(comm, MPI.Comm):
            raise TypeError(f"comm must be an mpi4py communicator (e.g. MPI.COMM_WORLD), got {type(comm).__name__}")
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self._partition = partition
        self._halos = {}
        self._ext = {}
        self.is_root = self.comm.Get_rank() == 0

    def call(self, fn, *args):
        return collective(self.comm, fn, *args)

    def agreed(self, rule, doing, fn, *args):
        return collective(self.comm, fn, *args, tag=(rule, doing))

    def check_x0(self, x0, dtype):
        if np.dtype(dtype) != np.float64:
            raise TypeError("backend='mpi' runs in float64; pass a float64 MixingMatrix (on the command line, drop "
                            "--dtype float32)")
        return super().check_x0(x0, dtype)

    def check_partition(self, n):
        """The owner rank of every node (checked; run inside :meth:`call`)."""
        size = self.comm.Get_size()
        partition = self._partition
        if partition is None:
            if n < size:
                raise ValueError(f"A has {n} nodes but there are {size} ranks; every rank needs a node")
            return contiguous_partition(n, size)
        owner = np.asarray(partition)
        if owner.shape != (n,) or not np.issubdtype(owner.dtype, np.integer):
            raise ValueError(f"partition must be {n} integer owner ranks, got {owner.dtype} of shape {owner.shape}")
        if owner.min() < 0 or owner.max() >= size:
            raise ValueError(f"partition names ranks outside 0..{size - 1}")
        empty = np.setdiff1d(np.arange(size), owner)
        if empty.size:
            raise ValueError(f"partition leaves rank {empty[0]} without nodes")
        return owner.astype(np.int64)

    def attach(self, n, dtype, matrices):
        """Collective: partition the nodes and plan the halo exchange of every matrix."""
        self.n = n
        self.dtype = np.dtype(dtype)
        self.owner = self.call(self.check_partition, self.n)
        _share_cores(self.comm)
        for M in matrices:
            if isinstance(M, MixingMatrix):  # a network's rounds get their halos when first mixed (all ranks)
                self.halo(M)
        self.local_nodes = np.flatnonzero(self.owner == self.comm.Get_rank()).astype(np.int64)
        self.rows = len(self.local_nodes)

    def halo(self, M):
        """The halo plan of matrix ``M`` (built once, collectively)."""
        entry = self._halos.get(id(M))
        if entry is None:
            entry = self._halos[id(M)] = (M, Halo(M, self.comm, self.owner))  # keeps M alive: ids stay unique
        return entry[1]

    @property
    def messages(self):
        return sum(h.messages for _, h in self._halos.values())

    @property
    def bytes_sent(self):
        return sum(h.bytes_sent for _, h in self._halos.values())

    def local(self, full):
        full = np.asarray(full)
        return np.ascontiguousarray(full[self.local_nodes], dtype=self.dtype)

    def vector(self, values):
        values = np.asarray(values)
        return np.ascontiguousarray(values[self.local_nodes] if values.shape[0] == self.n else values,
                                    dtype=self.dtype)

    def mix(self, M, src, out, rounds=1, work=None):
        if not isinstance(M, MixingMatrix):
            return self.mix_network(M, self.t, src, out, rounds)
        halo = self.halo(M)
        ext = self._ext_block(M, halo, src.shape[1])
        ext[: halo.n_local] = src
        halo.gossip(ext, out, rounds)
        return out

    def _ext_block(self, M, halo, width):
        """The ``(local + halo rows, width)`` buffer of matrix ``M`` (kept between calls)."""
        key = (id(M), width)
        ext = self._ext.get(key)
        if ext is None:
            ext = self._ext[key] = np.zeros((halo.ncols, width), dtype=self.dtype)
        return ext

    def mix_network(self, net, t, src, out, rounds):
        """The rounds of iteration ``t`` of a time-varying network on this rank's rows: per round a halo
        exchange over the round's matrix, then the compiled lossy pass with the nodes' global ids (so the
        losses and sleep are those of the single-process run)."""
        if hasattr(net, "encode"):
            return self._mix_messages(net, t, src, out, rounds)
        plan = net.plan(t)
        if plan is None:
            raise ValueError(f"{net!r} has no compiled pass and so does not run on backend='mpi'; use backend='cpu'")
        matrix_of, seed, p, awake, chain = plan
        cur = src
        for r in range(rounds):
            M = matrix_of(r)
            halo = self.halo(M)
            ext = self._ext_block(M, halo, src.shape[1])
            ext[: halo.n_local] = cur
            t0 = time.perf_counter()
            halo.exchange(ext)
            t1 = time.perf_counter()
            bad = None if chain is None else chain.gates(halo.indptr, halo.indices, t, row_ids=halo.local_nodes,
                                                           col_ids=halo.col_ids, symmetric=net.stochastic == "doubly")
            _core.mix_lossy(halo.indptr, halo.indices, halo.data, ext, out, seed=seed, t=t, r=r, p=p,
                            renormalise=net.stochastic == "row", awake=awake, row_ids=halo.local_nodes,
                            col_ids=halo.col_ids, ncols=halo.ncols, bad=bad, check_indices=False,
                            symmetric=net.stochastic == "doubly")
            halo.comm_seconds += t1 - t0
            halo.compute_seconds += time.perf_counter() - t1
            cur = out
        return out

    def _mix_messages(self, net, t, src, out, rounds):
        """The rounds of a compressing (or noisy) network on this rank's rows: its nodes' messages encoded here
        (global ids), only the messages exchanged with the halo, then one compiled pass over ``[own rows;
        messages]`` (:meth:`rowstoch_fast.network.Compressed.mix`): the single-process run's values."""
        from ..network import own_and_messages

        core = net.core()
        plan = None if isinstance(core, MixingMatrix) else core.plan(t)
        if plan is None and not isinstance(core, MixingMatrix):
            raise ValueError(f"{net!r} has no compiled pass under its messages and so does not run on backend='mpi'; "
                             "use backend='cpu'")
        if net.delayed() is not None:
            return self._mix_delayed(net, core, plan, t, src, out, rounds)
        state = self.channel(net)
        cur = src
        for r in range(rounds):
            M = core if plan is None else plan[0](r)
            halo = self.halo(M)
            nl, w = halo.n_local, src.shape[1]
            key = ("messages", id(M), w)
            stacked = self._ext.get(key)
            if stacked is None:  # [own rows; own messages; the halo's messages], and the indices that read it
                index = own_and_messages(halo.indptr, halo.indices, halo.local_nodes, halo.col_ids, nl)
                ids = np.concatenate([halo.local_nodes, halo.col_ids]).astype(np.int64)
                stacked = self._ext[key] = (np.zeros((nl + halo.ncols, w), dtype=self.dtype), index, ids)
            ext, index, ids = stacked
            msgs = ext[nl:]
            net.encode(np.ascontiguousarray(cur), msgs[:nl], t, content_round(r, state), self.message_d,
                       row_ids=halo.local_nodes, own=ext[:nl])
            t0 = time.perf_counter()
            halo.exchange(msgs)
            t1 = time.perf_counter()
            weighted = self._weighted_pass(halo, t, r, self._lossy_arguments(net, plan, halo, t))
            weighted(halo.indptr, index, ext, ids, out)
            self._add_link_noise(net, weighted, halo.indptr, halo.indices, halo.col_ids, t, content_round(r, state),
                                 out)
            halo.comm_seconds += t1 - t0
            halo.compute_seconds += time.perf_counter() - t1
            cur = out
        return out

    def _lossy_arguments(self, net, plan, halo, t):
        """The round's losses and sleep on ``halo``'s entries, ``{"loss_seed", "p", "renormalise", "awake", "bad"}``
        (None without a plan: a static matrix)."""
        if plan is None:
            return None
        _, seed, p, awake, chain = plan
        bad = None if chain is None else chain.gates(halo.indptr, halo.indices, t, row_ids=halo.local_nodes,
                                                     col_ids=halo.col_ids, symmetric=net.stochastic == "doubly")
        return {"loss_seed": seed, "p": p, "renormalise": net.stochastic == "row", "awake": awake, "bad": bad,
                "symmetric": net.stochastic == "doubly"}

    def _weighted_pass(self, halo, t, r, lossy):
        """``weighted(indptr, index, block, senders, dst)``: one pass of this rank's rows of the round's weights
        over a stacked block (``senders``: the global id of each of its rows), the losses and sleep of the round
        (``lossy``: :meth:`_lossy_arguments`)."""
        data = halo.data
        if lossy is None:
            def weighted(indptr, index, block, senders, dst):
                _core.mix(indptr, index, data, block, dst, check_indices=False, ncols=len(block))
            return weighted

        def weighted(indptr, index, block, senders, dst):
            _core.mix_lossy(indptr, index, data, block, dst, seed=lossy["loss_seed"], t=t, r=r, p=lossy["p"],
                            renormalise=lossy["renormalise"], awake=lossy["awake"], row_ids=self.local_nodes,
                            col_ids=senders, ncols=len(block), bad=lossy["bad"], check_indices=False,
                            symmetric=lossy["symmetric"])
        return weighted

    def _add_link_noise(self, net, weighted, indptr, indices, col_ids, t, r, out, ages=None):
        """``out +=`` the noise on the copies this rank's nodes received (:class:`~rowstoch_fast.network.Noisy`
        with ``per="link"``: drawn here, on the links' global ids, through the round's weights; ``r``: the round
        it is drawn as, ``content_round``'s)."""
        from ..network import link_noise_block

        for layer in net.noisy_links():
            if layer.silent:
                continue
            block, index, senders = link_noise_block(layer, indptr, indices, t, r, out.shape[1], out.dtype, self.rows,
                                                     ages=ages, row_ids=self.local_nodes, col_ids=col_ids)
            noise = np.empty_like(out)
            weighted(indptr, index, block, senders, noise)
            out += noise

    def _mix_delayed(self, net, core, plan, t, src, out, rounds):
        """A delayed network's rounds on this rank's rows, each entry reading the newest message of its link that
        has arrived (``_core.mix_delayed`` or ``delay_ages``' index, on global ids). Over a fixed set of links (a
        static matrix, losses and sleep over one: :func:`~rowstoch_fast.network.fixed_links`) a rank keeps the
        last ``D + 1`` iterations' messages of its halo only, exchanged with its neighbours like an undelayed
        round's; a schedule's links change from one iteration to the next, so there every rank keeps every node's
        messages (all-gathered each round: ``n d`` values per rank and round)."""
        from ..network import fixed_links

        delayed, n, nl, w = net.delayed(), self.n, self.rows, src.shape[1]
        state = self.channel(net)
        local = fixed_links(core)  # (one matrix every round: its halo's messages suffice)
        if local:
            halo = self.halo(core if plan is None else plan[0](0))
            ring = self._halo_ring(state, delayed, halo, t, w, rounds)
            key = ("delayed messages", id(halo), w)
            if key not in self._ext:  # [this rank's messages; its halo's], exchanged as an undelayed round's
                self._ext[key] = np.zeros((halo.ncols, w), dtype=self.dtype)
            mine = self._ext[key]
        else:
            ring = delayed.ring(state, t, nl, n, w, rounds, self.dtype, require=self._require)
            mine = np.empty((nl, w), dtype=self.dtype)
        cur = src
        for r in range(rounds):
            net.encode(np.ascontiguousarray(cur), mine[:nl], t, content_round(r, state), self.message_d,
                       row_ids=self.local_nodes, own=ring.buffer[:nl])
            halo = self.halo(core if plan is None else plan[0](r))
            t0 = time.perf_counter()
            if local:
                halo.exchange(mine)
                t1 = time.perf_counter()
                ring.put(t, r, mine)
                indptr, cols, col_ids = halo.indptr, halo.indices, np.asarray(halo.col_ids, dtype=np.int64)
            else:
                gathered, order = self._all_gathered(mine)
                t1 = time.perf_counter()
                ring.put(t, r, gathered, rows=order)
                links = self.__dict__.setdefault("_global_links", {})
                if id(halo) not in links:  # (global column ids: the blocks hold every node; kept per matrix)
                    links[id(halo)] = (halo, np.asarray(halo.indptr, dtype=np.int64),
                                       np.asarray(halo.col_ids, dtype=np.int64)[halo.indices])
                _, indptr, cols = links[id(halo)]
                col_ids = self.__dict__.setdefault("_every_node", np.arange(n, dtype=np.int64))
            lossy = self._lossy_arguments(net, plan, halo, t)
            weighted = self._weighted_pass(halo, t, r, lossy)
            ids = {"row_ids": self.local_nodes, "col_ids": col_ids}
            if delayed.FUSED[delayed.delay]:  # (the ages drawn in the mixing pass)
                delayed.mix_block(indptr, cols, halo.data, ring.buffer, out, t, r, ring.layout(), **ids, lossy=lossy)
            else:
                indptr_of, index = delayed.index(indptr, cols, t, r, ring.layout(), **ids)
                spread = np.repeat if ring.order == "node" else np.tile  # (each node's messages side by side, or not)
                senders = np.concatenate([self.local_nodes, spread(col_ids, (len(ring.buffer) - nl) // len(col_ids))])
                weighted(indptr_of, index, ring.buffer, senders, out)
            if net.noisy_links():
                ages = delayed.ages(indptr, cols, t, r, **ids)
                self._add_link_noise(net, weighted, indptr, cols, col_ids, t, content_round(r, state), out, ages=ages)
            halo.comm_seconds += t1 - t0
            halo.compute_seconds += time.perf_counter() - t1
            cur = out
        ring.done(t)
        return out

    def _halo_ring(self, state, delayed, halo, t, w, rounds):
        """The history ``state`` keeps of ``halo``'s columns (this rank's nodes' messages, then its halo's), made
        where it is missing; a history restored with every node's messages (``load_channels``: a checkpoint's)
        is cut to those columns first."""
        from .._history import History

        delayed.check_restored(state, self.n, w, rounds)
        ring = state.get("ring")
        if ring is not None and state.get("columns") is None:
            cut = History(halo.n_local, halo.ncols, w, delayed.max_delay, rounds, ring.buffer.dtype, np,
                          delayed.ORDER[delayed.delay])
            if ring.slots().shape[:3] == (self.n, delayed.max_delay + 1, rounds) and ring.buffer.shape[1] == w:
                cut.slots()[...] = ring.slots()[np.asarray(halo.col_ids)]
                cut.last, cut.fresh = ring.last, ring.fresh
            state["ring"] = cut
        state["columns"] = halo.col_ids
        return delayed.ring(state, t, halo.n_local, halo.ncols, w, rounds, self.dtype, require=self._require)

    def _saved_history(self, state):
        """Every node's messages of a history of a halo's columns, as one process keeps them: each rank gives its
        own nodes' (all-gathered; every rank must call)."""
        from .._history import History

        ring = state.get("ring")
        if ring is None or ring.last is None or state.get("columns") is None:
            return ring
        own = ring.slots()[: self.rows]  # (the halo's first columns are this rank's nodes)
        gathered, order = self._all_gathered(np.ascontiguousarray(own).reshape(self.rows, -1))
        every = History(self.rows, self.n, ring.buffer.shape[1], ring.D, ring.rounds, ring.buffer.dtype)
        every.slots()[order] = gathered.reshape(self.n, ring.D + 1, ring.rounds, -1)
        every.last, every.fresh = ring.last, ring.fresh
        return every

    def _all_gathered(self, mine):
        """Every rank's rows of ``mine`` (this rank's, ``(rows, w)``), all-gathered in rank order, and the global
        ids of those rows."""
        order = self.__dict__.get("_rank_order")
        if order is None:  # the global ids in rank order (what Allgatherv returns)
            size = self.comm.Get_size()
            order = self._rank_order = (np.concatenate([np.flatnonzero(self.owner == k) for k in range(size)]),
                                        np.bincount(self.owner, minlength=size))
        mtype = _mpi().DOUBLE if self.dtype == np.float64 else _mpi().FLOAT
        mine = np.ascontiguousarray(mine, dtype=self.dtype)
        gathered = np.empty((self.n, mine.shape[1]), dtype=self.dtype)
        counts = order[1] * mine.shape[1]  # (values per rank: this block's width)
        self.comm.Allgatherv(mine, [gathered, (counts, _displs(counts)), mtype])
        return gathered, order[0]

    def _link_history(self, state, delayed, links, t, block):
        """The history of this rank's halo of the links' matrix (its nodes' messages, then the halo's, exchanged
        as the link sources are: ``_link_source``), each entry reading its sender's position in the halo; a
        restored history (every node's) is cut to the halo first."""
        ring = self._halo_ring(state, delayed, links["halo"], t, block.shape[1], 1)
        ring.put(t, 0, self._link_source(links["matrix"], block))
        return ring, links["host"][1]

    # ------------------------------------------------------------------ per-link running sums
    def _link_arrays(self, C):
        """This rank's rows of ``C`` (its halo's columns), with the global ids the losses are hashed on."""
        cache = self.__dict__.setdefault("_links", {})
        if id(C) not in cache:
            halo = self.halo(C)
            rows = np.repeat(np.arange(halo.n_local, dtype=np.int64), np.diff(halo.indptr))
            diag = halo.local_nodes[rows] == halo.col_ids[halo.indices]
            cache[id(C)] = (C, self._device_links(halo.indptr, halo.indices, halo.data, diag, halo.local_nodes,
                                                  halo.col_ids))
            cache[id(C)][1].update(halo=halo, matrix=C)  # (a delayed network's history keeps the halo's messages)
        return cache[id(C)][1]

    def _link_source(self, C, src):
        halo = self.halo(C)
        ext = self._ext_block(C, halo, src.shape[1])
        ext[: halo.n_local] = src
        t0 = time.perf_counter()
        halo.exchange(ext)
        halo.comm_seconds += time.perf_counter() - t0
        return ext

    def gather_links(self, C, block):
        halo = self.halo(C)
        every = self.comm.gather((halo.local_nodes, np.diff(halo.indptr), np.asarray(block)), root=0)
        if every is None:
            return None
        n = C.n
        counts = np.zeros(n, dtype=np.int64)
        for nodes, per_row, _ in every:
            counts[nodes] = per_row
        starts = np.concatenate([[0], np.cumsum(counts)])
        full = np.empty((int(starts[-1]), block.shape[1]), dtype=block.dtype)
        for nodes, per_row, part in every:  # each rank's rows, in its order (ascending global ids)
            local_starts = np.concatenate([[0], np.cumsum(per_row)])
            for k, node in enumerate(nodes):
                full[starts[node]:starts[node + 1]] = part[local_starts[k]:local_starts[k + 1]]
        return full

    def scatter_links(self, C, full):
        halo = self.halo(C)
        counts = np.diff(C.csr.indptr)
        starts = np.concatenate([[0], np.cumsum(counts)])
        picked = [np.asarray(full)[starts[node]:starts[node + 1]] for node in halo.local_nodes]
        return np.ascontiguousarray(np.concatenate(picked) if picked else np.zeros((0, full.shape[1])),
                                    dtype=self.dtype)

    def tracker(self, A, rounds, kind):
        if not isinstance(A, MixingMatrix):
            return _NetworkTrackerView(self, A, rounds, kind)
        halo = self.halo(A)
        nl = halo.n_local
        pi = A.pi
        if kind == "perron":
            table = np.stack([np.ones(nl), pi[halo.local_nodes]])
        elif kind == "exact":
            k_star = freeze_step(A.metrics().beta, float(pi.min()))
            table = distributed_diag_table(A, halo, rounds, -(-k_star // rounds) + 1)
        else:
            raise ValueError(f"tracker must be 'exact' or 'perron', got {kind!r}")
        zero = self.comm.allreduce(int(np.argwhere(table <= 0)[0][0]) if (table <= 0).any() else -1, op=_mpi().MAX)
        if zero >= 0:
            raise ValueError(f"diag(A^{zero * rounds}) has a zero (a node without self loop), so D_{zero}^-1 of "
                             "Pull-Diag-GT is undefined; use rounds > 1 or tracker='perron'")
        return _TrackerView(kind, 1.0 / table)

    def first_nonfinite(self, *blocks):
        local = [int(self.local_nodes[r]) for r in (_core.first_nonfinite(b) for b in blocks) if r >= 0]
        found = self.comm.allreduce(min(local) if local else self.n, op=_mpi().MIN)
        return -1 if found == self.n else found

    def all_true(self, flag):
        return bool(self.comm.allreduce(bool(flag), op=_mpi().LAND))

    def max_abs(self, block):
        return float(self.comm.allreduce(super().max_abs(block), op=_mpi().MAX))

    def weighted_sum(self, weights, block):
        local = np.ascontiguousarray(weights @ block)
        total = np.empty_like(local)
        self.comm.Allreduce(local, total, op=_mpi().SUM)
        return total

    def sum_rows(self, block):
        local = np.ascontiguousarray(block.sum(axis=0))
        total = np.empty_like(local)
        self.comm.Allreduce(local, total, op=_mpi().SUM)
        return total

    gathers_in_place = False

    def gather(self, block, copy=True):
        parts = self.comm.gather((self.local_nodes, np.asarray(block)), root=0)
        if not self.is_root:
            return None
        full = np.empty((self.n,) + block.shape[1:], dtype=block.dtype)
        for nodes, rows in parts:
            full[nodes] = rows
        return full

    def gather_objects(self, obj):
        return self.comm.gather(obj, root=0)

    def broadcast_objects(self, obj):
        return self.comm.bcast(obj, root=0)
