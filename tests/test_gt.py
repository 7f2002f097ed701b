"""Pull-Diag-GT / MG-Pull-Diag-GT against the dense transcription of eq. (7) and (12)."""

import numpy as np
import pytest

from rowstoch_fast import DivergenceError, MixingMatrix, PullDiagGT, _reference, topology
from rowstoch_fast.tracker import DiagTracker
from conftest import cupy_or_reason, random_primitive


def quadratic(n, d, rng):
    """Strongly convex f_i(x) = 1/2 x^T diag(q_i) x - b_i^T x and its global minimiser."""
    Q = rng.uniform(0.5, 2.0, (n, d))
    b = rng.standard_normal((n, d))
    return (lambda X: Q * X - b), b.sum(0) / Q.sum(0)


def rel(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


@pytest.mark.parametrize("R", [1, 3, 7])
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_iterates_match_reference(R, self_loops, seed):
    rng = np.random.default_rng(seed)
    n, d = 12, 3
    A = random_primitive(n, 0.3, rng, self_loops=self_loops)
    grad, _ = quadratic(n, d, rng)
    x0 = rng.standard_normal((n, d))
    if not self_loops and R == 1:
        with pytest.raises(ValueError, match="no self loop"):
            PullDiagGT(A, x0, lr=0.01, rounds=R)
        return
    try:
        opt = PullDiagGT(A, x0, lr=0.01, rounds=R)
    except ValueError as exc:  # some diag(A^(tR)) is zero for this draw: then D_t is singular
        assert "no self loop" in str(exc) and not self_loops
        return
    xs, ys = _reference.pull_diag_gt(A.toarray(), x0, 0.01, grad, 200, R)
    theta = opt.tracker.max_inverse_diagonal
    for t in range(1, 201):
        opt.step(grad)
        assert rel(opt.x, xs[t]) < 1e-12, t
        # y_t is a difference of terms of size |D^-1 g|: relative to that scale (backward error)
        scale = np.abs(ys[t]).max() + theta * np.abs(grad(xs[t])).max()
        assert np.abs(opt.y - ys[t]).max() < 1e-12 * scale, t
    assert opt.iteration == 200 and opt.communication_rounds == 200 * R


@pytest.mark.parametrize(
    "name, R, lr, iters",
    [
        ("exponential", 1, 0.01, 2000),
        ("exponential", 5, 0.01, 400),
        ("ring", 1, 0.001, 20000),
        ("ring", 10, 0.01, 1000),
        ("grid", 1, 0.01, 3000),
        ("geometric", 1, 0.01, 3000),
        ("nearest_neighbor", 1, 0.01, 3000),
        ("nearest_neighbor", 10, 0.01, 400),
    ],
)
def test_converges_to_global_minimiser(name, R, lr, iters):
    A = topology.exponential(16) if name == "exponential" else topology.paper_graphs()[name]
    grad, xstar = quadratic(16, 4, np.random.default_rng(7))
    opt = PullDiagGT(A, np.zeros(4), lr=lr, rounds=R)
    for _ in range(iters):
        opt.step(grad)
    assert np.abs(opt.x - xstar).max() < 1e-8


@pytest.mark.parametrize("R", [1, 4])
def test_tracking_invariant(R):
    # eq. (9): pi^T y_t = pi^T D_t^{-1} g_t at every step
    rng = np.random.default_rng(3)
    A = topology.paper_graphs()["grid"]
    pi = A.metrics().pi
    grad, _ = quadratic(16, 2, rng)
    seen = {}

    def recording_grad(X):
        seen["g"] = grad(X)
        return seen["g"]

    opt = PullDiagGT(A, rng.standard_normal((16, 2)), lr=0.01, rounds=R)
    for t in range(1, 150):
        opt.step(recording_grad)
        lhs = pi @ opt.y
        rhs = pi @ (opt.tracker.scale(t)[:, None] * seen["g"])
        assert np.abs(lhs - rhs).max() <= 1e-10 * max(1.0, np.abs(rhs).max())


def test_ring_instability_and_multi_gossip_remedy():
    A = topology.paper_graphs()["ring"]
    one = DiagTracker(A, rounds=1)
    ten = DiagTracker(A, rounds=10)
    inv_min_pi = 1.0 / A.metrics().pi.min()
    assert 3.5e4 < one.max_inverse_diagonal < 4.5e4  # the published instability (theta ~ 4e4)
    assert ten.max_inverse_diagonal < one.max_inverse_diagonal / 30
    # from the third round of 10 gossips on, 1/min diag(A^(10t)) stays near 1/min(pi)
    later = max(ten.scale(t).max() for t in range(3, ten.frozen_at + 1))
    assert later < 2 * inv_min_pi


@pytest.mark.parametrize("R", [1, 3])
def test_replica_batching_equals_one_by_one(R):
    rng = np.random.default_rng(11)
    A = topology.paper_graphs()["geometric"]
    reps, n, d = 3, 16, 2
    Qs = rng.uniform(0.5, 2.0, (reps, n, d))
    bs = rng.standard_normal((reps, n, d))
    x0 = rng.standard_normal((reps, n, d))
    batched = PullDiagGT(A, x0, lr=0.02, rounds=R)
    singles = [PullDiagGT(A, x0[r], lr=0.02, rounds=R) for r in range(reps)]
    for _ in range(50):
        batched.step(lambda X: Qs * X - bs)
        for r, s in enumerate(singles):
            s.step(lambda X, r=r: Qs[r] * X - bs[r])
    assert batched.x.shape == (reps, n, d)
    for r, s in enumerate(singles):
        np.testing.assert_array_equal(batched.x[r], s.x)
        np.testing.assert_array_equal(batched.y[r], s.y)
    assert batched.centroid().shape == (reps, d)


@pytest.mark.parametrize("tracker", ["exact", "perron"])
def test_state_dict_resume_is_bit_identical(tmp_path, tracker):
    rng = np.random.default_rng(5)
    A = topology.exponential(16)
    grad, _ = quadratic(16, 3, rng)
    opt = PullDiagGT(A, np.zeros(3), lr=0.05, rounds=2, tracker=tracker)
    for _ in range(7):
        opt.step(grad)
    path = tmp_path / "state.npz"
    np.savez(path, **opt.state_dict())
    resumed = PullDiagGT.from_state_dict(dict(np.load(path)))
    for _ in range(20):
        opt.step(grad)
        resumed.step(grad)
    np.testing.assert_array_equal(opt.x, resumed.x)
    np.testing.assert_array_equal(opt.y, resumed.y)
    assert resumed.iteration == opt.iteration == 27


def test_trackers_agree_once_exact_is_frozen():
    A = topology.paper_graphs()["nearest_neighbor"]
    exact = DiagTracker(A, 1, "exact")
    perron = DiagTracker(A, 1, "perron")
    t = exact.frozen_at
    np.testing.assert_allclose(exact.scale(t), perron.scale(t), rtol=1e-12)
    np.testing.assert_allclose(exact.scale(t + 100), perron.scale(5), rtol=1e-12)
    grad, _ = quadratic(16, 2, np.random.default_rng(1))
    a = PullDiagGT(A, np.zeros(2), lr=0.01, tracker="exact")
    b = PullDiagGT(A, np.zeros(2), lr=0.01, tracker="perron")
    for _ in range(3000):
        a.step(grad)
        b.step(grad)
    np.testing.assert_allclose(a.x, b.x, rtol=1e-9)


def test_x0_shapes_and_views():
    A = topology.ring(5)
    opt = PullDiagGT(A, [1.0, 2.0], lr=0.1)
    assert opt.x.shape == (5, 2)
    np.testing.assert_array_equal(opt.x, np.tile([1.0, 2.0], (5, 1)))
    with pytest.raises(ValueError):
        opt.x[0, 0] = 3.0
    np.testing.assert_allclose(opt.centroid(), [1.0, 2.0])


# ---------------------------------------------------------------------- bad input
def test_argument_errors():
    A = topology.ring(4)
    with pytest.raises(ValueError, match="lr must be finite and > 0"):
        PullDiagGT(A, np.zeros(2), lr=0.0)
    with pytest.raises(ValueError, match="lr must be finite and > 0"):
        PullDiagGT(A, np.zeros(2), lr=float("nan"))
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        PullDiagGT(A, np.zeros(2), lr=0.1, rounds=0)
    with pytest.raises(TypeError, match="rounds must be an integer"):
        PullDiagGT(A, np.zeros(2), lr=0.1, rounds=2.5)
    with pytest.raises(ValueError, match="x0 has 3 nodes"):
        PullDiagGT(A, np.zeros((3, 2)), lr=0.1)
    with pytest.raises(ValueError, match="x0 must be finite"):
        PullDiagGT(A, [np.nan, 0.0], lr=0.1)
    with pytest.raises(ValueError, match="tracker must be 'exact' or 'perron'"):
        PullDiagGT(A, np.zeros(2), lr=0.1, tracker="approx")
    with pytest.raises(ValueError, match="backend must be one of"):
        PullDiagGT(A, np.zeros(2), lr=0.1, backend="tpu")
    cupy, _ = cupy_or_reason()
    if cupy is None:  # no CuPy here: the backend is refused by name
        with pytest.raises(RuntimeError, match="backend .cupy."):
            PullDiagGT(A, np.zeros(2), lr=0.1, backend="cupy")
    else:  # a GPU here: a host x0 is refused, before any tracker is built
        with pytest.raises(TypeError, match=r"x0 must be a CuPy \(device\) array"):
            PullDiagGT(A, np.zeros(2), lr=0.1, backend="cupy")


def test_grad_fn_shape_and_type_errors():
    opt = PullDiagGT(topology.ring(4), np.zeros(2), lr=0.1)
    with pytest.raises(ValueError, match=r"grad_fn returned shape \(4,\), expected \(4, 2\)"):
        opt.step(lambda X: np.zeros(4))
    with pytest.raises(TypeError, match="real numeric"):
        opt.step(lambda X: np.full((4, 2), "a"))
    # (helper 196: a str or a generator read "grad_fn returned shape ()")
    with pytest.raises(TypeError, match=r"grad_fn must return a real numeric array, got a str \(dtype <U3\)"):
        opt.step(lambda X: "abc")
    with pytest.raises(TypeError, match=r"got a generator \(dtype object\)"):
        opt.step(lambda X: (v for v in X))


def test_divergence_error_keeps_last_finite_state():
    A = topology.exponential(8)
    opt = PullDiagGT(A, np.ones(2), lr=0.1)
    calls = {"n": 0}

    def grad(X):
        calls["n"] += 1
        G = X - 1.0
        if calls["n"] == 6:
            G = G.copy()
            G[3, 1] = np.inf
        return G

    for _ in range(4):
        opt.step(grad)
    x_before, y_before = opt.x.copy(), opt.y.copy()
    with pytest.raises(DivergenceError, match="iteration 5, first at node 3") as info:
        opt.step(grad)
    assert info.value.node == 3 and info.value.what == "gradient"
    assert opt.iteration == 4
    np.testing.assert_array_equal(opt.x, x_before)
    np.testing.assert_array_equal(opt.y, y_before)
    opt.step(lambda X: X - 1.0)  # the state is usable: continue
    assert opt.iteration == 5


def test_iterate_divergence_is_detected():
    A = topology.exponential(8)
    opt = PullDiagGT(A, np.ones(1), lr=1e300)
    with pytest.raises(DivergenceError, match="iterates became non-finite at iteration 1") as info:
        for _ in range(10):
            opt.step(lambda X: X)
    assert info.value.what == "iterate" and opt.iteration == 0
    assert np.isfinite(opt.x).all()


def test_exact_tracker_memory_error_names_alternative():
    A = topology.exponential(64)
    with pytest.raises(MemoryError, match="tracker='perron'"):
        DiagTracker(A, 1, "exact", max_bytes=100)


def test_the_exact_tracker_peaks_at_its_table_and_a_time_varying_one_checks_the_free_memory(monkeypatch):
    """Helper 231: the exact tracker checked its table against the limits and then held a second one (its inverse)
    beside it, twice the peak (3.8 GB for ring(300)'s 1.76 GiB); the tracker of a time-varying network checked V_t
    against the limit alone, not the free memory, and stepping it holds two (15,000 nodes: NumPy's bare
    allocation error after a row)."""
    import tracemalloc

    from rowstoch_fast import _checks
    from rowstoch_fast.network import Lossy
    from rowstoch_fast.tracker import NetworkTracker

    A = topology.ring(96)
    tracemalloc.start()
    try:
        table = DiagTracker(A, 1)._table
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.nbytes > 10**5 and peak < 1.5 * table.nbytes, (peak, table.nbytes)
    from rowstoch_fast.tracker import diag_powers

    assert np.array_equal(table, 1.0 / diag_powers(A, 1, table.shape[0])[0])  # (the same values, bit for bit)
    monkeypatch.setattr(_checks, "available_memory", lambda: 10**6)
    with pytest.raises(MemoryError, match=r"time-varying network \(V_t and the next, 400 x 400 values each\) needs "
                                          r"about .* use an algorithm without a diagonal tracker"):
        NetworkTracker.check(Lossy(topology.ring(400), 0.1, seed=0), "exact")


def test_tracker_is_cached_per_matrix_and_stride():
    A = topology.paper_graphs()["grid"]
    t1 = DiagTracker(A, 2)
    t2 = DiagTracker(A, 2)
    assert t1._table is t2._table
    assert DiagTracker(A, 3)._table is not t1._table


def test_float32_iterates():
    A = topology.exponential(16).astype(np.float32)
    grad, xstar = quadratic(16, 2, np.random.default_rng(2))
    opt = PullDiagGT(A, np.zeros(2), lr=0.01)
    for _ in range(2000):
        opt.step(grad)
    assert opt.x.dtype == np.float32
    np.testing.assert_allclose(opt.x, np.broadcast_to(xstar, (16, 2)), atol=1e-4)


def test_from_state_dict_validates():
    opt = PullDiagGT(topology.ring(4), np.zeros(2), lr=0.1)
    state = opt.state_dict()
    with pytest.raises(ValueError, match="missing"):
        PullDiagGT.from_state_dict({"x": state["x"]})
    with pytest.raises(ValueError, match="not the matrix"):
        PullDiagGT.from_state_dict(state, A=topology.exponential(4))
    bad = dict(state, format=np.array("other/1"))
    with pytest.raises(ValueError, match="format"):
        PullDiagGT.from_state_dict(bad)


def test_accepts_dense_matrix():
    opt = PullDiagGT(topology.ring(3).toarray(), np.zeros(1), lr=0.1)
    assert isinstance(opt.A, MixingMatrix)


def test_exact_tracker_refuses_hours_of_work():
    A = topology.exponential(64)
    with pytest.raises(ValueError, match="multiply-adds .* use tracker='perron'"):
        DiagTracker(A, 1, "exact", max_work=10)


def test_one_round_keeps_nine_blocks_and_the_kernel_wants_work_only_for_more():
    from rowstoch_fast import _core

    A = topology.exponential(16)
    one, three = PullDiagGT(A, np.zeros(2), 0.01), PullDiagGT(A, np.zeros(2), 0.01, rounds=3)
    blocks = lambda o: 2 * len(o._cur) + len(o._work)  # noqa: E731
    assert blocks(one) == 9 and blocks(three) == 10
    c, z = A.csr, np.zeros((16, 2))
    s = np.ones(16)
    args = (c.indptr, c.indices, c.data)
    with pytest.raises(ValueError, match="work"):
        _core.gt_y_phase(*args, 3, 0.1, z, z, z, z, s, s, np.zeros((16, 2)), np.zeros((16, 2)), np.zeros((16, 2)),
                         np.zeros((0, 2)))
    assert _core.gt_y_phase(*args, 1, 0.1, z, z, z, z, s, s, np.zeros((16, 2)), np.zeros((16, 2)),
                            np.zeros((16, 2)), np.zeros((0, 2)))
