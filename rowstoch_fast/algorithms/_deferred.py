"""Failure handling: the gradient taken and checked, NaN/Inf reported as :class:`DivergenceError` with the
last finite state kept, and the deferred device checks.

Where a backend's kernels flag NaN/Inf on the device (CuPy), ``combine`` and
``copy_in`` return :data:`~rowstoch_fast.backends.DEFERRED` instead of a flag that would cost a
device-to-host sync per step. The check is then journaled (which launch, which iteration, which state),
every later kernel of the run becomes a no-op once one has failed (so the last finite state survives), and
:meth:`Optimizer._settle` reads the device flag every ``check_every`` steps of the backend and before any
read of the state: it rolls the optimizer back to the last finite iterate and raises the
:class:`DivergenceError` that a per-step check would have raised.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np

from .. import backends
from .._checks import caller_outside
from .._metric_names import CALL_KINDS
from ..errors import DivergenceError, GrowthWarning

__all__ = ["FailureHandling", "SAMPLE_CHUNK", "GROWTH_LIMIT"]

#: The default :attr:`~rowstoch_fast.algorithms.Optimizer.growth_limit`: ``max |x|`` growing a millionfold past its
#: level at iteration 16 is warned about (:class:`~rowstoch_fast.errors.GrowthWarning`).
GROWTH_LIMIT = 1e6

#: Samples per call where a method takes the gradients of every sample of a finite sum (:meth:`_each_sample`), at
#: most; fewer where a chunk's gradients would pass :data:`SAMPLE_CHUNK_BYTES`.
SAMPLE_CHUNK = 256
#: The memory a chunk of sample gradients may take (a chunk of blocks of x's size, and about as much again while
#: the objective computes it): what GT-SVRG's snapshot adds to its two blocks a node.
SAMPLE_CHUNK_BYTES = 16 << 20


def _widens(given, block):
    """Whether ``given`` is native float32 and ``block`` float64: a chunk of a float32 objective's sample gradients
    under a float64 optimizer is copied as the per-sample path copies it, exactly (helper 262: that case had taken
    the per-sample path, 2.3x the time). Other dtypes (float16, another byte order: the compiled check takes
    neither, helper 264) take the per-sample path."""
    return given == np.float32 and np.dtype(block) == np.float64


#: A loss-robust push-sum method whose iterates became non-finite while a node's weight was below this fraction of
#: the weight it settles at where no message is lost (``n pi``: 1 on a ring) is told that its in-links delivered
#: nothing for many rounds (:meth:`~rowstoch_fast.DivergenceError.stranded`) rather than "lr too large?": robust
#: gradient-push under Bernoulli losses of 36% on a ring of 16 kept its weights above 1.4e-3 and converged; bursty
#: losses took a node's to 4.4e-8 and diverged at every rate (helper 171).
STRANDED_WEIGHT = 1e-3
#: A Pull-Diag tracker whose scale ``1/[D_t]_ii`` passed this (``1/eps`` of float64) is blamed for iterates that
#: became non-finite, not the rate (:meth:`~rowstoch_fast.DivergenceError.overscaled`): a scaled gradient then
#: swamps every other term. Helper 242's MG-Pull-Diag-GT under sleep reached 1e177-1e288 and diverged at every rate
#: from 1e-12 to 10; a schedule of a directed 64-cycle with self weights 1e-3 reaches 1e54 by iteration 18 and
#: diverges there at lr = 1e-12. Below it the rate stays the suspect: a ring of 16 half asleep peaks at 8.4e6 and
#: diverges from lr = 0.05 up, not at 1e-3 (helper 243).
OVERSCALED = 1.0 / np.finfo(np.float64).eps


class FailureHandling:
    """The part of :class:`~rowstoch_fast.algorithms.Optimizer` that takes gradients and checks what a step made
    (mixed into it; it reads ``self._ops``, ``self._cur``, ``self._nxt``, ``self._journal``, ``self._iteration``)."""

    def _check_point(self, x_buf, iteration):
        """DivergenceError unless the point ``x_buf`` where gradients are about to be taken (iterate ``iteration``)
        is finite: a NaN or Inf made where no combine checks it (a compressed or noisy message of a huge model,
        a delayed history) is the run's divergence, not an error of ``grad_fn`` (an objective refuses a
        non-finite X). On the host only (a device's checks are deferred: its gradients carry the NaN to them)."""
        if self._check_finite and self._ops.xp is np:
            if self.__dict__.get("_verified") == (id(x_buf), iteration):  # (the step before checked this block last)
                return
            self._verify(self._ops.is_finite(x_buf), lambda: self._iterate_error(iteration - 1, x_buf))

    def _overflow_error(self, exc, iteration):
        """The DivergenceError of the iterate of ``iteration`` where ``exc`` is an objective's refusal of it as
        beyond the objective's range (a float32 objective under a float64 optimizer:
        :func:`~rowstoch_fast._checks.as_float_array`'s ``overflow``): the run diverged (it had ended a comparison
        with "X must be finite"). None for any other error, for the start (``x0`` itself: the user's input, not a
        step's), and under MPI (the error is one rank's: the others raise theirs)."""
        bad = getattr(exc, "overflow", None)
        if bad is None or not self._check_finite or iteration == 0 or not backends.one_process(self.backend):
            return None
        node = bad[-2] if len(bad) >= 2 else 0
        error = DivergenceError.overflow(iteration, node, exc.dtype, self._lr_text())
        error.__cause__ = exc
        return error

    def _verified_last(self, finite, block, iteration):
        """Record that ``block``, the model of iteration ``iteration``, was last written by a combine whose check
        found it finite (``finite`` True, not deferred): the next step's :meth:`_check_point` skips its pass."""
        self._verified = (id(block), iteration) if finite is True else None

    def _gradient(self, grad_fn, x_buf, out, iteration):
        """``out <- grad_fn(x_buf)`` (collective under MPI); DivergenceError on NaN/Inf."""
        self._check_point(x_buf, iteration)
        try:
            finite = self._ops.call(self._gradient_local, grad_fn, x_buf, out)
        except ValueError as exc:
            raise self._overflow_error(exc, iteration) or exc
        if self._check_finite:
            self._verify(finite, lambda: self._gradient_error(iteration, out))

    def _each_sample(self, oracle, x_buf, out_for, iteration, use=None):
        """For every sample ``s = 0 .. m - 1`` of a finite sum, in order: ``out_for(s) <- grad f_is(x_buf)`` at
        every node (as :meth:`_gradient`: collective under MPI, DivergenceError on NaN/Inf), then ``use(s)``.
        Where the oracle computes many samples in one call (``sample_gradients``: the package's objectives),
        :data:`SAMPLE_CHUNK` at a time (fewer where they would pass :data:`SAMPLE_CHUNK_BYTES`), the same values:
        a variance-reduced method's table or snapshot of all ``m`` samples costs a NumPy call per chunk, not per
        sample."""
        m = int(oracle.samples)
        many = getattr(oracle, "sample_gradients", None)
        shape = self._shape[:-1]
        size = max(1, min(SAMPLE_CHUNK, SAMPLE_CHUNK_BYTES // max(1, int(np.prod(self._shape)) * 8)))
        start = 0 if many is None or size == 1 else self._each_sample_in_chunks(many, m, size, x_buf, out_for,
                                                                              iteration, use)
        chunk = {}

        def sample(X, s):
            if many is None or size == 1:  # (the ids where X lives, as sample() draws them: a CuPy array on a GPU)
                return oracle.sample_gradient(X, self._ops.xp.full(shape, s, dtype=np.int64))
            first = s - s % size
            if chunk.get("first") != first:  # (the chunk's gradients, computed when its first sample is asked for)
                chunk.clear()
                chunk["G"] = many(X, np.arange(first, min(m, first + size), dtype=np.int64))
                chunk["first"] = first
            return chunk["G"][s - first]

        for s in range(start, m):
            def one(X, s=s):
                return sample(X, s)
            one.call_kind = "sample_gradient"
            self._gradient(one, x_buf, out_for(s), iteration)
            if use is not None:
                use(s)

    def _each_sample_in_chunks(self, many, m, size, x_buf, out_for, iteration, use):
        """:meth:`_each_sample`'s samples ``0 .. m - 1`` a chunk at a time: ``many``'s gradients of a chunk checked
        (finite, of its shape) once, then copied sample by sample (``out_for(s)``, then ``use(s)``), in one process
        on the host; returns where the chunks stopped (``m``, or a chunk whose check failed: the per-sample path
        from there raises what it would have). The per-sample path's checks and counts for each sample had cost
        ~120 us a sample: GT-SAGA's table of 12,800 samples a node, 1.5 s of each tuning stage."""
        if self._ops.xp is not np or not backends.one_process(self.backend):  # (under MPI a rank's chunks are of
            # its own rows: as many collectives on every rank needs the per-sample path)
            return 0
        self._check_point(x_buf, iteration)
        X = self._user_view(x_buf)
        calls = self._calls
        for first in range(0, m, size):
            ids = np.arange(first, min(m, first + size), dtype=np.int64)
            try:
                G = many(X, ids)
            except (ValueError, TypeError):  # (the per-sample path names it, as it would have)
                return first
            if not (type(G) is np.ndarray and G.shape == (ids.size, *self._shape) and G.flags.c_contiguous
                    and (G.dtype == self._ops.dtype or _widens(G.dtype, self._ops.dtype))
                    and self._ops.is_finite(G.reshape(ids.size, -1))):
                return first
            for k, s in enumerate(ids.tolist()):
                out_for(s)[...] = self._internal(G[k])
                calls["sample_gradient"] = calls.get("sample_gradient", 0) + 1
                if use is not None:
                    use(s)
        return m

    #: The kinds of oracle call :attr:`calls` counts, and what one call is (at every node and replica).
    CALL_KINDS = CALL_KINDS

    @property
    def calls(self):
        """The oracle calls of the iterations done so far, by kind (:attr:`CALL_KINDS`): ``{"gradient": 201,
        "prox": 200}``. Each call evaluates every node (and every replica) once, so these are per node. Only
        committed iterations count (a step that raised counts nothing; a resumed optimizer continues the count
        its ``state_dict`` saved). The harness records them as the metrics ``gradient_calls``, ``prox_calls``, ...
        (:data:`rowstoch_fast.user_metrics.CALL_METRICS`)."""
        self._settle()
        return {kind: self._calls.get(kind, 0) for kind in self.CALL_KINDS}

    def _count(self, kind):
        """One oracle call of ``kind`` in the step being made (uncounted again if the step does not commit)."""
        calls = self._calls
        calls[kind] = calls.get(kind, 0) + 1

    def _gradient_error(self, iteration, out):
        """The DivergenceError of a non-finite gradient ``out`` at ``iteration`` (the state kept: the current); for
        a push-sum method on a network that loses messages, with what the lost mass did to its weights (the
        iterates it blew up can overflow the gradient first: a least-squares gradient did, and the error had
        pointed at ``grad_fn``)."""
        node = self._ops.first_nonfinite(out)
        return (self._starved_error(iteration, node, kept=self._iteration)
                or DivergenceError.gradient(iteration, node, self._iteration, told=self.__dict__.get("_telling", False)))

    def _iterate_error(self, t, *blocks):
        """The DivergenceError of non-finite ``blocks`` made by step ``t``; for a push-sum method on a network that
        loses messages, with what the lost mass did to its weights (collective under MPI)."""
        node = self._ops.first_nonfinite(*blocks)
        return (self._starved_error(t + 1, node) or self._overscaled_error(t + 1, node)
                or DivergenceError.iterate(t + 1, node, self._lr_text(), self._other_settings()))

    def _overscaled_error(self, iteration, node):
        """For a method with a Pull-Diag tracker over a network whose rounds differ (a
        :class:`~rowstoch_fast.tracker.NetworkTracker`: losses, sleep, a schedule) whose scale reached past
        :data:`OVERSCALED`: the DivergenceError that says so; else None (collective under MPI). A static graph's
        scales are the graph's, which a comparison's diagnosis names (:func:`~rowstoch_fast.compare.verdict.cause`)."""
        from ..tracker import NetworkTracker

        tracker = self.__dict__.get("_tracker")
        if not isinstance(tracker, NetworkTracker):
            return None
        peak = tracker.max_inverse_diagonal  # (the largest so far: a network's scales are drawn with its rounds)
        return DivergenceError.overscaled(iteration, node, peak, self._lr_text(), getattr(self, "rounds", 1)) \
            if peak > OVERSCALED else None

    def _starved_error(self, iteration, node, kept=None):
        """For a push-sum method on a network that loses messages whose weights lost most of their mass: the
        DivergenceError that says so (at ``iteration``, first at ``node``; ``kept``, where a gradient failed: the
        iteration whose state is kept); for a loss-robust one (running sums per link: a lost message's mass waits
        on its link, lost to nothing, and "use a loss-robust method" would name itself) whose weight at a node fell
        below :data:`STRANDED_WEIGHT` times the weight it settles at without losses, the one that says that; else
        None (collective under MPI)."""
        name = getattr(self, "push_sum_weights", None)
        if not name or self._static:
            return None
        from ..network import losses_of

        causes = list(dict.fromkeys(c for M in self._mats.values() for c in losses_of(M)))
        if not causes:  # (no layer loses a message: delayed mass is on its way, not lost; the weights say nothing)
            return None
        if getattr(self, "per_link_state", False):  # (the weights at the start of the failed step)
            weakest, smallest, level = self.stranded_push_sum_weight()
            if not smallest < STRANDED_WEIGHT * level:  # (a graph whose own weight at a node is that small is
                # not stranded by its losses: helper 173's chain, n pi = 3e-5, had been told so at 1% losses)
                return None
            return DivergenceError.stranded(iteration, node, weakest, smallest, " and ".join(causes), kept=kept,
                                            level=level)
        total, weakest, smallest, n = self._push_sum_weights_read(
            lambda w: (float(w.sum()), int(np.argmin(w)), float(w.min()), w.size))
        if total >= 0.1 * n:  # (most of the mass gone: that, not lr, is what made the step unstable)
            return None
        return DivergenceError.starved(iteration, node, total, n, weakest, smallest, " and ".join(causes), kept=kept)

    def _push_sum_weights_read(self, read):
        """``read(w)`` of a push-sum method's weights (:attr:`push_sum_weights`, one per node, shared by the
        replicas), on every process (gathered and read on the root: collective under MPI); None for a method
        without them."""
        name = getattr(self, "push_sum_weights", None)
        if not name:
            return None
        full = self._ops.gather(self._cur[name])
        return self.share(None if full is None else read(np.asarray(full, dtype=np.float64).ravel()))

    def stranded_push_sum_weight(self):
        """``(node, weight, level)`` of a push-sum method's weights now: the node whose weight is lowest against the
        weight it settles at where no message is lost (``level``: ``n pi[node]`` of the column-stochastic matrix the
        weights mix with, its right Perron vector; 1 where that cannot be had), and that weight; None for a method
        without them (collective under MPI). Relative, so that a node a graph keeps low (a chain's end: ``n pi =
        3e-5``) neither hides nor stands for one its losses stranded (helper 176)."""

        def weakest(w):
            levels = self._lossless_push_sum_weights(w.size)
            node = int(np.argmin(w / levels))
            return node, float(w[node]), float(levels[node])

        return self._push_sum_weights_read(weakest)

    def _lossless_push_sum_weights(self, n):
        """``n pi`` of the column-stochastic matrix the push-sum weights mix with, per node (computed once); ones
        where it cannot be had."""
        levels = self.__dict__.get("_lossless_levels")
        if levels is None:
            from ..network import base_matrix

            try:
                C = base_matrix(self._mats["C"])
                levels = C.n * np.asarray(C.pi, dtype=np.float64).ravel()
                if levels.shape != (n,) or not (levels > 0).all():
                    raise ValueError("no positive Perron vector")
            except Exception:  # noqa: BLE001 - a diagnosis never fails a step
                levels = np.ones(n)
            self.__dict__["_lossless_levels"] = levels
        return levels

    def _gradient_read(self, grad_fn, x_buf, work, iteration, checked_next=False):
        """The gradients at ``x_buf`` as a block this step only reads (collective under MPI): what ``grad_fn``
        returned where the backend can read it as it is (:meth:`~rowstoch_fast.backends.base.Backend.borrows`:
        no copy), else a copy in ``work``; DivergenceError on NaN/Inf. The caller must not write to it.

        ``checked_next``: the caller's next :meth:`_check_iterates` checks a combine that reads the block with a
        coefficient on every row (a NaN or Inf in it makes one there): a borrowed block on the host is then not
        scanned here (a pass over the gradients less, a tenth of a step), and where that check fails the
        gradients are scanned first, a non-finite one raising the gradient's DivergenceError as it did here."""
        self._check_point(x_buf, iteration)
        later = self._ops.xp is np and (checked_next or not self._check_finite)  # (unchecked: no scan at all)
        try:
            finite, block = self._ops.call(self._gradient_local_read, grad_fn, x_buf, work, later)
        except ValueError as exc:
            raise self._overflow_error(exc, iteration) or exc
        if finite is None:  # (left to the next check)
            if self._check_finite:
                self._unchecked_gradient = (iteration, block)
        elif self._check_finite:
            self._verify(finite, lambda: self._gradient_error(iteration, block))
        return block

    def _gradient_local_read(self, grad_fn, x_buf, work, later=False):
        """``(finite, block)`` of this process's gradients (``finite`` None where ``later``), borrowed or copied:
        the same on every process whichever it did (under MPI one rank may borrow while another copies: a collective
        scan in one path only waited forever for the others)."""
        G = self._internal(self._returned_gradient(grad_fn, x_buf))
        if self._ops.borrows(G):
            if later:
                return None, G
            return (self._ops.is_finite(G) if self._ops.xp is np else self._ops.first_nonfinite(G) < 0), G
        finite = self._ops.copy_in(work, G)
        return (None if later else finite), work

    def _gradient_local(self, grad_fn, x_buf, out):
        return self._ops.copy_in(out, self._internal(self._returned_gradient(grad_fn, x_buf)))

    def _returned_gradient(self, grad_fn, x_buf):
        """``grad_fn`` at ``x_buf``'s user view, checked: an array of this backend of x's shape."""
        G = grad_fn(self._user_view(x_buf))
        kind, calls = getattr(grad_fn, "call_kind", "gradient"), self._calls  # (_count, inlined)
        calls[kind] = calls.get(kind, 0) + 1
        told = getattr(grad_fn, "told", False)  # (ask/tell: the user handed G to tell)
        if G is None:
            raise TypeError(("tell(G) got None" if told else "grad_fn returned None") + f"; it must return the "
                            f"gradients at X, an array of shape {self._shape} (the shape of x)")
        if type(G) is tuple and len(G) == 2 and np.ndim(G[1]) == 0:  # (a (gradient, loss) pair: NumPy's
            # "inhomogeneous shape" otherwise; a tuple of rows is an array; tell's G was refused by _check_told)
            raise TypeError(f"grad_fn returned a tuple of 2 (the gradients and a loss?); it must be the gradients "
                            f"alone, an array of shape {self._shape} (the shape of x)")
        returned = type(G).__name__
        G = self._ops.user_array(G, "tell(G)'s G" if told else "the value grad_fn returns")
        if G.dtype.kind not in "fiu":  # (before the shape: a str or a generator read "returned shape ()")
            raise TypeError(("tell(G) needs" if told else "grad_fn must return") + " a real numeric array, got "
                            + (f"dtype {G.dtype}" if returned in ("ndarray", "list", "tuple") else
                               f"a {returned} (dtype {G.dtype})"))
        if tuple(G.shape) != self._shape:
            raise ValueError(("tell(G) got" if told else "grad_fn returned") + f" shape {tuple(G.shape)}, expected "
                             f"{self._shape} (the shape of x)")
        return G

    def _check_iterates(self, finite, t, *blocks):
        """DivergenceError for iteration ``t + 1`` unless ``finite`` on every process (where it is not and the
        gradients that :meth:`_gradient_read` left to this check hold a NaN or Inf, their DivergenceError)."""
        if self._check_finite:
            pending = self.__dict__.pop("_unchecked_gradient", None)
            if pending is not None:
                if self._ops.all_true(finite):  # (on the host: a flag, agreed by every process)
                    return
                iteration, gradient = pending
                self._verify(self._ops.is_finite(gradient), lambda: self._gradient_error(iteration, gradient))
            self._verify(finite, lambda: self._iterate_error(t, *blocks))

    def _verify(self, finite, error):
        """Raise ``error()`` unless ``finite`` (on every process); a DEFERRED check is journaled for
        :meth:`_settle` with the state to roll back to."""
        if finite is backends.DEFERRED:
            self._journal.append((self._ops.last_launch, self._iteration, self._cur, self._nxt, self._calls_before,
                                  error))
        elif not self._ops.all_true(finite):
            self._settle()  # a deferred check that failed earlier comes first
            raise error()

    def _check_growth(self):
        """:class:`~rowstoch_fast.errors.GrowthWarning` (once) where ``max |x|`` passed ``growth_limit`` times its
        level at the first iteration read (16; after a load, the first read after it), at least 1: divergence
        without NaN, which the finite checks cannot see. A run converging to a far minimiser has most of the way
        behind it by then (a millionfold more is no minimiser's distance), a diverging one keeps growing.

        Read at iterations 16, 32, 64, ..., 1024 and every 1024th after (one pass over the model and, under MPI,
        one reduction: collective, as the iterations are the same on every rank). Under MPI the ranks first agree
        there on the settings they step with (:meth:`_agree_on_settings`), whatever their ``growth_limit``."""
        limit = self.growth_limit
        t = self._iteration
        if t < 16 or (t & (t - 1) and t % 1024):
            return  # (step calls it at those iterations only)
        if self._ops.agrees:
            self._agree_on_settings()
        if not limit or self.__dict__.get("_growth_warned"):
            return
        self._settle()  # (a device's deferred NaN check first: a non-finite iterate is a DivergenceError)
        size = self._ops.max_abs(self._cur[self.model])
        scale = self.__dict__.get("_growth_scale")
        if scale is None:  # (the first read: the level growth is measured from)
            self._growth_scale, self._growth_read = max(size, 1.0), t
            return
        if size > limit * scale:
            self._growth_warned = True
            first = self.__dict__.get("_growth_read")  # (helper 246: "from 1.07e+44 (its level at the first read)"
            # had not said that the first read came 16 iterations in, the run already far off its start)
            at = f"at iteration {first}, the first read" if first is not None else "its level at the first read"
            warnings.warn(f"{type(self).__name__}: max |x| grew from {scale:.3g} ({at}) to "
                          f"{size:.3g} at iteration {t}, more than growth_limit = {limit:g} times, without NaN: the "
                          f"run is likely diverging; try a smaller lr than {self._lr_text()} (opt.growth_limit = "
                          "None silences this)", GrowthWarning, stacklevel=caller_outside())

    def _agree_on_settings(self):
        """Under MPI, a ValueError on every rank where the settings one can assign after construction (``lr``,
        ``growth_limit``; ``check_finite`` is fixed there) differ between the ranks, naming the first (collective;
        read with the growth check, at iterations 16, 32, ..., 1024 and every 1024th after). ``opt.lr = ...`` on
        one rank (a rate computed from that rank's own loss) had run a mixture of rates silently; ``growth_limit =
        None`` on one rank had left the others waiting in the growth check's reduction (helper 203)."""
        lr = self.lr
        if np.ndim(lr) and np.size(lr) > 4:  # (one per node or replica: its digest, not a million floats gathered)
            values = np.ascontiguousarray(np.asarray(lr, dtype=np.float64))
            lr = f"{values.size} rates (digest {hashlib.blake2b(values.tobytes(), digest_size=8).hexdigest()})"
        else:
            lr = np.asarray(lr, dtype=np.float64).tolist()
        backends.check_same_on_every_process(
            "mpi", {"lr": lr, "growth_limit": self.growth_limit, "check_finite": self._check_finite},
            f"{type(self).__name__}'s settings at iteration {self._iteration}", comm=self._ops.comm)

    def _settle(self):
        """Read the deferred checks (one device-to-host read); if one failed, go back to the state before its
        step and raise its DivergenceError."""
        journal = self._journal
        if not journal:
            return
        self._journal = []
        failed = self._ops.failed_launch()
        if not failed:
            return
        for launch, iteration, cur, nxt, calls, error in journal:
            if launch == failed:
                self._cur, self._nxt, self._iteration, self._calls = cur, nxt, iteration, dict(calls)
                raise error()
        raise RuntimeError(f"internal error: launch {failed} failed its NaN/Inf check but was not journaled")

    def _lr_text(self):
        lr = self._hyper.get("lr")
        return lr if np.ndim(lr) == 0 else f"{float(np.max(lr))} (largest)"

    def _other_settings(self):
        """The method's other real-valued settings as ``"mu = 1e+300, server_lr = 1.0"`` ("" without any): a
        divergence may be theirs (a prox weight, a server rate), not the rate's."""
        return ", ".join(f"{k} = {v!r}" for k, v in self._hyper.items() if k != "lr" and isinstance(v, float))
