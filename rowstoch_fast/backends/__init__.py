"""Backends: the network operations the algorithms are written against, once per kind of hardware.

A backend owns where the rows of every block live (all nodes in host memory, all nodes on a GPU, or one
MPI rank's nodes) and offers the operations of :class:`~rowstoch_fast.backends.cpu.CpuBackend`: mixing with
a row- or column-stochastic matrix (``A^R X``), the element-wise update ``combine`` (a sum of row-scaled
blocks, with its NaN/Inf flag, or :data:`DEFERRED` where the flag stays on the device until read), the first
non-finite node, reductions over all nodes, allocation, calling
the user's gradient (collectively under MPI) and gathering. A backend may also offer a fused kernel for a
hot path (``gt_y_phase``, Pull-Diag-GT's y phase, on the CPU); algorithms use it when present
and the generic operations otherwise.

Backends never import an algorithm; algorithms never import a backend by name (they call :func:`create`).
"""

from __future__ import annotations

import importlib
import json
import logging

from .. import _device
from .base import DEFERRED, is_device_array

BACKENDS = ("auto", "cpu", "cupy", "mpi")
_MODULES = {"cpu": ("rowstoch_fast.backends.cpu", "CpuBackend"), "cupy": ("rowstoch_fast.backends.cupy", "CupyBackend"),
            "mpi": ("rowstoch_fast.backends.mpi", "MpiBackend")}

__all__ = ["BACKENDS", "DEFERRED", "create", "every_process_here", "is_device_array", "nodes_per_process",
           "on_the_root", "one_process", "require_block_memory", "resolve_backend", "to_backend"]


#: The modules running device operations for the layers below (see :func:`rowstoch_fast._device.provide`).
_DEVICE_MODULES = {"matrix": "rowstoch_fast.backends.cupy", "logistic": "rowstoch_fast.backends.cupy_logistic"}


def _device_operations(what):
    return importlib.import_module(_DEVICE_MODULES[what])


_device.provide(_device_operations)


def resolve_backend(backend, *arrays):
    """Return the concrete backend name for ``backend`` given the input arrays.

    ``"auto"`` picks ``"cpu"`` for host arrays and ``"cupy"`` for device arrays.
    A backend that cannot run here raises ``RuntimeError`` saying what is
    missing, never a silent fallback.

    Examples
    --------
    >>> resolve_backend("auto", [1.0, 2.0])
    'cpu'
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if backend == "auto":
        backend = "cupy" if any(is_device_array(a) for a in arrays) else "cpu"
    if backend == "cupy":
        from .cupy import require_cupy

        require_cupy()  # one clear error saying what is missing (CuPy, a device, or disabled)
    return backend


def create(backend, x0=None, **options):
    """The backend object for ``backend`` (``"auto"`` resolved from ``x0``); ``options`` are its own
    (``comm`` and ``partition`` for ``"mpi"``; a backend refuses options it does not know)."""
    name = resolve_backend(backend, x0)
    module, cls = _MODULES[name]
    if backend != name:
        logging.getLogger(__name__).debug("backend=%r: the %s backend (for x0 of type %s)", backend, name,
                                          type(x0).__name__)
    return getattr(importlib.import_module(module), cls)(**options)


def to_backend(backend, array):
    """``array`` where ``backend`` keeps its blocks: the one explicit host-to-device copy of a run for
    ``"cupy"``, unchanged otherwise (a runner or a harness calls this once on ``x0``)."""
    if resolve_backend(backend, array) == "cupy" and not is_device_array(array):
        from .cupy import to_gpu

        return to_gpu(array)
    return array


def require_block_memory(backend, array, nbytes, what, hint=""):
    """MemoryError at once when a run's blocks (about ``nbytes``) do not fit where ``backend`` keeps them: the
    GPU's free memory for ``"cupy"`` (with one host copy of ``array`` on its way there), the host's otherwise
    (:func:`rowstoch_fast._checks.require_memory`)."""
    from .._checks import require_memory

    if resolve_backend(backend, array) == "cupy":
        from .cupy import require_device_memory

        require_device_memory(nbytes, what, hint)
        if not is_device_array(array):
            require_memory(8 * array.size, f"{what}: the start on its way to the GPU", hint)
    else:
        require_memory(nbytes, what, hint)


def check_same_on_every_process(backend, value, what, comm=None):
    """Under MPI, a ValueError on every rank where ``value`` (a dict, JSON-like, or a function making it: called
    under MPI only) is not the same on every rank of ``comm`` (default: ``MPI.COMM_WORLD``), naming the first key
    that differs (a different ``lr`` or seed on one rank ran silently wrong, a different graph or method hung);
    elsewhere nothing. Collective under MPI."""
    if one_process(backend):
        return
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    every = comm.allgather(value() if callable(value) else value)
    found = first_difference(every)
    if found is not None:
        rank, key = found
        anonymous = "<lambda at 0x" in repr(every[0].get(key))  # (helper 203: a Prox of the same lambda on every
        # rank, named by its identity in each process, was refused without a word of why)
        raise ValueError(f"{what} differ between the MPI ranks: {key} is {every[0].get(key)!r} on rank 0 and "
                         f"{every[rank].get(key)!r} on rank {rank}; every rank must run the same"
                         + ("; an anonymous function is named by its identity in each process: name it (Prox(value, "
                            "prox, name=...))" if anonymous else ""))


class checked_on_every_process:
    """``with checked_on_every_process(backend): ...``: under MPI, collective where the block ends, whether it
    raised or not: an exception raised in it on one rank is raised on every rank (the others get a
    :class:`~rowstoch_fast.errors.RemoteError` naming that rank), so that no rank waits in a later collective for one
    that failed a check alone (helper 203: a bad ``iterations`` or metric given to ``run()`` on one rank had left the
    others waiting in the settings' agreement). The block must make no collective call of its own. Elsewhere
    nothing."""

    def __init__(self, backend, comm=None):
        self.backend, self.comm = backend, comm

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if one_process(self.backend) or not (exc is None or isinstance(exc, Exception)):  # (a KeyboardInterrupt:
            # the run's own agreement on signals)
            return False
        comm = self.comm
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        from .mpi import remote_failure

        remote = remote_failure(comm, exc)
        if remote is not None:
            raise remote
        return False  # (this rank's own error, if any, goes on as it was)


def first_difference(every):
    """``(rank, key)``: the first rank whose dict of ``every`` (one per rank, JSON-like) is not rank 0's, and the
    first key where (in rank 0's order, then the other's), compared as JSON (a NaN equals a NaN); None where every
    one is the same."""
    same = lambda a, b: json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True,  # noqa: E731
                                                                                 default=repr)
    for rank, other in enumerate(every[1:], 1):
        if not same(other, every[0]):
            keys = dict.fromkeys([*every[0], *other])
            return rank, next((k for k in keys if not same(every[0].get(k), other.get(k))), None)
    return None


def every_process_here(backend, timeout=None):
    """Under MPI, wait until every rank has come here (a barrier polled from Python:
    :func:`~rowstoch_fast.backends.mpi.polled_barrier`), ``timeout`` seconds at most: whether all came. One process:
    True at once. A barrier that timed out stays pending (a later barrier would match it): for the moment before
    the process ends."""
    if one_process(backend):
        return True
    from .mpi import polled_barrier

    return polled_barrier(timeout)


def on_the_root(backend, fn):
    """``fn()`` run by one process: its result there, None on the others (under MPI, rank 0's; its error raised on
    every rank, a :class:`~rowstoch_fast.errors.RemoteError` on the others). Collective under MPI."""
    if one_process(backend):
        return fn()
    from mpi4py import MPI

    from .mpi import collective

    comm = MPI.COMM_WORLD
    return collective(comm, lambda: fn() if comm.Get_rank() == 0 else None)


def nodes_per_process(backend, n):
    """The most of ``n`` nodes one process holds on ``backend``: all of them, or under MPI a rank's share."""
    if one_process(backend):
        return n
    from mpi4py import MPI

    return -(-n // MPI.COMM_WORLD.Get_size())


def one_process(backend):
    """Whether ``backend`` runs in this process alone (under MPI each rank runs its share, and a check or a
    write that one rank does alone can leave the others waiting)."""
    return not (isinstance(backend, str) and backend == "mpi")  # (an array given as the backend: refused later,
    # by name, not here with NumPy's "truth value of an array is ambiguous")
