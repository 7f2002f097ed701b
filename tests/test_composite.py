"""Composite objectives (rowstoch_fast.composite) and the proximal methods: every proximal operator against its
definition, the composite optimum against independent solvers, Hessian-vector products against finite differences,
the objective arithmetic, and the proximal methods against their dense twins, the composite optimum, their smooth
siblings and the harness."""

import json

import numpy as np
import pytest
import scipy.optimize as so
from hypothesis import given, settings
from hypothesis import strategies as st

import rowstoch_fast as rf
from rowstoch_fast import _reference, topology
from rowstoch_fast.algorithms import REGISTRY, names
from rowstoch_fast.composite import (Box, Composite, ElasticNet, GroupLasso, L1, NonNegative, Prox, Scaled, Sum,
                                     as_regularizer, describe_regularizer, proximal_gradient)
from rowstoch_fast.objectives import LeastSquares, LogisticL2, NonconvexLogistic, Quadratic
from conftest import steps_until

PROXIMAL = names(lambda cls: cls.composite)
SMOOTH_SIBLING = {"pg-extra": "extra", "prox-nids": "nids", "prox-exact-diffusion": "exact-diffusion"}
REGULARIZERS = {"l1": L1(0.3), "elastic-net": ElasticNet(0.2, 0.5), "box": Box(-0.2, 0.2),
                "nonnegative": NonNegative(), "group-lasso": GroupLasso([0, 0, 1], 0.5)}


def moreau(r, v, t, w):
    """The proximal objective ``r(w) + ||w - v||^2 / (2t)``."""
    return float(r.value(w)) + float(((w - v) ** 2).sum()) / (2 * t)


# ------------------------------------------------------------------ proximal operators
@pytest.mark.parametrize("key", sorted(REGULARIZERS))
@settings(max_examples=40, deadline=None)
@given(v=st.lists(st.floats(-5, 5), min_size=3, max_size=3), t=st.floats(0.01, 3.0), seed=st.integers(0, 2**16))
def test_prox_minimises_its_definition_and_is_firmly_nonexpansive(key, v, t, seed):
    r = REGULARIZERS[key]
    v = np.array(v)
    u = r.prox(v, t)
    best = moreau(r, v, t, u)
    assert np.isfinite(best)
    rng = np.random.default_rng(seed)
    for w in list(u + 1e-3 * rng.standard_normal((20, 3))) + list(rng.uniform(-5, 5, (20, 3))):
        assert best <= moreau(r, v, t, w) + 1e-12  # (an infeasible w of a box is inf: never below)
    v2 = v + rng.standard_normal(3)
    u2 = r.prox(v2, t)
    assert ((u - u2) ** 2).sum() <= (u - u2) @ (v - v2) + 1e-12


def test_closed_forms_and_scaling():
    v = np.array([-2.0, 0.3, 1.0])
    np.testing.assert_array_equal(L1(0.5).prox(v, 1.0), [-1.5, 0.0, 0.5])
    np.testing.assert_allclose(ElasticNet(0.5, 1.0).prox(v, 1.0), [-0.75, 0.0, 0.25])
    np.testing.assert_array_equal(Box(-1.0, 0.5).prox(v, 7.0), [-1.0, 0.3, 0.5])
    np.testing.assert_allclose(GroupLasso([0, 0, 1], 1.0).prox(np.array([3.0, 4.0, 0.5]), 1.0), [2.4, 3.2, 0.0])
    np.testing.assert_array_equal(GroupLasso([0, -1, 0], 10.0).prox(v, 1.0), [0.0, 0.3, 0.0])  # -1: free
    np.testing.assert_array_equal((3 * L1(0.5)).prox(v, 0.2), L1(0.5).prox(v, 0.6))
    assert float((3 * L1(0.5)).value(v)) == pytest.approx(1.5 * 3.3)
    steps = np.array([0.1, 1.0])[:, None, None]  # one step per replica broadcasts
    V = np.broadcast_to(v, (2, 4, 3))
    np.testing.assert_array_equal(L1(1.0).prox(V, steps)[1], np.broadcast_to(L1(1.0).prox(v, 1.0), (4, 3)))
    out = np.empty(3)
    assert L1(0.5).prox(v, 1.0, out=out) is out


@pytest.mark.parametrize("key", sorted(REGULARIZERS))
def test_values_and_proxes_keep_float32(key):
    r = REGULARIZERS[key]
    v = np.array([[0.1, -0.1, 0.05], [3.0, -2.0, 1.0]], dtype=np.float32)
    assert r.value(v).dtype == np.float32 and r.prox(v, 0.5).dtype == np.float32
    np.testing.assert_allclose(r.value(v), r.value(v.astype(np.float64)), rtol=1e-6)


def test_descriptions_rebuild_the_regularizer():
    for r in [*REGULARIZERS.values(), 2.0 * L1(0.1), GroupLasso([[0, 2], [1]], 0.3, weights=[1.0, 2.0])]:
        again = as_regularizer(json.dumps(r.describe()))
        np.testing.assert_array_equal(again.prox(np.array([0.7, -0.1, 3.0]), 0.5),
                                      r.prox(np.array([0.7, -0.1, 3.0]), 0.5))
    assert as_regularizer("null") is None and as_regularizer(None) is None
    with pytest.raises(ValueError, match="cannot be rebuilt"):
        as_regularizer(Prox(lambda x: 0.0, lambda v, t: v, name="mine").describe())


def test_bad_regularizers_are_named():
    with pytest.raises(ValueError, match="lam"):
        L1(-1.0)
    with pytest.raises(ValueError, match="lower must be <= upper"):
        Box(1.0, 0.0)
    with pytest.raises(ValueError, match="disjoint"):
        GroupLasso([[0, 1], [1, 2]], 1.0)
    with pytest.raises(ValueError, match="group labels"):
        GroupLasso(np.array([0.5, 1.0]), 1.0)
    with pytest.raises(ValueError, match="weights must hold 2"):
        GroupLasso([0, 1], 1.0, weights=[1.0])
    with pytest.raises(ValueError, match="step must be positive"):
        L1(1.0).prox(np.ones(2), 0.0)
    with pytest.raises(ValueError, match="d = 3 coordinates but the models have d = 2"):
        GroupLasso([0, 0, 1], 1.0).prox(np.ones(2), 1.0)
    with pytest.raises(ValueError, match="the box has 3 bounds"):
        Box(np.zeros(3), np.ones(3)).prox(np.ones(2), 1.0)
    with pytest.raises(TypeError, match="callables"):
        Prox(1.0, lambda v, t: v)
    with pytest.raises(ValueError, match="returned shape"):
        Prox(lambda x: 0.0, lambda v, t: v[:1]).prox(np.ones(3), 1.0)
    # a prox of NaN failed deep in the optimum's computation of run() ("X must be finite"), naming no regularizer
    # (a helper's trial)
    W = topology.ring(8, directed=False, weights="metropolis")
    nan = Prox(lambda x: 0.0, lambda v, t: v * np.nan, name="nan")
    with pytest.raises(ValueError, match=r"the regularizer Prox\(name='nan'\) returned NaN or Inf from finite "
                                         r"input \(in the optimum of"):
        rf.run(rf.Algorithm(W, 0.05, method="pg-extra"), LeastSquares.synthetic(8, samples_per_node=6, d=4, seed=5)
               + nan, 5, progress=False)
    with pytest.raises(TypeError, match="sum of regularizers"):
        L1(1.0) + Box(0, 1)


# ------------------------------------------------------------------ the composite optimum
def _split_lbfgs(value_grad, lam, d):
    """``argmin f(x) + lam ||x||_1`` by L-BFGS-B on ``x = u - v``, ``u, v >= 0`` (an independent solver)."""
    def obj(z):
        f, g = value_grad(z[:d] - z[d:])
        return f + lam * z.sum(), np.concatenate([g + lam, -g + lam])
    res = so.minimize(obj, np.zeros(2 * d), jac=True, method="L-BFGS-B", bounds=[(0, None)] * (2 * d),
                      options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 20000, "maxcor": 30})
    return res.x[:d] - res.x[d:], res.fun


@pytest.mark.parametrize("smooth", ["least-squares", "logistic-l2"])
def test_the_lasso_optimum_matches_an_independent_solver(smooth):
    f = (LeastSquares.synthetic(8, samples_per_node=6, d=6, seed=3) if smooth == "least-squares"
         else LogisticL2.synthetic(8, total=800, d=6, batch=10, seed=3))
    F = f + L1(0.05)
    best = F.optimum()
    x, value = _split_lbfgs(f.value_and_gradient_at, 0.05, 6)
    assert abs(best.value - value) < 1e-10 and np.abs(best.x - x).max() < 1e-5
    assert (best.x == 0).any()  # (the L1 term sets some coordinates to zero)
    assert np.linalg.norm(F.stationarity(best.x, f.value_and_gradient_at(best.x)[1])) <= 1e-12
    assert F.optimum() is best  # cached


def test_the_box_optimum_matches_lbfgsb_and_group_lasso_meets_its_optimality_conditions():
    f = LeastSquares.synthetic(6, samples_per_node=8, d=5, seed=4)
    lo, hi = -0.3 * np.ones(5), np.array([0.2, 0.2, np.inf, 0.1, 0.5])
    res = so.minimize(lambda x: f.value_and_gradient_at(x), np.zeros(5), jac=True, method="L-BFGS-B",
                      bounds=list(zip(lo, hi)), options={"ftol": 1e-16, "gtol": 1e-14, "maxiter": 10000})
    best = (f + Box(lo, hi)).optimum()
    assert np.abs(best.x - res.x).max() < 1e-6 and abs(best.value - res.fun) < 1e-11
    groups, lam = np.array([0, 0, 1, 1, 2]), 1.0
    x = (f + GroupLasso(groups, lam)).optimum().x
    g = f.value_and_gradient_at(x)[1]
    for k in range(3):  # 0 in grad_g f + lam d||x_g||: at x_g != 0 the gradient balances; at 0 it is small
        xg, gg = x[groups == k], g[groups == k]
        if np.linalg.norm(xg) > 0:
            np.testing.assert_allclose(gg, -lam * xg / np.linalg.norm(xg), atol=1e-9)
        else:
            assert np.linalg.norm(gg) <= lam + 1e-9
    assert any(np.linalg.norm(x[groups == k]) == 0 for k in range(3))


def test_a_nonconvex_composite_has_no_optimum_and_the_solver_warns_when_it_runs_out():
    assert (NonconvexLogistic.synthetic(4, total=80, d=3, batch=5) + L1(0.1)).optimum() is None
    with pytest.warns(RuntimeWarning, match="stopped after 3 iterations"):
        c = np.array([1.0, 1e2, 1e4])
        proximal_gradient(lambda x: (0.5 * x @ (c * x) - x.sum(), c * x - 1.0), L1(0.01), np.ones(3) * 5, max_iter=3)


# ------------------------------------------------------------------ Hessian-vector products, arithmetic
@pytest.mark.parametrize("kind", ["quadratic", "least-squares", "logistic-l2", "logistic", "sum", "scaled"])
def test_hessian_vector_products_equal_finite_differences(kind):
    rng = np.random.default_rng(0)
    q = Quadratic.random(4, 5, seed=1)
    f = {"quadratic": q, "least-squares": LeastSquares.synthetic(4, samples_per_node=7, d=5, seed=1),
         "logistic-l2": LogisticL2.synthetic(4, total=200, d=5, batch=5, seed=1),
         "logistic": NonconvexLogistic.synthetic(4, total=200, d=5, batch=5, rho=0.5, seed=1),
         "sum": q + Quadratic.random(4, 5, seed=2), "scaled": 2.5 * q}[kind]
    X, V = rng.standard_normal((2, 3, 4, 5))
    e = 1e-6
    fd = (f.full_gradient(X + e * V) - f.full_gradient(X - e * V)) / (2 * e)
    assert np.abs(f.hvp(X, V) - fd).max() < 1e-7
    np.testing.assert_allclose(f.hvp(X[0], V[0]), f.hvp(X, V)[0])


def test_objective_arithmetic():
    f, g = Quadratic.random(4, 3, seed=0), Quadratic.random(4, 3, seed=1)
    X = np.random.default_rng(1).standard_normal((4, 3))
    h = f + g
    assert isinstance(h, Sum) and h.convex and sum([f, g]).n == 4
    np.testing.assert_allclose(h.full_gradient(X), f.full_gradient(X) + g.full_gradient(X))
    np.testing.assert_allclose(h.loss(X), f.loss(X) + g.loss(X))
    minimiser = (f.b + g.b).sum(0) / (f.q + g.q).sum(0)
    assert np.abs(h.optimum().x - minimiser).max() < 1e-11
    s = 3 * f
    assert isinstance(s, Scaled) and np.allclose(s.full_gradient(X), 3 * f.full_gradient(X))
    assert np.array_equal(s.optimum().x, f.optimum().x) and s.optimum().value == pytest.approx(3 * f.optimum().value)
    F = f + L1(0.1)
    assert isinstance(F, Composite) and (L1(0.1) + f).regularizer == L1(0.1)
    assert isinstance(F + g, Composite) and isinstance((F + g).smooth, Sum)
    assert isinstance(2 * F, Composite) and (2 * F).optimum().x == pytest.approx(F.optimum().x, abs=1e-10)
    np.testing.assert_allclose(F.loss(X), f.loss(X) + 0.1 * np.abs(X).sum(-1))
    assert F.describe()["regularizer"] == {"type": "L1", "lam": 0.1} and F.describe() != f.describe()
    with pytest.raises(TypeError, match="already has the regularizer"):
        F + Box(0, 1)
    with pytest.raises(ValueError, match="same n and d"):
        f + Quadratic.random(5, 3)
    with pytest.raises(ValueError, match="a must be"):
        -1 * f
    with pytest.raises(NotImplementedError, match="no Hessian-vector product"):
        rf.objectives.Objective.hvp(f, X, X)


# ------------------------------------------------------------------ the proximal methods
def _problem(n=12, d=3, seed=0):
    rng = np.random.default_rng(seed)
    f = Quadratic(rng.uniform(0.5, 2, (n, d)), rng.standard_normal((n, d)))
    return f, topology.ring(n, directed=False, weights="metropolis"), rng.standard_normal((n, d))


def _network(cls, W):
    """The matrices ``cls`` runs on here, as constructor keywords: an undirected network's method on ``W``, a
    directed one (SONATA: a column-stochastic ``C``) on a directed Erdos-Renyi graph of as many nodes (its
    out-degree weights where it pushes)."""
    if "W" in cls.matrices:
        return {"W": W}
    return cls.problem_matrices(topology.erdos_renyi(W.n, 0.4, seed=5))


def _dense(mats):
    return {k: M.toarray() for k, M in mats.items()}


@pytest.mark.parametrize("name", PROXIMAL)
@pytest.mark.parametrize("key", sorted(REGULARIZERS))
def test_proximal_methods_match_their_twins_and_reach_the_composite_optimum(name, key):
    cls, r = REGISTRY[name], REGULARIZERS[key]
    f, W, x0 = _problem()
    mats = _network(cls, W)
    opt = cls(**mats, x0=x0, lr=0.1, regularizer=r)
    xs = _reference.TWINS[name](**_dense(mats), x0=x0, lr=0.1, grad_fn=f.full_gradient, T=150, prox=r.prox)
    for t in range(1, 151):
        opt.step(f.full_gradient)
        assert np.abs(opt.x - xs[t]).max() < 1e-12, (t, np.abs(opt.x - xs[t]).max())
    best = (f + r).optimum().x  # (FISTA to a residual of 1e-12)
    opt = cls(**mats, x0=np.zeros(3), lr=0.3, regularizer=r)
    errors = steps_until(opt, f.full_gradient, lambda x: np.abs(x - best).max(), 1e-10, 3000)
    assert errors[-1] < 1e-10, errors


def test_the_exact_diffusion_twin_with_the_matrix_square_root_is_independent_of_the_method():
    """The proximal Exact Diffusion steps with q = B y (no square root); its twin forms B = (I - W_bar)^(1/2)."""
    f, W, x0 = _problem(seed=3)
    xs = _reference.prox_exact_diffusion(W.toarray(), x0, 0.2, f.full_gradient, 60, prox=L1(0.2).prox)
    opt = rf.ProxExactDiffusion(W, x0, 0.2, regularizer=L1(0.2))
    for _ in range(60):
        opt.step(f.full_gradient)
    assert np.abs(opt.x - xs[-1]).max() < 1e-12


@pytest.mark.parametrize("name", [name for name in PROXIMAL if "W" in REGISTRY[name].matrices])
def test_without_a_regularizer_each_is_its_smooth_sibling(name):
    f, W, x0 = _problem(seed=1)
    prox, smooth = REGISTRY[name](W, x0, 0.1), REGISTRY[SMOOTH_SIBLING[name]](W, x0, 0.1)
    for _ in range(200):
        prox.step(f.full_gradient)
        smooth.step(f.full_gradient)
    assert np.abs(prox.x - smooth.x).max() < 1e-12
    assert prox.communication_rounds == smooth.communication_rounds


@pytest.mark.parametrize("name", PROXIMAL)
def test_state_dict_keeps_the_regularizer_and_replicas_take_one_step_each(name):
    cls = REGISTRY[name]
    f, W, _ = _problem(seed=2)
    mats = _network(cls, W)
    x0 = np.random.default_rng(0).standard_normal((2, 12, 3))
    lr = np.array([0.05, 0.2]).reshape(2, 1, 1)
    opt = cls(**mats, x0=x0, lr=lr, regularizer=L1(0.2))
    singles = [cls(**mats, x0=x0[k], lr=float(lr[k, 0, 0]), regularizer=L1(0.2)) for k in range(2)]
    for _ in range(20):
        opt.step(f.full_gradient)
        for s in singles:
            s.step(f.full_gradient)
    for k, s in enumerate(singles):
        np.testing.assert_array_equal(opt.x[k], s.x)
    again = cls.from_state_dict(opt.state_dict(), **mats)
    assert again.regularizer == L1(0.2)
    mine = Prox(lambda x: 0.5 * (x * x).sum(-1), lambda v, t: v / (1 + t), name="ridge")
    user = cls(**mats, x0=x0[0], lr=0.1, regularizer=mine)
    user.step(f.full_gradient)
    state = user.state_dict()
    with pytest.raises(ValueError, match="cannot be rebuilt"):
        cls.from_state_dict(state, **mats)
    with pytest.raises(ValueError, match="not the one this state was saved with"):
        cls.from_state_dict(state, **mats, regularizer=L1(0.1))
    resumed = cls.from_state_dict(state, **mats, regularizer=mine)
    for o in (user, resumed):
        for _ in range(5):
            o.step(f.full_gradient)
    np.testing.assert_array_equal(user.x, resumed.x)
    with pytest.raises(ValueError, match="takes no regularizer"):
        rf.EXTRA.from_state_dict(rf.EXTRA(W, x0[0], 0.1).state_dict(), W=W, regularizer=L1(0.1))


@pytest.mark.parametrize("name", PROXIMAL)
def test_float32_and_a_bad_prox_is_a_divergence_error(name):
    cls = REGISTRY[name]
    f, W, x0 = _problem(seed=4)
    mats = _network(cls, W)
    o32 = cls(**{k: M.astype(np.float32) for k, M in mats.items()}, x0=x0.astype(np.float32), lr=0.1,
              regularizer=L1(0.2))
    o64 = cls(**mats, x0=x0, lr=0.1, regularizer=L1(0.2))
    for _ in range(100):
        o32.step(lambda X: f.full_gradient(X.astype(np.float64)).astype(np.float32))
        o64.step(f.full_gradient)
    assert o32.x.dtype == np.float32 and np.abs(o32.x - o64.x).max() < 1e-5
    bad = cls(**mats, x0=x0, lr=0.1, regularizer=Prox(lambda x: 0.0, lambda v, t: v * np.nan, name="nan"))
    with pytest.raises(ValueError, match=r"the regularizer Prox\(name='nan'\) returned NaN or Inf from finite input"):
        bad.step(f.full_gradient)
    assert np.isfinite(bad.x).all() and bad.iteration == 0


def test_the_harness_runs_only_proximal_methods_on_a_composite_objective(tmp_path):
    W = topology.ring(8, directed=False, weights="metropolis")
    F = LeastSquares.synthetic(8, samples_per_node=6, d=4, seed=5) + L1(0.1)
    h = rf.run(rf.Algorithm(W, 0.05, method="prox-nids"), F, 1500, progress=False)
    assert h.final("suboptimality") < 1e-12 and h.final("grad_norm_mean") < 1e-10 and h.final("distance") < 1e-9
    with pytest.raises(ValueError, match="no proximal step.*pg-extra, prox-nids, prox-exact-diffusion"):
        rf.run(rf.Algorithm(W, 0.05, method="extra"), F, 5, progress=False)
    with pytest.raises(ValueError, match="not the objective's"):
        rf.run(rf.Algorithm(W, 0.05, method="pg-extra", regularizer=L1(0.3)), F, 5, progress=False)
    from rowstoch_fast.compare import compare

    frame = compare(W, F, rounds_budget=200, repeats=1, lr=0.1, tune=False, progress=False)
    assert sorted(frame["algorithm"].unique()) == sorted(PROXIMAL)


def test_lasso_on_the_command_line(tmp_path):
    from rowstoch_fast.cli import main

    out = tmp_path / "lasso"
    assert main(["compare", "--objective", "lasso", "--l1", "0.05", "--topology", "ring", "--undirected", "--weights",
                 "metropolis", "--n", "8", "--rounds-budget", "150", "--repeats", "1", "--lr", "0.1", "--out",
                 str(out), "-q"]) == 0
    summary = (out / "summary.csv").read_text()
    assert all(name in summary for name in PROXIMAL) and "dsgd" not in summary
    assert main(["compare", "--objective", "least-squares", "--l1", "0.1", "--n", "8", "-q"]) == 2
    assert main(["compare", "--objective", "lasso", "--l1", "-1", "--n", "8", "-q"]) == 2


def test_the_shipped_lasso_experiment_runs_and_a_smooth_method_is_refused_by_name(tmp_path):
    """examples/lasso.toml at a smaller budget; a data file's lasso; naming a method without a prox step."""
    import pathlib

    import pandas as pd

    from rowstoch_fast.cli import main

    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "lasso.toml"
    assert main(["compare", "--config", str(example), "--rounds-budget", "40", "--repeats", "1", "--lr", "0.3",
                 "--out", str(tmp_path / "o"), "-q"]) == 0
    table = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert sorted(set(table["algorithm"])) == sorted(PROXIMAL) and set(table["graph"]) == {"ring", "erdos_renyi"}
    rng = np.random.default_rng(0)
    H = rng.standard_normal((64, 3))
    np.savez(tmp_path / "ls.npz", H=H, y=H @ np.array([1.0, 0.0, -1.0]) + 0.1 * rng.standard_normal(64))
    assert main(["compare", "--n", "16", "--objective", "lasso", "--data-file", str(tmp_path / "ls.npz"),
                 "--topology", "ring", "--undirected", "--weights", "metropolis", "--algorithms", "prox-nids",
                 "--lr", "0.3", "--rounds-budget", "400", "--repeats", "1", "--out", str(tmp_path / "f"), "-q"]) == 0
    assert pd.read_csv(tmp_path / "f" / "summary.csv")["suboptimality"].iloc[0] < 1e-10
    assert main(["compare", "--n", "8", "--objective", "lasso", "--topology", "ring", "--undirected", "--weights",
                 "metropolis", "--algorithms", "extra", "--out", str(tmp_path / "x"), "-q"]) == 2


def test_the_review_findings_stay_fixed(tmp_path):
    """Constructors that would drop a regularizer, an empty box, a regularizer the objective lacks, a user Prox
    through run(resume=...), sizes checked when the composite objective is made, bad descriptions named."""
    f = LeastSquares.synthetic(6, samples_per_node=5, d=3, seed=2)
    lasso = f + L1(0.1)
    with pytest.raises(TypeError, match="keeps a composite objective's regularizer"):
        Sum(f, lasso)
    with pytest.raises(TypeError, match="scales a composite objective's regularizer"):
        Scaled(lasso, 2.0)
    with pytest.raises(ValueError, match="must not be empty"):
        Box(np.inf, np.inf)
    with pytest.raises(ValueError, match="d = 3"):
        f + Box([0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="incomplete or wrong"):
        as_regularizer({"type": "L1"})
    with pytest.raises(ValueError, match="must be a Regularizer"):
        as_regularizer("")
    with pytest.raises(TypeError, match="real numbers"):
        Prox(lambda x: 0.0, lambda v, t: v + 0j, name="complex").prox(np.ones(3), 1.0)
    assert Prox(lambda x: 0.0, lambda v, t: v) != Prox(lambda x: 0.0, lambda v, t: v)  # (anonymous: by identity)
    assert GroupLasso([[0, 1]], 1.0, d=3).prox(np.array([3.0, 4.0, 9.0]), 1.0)[2] == 9.0
    W = topology.ring(6, directed=False, weights="metropolis")
    with pytest.raises(ValueError, match="the objective has none"):
        rf.run(rf.Algorithm(W, 0.05, method="pg-extra", regularizer=L1(1.0)), f, 5, progress=False)
    mine = Prox(lambda x: 0.1 * np.abs(x).sum(-1), lambda v, t: np.sign(v) * np.maximum(np.abs(v) - 0.1 * t, 0),
                name="my-l1")
    F = f + mine
    path = str(tmp_path / "run.npz")
    first = rf.run(rf.Algorithm(W, 0.05, method="prox-nids"), F, 30, checkpoint=path, progress=False)
    again = rf.run(rf.Algorithm(W, 0.05, method="prox-nids"), F, 60, resume=path, progress=False)
    whole = rf.run(rf.Algorithm(W, 0.05, method="prox-nids"), F, 60, progress=False)
    assert len(first) and again.final("loss") == whole.final("loss")


@pytest.mark.parametrize("name", ["gt-svrg", "gt-sarah"])
def test_variance_reduced_samples_count_survives_a_resume(name):
    cls = REGISTRY[name]
    f = LeastSquares.synthetic(6, samples_per_node=5, d=3, seed=2)
    W = topology.ring(6, directed=False, weights="metropolis")
    opt = cls(W, f.x0(), 0.02, **({"snapshot_every": 4} if name == "gt-svrg" else {"inner_steps": 3}))
    oracle = f.oracle(seed=1)
    for _ in range(9):
        opt.step(oracle)
    again = cls.from_state_dict(opt.state_dict(), W=W)
    assert again.samples_drawn() == opt.samples_drawn() > 2 * 9


def test_a_constraint_that_excludes_the_start_starts_inside_it():
    """``Quadratic + NonNegative()`` started at the smooth part's x0, whose negative coordinates made F(x0) = +inf:
    the tuner read the start as "ran off ... by iteration 0" at every rate and compare() ranked no proximal method
    (helper 118). The composite's start is now projected into the constraint."""
    from rowstoch_fast import compare as cmp
    from rowstoch_fast.objectives import Quadratic

    f = Quadratic.random(8, 4, seed=0)
    F = f + NonNegative()
    assert (f.x0() < 0).any() and (F.x0() >= 0).all() and np.isfinite(F.value_and_gradient_at(F.x0())[0])
    np.testing.assert_array_equal((f + L1(0.1)).x0(), f.x0())  # (a start inside: unchanged)
    A = topology.by_name("ring", 8, undirected=True, weights="metropolis")
    frame = cmp.compare(A, F, ["pg-extra", "prox-nids"], rounds_budget=200, repeats=2, progress=False, jobs=1)
    table = cmp.summary(frame)
    assert (table["status"] == "ok").all() and (table["final"] < 1e-12).all(), table[["algorithm", "diagnosis"]]


def test_the_optimum_s_solver_stops_at_the_data_s_rounding():
    """The solver's absolute residual 1e-12 is out of reach where the data are large (features x 1,000: 200,000
    iterations, 34 s, a warning, F* exact to 1e-16 all along) or float32 (70 s): it stops at the gradients'
    rounding times the data's scale, with the same optimum."""
    import warnings

    from rowstoch_fast.objectives import LeastSquares, Quadratic

    base = LeastSquares.synthetic(n=4, samples_per_node=10, d=6, seed=1)
    ref = (base + L1(0.05)).optimum()
    s = 1e3
    F = LeastSquares(base.H.reshape(-1, 6) * s, base.y.ravel() * s, n=4) + L1(0.05 * s * s)
    f32 = Quadratic.random(8, 4, seed=0, dtype=np.float32) + L1(0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (it ran out of iterations and warned, after 34 s and 70 s)
        big = F.optimum()
        small = f32.optimum()
    np.testing.assert_allclose(big.x, ref.x, rtol=0, atol=1e-10)
    assert big.value / s ** 2 == pytest.approx(ref.value, rel=1e-14)
    q, b = f32.smooth.q.astype(np.float64).mean(0), f32.smooth.b.astype(np.float64).mean(0)
    exact = np.sign(b) * np.maximum(np.abs(b) - 0.1, 0) / q
    np.testing.assert_allclose(small.x, exact, rtol=0, atol=1e-5)


def test_a_prox_of_one_s_own_that_writes_into_its_input_is_told_why():
    """NumPy's bare "output array is read-only" was all a Prox writing into v (np.maximum(v, 0, out=v)) got."""
    from rowstoch_fast.objectives import Quadratic

    f = Quadratic.random(6, 3, seed=0)
    r = Prox(lambda x: np.where((x >= 0).all(-1), 0.0, np.inf), lambda v, t: np.maximum(v, 0, out=v), name="inplace")
    opt = rf.PGEXTRA(topology.by_name("ring", 6, undirected=True, weights="metropolis"), np.zeros(3), lr=0.3,
                     regularizer=r)
    with pytest.raises(ValueError, match=r"the prox of 'inplace' wrote into its input v, which it is given "
                                         r"read-only .*return a new array"):
        for _ in range(3):
            opt.step(lambda X: f.full_gradient(np.ascontiguousarray(X)))


def test_the_solver_stops_where_float32_gradients_round_and_returns_its_best_point():
    """A float32 lasso's solver sat at a residual of 7.2e-5 against the 2.4e-5 asked (its gradients' rounding) for
    all 200,000 iterations (24 s) and returned its last point while it named its best residual. It stops once the
    best residual, near the one asked, has not fallen by a tenth in STALL_ITERATIONS, and returns that point."""
    import re
    import warnings

    from rowstoch_fast.composite import STALL_ITERATIONS

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        best = (Quadratic.random(8, 20, seed=2, dtype=np.float32) + L1(0.05)).optimum()
    message = next(str(w.message) for w in caught if "proximal gradient solver" in str(w.message))
    iterations = int(re.search(r"after (\d+) iterations", message).group(1))
    assert iterations < 4 * STALL_ITERATIONS and "none fell by a tenth" in message
    exact = (Quadratic.random(8, 20, seed=2) + L1(0.05)).optimum()
    assert np.abs(best.x - exact.x).max() < 1e-4  # (float32 data: its own minimiser, near float64's)


def test_the_solver_says_an_objective_unbounded_below_and_a_value_and_gradient_of_another_form():
    """Helper 204: f(z) = sum(z), unbounded below, ran until float64 rounding swallowed the gradient step (|x| =
    1e16, the residual read 0) and was returned as converged; a value_and_gradient returning a number met "'float'
    object is not subscriptable", a gradient of another shape a broadcast error. An optimum on a far bound is
    still one."""
    linear = lambda z: (float(z.sum()), np.ones_like(z))  # noqa: E731
    with pytest.raises(ValueError, match=r"the proximal gradient solver of the problem ran away: its iterate reached "
                                         r"max \|x\| = 1\.\d+e\+16, where float64 rounding swallows the gradient "
                                         r"step \(gradient norm 1\.73\)"):
        proximal_gradient(linear, None, np.ones(3))
    np.testing.assert_array_equal(proximal_gradient(linear, Box(-2.0, 2.0), np.ones(3)), [-2.0] * 3)
    np.testing.assert_array_equal(proximal_gradient(linear, Box(-1e17, 1e17), np.full(3, -1e17)), [-1e17] * 3)
    with pytest.raises(TypeError, match=r"value_and_gradient must return \(f\(x\), grad f\(x\)\), got float 0\.0"):
        proximal_gradient(lambda z: float(z.sum()), None, np.ones(3))
    with pytest.raises(ValueError, match=r"value_and_gradient must return f\(x\) a number and grad f\(x\) of x's "
                                         r"shape \(3,\), got shapes \(\) and \(2,\)"):
        proximal_gradient(lambda z: (float(z.sum()), np.ones(2)), None, np.ones(3))


def test_regularizers_name_a_group_past_memory_and_descriptions_that_are_none():
    """Helper 204: GroupLasso([[0], [10**12]]) met NumPy's "Unable to allocate 7.28 TiB"; a Scaled of a Scaled of
    None a TypeError of NoneType; describe_regularizer(3) an AttributeError."""
    with pytest.raises(MemoryError, match=r"GroupLasso over d = 1,000,000,000,001 coordinates in 2 groups needs "
                                          "about"):
        GroupLasso([[0], [10**12]], 0.1)
    with pytest.raises(ValueError, match="regularizer: Scaled's 'of' must describe a regularizer, got none"):
        as_regularizer({"type": "Scaled", "a": 1, "of": {"type": "Scaled", "a": 1, "of": None}})
    with pytest.raises(TypeError, match="r must be a Regularizer of rowstoch_fast.composite or None, got int 3"):
        describe_regularizer(3)
    assert describe_regularizer(None) == "null" and GroupLasso([[0], [3]], 0.1).labels.tolist() == [0, -1, -1, 1]


def _conditioned(rows, d, cond, seed=0):
    """Least-squares data of ``rows`` rows whose singular values run 1 .. 1/cond (times sqrt(rows))."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((rows, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    H = (U * np.logspace(0, -np.log10(cond), d) * np.sqrt(rows)) @ V.T
    return H, H @ rng.standard_normal(d) + 0.1 * rng.standard_normal(rows)


def test_an_ill_conditioned_lassos_optimum_is_not_above_its_start(monkeypatch):
    # (the solver had started at the least-squares minimiser, 2.8e6 out along the flat directions, and not come
    # back: F* read 2.7 where the runs' start had 2.5 and the optimum is 4.2e-3; every method then ranked 1=)
    import functools
    import warnings

    from rowstoch_fast import composite

    monkeypatch.setattr(composite, "proximal_gradient",
                        functools.partial(composite.proximal_gradient, max_iter=3000))  # (a short solve)
    H, y = _conditioned(32, 8, 1e8)
    f = LeastSquares(H, y, 4) + L1(1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the short solve ran out)
        best = f.optimum().value
    value = lambda x: float(f.value_and_gradient_at(x)[0])  # noqa: E731
    assert best < 0.5 * min(value(np.zeros(8)), value(f.x0()))  # (0.0040 against 0.0126; it had read 0.84)


@pytest.mark.parametrize("scale", [1e-4, 1e-5])
def test_a_composite_optimum_is_as_exact_in_small_units(scale):
    # (the solver's stop had been an absolute residual: data 1e-5 times smaller, F* 2.1% off, a rounding level of
    # 6.6e-24 beside an error of 1.4e-13, and four methods tied where one was behind)
    H, y = _conditioned(64, 6, 100.0, seed=3)
    unit = (LeastSquares(H, y, 4) + L1(1e-2)).optimum()
    small = (LeastSquares(H * scale, y * scale, 4) + L1(1e-2 * scale ** 2)).optimum()
    assert small.value / scale ** 2 == pytest.approx(unit.value, rel=1e-8)
    np.testing.assert_allclose(small.x, unit.x, rtol=1e-6, atol=1e-9)


def test_a_small_ys_lasso_is_solved_in_as_few_passes_as_before():
    # (the stop relative to the gradients' units had bought nothing but passes where the curvature is 1: a y 100
    # times smaller, 1,844 -> 67,524 gradient calls for the same F*; the relative stop is for small curvatures)
    from rowstoch_fast.objectives import optimum_of

    rng = np.random.default_rng(1)
    N, d = 400, 20
    U, _ = np.linalg.qr(rng.standard_normal((N, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    H = np.sqrt(N) * U @ np.diag(np.logspace(0, -3, d)) @ V.T
    s = LeastSquares(H, 1e-2 * rng.standard_normal(N), 4)
    calls = []

    def counted(x):
        calls.append(1)
        return s.value_and_gradient_at(x)

    proximal_gradient(counted, L1(1e-5), optimum_of(s).x)
    assert len(calls) < 5000, len(calls)


def test_a_group_lassos_weights_and_groups_are_its_own():
    # (it had kept the caller's weights: changed afterwards, a stale f*; an assigned labels left the groups derived
    # from the old ones)
    w = np.ones(2)
    g = GroupLasso([[0, 1], [2]], 0.5, weights=w)
    w[:] = 5.0
    assert np.array_equal(g.weights, [1.0, 1.0]) and not g.weights.flags.writeable
    with pytest.raises(AttributeError):
        g.labels = np.zeros(3, dtype=np.int64)
