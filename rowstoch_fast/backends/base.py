"""What every backend shares: the operations that read the same on NumPy and CuPy arrays (``self.xp``)."""

from __future__ import annotations

import math
import weakref

import numpy as np

from .._device import is_device_array  # noqa: F401 (the backends import it from here too)
from .._hashing import content_round

__all__ = ["Backend", "DEFERRED", "is_device_array"]


def _under_messages(net):
    """The network under ``net``'s message layers (compression, noise, delays: ``net.core()``), or ``net``."""
    return net.core() if hasattr(net, "encode") else net


def _drawn_in_sweep(net, t, r):
    """``(seed, t, r, p)`` where a running-sums sweep can draw the round's losses itself (the network's
    ``link_draws``: Bernoulli losses right over a static matrix), else None (the network draws them)."""
    draws = getattr(net, "link_draws", None)
    return None if draws is None else draws(t, r)


def is_network(A):
    """True for a time-varying network of :mod:`rowstoch_fast.network` (it has a per-iteration :meth:`plan`),
    False for a static :class:`~rowstoch_fast.MixingMatrix`. Backends ask this rather than import either class:
    they sit above both, and :class:`~rowstoch_fast.MixingMatrix` reaches the device backend through
    :func:`rowstoch_fast._device.device_operations`."""
    return hasattr(A, "plan")


class _Deferred:
    """What ``combine`` / ``copy_in`` return when the NaN/Inf check is a flag on the device, read later
    (see :mod:`rowstoch_fast.algorithms._base`)."""

    def __bool__(self):
        raise TypeError("a deferred NaN/Inf check has no truth value until the backend's flag is read")

    def __repr__(self):
        return "DEFERRED"


DEFERRED = _Deferred()


def kept_for(cache, obj, make):
    """What the dict ``cache`` keeps for ``obj`` (``make()`` the first time): known by the object's identity, through
    a weak reference (an object not seen before, or a new one at a dead one's address, gets a new entry; entries of
    dead objects are dropped then)."""
    entry = cache.get(id(obj))
    if entry is None or entry[0]() is not obj:
        for key in [key for key, (ref, _) in list(cache.items()) if ref() is None]:  # (two threads may purge at once)
            cache.pop(key, None)
        entry = cache[id(obj)] = (weakref.ref(obj), make())
    return entry[1]


class Backend:
    """The generic half of a backend; see :class:`~rowstoch_fast.backends.cpu.CpuBackend` for the interface.

    Here every block holds all ``n`` nodes' rows in one process; the MPI
    backend overrides what changes when a process holds only its own.
    """

    name = None
    xp = np
    is_root = True
    #: Halo messages and bytes this process has sent (only the MPI backend sends any).
    messages = 0
    bytes_sent = 0
    #: Whether the optimizer checks for NaN/Inf (set by it; a backend that defers checks skips them otherwise).
    checking = True
    #: Whether the processes running an optimizer agree on its settings now and then (the MPI backend's ranks:
    #: :meth:`~rowstoch_fast.algorithms.Optimizer._agree_on_settings`; it then has a ``comm``).
    agrees = False
    #: Steps between two reads of deferred checks (only backends whose checks return DEFERRED have any).
    check_every = 1
    #: The id of the last checked launch (deferring backends).
    last_launch = 0
    #: Whether a step's blocks that it leaves as they were may stay in their buffers instead of being copied
    #: (:meth:`~rowstoch_fast.algorithms.Optimizer._carry`): the host's backends. Not the GPU's: its journal and
    #: CUDA graphs hold the two buffers of every block.
    keeps_blocks = False
    #: The values of one model (``d``), set by the optimizer: a compressed network's messages are models, replica
    #: by replica (:class:`~rowstoch_fast.network.Compressed`).
    message_d = None

    def __init__(self, **options):
        if options:
            raise TypeError(f"backend {self.name!r} takes no option {', '.join(map(repr, sorted(options)))} "
                            "(comm and partition are options of backend='mpi')")

    def require_memory(self, nbytes, what, hint=""):
        """MemoryError at once when ``nbytes`` more of this backend's memory (the host's) cannot be had."""
        from .._checks import require_memory

        require_memory(nbytes, what, hint)

    def borrows(self, block):
        """Whether a step can read ``block`` (an array a user function returned, node-major) as it is instead of
        copying it into a block of its own: never, unless a backend says so."""
        return False

    # ------------------------------------------------------------------ delayed messages: one history per quantity
    #: Which part of a step is mixing (``"init"`` or ``"step"``) and how many delayed mixes it has made: the
    #: history of a delayed network's messages is kept per quantity, told apart by call order (set by the optimizer).
    phase = "step"
    calls = 0

    def channel(self, net):
        """The state (a dict) of the next quantity sent through ``net`` in this step when ``net`` changes its
        messages (compression, noise, delays; else None): each quantity an algorithm mixes in a step keeps its own
        history of delayed messages and draws its own compression and noise (``state["quantity"]``, its place
        in the step: ``rowstoch_fast._hashing.content_round``)."""
        if not hasattr(net, "encode"):
            return None
        key = (self.phase, self.calls)
        self.calls += 1
        state = self.__dict__.setdefault("_channels", {}).setdefault(key, {})
        state["quantity"] = key[1]
        return state

    def save_channels(self):
        """``{key: host array}`` of every delayed history (the messages of all nodes, block by block, and the last
        iteration), on the root; ``{}`` without any."""
        out = {}
        for (phase, k), state in sorted(self.__dict__.get("_channels", {}).items()):
            ring = self._saved_history(state)
            if ring is not None and ring.last is not None:  # (node by node, whatever the order in memory)
                blocks = ring.slots().reshape(-1, ring.buffer.shape[1])  # (a copy where the order is another)
                out[f"delayed/{phase}/{k}/messages"] = np.array(blocks.get() if hasattr(blocks, "get") else blocks)
                out[f"delayed/{phase}/{k}/last"] = np.array(ring.last)
                out[f"delayed/{phase}/{k}/layout"] = np.array([ring.n_block, ring.D, ring.rounds])
        return out

    def _saved_history(self, state):
        """The history of a channel as a checkpoint holds it: every node's messages (here, the one kept)."""
        return state.get("ring")

    def load_channels(self, state):
        """Restore :meth:`save_channels`' histories (every process gets every node's messages)."""
        from .._history import History

        channels = self.__dict__.setdefault("_channels", {})
        for key in state:
            if not (isinstance(key, str) and key.startswith("delayed/")):
                continue
            parts = key.split("/")
            if len(parts) != 4 or not parts[2].isdigit() or parts[3] not in ("messages", "last", "layout"):
                raise ValueError(f"state[{key!r}]: not a delayed-message history's key (delayed/PHASE/K/messages, "
                                 "last or layout)")
            prefix = "/".join(parts[:3]) + "/"
            for part in ("messages", "last", "layout"):
                if prefix + part not in state:
                    raise ValueError(f"state has {key!r} but no {prefix + part!r}: the delayed-message history is "
                                     "incomplete (state_dict() saves all three)")
            if parts[3] != "messages":
                continue
            layout = np.asarray(state[prefix + "layout"])
            if layout.shape != (3,) or layout.dtype.kind not in "iu" or (layout < [1, 0, 1]).any():
                raise ValueError(f"state[{prefix + 'layout'!r}] must be 3 integers (nodes >= 1, max delay >= 0, "
                                 f"rounds >= 1), got {layout.tolist()!r}")
            n_block, D, rounds = (int(v) for v in layout)
            blocks = np.asarray(state[key])
            expected = ((D + 1) * rounds * n_block, blocks.shape[1] if blocks.ndim == 2 else -1)
            if blocks.ndim != 2 or blocks.shape[0] != expected[0] or blocks.dtype.kind not in "fiu":
                raise ValueError(f"state[{key!r}] must be a numeric array of {expected[0]} rows (layout "
                                 f"{layout.tolist()}: (max delay + 1) x rounds x nodes), got shape {blocks.shape}, "
                                 f"dtype {blocks.dtype}")
            if not np.isfinite(blocks).all():
                raise ValueError(f"state[{key!r}] holds a NaN or Inf: the delayed-message history is damaged (a "
                                 "state saved by state_dict() is finite)")
            last = np.asarray(state[prefix + "last"])
            if last.ndim or last.dtype.kind not in "iu" or int(last) < 0:
                raise ValueError(f"state[{prefix + 'last'!r}] must be an integer >= 0, got {last.tolist()!r}")
            ring = History(self.rows, n_block, blocks.shape[1], D, rounds, self.dtype)
            ring.buffer[self.rows:] = blocks
            ring.last, ring.fresh = int(last), False
            channels[(parts[1], int(parts[2]))] = {"ring": ring, "restored": prefix}  # (checked at its first use:
            # Delayed.check_restored)

    def compress(self, net, src, out, t, state=None):
        """``out <- Q(src)``: the messages this process's rows send through the compressing (or noisy) network
        ``net`` at iteration ``t`` (round 0), drawn on the nodes' global ids
        (:meth:`rowstoch_fast.network.Compressed.encode`, compiled, on the host) for the quantity ``state``
        holds (default: the next of the step, :meth:`channel`)."""
        state = self.channel(net) if state is None else state
        return net.encode(src, out, t, content_round(0, state), self.message_d, row_ids=self.local_nodes)

    def call(self, fn, *args):
        """Run ``fn(*args)`` (under MPI: on every rank, raising on all if it raises on one)."""
        return fn(*args)

    def agreed(self, rule, doing, fn, *args):
        """:meth:`call`, where under MPI every rank must be ``doing`` the same (text: ``"tell() at iteration
        3"``): where one is not, a RuntimeError on every rank, ``rule`` (what was broken) and both doings."""
        return fn(*args)

    def attach(self, n, dtype, matrices):
        """Prepare for these :class:`MixingMatrix` objects (on ``n`` nodes) and value type."""
        self.n = n
        self.dtype = np.dtype(dtype)
        self.rows = self.n
        self.local_nodes = None  # all nodes, in order

    def prepare(self, width):
        """Get ready to run on blocks of ``width`` values per row (the CuPy backend compiles its kernels here,
        so that the set-up, not the first step, pays for it)."""

    def zeros(self, width):
        """A zero block of ``(rows, width)`` values."""
        return self.xp.zeros((self.rows, width), dtype=self.dtype)

    def vector(self, values):
        """A per-row coefficient vector (this process's rows of a length-``n`` host vector)."""
        return self.xp.ascontiguousarray(self.xp.asarray(values, dtype=self.dtype))

    def is_finite(self, block):
        """Whether this process's rows of ``block`` hold no NaN or Inf (no communication)."""
        return bool(self.xp.isfinite(block).all())

    def columns(self, values):
        """A per-column coefficient: ``values`` (one per column of a block, the same on every process) as a
        ``(1, w)`` row that :meth:`combine` broadcasts down the rows (a replica's step size over its columns)."""
        return self.xp.ascontiguousarray(self.xp.asarray(values, dtype=self.dtype).reshape(1, -1))

    def failed_launch(self):
        """The id of the first deferred check that failed since the last call (0: none), clearing it."""
        return 0

    def max_abs(self, block):
        """``max |block|`` over all nodes (0 for no rows) as a host float; inf where an entry is NaN."""
        found = float(self.xp.abs(block).max()) if block.size else 0.0
        return found if found == found else math.inf

    def flush_links(self):
        """Write into the per-link blocks what this backend keeps of them between rounds, and forget it (before
        an optimizer is copied or pickled: its copy then holds everything in its blocks). Nothing here."""

    def all_true(self, flag):
        """``flag`` on every process (under MPI: the logical and of all ranks' flags)."""
        return bool(flag)

    def weighted_sum(self, weights, block):
        """``weights^T block`` over all nodes (``weights``: this process's rows), shape (w,)."""
        return weights @ block

    def sum_rows(self, block):
        """``1^T block`` over all nodes, shape (w,)."""
        return block.sum(axis=0)

    def gather_objects(self, obj):
        """``[obj]`` of every process, in rank order, on the root (None on the others)."""
        return [obj]

    # ------------------------------------------------------------------ per-link running sums
    def _link_arrays(self, C):
        """This process's share of the static matrix ``C`` for the per-link operations, computed once per
        matrix: ``host`` (indptr, indices, row_ids, col_ids: what a network's ``arrived`` hashes; ids None for
        all nodes in order), and on this backend's arrays ``indices``, ``data``, ``diag`` (self loops),
        ``starts`` (first entry of each non-empty row), ``nonempty``, and ``nnz``."""
        cache = self.__dict__.setdefault("_links", {})
        if id(C) not in cache:
            c = C.csr
            indptr, indices = c.indptr.astype(np.int64), c.indices.astype(np.int64)
            rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
            cache[id(C)] = (C, self._device_links(indptr, indices, c.data, rows == indices, None, None))
        return cache[id(C)][1]

    def _device_links(self, indptr, indices, data, diag, row_ids, col_ids):
        """:meth:`_link_arrays`' dict from host arrays (a device backend copies them to the device)."""
        xp = self.xp
        nonempty = np.diff(indptr) > 0
        return {"host": (indptr, indices, row_ids, col_ids), "indices": xp.asarray(indices),
                "data": xp.asarray(data.astype(self.dtype)), "diag": xp.asarray(diag),
                "starts": xp.asarray(indptr[:-1][nonempty]), "nonempty": xp.asarray(nonempty), "nnz": len(indices)}

    def _per_block(self, cache_name, block, make):
        """What this backend keeps for ``block`` between calls in its dict ``cache_name`` (``make()`` the first
        time): known by the block's identity, through a weak reference (a block this backend has not seen, or a
        new array at a dead one's address, gets a new entry; entries of dead blocks are dropped then)."""
        return kept_for(self.__dict__.setdefault(cache_name, {}), block, make)

    def _link_source(self, C, src):
        """The rows the entries of this process's share of ``C`` read (under MPI: its rows and its halo's)."""
        return src

    def link_bytes(self, C, width):
        """The bytes of a :meth:`link_zeros` block of ``width`` values per link of this process's rows of ``C``."""
        return int(self._link_arrays(C)["nnz"]) * int(width) * self.dtype.itemsize

    def link_zeros(self, C, width):
        """A zero block of one row per stored entry of this process's rows of ``C`` (per-link state)."""
        return self.xp.zeros((self._link_arrays(C)["nnz"], width), dtype=self.dtype)

    def running_sums(self, C, net, t, r, blocks):
        """One gossip round of per-link running sums over the column-stochastic ``C``: for every
        ``(src, out, pending, pending_out)`` of ``blocks``, each link ``j -> i`` adds ``C[i, j] src[j]`` to its
        undelivered mass ``pending``; where the round's message arrives (``net.arrived``, the same draws as the
        network's losses; every message when ``net`` is None; a self loop always) the receiver takes all of
        it. ``out[i]`` is what node ``i`` took, ``pending_out`` what stays on each link. Mass is never lost:
        a lost message's share arrives with the next message that does (robust push-sum).

        A network with message layers (:mod:`rowstoch_fast.network`'s ``Compressed``, ``Noisy``, ``Delayed``)
        changes what the links carry (:meth:`_late_mass`): a sender's share is ``C[i, j] Q(src[j])`` (its own,
        ``C[j, j] src[j]``, exact), a delayed link delivers only the mass sent up to its newest message that has
        arrived, and noise on a received running sum stays on the link (it telescopes)."""
        links = self._link_arrays(C)
        xp = self.xp
        deliver = self._delivered(links, net, t, r)
        data, awake = self._link_weights(C, links, net, t)
        taken = (data * deliver)[:, None]  # (the CPU backend's compiled passes: the same two sums)
        delivered = deliver.astype(self.dtype)[:, None]
        kept = ~deliver[:, None]
        for src, out, pending, pending_out in blocks:
            state = self.channel(net)  # (each block a quantity of its own: its draws, its history)
            gathered = self._link_source(C, src)[links["indices"]]
            msg = self._link_message(net, src, t, state)
            if msg is not None:  # (a copy: the halo block is shared)
                gathered = xp.where(links["diag"][:, None], gathered, self._link_source(C, msg)[links["indices"]])
            out[...] = 0
            if links["starts"].shape[0]:  # the shares taken, then the mass that waited on the links
                shares = xp.add.reduceat(taken * gathered, links["starts"], axis=0)
                waited = xp.add.reduceat(delivered * pending, links["starts"], axis=0)
                out[links["nonempty"]] = shares + waited
            pending_out[...] = xp.where(kept, pending + data[:, None] * gathered, 0)
            late = None if msg is None else self._late_mass(links, net, t, r, deliver, msg, data, awake, state)
            if late is not None and links["starts"].shape[0]:
                out[links["nonempty"]] -= xp.add.reduceat(late, links["starts"], axis=0)
                pending_out += late

    def _delivered(self, links, net, t, r):
        """Which stored entries' messages of round ``r`` of iteration ``t`` arrive (the losses of the network
        under any message layers; a self loop always)."""
        xp = self.xp
        core = _under_messages(net)
        if core is None or not hasattr(core, "arrived"):  # (a static matrix, under message layers or not)
            return xp.ones(links["nnz"], dtype=bool) | links["diag"]
        indptr, indices, row_ids, col_ids = links["host"]
        return xp.asarray(core.arrived(t, r, indptr, indices, row_ids=row_ids, col_ids=col_ids)) | links["diag"]

    def _link_weights(self, C, links, net, t):
        """``(weights, awake)``: the weights of this round's shares, per stored entry, and where sleep changes them
        the mask of this process's rows awake (else None). ``C``'s own, except under sleep over a column-stochastic
        ``C`` (push-sum mass): a sleeping sender keeps its whole share (its self loop 1, its links 0), as a
        sleeping node's column is ``e_j`` in the plain pass. (Over a row-stochastic ``C``, R-FAST's buffers, a
        sender's running sums go on growing while it sleeps: they are sent when it wakes.)"""
        core = _under_messages(net)
        if not hasattr(core, "awake") or getattr(C, "stochastic", "column") != "column":
            return links["data"], None
        xp = self.xp
        _, indices, row_ids, col_ids = links["host"]
        mask = np.asarray(core.awake(t))
        sender = xp.asarray(mask[indices if col_ids is None else np.asarray(col_ids)[indices]])
        data = xp.where(links["diag"], xp.where(sender, links["data"], 1.0), links["data"] * sender)
        return data.astype(self.dtype), xp.asarray(mask if row_ids is None else mask[np.asarray(row_ids)])

    def _link_message(self, net, src, t, state):
        """``Q(src)``, this process's rows' messages (the quantity ``state`` holds), where ``net`` compresses or
        adds noise to what is sent; None where ``net`` has no message layer (``src`` itself where its layers
        change no message)."""
        if not hasattr(net, "encode"):
            return None
        return self.compress(net, src, self.xp.empty_like(src), t, state)

    def _late_mass(self, links, net, t, r, deliver, msg, data, awake=None, state=None):
        """Per stored entry, the part of this round's undelivered mass ``p`` that stays on a link whose message
        arrived (zero elsewhere), or None: under a ``Delayed`` layer, ``C[i, j]`` times the messages ``j`` sent
        after the newest one that has arrived (the receiver's running sum is the one of ``t - age``: the mass
        sent since has not reached it; every node's messages of the last ``D + 1`` iterations kept as the
        quantity's history, in checkpoints), minus the noise of each per-link ``Noisy`` layer on the running
        sum received (the receiver's copy is ``sigma_ij + e_ij``: it takes ``e_ij`` now and ``-e_ij`` with the
        next message, so the noise telescopes and no mass is made or lost). ``data``, ``awake``: the round's weights
        and awake rows (:meth:`_link_weights`; a sleeping sender's messages add nothing to what waits); ``state``:
        the quantity's (its history, its draws)."""
        from .. import _core

        delayed = net.delayed()
        noisy = [layer for layer in net.noisy_links() if not layer.silent]
        if delayed is None and not noisy:
            return None
        xp, w = self.xp, msg.shape[1]
        indptr, indices, row_ids, col_ids = links["host"]
        late, ages = xp.zeros((links["nnz"], w), dtype=self.dtype), None
        if delayed is not None:
            D = delayed.max_delay
            ring, senders = self._link_history(state, delayed, links, t, msg if awake is None else msg * awake[:, None])
            ring.done(t)
            if min(D, t):
                ages = delayed.ages(indptr, indices, t, r, row_ids=row_ids, col_ids=col_ids)
                age, slots = xp.asarray(ages), ring.slots()
                for k in range(min(D, t)):  # the messages of t - k, for the links whose newest is older
                    late += (age > k)[:, None] * slots[senders, (t - k) % (D + 1), 0]
                late *= data[:, None]
        for layer in noisy:
            ids = {} if row_ids is None else {"row_ids": row_ids, "col_ids": col_ids}
            z = _core.link_noise(indptr, indices, layer.seed, t, content_round(r, state), w, dtype=self.dtype,
                                 ages=ages, **ids)
            if np.ndim(layer.sigma) == 0:
                late -= xp.asarray(z) * self.dtype.type(layer.sigma)
            else:  # (each copy its sender's sigma: the global id of its column)
                senders = indices if col_ids is None else np.asarray(col_ids)[np.asarray(indices)]
                late -= xp.asarray(z * layer.sigma_of(senders, self.dtype))
        return late * (deliver & ~links["diag"])[:, None]

    def _require(self, nbytes, what, hint):
        """The memory check of a history before it is allocated (under MPI: on every rank)."""
        return self.call(self.require_memory, nbytes, what, hint)

    def _link_history(self, state, delayed, links, t, block):
        """``(ring, senders)``: the history ``state`` keeps of the quantity that ``block`` (this process's rows'
        messages of iteration ``t``) now joins, and the row of the history's blocks each stored entry of
        ``links`` reads (its sender: every node's messages kept here; under MPI its halo's)."""
        ring = delayed.ring(state, t, self.rows, self.n, block.shape[1], 1, self.dtype, require=self._require,
                            xp=self.xp)
        ring.put(t, 0, block)
        _, indices, _, col_ids = links["host"]
        return ring, self.xp.asarray(indices if col_ids is None else np.asarray(col_ids)[indices])

    def gather_links(self, C, block):
        """A per-link block of every process in the order of ``C``'s stored entries, as a host array on the
        root (None on the others)."""
        return np.array(block.get() if hasattr(block, "get") else block)

    def scatter_links(self, C, full):
        """This process's part of a per-link host array in the order of ``C``'s stored entries."""
        return self.xp.asarray(np.ascontiguousarray(full, dtype=self.dtype))

    def broadcast_objects(self, obj):
        """The root's ``obj`` on every process."""
        return obj

    # ------------------------------------------------------------------ per-sample tables (variance reduction)
    def _sample_index(self, table, idx):
        """The rows of a ``(m, rows, reps, d)`` table seen as ``(m * rows * reps, d)`` that hold entry
        ``idx[r, i]`` of row ``i``, repetition ``r``, in node-major order (``i * reps + r``)."""
        xp = self.xp
        entries = table.shape[1] * table.shape[2]
        idx = xp.asarray(idx).reshape(-1, table.shape[1]).T.reshape(-1)  # (rows * reps,), node-major
        return idx * entries + xp.arange(entries)

    def take_samples(self, table, idx, out):
        """``out[i, r] <- table[idx[r, i], i, r]`` (``out``: a node-major block, ``idx``: this process's draws
        of shape (rows,) or (reps, rows)): one gather of whole ``d``-value rows."""
        flat = table.reshape(-1, table.shape[-1])
        self.xp.take(flat, self._sample_index(table, idx), axis=0, out=out.reshape(-1, table.shape[-1]))

    def put_samples(self, table, idx, values):
        """``table[idx[r, i], i, r] <- values[i, r]`` (the inverse of :meth:`take_samples`)."""
        table.reshape(-1, table.shape[-1])[self._sample_index(table, idx)] = values.reshape(-1, table.shape[-1])
