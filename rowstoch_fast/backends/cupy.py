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
from .._checks import NO as _NO, YES as _YES
from .._device import DEVICE_TYPES
from .base import DEFERRED, Backend, _drawn_in_sweep, is_device_array, is_network, kept_for

__all__ = [
    "HAS_CUPY", "require_cupy", "to_gpu", "to_cpu", "device_csr", "device_row_weights", "circulant_offsets",
    "device_circulant", "mix", "mix_power", "CupyBackend",
]


def _disabled():
    """Whether ``ROWSTOCH_DISABLE_CUPY`` turns the backend off (a value neither yes nor no: not off, and
    :func:`require_cupy` says so)."""
    return os.environ.get("ROWSTOCH_DISABLE_CUPY", "").strip().lower() in _YES


#: CuPy is importable and not disabled (a CUDA device is checked only when the backend is used).
HAS_CUPY = importlib.util.find_spec("cupy") is not None and not _disabled()

_BLOCK = 256
_OPTIONS = ("-std=c++14", "--fmad=false")

#: Which mixing kernel to run: ``"auto"`` (= ``"circ"``, ``"row"`` or ``"entry"``: the first the matrix allows),
#: ``"entry"`` (one thread per 16 bytes of a row where the width and the alignment allow, else per value, four
#: neighbours' loads in flight, the CSR's values), ``"row"`` (``"entry"`` reading one weight per row instead of
#: the CSR's values, for matrices whose rows each hold one weight, bit for bit, as the in-degree rule writes them) or
#: ``"circ"`` (reading neither the CSR's indices nor its values, for circulant matrices with one weight:
#: :func:`circulant_offsets`; the CSR is then not copied to the device at all); a matrix that does not allow
#: the kernel asked for gets the next of circ, row, entry. All give the same bits; on an H100 at n = 2^20
#: ``"row"`` ran a round 1.36x faster than ``"entry"`` and ``"circ"`` an iteration 1.14x faster than
#: ``"row"`` (1.20x at 2^22; bench/RESULTS.md sections 9b and 9c). Read from ``ROWSTOCH_CUDA_MIX`` at import.
MIX_KERNEL = os.environ.get("ROWSTOCH_CUDA_MIX", "auto")
_MIX_KERNELS = ("auto", "entry", "row", "circ")
#: How per-link running sums (robust gradient-push, R-FAST) run: ``"fused"`` (a round's quantities two at a time
#: in one ``link_sums2`` launch, one loop over a row's links, int32 indices where they fit; a quantity left alone
#: in ``link_sums``), ``"sweep"`` (``link_sums`` of kernels.cu, one launch per quantity, two loops over a row's
#: links; the same bits) or ``"generic"`` (CuPy's generic operations, the path before them; message layers
#: always take it). On an H200 at n = 2^20, d = 10 a robust gradient-push step took 2.02 ms fused and 2.31 ms
#: swept (bench/RESULTS.md section 40a); one quantity in ``link_sums2`` was 2-4% slower than in ``link_sums``.
#: Read from ``ROWSTOCH_CUDA_LINKS`` at import.
LINK_KERNEL = os.environ.get("ROWSTOCH_CUDA_LINKS", "fused")
_LINK_KERNELS = ("sweep", "fused", "generic")
_WIDE_HELD_OUT = True  # (the flags' pass eight links a thread where aligned: 0.035 ms a launch against 0.216 a byte
# a thread at 2^20 on an H200, bench/RESULTS.md 40a; False: a byte a thread, for the tests)
_NARROW_LINKS = 2**31 - 1  # (fewer stored entries than this: "fused" reads int32 indices)
#: Where a uniformly delayed round draws each link's age: ``"rows"`` (``delay_ages_rows``, once per link, a byte
#: each, before the pass) or ``"pass"`` (every thread of the row again in the pass, the path before it). Read from
#: ``ROWSTOCH_CUDA_DELAY_AGES`` at import.
DELAY_AGES = os.environ.get("ROWSTOCH_CUDA_DELAY_AGES", "rows")
# (Variants written since and never run on a device left the package; their ideas, predictions and the commits
# that had them are in bench/RESULTS.md, "GPU paths that no device has run".)


def require_cupy():
    """Import CuPy and check for a device, or raise one clear error saying what is missing (once found, the
    module is kept: every launch asks, and the device count is a driver call)."""
    value = os.environ.get("ROWSTOCH_DISABLE_CUPY", "")
    if _disabled():
        raise RuntimeError(f"backend 'cupy' is disabled by ROWSTOCH_DISABLE_CUPY={value!r}")
    if value.strip().lower() not in _NO:  # ("2" or "abc" were ignored without a word)
        raise ValueError(f"ROWSTOCH_DISABLE_CUPY must be 1, true, yes or on (the CuPy backend off) or 0, false, no, "
                         f"off or empty, got {value!r}")
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
def _module():
    """kernels.cu compiled by NVRTC (cached on disk by CuPy)."""
    cupy = require_cupy()
    with open(os.path.join(os.path.dirname(__file__), "kernels.cu")) as f:
        code = f.read()
    return cupy.RawModule(code=code, options=_OPTIONS)


@lru_cache(maxsize=None)
def _kernel(name):
    return _module().get_function(name)


def _suffix(dtype):
    return "f64" if np.dtype(dtype) == np.float64 else "f32"


def _launch(name, total, args):
    blocks = (int(total) + _BLOCK - 1) // _BLOCK
    if blocks:
        _kernel(name)((blocks,), (_BLOCK,), args)


def draw_samples(prefix, rep_ids, node_ids, rows, key, samples):
    """:func:`rowstoch_fast.objectives.draw_samples` on the current GPU (``draw_samples`` of kernels.cu, one thread
    per replica and node, the same hash and rounding as the compiled host pass): an int64 device array of
    ``len(rep_ids) * rows`` draws, replica-major. ``prefix``: the chain over the seed and the iteration;
    ``node_ids``: the rows' global ids (a host array, copied once per CUDA device and kept), or None for
    ``0..rows - 1``."""
    xp = require_cupy()
    reps = len(rep_ids)
    out = xp.empty(reps * rows, dtype=xp.int64)
    ids = _NULL if node_ids is None else _node_ids_on_device(node_ids)
    _launch("draw_samples", reps * rows,
            (np.uint64(prefix), xp.asarray(rep_ids, dtype=xp.int64), np.int64(reps), ids, np.int64(rows),
             np.uint64(key), np.int64(samples), out))
    return out


def _node_ids_on_device(node_ids):
    """A host array of node ids on the current device, copied once per array object and device (an oracle's
    ``nodes``, the same object every call: read once, so changing it in place is not seen; :func:`kept_for`)."""
    return _on_device(kept_for(_NODE_IDS, node_ids, dict), "ids",
                      lambda: require_cupy().asarray(np.asarray(node_ids, dtype=np.int64)))


_NODE_IDS = {}  # id(host array) -> (a weak reference to it, its copy on each device): draw_samples' node ids


def _require_device(x, name):
    if not is_device_array(x):
        raise TypeError(f"{name} must be a CuPy (device) array for backend='cupy'; "
                        "copy explicitly with rowstoch_fast.backends.cupy.to_gpu (no silent host/device copies)")
    return x


def _device_id():
    """The current CUDA device."""
    runtime = getattr(require_cupy().cuda, "runtime", None)
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


def device_circulant(A):
    """:func:`circulant_offsets` as the circulant kernel's arguments on the current device (``{0, m}``, the
    offsets and the weight, as the CSR's index and value types), or None; computed once, cached on the
    matrix."""
    def arrays():
        found = circulant_offsets(A)
        if found is None:
            return None
        cupy, index = require_cupy(), A.csr.indptr.dtype
        D, weight = found
        return (cupy.asarray(np.array([0, len(D)], dtype=index)), cupy.asarray(D.astype(index)),
                cupy.asarray(np.array([weight], dtype=A.csr.data.dtype)))
    return _on_device(A._diag_cache, "device_circulant", arrays)


def _mix_arguments(A):
    """(kernel family, Ap, Aj, Ax) of ``A``'s mixing on the current device under ``MIX_KERNEL``: ``circ``
    (circulant, one weight), ``row`` (one weight per row) or ``entry`` (the CSR's values), the first that
    ``A`` allows among those the choice allows."""
    if MIX_KERNEL in ("auto", "circ"):
        circ = device_circulant(A)
        if circ is not None:
            return ("circ", *circ)
    Ap, Aj, Ax = device_csr(A)
    if MIX_KERNEL in ("auto", "circ", "row"):
        weights = device_row_weights(A)
        if weights is not None:
            return "row", Ap, Aj, weights
    return "entry", Ap, Aj, Ax


@lru_cache(maxsize=256)
def _mix_kernel(n, w, dtype, index_dtype, aligned, kind, family="entry"):
    """(kernel name, threads) of the mixing kernel of ``family`` (:func:`_mix_arguments`) for an ``n x w``
    block under the choice ``kind`` (:data:`MIX_KERNEL`)."""
    if kind not in _MIX_KERNELS:
        raise ValueError(f"ROWSTOCH_CUDA_MIX must be one of {', '.join(_MIX_KERNELS)}, got {kind!r}")
    suffix = f"{_suffix(dtype)}_{'i32' if np.dtype(index_dtype) == np.int32 else 'i64'}"
    vec = 2 if np.dtype(dtype) == np.float64 else 4
    if aligned and w % vec == 0:
        return f"csr_mix_{family}{vec}x4_{suffix}", n * w // vec
    return f"csr_mix_{family}1x4_{suffix}", n * w


def _ptr(a):
    """The device address of a CuPy array."""
    return a.data.ptr


def _aligned(a, b):
    """Both device arrays start on a 16-byte boundary (the vector kernels' loads and stores)."""
    return (_ptr(a) | _ptr(b)) % 16 == 0


def _mix_into(A, X, out, status=None):
    """``out <- A X`` (one gossip round); a launch that finds ``status`` set (an earlier check failed) does
    nothing."""
    family, Ap, Aj, Ax = _mix_arguments(A)
    n, w = X.shape
    name, threads = _mix_kernel(n, w, Ax.dtype, Ap.dtype, _aligned(X, out), MIX_KERNEL, family)
    _launch(name, threads, (Ap, Aj, Ax, X, out, np.int64(n), np.int64(w), _NULL if status is None else status))
    return out


#: Iterations the device's Gilbert-Elliott chains walk forward in one call (``ge_advance`` of kernels.cu, a key per
#: iteration made on the host), at most; a farther jump reads the chains backwards from ``t`` on the host
#: (``_core.ge_advance``: about ``1 / |p_bad - p_recover|`` steps an entry, whatever the jump) and uploads them.
GE_DEVICE_STEPS = 1024


def _device_bad_states(chain, M, t):
    """The Gilbert-Elliott states of ``M``'s stored weights at iteration ``t`` on the device
    (:meth:`Lossy.chain_states` advanced by ``ge_advance`` of kernels.cu, the transition keys computed on the
    host; over more than :data:`GE_DEVICE_STEPS` iterations, by the CPU's backward read, the same states)."""
    cupy = require_cupy()
    Ap, Aj, _ = device_csr(M)
    index = "i32" if np.dtype(Ap.dtype) == np.int32 else "i64"

    def advance(bad, start, stop, init):
        if stop + 1 - start > GE_DEVICE_STEPS:  # (a far t: O(1 / gap) an entry on the host, not O(t))
            from .. import _core

            states = cupy.asnumpy(bad)
            _core.ge_advance(cupy.asnumpy(Ap), cupy.asnumpy(Aj), states, chain.seed, start, stop, chain.p_bad,
                             chain.p_recover, init=init)
            bad[...] = cupy.asarray(states)
            return
        keys = cupy.asarray(np.array([_hashing.round_key(chain.seed, 2**61 + s, 0) for s in range(start, stop + 1)],
                                     dtype=np.uint64))
        _launch(f"ge_advance_{index}", M.n, (Ap, Aj, np.int64(M.n), bad, keys, np.int64(stop + 1 - start),
                                            np.uint64(_hashing.round_key(chain.seed, 2**62, 0)), np.int32(init),
                                            np.float64(chain.p_bad), np.float64(chain.p_recover),
                                            np.float64(chain.p_bad / (chain.p_bad + chain.p_recover))))
    return chain.chain_states(Aj, Aj.shape[0], t, advance, zeros=cupy.zeros, scans_back=True)


def _mix_lossy_into(M, X, out, status, key, p, renormalise, awake, bad=None):
    """One gossip round of a time-varying network (``csr_mix_lossy`` of kernels.cu: the CPU pass's losses,
    sums and renormalisation); ``key`` is :func:`rowstoch_fast._hashing.round_key`, ``p`` one loss probability or
    one per node (:func:`_per_node_arg`), ``awake`` a device uint8 mask or None."""
    Ap, Aj, Ax = device_csr(M)
    n, w = X.shape
    vec = 2 if np.dtype(Ax.dtype) == np.float64 else 4
    V = vec if _aligned(X, out) and w % vec == 0 else 1
    name = f"csr_mix_lossy{V}_{_suffix(Ax.dtype)}_{'i32' if np.dtype(Ap.dtype) == np.int32 else 'i64'}"
    _launch(name, n * w // V, (Ap, Aj, Ax, X, out, np.int64(n), np.int64(w), status, np.uint64(key), *_per_node_arg(p),
                               np.int32(bool(renormalise)), np.intp(0) if awake is None else awake,
                               np.intp(0) if bad is None else bad))
    return out


def _per_node_arg(value, dtype=np.float64):
    """A network layer's parameter as the kernels take it, ``(value, values)``: one number and a null pointer, or,
    for one per node (a layer built with ``n`` of them: a read-only array, :func:`~rowstoch_fast._checks.per_node_values`),
    0 and their copy on the device in ``dtype``, each sender's read by the kernel (a loss probability: ``u < p`` on
    the top 53 bits is the CPU's ``bits < ceil(p 2^53)``; a compression's bits or k, a noise's sigma: the CPU's
    per-node passes). The copy is made once per array, dtype and device (:func:`kept_for`)."""
    if np.ndim(value) == 0:
        return dtype(value), _NULL
    if type(value) is not np.ndarray:  # (a layer of one's own may give a list: copied each round, kept by nothing)
        value = np.array(value)
    if value.flags.writeable:  # (the layer's own copy, writeable again once unpickled: a change made in place
        # would leave the device's copy stale, so it is frozen as built, as per_node_values made it)
        value.flags.writeable = False
    return dtype(0), _on_device(kept_for(_PER_NODE, value, dict), np.dtype(dtype).str,
                                lambda: require_cupy().asarray(np.asarray(value, dtype=dtype)))


_PER_NODE = {}  # id(host array) -> (a weak reference to it, its copies on each device): per-node layer parameters


def _index_suffix(Ap):
    return "i32" if np.dtype(Ap.dtype) == np.int32 else "i64"


def _message_tables(delayed, noise_seeds, t, r, rounds, slot_stride=1, noise_round=None):
    """The small tables of round ``r`` of iteration ``t`` that ``csr_mix_messages`` reads, as one uint64 array:
    with a :class:`~rowstoch_fast.network.Delayed` layer of bound ``D`` (``last = min(D, t)``), its keys
    ``round_key(seed, 3 2^61 + t - k, r)`` and thresholds ``ceil((k + 1) / (D + 1) 2^53)`` for ``k < last`` and
    where the history keeps the message of each age ``a <= last``: its slot ``((t - a) mod (D + 1)) rounds + r``
    times ``slot_stride`` (1 for a history node by node; its ``n_block`` iteration by iteration: the kernel then
    adds the sender's row; network.hpp's delay_ages and :class:`~rowstoch_fast._history.History`); then, per noisy
    layer, the keys ``round_key(seed, t - a, noise_round)`` of the iterations its messages were sent in
    (``noise_round``: the quantity's, ``content_round``; default ``r``)."""
    last = 0 if delayed is None else min(delayed.max_delay, t)
    parts = []
    if delayed is not None:
        D = delayed.max_delay
        parts += [_hashing.round_key(delayed.seed, 3 * 2**61 + t - k, r) for k in range(last)]
        parts += [_hashing.loss_threshold((k + 1) / (D + 1)) for k in range(last)]
        parts += [(((t - a) % (D + 1)) * rounds + r) * slot_stride for a in range(last + 1)]
    for seed in noise_seeds:
        parts += [_hashing.round_key(seed, t - a, r if noise_round is None else noise_round) for a in range(last + 1)]
    return np.array(parts or [0], dtype=np.uint64)


def _launch_messages(Ap, Aj, Ax, own, X, out, status, key, p, renormalise, awake, bad, delays, last, slots, sent,
                     sigma, noise_only=False, ages=None):
    """A round of messages (``csr_mix_messages`` of kernels.cu: :func:`_mix_lossy_into`'s losses and sleep): the
    self loops read ``own``, entry ``q`` node ``Aj[q]``'s message in ``X`` (with ``delays``, the device tables
    ``(keys or null, thresholds, slots)`` of :func:`_message_tables`: the newest that has arrived in the history
    ``X``, of ``slots`` slots a node; ``ages``: each entry's age drawn beforehand, ``delay_ages_rows``, else
    drawn in the pass); with ``sent`` (noise keys by age) each received copy gets noise of ``sigma``, drawn and
    summed in the same pass (``noise_only``: only the noise, added to ``out``)."""
    n, w = out.shape
    vec = 2 if np.dtype(Ax.dtype) == np.float64 else 4
    V = vec if _aligned(X, out) and _aligned(own, out) and w % vec == 0 else 1
    sigma_one, sigmas = _per_node_arg(sigma)  # (one per node: the sender's, read in the pass)
    _launch(f"csr_mix_messages{V}_{_suffix(Ax.dtype)}_{_index_suffix(Ap)}", n * w // V,
            (Ap, Aj, Ax, own, X, out, np.int64(n), np.int64(w), status, np.uint64(key), *_per_node_arg(p),
             np.int32(bool(renormalise)), _NULL if awake is None else awake, _NULL if bad is None else bad,
             *delays, np.int64(last), np.int64(slots), _NULL if ages is None else ages, sent,
             out.dtype.type(sigma_one), np.int32(bool(noise_only)), sigmas))
    return out


def _held_out(arrived, held_out, nnz, status):
    """``held_out <- (arrived == 0)``, a byte per link (``link_held_out8``: eight a thread where both are 8-byte
    aligned, as CuPy allocates them; else ``link_held_out``)."""
    if _WIDE_HELD_OUT and _ptr(arrived) % 8 == 0 and _ptr(held_out) % 8 == 0:
        _launch("link_held_out8", (nnz + 7) // 8, (arrived, held_out, np.int64(nnz), status))
    else:
        _launch("link_held_out", nnz, (arrived, held_out, np.int64(nnz), status))


def _check_choice(variable, value, choices):
    """A switch read from the environment at import (``ROWSTOCH_CUDA_LINKS``, ``ROWSTOCH_CUDA_DELAY_AGES``) holds
    one of ``choices``; ValueError otherwise (a typo would silently pick a path)."""
    if value not in choices:
        raise ValueError(f"{variable} must be one of {', '.join(choices)}, got {value!r}")


def _check_link_blocks(blocks, n, nnz):
    """The blocks of a running-sums round as ``link_sums`` reads them (:meth:`CupyBackend.running_sums`): each
    ``(src, out, pending, pending_out)`` of one width, ``src`` and ``out`` of ``n`` rows, the per-link blocks of
    ``nnz``, and what the sweep writes (``out``, ``pending_out``) apart from everything else of its quantity (the
    CPU's pass refuses the same); ValueError otherwise."""
    names = ("src", "out", "pending", "pending_out")
    for k, quantity in enumerate(blocks):
        w = quantity[0].shape[1]
        for position, (name, block) in enumerate(zip(names, quantity)):
            rows = n if position < 2 else nnz
            if block.shape != (rows, w):
                raise ValueError(f"blocks[{k}].{name} must have shape {(rows, w)} (src's width, "
                                 f"{'n' if position < 2 else 'one row per stored entry'}), got {block.shape}")
    spans = [(_ptr(block), block.nbytes) for quantity in blocks for block in quantity]  # (once: a step's cost)
    for a, (start, size) in enumerate(spans):
        if a % 4 not in (1, 3):  # (what a round writes: each quantity's out and pending_out, against every block)
            continue
        for b, (other, other_size) in enumerate(spans):
            if b != a and start < other + other_size and other < start + size:
                raise ValueError(f"blocks[{a // 4}].{names[a % 4]} shares memory with blocks[{b // 4}]."
                                 f"{names[b % 4]}: the round writes it while it reads or writes the other")


def _combine_into(out, coefs, blocks, status, launch):
    """``out <- sum_t coefs[t] * blocks[t]`` in one kernel (``combine`` of kernels.cu: the CPU's order and bits);
    a coefficient is a float or a per-row device vector. A NaN or Inf in ``out`` sets ``status`` to ``launch``
    (unless ``launch`` is 0); the launch does nothing if ``status`` holds another launch's id. (Once per term
    of every step: kept lean.)"""
    K = len(blocks)
    if not 1 <= K <= 4 or len(coefs) != K:
        raise ValueError(f"combine takes 1 to 4 (coefficient, block) terms, got {len(coefs)} and {K}")
    n, w = out.shape
    dtype = out.dtype
    scalar = dtype.type
    xs, rows, cs = [_NULL] * 4, [_NULL] * 4, [scalar(0)] * 4
    for t in range(K):
        b, c = blocks[t], coefs[t]
        xs[t] = b if b.dtype == dtype and b.flags.c_contiguous else require_cupy().ascontiguousarray(b, dtype=dtype)
        if is_device_array(c):
            rows[t] = c
        else:
            cs[t] = scalar(c)
    _launch(_COMBINE[dtype.char], n * w, (*xs, *rows, *cs, np.int32(K), out, np.int64(n), np.int64(w), status,
                                          np.uint64(launch)))


def _combine_broadcast(xp, out, coefs, blocks, status, launch):
    """``out <- sum_t coefs[t] * blocks[t]`` with coefficients of any form :meth:`Backend.combine` takes (a float, a
    per-row vector, a per-column ``(1, w)`` row or an ``(n, w)`` block), in the generic array operations of ``xp``,
    summed left to right as the kernel sums; the kernel's run status too: nothing is written once ``status``
    holds another launch's id, and a NaN or Inf in ``out`` records ``launch`` (unless it is 0). No device read."""
    total = None
    for c, b in zip(coefs, blocks):
        c = c[:, None] if getattr(c, "ndim", 0) == 1 else c
        term = c * b
        total = term if total is None else total + term
    free = (status[:1] == 0) | (status[:1] == launch)
    out[...] = xp.where(free[:, None], total, out)
    if launch:
        bad = ~xp.isfinite(out).all(keepdims=True).reshape(1)
        status[:1] = xp.where(free & bad & (status[:1] == 0), launch, status[:1])


_NULL = np.intp(0)  # a null device pointer
_COMBINE = {"d": "combine_f64", "f": "combine_f32"}


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


def _mix_rounds(A, src, out, R, work, status=None):
    """``out <- A^R src`` through the ping-pong buffer ``work`` (R >= 1)."""
    for s in range(1, R + 1):
        dst = out if (R - s) % 2 == 0 else work
        _mix_into(A, src, dst, status)
        src = dst
    return out


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
    ``R``). ``x0`` and what ``grad_fn`` returns must be device arrays (no silent
    host/device copies); :meth:`gather` copies to the host.
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
        self.last_launch = 0
        self._graphs, self._seen = {}, set()

    def attach(self, n, dtype, matrices):
        super().attach(n, dtype, matrices)
        # status[0]: the id of the first checked launch that found a NaN/Inf (kernels.cu, "run status")
        self._status = self.xp.zeros(2, dtype=self.xp.uint64)

    def prepare(self, width):
        _kernel(f"combine_{_suffix(self.dtype)}")  # compiles (or loads from CuPy's cache) and loads the module

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
        if rounds == 1 or not self.use_graphs:
            return _mix_rounds(M, src, out, rounds, work, self._status)
        # what the graph's launches read and write (a matrix freed and another at the same addresses: the same
        # launches)
        key = (*map(_ptr, _mix_arguments(M)[1:]), M.n, _ptr(src), _ptr(out), _ptr(work), src.shape, rounds,
               MIX_KERNEL)
        graph = self._graphs.get(key)
        if graph is None:
            if key not in self._seen:  # the first time: plain launches (compiles and loads the kernels)
                self._seen.add(key)
                return _mix_rounds(M, src, out, rounds, work, self._status)
            graph = self._capture(lambda: _mix_rounds(M, src, out, rounds, work, self._status))
            if graph is None:
                return _mix_rounds(M, src, out, rounds, work, self._status)
            if len(self._graphs) >= self._MAX_GRAPHS:
                self._graphs.clear()
            self._graphs[key] = graph
        graph.launch()
        return out

    def mix_network(self, net, t, src, out, rounds=1, work=None):
        """The rounds of iteration ``t`` of a time-varying network (:mod:`rowstoch_fast.network`) on the device:
        the compiled pass of its :meth:`plan` (the awake mask, ``n`` bytes, is copied to the device once per
        iteration; Gilbert-Elliott states are advanced on the device); a network without a plan is refused, and
        the undirected rule (:meth:`~rowstoch_fast.network.Network.undirected`) runs the CPU's pass on the host.
        Compressed, noisy and delayed messages: :meth:`_mix_messages`."""
        if hasattr(net, "encode"):
            return self._mix_messages(net, t, src, out, rounds, work)
        if net.stochastic == "doubly":  # (the undirected rule has no device kernel: the CPU's pass, on the host)
            return self._on_host(out, lambda: net.mix(to_cpu(src), t, rounds))
        plan = net.plan(t)
        if plan is None:
            raise ValueError(f"{net!r} has no compiled pass and so does not run on backend='cupy'")
        matrix_of, seed, p, awake, chain = plan
        mask = self._awake_mask(awake)
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

    def _awake_mask(self, awake):
        """The awake mask on the device (or None): one upload per iteration (the network keeps the iteration's
        mask object)."""
        if awake is None:
            return None
        cached = self.__dict__.get("_mask")
        if cached is None or cached[0] is not awake:
            cached = self._mask = (awake, self.xp.asarray(np.asarray(awake, dtype=np.uint8)))
        return cached[1]

    def _work(self, name, shape, dtype):
        """A device work block of this backend, kept between calls."""
        cache = self.__dict__.setdefault("_work_blocks", {})
        key = (name, tuple(shape), np.dtype(dtype).str)
        if key not in cache:
            cache[key] = self.xp.empty(shape, dtype=dtype)
        return cache[key]

    def _mix_messages(self, net, t, src, out, rounds, work):
        """The rounds of iteration ``t`` of a network with message layers (:meth:`rowstoch_fast.network._Messages.mix`
        on the device, the same draws and sums): each round encodes the messages (``compress_rows``, one thread per
        message), puts them in the quantity's history when a :class:`~rowstoch_fast.network.Delayed` layer delays
        them, and mixes them with the nodes' own rows in one pass (``csr_mix_messages``: the base network's losses
        and sleep, each link's newest arrived message and its noise drawn in the pass; ``csr_mix_circmsg`` for a
        circulant matrix without losses, sleep, delays or per-link noise). A base network without a compiled pass
        is mixed on the host. After a failed deferred check nothing is written (the flag is read first)."""
        state = self.channel(net)
        core, delayed, n = net.core(), net.delayed(), net.n
        plan = core.plan(t) if is_network(core) else (lambda r: core, 0, 0.0, None, None)
        if plan is None or core.stochastic == "doubly":  # (the undirected rule: no device kernel)
            return self._on_host(out, lambda: net.mix(to_cpu(src), t, rounds, d=self.message_d, state=state))
        if self.checking and int(self._status[0]):
            return out
        _check_choice("ROWSTOCH_CUDA_DELAY_AGES", DELAY_AGES, ("rows", "pass"))  # (before any history is written)
        matrix_of, seed, p, awake, chain = plan
        mask = self._awake_mask(awake)
        cur = src.reshape(n, -1)
        w, dtype = cur.shape[1], cur.dtype
        net.check_message(w, self.message_d)
        ring = None if delayed is None else delayed.ring(state, t, n, n, w, rounds, dtype,
                                                         require=self.require_memory, xp=self.xp)
        noisy = [layer for layer in net.noisy_links() if not layer.silent]  # (noise 0: the base network, bit for bit)
        renormalise = getattr(core, "stochastic", "row") == "row"
        if rounds > 1 and work is None:
            work = self._work("round", cur.shape, dtype)
        for r in range(rounds):
            dst = out.reshape(cur.shape) if (rounds - 1 - r) % 2 == 0 else work.reshape(cur.shape)
            drawn = _hashing.content_round(r, state)  # (this quantity's compression and noise)
            messages = self._encode(net, cur, self._work("messages", cur.shape, dtype), t, drawn, copy=False)
            M = matrix_of(r)
            key = _hashing.round_key(seed, t, r)
            plain = ring is None and not noisy and np.ndim(p) == 0 and p == 0 and mask is None and chain is None
            circ = device_circulant(M) if plain and MIX_KERNEL in ("auto", "circ") else None
            if circ is not None:
                name, threads = _mix_kernel(n, w, dtype, circ[0].dtype, _aligned(messages, dst) and
                                            _aligned(cur, dst), MIX_KERNEL, "circmsg")
                _launch(name, threads, (*circ, cur, messages, dst, np.int64(n), np.int64(w), self._status))
                cur = dst
                continue
            Ap, Aj, Ax = device_csr(M)
            bad = None if chain is None else _device_bad_states(chain, M, t)
            last = 0
            if ring is not None:
                ring.put(t, r, messages)
                messages = ring.buffer
                last = min(delayed.max_delay, t)
            # what the round's pass draws from, in one upload: the delays' keys, thresholds and slots by age, and
            # each noisy layer's keys of the iterations the messages were sent in (t - age)
            node_major = ring is None or ring.order == "node"  # (node j's slot s: row n + j slots + s, or n + s n + j)
            slots = 0 if ring is None else (delayed.max_delay + 1) * rounds if node_major else 1
            tables = None if ring is None and not noisy else self.xp.asarray(
                _message_tables(delayed if ring is not None else None, [layer.seed for layer in noisy], t, r, rounds,
                                1 if node_major else n, noise_round=drawn))
            delays = (_NULL,) * 3 if ring is None else (
                tables[:last] if delayed.delay == "uniform" and last else _NULL, tables[last:2 * last] if last else _NULL,
                tables[2 * last:3 * last + 1])
            start = 0 if ring is None else 3 * last + 1  # (the noise keys after the delays' tables)
            ages = None
            if ring is not None and delayed.delay == "uniform" and 0 < last and delayed.max_delay <= 255 \
                    and DELAY_AGES == "rows":  # each link's age drawn once (a thread per row), not by every thread
                # of its row in the pass
                ages = self._work("ages", (len(Aj),), np.uint8)
                _launch(f"delay_ages_rows_{_index_suffix(Ap)}", n,
                        (Ap, Aj, np.int64(n), delays[0], delays[1], np.int64(last), ages, self._status))
            for k, layer in enumerate(noisy or [None]):
                sent = _NULL if layer is None else tables[start + k * (last + 1):start + (k + 1) * (last + 1)]
                _launch_messages(Ap, Aj, Ax, cur, messages, dst, self._status, key, p, renormalise, mask, bad,
                                 delays, last, slots, sent, 0.0 if layer is None else layer.sigma, noise_only=k > 0,
                                 ages=ages)
            cur = dst
        if ring is not None:
            ring.done(t)
        return out

    def _encode(self, net, X, out, t, r, copy=True):
        """``out <- Q(X)`` on the device (:meth:`rowstoch_fast.network._Messages.encode`: every compressing or
        per-message noise layer, the outer one first, one ``compress_rows`` launch each); without such a layer,
        ``X`` itself where not ``copy``."""
        n, w = X.shape
        L = net.message_length(w, self.message_d)
        first = True
        for seed, method, param, sigma, unbiased in net.encoders():
            for value in (param, sigma):  # (the kernel reads row i's: a block of more rows would read past them)
                if np.ndim(value) and n > len(value):
                    raise ValueError(f"a block of {n} rows compressed under {net!r}, whose per-node values are "
                                     f"{len(value)}")
            (param, params), (sigma, sigmas) = _per_node_arg(param, np.int64), _per_node_arg(sigma)
            _launch(f"compress_rows_{_suffix(X.dtype)}", n * (w // L),
                    (X if first else out, out, np.int64(n), np.int64(w), np.int64(L), np.int32(method),
                     param, sigma, np.int32(bool(unbiased)), np.uint64(_hashing.round_key(seed, t, r)), self._status,
                     params, sigmas))
            first = False
        if first:
            if not copy:
                return X
            out[...] = X
        return out

    def _on_host(self, out, compute):
        """``out <- compute()`` computed on the host (message layers over a base network without a compiled pass,
        e.g. sleep over sleep: the CPU's passes, two copies across the bus per call). Not a launch that a failed
        deferred check freezes, so the flag is read first: after a failure nothing is written."""
        if self.checking and int(self._status[0]):
            return out
        out[...] = self.xp.asarray(compute().reshape(out.shape))
        return out

    def compress(self, net, src, out, t, state=None):
        state = self.channel(net) if state is None else state
        if self.checking and int(self._status[0]):
            return out
        return self._encode(net, self.xp.ascontiguousarray(src).reshape(src.shape[0], -1), out.reshape(out.shape[0], -1),
                            t, _hashing.content_round(0, state)).reshape(out.shape)

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

    def running_sums(self, C, net, t, r, blocks):
        """:meth:`Backend.running_sums` on the device in one sweep over the links (``link_sums2`` of kernels.cu for
        two quantities at a time, ``link_sums`` for one: the CPU's dense form with flags, bit for bit; the blocks
        of a round never overlap, :func:`_check_link_blocks`): a thread per value sums the delivered shares
        and the mass that waited, and touches a link's mass only where it holds or gets some (a byte per link
        and block says which rows may hold mass: :meth:`_link_flags`), so a round costs about one mix plus the
        lost links' rows. Bernoulli losses over a static matrix are drawn on the device (``link_arrivals``);
        other networks' arrivals (sleep, Gilbert-Elliott) are drawn on the host and copied. Nothing is read back
        on the host: the launches check the deferred flag themselves (after a failure nothing is written).

        Message layers (compression, noise, delays) take CuPy's generic operations (:meth:`Backend.running_sums`,
        after one read of the flag); so does every round with ``LINK_KERNEL = "generic"``."""
        _check_choice("ROWSTOCH_CUDA_LINKS", LINK_KERNEL, _LINK_KERNELS)
        if LINK_KERNEL == "generic" or hasattr(net, "encode") or not all(
                self._sweeps(block) for quantity in blocks for block in quantity):
            if self.checking and int(self._status[0]):
                return
            super().running_sums(C, net, t, r, blocks)
            flags = self.__dict__.get("_link_flags_by_block", {})
            for *_, pending_out in blocks:  # (written here: any row may now hold mass)
                flags.pop(id(pending_out), None)
            return
        links = self._link_arrays(C)
        indptr, nnz = links.get("indptr"), links["nnz"]
        if indptr is None:
            indptr = links["indptr"] = self.xp.asarray(links["host"][0])
        n = indptr.shape[0] - 1
        _check_link_blocks(blocks, n, nnz)
        arrived = self._arrivals(links, indptr, net, t, r)
        data, _ = self._link_weights(C, links, net, t)
        if LINK_KERNEL == "fused":
            return self._fused_sums(links, indptr, data, arrived, blocks, n, nnz)
        self._sweep_sums(links, indptr, data, arrived, blocks, n, nnz)

    def _sweep_sums(self, links, indptr, data, arrived, blocks, n, nnz):
        """One ``link_sums`` launch per quantity, then its flags (``link_held_out``)."""
        for src, out, pending, pending_out in blocks:
            held_out = self._link_flags(pending_out, nnz)
            _launch(f"link_sums_{_suffix(self.dtype)}", n * src.shape[1],
                    (indptr, links["indices"], data, arrived, src, out, pending, pending_out,
                     self._link_flags(pending, nnz), held_out, np.int64(n), np.int64(src.shape[1]), self._status))
            _held_out(arrived, held_out, nnz, self._status)

    def _fused_sums(self, links, indptr, data, arrived, blocks, n, nnz):
        """``LINK_KERNEL = "fused"``: the round's quantities two at a time in one ``link_sums2`` launch (a row's
        values of both side by side, one loop over its links), int32 indices where the links fit, then each
        quantity's flags (:func:`_held_out`); a quantity left alone in ``link_sums`` (faster for one)."""
        xp = self.xp
        index = links.get("sweep_index")
        if index is None:  # (the links' indices as the sweep reads them, once per matrix)
            narrow = nnz < _NARROW_LINKS
            dtype = xp.int32 if narrow else xp.int64
            index = links["sweep_index"] = (indptr.astype(dtype, copy=False),
                                            links["indices"].astype(dtype, copy=False), "i32" if narrow else "i64")
        Ap, Aj, suffix = index
        for k in range(0, len(blocks), 2):
            pair = blocks[k:k + 2]
            if len(pair) == 1:  # (one quantity: link_sums)
                self._sweep_sums(links, indptr, data, arrived, pair, n, nnz)
                continue
            args = []
            for src, out, pending, pending_out in pair:
                args += [src, out, pending, pending_out, self._link_flags(pending, nnz),
                         self._link_flags(pending_out, nnz), np.int64(src.shape[1])]
            w = sum(src.shape[1] for src, *_ in pair)
            _launch(f"link_sums2_{_suffix(self.dtype)}_{suffix}", n * w,
                    (Ap, Aj, data, arrived, *args, np.int64(n), self._status))
            for *_, pending_out in pair:
                _held_out(arrived, self._link_flags(pending_out, nnz), nnz, self._status)

    def _sweeps(self, block):
        """Whether ``link_sums`` reads ``block`` as it is (a C-contiguous device block of this backend's dtype)."""
        return is_device_array(block) and block.dtype == self.dtype and block.ndim == 2 and block.flags.c_contiguous

    def _arrivals(self, links, indptr, net, t, r):
        """The round's arrivals on the device, a byte per stored entry (a self loop always 1): drawn there for
        Bernoulli losses over a static matrix (``link_arrivals``, the hash of ``Lossy.arrived``), every message
        without a network, else the network's own draws (:meth:`Backend._delivered`) copied."""
        xp = self.xp
        nnz = links["nnz"]
        if net is None:
            ones = links.get("all_arrive")
            if ones is None:
                ones = links["all_arrive"] = xp.ones(nnz, dtype=xp.uint8)
            return ones
        drawn = _drawn_in_sweep(net, t, r)
        if drawn is None:
            return self._delivered(links, net, t, r).view(xp.uint8)
        seed, t, r, p = drawn
        arrived = links.get("arrived")
        if arrived is None:
            arrived = links["arrived"] = xp.empty(nnz, dtype=xp.uint8)
        _launch("link_arrivals", indptr.shape[0] - 1,
                (indptr, links["indices"], np.int64(indptr.shape[0] - 1), np.uint64(_hashing.round_key(seed, t, r)),
                 np.uint64(_hashing.loss_threshold(p)), self._status, arrived))
        return arrived

    def _link_flags(self, block, nnz):
        """Which rows of the per-link block ``block`` may hold mass, a device byte per link (kept between rounds,
        known by the block's identity; a block this backend has not seen may hold mass anywhere: all ones, until
        its first round writes it). Only ``link_sums`` writes a known block (a loaded state goes into new blocks:
        the algorithms' ``_load_extra``)."""
        return self._per_block("_link_flags_by_block", block, lambda: self.xp.ones(nnz, dtype=self.xp.uint8))

    def link_zeros(self, C, width):
        """A zero block of one row per stored entry of ``C``, known to :meth:`running_sums` to hold nothing."""
        block = super().link_zeros(C, width)
        self._link_flags(block, block.shape[0])[...] = 0
        return block

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_link_flags_by_block", None)  # (weak references; a copy's blocks are new: read as they are)
        return state

    def sum_rows(self, block):
        """``1^T block`` as one matrix-vector product (cuBLAS; the ones kept between calls): CuPy's reduction over
        the rows of a narrow block (the centralized baseline's all-reduce) took 6.9 ms at n = 2^20, d = 10 on an
        H100. The same sum in another order (rounding)."""
        cache = self.__dict__.setdefault("_ones", {})
        key = (block.shape[0], block.dtype.str)
        if key not in cache:
            cache[key] = self.xp.ones(block.shape[0], dtype=block.dtype)
        return cache[key] @ block

    def require_memory(self, nbytes, what, hint=""):
        """The GPU's free memory (:func:`require_device_memory`)."""
        require_device_memory(nbytes, what, hint)

    def take_samples(self, table, idx, out):
        """:meth:`Backend.take_samples` in one launch (``sample_rows``, a thread per value; draws given on the host
        or in another integer type are copied to the device as int64 first: the package's oracles draw there for
        a CuPy ``X``); a draw outside the table reads NaN. Generic operations for blocks it cannot read."""
        if not self._sample_rows(table, idx, out, put=False):
            super().take_samples(table, idx, out)

    def put_samples(self, table, idx, values):
        """:meth:`Backend.put_samples` in one launch, as :meth:`take_samples` (the launch checks the deferred flag
        itself); else generic operations after the flag's read (one device-to-host read). After a failure nothing
        is written, like :meth:`running_sums`."""
        if self._sample_rows(table, idx, values, put=True):
            return
        if self.checking and int(self._status[0]):
            return
        super().put_samples(table, idx, values)

    def _sample_rows(self, table, idx, block, put):
        """``sample_rows`` where it reads the table and the block as they are (C-contiguous device blocks in this
        backend's dtype; the draws, one per row and replica, made an int64 device array: draws that are not
        integers, or not one per row and replica, are refused); False: the generic operations."""
        m, rows, reps, d = table.shape
        if not (self._sweeps(block) and block.size == rows * reps * d and is_device_array(table)
                and table.dtype == self.dtype and table.flags.c_contiguous):
            return False
        if not (is_device_array(idx) and idx.dtype == np.int64 and idx.flags.c_contiguous):
            dtype = idx.dtype if hasattr(idx, "dtype") else np.asarray(idx).dtype
            if dtype.kind not in "iu":  # (CuPy's take would wrap them: refused here, as NumPy refuses them)
                raise TypeError(f"the draws must be integer sample ids, got {dtype}")
            idx = self.xp.ascontiguousarray(self.xp.asarray(idx), dtype=self.xp.int64)
        if idx.size != rows * reps:
            raise ValueError(f"the draws must hold one sample id per row and replica ({rows * reps}), got {idx.size}")
        _launch(f"sample_rows_{_suffix(self.dtype)}", block.size,
                (table, np.int64(m), np.int64(rows), np.int64(reps), np.int64(d), idx, block, np.int32(bool(put)),
                 self._status))
        return True

    def tracker(self, A, rounds, kind):
        from ..tracker import DiagTracker, NetworkTracker

        if is_network(A):  # V_t = A_{t-1} ... A_0 on the device, advanced with mix_network
            return NetworkTracker(A, rounds, kind, xp=self.xp,
                                  mix=lambda V, t: self.mix_network(A, t, V, self.xp.empty_like(V), rounds))
        return _DeviceTracker(DiagTracker(A, rounds, kind))

    def _next_launch(self, check):
        if not (check and self.checking):
            return 0
        self.last_launch += 1
        return self.last_launch

    def combine(self, out, coefs, blocks, check=True):
        launch = self._next_launch(check)
        if any(getattr(c, "ndim", 0) == 2 for c in coefs):  # per column (a step size per replica) or per entry
            _combine_broadcast(self.xp, out, coefs, blocks, self._status, launch)
        else:
            _combine_into(out, coefs, blocks, self._status, launch)
        return DEFERRED if launch else True

    def copy_in(self, out, values):
        launch = self._next_launch(True)
        _combine_into(out, [1.0], [values], self._status, launch)  # 1.0 * v == v, bit for bit
        return DEFERRED if launch else True

    def failed_launch(self):
        failed = int(self._status[:1].get()[0])
        if failed:
            self._status.fill(0)
        return failed

    def first_nonfinite(self, *blocks):
        cupy = self.xp
        found = [int(cupy.argmax(~cupy.isfinite(b).all(axis=1))) for b in blocks if not bool(cupy.isfinite(b).all())]
        return min(found) if found else -1

    gathers_in_place = False

    def gather(self, block, copy=True):
        return block.get()
