"""One contract for every backend (CPU always; CuPy where a GPU is), and the device-independent backend logic."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rowstoch_fast import PullDiagGT, _reference, pull_diag, topology
from rowstoch_fast._backend import resolve_backend
from rowstoch_fast.objectives import NonconvexLogistic


def _cupy_or_reason():
    try:
        from rowstoch_fast.cuda import require_cupy

        return require_cupy(), None
    except (RuntimeError, ImportError) as exc:
        return None, str(exc)


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
    code = "import sys, rowstoch_fast, rowstoch_fast.cuda; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "False"


def test_device_helpers_refuse_host_arrays_when_cupy_runs():
    cupy, reason = _cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    from rowstoch_fast import cuda

    with pytest.raises(TypeError, match="no silent host/device copies"):
        cuda.mix(topology.ring(4), np.zeros(4))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA compiler here to check the kernel source")
def test_cuda_kernels_compile(tmp_path):
    import rowstoch_fast

    src = os.path.join(os.path.dirname(rowstoch_fast.__file__), "kernels.cu")
    out = subprocess.run(["nvcc", "-c", "-std=c++14", "--fmad=false", src, "-o", str(tmp_path / "k.o")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr


def test_cuda_kernels_compile_with_nvrtc():
    """The exact compile the CuPy backend does at run time (NVRTC, same options), without needing a device."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) not installed")
    import rowstoch_fast

    with open(os.path.join(os.path.dirname(rowstoch_fast.__file__), "kernels.cu")) as f:
        src = f.read()
    try:
        prog = nvrtc.createProgram(src, "kernels.cu", [], [])
    except Exception as exc:  # noqa: BLE001 - NVRTC library missing
        pytest.skip(f"NVRTC unavailable: {exc}")
    try:
        nvrtc.compileProgram(prog, ["-std=c++14", "--fmad=false", "-arch=compute_80"])
    except Exception:  # noqa: BLE001 - show the compiler log
        pytest.fail(nvrtc.getProgramLog(prog))
    assert len(nvrtc.getPTX(prog)) > 0
