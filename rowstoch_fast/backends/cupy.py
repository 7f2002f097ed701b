"""CuPy backend: the same mixing, algorithms and objectives on an NVIDIA GPU.

Nothing here imports CuPy until the backend is used: availability is probed with
``importlib.util.find_spec`` (``HAS_CUPY``), ``ROWSTOCH_DISABLE_CUPY=1`` turns it
off, and device arrays are recognised by ``__cuda_array_interface__``. The
kernels (``kernels.cu``) are compiled at run time by NVRTC through
``cupy.RawModule``, so the wheel needs no CUDA toolkit. There are no silent
host/device copies inside a run: host arrays given where device arrays are
expected raise, and :func:`to_gpu` / :func:`to_cpu` copy explicitly.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

import numpy as np

from .base import Backend

__all__ = ["HAS_CUPY", "require_cupy", "to_gpu", "to_cpu", "device_csr", "mix", "mix_power", "CupyBackend"]


def _disabled():
    return os.environ.get("ROWSTOCH_DISABLE_CUPY", "").strip().lower() in {"1", "true", "yes", "on"}


#: CuPy is importable and not disabled (a CUDA device is checked only when the backend is used).
HAS_CUPY = importlib.util.find_spec("cupy") is not None and not _disabled()

_BLOCK = 256


def require_cupy():
    """Import CuPy and check for a device, or raise one clear error saying what is missing."""
    if _disabled():
        raise RuntimeError("backend 'cupy' is disabled by ROWSTOCH_DISABLE_CUPY=1")
    if importlib.util.find_spec("cupy") is None:
        raise RuntimeError("backend 'cupy' needs CuPy: pip install 'rowstoch_fast[gpu]' (cupy-cuda12x)")
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA driver missing or broken
        raise RuntimeError(f"backend 'cupy' found CuPy but no usable CUDA device ({exc})") from exc
    if count < 1:
        raise RuntimeError("backend 'cupy' found CuPy but no CUDA device")
    return cupy


def to_gpu(x):
    """Copy a host array to the current GPU (explicitly)."""
    return require_cupy().asarray(x)


def to_cpu(x):
    """Copy a device array to the host (explicitly); host arrays pass through."""
    return x.get() if hasattr(x, "__cuda_array_interface__") else np.asarray(x)


@lru_cache(maxsize=None)
def _module():
    cupy = require_cupy()
    with open(os.path.join(os.path.dirname(__file__), "kernels.cu")) as f:
        code = f.read()
    return cupy.RawModule(code=code, options=("-std=c++14", "--fmad=false"))


def _kernel(name):
    return _module().get_function(name)


def _suffix(dtype):
    return "f64" if np.dtype(dtype) == np.float64 else "f32"


def _launch(name, total, args):
    blocks = (int(total) + _BLOCK - 1) // _BLOCK
    if blocks:
        _kernel(name)((blocks,), (_BLOCK,), args)


def _require_device(x, name):
    if not hasattr(x, "__cuda_array_interface__"):
        raise TypeError(f"{name} must be a CuPy (device) array for backend='cupy'; "
                        "copy explicitly with rowstoch_fast.backends.cupy.to_gpu (no silent host/device copies)")
    return x


def device_csr(A):
    """The CSR arrays of a MixingMatrix on the device, copied once and cached on the matrix."""
    cached = A._diag_cache.get("device_csr")
    if cached is None:
        cupy = require_cupy()
        c = A.csr
        cached = (cupy.asarray(c.indptr), cupy.asarray(c.indices), cupy.asarray(c.data))
        A._diag_cache["device_csr"] = cached
    return cached


def _mix_into(A, X, out):
    Ap, Aj, Ax = device_csr(A)
    n, w = X.shape
    name = f"csr_mix_{_suffix(Ax.dtype)}_{'i32' if Ap.dtype == np.int32 else 'i64'}"
    _launch(name, n * w, (Ap, Aj, Ax, X, out, np.int64(n), np.int64(w)))
    return out


def _combine_into(out, coefs, blocks):
    """``out <- sum_t coefs[t] * blocks[t]`` in one kernel (``combine`` of kernels.cu: the CPU's order and bits);
    a coefficient is a float or a per-row device vector. Returns False when ``out`` has a NaN or Inf."""
    cupy = require_cupy()
    K = len(blocks)
    if not 1 <= K <= 4 or len(coefs) != K:
        raise ValueError(f"combine takes 1 to 4 (coefficient, block) terms, got {len(coefs)} and {K}")
    n, w = out.shape
    dtype = np.dtype(out.dtype)
    null = np.intp(0)
    xs = [b if b.flags.c_contiguous else cupy.ascontiguousarray(b) for b in blocks] + [null] * (4 - K)
    rows = [c if hasattr(c, "__cuda_array_interface__") else null for c in coefs] + [null] * (4 - K)
    scalars = [dtype.type(0 if hasattr(c, "__cuda_array_interface__") else c) for c in coefs]
    scalars += [dtype.type(0)] * (4 - K)
    bad = cupy.zeros(1, dtype=cupy.int32)
    _launch(f"combine_{_suffix(dtype)}", n * w, (*xs, *rows, *scalars, np.int32(K), out, np.int64(n), np.int64(w), bad))
    return int(bad.get()[0]) == 0


def _check_block(A, X, name="X"):
    cupy = require_cupy()
    _require_device(X, name)
    if X.dtype != A.dtype:
        raise TypeError(f"{name} has dtype {X.dtype} but A has {A.dtype}; mixed precision is not supported")
    if X.ndim not in (1, 2) or X.shape[0] != A.n:
        raise ValueError(f"{name} must have shape (n,) or (n, d) with n = {A.n}, got {X.shape}")
    return cupy.ascontiguousarray(X)


def mix(A, X, out=None):
    """``A @ X`` on the device for a CuPy array ``X`` of shape (n,) or (n, d)."""
    return mix_power(A, X, 1, out)


def mix_power(A, X, R, out=None, work=None):
    """``A^R @ X`` on the device with two ping-pong buffers (``out`` and ``work``, allocated when not given)."""
    cupy = require_cupy()
    X = _check_block(A, X)
    shape = X.shape
    X2 = X.reshape(A.n, -1)
    if out is None:
        res = cupy.empty_like(X2)
    else:
        _require_device(out, "out")
        if out.dtype != A.dtype or out.shape != shape or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {A.dtype} device array of shape {shape}")
        res = out.reshape(A.n, -1)
    if R == 0:
        res[...] = X2
        return res.reshape(shape)
    if R > 1 and work is None:
        work = cupy.empty_like(X2)
    src = X2
    for s in range(1, R + 1):
        dst = res if (R - s) % 2 == 0 else work
        _mix_into(A, src, dst)
        src = dst
    return res.reshape(shape)


def logistic_grad(obj, X, iteration, seed, batches, rep_offset, nodes):
    """NonconvexLogistic's stochastic gradients on the device (same streams and sums as the CPU kernel)."""
    cupy = require_cupy()
    X = cupy.ascontiguousarray(_require_device(X, "X"), dtype=cupy.float64)
    dev = obj.__dict__.get("_device_data")
    if dev is None:  # the data set is copied to the device once per objective
        dev = obj.__dict__["_device_data"] = (cupy.asarray(obj.H), cupy.asarray(obj.Y))
    m = obj.n if nodes is None else len(nodes)
    reps = X.shape[0] if X.ndim == 3 else 1
    d_nodes = None if nodes is None else cupy.asarray(nodes, dtype=cupy.int64)
    rows = reps * m
    perm = cupy.empty(rows * obj.samples_per_node, dtype=cupy.int64)
    swaps = cupy.empty(rows * obj.batch, dtype=cupy.int64)
    G = cupy.empty_like(X)
    _launch("logistic_grad_f64", rows, (dev[0], dev[1], d_nodes if d_nodes is not None else np.intp(0),
                                        np.int64(m), np.int64(obj.samples_per_node), np.int64(obj.d),
                                        np.float64(obj.rho), X, np.int64(reps), np.int64(obj.batch),
                                        np.int64(batches), np.uint64(seed), np.uint64(iteration),
                                        np.int64(rep_offset), perm, swaps, G))
    return G


class _DeviceTracker:
    """A host :class:`~rowstoch_fast.tracker.DiagTracker` whose table is copied to the device once."""

    def __init__(self, tracker):
        self.kind, self.frozen_at, self.rounds = tracker.kind, tracker.frozen_at, tracker.rounds
        self._host = tracker
        self._table = require_cupy().asarray(tracker._table)

    def scale(self, t):
        return self._table[min(t, self._table.shape[0] - 1)]

    @property
    def max_inverse_diagonal(self):
        return self._host.max_inverse_diagonal


class CupyBackend(Backend):
    """The operations of :class:`~rowstoch_fast.backends.cpu.CpuBackend` on CuPy device arrays.

    Mixing runs the NVRTC-compiled CSR kernel of ``kernels.cu`` (the matrix is
    copied to the device once per matrix); the element-wise updates are CuPy
    expressions. ``x0`` and what ``grad_fn`` returns must be device arrays
    (no silent host/device copies); :meth:`gather` copies to the host.
    """

    name = "cupy"

    def __init__(self, **options):
        super().__init__(**options)
        self.xp = require_cupy()

    def check_x0(self, x0, dtype):
        cupy = self.xp
        _require_device(x0, "x0")
        x0 = cupy.ascontiguousarray(cupy.asarray(x0, dtype=dtype))
        if x0.ndim not in (1, 2, 3):
            raise ValueError(f"x0 must be (d,), (n, d) or (reps, n, d), got shape {x0.shape}")
        if not bool(cupy.isfinite(x0).all()):
            raise ValueError("x0 must be finite")
        return x0

    def local(self, full):
        return self.vector(full)  # the explicit host-to-device copy of a resumed state

    def user_array(self, G, name):
        return _require_device(G, name)

    def user_view(self, view):
        return view

    def mix(self, M, src, out, rounds=1, work=None):
        if rounds > 1 and work is None:
            work = self.xp.empty_like(src)
        cur = src
        for s in range(1, rounds + 1):
            dst = out if (rounds - s) % 2 == 0 else work
            _mix_into(M, cur, dst)
            cur = dst
        return out

    def tracker(self, A, rounds, kind):
        from ..tracker import DiagTracker

        return _DeviceTracker(DiagTracker(A, rounds, kind))

    def combine(self, out, coefs, blocks):
        return _combine_into(out, coefs, blocks)

    def copy_in(self, out, values):
        out[...] = values
        return bool(self.xp.isfinite(out).all())

    def first_nonfinite(self, *blocks):
        cupy = self.xp
        found = [int(cupy.argmax(~cupy.isfinite(b).all(axis=1))) for b in blocks if not bool(cupy.isfinite(b).all())]
        return min(found) if found else -1

    gathers_in_place = False

    def gather(self, block, copy=True):
        return block.get()
