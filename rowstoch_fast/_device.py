"""Device arrays as the layers below the backends see them: a leaf module (it imports nothing of the package).

The matrix, objective and protocol layers ask here whether an array lives on a GPU (:func:`is_device_array`) and
for the module that runs an operation on one (:func:`device_operations`). The backends provide those modules:
:mod:`rowstoch_fast.backends` registers its loader with :func:`provide` when it is imported (``import
rowstoch_fast`` imports it), so no import runs from those layers up into the backends and the device code
(CUDA kernels, CuPy) is loaded only when a device array asks for it.
"""

from __future__ import annotations

__all__ = ["DEVICE_TYPES", "device_operations", "is_device_array", "provide"]

#: Array types whose every instance lives on a GPU (CuPy's ndarray, once the CuPy backend has found CuPy).
DEVICE_TYPES = set()

_LOADER = []  # the backends' loader: what -> module


def is_device_array(x):
    """True for arrays that live on a GPU (they expose ``__cuda_array_interface__``). A type in
    :data:`DEVICE_TYPES` is taken at its word: CuPy builds the interface's dict each time it is asked for, and
    the launch paths ask several times per step."""
    return type(x) in DEVICE_TYPES or hasattr(x, "__cuda_array_interface__")


def provide(loader):
    """Register ``loader(what)``, which returns the module running the device operations ``what`` names
    (``"matrix"``: ``mix`` / ``mix_power`` / ``require_cupy`` / ``to_gpu``; ``"logistic"``: the nonconvex
    logistic gradient's launcher). :mod:`rowstoch_fast.backends` calls this once, when it is imported."""
    _LOADER[:] = [loader]


def device_operations(what="matrix"):
    """The module that runs the device operations ``what`` names (see :func:`provide`), loaded on first use."""
    if not _LOADER:  # (only when rowstoch_fast.backends was never imported: import rowstoch_fast does)
        raise RuntimeError("no device backend is registered: import rowstoch_fast (it registers the CuPy "
                           "backend's operations) before handing a device array to its layers")
    return _LOADER[0](what)
