"""The undirected network's methods (doubly stochastic W: DGD, DIGing, AugDGM, EXTRA, NIDS, Exact Diffusion)
and the directed ones added with them (ADD-OPT, ABm): what they refuse, how two of them coincide, and how
the harness picks them. Iterates against the dense twins, convergence, backends and state round trips are the
registry-driven tests of test_algorithms.py, test_backends.py and test_mpi.py."""

import subprocess
import sys

import numpy as np
import pytest

from rowstoch_fast import (ABm, DGD, EXTRA, NIDS, AugDGM, DIGing, ExactDiffusion, MixingMatrix, _reference,
                           topology)
from rowstoch_fast import compare as cmp
from rowstoch_fast.algorithms import REGISTRY
from rowstoch_fast.network import Lossy
from rowstoch_fast.objectives import Quadratic

UNDIRECTED = [DGD, DIGing, AugDGM, EXTRA, NIDS, ExactDiffusion]


def metropolis(n=10, seed=3):
    return topology.erdos_renyi(n, 0.4, seed=seed, directed=False, weights="metropolis")


@pytest.mark.parametrize("cls", UNDIRECTED, ids=lambda c: c.name)
def test_a_matrix_that_is_not_doubly_stochastic_is_refused_naming_the_column(cls):
    A = topology.erdos_renyi(10, 0.3, seed=1)  # directed, in-degree weights: rows sum to 1, columns do not
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be doubly stochastic: column \d+ sums to "):
        cls(A, np.zeros((10, 2)), 0.1)
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: W must be a static doubly stochastic matrix, got a "
                                         "time-varying network \\(Lossy\\)"):
        cls(Lossy(metropolis(), 0.1, seed=0), np.zeros((10, 2)), 0.1)
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
    frame = cmp.compare(undirected, Quadratic.random(8, 2, seed=0), "extra,nids,diging", 40, lr=0.1, repeats=1,
                        progress=False)
    assert set(frame["algorithm"]) == {"extra", "nids", "diging"}


def test_the_cli_names_a_method_the_network_cannot_run(tmp_path):
    run = [sys.executable, "-m", "rowstoch_fast.cli", "compare", "--topology", "erdos_renyi", "--n", "8",
           "--objective", "least-squares",
           "--algorithms", "nids,add-opt", "--rounds-budget", "30", "--repeats", "1", "--lr", "0.05",
           "--no-progress"]
    # (from a neutral folder: in a source checkout the current folder would shadow the installed package)
    out = subprocess.run(run + ["--out", str(tmp_path / "a")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "'nids' runs on an undirected" in out.stderr
    assert not (tmp_path / "a").exists()
    out = subprocess.run(run + ["--undirected", "--weights", "metropolis", "--out", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
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
