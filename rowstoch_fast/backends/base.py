"""What every backend shares: the operations that read the same on NumPy and CuPy arrays (``self.xp``)."""

from __future__ import annotations

import importlib

import numpy as np

__all__ = ["Backend", "DEFERRED", "is_device_array"]

#: Array types whose every instance lives on a GPU (CuPy's ndarray, once the CuPy backend has found CuPy).
DEVICE_TYPES = set()


def is_device_array(x):
    """True for arrays that live on a GPU (they expose ``__cuda_array_interface__``). A type in
    :data:`DEVICE_TYPES` is taken at its word: CuPy builds the interface's dict each time it is asked for, and
    the launch paths ask several times per step."""
    return type(x) in DEVICE_TYPES or hasattr(x, "__cuda_array_interface__")


def is_network(A):
    """True for a time-varying network of :mod:`rowstoch_fast.network` (it has a per-iteration :meth:`plan`),
    False for a static :class:`~rowstoch_fast.MixingMatrix`. Backends ask this rather than import either class:
    they sit above both, and :class:`~rowstoch_fast.MixingMatrix` reaches the device backend through
    :func:`device_operations`."""
    return hasattr(A, "plan")


def device_operations():
    """The module that runs :class:`~rowstoch_fast.MixingMatrix`'s operations on device arrays (the CuPy
    backend's ``mix`` / ``mix_power``), loaded by name on first use as :func:`rowstoch_fast.backends.create`
    loads a backend: the matrix layer sits below the backends and never imports one (``tests/test_layout.py``
    checks that the CuPy backend imports nothing that imports the matrix layer)."""
    return importlib.import_module("rowstoch_fast.backends.cupy")


class _Deferred:
    """What ``combine`` / ``copy_in`` return when the NaN/Inf check is a flag on the device, read later
    (see :mod:`rowstoch_fast.algorithms._base`)."""

    def __bool__(self):
        raise TypeError("a deferred NaN/Inf check has no truth value until the backend's flag is read")

    def __repr__(self):
        return "DEFERRED"


DEFERRED = _Deferred()


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
    #: Steps between two reads of deferred checks (only backends whose checks return DEFERRED have any).
    check_every = 1
    #: The id of the last checked launch (deferring backends).
    last_launch = 0

    def __init__(self, **options):
        if options:
            raise TypeError(f"backend {self.name!r} takes no option {', '.join(map(repr, sorted(options)))} "
                            "(comm and partition are options of backend='mpi')")

    def call(self, fn, *args):
        """Run ``fn(*args)`` (under MPI: on every rank, raising on all if it raises on one)."""
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

    def failed_launch(self):
        """The id of the first deferred check that failed since the last call (0: none), clearing it."""
        return 0

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

    def broadcast_objects(self, obj):
        """The root's ``obj`` on every process."""
        return obj
