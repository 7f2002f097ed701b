"""Shared fixtures and Hypothesis strategies for the test suite."""

import os
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Seconds of the calibration loop on the 2-core development VM at rest (median of three, 4.5 ms).
CALIBRATION_SECONDS = 0.0045


def slowness():
    """How many times slower this machine runs Python now than the development VM at rest (at least 1): the
    median of three runs of a fixed loop, measured at each call (the load changes during a run)."""
    import time

    times = []
    for _ in range(3):
        start = time.perf_counter()
        sum(i * i for i in range(100_000))
        times.append(time.perf_counter() - start)
    return max(1.0, sorted(times)[1] / CALIBRATION_SECONDS)


def sigint_as_usual():
    """``preexec_fn`` of a child process a test interrupts with SIGINT: Python's KeyboardInterrupt in it even where
    this run inherited SIGINT ignored (a job a non-interactive shell started in the background: Python then leaves
    SIGINT ignored in every child, and a test waiting for the child to stop waits for ever; :func:`pytest_configure`
    now restores it in the tests' own processes, whose children then start as usual too). POSIX only."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):  # (likewise a run under nohup, which ignores SIGHUP in every child: the tests
        # that send a comparison SIGHUP saw it finish with status 0, .ci/oldest started with nohup)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


if sys.platform == "win32":  # (no preexec_fn there)
    sigint_as_usual = None  # noqa: F811


#: Set where :func:`pytest_configure` set ``OMP_NUM_THREADS=1`` (a worker of pytest-xdist) until PyTorch's pool
#: follows it (:func:`pytest_runtest_setup`); never where the variable was set by hand.
_ONE_THREAD = False


def pytest_configure(config):
    """Under pytest-xdist (the README's test command: a worker per core) each worker's kernels take one thread:
    as many OpenMP teams as cores on a machine with other busy processes ran 2x slower than one thread each
    (bench/RESULTS.md section 20). ``OMP_NUM_THREADS`` set by hand wins. Likewise a comparison of the command
    line runs its methods in the worker's process (``ROWSTOCH_JOBS=1``: a pool of a process per core beside every
    worker cost 2-10 s a comparison in spawns and their imports); the tests of the processes ask for them
    (``--jobs``, ``jobs=``). And a comparison of the command line draws no figure (``ROWSTOCH_FORMAT=none``: the
    figures were half of a small comparison's 1.8 s, and about a fifth of test_compare's time); the tests of the
    figures ask for them (``--format png``)."""
    global _ONE_THREAD
    if os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("OMP_NUM_THREADS"):
        os.environ["OMP_NUM_THREADS"] = "1"  # (the subprocesses a test starts, too)
        _ONE_THREAD = True
        from rowstoch_fast import _core

        _core.set_num_threads(1)
        try:  # the BLAS too: NumPy (imported above) started its pool before OMP_NUM_THREADS was set
            from threadpoolctl import threadpool_limits
        except ImportError:  # (scikit-learn's dependency: not there, the BLAS keeps its pool)
            pass
        else:
            threadpool_limits(1, user_api="blas")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("ROWSTOCH_JOBS", "1")
    os.environ.setdefault("ROWSTOCH_FORMAT", "none")
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # (a run a non-interactive shell started in the background
        # inherits SIGINT ignored, and Python then keeps it so: the tests that send themselves a SIGINT and wait for
        # its KeyboardInterrupt failed there, three of them in a fresh-clone CI started with `&`; as a terminal's)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_runtest_setup(item):
    """PyTorch's thread pool as the worker's kernels (:func:`pytest_configure`): torch takes its thread count from
    the OpenMP runtime, which ``_core`` started before ``OMP_NUM_THREADS`` was set above, so that it ran a pool of
    a thread per core in every worker (the torch tests took 4-8x their time alone: 85 s instead of 12 for the
    CIFAR-10 reproduction, bench/RESULTS.md section 42). Set once torch is imported (not importing it here: a
    second per worker that most tests do not need)."""
    global _ONE_THREAD
    torch = sys.modules.get("torch")
    if _ONE_THREAD and torch is not None:
        torch.set_num_threads(1)
        _ONE_THREAD = False  # (once: a test that sets its own count keeps it)


def hang_limit(seconds):
    """A time limit that only a hang exceeds: ``seconds`` on the development VM at rest, scaled by
    :func:`slowness` (a busy or slower machine gets proportionally longer; no test asserts speed)."""
    return seconds * slowness()


def split_in_two(grad):
    """``grad(X)`` as a finite sum of two samples per node, ``grad(X) -+ (X - 1) / 2`` (their mean is ``grad``):
    ``sample_grad(X, idx)`` for a method of per-sample gradients (GT-SAGA)."""
    def sample_grad(X, idx):
        if type(X).__module__.startswith("cupy"):  # (a GPU's X: the ids go there too)
            import cupy

            idx = cupy.asarray(idx)
        with np.errstate(all="ignore"):  # (a diverging run: the step reports it)
            return grad(X) + (idx[..., None] - 0.5).astype(X.dtype) * (X - 1.0)

    return sample_grad


def options_for(cls):
    """What a registry-driven test builds ``cls`` with beyond its matrices and rate: a proximal method's regularizer
    (an L1 term), so that its proximal step runs on every backend the test covers."""
    if getattr(cls, "composite", False):
        from rowstoch_fast.composite import L1

        return {"regularizer": L1(0.05)}
    return {}


class AffineProx:
    """The local proximal operators of the functions whose gradient is ``grad`` (an affine, coordinate-wise
    ``grad(X) = a X - c``, as the registry tests' problems are: read off ``grad`` at 0 and 1), for a method that
    takes ``prox(V, step)`` instead of gradients (ADMM): ``argmin_x f_i(x) + ||x - v||^2 / (2t) = (v / t + c) /
    (a + 1 / t)``."""

    def __init__(self, grad):
        self.grad = grad

    def prox(self, V, step):
        xp = np
        if type(V).__module__.startswith("cupy"):  # (a GPU's V)
            import cupy as xp
        g0 = self.grad(V * 0.0)
        with np.errstate(all="ignore"):  # (a diverging run: the step reports it)
            a = self.grad(V * 0.0 + 1.0) - g0
            inv = 1.0 / xp.asarray(step, dtype=V.dtype)[..., None]
            return (V * inv - g0) / (a + inv)

    def __call__(self, X):  # (a plain call is a gradient: what a method of gradients would take)
        return self.grad(X)


def feed(cls, grad, rep_offset=0, nodes=None):
    """``grad`` as ``cls.step`` takes it: itself, or for a method of per-sample gradients (``cls.gradients ==
    "samples"``, GT-SAGA) an oracle of :func:`split_in_two` of it (keep it for the whole run: it counts its
    draws). The dense twin gets the same samples and draws from :func:`twin_samples`."""
    if getattr(cls, "gradients", "batch") == "prox":
        return AffineProx(grad)
    if getattr(cls, "gradients", "batch") != "samples":
        return grad
    from rowstoch_fast.objectives import SampleOracle

    return SampleOracle(split_in_two(grad), samples=2, rep_offset=rep_offset, nodes=nodes)


def steps_until(opt, grad, error, tol, most, every=500):
    """Step ``opt`` on ``grad`` until ``error(opt.x)`` is below ``tol`` at two reads ``every`` steps apart and not
    growing between them, or ``most`` steps (rounded down to a multiple of ``every``). Returns the errors read: a convergence test
    asserts on the last, so it fails as a run of ``most`` steps would, and a run that converges early stops there
    (bench/RESULTS.md 43a: 41.6 -> 15 s of the workers for the exact methods' test)."""
    errors = []
    for _ in range(most // every):
        for _ in range(every):
            opt.step(grad)
        errors.append(error(opt.x))
        if len(errors) >= 2 and errors[-2] < tol and errors[-1] <= errors[-2]:
            break
    return errors


def cli_resumes_like_one_run(base, tmp_path, tag="run"):
    """``rowstoch run`` with the options ``base`` for 40 iterations, and for 20 with a checkpoint then resumed to 40:
    their records at iteration 40 are equal, bit for bit. Returns ``(checkpoint path, the uninterrupted run's
    history frame)``."""
    import pandas as pd

    from rowstoch_fast import cli

    ck = str(tmp_path / f"{tag}.npz")
    assert cli.main(base + ["--iterations", "40", "--out", str(tmp_path / f"{tag}-a")]) == 0
    assert cli.main(base + ["--iterations", "20", "--checkpoint", ck, "--out", str(tmp_path / f"{tag}-b")]) == 0
    assert cli.main(base + ["--iterations", "40", "--resume", ck, "--out", str(tmp_path / f"{tag}-c")]) == 0
    a, c = (pd.read_csv(tmp_path / f"{tag}-{k}" / "history.csv") for k in ("a", "c"))
    assert np.array_equal(a[a["iteration"] == 40]["grad_norm"].values, c[c["iteration"] == 40]["grad_norm"].values)
    return ck, a


def twin_samples(grad, shape):
    """The keywords of a per-sample method's dense twin that :func:`feed` of ``grad`` gives the method itself
    (``shape``: ``X.shape[:-1]``)."""
    from rowstoch_fast.objectives import draw_samples

    return {"sample_grad": split_in_two(grad), "samples": 2, "draw": lambda k: draw_samples(2, shape, k)}


def random_primitive(n, density, rng, self_loops=True):
    """Random strongly connected, primitive, row-stochastic dense matrix."""
    from rowstoch_fast import MixingMatrix

    for _ in range(1000):
        M = (rng.random((n, n)) < density) * rng.uniform(0.1, 1.0, (n, n))
        np.fill_diagonal(M, rng.uniform(0.1, 1.0, n) if self_loops else 0.0)
        # a random directed cycle guarantees strong connectivity
        perm = rng.permutation(n)
        M[perm, np.roll(perm, 1)] += rng.uniform(0.1, 1.0, n)
        if not self_loops:
            np.fill_diagonal(M, 0.0)
        try:
            return MixingMatrix(M, normalize=True)
        except ValueError:
            continue  # periodic without self loops: draw again
    raise RuntimeError("could not draw a primitive matrix")


def for_algorithm(cls, A):
    """``A`` as the algorithm ``cls`` takes it: itself, or for an undirected network's method (a ``W`` among its
    matrices) the Metropolis-Hastings W of the same graph made undirected (doubly stochastic)."""
    if cls.applies_to(A):
        return A
    from rowstoch_fast import MixingMatrix
    from rowstoch_fast.mixing import metropolis_weights

    links = (A.csr + A.csr.T).tocsr()  # every link both ways
    links.data[:] = 1.0
    return metropolis_weights(MixingMatrix(links, normalize=True))


@st.composite
def csr_and_block(draw, max_n=12, max_d=5):
    """(scipy CSR with random pattern incl. empty rows and duplicates, dense X) of matching dtypes."""
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    fdt = draw(st.sampled_from([np.float64, np.float32]))
    idt = draw(st.sampled_from([np.int32, np.int64]))
    nnz = draw(st.integers(0, 3 * n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, nnz)
    cols = rng.integers(0, n, nnz)
    vals = rng.standard_normal(nnz)
    counts = np.bincount(rows, minlength=n)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(idt)
    order = np.argsort(rows, kind="stable")  # unsorted columns and duplicates kept on purpose
    A = sp.csr_array((vals[order].astype(fdt), cols[order].astype(idt), indptr), shape=(n, n))
    X = rng.standard_normal((n, d)).astype(fdt)
    return A, X


def cupy_or_reason():
    """(cupy, None) where the CuPy backend runs here, else (None, why not): tests must pass either way."""
    try:
        from rowstoch_fast.backends.cupy import require_cupy

        return require_cupy(), None
    except (RuntimeError, ImportError) as exc:
        return None, str(exc)


def tol(dtype):
    return 1e-12 if np.dtype(dtype) == np.float64 else 2e-5


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _no_refinement_remembered(monkeypatch):
    """Every test starts with no tuning's refinement remembered (the tuner runs the last one of the same problem
    beside its next grid, ``compare.tuning._REFINED``, process-wide): a test that counts a tuning's runs passed
    alone and failed after another test had tuned its module's problem (helper 249)."""
    tuning = sys.modules.get("rowstoch_fast.compare.tuning")  # (not imported: nothing remembered; and a test of
    # what an import loads is left as it was)
    if tuning is not None:
        monkeypatch.setattr(tuning, "_REFINED", [])


@pytest.fixture(scope="session")
def cuda_on_host(tmp_path_factory):
    """kernels.cu built for the host (tests/cuda_on_host.cpp): the CUDA logic, run without a GPU."""
    import ctypes
    import shutil
    import subprocess
    import sysconfig

    import rowstoch_fast

    cxx = (os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++").split()[0]  # (as setuptools)
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx}) to build the host emulation of the CUDA kernels")
    src = os.path.join(os.path.dirname(__file__), "cuda_on_host.cpp")
    cu = os.path.join(os.path.dirname(rowstoch_fast.__file__), "backends", "kernels.cu")
    lib = tmp_path_factory.mktemp("cuda_on_host") / "cuda_on_host.so"
    # (.ci/sanitize: ROWSTOCH_EMULATION_CFLAGS builds it under the sanitizers, which then check the kernels' memory
    # accesses and their synchronisation)
    extra = os.environ.get("ROWSTOCH_EMULATION_CFLAGS", "").split()
    out = subprocess.run([cxx, "-std=c++14", "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-pthread", *extra,
                          f'-DKERNELS_CU="{cu}"', src, "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return ctypes.CDLL(str(lib))
