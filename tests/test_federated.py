"""Federated methods (a server and clients: rowstoch_fast/algorithms/_federated.py) beyond the registry tests of
tests/test_algorithms.py (their dense twins, replicas, resumes, the emulated GPU, divergence): what reduces to
what, the client selection rules, unequal local work, partial participation, the counts, the participation and
drift metrics, FedPD and FedLT, and bad hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast import DivergenceError, FedAvg, FedDyn, FedLT, FedNova, FedOpt, FedPD, FedProx, Scaffold, _reference
from rowstoch_fast.algorithms import REGISTRY, names
from rowstoch_fast.algorithms._federated import Federated
from conftest import steps_until

FEDERATED = names(lambda cls: cls.federated)


def problem(n=10, d=3, seed=0):
    """Heterogeneous quadratics ``f_i(x) = 1/2 x^T diag(a_i) x - b_i^T x`` and the minimiser of their sum."""
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.5, 2.0, (n, d)), rng.standard_normal((n, d))
    return (lambda X: a * X - b), b.sum(0) / a.sum(0)


def run(cls, T, grad, n=10, d=3, **options):
    opt = cls(n, np.zeros(d), **{"lr": 0.05, **options})
    for _ in range(T):
        opt.step(grad)
    return opt


def test_every_federated_method_is_registered_and_left_out_of_the_default_comparison():
    from rowstoch_fast import topology
    from rowstoch_fast.compare.plan import default_algorithms

    assert set(FEDERATED) == {"fedavg", "fedprox", "scaffold", "feddyn", "fednova", "fedopt", "fedpd", "fedlt"}
    chosen = default_algorithms(topology.exponential(8))
    assert not set(FEDERATED) & set(chosen) and "centralized" in chosen


def test_fedprox_without_its_term_and_fednova_with_equal_steps_are_fedavg_bit_for_bit():
    grad, _ = problem()
    ref = run(FedAvg, 41, grad, participation=0.6, local_steps=3).x
    np.testing.assert_array_equal(run(FedProx, 41, grad, participation=0.6, local_steps=3, mu=0.0).x, ref)
    np.testing.assert_array_equal(run(FedNova, 41, grad, participation=0.6, local_steps=3).x, ref)
    equal = run(FedNova, 41, grad, participation=0.6, local_steps=3, client_steps=[3] * 10).x  # (tau (u / tau): rounding)
    np.testing.assert_allclose(equal, ref, rtol=1e-14)


WEIGHTS = [5.0, 1.0, 1.0, 2.0, 8.0, 1.0, 3.0, 1.0, 1.0, 4.0]


@pytest.mark.parametrize("name", FEDERATED)
@pytest.mark.parametrize("participation,client_steps,select", [
    (0.3, None, {}), (0.5, [1, 2, 3, 4, 1, 2, 3, 4, 4, 4], {}), (1.0, [2] * 10, {}),
    (0.3, None, {"selection": "size", "client_weights": WEIGHTS}),
    (0.4, [1, 2, 3, 4] * 2 + [4, 4], {"selection": "fair"})])
def test_partial_participation_and_unequal_work_match_the_dense_twin(name, participation, client_steps, select):
    grad, _ = problem(seed=1)
    cls = REGISTRY[name]
    x0 = np.random.default_rng(2).standard_normal((10, 3))
    options = {"participation": participation, "client_steps": client_steps, "local_steps": 4, "seed": 5, **select}
    opt = cls(10, x0, 0.05, **options)
    xs = _reference.TWINS[name](10, x0, 0.05, grad, 60, **options)
    for t in range(1, 61):
        opt.step(grad)
        np.testing.assert_allclose(opt.x, xs[t], rtol=1e-12, atol=1e-14, err_msg=f"{name} at {t}")
    assert opt.communication_rounds == 15


@given(n=st.integers(1, 40), p=st.floats(0.01, 1.0), seed=st.integers(0, 2**40), r=st.integers(0, 10**12),
       selection=st.sampled_from(["uniform", "size", "fair"]), wseed=st.integers(0, 100))
@settings(max_examples=90, deadline=None)
def test_each_round_chooses_its_share_of_the_clients_the_same_everywhere(n, p, seed, r, selection, wseed):
    m = Federated.clients_for(n, p)
    assert 1 <= m <= n and (m == 1 or m <= p * n + 1e-9) and m > p * n - 1
    w = np.random.default_rng(wseed).uniform(1e-3, 1e3, n) if selection == "size" else None
    mask = Federated.chosen(n, m, seed, r, selection, w)
    assert mask.dtype == bool and mask.shape == (n,) and mask.sum() == m
    np.testing.assert_array_equal(mask, Federated.chosen(n, m, seed, r, selection, w))  # a function of (seed, round)


def test_the_clients_of_a_round_are_the_fraction_rounded_down():
    assert [Federated.clients_for(n, p) for n, p in [(12, 0.3), (7, 0.5), (10, 0.25), (100, 0.29), (10, 0.01)]] \
        == [3, 3, 2, 29, 1]


def test_the_choice_is_uniform_over_the_clients_and_changes_with_the_round_and_the_seed():
    counts = sum(Federated.chosen(20, 5, 3, r).astype(int) for r in range(4000))
    assert abs(counts / 4000 - 0.25).max() < 0.03  # each client in about a quarter of the rounds
    assert not np.array_equal(Federated.chosen(20, 5, 3, 0), Federated.chosen(20, 5, 3, 1))
    assert not np.array_equal(Federated.chosen(20, 5, 3, 0), Federated.chosen(20, 5, 4, 0))


@pytest.mark.parametrize("cls", [Scaffold, FedDyn])
def test_the_drift_corrected_methods_reach_the_minimiser_with_partial_participation(cls):
    grad, xstar = problem(seed=3)
    opt = run(cls, 16000, grad, participation=0.5, **({"alpha": 1.0} if cls is FedDyn else {}))
    assert np.abs(opt.x - xstar).max() < 1e-9 * np.abs(xstar).max()


def test_fedavg_drifts_in_proportion_to_its_local_steps_and_scaffold_does_not():
    grad, xstar = problem(seed=4)
    drift = [np.abs(run(FedAvg, 4000 * K, grad, lr=0.01, local_steps=K).x - xstar).max() for K in (2, 8)]
    assert 2.5 < drift[1] / drift[0] < 10  # O(lr (K - 1)): 7 / 1
    assert np.abs(run(Scaffold, 32000, grad, lr=0.01, local_steps=8).x - xstar).max() < 1e-10


def test_fednova_removes_the_inconsistency_of_unequal_local_work():
    """Clients that take more steps pull FedAvg towards their own minimisers (Wang et al. 2020, Theorem 1):
    FedAvg goes to the minimiser of ``sum_i tau_i f_i``, FedNova to that of ``sum_i f_i`` (to O(lr))."""
    b = np.arange(8.0)[:, None]
    tau = np.arange(1, 9)
    grad = lambda X: X - b  # noqa: E731
    avg = run(FedAvg, 16000, grad, n=8, d=1, lr=0.005, local_steps=8, client_steps=tau).x.mean()
    nova = run(FedNova, 16000, grad, n=8, d=1, lr=0.005, local_steps=8, client_steps=tau).x.mean()
    assert abs(avg - (tau @ b.ravel()) / tau.sum()) < 0.05 and abs(nova - 3.5) < 0.03


@pytest.mark.parametrize("server_optimizer", ["adam", "adagrad", "yogi"])
def test_fedopt_moves_the_server_about_server_lr_per_coordinate_at_first(server_optimizer):
    grad, _ = problem(seed=6)
    opt = run(FedOpt, 4, grad, local_steps=4, server_optimizer=server_optimizer, server_lr=0.01, tau=1e-9)
    # m / sqrt(v) after one round: 0.1 D / (0.1 |D|) (adam, yogi: sqrt(0.01 D^2)), 0.1 D / |D| (adagrad)
    expected = 0.01 if server_optimizer != "adagrad" else 0.001
    np.testing.assert_allclose(np.abs(opt.x[0]), expected, rtol=1e-6)


def test_traffic_counts_an_upload_and_a_download_per_chosen_client():
    grad, _ = problem()
    opt = run(FedAvg, 20, grad, participation=0.3, local_steps=4)  # 3 clients a round, 5 rounds
    assert opt.communication_rounds == 5 and opt.traffic() == {"messages": 30, "bytes": 30 * 3 * 8}
    opt = run(Scaffold, 20, grad, participation=0.3, local_steps=4)  # (the model and the control variate, each way)
    assert opt.traffic() == {"messages": 30, "bytes": 30 * 2 * 3 * 8}


def test_samples_count_only_the_steps_the_chosen_clients_take():
    grad, _ = problem()
    tau = [1, 2, 3, 4, 1, 2, 3, 4, 4, 4]
    opt = run(FedAvg, 22, grad, participation=0.3, local_steps=4, client_steps=tau, seed=3)
    steps = sum(np.asarray(tau)[Federated.chosen(10, 3, 3, r)].sum() for r in range(5))
    steps += np.minimum(tau, 2)[Federated.chosen(10, 3, 3, 5)].sum()
    assert opt.samples_drawn(batch=7) == steps * 7 / 10
    assert run(FedAvg, 22, grad, participation=0.3).samples_drawn(batch=2) == 22 * 3 * 2 / 10


def test_the_server_model_is_every_row_after_a_round_and_the_state_resumes_mid_round():
    grad, _ = problem()
    opt = run(Scaffold, 6, grad, participation=0.5, local_steps=4, seed=9)
    state = opt.state_dict()
    again = Scaffold.from_state_dict(state)
    for _ in range(2):
        opt.step(grad)
        again.step(grad)
    np.testing.assert_array_equal(opt.x, again.x)
    assert np.ptp(opt.x, axis=0).max() == 0.0  # iteration 8 ends round 2: the server model on every row


@pytest.mark.parametrize("options,match", [
    ({"participation": 0.0}, "participation must be"),
    ({"participation": 1.5}, r"participation must be a fraction of the clients in \(0, 1\]"),
    ({"participation": float("nan")}, "participation"),
    ({"client_steps": [1, 2]}, "client_steps must be 10 integers"),
    ({"client_steps": [0.5] * 10}, "client_steps must be 10 integers"),
    ({"client_steps": [5] * 10}, r"client_steps must lie in 1 .. local_steps = 4, got client_steps\[0\] = 5"),
    ({"client_steps": [1] * 9 + [0]}, r"client_steps\[9\] = 0"),
    ({"local_steps": 0}, "local_steps"),
    ({"seed": -1}, "seed"),
])
def test_bad_federated_hyperparameters_are_named(options, match):
    with pytest.raises((ValueError, TypeError), match=match):
        FedAvg(10, np.zeros(3), 0.1, **options)


@pytest.mark.parametrize("cls,options,match", [
    (FedProx, {"mu": -1.0}, "mu"), (FedDyn, {"alpha": 0.0}, "alpha"), (Scaffold, {"server_lr": 0.0}, "server_lr"),
    (FedOpt, {"server_optimizer": "sgd"}, "server_optimizer must be one of 'adam', 'adagrad', 'yogi'"),
    (FedOpt, {"beta1": 1.0}, r"beta1 must lie in \[0, 1\)"), (FedOpt, {"beta2": -0.1}, "beta2"),
    (FedOpt, {"tau": 0.0}, "tau"), (FedDyn, {"alpha": 5e-324}, r"alpha = 5e-324 is subnormal"),
    (FedOpt, {"tau": 1e-310}, r"tau = 1e-310 is subnormal"),
])
def test_bad_method_hyperparameters_are_named(cls, options, match):
    """(A subnormal alpha was taken: FedDyn's h / alpha ended 0.38 off at 5e-324, unsaid.)"""
    with pytest.raises(ValueError, match=match):
        cls(10, np.zeros(3), 0.1, **options)


def test_a_setting_as_a_0d_array_counts_and_a_divergence_names_the_other_settings():
    """``lr=np.array(0.5)`` was taken and ``mu=np.array(0.5)`` refused; a divergence that ``mu = 1e300`` made
    blamed the rate alone."""
    assert FedProx(10, np.zeros(3), np.array(0.1), mu=np.array(0.5)).mu == 0.5
    b = np.arange(30.0).reshape(10, 3)
    opt = FedProx(10, np.zeros(3), 0.05, mu=1e300)
    with pytest.raises(DivergenceError, match=r"\(lr = 0.05 too large\?; or one of its other settings: "
                                                  r"participation = 1.0, mu = 1e\+300\)"), np.errstate(all="ignore"):
        for _ in range(20):
            opt.step(lambda X: X - b)


def test_a_diverging_round_keeps_the_last_finite_state():
    grad, _ = problem()
    opt = FedAvg(10, np.ones(3), 0.1, local_steps=2)
    with pytest.raises(DivergenceError), np.errstate(over="ignore"):
        for _ in range(200):
            opt.step(lambda X: 1e300 * X)
    assert np.isfinite(opt.x).all() and np.isfinite(opt.state_dict()["server"]).all()


def test_the_shipped_federated_experiment_puts_both_kinds_in_one_table(tmp_path, capsys, monkeypatch):
    """examples/federated.toml at a smaller budget: FedAvg and SCAFFOLD beside DSGD, Push-Pull and Pull-Diag-GT on
    label-sorted data, with the test accuracy; the rounds agree, the uploads and downloads are counted per client,
    the local steps show in the gradient evaluations; ``--live`` draws its figure and text plot as they finish."""
    import pathlib

    import pandas as pd

    from rowstoch_fast.cli import main

    from rowstoch_fast.compare import live

    monkeypatch.setattr(live, "_has_window", lambda: False)  # (a machine with a display would draw a window instead)
    monkeypatch.setattr(live, "CLI_TEXT_EVERY", 1e9)  # (the first text plot, then the newest at the end: not 5)
    example = pathlib.Path(__file__).resolve().parents[1] / "examples" / "federated.toml"
    assert main(["compare", "--config", str(example), "--rounds-budget", "150", "--repeats", "1", "--total", "8000",
                 "--batch", "500",
                 "--live", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    table = pd.read_csv(tmp_path / "o" / "summary.csv").set_index("algorithm")
    assert set(table.index) == {"fedavg", "scaffold", "dsgd", "push-pull", "pull-diag-gt"}
    assert (table["communication_rounds"] == 150).all() and table["test_accuracy"].between(0.5, 1.0).all()
    assert table.loc["fedavg", "messages"] == 2 * 16 * 150  # an upload and a download per client and round
    assert table.loc["fedavg", "gradient_evaluations"] == 8 * table.loc["dsgd", "gradient_evaluations"]
    # the label skew: FedAvg's clients drift apart, SCAFFOLD's control variates correct it
    assert table.loc["scaffold", "suboptimality"] < 1e-3 * table.loc["fedavg", "suboptimality"]
    assert (tmp_path / "o" / "live.png").read_bytes()[:4] == b"\x89PNG"
    err = capsys.readouterr().err
    assert err.count("suboptimality (log10) against communication rounds") == 2
    last = err.rsplit("suboptimality (log10) against communication rounds", 1)[1]
    assert all(f" {name} " in last for name in table.index)  # (the end's: every method)


def test_a_label_split_is_refused_for_a_problem_without_labels(tmp_path, capsys):
    from rowstoch_fast.cli import main

    assert main(["compare", "--objective", "least-squares", "--split", "sorted", "--n", "8", "--out",
                 str(tmp_path / "o"), "-q"]) == 2
    assert "--split" in capsys.readouterr().err
    assert main(["compare", "--objective", "logistic-l2", "--split", "classes:3", "--total", "1600", "--n", "8",
                 "--algorithms", "fedavg", "--out", str(tmp_path / "p"), "-q"]) == 2
    assert "--split classes:3" in capsys.readouterr().err


def test_rowstoch_run_reports_the_rounds_of_a_method_with_local_steps(tmp_path, capsys):
    from rowstoch_fast.cli import main

    assert main(["run", "--algorithm", "scaffold", "--topology", "exponential", "--n", "8", "--objective",
                 "least-squares", "--iterations", "400", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "done at iteration 400 (100 communication rounds" in capsys.readouterr().out  # (it said 400)


def test_a_client_that_takes_no_step_adds_nothing_even_a_nan_of_its_own():
    grad, _ = problem()
    chosen = Federated.chosen(10, 3, 0, 0)
    silent = int(np.flatnonzero(~chosen)[0])

    def noisy(X):  # (a client not chosen in round 0 whose gradient is NaN)
        G = grad(X)
        G[silent] = np.nan
        return G

    opt = FedAvg(10, np.zeros(3), 0.05, participation=0.3, check_finite=False)
    ref = FedAvg(10, np.zeros(3), 0.05, participation=0.3)
    for _ in range(4):  # (round 0)
        opt.step(noisy)
        ref.step(grad)
    np.testing.assert_array_equal(opt.x, ref.x)
    with pytest.raises(Exception, match="gradient"):  # (checked, the oracle's NaN is still an error)
        FedAvg(10, np.zeros(3), 0.05, participation=0.3).step(noisy)


def test_rowstoch_run_takes_a_method_s_other_hyperparameters(tmp_path, capsys):
    import json

    from rowstoch_fast.cli import main

    base = ["run", "--algorithm", "fednova", "--topology", "exponential", "--n", "4", "--objective", "least-squares",
            "--iterations", "40", "--no-progress"]
    assert main(base + ["--hyper", "local_steps=4", "--hyper", "client_steps=[1,2,3,4]", "--hyper",
                        "participation=0.5", "--out", str(tmp_path / "o")]) == 0
    assert "(10 communication rounds" in capsys.readouterr().out
    meta = json.loads((tmp_path / "o" / "history.json").read_text())
    assert "client_steps=[1,2,3,4]" in json.dumps(meta)
    assert main(base + ["--hyper", "local_steps=4", "--hyper", "client_steps=1,2,3,4",  # (the per-node form of
                        "--out", str(tmp_path / "c")]) == 0  # --bits; helper 204: read as text, "got shape ()")
    assert "(10 communication rounds" in capsys.readouterr().out
    for bad, match in [(["--hyper", "local_steps"], "--hyper takes NAME=VALUE"),
                       (["--hyper", "mu=0.1"], "fednova takes no hyperparameter 'mu'"),
                       (["--hyper", "lr=0.1"], "--hyper lr: use --lr"),
                       (["--hyper", "A=1"], "--hyper A: the network: use --topology or --matrix"),  # (helper
                       # 192: "Algorithm.__init__() got multiple values for argument 'A'")
                       (["--hyper", "seed=1", "--hyper", "seed=2"], "--hyper seed: given twice"),
                       (["--hyper", "client_steps=[1,2]"], "client_steps must be 4 integers"),
                       (["--hyper", "client_steps=1,2,x"], "client_steps must be 4 integers")]:
        assert main(base + bad + ["--out", str(tmp_path / "x")]) == 2
        assert match in capsys.readouterr().err


# ----------------------------------------------------------------- the selection rules
def test_size_selection_takes_a_client_in_proportion_to_its_weight():
    """One client a round: chosen with probability ``w_i / sum w``; two of four: the inclusion probabilities of
    successive sampling without replacement, ``p_i + sum_{j != i} p_j w_i / (W - w_j)``."""
    w = np.array([1.0, 2.0, 3.0, 10.0])
    R = 20000
    one = sum(Federated.chosen(4, 1, 7, r, "size", w).astype(int) for r in range(R)) / R
    np.testing.assert_allclose(one, w / w.sum(), atol=0.012)
    W = w.sum()
    both = np.array([w[i] / W + sum(w[j] / W * w[i] / (W - w[j]) for j in range(4) if j != i) for i in range(4)])
    two = sum(Federated.chosen(4, 2, 7, r, "size", w).astype(int) for r in range(R)) / R
    np.testing.assert_allclose(two, both, atol=0.015)
    assert abs(two - np.array([0.5] * 4)).max() > 0.3  # (not uniform)
    equal = sum(Federated.chosen(8, 2, 7, r, "size").astype(int) for r in range(4000)) / 4000  # no weights: equal
    assert abs(equal - 0.25).max() < 0.03


def test_fair_selection_takes_the_clients_chosen_least_often_then_least_recently():
    """Against the rule itself, simulated: the ``m`` clients with the fewest turns so far, ties to the one whose
    last turn is oldest (never chosen: oldest of all), then to the seeded order; counts never differ by more than
    one."""
    n, m, seed = 7, 3, 11
    rank = np.argsort(Federated.fair_order(n, seed))  # the place of each client in the fixed order
    counts, last = np.zeros(n, dtype=int), np.full(n, -1)
    for r in range(40):
        want = sorted(range(n), key=lambda i: (counts[i], last[i], rank[i]))[:m]
        mask = Federated.chosen(n, m, seed, r, "fair")
        assert set(np.flatnonzero(mask)) == set(want), r
        counts[want] += 1
        last[want] = r
        assert counts.max() - counts.min() <= 1
    assert not np.array_equal(Federated.fair_order(n, 1), Federated.fair_order(n, 2))


@pytest.mark.parametrize("options,match", [
    ({"selection": "loss"}, "selection must be one of 'uniform', 'size', 'fair'"),
    ({"client_weights": [1.0] * 10}, 'client_weights are the weights of selection="size"'),
    ({"selection": "size", "client_weights": [1.0] * 9},
     r"client_weights must be 10 positive finite numbers .* shape \(9,\)"),
    ({"selection": "size", "client_weights": [1.0] * 9 + [0.0]}, r"client_weights\[9\] = 0.0"),
    ({"selection": "size", "client_weights": [1.0] * 8 + [np.nan, 1.0]}, r"client_weights\[8\] = nan"),
    ({"selection": "size", "client_weights": ["a"] * 10}, "client_weights must be 10 positive numbers"),
])
def test_bad_selections_are_named(options, match):
    with pytest.raises(ValueError, match=match):
        FedAvg(10, np.zeros(3), 0.1, participation=0.5, **options)


@pytest.mark.parametrize("weights", [["1"] * 10, [True] * 10])
def test_client_weights_that_are_not_numbers_are_refused(weights):
    # (helper 273: strings were read as the numbers they spell, and True as 1)
    with pytest.raises(TypeError, match=r"client_weights must be 10 positive real numbers \(one per client\), got "
                                        r"dtype (<U1|bool)"):
        FedAvg(10, np.zeros(3), 0.1, participation=0.5, selection="size", client_weights=weights)
    from decimal import Decimal
    from fractions import Fraction

    for exact in ([Fraction(1, 2)] * 10, [Decimal("1.5")] * 10):  # (numbers, held as objects: read, helper 274)
        assert FedAvg(10, np.zeros(3), 0.1, participation=0.5, selection="size",
                      client_weights=exact).client_weights[0] in (0.5, 1.5)


def test_a_selection_rule_survives_a_resume_and_is_saved():
    grad, _ = problem()
    opt = run(FedAvg, 6, grad, participation=0.3, selection="size", client_weights=WEIGHTS, seed=4)
    state = opt.state_dict()
    again = FedAvg.from_state_dict(state)
    assert again.selection == "size" and np.array_equal(again.client_weights, WEIGHTS)
    for _ in range(10):
        opt.step(grad)
        again.step(grad)
    np.testing.assert_array_equal(opt.x, again.x)
    np.testing.assert_array_equal(opt.participation_counts(), again.participation_counts())


# ----------------------------------------------------------------- participation and drift
@pytest.mark.parametrize("select", [{}, {"selection": "size", "client_weights": WEIGHTS}, {"selection": "fair"}])
def test_participation_counts_are_the_rounds_done_that_chose_each_client(select):
    grad, _ = problem()
    opt = FedAvg(10, np.zeros(3), 0.05, participation=0.3, local_steps=4, seed=2, **select)
    assert opt.participation_counts().tolist() == [0] * 10 and np.isnan(opt.participation_fairness())
    for t in range(1, 47):
        opt.step(grad)
        if t in (3, 4, 21, 46):  # (mid-round: the rounds done only)
            want = sum(Federated.chosen(10, 3, 2, r, **select).astype(int) for r in range(t // 4))
            np.testing.assert_array_equal(opt.participation_counts(), want)
            assert opt.participation_counts().sum() == 3 * (t // 4)
    c = opt.participation_counts().astype(float)
    assert opt.participation_fairness() == pytest.approx(c.sum() ** 2 / (10 * (c * c).sum()), rel=1e-15)


def test_participation_fairness_is_jains_index_by_hand():
    opt = run(FedAvg, 8, problem(n=4)[0], n=4, participation=0.25, selection="fair", local_steps=4)
    assert sorted(opt.participation_counts().tolist()) == [0, 0, 1, 1]  # 2 rounds, one client each
    assert opt.participation_fairness() == 0.5  # (1 + 1)^2 / (4 (1 + 1))
    opt = run(FedAvg, 4 * 4, problem(n=4)[0], n=4, participation=0.25, selection="fair", local_steps=4)
    assert opt.participation_fairness() == 1.0
    opt = run(FedAvg, 12, problem(n=4)[0], n=4, participation=0.5, local_steps=4, seed=1)
    c = opt.participation_counts()
    assert opt.participation_fairness() == (c.sum() ** 2) / (4 * (c ** 2).sum())
    assert run(FedAvg, 8, problem(n=4)[0], n=4).participation_counts().tolist() == [2] * 4  # (everyone)


def test_client_drift_is_the_mean_distance_of_the_chosen_clients_models_from_the_server_by_hand():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.5, 2.0, (2, 6, 4)), rng.standard_normal((2, 6, 4))  # two replicas, 6 clients, d = 4
    grad = lambda X: a * X - b  # noqa: E731
    x0 = rng.standard_normal((2, 6, 4))
    lr, K = 0.1, 3
    opt = FedAvg(6, x0, lr, local_steps=K, participation=0.5, seed=8)
    assert opt.client_drift().shape == (2,) and np.isnan(opt.client_drift()).all()
    s = x0.mean(axis=1, keepdims=True)
    for r in range(3):
        S = Federated.chosen(6, 3, 8, r)
        y = np.broadcast_to(s, x0.shape).copy()
        for _ in range(K):
            y = y - lr * grad(y)
            opt.step(grad)
        drift = np.linalg.norm(y[:, S] - s, axis=-1).mean(axis=1)
        np.testing.assert_allclose(opt.client_drift(), drift, rtol=1e-13)
        s = y[:, S].mean(axis=1, keepdims=True)
    one = FedAvg(6, x0[0], lr, local_steps=K)
    for _ in range(K):
        one.step(lambda X: grad(X[None])[0])
    assert one.client_drift().shape == ()


def test_client_drift_vanishes_where_the_method_corrects_it():
    grad, _ = problem(seed=4)
    avg, scaffold = run(FedAvg, 4000, grad, lr=0.02), run(Scaffold, 4000, grad, lr=0.02)
    assert avg.client_drift() > 1e-2 and scaffold.client_drift() < 1e-12
    fedlt = run(FedLT, 4000, grad, lr=0.05, participation=0.5)
    assert fedlt.client_drift() < 1e-12


def test_the_federated_metrics_read_the_method_of_the_state():
    from rowstoch_fast import DSGD, topology
    from rowstoch_fast.user_metrics import MetricState, higher_is_better, resolve_metrics

    grad, _ = problem()
    opt = run(FedAvg, 14, grad, participation=0.3, selection="fair", seed=1)
    drift, fair, low, high = resolve_metrics(["client_drift", "participation_fairness", "node_min_participation",
                                              "node_max_participation"])
    state = MetricState(x=opt.x, x_bar=opt.x.mean(0), iteration=14, communication_rounds=3, samples=0.0, rep=0,
                        objective=None, algorithm=opt)
    assert drift.measure(state) == float(opt.client_drift())
    assert fair.measure(state) == opt.participation_fairness()
    assert (low.measure(state), high.measure(state)) == (0.0, 1.0)  # 3 rounds of 3 clients out of 10, in turn
    assert higher_is_better("participation_fairness") and not higher_is_better("client_drift")
    other = DSGD(topology.exponential(10), np.zeros(3), 0.1)
    for metric in (drift, fair, low):
        assert np.isnan(metric.measure(MetricState(x=other.x, x_bar=other.x.mean(0), iteration=0,
                                                   communication_rounds=0, samples=0.0, rep=0, objective=None,
                                                   algorithm=other)))
    with pytest.raises(ValueError, match="built-in"):
        from rowstoch_fast.user_metrics import register_metric
        register_metric("client_drift", lambda s: 0.0)


def test_the_harness_records_the_federated_metrics():
    from rowstoch_fast import Algorithm, run as run_harness, topology
    from rowstoch_fast.objectives import Quadratic

    f = Quadratic.random(8, 3, seed=0)
    h = run_harness(Algorithm(topology.exponential(8), 0.05, method="fedavg", participation=0.5, selection="fair"),
                    f, 40, record_every=8, progress=False,
                    metrics=["client_drift", "participation_fairness", "node_max_participation"])
    frame = h.frame
    assert frame["participation_fairness"].iloc[1:].eq(1.0).all()
    assert frame["node_max_participation"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert np.isnan(frame["client_drift"].iloc[0]) and (frame["client_drift"].iloc[1:] > 0).all()


# ----------------------------------------------------------------- FedPD and FedLT
@pytest.mark.parametrize("cls,options", [(FedPD, {"eta": 1.0}), (FedPD, {"eta": 0.5, "local_steps": 1}),
                                         (FedLT, {"rho": 1.0}), (FedLT, {"rho": 0.5, "participation": 0.5}),
                                         (FedLT, {"rho": 1.0, "participation": 0.3, "selection": "fair"})])
def test_fedpd_and_fedlt_reach_the_minimiser_on_heterogeneous_quadratics(cls, options):
    """Every client's own model goes to the minimiser of the sum (the primal-dual fixed points: tested with
    every client for FedPD, whose reference analyses that; with a part of them for FedLT too)."""
    grad, xstar = problem(seed=3)
    opt = run(cls, 0, grad, **options)  # (built, not stepped)
    tol = 1e-12 * max(1.0, np.abs(xstar).max())
    errors = steps_until(opt, grad, lambda x: np.abs(x - xstar).max(), tol, 16000)
    assert errors[-1] < tol, errors


def test_fedpd_with_a_part_of_the_clients_is_not_exact():
    """(What its docstring says: the stale centres of the clients not chosen bias the average.)"""
    grad, xstar = problem(seed=3)
    assert np.abs(run(FedPD, 16000, grad, participation=0.5).x - xstar).max() > 1e-2


@pytest.mark.parametrize("cls", [FedPD, FedLT])
def test_fedpd_and_fedlt_clients_keep_their_own_models(cls):
    """Each client starts at its row of x0 (not the server's mean) and keeps its model between rounds: the first
    local step is a plain gradient step from x0 (lambda = 0, the centre or v equal to the mean for the first round
    of FedPD, 2 y - z for FedLT), and a client not chosen keeps its row."""
    grad, _ = problem()
    x0 = np.random.default_rng(5).standard_normal((10, 3))
    opt = cls(10, x0, 0.05, participation=0.3, seed=1, local_steps=2)
    s = x0.mean(axis=0)
    opt.step(grad)
    S = Federated.chosen(10, 3, 1, 0)
    extra = (x0 - s) / 1.0  # FedPD: (y - c) / eta with c = s; FedLT: (w - (2 y - z)) / rho = (x0 - 2 s + x0)
    extra = extra if cls is FedPD else 2.0 * (x0 - s)
    want = np.where(S[:, None], x0 - 0.05 * (grad(x0) + extra), x0)
    np.testing.assert_allclose(opt.x, want, rtol=1e-14)
    opt.step(grad)
    np.testing.assert_array_equal(opt.x[~S], x0[~S])  # (after the round too: nobody downloads a model)
    assert np.ptp(opt.x, axis=0).min() > 0


@pytest.mark.parametrize("method", ["fedpd", "fedlt", "fedavg"])
def test_the_harness_measures_the_model_the_method_hands_over(method):
    """FedPD's and FedLT's records are of the server's model (``gather_output``), not of the clients' mean, which
    no one holds (helper 273: under partial participation FedPD's mean was 15-100x closer to x* than its server's
    model); a user's metric sees the same rows; a method that downloads measures ``x`` as before."""
    import warnings

    import rowstoch_fast as rf
    from rowstoch_fast.objectives import LeastSquares
    from rowstoch_fast.user_metrics import Metric

    f = LeastSquares.synthetic(10, d=4, heterogeneity=2.0, seed=3)
    x0 = np.random.default_rng(1).standard_normal((10, 4))
    fresh = rf.Algorithm(rf.topology.ring(10), 0.02, method=method).build(x0)
    np.testing.assert_allclose(fresh.gather_output(), np.broadcast_to(x0.mean(axis=0), (10, 4)), rtol=1e-14)  # (s_0
    # before the first step: the block had read 0, helper 276)
    seen = []
    spread = Metric("row_spread", lambda state: seen.append(np.ptp(state.x, axis=0).max()) or 0.0)
    alg = rf.Algorithm(rf.topology.ring(10), 0.02, method=method, participation=0.5, local_steps=2)
    opt = alg.build(f.x0())
    oracle = f.oracle()
    for _ in range(40):
        opt.step(oracle)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the repetitions share one draw: said, not wanted here)
        frame = rf.run(alg, f, 40, record_every=40, progress=False, metrics=["suboptimality", "consensus_error",
                                                                            spread])
    measured = opt.gather_output()
    np.testing.assert_array_equal(measured, opt.gather_state("server"))
    if method == "fedavg":
        np.testing.assert_array_equal(measured, opt.gather_x())  # (after a round: the download)
    else:
        assert np.ptp(opt.gather_x(), axis=0).max() > 1e-3  # (the clients' models differ: the test can fail)
    best = f.optimum().value
    want = f.value_and_gradient_at(measured.mean(axis=0)[None])[0][0] - best
    assert frame.final("suboptimality") == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert frame.final("consensus_error") < 1e-12 and max(seen) < 1e-12  # (the server's model on every row)


def test_a_checkpoint_of_an_earlier_version_that_measured_other_models_is_not_resumed(tmp_path):
    """Helper 276: an earlier version's checkpoint of FedLT (records of its clients' mean) resumed into records of
    the server's model, one history of both; FedAvg's records at rounds' ends are the same models, and resume."""
    import json
    import warnings

    import rowstoch_fast as rf
    from rowstoch_fast.objectives import LeastSquares

    f = LeastSquares.synthetic(8, d=3, seed=2)

    def earlier(path):  # (as an earlier version wrote it: no "measured" in its configuration)
        data = dict(np.load(path))
        meta = json.loads(str(data["meta"]))
        meta["config"].pop("measured", None)
        data["meta"] = np.array(json.dumps(meta))
        np.savez(path, **data)

    for method, every, refused in [("fedlt", 8, True), ("fedavg", 8, False), ("fedavg", 6, True)]:
        alg = rf.Algorithm(rf.topology.ring(8), 0.02, method=method, participation=0.5)
        ck = tmp_path / f"{method}{every}.npz"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rf.run(alg, f, 24, record_every=every, checkpoint=str(ck), progress=False)
            earlier(ck)
            if refused:
                with pytest.raises(ValueError, match=r"written by an earlier version, which measured "
                                                     rf"{method} by its clients' models; this version measures "
                                                     r"the server's model"):
                    rf.run(alg, f, 48, record_every=every, resume=str(ck), progress=False)
            else:
                assert rf.run(alg, f, 48, record_every=every, resume=str(ck), progress=False).frame[
                    "iteration"].max() == 48
    alg = rf.Algorithm(rf.topology.ring(8), 0.02, method="fedavg")  # (this version's: its spacing may change)
    rf.run(alg, f, 24, record_every=8, checkpoint=str(tmp_path / "now.npz"), progress=False)
    assert rf.run(alg, f, 48, record_every=6, resume=str(tmp_path / "now.npz"), progress=False).frame[
        "iteration"].max() == 48


def test_fedpd_and_fedlt_count_one_block_each_way():
    grad, _ = problem()
    for cls in (FedPD, FedLT):
        opt = run(cls, 20, grad, participation=0.3, local_steps=4)
        assert opt.communication_rounds == 5 and opt.traffic() == {"messages": 30, "bytes": 30 * 3 * 8}


@pytest.mark.parametrize("cls,options,match", [(FedPD, {"eta": 0.0}, "eta"), (FedPD, {"eta": -1.0}, "eta"),
                                               (FedLT, {"rho": 0.0}, "rho"), (FedLT, {"rho": float("inf")}, "rho")])
def test_bad_fedpd_and_fedlt_hyperparameters_are_named(cls, options, match):
    with pytest.raises(ValueError, match=match):
        cls(10, np.zeros(3), 0.1, **options)


# ----------------------------------------------------------------- FedPD's rounds without communication
@pytest.mark.parametrize("options", [{"skip_probability": 0.5}, {"skip_probability": 0.3, "participation": 0.4,
                                                                 "local_steps": 3, "selection": "fair"},
                                     {"skip_probability": 0.7, "client_steps": [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]}])
def test_fedpd_skipping_rounds_equals_its_twin(options):
    """A round's end that its coin skips: each chosen client takes its own candidate as its centre, the server
    stays (the reference's p > 0); against the dense twin, which transcribes it separately."""
    grad, _ = problem(seed=4)
    x0 = np.random.default_rng(6).standard_normal((10, 3))
    opt = FedPD(10, x0, 0.05, seed=3, **options)
    xs = _reference.fedpd(10, x0, 0.05, grad, 60, seed=3, **options)
    for t in range(1, 61):
        opt.step(grad)
        np.testing.assert_allclose(opt.x, xs[t], rtol=1e-13, atol=1e-15)
    K = opt.local_steps
    talked = FedPD.communicates(3, options["skip_probability"], np.arange(60 // K))
    assert 0 < talked.sum() < 60 // K  # (some rounds skipped, some not)
    assert opt.communication_rounds == talked.sum()
    assert opt.traffic()["messages"] == 2 * opt.clients_per_round * talked.sum()


def test_fedpd_skipping_rounds_is_not_exact_and_resumes_bit_for_bit():
    """What the docstring derives: a skipped round does not keep the minimiser of the sum (its centres move to
    ``x* - eta grad f_i(x*)``), so with ``p > 0`` the clients' models stay away from it even with exact gradients
    and every client (with ``p = 0`` they reach it: the test above); a state_dict taken between rounds resumes to
    the bits of the uninterrupted run (the coins' count is rebuilt from the iteration)."""
    grad, xstar = problem(seed=3)
    opt = run(FedPD, 16000, grad, skip_probability=0.5)
    assert np.abs(opt.x - xstar).max() > 1e-2
    a = run(FedPD, 41, grad, skip_probability=0.6, participation=0.5)
    b = FedPD.from_state_dict(a.state_dict())
    for _ in range(40):
        a.step(grad)
        b.step(grad)
    np.testing.assert_array_equal(a.x, b.x)
    assert a.communication_rounds == b.communication_rounds


@pytest.mark.parametrize("budget", [1, 7, 30])
def test_fedpd_iterations_for_makes_exactly_the_budget_of_communications(budget):
    options = {"skip_probability": 0.4, "local_steps": 3, "seed": 5}
    T = FedPD.iterations_for(budget, options=options)
    grad, _ = problem()
    opt = run(FedPD, T, grad, **options)
    assert opt.communication_rounds == budget and T % 3 == 0
    assert not FedPD.communicates(5, 0.4, np.arange(T // 3)).all() or budget == 1  # (skips counted in between)
    assert FedPD.iterations_for(budget, options={"local_steps": 3}) == 3 * budget  # (p = 0: every round)


@pytest.mark.parametrize("bad", [1.0, 1.5, -0.1, float("nan"), "half"])
def test_fedpd_refuses_a_skip_probability_outside_0_1(bad):
    with pytest.raises((ValueError, TypeError), match="skip_probability"):
        FedPD(10, np.zeros(3), 0.1, skip_probability=bad)


def test_fedpd_skipping_rounds_in_a_comparison_and_on_the_emulated_device(monkeypatch):
    """``rowstoch compare`` gives it the rounds whose coins make its budget; the CuPy backend's glue (NumPy for
    CuPy, the host's kernels) runs the skipped rounds as the CPU does."""
    from rowstoch_fast import topology
    from rowstoch_fast.compare import compare
    from rowstoch_fast.objectives import Quadratic

    f = Quadratic.random(10, 3, seed=2)
    frame = compare(topology.ring(10, directed=False, weights="metropolis"), f, ["fedpd"], rounds_budget=12,
                    repeats=1, lr=0.05, tune=False, progress=False, hyper={"fedpd": {"skip_probability": 0.5}})
    last = frame.groupby("algorithm").tail(1).set_index("algorithm")
    assert last.loc["fedpd", "iteration"] == FedPD.iterations_for(12, options={"skip_probability": 0.5}) > 48
    import test_algorithms
    from rowstoch_fast.backends import cupy as backend

    fake = test_algorithms._host_kernels(monkeypatch, backend)
    grad, _ = problem(seed=1)
    x0 = np.random.default_rng(2).standard_normal((10, 3))
    cpu = FedPD(10, x0, 0.05, skip_probability=0.5, participation=0.5)
    gpu = FedPD(10, fake.asarray(x0), 0.05, skip_probability=0.5, participation=0.5)
    assert gpu.backend == "cupy"
    for _ in range(40):
        cpu.step(grad)
        gpu.step(lambda X: fake.asarray(grad(np.asarray(X))))
    np.testing.assert_allclose(np.asarray(gpu.gather_x()), cpu.x, rtol=1e-12)


def test_a_comparison_of_federated_and_gossip_methods_records_client_drift(tmp_path):
    """A reviewer (helper 194): run()'s own check of its metrics refused the federated client_drift for DSGD inside
    a comparison of FedAvg and DSGD, which records it for FedAvg and NaN beside DSGD."""
    from rowstoch_fast import topology
    from rowstoch_fast.compare import compare
    from rowstoch_fast.objectives import LogisticL2

    f = LogisticL2.synthetic(n=8, total=1600, batch=20)
    frame = compare(topology.exponential(8), f, ["fedavg", "dsgd"], 20, lr=0.05, repeats=1,
                    metrics=["suboptimality", "client_drift"], progress=False)
    last = frame.groupby("algorithm")["client_drift"].last()
    assert last["fedavg"] > 0 and np.isnan(last["dsgd"])


def test_a_comparisons_repetitions_draw_their_own_clients():
    # (every repetition had drawn the same clients: +- 0 in the table, "nothing is drawn" under it, where the draw
    # moved the final value 6x and flipped the status)
    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.compare import compare
    from rowstoch_fast.objectives import LeastSquares
    from rowstoch_fast.runner import run

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)  # (exact gradients: the clients alone differ)
    hyper = {"fedavg": {"participation": 0.25, "seed": 3}}
    frame = compare(A, f, ["fedavg"], 30, lr=0.05, repeats=3, tune=False, progress=False, hyper=hyper)
    ends = frame.groupby("rep")["suboptimality"].last()
    assert ends.nunique() == 3
    for r in range(3):  # (repetition r: the method's seed + r, as a network redrawn by r)
        alone = run(Algorithm(A, 0.05, method="fedavg", participation=0.25, seed=3 + r), f,
                    FedAvg.iterations_for(30), progress=False)
        assert alone.frame["suboptimality"].iloc[-1] == ends[r]
    assert not REGISTRY["fedavg"].draws_for({"participation": 1.0})


def test_fedpd_with_skipped_rounds_draws_its_clients_per_repetition_on_shared_coins():
    # (its coins set its iterations for a budget, which the repetitions share: its clients, keyed on the same seed,
    # had been shared too, and the spread had left their draws out, helper 274)
    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.compare import compare
    from rowstoch_fast.objectives import LeastSquares
    from rowstoch_fast.runner import run

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)
    options = {"participation": 0.5, "skip_probability": 0.4, "seed": 3}
    frame = compare(A, f, ["fedpd"], 12, lr=0.05, repeats=3, tune=False, progress=False, hyper={"fedpd": options})
    ends = frame.groupby("rep")["suboptimality"].last()
    assert ends.nunique() == 3
    iterations = FedPD.iterations_for(12, options=options)
    assert (frame.groupby("rep")["iteration"].max() == iterations).all()
    for r in range(3):  # (repetition r: clients of seed + r, coins of seed)
        alone = run(Algorithm(A, 0.05, method="fedpd", participation=0.5, skip_probability=0.4, seed=3 + r,
                              coin_seed=3), f, iterations, progress=False)
        assert alone.frame["suboptimality"].iloc[-1] == ends[r]
    assert REGISTRY["fedpd"].redrawn_options(options, 2) == {**options, "seed": 5, "coin_seed": 3}
    assert REGISTRY["fedpd"].redrawn_options({"participation": 0.5}, 2) == {"participation": 0.5, "seed": 2}
    for bad, match in [((None, 1), "options must be a dict"), (({}, -1), "shift"), (({"seed": "x"}, 1), "seed")]:
        with pytest.raises((TypeError, ValueError), match=match):
            REGISTRY["fedavg"].redrawn_options(*bad)
    assert FedPD.iterations_for(12, options={**options, "seed": 9, "coin_seed": 3}) == iterations
    a, b = (FedPD(8, np.zeros(2), 0.05, skip_probability=0.4, participation=0.5, seed=s, coin_seed=3) for s in (3, 4))
    grad, _ = problem(n=8, d=2)
    for _ in range(40):
        a.step(grad), b.step(grad)
    assert a.communication_rounds == b.communication_rounds and not np.array_equal(a.x, b.x)
    assert FedPD.from_state_dict(a.state_dict()).coin_seed == 3
    earlier = {k: v for k, v in a.state_dict().items() if k != "coin_seed"}  # (a state saved before it: helper 276
    # found it refused, "state is missing ['coin_seed']")
    resumed = FedPD.from_state_dict(earlier)
    assert resumed.coin_seed is None and resumed._coins == resumed.seed == 3


def test_a_tunings_streams_draw_their_own_clients(tmp_path):
    # (one batched run of every replica had drawn one schedule of clients for all: a confirmation on 30 streams rested
    # on one draw of them, and FedAvg chose a rate 1.38x above the best, helper 269)
    import glob

    from rowstoch_fast import topology
    from rowstoch_fast.compare import make_plan, tuning
    from rowstoch_fast.objectives import LeastSquares

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)  # (exact gradients: the clients alone differ)
    method = make_plan(A, f, "fedavg", 40, hyper={"fedavg": {"participation": 0.25}}).methods[0]
    kw = dict(seed=7, checkpoint=str(tmp_path / "fedavg.tuning-0.npz"), keep=True)
    _, both = tuning.trajectories(A, f, method, [0.01, 0.05], 40, "suboptimality", repeats=3, rep_offset=2, **kw)
    for q in range(3):  # (stream 2 + q of each rate: a run of its own, on the method redrawn by 2 + q)
        _, alone = tuning.trajectories(A, f, method, [0.01, 0.05], 40, "suboptimality", seed=7, rep_offset=2 + q)
        np.testing.assert_array_equal(both[:, [q, 3 + q]], alone)
    assert len(set(both[-1, :3])) == 3  # (three draws of the clients; one of them had been shared by all)
    assert len(glob.glob(str(tmp_path / "*.done.npz"))) == 3  # (each stream's trajectories kept, and forgotten)
    tuning._remove_stage(kw["checkpoint"])
    assert not list(tmp_path.iterdir())


def test_a_comparisons_figure_and_table_of_federated_runs():
    """Helper 273: the clients' drift (NaN before the first round ends) had been cut before its first point, every
    line empty beside a "left the panel" triangle; with repetitions that drew other clients the gradients differ
    and the mean line over them had been a sawtooth through the repetitions' points, and the table's counts
    repetition 0's; the lowest drift (the smallest rate's) and the fairness (the selection's alone) were bolded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rowstoch_fast import report, topology
    from rowstoch_fast.compare import compare, summary
    from rowstoch_fast.objectives import LeastSquares

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)
    steps = {"participation": 0.5, "client_steps": [1, 2, 1, 2, 1, 2, 1, 2]}
    frame = compare(A, f, ["fedavg", "scaffold"], 20, lr=0.05, repeats=3, tune=False, progress=False,
                    hyper={"fedavg": steps, "scaffold": steps},
                    metrics=["suboptimality", "client_drift", "participation_fairness", "node_mean_participation"])
    runs = frame[frame["algorithm"] == "fedavg"]
    fig, ax = plt.subplots()
    report.draw(ax, frame, "client_drift")
    assert np.isfinite(ax.lines[0].get_data()[1]).sum() == runs["iteration"].nunique() - 1  # (all but round 0's)
    fig2, ax2 = plt.subplots()
    report.draw(ax2, frame, "suboptimality", x="gradients")
    xs = np.asarray(ax2.lines[0].get_data()[0], dtype=np.float64)
    np.testing.assert_allclose(xs, runs.groupby("iteration")["gradient_evaluations"].mean())
    assert (np.diff(xs) > 0).all()
    plt.close(fig), plt.close(fig2)
    end = runs[runs["iteration"] == runs["iteration"].max()]
    assert end["gradient_evaluations"].nunique() > 1  # (the repetitions drew other clients)
    table = summary(frame, metrics=["client_drift", "participation_fairness", "node_mean_participation"]) \
        .set_index("algorithm")
    assert table.loc["fedavg", "gradient_evaluations"] == round(end["gradient_evaluations"].mean())
    assert not table["client_drift_best"].any() and not table["participation_fairness_best"].any()
    assert not table["node_mean_participation_best"].any()  # (the method of fewer clients a round: helper 274)
    gone = frame.copy()
    gone.loc[gone["algorithm"] == "fedavg", "client_drift"] = np.nan  # (a run without a finite record keeps the mark
    # of one that left the panel, helper 274)
    fig3, ax3 = plt.subplots()
    report.draw(ax3, gone, "client_drift")
    assert any(line.get_marker() == "^" for line in ax3.lines)
    plt.close(fig3)


def test_the_listing_says_where_a_federated_methods_limit_holds(capsys):
    """Helper 273: `rowstoch algorithms` said FedAvg and FedProx end O(lr) from the minimiser (with unequal
    client_steps they stayed 1.15 from it at every rate) and FedPD at it (0.49 away at participation 0.5)."""
    from rowstoch_fast import cli

    assert cli.main(["algorithms"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    for name in ("fedavg", "fedprox", "fedopt"):
        assert lines[name].endswith("(equal local steps, uniform or fair selection; another point otherwise)")
    assert lines["fednova"].endswith("(uniform or fair selection; another point otherwise)")
    assert lines["fedpd"].endswith("the minimiser (every client every round, no round skipped)")
    assert lines["scaffold"].endswith("the minimiser") and lines["feddyn"].endswith("the minimiser")


def test_repetitions_of_one_run_that_share_their_clients_are_warned_about():
    """Helper 273: rf.run(repeats=3) of FedAvg at participation 0.5 ended its three repetitions at one value (+- 0,
    whatever the run's seed), unsaid."""
    import warnings

    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.objectives import LeastSquares
    from rowstoch_fast.runner import run

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)
    with pytest.warns(RuntimeWarning, match=r"FedAvg's 3 repetitions share one draw of its clients .*seed, 2"):
        history = run(Algorithm(A, 0.05, method="fedavg", participation=0.5, seed=2), f, 8, repeats=3,
                      progress=False)
    assert history.frame.groupby("rep")["suboptimality"].last().nunique() == 1  # (what it warns of)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(Algorithm(A, 0.05, method="fedavg"), f, 8, repeats=3, progress=False)  # (every client: nothing drawn)
        run(Algorithm(A, 0.05, method="fedavg", participation=0.5), f, 8, progress=False)
    with pytest.warns(RuntimeWarning, match="FedPD's 2 repetitions share one draw of its clients"):  # (skipped
        # rounds too: helper 274)
        run(Algorithm(A, 0.05, method="fedpd", participation=0.5, skip_probability=0.3), f, 8, repeats=2,
            progress=False)


def test_a_comparisons_caption_says_how_the_clients_were_chosen_and_what_the_network_does_not_reach(tmp_path):
    """Helper 273: the caption named a graph's loss model that the federated methods never ran over (their numbers
    bit for bit those of reliable links) and none of their clients' settings (FedAvg at 30% ranked beside methods at
    100%)."""
    from rowstoch_fast import cli

    (tmp_path / "exp.toml").write_text('[run]\nalgorithms = "fedavg,scaffold,dsgd"\n[algorithms.fedavg]\n'
                                       'participation = 0.3\nselection = "size"\nclient_weights = [1, 2, 3, 4, 5, 6]\n')
    out = tmp_path / "out"
    assert cli.main(["compare", "--config", str(tmp_path / "exp.toml"), "--n", "6", "--objective", "least-squares",
                     "--lr", "0.02", "--rounds-budget", "4", "--repeats", "1", "--loss", "0.2", "--out", str(out),
                     "--no-progress", "--jobs", "1"]) == 0
    caption = (out / "summary.md").read_text()
    assert "Not over the network's model: fedavg, scaffold (they average exactly" in caption
    assert "Clients a round: fedavg 1 of 6 (by size), K = 4 local steps; scaffold all 6, K = 4 local steps." in caption
    (tmp_path / "pd.toml").write_text('[run]\nalgorithms = "fedpd"\n[algorithms.fedpd]\nparticipation = 0.5\n'
                                      'skip_probability = 0.3\n')  # (its repetitions draw their own clients now)
    assert cli.main(["compare", "--config", str(tmp_path / "pd.toml"), "--n", "6", "--objective", "least-squares",
                     "--lr", "0.02", "--rounds-budget", "4", "--repeats", "2", "--out", str(tmp_path / "pd"),
                     "--no-progress", "--jobs", "1"]) == 0
    assert "fedpd 3 of 6 (uniformly), K = 4 local steps." in (tmp_path / "pd" / "summary.md").read_text()


def test_a_runs_default_records_of_a_local_update_method_fall_at_rounds_ends():
    """Helper 273: rf.run's default spacing (iterations // 100 = 10) put 50 of FedAvg's 101 records (K = 4) inside
    rounds, where the rows are half-done local models (a consensus error of 0.42 against 1e-15 at rounds' ends)."""
    from rowstoch_fast import Algorithm, topology
    from rowstoch_fast.objectives import LeastSquares
    from rowstoch_fast.runner import run

    A = topology.ring(8, directed=False, weights="metropolis")
    f = LeastSquares.synthetic(8, samples_per_node=8, d=4, seed=1)
    history = run(Algorithm(A, 0.05, method="fedavg", participation=0.5), f, 1000, progress=False)
    iterations = history.frame["iteration"].unique()
    assert (iterations % 4 == 0).all() and 90 <= len(iterations) <= 130
    assert history.frame["consensus_error"].max() < 1e-12  # (every record the server's model on every row)
    assert len(run(Algorithm(A, 0.05, method="dsgd"), f, 1000, progress=False).frame["iteration"].unique()) == 101
    inside = run(Algorithm(A, 0.05, method="fedavg", participation=0.5), f, 40, record_every=3, progress=False)
    assert (inside.frame["iteration"] % 4 != 0).any()  # (records inside rounds: of the server's model too)
    assert inside.frame["consensus_error"].max() < 1e-12
