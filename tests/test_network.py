"""Time-varying and unreliable networks (rowstoch_fast.network): the protocol, stochasticity, edges, losses."""

import numpy as np
import pytest
from conftest import cli_resumes_like_one_run, csr_and_block, feed
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast import MixingMatrix, topology
from rowstoch_fast.network import Lossy, Schedule, Sleepy, base_matrix, one_peer_exponential, uniform_hash
import rowstoch_fast as rf
from rowstoch_fast import network


def _networks():
    A = topology.erdos_renyi(30, 0.15, seed=1)
    C = topology.erdos_renyi(30, 0.15, seed=1, stochastic="column")
    noself = MixingMatrix.from_edges(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)], self_loops=False)
    return {
        "static": A,
        "schedule": Schedule([A, topology.ring(30), topology.exponential(30)]),
        "one-peer": one_peer_exponential(30),
        "lossy": Lossy(A, 0.3, seed=2),
        "lossy-schedule": Lossy(Schedule([A, topology.exponential(30)]), 0.4, seed=3),
        "bursty": Lossy(A, 0.9, seed=4, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
        "sleepy": Sleepy(A, 0.7, seed=5),
        "sleepy-lossy": Sleepy(Lossy(A, 0.2, seed=6), 0.8, seed=7),
        "sleepy-no-self-loops": Sleepy(noself, 0.5, seed=8),
        "lossy-column": Lossy(C, 0.3, seed=9),
        "sleepy-column": Sleepy(C, 0.6, seed=12),
        "sleepy-lossy-column": Sleepy(Lossy(C, 0.2, seed=10), 0.7, seed=11),
        "one-peer-column": one_peer_exponential(30, stochastic="column"),
    }


NETWORKS = _networks()


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_rounds_are_stochastic_on_the_base_edges_and_mix_applies_them(name):
    net = NETWORKS[name]
    rng = np.random.default_rng(0)
    X = rng.standard_normal((net.n, 3))
    for t in (0, 1, 7, 40):
        M = net.matrix(t).csr
        assert (M.data >= 0).all()
        sums = np.asarray(M.sum(axis=1 if net.stochastic == "row" else 0)).ravel()
        if name in ("lossy-column", "sleepy-column", "sleepy-lossy-column"):  # a sender's lost mass is lost
            assert (sums <= 1 + 1e-15).all()
        else:
            np.testing.assert_allclose(sums, 1.0, atol=1e-15)
        np.testing.assert_allclose(net.mix(X, t), M @ X, rtol=1e-14, atol=1e-14)
        two = net.matrix(t, 1).csr @ (net.matrix(t, 0).csr @ X)
        np.testing.assert_allclose(net.mix(X, t, rounds=2), two, rtol=1e-14, atol=1e-14)
    if hasattr(net, "base") and isinstance(net.base, MixingMatrix):  # only edges of the base graph (+ self loops)
        allowed = (net.base.csr != 0).toarray() | np.eye(net.n, dtype=bool)
        for t in range(5):
            assert not ((net.matrix(t).toarray() != 0) & ~allowed).any()


@pytest.mark.parametrize("name", ["lossy", "lossy-schedule", "bursty", "sleepy", "sleepy-lossy",
                                  "sleepy-no-self-loops"])
def test_ones_stay_ones_exactly_where_a_round_renormalises(name):
    """A row that lost messages sums what arrived once, in one order, for numerator and denominator: all ones
    give exactly ones; a row that lost nothing is the static row, bit for bit."""
    net = NETWORKS[name]
    ones = np.ones((net.n, 2))
    renormalised = 0
    for t in range(20):
        base = net.base.matrix(t) if isinstance(net.base, Schedule) else base_matrix(net)  # under the wrappers
        Y = net.mix(ones, t)
        static = base.mix(ones)
        M = net.matrix(t).csr
        changed = np.array([not np.array_equal(M[[i]].toarray(), base.csr[[i]].toarray()) for i in range(net.n)])
        assert (Y[changed] == 1.0).all()
        assert np.array_equal(Y[~changed], static[~changed])
        renormalised += changed.sum()
    assert renormalised > 0


def test_p_zero_and_q_one_are_the_static_network_bit_for_bit():
    A = NETWORKS["static"]
    X = np.random.default_rng(1).standard_normal((A.n, 4))
    for net in (Lossy(A, 0.0, seed=1), Sleepy(A, 1.0, seed=1)):
        for t in range(5):
            assert np.array_equal(net.mix(X, t, rounds=2), A.mix_power(X, 2))
            assert net.matrix(t) is A


def test_lossy_rows_are_renormalised_over_what_arrived():
    A = topology.exponential(16)
    net = Lossy(A, 0.5, seed=11)
    X = np.random.default_rng(2).standard_normal((16, 2))
    Y = net.mix(X, 3)
    lost = net.matrix(3).csr
    for i in range(16):
        arrived = A.csr[[i]].indices[np.isin(A.csr[[i]].indices, lost[[i]].indices)]
        a = A.csr[[i]].toarray().ravel()[arrived]
        np.testing.assert_allclose(Y[i], (a[:, None] * X[arrived]).sum(0) / a.sum(), rtol=1e-14)
    assert (lost.diagonal() > 0).all()  # the self loop always arrives


def test_loss_frequency_matches_p():
    A = topology.erdos_renyi(40, 0.3, seed=3)
    off = A.nnz - A.n
    p = 0.3
    net = Lossy(A, p, seed=5)
    lost = sum(off - (net.matrix(t, r).nnz - A.n) for t in range(30) for r in range(2))
    m = 60 * off
    assert abs(lost / m - p) < 4 * np.sqrt(p * (1 - p) / m)  # 4 standard deviations of the binomial


def test_bursty_losses_come_in_bursts():
    """Gilbert-Elliott: the same mean loss as a Bernoulli channel but correlated from round to round."""
    A = topology.complete(12)
    ge = Lossy(A, 1.0 - 1e-12, seed=1, model="gilbert-elliott", p_bad=0.1, p_recover=0.1)
    lost = np.array([(ge.matrix(t).toarray() == 0) for t in range(300)])[:, ~np.eye(12, dtype=bool)]
    assert abs(lost.mean() - 0.5) < 0.1
    repeat = (lost[1:] == lost[:-1]).mean()
    assert repeat > 0.8  # a Bernoulli(0.5) channel repeats its state half the time


def test_sleeping_nodes_keep_their_values_and_do_not_send():
    A = topology.exponential(16)
    net = Sleepy(A, 0.5, seed=3)
    X = np.random.default_rng(4).standard_normal((16, 2))
    for t in range(10):
        awake = net.awake(t)
        Y = net.mix(X, t)
        np.testing.assert_array_equal(Y[~awake], X[~awake])
        M = net.matrix(t).toarray()
        assert (M[np.ix_(awake, ~awake)] == 0).all()
    assert 0.3 < np.mean([net.awake(t).mean() for t in range(50)]) < 0.7


def test_one_peer_exponential_pattern():
    net = one_peer_exponential(10)  # ceil(log2 10) = 4 matrices: hops 1, 2, 4, 8
    assert len(net.matrices) == 4
    for t in range(8):
        M = net.matrix(t).toarray()
        h = 2 ** (t % 4)
        for i in range(10):
            assert M[i, i] == 0.5 and M[i, (i - h) % 10] == 0.5 and (M[i] > 0).sum() == 2


def test_draws_are_counter_based():
    u = uniform_hash(3, np.arange(5), 7)
    assert np.array_equal(u, uniform_hash(3, np.arange(5), 7)) and ((0 <= u) & (u < 1)).all()
    assert not np.array_equal(u, uniform_hash(4, np.arange(5), 7))


_KEY = st.one_of(st.integers(-2**63, 2**64 - 1), st.booleans(),
                 st.integers(-2**63, 2**63 - 1).map(np.int64), st.integers(0, 2**64 - 1).map(np.uint64),
                 st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=4).map(np.array))


@settings(max_examples=200, deadline=None)
@given(st.lists(_KEY, min_size=1, max_size=6))
def test_the_hash_chain_equals_chaining_every_key_as_a_uint64_array(keys):
    """The leading integer scalars are chained as Python ints (a draw a step cost NumPy's per-call time on each):
    the same bits, shape and dtype as the definition, every key cast to uint64 (negatives wrap) and chained in
    NumPy, whatever keys are scalars, NumPy scalars or arrays, in any order."""
    from rowstoch_fast import _hashing

    shapes = [np.shape(k) for k in keys if np.ndim(k)]
    if len({s for s in shapes}) > 1:  # (arrays of different lengths do not broadcast: one length a case)
        keys = [k if not np.ndim(k) else np.resize(k, shapes[0]) for k in keys]
    with np.errstate(over="ignore"):
        want = np.uint64(0x243F6A8885A308D3)
        for k in keys:
            want = _hashing._mix64(np.asarray(want, dtype=np.uint64) ^ np.asarray(k).astype(np.uint64))
    got = _hashing._chain(*keys)
    assert np.asarray(got).dtype == np.uint64 and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)
    a, b = Lossy(NETWORKS["static"], 0.3, seed=2), NETWORKS["lossy"]
    X = np.ones((30, 1)) * np.arange(30)[:, None]
    assert np.array_equal(a.mix(X, 9, rounds=3), b.mix(X, 9, rounds=3))  # a fresh object: the same losses


def test_clear_errors():
    A = topology.ring(8)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        Lossy(A, 1.0)
    with pytest.raises(ValueError, match="needs p_bad and p_recover"):
        Lossy(A, 0.5, model="gilbert-elliott")
    with pytest.raises(ValueError, match="model must be"):
        Lossy(A, 0.5, model="erasure")
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\]"):
        Sleepy(A, 1.5)
    with pytest.raises(ValueError, match="same n"):
        Schedule([A, topology.ring(9)])
    with pytest.raises(ValueError, match="row-stochastic"):
        Schedule([np.ones((3, 3))])
    with pytest.raises(TypeError, match="X must be a numeric array"):
        Lossy(A, 0.1).mix(np.array([["a"]] * 8), 0)
    with pytest.raises(ValueError, match="X has 7 rows but the network has 8 nodes"):
        Sleepy(A, 0.5).mix(np.ones((7, 2)), 0)
    with pytest.raises(ValueError, match=r"out must have shape \(8, 2\)"):
        Lossy(A, 0.1).mix(np.ones((8, 2)), 0, out=np.empty((8, 3)))
    with pytest.raises(ValueError, match=r"matrices\[1\]"):
        Schedule([A, "x"])
    with pytest.raises(TypeError, match="A must be a MixingMatrix, a network"):
        Lossy("abc", 0.1)
    with pytest.raises(TypeError, match="pass out as a keyword"):
        A.mix(np.ones((8, 1)), np.empty((8, 1)))
    assert A.matrix(5) is A and np.array_equal(A.mix(np.ones(8), 3, rounds=2), A.mix_power(np.ones(8), 2))
    # counters and seeds are 64-bit hash keys, iterations below 2^60 (the sleep and burst draws' keys lie above)
    with pytest.raises(ValueError, match=r"t must be <= 2\^60 - 1, got 1152921504606846976"):
        Lossy(A, 0.1).mix(np.ones((8, 2)), 2**60)
    with pytest.raises(ValueError, match=r"t must be <= 2\^60 - 1"):
        Sleepy(A, 0.5).matrix(2**64)
    with pytest.raises(ValueError, match=r"seed must be <= 2\^64 - 1"):
        Lossy(A, 0.1, seed=2**64)
    Lossy(A, 0.1, seed=2**64 - 1).mix(np.ones((8, 2)), 2**60 - 1)  # the largest keys work
    with pytest.raises(TypeError, match="the matrices of a Schedule must have one dtype, got float32, float64"):
        Schedule([A, A.astype(np.float32)])  # a float32 round in a float64 run mixed with rounded weights


# ---------------------------------------------------------------- the optimizers on a varying network
from functools import reduce  # noqa: E402

from rowstoch_fast import PullDiagGT, _reference  # noqa: E402
from rowstoch_fast.algorithms import REGISTRY  # noqa: E402
from conftest import for_algorithm  # noqa: E402
from rowstoch_fast.mixing import out_degree_weights  # noqa: E402


def _dense_iteration(net, rounds):
    return lambda t: reduce(lambda M, r: net.matrix(t, r).toarray() @ M, range(rounds), np.eye(net.n))


@pytest.mark.parametrize("name", ["schedule", "one-peer", "lossy", "lossy-schedule", "bursty", "sleepy-lossy"])
@pytest.mark.parametrize("rounds", [1, 3])
def test_pull_diag_gt_on_a_varying_network_follows_the_dense_equations(name, rounds):
    net = NETWORKS[name]
    rng = np.random.default_rng(3)
    b = rng.standard_normal((net.n, 2))
    grad = lambda X: X - b  # noqa: E731
    x0 = rng.standard_normal((net.n, 2))
    opt = PullDiagGT(net, x0, lr=0.02, rounds=rounds)
    xs = [opt.gather_x()]
    for _ in range(25):
        opt.step(grad)
        xs.append(opt.gather_x())
    want, ys = _reference.pull_diag_gt_varying(_dense_iteration(net, rounds), x0, 0.02, grad, 25)
    scale = max(1.0, max(np.abs(ref).max() for ref in want))  # heavy losses make 1/diag(V_t) and the iterates grow
    for got, ref in zip(xs, want):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(opt.gather_y(), ys[-1], rtol=1e-12, atol=1e-12 * scale)  # (y -> 0: cancellation)


@pytest.mark.parametrize("name", ["schedule", "one-peer", "lossy", "bursty", "sleepy", "sleepy-lossy"])
@pytest.mark.parametrize("method", ["dsgd", "frost", "pull-diag-gd", "push-pull", "push-diging", "sgp"])
def test_every_method_on_a_varying_network_follows_its_dense_equations(method, name):
    """Each baseline on truly varying networks (losses, sleep, schedules) against its dense transcription with
    the matrices of each iteration (``_reference``, the column-stochastic ones for the push methods: the same
    losses and sleep over out-degree weights); the trackers of FROST and Pull-Diag-GD are diag(A_k ... A_0)."""
    net = NETWORKS[name]
    cls = REGISTRY[method]
    rounds = 2 if cls.multi_round else 1
    rng = np.random.default_rng(11)
    b = rng.standard_normal((net.n, 2))
    grad = lambda X: X - b  # noqa: E731
    x0 = rng.standard_normal((net.n, 2))
    mats = cls.problem_matrices(net)
    opt = cls.build(net, x0, 0.02, rounds=rounds)
    xs = [opt.gather_x()]
    for _ in range(25):
        opt.step(grad)
        xs.append(opt.gather_x())
    of = {k: _dense_iteration(M, rounds) for k, M in mats.items()}
    reference = {"dsgd": lambda: _reference.dsgd(of["A"], x0, 0.02, grad, 25),
                 "frost": lambda: _reference.frost(of["A"], x0, 0.02, grad, 25),
                 "pull-diag-gd": lambda: _reference.pull_diag_gd(of["A"], x0, 0.02, grad, 25),
                 "push-pull": lambda: _reference.push_pull(of["A"], of["C"], x0, 0.02, grad, 25),
                 "push-diging": lambda: _reference.push_diging(of["C"], x0, 0.02, grad, 25),
                 "sgp": lambda: _reference.sgp(of["C"], x0, 0.02, grad, 25)}[method]()
    scale = max(1.0, max(np.abs(ref).max() for ref in reference))
    for t, (got, ref) in enumerate(zip(xs, reference)):
        np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-11 * scale, err_msg=f"iteration {t}")


def test_a_network_that_never_changes_runs_as_its_matrix_bit_for_bit():
    A = NETWORKS["static"]
    x0 = np.random.default_rng(4).standard_normal((A.n, 3))
    runs = []
    for net in (A, Lossy(A, 0.0, seed=3), Sleepy(Lossy(A, 0.0), 1.0), Schedule([A])):
        opt = PullDiagGT(net, x0, lr=0.05, rounds=2)
        for _ in range(20):
            opt.step(lambda X: X - 1.0)
        runs.append(opt.gather_x())
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_algorithm_runs_on_a_varying_network(name):
    """Schedule([A, A]) is A at every iteration but goes through the network path: the static run to 1e-12 (an
    undirected method's W too: a schedule of doubly stochastic matrices)."""
    cls = REGISTRY[name]
    A = NETWORKS["static"]
    x0 = np.random.default_rng(5).standard_normal((A.n, 2))
    mats = cls.problem_matrices(for_algorithm(cls, A))
    varying = {k: Schedule([M, M]) if isinstance(M, MixingMatrix) else M for k, M in mats.items()}
    rounds = {"rounds": 2} if cls.multi_round else {}
    if not all(cls.applies_to(v) for k, v in varying.items() if k in cls.matrices):  # a static W only, or a
        # fixed set of links (running sums): refused at once, naming the algorithm and the matrix
        with pytest.raises(ValueError, match=f"^{cls.__name__}: [WCA] must be a static"):
            cls(**varying, x0=x0, lr=0.03, **rounds)
        return
    a = cls(**mats, x0=x0, lr=0.03, **rounds)
    b = cls(**varying, x0=x0, lr=0.03, **rounds)
    assert not b._static or not any(isinstance(M, MixingMatrix) for M in mats.values())
    fa, fb = feed(cls, lambda X: X - 0.5), feed(cls, lambda X: X - 0.5)  # (GT-SAGA: an oracle each)
    for _ in range(30):
        a.step(fa)
        b.step(fb)
    np.testing.assert_allclose(b.gather_x(), a.gather_x(), rtol=1e-12, atol=1e-12)


def test_column_algorithms_under_loss_lose_mass():
    """Push-sum under message loss (the honest model): SGP's weights no longer sum to n."""
    C = out_degree_weights(NETWORKS["static"])
    opt = REGISTRY["sgp"](C=Lossy(C, 0.3, seed=1), x0=np.ones((30, 1)), lr=0.01)
    for _ in range(10):
        opt.step(lambda X: X * 0)
    assert opt.gather_state("w").sum() < 30 - 1e-6


@pytest.mark.parametrize("name,rounds", [("sgp", 1), ("push-diging", 2)])
def test_push_sum_weights_follow_every_round_of_a_varying_network(name, rounds):
    """Push-sum weights stop being mixed once a step leaves them unchanged, which on a static matrix means a
    fixed point; on a sleepy network a round where every node sleeps left them unchanged too, and they were
    frozen from then on (wrong weights for the rest of the run). Now they are C_t ... C_0 1 at every step."""
    C = out_degree_weights(topology.exponential(8))
    net = Sleepy(C, 0.05, seed=1)  # every node asleep in some of the first rounds
    opt = REGISTRY[name](C=net, x0=np.zeros((8, 1)), lr=0.01, **({"rounds": rounds} if rounds > 1 else {}))
    w, weights = np.ones(8), "w" if name == "sgp" else "v"
    unchanged = 0
    for t in range(40):
        opt.step(lambda X: X - 1.0)
        before = w
        for r in range(rounds):
            w = net.matrix(t, r).toarray() @ w
        unchanged += np.array_equal(w, before)
        np.testing.assert_array_equal(opt.gather_state(weights)[:, 0], w)
    assert unchanged and not opt._weights.frozen
    static = REGISTRY[name](C=C, x0=np.zeros((8, 1)), lr=0.01)
    for _ in range(200):
        static.step(lambda X: X - 1.0)
    assert static._weights.frozen  # on the static matrix they still freeze


def test_resume_mid_run_with_losses_is_bit_identical():
    net = Lossy(Schedule([NETWORKS["static"], topology.exponential(30)]), 0.3, seed=8)
    x0 = np.random.default_rng(6).standard_normal((30, 2))
    grad = lambda X: np.sin(X) + X  # noqa: E731
    whole = PullDiagGT(net, x0, lr=0.02, rounds=2)
    first = PullDiagGT(net, x0, lr=0.02, rounds=2)
    for _ in range(12):
        whole.step(grad)
    for _ in range(5):
        first.step(grad)
    state = {k: np.array(v) for k, v in first.state_dict().items()}
    with pytest.raises(ValueError, match="pass that network again"):
        PullDiagGT.from_state_dict(state)
    resumed = PullDiagGT.from_state_dict(state, A=Lossy(Schedule([NETWORKS["static"], topology.exponential(30)]),
                                                           0.3, seed=8))
    for _ in range(7):
        resumed.step(grad)
    assert np.array_equal(resumed.gather_x(), whole.gather_x())


def test_varying_networks_refuse_what_they_cannot_do():
    net = NETWORKS["lossy"]
    with pytest.raises(ValueError, match="needs a static network"):
        PullDiagGT(net, np.zeros(2), lr=0.1, tracker="perron")
    with pytest.raises(ValueError, match="column-stochastic network"):
        REGISTRY["sgp"](C=net, x0=np.zeros(2), lr=0.1)
    with pytest.raises(MemoryError, match="SGP or Push-DIGing"):
        from rowstoch_fast.tracker import NetworkTracker

        NetworkTracker(net, max_bytes=100)


def test_bursty_chains_in_compiled_code_equal_numpys():
    """The Gilbert-Elliott states _core.ge_advance keeps (sequentially, jumping ahead, or going back) are those
    the NumPy definition gives at every iteration; p is the loss in the bad state (0: never, 1: always)."""
    A = topology.erdos_renyi(25, 0.3, seed=9)
    c = A.csr
    rows = np.repeat(np.arange(25), np.diff(c.indptr))
    for p in (0.0, 0.6, 1.0):
        net = Lossy(A, p, seed=3, model="gilbert-elliott", p_bad=0.3, p_recover=0.2)
        for t in (0, 1, 2, 7, 3, 12):
            compiled = net.bad_states(c.indptr, c.indices, t).astype(bool)
            numpy = _reference.gilbert_elliott_states(3, rows, c.indices.astype(np.int64), t, 0.3, 0.2)
            assert np.array_equal(compiled, numpy), (p, t)
        X = np.random.default_rng(1).standard_normal((25, 2))
        np.testing.assert_allclose(net.mix(X, 5, rounds=2), _numpy_mix(net, X, 5, 2), rtol=1e-14, atol=1e-15)
    assert Lossy(A, 0.0, seed=1, model="gilbert-elliott", p_bad=0.5, p_recover=0.5).matrix(3).nnz == A.nnz
    assert Lossy(A, 1.0, seed=1, model="gilbert-elliott", p_bad=1.0, p_recover=1e-9).matrix(3).nnz == A.n


def _numpy_mix(net, X, t, rounds):
    """The NumPy definition of a network's rounds (what the compiled pass must equal)."""
    from rowstoch_fast.network import _mix_entries

    Y = X
    for r in range(rounds):
        Y = _mix_entries(*net._entries(t, r), Y, net.stochastic)
    return Y


def test_the_robustness_experiment_at_a_tiny_size(tmp_path):
    """rowstoch reproduce robustness' protocol: tuned rates without loss, then every loss setting, one table."""
    from rowstoch_fast.experiments import reproduce_robustness

    lines = []
    table = reproduce_robustness(str(tmp_path), rounds_budget=40, repeats=2, losses=(0.0, 0.3), mg_rounds=2,
                                 algorithms=("pull-diag-gt", "mg-pull-diag-gt", "sgp"), progress=False, total=12800,
                                 log=lines.append, data_seed=5)
    assert len(table) == 2 * 3 * 3  # graphs x (2 Bernoulli + bursty) x algorithms
    assert (table["data_seed"] == 5).all() and (table["seed"] == 0).all()  # (a --data-seed run left no trace)
    assert "the synthetic problem's data seed 5, seed 0" in lines
    assert set(table["setting"]) == {"p = 0", "p = 0.3", "bursty (p_bad = 0.05, p_recover = 0.2)"}
    assert np.isfinite(table["grad_norm"]).all()
    assert ((table["grad_norm_min"] <= table["grad_norm"]) & (table["grad_norm"] <= table["grad_norm_max"])).all()
    assert (tmp_path / "robustness.csv").exists() and (tmp_path / "robustness.png").exists()


def test_error_bars_stay_within_the_repeats_range():
    """robustness.png's and kgt_local_steps.png's bars were mean +- sd: on their log panels mean - sd of
    (0.05, 0.26, 0.05) fell below zero, to the panel's floor, decades below every repeat."""
    from rowstoch_fast.experiments._common import error_bars

    finals = np.array([0.05, 0.26, 0.05])
    mean, sd = finals.mean(), finals.std(ddof=1)
    assert mean - sd < 0
    low, high = error_bars([mean], [sd], [finals.min()], [finals.max()])[:, 0]
    assert mean - low == finals.min() and high == pytest.approx(sd)  # (mean + sd = 0.24 < 0.26: kept)
    np.testing.assert_array_equal(error_bars([1.0, np.nan], [np.nan, 0.5], [0.5, 0.1], [2.0, 0.9]), np.zeros((2, 2)))
    np.testing.assert_allclose(error_bars([1.0], [0.2], [0.9], [1.05]), [[0.1], [0.05]])


def test_a_reproduction_s_figure_crosses_out_the_runs_that_did_not_end_ok(tmp_path, monkeypatch):
    """robustness.png and communication.png drew a diverged or stalled run's last record as a final value like
    any other (28 of 100 points at a short budget)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rowstoch_fast.experiments import _common

    fig, axes = plt.subplots(1, 2, squeeze=False)
    for ax in axes[0]:
        ax.plot([0.0, 0.1, 0.3], [1e-3, 2e-3, 0.4], marker="o", label="sgp")
    _common.mark_failed(axes[0, 1], [0.0, 0.1, 0.3], [1e-3, 2e-3, 0.4], ["ok", "ok", "diverged"])
    _common.mark_failed(axes[0, 0], [0.0, 0.1, 0.3], [1e-3, 2e-3, 0.4], ["ok", "ok", "ok"])
    monkeypatch.setattr(plt, "close", lambda fig: None)  # (to read the figure after it is saved)
    _common._finish(plt, fig, axes, str(tmp_path), "marked.png", lambda *a: None)
    crosses = [line for ax in axes[0] for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [0.3] and list(crosses[0].get_ydata()) == [0.4]
    # (below the panels, where it covers none: on the first panel it had covered its upper right, helper 246)
    assert axes[0, 0].get_legend() is None
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["sgp", "did not end ok (the CSV's status)"]
    legend = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    assert all(legend.y1 <= ax.get_tightbbox(fig.canvas.get_renderer()).y0 + 1 for ax in axes.flat)
    plt.close(fig)


def test_the_robustness_experiment_writes_what_finished_before_an_error(tmp_path, monkeypatch):
    import pandas as pd

    from rowstoch_fast import compare as cmp
    from rowstoch_fast import network
    from rowstoch_fast.experiments import reproduce_robustness

    real = cmp.compare

    def broken(A, *args, **kwargs):  # (the lossy setting's evaluation fails; every evaluation was planned first)
        if isinstance(A, network.Lossy):
            raise OSError("the network module went away")
        return real(A, *args, **kwargs)

    monkeypatch.setattr(cmp, "compare", broken)
    with pytest.raises(OSError, match="went away"):
        reproduce_robustness(str(tmp_path), rounds_budget=40, repeats=1, losses=(0.0, 0.3), mg_rounds=2,
                             algorithms=("pull-diag-gt", "sgp"), progress=False, total=12800, log=lambda *a: None)
    table = pd.read_csv(tmp_path / "robustness.csv")
    assert set(table["setting"]) == {"p = 0"} and len(table) == 2  # the first graph's lossless setting


def test_the_runner_resumes_a_lossy_run_from_its_checkpoint(tmp_path):
    from rowstoch_fast import Algorithm, run
    from rowstoch_fast.objectives import Quadratic

    net = Lossy(topology.exponential(16), 0.2, seed=3)
    f = Quadratic.random(16, 3, seed=0, sigma=0.1)
    whole = run(Algorithm(net, 0.01), f, 60, record_every=20, progress=False)
    ck = str(tmp_path / "ck.npz")
    run(Algorithm(net, 0.01), f, 30, record_every=10, progress=False, checkpoint=ck)
    resumed = run(Algorithm(net, 0.01), f, 60, record_every=20, progress=False, resume=ck)
    last = lambda h: h.frame[h.frame["iteration"] == 60][["grad_norm", "loss", "consensus_error"]].values  # noqa
    assert np.array_equal(last(resumed), last(whole))


@pytest.mark.parametrize("name", ["lossy", "lossy-schedule", "sleepy", "sleepy-lossy", "sleepy-no-self-loops",
                                  "lossy-column", "sleepy-column", "sleepy-lossy-column", "one-peer", "one-peer-column",
                                  "bursty"])
def test_the_compiled_pass_equals_the_numpy_path(name):
    """Lossy and Sleepy mixing in _core.mix_lossy gives what the NumPy definition gives (Network.mix over the
    round's weights): the same losses, the same renormalisation."""
    net = NETWORKS[name]
    X = np.random.default_rng(7).standard_normal((net.n, 3))
    for t in range(6):
        np.testing.assert_allclose(net.mix(X, t, rounds=2), _numpy_mix(net, X, t, 2), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("p, awake", [(0.1, False), (0.0, True), (0.1, True)])
def test_the_compiled_pass_in_float32(p, awake):
    """Each case of the pass (losses only, sleep only, both) in float32: the float64 result to float32 precision
    and the same losses (rows that lost nothing are the static row's bits, renormalised rows keep ones ones)."""
    from rowstoch_fast import _core

    c = topology.erdos_renyi(40, 0.2, seed=3).csr
    mask = (np.arange(40) % 5 != 0).astype(np.uint8) if awake else None
    X = np.random.default_rng(1).standard_normal((40, 3))

    def run(X, data, lossy=True):
        if not lossy:
            return _core.mix(c.indptr, c.indices, data, X)
        return _core.mix_lossy(c.indptr, c.indices, data, X, None, seed=5, t=1, r=0, p=p, awake=mask)

    data32, X32 = c.data.astype(np.float32), X.astype(np.float32)
    Y64, Y32 = run(X, c.data), run(X32, data32)
    assert Y32.dtype == np.float32
    np.testing.assert_allclose(Y32, Y64, rtol=1e-5, atol=1e-5)
    changed = (Y64 != run(X, c.data, lossy=False)).any(axis=1)
    assert changed.any() and not changed.all()
    np.testing.assert_array_equal(Y32[~changed], run(X32, data32, lossy=False)[~changed])
    ones = np.ones((40, 2), np.float32)
    assert (run(ones, data32)[changed] == 1).all()


def test_rowstoch_run_on_an_unreliable_network(tmp_path, capsys):
    """rowstoch run --loss / --awake: runs, resumes from a checkpoint bit for bit, refuses bad options in one line."""
    import pandas as pd

    from rowstoch_fast import cli

    base = ["run", "--n", "16", "--objective", "quadratic", "--loss", "0.2", "--awake", "0.9", "--network-seed", "3",
            "--record-every", "10", "--no-progress"]
    ck, a = cli_resumes_like_one_run(base, tmp_path)
    static = ["run", "--n", "16", "--objective", "quadratic", "--iterations", "40", "--record-every", "10",
              "--no-progress", "--out", str(tmp_path / "s")]
    assert cli.main(static) == 0
    assert not np.array_equal(pd.read_csv(tmp_path / "s" / "history.csv")["grad_norm"].values[-1:],
                              a["grad_norm"].values[-1:])  # the losses changed the run
    capsys.readouterr()
    for bad, message in ((["--loss", "1.5"], "--loss must be in [0, 1)"),
                         (["--loss-model", "gilbert-elliott", "--loss", "0.5"], "needs --p-bad and --p-recover"),
                         (["--awake", "0"], "--awake must be in (0, 1]"),
                         (["--activation", "markov", "--p-sleep", "0.2"], "--activation markov needs --p-wake"),
                         (["--activation", "cyclic"], "--activation cyclic needs --period"),
                         (["--rate", "0.5"], "--rate goes with --activation poisson"),
                         (["--activation", "poisson", "--rate", "-1"], "--rate must be a finite number > 0"),
                         (["--activation", "cyclic", "--period", "2", "--awake", "0.5"],
                          "--awake goes with --activation bernoulli, not cyclic")):
        assert cli.main(["run", "--out", str(tmp_path / "x")] + bad) == 2
        assert message in capsys.readouterr().err
    # an activation model: runs, resumes bit for bit, and is what the checkpoint identifies
    markov = ["run", "--n", "16", "--objective", "quadratic", "--activation", "markov", "--p-sleep", "0.3",
              "--p-wake", "0.5", "--network-seed", "3", "--record-every", "10", "--no-progress"]
    ck, _ = cli_resumes_like_one_run(markov, tmp_path, "markov")
    other = [v if v != "0.5" else "0.6" for v in markov]
    assert cli.main(other + ["--iterations", "40", "--resume", ck, "--out", str(tmp_path / "m3")]) == 2
    assert "p_wake" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["lossy", "sleepy-lossy", "bursty", "one-peer", "sleepy-lossy-column"])
def test_varying_networks_on_a_gpu_equal_the_cpu(name):
    """On a machine with a GPU: the CuPy backend's network rounds (lossy kernel, bursty chains, the device tracker)
    give the CPU's iterates."""
    from conftest import cupy_or_reason

    cupy, reason = cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {reason}")
    net = NETWORKS[name]
    cls = REGISTRY["pull-diag-gt" if net.stochastic == "row" else "push-diging"]
    mats = {"A": net} if net.stochastic == "row" else {"C": net}
    x0 = np.random.default_rng(9).standard_normal((net.n, 4))
    b = np.random.default_rng(10).standard_normal((net.n, 4))
    cpu = cls(**mats, x0=x0, lr=0.02, rounds=2)
    gpu = cls(**mats, x0=cupy.asarray(x0), lr=0.02, rounds=2)
    bd = cupy.asarray(b)
    for _ in range(15):
        cpu.step(lambda X: X - b)
        gpu.step(lambda X: X - bd)
    np.testing.assert_allclose(gpu.gather_x(), cpu.gather_x(), rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(case=csr_and_block(max_n=9, max_d=20), p=st.sampled_from([0.0, 0.1, 0.5, 0.9, 0.99]),
       sleep=st.booleans(), rule=st.sampled_from(["row", "column", "symmetric"]), key=st.integers(0, 2**64 - 1),
       gated=st.booleans(), per_node=st.booleans())
def test_the_compiled_pass_is_the_reference_round_bit_for_bit(case, p, sleep, rule, key, gated, per_node):
    """_core.mix_lossy against _reference.lossy_round (a Python loop over the rows): any CSR (empty rows,
    unsorted columns, duplicates, negative weights), widths 1..20 (the register and the general paths), float32
    and float64, losses only, sleep only, both, neither, each rule (the undirected one too), with Gilbert-Elliott
    gates (bit 1: the undirected rule's other message), one p or one per node (the sender's): the same bits."""
    from rowstoch_fast import _core

    A, X = case
    if per_node:  # (each node its own p, among the same values and 0)
        p = np.random.default_rng(key % 2**32 + 2).choice([0.0, p, 0.5 * p, 0.99], max(A.shape))
    awake = (np.random.default_rng(key % 2**32).random(A.shape[0]) < 0.7) if sleep else None
    renormalise, symmetric = rule == "row", rule == "symmetric"
    bad = np.random.default_rng(key % 2**32 + 1).integers(0, 4 if symmetric else 2, A.nnz).astype(np.uint8) \
        if gated else None
    got = _core.mix_lossy(A.indptr, A.indices, A.data, X, None, seed=key, t=key % 1000, r=1, p=p,
                          renormalise=renormalise, awake=awake, symmetric=symmetric, bad=bad)
    want = _reference.lossy_round(A.indptr, A.indices, A.data, X, key, key % 1000, 1, p, renormalise, awake,
                                  symmetric=symmetric, bad=bad)
    np.testing.assert_array_equal(got, want)



def test_per_node_losses_are_the_senders_and_equal_one_number_bit_for_bit():
    """Lossy's ``p`` per node (heterogeneous devices; the sender's, as decent-bench's per-agent drop schemes): n
    equal values are the single number's run, iterate for iterate (a row-stochastic pass, a push method's, the
    per-link methods' arrivals, the undirected rule, compressed messages over the losses); a sender's messages
    are lost at its own rate; the draws are the dense definition's on an MPI share's global ids; anything but n
    values in range is refused, naming the node; a checkpoint refuses another heterogeneity."""
    from rowstoch_fast import _core
    from rowstoch_fast.network import Compressed, Delayed

    A = topology.erdos_renyi(10, 0.4, seed=3)
    W = topology.erdos_renyi(10, 0.4, seed=3, directed=False, weights="metropolis")
    cases = [("pull-diag-gt", lambda p: Lossy(A, p, seed=2)), ("push-pull", lambda p: Lossy(A, p, seed=2)),
             ("robust-gradient-push", lambda p: Lossy(A, p, seed=2)), ("dgd", lambda p: Lossy(W, p, seed=2)),
             ("choco-sgd", lambda p: Compressed(Lossy(W, p, seed=2), "topk", k=2)),
             ("compressed-push-pull", lambda p: Compressed(Lossy(A, p, seed=2), "qsgd", bits=4, seed=1)),
             ("pull-diag-gt", lambda p: Sleepy(Lossy(A, p, seed=2, model="gilbert-elliott", p_bad=0.3,
                                                     p_recover=0.4), 0.8, seed=5)),
             ("pull-diag-gt", lambda p: Delayed(Lossy(A, p, seed=2), 2, seed=3)),  # (uniform: the delayed pass)
             ("sgp", lambda p: Delayed(Lossy(A, p, seed=2), 2, delay="fixed"))]
    for name, make in cases:
        cls, runs = REGISTRY[name], []
        for p in (0.35, np.full(10, 0.35)):
            net = make(p)
            opt = cls.build(net, np.arange(30.0).reshape(10, 3), 0.02, rounds=2 if cls.multi_round else 1)
            for _ in range(25):
                opt.step(feed(cls, lambda X: X - 1.0))
            runs.append(opt.gather_x())
        np.testing.assert_array_equal(runs[0], runs[1], err_msg=name)
    # each sender its own rate; the draws on an MPI share's global ids are the dense definition's
    p = np.linspace(0.0, 0.9, 10)
    net, c = Lossy(A, p, seed=4), A.csr
    lost = np.array([~net.arrived(t, 0, c.indptr, c.indices) for t in range(3000)]).mean(axis=0)
    senders = c.indices
    off = np.repeat(np.arange(10), np.diff(c.indptr)) != senders
    for j in range(10):
        assert abs(lost[off & (senders == j)].mean() - p[j]) < 0.04, j
    rows, share = np.array([7, 2, 5]), A.csr[[7, 2, 5]]
    cols = np.unique(share.indices).astype(np.int64)
    local = np.searchsorted(cols, share.indices)
    got = _core.lost_links(share.indptr, local.astype(share.indices.dtype), 4, 11, 1, p, row_ids=rows, col_ids=cols)
    np.testing.assert_array_equal(got.view(bool), _reference.lost_links(share.indptr, local, 4, 11, 1, p, rows, cols))
    # the pass on an MPI share (its rows' and columns' global ids) is the whole pass's rows; the stacked pass of
    # compressed messages ([own rows; messages]) the general pass over its index, with unequal values
    X = np.random.default_rng(1).standard_normal((10, 3))
    whole = _core.mix_lossy(c.indptr, c.indices, c.data, X, None, seed=4, t=5, r=1, p=p)
    part = _core.mix_lossy(share.indptr, local.astype(share.indices.dtype), share.data, X[cols], None, seed=4, t=5,
                           r=1, p=p, row_ids=rows, col_ids=cols, ncols=len(cols))
    np.testing.assert_array_equal(part, whole[rows])
    H = np.vstack([X, np.random.default_rng(2).standard_normal((10, 3))])
    stacked = _core.mix_lossy(c.indptr, c.indices, c.data, H, None, seed=4, t=5, r=1, p=p, stacked=True)
    own = c.indices == np.repeat(np.arange(10), np.diff(c.indptr))
    index = np.where(own, c.indices, 10 + c.indices).astype(c.indices.dtype)
    general = _core.mix_lossy(c.indptr, index, c.data, H, None, seed=4, t=5, r=1, p=p, row_ids=np.arange(10),
                              col_ids=np.r_[np.arange(10), np.arange(10)], ncols=20)
    np.testing.assert_array_equal(stacked, general)
    assert not np.array_equal(stacked, _core.mix_lossy(c.indptr, c.indices, c.data, H, None, seed=4, t=5, r=1,
                                                       p=p[::-1], stacked=True))  # (the values are read)
    with pytest.raises(ValueError, match="p has 6 values .one per node., but node 9 is in this pass"):
        _core.lost_links(c.indptr, c.indices, 4, 11, 1, p[:6])
    with pytest.raises(ValueError, match=r"p\[2\] must be in \[0, 1\], got 1.5"):
        _core.mix_lossy(c.indptr, c.indices, c.data, np.ones((10, 2)), None, p=np.r_[0.1, 0.1, 1.5, np.zeros(7)])
    for bad, error, match in ((np.full(9, 0.1), ValueError, r"p must be one number or one per node \(shape \(10,\)\)"),
                              (np.r_[np.zeros(9), 1.0], ValueError, r"p\[9\] \(node 9's\) must be in \[0, 1\)"),
                              (np.r_[-0.1, np.zeros(9)], ValueError, r"p\[0\] .* got -0.1"),
                              (np.array([None] * 10), TypeError, "p must be a real number or one per node"),
                              ([0.1] * 9 + [[0.1, 0.2]], ValueError,  # (NumPy's "inhomogeneous shape" named no p)
                               r"p must be one number or one per node \(shape \(10,\)\), got a ragged sequence")):
        with pytest.raises(error, match=match):
            Lossy(A, bad)
    assert Lossy(A, np.r_[np.zeros(9), 1.0], model="gilbert-elliott", p_bad=0.1, p_recover=0.2).per_node
    assert Lossy(A, np.zeros(10)).static is A and "p=<10 values in [0, 0.9]>" in repr(net)
    opt = REGISTRY["dsgd"](net, np.zeros((10, 2)), 0.1)
    opt.step(lambda X: X - 1.0)
    with pytest.raises(ValueError, match="its p was '10 values, sha1"):
        REGISTRY["dsgd"].from_state_dict(opt.state_dict(), A=Lossy(A, p[::-1], seed=4))


def _equal_values_run_as_one(cases, one, each, x0, steps):
    """For each ``(algorithm, network of a value)`` of ``cases``: the run over the network of ``one`` value and over
    that of ``each`` (n equal values) are the same, iterate for iterate."""
    for name, make in cases:
        cls, runs = REGISTRY[name], []
        for value in (one, each):
            opt = cls.build(make(value), x0, 0.02)
            for _ in range(steps):
                opt.step(feed(cls, lambda X: X - 1.0))
            runs.append(opt.gather_x())
        np.testing.assert_array_equal(runs[0], runs[1], err_msg=name)

def test_per_node_noise_is_the_senders_and_equals_one_number_bit_for_bit():
    """Noisy's ``sigma`` per node (``per="link"``: the noise on the copies of what a node sends): n equal values are
    the single number's run, iterate for iterate (a plain round, the per-link methods' running sums, delayed
    messages, the undirected rule); a silent sender's copies arrive exact."""
    from rowstoch_fast.network import Delayed, Noisy

    A = topology.erdos_renyi(10, 0.4, seed=3)
    W = topology.erdos_renyi(10, 0.4, seed=3, directed=False, weights="metropolis")
    cases = [("pull-diag-gt", lambda s: Noisy(A, s, seed=2)), ("robust-gradient-push", lambda s: Noisy(A, s, seed=2)),
             ("sgp", lambda s: Noisy(Delayed(Lossy(A, 0.2, seed=1), 2, seed=3), s, seed=2)),
             ("dgd", lambda s: Noisy(W, s, seed=2))]
    _equal_values_run_as_one(cases, 0.05, np.full(10, 0.05), np.arange(30.0).reshape(10, 3), 20)
    # only node 0 noisy: the rows that hear from it get noise, the others the noiseless round exactly
    sigma = np.r_[0.5, np.zeros(9)]
    X = np.arange(20.0).reshape(10, 2)
    noisy, clean = Noisy(A, sigma, seed=4).mix(X, 3), A @ X
    hears = np.asarray(A.csr[:, [0]].todense()).ravel() != 0
    hears[0] = False  # (its own value is exact)
    assert not np.allclose(noisy[hears], clean[hears]) and np.array_equal(noisy[~hears], clean[~hears])
    for name in ("robust-gradient-push", "sgp"):  # (the per-link running sums, the messages' pass: the sender's)
        runs = []
        for net in (A, Noisy(A, sigma, seed=4)):
            opt = REGISTRY[name].build(net, X, 0.02)
            opt.step(lambda Z: Z - 1.0)
            runs.append(opt.gather_x())
        changed = ~np.all(runs[0] == runs[1], axis=1)
        np.testing.assert_array_equal(changed, hears, err_msg=name)
    with pytest.raises(ValueError, match=r"sigma\[3\] \(node 3's\) must be a finite number >= 0"):
        Noisy(A, np.r_[np.zeros(3), -1.0, np.zeros(6)])
    assert Noisy(A, np.zeros(10)).silent and "sigma=<10 values in [0, 0.5]>" in repr(Noisy(A, sigma))



def _hears_from(A, j):
    """The receivers of node ``j``'s messages (``j`` itself excluded: its own value is exact)."""
    hears = np.asarray(A.csr[:, [j]].todense()).ravel() != 0
    hears[j] = False
    return hears


@pytest.mark.parametrize("make", [lambda A, v: network.Compressed(A, "qsgd", bits=v, seed=5),
                                  lambda A, v: network.Compressed(A, "randk", k=v, seed=5),
                                  lambda A, v: network.Noisy(A, v / 100, seed=5, per="message")],
                         ids=["qsgd-bits", "randk-k", "message-noise"])
def test_per_node_compression_and_message_noise_are_the_senders_and_equal_one_number_bit_for_bit(make):
    """Compressed's ``bits`` / ``k`` and Noisy's ``sigma`` with ``per="message"``, one per node: n equal values are
    the single number's run, iterate for iterate (a compressing pass under losses, CHOCO-SGD's and compressed
    Push-Pull's own compression, delayed messages), and a different value at node 0 only changes the rows that hear
    from node 0: each message is compressed with its sender's value."""
    from rowstoch_fast.network import Delayed

    A = topology.erdos_renyi(10, 0.4, seed=3)
    W = topology.erdos_renyi(10, 0.4, seed=3, directed=False, weights="metropolis")
    cases = [("pull-diag-gt", lambda v: make(Lossy(A, 0.2, seed=1), v)), ("choco-sgd", lambda v: make(W, v)),
             ("compressed-push-pull", lambda v: make(A, v)),
             ("sgp", lambda v: make(Delayed(Lossy(A, 0.2, seed=1), 2, seed=3), v))]
    _equal_values_run_as_one(cases, 3, np.full(10, 3), np.arange(40.0).reshape(10, 4), 12)
    X = np.random.default_rng(2).standard_normal((10, 4))
    one, other = make(A, 3).mix(X, 3), make(A, np.r_[1, np.full(9, 3)]).mix(X, 3)
    hears = _hears_from(A, 0)
    assert not np.allclose(one[hears], other[hears]) and np.array_equal(one[~hears], other[~hears])


def test_per_node_compression_checks_its_values_counts_its_bytes_and_takes_the_worst_constants():
    """Per-node ``bits`` / ``k``: each value checked and named by its node; omega and delta are the worst node's
    (CHOCO-SGD's step takes them); the bytes ``traffic()`` counts are each sender's messages (a mean size per link,
    exact on a fixed network); a checkpoint refuses other per-node values; the reference's per-node compression is
    the compiled pass's."""
    from rowstoch_fast import _core, _reference
    from rowstoch_fast.network import Compressed

    A = topology.erdos_renyi(10, 0.4, seed=3)
    for bad, error, match in ((np.full(9, 4), ValueError, r"bits must be one number or one per node \(shape \(10,\)\)"),
                              (np.r_[4, 4, 0, np.full(7, 4)], ValueError,
                               r"bits\[2\] \(node 2's\) must be an integer in 1..32"),
                              (np.r_[4, 4.5, np.full(8, 4)], ValueError, r"bits\[1\] \(node 1's\) must be an integer"),
                              (np.r_[4, 33, np.full(8, 4)], ValueError, r"bits\[1\] .* got 33")):
        with pytest.raises(error, match=match):
            Compressed(A, "qsgd", bits=bad)
    with pytest.raises(ValueError, match=r"k\[9\] \(node 9's\) must be an integer >= 1"):
        Compressed(A, "topk", k=np.r_[np.ones(9), 0])
    with pytest.raises(ValueError, match=r"k\[1\] \(node 1's\) = 5 is more than the 4 values of one message"):
        REGISTRY["dsgd"](Compressed(A, "topk", k=np.r_[1, 5, np.ones(8)]), np.zeros((10, 4)), 0.1)
    bits = np.resize([2, 8], 10)
    net = Compressed(A, "qsgd", bits=bits)
    assert net.per_node and "bits=<10 values in [2, 8]>" in repr(net) and net.bits.dtype == np.int64
    assert net.omega(16) == Compressed(A, "qsgd", bits=2).omega(16)
    assert net.delta(16) == Compressed(A, "qsgd", bits=2).delta(16)
    assert Compressed(A, "randk", k=np.resize([1, 3], 10)).delta(8) == Compressed(A, "randk", k=1).delta(8)
    # bytes: each sender's size times its out-links, over every link
    opt = REGISTRY["dsgd"](net, np.zeros((10, 16)), 0.1)
    opt.step(lambda X: X - 1.0)
    c = A.csr
    out_links = np.bincount(c.indices, minlength=10) - (c.diagonal() != 0)
    sizes = np.array([-(-(16 * (b + 1) + 64) // 8) for b in bits])
    assert opt.traffic() == {"messages": int(out_links.sum()), "bytes": int(sizes @ out_links)}
    # under sleep and over a schedule: each iteration's links of each awake sender, at its own size
    B = topology.ring(10)
    for net in (Compressed(Sleepy(A, np.linspace(0.3, 1.0, 10), seed=2), "qsgd", bits=bits),
                Compressed(Schedule([A, B]), "qsgd", bits=bits)):
        run = REGISTRY["dsgd"](net, np.zeros((10, 16)), 0.1)
        for _ in range(7):
            run.step(lambda X: X - 1.0)
        want = 0
        for t in range(7):
            c = (B if isinstance(net.base, Schedule) and t % 2 else A).csr
            awake = net.base.awake(t) if isinstance(net.base, Sleepy) else np.ones(10, dtype=bool)
            out = np.bincount(c.indices, minlength=10) - (c.diagonal() != 0)
            want += int((out * awake) @ sizes)
        assert run.traffic()["bytes"] == want
        resumed = REGISTRY["dsgd"].from_state_dict(run.state_dict(), A=net)
        for o in (run, resumed):
            o.step(lambda X: X - 1.0)
        assert resumed.traffic() == run.traffic()
    with pytest.raises(ValueError, match="its bits was '10 values, sha1"):
        REGISTRY["dsgd"].from_state_dict(opt.state_dict(), A=Compressed(A, "qsgd", bits=bits[::-1]))
    X = np.random.default_rng(4).standard_normal((10, 6))
    for method, key, values in (("qsgd", "bits", bits), ("topk", "k", np.resize([1, 2, 6], 10)),
                                ("round", "bits", np.resize([3, 20], 10))):
        got = Compressed(A, method, **{key: values}, seed=2).encode(X, np.empty_like(X), 5, 1, d=3)
        want = _reference.compress(X, method, 3, 2, 5, 1, **{key: values},
                                   **({"unbiased": True} if method == "qsgd" else {}))
        np.testing.assert_array_equal(got, want)
    for kwargs, error, match in (({"param": np.full(9, 4)}, ValueError, "has 9 values .* node 9 is in this pass"),
                                 ({"param": np.r_[0, np.full(9, 4)]}, ValueError, r"bits\[0\] must be in 1..32"),
                                 ({"param": np.full((2, 5), 4)}, ValueError, "bits must be one number or 1-D"),
                                 ({"param": np.full(10, 4.0)}, TypeError, "bits must be integers"),
                                 ({"method": 2, "param": np.full(10, 2**63, dtype=np.uint64)}, ValueError,
                                  "k has a value past 9223372036854775807"),
                                 ({"method": 5, "param": 0, "sigma": np.r_[-1.0, np.zeros(9)]}, ValueError,
                                  r"sigma\[0\] must be finite and >= 0")):
        args = {"method": 0, "param": 4, "sigma": 0.0, **kwargs}
        with pytest.raises(error, match=match):  # (and a uint64 past int64: refused, not wrapped)
            _core.compress(X, np.empty_like(X), args["method"], 3, args["param"], args["sigma"], True, 1, 0, 0)


# ---------------------------------------------------------------- issue 35: never silently wrong
def test_a_schedule_must_be_jointly_strongly_connected():
    """Schedule([I, I]) was accepted and the nodes never communicated."""
    with pytest.raises(ValueError, match="must be jointly strongly connected over its period .*2 matrices"):
        Schedule([np.eye(4), np.eye(4)])
    half = np.kron(np.eye(2), np.full((2, 2), 0.5))  # two pairs that never meet
    with pytest.raises(ValueError, match="2 strongly connected components"):
        Schedule([half, half])
    # each round alone disconnected, the period connected: fine (the one-peer graphs)
    assert len(network.one_peer_exponential(8).matrices) == 3


def test_a_state_resumes_only_on_the_network_it_was_saved_on():
    """from_state_dict of a state saved on a lossy network accepted any other network and continued differently."""
    A = topology.exponential(8)
    net = Lossy(A, 0.1, seed=1, model="gilbert-elliott", p_bad=0.2, p_recover=0.3)
    opt = rf.PullDiagGT(net, np.zeros((8, 3)), 0.01)
    state = opt.state_dict()
    rf.PullDiagGT.from_state_dict(state, A=Lossy(A, 0.1, seed=1, model="gilbert-elliott", p_bad=0.2, p_recover=0.3))
    for other, field in [(Lossy(A, 0.2, seed=1, model="gilbert-elliott", p_bad=0.2, p_recover=0.3), "p was 0.1"),
                         (Lossy(A, 0.1, seed=2, model="gilbert-elliott", p_bad=0.2, p_recover=0.3), "seed was 1"),
                         (Lossy(A, 0.1, seed=1), "model was 'gilbert-elliott'"),
                         (Lossy(topology.ring(8), 0.1, seed=1, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
                          "base.sha1 was"),
                         (Schedule([A]), "type was 'Lossy', this one has 'Schedule'")]:
        with pytest.raises(ValueError, match="A is not the network this state was saved on: its " + field):
            rf.PullDiagGT.from_state_dict(state, A=other)
    with pytest.raises(ValueError, match="saved on a time-varying network \\(Lossy\\); A is a static MixingMatrix"):
        rf.PullDiagGT.from_state_dict(state, A=A)


def test_a_run_resumes_only_on_its_network(tmp_path):
    """rf.run(..., resume=) with a changed network resumed without a word, though its docstring promised a
    ValueError."""
    from rowstoch_fast.objectives import Quadratic

    f = Quadratic.random(8, 3, seed=0)
    ck = tmp_path / "ck.npz"
    rf.run(rf.Algorithm(Lossy(topology.exponential(8), 0.1, seed=1), 0.05), f, 10, checkpoint=str(ck), progress=False)
    with pytest.raises(ValueError, match="its p was 0.1, this one has 0.3"):
        rf.run(rf.Algorithm(Lossy(topology.exponential(8), 0.3, seed=1), 0.05), f, 20, resume=str(ck), progress=False)


def test_a_negative_iteration_in_a_state_is_refused():
    opt = rf.PullDiagGT(topology.exponential(8), np.zeros((8, 3)), 0.01)
    state = opt.state_dict()
    for bad in (np.array(-3), np.array(2.5), np.array([1, 2])):
        with pytest.raises(ValueError, match=r"state\['iteration'\] must be an integer >= 0, got"):
            rf.PullDiagGT.from_state_dict({**state, "iteration": bad})


@pytest.mark.parametrize("name", [n for n, c in sorted(REGISTRY.items()) if c.push_sum_weights and not c.per_link_state])
def test_a_push_sum_method_drained_by_lost_messages_says_so(name):
    """Issue 36's case: a 24-node directed graph, 10% Bernoulli loss, a strongly convex quadratic, lr = 0.02:
    the push-sum weights lose their mass with every lost message until the effective step lr / w makes the
    iterates overflow (iteration 150-163). The error says that (the weights' total and smallest, the lost
    messages), not "lr too large?"; on the lossless network the same run stays finite."""
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)
    cls = REGISTRY[name]
    opt, grad = cls.build(Lossy(A, 0.1, seed=0), f.x0(), 0.02), feed(cls, f.full_gradient)
    with pytest.raises(DivergenceError, match=r"push-sum weights down to [0-9.e-]+ of their 24 \(node \d+: "
                                              r"[0-9.e-]+\): the network loses messages") as info:
        for _ in range(400):
            opt.step(grad)
    assert info.value.what == "weights" and "too large?" not in str(info.value)
    assert "a loss-robust method, robust-gradient-push or r-fast" in str(info.value)  # (what to run instead)
    assert np.isfinite(opt.x).all() and opt.iteration == info.value.iteration - 1
    lossless, grad = cls.build(A, f.x0(), 0.02), feed(cls, f.full_gradient)
    for _ in range(400):
        lossless.step(grad)
    assert np.isfinite(lossless.x).all()


@pytest.mark.parametrize("name", [n for n, c in sorted(REGISTRY.items()) if c.push_sum_weights and not c.per_link_state])
def test_a_drained_push_sum_method_whose_gradient_overflows_first_says_so(name):
    """The same drain where the gradient at the blown-up iterates overflows before they do (helper 105's least
    squares: SGP's error said "grad_fn returned a non-finite gradient", as if the objective were at fault, and so
    did the comparison's diagnosis): the weights' total and smallest and the lost messages, as for the iterates."""
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)

    def overflowing(X):  # (a gradient of higher order: inf where the iterates are merely large)
        G = np.array(f.full_gradient(X), dtype=np.float64)
        G[np.abs(np.asarray(X)) > 1e30] = np.inf
        return G

    cls = REGISTRY[name]
    opt, grad = cls.build(Lossy(A, 0.1, seed=0), f.x0(), 0.02), feed(cls, overflowing)
    with pytest.raises(DivergenceError, match=r"^grad_fn returned a non-finite gradient at iteration \d+, first at "
                                              r"node \d+, with the push-sum weights down to [0-9.e-]+ of their 24") \
            as info:
        for _ in range(400):
            opt.step(grad)
    assert info.value.what == "weights" and "robust-gradient-push or r-fast" in str(info.value)
    assert f"finite state (iteration {opt.iteration})" in str(info.value) and np.isfinite(opt.x).all()


def test_a_loss_robust_method_is_never_said_to_be_drained_by_lost_messages():
    """Robust gradient-push keeps a lost message's mass on its link (running sums): weights that are low at a
    node (mass in transit) are no drain by losses, and the drained message would tell it to use itself. Nor a
    push-sum method on a network that loses no message (delays): the message had said "the network loses
    messages" of one that loses none."""
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)
    for name, cls in sorted(REGISTRY.items()):
        if not (cls.push_sum_weights and cls.per_link_state):
            continue
        opt = cls.build(Lossy(A, 0.1, seed=0), f.x0(), 0.02)
        opt.step(feed(cls, f.full_gradient))
        opt._cur[cls.push_sum_weights][...] = 0.5  # (mass in transit)
        assert opt._starved_error(2, 0) is None, name
        opt._cur[cls.push_sum_weights][...] = 1.0
        opt._cur[cls.push_sum_weights][5] = 1e-9  # (as low as a drained method's: a node whose in-links delivered
        # nothing for rounds in a row; "lr too large?" had been said at every rate, helper 171)
        said = str(opt._starved_error(2, 0))
        from rowstoch_fast.network import base_matrix

        C = base_matrix(opt._mats["C"]).toarray()  # (the weight node 5 settles at without losses: n pi[5], C pi = pi)
        values, vectors = np.linalg.eig(C)
        pi = np.abs(vectors[:, np.argmax(values.real)].real)
        level = A.n * pi[5] / pi.sum()
        assert f"node 5's push-sum weight down to 1e-09 ({level:.3g} where no message is lost): the network loses " \
               "messages" in said, name
        assert "use a loss-robust method" not in said and "lr too large" not in said, name  # (it is one)
        assert "or another loss-robust method: r-fast" in said, name  # (the table says how r-fast did: helper 174)
        opt._lossless_levels = np.full(A.n, 1e-8)  # (a graph whose own weights are that small: not the losses'
        assert opt._starved_error(2, 0) is None, name  # doing, helper 173)
        levels = np.ones(A.n)  # (against each node's own level: node 7, which a graph keeps at 1e-6, is higher)
        levels[7] = 1e-6
        opt._lossless_levels = levels
        opt._cur[cls.push_sum_weights][7] = 1e-8
        assert "node 5's push-sum weight down to 1e-09 (1 where" in str(opt._starved_error(2, 0)), name
        opt._cur[cls.push_sum_weights][5] = 1.0
        assert opt._starved_error(2, 0) is None, name  # (node 7 at a hundredth of its level: not stranded)
        opt._cur[cls.push_sum_weights][5] = 5e-8  # (above node 7's weight, far below its own level)
        assert "node 5's push-sum weight down to 5e-08" in str(opt._starved_error(2, 0)), name
    # nor a push-sum method on a network that loses nothing (delays: the mass is on its way), where a lossy one is
    from rowstoch_fast.network import Delayed

    cls = REGISTRY["sgp"]
    for net, drained in ((Delayed(A, 2, seed=0), False), (Lossy(A, 0.1, seed=0), True)):
        opt = cls.build(net, f.x0(), 0.02)
        opt.step(feed(cls, f.full_gradient))
        opt._cur[cls.push_sum_weights][...] = 1e-9
        assert (opt._starved_error(2, 0) is not None) == drained, net


def test_a_push_sum_method_drained_by_sleep_blames_the_sleep():
    """On a network that loses nothing but puts nodes to sleep, what is sent to a sleeping node is lost and the
    push-sum weights drain the same way: the error had blamed losses the network did not have ("the network loses
    messages ... run on a lossless network")."""
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.network import Sleepy
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)
    cls = REGISTRY["push-diging"]
    opt, grad = cls.build(Sleepy(A, 0.9, seed=0), f.x0(), 0.02), feed(cls, f.full_gradient)
    with pytest.raises(DivergenceError, match=r"push-sum weights down to .*: the network puts nodes to sleep "
                                              r"\(what is sent to a sleeping node is lost\)") as info:
        for _ in range(400):
            opt.step(grad)
    assert "loses messages" not in str(info.value) and "robust-gradient-push or r-fast" in str(info.value)


def test_robust_gradient_push_keeps_its_mass_where_sgp_drains():
    """The same lossy network (10% Bernoulli loss, 24 nodes): SGP's weights drain and its iterates overflow by
    iteration ~160; the running sums deliver every lost message's mass with a later one, so the weights keep
    their total (up to what is in flight on the links) and the iterates stay finite and near x*; and the
    iterates equal the dense link-by-link twin with the network's own draws."""
    from rowstoch_fast import RobustGradientPush, _reference
    from rowstoch_fast._hashing import uniform_hash
    from rowstoch_fast.errors import DivergenceError
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)
    net = Lossy(A, 0.1, seed=0).map(out_degree_weights)
    with pytest.raises(DivergenceError):
        sgp = REGISTRY["sgp"](net, f.x0(), 0.02)
        for _ in range(400):
            sgp.step(f.full_gradient)
    opt = RobustGradientPush(net, f.x0(), 0.02)
    for _ in range(400):
        opt.step(f.full_gradient)
    x_star = f.optimum().x
    lossless = REGISTRY["sgp"](out_degree_weights(A), f.x0(), 0.02)  # (SGP without losses: its O(lr) error)
    for _ in range(400):
        lossless.step(f.full_gradient)
    error, lossless_error = np.abs(opt.x - x_star).max(), np.abs(lossless.x - x_star).max()
    assert np.isfinite(opt.x).all() and error < 2 * lossless_error, (error, lossless_error)
    state = opt.state_dict()  # the weights' mass: on the nodes plus in flight on the links is n
    assert abs(opt._cur["w"].sum() + state["pending_w"].sum() - 24) < 1e-9
    assert state["pending_w"].sum() > 0  # (some of it in flight at this moment)
    # resume bit for bit, the per-link mass included
    again = RobustGradientPush.from_state_dict(state, C=net)
    for _ in range(5):
        opt.step(f.full_gradient)
        again.step(f.full_gradient)
    np.testing.assert_array_equal(again.x, opt.x)
    # the dense twin, message by message, with the network's draws
    C = out_degree_weights(A)
    lost = lambda k, i, j: float(uniform_hash(0, k, 0, i, j)) < 0.1  # noqa: E731
    fresh = RobustGradientPush(net, f.x0(), 0.02)
    zs = _reference.robust_gradient_push(C.toarray(), np.broadcast_to(f.x0(), (24, 3)), 0.02, f.full_gradient, 30,
                                         lost=lost)
    for k in range(1, 31):
        fresh.step(f.full_gradient)
        np.testing.assert_allclose(fresh.x, zs[k], rtol=1e-12, atol=1e-12)


def test_r_fast_stays_exact_under_loss_where_push_pull_drifts():
    """R-FAST on a 24-node directed graph with 10% Bernoulli loss: the trackers' running sums keep their mass
    (on the nodes plus in flight = 1^T g), so it converges to x* itself, where Push-Pull over the same lossy
    network stalls far from it; the iterates equal the dense link-by-link twin with the network's own draws,
    and a state_dict resumes bit for bit, the per-link blocks included."""
    from rowstoch_fast import RFAST, _reference
    from rowstoch_fast._hashing import uniform_hash
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(24, 0.25, seed=1)
    f = Quadratic.random(24, 3, seed=0)
    net = Lossy(A, 0.1, seed=0)
    mats = RFAST.problem_matrices(net)
    opt = RFAST(**mats, x0=f.x0(), lr=0.05)
    plain = REGISTRY["push-pull"](**mats, x0=f.x0(), lr=0.05)
    for _ in range(1500):
        opt.step(f.full_gradient)
        plain.step(f.full_gradient)
    x_star = f.optimum().x
    assert np.abs(opt.x - x_star).max() < 1e-8
    assert np.abs(plain.x - x_star).max() > 1e-3
    state = opt.state_dict()
    G = f.full_gradient(opt.x)
    assert abs(opt._cur["y"].sum(axis=0) + state["pending_C"].sum(axis=0) - G.sum(axis=0)).max() < 1e-9
    again = RFAST.from_state_dict(state, **mats)
    for _ in range(5):
        opt.step(f.full_gradient)
        again.step(f.full_gradient)
    np.testing.assert_array_equal(again.x, opt.x)
    lost = lambda k, i, j: float(uniform_hash(0, k, 0, i, j)) < 0.1  # noqa: E731
    fresh = RFAST(**mats, x0=f.x0(), lr=0.05)
    xs = _reference.r_fast(A.toarray(), mats["C"].base.toarray(), np.broadcast_to(f.x0(), (24, 3)), 0.05,
                           f.full_gradient, 30, lost_A=lost, lost_C=lost)
    for k in range(1, 31):
        fresh.step(f.full_gradient)
        np.testing.assert_allclose(fresh.x, xs[k], rtol=1e-12, atol=1e-12)


def test_r_fast_refuses_networks_without_fixed_links():
    """A scheduled network (or sleep over sleep) has no fixed set of links to keep buffers on: one line naming
    RFAST, the matrix and the requirement, before anything is allocated. Sleep over a fixed set is taken."""
    from rowstoch_fast import RFAST

    A = topology.erdos_renyi(10, 0.3, seed=1)
    C = out_degree_weights(A)
    with pytest.raises(ValueError, match=r"^RFAST: C must be a static matrix or a Lossy or Sleepy network over one"):
        RFAST(A, Sleepy(Sleepy(Lossy(C, 0.1), 0.8), 0.9, seed=1), np.zeros(2), 0.05)
    with pytest.raises(ValueError, match=r"^RFAST: A must be a static matrix or a Lossy or Sleepy network over one"):
        RFAST(Schedule([A, A]), C, np.zeros(2), 0.05)
    assert RFAST.applies_to(Sleepy(Lossy(C, 0.1), 0.8))



ACTIVATIONS = {"bernoulli": dict(q=0.7), "markov": dict(model="markov", p_sleep=0.2, p_wake=0.5),
               "poisson": dict(model="poisson", rate=0.8),  # (cyclic: period 1 only, the base network)
               "bernoulli-per-node": dict(q=np.linspace(0.2, 1.0, 30)),  # (heterogeneous devices: one per node)
               "poisson-per-node": dict(model="poisson", rate=np.geomspace(0.05, 3.0, 30))}


def test_per_node_activation_equals_the_one_number_bit_for_bit_and_each_node_keeps_its_rate():
    """Sleepy's ``q`` (and ``rate``) per node: n equal values are the single number's run, iterate for iterate;
    unequal ones give each node its own share of the iterations awake; anything but n values in range is refused,
    naming the node; a checkpoint refuses another heterogeneity."""
    A = topology.erdos_renyi(12, 0.4, seed=3)
    one, each = Sleepy(A, 0.6, seed=2), Sleepy(A, np.full(12, 0.6), seed=2)
    runs = []
    for net in (one, each):
        opt = REGISTRY["pull-diag-gt"](net, np.arange(24.0).reshape(12, 2), 0.05)
        for _ in range(30):
            opt.step(lambda X: X - 1.0)
        runs.append(opt.x)
    np.testing.assert_array_equal(runs[0], runs[1])
    q = np.linspace(0.1, 1.0, 12)
    shares = np.mean([Sleepy(A, q, seed=4).awake(t) for t in range(4000)], axis=0)
    np.testing.assert_allclose(shares, q, atol=0.04)  # (4,000 draws: 4 standard errors at most)
    assert shares[-1] == 1.0 and Sleepy(A, np.ones(12)).static is A
    for bad, error, match in ((np.ones(11), ValueError, r"q must be one number or one per node \(shape \(12,\)\)"),
                              (np.r_[np.ones(11), 0.0], ValueError, r"q\[11\] \(node 11's\) must be in \(0, 1\]"),
                              (np.r_[np.nan, np.ones(11)], ValueError, r"q\[0\] .* got nan"),
                              (np.array(["x"] * 12), TypeError, "q must be a real number or one per node")):
        with pytest.raises(error, match=match):
            Sleepy(A, bad)
    with pytest.raises(ValueError, match="p_sleep must be one number"):
        Sleepy(A, model="markov", p_sleep=np.full(12, 0.1), p_wake=0.3)
    opt = REGISTRY["dsgd"](Sleepy(A, q, seed=4), np.zeros((12, 2)), 0.1)
    opt.step(lambda X: X - 1.0)
    with pytest.raises(ValueError, match="its q was '12 values, sha1"):
        REGISTRY["dsgd"].from_state_dict(opt.state_dict(), A=Sleepy(A, q[::-1], seed=4))
    assert REGISTRY["dsgd"].from_state_dict(opt.state_dict(), A=Sleepy(A, q.copy(), seed=4)).iteration == 1


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_models_draw_their_definitions(name):
    """Sleepy's activation models: the awake masks of the dense definitions (_reference.awake_mask), in any order
    of iterations (the Markov chains recompute from the start when asked for an earlier one), and a state_dict
    refuses the same network with another model or parameter."""
    from rowstoch_fast import _reference

    kw = ACTIVATIONS[name]
    net = Sleepy(topology.erdos_renyi(30, 0.2, seed=1), seed=5, **kw)
    for t in (0, 4, 2, 9, 9, 31, 1):
        np.testing.assert_array_equal(net.awake(t), _reference.awake_mask(30, t, 5, **kw))
    A = topology.erdos_renyi(30, 0.2, seed=1)
    opt = REGISTRY["pull-diag-gt"](net, np.zeros((30, 2)), 0.01)
    for _ in range(3):
        opt.step(lambda X: X - 1.0)
    other = Sleepy(A, seed=6, **kw)
    with pytest.raises(ValueError, match="is not the network this state was saved on: its seed was 5"):
        REGISTRY["pull-diag-gt"].from_state_dict(opt.state_dict(), A=other)


@settings(max_examples=200, deadline=None)
@given(u=st.lists(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.99]), min_size=3, max_size=3),
                  min_size=1, max_size=12),
       start=st.lists(st.booleans(), min_size=3, max_size=3),
       p_leave=st.sampled_from([0.1, 0.2, 0.5, 1.0]), p_enter=st.sampled_from([0.1, 0.3, 0.5, 1.0]))
def test_two_state_chains_advance_a_block_as_the_loop_does(u, start, p_leave, p_enter):
    """The Markov activation advances its chains a block of iterations at a time (a jump of 1e7 iterations of 8
    nodes: a second instead of minutes), and gives every state of a block at once for steps asked in order
    (two_state_path): equal to the one-iteration loop for any draws, thresholds included, row by row."""
    from rowstoch_fast.network import advance_two_state
    from rowstoch_fast.network.base import two_state_path

    u = np.array(u)
    state = np.array(start)
    path = two_state_path(state, u, p_leave, p_enter)
    assert path.shape == u.shape and path.dtype == bool
    expected = state.copy()
    for s, row in enumerate(u):
        expected = np.where(expected, row >= p_leave, row < p_enter)
        np.testing.assert_array_equal(path[s], expected)
    np.testing.assert_array_equal(advance_two_state(state, u, p_leave, p_enter), expected)


@pytest.mark.parametrize("name", ["bernoulli", "markov", "poisson"])
def test_activation_asked_in_order_and_out_of_order_draws_its_definition_and_twins_share_it(name, monkeypatch):
    """Steps ask for the masks in order: those of the next iterations are drawn at once (and kept); a twin made by
    map (Push-Pull's C beside its A) reads the same draws instead of drawing them again; any order of the
    iterations (a walk back, a jump, a walk again) gives _reference.awake_mask."""
    from rowstoch_fast import _reference
    from rowstoch_fast.mixing import out_degree_weights
    from rowstoch_fast.network import sleepy

    kw = ACTIVATIONS[name]
    net = Sleepy(topology.erdos_renyi(30, 0.2, seed=1), seed=5, **kw)
    twin = net.map(out_degree_weights)
    calls, real = [], sleepy.uniform_hash
    monkeypatch.setattr(sleepy, "uniform_hash", lambda *a: calls.append(1) or real(*a))
    order = [*range(0, 150), 40, 41, 42, 7, 300, 301, 302, 299, *range(150, 200)]
    drawn = 0
    for t in order:
        want = _reference.awake_mask(30, t, 5, **kw)
        calls.clear()
        np.testing.assert_array_equal(net.awake(t), want)
        drawn += len(calls)
        calls.clear()
        np.testing.assert_array_equal(twin.awake(t), want)
        assert not calls, t  # (the twin reads the draws its network made)
    assert drawn < len(order) / 8  # (in order: 64 iterations a call)


def test_markov_activation_far_ahead_is_fast_or_refused_naming_the_bound():
    """Iteration 10^6 of 8 chains (one call, from the start) equals the chains advanced in order; iterations
    10^9, 10^12 and the last, 2^60 - 1, are read backwards from t at once (a chain's state is fixed by its last
    constant step: about ln(n) / |p_wake - p_sleep| iterations; t = 10^9 had been refused, and before that took
    hours): each equals the chains walked in order from a state 10^4 iterations before. With p_sleep = p_wake
    every draw counts: iteration 10^9 is refused at once with the bound named."""
    import time

    kw = dict(model="markov", p_sleep=0.2, p_wake=0.4)
    far = Sleepy(topology.ring(8), seed=3, **kw).awake(10**6)
    walked = Sleepy(topology.ring(8), seed=3, **kw)
    for t in range(0, 10**6 + 1, 99_991):
        walked.awake(t)
    np.testing.assert_array_equal(walked.awake(10**6), far)
    np.testing.assert_array_equal(Sleepy(topology.ring(8), seed=3, **kw).awake(5000),
                                  _reference.awake_mask(8, 5000, 3, **kw))
    for t in (10**9, 10**12, 2**60 - 1):
        start = time.perf_counter()
        jumped = Sleepy(topology.ring(8), seed=3, **kw).awake(t)
        assert time.perf_counter() - start < 5.0  # (about a millisecond)
        walked = Sleepy(topology.ring(8), seed=3, **kw)
        for s in range(t - 10**4, t + 1, 2000):  # (steps of 2000: the walk, one iteration at a time)
            walked.awake(s)
        np.testing.assert_array_equal(walked.awake(t), jumped)
    with pytest.raises(ValueError, match=r"^t = 1000000000: with p_sleep = 0.3 and p_wake = 0.3 .* more than 4e\+09 "
                                         r"steps"):
        Sleepy(topology.ring(8), seed=3, model="markov", p_sleep=0.3, p_wake=0.3).awake(10**9)


@settings(max_examples=30, deadline=None)
@given(p=st.tuples(st.floats(0.01, 1.0), st.floats(0.01, 1.0)), start=st.booleans(), n=st.integers(1, 40),
       steps=st.integers(1, 3000), seed=st.integers(0, 2**16))
def test_two_state_chains_read_backwards_equal_the_walk(p, start, n, steps, seed):
    """jump_two_state (the state fixed by each chain's last constant step, read from the end) equals the walk
    through every step, for any probabilities, start and length; None only where no step can be constant."""
    from rowstoch_fast.network.base import jump_two_state

    rng = np.random.default_rng(seed)
    u = rng.random((steps, n))
    state = rng.random(n) < 0.5 if start else np.zeros(n, dtype=bool)
    walked = state.copy()
    for row in u:
        walked = np.where(walked, row >= p[0], row < p[1])
    jumped = jump_two_state(state, 1, steps, lambda s: u[s - 1], p[0], p[1], budget=10**9)
    if jumped is None:  # (no constant step, or one so rare that the scan's expected length is past the budget)
        assert p[0] == p[1] or (np.log(n) + 40) / abs(p[0] - p[1]) > 10**9
    else:
        np.testing.assert_array_equal(jumped, walked)


def test_activation_models_that_are_always_on_are_the_base_network_bit_for_bit():
    A = topology.erdos_renyi(20, 0.3, seed=2)
    x0 = np.random.default_rng(0).standard_normal((20, 3))
    runs = []
    for net in (A, Sleepy(A, 1.0), Sleepy(A, model="cyclic", period=1), Sleepy(Lossy(A, 0.0), 1.0, seed=3)):
        opt = REGISTRY["pull-diag-gt"](net, x0, 0.02)
        for _ in range(15):
            opt.step(lambda X: X - 0.5)
        runs.append(opt.x)
    for x in runs[1:]:
        np.testing.assert_array_equal(x, runs[0])


@pytest.mark.parametrize("period", [2, 3, 7])
def test_a_cyclic_activation_that_never_mixes_is_refused(tmp_path, period):
    """Cyclic sleep with period >= 2 uses a link only between nodes awake together (equal modulo period): the
    groups never hear from each other (on a ring every round was the identity, and run / compare said "ok").
    Refused by the network, and by the command line in one line with exit 2, before anything is written."""
    from test_careless_user import assert_one_line_error, rowstoch

    for A in (topology.ring(6), topology.exponential(16), topology.erdos_renyi(20, 0.5, seed=1)):
        with pytest.raises(ValueError, match=rf"^Sleepy\(model='cyclic', period={period}\) never mixes"):
            Sleepy(A, model="cyclic", period=period)
    with pytest.raises(ValueError, match="never mixes"):
        Sleepy(Lossy(topology.ring(6), 0.1), model="cyclic", period=period)
    out = tmp_path / "out"
    rc, _, err = rowstoch("run", "--topology", "ring", "--n", "6", "--objective", "quadratic", "--iterations", "5",
                          "--activation", "cyclic", "--period", str(period), "--no-progress", "--out", out)
    assert_one_line_error(rc, err, "never mixes")
    assert not out.exists() or not any(out.iterdir())  # nothing written (the folder proven writable: empty)


def test_a_markov_activation_that_flips_every_node_every_iteration_is_refused(tmp_path):
    """``p_sleep = p_wake = 1``: every node changes state every iteration, so those that start awake and those that
    start asleep are two fixed groups never awake together (cyclic's period 2 with its groups drawn). It was
    accepted, and on exponential(16) after 2,000 gossip rounds the two groups sat at their own averages (8.09 and
    7.0; helper 108). Refused, by the command line in one line with exit 2; p_sleep = 1 alone still mixes."""
    from test_careless_user import assert_one_line_error, rowstoch

    A = topology.exponential(16)
    with pytest.raises(ValueError, match=r"^Sleepy\(model='markov', p_sleep=1, p_wake=1\) never mixes"):
        Sleepy(A, model="markov", p_sleep=1.0, p_wake=1.0)
    net = Sleepy(A, model="markov", p_sleep=1.0, p_wake=0.9, seed=3)
    X = np.arange(16.0)[:, None]
    for t in range(400):
        X = net.mix(X, t)
    assert np.ptp(X) < 1e-6
    out = tmp_path / "out"
    rc, _, err = rowstoch("run", "--topology", "ring", "--n", "6", "--objective", "quadratic", "--iterations", "5",
                          "--activation", "markov", "--p-sleep", "1", "--p-wake", "1", "--no-progress", "--out", out)
    assert_one_line_error(rc, err, "never mixes")
    assert not out.exists() or not any(out.iterdir())  # nothing written


@pytest.mark.parametrize("make", [
    lambda A, s: Lossy(A, 0.2, seed=s),
    lambda A, s: Lossy(A, 0.5, seed=s, model="gilbert-elliott", p_bad=0.2, p_recover=0.3),
    lambda A, s: Sleepy(A, 0.5, seed=s),
    lambda A, s: Sleepy(A, seed=s, model="poisson", rate=0.7),
    lambda A, s: network.Noisy(A, 0.1, seed=s),
    lambda A, s: network.Compressed(A, "randk", k=2, seed=s),
    lambda A, s: network.Compressed(A, "qsgd", bits=2, seed=s),
], ids=["lossy", "bursty", "sleepy", "poisson", "noisy", "randk", "qsgd"])
def test_two_layers_of_one_kind_on_one_seed_are_refused(make):
    """Two layers of one kind draw from the hash of (seed, iteration, link or node): on the same seed (both at the
    default 0) their draws were the same numbers and one hid the other: Lossy(Lossy(A, 0.1), 0.2) lost 20% of the
    messages, not 28%, and was the outer layer alone bit for bit; two noises added up fully correlated (helper
    108). Refused, naming the seed; on seeds of their own they are two independent layers, and a layer that draws
    nothing (no loss, top-k) may share its seed."""
    A = topology.exponential(32)
    inner = make(A, 5)
    with pytest.raises(ValueError, match=r"wraps a \w+ layer of the same seed: .*give each \w+ layer a seed of "
                                         r"its own, further apart than a comparison's repetitions .*seed=1000005\)"):
        make(inner, 5)
    with pytest.raises(ValueError, match="of the same seed"):
        make(network.Delayed(inner, 0) if "Compressed" in type(inner).__name__ or "Noisy" in type(inner).__name__
             else Sleepy(inner, 0.9, seed=5) if type(inner).__name__ == "Lossy" else Lossy(inner, 0.1, seed=5), 5)
    make(inner, 6)
    assert network.redrawn(make(inner, 6), 3).base.seed == 8


def test_two_loss_layers_on_seeds_of_their_own_lose_independently():
    A = topology.exponential(32)
    links = A.csr.nnz - 32

    def lost(net):
        return np.mean([len(net.lost_keys(t, 0)) for t in range(300)]) / links

    assert lost(Lossy(Lossy(A, 0.1, seed=0), 0.2, seed=1)) == pytest.approx(1 - 0.9 * 0.8, abs=0.01)
    assert lost(Lossy(Lossy(A, 0.0), 0.2)) == pytest.approx(0.2, abs=0.01)  # (a lossless layer draws nothing)
    network.Compressed(network.Compressed(A, "topk", k=2), "randk", k=3)  # (top-k draws nothing)
    # draws of other keys on one seed are independent (compress.hpp's tags; a link's noise keyed by its sender)
    network.Compressed(network.Compressed(A, "qsgd", bits=2, seed=5), "randk", k=2, seed=5)
    network.Noisy(network.Noisy(A, 0.1, seed=5, per="link"), 0.1, seed=5, per="message")


def test_activation_models_refuse_bad_parameters_naming_them():
    A = topology.ring(5)
    cases = [(dict(model="gossip"), "model must be one of 'bernoulli', 'markov', 'poisson', 'cyclic', got 'gossip'"),
             (dict(model="markov", p_sleep=0.1), "model 'markov' needs p_wake"),
             (dict(q=0.5, model="cyclic", period=2), "model 'cyclic' takes period, not q"),
             (dict(model="markov", p_sleep=1.5, p_wake=0.5), r"p_sleep must be in \(0, 1\], got 1.5"),
             (dict(q=0.0), "q must be finite and > 0, got 0.0"), (dict(model="poisson", rate=-1.0), "rate must be finite and > 0"),
             (dict(model="cyclic", period=0), "period must be"), (dict(), "model 'bernoulli' needs q")]
    for kw, message in cases:
        with pytest.raises(ValueError, match=message):
            Sleepy(A, **kw)


@pytest.mark.parametrize("model", ["bernoulli", "markov", "poisson"])
def test_traffic_counts_what_awake_nodes_sent(model):
    """A sleeping node sends nothing: traffic() counts, iteration by iteration, the out-links of the nodes awake
    (under losses too: a lost message was sent). It counted every link of the base graph every iteration."""
    from rowstoch_fast import DSGD, PushPull
    from rowstoch_fast.network import Lossy, Sleepy

    A = topology.erdos_renyi(12, 0.3, seed=3)
    options = {"bernoulli": {"q": 0.6}, "markov": {"p_sleep": 0.3, "p_wake": 0.4}, "poisson": {"rate": 0.7}}[model]
    for net in (Sleepy(A, seed=4, model=model, **options), Sleepy(Lossy(A, 0.2, seed=1), seed=5, model=model,
                                                                   **options)):
        for cls in (DSGD, PushPull):
            opt = cls.build(net, np.zeros((12, 2)), 0.05)
            for _ in range(7):
                opt.step(lambda X: X - 1.0)
            dense = A.toarray()
            links = [(i, j) for i in range(12) for j in range(12) if i != j and dense[i, j] > 0]
            sent = sum(sum(1 for i, j in links if net.awake(t)[j]) for t in range(opt.silent_iterations, 7))
            per_iteration = len(opt._traffic_per_iteration())  # (matrices mixed: Push-Pull's A and C)
            assert opt.traffic()["messages"] == sent * per_iteration, (cls, model)
            assert opt.traffic()["messages"] < 7 * len(links) * per_iteration


def test_sent_links_added_when_read_count_every_iteration_and_resume():
    """Over one set of links each step counts the iterations its senders sent in, and the links are added when a
    count is read: read at iterations 1, 63, 64 and 100 (then resumed there) and 150, the messages and each
    sender's links equal a count of every iteration's awake senders, resumed or not."""
    from rowstoch_fast import PushPull

    A = topology.erdos_renyi(12, 0.3, seed=3)
    net = Sleepy(A, seed=4, model="markov", p_sleep=0.3, p_wake=0.4)
    out = np.count_nonzero(A.toarray() * (1 - np.eye(12)), axis=0)  # (node j's out-links)

    def check(o):
        awake = np.array([net.awake(t) for t in range(o.silent_iterations, o.iteration)])
        by_sender = out * awake.sum(axis=0)
        assert o.traffic()["messages"] == 2 * int(by_sender.sum()), o.iteration  # (A and C)
        for name in PushPull.matrices:
            np.testing.assert_array_equal(o._links_by_sender(name, o._mats[name]), by_sender)

    opt = PushPull.build(net, np.zeros((12, 2)), 0.05)
    for t in range(1, 101):
        opt.step(lambda X: X - 1.0)
        if t in (1, 63, 64):
            check(opt)
    check(opt)
    resumed = PushPull.from_state_dict(opt.state_dict(), **PushPull.problem_matrices(net))
    for _ in range(50):
        for o in (opt, resumed):
            o.step(lambda X: X - 1.0)
    check(opt)
    check(resumed)


def test_messages_dropped_are_the_losses_draws_of_the_awake_senders():
    """Optimizer.messages_dropped: each iteration's lost links (the reference's draws, per-node p) among its awake
    senders, for each exchange of each matrix (an R-round method: each round's own draws); 0 without losses; a
    resume continues its saved count and equals the uninterrupted run; the harness's metrics messages_dropped and
    messages_received add up to the messages column."""
    from rowstoch_fast import _reference
    from rowstoch_fast.network import Compressed, Lossy, Sleepy
    from rowstoch_fast.objectives import Quadratic

    A = topology.erdos_renyi(12, 0.4, seed=2)
    p = np.linspace(0.0, 0.5, 12)
    c = A.csr
    for name, net in (("push-pull", Compressed(Sleepy(Lossy(A, p, seed=1), 0.7, seed=3), "topk", k=1)),
                      ("mg-pull-diag-gt", Lossy(A, 0.3, seed=4)), ("dsgd", Sleepy(A, 0.7, seed=3))):
        cls = REGISTRY[name.removeprefix("mg-")]
        opt = cls.build(net, np.zeros((12, 3)), 0.01, **({"rounds": 3} if name.startswith("mg-") else {}))
        for _ in range(15):
            opt.step(lambda X: X - 1.0)
        core = net.base if isinstance(net, Compressed) else net
        lossy = core.base if isinstance(core, Sleepy) else core
        expected = 0.0
        for matrix, exchanges, _ in opt._traffic_per_iteration():
            for t in range(opt.silent_iterations, 15):
                awake = core.awake(t) if isinstance(core, Sleepy) else np.ones(12, dtype=bool)
                if not isinstance(lossy, Lossy):
                    continue
                lost = sum(int((_reference.lost_links(c.indptr, c.indices, lossy.seed, t, r, lossy.p) &
                                awake[c.indices]).sum()) for r in range(opt.rounds))
                expected += exchanges * lost / opt.rounds
        assert opt.messages_dropped() == round(expected) and (expected > 0) == isinstance(lossy, Lossy), name
        state = opt.state_dict()
        matrices = {k: v for k, v in cls.problem_matrices(net).items() if k in cls.matrices}
        resumed = cls.from_state_dict(state, **matrices)
        for o in (opt, resumed):
            for _ in range(5):
                o.step(lambda X: X - 1.0)
        assert resumed.messages_dropped() == opt.messages_dropped() > 0 or not isinstance(lossy, Lossy)
    with pytest.raises(ValueError, match=r"state\['dropped/A'\] must be \[next iteration to count"):
        REGISTRY["dsgd"].from_state_dict({**opt.state_dict(), "dropped/A": np.array([99.0, 1.0])}, A=net)
    # two loss layers: a message both drop is dropped once (the union of their draws)
    twice = Lossy(Lossy(A, 0.6, seed=1), 0.6, seed=2)
    opt = REGISTRY["dsgd"].build(twice, np.zeros((12, 3)), 0.01)
    for _ in range(10):
        opt.step(lambda X: X - 1.0)
    union = sum(int((_reference.lost_links(c.indptr, c.indices, 1, t, 0, 0.6) |
                     _reference.lost_links(c.indptr, c.indices, 2, t, 0, 0.6)).sum()) for t in range(10))
    assert opt.messages_dropped() == union < opt.traffic()["messages"]
    f, net = Quadratic.random(12, 3, seed=0), Sleepy(Lossy(A, 0.3, seed=1), 0.8, seed=2)
    h = rf.run(rf.Algorithm(net, 0.05, method="dsgd"), f, 20, record_every=10, progress=False,
               metrics=["grad_norm", "messages_received", "messages_dropped"])
    opt = REGISTRY["dsgd"].build(net, np.zeros((12, 3)), 0.05)
    for _ in range(20):
        opt.step(lambda X: X - 1.0)
    last = h.frame.iloc[-1]
    assert last["messages_dropped"] == opt.messages_dropped() > 0
    assert last["messages_received"] == opt.traffic()["messages"] - opt.messages_dropped()

def test_the_shipped_heterogeneous_experiment_separates_the_loss_robust_methods(tmp_path):
    """examples/heterogeneous.toml at a smaller budget: senders losing 0 .. 30% of their messages; R-FAST reaches
    the minimiser, Pull-Diag-GT and Push-Pull stop far from it, SGP's push-sum weights drain away; the table counts
    the messages dropped, about the mean rate of the messages sent."""
    import pathlib

    import pandas as pd

    from rowstoch_fast.cli import main

    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "heterogeneous.toml"
    assert main(["compare", "--config", str(example), "--rounds-budget", "300", "--out", str(tmp_path / "o"),
                 "-q"]) == 0
    table = pd.read_csv(tmp_path / "o" / "summary.csv").set_index("algorithm")
    assert table.loc["r-fast", "suboptimality"] < 1e-6 * table.loc["pull-diag-gt", "suboptimality"]
    assert table.loc["push-pull", "status"] == "ok" and table.loc["sgp", "status"] == "diverged"
    ok = table[table["status"] == "ok"]
    assert (abs(ok["messages_dropped"] / ok["messages"] - 0.15) < 0.01).all()  # (the rates' mean: 0.15)
    assert not table["messages_dropped_best"].any()  # (a count: none is best)

def test_traffic_over_a_schedule_counts_each_iterations_links():
    """A schedule's links change with the iteration: traffic() counts those of each iteration's matrix (asleep
    nodes' out-links left out); it counted the first matrix's every iteration."""
    from rowstoch_fast import DSGD
    from rowstoch_fast.network import Schedule, Sleepy

    A, B = topology.erdos_renyi(10, 0.3, seed=2), topology.ring(10)
    for net in (Schedule([A, B]), Sleepy(Schedule([A, B]), 0.6, seed=1)):
        opt = DSGD.build(net, np.zeros((10, 2)), 0.05)
        for _ in range(9):
            opt.step(lambda X: X - 1.0)
        expected = 0
        for t in range(9):
            dense = (A, B)[t % 2].toarray()
            awake = net.awake(t) if isinstance(net, Sleepy) else np.ones(10, dtype=bool)
            expected += sum(1 for i in range(10) for j in range(10) if i != j and dense[i, j] > 0 and awake[j])
        assert opt.traffic()["messages"] == expected


def test_traffic_after_a_resume_continues_the_saved_count(monkeypatch):
    """A resumed optimizer's first traffic() counted every iteration's senders again from 0 (O(T n): 0.47 s at
    iteration 20,000 on 64 sleepy nodes, minutes at 1e7): the state holds the count and a resume continues it,
    equal to the uninterrupted run's; a state without it (an older version's) still loads and counts again."""
    from rowstoch_fast import DSGD, LocalDSGD, PushPull
    from rowstoch_fast.algorithms import Optimizer

    counted, count_sent = [], Optimizer._count_sent
    monkeypatch.setattr(Optimizer, "_count_sent", lambda self, t: (counted.append(t), count_sent(self, t))[1])

    def grad(X):
        return X - 1.0

    A = topology.exponential(16)
    for net in (Sleepy(A, 0.7, seed=2), Sleepy(Schedule([A, topology.ring(16)]), 0.6, seed=3)):
        for cls, options in ((DSGD, {}), (PushPull, {}), (LocalDSGD, {"local_steps": 4})):
            whole = cls.build(net, np.zeros((16, 2)), 0.05, **options)
            for _ in range(31):  # (LocalDSGD: saved in the middle of a round)
                whole.step(grad)
            state = whole.state_dict()
            assert sorted(k for k in state if k.startswith("traffic/")) == sorted(
                [f"traffic/{m}" for m in cls.matrices] + [f"traffic/{m}/by_sender" for m in cls.matrices])
            matrices = {k: v for k, v in cls.problem_matrices(net).items() if k in cls.matrices}
            resumed = cls.from_state_dict(state, **matrices)
            old = cls.from_state_dict({k: v for k, v in state.items() if not k.startswith("traffic/")}, **matrices)
            for _ in range(9):
                for opt in (whole, resumed, old):
                    opt.step(grad)
            expected = whole.traffic()
            assert expected["messages"] > 0
            del counted[:]
            assert resumed.traffic() == expected, (cls, net)
            assert counted == [], (cls, net)  # nothing counted again: the steps since the resume had counted
            assert old.traffic() == expected and counted[0] == 0, (cls, net)  # (an older state: from the start)
            older = cls.from_state_dict({k: v for k, v in state.items() if not k.endswith("/by_sender")}, **matrices)
            for _ in range(9):
                older.step(grad)
            del counted[:]
            assert older.traffic() == expected and counted[0] == 0, (cls, net)  # (no links by sender: from the start)
            again = cls.from_state_dict(resumed.state_dict(), **matrices)  # a resume of a resume
            del counted[:]
            assert again.traffic() == expected and counted == []
            for key in (k for k in state if k.startswith("traffic/")):
                assert np.array_equal(old.state_dict()[key], whole.state_dict()[key])
                with pytest.raises(ValueError, match=key):
                    cls.from_state_dict({**state, key: np.array([32, 0])}, **matrices)  # (beyond iteration 31)


def test_pull_diag_over_a_schedule_stops_off_the_minimiser_as_the_guide_says():
    """The networks guide's claim (helper 116): over a period-2 schedule of row-stochastic matrices Pull-Diag-GT
    reaches consensus at a point off the minimiser, whatever the rate (D_t follows the product from iteration 0),
    while on one matrix it is exact. Should a tracker one day follow the weights started at t, this fails and the
    guide, the class's docstring and `exact`'s comment are to be rewritten."""
    rng = np.random.default_rng(4)
    n, d = 6, 2
    mats = []
    for _ in range(2):
        M = (rng.random((n, n)) < 0.5) * rng.random((n, n)) + np.diag(rng.random(n) + 0.1)
        mats.append(M / M.sum(1, keepdims=True))
    mats[1][:, :] = 0.5 * mats[1] + 0.5 * np.roll(np.eye(n), 1, axis=1)  # (the ring keeps them joint-connected)
    H = rng.standard_normal((n, d, d))
    Q = np.einsum("nij,nkj->nik", H, H) / d + np.eye(d)
    b = rng.standard_normal((n, d))
    xstar = np.linalg.solve(Q.sum(0), b.sum(0))

    def grad(X):
        return np.einsum("nij,nj->ni", Q, X) - b

    for net, exact in ((Schedule(mats), False), (Schedule([mats[1]]), True)):
        opt = PullDiagGT(net, np.zeros((n, d)), lr=0.02)
        for _ in range(4000):
            opt.step(grad)
        X = np.asarray(opt.x)
        assert np.ptp(X, axis=0).max() < 1e-10  # consensus, and stopped
        off = np.abs(X.mean(0) - xstar).max()
        assert (off < 1e-10) if exact else (off > 1e-3), off


def test_a_schedule_s_messages_name_what_to_write():
    """A column-stochastic array given to a Schedule was refused as "must be ... row-stochastic" with no word of
    how to give one; the tracker's error at iteration 1 read "diag(A_0 ... A_0)"."""
    C = np.array([[0.5, 0.2], [0.5, 0.8]])
    with pytest.raises(ValueError, match=r"takes MixingMatrix\(C, stochastic='column'\) for each matrix"):
        Schedule([C, C])
    no_loop = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    with_loop = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]])
    opt = PullDiagGT(Schedule([no_loop, with_loop]), np.zeros((3, 1)), lr=0.1)
    with pytest.raises(ValueError, match=r"diag\(A_0\) is 0 at node 0"):
        for _ in range(3):
            opt.step(lambda X: X - 1.0)


@pytest.mark.parametrize("name", ["robust-gradient-push", "r-fast"])
def test_the_per_link_state_that_cannot_fit_is_refused_before_it_is_made(name, monkeypatch):
    """A complete graph of 3,000 nodes asked NumPy for 6.7 GiB of per-link state with no check first (the
    optimizer's blocks were checked, not its links'): a bare "Unable to allocate", or pages touched until the
    process was killed."""
    from rowstoch_fast.algorithms import REGISTRY

    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(50 * 2**20))  # (50 MiB: the blocks fit, 2 x 40,000 links' not)
    A = topology.complete(200)
    with pytest.raises(MemoryError, match=r"per-link state \(40000 links x 2 x 50 values, .*MiB\) needs about"):
        REGISTRY[name].build(A, np.zeros((2, 200, 50)), 0.01)


def test_a_network_of_the_user_s_that_is_neither_a_layer_nor_a_source_is_named():
    """Helper 196: a Network subclass with n, matrix and map alone met "'Net' object has no attribute 'base'" in its
    first step."""
    from rowstoch_fast import PullDiagGT
    from rowstoch_fast.network import Network

    mats = [topology.exponential(8), topology.ring(8)]

    class Net(Network):
        n = 8

        def matrix(self, t, r=0):
            return mats[t % 2]

    with pytest.raises(TypeError, match=r"Net is a Network that is neither a layer over another \(its base"):
        opt = PullDiagGT(Net(), np.zeros((8, 1)), lr=0.05)
        opt.step(lambda X: X - 1.0)


@pytest.mark.parametrize("call, error, fragment", [
    (lambda nt, net: nt.scale(2.9), TypeError, "t must be an integer, got float 2.9"),
    (lambda nt, net: nt.scale("3"), TypeError, "t must be an integer, got str '3'"),
    (lambda nt, net: nt.scale(True), TypeError, "t must be an integer, got bool True"),
    (lambda nt, net: nt.scale(-1), ValueError, "t must be >= 0, got -1"),
    (lambda nt, net: type(nt)(net, max_bytes=np.nan), ValueError, "max_bytes must be a number above 0"),
    (lambda nt, net: type(nt)(net, max_bytes="x"), TypeError, "max_bytes must be a number above 0"),
    (lambda nt, net: type(nt)(net, kind="bogus"), ValueError, "tracker must be 'exact' or 'perron', got 'bogus'"),
    (lambda nt, net: type(nt)(np.ones((3, 3)) / 3), TypeError, "network must be a network .* or a MixingMatrix, got"),
    (lambda nt, net: rf.tracker.diag_powers(topology.ring(4), 1, 3, max_work=np.nan), ValueError,
     "max_work must be a number above 0"),
])
def test_the_network_trackers_arguments_are_checked(call, error, fragment):
    """Helper 199: ``NetworkTracker.scale(2.9)`` read t = 2's scales and took "3" and True, -1 met a KeyError; a NaN
    limit turned the memory and work checks off; a bogus kind was told it needs a static network."""
    from rowstoch_fast.tracker import NetworkTracker

    net = Lossy(topology.ring(4), 0.2, seed=1)
    nt = NetworkTracker(net)
    with pytest.raises(error, match=fragment):
        call(nt, net)
    np.testing.assert_array_equal(nt.scale(np.int64(2)), NetworkTracker(net).scale(2))


def test_a_layer_that_declares_it_keeps_symmetry_is_checked_under_the_undirected_rule():
    """A links layer of the user's that drops one directed link at even iterations and renormalises that row, and
    declares ``keeps_symmetry``: DIGing, EXTRA and DGD ran on it and settled 0.16 off the minimiser, silently
    (helper 238). Its first rounds are checked; the package's layers pass."""
    from rowstoch_fast.algorithms import DIGing
    from rowstoch_fast.network import Network

    class Thin(Network):
        acts_on, keeps_symmetry = "links", True

        def __init__(self, A):
            self.base, self.n, self.stochastic = A, A.n, "row"

        def matrix(self, t, r=0):
            M = self.base.toarray().copy()
            if t % 2 == 0:
                M[0, 1] = 0
                M[0] /= M[0].sum()
            return MixingMatrix(M)

        def map(self, f):
            return Thin(f(self.base))

    W = topology.ring(6, directed=False, weights="metropolis")
    with pytest.raises(ValueError, match=r"Thin\(.*\): its rounds under the undirected rule are not symmetric and "
                                         r"doubly stochastic, though its layers declare keeps_symmetry: at iteration 0"):
        DIGing(Thin(W), np.zeros((6, 1)), lr=0.05)
    for net in (Lossy(W, 0.3, seed=1), Sleepy(W, 0.4, seed=2), Lossy(Sleepy(W, 0.2, seed=3), 0.5, seed=4)):
        DIGing(net, np.zeros((6, 1)), lr=0.05)  # (the rule's own rounds pass)


@pytest.mark.parametrize("returned, error, fragment", [
    (lambda M: M.toarray(), TypeError, r"Thin.matrix\(0, 0\) must return a rowstoch_fast.MixingMatrix .*got ndarray"),
    (lambda M: M.toarray().tolist(), TypeError, r"Thin.matrix\(0, 0\) must return .*got list"),
    (lambda M: topology.exponential(5), ValueError, r"Thin.matrix\(0, 0\) returned a matrix of 5 nodes; the network "
                                                    r"has 6"),
])
def test_what_a_users_layer_s_matrix_returns_is_checked(returned, error, fragment):
    """Helper 238: a plain layer whose ``matrix`` returned an ndarray ended inside a step in ``AttributeError:
    'numpy.ndarray' object has no attribute 'csr'``, one of 5 nodes in a matmul's "dimension mismatch"."""
    from rowstoch_fast import PullDiagGT
    from rowstoch_fast.network import Network

    class Thin(Network):
        acts_on = "links"

        def __init__(self, A):
            self.base, self.n, self.stochastic = A, A.n, "row"

        def matrix(self, t, r=0):
            return returned(self.base)

        def map(self, f):
            return Thin(f(self.base))

    opt = PullDiagGT(Thin(topology.exponential(6)), np.zeros((6, 2)), 0.05)
    with pytest.raises(error, match=fragment):
        opt.step(lambda X: X - 1.0)
    assert not outside_package_wrapped(Lossy), "the package's own layers are not wrapped"


def test_a_users_layer_s_matrix_as_a_static_or_class_method_is_left_as_it_is():
    """Helper 243: the check above wrapped the class's ``matrix`` whatever it was: a staticmethod met "takes from 1
    to 2 positional arguments but 3 were given", a classmethod "'classmethod' object is not callable"."""
    from rowstoch_fast import PullDiagGT
    from rowstoch_fast.network import Network

    A = topology.exponential(6)

    class Base(Network):
        acts_on = "links"

        def __init__(self):
            self.base, self.n, self.stochastic = A, A.n, "row"

        def map(self, f):
            return type(self)()

    class Static(Base):
        @staticmethod
        def matrix(t, r=0):
            return A

    class Classy(Base):
        @classmethod
        def matrix(cls, t, r=0):
            return A

    for kind in (Static, Classy):
        assert np.isfinite(PullDiagGT(kind(), np.zeros((6, 2)), 0.05).step(lambda X: X - 1.0).x).all()


def outside_package_wrapped(cls):
    return hasattr(cls.__dict__.get("matrix"), "__wrapped__")


@pytest.mark.parametrize("drawn, error, fragment", [
    (lambda n: [True] * n, TypeError, r"S._draw\(0\) must return a bool ndarray of shape \(6,\) .*got a list"),
    (lambda n: np.ones(n, dtype=np.int64), TypeError, r"got an array of int64 and shape \(6,\)"),
    (lambda n: np.ones(n - 1, dtype=bool), ValueError, r"got an array of bool and shape \(5,\)"),
])
def test_what_a_sleepy_subclass_s_draw_returns_is_checked(drawn, error, fragment):
    """Helper 238: a Sleepy subclass whose ``_draw`` returned a list ended in ``AttributeError: 'list' object has no
    attribute 'flags'``."""
    from rowstoch_fast import PullDiagGT

    class S(Sleepy):
        def _draw(self, t):
            return drawn(self.n)

    opt = PullDiagGT(S(topology.exponential(6), 0.5), np.zeros((6, 2)), 0.05)
    with pytest.raises(error, match=fragment):
        opt.step(lambda X: X - 1.0)


def test_a_tracker_scale_past_float_precision_is_blamed_for_the_divergence_not_the_rate():
    """Helper 242: MG-Pull-Diag-GT under sleep, its tracker's scales 1/[D_t]_ii at 1e177-1e288, was told
    "(lr = 1e-09 too large?)" at every rate from 1e-12 to 10. Here a schedule of a directed 64-cycle with self
    weights of 1e-3: [D_t]_ii = 1e-3^t, and lr = 1e-12 does not help."""
    from rowstoch_fast import DivergenceError, PullDiagGT

    n = 64
    A = MixingMatrix(1e-3 * np.eye(n) + (1 - 1e-3) * np.roll(np.eye(n), 1, axis=1))
    b = np.arange(n, dtype=float)[:, None] * np.ones((1, 2))
    opt = PullDiagGT(Schedule([A, A]), np.zeros((n, 2)), 1e-12)
    with pytest.raises(DivergenceError, match=r"with the tracker's scale 1/\[D_t\]_ii .* up to 1e\+\d\d: past 1/eps "
                                              r"= 4.5e\+15, .* no rate \(lr = 1e-12\) makes up for it") as err:
        for _ in range(100):
            opt.step(lambda X: X - b)
    assert err.value.what == "tracker" and np.isfinite(opt.x).all()
    ring = topology.ring(8)
    for net in (ring, Schedule([ring, ring])):  # (a rate too large, its scales small: the rate, as before)
        opt = PullDiagGT(net, np.zeros((8, 2)), 10.0)
        with pytest.raises(DivergenceError, match=r"\(lr = 10.0 too large\?"):
            for _ in range(2000):
                opt.step(lambda X: X - b[:8])


def test_the_communication_figure_labels_a_setting_once_where_methods_share_its_point(tmp_path, monkeypatch):
    """Helper 246: "qsgd 2b" and "top-8" were written over each other where several methods' points of one setting
    lie together; a label is drawn once there, in its method's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rowstoch_fast.experiments import robustness

    seen = {}
    real = robustness._finish

    def keep(plt_, fig, axes, out_dir, name, log):
        seen["axes"] = axes
        monkeypatch.setattr(plt_, "close", lambda fig: None)
        real(plt_, fig, axes, out_dir, name, log)

    monkeypatch.setattr(robustness, "_finish", keep)
    robustness.reproduce_communication(str(tmp_path), rounds_budget=20, repeats=1, d=8, n=8,
                                       algorithms=["dgd", "dsgd"], delays=(1,), progress=False, log=lambda *a: None)
    for ax in seen["axes"][0][:2]:
        texts = [(t.get_text(), tuple(np.round(np.log10(t.xy), 6))) for t in ax.texts]
        assert texts and len(texts) == len(set(texts))
        lines = {ln.get_color() for ln in ax.get_lines()}
        assert all(t.get_color() in lines for t in ax.texts)
    plt.close("all")
