"""The nonconvex logistic objective's device code: the launcher of its CUDA kernel (``logistic_grad`` of
``backends/kernels.cu``; the same streams and sums as the CPU kernel, bit for bit), a module of its own so that
:mod:`rowstoch_fast.backends.cupy` holds only the generic operations. :class:`rowstoch_fast.objectives.NonconvexLogistic`
reaches it for a CuPy ``X`` through :func:`rowstoch_fast._device.device_operations` (``"logistic"``): the objective
layer never imports a backend.

The kernel runs one warp per row (a node of a repetition), the form measured on an H100 (bench/RESULTS.md
sections 9b and 9c).
"""

from __future__ import annotations

import numpy as np

from . import cupy as _cuda  # (its helpers looked up at each call: tests stand in for them)

__all__ = ["logistic_grad"]


def logistic_grad(obj, X, iteration, seed, batches, rep_offset, nodes):
    """NonconvexLogistic's stochastic gradients on the device (same streams and sums as the CPU kernel)."""
    cupy = _cuda.require_cupy()
    X = _cuda._require_device(X, "X")
    cache = obj.__dict__.setdefault("_device_data", {})  # the data set and the launch plans, per device
    m = obj.n if nodes is None else len(nodes)
    reps = X.shape[0] if X.ndim == 3 else 1
    key = ("plan", reps, m, batches)  # (the same on every device)
    plan = cache.get(key)
    if plan is None:
        plan = cache[key] = _logistic_plan(obj, reps, m, batches)
    name, blocks, threads, shared, dtype, spill_size, (sizes, batch, layout) = plan
    if X.dtype != dtype or not X.flags.c_contiguous:
        X = cupy.ascontiguousarray(X, dtype=dtype)
    H, Y = _cuda._on_device(cache, "H, Y", lambda: (cupy.asarray(obj.H), cupy.asarray(obj.Y)))
    G = cupy.empty(X.shape, dtype=dtype)  # (empty_like: 8 us of CuPy's Python on the H100's host)
    if blocks:
        nodes = _cuda._NULL if nodes is None else cupy.asarray(nodes, dtype=cupy.int64)
        spill = cupy.empty(spill_size, dtype=cupy.int32) if spill_size else _cuda._NULL
        _cuda._kernel(name)((blocks,), (threads,), (H, Y, nodes, *sizes, X, *batch, np.uint64(seed), np.uint64(iteration),
                                              np.int64(rep_offset), *layout, spill, G), shared_mem=shared)
    return G


def _logistic_plan(obj, reps, m, batches):
    """How :func:`logistic_grad` launches for ``reps x m`` rows and ``batches`` mini-batches (checked once):
    (kernel, blocks, threads, shared bytes, dtype, spill scratch size, the kernel's constant arguments in
    three groups: those before X, those before the stream's keys, those after them)."""
    dtype = np.dtype(obj.dtype)
    rows = reps * m
    M, B = obj.samples_per_node, obj.batch
    if M + B >= 2**31:
        raise ValueError(f"the CuPy logistic kernel takes fewer than 2^31 samples per node, got {M}")
    work = rows * B * batches * obj.d
    if work > _MAX_WORK:  # a kernel cannot be interrupted: the CPU kernel's bound (csrc/bindings.cpp)
        raise ValueError(f"batches = {batches} with batch = {B} is {work} multiply-adds per call (over 2^40: "
                         "hours of work); lower batches or batch")
    # one warp per row; its shared area: 32 coefficients, 32 sample ids, then the permutation and the draws
    # when they fit (layout 1), else those in a global scratch (layout 0); kernels.cu's logistic_grad_impl
    base = 32 * dtype.itemsize + 32 * 4
    layout = 1 if _LOGISTIC_WARPS * _round16(base + 4 * (M + B)) <= _SHARED_LIMIT else 0
    per_warp = _round16(base + (4 * (M + B) if layout else 0))
    consts = ((np.int64(m), np.int64(M), np.int64(obj.d), dtype.type(obj.rho)),  # the kernel's arguments
              (np.int64(reps), np.int64(B), np.int64(batches)), (np.int32(layout), np.int64(per_warp)))
    blocks = (rows + _LOGISTIC_WARPS - 1) // _LOGISTIC_WARPS
    return (f"logistic_grad{_coordinate_groups(obj.d)}_{_cuda._suffix(dtype)}", blocks, 32 * _LOGISTIC_WARPS,
            _LOGISTIC_WARPS * per_warp, dtype, 0 if layout else rows * (M + B), consts)


def _coordinate_groups(d):
    """K of the logistic kernel for d coordinates (kernels.cu: a lane's coordinates in registers, 0 above 128)."""
    return -(-d // 32) if d <= 128 else 0


def _round16(nbytes):
    return (nbytes + 15) // 16 * 16


_LOGISTIC_WARPS = 4  # warps (rows) per block of the logistic kernel
_MAX_WORK = 2**40  # multiply-adds of one gradient call (a kernel runs to its end: beyond Ctrl-C)
_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a block gets without opting in
