"""Argument checks shared by the Python API: each raises a clear exception naming the argument."""

from __future__ import annotations

import numbers

import numpy as np

from . import _core

FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def check_int(value, name, *, minimum=None):
    """Return ``value`` as a Python int, or raise TypeError/ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_positive_float(value, name, *, allow_zero=False):
    """Return ``value`` as a finite float > 0 (or >= 0), or raise naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")
    return value


def check_dtype(dtype, name="dtype"):
    """Return ``dtype`` as float32 or float64, or raise TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32 or float64, got {dt}")
    return dt


def as_float_array(x, name, dtype, *, ndim=None, copy=False, finite=True):
    """C-contiguous float array of ``dtype`` from ``x``; raise if it is not numeric (or, with ``finite``, has NaN/Inf)."""
    if (type(x) is np.ndarray and x.dtype == dtype and x.flags.c_contiguous and not copy and x.size > 0
            and (ndim is None or x.ndim in np.atleast_1d(ndim))):  # fast path: the usual case inside a run
        if finite and _core.first_nonfinite(x.reshape(-1, x.shape[-1])) >= 0:
            _raise_nonfinite(x, name)
        return x
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got complex dtype {arr.dtype}")
    if ndim is not None and arr.ndim not in np.atleast_1d(ndim):
        want = " or ".join(f"{k}-D" for k in np.atleast_1d(ndim))
        raise ValueError(f"{name} must be {want}, got {arr.ndim}-D with shape {arr.shape}")
    out = np.array(arr, dtype=dtype, order="C", copy=True) if copy else np.ascontiguousarray(arr, dtype=dtype)
    if finite and not np.all(np.isfinite(out)):
        _raise_nonfinite(out, name)
    return out


def _raise_nonfinite(arr, name):
    bad = np.argwhere(~np.isfinite(arr))[0]
    raise ValueError(f"{name} must be finite; {name}[{', '.join(map(str, bad))}] = {arr[tuple(bad)]}")


def check_out(out, name, shape, dtype):
    """Validate a caller-supplied output array: exact dtype/shape, C-contiguous, writeable."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError(f"{name} must be writeable")
    return out
