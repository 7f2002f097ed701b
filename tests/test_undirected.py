"""The undirected network's methods (doubly stochastic W: DGD, DIGing, AugDGM, EXTRA, NIDS, Exact Diffusion,
GT-SAGA) and the directed ones added with them (ADD-OPT, ABm): what they refuse, how two of them coincide, and how
the harness picks them. Iterates against the dense twins, convergence, backends and state round trips are the
registry-driven tests of test_algorithms.py, test_backends.py and test_mpi.py."""

import subprocess
import sys

import numpy as np
import pytest

from rowstoch_fast import (ABm, DGD, EXTRA, GTSAGA, NIDS, AugDGM, DIGing, ExactDiffusion, MixingMatrix, _reference,
                           topology)
from rowstoch_fast import compare as cmp
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.network import Compressed, Lossy, Schedule, Sleepy, one_peer_exponential
from rowstoch_fast.objectives import Quadratic
from conftest import hang_limit

UNDIRECTED = [DGD, DIGing, AugDGM, EXTRA, NIDS, ExactDiffusion, GTSAGA]


def metropolis(n=10, seed=3):
    return topology.erdos_renyi(n, 0.4, seed=seed, directed=False, weights="metropolis")


@pytest.mark.parametrize("cls", UNDIRECTED, ids=lambda c: c.name)
def test_a_matrix_that_is_not_doubly_stochastic_is_refused_naming_the_column(cls):
    A = topology.erdos_renyi(10, 0.3, seed=1)  # directed, in-degree weights: rows sum to 1, columns do not
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be doubly stochastic: column \d+ sums to "):
        cls(A, np.zeros((10, 2)), 0.1)
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be doubly stochastic: column \d+ sums to "):
        cls(Lossy(A, 0.1, seed=0), np.zeros((10, 2)), 0.1)  # (losses over it: the W under them checked)
    # losses over a symmetric W: taken under the undirected rule (every round symmetric, doubly stochastic)
    assert cls(Lossy(metropolis(), 0.1, seed=0), np.zeros((10, 2)), 0.1).W.stochastic == "doubly"
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be doubly stochastic: row 0 sums to 0.9"):
        cls(np.array([[0.5, 0.4], [0.5, 0.6]]), np.zeros((2, 1)), 0.1)
    # a regular graph's in-degree weights are doubly stochastic: taken as they are
    opt = cls(topology.ring(6, directed=False), np.zeros((6, 1)), 0.1)
    assert opt.W.doubly and cls.applies_to(topology.ring(6, directed=False))


def test_nids_and_exact_diffusion_coincide_from_their_second_step():
    """Exact Diffusion's x_{k+2} = W_bar (2 x_{k+1} - x_k - lr (g_{k+1} - g_k)) with W_bar = (I + W) / 2: NIDS's
    recursion with W_tilde = W_bar. They differ only in the first step (NIDS: x_1 = x_0 - lr g_0; Exact
    Diffusion: W_bar applied to it)."""
    W = metropolis()
    rng = np.random.default_rng(0)
    Q, b = rng.uniform(0.5, 2.0, (10, 3)), rng.standard_normal((10, 3))
    grad = lambda X: Q * X - b  # noqa: E731
    x0, lr, T = rng.standard_normal((10, 3)), 0.1, 60
    ed, nids = ExactDiffusion(W, x0, lr), NIDS(W, x0, lr)
    xs_ed, xs_nids = [x0], [x0]
    for _ in range(T):
        xs_ed.append(ed.step(grad).x.copy())
        xs_nids.append(nids.step(grad).x.copy())
    W_bar = (np.eye(10) + W.toarray()) / 2
    for k in range(T - 1):  # Exact Diffusion's iterates follow NIDS's recursion
        want = W_bar @ (2 * xs_ed[k + 1] - xs_ed[k] - lr * (grad(xs_ed[k + 1]) - grad(xs_ed[k])))
        np.testing.assert_allclose(xs_ed[k + 2], want, rtol=1e-12, atol=1e-12)
    # ... and NIDS started from Exact Diffusion's first step is Exact Diffusion (the dense twins)
    twin = _reference.nids(W.toarray(), x0, lr, grad, T, first="mixed")
    np.testing.assert_allclose(np.array(xs_ed), np.array(twin), rtol=1e-11, atol=1e-12)
    assert not np.allclose(xs_ed[1], xs_nids[1])  # (the first steps differ)
    # NIDS's first step sends nothing
    assert nids.communication_rounds == T - 1 and ed.communication_rounds == T
    assert nids.traffic()["messages"] == (T - 1) * (W.nnz - W.n)


def test_abm_momentum_is_checked_and_zero_is_the_ab_algorithm():
    A = topology.erdos_renyi(8, 0.4, seed=2)
    C = topology.erdos_renyi(8, 0.4, seed=2, stochastic="column")
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="momentum must be"):
            ABm(A, C, np.zeros((8, 1)), 0.1, momentum=bad)
    rng = np.random.default_rng(1)
    b = rng.standard_normal((8, 2))
    opt = ABm(A, C, np.zeros((8, 2)), 0.05, momentum=0.0)
    x, y = np.zeros((8, 2)), np.zeros((8, 2)) - b  # AB: x+ = A x - lr y, y+ = C y + g(x+) - g(x)
    Ad, Cd = A.toarray(), C.toarray()
    for _ in range(50):
        opt.step(lambda X: X - b)
        x_new = Ad @ x - 0.05 * y
        y = Cd @ y + (x_new - b) - (x - b)
        x = x_new
    np.testing.assert_allclose(opt.x, x, rtol=1e-12, atol=1e-13)
    state = opt.state_dict()
    assert float(state["momentum"]) == 0.0 and ABm.from_state_dict(state, A=A, C=C).momentum == 0.0


def test_compare_runs_what_applies_to_the_network():
    directed, undirected = topology.erdos_renyi(8, 0.4, seed=1), metropolis(8)
    # the directed exponential graph's in-degree weights are doubly stochastic, not symmetric: the methods of a
    # doubly stochastic W run on it, those that need a symmetric one do not
    on_exponential = cmp.default_algorithms(topology.exponential(8))
    assert {"dgd", "diging", "aug-dgm"} <= set(on_exponential) and not {"extra", "nids"} & set(on_exponential)
    with pytest.raises(ValueError, match=r"EXTRA: W must be symmetric .*: W\[0, 1\] = 0 but W\[1, 0\] = 0.25"):
        EXTRA(topology.exponential(8), np.zeros((8, 1)), 0.1)
    on_directed, on_undirected = cmp.default_algorithms(directed), cmp.default_algorithms(undirected)
    assert not {"dgd", "extra", "nids"} & set(on_directed) and {"add-opt", "abm"} <= set(on_directed)
    assert {"dgd", "diging", "aug-dgm", "extra", "nids", "exact-diffusion"} <= set(on_undirected)
    assert set(on_directed) < set(on_undirected)  # (a doubly stochastic W is row-stochastic too)
    with pytest.raises(ValueError, match="'extra' runs on an undirected network's doubly stochastic W"):
        cmp.parse_algorithms("extra,dsgd", directed)
    with pytest.raises(ValueError, match="'extra', 'nids' run on an undirected network's doubly stochastic W"):
        cmp.parse_algorithms("extra,dsgd,nids", directed)  # (every method that does not run: at once, by reason)
    with pytest.raises(ValueError, match="'extra' is listed twice"):
        cmp.parse_algorithms("extra,nids,extra", directed)  # (a refused name listed twice: said so)
    frame = cmp.compare(undirected, Quadratic.random(8, 2, seed=0), "extra,nids,diging", 40, lr=0.1, repeats=1,
                        progress=False)
    assert set(frame["algorithm"]) == {"extra", "nids", "diging"}


def test_a_method_whose_first_step_is_silent_spends_the_whole_budget_of_rounds():
    """NIDS's first step sends nothing: a comparison ran it budget iterations, 1,999 rounds of a budget of 2,000
    (the table's rounds, which the guide says agree, read 1999 beside 2000)."""
    frame = cmp.compare(metropolis(8), Quadratic.random(8, 2, seed=0), "nids,extra", 40, lr=0.1, repeats=1,
                        progress=False)
    table = cmp.summary(frame).set_index("algorithm")
    assert table.loc["nids", "communication_rounds"] == table.loc["extra", "communication_rounds"] == 40
    assert (table.loc["nids", "iterations"], table.loc["extra", "iterations"]) == (41, 40)
    # an earlier version's comparison (NIDS one iteration short) grown by a repetition: its finished rows were read
    # as a repetition that stopped ("diverged: NaN/Inf"); they are refused, naming the two lengths
    older = frame[frame["iteration"] < 41]
    with pytest.raises(ValueError, match=r"previous: the earlier comparison ran nids for \d+ iterations, this one runs "
                                         r"it 41 for the same budget of 40 rounds"):
        cmp.compare(metropolis(8), Quadratic.random(8, 2, seed=0), "nids,extra", 40, lr=0.1, repeats=2,
                    progress=False, previous=older)


def test_the_cli_names_a_method_the_network_cannot_run(tmp_path):
    run = [sys.executable, "-m", "rowstoch_fast.cli", "compare", "--topology", "erdos_renyi", "--n", "8",
           "--objective", "least-squares",
           "--algorithms", "nids,add-opt", "--rounds-budget", "30", "--repeats", "1", "--lr", "0.05",
           "--no-progress"]
    # (from a neutral folder: in a source checkout the current folder would shadow the installed package)
    out = subprocess.run(run + ["--out", str(tmp_path / "a")], capture_output=True, text=True, timeout=hang_limit(300),
                         cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "'nids' runs on an undirected" in out.stderr
    assert not (tmp_path / "a").exists()
    out = subprocess.run(run + ["--undirected", "--weights", "metropolis", "--out", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=hang_limit(300), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "b" / "summary.csv").exists()


def test_every_new_method_is_in_the_registry_with_its_kind():
    for name in ("dgd", "diging", "aug-dgm", "extra", "nids", "exact-diffusion"):
        assert REGISTRY[name].matrices == ("W",) and not REGISTRY[name].in_paper_preset
    assert REGISTRY["add-opt"].matrices == ("C",) and REGISTRY["abm"].matrices == ("A", "C")
    assert REGISTRY["add-opt"].in_paper_preset and REGISTRY["abm"].in_robustness
    assert isinstance(metropolis(), MixingMatrix)


def test_rowstoch_algorithms_lists_the_registry(capsys):
    from rowstoch_fast import cli
    from rowstoch_fast.algorithms import labels

    assert cli.main(["algorithms"]) == 0
    out = capsys.readouterr().out
    for label in labels(every_mg=True):
        assert f"\n{label} " in out, label
    assert "symmetric W" in out and "doubly stochastic W" in out and "pi-weighted minimiser" in out


# ---------------------------------------------------------------- GT-SAGA: per-sample gradients of a finite sum
def test_gt_saga_equals_its_twin_with_a_finite_sums_own_samples():
    """Five samples per node, three replicas (each its own draws), 150 steps: the dense twin with the oracle's
    draws, to 1e-12; samples drawn = the table's m, then one per iteration."""
    from rowstoch_fast.objectives import LeastSquares, draw_samples

    f = LeastSquares.synthetic(n=10, samples_per_node=5, d=3, seed=2)
    W = metropolis()
    x0 = np.random.default_rng(1).standard_normal((3, 10, 3))
    opt = GTSAGA(W, x0, 0.03)
    oracle = f.oracle(seed=4)
    xs = _reference.gt_saga(W.toarray(), x0, 0.03, None, 150, sample_grad=f.sample_gradient, samples=5,
                            draw=lambda k: draw_samples(5, (3, 10), k, 4))
    for k in range(1, 151):
        opt.step(oracle)
        assert np.abs(opt.x - xs[k]).max() / np.abs(xs[k]).max() < 1e-12, k
    assert opt.samples_drawn(batch=7) == 5 + 150


def test_gt_saga_is_exact_where_sampled_diging_stalls():
    """One sampled gradient per node and iteration: GT-SAGA reaches x* to 1e-8; DIGing fed the same kind of
    one-sample gradients stays at its noise floor (two orders of magnitude above)."""
    from rowstoch_fast.objectives import LeastSquares

    f = LeastSquares.synthetic(n=10, samples_per_node=8, d=3, seed=0, batch=1)
    W = metropolis()
    saga, plain = GTSAGA(W, f.x0(), 0.02), DIGing(W, f.x0(), 0.02)
    a, b = f.oracle(seed=1), f.oracle(seed=1)
    for _ in range(4000):
        saga.step(a)
        plain.step(b)
    x_star = f.optimum().x
    assert np.abs(saga.x - x_star).max() < 1e-8
    assert np.abs(plain.x - x_star).max() > 1e-3


def test_gt_saga_says_what_it_needs(tmp_path):
    """A plain grad_fn, an objective without samples: one line naming GT-SAGA and what it takes; the runner, the
    harness and the CLI refuse it on such an objective before anything runs, and leave it out of compare's
    default there (and only there)."""
    import rowstoch_fast as rf
    from rowstoch_fast.objectives import LeastSquares, SampleOracle

    W = metropolis()
    opt = GTSAGA(W, np.zeros(2), 0.02)
    with pytest.raises(TypeError, match=r"^GTSAGA steps with a per-sample oracle .* got a function$"):
        opt.step(lambda X: X)
    q = Quadratic.random(10, 2, seed=0)
    with pytest.raises(TypeError, match=r"got an oracle of Quadratic \(no per-sample gradients\)$"):
        opt.step(q.oracle())
    with pytest.raises(TypeError, match=r"Quadratic has no per-sample gradients"):
        q.sample_gradient(np.zeros((10, 2)), np.zeros(10, dtype=int))
    with pytest.raises(ValueError, match=r"^algorithm 'gt-saga' takes per-sample gradients .* Quadratic has none$"):
        rf.run(rf.Algorithm(W, 0.02, method="gt-saga"), q, 5, progress=False)
    with pytest.raises(ValueError, match=r"^algorithm 'gt-saga' takes per-sample gradients"):
        cmp.compare(W, q, ["dgd", "gt-saga"], 10, lr=0.01, repeats=1, progress=False)
    ls = LeastSquares.synthetic(n=10, samples_per_node=4, d=2, seed=0)
    assert "gt-saga" not in cmp.default_algorithms(W, q) and "gt-saga" in cmp.default_algorithms(W, ls)
    with pytest.raises(ValueError, match=r"idx must be sample ids in 0..3"):
        ls.sample_gradient(np.zeros((10, 2)), np.full(10, 4))
    with pytest.raises(ValueError, match=r"idx must hold integer sample ids of shape \(10,\)"):
        ls.sample_gradient(np.zeros((10, 2)), np.zeros(10))
    with pytest.raises(ValueError, match=r"samples must be"):
        SampleOracle(lambda X, idx: X, samples=0)
    out = subprocess.run([sys.executable, "-m", "rowstoch_fast.cli", "run", "--algorithm", "gt-saga", "--topology",
                          "ring", "--n", "8", "--objective", "quadratic", "--iterations", "5", "--no-progress"],
                         capture_output=True, text=True, cwd=tmp_path)  # (not the source tree: the installed package)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith("rowstoch: error: algorithm "
                                                                                  "'gt-saga' takes per-sample")


def test_gt_saga_run_resumes_from_its_checkpoint_bit_for_bit(tmp_path):
    """rowstoch_fast.run with a finite-sum objective: the samples axis counts GT-SAGA's draws, and a run stopped
    at a checkpoint and resumed ends where the uninterrupted run ends (the table travels in the checkpoint)."""
    import rowstoch_fast as rf
    from rowstoch_fast.objectives import LeastSquares

    f = LeastSquares.synthetic(n=10, samples_per_node=6, d=3, seed=1, batch=2)
    algo = rf.Algorithm(metropolis(), 0.02, method="gt-saga")
    whole = rf.run(algo, f, 40, record_every=10, repeats=2, progress=False)
    path = str(tmp_path / "ck.npz")
    rf.run(algo, f, 20, record_every=10, repeats=2, progress=False, checkpoint=path)
    resumed = rf.run(algo, f, 40, record_every=10, repeats=2, progress=False, resume=path)
    np.testing.assert_array_equal(resumed.frame["distance"].to_numpy(), whole.frame["distance"].to_numpy())
    assert whole.frame["samples"].max() == 6 + 40


def test_gt_saga_on_the_gpu_equals_the_cpu():
    """GT-SAGA with a finite-sum objective's own oracle on the CuPy backend (the table on the device, its
    gathers and scatters generic operations): the CPU's iterates, and a state_dict resumes there."""
    from conftest import cupy_or_reason

    from rowstoch_fast.objectives import LeastSquares

    cupy, why = cupy_or_reason()
    if cupy is None:
        pytest.skip(f"CuPy backend unavailable: {why}")
    f = LeastSquares.synthetic(n=10, samples_per_node=6, d=3, seed=1)
    W = metropolis()
    x0 = np.random.default_rng(3).standard_normal((2, 10, 3))
    cpu, gpu = GTSAGA(W, x0, 0.03), GTSAGA(W, cupy.asarray(x0), 0.03)
    a, b = f.oracle(seed=2), f.oracle(seed=2)
    for _ in range(50):
        cpu.step(a)
        gpu.step(b)
    assert gpu.backend == "cupy"
    np.testing.assert_allclose(gpu.gather_x(), cpu.x, rtol=1e-12, atol=1e-13)
    again = GTSAGA.from_state_dict(gpu.state_dict(), W=W, backend="cupy")
    c = f.oracle(seed=2)
    c.iteration = b.iteration
    for _ in range(5):
        cpu.step(a)
        again.step(c)
    np.testing.assert_allclose(again.gather_x(), cpu.x, rtol=1e-12, atol=1e-13)


def test_gt_saga_refuses_a_table_that_cannot_fit(monkeypatch):
    """The table (m samples x n x reps*d values) is checked against the memory the backend has before it is
    allocated: one MemoryError naming GT-SAGA's table and what to lower, the optimizer untouched."""
    from rowstoch_fast.objectives import SampleOracle

    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(10**6))
    opt = GTSAGA(metropolis(), np.zeros((3, 10, 4)), 0.02)
    with pytest.raises(MemoryError, match=r"GTSAGA's table of 100000 samples x 10 nodes x 12 values .*fewer samples"):
        opt.step(SampleOracle(lambda X, idx: X, samples=100_000))
    assert opt.iteration == 0 and opt._table is None


NETWORKS = {"lossy": lambda W: Lossy(W, 0.3, seed=1), "poisson": lambda W: Sleepy(W, model="poisson", rate=0.8, seed=2),
            "lossy-markov": lambda W: Lossy(Sleepy(W, model="markov", p_sleep=0.3, p_wake=0.5, seed=3), 0.2, seed=4),
            "bursty": lambda W: Lossy(W, 0.9, seed=5, model="gilbert-elliott", p_bad=0.2, p_recover=0.3)}


@pytest.mark.parametrize("net", NETWORKS)
@pytest.mark.parametrize("t", [0, 1, 7])
def test_rounds_under_the_undirected_rule_are_symmetric_and_doubly_stochastic(net, t):
    """Network.undirected: a link used only when both its messages arrived and both ends are awake, its weight
    kept on each end otherwise; the compiled pass applies the same matrix as the NumPy rounds (matrix(t)), and the
    same network's draws under the row rule (the directed methods') are those it starts from."""
    W = metropolis(12, seed=5)
    U = NETWORKS[net](W).undirected()
    M = U.matrix(t).toarray()
    np.testing.assert_allclose(M, M.T, atol=1e-15)
    np.testing.assert_allclose(M.sum(axis=0), 1.0, rtol=1e-14)
    assert (M >= 0).all() and M.diagonal().min() >= W.toarray().diagonal().min()
    used = (M != 0) & ~np.eye(12, dtype=bool)
    directed = (NETWORKS[net](W).matrix(t).toarray() != 0) & ~np.eye(12, dtype=bool)  # (the row rule: arrivals)
    assert (used == (directed & directed.T)).all() and used.sum() < (W.toarray() != 0).sum() - 12
    X = np.random.default_rng(t).standard_normal((12, 3))
    np.testing.assert_allclose(U.mix(X, t), M @ X, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("net", NETWORKS)
@pytest.mark.parametrize("cls", [DGD, DIGing, AugDGM, EXTRA, NIDS, ExactDiffusion], ids=lambda c: c.name)
def test_undirected_methods_over_losses_and_sleep_equal_their_twins(cls, net):
    """An undirected method on losses or sleep over a symmetric W runs the undirected rule's rounds: its iterates
    are its dense twin's with W_t = the round's matrix (compiled pass against NumPy's matrices: 1e-12)."""
    W = metropolis(10, seed=3)
    network = NETWORKS[net](W)
    U = network.undirected()
    rng = np.random.default_rng(1)
    Q, b = rng.uniform(0.5, 2.0, (10, 3)), rng.standard_normal((10, 3))
    grad = lambda X: Q * X - b  # noqa: E731
    x0, T = rng.standard_normal((10, 3)), 40
    opt = cls(network, x0, 0.05)
    xs = _reference.TWINS[cls.name](lambda t: U.matrix(t).toarray(), x0, 0.05, grad, T)
    for t in range(1, T + 1):
        opt.step(grad)
        np.testing.assert_allclose(opt.x, xs[t], rtol=1e-12, atol=1e-12, err_msg=f"{cls.name} {net} t={t}")


def test_the_undirected_rule_refuses_what_it_cannot_keep_symmetric():
    W = metropolis()
    class Mine(Lossy):  # (a network of the user's: the rule knows only the package's layers)
        def map(self, f):
            out = Lossy.map(self, f)
            out.__class__ = Mine
            return out

    with pytest.raises(ValueError, match="the undirected rule needs a symmetric W .* not a Mine"):
        Sleepy(Mine(W, 0.1), 0.9).undirected()
    assert DGD.applies_to(Lossy(W, 0.1)) and DGD.applies_to(Compressed(Sleepy(W, 0.5), "topk", k=1))
    assert not DGD.applies_to(Lossy(topology.erdos_renyi(10, 0.3, seed=1), 0.1))  # (not doubly stochastic)


@pytest.mark.parametrize("net", ["bursty", "lossy-markov"])
@pytest.mark.parametrize("cls", [DIGing, EXTRA], ids=lambda c: c.name)
def test_an_undirected_method_over_losses_resumes_bit_for_bit(cls, net):
    """A state saved on losses / sleep over W resumes from the network the user passes (the constructor applies
    the undirected rule to it, and so does the check that it is the same network): the iterates of a run that
    never stopped, the bursty chains of both messages of each link included."""
    W = metropolis(10, seed=3)
    f = Quadratic.random(10, 3, seed=1)
    whole = cls(NETWORKS[net](W), f.x0(), 0.05)
    half = cls(NETWORKS[net](W), f.x0(), 0.05)
    for _ in range(10):
        whole.step(f.full_gradient)
        half.step(f.full_gradient)
    resumed = cls.from_state_dict(half.state_dict(), W=NETWORKS[net](W))
    for _ in range(10):
        whole.step(f.full_gradient)
        resumed.step(f.full_gradient)
    np.testing.assert_array_equal(resumed.x, whole.x)
    with pytest.raises(ValueError, match="W is not the network this state was saved on"):
        cls.from_state_dict(half.state_dict(), W=Lossy(W, 0.25, seed=1))


SCHEDULES = {"one-peer": lambda: one_peer_exponential(16),
             "symmetric": lambda: Schedule([metropolis(16, seed=3), topology.ring(16, directed=False)]),
             "lossy-symmetric": lambda: Lossy(Schedule([metropolis(16, seed=3), topology.ring(16, directed=False)]),
                                              0.2, seed=1)}


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("cls", [DGD, DIGing, AugDGM, EXTRA, NIDS, ExactDiffusion], ids=lambda c: c.name)
def test_undirected_methods_over_schedules_of_doubly_stochastic_matrices_equal_their_twins(cls, sched):
    """A Schedule of doubly stochastic matrices (the one-peer exponential graph: each round alone disconnected,
    doubly stochastic, not symmetric) runs DGD, DIGing and AugDGM; a schedule of symmetric ones every undirected
    method, under losses too (the undirected rule). Iterates: the twins' with W_t = the round's matrix."""
    net = SCHEDULES[sched]()
    rng = np.random.default_rng(2)
    Q, b = rng.uniform(0.5, 2.0, (16, 3)), rng.standard_normal((16, 3))
    grad = lambda X: Q * X - b  # noqa: E731
    x0 = rng.standard_normal((16, 3))
    if cls.symmetric and sched == "one-peer":
        with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be symmetric"):
            cls(net, x0, 0.05)
        assert not cls.applies_to(net)
        return
    assert cls.applies_to(net)
    opt = cls(net, x0, 0.05)
    xs = _reference.TWINS[cls.name](lambda t: opt.W.matrix(t).toarray(), x0, 0.05, grad, 30)
    for t in range(1, 31):
        opt.step(grad)
        np.testing.assert_allclose(opt.x, xs[t], rtol=1e-12, atol=1e-12, err_msg=f"{cls.name} {sched} t={t}")


def test_a_schedule_that_is_not_doubly_stochastic_or_loses_asymmetric_links_is_refused():
    A = np.array([[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]])
    B = np.array([[0.6, 0.4, 0], [0, 0.6, 0.4], [0.3, 0, 0.7]])
    with pytest.raises(ValueError, match=r"^DGD: W must be doubly stochastic: column 0 of a matrix of the schedule "
                                         r"sums to 0.8999"):
        DGD(Schedule([A, B]), np.zeros((3, 1)), 0.1)
    with pytest.raises(ValueError, match=r"^DIGing: the rounds of losses or sleep over W stay doubly stochastic only "
                                         r"for a symmetric W"):
        DIGing(Lossy(one_peer_exponential(8), 0.1), np.zeros((8, 1)), 0.1)
    assert not DGD.applies_to(Lossy(one_peer_exponential(8), 0.1))
