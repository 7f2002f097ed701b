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


@pytest.mark.parametrize("value, enabled, warns", [("off", False, False), (" FALSE ", False, False),
                                                   ("no", False, False), ("on", True, False), ("", None, False),
                                                   ("flase", True, True), ("01", True, True)])
def test_adaptive_threads_read_as_the_words_say(monkeypatch, value, enabled, warns):
    """The compiled reading looked at the first character alone: ``false`` and ``off`` left the back-off on,
    ``01`` turned it off; a value that is neither word is said; nothing set leaves it as it is."""
    import warnings

    before = core.adaptive_threads()["enabled"]
    monkeypatch.setenv("ROWSTOCH_ADAPTIVE_THREADS", value)
    try:
        for was in (False, True):
            core.set_adaptive_threads(was)
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                rf._adaptive_threads_as_said()
            assert core.adaptive_threads()["enabled"] is (was if enabled is None else enabled)
            assert [str(w.message) for w in said] == ([f"ROWSTOCH_ADAPTIVE_THREADS={value!r} is neither 0, false, no, "
                                                       "off nor 1, true, yes, on: the contention back-off stays on"]
                                                      if warns else [])
    finally:
        core.set_adaptive_threads(before)


def test_more_threads_than_the_kernels_run_are_said():
    """OMP_NUM_THREADS=100000 ran the kernels on their cap (64 here) without a word; a count they run is quiet."""
    for asked, warned in (("100000", True), ("1", False), ("99999999999999999999", True)):
        rc, out, err = run_python(f"""
            import os, warnings
            os.environ["OMP_NUM_THREADS"] = "{asked}"
            warnings.simplefilter("always")
            import rowstoch_fast._core as c
            print(c.get_num_threads(), c.build_info()["openmp"])
        """)
        threads, openmp = out.split()
        assert rc == 0, err
        why = "(OpenMP's default, one per core: it did not take that value)" if len(asked) > 19 else "(at most 4 per"
        said = f"OMP_NUM_THREADS={asked} is more threads than the kernels run: they use {threads} {why}"
        assert (said in err) == (warned and openmp == "True"), err  # (a count past 2^64: "they use 2 (at most 4
        # per processor, at least 64)", helper 196)


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
    a jump of many chunks, and as going step by step. With p_bad = p_recover no transition is constant: every
    entry's chain is read through every chunk. (4096 nodes, 53,248 entries: a chunk is 375 iterations, and the
    reference's Python loop 1,142 of them; at 64 nodes its 133,943 took 10 s.)"""
    c = topology.exponential(4096).csr
    t = 20000000 // c.nnz * 3 + 17  # three chunks and a part
    for p_bad, p_recover in ((0.3, 0.4), (0.3, 0.3)):
        bad = np.zeros(c.nnz, np.uint8)
        core.ge_advance(c.indptr, c.indices, bad, 5, 0, 40, p_bad, p_recover, init=True)
        core.ge_advance(c.indptr, c.indices, bad, 5, 41, t, p_bad, p_recover)
        np.testing.assert_array_equal(bad.astype(bool), _ge_reference(c.indptr, c.indices, t, seed=5, p_bad=p_bad,
                                                                      p_recover=p_recover))


def test_gilbert_elliott_chains_jump_far_ahead_refuse_what_needs_every_draw_and_heed_ctrl_c():
    """Lossy(...).mix(X, t=10**12) advanced every chain from 0 to t (about two days) and ignored Ctrl-C; later the
    bound let 10^12 chain steps through (two hours). The CPU now reads the transitions from t backwards, each
    entry's state fixed by its last constant transition: t = 10^12 and the last iteration take milliseconds and
    equal the chains walked in order from 3000 iterations before. With p_bad = p_recover every transition counts:
    a jump past 10^10 chain steps (a minute) is refused at once, naming t and the bound, and one under it heeds
    Ctrl-C, leaving the chains as they were."""
    import time

    from rowstoch_fast.network import Lossy

    c = topology.exponential(64).csr
    for t in (10**12, 2**60 - 1):
        net = Lossy(topology.exponential(64), 0.5, seed=1, model="gilbert-elliott", p_bad=0.1, p_recover=0.3)
        start = time.perf_counter()
        jumped = net.bad_states(c.indptr, c.indices, t).copy()
        assert time.perf_counter() - start < 5.0  # (milliseconds; two hours before)
        net.bad_states(c.indptr, c.indices, t - 3000)
        for s in range(t - 2999, t + 1, 7):  # (in order, a few transitions a call)
            net.bad_states(c.indptr, c.indices, s)
        np.testing.assert_array_equal(net.bad_states(c.indptr, c.indices, t), jumped)
    net = Lossy(topology.exponential(64), 0.5, model="gilbert-elliott", p_bad=0.1, p_recover=0.1)
    with pytest.raises(ValueError, match=r"^t = 1000000000: the Gilbert-Elliott chains advance from their last use "
                                         r"\(the start\) p_bad = p_recover: .* more than 1e\+10 \(a minute\)"):
        net.mix(np.ones((64, 2)), t=10**9)
    code = """
        import signal, threading, time, os, numpy as np
        from rowstoch_fast import _core, topology
        c = topology.exponential(64).csr
        bad = np.zeros(c.nnz, np.uint8)
        _core.ge_advance(c.indptr, c.indices, bad, 0, 0, 40, 0.1, 0.1, init=True)
        before = bad.copy()
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        start = time.perf_counter()
        try:
            _core.ge_advance(c.indptr, c.indices, bad, 0, 41, 2 * 10**7, 0.1, 0.1)  # ~1e10 chain steps: a minute
        except KeyboardInterrupt:
            print(f"interrupted after {time.perf_counter() - start:.1f} s", (bad == before).all())
    """
    rc, out, err = run_python(code)
    assert rc == 0, err
    assert out.startswith("interrupted after") and float(out.split()[2]) < 30 and out.split()[4] == "True", out


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


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), p=st.floats(0.0, 0.4), seed=st.integers(0, 2**32 - 1))
def test_the_tracker_lower_bound_takes_the_eccentricity_of_a_breadth_first_search(n, p, seed):
    """The hops from node 0 to the farthest node it reaches (the pointer jumping over the breadth-first search's
    predecessors) equal SciPy's shortest paths, on graphs that need not be strongly connected."""
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    from rowstoch_fast import MixingMatrix
    from rowstoch_fast.tracker import _eccentricity

    rng = np.random.default_rng(seed)
    M = (rng.random((n, n)) < p) + np.eye(n)
    A = MixingMatrix(sp.csr_array(M / M.sum(1, keepdims=True)), validate=False)
    hops = csgraph.shortest_path(A.csr, method="D", directed=True, unweighted=True, indices=0)
    assert _eccentricity(A) == int(hops[np.isfinite(hops)].max())


def test_the_tracker_lower_bound_does_not_copy_the_matrix(monkeypatch):
    """The lower bound's shortest paths copied every matrix unchecked, 12 bytes a nonzero (1 GB at n = 4e6); the
    breadth-first search takes 32 bytes a node, and the float32 matrix's copy (which SciPy makes) is checked."""
    import tracemalloc

    from rowstoch_fast.tracker import DiagTracker

    A = topology.exponential(50000)  # (17 nonzeros a row)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="needs at least 6 powers of A \\(messages take 13 hops"):
            DiagTracker(A, max_work=1.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * A.nnz, (peak, A.nnz)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2 * A.nnz))
    with pytest.raises(MemoryError, match="the exact tracker's breadth-first search over A \\(n = 50,000, [0-9,]+ "
                                          "nonzeros\\) needs about .*tracker='perron'"):
        DiagTracker(A.astype(np.float32), max_work=1.0)


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


# ---------------------------------------------------------------- issue 48, class 3: the raw _core entry points
# One shared argument layer in csrc/glue.hpp (array_arg, output_arg, int_item / bool_item, new_array,
# check_apart / check_same_or_apart, stacked_rows): every output apart from every array of its call (or exactly an
# input where that is documented), optional arrays 1-D before their length is read, layout items integers, sizes
# checked before anything is allocated.
from rowstoch_fast import _reference as ref  # noqa: E402

MAX64 = np.finfo(np.float64).max


def _lossy_args(c, **kw):
    return dict(dict(seed=1, t=2, r=0, p=0.3), **kw)


def test_compress_out_partly_overlapping_x_is_refused_and_in_place_keeps_its_bits():
    """An out that is X shifted by one row gave wrong messages (each row encoded from the message written over it);
    out = X itself (network.encode's second layer) stays allowed, bit for bit the separate output's."""
    rng = np.random.default_rng(0)
    for method, param in ((0, 4), (1, 1), (2, 2), (3, 2), (4, 8), (5, 1)):
        buf = rng.standard_normal(9 * 4)
        X, shifted = buf[:32].reshape(8, 4), buf[4:36].reshape(8, 4)
        expected = np.empty((8, 4))
        core.compress(X.copy(), expected, method, 4, param, 0.5, True, 3, 1, 0)
        with pytest.raises(ValueError, match="out partly overlaps X"):
            core.compress(X, shifted, method, 4, param, 0.5, True, 3, 1, 0)
        same = X.copy()
        core.compress(same, same, method, 4, param, 0.5, True, 3, 1, 0)
        np.testing.assert_array_equal(same, expected)


@settings(max_examples=80, deadline=None)
@given(start_x=st.integers(0, 12), start_out=st.integers(0, 12), method=st.integers(0, 5))
def test_compress_refuses_every_partial_overlap_and_otherwise_equals_a_separate_output(start_x, start_out, method):
    """The class: X and out as any two windows of one buffer (in items); a window that shares some but not all of
    X's memory is refused, any other gives the messages of a separate output."""
    buf = np.random.default_rng(start_x * 13 + start_out).standard_normal(12 + 4 * 3)
    X, out = buf[start_x:start_x + 12].reshape(4, 3), buf[start_out:start_out + 12].reshape(4, 3)
    expected = np.empty((4, 3))
    core.compress(X.copy(), expected, method, 3, 2, 0.5, False, 1, 2, 0)
    if start_x != start_out and abs(start_x - start_out) < 12:
        with pytest.raises(ValueError, match="out partly overlaps X"):
            core.compress(X, out, method, 3, 2, 0.5, False, 1, 2, 0)
        return
    core.compress(X, out, method, 3, 2, 0.5, False, 1, 2, 0)
    np.testing.assert_array_equal(out, expected)


def test_compress_outputs_sharing_row_ids_are_refused():
    """out (or own) over the int64 row ids: the ids were overwritten while the rows were read by them (the call
    after it saw ids like -4614824319259470329)."""
    X = np.random.default_rng(1).standard_normal((8, 1))
    ids = np.arange(8, dtype=np.int64) * 3
    with pytest.raises(ValueError, match="out shares memory with row_ids"):
        core.compress(X, ids.view(np.float64).reshape(8, 1), 1, 1, 1, 0.0, False, 0, 0, 0, row_ids=ids)
    with pytest.raises(ValueError, match="own shares memory with row_ids"):
        core.compress(X, np.empty((8, 1)), 1, 1, 1, 0.0, False, 0, 0, 0, row_ids=ids,
                      own=ids.view(np.float64).reshape(8, 1))
    np.testing.assert_array_equal(ids, np.arange(8) * 3)


def test_lossy_and_delayed_outputs_sharing_flags_or_ids_are_refused(A):
    """mix_lossy's and mix_delayed's out was checked against X and the CSR only: an out over awake, bad, row_ids or
    col_ids was accepted (and rewrote them while the pass read them)."""
    c = A.csr
    n = A.n
    X = np.ones((n, 1))
    raw = np.zeros(8 * n * 8, np.uint8)  # (room for an (n, 1) float64 view)
    out = raw[: 8 * n].view(np.float64).reshape(n, 1)
    ids = np.arange(n, dtype=np.int64)
    cases = {"awake": dict(awake=raw[:n].view(bool)), "bad": dict(bad=raw[: c.nnz].view(bool)),
             "row_ids": dict(row_ids=raw[: 8 * n].view(np.int64), col_ids=ids),
             "col_ids": dict(row_ids=ids, col_ids=raw[: 8 * n].view(np.int64))}
    for name, kw in cases.items():
        raw[:] = 0
        if name == "row_ids":
            kw["row_ids"][:] = ids
        if name == "col_ids":
            kw["col_ids"][:] = ids
        with pytest.raises(ValueError, match=f"out shares memory with {name}"):
            core.mix_lossy(c.indptr, c.indices, c.data, X, out, **_lossy_args(c), **kw)
        H = np.ones((2 * n, 1))
        with pytest.raises(ValueError, match=f"out shares memory with {name}"):
            core.mix_delayed(c.indptr, c.indices, c.data, H, out, 0, 0, 0, 0, False, (n, n, 1), p=0.3, **kw)


def test_ge_advance_states_sharing_the_csr_or_ids_are_refused(A):
    """ge_advance writes `bad` in place: over the indices (or the ids) it rewrote the CSR it walked, silently."""
    c = A.csr
    indptr, indices = np.array(c.indptr, dtype=np.int64), np.array(c.indices, dtype=np.int64)
    before = indices.copy()
    with pytest.raises(ValueError, match="bad shares memory with indices"):
        core.ge_advance(indptr, indices, indices.view(np.uint8)[: indices.size], 0, 0, 3, .5, .5, init=True)
    np.testing.assert_array_equal(indices, before)
    ids = np.arange(A.n * 8, dtype=np.int64)
    with pytest.raises(ValueError, match="bad shares memory with row_ids"):
        core.ge_advance(indptr, indices, ids.view(np.uint8)[: indices.size], 0, 0, 3, .5, .5, init=True,
                        row_ids=ids[: A.n], col_ids=np.arange(A.n, dtype=np.int64))


@pytest.mark.parametrize("layout", [(2**63 - 1, 8, 1), (2**62, 2**30, 2**31)])
def test_a_layout_whose_rows_overflow_is_refused_not_truncated_to_int32(layout):
    """An int32 CSR with layout n_own = 2^63 - 1: n_own + (max_delay + 1) rounds n_block wrapped negative, so the
    index was narrowed to int32 and returned truncated (0, 11, 18, ...)."""
    c = topology.exponential(8).csr
    indptr, indices = np.asarray(c.indptr, np.int32), np.asarray(c.indices, np.int32)
    with pytest.raises(ValueError, match=r"layout \(n_own, n_block, rounds\) = .* overflow 64-bit integers"):
        core.delay_ages(indptr, indices, 0, 5, 0, 2, layout=layout)
    with pytest.raises(ValueError, match=r"layout \(n_own, n_block, rounds\) = .* overflow 64-bit integers"):
        core.mix_delayed(indptr, indices, c.data, np.ones((8, 1)), np.empty((8, 1)), 0, 5, 0, 2, False, layout)
    wide = core.delay_ages(indptr, indices, 0, 5, 0, 2, layout=(2**31, 8, 1))  # (rows past int32: int64 index)
    assert wide.dtype == np.int64 and wide.max() >= 2**31


def test_stacked_indices_past_int32_are_widened_not_truncated():
    """own_and_messages / link_noise_block cast n_own + j to the CSR's int32: 2^31 + 1 came back -2147483647."""
    from rowstoch_fast.network import Noisy, link_noise_block, own_and_messages

    indptr, indices = np.array([0, 1, 1], np.int32), np.array([1], np.int32)
    index = own_and_messages(indptr, indices, None, None, 2**31)
    assert index.dtype == np.int64 and index.tolist() == [2**31 + 1]
    assert own_and_messages(indptr, indices, None, None, 2).dtype == np.int32  # (fits: the CSR's type, as before)
    layer = Noisy(topology.ring(4), sigma=0.5, per="link")
    ids = np.arange(2, dtype=np.int64)
    _, index, _ = link_noise_block(layer, indptr, indices, 0, 0, 0, np.float64, 2**31, row_ids=ids, col_ids=ids)
    assert index.dtype == np.int64 and index.tolist() == [2**31]


def _zero_d_calls(c):
    ids, z = np.arange(8, dtype=np.int64), np.array(3, dtype=np.int64)
    H = np.ones((8 + 3 * 8, 1))
    bad = np.zeros(c.nnz, np.uint8)
    return {
        "ge_advance": lambda: core.ge_advance(c.indptr, c.indices, bad, 0, 0, 3, .5, .5, init=True, row_ids=ids,
                                              col_ids=z),
        "lost_links": lambda: core.lost_links(c.indptr, c.indices, 0, 0, 0, .5, row_ids=ids, col_ids=z),
        "delay_ages": lambda: core.delay_ages(c.indptr, c.indices, 0, 0, 0, 2, row_ids=ids, col_ids=z),
        "link_noise": lambda: core.link_noise(c.indptr, c.indices, 0, 0, 0, 2, row_ids=ids, col_ids=z),
        "mix_delayed": lambda: core.mix_delayed(c.indptr, c.indices, c.data, H, np.empty((8, 1)), 0, 0, 0, 2, False,
                                                (8, 8, 1), row_ids=ids, col_ids=z),
        "mix_delayed-awake": lambda: core.mix_delayed(c.indptr, c.indices, c.data, H, np.empty((8, 1)), 0, 0, 0, 2,
                                                      False, (8, 8, 1), awake=np.array(True)),
        "mix_lossy-awake": lambda: core.mix_lossy(c.indptr, c.indices, c.data, np.ones((8, 1)), None,
                                                  awake=np.array(True), row_ids=ids, col_ids=ids),
    }


@pytest.mark.parametrize("call", sorted(_zero_d_calls(topology.exponential(8).csr)))
def test_0d_col_ids_and_awake_name_the_argument_and_its_shape(call):
    """A 0-d col_ids (five per-link entry points) or awake (mix_lossy with ids, mix_delayed) had its length read
    before its shape was checked: IndexError: invalid axis: 0 (ndim = 0)."""
    name = "awake" if call.endswith("awake") else "col_ids"
    hint = "one flag per node" if name == "awake" else "global node ids"
    with pytest.raises(ValueError, match=f"^{name} must be 1-D \\({hint}\\), got 0-D$"):
        _zero_d_calls(topology.exponential(8).csr)[call]()


@pytest.mark.parametrize("layout, error, message", [
    ((8, 8, 1.5), TypeError, r"layout\[2\] \(rounds\) must be an integer, got float 1.5"),
    ((8.0, 8, 1), TypeError, r"layout\[0\] \(n_own\) must be an integer, got float 8.0"),
    (("8", 8, 1), TypeError, r"layout\[0\] \(n_own\) must be an integer, got str '8'"),
    ((8, None, 1), TypeError, r"layout\[1\] \(n_block\) must be an integer, got NoneType None"),
    ((True, 8, 1), TypeError, r"layout\[0\] \(n_own\) must be an integer, got bool True"),
    ((8, 8, 1, "yes"), TypeError, r"layout\[3\] \(node_major\) must be True or False, got str 'yes'"),
    ((8, 8, 1, 2), TypeError, r"layout\[3\] \(node_major\) must be True or False, got int 2"),
    ((2**64, 8, 1), ValueError, r"layout\[0\] \(n_own\) = 18446744073709551616 does not fit a 64-bit integer"),
    (5, TypeError, r"layout must be a tuple \(n_own, n_block, rounds\[, node_major\]\), got int"),
])
def test_non_integer_layout_items_name_the_item(layout, error, message):
    """A float, str or None in the layout gave pybind11's "Unable to cast Python instance of type <class 'float'>
    to C++ type '?'"; node_major = 2 was read as True; the usual layouts (ints, NumPy ints, a list) still work."""
    c = topology.exponential(8).csr
    H = np.ones((8 + 3 * 8, 1))
    with pytest.raises(error, match=message):
        core.delay_ages(c.indptr, c.indices, 0, 0, 0, 2, layout=layout)
    with pytest.raises(error, match=message):
        core.mix_delayed(c.indptr, c.indices, c.data, H, np.empty((8, 1)), 0, 0, 0, 2, False, layout)
    expected = core.delay_ages(c.indptr, c.indices, 0, 0, 0, 2, layout=(8, 8, 1, True))
    for same in ((np.int64(8), np.int32(8), 1), [8, 8, 1], (8, 8, 1, np.True_), (8, 8, 1, 1)):
        np.testing.assert_array_equal(core.delay_ages(c.indptr, c.indices, 0, 0, 0, 2, layout=same), expected)


@pytest.mark.parametrize("L", [2**62, 2**61 + 1, 2**40])
def test_compress_of_empty_rows_with_a_huge_L_allocates_nothing(L):
    """Rows of width 0 (any L divides 0) allocated L scratch values per thread: "cannot create std::vector larger
    than max_size()" or std::bad_alloc. There is no message to encode: nothing is allocated."""
    for method in range(6):
        X, out = np.empty((8, 0)), np.empty((8, 0))
        assert core.compress(X, out, method, L, 2, 0.0, False, 0, 0, 0) is out


def test_allocations_past_memory_name_the_argument():
    """link_noise's (nnz, w) and diag_powers' (n_records, n) blocks: numpy's "array is too big" / "Unable to
    allocate 256. TiB" named neither the entry point nor the argument."""
    c = topology.exponential(8).csr
    with pytest.raises(ValueError, match=r"link_noise: the noise \(nnz, w\) = \(32,4611686018427387904,\) is too "
                                         r"large: its size overflows 64-bit integers"):
        core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**62)
    with pytest.raises(MemoryError, match=r"link_noise: the noise \(nnz, w\) = \(32,1099511627776,\) "
                                          r"\(281474976710656 bytes\) cannot be allocated"):
        core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**40)
    with pytest.raises(MemoryError, match=r"diag_powers: the diagonals \(n_records, n\) = \(1099511627776,8,\)"):
        core.diag_powers(c.indptr, c.indices, c.data, 1, 2**40)
    with pytest.raises(TypeError, match="dtype must be float32 or float64, got 'no such type'"):
        core.link_noise(c.indptr, c.indices, 0, 0, 0, 2, dtype="no such type")


def test_a_large_block_is_held_against_the_memory_available(monkeypatch):
    """Where the kernel overcommits (vm.overcommit_memory = 1: the lent GPU machine), link_noise's 256 TiB block of
    the test above was allocated, and writing it got the test worker killed by the OOM killer, five other tests'
    allocations refused while it filled the machine. A compiled output over 64 MiB is held against what is
    available first (ROWSTOCH_MEMORY_LIMIT standing in for a small machine); smaller ones are not asked."""
    from rowstoch_fast.errors import UsageError

    c = topology.exponential(8).csr
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2**26))
    with pytest.raises(MemoryError, match=r"^link_noise: the noise \(nnz, w\) = \(32,524288,\) \(134217728 bytes\) "
                                          r"cannot be allocated: about 67108864 bytes are available$"):
        core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**19)
    with pytest.raises(MemoryError, match=r"draw_samples: the draws \(reps, rows\) = \(4096,4096,\) "
                                          r"\(134217728 bytes\) cannot be allocated: about 67108864"):
        core.draw_samples(0, np.arange(4096), np.arange(4096), 1, 10)
    assert core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**16).shape == (32, 2**16)  # (16 MiB: not asked)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(2**28))
    assert core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**19, dtype="float32").shape == (32, 2**19)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", "1e30")  # (a limit past int64, "none": helper 150's RuntimeError)
    assert core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**19, dtype="float32").shape == (32, 2**19)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", "lots")
    with pytest.raises(UsageError, match="ROWSTOCH_MEMORY_LIMIT must be a number of bytes"):
        core.link_noise(c.indptr, c.indices, 0, 0, 0, 2**19)


def test_outputs_given_as_lists_are_refused():
    """compress's own and logistic_grad's out were converted from a list to a temporary array: the call wrote there
    and the caller's list never changed, without a word."""
    X = np.ones((8, 2))
    with pytest.raises(TypeError, match="own must be a numpy.ndarray or None"):
        core.compress(X, np.empty((8, 2)), 1, 2, 1, 0.0, False, 0, 0, 0, own=[[0.0, 0.0]] * 8)
    with pytest.raises(TypeError, match="out must be a numpy.ndarray or None"):
        core.logistic_grad(np.ones((8, 2)), np.ones(8), 4, 0.0, np.ones((4, 2)), 1, 1, 0, 0, out=[[0.0] * 2] * 4)
    with pytest.raises(TypeError, match=r"row_ids must be a NumPy array \(global node ids\), got list"):
        core.compress(X, np.empty((8, 2)), 1, 2, 1, 0.0, False, 0, 0, 0, row_ids=[[0], [1, 2]])


@pytest.mark.parametrize("v", [[MAX64, MAX64, 0.0, 0.0], [MAX64, -MAX64, MAX64, 1.0], [MAX64 / 2] * 4,
                               [1e308, -1e308, 1e308, 1e308], [MAX64, 5e-324, -MAX64, 1e-300]])
def test_sign_compression_is_finite_and_exact_up_to_the_largest_double(v):
    """sign's ||v||_1 overflowed for entries near DBL_MAX: every value of a finite message became +-inf (the mean
    of |v|, at most max|v|, is finite). The kernel and its definition give the correctly rounded mean."""
    from fractions import Fraction

    X = np.array([v])
    out = np.empty_like(X)
    core.compress(X, out, 1, 4, 1, 0.0, False, 0, 0, 0)
    assert np.isfinite(out).all()
    mean = float(sum(Fraction(abs(x)) for x in v) / 4)
    np.testing.assert_array_equal(np.abs(out[0][X[0] != 0]), mean)
    np.testing.assert_array_equal(out[0], ref.compress_message(X[0], "sign", 0, 0, 0, 0, 0))
    np.testing.assert_array_equal(np.sign(out[0]), np.sign(X[0]))


def test_rounding_past_the_largest_double_saturates_in_the_kernel_and_its_definition():
    """round(bits < 53) of DBL_MAX is 2^1024: the definition raised OverflowError("math range error"), then the
    kernel (CPU and CUDA) and the definition gave inf; a finite message is now sent finite: the largest value of
    `bits` significant bits, (2^bits - 1) 2^(1024 - bits); an infinite value stays infinite. Subnormals keep their
    bits where they have at most `bits` significant ones."""
    X = np.array([[MAX64, -MAX64, 5e-324, 3 * 5e-324, 1.0, -2.5e-310, 0.0, np.inf]])
    for bits in (1, 2, 8, 32):
        out = np.empty_like(X)
        core.compress(X, out, 4, 8, bits, 0.0, False, 0, 0, 0)
        np.testing.assert_array_equal(out, ref.compress(X, "round", 8, 0, 0, 0, bits=bits))
        top = np.ldexp(2.0**bits - 1, 1024 - bits)
        assert out[0, 0] == top and out[0, 1] == -top and out[0, 2] == 5e-324 and out[0, 7] == np.inf


@pytest.mark.parametrize("t", [2**63, 2**64 - 1])
def test_a_delayed_round_at_t_past_2_63_is_refused_not_a_crash(t):
    """delay_ages / mix_delayed took t as uint64 and counted the window in int64: t = 2^63 made its last age
    negative and the pass read before its tables (a segmentation fault)."""
    code = f"""
        import numpy as np
        import rowstoch_fast._core as core
        from rowstoch_fast import topology
        c = topology.exponential(8).csr
        for call in (lambda: core.delay_ages(c.indptr, c.indices, 0, {t}, 0, 2, layout=(8, 8, 1)),
                     lambda: core.delay_ages(c.indptr, c.indices, 0, {t}, 0, 2),
                     lambda: core.mix_delayed(c.indptr, c.indices, c.data, np.ones((32, 1)), np.empty((8, 1)), 0,
                                              {t}, 0, 2, False, (8, 8, 1))):
            try:
                call()
                print("no error")
            except ValueError as exc:
                print("ValueError:", exc)
    """
    rc, out, err = run_python(code)
    assert rc == 0, err[-2000:]
    assert out.splitlines() == [f"ValueError: t must be below 2^63 (an iteration), got {t}"] * 3, out
    c = topology.exponential(8).csr  # (the last iteration below it still runs)
    assert core.delay_ages(c.indptr, c.indices, 0, 2**63 - 1, 0, 2, layout=(8, 8, 1)).max() < 32


@pytest.mark.parametrize("openmp", [False, True], ids=["without-openmp", "with-openmp"])
def test_every_installed_header_compiles_on_its_own_under_wall_werror(tmp_path, openmp):
    """Each header of get_include(), included alone, compiles under -Wall -Wextra -Werror with and without
    -fopenmp: gt.hpp's `#pragma omp simd` was an unknown pragma without OpenMP, so an embedder's -Werror build
    failed."""
    import shutil

    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx})")
    folder = os.path.join(rf.get_include(), "rowstoch")
    headers = sorted(h for h in os.listdir(folder) if h.endswith(".hpp"))
    assert "gt.hpp" in headers
    failed = {}
    for header in headers:
        src = tmp_path / f"{header}.cpp"
        src.write_text(f'#include "rowstoch/{header}"\n')
        out = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                              *(["-fopenmp"] if openmp else []), f"-I{rf.get_include()}", str(src)],
                             capture_output=True, text=True)
        if out.returncode:
            failed[header] = out.stderr.splitlines()[:3]
    assert not failed, failed


def test_the_objective_kernels_instantiated_at_o3_compile_under_wall_werror(tmp_path):
    """The logistic kernels instantiated by an embedder and compiled at -O3 (where GCC's middle-end warnings run,
    which -fsyntax-only never reaches): no (maybe-)uninitialized read. The lanes kernel's vectors filled lane by
    lane gave an embedder's -Werror build 424 -Wmaybe-uninitialized errors with GCC 12."""
    import shutil

    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx})")
    src = tmp_path / "kernels.cpp"
    src.write_text('#include "rowstoch/objectives.hpp"\n'
                   "template void rowstoch::logistic_stochastic_grad<double>(const double*, const double*, "
                   "std::int64_t, const std::int64_t*, std::int64_t, std::int64_t, double, const double*, "
                   "std::int64_t, std::int64_t, std::int64_t, std::uint64_t, std::uint64_t, std::int64_t, double*, "
                   "std::int64_t);\n")  # (the kernel with the lanes; the full pass too doubled the test's 12 s)
    # (uninitialized reads as errors: the class found; another compiler's other warnings are not this test's)
    out = subprocess.run([cxx, "-std=c++17", "-O3", "-Wall", "-Wextra", "-Werror=maybe-uninitialized",
                          "-Werror=uninitialized", "-c", f"-I{rf.get_include()}", str(src), "-o",
                          str(tmp_path / "kernels.o")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr.splitlines()[:5]


def test_copy_rows_copies_strided_rows_and_refuses_what_it_cannot():
    """``_core.copy_rows`` (a delayed history's messages and own rows, rows in parallel): the same bytes as NumPy's
    copy into a strided slot, whatever the dtype; a clear error for another dtype or shape, rows that are not
    contiguous, a read-only or self-overlapping destination, blocks that overlap; nothing for the block itself."""
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32, np.int16):
        src = (rng.standard_normal((5000, 7)) * 100).astype(dtype)
        ring = np.zeros((5000 * 4, 7), dtype)
        slot = ring.reshape(5000, 4, 7)[:, 2]
        core.copy_rows(src, slot)
        np.testing.assert_array_equal(slot, src)
        assert not ring.reshape(5000, 4, 7)[:, [0, 1, 3]].any()
        core.copy_rows(src[::-1], slot)  # (a negative row stride)
        np.testing.assert_array_equal(slot, src[::-1])
    src = np.ones((4, 3))
    core.copy_rows(src, src)  # (the block itself: nothing to do)
    core.copy_rows(np.ones((0, 3)), np.ones((0, 3)))
    with pytest.raises(TypeError, match="dst has dtype float32 but src has dtype float64"):
        core.copy_rows(src, np.zeros((4, 3), np.float32))
    with pytest.raises(TypeError, match="hold Python objects"):
        core.copy_rows(np.full((4, 3), None, dtype=object), np.full((4, 3), None, dtype=object))
    import pickle  # (an equal dtype of another object: helper 148's unpickled block had been refused)
    core.copy_rows(pickle.loads(pickle.dumps(src * 2)), slot := np.zeros((4, 3)))
    np.testing.assert_array_equal(slot, src * 2)
    with pytest.raises(ValueError, match=r"one shape, got \(4, 3\) and \(3, 4\)"):
        core.copy_rows(src, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="src's rows must be contiguous"):
        core.copy_rows(np.ones((4, 6))[:, ::2], np.zeros((4, 3)))
    with pytest.raises(ValueError, match="dst must be writeable"):
        frozen = np.zeros((4, 3))
        frozen.flags.writeable = False
        core.copy_rows(src, frozen)
    with pytest.raises(ValueError, match="dst's rows overlap one another"):
        core.copy_rows(src, np.lib.stride_tricks.as_strided(np.zeros(20), (4, 3), (8, 8)))
    block = np.arange(30.0).reshape(10, 3)
    with pytest.raises(ValueError, match="the spans of src and dst in memory overlap"):
        core.copy_rows(block[:5], block[2:7])
    with pytest.raises(ValueError, match="2-D"):
        core.copy_rows(np.ones(3), np.ones(3))


def test_a_per_link_pass_names_the_first_index_out_of_range_past_its_first_chunk():
    """The per-link passes check every column index in chunks without a branch, then scan the chunk that holds a
    bad one: the message still names the first, in a later chunk too, negative or past the columns, int32 or int64."""
    n = 3000
    A = topology.erdos_renyi(n, 0.004, seed=1).csr
    for dtype in (np.int32, np.int64):
        indptr, indices = A.indptr.astype(dtype), A.indices.astype(dtype).copy()
        assert len(indices) > 3 * 4096
        indices[[9000, 11000]] = [-1, n]
        with pytest.raises(ValueError, match=r"indices\[9000\] = -1 is out of range for 3000 columns"):
            core.mix_lossy(indptr, indices, A.data, np.ones((n, 2)), np.empty((n, 2)), seed=1, t=0, r=0, p=0.1)
        indices[9000] = 0
        with pytest.raises(ValueError, match=r"indices\[11000\] = 3000 is out of range for 3000 columns"):
            core.mix_lossy(indptr, indices, A.data, np.ones((n, 2)), np.empty((n, 2)), seed=1, t=0, r=0, p=0.1)
        bad = indptr.copy()
        bad[2000] = bad[1999] - 1
        with pytest.raises(ValueError, match="indptr must be non-decreasing; it falls at row 1999"):
            core.mix_lossy(bad, indices, A.data, np.ones((n, 2)), np.empty((n, 2)), seed=1, t=0, r=0, p=0.1)
