"""One step size per replica: ``lr`` of shape ``(reps, 1, 1)`` runs each replica of a batched run as it would run
alone at its own rate (what the harness's tuner evaluates its candidate rates with, in one run)."""

import numpy as np
import pytest

from rowstoch_fast import topology
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.network import Compressed, Delayed, Lossy
from conftest import feed, for_algorithm

RATES = np.array([0.01, 0.03, 0.02])


def rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, np.abs(np.asarray(b)).max()))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_replica_runs_at_its_own_rate_as_it_would_alone(name):
    """Every algorithm (its multi-round form at R = 2): the batched run with per-replica rates equals each replica
    run alone with its rate (bit for bit where the compiler contracts both loops alike; 1e-12 anywhere)."""
    rng = np.random.default_rng(11)
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(12, 0.3, seed=2))
    G, x0 = rng.standard_normal((3, 12, 3)), rng.standard_normal((3, 12, 3))
    rounds = 2 if cls.multi_round else 1
    batched = cls.build(A, x0, RATES[:, None, None], rounds=rounds)
    oracle = feed(cls, lambda X: X - G)
    for _ in range(25):
        batched.step(oracle)
    for r in range(3):
        alone = cls.build(A, x0[r], float(RATES[r]), rounds=rounds)
        oracle = feed(cls, lambda X, r=r: X - G[r], rep_offset=r)
        for _ in range(25):
            alone.step(oracle)
        assert rel(batched.x[r], alone.x) < 1e-12, (name, r)


NETWORKS = {"lossy": lambda M: Lossy(M, 0.2, seed=1), "qsgd": lambda M: Compressed(M, "qsgd", bits=4, seed=1),
            "randk": lambda M: Compressed(M, "randk", k=2, seed=3), "delayed": lambda M: Delayed(M, 2, seed=1)}


@pytest.mark.parametrize("network", sorted(NETWORKS))
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_replica_that_diverges_leaves_the_others_as_they_were(name, network):
    """Without the per-step check (``check_finite=False``, as the tuner runs its candidates), a replica whose rate
    makes it diverge to inf / NaN does not touch the others: their iterates are those of a run where it had a
    stable rate, through losses, compression and delays."""
    rng = np.random.default_rng(3)
    cls = REGISTRY[name]
    net = NETWORKS[network](for_algorithm(cls, topology.erdos_renyi(12, 0.3, seed=2)))
    if not cls.applies_to(net):
        pytest.skip(f"{name} does not run on {network} messages")
    if cls.stable_for_any_lr:
        pytest.skip(f"{name} converges for any step size: no replica diverges")
    G, x0 = rng.standard_normal((3, 12, 4)), rng.standard_normal((3, 12, 4))
    ends = []
    for wild in (0.05, 1e300):  # (FedOpt's server steps about server_lr whatever a large rate does to its clients:
        # only an overflow in them makes it diverge)
        opt = cls.build(net, x0, np.array([0.01, wild, 0.02])[:, None, None], check_finite=False)
        oracle = feed(cls, lambda X: X - G)
        with np.errstate(all="ignore"):
            for _ in range(20):
                opt.step(oracle)
        ends.append(opt.x.copy())
    assert not np.isfinite(ends[1][1]).all() or np.abs(ends[1][1]).max() > 1e6  # (it did diverge)
    np.testing.assert_array_equal(ends[0][[0, 2]], ends[1][[0, 2]])


@pytest.mark.parametrize("name", ["pull-diag-gt", "frost", "pull-diag-gd", "extra", "centralized"])
def test_per_replica_rates_are_saved_assigned_and_resumed(name):
    rng = np.random.default_rng(4)
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(10, 0.4, seed=3))
    b, x0 = rng.standard_normal((3, 10, 2)), rng.standard_normal((3, 10, 2))
    opt = cls.build(A, x0, RATES[:, None, None])
    for _ in range(3):
        opt.step(feed(cls, lambda X: X - b))
    state = opt.state_dict()
    np.testing.assert_array_equal(state["lr"], RATES[:, None, None])
    matrices = {} if name == "centralized" else {k: v for k, v in cls.problem_matrices(A).items() if k in cls.matrices}
    again = cls.from_state_dict(state, **matrices)
    new = np.array([0.02, 0.01, 0.005])[:, None, None]
    opt.lr = new
    again.lr = new
    for _ in range(3):
        opt.step(feed(cls, lambda X: X - b))
        again.step(feed(cls, lambda X: X - b))
    np.testing.assert_array_equal(opt.x, again.x)
    alone = cls.build(A, x0[2], 0.02)  # (a rate, then another, per replica: as the schedule alone would run)
    oracle = feed(cls, lambda X: X - b[2], rep_offset=2)
    for k in range(6):
        if k == 3:
            alone.lr = 0.005
        alone.step(oracle)
    assert rel(opt.x[2], alone.x) < 1e-12


def test_bad_per_replica_rates_are_named():
    A = topology.exponential(8)
    x0 = np.zeros((3, 8, 2))
    cls = REGISTRY["push-pull"]
    with pytest.raises(ValueError, match=r"lr must be one number, or one per replica as an array of shape \(reps, 1, "
                                         r"1\) .* got shape \(3,\)"):
        cls.build(A, x0, np.array([0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match="lr has 2 values \\(one per replica\\) but x0 has 3 replicas"):
        cls.build(A, x0, np.array([0.1, 0.2])[:, None, None])
    with pytest.raises(ValueError, match=r"per-replica rates need x0 of shape \(reps, n, d\)"):
        cls.build(A, np.zeros((8, 2)), np.array([0.1])[:, None, None])
    with pytest.raises(ValueError, match="lr must be finite and > 0 for every replica, got nan for replica 1"):
        cls.build(A, x0, np.array([0.1, np.nan, 0.3])[:, None, None])
    with pytest.raises(TypeError, match="lr must be a real number or an array of them"):
        cls.build(A, x0, np.array(["a", "b", "c"])[:, None, None])
    opt = cls.build(A, x0, RATES[:, None, None])
    with pytest.raises(ValueError, match="lr has 4 values"):
        opt.lr = np.ones((4, 1, 1))
    np.testing.assert_array_equal(opt.lr, RATES[:, None, None])
    with pytest.raises(ValueError):  # (read-only: what state_dict saves is what ran)
        opt.lr[0, 0, 0] = 1.0


def test_a_rate_below_the_iterates_smallest_normal_number_is_refused():
    """(float32 took ``lr = 1e-50`` as 0: DSGD ran 50 steps without moving, shown at the rate given.)"""
    A = topology.exponential(8).astype(np.float32)  # (the matrix's value type is the run's)
    cls = REGISTRY["dsgd"]
    x0 = np.zeros((8, 2), dtype=np.float32)
    with pytest.raises(ValueError, match=r"lr = 1e-50 is below float32's smallest normal number \(1.18e-38\)"):
        cls.build(A, x0, 1e-50)
    with pytest.raises(ValueError, match=r"lr = 1e-40 is below float32's"):
        cls.build(A, np.zeros((2, 8, 2), dtype=np.float32), np.array([0.1, 1e-40])[:, None, None])
    opt = cls.build(A, x0, 0.1)
    with pytest.raises(ValueError, match="below float32's"):
        opt.lr = 1e-39
    assert opt.lr == 0.1
    opt.lr = 2e-38  # (a normal float32: taken, as every rate in float64 down to its own smallest normal number)
    cls.build(A.astype(np.float64), x0, 1e-300)
    frost = REGISTRY["frost"]
    with pytest.raises(ValueError, match="below float32's"):
        frost.build(for_algorithm(frost, A), x0, np.full(8, 0.1) * np.r_[1.0, 1e-45, np.ones(6)])


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_per_replica_rates_on_the_emulated_gpu_equal_the_cpu(name, monkeypatch):
    """The CuPy backend's generic combine for per-column coefficients (NumPy standing in for CuPy)."""
    from rowstoch_fast.backends import cupy as backend
    from test_algorithms import _host_kernels

    fake = _host_kernels(monkeypatch, backend)
    rng = np.random.default_rng(5)
    cls = REGISTRY[name]
    A = for_algorithm(cls, topology.erdos_renyi(12, 0.3, seed=2))
    G, x0 = rng.standard_normal((3, 12, 3)), rng.standard_normal((3, 12, 3))
    rounds = 3 if cls.multi_round else 1
    cpu = cls.build(A, x0, RATES[:, None, None], rounds=rounds)
    gpu = cls.build(A, fake.asarray(x0), RATES[:, None, None], rounds=rounds)
    assert gpu.backend == "cupy"
    Gd = fake.asarray(G)
    oc, og = feed(cls, lambda X: X - G), feed(cls, lambda X: X - Gd)
    for _ in range(20):
        cpu.step(oc)
        gpu.step(og)
    assert rel(gpu.gather_x(), cpu.x) < 1e-12


def test_run_with_one_rate_per_replica_reports_growth_and_resumes(tmp_path):
    """``run`` with ``lr`` of shape (reps, 1, 1): a replica that grows without NaN is warned about with its own
    rate (the warning's formatting raised a TypeError on the array), and a checkpoint resumes (the comparison of
    the saved rate with the given one raised) to the records of an uninterrupted run."""
    import rowstoch_fast as rf
    from rowstoch_fast.objectives import Quadratic

    A = topology.exponential(8)
    f = Quadratic.random(8, 3, seed=0)
    growing = rf.Algorithm(A, np.array([1e-3, 5.0]).reshape(2, 1, 1), method="push-pull")
    with pytest.warns(RuntimeWarning, match=r"repetition 1\): the run diverges without NaN; try a smaller lr than 5$"):
        rf.run(growing, f, 20, repeats=2, progress=False)
    algo = rf.Algorithm(A, np.array([1e-2, 2e-2]).reshape(2, 1, 1), method="push-pull")
    ck = tmp_path / "ck.npz"
    rf.run(algo, f, 10, repeats=2, progress=False, checkpoint=ck)
    resumed = rf.run(algo, f, 20, repeats=2, progress=False, resume=ck)
    whole = rf.run(algo, f, 20, repeats=2, progress=False)
    np.testing.assert_array_equal(resumed.frame["grad_norm"], whole.frame["grad_norm"])


def test_the_per_replica_rates_keep_a_few_scales_made_and_make_the_others_at_each_call():
    """A contributor's trial: a step that changes with the iteration, ``self._lr_coef(-1 / sqrt(t + 1))``, kept one
    row of columns per iteration (2,000 in a run of 2,000 steps, with the tuner's per-replica rates). The first
    scales are kept made; the others are made at each call, equal."""
    from rowstoch_fast.algorithms._base import LR_SCALES_KEPT

    opt = REGISTRY["dsgd"].build(topology.exponential(8), np.zeros((3, 8, 2)), RATES[:, None, None])
    want = lambda s: np.repeat(s * RATES, 2)[None, :]  # noqa: E731 - each replica's rate over its d columns
    for t in range(50):
        s = -1.0 / np.sqrt(t + 1.0)
        np.testing.assert_array_equal(np.asarray(opt._lr_coef(s)), want(s))
    assert len(opt._lr_columns) == LR_SCALES_KEPT
    assert opt._lr_coef(-1.0) is opt._lr_coef(-1.0)  # (kept: made once)
