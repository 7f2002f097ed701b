"""Issue 54, item 3: test data on objectives (test_loss / test_accuracy / test_mse of the mean model), metrics users
define (rowstoch_fast.user_metrics: a function of the run's state, by name or passed, in run, History, checkpoints,
compare and the command line) and statistics of a per-node quantity over the nodes (node_<stat>_<quantity>)."""

import json
import math
import pathlib
import pickle
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import rowstoch_fast as rf
from rowstoch_fast import Algorithm, cli, run, topology
from rowstoch_fast import compare as cmp
from rowstoch_fast import user_metrics as um
from rowstoch_fast.objectives import LeastSquares, LogisticL2, NonconvexLogistic, Quadratic
from rowstoch_fast.runner import METRICS, TEST_METRICS, build_replicas, record_metrics


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """Each test registers into its own registry (the module's is process-wide)."""
    monkeypatch.setattr(um, "_REGISTRY", {})


@pytest.fixture(scope="module")
def logistic():
    return LogisticL2.synthetic(n=8, total=800, batch=20, seed=0, heterogeneity=1.0, test_samples=300)


def algo(method="dsgd", lr=0.3):
    return Algorithm(topology.exponential(8), lr, method=method)


def dense_classification(x, H, y):
    """(test loss, test accuracy) of points x (..., d): a loop over the samples."""
    x = np.atleast_2d(x)
    loss, acc = np.zeros(len(x)), np.zeros(len(x))
    for k, point in enumerate(x):
        margins = [yl * sum(hj * pj for hj, pj in zip(h, point)) for h, yl in zip(H, y)]
        loss[k] = np.mean([math.log1p(math.exp(-m)) if m > -30 else -m for m in margins])
        acc[k] = np.mean([m > 0 for m in margins])
    return loss, acc


def dense_mse(x, H, y):
    x = np.atleast_2d(x)
    return np.array([np.mean([(sum(hj * pj for hj, pj in zip(h, point)) - yl) ** 2 for h, yl in zip(H, y)])
                     for point in x])


def models(algorithm, objective, iterations, due, repeats=1, seed=0, first_repeat=0):
    """The models of every node at the iterations ``due``, stepped here as run() steps them."""
    opt = build_replicas(algorithm, objective, repeats)
    oracle = objective.oracle(seed=seed, batches=opt.rounds, nodes=opt.local_nodes, rep_offset=first_repeat)
    opt.initialize(oracle)
    out = {0: opt.gather_x()} if 0 in due else {}
    while opt.iteration < iterations:
        opt.step(oracle)
        if opt.iteration in due:
            out[opt.iteration] = opt.gather_x()
    return out


# ------------------------------------------------------------------------------------------ test data on objectives
@pytest.mark.parametrize("make", [
    lambda t: NonconvexLogistic.synthetic(n=4, total=400, batch=10, seed=1, test_samples=t),
    lambda t: LogisticL2.synthetic(n=4, total=400, batch=10, seed=1, heterogeneity=2.0, test_samples=t),
    lambda t: LeastSquares.synthetic(n=4, samples_per_node=10, d=3, seed=1, test_samples=t),
])
def test_held_out_samples_leave_the_training_data_as_they_were(make):
    plain, held = make(0), make(60)
    assert plain.test_data is None and held.test_data[0].shape == (60, plain.d)
    for a, b in zip(plain._data_arrays(), held._data_arrays()):
        np.testing.assert_array_equal(a, b)
    if plain.test_task == "classification":
        assert set(np.unique(held.test_data[1])) == {-1.0, 1.0}
    extra = set(held.describe()) - set(plain.describe())
    assert extra == {"test_samples", "test_data_sha1"} and held.describe()["test_samples"] == 60


def test_held_out_labels_follow_the_nodes_models():
    """Test sample j is labelled as node j mod n's samples are: with a large heterogeneity the labels of a node's
    test samples agree with its own x*_i far more often than with another node's."""
    f = LogisticL2.synthetic(n=2, total=200, batch=10, seed=3, heterogeneity=5.0, test_samples=4000)
    H, y = f.test_data
    rng = np.random.default_rng(3)
    x_opt = rng.standard_normal(10)
    rng.standard_normal((200, 10)), rng.random(200)
    x_star = x_opt + 5.0 * rng.standard_normal((2, 10))
    own = np.mean(np.sign(np.einsum("md,md->m", H, x_star[np.arange(4000) % 2])) == y)
    other = np.mean(np.sign(np.einsum("md,md->m", H, x_star[1 - np.arange(4000) % 2])) == y)
    assert own > 0.85 and own > other + 0.2


def test_test_data_is_checked_naming_the_argument():
    f = LogisticL2.synthetic(n=4, total=400, batch=10, seed=0)
    H = np.ones((5, 10))
    cases = [((H, np.ones(4)), ValueError, "test_data y_test has 4 entries but H_test has 5 rows"),
             ((np.ones((5, 3)), np.ones(5)), ValueError, r"H_test must have shape \(m, d\) with m >= 1 and d = 10"),
             ((np.ones((0, 10)), np.ones(0)), ValueError, "H_test must have shape"),
             ((H, np.array([1, -1, 0, 1, 1.0])), ValueError, r"labels -1 or \+1, got y_test\[2\] = 0"),
             ((H * np.nan, np.ones(5)), ValueError, "test_data H_test must be finite"),
             ((H, np.full(5, np.inf)), ValueError, "test_data y_test must be finite"),
             ((np.ones(10), np.ones(1)), ValueError, "test_data H_test must be 2-D"),
             ((H,), TypeError, r"test_data must be a pair \(H_test, y_test\), got tuple"),
             ((np.array(["a"] * 10), np.ones(1)), TypeError, "H_test must be a numeric array")]
    for data, kind, message in cases:
        with pytest.raises(kind, match=message):
            LogisticL2(f.H, f.Y, 4, batch=10, test_data=data)
        if len(data) == 2:
            with pytest.raises(kind, match=message):
                f.with_test_data(*data)
    with pytest.raises(TypeError, match="Quadratic takes no test data"):
        Quadratic.random(4, 3).with_test_data(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="test_samples must be >= 0"):
        LogisticL2.synthetic(n=4, total=400, batch=10, test_samples=-1)
    g = LeastSquares.synthetic(n=4, samples_per_node=5, d=3, seed=0)
    assert g.with_test_data(np.ones((2, 3)), np.array([0.5, 7.0])).test_data[1][1] == 7.0  # (any target)
    assert g.test_data is None  # (a copy: the objective itself is unchanged)


def test_test_metrics_equal_a_dense_computation(logistic):
    rng = np.random.default_rng(0)
    H, y = logistic.test_data
    for shape in [(10,), (3, 10), (2, 4, 10)]:
        x = rng.standard_normal(shape)
        got = logistic.test_metrics(x)
        assert set(got) == {"test_loss", "test_accuracy"} and got["test_loss"].shape == shape[:-1]
        loss, acc = dense_classification(x.reshape(-1, 10), H, y)
        np.testing.assert_allclose(np.reshape(got["test_loss"], -1), loss, rtol=1e-12)
        np.testing.assert_array_equal(np.reshape(got["test_accuracy"], -1), acc)
    f = LeastSquares.synthetic(n=4, samples_per_node=8, d=3, seed=0, test_samples=50)
    x = rng.standard_normal((5, 3))
    got = f.test_metrics(x)
    np.testing.assert_allclose(got["test_mse"], dense_mse(x, *f.test_data), rtol=1e-12)
    np.testing.assert_allclose(got["test_loss"], 0.5 * got["test_mse"], rtol=0)
    assert Quadratic.random(4, 3).test_metrics(x) == {}
    lasso = f + rf.composite.L1(0.1)  # a composite objective: its smooth part's data terms
    np.testing.assert_array_equal(lasso.test_metrics(x)["test_mse"], got["test_mse"])
    assert lasso.with_test_data(np.eye(3), np.zeros(3)).test_data[0].shape == (3, 3)


def test_the_harness_records_the_test_metrics_of_the_mean_model(logistic):
    due = [0, 10, 25]
    skewed = Algorithm(topology.nearest_neighbor(8), 0.3, method="dsgd")  # (pi is not uniform: x_bar, not pi^T x)
    h = run(skewed, logistic, 25, record_at=due, repeats=2, progress=False)
    xs = models(skewed, logistic, 25, due, repeats=2)
    for k in due:
        rows = h.frame[h.frame["iteration"] == k].sort_values("rep")
        loss, acc = dense_classification(xs[k].mean(axis=1), *logistic.test_data)
        np.testing.assert_allclose(rows["test_loss"], loss, rtol=1e-12)
        np.testing.assert_array_equal(rows["test_accuracy"], acc)
        assert rows["test_mse"].isna().all()  # (a classification problem)
    assert h.frame["test_accuracy"].iloc[-1] > h.frame["test_accuracy"].iloc[0]
    # the same numbers from the harness's recording function on the same iterates
    opt = build_replicas(algo(), logistic, 1)
    oracle = logistic.oracle()
    opt.initialize(oracle)
    values = record_metrics(opt, logistic, oracle, TEST_METRICS)
    assert values["test_loss"][0] == pytest.approx(dense_classification(opt.gather_x().mean(0), *logistic.test_data)[0][0],
                                                   rel=1e-12)


def test_regression_records_the_test_mse_and_a_composite_its_smooth_parts():
    f = LeastSquares.synthetic(n=8, samples_per_node=10, d=4, seed=0, test_samples=40)
    undirected = topology.exponential(8, directed=False, weights="metropolis")
    for objective, a in ((f, algo("dsgd", 0.05)), (f + rf.composite.L1(0.05), Algorithm(undirected, 0.05,
                                                                                         method="pg-extra"))):
        h = run(a, objective, 20, record_at=[0, 20], progress=False)
        xs = models(a, objective, 20, [0, 20])
        for k in (0, 20):
            row = h.frame[h.frame["iteration"] == k].iloc[0]
            mse = dense_mse(xs[k].mean(axis=0), *f.test_data)[0]
            assert row["test_mse"] == pytest.approx(mse, rel=1e-12)
            assert row["test_loss"] == pytest.approx(mse / 2, rel=1e-12) and math.isnan(row["test_accuracy"])


def test_test_metrics_cost_nothing_unless_asked_for_and_held(logistic, monkeypatch):
    calls = []
    real = type(logistic).test_metrics
    monkeypatch.setattr(type(logistic), "test_metrics", lambda self, x: calls.append(np.shape(x)) or real(self, x))
    h = run(algo(), logistic, 10, record_every=5, progress=False, metrics=["grad_norm", "loss"])
    assert calls == [] and h.frame[list(TEST_METRICS)].isna().all().all()
    h = run(algo(), logistic, 10, record_every=5, repeats=2, progress=False, metrics=["test_accuracy"])
    assert calls == [(2, 10)] * 3  # one product per record, every replica's mean model at once
    plain = LogisticL2(logistic.H, logistic.Y, 8, batch=20)  # no test data: NaN, nothing computed
    h = run(algo(), plain, 10, record_every=5, progress=False)
    assert len(calls) == 3 and h.frame[list(TEST_METRICS)].isna().all().all()
    # and every other metric records the numbers it recorded before test data existed
    other = [m for m in METRICS if m not in TEST_METRICS]
    with_test = run(algo(), logistic, 10, record_every=5, progress=False)
    pd.testing.assert_frame_equal(with_test.frame[other], h.frame[other])


def test_a_diverging_replica_records_an_infinite_test_loss(logistic):
    from rowstoch_fast.runner import _test_metrics

    x_bar = np.stack([np.zeros(10), np.full(10, np.inf)])
    got = _test_metrics(logistic, x_bar)
    assert got["test_loss"][0] == pytest.approx(math.log(2)) and got["test_loss"][1] == np.inf
    assert got["test_accuracy"][0] == 0.0 and math.isnan(got["test_accuracy"][1])


# ---------------------------------------------------------------------------------------------- metrics you define
def spread(state):
    """The largest distance of a node's model from the mean model (a top-level function: it pickles)."""
    return float(np.abs(state.x - state.x_bar).max())


def test_a_metric_column_equals_calling_the_function_on_the_run_s_iterates(logistic):
    seen = []

    def where(state):  # every field of the state, checked against the run's own
        seen.append((state.iteration, state.communication_rounds, state.samples, state.rep))
        assert state.objective is logistic and state.x.shape == (8, 10) and state.x_bar.shape == (10,)
        return float(state.x[state.rep % 8, 0])

    due = [0, 4, 12]
    h = run(algo(), logistic, 12, record_at=due, repeats=2, progress=False, metrics=["loss", spread, where],
            first_repeat=3)
    xs = models(algo(), logistic, 12, due, repeats=2, first_repeat=3)
    assert list(h.frame.columns[-3:]) == ["wall_seconds", "spread", "where"] and h.extra == ("spread", "where")
    for k in due:
        rows = h.frame[h.frame["iteration"] == k].sort_values("rep")
        np.testing.assert_array_equal(rows["spread"], [np.abs(x - x.mean(0)).max() for x in xs[k]])
        np.testing.assert_array_equal(rows["where"], [xs[k][r][(r + 3) % 8, 0] for r in range(2)])
    assert seen[:2] == [(0, 0, 0, 3), (0, 0, 0, 4)] and seen[-1] == (12, 12, 240, 4)
    assert h.frame["suboptimality"].isna().all()  # (only what was asked for)


def test_registered_metrics_are_recorded_by_name_and_kept_in_every_output(logistic, tmp_path):
    rf.register_metric("spread", spread)
    h = run(algo(), logistic, 10, record_every=5, repeats=2, progress=False, metrics=[*METRICS, "spread"])
    assert h.meta["extra_metrics"] == {"spread": {"lower_is_better": True, "ranked": False, "log_scale": True}}
    s = h.summary()
    assert {"spread", "spread_std"} <= set(s.columns) and h.final("spread") == s["spread"].iloc[-1]
    h.save(str(tmp_path))
    assert "spread_std" in pd.read_csv(tmp_path / "history.csv").columns
    doc = json.loads((tmp_path / "history.json").read_text())
    assert doc["rows"]["spread"] == h.frame["spread"].tolist() and "spread" in doc["summary"]
    assert doc["meta"]["extra_metrics"]["spread"]["ranked"] is False
    ax = h.plot(metric="spread", path=str(tmp_path / "spread.png"))
    assert ax.get_yscale() == "log" and (tmp_path / "spread.png").stat().st_size > 0
    rf.register_metric("accuracy_of_mean", lambda state: float(state.objective.test_metrics(state.x_bar)
                                                                ["test_accuracy"]), lower_is_better=False)
    h = run(algo(), logistic, 10, record_every=5, progress=False, metrics=["accuracy_of_mean", "test_accuracy"])
    np.testing.assert_array_equal(h.frame["accuracy_of_mean"], h.frame["test_accuracy"])
    assert h.plot("accuracy_of_mean").get_yscale() == "linear" and h.plot("test_accuracy").get_yscale() == "linear"
    with pytest.raises(ValueError, match="metric must be one of grad_norm, .*, accuracy_of_mean, got 'spread'"):
        h.final("spread")  # (not recorded by this run)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_names_a_metric_may_not_take_are_refused():
    for name, message in [("loss", "is a built-in metric's"), ("test_accuracy", "is a built-in metric's"),
                          ("node_mean_local_loss", "is a built-in metric's"), ("rep", "taken by a column"),
                          ("final", "taken by a column"), ("algorithm", "taken by a column"),
                          ("mine_std", "ends in _std"), ("two words", "must be a Python identifier"),
                          ("", "must be a Python identifier")]:
        with pytest.raises(ValueError, match=message):
            rf.register_metric(name, spread)
    with pytest.raises(TypeError, match="a metric's name must be a string, got int 3"):
        rf.register_metric(3, spread)
    with pytest.raises(TypeError, match="fn must be callable"):
        rf.register_metric("mine", 3.0)
    with pytest.raises(ValueError, match="a ranked metric falls to 0 at the solution"):
        rf.register_metric("mine", spread, ranked=True, lower_is_better=False)
    with pytest.raises(TypeError, match="lower_is_better must be True or False"):
        rf.register_metric("mine", spread, lower_is_better="yes")
    assert um.registered_metrics() == {}


def test_registering_again_and_replacing():
    assert rf.register_metric("spread", spread) is spread
    rf.register_metric("spread", spread)  # the same function again (a notebook's cell run twice)

    def other(state):
        return 0.0

    with pytest.raises(ValueError, match="metric 'spread' is already registered .*spread.*pass replace=True"):
        rf.register_metric("spread", other)
    rf.register_metric("spread", other, replace=True)
    assert um.registered_metrics()["spread"].fn is other

    @rf.register_metric("decorated", ranked=True)
    def decorated(state):
        return 1.0

    assert decorated(None) == 1.0 and um.registered_metrics()["decorated"].ranked
    um.unregister_metric("decorated")
    with pytest.raises(ValueError, match="no metric 'decorated' is registered"):
        um.unregister_metric("decorated")


def test_metrics_argument_errors_name_what_is_wrong(logistic):
    cases = [(["loss", lambda s: 1.0], ValueError, "a function is recorded under its __name__, and '<lambda>'"),
             (["nope"], ValueError, "metrics must be one of grad_norm, .*, got 'nope'"),
             (["node_mean_nope"], ValueError, "got 'node_mean_nope'"),
             ([3], TypeError, "every metric must be a name or a function fn.state. -> float, got int 3"),
             (spread, TypeError, "metrics must be a sequence of metric names or functions"),
             (5, TypeError, "metrics must be a sequence of metric names or functions, got int")]
    for metrics, kind, message in cases:
        with pytest.raises(kind, match=message):
            run(algo(), logistic, 2, progress=False, metrics=metrics)

    def loss(state):
        return 0.0

    with pytest.raises(ValueError, match="metric name 'loss' is a built-in metric's"):
        run(algo(), logistic, 2, progress=False, metrics=[loss])
    rf.register_metric("spread", lambda s: 0.0)
    with pytest.raises(ValueError, match="metrics: two different metrics are named 'spread'"):
        run(algo(), logistic, 2, progress=False, metrics=["spread", spread])


def test_a_metric_sees_read_only_state_and_its_errors_name_it(logistic):
    def writes(state):
        state.x[0, 0] = 1.0
        return 0.0

    def renames(state):
        state.iteration = 5
        return 0.0

    def text(state):
        return "1.0"

    def vector(state):
        return state.x_bar

    for fn, kind, message in [(writes, RuntimeError, "metric 'writes' raised ValueError: assignment destination is "
                                                      "read-only"),
                              (renames, RuntimeError, "metric 'renames' raised FrozenInstanceError"),
                              (text, TypeError, "metric 'text' must return one real number, got str '1.0'"),
                              (vector, TypeError, r"metric 'vector' must return one real number, got ndarray \(10,\)")]:
        with pytest.raises(kind, match=message):
            run(algo(), logistic, 2, progress=False, metrics=["loss", fn])
    whole = run(algo(), logistic, 4, record_every=2, progress=False)
    assert np.isfinite(whole.frame["loss"]).all()

    def nan(state):
        return np.float32("nan") if state.iteration else np.int64(2)

    h = run(algo(), logistic, 4, record_every=2, progress=False, metrics=[nan])
    assert h.frame["nan"].iloc[0] == 2.0 and h.frame["nan"].iloc[1:].isna().all()


def test_node_statistics_equal_a_dense_computation(logistic):
    due = [0, 6]
    names = [f"node_{s}_{q}" for s in um.NODE_STATISTICS for q in ("local_loss", "distance", "test_accuracy")]
    names += ["node_max_suboptimality", "node_mean_test_mse"]
    h = run(algo(), logistic, 6, record_at=due, repeats=2, progress=False, metrics=names)
    xs = models(algo(), logistic, 6, due, repeats=2)
    best = logistic.optimum()
    H, y = logistic.test_data
    M = logistic.samples_per_node
    for k in due:
        rows = h.frame[h.frame["iteration"] == k].sort_values("rep")
        for r in range(2):
            X = xs[k][r]
            local = [np.mean(np.logaddexp(0, -logistic.Y[i * M:(i + 1) * M] * (logistic.H[i * M:(i + 1) * M] @ X[i])))
                     + 0.5 * logistic.lam * X[i] @ X[i] for i in range(8)]
            whole = [np.mean(np.logaddexp(0, -logistic.Y * (logistic.H @ X[i]))) + 0.5 * logistic.lam * X[i] @ X[i]
                     for i in range(8)]
            per_node = {"local_loss": local, "distance": np.linalg.norm(X - best.x, axis=1),
                        "test_accuracy": dense_classification(X, H, y)[1]}
            for name in names[:-2]:
                _, stat, quantity = name.split("_", 2)
                assert rows[name].iloc[r] == pytest.approx(um.NODE_STATISTICS[stat](per_node[quantity]), rel=1e-9,
                                                           abs=1e-15), name
            assert rows["node_max_suboptimality"].iloc[r] == pytest.approx(max(whole) - best.value, rel=1e-7)
            assert math.isnan(rows["node_mean_test_mse"].iloc[r])  # (a classification problem)
    # without test data or a known optimum: NaN
    f = NonconvexLogistic.synthetic(n=8, total=800, batch=20, seed=0)
    h = run(algo(), f, 2, progress=False, metrics=["node_min_test_accuracy", "node_max_distance"])
    assert h.frame[["node_min_test_accuracy", "node_max_distance"]].isna().all().all()
    assert um.higher_is_better("node_min_test_accuracy") and not um.higher_is_better("node_std_test_accuracy")
    assert len(um.resolve_metrics(["node_min_local_loss", "node_min_local_loss"])) == 1


# ---------------------------------------------------------------------------------------------------- checkpoints
def test_a_checkpoint_resumes_with_its_metrics_or_is_refused(logistic, tmp_path):
    ck = str(tmp_path / "ck.npz")
    whole = run(algo(), logistic, 20, record_every=5, progress=False, metrics=["loss", spread])
    first = run(algo(), logistic, 10, record_every=5, progress=False, metrics=["loss", spread], checkpoint=ck)
    assert json.loads(str(np.load(ck)["columns"]))[-1] == "spread" and len(first.frame) == 3
    resumed = run(algo(), logistic, 20, record_every=5, progress=False, metrics=["loss", spread], resume=ck)
    pd.testing.assert_frame_equal(resumed.frame.drop(columns="wall_seconds"), whole.frame.drop(columns="wall_seconds"))
    with pytest.raises(ValueError, match="checkpoint .* recorded the metric 'spread', which this run does not: resume "
                                         "it with that metric too"):
        run(algo(), logistic, 20, record_every=5, progress=False, metrics=["loss"], resume=ck)
    with pytest.raises(ValueError, match="recorded the metric 'spread'"):
        run(algo(), logistic, 20, record_every=5, progress=False, resume=ck)  # (every built-in: still not it)

    def more(state):
        return float(state.iteration)

    added = run(algo(), logistic, 20, record_every=5, progress=False, metrics=["loss", spread, more], resume=ck)
    early = added.frame["iteration"] <= 10
    assert added.frame.loc[early, "more"].isna().all() and (added.frame.loc[~early, "more"] == [15.0, 20.0]).all()
    np.testing.assert_array_equal(added.frame["spread"], whole.frame["spread"])


def test_a_checkpoint_from_before_test_metrics_resumes_with_them_unknown(logistic, tmp_path):
    """A /3 checkpoint that does not name its columns (written before the test metrics) holds 8 metrics a record."""
    ck = tmp_path / "ck.npz"
    run(algo(), logistic, 10, record_every=5, progress=False, checkpoint=str(ck))
    data = dict(np.load(ck))
    del data["columns"]
    data["rows"] = np.array(json.dumps([r[:12] + r[15:] for r in json.loads(str(data["rows"]))]))
    old = tmp_path / "old.npz"
    np.savez(old, **data)
    resumed = run(algo(), logistic, 20, record_every=5, progress=False, resume=str(old))
    whole = run(algo(), logistic, 20, record_every=5, progress=False)
    early = resumed.frame["iteration"] <= 10
    assert resumed.frame.loc[early, "test_loss"].isna().all()
    np.testing.assert_array_equal(resumed.frame.loc[~early, "test_loss"], whole.frame.loc[~early, "test_loss"])
    np.testing.assert_array_equal(resumed.frame["grad_norm"], whole.frame["grad_norm"])
    data["rows"] = np.array(json.dumps([r[:10] for r in json.loads(str(data["rows"]))]))
    np.savez(old, **data)
    with pytest.raises(ValueError, match="is damaged .*its records do not have the 13 columns it names"):
        run(algo(), logistic, 20, record_every=5, progress=False, resume=str(old))


# -------------------------------------------------------------------------------------------------------- compare
def error_to_optimum(state):
    """A ranked metric: positive at the start, 0 at the solution."""
    return float(np.linalg.norm(state.x_bar - state.objective.optimum().x))


def test_compare_tunes_on_ranks_and_shows_metrics_you_define(logistic, tmp_path):
    rf.register_metric("error_to_optimum", error_to_optimum, ranked=True)
    rf.register_metric("spread", spread)
    A = topology.exponential(8)
    frame = cmp.compare(A, logistic, "dsgd,push-pull", 60, lr={"dsgd": 0.5}, repeats=2, progress=False,
                        metric="error_to_optimum", metrics=["test_accuracy", "spread", "node_min_test_accuracy"],
                        grid=(0.05, 0.5))
    assert frame.attrs["metric"] == "error_to_optimum" and frame.attrs["tuning"]["push-pull"]["metric"] == \
        "error_to_optimum"
    assert set(frame.attrs["extra_metrics"]) == {"error_to_optimum", "spread", "node_min_test_accuracy"}
    assert {"error_to_optimum", "spread", "test_accuracy", "node_min_test_accuracy"} <= set(frame.columns)
    table = cmp.summary(frame, metrics=["test_accuracy", "spread"])
    assert table["rank"].notna().all() and (table["status"] == "ok").all()
    best = table["test_accuracy"] == table["test_accuracy"].max()
    assert table.loc[best, "test_accuracy_best"].all()  # (the largest accuracy is the best)
    written = cmp.write_outputs([frame], str(tmp_path), ["test_accuracy", "spread"])
    assert "compare.png" in written
    assert "spread" in (tmp_path / "summary.md").read_text() and "test accuracy" in (tmp_path / "summary.md").read_text()
    assert "spread" in pd.read_csv(tmp_path / "compare.csv").columns
    ax = cmp.plot(frame, "test_accuracy")
    assert ax.get_yscale() == "linear" and cmp.plot(frame, "spread").get_yscale() == "log"
    import matplotlib.pyplot as plt

    plt.close("all")
    with pytest.raises(ValueError, match="metric 'spread' cannot be tuned on or ranked by: it was not registered "
                                         "ranked=True"):
        cmp.compare(A, logistic, "dsgd", 20, lr=0.5, metric="spread", progress=False)
    with pytest.raises(ValueError, match="metric 'test_accuracy' cannot be tuned on or ranked by"):
        cmp.compare(A, logistic, "dsgd", 20, lr=0.5, metric="test_accuracy", progress=False)
    with pytest.raises(ValueError, match="metric must be one of grad_norm, .*, got 'nope'"):
        cmp.summary(frame, metric="nope")


def test_ranks_of_a_metric_where_higher_is_better():
    from rowstoch_fast.compare.verdict import ranks

    finals = {"a": np.array([0.90, 0.91, 0.92]), "b": np.array([0.70, 0.71, 0.72]), "c": np.array([0.9, 0.92, 0.91])}
    assert ranks(finals) == {"a": (2, True), "b": (1, False), "c": (2, True)}
    assert ranks(finals, higher_is_better=True) == {"a": (1, True), "b": (3, False), "c": (1, True)}


def test_compare_in_processes_gets_the_metrics_of_a_file(logistic, tmp_path, monkeypatch):
    # (spread, a function of this module, travels by reference: the workers import this module as pytest named it,
    # tests.test_user_metrics, from the repository's root; an editable install had it on the path, a wheel not)
    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1]))
    path = tmp_path / "mine.py"
    path.write_text("import numpy as np\nimport rowstoch_fast as rf\n\n\n@rf.register_metric('max_model')\n"
                    "def max_model(state):\n    return float(np.abs(state.x).max())\n")
    assert um.load_metrics_module(path) == ("max_model",) and um.load_metrics_module(str(path)) == ("max_model",)
    metric = um.registered_metrics()["max_model"]
    again = pickle.loads(pickle.dumps(metric))
    assert again == metric  # (by file and name)
    A = topology.exponential(8)
    kw = dict(lr=0.3, repeats=1, progress=False, metrics=["max_model", spread])
    serial = cmp.compare(A, logistic, "dsgd,push-pull", 20, **kw)
    parallel = cmp.compare(A, logistic, "dsgd,push-pull", 20, jobs=2, **kw)
    np.testing.assert_array_equal(serial[["max_model", "spread"]].to_numpy(), parallel[["max_model", "spread"]].to_numpy())

    def local(state):
        return 0.0

    with pytest.raises(ValueError, match="jobs > 1 runs the methods in worker processes, which cannot receive metric "
                                         "'local'"):
        cmp.compare(A, logistic, "dsgd,push-pull", 20, jobs=2, **{**kw, "metrics": [local]})


def test_an_objective_of_an_interactive_session_is_refused_under_jobs_naming_it(monkeypatch):
    """Helper 196: an objective whose class a notebook or `python -c` defines reached the workers, which could not
    load it: "could not import the comparison's metric functions", naming the metrics."""
    class Mine(Quadratic):
        pass

    Mine.__module__ = "__main__"
    monkeypatch.delattr(sys.modules["__main__"], "__file__", raising=False)  # (an interactive session's)
    f = Quadratic.random(8, 3, seed=1)
    f.__class__ = Mine
    with pytest.raises(ValueError, match=r"jobs > 1 runs the methods in worker processes, which cannot receive the "
                                         r"objective \(its class 'Mine' is defined in an interactive session\)"):
        cmp.compare(topology.exponential(8), f, "dsgd,dgd", 20, lr=0.1, repeats=1, jobs=2, progress=False)


def test_a_file_s_metric_unpickles_in_a_process_that_never_loaded_it(tmp_path, monkeypatch):
    path = tmp_path / "other.py"
    path.write_text("import rowstoch_fast as rf\nrf.register_metric('const', lambda s: 2.0)\n"
                    "def named(state):\n    return 3.0\n")
    um.load_metrics_module(path)
    data = pickle.dumps(um.Metric("named", sys.modules[um._module_name(str(path))].named))
    monkeypatch.setattr(um, "_LOADED", {})  # (a fresh process: the file is loaded again, here)
    monkeypatch.delitem(sys.modules, um._module_name(str(path)))
    metric = pickle.loads(data)
    assert metric.name == "named" and metric.fn(None) == 3.0 and "const" in um.registered_metrics()
    with pytest.raises(FileNotFoundError, match="metrics module .* does not exist"):
        um.load_metrics_module(tmp_path / "missing.py")
    (tmp_path / "broken.py").write_text("def f(:\n")
    with pytest.raises(SyntaxError):
        um.load_metrics_module(tmp_path / "broken.py")
    assert um._module_name(str(tmp_path / "broken.py")) not in sys.modules


# --------------------------------------------------------------------------------------------- the command line
SMALL = ["--n", "8", "--total", "800", "--batch", "20", "--no-progress", "-q"]


def metrics_file(tmp_path):
    path = tmp_path / "metrics.py"
    path.write_text("import numpy as np\nimport rowstoch_fast as rf\n\n\n"
                    "@rf.register_metric('error_to_zero', ranked=True)\ndef error_to_zero(state):\n"
                    "    return float(np.linalg.norm(state.x_bar - state.objective.optimum().x))\n\n\n"
                    "@rf.register_metric('model_max')\ndef model_max(state):\n    return float(np.abs(state.x).max())\n")
    return path


def test_cli_compare_with_a_metrics_module_and_test_samples(tmp_path, capsys, monkeypatch):
    out = tmp_path / "o"
    rc = cli.main(["compare", *SMALL, "--objective", "logistic-l2", "--test-samples", "200", "--algorithms",
                   "dsgd,push-pull", "--lr", "0.5", "--rounds-budget", "30", "--repeats", "2", "--jobs", "1",
                   "--metrics-module", str(metrics_file(tmp_path)),
                   "--metric", "error_to_zero,test_accuracy,model_max,node_min_test_accuracy", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    frame = pd.read_csv(out / "compare.csv")
    assert {"error_to_zero", "model_max", "test_accuracy", "node_min_test_accuracy"} <= set(frame.columns)
    assert frame["test_accuracy"].notna().all() and "model_max_std" in pd.read_csv(out / "summary.csv").columns
    settings = json.loads((out / "experiment.json").read_text())["settings"]
    assert settings["metrics_module"] == str(metrics_file(tmp_path)) and settings["test_samples"] == 200
    # --resume, as a new process would: the file is found in experiment.json and loaded again
    monkeypatch.setattr(um, "_LOADED", {})
    monkeypatch.setattr(um, "_REGISTRY", {})
    assert cli.main(["compare", "--resume", str(out), "--repeats", "3", "--no-progress", "-q"]) == 0, \
        capsys.readouterr().err
    frame = pd.read_csv(out / "compare.csv")
    assert sorted(frame["rep"].unique()) == [0, 1, 2] and frame["model_max"].notna().all()


@pytest.mark.parametrize("args, fragment", [
    (["--metric", "model_max"], "--metric 'model_max' cannot be tuned on or ranked by"),
    (["--metric", "grad_norm_mean,nope"], "--metric must be a comma-separated list of"),
    (["--metrics-module", "missing.py", "--metric", "grad_norm_mean"], "--metrics-module 'missing.py' does not exist"),
    (["--metrics-module", "BAD"], "failed: NameError: name 'undefined' is not defined"),
    (["--metrics-module", "EMPTY"], "registers no metric"),
    (["--objective", "quadratic", "--test-samples", "5"], "--test-samples is not read with --objective quadratic"),
])
def test_cli_compare_metric_errors_are_one_line(tmp_path, capsys, args, fragment):
    (tmp_path / "bad.py").write_text("undefined\n")
    (tmp_path / "empty.py").write_text("x = 1\n")
    files = {"BAD": str(tmp_path / "bad.py"), "EMPTY": str(tmp_path / "empty.py")}
    args = [files.get(a, a) for a in args]
    if "--metrics-module" not in args:
        args += ["--metrics-module", str(metrics_file(tmp_path))]
    rc = cli.main(["compare", *[a for a in SMALL if a != "--total" and a != "800" and a != "--batch" and a != "20"],
                   "--algorithms", "dsgd", "--lr", "0.1", "--rounds-budget", "10", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("rowstoch: error:")]
    assert rc == 2 and len(lines) == 1 and fragment in lines[0], err


def test_cli_run_records_the_metrics_of_a_module_and_resumes_with_them(tmp_path, capsys):
    ck = tmp_path / "ck.npz"
    base = ["run", *SMALL, "--objective", "logistic-l2", "--test-samples", "100", "--algorithm", "dsgd", "--lr", "0.3",
            "--record-every", "5", "--checkpoint", str(ck)]
    module = ["--metrics-module", str(metrics_file(tmp_path))]
    assert cli.main([*base, "--iterations", "10", "--out", str(tmp_path / "a"), *module]) == 0
    history = pd.read_csv(tmp_path / "a" / "history.csv")
    assert {"error_to_zero", "model_max", "test_accuracy"} <= set(history.columns)
    assert history["test_accuracy"].notna().all()
    assert cli.main([*base, "--iterations", "20", "--resume", str(ck), "--out", str(tmp_path / "b")]) == 2
    assert "recorded the metric 'error_to_zero', which this run does not" in capsys.readouterr().err
    assert cli.main([*base, "--iterations", "20", "--resume", str(ck), "--out", str(tmp_path / "b"), *module]) == 0
    assert len(pd.read_csv(tmp_path / "b" / "history.csv")) == 5
    assert cli.main(["run", *SMALL, "--data-file", str(tmp_path / "x.npz"), "--test-samples", "5"]) == 2
    assert "--test-samples is not read with --data-file" in capsys.readouterr().err


def test_cli_run_a_metric_that_goes_wrong_mid_run_is_one_line(tmp_path, capsys):
    """A metric that returned a vector from its fourth record on ended ``rowstoch run`` in a traceback (exit 1);
    at its first record, or raising, it was one line. One line now, the rows before it kept."""
    late = tmp_path / "late.py"
    late.write_text("import numpy as np\nimport rowstoch_fast as rf\n\n\n@rf.register_metric('shape_late')\n"
                    "def shape_late(state):\n    return np.ones(2) if state.iteration >= 30 else 1.0\n")
    argv = ["run", "--n", "8", "--no-progress", "-q", "--objective", "least-squares", "--algorithm", "dsgd", "--lr",
            "0.05", "--iterations", "50", "--record-every", "10", "--metrics-module", str(late), "--out",
            str(tmp_path / "o")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "error: metric 'shape_late' must return one real number, got ndarray (2,)" in err
    assert "Traceback" not in err and len(pd.read_csv(tmp_path / "o" / "history.csv")) == 3


def test_a_sys_exit_in_a_metrics_module_is_an_error_not_an_end(tmp_path, capsys):
    """Helper 185: a metrics module (or one of its metrics) that called sys.exit ended the command with that code
    and no word: exit 0 with an empty --out, its records lost (exit 3 read as "diverged"). An error of the module's
    now: one line, exit 2, the rows before it kept."""
    loaded = tmp_path / "exits.py"
    loaded.write_text("import sys\nsys.exit(0)\n")
    late = tmp_path / "late_exit.py"
    late.write_text("import sys\nimport rowstoch_fast as rf\n\n\n@rf.register_metric('exits_late')\n"
                    "def exits_late(state):\n    if state.iteration >= 30:\n        sys.exit(0)\n    return 1.0\n")
    common = ["run", "--n", "8", "--no-progress", "-q", "--objective", "least-squares", "--algorithm", "dsgd", "--lr",
              "0.05", "--iterations", "50", "--record-every", "10"]
    assert cli.main([*common, "--metrics-module", str(loaded), "--out", str(tmp_path / "a")]) == 2
    assert "called sys.exit(0) as it was loaded" in capsys.readouterr().err
    assert cli.main([*common, "--metrics-module", str(late), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "error: metric 'exits_late' raised SystemExit: 0" in err and "Traceback" not in err
    assert len(pd.read_csv(tmp_path / "b" / "history.csv")) == 3


def test_a_metric_s_own_error_is_quoted_as_it_was_raised(tmp_path, capsys):
    """Helper 261: compare turns the Python API's argument names into its options, and had done so inside the
    user's own message too: a metric raising ValueError("metric fails") read "... raised ValueError: --metric
    fails". What the user's code raised is quoted as it was."""
    module = tmp_path / "bad_metric.py"
    module.write_text("import rowstoch_fast\n\n\n@rowstoch_fast.register_metric('my_metric', ranked=True)\n"
                      "def my_metric(state):\n    raise ValueError(\"metric fails: repeats and lr; needs tracker='exact'; "
                      "lower repeats\")\n")
    rc = cli.main(["compare", "--n", "4", "--rounds-budget", "20", "--repeats", "2", "--algorithms", "pull-diag-gt",
                   "--lr", "0.01", "--format", "none", "--no-progress", "--metric", "my_metric", "--metrics-module",
                   str(module), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "raised ValueError: metric fails: repeats and lr; needs tracker='exact'; lower repeats" in err, \
        err


# ---------------------------------------------------------------- oracle-call counters (issue 54)

class _Counting:
    """What ``feed`` gives a method, with each kind of call counted by the oracle itself (the reference the
    optimizer's own count is checked against): ``grad_fn(X)`` / ``sample(X)`` as gradients, ``sample_gradient``
    as one given sample's, ``prox`` as a local prox (no ``sample_gradients``: one call per sample)."""

    def __init__(self, inner):
        self.inner, self.counts = inner, {"gradient": 0, "sample_gradient": 0, "local_prox": 0}
        if hasattr(inner, "samples"):
            self.samples = inner.samples

    def __call__(self, X):
        self.counts["gradient"] += 1
        return self.inner(X)

    def sample(self, X):
        self.counts["gradient"] += 1
        return self.inner.sample(X)

    def sample_gradient(self, X, idx):
        self.counts["sample_gradient"] += 1
        return self.inner.sample_gradient(X, idx)

    def prox(self, V, step):
        self.counts["local_prox"] += 1
        return self.inner.prox(V, step)


@pytest.mark.parametrize("name", sorted(rf.algorithms.REGISTRY))
def test_every_algorithm_counts_its_oracle_calls_as_the_oracle_does(name):
    """``opt.calls`` equals what a counting oracle saw, for every registered method, through 23 steps; a
    state_dict resume continues the count; a step that raised DivergenceError counts nothing."""
    from conftest import feed, random_primitive
    from test_algorithms import build_on, quadratic, random_column

    cls = rf.algorithms.REGISTRY[name]
    rng = np.random.default_rng(3)
    A, C = random_primitive(8, 0.4, rng), random_column(8, rng)
    grad, _, _ = quadratic(8, 2, rng)
    opt = build_on(cls, A, C, rng.standard_normal((8, 2)), 0.01)
    oracle = _Counting(feed(cls, grad))
    if cls.gradients == "samples":
        oracle.inner.sample_gradients = None  # (not used by _Counting: one call per sample)
    for _ in range(23):
        opt.step(oracle)
    calls, seen = opt.calls, oracle.counts
    assert set(calls) == set(rf.algorithms.Optimizer.CALL_KINDS) and calls["prox"] == 0
    # (a drawn sample's gradient is a "gradient" call, a pass over the finite sum "sample_gradient" ones: the
    # oracle sees both as sample_gradient; GT-SVRG's split is checked below)
    assert calls["gradient"] + calls["sample_gradient"] == seen["gradient"] + seen["sample_gradient"] and \
        calls["local_prox"] == seen["local_prox"], (calls, seen)
    assert sum(seen.values()) >= 23 - cls.gradient_free_iterations
    if name == "gt-svrg":  # two drawn samples' gradients an iteration, m = 2 at each snapshot (every m, x_0's too)
        assert (calls["gradient"], calls["sample_gradient"]) == (2 * 23, 2 * (1 + 23 // 2))
    again = type(opt).from_state_dict(opt.state_dict(), **{m: getattr(opt, m) for m in cls.matrices
                                                           if getattr(opt, m, None) is not None})
    assert again.calls == calls
    for _ in range(2):
        opt.step(oracle)
        again.step(oracle)
    assert again.calls == opt.calls
    before = opt.calls
    broken = _Counting(feed(cls, lambda X: grad(X) * np.nan))
    with pytest.raises(rf.DivergenceError):
        for _ in range(cls.gradient_free_iterations + 2):
            opt.step(broken)
    assert opt.calls == before


def test_proximal_calls_are_counted_and_recorded():
    """PG-EXTRA with an L1 regularizer: one prox a step (none at initialisation), one gradient a step and one at
    initialisation; recorded by the harness as the metrics prox_calls and gradient_calls."""
    from rowstoch_fast.composite import L1
    from rowstoch_fast.mixing import metropolis_weights

    W = metropolis_weights(topology.ring(8, directed=False))
    f = LeastSquares.synthetic(8, samples_per_node=6, d=3, seed=1) + L1(0.05)
    h = run(Algorithm(W, 0.1, method="pg-extra"), f, 30, record_every=10, progress=False,
            metrics=["suboptimality", "gradient_calls", "prox_calls", "local_prox_calls", "sample_gradient_calls"])
    last = h.frame[h.frame["iteration"] == 30].iloc[0]
    assert (last["gradient_calls"], last["prox_calls"], last["local_prox_calls"], last["sample_gradient_calls"]) \
        == (31.0, 30.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="is a built-in metric's"):
        um.register_metric("prox_calls", lambda s: 0.0)


def test_a_ranked_metric_that_is_never_finite_is_said_to_be_the_metrics_doing(logistic):
    """A user metric registered ranked=True that returns NaN: compare() said every method "diverged (NaN/Inf by
    iteration 0)" at every rate of the grid although the iterates converged (helper 112). The tuner and the
    diagnosis now say the metric was not finite from the start, at finite iterates."""
    import warnings

    from rowstoch_fast import compare as cmp
    from rowstoch_fast.compare.tuning import judge

    assert judge([0, 5, 10], [math.nan] * 3)[1] == "its metric is not finite from the start (iteration 0, before " \
                                                    "any step)"
    assert judge([0, 5, 10], [1.0, math.nan, math.nan])[1] == "diverged (NaN/Inf by iteration 5)"
    rf.register_metric("never", lambda state: float("nan"), ranked=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        frame = cmp.compare(topology.exponential(8), logistic, "dsgd", 20, metric="never", repeats=2,
                            progress=False)
    table = cmp.summary(frame)
    diagnosis = table["diagnosis"].iloc[0]
    assert "its metric is not finite from the start" in diagnosis and "the metric, not the run" in diagnosis, \
        diagnosis


@pytest.mark.parametrize("meddle", ["step", "lr", "x"])
def test_a_metric_that_changes_the_optimizer_is_refused_naming_it(meddle):
    """Helper 196: a metric that stepped the optimizer made a run of 10 iterations record at 1, 3, 5, ... 11, "done";
    one that set lr = 0.5 ran on at it while the run's meta said 0.1. A metric reads the state and changes nothing;
    one that reads the optimizer (its x, lr, state_dict) is fine."""
    A, f = topology.exponential(8), Quadratic.random(8, 3, seed=1)

    def meddler(state):
        opt = state.algorithm
        if meddle == "step":
            opt.step(lambda X: X * 0)
        elif meddle == "lr":
            opt.lr = 0.5
        else:
            opt.x = np.asarray(opt.x) + 1.0
        return 0.0

    with pytest.raises(RuntimeError, match="metric 'meddler' changed the optimizer it was given"):
        run(Algorithm(A, lr=0.1, method="dgd" if meddle == "x" else "pull-diag-gt"), f, 10, progress=False,
            metrics=["grad_norm", meddler])

    def reader(state):
        opt = state.algorithm
        return float(np.sum(opt.x)) + float(opt.lr) + len(opt.state_dict())

    h = run(Algorithm(A, lr=0.1), f, 10, progress=False, metrics=["grad_norm", reader])
    assert h.status == "done" and h.frame["iteration"].tolist() == list(range(11))


def test_a_gradient_norm_that_is_nan_at_the_start_is_warned_of():
    """Helper 196: an objective of the user's whose full_gradient returns NaN (its stochastic gradients fine) had
    every record of the gradient norms NaN, the run "done", not a word."""
    class Broken(Quadratic):
        def full_gradient(self, X, nodes=None):
            return np.full(np.shape(X), np.nan)

        def stochastic_gradient(self, X, iteration, **kw):
            return np.asarray(X) - 1.0

    f = Quadratic.random(8, 3, seed=1)
    f.__class__ = Broken
    with pytest.warns(RuntimeWarning, match=r"grad_norm.* NaN at the start \(iteration 0, finite iterates\): "
                                            r"Broken's gradients return NaN there"):
        h = run(Algorithm(topology.exponential(8), lr=0.1), f, 5, progress=False)
    assert h.status == "done" and h.frame["grad_norm"].isna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(Algorithm(topology.exponential(8), lr=0.1), Quadratic.random(8, 3, seed=1), 5, progress=False)
