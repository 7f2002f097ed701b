"""LT-ADMM and ATG: the link variables summed per node against their per-link form (the dense twins and a
transcription here of decent-bench's unweighted form), exactness on heterogeneous problems, the static network they
need, rounds and traffic, and their hyperparameters checked."""

import numpy as np
import pytest

import rowstoch_fast as rf
from rowstoch_fast import MixingMatrix, _reference, topology
from rowstoch_fast.network import Compressed, Lossy, Schedule, Sleepy
from rowstoch_fast.objectives import LeastSquares, Quadratic
from conftest import steps_until

METHODS = {"lt-admm": rf.LTADMM, "atg": rf.ATG}


def heterogeneous(n=10, d=3, seed=0):
    """Strongly convex quadratics whose minimisers differ a lot between nodes."""
    rng = np.random.default_rng(seed)
    f = Quadratic(rng.uniform(0.5, 2, (n, d)), 3 * rng.standard_normal((n, d)))
    return f, rng.standard_normal((n, d))


def irregular(n=11, seed=3):
    """An undirected graph whose degrees differ (Metropolis weights: the link weights differ too)."""
    W = topology.erdos_renyi(n, 0.35, seed=seed, directed=False, weights="metropolis")
    degrees = (W.toarray() > 0).sum(1) - 1
    assert degrees.min() != degrees.max()
    return W


def run(opt, grad, T):
    for _ in range(T):
        opt.step(grad)
    return opt


def per_link(W, x0, grad, T, name, **options):
    """The per-link transcription of each method, returning the models after every iteration and the sums
    ``(sum_j z_ij, sum_j (z_ij - z_ji))`` of its link variables after every round start (LT-ADMM: the sums its
    iteration ``r tau`` starts from; ATG: those of ``y`` after every iteration)."""
    Wd = W.toarray()
    n, rho, a = len(Wd), options.get("penalty", 1.0) * Wd, options.get("relaxation", 0.5)
    links = [(i, j) for i in range(n) for j in range(n) if i != j and Wd[i, j] != 0]

    def update(z, v):  # node i receives z_ji - 2 rho_ji v_j from j
        return {(i, j): (1 - a) * z[i, j] - a * (z[j, i] - 2 * rho[j, i] * v[j]) for (i, j) in links}

    def sums(z):
        own, diff = np.zeros_like(x0), np.zeros_like(x0)
        for (i, j) in links:
            own[i] += z[i, j]
            diff[i] += z[i, j] - z[j, i]
        return own, diff

    x, xs, seen = x0.copy(), [x0.copy()], []
    if name == "lt-admm":
        tau, lr = options.get("local_steps", 4), options["lr"]
        beta = options.get("dual_step", lr)
        z = {(i, j): rho[i, j] * x[i] for (i, j) in links}
        while len(xs) <= T:
            seen.append(sums(z))
            c = np.array([sum(rho[i, j] * x[i] - z[i, j] for j in range(n) if (i, j) in z) for i in range(n)])
            for _ in range(tau):
                x = x - lr * grad(x) - beta * c
                xs.append(x.copy())
            z = update(z, x)
    else:
        lr, gamma = options["lr"], options.get("gamma", 0.1)
        zy = {k: np.zeros(x0.shape[1]) for k in links}
        zs = dict(zy)
        scale = 1.0 + (rho.sum(1) - np.diag(rho))[:, None]
        for _ in range(T):
            y = (x + sums(zy)[0]) / scale
            s = (grad(x) + sums(zs)[0]) / scale
            x = (1 - gamma) * x + gamma * y - lr * s
            zy, zs = update(zy, y), update(zs, s)
            seen.append(sums(zy))
            xs.append(x.copy())
    return xs[:T + 1], seen


@pytest.mark.parametrize("name,options", [
    ("lt-admm", {"lr": 0.05, "local_steps": 3, "penalty": 1.7, "relaxation": 0.3, "dual_step": 0.08}),
    ("lt-admm", {"lr": 0.03, "local_steps": 1}),
    ("atg", {"lr": 0.04, "penalty": 1.7, "relaxation": 0.3, "gamma": 0.6}),
    ("atg", {"lr": 0.01})])
def test_the_link_sums_are_the_per_link_method(name, options):
    """The elimination: the models and the node sums of the link variables (state blocks ``z``, ``e``; ATG's
    ``zy``, ``ey``) equal those of one variable per directed link, on an irregular graph (link weights differ)."""
    f, _ = heterogeneous(11, 2, seed=4)
    W = irregular()
    x0 = np.random.default_rng(5).standard_normal((11, 2))
    T = 60
    xs, seen = per_link(W, x0, f.full_gradient, T, name, **options)
    kwargs = {k: v for k, v in options.items() if k != "lr"}
    opt = METHODS[name](W, x0, options["lr"], **kwargs)
    z, e = ("z", "e") if name == "lt-admm" else ("zy", "ey")
    tau = options.get("local_steps", 4) if name == "lt-admm" else 1
    for t in range(1, T + 1):
        opt.step(f.full_gradient)
        np.testing.assert_allclose(opt.x, xs[t], rtol=0, atol=1e-12 * np.abs(xs[t]).max(), err_msg=f"t={t}")
        r = (t - 1) // tau if name == "lt-admm" else t - 1  # (LT-ADMM: the sums of the round iteration t is in)
        np.testing.assert_allclose(opt.gather_state(z), seen[r][0], rtol=0, atol=1e-12, err_msg=f"{z} t={t}")
        np.testing.assert_allclose(opt.gather_state(e), seen[r][1], rtol=0, atol=1e-12, err_msg=f"{e} t={t}")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_replicas_equal_the_dense_twin_replica_by_replica(name):
    f, _ = heterogeneous(11, 2, seed=1)
    W = irregular(seed=3)
    x0 = np.random.default_rng(2).standard_normal((3, 11, 2))
    opt = METHODS[name](W, x0, 0.04)
    twins = [_reference.TWINS[name](W.toarray(), x0[k], 0.04, f.full_gradient, 40) for k in range(3)]
    run(opt, f.full_gradient, 40)
    for k in range(3):
        np.testing.assert_allclose(opt.x[k], twins[k][40], rtol=1e-12, atol=1e-14)


def unweighted_decent_bench(name, A, x0, grad, T, rho, a, **p):
    """decent-bench 0.3.0's LT_ADMM / ATG as its sources write them (unweighted neighbour sums, one z_ij per link;
    LT-ADMM: z_ij,0 = x0_i, ATG: z0 = 0), transcribed for an adjacency matrix ``A``; its models after each step."""
    n = len(A)
    nb = [list(np.flatnonzero(A[i])) for i in range(n)]
    x = x0.copy()
    out = [x.copy()]
    if name == "lt-admm":
        z = {(i, j): x0[i].copy() for i in range(n) for j in nb[i]}
        for _ in range(T):
            corr = np.array([p["beta"] * (rho * len(nb[i]) * x[i] - sum(z[i, j] for j in nb[i])) for i in range(n)])
            phi = x.copy()
            for _ in range(p["tau"]):
                phi = phi - (p["gamma"] * grad(phi) + corr)
            x = phi
            msg = {(i, j): z[i, j] - 2 * rho * x[i] for (i, j) in z}  # i -> j
            z = {(i, j): (1 - a) * z[i, j] - a * msg[j, i] for (i, j) in z}
            out.append(x.copy())
    else:
        zy = {(i, j): np.zeros(x0.shape[1]) for i in range(n) for j in nb[i]}
        zs = dict(zy)
        for _ in range(T):
            pN = rho * np.array([len(nb[i]) for i in range(n)])[:, None]
            y = (x + np.array([sum(zy[i, j] for j in nb[i]) for i in range(n)])) / (1 + pN)
            s = (grad(x) + np.array([sum(zs[i, j] for j in nb[i]) for i in range(n)])) / (1 + pN)
            x = (1 - p["gamma"]) * x + p["gamma"] * (y - p["delta"] * s)
            my = {(i, j): -zy[i, j] + 2 * rho * y[i] for (i, j) in zy}
            ms = {(i, j): -zs[i, j] + 2 * rho * s[i] for (i, j) in zs}
            zy = {(i, j): (1 - a) * zy[i, j] + a * my[j, i] for (i, j) in zy}
            zs = {(i, j): (1 - a) * zs[i, j] + a * ms[j, i] for (i, j) in zs}
            out.append(x.copy())
    return out


@pytest.mark.parametrize("name", sorted(METHODS))
def test_on_scaled_weights_it_is_decent_benchs_unweighted_method(name):
    """decent-bench's form (unweighted sums, penalty rho) is ours on W = I - L / kappa with penalty kappa rho
    (LT-ADMM: at rho = 1, where both start z_ij at x0_i; ATG: lr = gamma delta); its round r is our iteration
    r tau."""
    rng = np.random.default_rng(4)
    G = topology.erdos_renyi(9, 0.4, seed=2, directed=False)
    adj = ((G.toarray() > 0) & ~np.eye(9, dtype=bool)).astype(float)
    L = np.diag(adj.sum(1)) - adj
    kappa = adj.sum(1).max() + 1
    W = MixingMatrix(np.eye(9) - L / kappa)
    f = Quadratic(rng.uniform(0.5, 2, (9, 2)), rng.standard_normal((9, 2)))
    x0 = rng.standard_normal((9, 2))
    if name == "lt-admm":
        rho, a, p = 1.0, 0.4, {"tau": 3, "gamma": 0.05, "beta": 0.03}
        ours = rf.LTADMM(W, x0, p["gamma"], local_steps=3, penalty=kappa * rho, relaxation=a, dual_step=p["beta"])
    else:
        rho, a, p = 0.7, 0.4, {"gamma": 0.3, "delta": 0.2}
        ours = rf.ATG(W, x0, p["gamma"] * p["delta"], penalty=kappa * rho, relaxation=a, gamma=p["gamma"])
    theirs = unweighted_decent_bench(name, adj, x0, f.full_gradient, 60, rho, a, **p)
    per = p.get("tau", 1)
    for r in range(1, 61):
        run(ours, f.full_gradient, per)
        np.testing.assert_allclose(ours.x, theirs[r], rtol=0, atol=1e-12, err_msg=f"round {r}")


@pytest.mark.parametrize("name,options", [("lt-admm", {"local_steps": 1}), ("lt-admm", {"local_steps": 4}),
                                          ("lt-admm", {"local_steps": 8, "penalty": 2.0}),
                                          ("atg", {"gamma": 0.5}), ("atg", {"penalty": 3.0, "relaxation": 0.7})])
def test_exact_on_heterogeneous_quadratics(name, options):
    """Local training does not bias LT-ADMM (full gradients: the fixed point's local steps stand still), and ATG
    tracks the average gradient: both reach the minimiser of (1/n) sum_i f_i to 1e-10."""
    f, x0 = heterogeneous(seed=1)
    W = topology.ring(10, directed=False, weights="metropolis")
    errors = steps_until(METHODS[name](W, x0, 0.05, **options), f.full_gradient,
                         lambda x: np.abs(x - f.minimizer).max(), 1e-10, 15000)
    assert errors[-1] < 1e-10, errors


@pytest.mark.parametrize("name", sorted(METHODS))
def test_exact_on_least_squares_against_lstsq(name):
    f = LeastSquares.synthetic(n=8, samples_per_node=20, d=5, seed=7)
    x_star = np.linalg.lstsq(f.H.reshape(-1, 5), f.y.reshape(-1), rcond=None)[0]  # (an independent solver)
    W = topology.ring(8, directed=False, weights="metropolis")
    options = {"local_steps": 5} if name == "lt-admm" else {"gamma": 0.5}
    errors = steps_until(METHODS[name](W, f.x0(), 0.05, **options), f.full_gradient,
                         lambda x: np.abs(x - x_star).max(), 1e-10, 20000)
    assert errors[-1] < 1e-10, errors


@pytest.mark.parametrize("name", sorted(METHODS))
def test_only_a_static_symmetric_network_is_taken(name):
    cls = METHODS[name]
    W = topology.ring(8, directed=False, weights="metropolis")
    x0 = np.zeros((8, 2))
    for net in (Lossy(W, 0.2, seed=1), Sleepy(W, 0.5, seed=1), Schedule([W, W]), Compressed(W, "topk", k=1)):
        assert not cls.applies_to(net)
        with pytest.raises(ValueError, match=f"^{cls.__name__}: W must be a static symmetric"):
            cls(net, x0, 0.05)
    assert cls.applies_to(W) and cls.applies_to(Lossy(W, 0.0))  # (no loss: the static matrix)
    run(cls(Lossy(W, 0.0), x0, 0.05), lambda X: X - 1.0, 3)
    directed = MixingMatrix(0.5 * np.eye(8) + 0.5 * np.roll(np.eye(8), 1, 1), stochastic="doubly")  # (a cycle)
    assert not cls.applies_to(directed)
    with pytest.raises(ValueError, match=f"^{cls.__name__}: W must be symmetric"):
        cls(directed, x0, 0.05)


def test_rounds_and_traffic():
    """LT-ADMM: one round of d values per link every tau iterations (the first sends x_0); ATG: y and s every
    iteration, 2 d values per link."""
    W = topology.ring(8, directed=False, weights="metropolis")
    f = Quadratic.random(8, 3, seed=1)
    links = 16
    lt = run(rf.LTADMM(W, np.zeros(3), 0.05, local_steps=4), f.full_gradient, 10)
    assert lt.communication_rounds == 3 and lt.samples_drawn() == 10
    assert lt.traffic() == {"messages": 3 * links, "bytes": 3 * links * 3 * 8}
    assert rf.LTADMM.iterations_for(25, options={"local_steps": 4}) == 100
    atg = run(rf.ATG(W, np.zeros(3), 0.05), f.full_gradient, 10)
    assert atg.communication_rounds == 10 and atg.traffic() == {"messages": 10 * links, "bytes": 10 * links * 6 * 8}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_saved_state_resumes_mid_round(name):
    f, x0 = heterogeneous(8, 2, seed=3)
    W = topology.ring(8, directed=False, weights="metropolis")
    options = {"local_steps": 3, "penalty": 1.5} if name == "lt-admm" else {"gamma": 0.4, "relaxation": 0.6}
    a = run(METHODS[name](W, x0, 0.05, **options), f.full_gradient, 7)
    state = a.state_dict()
    b = METHODS[name].from_state_dict(state, W=W)
    run(a, f.full_gradient, 9)
    run(b, f.full_gradient, 9)
    np.testing.assert_array_equal(a.x, b.x)


@pytest.mark.parametrize("name,options,message", [
    ("lt-admm", {"relaxation": 0.0}, "relaxation must be finite and > 0"),
    ("lt-admm", {"relaxation": 1.0}, r"relaxation must be in \(0, 1\)"),
    ("lt-admm", {"penalty": -1.0}, "penalty must be finite and > 0"),
    ("lt-admm", {"dual_step": 0.0}, "dual_step must be finite and > 0"),
    ("lt-admm", {"local_steps": 0}, "local_steps"),
    ("lt-admm", {"lr": np.nan}, "lr must be finite"),
    ("atg", {"relaxation": 1.5}, r"relaxation must be in \(0, 1\)"),
    ("atg", {"relaxation": np.inf}, "relaxation must be finite"),
    ("atg", {"penalty": 0.0}, "penalty must be finite and > 0"),
    ("atg", {"gamma": 0.0}, "gamma must be finite and > 0"),
    ("atg", {"gamma": 1.5}, r"gamma must be in \(0, 1\]"),
    ("atg", {"lr": -0.1}, "lr must be finite")])
def test_bad_hyperparameters_are_refused_by_name(name, options, message):
    W = topology.ring(6, directed=False, weights="metropolis")
    kwargs = {"lr": 0.05, **options}
    with pytest.raises(ValueError, match=message):
        METHODS[name](W, np.zeros(2), **kwargs)


# ---------------------------------------------------------------- LT-ADMM-VR: a per-sample table in the local steps
def test_lt_admm_vr_equals_its_twin_with_a_finite_sums_own_samples():
    """Five samples per node, three replicas (each its own draws), an irregular graph, 90 iterations: the dense
    twin (per-link LT-ADMM with the SAGA estimate) fed the oracle's draws, to 1e-12; samples drawn = the table's
    m, then two per iteration."""
    from rowstoch_fast.objectives import draw_samples

    f = LeastSquares.synthetic(n=11, samples_per_node=5, d=2, seed=2)
    W = irregular()
    x0 = np.random.default_rng(1).standard_normal((3, 11, 2))
    options = {"local_steps": 3, "penalty": 1.7, "relaxation": 0.3, "dual_step": 0.04}
    opt = rf.LTADMMVR(W, x0, 0.03, **options)
    oracle = f.oracle(seed=4)
    xs = _reference.lt_admm_vr(W.toarray(), x0, 0.03, None, 90, sample_grad=f.sample_gradient, samples=5,
                               draw=lambda k: draw_samples(5, (3, 11), k, 4), **options)
    for k in range(1, 91):
        opt.step(oracle)
        assert np.abs(opt.x - xs[k]).max() / np.abs(xs[k]).max() < 1e-12, k
    assert opt.samples_drawn() == 5 + 2 * 90 and opt.communication_rounds == 30


def test_lt_admm_vr_is_exact_where_sampled_lt_admm_stalls():
    """One sampled gradient per node and local step: LT-ADMM-VR reaches the least-squares minimiser (an independent
    solver) to 1e-10; LT-ADMM fed the same kind of one-sample gradients stays at its noise floor."""
    f = LeastSquares.synthetic(n=8, samples_per_node=6, d=3, seed=5, batch=1)
    x_star = np.linalg.lstsq(f.H.reshape(-1, 3), f.y.reshape(-1), rcond=None)[0]
    W = topology.ring(8, directed=False, weights="metropolis")
    vr, plain = rf.LTADMMVR(W, f.x0(), 0.03, local_steps=4), rf.LTADMM(W, f.x0(), 0.03, local_steps=4)
    run(vr, f.oracle(seed=1), 12000)
    run(plain, f.oracle(seed=1), 12000)
    assert np.abs(vr.x - x_star).max() < 1e-10
    assert np.abs(plain.x - x_star).max() > 1e-4


def test_lt_admm_vr_resumes_mid_round_with_its_table():
    f = LeastSquares.synthetic(n=8, samples_per_node=4, d=2, seed=3)
    W = topology.ring(8, directed=False, weights="metropolis")
    a = rf.LTADMMVR(W, f.x0(), 0.05, local_steps=3)
    oracle_a = f.oracle(seed=2)
    run(a, oracle_a, 7)
    b = rf.LTADMMVR.from_state_dict(a.state_dict(), W=W)
    oracle_b = f.oracle(seed=2)
    for _ in range(7):  # (the oracle's draws follow its calls: b's at a's)
        oracle_b.sample(np.zeros((8, 2)))
    run(a, oracle_a, 9)
    run(b, oracle_b, 9)
    np.testing.assert_array_equal(a.x, b.x)


def test_lt_admm_vr_refuses_what_it_cannot_run():
    W = topology.ring(6, directed=False, weights="metropolis")
    with pytest.raises(TypeError, match="per-sample oracle"):
        run(rf.LTADMMVR(W, np.zeros(2), 0.05), lambda X: X, 1)
    with pytest.raises(ValueError, match=r"relaxation must be in \(0, 1\)"):
        rf.LTADMMVR(W, np.zeros(2), 0.05, relaxation=1.0)
    with pytest.raises(ValueError, match="dual_step must be finite and > 0"):
        rf.LTADMMVR(W, np.zeros(2), 0.05, dual_step=-1.0)
    with pytest.raises(ValueError, match="^LTADMMVR: W must be a static symmetric"):
        rf.LTADMMVR(Lossy(W, 0.2, seed=1), np.zeros(2), 0.05)


def test_admm_refuses_a_node_without_a_neighbour_under_any_layer_and_leaves_the_defaults():
    """ADMM divides by ``d_i = 1 - w_ii``: a plain matrix with a node alone was refused, the same matrix under
    losses, delays or noise, or a schedule whose first matrix left a node alone, ran into NaN at iteration 2 and
    blamed the rate; ``rowstoch compare --n 1`` ended in ADMM's refusal (helper 134)."""
    from rowstoch_fast.compare import default_algorithms
    from rowstoch_fast.network import Delayed, Noisy

    f = Quadratic(np.ones((1, 2)), np.array([[1.0, 2.0]]))
    one = topology.complete(1)
    for net in (one, Delayed(one, 1), Lossy(one, 0.1), Noisy(one, 0.0)):
        with pytest.raises(ValueError, match="ADMM needs every node to have a neighbour .*a single node has none"):
            rf.ADMM(net, np.zeros(2), lr=0.1)
        assert "admm" not in default_algorithms(net, f), net
    W = topology.ring(4, directed=False, weights="metropolis")
    alone = MixingMatrix(np.array([[1, 0, 0, 0], [0, .5, .5, 0], [0, .5, 0, .5], [0, 0, .5, .5]]), stochastic="doubly",
                        validate=False)
    with pytest.raises(ValueError, match="node 0 has w_ii = 1 in its matrix"):
        rf.ADMM(Schedule([alone, W]), np.zeros(2), lr=0.1)
    g = Quadratic.random(4, 2, seed=0)
    assert "admm" in default_algorithms(W, g) and "admm" not in default_algorithms(Schedule([alone, W]), g)
