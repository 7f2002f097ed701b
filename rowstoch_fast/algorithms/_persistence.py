"""Persistence: ``state_dict`` (everything needed to resume bit-identically, as NumPy arrays) and
``from_state_dict`` (any backend), with the saved matrix or time-varying network checked against the one given."""

from __future__ import annotations

import json

import numpy as np

from .. import backends
from .._checks import check_csr_arrays
from ..mixing import MixingMatrix
from ..network import as_undirected
from ..network import describe as network_describe
from ._guards import exclusive

__all__ = ["KINDS", "Persistence", "matrix_from_state"]

#: The mixing matrices an algorithm can name (constructor keywords) and the kind each must be.
KINDS = {"A": "row", "C": "column", "W": "doubly"}


def _prefix(name):
    """The key prefix of matrix ``name`` in a state dict (``A``: none; ``C``: ``"C_"``)."""
    return "" if name == "A" else name + "_"


def _check_network(saved, net, name):
    """A ValueError unless ``net`` is the time-varying network a state was saved on (``saved``: its
    :func:`~rowstoch_fast.network.describe` as JSON; a state of an older version holds its repr)."""
    from ..network import first_difference

    try:
        described = json.loads(saved)
    except ValueError:  # an older state: its repr is all there is to compare
        if saved != repr(net):
            raise ValueError(f"{name} is not the network this state was saved on ({saved}; got {net!r})") from None
        return
    if isinstance(net, MixingMatrix):
        raise ValueError(f"this state was saved on a time-varying network ({described.get('type')}); {name} is a "
                         f"static MixingMatrix")
    found = first_difference(described, network_describe(net))
    if found:
        field, old, new = found
        raise ValueError(f"{name} is not the network this state was saved on: its {field} was {old!r}, this one "
                         f"has {new!r}")


def _as_run(net, name):
    """The network a method runs ``net`` as: an undirected method's W through :func:`~rowstoch_fast.network.
    as_undirected` (what its constructor applies), any other as it is."""
    if KINDS[name] != "doubly":
        return net
    try:
        return as_undirected(net)
    except ValueError:  # (the constructor says why)
        return net


def matrix_from_state(state, M=None, prefix="", kind="row"):
    """The :class:`MixingMatrix` a ``state_dict`` was saved with (keys ``prefix + "indptr"`` etc.), its CSR
    validated first (a malformed one crashes SciPy); or ``M`` after checking that it is that matrix. Also
    checks ``state["shape"]``."""
    import scipy.sparse as sp

    data, indptr, indices = (np.asarray(state[prefix + k]) for k in ("data", "indptr", "indices"))
    if indptr.ndim != 1 or indptr.size < 2:
        raise ValueError(f"state[{prefix + 'indptr'!r}] must be a 1-D array of n + 1 >= 2 entries, "
                         f"got shape {indptr.shape}")
    n = indptr.size - 1
    check_csr_arrays(indptr, indices, n, n, "state (the saved matrix)", data)
    shape = np.asarray(state["shape"])
    if shape.ndim != 1 or shape.size not in (2, 3) or not np.issubdtype(shape.dtype, np.integer) or (shape < 1).any():
        raise ValueError(f"state['shape'] must be (n, d) or (reps, n, d), got {shape.tolist()}")
    if int(shape[-2]) != n:
        raise ValueError(f"state['shape'] has {int(shape[-2])} nodes but the saved matrix has {n}")
    csr = sp.csr_array((data, indices, indptr), shape=(n, n))
    if M is None:
        return MixingMatrix(csr, dtype=data.dtype, stochastic=kind)
    name = prefix.rstrip('_') or 'A'
    if not isinstance(M, MixingMatrix) or M.n != n or (M.csr != csr).nnz:
        raise ValueError(f"{name} is not the matrix this state was saved with (its size or weights differ)")
    if M.dtype != data.dtype:  # (weights exact in both precisions compare equal: the run would change precision)
        raise ValueError(f"{name} is the matrix this state was saved with but in {M.dtype}, and the state was saved "
                         f"in {data.dtype}: pass {name}.astype({str(data.dtype)!r}), or A=None to rebuild it")
    return M


def _plain(value):
    """A saved hyperparameter as a Python scalar (or an array for a per-node one)."""
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr


class Persistence:
    """The part of :class:`~rowstoch_fast.algorithms.Optimizer` that saves and restores it (mixed into it)."""

    def _save_extra(self):
        """State beyond the blocks of :attr:`state`, as ``{key: host array}`` on the root (collective under
        MPI; the values may be None on the other ranks). Default: none."""
        return {}

    def _load_extra(self, state):
        """Restore what :meth:`_save_extra` saved (``state``: the whole dict)."""

    @classmethod
    def _saved_options_of(cls, options, state):
        """The constructor options of :attr:`saved_options` a state was saved with (``options``: those it holds);
        a class whose older states lacked one says here what they had. Default: as held."""
        return options

    @exclusive
    def state_dict(self):
        """Everything needed to resume bit-identically, as NumPy arrays and scalars (on the root; None on the
        other MPI ranks, and every rank must call it).

        The dict can be written with ``np.savez`` and read back with
        ``dict(np.load(path))``; any backend can resume it. Over a network whose links vary by iteration (sleep,
        a schedule) it holds :meth:`traffic`'s count so far (keys ``"traffic/<matrix>"``), which a resume
        continues from, as it does :attr:`calls` (keys ``"calls/<kind>"``) and, where
        :meth:`messages_dropped` has counted, its count (keys ``"dropped/<matrix>"``).
        """
        self._settle()
        traffic = self._traffic_state()
        blocks = {name: self._ops.gather(self._cur[name]) for name in self.state}
        blocks.update(self._save_extra())  # (collective too: an algorithm's other state, e.g. per-link sums)
        blocks.update(self._ops.save_channels())  # (a delayed network's messages in flight)
        if not self._ops.is_root:
            return None
        out = {"format": np.array(f"rowstoch_fast.{type(self).__name__}/1")}
        for name, M in self._mats.items():
            prefix = _prefix(name)
            if not isinstance(M, MixingMatrix):  # a time-varying network is passed again to from_state_dict,
                out[prefix + "network"] = np.array(json.dumps(network_describe(M)))  # and checked against this
                continue
            c = M.csr
            out.update({prefix + "indptr": c.indptr.copy(), prefix + "indices": c.indices.copy(),
                        prefix + "data": c.data.copy()})
        out["shape"] = np.array(self._global_shape, dtype=np.int64)
        saved = {**self._hyper, **{k: getattr(self, k) for k in self.saved_options}}
        unset = [k for k, v in saved.items() if v is None]  # (np.array(None) is an object array, which np.load
        # refuses without pickle: the names are saved instead)
        out.update({k: np.array(v) for k, v in saved.items() if v is not None})
        if unset:
            out["unset"] = np.array(unset)
        if "_lr_next" in self.__dict__:  # (a rate assigned between ask and tell: the told step's, from its
            out["lr_next"] = np.array(self.__dict__["_lr_next"])  # gradients on; a resume asks again)
        out.update({"iteration": np.array(self.iteration), "initialized": np.array(self._initialized),
                    "check_finite": np.array(self.check_finite)})
        out.update(blocks)
        out.update(traffic)
        out.update({f"calls/{kind}": np.array(k, dtype=np.int64) for kind, k in self._calls.items()})
        return out

    @classmethod
    def from_state_dict(cls, state, A=None, *, C=None, W=None, lr=None, backend="auto", comm=None, partition=None,
                        regularizer=None):
        """Rebuild an optimizer from :meth:`state_dict` (optionally with a new ``lr``), on any backend.

        Parameters
        ----------
        state : mapping
            As returned by :meth:`state_dict` (or loaded from an ``.npz``).
        A, C, W : MixingMatrix, optional
            Reuse these matrices (and their cached trackers) instead of
            rebuilding them from the state; they must be the saved ones.
        lr : float, optional
            Continue with another step size.
        backend, comm, partition
            As in the constructor (under MPI every rank passes the same state).
        regularizer : Regularizer, optional
            A proximal method's regularizer, which must be the saved one: needed for a user-defined
            :class:`~rowstoch_fast.composite.Prox` (only its name is saved); the built-in ones are rebuilt.
        """
        fmt = f"rowstoch_fast.{cls.__name__}/1"
        if backend == "mpi" or comm is not None:
            _same_state_on_every_rank(state, comm)
        with backends.checked_on_every_process("mpi" if backend == "mpi" or comm is not None else backend, comm):
            # (under MPI a rank's refusal is every rank's: another matrix, network or regularizer given to one rank
            # had left the others waiting in the optimizer's agreement, helper 203)
            if state is None:
                raise ValueError(f"state is None: pass the dict returned by {cls.__name__}.state_dict() (under MPI it "
                                 "is returned on the root only, None on the other ranks)")
            if not hasattr(state, "get") or not hasattr(state, "keys"):  # ("'list' object has no attribute 'get'")
                raise TypeError(f"state must be the dict returned by {cls.__name__}.state_dict(), got "
                                f"{type(state).__name__}")
            finite_checked = np.asarray(state.get("check_finite", True))
            if finite_checked.dtype != bool or finite_checked.ndim:  # ("no" had read as True, helper 193)
                raise ValueError(f"state['check_finite'] must be true or false, got {state.get('check_finite')!r}")
            unset = [str(k) for k in np.atleast_1d(np.asarray(state.get("unset", [])))]  # (hyperparameters left None)
            needed = {"format", "shape", "iteration", *(set(cls.hyper) - set(unset))}
            if not cls.saved_options:  # (the blocks are the class's: checked before anything is built; with options,
                needed |= set(cls.state)  # once the optimizer of those options says which)
            given = {"A": A, "C": C, "W": W}
            for name in cls.matrices:
                prefix = _prefix(name)
                if prefix + "network" in state:
                    if given[name] is None:
                        raise ValueError(f"this state was saved on a time-varying network "
                                         f"({state[prefix + 'network']}); pass that network again: "
                                         f"from_state_dict(state, {name}=network)")
                    continue
                needed |= {prefix + k for k in ("indptr", "indices", "data")}
            missing = needed - set(state)
            if missing:
                raise ValueError(f"state is missing {sorted(missing)}; pass the dict returned by "
                                 f"{cls.__name__}.state_dict()")
            if str(state["format"]) != fmt:
                raise ValueError(f"state has format {str(state['format'])!r}, expected {fmt!r}")
            for name in cls.matrices:
                if _prefix(name) + "network" in state:
                    _check_network(str(state[_prefix(name) + "network"]), _as_run(given[name], name), name)
            mats = {name: (given[name] if _prefix(name) + "network" in state else
                           matrix_from_state(state, given[name], _prefix(name), KINDS[name]))
                    for name in cls.matrices}
            known = (*cls.hyper, *cls.saved_options)
            if not set(unset) <= set(known):
                raise ValueError(f"state['unset'] names {sorted(set(unset) - set(known))}, which are not "
                                 f"{cls.__name__}'s saved settings ({', '.join(known)})")
            hyper = {k: None if k in unset else _plain(state[k]) for k in cls.hyper}
            options = cls._saved_options_of({k: None if k in unset else _plain(state[k]) for k in cls.saved_options
                                             if k in state or k in unset}, state)
            if regularizer is not None:
                if "regularizer" not in cls.hyper:
                    raise ValueError(f"{cls.__name__} takes no regularizer (it is not a proximal method)")
                from ..composite import describe_regularizer

                if json.loads(describe_regularizer(regularizer)) != json.loads(str(hyper["regularizer"])):
                    raise ValueError(f"regularizer {regularizer!r} is not the one this state was saved with "
                                     f"({hyper['regularizer']})")
                hyper["regularizer"] = regularizer
            if lr is not None:
                hyper["lr"] = lr
            shape = tuple(int(s) for s in np.asarray(state["shape"]))
            model = np.asarray(state.get(getattr(cls, "model", "x"), 0.0))  # (a method without a matrix runs in x0's
            x0 = backends.to_backend(backend, np.zeros(shape, dtype=model.dtype if model.dtype.kind == "f"  # precision:
                                                        else np.float64))  # the saved model's)
        try:
            opt = cls(x0=x0, **mats, **hyper, **options, backend=backend,
                      check_finite=bool(finite_checked),
                      **{k: v for k, v in (("comm", comm), ("partition", partition)) if v is not None})
        except (ValueError, TypeError) as exc:  # a saved hyperparameter out of range: say it came from the state
            raise type(exc)(f"state: {exc} (the saved {', '.join(repr(k) for k in (*cls.hyper, *options))})") \
                from None
        missing = set(opt.state) - set(state)  # (the blocks of the saved form: Pull-Diag-GT's FROST form has no xw)
        if missing:
            raise ValueError(f"state is missing {sorted(missing)}; pass the dict returned by "
                             f"{cls.__name__}.state_dict()")
        for name in opt.state:
            arr = np.asarray(state[name])
            buf = opt._cur[name]
            if arr.shape != (opt.n, buf.shape[1]):
                raise ValueError(f"state[{name!r}] has shape {arr.shape}, expected {(opt.n, buf.shape[1])}")
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"state[{name!r}] must hold numbers, got dtype {arr.dtype}")
            finite = np.isfinite(arr)
            if opt.check_finite and not finite.all():  # a damaged state, not a step size (it was reported as
                node = int(np.argwhere(~finite)[0][0])  # divergence blaming lr)
                raise ValueError(f"state[{name!r}] holds a NaN or Inf (node {node}): the state is damaged (a state "
                                 "saved by state_dict() with check_finite is always finite)")
            buf[...] = opt._ops.local(arr)
        iteration = np.asarray(state["iteration"])
        if iteration.ndim or iteration.dtype.kind not in "iu" or int(iteration) < 0:
            raise ValueError(f"state['iteration'] must be an integer >= 0, got {iteration.tolist()!r}")
        opt._iteration = int(iteration)
        resumed = getattr(getattr(opt, "_tracker", None), "resumed_at", None)
        if resumed is not None:  # (a network's tracker replays V_t to here: no jump's bound, helper 213's note)
            resumed(opt._iteration)
        opt._initialized = bool(state.get("initialized", True))
        if opt.iteration and not opt._initialized:  # (the first step initializes: a damaged state)
            raise ValueError(f"state['initialized'] is False at iteration {opt.iteration}: an optimizer is "
                             "initialized by its first step, so the state is damaged")
        opt._load_extra(state)
        opt._ops.load_channels(state)
        opt._restore_traffic(state)  # (traffic() continues the saved count)
        opt._calls = _saved_calls(state, opt.CALL_KINDS)  # (calls continues the saved count: 0 for an older state)
        if opt._talking_iterations() > 0 and opt._initialized and not any(str(k).startswith("delayed/") for k in state) \
                and any(getattr(M, "delayed", lambda: None)() is not None for M in opt._mats.values()):
            raise ValueError("state has no delayed-message history (keys 'delayed/...'): its network delays "
                             f"messages, and after {opt._talking_iterations()} communication rounds the messages in "
                             "flight are part of the "
                             "state (a state_dict() of this network holds them); without them the run would "
                             "continue differently")
        if lr is not None and opt._initialized:
            opt._lr_changed()
        if lr is None and "lr_next" in state:  # (saved between ask and tell: the rate tell makes it, as there)
            pending = _plain(state["lr_next"])
            try:
                pending = opt._check_lr(pending)
                opt._check_rates_fit(pending, opt._global_shape, opt._ops.dtype)
            except (ValueError, TypeError) as exc:
                raise type(exc)(f"state['lr_next']: {exc}") from None
            opt._lr_next = pending
        return opt


def _digest(state):
    """A digest of a state dict (its keys, and each value's dtype, shape and bytes); None for None."""
    import hashlib

    if state is None:
        return None
    h = hashlib.sha256()
    for key in sorted(map(str, state)):
        value = np.ascontiguousarray(state[key])
        h.update(f"{key}|{value.dtype.str}|{value.shape}|".encode())
        h.update(value.tobytes() if value.dtype.kind != "O" else repr(value.tolist()).encode())
    return h.hexdigest()


def _same_state_on_every_rank(state, comm):
    """Under MPI: a ValueError on every rank unless every rank passed the same state (a rank with None: the state
    of ``state_dict()``, which the root alone returns, not shared; a rank of another state: the ranks resumed
    different runs, which hung or mixed them silently)."""
    try:
        from mpi4py import MPI
    except ImportError:  # (the constructor says what the MPI backend needs)
        return
    comm = comm if comm is not None else MPI.COMM_WORLD
    digests = comm.allgather(_digest(state))
    if len(set(digests)) == 1:
        return
    missing = [r for r, d in enumerate(digests) if d is None]
    if missing:
        raise ValueError(f"state is None on rank(s) {missing}: state_dict() returns the state on the root only (None "
                         "on the other ranks); share it first (state = comm.bcast(state, root=0)), or save it with "
                         "np.savez and load it on every rank")
    groups = sorted({d: [r for r, e in enumerate(digests) if e == d] for d in digests}.values())
    raise ValueError(f"the ranks passed different states (ranks {' / '.join(map(str, groups))}): every rank must "
                     "resume the same state_dict()")


def _saved_calls(state, kinds):
    """The oracle calls a state saved (keys ``"calls/<kind>"``), checked: a known kind, an integer >= 0."""
    calls = {}
    for key in state:
        if not str(key).startswith("calls/"):
            continue
        kind, value = str(key)[len("calls/"):], np.asarray(state[key])
        if kind not in kinds:
            raise ValueError(f"state[{key!r}]: no such kind of oracle call; the kinds are {', '.join(kinds)}")
        if value.ndim or value.dtype.kind not in "iu" or int(value) < 0:
            raise ValueError(f"state[{key!r}] must be an integer >= 0 (the calls so far), got {value.tolist()!r}")
        calls[kind] = int(value)
    return calls
