"""Backend selection: one interface, the backend picked from the arrays (never imports CuPy)."""

from __future__ import annotations

BACKENDS = ("auto", "cpu", "cupy", "mpi")


def is_device_array(x):
    """True for arrays that live on a GPU (they expose ``__cuda_array_interface__``)."""
    return hasattr(x, "__cuda_array_interface__")


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
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if backend == "auto":
        backend = "cupy" if any(is_device_array(a) for a in arrays) else "cpu"
    if backend == "cupy":
        from .cuda import require_cupy

        require_cupy()  # one clear error saying what is missing (CuPy, a device, or disabled)
    return backend
