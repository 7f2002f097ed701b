"""The directed proximal methods (SONATA over a column-stochastic network): the composite optimum on a lasso over a
directed graph against the independent solver of rowstoch_fast.composite, its smooth form against an independent
transcription, its hyperparameters' checks, and the harness and command line on a directed graph. (Its iterates
against its dense twin, replicas, float32, state_dict, MPI and the emulated GPU: the registry-driven tests.)"""

import numpy as np
import pytest

import rowstoch_fast as rf
from rowstoch_fast import topology
from rowstoch_fast.algorithms import REGISTRY, names
from rowstoch_fast.composite import L1, GroupLasso
from rowstoch_fast.mixing import out_degree_weights
from rowstoch_fast.objectives import LeastSquares, Quadratic

#: The proximal methods of a directed network (no doubly stochastic W among their matrices), from the registry.
DIRECTED_PROXIMAL = names(lambda cls: cls.composite and "W" not in cls.matrices)


def test_the_registry_has_a_directed_proximal_method():
    assert "sonata" in DIRECTED_PROXIMAL and REGISTRY["sonata"].exact
    assert not REGISTRY["sonata"].in_paper_preset and not REGISTRY["sonata"].in_robustness


@pytest.mark.parametrize("name", DIRECTED_PROXIMAL)
@pytest.mark.parametrize("reg", ["l1", "group-lasso"])
def test_a_lasso_over_a_directed_graph_reaches_the_composite_optimum(name, reg):
    """Heterogeneous least squares plus ``r`` over a directed Erdos-Renyi graph (out-degree weights): the models
    reach the minimiser of ``(1/n) sum_i f_i + r`` that composite.py's accelerated proximal solver gives (residual
    1e-12), with a constant step, to 1e-9."""
    n, d = 16, 6
    f = LeastSquares.synthetic(n, samples_per_node=8, d=d, seed=3)
    r = L1(0.6) if reg == "l1" else GroupLasso([0, 0, 1, 1, 2, 2], 1.0)
    F = f + r
    best = F.optimum()
    assert (best.x == 0).any()  # (the regularizer is active: some coordinates or groups are zero)
    A = topology.erdos_renyi(n, 0.3, seed=2)
    opt = REGISTRY[name].build(A, np.zeros(d), 0.1, regularizer=r)
    for _ in range(1500):
        opt.step(f.full_gradient)
    assert np.abs(opt.x - best.x).max() < 1e-9
    assert (opt.x[:, best.x == 0] == 0).all()  # (the prox sets the optimum's zeros exactly, at every node)


def test_sonata_without_a_regularizer_is_push_diging_adapted_then_combined():
    """``alpha = 1``, ``r = 0``: ``u+ = C (u - lr w)``, ``w+ = C (w + g(x+) - g(x))``, ``v+ = C v``, ``x = u / v``
    (the push-sum numerators; written independently of the twin, which keeps the de-biased ``y``)."""
    rng = np.random.default_rng(1)
    n, d, lr = 12, 3, 0.05
    f = Quadratic(rng.uniform(0.5, 2, (n, d)), rng.standard_normal((n, d)))
    C = out_degree_weights(topology.erdos_renyi(n, 0.4, seed=5))
    Cd = C.toarray()
    x0 = rng.standard_normal((n, d))
    opt = rf.SONATA(C, x0, lr)
    u, v, w, g = x0.copy(), np.ones((n, 1)), f.full_gradient(x0), f.full_gradient(x0)
    for _ in range(800):
        u, v = Cd @ (u - lr * w), Cd @ v
        x = u / v
        g_new = f.full_gradient(x)
        w, g = Cd @ (w + g_new - g), g_new
        opt.step(f.full_gradient)
        assert np.abs(opt.x - x).max() < 1e-12
    assert np.abs(opt.x - f.optimum().x).max() < 1e-10 and opt.communication_rounds == 800  # (two messages, one round)


def test_sonata_hyperparameters_and_matrices_are_checked():
    C = topology.ring(6, stochastic="column")
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="alpha"):
            rf.SONATA(C, np.zeros(2), 0.1, alpha=bad)
    with pytest.raises(ValueError, match="C must be a column-stochastic"):
        rf.SONATA(topology.erdos_renyi(6, 0.5, seed=0), np.zeros(2), 0.1)
    with pytest.raises(ValueError, match="lr"):
        rf.SONATA(C, np.zeros(2), -0.1)
    with pytest.raises(ValueError, match="regularizer must be a Regularizer"):
        rf.SONATA(C, np.zeros(2), 0.1, regularizer="not a regularizer")


def test_sonata_alpha_below_one_follows_its_twin_and_reaches_the_same_optimum():
    from rowstoch_fast import _reference

    f = LeastSquares.synthetic(10, samples_per_node=6, d=4, seed=7)
    F = f + L1(0.1)
    C = out_degree_weights(topology.erdos_renyi(10, 0.4, seed=3))
    x0 = np.random.default_rng(2).standard_normal((10, 4))
    opt = rf.SONATA(C, x0, 0.1, alpha=0.5, regularizer=L1(0.1))
    xs = _reference.sonata(C.toarray(), x0, 0.1, f.full_gradient, 3000, alpha=0.5, prox=L1(0.1).prox)
    for t in range(1, 3001):
        opt.step(f.full_gradient)
        if t % 100 == 0:
            assert np.abs(opt.x - xs[t]).max() < 1e-12 * max(1.0, np.abs(xs[t]).max()), t
    assert np.abs(opt.x - F.optimum().x).max() < 1e-9


def test_the_harness_and_the_command_line_run_sonata_on_a_directed_lasso(tmp_path):
    import pandas as pd

    from rowstoch_fast.cli import main

    A = topology.erdos_renyi(12, 0.4, seed=1)
    F = LeastSquares.synthetic(12, samples_per_node=6, d=4, seed=5) + L1(0.1)
    h = rf.run(rf.Algorithm(A, 0.1, method="sonata"), F, 1500, progress=False)
    assert h.final("suboptimality") < 1e-12 and h.final("distance") < 1e-9
    out = tmp_path / "lasso"
    assert main(["compare", "--objective", "lasso", "--l1", "0.05", "--topology", "exponential", "--n", "16",
                 "--algorithms", "sonata", "--lr", "0.1", "--rounds-budget", "600", "--repeats", "1", "--out",
                 str(out), "-q"]) == 0
    table = pd.read_csv(out / "summary.csv")
    assert list(table["algorithm"]) == ["sonata"] and table["suboptimality"].iloc[0] < 1e-10
