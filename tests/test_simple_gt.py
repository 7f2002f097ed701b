"""SimpleGT: its ``u = x - y`` form against decent-bench's ``y`` form (the dense twin and a per-node transcription
here), the conserved sum that makes it exact, exactness on heterogeneous problems, and its inputs checked (float32:
the registry's test_float32_end_to_end_follows_float64)."""

import numpy as np
import pytest

import rowstoch_fast as rf
from rowstoch_fast import _reference, topology
from rowstoch_fast.objectives import LeastSquares, Quadratic


def heterogeneous(n=10, d=3, seed=0):
    """Strongly convex quadratics whose minimisers differ a lot between nodes."""
    rng = np.random.default_rng(seed)
    f = Quadratic(rng.uniform(0.5, 2, (n, d)), 3 * rng.standard_normal((n, d)))
    return f, rng.standard_normal((n, d))


def irregular(n=11, seed=3):
    """An undirected graph whose degrees (and Metropolis link weights) differ."""
    return topology.erdos_renyi(n, 0.35, seed=seed, directed=False, weights="metropolis")


def run(opt, grad, T):
    for _ in range(T):
        opt.step(grad)
    return opt


def decent_bench_form(W, x0, lr, grad, T):
    """decent-bench 0.3.0's ``SimpleGT.step`` node by node: ``y_new_i = x_i - lr g_i(x_i)``, ``x_i = y_new_i - y_i
    + W_ii x_i + sum_j W_ij x_j``, ``y_i = y_new_i`` (``y_i = x0_i``); the models and ``y`` after each step."""
    n = len(W)
    x, y = x0.copy(), x0.copy()
    xs, ys = [x.copy()], [y.copy()]
    for _ in range(T):
        g = grad(x)
        y_new = np.array([x[i] - lr * g[i] for i in range(n)])
        x = np.array([y_new[i] - y[i] + sum(W[i, j] * x[j] for j in range(n) if W[i, j] != 0) for i in range(n)])
        y = y_new
        xs.append(x.copy())
        ys.append(y.copy())
    return xs, ys


def test_iterates_equal_decent_benchs_form_and_the_twin():
    """The models after every iteration, and ``u = x - y`` of decent-bench's form, on an irregular graph."""
    f, x0 = heterogeneous(11, 2, seed=4)
    W = irregular()
    T, lr = 80, 0.07
    xs, ys = decent_bench_form(W.toarray(), x0, lr, f.full_gradient, T)
    twin = _reference.TWINS["simple-gt"](W.toarray(), x0, lr, f.full_gradient, T)
    opt = rf.SimpleGT(W, x0, lr)
    for t in range(1, T + 1):
        opt.step(f.full_gradient)
        scale = np.abs(xs[t]).max()
        np.testing.assert_allclose(twin[t], xs[t], rtol=0, atol=1e-13 * scale, err_msg=f"twin t={t}")
        np.testing.assert_allclose(opt.x, xs[t], rtol=0, atol=1e-12 * scale, err_msg=f"t={t}")
        np.testing.assert_allclose(opt.gather_state("u"), xs[t] - ys[t], rtol=0, atol=1e-12 * scale,
                                   err_msg=f"u t={t}")


def test_replicas_equal_the_dense_twin_replica_by_replica():
    f, _ = heterogeneous(11, 2, seed=1)
    W = irregular(seed=3)
    x0 = np.random.default_rng(2).standard_normal((3, 11, 2))
    opt = run(rf.SimpleGT(W, x0, 0.04), f.full_gradient, 40)
    for k in range(3):
        twin = _reference.simple_gt(W.toarray(), x0[k], 0.04, f.full_gradient, 40)
        np.testing.assert_allclose(opt.x[k], twin[40], rtol=1e-12, atol=1e-14)


def test_the_sum_of_u_is_conserved():
    """``1^T (x - y) = 0`` on a doubly stochastic W: what makes the fixed point the minimiser."""
    f, x0 = heterogeneous(seed=2)
    opt = rf.SimpleGT(topology.ring(10, directed=False, weights="metropolis"), x0, 0.1)
    for _ in range(50):
        opt.step(f.full_gradient)
        assert np.abs(opt.gather_state("u").sum(0)).max() < 1e-12


@pytest.mark.parametrize("lr", [0.05, 0.2])
def test_exact_on_heterogeneous_quadratics(lr):
    f, x0 = heterogeneous(seed=1)
    W = topology.ring(10, directed=False, weights="metropolis")
    opt = run(rf.SimpleGT(W, x0, lr), f.full_gradient, 20000)
    assert np.abs(opt.x - f.minimizer).max() < 1e-10


def test_exact_on_least_squares_against_lstsq():
    f = LeastSquares.synthetic(n=8, samples_per_node=20, d=5, seed=7)
    x_star = np.linalg.lstsq(f.H.reshape(-1, 5), f.y.reshape(-1), rcond=None)[0]  # (an independent solver)
    W = topology.ring(8, directed=False, weights="metropolis")
    opt = run(rf.SimpleGT(W, f.x0(), 0.05), f.full_gradient, 20000)
    assert np.abs(opt.x - x_star).max() < 1e-10


def test_a_saved_state_resumes():
    f, x0 = heterogeneous(8, 2, seed=3)
    W = topology.ring(8, directed=False, weights="metropolis")
    a = run(rf.SimpleGT(W, x0, 0.05), f.full_gradient, 7)
    b = rf.SimpleGT.from_state_dict(a.state_dict(), W=W)
    run(a, f.full_gradient, 9)
    run(b, f.full_gradient, 9)
    np.testing.assert_array_equal(a.x, b.x)


def test_rounds_and_traffic():
    W = topology.ring(8, directed=False, weights="metropolis")
    opt = run(rf.SimpleGT(W, np.zeros(3), 0.05), lambda X: X - 1.0, 10)
    assert opt.communication_rounds == 10 and opt.samples_drawn() == 10
    assert opt.traffic() == {"messages": 10 * 16, "bytes": 10 * 16 * 3 * 8}


@pytest.mark.parametrize("lr,error,message", [(0.0, ValueError, "lr must be finite and > 0"),
                                              (-0.1, ValueError, "lr must be finite and > 0"),
                                              (np.nan, ValueError, "lr must be finite"),
                                              ("0.1", TypeError, "lr must be a real number")])
def test_bad_step_sizes_are_refused_by_name(lr, error, message):
    with pytest.raises(error, match=message):
        rf.SimpleGT(topology.ring(6, directed=False, weights="metropolis"), np.zeros(2), lr)


def test_a_matrix_that_is_not_doubly_stochastic_is_refused():
    A = topology.erdos_renyi(8, 0.4, seed=1)  # (row stochastic)
    assert not rf.SimpleGT.applies_to(A)
    with pytest.raises(ValueError, match="^SimpleGT: W must be doubly stochastic"):
        rf.SimpleGT(A, np.zeros(2), 0.1)


def test_a_directed_doubly_stochastic_matrix_is_refused_and_would_diverge():
    """A directed cycle's doubly stochastic W (complex eigenvalues): refused by name; the recursion run on it
    anyway (decent-bench's form, the dense twin) diverges on a problem where a symmetric W converges."""
    n = 8
    C = 0.5 * np.eye(n) + 0.5 * np.roll(np.eye(n), 1, 1)
    with pytest.raises(ValueError, match="^SimpleGT: W must be symmetric"):
        rf.SimpleGT(rf.MixingMatrix(C, stochastic="doubly"), np.zeros(2), 0.05)
    f, x0 = heterogeneous(n, 2, seed=6)
    directed = _reference.simple_gt(C, x0, 0.05, f.full_gradient, 600)[-1]
    ring = _reference.simple_gt(topology.ring(n, directed=False, weights="metropolis").toarray(), x0, 0.05,
                                f.full_gradient, 600)[-1]
    assert np.abs(directed).max() > 1e6 and np.abs(ring - f.minimizer).max() < 1e-3


def test_the_step_size_bound_of_one_common_curvature():
    """f_i(x) = ||x - b_i||^2 / 2 on a ring's Metropolis W (lambda_min = -1/3): converges for lr just below
    (3 + lambda_min) / 2 = 4/3 and diverges just above (the class docstring's bound)."""
    W = topology.ring(10, directed=False, weights="metropolis")
    b = np.random.default_rng(0).standard_normal((10, 2))
    below = run(rf.SimpleGT(W, np.zeros(2), 4 / 3 - 0.02), lambda X: X - b, 3000)
    assert np.abs(below.x - b.mean(0)).max() < 1e-12
    above = rf.SimpleGT(W, np.zeros(2), 4 / 3 + 0.02)
    above.growth_limit = None
    assert np.abs(run(above, lambda X: X - b, 3000).x).max() > 1e6
