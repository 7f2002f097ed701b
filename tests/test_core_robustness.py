"""The compiled kernels under hostile input (issue 10, items 14-21): a clear exception, never a crash.

Cases that crashed the interpreter run in a subprocess, so a regression fails
the test instead of killing the test run.
"""

import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import threading

import numpy as np
import pytest

import rowstoch_fast as rf
import rowstoch_fast._core as core
from rowstoch_fast import topology
from conftest import hang_limit, sigint_as_usual


def run_python(code, timeout=hang_limit(120)):
    """Run ``code`` in a fresh interpreter (SIGINT at its default: some send it to themselves); return
    (returncode, stdout, stderr)."""
    # from a neutral folder: in a source checkout the current folder would shadow the installed package
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout, cwd=tempfile.gettempdir(),
                         preexec_fn=sigint_as_usual)
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def A():
    return topology.exponential(64)


def csr_args(A):
    c = A.csr
    return c.indptr, c.indices, c.data


# ---------------------------------------------------------------- item 14: outputs sharing memory
def test_mix_out_sharing_csr_arrays_is_refused(A):
    indptr, indices, data = (np.array(a) for a in csr_args(A))  # writeable copies
    X = np.ones((A.n, 1))
    for name, arr in (("indptr", indptr), ("indices", indices), ("data", data)):
        raw = arr.view(np.uint8)
        if raw.size < A.n * 8:
            continue
        out = raw[: A.n * 8].view(np.float64).reshape(A.n, 1)
        with pytest.raises(ValueError, match=f"out shares memory with {name}"):
            core.mix(indptr, indices, data, X, out)
        with pytest.raises(ValueError, match=f"shares memory with {name}"):
            core.mix_power(indptr, indices, data, X, 3, out)


def test_gt_y_phase_outputs_sharing_inputs_are_refused(A):
    n, w = A.n, 2
    blk = {k: np.ones((n, w)) for k in ("x", "y", "g_new", "g_old", "y_out", "xw", "psi", "work")}
    s = np.ones(n)
    args = lambda **kw: dict(dict(blk, s_new=s, s_old=s.copy()), **kw)  # noqa: E731
    for out in ("y_out", "xw", "psi", "work"):
        for inp in ("x", "y", "g_new"):
            kw = args(**{out: blk[inp]})
            with pytest.raises(ValueError, match="shares memory"):
                core.gt_y_phase(*csr_args(A), 2, 0.1, **kw)
        alias = np.ones(n * w)
        kw = args(**{out: alias.reshape(n, w)}, s_new=alias[:n])
        with pytest.raises(ValueError, match=f"{out} shares memory with s_new"):
            core.gt_y_phase(*csr_args(A), 2, 0.1, **kw)
    out = np.ones((n, w))
    with pytest.raises(ValueError, match=r"out shares memory with coefs\[1\]"):
        core.combine(out, [1.0, out.reshape(-1)[:n]], [blk["y"], blk["g_new"]])


def test_logistic_out_sharing_data_is_refused():
    f = rf.objectives.NonconvexLogistic.synthetic(n=4, total=400, d=3, batch=10, seed=0)
    H, Y = np.array(f.H), np.array(f.Y)
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="out shares memory with H"):
        core.logistic_grad(H, Y, 4, 0.01, X, 10, 1, 0, 0, out=H[:4])
    nodes = np.zeros(6, dtype=np.int64)
    with pytest.raises(ValueError, match="out shares memory with nodes"):
        core.logistic_grad(H, Y, 4, 0.01, X[:2], 10, 1, 0, 0, nodes=nodes[:2],
                           out=nodes.view(np.float64).reshape(2, 3))


# ---------------------------------------------------------------- item 15: int64 overflow
def test_work_count_overflow_is_refused():
    f = rf.objectives.NonconvexLogistic.synthetic(n=4, total=400, d=3, batch=10, seed=0)
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="overflows 64-bit"):
        core.logistic_grad(f.H, f.Y, 4, 0.01, X, 10, 2**62, 0, 0)
    with pytest.raises(ValueError, match="overflows 64-bit"):
        f.stochastic_gradient(X, 0, batches=2**62)
    with pytest.raises(ValueError, match=r"batches = 1000000000000 with batch = 10 is .* multiply-adds per call "
                                         r"\(over 2\^40"):  # no overflow, but it ran for hours, uninterruptibly
        f.stochastic_gradient(X, 0, batches=10**12)
    A = topology.ring(4)
    with pytest.raises(ValueError, match="overflows 64-bit"):
        core.diag_powers(*csr_args(A), 2**62, 3)
    with pytest.raises(ValueError, match="overflows 64-bit"):  # ran "forever" before
        core.diag_powers(*csr_args(A), 2**63 - 1, 2)


def test_diag_powers_refuses_unbounded_work():
    from rowstoch_fast.tracker import diag_powers

    with pytest.raises(ValueError, match="stride"):
        diag_powers(topology.ring(4), 2**63 - 1, 2)
    with pytest.raises(ValueError, match="horizon"):
        topology.ring(8).metrics().theta(10**15)


# ---------------------------------------------------------------- item 16: bad_alloc inside a parallel region
def test_allocation_failure_in_threads_is_a_memory_error():
    code = """
        import resource, numpy as np, rowstoch_fast._core as c
        if not c.has_openmp():
            print("serial build"); raise SystemExit
        c.set_num_threads(2)
        n, M, d = 2, 2**24, 1
        H = np.ones((n * M, d)); Y = np.ones(n * M); X = np.zeros((n, d))
        c.logistic_full_grad(H[: n * 1024].copy(), Y[: n * 1024].copy(), n, 0.0, X)  # thread pool up
        vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + 100 * 2**20, resource.RLIM_INFINITY))
        try:
            c.logistic_full_grad(H, Y, n, 0.0, X)
            print("no error")
        except MemoryError:
            print("MemoryError")
    """
    if not sys.platform.startswith("linux"):
        pytest.skip("uses /proc and RLIMIT_AS")
    if os.environ.get("ROWSTOCH_SANITIZED"):
        pytest.skip("ASan's allocator does not run under an address-space limit")
    rc, out, err = run_python(code)
    assert rc == 0, err[-2000:]
    assert out.strip() in ("MemoryError", "serial build", "no error"), out
    # "no error": the machine let the allocation through despite the limit (no crash either way)


# ---------------------------------------------------------------- item 17: thread count
@pytest.mark.parametrize("bad", [0, -1, 200000, 2**31 - 1])
def test_absurd_thread_counts_are_refused(bad):
    before = core.get_num_threads()
    with pytest.raises(ValueError, match=f"threads must be in 1..[0-9]+ .*got {bad}"):
        core.set_num_threads(bad)
    assert core.get_num_threads() == before


def test_thread_count_is_process_wide():
    if not core.has_openmp():
        pytest.skip("serial build: always 1 thread")
    before = core.get_num_threads()
    try:
        t = threading.Thread(target=core.set_num_threads, args=(1,))
        t.start()
        t.join()
        assert core.get_num_threads() == 1
        seen = []
        t = threading.Thread(target=lambda: seen.append(core.get_num_threads()))
        core.set_num_threads(2)
        t.start()
        t.join()
        assert seen == [2]
    finally:
        core.set_num_threads(before)


# ---------------------------------------------------------------- item 18: dtype equivalence
def test_unpickled_arrays_and_objects_are_accepted(A):
    X = np.random.default_rng(0).standard_normal((A.n, 3))
    X2 = pickle.loads(pickle.dumps(X))
    np.testing.assert_array_equal(A.mix(X2), A.mix(X))
    A2 = pickle.loads(pickle.dumps(A))
    np.testing.assert_array_equal(A2.mix(X), A.mix(X))
    assert not A2.csr.indices.flags.writeable
    f = rf.objectives.NonconvexLogistic.synthetic(n=A.n, total=A.n * 20, d=3, batch=5, seed=0)
    f2 = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(f2.stochastic_gradient(X, 0), f.stochastic_gradient(X, 0))


def test_non_native_byte_order_is_refused_not_misread(A):
    X = np.ones((A.n, 2))
    swapped = X.astype(X.dtype.newbyteorder())
    with pytest.raises(TypeError, match="byte order"):
        core.mix(*csr_args(A), swapped)
    np.testing.assert_array_equal(A.mix(swapped), A.mix(X))  # the Python layer converts


# ---------------------------------------------------------------- item 19: alignment
def test_misaligned_arrays_are_refused_by_core_and_copied_by_the_api(A):
    raw = np.zeros(A.n * 2 * 8 + 1, np.uint8)
    X = raw[1:].view(np.float64).reshape(A.n, 2)
    assert not X.flags.aligned
    X[...] = np.arange(A.n * 2).reshape(A.n, 2)
    with pytest.raises(ValueError, match="not aligned"):
        core.mix(*csr_args(A), X)
    np.testing.assert_array_equal(A.mix(X), A.mix(np.array(X)))


# ---------------------------------------------------------------- item 20: immutable matrices
def test_matrix_arrays_cannot_be_made_writeable(A):
    for arr in (A.csr.indptr, A.csr.indices, A.csr.data):
        with pytest.raises(ValueError):
            arr.setflags(write=True)
        with pytest.raises(ValueError):
            arr[0] = 0


# ---------------------------------------------------------------- item 21: tracker built once
def test_tracker_built_once_under_concurrency(monkeypatch):
    from rowstoch_fast import tracker

    calls = []
    real = tracker.diag_powers

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tracker, "diag_powers", counting)
    A = topology.exponential(256)
    barrier = threading.Barrier(4)

    def build():
        barrier.wait()
        tracker.DiagTracker(A, 1)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1


# ---------------------------------------------------------------- item 26: contention back-off
def test_adaptive_threads_changes_time_not_results():
    state = core.adaptive_threads()
    assert set(state) >= {"supported", "enabled", "windows", "serial_episodes", "serial_now"}
    A = topology.exponential(4096)
    X = np.random.default_rng(0).standard_normal((A.n, 8))
    before = state["enabled"]
    try:
        core.set_adaptive_threads(False)
        assert not core.adaptive_threads()["enabled"]
        off = A.mix_power(X, 5)
        core.set_adaptive_threads(True)
        on = A.mix_power(X, 5)
    finally:
        core.set_adaptive_threads(before)
    np.testing.assert_array_equal(on, off)


def test_adaptive_threads_can_be_disabled_by_environment():
    rc, out, err = run_python("""
        import rowstoch_fast._core as c
        print(c.adaptive_threads()["enabled"])
    """.replace("import rowstoch_fast", "import os; os.environ['ROWSTOCH_ADAPTIVE_THREADS'] = '0'; import rowstoch_fast"))
    assert rc == 0 and out.strip() == "False", err


# ---------------------------------------------------------------- issue 35, items 1-4: the Gilbert-Elliott kernel
GE_CRASHES = [  # (indptr, indices, ids): each read outside its arrays (segfault or ASan report) before
    ("[0, 1 << 26, 2]", "[0, 1]", ""),                       # indptr not checked beyond its last entry
    ("[0, 1, 2]", "[0, 1 << 40]", "row_ids=np.arange(2), col_ids=np.arange(2)"),  # an index read in col_ids
    ("[]", "[]", ""),                                          # an empty indptr: the 8 bytes before it
]


@pytest.mark.parametrize("indptr, indices, ids", GE_CRASHES)
def test_ge_advance_crash_reproducers_are_clear_errors(indptr, indices, ids):
    code = f"""
        import numpy as np
        import rowstoch_fast._core as core
        indices = np.array({indices}, dtype=np.int64)
        try:
            core.ge_advance(np.array({indptr}, dtype=np.int64), indices, np.zeros(len(indices), np.uint8), 0, 0, 3,
                            .5, .5, init=True, {ids})
        except ValueError as exc:
            print("ValueError:", exc)
    """
    rc, out, err = run_python(code)
    assert rc == 0, err
    assert out.startswith("ValueError:"), out


def _ge_reference(indptr, indices, t, seed=3, p_bad=0.3, p_recover=0.4, row_ids=None, col_ids=None):
    from rowstoch_fast import _reference

    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    gi = rows if row_ids is None else row_ids[rows]
    gj = indices if col_ids is None else col_ids[indices]
    return _reference.gilbert_elliott_states(seed, gi.astype(np.int64), np.asarray(gj, np.int64), t, p_bad, p_recover)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(counts=st.lists(st.integers(0, 3), min_size=0, max_size=6), ncols=st.integers(0, 5),
       raw=st.lists(st.integers(-2, 7), min_size=0, max_size=20), shift=st.integers(-2, 2),
       with_ids=st.booleans(), t=st.integers(-1, 6), dtype=st.sampled_from([np.int32, np.int64]))
def test_ge_advance_checks_every_index_it_reads_and_otherwise_equals_the_reference(counts, ncols, raw, shift,
                                                                                   with_ids, t, dtype):
    """Arbitrary (often malformed) CSR-like arrays: a ValueError naming the argument, or the reference's states
    (under ASan + UBSan in .ci/sanitize: no read outside the arrays)."""
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(dtype)
    if shift and len(indptr) > 1:
        indptr[len(indptr) // 2] += shift  # may break monotonicity or the end
    nnz = max(0, int(indptr[-1])) if len(indptr) else 0
    indices = np.array((raw * (nnz + 1))[:nnz] if raw else [0] * nnz, dtype=dtype)
    rows = len(indptr) - 1
    kw = {"row_ids": np.arange(rows, dtype=np.int64) * 2, "col_ids": np.arange(ncols, dtype=np.int64) * 3} \
        if with_ids else {}
    bad = np.zeros(len(indices), np.uint8)
    valid = (len(indptr) >= 1 and indptr[0] == 0 and (np.diff(indptr) >= 0).all() and indptr[-1] == len(indices)
             and ((indices >= 0) & (indices < (ncols if with_ids else rows))).all())
    if not valid:
        with pytest.raises(ValueError, match="indptr|indices"):
            core.ge_advance(indptr, indices, bad, 3, 0, t, 0.3, 0.4, init=True, **kw)
        return
    core.ge_advance(indptr, indices, bad, 3, 0, t, 0.3, 0.4, init=True, **kw)
    expected = _ge_reference(indptr.astype(np.int64), indices.astype(np.int64), t, **kw)
    np.testing.assert_array_equal(bad.astype(bool), expected)


def test_ge_advance_in_chunks_is_the_same_chain():
    """The iterations are advanced in chunks (Ctrl-C polled between them): the same states as the reference for
    a jump of many chunks, and as going step by step."""
    A = topology.exponential(64)
    c = A.csr
    t = 20000000 // c.nnz * 3 + 17  # three chunks and a part
    bad = np.zeros(c.nnz, np.uint8)
    core.ge_advance(c.indptr, c.indices, bad, 5, 0, 40, 0.3, 0.4, init=True)
    core.ge_advance(c.indptr, c.indices, bad, 5, 41, t, 0.3, 0.4)
    np.testing.assert_array_equal(bad.astype(bool), _ge_reference(c.indptr, c.indices, t, seed=5))


def test_gilbert_elliott_chains_refuse_a_jump_of_days_and_heed_ctrl_c():
    """Lossy(...).mix(X, t=10**12) advanced every chain from 0 to t (about two days) and ignored Ctrl-C."""
    from rowstoch_fast.network import Lossy

    net = Lossy(topology.exponential(64), 0.5, model="gilbert-elliott", p_bad=0.1, p_recover=0.1)
    with pytest.raises(ValueError, match="t = 1000000000000: the Gilbert-Elliott chains advance one iteration at a"):
        net.mix(np.ones((64, 2)), t=10**12)
    code = """
        import signal, threading, time, os, numpy as np
        from rowstoch_fast import topology
        from rowstoch_fast.network import Lossy
        net = Lossy(topology.exponential(64), 0.5, model="gilbert-elliott", p_bad=0.1, p_recover=0.1)
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        start = time.perf_counter()
        try:
            net.mix(np.ones((64, 2)), t=2 * 10**9)  # ~1e12 chain steps: many minutes
        except KeyboardInterrupt:
            print(f"interrupted after {time.perf_counter() - start:.1f} s")
    """
    rc, out, err = run_python(code)
    assert rc == 0, err
    assert out.startswith("interrupted after") and float(out.split()[2]) < 30, out


def test_two_threads_sharing_a_bursty_network_get_the_sequential_iterates():
    """The chain states lived in the network and were advanced in place, without the GIL, while the other
    thread read them: 10 of 10 runs differed from the sequential ones (by up to 3.5e-3)."""
    from rowstoch_fast.network import Lossy
    from rowstoch_fast.objectives import Quadratic

    net = Lossy(topology.exponential(32), 0.5, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3)
    f = Quadratic.random(32, 4, seed=0)

    def solve(lr, out, key):
        opt = rf.PullDiagGT(net, f.x0(), lr)
        for _ in range(300):
            opt.step(lambda X: f.full_gradient(X))
        out[key] = opt.x.copy()

    sequential = {}
    solve(0.01, sequential, "a")
    solve(0.02, sequential, "b")
    for _ in range(4):  # (before the fix, each try differed about two times in three)
        threaded = {}
        workers = [threading.Thread(target=solve, args=(lr, threaded, k)) for k, lr in (("a", 0.01), ("b", 0.02))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        for key in "ab":
            np.testing.assert_array_equal(threaded[key], sequential[key])


def test_a_hopeless_exact_tracker_is_refused_before_the_spectral_gap(monkeypatch):
    """PullDiagGT(topology.ring(16000), ...) spent more than 590 s in ARPACK on the spectral gap before deciding
    that the exact tracker was past its limits; a lower bound of O(nnz) (the graph's eccentricity) decides now."""
    from rowstoch_fast import MixingMatrix

    A = topology.ring(16000)

    def no_gap(self):
        raise AssertionError("the spectral gap was computed")

    monkeypatch.setattr(MixingMatrix, "metrics", no_gap)
    with pytest.raises(ValueError, match="needs at least 7999 powers of A \\(messages take 15999 hops .*tracker='perron'"):
        rf.PullDiagGT(A, np.zeros(3), 1e-3)
    rf.PullDiagGT(A, np.zeros(3), 1e-3, tracker="perron")  # the way out it names


def test_raw_entry_points_name_a_0d_or_nested_list_argument(A):
    """_core.mix_lossy with a 0-d indptr was an IndexError, _core.combine with a list coefficient pybind11's cast
    message (issue 35)."""
    indptr, indices, data = csr_args(A)
    X = np.ones((A.n, 2))
    with pytest.raises(ValueError, match="indptr must be 1-D"):
        core.mix_lossy(np.array(0), indices, data, X, None, 0, 0, 0, 0.1, True, None, None, None, -1, None, True)
    with pytest.raises(ValueError, match="indptr must have at least one entry"):
        core.mix_lossy(np.zeros(0, indptr.dtype), indices, data, X, None, 0, 0, 0, 0.1, True, None, None, None, -1,
                       None, True)
    out = np.zeros((4, 2))
    with pytest.raises(TypeError, match="coefs\\[0\\] must be a number or a NumPy array of one value per row, column or entry, got list"):
        core.combine(out, [[1.0, 2.0]], [out.copy()])
    with pytest.raises(TypeError, match="coefs\\[0\\] must be a number .* got str"):
        core.combine(out, ["1"], [out.copy()])
    assert core.combine(out, [np.float32(2.0)], [np.ones((4, 2))]) and (out == 2).all()
