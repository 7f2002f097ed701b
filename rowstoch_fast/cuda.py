"""CuPy backend: the same mixing, Pull-Diag-GT and objectives on an NVIDIA GPU.

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

__all__ = ["HAS_CUPY", "require_cupy", "to_gpu", "to_cpu", "device_csr", "mix", "mix_power", "CupyPullDiagGT"]


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
                        "copy explicitly with rowstoch_fast.cuda.to_gpu (no silent host/device copies)")
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


def _exclusive():
    from .gt import exclusive

    return exclusive


def _stepper_base():
    from .gt import StepperBase

    return StepperBase


class CupyPullDiagGT(_stepper_base()):
    """(MG-)Pull-Diag-GT with every array on the GPU: create it with ``PullDiagGT(..., backend="cupy")``.

    Same interface as :class:`~rowstoch_fast.PullDiagGT`: ``x0`` and the values
    ``grad_fn`` returns are CuPy arrays; ``opt.x`` / ``opt.y`` are device arrays.
    The tracker table is computed once on the host (cached per matrix) and
    copied to the device once.
    """

    def __init__(self, A, x0, lr, rounds=1, tracker="exact", *, check_finite=True):
        from ._checks import check_int, check_positive_float, nodes_first
        from .mixing import MixingMatrix
        from .tracker import DiagTracker

        cupy = require_cupy()
        # the cheap checks first: a host x0 or a bad lr is reported before the tracker is built
        _require_device(x0, "x0")
        self._A = A if isinstance(A, MixingMatrix) else MixingMatrix(A)
        self.lr = check_positive_float(lr, "lr")
        self.rounds = check_int(rounds, "rounds", minimum=1)
        if tracker not in ("exact", "perron"):
            raise ValueError(f"tracker must be 'exact' or 'perron', got {tracker!r}")
        x0 = nodes_first(cupy.asarray(x0, dtype=self._A.dtype), self._A.n, xp=cupy)
        if x0.ndim not in (2, 3) or x0.shape[-2] != self._A.n:
            raise ValueError(f"x0 must be (d,), (n, d) or (reps, n, d) with n = {self._A.n}, got {x0.shape}")
        if not bool(cupy.isfinite(x0).all()):
            raise ValueError("x0 must be finite")
        self._tracker = DiagTracker(self._A, self.rounds, tracker)
        self._shape = tuple(x0.shape)
        self._reps = x0.shape[0] if x0.ndim == 3 else 1
        self._d = x0.shape[-1]
        self.check_finite = bool(check_finite)
        n, w = self._A.n, self._reps * self._d
        self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt, self._xw, self._xw_alt, self._psi, self._work = (
            cupy.zeros((n, w), dtype=self._A.dtype) for _ in range(10))
        self._table = cupy.asarray(self._tracker._table)
        self._to_internal(x0, self._x)
        self.iteration = 0
        self._initialized = False

    def centroid(self):
        """``pi^T x`` on the device, shape (d,) or (reps, d)."""
        cupy = require_cupy()
        c = cupy.asarray(self._A.pi, dtype=self._A.dtype) @ self._x
        return c.reshape(self._reps, self._d) if len(self._shape) == 3 else c

    def _scale(self, t):
        return self._table[min(t, self._table.shape[0] - 1)]

    def _gradient(self, grad_fn, x_buf, out, iteration):
        from .gt import DivergenceError

        cupy = require_cupy()
        G = _require_device(grad_fn(self._user_view(x_buf)), "the value grad_fn returns")
        if tuple(G.shape) != self._shape:
            raise ValueError(f"grad_fn returned shape {tuple(G.shape)}, expected {self._shape} (the shape of x)")
        self._to_internal(G, out)
        if self.check_finite and not bool(cupy.isfinite(out).all()):
            node = int(cupy.argmax(~cupy.isfinite(out).all(axis=1)))
            raise DivergenceError.gradient(iteration, node, self.iteration)

    @_exclusive()
    def initialize(self, grad_fn):
        """Set ``y_0 = g_0 = grad_fn(x_0)`` (done by the first :meth:`step` if not called)."""
        if self._initialized:
            raise RuntimeError("PullDiagGT is already initialized")
        self._gradient(grad_fn, self._x, self._g, 0)
        self._y[...] = self._g
        self._xw[...] = self._x - self.lr * self._y
        self._initialized = True

    @_exclusive()
    def step(self, grad_fn):
        """One iteration on the device; ``grad_fn`` takes and returns CuPy arrays (see PullDiagGT.step)."""
        from .gt import DivergenceError

        cupy = require_cupy()
        if not self._initialized:
            self.initialize(grad_fn)
        t, R = self.iteration, self.rounds
        n, w = self._x.shape
        mix_power(self._A, self._xw, R, out=self._x_alt, work=self._work)  # x_{t+1} = A^R (x_t - lr y_t)
        self._gradient(grad_fn, self._x_alt, self._g_alt, t + 1)
        _launch(f"gt_tracker_input_{_suffix(self._x.dtype)}", n * w,
                (self._y, self._g_alt, self._g, self._scale(t + 1), self._scale(t), self._psi, np.int64(n), np.int64(w)))
        mix_power(self._A, self._psi, R, out=self._y_alt, work=self._work)  # y_{t+1} = A^R psi
        cupy.subtract(self._x_alt, self.lr * self._y_alt, out=self._xw_alt)
        if self.check_finite and not bool(cupy.isfinite(self._xw_alt).all()):
            node = int(cupy.argmax(~cupy.isfinite(self._xw_alt).all(axis=1)))
            raise DivergenceError.iterate(t + 1, node, self.lr)
        (self._x, self._x_alt, self._y, self._y_alt, self._g, self._g_alt, self._xw, self._xw_alt, self.iteration) = (
            self._x_alt, self._x, self._y_alt, self._y, self._g_alt, self._g, self._xw_alt, self._xw, t + 1)
        return self

