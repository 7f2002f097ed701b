"""One contract for every backend (CPU always; CuPy where a GPU is), and the device-independent backend logic."""

import os
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rowstoch_fast import PullDiagGT, _reference, pull_diag, topology
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.backends import resolve_backend
from rowstoch_fast.objectives import NonconvexLogistic

from conftest import cupy_or_reason as _cupy_or_reason


@pytest.fixture(params=["cpu", "cupy"])
def xp(request):
    """The array module of the backend under test (numpy for the CPU backend)."""
    if request.param == "cpu":
        return np
    cupy, reason = _cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    return cupy


def host(a):
    return a.get() if hasattr(a, "__cuda_array_interface__") else np.asarray(a)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_mix_and_power(xp, dtype, rtol):
    A = topology.paper_graphs()["grid"].astype(dtype)
    X = np.random.default_rng(0).standard_normal((16, 3)).astype(dtype)
    ref = _reference.mix_power(A.toarray().astype(np.float64), X.astype(np.float64), 5)
    np.testing.assert_allclose(host(A.mix_power(xp.asarray(X), 5)), ref, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(host(A.mix(xp.asarray(X))), A.toarray() @ X, rtol=rtol, atol=rtol)


def test_mix_into_its_own_input_is_refused(xp):
    """``A.mix(X, out=X)`` (or an ``out`` overlapping ``X``) is refused on every backend: a gossip round reads all
    of X while it writes, so writing in place would be a silently different answer."""
    A = topology.exponential(8)
    X = xp.asarray(np.random.default_rng(0).standard_normal((8, 3)))
    for R in (1, 3):
        with pytest.raises(ValueError, match="out shares memory with X"):
            A.mix_power(X, R, out=X)
    with pytest.raises(ValueError, match="out shares memory with X"):
        A.mix(X.reshape(-1)[:16].reshape(8, 2), out=X.reshape(-1)[8:24].reshape(8, 2))


def test_mix_into_its_own_input_is_refused_on_the_emulated_device(cuda_on_host, monkeypatch):
    fake = _emulated_device(cuda_on_host, monkeypatch)
    A = topology.exponential(8)
    X = fake.asarray(np.random.default_rng(0).standard_normal((8, 3)))
    with pytest.raises(ValueError, match="out shares memory with X"):
        A.mix(X, out=X)
    flat = fake.asarray(np.zeros(24))
    with pytest.raises(ValueError, match="out shares memory with X"):
        A.mix(flat[:16].reshape(8, 2), out=flat[8:].reshape(8, 2))
    Y = fake.asarray(np.zeros((8, 3)))
    np.testing.assert_array_equal(A.mix(X, out=Y), A.mix(np.asarray(X)))
    from rowstoch_fast.backends import cupy as backend

    for work, other in ((X, "X"), (Y, "out")):  # the ping-pong buffer too
        with pytest.raises(ValueError, match=f"work shares memory with {other}"):
            backend.mix_power(A, X, 3, out=Y, work=work)
    with pytest.raises(ValueError, match="work must be a C-contiguous float64 device array of shape"):
        backend.mix_power(A, X, 3, out=Y, work=fake.asarray(np.zeros((8, 2))))
    W = fake.asarray(np.zeros((8, 3)))
    np.testing.assert_array_equal(backend.mix_power(A, X, 3, out=Y, work=W), A.mix_power(np.asarray(X), 3))


@pytest.mark.parametrize("kind,hints", [("entry", "auto"), ("entry1", "auto"), ("entry-u1", "auto"), ("row", "auto"),
                                        ("circ", "auto"), ("circ1", "auto"), ("circt", "auto"), ("circ", "64"),
                                        ("circ1", "64"), ("circt", "64")])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("rounds", ["graph", "persistent"])
def test_every_gpu_mixing_kernel_gives_the_cpu_bits(monkeypatch, kind, hints, dtype, rounds):
    """ROWSTOCH_CUDA_MIX's every choice on the device: an in-degree matrix (one weight per row: the "row"
    kernel runs) and the paper's grid (it cannot), aligned and odd widths, and a block off a pack's alignment:
    the CPU kernels' bits; the circulant kernels also with their cache hints on most offsets
    (ROWSTOCH_CUDA_L2_HINTS=64 bytes); a launch per round and the three rounds in one cooperative launch
    (ROWSTOCH_CUDA_ROUNDS=persistent)."""
    cupy, reason = _cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    from rowstoch_fast.backends import cupy as backend

    monkeypatch.setattr(backend, "MIX_KERNEL", kind)
    monkeypatch.setattr(backend, "L2_HINTS", hints)
    monkeypatch.setattr(backend, "ROUNDS", rounds)
    for A in (topology.exponential(1000 + 3).astype(dtype), topology.paper_graphs()["grid"].astype(dtype)):
        for w in (1, 3, 8, 10):
            X = np.random.default_rng(w).standard_normal((A.n, w)).astype(dtype)
            np.testing.assert_array_equal(backend.mix_power(A, cupy.asarray(X), 3).get(), A.mix_power(X, 3))
        # (a block and out one value into their buffers, 8 or 4 bytes off a 16-byte boundary: the one-value
        # kernels, where packs would fault)
        X = np.random.default_rng(0).standard_normal((A.n, 8)).astype(dtype)
        Xd, out = (cupy.empty(A.n * 8 + 1, dtype)[1:].reshape(A.n, 8) for _ in range(2))
        Xd[...] = cupy.asarray(X)
        np.testing.assert_array_equal(backend.mix_power(A, Xd, 3, out=out).get(), A.mix_power(X, 3))


@pytest.mark.parametrize("tracker", ["exact", "perron"])
@pytest.mark.parametrize("R", [1, 3])
def test_pull_diag_gt_matches_cpu(xp, tracker, R):
    A = topology.paper_graphs()["nearest_neighbor"]
    rng = np.random.default_rng(1)
    Q, b = rng.uniform(0.5, 2.0, (2, 16, 3)), rng.standard_normal((2, 16, 3))
    x0 = rng.standard_normal((2, 16, 3))  # two batched repetitions
    Qd, bd = xp.asarray(Q), xp.asarray(b)
    opt = PullDiagGT(A, xp.asarray(x0), lr=0.02, rounds=R, tracker=tracker)
    ref = PullDiagGT(A, x0, lr=0.02, rounds=R, tracker=tracker)
    for _ in range(60):
        opt.step(lambda X: Qd * X - bd)
        ref.step(lambda X: Q * X - b)
    np.testing.assert_allclose(host(opt.x), np.asarray(ref.x), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(host(opt.y), np.asarray(ref.y), rtol=1e-10, atol=1e-14)
    assert opt.communication_rounds == 60 * R


def test_pull_diag_protocol(xp):
    A = topology.paper_graphs()["geometric"]
    Z = np.random.default_rng(2).standard_normal((16, 2))
    res = pull_diag(A, xp.asarray(Z), 40)
    ref = pull_diag(A, Z, 40)
    np.testing.assert_allclose(host(res.errors), ref.errors, rtol=1e-10, atol=1e-14)


def test_objective_gradients_match_cpu(xp):
    f = NonconvexLogistic.synthetic(8, total=1600, batch=20, seed=0)
    X = np.random.default_rng(3).standard_normal((2, 8, 10))
    G = f.stochastic_gradient(xp.asarray(X), 7, seed=4, batches=2)
    np.testing.assert_allclose(host(G), f.stochastic_gradient(X, 7, seed=4, batches=2), rtol=1e-10, atol=1e-14)


# ---------------------------------------------------------------------- no device needed
class FakeDeviceArray:
    """Looks like a GPU array to the dispatch (it has __cuda_array_interface__)."""

    __cuda_array_interface__ = {"shape": (4, 2), "typestr": "<f8", "data": (0, False), "version": 3}
    shape = (4, 2)


def test_auto_dispatch_picks_cupy_for_device_arrays():
    assert resolve_backend("auto", np.zeros(3)) == "cpu"
    cupy, reason = _cupy_or_reason()
    if cupy is None:
        with pytest.raises(RuntimeError, match="backend 'cupy'"):
            resolve_backend("auto", FakeDeviceArray())
        with pytest.raises(RuntimeError, match="backend 'cupy'"):
            PullDiagGT(topology.ring(4), FakeDeviceArray(), lr=0.1)
    else:
        assert resolve_backend("auto", FakeDeviceArray()) == "cupy"


def test_disable_variable_gives_one_clear_error(monkeypatch):
    monkeypatch.setenv("ROWSTOCH_DISABLE_CUPY", "1")
    with pytest.raises(RuntimeError, match="disabled by ROWSTOCH_DISABLE_CUPY=1"):
        resolve_backend("cupy")


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("tpu")


def test_import_never_imports_cupy():
    code = "import sys, rowstoch_fast, rowstoch_fast.backends.cupy; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "False"


def test_device_helpers_refuse_host_arrays_when_cupy_runs():
    cupy, reason = _cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    from rowstoch_fast.backends import cupy as cuda

    with pytest.raises(TypeError, match="no silent host/device copies"):
        cuda.mix(topology.ring(4), np.zeros(4))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA compiler here to check the kernel source")
def test_cuda_kernels_compile(tmp_path):
    import rowstoch_fast

    src = os.path.join(os.path.dirname(rowstoch_fast.__file__), "backends", "kernels.cu")
    out = subprocess.run(["nvcc", "-c", "-std=c++14", "--fmad=false", src, "-o", str(tmp_path / "k.o")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def _nvrtc_kernels():
    """(NVRTC's bindings, kernels.cu's source, compile(*options) -> (its kernels' names, the program)), or a
    skip where CuPy's NVRTC is not here (no device needed)."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) not installed")
    import rowstoch_fast

    with open(os.path.join(os.path.dirname(rowstoch_fast.__file__), "backends", "kernels.cu")) as f:
        src = f.read()
    try:
        nvrtc.createProgram(src, "kernels.cu", [], [])
    except Exception as exc:  # noqa: BLE001 - NVRTC library missing
        pytest.skip(f"NVRTC unavailable: {exc}")

    def compile(*options):
        prog = nvrtc.createProgram(src, "kernels.cu", [], [])
        try:
            nvrtc.compileProgram(prog, ["-std=c++14", "--fmad=false", *options])
        except Exception:  # noqa: BLE001 - show the compiler log
            pytest.fail(nvrtc.getProgramLog(prog))
        ptx = nvrtc.getPTX(prog)
        return set(re.findall(r"\.entry (\w+)\(", ptx.decode() if isinstance(ptx, bytes) else ptx)), prog
    return nvrtc, compile


def test_cuda_kernels_compile_with_nvrtc():
    """The exact compiles the CuPy backend does at run time (NVRTC, same options: the plain module, and the
    cooperative one with ROUNDS' kernels only), without needing a device: every kernel name the backend can
    launch is in the module it launches from."""
    _, compile = _nvrtc_kernels()
    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.backends.cupy import _coordinate_groups

    logistic = {f"logistic_grad{_coordinate_groups(d)}_{t}" for d in range(1, 200) for t in ("f32", "f64")}
    elementwise = {*backend._COMBINE.values(), "tracker_input_f64", "tracker_input_f32", "tracker_rows_f64",
                   "tracker_rows_f32", "tick"}
    plain, cooperative = _mix_kernel_names(), _mix_kernel_names(("csr_rounds", "gt_rounds"))
    for names, options in ((plain | logistic | elementwise, ()), (cooperative, ("-DROWSTOCH_COOPERATIVE",))):
        defined = compile("-arch=compute_80", *options)[0]
        assert names <= defined, f"names the backend can launch that kernels.cu does not define: {names - defined}"
        assert not defined & (cooperative if not options else plain)  # (each module its own)


def test_gpu_registers_compiles_as_the_backend():
    """bench/gpu_registers.py (which CI runs under CUDA 13's NVRTC without the package) compiles kernels.cu with the
    backend's options."""
    import gpu_registers

    from rowstoch_fast.backends import cupy as backend

    assert gpu_registers.OPTIONS == backend._OPTIONS


#: The newest NVRTC whose ptxas was checked to spill no kernel (12.9 and every 13.x release up to it: bench/RESULTS.md
#: section 9h). The mixing kernels are held to 32 registers, and how ptxas squeezes them there changes from one
#: release to the next (13.3 to 13.5 made the tiled kernel spill before it was reworked): a newer release is
#: reported by bench/gpu_registers.py, not failed here, as a spill slows a kernel but changes no result.
_NVRTC_CHECKED = (13, 5)


def test_no_cuda_kernel_spills_registers():
    """ptxas for a Hopper GPU (bench/gpu_registers.py): no kernel of kernels.cu spills registers to local
    memory, with the NVRTC releases checked (:data:`_NVRTC_CHECKED`)."""
    nvrtc, compile = _nvrtc_kernels()
    version = tuple(nvrtc.getVersion())
    if version > _NVRTC_CHECKED:
        pytest.skip(f"NVRTC {version} is newer than the releases checked for spills (up to {_NVRTC_CHECKED}); "
                    "run bench/gpu_registers.py")
    log = nvrtc.getProgramLog(compile("-arch=sm_90", "--ptxas-options=-v", "-DROWSTOCH_ALL_KERNELS")[1])
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) > 100 and all(a == "0" and b == "0" for a, b in spills), log


def _mix_kernel_names(roles=("csr_mix", "gt_descent", "gt_phase")):
    """Every mixing kernel name backends.cupy._mix_kernel can return in ``roles`` for the families
    _mix_arguments gives each choice of ROWSTOCH_CUDA_MIX."""
    from rowstoch_fast.backends import cupy as backend

    families = {"auto": ("entry", "row", "circ"), "circ": ("entry", "row", "circ"), "circ1": ("entry", "row", "circ"),
                "circt": ("entry", "row", "circ"), "row": ("entry", "row")}
    return {backend._mix_kernel(8, w, dtype, index, aligned, kind, family, role)[0]
            for kind in backend._MIX_KERNELS for family in families.get(kind, ("entry",))
            for dtype in (np.float64, np.float32)
            for index in ((np.int32,) if family == "circ" else (np.int32, np.int64))  # (device_circulant's)
            for aligned in (True, False) for w in range(1, 9) for role in roles}


def _ptr(a):
    import ctypes

    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("nodes,M,batch,d,layout,dtype,warps", [
    (None, 37, 37, 5, 1, np.float64, 1), ([3, 0, 5], 37, 37, 5, 1, np.float64, 2),
    (None, 4100, 150, 5, 0, np.float64, 1), (None, 37, 37, 37, 1, np.float64, 4), (None, 40, 37, 131, 0, np.float64, 1),
    (None, 37, 37, 10, 1, np.float32, 2), ([1, 4], 4100, 37, 7, 0, np.float32, 2),
    ([3, 0, 5], 4000, 37, 10, 0, np.float64, 1), (None, 3000, 300, 131, 0, np.float32, 2),
    (None, 37, 37, 100, 1, np.float64, 1), (None, 90, 70, 10, 1, np.float64, 1), (None, 90, 70, 131, 0, np.float64, 4),
    (None, 400, 200, 10, 1, np.float64, 1), (None, 400, 200, 10, 1, np.float64, 8)],
    ids=["all", "subset-w2", "M4100-spill-swaps", "d37-w4", "d131", "f32-w2", "f32-spill-w2", "M4000-spill",
         "f32-d131-spill-swaps-w2", "d100", "batch70", "d131-batch70-w4", "paper-swaps", "paper-w8"])
def test_cuda_logistic_kernel_logic_matches_cpu(cuda_on_host, nodes, M, batch, d, layout, dtype, warps):
    """Same mini-batches (16- and 32-bit draws) and the same sums as the CPU kernel: equal bit for bit, with the
    permutation in shared memory or spilled, the draws made by the lanes together (M <= 4096: at M = 4000
    about 2% of the draws are rejected, so the restarts run) or by lane 0 (M = 4100), the batch's ids read off
    the draws (at most 4 samples per thread) or from lane 0's swaps (more: "swaps"), d below and above one
    warp's width and the registers' 128 (the kernels for 1, 2, 4 and any number of coordinate groups),
    batches of 37 (a last group of 5 in the sums), 70 or more (more samples than a block's threads: the
    margins in several rounds), 3 batches per call (the permutation reset between them), in float64 and
    float32, and 1, 2, 4 or 8 warps per row; the iteration read off a clock; X and G node-major."""
    import ctypes

    n = 6
    f = NonconvexLogistic.synthetic(n, total=n * M, d=d, batch=batch, seed=3, dtype=dtype)
    ids = None if nodes is None else np.asarray(nodes, dtype=np.int64)
    m = n if ids is None else len(ids)
    reps, batches, seed, iteration, rep_offset = 2, 3, 11, 7, 1
    X = np.random.default_rng(0).normal(size=(reps, m, d)).astype(dtype)
    want = f.stochastic_gradient(X, iteration, seed=seed, batches=batches, rep_offset=rep_offset,
                                 nodes=None if ids is None else ids)
    G = np.full_like(X, np.nan)
    spill = np.full(reps * m * (f.samples_per_node + f.batch), -1, dtype=np.int32)
    i64, u64 = ctypes.c_int64, ctypes.c_uint64
    real = ctypes.c_double if dtype == np.float64 else ctypes.c_float
    from rowstoch_fast.backends.cupy import _coordinate_groups

    K = _coordinate_groups(d)
    # at 2 warps, the iteration read off a clock (a graph's replay count 4 plus the host's base), else passed;
    # at 4, X and G node-major ((m, reps d), an optimizer's layout: layout bit 1)
    clock = np.array([0, 0, 4, iteration - 4], dtype=np.uint64) if warps == 2 else None
    node_major = warps == 4
    if node_major:
        X = np.ascontiguousarray(X.swapaxes(0, 1).reshape(m, reps * d))
        G = np.full_like(X, np.nan)
    getattr(cuda_on_host, f"emulate_logistic_grad{K}_{'f64' if dtype == np.float64 else 'f32'}")(
        ctypes.c_longlong(reps * m), ctypes.c_longlong(32 * warps), _ptr(f.H), _ptr(f.Y),
        _ptr(ids) if ids is not None else ctypes.c_void_p(0), i64(m), i64(f.samples_per_node), i64(d), real(f.rho),
        _ptr(X), i64(reps), i64(f.batch), i64(batches), u64(seed), u64(0 if warps == 2 else iteration),
        ctypes.c_void_p(0) if clock is None else _ptr(clock), i64(rep_offset), ctypes.c_int(layout | 2 * node_major),
        _ptr(spill), _ptr(G))
    np.testing.assert_array_equal(G.reshape(m, reps, d).swapaxes(0, 1) if node_major else G, want)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_batch_ids_read_off_the_draws_equal_the_swaps(cuda_on_host, data):
    """kernels.cu's batch_id (sample b of a partial Fisher-Yates read off the draws, no swaps) against doing
    the swaps: for any draws k_b in [b, M), including repeated and self draws."""
    import ctypes

    M = data.draw(st.integers(1, 40))
    B = data.draw(st.integers(1, M))
    draws = np.array([data.draw(st.integers(b, M - 1)) for b in range(B)], dtype=np.int32)
    perm = np.arange(M)
    for b, k in enumerate(draws):
        perm[b], perm[k] = perm[k], perm[b]
    ids = np.full(B, -1, dtype=np.int32)
    cuda_on_host.emulate_batch_ids(_ptr(draws), ctypes.c_longlong(B), _ptr(ids))
    np.testing.assert_array_equal(ids, perm[:B])


def _emulated_logistic_launches(cuda_on_host, monkeypatch, seen):
    """:func:`_emulated_device` where each logistic launch's (layout, warps per row) goes to ``seen`` after its
    blocks and shared memory are checked against the rows, the layout's needs and the limit."""
    from rowstoch_fast.backends import cupy as backend

    def check(name, grid, block, args, shared_mem):
        if name.startswith("logistic_grad"):
            m, M, reps, B, layout = int(args[3]), int(args[4]), int(args[8]), int(args[9]), int(args[15])
            seen.append((layout, block[0] // 32))
            assert grid[0] == reps * m and block[0] % 32 == 0 and shared_mem <= backend._SHARED_LIMIT
            assert shared_mem >= block[0] * (8 + 4) + {0: 0, 1: 4 * (M + B)}[layout & 1]  # (bit 1: node-major)

    return _emulated_device(cuda_on_host, monkeypatch, on_launch=check)


@pytest.mark.parametrize("M,batch", [(400, 200), (1500, 1100), (20000, 1100)], ids=["perm", "perm-large", "spill"])
def test_cupy_logistic_launcher_on_the_host(cuda_on_host, monkeypatch, M, batch):
    """backends.cupy.logistic_grad (layout, shared memory, scratch, arguments) launching the emulated kernel:
    the CPU kernel's gradients bit for bit, in both layouts, within the shared memory limit."""
    from rowstoch_fast.backends import cupy as backend

    seen = []
    fake = _emulated_logistic_launches(cuda_on_host, monkeypatch, seen)
    f = NonconvexLogistic.synthetic(3, total=3 * M, d=4, batch=batch, seed=2)
    X = np.random.default_rng(1).normal(size=(2, 3, 4))
    G = backend.logistic_grad(f, fake.asarray(X), 5, 7, 1, 0, None)
    np.testing.assert_array_equal(np.asarray(G), f.stochastic_gradient(X, 5, seed=7))
    assert seen == [(1 if M < 4000 else 0, 8)]  # 6 rows: 8 warps each


@pytest.mark.parametrize("warps", [1, 4, "auto"])
def test_cupy_logistic_warps_per_row(cuda_on_host, monkeypatch, warps):
    """backends.cupy.LOGISTIC_WARPS: the blocks' width changes, the gradients do not (bit for bit the CPU's);
    "auto" gives a row 8 warps while the rows fit the device's resident warps, fewer down to 1 beyond."""
    from rowstoch_fast.backends import cupy as backend

    seen = []
    fake = _emulated_logistic_launches(cuda_on_host, monkeypatch, seen)
    monkeypatch.setattr(backend, "LOGISTIC_WARPS", warps)
    f = NonconvexLogistic.synthetic(5, total=5 * 60, d=3, batch=50, seed=4)
    X = np.random.default_rng(2).normal(size=(5, 3))
    for it in (1, 2):
        G = backend.logistic_grad(f, fake.asarray(X), it, 3, 2, 0, None)
        np.testing.assert_array_equal(np.asarray(G), f.stochastic_gradient(X, it, seed=3, batches=2))
    assert seen == [(1, 8 if warps == "auto" else warps)] * 2
    if warps == "auto":  # the fake device: 132 SMs, 32 warps each at the kernel's registers, 4,224 warps
        f512 = NonconvexLogistic.synthetic(512, total=512 * 4, d=3, batch=2, seed=4)
        assert backend._logistic_plan_of(f512, 1, 512, 1)[2] == 8 * 32  # (a plan's threads per block)
        monkeypatch.setattr(backend, "_DEVICE_FACTS", {})
        assert [backend._logistic_warps(rows) for rows in (1, 512, 528, 529, 1056, 1057, 2112, 2113, 4224, 2**15)] == [
            8, 8, 8, 4, 4, 2, 2, 1, 1, 1]
        monkeypatch.setattr(backend, "_DEVICE_FACTS", {})  # a device of 108 SMs (3,456 warps)
        monkeypatch.setattr(fake.cuda, "Device", lambda *a: types.SimpleNamespace(
            synchronize=lambda: None, attributes={"L2CacheSize": 40 * 2**20, "MultiProcessorCount": 108}))
        assert [backend._logistic_warps(rows) for rows in (432, 433, 512)] == [8, 4, 4]
        monkeypatch.setattr(fake.cuda.runtime, "getDevice", lambda: 1)  # ... as a second device: a plan of its own
        assert backend._logistic_plan_of(f512, 1, 512, 1)[2] == 4 * 32


@pytest.mark.parametrize("bad", [0, 3, 16, "8", 8.0, True, None])
def test_cupy_logistic_warps_refuses_a_bad_choice(cuda_on_host, monkeypatch, bad):
    from rowstoch_fast.backends import cupy as backend

    fake = _emulated_logistic_launches(cuda_on_host, monkeypatch, [])
    monkeypatch.setattr(backend, "LOGISTIC_WARPS", bad)
    f = NonconvexLogistic.synthetic(2, total=2 * 20, d=3, batch=5, seed=4)
    with pytest.raises(ValueError, match=r"LOGISTIC_WARPS must be 'auto' or one of 1, 2, 4, 8, got"):
        backend.logistic_grad(f, fake.asarray(np.zeros((2, 3))), 1, 3, 1, 0, None)


def test_cupy_logistic_launcher_refuses_hours_of_work(cuda_on_host, monkeypatch):
    """A gradient call of more than 2^40 multiply-adds is refused before the launch, as on the CPU (a kernel
    runs to its end, beyond Ctrl-C)."""
    from rowstoch_fast.backends import cupy as backend

    seen = []
    fake = _emulated_logistic_launches(cuda_on_host, monkeypatch, seen)
    f = NonconvexLogistic.synthetic(3, total=3 * 40, d=4, batch=20, seed=2)
    X = fake.asarray(np.zeros((3, 4)))
    for grad in (lambda b: backend.logistic_grad(f, X, 5, 7, b, 0, None), lambda b: f.stochastic_gradient(
            np.zeros((3, 4)), 5, seed=7, batches=b)):
        with pytest.raises(ValueError, match=r"batches = 10000000000000 with batch = 20 .*over 2\^40"):
            grad(10**13)
    assert seen == []


def test_the_gpu_oracle_benchmark_runs_on_the_host(cuda_on_host, monkeypatch, capsys):
    """bench/gpu_kernels.py's oracle section (the gradient, a Pull-Diag-GT step, the table) and its probes (the
    mixing kernels, the oracle, the host's part) on the fake CuPy and the emulated kernels: the script a device
    session runs does not fail on the way, and reports the GPU gradients bit-identical."""
    import importlib.util

    seen = []
    fake = _emulated_logistic_launches(cuda_on_host, monkeypatch, seen)
    from rowstoch_fast.backends import cupy as backend

    monkeypatch.setattr(backend, "_RESIDENT_WARPS", 16)  # "auto": 2 warps for 8 rows (the emulation's speed)
    path = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "gpu_kernels.py")
    monkeypatch.syspath_prepend(os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("gpu_kernels_on_host", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = {}
    monkeypatch.setattr(bench, "PIPELINED", 3)  # (20 on a device)
    bench.section_oracle(fake, out, (8,), M=24, B=12, d=3)
    assert [row["what"] for row in out["oracle"]] == [
        "gradient", "gradient, 3 back to back", "gradient, one warp per row",
        "gradient, 3 back to back, one warp per row", "Pull-Diag-GT step", "Pull-Diag-GT step, 3 in a row",
        "Pull-Diag-GT step, y phase unfused", "Pull-Diag-GT step, 3 in a row, one warp per row",
        "Pull-Diag-GT step with an Oracle (one graph)", "Pull-Diag-GT step with an Oracle (one graph), 3 in a row"]
    # (layout 3: the Oracle's step graph launches the kernel on the optimizer's node-major block)
    assert all(row["bit_identical"] for row in out["oracle"]) and set(seen) == {(1, 2), (1, 1), (3, 2)}
    printed = capsys.readouterr().out
    assert "bit-identical to the CPU's, 2 and 1 warp(s) per row: True" in printed
    assert "the steps with an Oracle replayed as one graph: True" in printed
    seen.clear()
    bench.section_probe_oracle(fake, out, sizes=(8,), M=24, B=12, d=3, calls=2)  # what stage ncu_oracle profiles
    assert [(row["n"], row["warps"]) for row in out["probe_oracle"]] == [(8, 2), (8, 1)]
    assert seen == [(1, 2)] * 2 + [(1, 1)] * 2 and bench.gpu.LOGISTIC_WARPS == "auto"
    fake.cuda.runtime.getDeviceCount = lambda: 1
    bench.section_probe_host(fake, out, n=8, M=24, B=12, d=3, calls=3)  # the host's part of a call and a step
    host = {row["what"]: row for row in out["probe_host"]}
    assert set(host["gradient call"]["launches"]) == {"logistic_grad1_f64"}
    assert {"logistic_grad1_f64", "combine1_f64"} <= set(host["Pull-Diag-GT step"]["launches"])
    assert host["Pull-Diag-GT step with an Oracle (one graph)"]["launches"] == {}  # (graph replays only)
    assert all(row["host_seconds"] > 0 for row in out["probe_host"])
    launched = []

    def kernel(name, kernel=bench.gpu._kernel):
        def launch(grid, block, args, shared_mem=0):  # (circ: with the cache hints' threshold, Ap[2])
            launched.append((name, int(args[0][2])) if "circ" in name else name)
            return kernel(name)(grid, block, args, shared_mem)
        return launch
    monkeypatch.setattr(bench.gpu, "_kernel", kernel)
    # what ncu profiles (bench/gpu_check.sh, stage ncu), at 2^6 and 2^7
    bench.section_probe(fake, out, plan=((6, ("entry", "row", "circ-off", "circ", "circt")),
                                         (7, ("circ-off", "circ"))))
    assert [(row["n"], row["kernel"]) for row in out["probe"]] == [
        (64, "entry"), (64, "row"), (64, "circ-off"), (64, "circ"), (64, "circt"), (128, "circ-off"), (128, "circ")]
    quarter = 50 * 2**20 // 4  # (the fake device's L2, 50 MB)
    circ = [("csr_mix_circ2x4_f64_i32", 0)] * 3 + [("csr_mix_circ2x4_f64_i32", quarter)] * 3
    assert launched == (["csr_mix_entry2x4_f64_i32"] * 3 + ["csr_mix_row2x4_f64_i32"] * 3 + circ +
                        [("csr_mix_circt2x4_f64_i32", quarter)] * 3 + circ)
    assert "compulsory" in capsys.readouterr().out and bench.gpu.L2_HINTS == "auto"


def test_the_gpu_targets_read_off_a_recorded_run(capsys, tmp_path, monkeypatch):
    """bench/gpu_targets.py on run 7's recorded gpu_kernels.json (RESULTS 9c): the targets met and missed as
    section 9c reports them; an unreadable file exits 2 with a one-line message."""
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), os.pardir, "bench"))
    import gpu_targets

    run = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "gpu", "h100_run7_gpu_kernels.json")
    assert gpu_targets.main([run]) == 0
    out = capsys.readouterr().out
    for line in ("bits: 30 of 30 runs gave the CPU's iterates", "| 2^20 | circ | 4.032 | 74% met | 6.28x met |",
                 "| 2^22 | circ | 19.733 | 64% met | 5.56x **missed** |", "| 2^10 | default | 0.0929 met | 1.00x |",
                 "| 2^14 | default | 0.1236 **missed** | 1.00x |", "- no contender beats the default",
                 "| 512 | gradient | 2.44x | >= 3x **missed** |", "| 32768 | gradient | 19.81x | >= 10x met |"):
        assert line in out, line
    (tmp_path / "partial.json").write_text('{"overhead": [{"n": 1024, "contender": "default", "seconds": 1e-4}, '
                                           '{"n": 1024, "contender": "persistent", "seconds": 6e-5}], "round_cost": '
                                           '[{"n": 16384, "rounds": "persistent", "seconds_per_round": 1.25e-6}]}')
    assert gpu_targets.main([str(tmp_path / "partial.json")]) == 0
    out = capsys.readouterr().out
    assert "- persistent beats the default at n = 2^10" in out and "(mix: not in this run)" in out
    assert "| 2^14 | persistent | 1.25 |" in out
    assert gpu_targets.main([str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def _emulated_device(cuda_on_host, monkeypatch, on_launch=None):
    """The CuPy backend as it is, every launch going to the emulated kernels of kernels.cu (float64, int32
    indices: the instances tests/cuda_on_host.cpp builds) on host memory: NumPy stands in for CuPy, CUDA graphs
    record and replay the launches; ``on_launch(name, grid, block, args, shared_mem)`` sees each launch first.
    Returns the fake CuPy module."""
    import ctypes

    from test_algorithms import _FakeGraphs, _fake_cupy

    from rowstoch_fast.backends import cupy as backend

    fake = _fake_cupy()
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)
    monkeypatch.setattr(backend, "_ptr", lambda a: a.ctypes.data)
    cuda_on_host.emulate_shared_overruns.restype = ctypes.c_longlong
    cuda_on_host.emulated_misaligned.restype = ctypes.c_longlong
    kinds = {np.int64: ctypes.c_int64, np.uint64: ctypes.c_uint64, np.float64: ctypes.c_double,
             np.float32: ctypes.c_float, np.int32: ctypes.c_int}
    launched = []

    def arg(a):
        return ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else kinds[type(a)](a)

    def kernel(name):
        emulated = getattr(cuda_on_host, f"emulate_{name}")

        def launch(grid, block, args, shared_mem=0):
            if on_launch is not None:
                on_launch(name, grid, block, args, shared_mem)
            converted = [arg(a) for a in args]  # now: the arrays must live until the (maybe replayed) launch
            launched.append(name)
            threads = grid[0] * block[0]  # the block kernels' emulation takes blocks and threads per block
            blocked = name.startswith(("logistic_grad", "csr_mix_circt", "csr_rounds", "gt_rounds"))
            shape = (grid[0], block[0]) if blocked else (threads,)

            def run():  # (what a GPU would fault on: past the launch's shared bytes, a misaligned pack)
                cuda_on_host.emulate_shared_bytes(ctypes.c_longlong(shared_mem))
                cuda_on_host.emulated_misaligned()
                try:
                    emulated(*map(ctypes.c_longlong, shape), *converted)
                    overruns, misaligned = cuda_on_host.emulate_shared_overruns(), cuda_on_host.emulated_misaligned()
                finally:
                    cuda_on_host.emulate_shared_bytes(ctypes.c_longlong(1 << 16))  # (direct calls: no guard)
                assert overruns == 0, f"{name} wrote past the {shared_mem} bytes of shared memory it was launched with"
                assert misaligned == 0, f"{name} loaded or stored {misaligned} packs at addresses not aligned to them"
            _FakeGraphs.run(run)
        return launch

    monkeypatch.setattr(backend, "_kernel", kernel)
    monkeypatch.setattr(backend, "_cooperative_kernel", kernel)  # (csr_rounds: its blocks all at once)
    fake.launched = launched
    return fake


@pytest.mark.parametrize("network", ["static", "lossy", "bursty", "sleepy-lossy"])
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_cupy_backend_on_the_emulated_kernels_equals_the_cpu(cuda_on_host, monkeypatch, name, network):
    """Each algorithm through backends.cupy and the CUDA kernels' logic (mixing, combine, lossy rounds and
    bursty chains, graphs of the R rounds) on static and unreliable networks: the CPU's iterates, so what a GPU
    runs differs from this only in the hardware."""
    from test_algorithms import _on_cpu_and_device

    from rowstoch_fast.network import Lossy, Sleepy

    fake = _emulated_device(cuda_on_host, monkeypatch)
    A = topology.erdos_renyi(12, 0.3, seed=2)
    nets = {"static": A, "lossy": Lossy(A, 0.3, seed=1),
            "bursty": Lossy(A, 0.9, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
            "sleepy-lossy": Sleepy(Lossy(A, 0.2, seed=3), 0.8, seed=4)}
    net = nets[network]
    cls = REGISTRY[name]
    rng = np.random.default_rng(5)
    G, x0 = rng.standard_normal((12, 4)), rng.standard_normal((12, 4))
    cpu, gpu = _on_cpu_and_device(cls, net, x0, G, fake, 12)
    np.testing.assert_allclose(gpu.gather_x(), cpu.x, rtol=1e-12, atol=1e-13)
    def ran(prefix):
        return any(k.startswith(prefix) for k in fake.launched)
    assert ran("combine")
    if cls.matrices:  # (the centralized baseline does not gossip)
        assert ran("csr_mix_lossy") == (network != "static")
        assert (ran("csr_mix_entry") or ran("csr_mix_row") or ran("csr_mix_circ")) == (network == "static")
        assert ran("ge_advance") == (network == "bursty")


def test_a_failed_capture_says_so_and_launches_plainly(cuda_on_host, monkeypatch):
    """A driver (or CuPy) that cannot capture CUDA graphs: one RuntimeWarning naming the failure, graphs off for
    that optimizer, its launches one by one, the CPU's iterates all the same."""
    from test_algorithms import _FakeGraphs

    fake = _emulated_device(cuda_on_host, monkeypatch)

    class NoCapture(_FakeGraphs.Stream):
        def begin_capture(self):
            raise RuntimeError("cudaErrorStreamCaptureUnsupported (a stand-in)")
    monkeypatch.setattr(fake.cuda, "Stream", NoCapture)
    A = topology.exponential(11)
    rng = np.random.default_rng(6)
    x0, G = rng.standard_normal((11, 4)), rng.standard_normal((11, 4))
    cpu, gpu = PullDiagGT(A, x0, 0.05, rounds=3), PullDiagGT(A, fake.asarray(x0), 0.05, rounds=3)
    Gd = fake.asarray(G)
    with pytest.warns(RuntimeWarning, match="CUDA graphs turned off.*cudaErrorStreamCaptureUnsupported") as seen:
        for _ in range(8):
            cpu.step(lambda X: X - G)
            gpu.step(lambda X: X - Gd)
    assert len([w for w in seen if "CUDA graphs" in str(w.message)]) == 1 and not gpu._ops.use_graphs
    assert "tick" not in fake.launched and not gpu._ops._graphs
    np.testing.assert_array_equal(gpu.gather_x(), cpu.x)


@pytest.mark.parametrize("cause", [None, "gradient", "iterate"])
def test_the_y_phase_graph_on_the_emulated_kernels(cuda_on_host, monkeypatch, cause):
    """MG-Pull-Diag-GT once its tracker has frozen: the y phase replays as one graph whose check tells its
    replays apart on the device (kernels.cu's tick and run status): the CPU's iterates bit for bit; a NaN
    gradient, or a huge one that overflows the y phase (its check is inside the graph), at step 9 raises the
    CPU's DivergenceError (iteration, node, cause) 5 steps later, nothing the later replays ran having touched
    the state it rolls back to, from which both go on alike."""
    from rowstoch_fast.errors import DivergenceError

    fake = _emulated_device(cuda_on_host, monkeypatch)
    A = topology.exponential(11)
    rng = np.random.default_rng(4)
    x0, G = rng.standard_normal((11, 4)), rng.standard_normal((11, 4))

    def make_grad(device):
        calls = [0]

        def grad(X):
            calls[0] += 1
            out = X - (fake.asarray(G) if device else G)
            if cause is not None and calls[0] == 10:
                out[3, 2] = np.nan if cause == "gradient" else 1e308
            return out
        return grad

    cpu = PullDiagGT(A, x0, 0.05, rounds=3, tracker="perron")
    gpu = PullDiagGT(A, fake.asarray(x0), 0.05, rounds=3, tracker="perron")
    gpu._ops.check_every = 64
    outcome = {}
    for name, opt in (("cpu", cpu), ("gpu", gpu)):
        grad = make_grad(name == "gpu")
        try:
            for _ in range(14):
                opt.step(grad)
            opt.x
            outcome[name] = None
        except DivergenceError as exc:
            outcome[name] = (exc.iteration, exc.node, exc.what)
    assert outcome["gpu"] == outcome["cpu"]
    assert outcome["cpu"] == {None: None, "gradient": (9, 3, "gradient"), "iterate": (9, 0, "iterate")}[cause]
    assert gpu.iteration == cpu.iteration
    assert "tick" in fake.launched  # the y phase captured as a graph (the launches list records captures)
    assert cause is not None or gpu._ops._replays >= 10  # ... and replayed (a failure's read resets the count)
    for _ in range(3):  # both go on alike from the same state
        cpu.step(lambda X: X - G)
        Gd = fake.asarray(G)
        gpu.step(lambda X: X - Gd)
    np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
    np.testing.assert_array_equal(gpu.gather_y(), cpu.y)


def _plain_gradient_calls(monkeypatch):
    """The iterations of the device gradients called from Python from now on (a step's graph calls
    backends.cupy.logistic_grad once, with a clock, when it is captured)."""
    from rowstoch_fast.backends import cupy as backend

    calls, plain = [], backend.logistic_grad

    def counted(obj, X, iteration, *args, clock=None, **kwargs):
        if clock is None:
            calls.append(iteration)
        return plain(obj, X, iteration, *args, clock=clock, **kwargs)
    monkeypatch.setattr(backend, "logistic_grad", counted)
    return calls


def _poisoned_sample(f, value, run, cause, lo, hi):
    """A sample of node 0 whose features, set to ``value``, make ``run(f)`` (a CPU run) raise the DivergenceError
    of ``cause`` at an iteration in ``[lo, hi]``, and that iteration."""
    from rowstoch_fast.errors import DivergenceError

    for s in range(f.samples_per_node):
        H = f.H[s].copy()
        f.H[s] = value
        try:
            run(f)
        except DivergenceError as exc:
            if exc.what == cause and lo <= exc.iteration <= hi:
                return s, exc.iteration
        finally:
            f.H[s] = H
    raise AssertionError("no such sample")


_STEP_CASES = [(None, 1, "perron"), (None, 2, "perron"), ("gradient", 1, "perron"), ("iterate", 1, "perron"),
               ("extra call", 1, "perron"), ("extra call", 2, "perron"), (None, 1, "exact"), ("gradient", 1, "exact"),
               ("extra call", 2, "exact")]


@pytest.mark.parametrize("cause,reps,tracker,rounds,device", [
    (*case, rounds, device) for device in ("emulated", "gpu", "emulated-persistent", "gpu-persistent")
    for rounds in ((3,) if device.endswith("persistent") else (1, 3)) for case in _STEP_CASES
    if device != "emulated-persistent" or (case[1] == 1 and case[0] != "extra call")])  # (emulated: a subset)
def test_the_whole_step_graph(request, monkeypatch, cause, reps, tracker, rounds, device):
    """Pull-Diag-GT stepped with an Oracle of the logistic objective on the CuPy backend: once the buffers come
    again, the whole step (mix, the oracle's kernel with its iteration read on the device, the gradient's copy
    and check, the y phase) replays as one graph, grad_fn no longer called from Python: the CPU's iterates bit
    for bit, the oracle's ``iteration`` and ``last`` too (``last`` a copy that later steps leave alone); an extra
    call of the oracle between two steps shifts both alike (the device's base follows); a NaN gradient or an
    overflowing iterate inside the graph gives the CPU's DivergenceError (iteration, node, cause) steps later
    and the same rolled-back state, from which both go on alike. One repetition or two (the optimizer's blocks
    node-major, the oracle given (reps, n, d)). The exact tracker before it has frozen (the graph copies its
    rows from the table for the step the device reads) and across its freezing (at step 19 with R = 3: a new
    graph that reads the frozen row). On the emulated kernels, and on a GPU where there is one; "persistent":
    R = 3 with ROWSTOCH_CUDA_ROUNDS=persistent (the phases' rounds in cooperative launches, inside the graph;
    emulated: the cases of one repetition without an extra call, a GPU runs all)."""
    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.errors import DivergenceError

    if device.endswith("persistent"):
        monkeypatch.setattr(backend, "ROUNDS", "persistent")
        device = device.split("-")[0]
        if device == "emulated":  # (one small block: test_cuda_rounds_in_one_launch_* run several)
            monkeypatch.setattr(backend, "_ROUNDS_GRID", 1)
            monkeypatch.setattr(backend, "_BLOCK", 8)
    if device == "gpu":
        xp, reason = _cupy_or_reason()
        if xp is None:
            pytest.skip(f"CuPy backend unavailable: {reason}")
    else:
        xp = _emulated_device(request.getfixturevalue("cuda_on_host"), monkeypatch)
        # "auto": 2 warps per row for 8 rows, 1 for 16, instead of 8 (256 host threads per block: 4x the time;
        # test_cupy_logistic_warps_per_row checks the widths)
        monkeypatch.setattr(backend, "_RESIDENT_WARPS", 16)
    n, steps = 8, 24 if tracker == "exact" and rounds == 3 else 16  # (exact, R = 3: frozen at step 19)
    A = topology.exponential(n)
    f_cpu, f_gpu = (NonconvexLogistic.synthetic(n, total=n * 40, d=3, batch=2, seed=1) for _ in range(2))
    x0 = np.random.default_rng(3).standard_normal((reps, n, 3) if reps > 1 else (n, 3)) * 0.1  # (node-major inside)

    def run(f):
        opt, oracle = PullDiagGT(A, x0, 0.05, rounds=rounds, tracker=tracker), f.oracle(seed=7, batches=rounds)
        for _ in range(steps):
            opt.step(oracle)
    if cause in ("gradient", "iterate"):  # NaN features, or huge ones (finite gradients that overflow y)
        value = np.nan if cause == "gradient" else 1.7e308
        sample, first = _poisoned_sample(f_cpu, value, run, cause, 7, 12)
        f_cpu.H[sample] = f_gpu.H[sample] = value
    python_calls = _plain_gradient_calls(monkeypatch)
    lr = 0.05
    cpu = PullDiagGT(A, x0, lr, rounds=rounds, tracker=tracker)
    gpu = PullDiagGT(A, xp.asarray(x0), lr, rounds=rounds, tracker=tracker)
    gpu._ops.check_every = 64
    oracles = {"cpu": f_cpu.oracle(seed=7, batches=rounds), "gpu": f_gpu.oracle(seed=7, batches=rounds)}
    outcome, kept = {}, {}
    for name, opt in (("cpu", cpu), ("gpu", gpu)):
        oracle = oracles[name]
        try:
            for k in range(steps):
                opt.step(oracle)
                if k == 9:
                    kept[name] = oracle.last
                    np.testing.assert_array_equal(host(kept[name]), kept["cpu"])
                if cause == "extra call" and k == 10:
                    oracle(opt.x)
            opt.x
            outcome[name] = None
        except DivergenceError as exc:
            outcome[name] = (exc.iteration, exc.node, exc.what)
    assert outcome["gpu"] == outcome["cpu"]
    if cause in ("gradient", "iterate"):
        assert outcome["cpu"][::2] == (first, cause)
    else:
        assert outcome["cpu"] is None
    assert gpu.iteration == cpu.iteration
    # Perron: the graph replays from step 4 (steps 1-3: the tracker's first row, then each ping-pong buffer seen
    # once); exact: from step 3 (its table's graph), then 2 more plain steps once it has frozen (the frozen row's)
    first = 4 if tracker == "perron" else 3
    frozen = tracker == "exact" and gpu.tracker.frozen_at < steps
    assert python_calls[:first] == list(range(first)) and first not in python_calls
    assert len(python_calls) - first == (cause == "extra call") + 2 * frozen
    assert len(gpu._ops._step_gradients) == 2 + 2 * frozen
    np.testing.assert_array_equal(host(kept["gpu"]), kept["cpu"])  # (a copy: later steps left it alone)
    if outcome["cpu"] is None:
        assert oracles["gpu"].iteration == oracles["cpu"].iteration == steps + 1 + (cause == "extra call")
        np.testing.assert_array_equal(host(oracles["gpu"].last), oracles["cpu"].last)
    else:  # (the GPU's oracle went on over the frozen state until the check was read, as a plain step's does)
        assert oracles["gpu"].iteration > oracles["cpu"].iteration
    again = {name: f.oracle(seed=7, batches=rounds) for name, f in (("cpu", f_cpu), ("gpu", f_gpu))}
    for _ in range(3):  # both go on alike from the same state (the GPU's graph with a fresh oracle's iteration)
        for name, opt in (("cpu", cpu), ("gpu", gpu)):
            opt.step(again[name]) if cause != "iterate" else opt.step(lambda X: X * 0)
    np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
    np.testing.assert_array_equal(gpu.gather_y(), cpu.y)


@pytest.mark.parametrize("override", ["oracle", "objective", "instance"])
def test_no_step_graph_skips_a_gradient_that_must_be_called(cuda_on_host, monkeypatch, override):
    """An Oracle subclass with its own __call__, an objective subclass or instance with its own
    stochastic_gradient: every step calls them from Python (no graph runs the plain kernel in their place),
    and the iterates are the CPU's."""
    from rowstoch_fast.objectives import Oracle

    class Doubled(Oracle):
        def __call__(self, X):
            return 2 * super().__call__(X)

    class Halved(NonconvexLogistic):
        def stochastic_gradient(self, X, iteration, **kw):
            return super().stochastic_gradient(X, iteration, **kw) / 2

    fake = _emulated_device(cuda_on_host, monkeypatch)
    calls = _plain_gradient_calls(monkeypatch)
    A = topology.exponential(8)
    x0 = np.random.default_rng(2).standard_normal((8, 3)) * 0.1
    result = {}
    for name, X0 in (("cpu", x0), ("gpu", fake.asarray(x0))):
        f = (Halved if override == "objective" else NonconvexLogistic).synthetic(8, total=8 * 20, d=3, batch=4, seed=1)
        if override == "instance":
            f.stochastic_gradient = lambda X, it, f=f, **kw: 3 * NonconvexLogistic.stochastic_gradient(f, X, it, **kw)
        oracle = Doubled(f, seed=2) if override == "oracle" else f.oracle(seed=2)
        opt = PullDiagGT(A, X0, 0.05, tracker="perron")
        for _ in range(10):
            opt.step(oracle)
        result[name] = opt.gather_x()
    assert calls == list(range(11))  # x0's and every step's gradient, from Python
    np.testing.assert_array_equal(result["gpu"], result["cpu"])


@pytest.mark.parametrize("network,repeats", [("static", 2), ("lossy", 2), ("static", 1)])
def test_a_run_on_the_emulated_device_equals_the_cpu_run(cuda_on_host, monkeypatch, network, repeats):
    """rowstoch_fast.run with backend='cupy' end to end on the emulated kernels (the logistic oracle's warps
    too, and MG-Pull-Diag-GT's graphs; on a static network the whole step as one graph, the oracle's ``last``
    read for the descent deviation): the CPU run's records."""
    from rowstoch_fast import Algorithm, run
    from rowstoch_fast.network import Lossy

    fake = _emulated_device(cuda_on_host, monkeypatch)
    A = topology.exponential(4)
    net = A if network == "static" else Lossy(A, 0.2, seed=3)
    f = NonconvexLogistic.synthetic(4, total=4 * 40, batch=12, d=5, seed=1)
    kw = dict(record_every=3, repeats=repeats, seed=3, progress=False)
    iterations = 12
    tracker = "perron" if network == "static" else "exact"  # (a time-varying network takes the exact one only)
    on_cpu = run(Algorithm(net, 0.05, rounds=2, tracker=tracker), f, iterations, **kw)
    calls = _plain_gradient_calls(monkeypatch)
    on_gpu = run(Algorithm(net, 0.05, rounds=2, tracker=tracker, backend="cupy"), f, iterations, **kw)
    assert any(k.startswith("logistic_grad") and k.endswith("_f64") for k in fake.launched)
    # a static network: grad_fn called from Python for x0 and the first 3 steps only (then the step's graph)
    assert calls == (list(range(4)) if network == "static" else list(range(iterations + 1)))
    assert len(on_gpu.frame) == len(on_cpu.frame) == (iterations // 3 + 1) * repeats
    for column in ("grad_norm", "loss", "consensus_error", "descent_deviation"):
        np.testing.assert_allclose(on_gpu.frame[column], on_cpu.frame[column], rtol=1e-10, atol=1e-14)


def test_a_run_in_whole_step_graphs_resumes_like_the_cpu(cuda_on_host, monkeypatch, tmp_path):
    """A run on the emulated device whose steps replay as one graph (one repetition, static network),
    checkpointed half-way (the oracle's ``last`` read off the graph's buffer) and resumed: the records of the
    CPU's run without a stop."""
    from rowstoch_fast import Algorithm, run

    _emulated_device(cuda_on_host, monkeypatch)
    A = topology.exponential(6)
    f = NonconvexLogistic.synthetic(6, total=6 * 30, batch=10, d=4, seed=2)
    kw = dict(record_every=4, seed=5, progress=False)
    full = run(Algorithm(A, 0.05, tracker="perron"), f, 16, **kw)
    ck = str(tmp_path / "ck.npz")
    run(Algorithm(A, 0.05, tracker="perron", backend="cupy"), f, 8, checkpoint=ck, **kw)
    rest = run(Algorithm(A, 0.05, tracker="perron", backend="cupy"), f, 16, resume=ck, **kw)
    cols = ["iteration", "grad_norm", "loss", "consensus_error", "descent_deviation"]
    np.testing.assert_allclose(rest.frame[cols].to_numpy(float), full.frame[cols].to_numpy(float), rtol=1e-10,
                               atol=1e-14)


def _csr_args(A, index_dtype, dtype):
    csr = A.csr
    return (csr.indptr.astype(index_dtype), csr.indices.astype(index_dtype), csr.data.astype(dtype))


@pytest.mark.parametrize("kernel,index_dtype,dtype,w", [
    ("entry1x1_f64_i32", np.int32, np.float64, 3), ("entry1x4_f64_i32", np.int32, np.float64, 3),
    ("entry2x1_f64_i64", np.int64, np.float64, 10), ("entry2x4_f64_i32", np.int32, np.float64, 10),
    ("entry4x4_f32_i32", np.int32, np.float32, 8), ("entry4x4_f32_i64", np.int64, np.float32, 4),
    ("entry1x4_f32_i64", np.int64, np.float32, 5)])
@pytest.mark.parametrize("graph", ["exponential", "erdos-renyi"])
def test_cuda_mixing_kernels_match_cpu(cuda_on_host, kernel, index_dtype, dtype, w, graph):
    """The mixing kernels (one thread per 1, 2 or 4 entries of a row, 1 or 4 neighbours' loads in flight): the
    CPU's sums, bit for bit, also on rows whose lengths are not multiples of 4."""
    import ctypes

    V = int(kernel[5])
    n = 23
    A = (topology.exponential(n) if graph == "exponential" else topology.erdos_renyi(n, 0.25, seed=w)).astype(dtype)
    X = np.random.default_rng(w).normal(size=(n, w)).astype(dtype)
    Y = np.full_like(X, np.nan)
    Ap, Aj, Ax = _csr_args(A, index_dtype, dtype)
    getattr(cuda_on_host, f"emulate_csr_mix_{kernel}")(ctypes.c_longlong(X.size // V), _ptr(Ap), _ptr(Aj), _ptr(Ax),
                                                      _ptr(X), _ptr(Y), ctypes.c_int64(n), ctypes.c_int64(w),
                                                      ctypes.c_void_p(0))
    np.testing.assert_array_equal(Y, A.mix(X))


@pytest.mark.parametrize("kernel,index_dtype,dtype,w", [
    ("row1x4_f64_i32", np.int32, np.float64, 3), ("row2x4_f64_i32", np.int32, np.float64, 10),
    ("row4x4_f32_i64", np.int64, np.float32, 8)])
@pytest.mark.parametrize("graph", ["exponential", "erdos-renyi", "star"])
def test_cuda_per_row_weight_kernels_match_cpu(cuda_on_host, monkeypatch, kernel, index_dtype, dtype, w, graph):
    """The mixing kernels reading one weight per row (``ROWSTOCH_CUDA_MIX=row``) on matrices built by the
    in-degree rule: the CPU's sums over the CSR's values, bit for bit."""
    import ctypes

    from rowstoch_fast.backends import cupy as backend

    from test_algorithms import _fake_cupy

    fake = _fake_cupy()
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)  # device_row_weights' copy: a host array
    V = int(kernel[3])
    n = 23
    A = {"exponential": topology.exponential, "star": topology.star,
         "erdos-renyi": lambda n: topology.erdos_renyi(n, 0.25, seed=w)}[graph](n).astype(dtype)
    weights = backend.device_row_weights(A)
    assert weights is not None and weights.dtype == dtype and weights.shape == (n,)
    X = np.random.default_rng(w).normal(size=(n, w)).astype(dtype)
    Y = np.full_like(X, np.nan)
    Ap, Aj, _ = _csr_args(A, index_dtype, dtype)
    getattr(cuda_on_host, f"emulate_csr_mix_{kernel}")(ctypes.c_longlong(X.size // V), _ptr(Ap), _ptr(Aj),
                                                      _ptr(weights), _ptr(X), _ptr(Y), ctypes.c_int64(n),
                                                      ctypes.c_int64(w), ctypes.c_void_p(0))
    np.testing.assert_array_equal(Y, A.mix(X))


def _circulant(n, offsets, dtype=np.float64):
    """The in-degree rule's circulant matrix: row i hears from i - o (mod n) for each offset o, weight 1/m."""
    import scipy.sparse as sp

    from rowstoch_fast.mixing import MixingMatrix

    rows = np.repeat(np.arange(n), len(offsets))
    cols = (rows - np.tile(np.asarray(offsets), n)) % n
    W = sp.csr_matrix((np.full(rows.size, 1.0 / len(offsets)), (rows, cols)), shape=(n, n))
    return MixingMatrix(W).astype(dtype)


def _emulate_circ(cuda_on_host, monkeypatch, kernel, A, X, hints="auto"):
    """``kernel`` (csr_mix_circ...) on the emulated device with device_circulant's arguments for ``A`` under
    ``L2_HINTS = hints``."""
    import ctypes

    from rowstoch_fast.backends import cupy as backend

    from test_algorithms import _fake_cupy

    fake = _fake_cupy()
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)  # device_circulant's copies: host arrays
    monkeypatch.setattr(backend, "L2_HINTS", hints)
    Ap, D, weight = backend.device_circulant(A)
    index = np.int32 if kernel.endswith("i32") else np.int64
    Ap, D = np.asarray(Ap).astype(index), np.asarray(D).astype(index)
    Y = np.full_like(X, np.nan)
    V = int(kernel[4])
    cuda_on_host.emulated_streamed(_ptr(np.zeros(2, np.int64)))
    getattr(cuda_on_host, f"emulate_csr_mix_{kernel}")(ctypes.c_longlong(X.size // V), _ptr(Ap), _ptr(D),
                                                      _ptr(np.asarray(weight)), _ptr(X), _ptr(Y),
                                                      ctypes.c_int64(A.n), ctypes.c_int64(X.shape[1]),
                                                      ctypes.c_void_p(0))
    return Y


@pytest.mark.parametrize("kernel,dtype,w", [("circ1x4_f64_i32", np.float64, 3), ("circ2x4_f64_i32", np.float64, 10),
                                            ("circ4x4_f32_i32", np.float32, 8)])
@pytest.mark.parametrize("graph", ["exponential-23", "exponential-16", "ring-9", "no-self-loop"])
@pytest.mark.parametrize("hints", ["auto", "off", "4 rows", "1"])
def test_cuda_circulant_kernels_match_cpu(cuda_on_host, monkeypatch, kernel, dtype, w, graph, hints):
    """The kernels that read neither the CSR's indices nor its values (``circ``: circulant matrices with one
    weight, the rotation of the offsets giving each row's CSR order), the CPU's sums bit for bit; also where
    a row's first offset wraps (no self loop); with the cache hints off, at their default (none on blocks this
    small), on the offsets of at least 4 rows (one of the exponential graph's: the threshold itself is far)
    and on every offset but the self loop (threshold 1 byte); none where the offsets do not double (1, 3, 4)."""
    A = {"exponential-23": lambda: topology.exponential(23), "exponential-16": lambda: topology.exponential(16),
         "ring-9": lambda: topology.ring(9), "no-self-loop": lambda: _circulant(11, [1, 3, 4])}[graph]().astype(dtype)
    X = np.random.default_rng(w).normal(size=(A.n, w)).astype(dtype)
    hints = str(4 * w * X.itemsize) if hints == "4 rows" else hints
    np.testing.assert_array_equal(_emulate_circ(cuda_on_host, monkeypatch, kernel, A, X, hints), A.mix(X))
    _check_streamed(cuda_on_host, A, X, int(kernel[4]), hints)


@pytest.mark.parametrize("dtype,w,packed", [(np.float64, 3, False), (np.float64, 8, True), (np.float32, 5, False)])
@pytest.mark.parametrize("hints", ["auto", "2 rows"])
def test_cuda_tiled_circulant_kernel_matches_cpu(cuda_on_host, monkeypatch, dtype, w, packed, hints):
    """ROWSTOCH_CUDA_MIX=circt (kernels.cu's CIRCT: the near offsets' rows from a tile in shared memory, blocks of
    up to 1024 emulated threads): mix_power gives the CPU's bits for the exponential graph in one block and in
    several (the tile's rows above a block from the one before, and wrapped for the first), the ring, a circulant
    graph without a self loop, with the far offsets streamed or not; the launches are circt's (16-byte packs for
    float64 only), blocks of whole rows, the shared memory twice their rows."""
    from rowstoch_fast.backends import cupy as backend

    seen = []

    def check(name, grid, block, args, shared_mem):
        if name.startswith("csr_mix"):
            groups = w // (2 if packed else 1)
            seen.append(name)
            assert block[0] % groups == 0 and block[0] <= 1024 and grid[0] * (block[0] // groups) >= int(args[5])
            assert shared_mem == 2 * (block[0] // groups) * w * np.dtype(dtype).itemsize

    fake = _emulated_device(cuda_on_host, monkeypatch, on_launch=check)
    monkeypatch.setattr(backend, "MIX_KERNEL", "circt")
    monkeypatch.setattr(backend, "L2_HINTS", str(2 * w * np.dtype(dtype).itemsize) if hints == "2 rows" else hints)
    for A in (topology.exponential(37), topology.exponential(700), topology.ring(9), _circulant(11, [1, 3, 4])):
        A = A.astype(dtype)
        X = np.random.default_rng(A.n).standard_normal((A.n, w)).astype(dtype)
        np.testing.assert_array_equal(backend.mix_power(A, fake.asarray(X), 3), A.mix_power(X, 3))
    kernel = f"csr_mix_circt{2 if packed else 1}x4_{'f64' if dtype == np.float64 else 'f32'}_i32"
    assert seen and set(seen) == {kernel}


@pytest.mark.parametrize("kind", ["entry", "entry1", "row", "circ", "circ1", "circt"])
@pytest.mark.parametrize("blocks", [1, 3])
def test_cuda_rounds_in_one_launch_match_cpu(cuda_on_host, monkeypatch, kind, blocks):
    """ROWSTOCH_CUDA_ROUNDS=persistent (kernels.cu's ROUNDS: the R rounds in one launch, its blocks run at once
    with a grid-wide barrier between two rounds, each thread looping over several entries): mix_power gives the
    CPU's bits for R = 2, 3 and 6, for the family the matrix allows, packed (w = 8) or not, float32 too, in one
    launch of at most the resident blocks; circt's (rounds_circt_impl): a tile per block for every round, each
    block an even share of the rows (the offsets up to its rows from its tile, the others from the round's input,
    wrapped or not), its shared memory twice its rows up to the limit (the emulation faults a write past it), or
    circ's rounds where a block's rows do not fit in it; a launch on a status already set does nothing."""
    from rowstoch_fast.backends import cupy as backend

    seen = []

    def check(name, grid, block, args, shared_mem):
        seen.append(name)
        assert name.startswith("csr_rounds") and grid[0] <= blocks, (name, grid)
        if "circt" not in name:
            assert block[0] == backend._BLOCK and shared_mem == 0, (name, block)
            return
        n, w, chunk, shared = (int(args[k]) for k in (6, 7, -2, -1))
        row, packs = w * args[3].itemsize, n * w // int(name[len("csr_rounds_circt")])
        assert block[0] == backend._TILE_ROUNDS_THREADS and chunk == -(-n // min(blocks, -(-packs // 32))), chunk
        assert grid[0] == -(-n // chunk) and shared == shared_mem == min(-(-2 * chunk * row // 16) * 16, limit[0])

    fake = _emulated_device(cuda_on_host, monkeypatch, on_launch=check)
    monkeypatch.setattr(backend, "MIX_KERNEL", kind)
    monkeypatch.setattr(backend, "ROUNDS", "persistent")
    monkeypatch.setattr(backend, "_ROUNDS_GRID", blocks)
    monkeypatch.setattr(backend, "_BLOCK", 32)  # (fewer emulated threads; every thread several entries)
    monkeypatch.setattr(backend, "_TILE_ROUNDS_THREADS", 32)
    family = {"entry1": "entry", "circ1": "circ"}.get(kind, kind)
    graphs = [topology.exponential(37), topology.ring(9)] if family.startswith("circ") else [
        topology.erdos_renyi(29, 0.2, seed=3)]
    dtypes = (np.float64, np.float32) if family.startswith("circ") else (np.float64,)
    limit = [backend._SHARED_LIMIT]
    # (400 bytes: fewer rows above a block than its own in its tile; 200: circ's rounds where a block's rows of
    # float64 do not fit)
    for limit[0] in (backend._SHARED_LIMIT, 400, 200) if kind == "circt" else (backend._SHARED_LIMIT,):
        monkeypatch.setattr(backend, "_SHARED_LIMIT", limit[0])
        for A0 in graphs:
            for dtype in dtypes:
                A = A0.astype(dtype)
                for w, R in ((3, 2), (8, 3), (8, 6)):
                    X = np.random.default_rng(w + R).standard_normal((A.n, w)).astype(dtype)
                    seen.clear()
                    np.testing.assert_array_equal(backend.mix_power(A, fake.asarray(X), R), A.mix_power(X, R))
                    V = 1 if kind.endswith("1") or w == 3 or (kind == "circt" and dtype == np.float32) else (
                        2 if dtype == np.float64 else 4)
                    tiled = kind != "circt" or -(-A.n // min(blocks, -(-A.n * w // V // 32))) * w * X.itemsize <= \
                        limit[0]
                    name = f"csr_rounds_{family if tiled else 'circ'}{V}x4_{'f64' if dtype == np.float64 else 'f32'}"
                    assert seen == [f"{name}_i32"], seen
    A = graphs[0]
    X = fake.asarray(np.ones((A.n, 3)))
    out, work = fake.asarray(np.full((A.n, 3), 7.0)), fake.asarray(np.full((A.n, 3), 7.0))
    status = fake.asarray(np.array([5, 0, 0, 0, 0], dtype=np.uint64))
    backend._mix_rounds(A, X, out, 3, work, status)
    assert np.all(out == 7.0) and np.all(work == 7.0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 60), w=st.integers(1, 9), R=st.integers(2, 7), blocks=st.integers(1, 4),
       block=st.sampled_from([1, 8, 32]), circulant=st.booleans(), tiled=st.booleans(), seed=st.integers(0, 2**16))
def test_rounds_in_one_launch_property(cuda_on_host, monkeypatch, n, w, R, blocks, block, circulant, tiled, seed):
    """ROWSTOCH_CUDA_ROUNDS=persistent on any grid (1-4 blocks of 1-32 threads: fewer threads than entries or
    more), width and number of rounds: mix_power gives the CPU's A^R X bit for bit in one launch, for the
    exponential graph (the circulant kernel's rounds, or with ROWSTOCH_CUDA_MIX=circt a tile per block) and a
    random graph (whichever family it allows)."""
    from rowstoch_fast.backends import cupy as backend

    fake = _emulated_device(cuda_on_host, monkeypatch)
    monkeypatch.setattr(backend, "ROUNDS", "persistent")
    monkeypatch.setattr(backend, "MIX_KERNEL", "circt" if tiled else "auto")
    monkeypatch.setattr(backend, "_ROUNDS_GRID", blocks)
    monkeypatch.setattr(backend, "_BLOCK", block)
    monkeypatch.setattr(backend, "_TILE_ROUNDS_THREADS", block)
    A = topology.exponential(n) if circulant else topology.erdos_renyi(n, 0.3, seed=seed)
    X = np.random.default_rng(seed).standard_normal((n, w))
    np.testing.assert_array_equal(backend.mix_power(A, fake.asarray(X), R), A.mix_power(X, R))
    launched = [k for k in fake.launched if k.startswith("csr_")]  # (the family the matrix allows)
    assert len(launched) == 1 and re.fullmatch(rf"csr_rounds_(circt|circ|row|entry){2 if w % 2 == 0 else 1}x4_f64_i32",
                                                launched[0]), launched
    assert not circulant or ("circt" if tiled else "circ") in launched[0]


def test_rounds_in_one_launch_take_the_resident_blocks(monkeypatch):
    """ROWSTOCH_CUDA_ROUNDS=persistent launches at most the blocks the device keeps resident (the driver's
    occupancy times the SMs, asked once per kernel and device), and a device without cooperative launches is
    refused with a RuntimeError saying so."""
    import types

    from rowstoch_fast.backends import cupy as backend

    from test_algorithms import _fake_cupy

    fake = _fake_cupy()
    asked, cooperative = [], [1]
    fake.cuda.driver = types.SimpleNamespace(
        occupancyMaxActiveBlocksPerMultiprocessor=lambda ptr, block, shared: asked.append((ptr, block, shared)) or 5)
    fake.cuda.runtime.cudaDevAttrCooperativeLaunch = 95
    fake.cuda.runtime.deviceGetAttribute = lambda attribute, device: cooperative[0] if attribute == 95 else None
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)
    monkeypatch.setattr(backend, "_DEVICE_FACTS", {})
    monkeypatch.setattr(backend, "_cooperative_kernel",
                        lambda name: types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=len(name))))
    name = "csr_rounds_circ2x4_f64_i32"
    assert backend._resident_blocks(name) == 5 * 132 and backend._resident_blocks(name) == 5 * 132
    assert asked == [(len(name), backend._BLOCK, 0)]
    tiled = "csr_rounds_circt2x4_f64_i32"  # (blocks of 512 threads and 48 KiB, asked once)
    assert backend._resident_blocks(tiled, 512, 49152) == 5 * 132 == backend._resident_blocks(tiled, 512, 49152)
    assert asked[1:] == [(len(tiled), 512, 49152)]
    # the rows split evenly over the blocks that 5 packs per row fill (640 of 512 threads, fewer than the 660
    # resident), then as few blocks as that share of rows needs
    assert backend._tiled_rounds(tiled, 2**16, 80, 5 * 2**16) == (637, 103, 16480)
    assert backend._tiled_rounds(tiled, 2**17, 80, 5 * 2**17) == (659, 199, 31840)  # (the resident blocks)
    assert backend._tiled_rounds(tiled, 2**10, 80, 5 * 2**10) == (10, 103, 16480)  # (as many blocks as entries fill)
    assert backend._tiled_rounds(tiled, 2**20, 80, 5 * 2**20) is None  # (1,589 rows of 80 bytes: over 48 KiB)
    cooperative[0] = 0
    with pytest.raises(RuntimeError, match="ROWSTOCH_CUDA_ROUNDS=persistent needs a device that launches cooperative"):
        backend._resident_blocks("csr_rounds_entry2x4_f64_i32")
    # a y phase of one round is gt_phase's: gt_rounds takes two at least (its round 1 stores, it never descends)
    with pytest.raises(ValueError, match="takes R >= 2 rounds, got 1"):
        backend._phase_rounds_into(None, 1, *[None] * 13)


@pytest.mark.parametrize("rounds", ["graph", "persistent"])
@pytest.mark.parametrize("kind", ["entry", "row", "circ", "circt"])
def test_blocks_off_a_packs_alignment_take_the_one_value_kernels(cuda_on_host, monkeypatch, kind, rounds):
    """A block, ``out`` and ``work`` one value into their buffers (a user's slice can start there: 8 or 4 bytes
    off a 16-byte boundary): mix and mix_power launch the kernels of one value per thread (a GPU faults on a
    packed load or store there; the emulation counts them and fails the launch) and give the CPU's bits, float64
    and float32 (the circulant kernels: the emulated float32 instances), R = 1 and 3, every kernel family, the
    rounds as launches or in one."""
    from test_algorithms import _HostDeviceArray

    from rowstoch_fast.backends import cupy as backend

    def off_alignment(X):
        buf = np.empty(X.size + 1, X.dtype)
        view = buf[1:].reshape(X.shape)
        view[...] = X
        assert view.ctypes.data % 16 != 0
        return view.view(_HostDeviceArray)

    fake = _emulated_device(cuda_on_host, monkeypatch)
    monkeypatch.setattr(backend, "MIX_KERNEL", kind)
    monkeypatch.setattr(backend, "ROUNDS", rounds)
    monkeypatch.setattr(backend, "_ROUNDS_GRID", 2)
    monkeypatch.setattr(backend, "_BLOCK", 32)  # (fewer emulated threads)
    monkeypatch.setattr(backend, "_TILE_ROUNDS_THREADS", 32)
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float32) if kind.startswith("circ") else (np.float64,):
        A = topology.exponential(37).astype(dtype)
        X = rng.standard_normal((A.n, 8)).astype(dtype)
        for R in (1, 3):
            fake.launched.clear()
            out = off_alignment(np.zeros_like(X))
            work = off_alignment(np.zeros_like(X)) if R > 1 else None
            got = backend.mix_power(A, off_alignment(X), R, out=out, work=work)
            assert got.ctypes.data == out.ctypes.data
            np.testing.assert_array_equal(got, A.mix_power(X, R))
            assert fake.launched and all("1x" in k for k in fake.launched), fake.launched
        fake.launched.clear()
        np.testing.assert_array_equal(backend.mix(A, off_alignment(X)), A.mix(X))
        assert fake.launched and all("1x" in k for k in fake.launched), fake.launched


def test_cuda_rounds_in_one_launch_through_the_backend(cuda_on_host, monkeypatch):
    """MG-Pull-Diag-GT (R = 3) through the backend with ROWSTOCH_CUDA_ROUNDS=persistent: the x phase's rounds in
    one launch (replayed in a graph), the whole y phase in another (tracker input, rounds, descent), the
    barrier's word back to 0 after the run: the CPU's iterates bit for bit, with the default kernels and with
    ROWSTOCH_CUDA_MIX=circt (its x phase a tile per block); ROWSTOCH_CUDA_ROUNDS is checked."""
    from test_algorithms import _on_cpu_and_device

    from rowstoch_fast.backends import cupy as backend

    fake = _emulated_device(cuda_on_host, monkeypatch)
    monkeypatch.setattr(backend, "ROUNDS", "persistent")
    monkeypatch.setattr(backend, "_ROUNDS_GRID", 2)
    monkeypatch.setattr(backend, "_BLOCK", 32)
    monkeypatch.setattr(backend, "_TILE_ROUNDS_THREADS", 32)
    rng = np.random.default_rng(8)
    for kind, A in (("auto", topology.exponential(40)), ("auto", topology.paper_graphs()["grid"]),
                    ("circt", topology.exponential(40))):
        monkeypatch.setattr(backend, "MIX_KERNEL", kind)
        G, x0 = rng.standard_normal((A.n, 4)), rng.standard_normal((A.n, 4))
        fake.launched.clear()
        cpu, gpu = _on_cpu_and_device(REGISTRY["pull-diag-gt"], A, x0, G, fake, 6)  # (R = 3)
        np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
        rounds = [k for k in fake.launched if k.startswith(("csr_", "gt_", "tracker_input"))]
        assert {k.split("_")[:2][1] for k in rounds} == {"rounds"}, rounds
        x_phase = "csr_rounds_circt" if kind == "circt" else "csr_rounds"
        assert any(k.startswith(x_phase) for k in rounds) and any(k.startswith("gt_rounds") for k in rounds)
        assert int(gpu._ops._arrived[0]) == 0
    monkeypatch.setattr(backend, "ROUNDS", "one")
    with pytest.raises(ValueError, match="ROWSTOCH_CUDA_ROUNDS must be one of graph, persistent, got 'one'"):
        backend.mix_power(topology.ring(5), fake.asarray(np.ones((5, 2))), 2)


def _check_streamed(cuda_on_host, A, X, V, hints):
    """The emulated circulant kernel's streaming loads and stores (kernels.cu's CIRC): where the offsets at
    least double, each of row i's threads streams its loads of the offsets of at least ``hints`` bytes of rows
    and of those above i (wrapped), and its stores, if any offset is that far; nothing otherwise."""
    streamed = np.zeros(2, np.int64)
    cuda_on_host.emulated_streamed(_ptr(streamed))
    D = np.asarray(_circulant_offsets_of(A))
    doubling = np.all(D[:-1] >= 2 * D[1:])
    far = 0 if hints in ("auto", "off") or not doubling else int(np.sum(D * X.shape[1] * X.itemsize >= int(hints)))
    wrapped = (D[None, :] > np.arange(A.n)[:, None]).sum(axis=1)
    per_row = np.maximum(far, wrapped) if far else np.zeros(A.n, np.int64)
    assert streamed.tolist() == [int(per_row.sum()) * X.shape[1] // V, X.size // V if far else 0]


def _circulant_offsets_of(A):
    from rowstoch_fast.backends.cupy import circulant_offsets

    return circulant_offsets(A)[0]


def test_the_l2_model_behind_the_hints(tmp_path):
    """bench/l2_model.cpp (RESULTS 9f's DRAM predictions) builds and runs: on a small cache, the kernel's hints
    (the far offsets' reads, the wrapped ones and the stores evicted first) cut the reads of X from DRAM, as at
    n = 2^20 and 2^22 on an H100's L2; bad arguments exit 2."""
    import subprocess
    import sysconfig

    cxx = (sysconfig.get_config_var("CXX") or "c++").split()[0]
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx})")
    src = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "l2_model.cpp")
    exe = tmp_path / "l2_model"
    subprocess.run([cxx, "-std=c++14", "-O2", src, "-o", str(exe)], check=True, timeout=300)
    out = subprocess.run([str(exe), "12", "0.1", "10", "500", "25000"], capture_output=True, text=True, timeout=60)
    m = re.search(r"X read ([\d.]+) times per round without hints \(([\d.]+)\), ([\d.]+) with hints", out.stdout)
    assert out.returncode == 0 and m, out.stdout + out.stderr
    plain, hinted = float(m.group(1)), float(m.group(3))
    assert plain > 3 and hinted < 0.7 * plain
    for bad in ([], ["3"], ["12", "0"], ["12", "1", "10", "500", "-5"]):
        assert subprocess.run([str(exe), *bad], capture_output=True, timeout=60).returncode == 2


def test_l2_hints_threshold(monkeypatch):
    """l2_hint_bytes: a quarter of the device's L2 under "auto", 0 under "off", a number of bytes as given;
    anything else a ValueError naming ROWSTOCH_CUDA_L2_HINTS."""
    from rowstoch_fast.backends import cupy as backend

    from test_algorithms import _fake_cupy

    monkeypatch.setattr(backend, "require_cupy", _fake_cupy)
    monkeypatch.setattr(backend, "_DEVICE_FACTS", {})
    for choice, want in (("auto", 50 * 2**20 // 4), ("off", 0), ("0", 0), ("4096", 4096), (2**31 - 1, 2**31 - 1)):
        monkeypatch.setattr(backend, "L2_HINTS", choice)
        assert backend.l2_hint_bytes() == want
    for bad in ("on", "-1", str(2**31), "1.5", None, True, 4096.0):
        monkeypatch.setattr(backend, "L2_HINTS", bad)
        with pytest.raises(ValueError, match="ROWSTOCH_CUDA_L2_HINTS"):
            backend.l2_hint_bytes()


def test_circulant_offsets_find_circulant_matrices_only():
    """circulant_offsets: the exponential graph's and the ring's offsets and weight; None for the paper's
    graphs, an Erdos-Renyi graph, a star, a circulant pattern with two weights, a relabelled exponential graph
    and one with an edge moved."""
    import scipy.sparse as sp

    from rowstoch_fast.backends.cupy import circulant_offsets
    from rowstoch_fast.mixing import MixingMatrix

    D, weight = circulant_offsets(topology.exponential(23))
    assert D.tolist() == [16, 8, 4, 2, 1, 0] and weight == 1 / 6
    assert circulant_offsets(topology.ring(9))[0].tolist() == [1, 0]
    for A in (*topology.paper_graphs().values(), topology.erdos_renyi(20, 0.3, seed=1), topology.star(10)):
        assert circulant_offsets(A) is None
    W = topology.exponential(16).csr.copy()
    W.data[W.indices == (np.repeat(np.arange(16), np.diff(W.indptr)) % 16)] = 0.4  # self weights differ
    W = sp.diags(1 / np.asarray(W.sum(axis=1)).ravel()) @ W
    assert circulant_offsets(MixingMatrix(sp.csr_matrix(W))) is None
    perm = np.random.default_rng(0).permutation(16)
    P = sp.csr_matrix((np.ones(16), (np.arange(16), perm)), shape=(16, 16))
    assert circulant_offsets(MixingMatrix(sp.csr_matrix(P @ topology.exponential(16).csr @ P.T))) is None
    swap = {(5, 13): (5, 12), (4, 12): (4, 13)}  # rows 12 and 13 keep 5 entries each, one of them off the offsets
    edges = [swap.get((i, (i + h) % 16), (i, (i + h) % 16)) for i in range(16) for h in (1, 2, 4, 8)]
    assert circulant_offsets(MixingMatrix.from_edges(16, edges, "in-degree")) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 70), extra=st.sets(st.integers(0, 69), max_size=8), width=st.integers(1, 3),
       f32=st.booleans(), hints=st.one_of(st.just("off"), st.integers(1, 5000).map(str)))
def test_circulant_kernel_property(cuda_on_host, monkeypatch, n, extra, width, f32, hints):
    """Any circulant matrix with one weight (offsets 1 and 2, which make it primitive, and any others, with or
    without a self loop): found by circulant_offsets, and the circ kernels equal the CPU's mix bit for bit
    (widths 1-3 and 2-6 in float64, 4-12 in float32), with the cache hints off or at any threshold."""
    from rowstoch_fast.backends.cupy import circulant_offsets

    offsets = sorted({1, 2 % n} | {o % n for o in extra})
    A = _circulant(n, offsets, np.float32 if f32 else np.float64)
    assert circulant_offsets(A)[0].tolist() == offsets[::-1]
    for kernel, w in ((("circ4x4_f32_i32", 4 * width),) if f32 else
                      (("circ1x4_f64_i32", width), ("circ2x4_f64_i32", 2 * width))):
        X = np.random.default_rng(n).normal(size=(n, w)).astype(A.dtype)
        np.testing.assert_array_equal(_emulate_circ(cuda_on_host, monkeypatch, kernel, A, X, hints), A.mix(X))
        _check_streamed(cuda_on_host, A, X, int(kernel[4]), hints)


def test_per_row_weights_only_where_every_entry_of_a_row_has_the_same_bits(monkeypatch):
    """device_row_weights: None as soon as one stored weight differs from its row's first in any bit (a random
    grid's weights; a weight one ulp off; -0.0 against 0.0), an empty row's weight 0; cached on the matrix."""
    import scipy.sparse as sp

    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.mixing import MixingMatrix

    from test_algorithms import _fake_cupy

    fake = _fake_cupy()
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)
    assert backend.device_row_weights(topology.paper_graphs()["grid"]) is None
    A = topology.ring(5)
    assert backend.device_row_weights(A) is backend.device_row_weights(A)
    np.testing.assert_array_equal(backend.device_row_weights(A), 0.5)

    def one(data, indices, indptr, n):
        M = MixingMatrix._from_valid_csr(np.asarray(indptr, np.int32), np.asarray(indices, np.int32),
                                         np.asarray(data, np.float64), n)
        return backend.device_row_weights(M)

    assert one([0.5, np.nextafter(0.5, 1)], [0, 1], [0, 2, 2], 2) is None
    assert one([0.0, -0.0, 1.0], [0, 1, 1], [0, 2, 3], 2) is None
    np.testing.assert_array_equal(one([0.5, 0.5, 1.0], [0, 1, 1], [0, 2, 2, 3], 3), [0.5, 0.0, 1.0])
    assert sp.issparse(A.csr)


def test_run_checks_the_gpu_memory_for_a_gpu_run(monkeypatch):
    """run() on backend='cupy' measures the iterate blocks against the GPU's free memory (it measured them
    against the host's: a GPU with more memory than the host was refused, one with less was not)."""
    import types

    from test_algorithms import _fake_cupy

    from rowstoch_fast import Algorithm, run
    from rowstoch_fast.backends import cupy as backend
    from rowstoch_fast.objectives import Quadratic

    fake = _fake_cupy()
    fake.cuda.runtime = types.SimpleNamespace(getDevice=lambda: 0, memGetInfo=lambda: (2**20, 2**30))
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)
    with pytest.raises(MemoryError, match=r"run\(repeats=100\) .* needs about .* of GPU memory but only 1.0 MiB is free"):
        run(Algorithm(topology.exponential(64), 0.1, backend="cupy"), Quadratic.random(64, 10), 3, repeats=100,
            progress=False)


def test_device_copies_are_kept_per_gpu(monkeypatch):
    """A matrix (or a data set) used on two GPUs: each gets its own copy (the first GPU's pointers were handed
    to kernels running on the second)."""
    import types

    from test_algorithms import _fake_cupy

    from rowstoch_fast.backends import cupy as backend

    fake, current = _fake_cupy(), [0]
    fake.cuda.runtime = types.SimpleNamespace(getDevice=lambda: current[0])
    monkeypatch.setattr(backend, "require_cupy", lambda: fake)
    A = topology.exponential(8)
    on0, w0 = backend.device_csr(A), backend.device_row_weights(A)
    current[0] = 1
    on1, w1 = backend.device_csr(A), backend.device_row_weights(A)
    assert on1[0] is not on0[0] and w1 is not w0
    current[0] = 0
    assert backend.device_csr(A)[0] is on0[0] and backend.device_row_weights(A) is w0


@pytest.mark.parametrize("kind", ["row", "circ", "circ1", "circt", "auto"])
def test_the_per_row_weight_kernel_runs_where_rows_have_one_weight(cuda_on_host, monkeypatch, kind):
    """ROWSTOCH_CUDA_MIX=row, circ, circ1, circt and the default, auto, through the backend: the per-row kernel
    for an in-degree matrix that is not circulant (a star), the circulant kernel for the exponential graph
    unless row is asked for (the per-row one then; circ1: one value per thread; circt: its rounds with a tile
    in shared memory), the CSR's values for the paper's grid (different weights in a row); all the CPU's
    iterates, bit for bit."""
    from test_algorithms import _on_cpu_and_device

    from rowstoch_fast.backends import cupy as backend

    fake = _emulated_device(cuda_on_host, monkeypatch)
    monkeypatch.setattr(backend, "MIX_KERNEL", kind)
    rng = np.random.default_rng(7)
    for A, family in ((topology.exponential(16), "csr_mix_row" if kind == "row" else "csr_mix_circ"),
                      (topology.star(16), "csr_mix_row"), (topology.paper_graphs()["grid"], "csr_mix_entry")):
        G, x0 = rng.standard_normal((16, 4)), rng.standard_normal((16, 4))
        fake.launched.clear()
        cpu, gpu = _on_cpu_and_device(REGISTRY["pull-diag-gt"], A, x0, G, fake, 5)
        np.testing.assert_array_equal(gpu.gather_x(), cpu.x)
        mixes = {k for k in fake.launched if k.startswith("csr_mix")}
        assert mixes and all(k.startswith(family) for k in mixes), mixes
        assert kind != "circ1" or all("1x4" in k for k in mixes), mixes  # (w = 4 would take 16-byte packs)
        assert (kind == "circt" and family == "csr_mix_circ") == any("circt" in k for k in mixes), mixes


@pytest.mark.parametrize("kernel,index_dtype,dtype,w", [("lossy1_f64_i32", np.int32, np.float64, 3),
                                                        ("lossy2_f64_i32", np.int32, np.float64, 10),
                                                        ("lossy4_f32_i64", np.int64, np.float32, 8)])
@pytest.mark.parametrize("renormalise", [True, False])
def test_cuda_lossy_kernels_match_the_cpu_pass(cuda_on_host, kernel, index_dtype, dtype, w, renormalise):
    """The GPU's lossy rounds (rowstoch_fast.network): the messages _core.mix_lossy loses, the same sums and
    renormalisation, sleeping nodes kept: bit for bit, with and without an awake mask."""
    import ctypes

    from rowstoch_fast import _core
    from rowstoch_fast._hashing import round_key

    V = int(kernel[5])
    n = 23
    A = topology.erdos_renyi(n, 0.25, seed=w).astype(dtype)
    if not renormalise:
        from rowstoch_fast.mixing import out_degree_weights

        A = out_degree_weights(A)
    rng = np.random.default_rng(w)
    X = rng.normal(size=(n, w)).astype(dtype)
    Ap, Aj, Ax = _csr_args(A, index_dtype, dtype)
    for awake in (None, rng.random(n) < 0.7):
        for seed, t, r, p in ((1, 0, 0, 0.3), (7, 5, 2, 0.6), (3, 2, 1, 0.0)):
            want = _core.mix_lossy(A.csr.indptr, A.csr.indices, A.csr.data, X, seed=seed, t=t, r=r, p=p,
                                   renormalise=renormalise, awake=awake)
            Y = np.full_like(X, np.nan)
            keep = None if awake is None else awake.astype(np.uint8)
            mask = ctypes.c_void_p(0) if keep is None else _ptr(keep)
            getattr(cuda_on_host, f"emulate_csr_mix_{kernel}")(
                ctypes.c_longlong(n * w // V), _ptr(Ap), _ptr(Aj), _ptr(Ax), _ptr(X), _ptr(Y), ctypes.c_int64(n),
                ctypes.c_int64(w), ctypes.c_void_p(0), ctypes.c_uint64(round_key(seed, t, r)), ctypes.c_double(p),
                ctypes.c_int(int(renormalise)), mask, ctypes.c_void_p(0))
            np.testing.assert_array_equal(Y, want)


def test_cuda_bursty_chains_and_their_losses_match_the_cpu(cuda_on_host):
    """The device's Gilbert-Elliott chains (ge_advance: from the stationary draw, then step by step) and the
    lossy pass gated by them: _core.ge_advance's states and _core.mix_lossy's rounds, bit for bit."""
    import ctypes

    from rowstoch_fast import _core
    from rowstoch_fast._hashing import round_key

    A = topology.erdos_renyi(23, 0.3, seed=4)
    c = A.csr
    Ap, Aj = c.indptr.astype(np.int32), c.indices.astype(np.int32)
    seed, p_bad, p_recover = 5, 0.3, 0.2
    cpu = np.zeros(c.nnz, dtype=np.uint8)
    dev = np.zeros(c.nnz, dtype=np.uint8)
    last = None
    for t in (0, 1, 4, 9):
        if last is None:
            _core.ge_advance(Ap, Aj, cpu, seed, 0, t, p_bad, p_recover, init=True)
            steps = range(0, t + 1)
        else:
            _core.ge_advance(Ap, Aj, cpu, seed, last + 1, t, p_bad, p_recover)
            steps = range(last + 1, t + 1)
        keys = np.array([round_key(seed, 2**61 + s, 0) for s in steps], dtype=np.uint64)
        cuda_on_host.emulate_ge_advance_i32(
            ctypes.c_longlong(23), _ptr(Ap), _ptr(Aj), ctypes.c_int64(23), _ptr(dev), _ptr(keys),
            ctypes.c_int64(len(keys)), ctypes.c_uint64(round_key(seed, 2**62, 0)), ctypes.c_int(int(last is None)),
            ctypes.c_double(p_bad), ctypes.c_double(p_recover), ctypes.c_double(p_bad / (p_bad + p_recover)))
        np.testing.assert_array_equal(dev, cpu)
        last = t
        X = np.random.default_rng(t).normal(size=(23, 3))
        want = _core.mix_lossy(c.indptr, c.indices, c.data, X, seed=seed, t=t, r=0, p=0.8, bad=cpu)
        Y = np.full_like(X, np.nan)
        cuda_on_host.emulate_csr_mix_lossy1_f64_i32(
            ctypes.c_longlong(X.size), _ptr(Ap), _ptr(Aj), _ptr(c.data), _ptr(X), _ptr(Y), ctypes.c_int64(23),
            ctypes.c_int64(3), ctypes.c_void_p(0), ctypes.c_uint64(round_key(seed, t, 0)), ctypes.c_double(0.8),
            ctypes.c_int(1), ctypes.c_void_p(0), _ptr(dev))
        np.testing.assert_array_equal(Y, want)
    assert 0 < cpu.mean() < 1


@pytest.mark.parametrize("kind", ["entry", "row", "circ"])
@pytest.mark.parametrize("w", [3, 4])
@pytest.mark.parametrize("rounds,fused,persistent", [(1, True, False), (1, False, False), (3, False, False),
                                                     (4, True, False), (3, True, True), (4, True, True),
                                                     (3, False, True)])
def test_cuda_gt_y_phase_matches_cpu(cuda_on_host, monkeypatch, kind, w, rounds, fused, persistent):
    """CupyBackend.gt_y_phase on the emulated kernels (the one-launch phase, or tracker input, rounds and the
    descent round; 16-byte packs at w = 4; under ROWSTOCH_CUDA_ROUNDS=persistent the whole phase of R rounds in
    one cooperative launch, or its rounds but the last): the CPU's fused y phase bit for bit, a NaN in xw
    reported under the phase's launch id, and nothing written once another launch has failed."""
    from rowstoch_fast import MixingMatrix, _core
    from rowstoch_fast.backends import cupy as backend

    fake = _emulated_device(cuda_on_host, monkeypatch)
    monkeypatch.setattr(backend, "MIX_KERNEL", kind)
    if persistent:
        monkeypatch.setattr(backend, "ROUNDS", "persistent")
        monkeypatch.setattr(backend, "_ROUNDS_GRID", 2)
        monkeypatch.setattr(backend, "_BLOCK", 16)
    monkeypatch.setattr(backend, "L2_HINTS", str(2 * w * 8))  # (circ: the offsets of at least 2 rows streamed)
    rng = np.random.default_rng(w + rounds)
    dense = rng.uniform(0.1, 1.0, (9, 9)) * (rng.uniform(size=(9, 9)) < 0.5) + np.eye(9) + np.roll(np.eye(9), 1, 1)
    for A in (topology.exponential(13), MixingMatrix(dense / dense.sum(axis=1, keepdims=True))):
        n = A.n
        x, y, g_new, g_old = (rng.standard_normal((n, w)) for _ in range(4))
        s_new, s_old = rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 2.0, n)
        c = A.csr
        want_y, want_xw, psi, work = (np.empty((n, w)) for _ in range(4))
        assert _core.gt_y_phase(c.indptr, c.indices, c.data, rounds, 0.05, x, y, g_new, g_old, s_new, s_old,
                                want_y, want_xw, psi, work)
        ops = backend.CupyBackend()
        ops.attach(n, np.dtype(np.float64), {"A": A})
        ops.fused_phase_max = 2**16 if fused else 0
        dev = [fake.asarray(a) for a in (x, y, g_new, g_old, s_new, s_old)]
        y_out, xw, psi, work = (fake.asarray(np.full((n, w), 7.0)) for _ in range(4))
        fake.launched.clear()
        assert ops.gt_y_phase(A, rounds, 0.05, *dev, y_out, xw, psi, work) is backend.DEFERRED
        single = fused and (rounds == 1 or persistent)
        kernel = ("phase" if rounds == 1 else "rounds") if single else "descent"
        assert [k.split("_")[1] for k in fake.launched if k.startswith("gt_")] == [kernel]
        assert not persistent or rounds < 3 or single or "csr_rounds" in fake.launched[-2]
        family = kind if A.n == 13 else "entry"  # (the random matrix allows only "entry")
        assert all(f"_{family}" in k for k in fake.launched if k.startswith(("gt_", "csr_")))
        np.testing.assert_array_equal(y_out, want_y)
        np.testing.assert_array_equal(xw, want_xw)
        assert ops.failed_launch() == 0
        dev[0][2, 1] = np.inf  # x: the descent's check fails under this phase's id (a replayed graph's)
        ops.gt_y_phase(A, rounds, 0.05, *dev, y_out, xw, psi, work)
        failed = ops.last_launch
        assert failed == (2 if single else backend._GRAPH_CHECK | 1 << 8) and np.isinf(xw[2, 1])
        np.testing.assert_array_equal(y_out, want_y)  # (x is not in y)
        dev[0][2, 1] = x[2, 1]
        ops.gt_y_phase(A, rounds, 0.05, *dev, 2 * y_out, xw, psi, work)  # another key: plain launches, frozen
        ops.gt_y_phase(A, rounds, 0.05, *dev, y_out, xw, psi, work)  # the graph's next replay: frozen
        np.testing.assert_array_equal(y_out, want_y)
        assert np.isinf(xw[2, 1])
        assert ops.failed_launch() == failed and ops.failed_launch() == 0


def test_cuda_run_status_freezes_later_launches(cuda_on_host):
    """A checked launch that writes a NaN records its id; it still completes, and every later launch (mixing,
    combine) is a no-op, so the state stays at the last finite iterate; unchecked launches (id 0) report nothing."""
    import ctypes

    A = topology.exponential(9)
    Ap, Aj, Ax = _csr_args(A, np.int32, np.float64)
    X = np.random.default_rng(2).normal(size=(9, 3))
    X[5, 1] = np.nan
    status = np.zeros(2, dtype=np.uint64)
    out = np.full_like(X, 7.0)
    null = ctypes.c_void_p(0)
    combine = cuda_on_host.emulate_combine1_f64

    def run(dst, src, launch):
        combine(ctypes.c_longlong(src.size), _ptr(src), null, ctypes.c_double(2.0), _ptr(dst),
                ctypes.c_int64(src.size), ctypes.c_int64(3), _ptr(status), ctypes.c_uint64(launch))

    run(out, X, 0)  # unchecked: writes, reports nothing
    assert status[0] == 0 and np.isnan(out[5, 1])
    out[...] = 7.0
    run(out, X, 3)  # checked launch 3 fails, but completes
    assert status[0] == 3
    np.testing.assert_array_equal(out, 2.0 * X)
    later = np.full_like(X, 7.0)
    run(later, np.ones_like(X), 4)
    for kernel in ("entry1x1_f64_i32", "entry1x4_f64_i32"):
        getattr(cuda_on_host, f"emulate_csr_mix_{kernel}")(
            ctypes.c_longlong(X.size), _ptr(Ap), _ptr(Aj), _ptr(Ax), _ptr(np.ones_like(X)), _ptr(later),
            ctypes.c_int64(9), ctypes.c_int64(3), _ptr(status))
    np.testing.assert_array_equal(later, 7.0)  # frozen: nothing written
    assert status[0] == 3


@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_cuda_combine_kernel_logic_matches_cpu(cuda_on_host, K):
    """kernels.cu's combine: the CPU combine's sums, bit for bit, its NaN flag, and out among the terms."""
    import ctypes

    from rowstoch_fast import _core

    rng = np.random.default_rng(K)
    n, w = 7, 3
    blocks = [rng.normal(size=(n, w)) for _ in range(K)]
    coefs = [rng.normal(size=n) if t % 2 else float(rng.normal()) for t in range(K)]
    null = ctypes.c_void_p(0)
    combine = getattr(cuda_on_host, f"emulate_combine{K}_f64")
    rows = [_ptr(c) if isinstance(c, np.ndarray) else null for c in coefs]
    cs = [ctypes.c_double(0.0 if isinstance(c, np.ndarray) else c) for c in coefs]

    def run(terms, out, bad, launch):
        combine(ctypes.c_longlong(n * w), *[_ptr(b) for b in terms], *rows, *cs, _ptr(out), ctypes.c_int64(n * w),
                ctypes.c_int64(w), _ptr(bad), ctypes.c_uint64(launch))

    for in_place in (False, True):
        out = blocks[0].copy() if in_place else np.full((n, w), np.nan)
        terms = [out if (in_place and t == 0) else blocks[t] for t in range(K)]
        want = np.empty((n, w))
        assert _core.combine(want, coefs, [blocks[t] for t in range(K)])
        bad = np.zeros(2, dtype=np.uint64)
        run(terms, out, bad, 1)
        np.testing.assert_array_equal(out, want)
        assert bad[0] == 0
    blocks[-1][4, 2] = np.inf
    out = np.empty((n, w))
    run(blocks, out, bad, 5)
    assert bad[0] == 5
