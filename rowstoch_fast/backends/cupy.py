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
import warnings
from functools import lru_cache

import numpy as np

from .. import _hashing
from .base import DEFERRED, DEVICE_TYPES, Backend, is_device_array, is_network

__all__ = [
    "HAS_CUPY", "require_cupy", "to_gpu", "to_cpu", "device_csr", "device_row_weights", "circulant_offsets",
    "device_circulant", "l2_hint_bytes", "mix", "mix_power", "CupyBackend",
]


def _disabled():
    return os.environ.get("ROWSTOCH_DISABLE_CUPY", "").strip().lower() in {"1", "true", "yes", "on"}


#: CuPy is importable and not disabled (a CUDA device is checked only when the backend is used).
HAS_CUPY = importlib.util.find_spec("cupy") is not None and not _disabled()

_BLOCK = 256
_OPTIONS = ("-std=c++14", "--fmad=false")

#: Which mixing kernel to run: ``"auto"`` (= ``"circ"``, ``"row"`` or ``"entry"``: the first the matrix allows),
#: ``"entry"`` (one thread per 16 bytes of a row where the width and the alignment allow, else per value, four
#: neighbours' loads in flight, the CSR's values), ``"entry1"`` (one value per thread), ``"entry-u1"`` (16
#: bytes, one neighbour at a time), ``"row"`` (``"entry"`` reading one weight per row instead of the CSR's
#: values, for matrices whose rows each hold one weight, bit for bit, as the in-degree rule writes them) or
#: ``"circ"`` (reading neither the CSR's indices nor its values, for circulant matrices with one weight:
#: :func:`circulant_offsets`; the CSR is then not copied to the device at all) or ``"circ1"`` (``"circ"``
#: with one value per thread: twice the threads, for small networks that leave SMs idle) or ``"circt"``
#: (``"circ"`` with the near offsets' rows from a tile in shared memory, for the gossip rounds; float32 one
#: value per thread); a matrix that does not allow the kernel asked for gets the next of circ, row, entry. All
#: give the same bits; on an H100 at n = 2^20
#: ``"row"`` ran a round 1.36x faster than ``"entry"`` and ``"circ"`` an iteration 1.14x faster than
#: ``"row"`` (1.20x at 2^22; bench/RESULTS.md sections 9b and 9c). Read from ``ROWSTOCH_CUDA_MIX`` at import.
MIX_KERNEL = os.environ.get("ROWSTOCH_CUDA_MIX", "auto")
_MIX_KERNELS = ("auto", "entry", "entry1", "entry-u1", "row", "circ", "circ1", "circt")

#: How the ``R`` gossip rounds of a phase run (:func:`mix_power`, the backend's phases): ``"graph"`` (one launch
#: per round; a backend replays them as one CUDA graph) or ``"persistent"`` (the ``R`` rounds in one cooperative
#: launch, its threads meeting at a grid-wide barrier between two rounds: ``csr_rounds_*``, ROUNDS in
#: kernels.cu; where a round's launch costs more than its work, at small n). The kernel is that of
#: :data:`MIX_KERNEL` (``"circt"``: a tile per block for all the rounds, where a block's rows fit in its shared
#: memory; its y phase in one launch is ``"circ"``'s); the same bits either way. Read from
#: ``ROWSTOCH_CUDA_ROUNDS`` at import.
ROUNDS = os.environ.get("ROWSTOCH_CUDA_ROUNDS", "graph")
_ROUNDS = ("graph", "persistent")

#: The circulant kernel's cache hints (``"circ"``, ``"circ1"``; ``CIRC`` in kernels.cu): ``"auto"`` (the
#: reads of rows at least a quarter of the device's L2 cache away, the last reads of a row before the cache
#: has turned over, go as streaming, and so do the round's stores then: they leave the L2 first), ``"off"``,
#: or that threshold as a number of bytes (tests). Blocks smaller than the threshold are never hinted, nor
#: circulant matrices whose offsets do not at least double (:func:`device_circulant`); the bits are the same
#: either way. Read from ``ROWSTOCH_CUDA_L2_HINTS`` at import.
L2_HINTS = os.environ.get("ROWSTOCH_CUDA_L2_HINTS", "auto")


def require_cupy():
    """Import CuPy and check for a device, or raise one clear error saying what is missing (once found, the
    module is kept: every launch asks, and the device count is a driver call)."""
    if _disabled():
        raise RuntimeError("backend 'cupy' is disabled by ROWSTOCH_DISABLE_CUPY=1")
    if _FOUND:
        return _FOUND[0]
    if importlib.util.find_spec("cupy") is None:
        raise RuntimeError("backend 'cupy' needs CuPy: pip install 'rowstoch_fast[gpu]' (CUDA 12) or "
                           "'rowstoch_fast[gpu-cuda13]' (CUDA 13)")
    import cupy

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA driver missing or broken
        raise RuntimeError(f"backend 'cupy' found CuPy but no usable CUDA device ({exc})") from exc
    if count < 1:
        raise RuntimeError("backend 'cupy' found CuPy but no CUDA device")
    _FOUND.append(cupy)
    DEVICE_TYPES.add(cupy.ndarray)
    return cupy


_FOUND = []  # the CuPy module once require_cupy has found a device


def require_device_memory(nbytes, what, hint=""):
    """MemoryError at once when ``what`` needs about ``nbytes`` of the current GPU's memory and that is more than
    it has free (CuPy's pool's cached blocks count as free)."""
    from .._checks import fmt_bytes

    cupy = require_cupy()
    free = cupy.cuda.runtime.memGetInfo()[0]
    pool = getattr(cupy, "get_default_memory_pool", None)
    free += pool().free_bytes() if pool is not None else 0
    if nbytes > free:
        raise MemoryError(f"{what} needs about {fmt_bytes(nbytes)} of GPU memory but only {fmt_bytes(free)} is "
                          f"free{'; ' + hint if hint else ''}")


def to_gpu(x):
    """Copy a host array to the current GPU (explicitly)."""
    return require_cupy().asarray(x)


def to_cpu(x):
    """Copy a device array to the host (explicitly); host arrays pass through."""
    return x.get() if is_device_array(x) else np.asarray(x)


@lru_cache(maxsize=None)
def _module(cooperative=False):
    """kernels.cu compiled by NVRTC (cached on disk by CuPy); ``cooperative``: its ROUNDS kernels only
    (``ROWSTOCH_COOPERATIVE``), launched as cooperative kernels (all blocks resident at once)."""
    cupy = require_cupy()
    with open(os.path.join(os.path.dirname(__file__), "kernels.cu")) as f:
        code = f.read()
    options = (*_OPTIONS, "-DROWSTOCH_COOPERATIVE") if cooperative else _OPTIONS
    return cupy.RawModule(code=code, options=options, enable_cooperative_groups=cooperative)


@lru_cache(maxsize=None)
def _kernel(name):
    return _module().get_function(name)


@lru_cache(maxsize=None)
def _cooperative_kernel(name):
    """The kernel ``name``, launched as a cooperative kernel (kernels.cu's ROUNDS)."""
    return _module(True).get_function(name)


def _suffix(dtype):
    return "f64" if np.dtype(dtype) == np.float64 else "f32"


def _launch(name, total, args):
    blocks = (int(total) + _BLOCK - 1) // _BLOCK
    if blocks:
        _kernel(name)((blocks,), (_BLOCK,), args)


def _require_device(x, name):
    if not is_device_array(x):
        raise TypeError(f"{name} must be a CuPy (device) array for backend='cupy'; "
                        "copy explicitly with rowstoch_fast.backends.cupy.to_gpu (no silent host/device copies)")
    return x


def _device_id():
    """The current CUDA device (a cache key: once a device was found, its driver is asked directly, without
    :func:`require_cupy`'s read of the environment, ~1 us on an H100's host and three times per step)."""
    runtime = getattr((_FOUND[0] if _FOUND else require_cupy()).cuda, "runtime", None)
    return runtime.getDevice() if runtime is not None else 0


def _on_device(cache, name, make):
    """``make()`` run once per CUDA device and kept in ``cache`` (a matrix or a data set used on two GPUs gets a
    copy on each)."""
    key = (name, _device_id())
    if key not in cache:
        cache[key] = make()
    return cache[key]


def device_csr(A):
    """The CSR arrays of a MixingMatrix on the current device, copied once and cached on the matrix."""
    def copy():
        cupy, c = require_cupy(), A.csr
        return cupy.asarray(c.indptr), cupy.asarray(c.indices), cupy.asarray(c.data)
    return _on_device(A._diag_cache, "device_csr", copy)


def _bits(values):
    """The weights' bit patterns (unsigned integers of their size): -0.0 and 0.0 differ, NaNs compare."""
    return values.view(np.dtype(f"u{values.dtype.itemsize}"))


def device_row_weights(A):
    """The per-row weights of a MixingMatrix on the current device when every row stores one weight (the same
    bits in each of its entries; an empty row counts as 0), else None; computed once and cached on the matrix."""
    def weights():
        c = A.csr
        counts = np.diff(c.indptr)
        first = np.zeros(A.n, dtype=c.data.dtype)
        first[counts > 0] = c.data[c.indptr[:-1][counts > 0]]
        same = np.array_equal(_bits(c.data), _bits(np.repeat(first, counts)))
        return require_cupy().asarray(first) if same else None
    return _on_device(A._diag_cache, "device_row_weights", weights)


def circulant_offsets(A, max_elements=2**20):
    """``(D, weight)`` when the MixingMatrix ``A`` is circulant with one weight, else None: every row stores the
    same number m of entries, all with the same bits, and row i's columns, in its CSR order, are ``i - D[k]``
    (mod n) for the m offsets ``D`` (strictly decreasing) rotated to start at the first offset <= i (so that
    its columns ascend). The exponential graph and the ring under the in-degree rule are. O(nnz) host work,
    ``max_elements`` at a time; host arrays."""
    c, n = A.csr, A.n
    counts = np.diff(c.indptr)
    if n == 0 or counts[0] == 0 or not np.all(counts == counts[0]):
        return None
    m = int(counts[0])
    bits = _bits(c.data)
    if not np.all(bits == bits[0]):
        return None
    idx = c.indices.reshape(n, m)
    D = np.sort((-idx[0].astype(np.int64)) % n)[::-1]
    if np.any(np.diff(D) >= 0):  # a column stored twice
        return None
    ascending, k = D[::-1], np.arange(m)
    rows = max(1, max_elements // m)
    for i0 in range(0, n, rows):
        i = np.arange(i0, min(n, i0 + rows))
        first = m - np.searchsorted(ascending, i, side="right")  # the offsets above i come first
        if not np.array_equal(idx[i0:i0 + len(i)], (i[:, None] - D[(first[:, None] + k) % m]) % n):
            return None
    return D, c.data[0]


def l2_hint_bytes():
    """The circulant kernel's streaming threshold in bytes under :data:`L2_HINTS` on the current device (0:
    no hints)."""
    choice = L2_HINTS
    if choice == "off":
        return 0
    if choice == "auto":
        return _on_device(_DEVICE_FACTS, "l2_hint_bytes",
                          lambda: int(require_cupy().cuda.Device().attributes["L2CacheSize"]) // 4)
    try:
        value = -1 if isinstance(choice, (bool, float)) else int(choice)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value < 2**31:
        raise ValueError(f"ROWSTOCH_CUDA_L2_HINTS must be 'auto', 'off' or a number of bytes in [0, 2^31), "
                         f"got {choice!r}")
    return value


_DEVICE_FACTS = {}  # per device: what l2_hint_bytes, _multiprocessors and _resident_blocks asked the driver


def _multiprocessors():
    """The current device's SM count (asked once per device)."""
    return _on_device(_DEVICE_FACTS, "multiprocessors",
                      lambda: int(require_cupy().cuda.Device().attributes["MultiProcessorCount"]))


def device_circulant(A):
    """:func:`circulant_offsets` as the circulant kernel's arguments on the current device (``{0, m, h}`` and the
    offsets as 32-bit integers, whatever the CSR's index type, and the weight in the matrix's type), or None
    (also for n >= 2^31); computed once per choice of :data:`L2_HINTS`, cached on the matrix. ``h``, the
    kernel's streaming threshold: :func:`l2_hint_bytes` where each offset is at least twice the next (the
    exponential graph, the ring: a far offset's rows are then not read again soon by the next smaller
    offset), else 0."""
    def arrays():
        found = circulant_offsets(A) if A.n < 2**31 else None
        if found is None:
            return None
        cupy = require_cupy()
        D, weight = found
        hint = l2_hint_bytes() if np.all(D[:-1] >= 2 * D[1:]) else 0
        return (cupy.asarray(np.array([0, len(D), hint], dtype=np.int32)),
                cupy.asarray(D.astype(np.int32)), cupy.asarray(np.array([weight], dtype=A.csr.data.dtype)))
    return _on_device(A._diag_cache, ("device_circulant", L2_HINTS), arrays)


def _mix_arguments(A):
    """(kernel family, Ap, Aj, Ax) of ``A``'s mixing on the current device under ``MIX_KERNEL``: ``circ``
    (circulant, one weight), ``row`` (one weight per row) or ``entry`` (the CSR's values), the first that
    ``A`` allows among those the choice allows."""
    if MIX_KERNEL in ("auto", "circ", "circ1", "circt"):
        circ = device_circulant(A)
        if circ is not None:
            return ("circ", *circ)
    Ap, Aj, Ax = device_csr(A)
    if MIX_KERNEL in ("auto", "circ", "circ1", "circt", "row"):
        weights = device_row_weights(A)
        if weights is not None:
            return "row", Ap, Aj, weights
    return "entry", Ap, Aj, Ax


@lru_cache(maxsize=256)
def _mix_kernel(n, w, dtype, index_dtype, aligned, kind, family="entry", role="csr_mix"):
    """(kernel name, threads) of the mixing kernel of ``family`` (:func:`_mix_arguments`) for an ``n x w``
    block under the choice ``kind`` (:data:`MIX_KERNEL`); ``role`` ``"gt_descent"`` (4 neighbours' loads in
    flight, 16-byte packs where ``aligned`` and the width allow) or ``"gt_phase"`` (2 in flight, one value
    per thread: it runs on small blocks only) names the Pull-Diag-GT kernels of the same family
    (:meth:`CupyBackend.gt_y_phase`), ``"csr_rounds"`` and ``"gt_rounds"`` (as ``"gt_phase"``) the R rounds of
    :func:`mix_power` and of the y phase in one launch (:data:`ROUNDS`)."""
    if kind not in _MIX_KERNELS:
        raise ValueError(f"ROWSTOCH_CUDA_MIX must be one of {', '.join(_MIX_KERNELS)}, got {kind!r}")
    suffix = f"{_suffix(dtype)}_{'i32' if np.dtype(index_dtype) == np.int32 else 'i64'}"
    vec = 2 if np.dtype(dtype) == np.float64 else 4
    if role in ("csr_mix", "csr_rounds"):  # (ROUNDS: 4 in flight)
        unroll = 1 if kind == "entry-u1" and role == "csr_mix" else 4
        packed = kind not in ("entry1", "circ1") and aligned and w % vec == 0
        # circt's tiles (float32: one value per thread; a block of one round: one row at least; the rounds in one
        # launch: any width, their threads loop over a block's rows)
        if kind == "circt" and family == "circ":
            packed = packed and vec == 2
            if role == "csr_rounds" or w // (vec if packed else 1) <= _TILE_THREADS:
                return f"{role}_circt{vec if packed else 1}x4_{suffix}", n * w // (vec if packed else 1)
    else:
        unroll = 2 if role in ("gt_phase", "gt_rounds") else 4
        packed = role == "gt_descent" and aligned and w % vec == 0
    if packed:
        return f"{role}_{family}{vec}x{unroll}_{suffix}", n * w // vec
    return f"{role}_{family}1x{unroll}_{suffix}", n * w


def _ptr(a):
    """The device address of a CuPy array."""
    return a.data.ptr


def _aligned(*arrays):
    """The device arrays all start on a 16-byte boundary (the vector kernels' loads and stores)."""
    bits = 0
    for a in arrays:
        bits |= _ptr(a)
    return bits % 16 == 0


def _gather(A, role, n, w, aligned, blocks, tail):
    """Launch the ``role`` kernel (:func:`_mix_kernel`) of ``A``'s family over an ``n x w`` block: its arguments
    are A's three (:func:`_mix_arguments`), ``blocks``, ``n``, ``w``, then ``tail``."""
    family, Ap, Aj, Ax = _mix_arguments(A)
    name, threads = _mix_kernel(n, w, Ax.dtype, Ap.dtype, aligned, MIX_KERNEL, family, role)
    args = (Ap, Aj, Ax, *blocks, np.int64(n), np.int64(w), *tail)
    if "_circt" in name and role == "csr_rounds":  # kernels.cu's rounds_circt_impl: a tile per block, its rows
        plan = _tiled_rounds(name, n, w * Ax.dtype.itemsize, threads)
        if plan is not None:
            grid, chunk, shared = plan
            _cooperative_kernel(name)((grid,), (_TILE_ROUNDS_THREADS,), (*args, np.int64(chunk), np.int64(shared)),
                                      shared_mem=shared)
            return
        name = name.replace("_circt", "_circ")  # (a block's rows larger than its shared memory: circ's rounds)
    if "_circt" in name:  # kernels.cu's CIRCT: blocks of rows x (threads per row) threads, a tile of twice their rows
        groups = threads // n
        rows = _TILE_THREADS // groups
        _kernel(name)(((n + rows - 1) // rows,), (rows * groups,), args, shared_mem=2 * rows * w * Ax.dtype.itemsize)
    elif role.endswith("_rounds"):  # kernels.cu's ROUNDS: one cooperative launch of at most the resident blocks
        _cooperative_kernel(name)((min(-(-threads // _BLOCK), _resident_blocks(name)),), (_BLOCK,), args)
    else:
        _launch(name, threads, args)


_TILE_THREADS = 1024  # the most threads of a block of kernels.cu's CIRCT (its __launch_bounds__)
_TILE_ROUNDS_THREADS = 512  # the threads of a block of csr_rounds_circt (its __launch_bounds__)


def _tiled_rounds(name, n, row_bytes, entries):
    """(blocks, rows per block, shared bytes per block) of the ``csr_rounds_circt`` launch ``name`` for ``n`` rows
    of ``row_bytes`` bytes and ``entries`` threads' worth of packs (kernels.cu's rounds_circt_impl): as many blocks of
    :data:`_TILE_ROUNDS_THREADS` as its entries fill, at most those the device keeps resident with
    :data:`_SHARED_LIMIT` bytes each, the rows split evenly, the tile twice a block's rows where that fits (the
    offsets up to a block's rows from it); None where a block's rows alone do not fit (the rounds of circ then)."""
    blocks = min(-(-entries // _TILE_ROUNDS_THREADS), _resident_blocks(name, _TILE_ROUNDS_THREADS, _SHARED_LIMIT))
    chunk = -(-n // blocks)
    if chunk * row_bytes > _SHARED_LIMIT:
        return None
    return -(-n // chunk), chunk, min(_round16(2 * chunk * row_bytes), _SHARED_LIMIT)


def _mix_into(A, X, out, status=None):
    """``out <- A X`` (one gossip round); a launch that finds ``status`` set (an earlier check failed) does
    nothing."""
    _gather(A, "csr_mix", *X.shape, _aligned(X, out), (X, out), (_NULL if status is None else status,))
    return out


def _descent_into(A, X, x, lr, y, xw, status, launch):
    """``y <- A X`` and ``xw <- x - lr y`` (one round, ``gt_descent`` of kernels.cu); a NaN or Inf in ``xw``
    sets ``status`` to ``launch``."""
    _gather(A, "gt_descent", *X.shape, _aligned(X, x, y, xw), (X, x, x.dtype.type(lr), y, xw),
            (status, np.uint64(launch)))


def _phase_into(A, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, status, launch):
    """A one-round Pull-Diag-GT y phase in one launch (``gt_phase`` of kernels.cu): ``y_out <- A (y + s_new
    g_new - s_old g_old)``, the tracker input computed as it is gathered, and ``xw <- x - lr y_out``, checked
    under ``launch``."""
    _gather(A, "gt_phase", *x.shape, False, (y, g_new, g_old, s_new, s_old, x, x.dtype.type(lr), y_out, xw),
            (status, np.uint64(launch)))  # (one value per thread: alignment unread)


def _tick_into(status):
    """``status[2] += 1``: the first launch of a graph whose check tells its replays apart (``tick`` and "run
    status" of kernels.cu)."""
    _launch("tick", 1, (status,))


_GRAPH_CHECK = 1 << 63  # the id of a check inside a graph; journaled with its replay's count (kernels.cu)


def _tracker_rows_into(table, s_new, s_old, status):
    """``s_new, s_old <- table[min(t + 1, last)], table[min(t, last)]`` for the iteration ``t`` the run status
    holds (``tracker_rows`` of kernels.cu)."""
    last, n = table.shape[0] - 1, table.shape[1]
    _launch(f"tracker_rows_{_suffix(table.dtype)}", n, (table, np.int64(last), np.int64(n), status, s_new, s_old))


def _tracker_input_into(psi, y, g_new, g_old, s_new, s_old, status):
    """``psi <- y + s_new g_new - s_old g_old`` (``tracker_input`` of kernels.cu; per-row ``s``)."""
    n, w = psi.shape
    _launch(f"tracker_input_{_suffix(psi.dtype)}", n * w, (y, g_new, g_old, s_new, s_old, psi, np.int64(n),
                                                           np.int64(w), status))


def _device_bad_states(chain, M, t):
    """The Gilbert-Elliott states of ``M``'s stored weights at iteration ``t`` on the device
    (:meth:`Lossy.chain_states` advanced by ``ge_advance`` of kernels.cu; the transition keys computed on the
    host)."""
    cupy = require_cupy()
    Ap, Aj, _ = device_csr(M)
    index = "i32" if np.dtype(Ap.dtype) == np.int32 else "i64"

    def advance(bad, start, stop, init):
        keys = cupy.asarray(np.array([_hashing.round_key(chain.seed, 2**61 + s, 0) for s in range(start, stop + 1)],
                                     dtype=np.uint64))
        _launch(f"ge_advance_{index}", M.n, (Ap, Aj, np.int64(M.n), bad, keys, np.int64(stop + 1 - start),
                                            np.uint64(_hashing.round_key(chain.seed, 2**62, 0)), np.int32(init),
                                            np.float64(chain.p_bad), np.float64(chain.p_recover),
                                            np.float64(chain.p_bad / (chain.p_bad + chain.p_recover))))

    return chain.chain_states(Aj, Aj.shape[0], t, advance, zeros=cupy.zeros)


def _mix_lossy_into(M, X, out, status, key, p, renormalise, awake, bad=None):
    """One gossip round of a time-varying network (``csr_mix_lossy`` of kernels.cu: the CPU pass's losses,
    sums and renormalisation); ``key`` is :func:`rowstoch_fast._hashing.round_key`, ``awake`` a device uint8
    mask or None."""
    Ap, Aj, Ax = device_csr(M)
    n, w = X.shape
    vec = 2 if np.dtype(Ax.dtype) == np.float64 else 4
    V = vec if _aligned(X, out) and w % vec == 0 else 1
    name = f"csr_mix_lossy{V}_{_suffix(Ax.dtype)}_{'i32' if np.dtype(Ap.dtype) == np.int32 else 'i64'}"
    _launch(name, n * w // V, (Ap, Aj, Ax, X, out, np.int64(n), np.int64(w), status, np.uint64(key), np.float64(p),
                               np.int32(bool(renormalise)), np.intp(0) if awake is None else awake,
                               np.intp(0) if bad is None else bad))
    return out


def _combine_into(out, coefs, blocks, status, launch):
    """``out <- sum_t coefs[t] * blocks[t]`` in one kernel (``combine<K>`` of kernels.cu: the CPU's order and
    bits); a coefficient is a float or a per-row device vector. A NaN or Inf in ``out`` sets ``status`` to
    ``launch`` (unless ``launch`` is 0); the launch does nothing if ``status`` holds another launch's id. (Once
    per term of every step: kept lean.)"""
    K = len(blocks)
    if not 1 <= K <= 4 or len(coefs) != K:
        raise ValueError(f"combine takes 1 to 4 (coefficient, block) terms, got {len(coefs)} and {K}")
    n, w = out.shape
    dtype = out.dtype
    scalar = dtype.type
    xs, rows, cs = [], [], []
    for b, c in zip(blocks, coefs):
        xs.append(b if b.dtype == dtype and b.flags.c_contiguous else require_cupy().ascontiguousarray(b, dtype=dtype))
        if is_device_array(c):
            rows.append(c)
            cs.append(scalar(0))
        else:
            rows.append(_NULL)
            cs.append(scalar(c))
    _launch(_COMBINE[dtype.char, K], n * w, (*xs, *rows, *cs, out, np.int64(n * w), np.int64(w), status,
                                             np.uint64(launch)))


_NULL = np.intp(0)  # a null device pointer
_COMBINE = {(char, K): f"combine{K}_{suffix}" for char, suffix in (("d", "f64"), ("f", "f32")) for K in range(1, 5)}


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
    """``A^R @ X`` on the device with two ping-pong buffers (``out`` and ``work``, allocated when not given; given,
    each a C-contiguous device array of X's shape and A's dtype that overlaps neither X nor the other: a round
    reads all of its input while it writes)."""
    cupy = require_cupy()
    X = _check_block(A, X)
    shape = X.shape
    X2 = X.reshape(A.n, -1)
    if out is None:
        res = cupy.empty_like(X2)
    else:
        _check_buffer(A, out, "out", shape, X)
        res = out.reshape(A.n, -1)
    if R == 0:
        res[...] = X2
        return res.reshape(shape)
    if R > 1 and work is None:
        work = cupy.empty_like(X2)
    elif R > 1:
        _check_buffer(A, work, "work", shape, X, res)
        work = work.reshape(A.n, -1)
    _mix_rounds(A, X2, res, R, work)
    return res.reshape(shape)


def _check_buffer(A, buf, name, shape, *inputs):
    """``buf`` (``out`` or ``work`` of :func:`mix_power`) is a C-contiguous device array of ``shape`` and
    ``A``'s dtype that overlaps none of ``inputs`` (C-contiguous device arrays); ValueError or TypeError
    otherwise."""
    _require_device(buf, name)
    if buf.dtype != A.dtype or buf.shape != shape or not buf.flags.c_contiguous:
        raise ValueError(f"{name} must be a C-contiguous {A.dtype} device array of shape {shape}")
    for other, other_name in zip(inputs, ("X", "out")):
        if _ptr(buf) < _ptr(other) + other.nbytes and _ptr(other) < _ptr(buf) + buf.nbytes:
            raise ValueError(f"{name} shares memory with {other_name}; pass a separate "
                             f"{'output' if name == 'out' else name} array")


def _mix_rounds(A, src, out, R, work, status=None, arrived=None):
    """``out <- A^R src`` through the ping-pong buffer ``work`` (R >= 1): a launch per round, or under
    :data:`ROUNDS` ``"persistent"`` one (:func:`_rounds_into`; ``arrived``: its barrier's word, a new one if
    None)."""
    if R > 1 and _persistent():
        _rounds_into(A, src, out, work, R, status, arrived)
        return out
    for s in range(1, R + 1):
        dst = out if (R - s) % 2 == 0 else work
        _mix_into(A, src, dst, status)
        src = dst
    return out


def _persistent():
    """:data:`ROUNDS` is ``"persistent"`` (ValueError naming ``ROWSTOCH_CUDA_ROUNDS`` for another value than its
    two)."""
    if ROUNDS not in _ROUNDS:
        raise ValueError(f"ROWSTOCH_CUDA_ROUNDS must be one of {', '.join(_ROUNDS)}, got {ROUNDS!r}")
    return ROUNDS == "persistent"


def _rounds_into(A, src, out, work, R, status, arrived):
    """``out <- A^R src`` through ``work`` in one cooperative launch (kernels.cu's ROUNDS), as many blocks as the
    work needs up to those the device keeps resident; ``arrived``: a uint32 device word, 0 before its first such
    launch, used by no launch that may run at the same time (the grid's barrier), or None (a new one)."""
    if arrived is None:
        arrived = require_cupy().zeros(1, dtype=np.uint32)
    _gather(A, "csr_rounds", *src.shape, _aligned(src, out, work), (src, out, work),
            (np.int64(R), _NULL if status is None else status, arrived))


def _phase_rounds_into(A, R, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, work, status, launch, arrived):
    """A Pull-Diag-GT y phase of ``R >= 2`` rounds in one cooperative launch (``gt_rounds`` of kernels.cu's
    ROUNDS): ``y_out <- A^R (y + s_new g_new - s_old g_old)`` through ``work``, the tracker input computed as it is
    gathered, and ``xw <- x - lr y_out``, checked under ``launch``; ``arrived``: as :func:`_rounds_into`'s."""
    if R < 2:  # (gt_rounds' round 1 gathers the tracker input and stores it: one round is gt_phase's)
        raise ValueError(f"a y phase in one cooperative launch takes R >= 2 rounds, got {R}")
    _gather(A, "gt_rounds", *x.shape, False, (y, g_new, g_old, s_new, s_old, x, x.dtype.type(lr), y_out, xw, work),
            (np.int64(R), status, np.uint64(launch), arrived))  # (one value per thread: alignment unread)


def _resident_blocks(name, block=_BLOCK, shared=0):
    """How many blocks of ``block`` threads and ``shared`` bytes of dynamic shared memory of the kernel ``name`` the
    current device keeps resident at once (its SMs times the driver's occupancy), or :data:`_ROUNDS_GRID` where
    set; RuntimeError if it cannot launch cooperative kernels."""
    if _ROUNDS_GRID is not None:
        return _ROUNDS_GRID

    def count():
        cupy = require_cupy()
        runtime = cupy.cuda.runtime
        if not runtime.deviceGetAttribute(runtime.cudaDevAttrCooperativeLaunch, _device_id()):
            raise RuntimeError("ROWSTOCH_CUDA_ROUNDS=persistent needs a device that launches cooperative kernels; "
                               "this one does not (use 'graph')")
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(_cooperative_kernel(name).kernel.ptr,
                                                                            block, shared)
        if per_sm < 1:
            raise RuntimeError(f"ROWSTOCH_CUDA_ROUNDS=persistent: the device keeps no block of {name} resident "
                               "(use 'graph')")
        return per_sm * _multiprocessors()
    return _on_device(_DEVICE_FACTS, ("resident blocks", name, block, shared), count)


_ROUNDS_GRID = None  # (tests: in place of the resident blocks, _resident_blocks)


def logistic_grad(obj, X, iteration, seed, batches, rep_offset, nodes, out=None, clock=None, node_major=False):
    """NonconvexLogistic's stochastic gradients on the device (same streams and sums as the CPU kernel), into
    a new array or ``out`` (a C-contiguous array of X's shape and the objective's dtype). With a ``clock`` (a
    backend's run status) the draws are those of ``iteration + clock[2] + clock[3]``, read on the device: a
    launch captured in a CUDA graph (:meth:`CupyBackend.gt_step`). ``node_major``: X (and the gradients) of
    shape ``(m, reps * d)``, an optimizer's layout of its repetitions, instead of ``(reps, m, d)``."""
    cupy = require_cupy()
    X = _require_device(X, "X")
    cache = obj.__dict__.setdefault("_device_data", {})  # the data set and the launch plans, per device
    m = obj.n if nodes is None else len(nodes)
    reps = X.shape[1] // obj.d if node_major else X.shape[0] if X.ndim == 3 else 1
    plan = _logistic_plan_of(obj, reps, m, batches)
    name, blocks, threads, shared, dtype, spill_size, (sizes, batch, layout) = plan
    if node_major:
        layout = (np.int32(int(layout[0]) | 2),)
    if X.dtype != dtype or not X.flags.c_contiguous:
        X = cupy.ascontiguousarray(X, dtype=dtype)
    H, Y = _on_device(cache, "H, Y", lambda: (cupy.asarray(obj.H), cupy.asarray(obj.Y)))
    G = cupy.empty(X.shape, dtype=dtype) if out is None else out  # (empty_like: 8 us of Python on an H100's host)
    if blocks:
        nodes = _NULL if nodes is None else cupy.asarray(nodes, dtype=cupy.int64)
        spill = cupy.empty(spill_size, dtype=cupy.int32) if spill_size else _NULL
        _kernel(name)((blocks,), (threads,), (H, Y, nodes, *sizes, X, *batch, np.uint64(seed), np.uint64(iteration),
                                              _NULL if clock is None else clock, np.int64(rep_offset), *layout,
                                              spill, G), shared_mem=shared)
    return G


def _logistic_plan_of(obj, reps, m, batches):
    """:func:`_logistic_plan`, made once per objective, shape and device (``"auto"`` warps follow its SMs)."""
    return _on_device(obj.__dict__.setdefault("_device_data", {}), ("plan", reps, m, batches, LOGISTIC_WARPS),
                      lambda: _logistic_plan(obj, reps, m, batches))


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
    # one block of W warps per row; its shared area: 32 W coefficients and sample ids, then the permutation and
    # the draws when they fit (layout 1), else those in a global scratch (layout 0); kernels.cu's logistic_grad_impl
    warps = _logistic_warps(rows)
    base = 32 * warps * (dtype.itemsize + 4)
    layout = 1 if base + 4 * (M + B) <= _SHARED_LIMIT else 0
    consts = ((np.int64(m), np.int64(M), np.int64(obj.d), dtype.type(obj.rho)),  # the kernel's arguments
              (np.int64(reps), np.int64(B), np.int64(batches)), (np.int32(layout),))
    return (f"logistic_grad{_coordinate_groups(obj.d)}_{_suffix(dtype)}", rows, 32 * warps,
            _round16(base + (4 * (M + B) if layout else 0)), dtype, 0 if layout else rows * (M + B), consts)


def _logistic_warps(rows):
    """Warps per row of the logistic kernel: :data:`LOGISTIC_WARPS`, or for ``"auto"`` the most (up to 8) with
    which ``rows`` rows still fit the device's resident warps at once (kernels.cu: the margins of a row's
    samples in flight together; where rows fill the device, one warp per row wastes no warp on waiting)."""
    if LOGISTIC_WARPS != "auto":
        if type(LOGISTIC_WARPS) is not int or LOGISTIC_WARPS not in (1, 2, 4, 8):
            raise ValueError(f"backends.cupy.LOGISTIC_WARPS must be 'auto' or one of 1, 2, 4, 8, got "
                             f"{LOGISTIC_WARPS!r}")
        return LOGISTIC_WARPS
    warps, resident = 8, _resident_warps()
    while warps > 1 and rows * warps > resident:
        warps //= 2
    return warps


def _resident_warps():
    """The warps the current device keeps resident at the logistic kernel's ~64 registers per thread: 32 per
    SM (65,536 registers each; 4,224 on an H100), or :data:`_RESIDENT_WARPS` where set."""
    if _RESIDENT_WARPS is not None:
        return _RESIDENT_WARPS
    return 32 * _multiprocessors()


def _coordinate_groups(d):
    """K of the logistic kernel for d coordinates (kernels.cu: a lane's coordinates in registers, 0 above 128)."""
    return -(-d // 32) if d <= 128 else 0


def _round16(nbytes):
    return (nbytes + 15) // 16 * 16


#: Warps per row (one block per row) of the logistic oracle's kernel: ``"auto"`` (8 where rows are few, down
#: to 1 where they fill the device), or 1, 2, 4 or 8 (blocks of at most 256 threads of up to 128 registers);
#: bench/gpu_kernels.py times them (RESULTS.md section 9e).
LOGISTIC_WARPS = "auto"
_RESIDENT_WARPS = None  # (tests: in place of the device's resident warps, _resident_warps)
_MAX_WORK = 2**40  # multiply-adds of one gradient call (a kernel runs to its end: beyond Ctrl-C)
_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a block gets without opting in


class _DeviceTracker:
    """A host :class:`~rowstoch_fast.tracker.DiagTracker` whose table is copied to the device once."""

    def __init__(self, tracker):
        self.kind, self.frozen_at, self.rounds = tracker.kind, tracker.frozen_at, tracker.rounds
        self._host = tracker
        self._table = require_cupy().asarray(tracker._table)
        self._last = self._table[self._table.shape[0] - 1]  # the frozen row, one view for every later step

    def scale(self, t):
        return self._last if t >= self._table.shape[0] - 1 else self._table[t]

    _SCALED_MAX_BYTES = 64 * 2**20

    def scaled(self, t, coef):
        """``coef * scale(t)``: rows of a table multiplied once per ``coef`` (the last one kept) when it is at
        most 64 MiB, so that the steps before the tracker freezes launch no multiplication each."""
        if self._table.nbytes > self._SCALED_MAX_BYTES:
            return coef * self.scale(t)
        cached = self.__dict__.get("_scaled")
        if cached is None or cached[0] != coef:
            cached = self._scaled = (coef, coef * self._table)
        return cached[1][min(t, self._table.shape[0] - 1)]

    @property
    def max_inverse_diagonal(self):
        return self._host.max_inverse_diagonal


class CupyBackend(Backend):
    """The operations of :class:`~rowstoch_fast.backends.cpu.CpuBackend` on CuPy device arrays.

    Everything a step does runs in the NVRTC-compiled kernels of ``kernels.cu``
    (the matrix is copied to the device once per matrix), with no
    device-to-host synchronisation: the NaN/Inf checks set a flag on the device
    (``combine`` and ``copy_in`` return ``DEFERRED``), which the optimizer reads
    every :attr:`check_every` steps and before its state is read; once a check
    has failed, every later launch of this backend does nothing, so the last
    finite state survives. The ``R`` gossip rounds of a phase are captured once
    as a CUDA graph per (matrix, buffers) and replayed (one launch instead of
    ``R``); so is Pull-Diag-GT's whole y phase (tracker input, rounds, descent
    and its check) once its tracker has frozen, and, where ``grad_fn`` is an
    :class:`~rowstoch_fast.objectives.Oracle` of the logistic objective, its
    whole step (:meth:`gt_step`: the oracle's kernel reads its iteration, and
    the graph the tracker's rows, on the device). ``x0`` and what ``grad_fn``
    returns must be device arrays (no silent host/device copies); :meth:`gather`
    copies to the host.
    """

    name = "cupy"
    #: Steps between two reads of the device's NaN/Inf flag (each read is a device-to-host sync).
    check_every = 32
    #: Capture multi-round mixing as CUDA graphs (turned off for good, with a RuntimeWarning, if a capture fails).
    use_graphs = True
    _MAX_GRAPHS = 16

    def __init__(self, **options):
        super().__init__(**options)
        self.xp = require_cupy()
        self.last_launch = 0  # the id of the latest checked launch (what the optimizer journals)
        self._launches = self._replays = 0  # checked launches made; replays of graphs with a tick (the device's status[2])
        self._clock = {3: 0, 4: 0}  # the device's status[3] and status[4] (gt_step)
        self._graphs, self._seen, self._step_gradients = {}, set(), {}

    def attach(self, n, dtype, matrices):
        super().attach(n, dtype, matrices)
        # status[0]: the id of the first checked launch that found a NaN/Inf; status[1]: the replay in which a
        # graph's check did; status[2]: the replays of graphs with checks; status[3] and [4]: the bases of an
        # oracle's and of the optimizer's iteration inside a graph (kernels.cu, "run status")
        self._status = self.xp.zeros(5, dtype=self.xp.uint64)
        self._arrived = self.xp.zeros(1, dtype=np.uint32)  # the grid barrier's word of ROUNDS = "persistent"

    def prepare(self, width):
        _kernel(f"combine1_{_suffix(self.dtype)}")  # compiles (or loads from CuPy's cache) and loads the module
        _kernel("tick")  # (first launched inside a graph's capture: looked up before)
        _kernel(f"tracker_rows_{_suffix(self.dtype)}")  # (likewise)

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

    #: The iteration the optimizer is at (a time-varying network's rounds depend on it).
    t = 0

    def mix(self, M, src, out, rounds=1, work=None):
        if is_network(M):
            return self.mix_network(M, self.t, src, out, rounds, work)
        if rounds > 1 and work is None:
            work = self.xp.empty_like(src)

        def launches():
            return _mix_rounds(M, src, out, rounds, work, self._status, self._arrived)

        if rounds == 1 or not self.use_graphs:
            return launches()
        # what the graph's launches read and write (a matrix freed and another at the same addresses: the same
        # launches)
        key = ("mix", *map(_ptr, _mix_arguments(M)[1:]), M.n, _ptr(src), _ptr(out), _ptr(work), src.shape, rounds,
               MIX_KERNEL, ROUNDS)
        graph = self._graph(key, launches)
        if graph is None:
            return launches()
        graph.launch()
        return out

    def _graph(self, key, launches):
        """The CUDA graph of ``launches()`` kept under ``key`` (the addresses and values its launches read):
        None the first time ``key`` comes (launch plainly: that compiles and loads the kernels) and where
        graphs are off or cannot be made; captured the second time and replayed after."""
        if not self.use_graphs:
            return None
        graph = self._graphs.get(key)
        if graph is None:
            if key not in self._seen:
                if len(self._seen) >= 64 * self._MAX_GRAPHS:  # (keys that never come back: the tracker's rows)
                    self._seen.clear()
                self._seen.add(key)
                return None
            graph = self._capture(launches)
            if graph is None:
                return None
            if len(self._graphs) >= self._MAX_GRAPHS:
                self._graphs.clear()
                self._step_gradients.clear()
            self._graphs[key] = graph
        return graph

    def mix_network(self, net, t, src, out, rounds=1, work=None):
        """The rounds of iteration ``t`` of a time-varying network (:mod:`rowstoch_fast.network`) on the device:
        the compiled pass of its :meth:`plan` (the awake mask, ``n`` bytes, is copied to the device once per
        iteration; Gilbert-Elliott states are advanced on the device); a network without a plan is refused."""
        plan = net.plan(t)
        if plan is None:
            raise ValueError(f"{net!r} has no compiled pass and so does not run on backend='cupy'")
        matrix_of, seed, p, awake, chain = plan
        mask = None
        if awake is not None:  # one upload per iteration (the network keeps the iteration's mask object)
            cached = self.__dict__.get("_mask")
            if cached is None or cached[0] is not awake:
                cached = self._mask = (awake, self.xp.asarray(np.asarray(awake, dtype=np.uint8)))
            mask = cached[1]
        if rounds > 1 and work is None:
            work = self.xp.empty_like(src)
        cur = src
        for r in range(rounds):
            dst = out if (rounds - 1 - r) % 2 == 0 else work
            M = matrix_of(r)
            bad = None if chain is None else _device_bad_states(chain, M, t)
            _mix_lossy_into(M, cur, dst, self._status, _hashing.round_key(seed, t, r), p, net.stochastic == "row",
                            mask, bad)
            cur = dst
        return out

    def _capture(self, launches):
        """``launches()`` captured as a CUDA graph on a side stream; None, and no more graphs for this backend,
        if CuPy or the driver cannot (an old CuPy, HIP, a driver that refuses), said once in a RuntimeWarning
        (plain launches from then on: the same results, more of the host's time per step)."""
        cupy = self.xp
        stream = self.__dict__.get("_capture_stream")
        try:
            if stream is None:
                stream = self._capture_stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                stream.begin_capture()
                try:
                    launches()
                finally:
                    graph = stream.end_capture()
            return graph
        except Exception as exc:  # noqa: BLE001 - any failure: plain launches, which raise what is not the capture's
            self.use_graphs = False
            warnings.warn(f"backend 'cupy': CUDA graphs turned off for this optimizer, a capture failed "
                          f"({type(exc).__name__}: {exc}); its launches are made one by one from now on",
                          RuntimeWarning, stacklevel=2)
            return None

    def tracker(self, A, rounds, kind):
        from ..tracker import DiagTracker, NetworkTracker

        if is_network(A):  # V_t = A_{t-1} ... A_0 on the device, advanced with mix_network
            return NetworkTracker(A, rounds, kind, xp=self.xp,
                                  mix=lambda V, t: self.mix_network(A, t, V, self.xp.empty_like(V), rounds))
        return _DeviceTracker(DiagTracker(A, rounds, kind))

    def _next_launch(self, check):
        if not (check and self.checking):
            return 0
        self._launches += 1
        self.last_launch = self._launches
        return self.last_launch

    def combine(self, out, coefs, blocks, check=True):
        launch = self._next_launch(check)
        _combine_into(out, coefs, blocks, self._status, launch)
        return DEFERRED if launch else True

    #: The largest block (rows x width) whose Pull-Diag-GT y phase of one round (of any number under
    #: :data:`ROUNDS` ``"persistent"``) runs as one launch that computes the tracker input as it gathers
    #: (:meth:`gt_y_phase`); above it the gathers would read three blocks where a separate pass reads them once.
    fused_phase_max = 2**16

    def gt_y_phase(self, A, rounds, lr, x, y, g_new, g_old, s_new, s_old, y_out, xw, psi, work):
        """Pull-Diag-GT's y phase (the CPU backend's ``gt_y_phase``): ``y_out <- A^R (y + s_new g_new - s_old
        g_old)`` and ``xw <- x - lr y_out``, the descent done by the last round's kernel (no pass of its own).
        One round (any number under :data:`ROUNDS` ``"persistent"``: one cooperative launch) on at most
        :attr:`fused_phase_max` entries: the whole phase in one launch (the tracker input computed as it is
        gathered, never written); otherwise the tracker input into ``psi``, the first ``R - 1`` rounds
        (through ``work`` and ``y_out``; one launch under ``"persistent"``), then the last, all replayed as one
        CUDA graph once the same buffers, tracker rows and ``lr`` come again (the tracker has frozen), its check
        told apart from one replay to the next on the device. The same sums in the same order as the CPU, hence
        the same bits. Returns DEFERRED (``xw`` checked on the device) or True (checks off)."""
        status = self._status
        phase = self._y_phase(A, rounds, lr, x, y, g_new, g_old, s_new, s_old, y_out, xw, psi, work)
        if self._one_launch_phase(rounds, x):
            launch = self._next_launch(True)
            phase(launch)
            return DEFERRED if launch else True
        checked = self.checking
        graph = None
        if self.use_graphs:  # (the tracker's rows are keyed too: a graph once it has frozen)
            key = ("y phase", *map(_ptr, _mix_arguments(A)[1:]), A.n, *map(_ptr, (x, y, g_new, g_old, s_new, s_old,
                   y_out, xw, psi, work)), x.shape, rounds, float(lr), MIX_KERNEL, ROUNDS, checked)
            graph = self._graph(key, lambda: (_tick_into(status), phase(_GRAPH_CHECK if checked else 0)))
        if graph is None:
            launch = self._next_launch(True)
            phase(launch)
            return DEFERRED if launch else True
        return self._replay(graph)

    def _y_phase(self, A, rounds, lr, x, y, g_new, g_old, s_new, s_old, y_out, xw, psi, work):
        """``launch(id)``: the launches of :meth:`gt_y_phase`, the check of ``xw`` under ``id``."""
        status = self._status
        if self._one_launch_phase(rounds, x):
            if rounds == 1:
                return lambda launch: _phase_into(A, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, status, launch)
            return lambda launch: _phase_rounds_into(A, rounds, y, g_new, g_old, s_new, s_old, x, lr, y_out, xw, work,
                                                     status, launch, self._arrived)

        def phase(launch):
            _tracker_input_into(psi, y, g_new, g_old, s_new, s_old, status)
            src = psi if rounds == 1 else _mix_rounds(A, psi, work, rounds - 1, y_out, status, self._arrived)
            _descent_into(A, src, x, lr, y_out, xw, status, launch)
        return phase

    def _one_launch_phase(self, rounds, x):
        """The y phase is one launch (:meth:`gt_y_phase`) on at most :attr:`fused_phase_max` entries: one round,
        or several in one cooperative launch under :data:`ROUNDS` ``"persistent"``."""
        return x.shape[0] * x.shape[1] <= self.fused_phase_max and (rounds == 1 or _persistent())

    def _replay(self, graph):
        """Launch ``graph`` (whose first node is a tick): its checks' id told apart by the count (kernels.cu);
        DEFERRED, or True with the checks off."""
        graph.launch()
        self._replays += 1
        if not self.checking:
            return True
        self.last_launch = _GRAPH_CHECK | self._replays << 8
        return DEFERRED

    def gt_step(self, A, rounds, lr, grad_fn, shape, t, tracker, xw_in, x, y, g_new, g_old, s_new, s_old, y_out, xw,
                psi, work):
        """A whole Pull-Diag-GT step (ATC form) as one CUDA graph, where ``grad_fn`` is an
        :class:`~rowstoch_fast.objectives.Oracle` whose objective has a device kernel (the nonconvex logistic
        regression) over all nodes (``shape``: what ``grad_fn`` is given, ``(n, d)`` or ``(reps, n, d)``; the
        blocks are node-major, ``(n, reps * d)``): ``x <- A^R xw_in``, the oracle's gradients at ``x`` (its
        draws' iteration read on the device: the replay count plus a base this backend keeps in step with the
        oracle's ``iteration``), ``g_new`` <- them (checked), then :meth:`gt_y_phase` (checked), under one
        check id per replay. The same launches as a step made without the graph, hence the same bits. Before
        the ``tracker`` (a device tracker) has frozen, its rows ``s_new, s_old`` (of step ``t``) change from one
        step to the next: the graph then copies them from its table first, for the ``t`` the device reads (the
        replay count plus a base kept in step with ``t``, as the oracle's).

        Returns None where it does not apply or no graph is made yet (the first time these buffers come):
        the caller then steps as usual, calling ``grad_fn``; else DEFERRED (True with the checks off), the
        oracle told of its call (:meth:`Oracle._called_on_device`)."""
        kernel = getattr(grad_fn, "_device_kernel", None)
        if kernel is None or not self.use_graphs:  # (not an Oracle: a plain step at once)
            return None
        table = None if s_new is s_old else getattr(tracker, "_table", None)  # (one row object once frozen)
        if s_new is not s_old and table is None:
            return None
        obj = grad_fn.objective
        reps = x.shape[1] // obj.d  # (x: node-major, the repetitions side by side)
        if np.dtype(obj.dtype) != x.dtype or x.shape != (obj.n, reps * obj.d) or not x.flags.c_contiguous:
            return None
        checked = self.checking
        rows = (s_new, s_old) if table is None else (table,)  # (the rows a replay reads, or their table)
        key = ("step", id(obj), grad_fn.seed, grad_fn.batches, grad_fn.rep_offset, LOGISTIC_WARPS,
               *map(_ptr, _mix_arguments(A)[1:]), A.n, *map(_ptr, (xw_in, x, y, g_new, g_old, *rows, y_out, xw, psi,
               work)), x.shape, len(shape), rounds, float(lr), MIX_KERNEL, ROUNDS, checked)
        graph = self._graphs.get(key)
        if graph is None:
            if key not in self._seen:
                self._graph(key, None)  # (seen: a graph the next time)
                return None
            gradient = kernel()
            if gradient is None or _logistic_plan_of(obj, reps, obj.n, grad_fn.batches)[5]:
                return None  # (an oracle or objective that must be called; a kernel that needs scratch)
            graph = self._capture_step(key, A, rounds, lr, gradient, table, xw_in, x, y, g_new, g_old, s_new,
                                       s_old, y_out, xw, psi, work, obj, len(shape) == 3)
            if graph is None:
                return None
        self._set_clock(3, grad_fn.iteration)  # the oracle's iteration at the next replay
        if table is not None:
            self._set_clock(4, t)  # the optimizer's
        finite = self._replay(graph)
        grad_fn._called_on_device(self._step_gradients[key][0])
        return finite

    def _set_clock(self, word, value):
        """The run status's base ``word`` (3: the oracle's iteration, 4: the optimizer's) such that the next
        replay reads ``value`` (its count plus the base; kernels.cu, "run status"); set only when it moved."""
        base = (value - self._replays - 1) % 2**64
        if base != self._clock[word]:
            self._status[word:word + 1].fill(np.uint64(base))
            self._clock[word] = base

    def _capture_step(self, key, A, rounds, lr, gradient, table, xw_in, x, y, g_new, g_old, s_new, s_old, y_out, xw,
                      psi, work, obj, stacked):
        """:meth:`gt_step`'s graph, captured under ``key``; the gradients' buffer it writes is kept, as the
        oracle sees it (``stacked``: a ``(reps, n, d)`` view), with the objective ``obj`` (so that the key's id
        stays its own) and, with a ``table``, the tracker's two rows it copies from it."""
        status = self._status
        G = self.xp.empty_like(x)
        if table is not None:
            s_new, s_old = self.xp.empty_like(s_new), self.xp.empty_like(s_old)
        phase = self._y_phase(A, rounds, lr, x, y, g_new, g_old, s_new, s_old, y_out, xw, psi, work)
        check = _GRAPH_CHECK if self.checking else 0

        def step():
            _tick_into(status)
            if table is not None:
                _tracker_rows_into(table, s_new, s_old, status)
            _mix_rounds(A, xw_in, x, rounds, work, status, self._arrived)
            gradient(x, G, status, True)
            _combine_into(g_new, [1.0], [G], status, check)  # (copy_in's launch: 1.0 * v == v)
            phase(check)
        graph = self._graph(key, step)
        if graph is not None:
            reps = x.shape[1] // obj.d
            self._step_gradients[key] = (G.reshape(obj.n, reps, obj.d).swapaxes(0, 1) if stacked else G, obj,
                                         s_new, s_old)
        return graph

    def copy_in(self, out, values):
        launch = self._next_launch(True)
        _combine_into(out, [1.0], [values], self._status, launch)  # 1.0 * v == v, bit for bit
        return DEFERRED if launch else True

    def failed_launch(self):
        failed, replay = (int(v) for v in self._status[:2].get())
        if failed >> 63:  # a graph's check: its id and the replay (kernels.cu, "run status")
            failed |= replay << 8
        if failed:
            self._status.fill(0)
            self._replays = 0
            self._clock = {3: 0, 4: 0}
        return failed

    def first_nonfinite(self, *blocks):
        cupy = self.xp
        found = [int(cupy.argmax(~cupy.isfinite(b).all(axis=1))) for b in blocks if not bool(cupy.isfinite(b).all())]
        return min(found) if found else -1

    gathers_in_place = False

    def gather(self, block, copy=True):
        return block.get()
