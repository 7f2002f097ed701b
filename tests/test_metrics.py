"""Network metrics against the dense reference, sparse vs dense paths, theory functions."""

import math

import numpy as np
import pytest
import scipy.linalg as la

from rowstoch_fast import MixingMatrix, _reference, metrics, topology
from conftest import random_primitive


@pytest.mark.parametrize("seed", range(5))
def test_dense_metrics_match_reference(seed):
    rng = np.random.default_rng(seed)
    A = random_primitive(int(rng.integers(2, 30)), 0.2, rng, self_loops=bool(seed % 2))
    m = A.metrics()
    ref_pi = _reference.perron(A.toarray())
    np.testing.assert_allclose(m.pi, ref_pi, rtol=1e-10)
    assert abs(m.pi.sum() - 1) < 1e-12
    np.testing.assert_allclose(m.pi @ A.toarray(), m.pi, atol=1e-12)
    assert m.beta == pytest.approx(_reference.beta(A.toarray(), ref_pi), rel=1e-9)
    assert m.kappa == pytest.approx(_reference.kappa(ref_pi), rel=1e-9)
    assert m.spectral_gap == pytest.approx(1 - m.beta)
    assert m.self_loops == bool(seed % 2)


@pytest.mark.parametrize("build", [lambda: topology.geometric(300, 0.15, seed=4), lambda: topology.erdos_renyi(300, 0.02, seed=5)])
def test_sparse_path_matches_dense(monkeypatch, build):
    A = build()
    dense = A.metrics()
    B = type(A)(A)
    monkeypatch.setattr(metrics, "DENSE_MAX_N", 10)
    sparse = B.metrics()
    assert sparse.method == "sparse" and dense.method == "dense"
    np.testing.assert_allclose(sparse.pi, dense.pi, rtol=1e-10)
    assert sparse.beta == pytest.approx(dense.beta, rel=1e-8)


def test_theta_matches_reference_diagonals():
    A = topology.paper_graphs()["grid"]
    ref = _reference.diag_powers(A.toarray(), 40)
    assert A.metrics().theta(40) == pytest.approx(1.0 / ref[1:].min(), rel=1e-12)


def test_theta_infinite_without_self_loops():
    from rowstoch_fast import MixingMatrix

    A = MixingMatrix.from_edges(3, [(0, 1), (1, 0), (1, 2), (2, 0)], self_loops=False)
    assert math.isinf(A.metrics().theta(5))


def test_rounds_and_thresholds_follow_the_formulas():
    A = topology.paper_graphs()["nearest_neighbor"]
    m = A.metrics()
    assert m.recommended_rounds() == math.ceil(3 * (1 + math.log(m.kappa) + math.log(16)) / (1 - m.beta))
    assert m.lemma5_threshold == pytest.approx((2 * math.log(m.kappa) + 2 * math.log(16)) / (1 - m.beta))
    # Lemma 7: beyond the threshold, 1/[A^k]_ii <= 2 n kappa
    k0 = math.ceil(m.lemma5_threshold)
    diags = _reference.diag_powers(A.toarray(), k0 + 20)
    assert (1.0 / diags[k0:]).max() <= 2 * 16 * m.kappa


def test_bounds():
    m = topology.exponential(16).metrics()
    lb = m.lower_bound(L=2.0, Delta=3.0, sigma=0.5, K=100)
    assert lb == pytest.approx(0.5 * math.sqrt(6) / math.sqrt(1600) + 6 / (0.4 * 100))
    ub3 = m.mg_pull_diag_gt_bound(L=2.0, Delta=3.0, sigma=0.5, K=100)
    assert ub3 == pytest.approx(0.5 * math.sqrt(6) / 40 + (1 + math.log(16)) * 6 / (0.4 * 100))
    assert m.pull_diag_gt_bound(2.0, 3.0, 0.5, 100, C_A=4.0) == pytest.approx(0.5 * math.sqrt(6) / 40 + 6 * 5 / 100)
    with pytest.raises(ValueError, match="L must be finite and > 0"):
        m.lower_bound(L=-1.0, Delta=1.0, sigma=0.0, K=10)
    with pytest.raises(ValueError, match="K must be >= 1"):
        m.lower_bound(L=1.0, Delta=1.0, sigma=0.0, K=0)


def test_as_dict_and_frozen():
    m = topology.ring(5).metrics()
    d = m.as_dict()
    assert d["n"] == 5 and d["recommended_rounds"] == m.recommended_rounds()
    with pytest.raises(Exception):
        m.beta = 0.1
    with pytest.raises(ValueError):
        m.pi[0] = 1.0


def test_large_sparse_metrics():
    m = topology.exponential(20000).metrics()
    assert m.method == "sparse"
    assert m.kappa == pytest.approx(1.0, abs=1e-9)
    assert 0 < m.beta < 1


# ---------------------------------------------------------------------- pi on its own (issue 13)
def _skewed(n, seed):
    """A random strongly connected graph with self loops and a skewed Perron vector."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, 3 * n)
    dst = rng.integers(0, n, 3 * n)
    ring = np.arange(n)
    edges = np.stack([np.concatenate([src, ring]), np.concatenate([dst, (ring + 1) % n])], axis=1)
    return MixingMatrix.from_edges(n, edges, rng.uniform(0.1, 5.0, len(edges)))


@pytest.mark.parametrize("n", [50, 2500])  # the dense and the sparse path
def test_pi_alone_equals_the_metrics_pi_and_a_dense_solver(n):
    A = _skewed(n, seed=n)
    pi = A.pi
    assert A._metrics is None  # pi did not compute beta
    assert not pi.flags.writeable and abs(pi.sum() - 1) < 1e-12
    if n <= 200:  # an eigensolver
        w, V = la.eig(A.toarray().T)
        ref = np.abs(V[:, np.argmax(w.real)].real)
    else:  # the balance equations pi^T A = pi^T, sum(pi) = 1, by a dense LU (eig at n = 2500: 17 s, this 0.5 s)
        M = A.toarray().T - np.eye(n)
        M[-1] = 1.0
        ref = la.solve(M, np.eye(n)[-1])
    ref /= ref.sum()
    # the dense path solves exactly (1e-12 against eig); the sparse one stops at a residual of rounding level,
    # and on this skewed matrix (1 / (1 - beta) large) even the exact LU and eig differ by 2.6e-11 in places
    np.testing.assert_allclose(pi, ref, rtol=1e-12 if n <= metrics.DENSE_MAX_N else 1e-10, atol=1e-15)
    assert A.kappa > 1.5
    m = A.metrics()
    assert np.array_equal(m.pi, pi) and m.kappa == A.kappa  # the same numbers, bit for bit


def test_perron_tracker_needs_no_metrics():
    from rowstoch_fast import PullDiagGT

    A = topology.exponential(4096)
    opt = PullDiagGT(A, np.zeros(2), lr=1e-3, tracker="perron")
    opt.step(lambda X: X - 1.0)
    assert A._metrics is None
    np.testing.assert_array_equal(opt.tracker.scale(1), 1.0 / A.pi)


def test_doubly_stochastic_pi_is_uniform_to_rounding():
    A = topology.exponential(4096)  # sparse path; 1^T A = 1^T
    pi = A.pi
    np.testing.assert_allclose(pi * A.n, 1.0, rtol=0, atol=1e-15)
    assert np.abs(A.csr.T @ pi - pi).sum() <= 1e-14
    G = topology.grid(50, 50)  # not doubly stochastic (degrees differ): the general path, checked by its residual
    assert np.abs(G.csr.T @ G.pi - G.pi).sum() <= 1e-13 and G.kappa > 1


def test_perron_vector_of_a_large_skewed_network_by_power_steps():
    """n above the dense limit, not doubly stochastic: the compiled power steps reach the stated residual and
    agree with ARPACK's eigenvector."""
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    from rowstoch_fast import metrics

    A = topology.erdos_renyi(100000, 2 * np.log(100000) / 100000, seed=3)
    pi = A.pi
    assert A.kappa > 1.5
    assert np.abs(A.csr.T @ pi - pi).sum() <= 10 * metrics.PERRON_TOL and abs(pi.sum() - 1) < 1e-14
    _, vec = spla.eigs(sp.csr_array(A.csr.T), k=1, which="LM", tol=1e-14)
    ref = np.abs(vec[:, 0].real) / np.abs(vec[:, 0].real).sum()
    assert np.abs(pi - ref).max() / ref.max() < 1e-10


def test_the_perron_vector_of_a_large_grid_is_its_rows_entries_and_arpack_is_bounded(monkeypatch):
    """Helper 231: ``A.pi`` of a grid of 10^6 nodes (in-degree weights: a random walk on an undirected graph with
    self loops) ran power steps and ARPACK's 5,000 restarts past 590 s. Its pi is in proportion to the rows'
    entries, which one product confirms; ARPACK's restarts are bounded by ``PERRON_MAX_WORK``."""
    import scipy.sparse.linalg as spla

    from rowstoch_fast import metrics

    monkeypatch.setattr(metrics, "_power", lambda *a, **k: pytest.fail("power steps where one product confirms pi"))
    G = topology.grid(60, 60)
    counts = np.diff(G.csr.indptr).astype(float)
    np.testing.assert_allclose(metrics._perron_sparse(G.csr), counts / counts.sum(), rtol=1e-15)
    monkeypatch.undo()
    asked = []
    real = spla.eigs
    monkeypatch.setattr(spla, "eigs", lambda *a, **k: asked.append(k["maxiter"]) or real(*a, **k))
    monkeypatch.setattr(metrics, "PERRON_POWER_STEPS", 5)
    monkeypatch.setattr(metrics, "PERRON_MAX_WORK", 4e7)
    A = topology.erdos_renyi(3000, 4 * np.log(3000) / 3000, seed=3)
    pi = metrics._perron_sparse(A.csr)
    assert asked == [int(np.clip(4e7 / (20 * A.nnz), 10, 5000))] and np.abs(A.csr.T @ pi - pi).sum() <= 1e-12


def test_perron_vector_that_does_not_converge_raises(monkeypatch):
    """A periodic matrix (built without validation) has no attracting Perron vector: a clear error, not a
    silently wrong pi."""
    import scipy.sparse as sp

    from rowstoch_fast import MixingMatrix, metrics

    n = metrics.DENSE_MAX_N + 2  # the sparse path
    rng = np.random.default_rng(0)
    even, odd = np.arange(0, n, 2), np.arange(1, n, 2)
    rows = np.concatenate([even, even, odd, odd])  # bipartite: period 2, rows stochastic, columns not
    cols = np.concatenate([np.roll(odd, 1), odd, even, np.roll(even, 3)])
    W = sp.csr_array((rng.uniform(0.1, 1.0, rows.size), (rows, cols)), shape=(n, n))
    A = MixingMatrix(W, normalize=True, validate=False)
    monkeypatch.setattr(metrics, "PERRON_POWER_STEPS", 50)
    with pytest.raises(ValueError, match="Perron vector of A did not converge.*periodic or reducible"):
        A.pi


def test_beta_of_a_tiny_gap_gives_up_after_a_bounded_work_and_the_table_says_why(monkeypatch):
    """A new user's `rowstoch metrics --topology ring --n 20000` ran past two minutes printing nothing: the gap of
    a ring of n nodes is about pi^2 / n^2 and the sparse method's Krylov steps crawl. Beta now gives up after
    BETA_MAX_WORK / n steps (a count: the same on every machine and MPI rank) with an error that says why and what
    needs beta; the failure is kept (a second reader does not run it again); the table shows the row's other
    columns, '?' for beta and the reason below; a small gap prints as a number, not 0.0000."""
    monkeypatch.setattr(metrics, "DENSE_MAX_N", 10)
    monkeypatch.setattr(metrics, "BETA_MAX_WORK", 400 * 50)
    calls = []
    real = metrics._beta_sparse
    monkeypatch.setattr(metrics, "_beta_sparse", lambda *a: calls.append(1) or real(*a))
    m = topology.ring(400).metrics()
    for _ in range(2):
        with pytest.raises(metrics.BetaNotConverged, match=r"beta of this network \(n = 400\) did not converge in 50 "
                                                           r"Krylov steps .* --mg-rounds, rounds=R\), .*--tracker perron"):
            m.beta
    assert calls == [1]
    table = metrics.metrics_table([("ring", topology.ring(400))])
    row = table.splitlines()[2].split()
    assert row[:6] == ["ring", "400", "?", "?", "1.0000", "?"] and table.splitlines()[-1].startswith("?: beta of")
    monkeypatch.setattr(metrics, "BETA_MAX_WORK", 5e8)
    row = metrics.metrics_table([("ring", topology.ring(400))]).splitlines()[2].split()
    assert float(row[3]) == pytest.approx(1 - math.cos(math.pi / 400), rel=5e-3) and "e-05" in row[3]
    W = np.zeros((4, 4))  # (cycles of 3 and 4, no self loops: primitive, beta = 1)
    W[0, 1] = W[1, 2] = W[3, 0] = 1.0
    W[2, 3] = W[2, 0] = 0.5
    no_loops = MixingMatrix(W)
    row = metrics.metrics_table([("cycle", no_loops)]).splitlines()[2].split()
    assert row[3] == "0" and row[5] == "n/a"


def test_the_perron_vector_of_a_large_star_stops_at_its_rounding_floor():
    """A star's centre is heard by every leaf: entry 0 of ``A^T pi`` sums n - 1 weights, and at n = 100,000 the
    residual stops at 1.8e-12, above ``PERRON_ACCEPT`` (1e-12): `rowstoch metrics --topology star --n 100000` ended
    in a traceback ("did not converge") after 6,000 power steps and ARPACK. The accepted residual is now the longer
    of 1e-12 and the rounding floor of the longest column. (In-degree weights on an undirected graph: pi is
    proportional to the degree with the self loop, n for the centre and 2 for a leaf.)"""
    for n in (50, 100_000):  # (dense, then the power steps)
        pi = topology.star(n).pi
        assert pi[0] == pytest.approx(n / (3 * n - 2), rel=1e-10) and pi.sum() == pytest.approx(1.0, rel=1e-12)
        assert np.allclose(pi[1:], 2 / (3 * n - 2), rtol=1e-10, atol=0)


def test_the_metrics_table_keeps_its_columns_apart():
    """kappa = 50,000 (a star of 100,000 nodes) ran into the 1-beta column: '0.500050000.0000'. Each column is now
    as wide as its widest cell, two spaces apart."""
    table = metrics.metrics_table([("star", topology.star(100_000)), ("a-rather-long-graph-name.csv", topology.ring(8))])
    rows = [line.split() for line in table.splitlines()[2:4]]
    assert rows[0] == ["star", "100000", "0.5000", "0.5000", "50000.0000", rows[0][5], "yes"]
    assert rows[1][0] == "a-rather-long-graph-name.csv" and len(rows[1]) == 7


def test_beta_of_a_star_survives_arpacks_breakdown(monkeypatch):
    """A star of 3,000 nodes has few distinct singular values: ARPACK (SciPy 1.17 here) stopped with "no shifts could
    be applied" (a raw scipy error out of `rowstoch metrics --topology star --n 3000`, and out of every run that read
    beta there). Beta then comes from the power method, on what is left of the one budget; the dense value of the
    same graph is 0.5. The breakdown is forced below (another SciPy's ARPACK may converge instead)."""
    import scipy.sparse.linalg as spla

    monkeypatch.setattr(metrics, "DENSE_MAX_N", 10)
    small = topology.star(40)
    assert metrics._beta_dense(small.csr.toarray(), small.pi) == pytest.approx(0.5, rel=1e-12)
    assert topology.star(3000).metrics().beta == pytest.approx(0.5, rel=1e-9)  # (whichever path converged)

    def breaks_down(op, *args, **kwargs):  # (ARPACK's breakdown after 100 products, as SciPy 1.17's on this star)
        v = np.ones(op.shape[1])
        for _ in range(100):
            v = op.rmatvec(op.matvec(v))
            v /= np.linalg.norm(v)
        raise spla.ArpackError(3)

    calls = []
    power = metrics._top_singular_value
    monkeypatch.setattr(spla, "svds", breaks_down)
    monkeypatch.setattr(metrics, "_top_singular_value", lambda *a: calls.append(1) or power(*a))
    assert topology.star(3000).metrics().beta == pytest.approx(0.5, rel=1e-9) and calls == [1]
    monkeypatch.setattr(metrics, "BETA_MAX_WORK", 3000 * 300)  # (one budget: 200 products left to the power method)
    with pytest.raises(metrics.BetaNotConverged, match=r"n = 3000\) did not converge in 300 Krylov and power-method "
                                                       r"steps"):
        topology.star(3000).metrics().beta
    assert calls == [1, 1]


def test_metrics_compute_beta_only_when_read():
    A = topology.erdos_renyi(40, 0.2, seed=1)
    m = A.metrics()
    assert m._beta == [] and m.kappa == A.kappa and m.pi is A.pi  # pi, kappa, loops: no singular values yet
    assert abs(m.beta - _reference.beta(A.toarray())) < 1e-10 and m._beta == [m.beta]
    assert m.spectral_gap == 1 - m.beta and "beta=" in repr(m)


@pytest.mark.parametrize("call, error, fragment", [
    (lambda: metrics.lower_bound(1, 1, 1, 10, n=8, beta=0.5, kappa=0.5), ValueError, "kappa = max.* at least 1"),
    (lambda: metrics.recommended_rounds(0, 0.5, 1.0), ValueError, "n must be >= 1, got 0"),  # was math domain error
    (lambda: metrics.recommended_rounds(8, -0.1, 1.0), ValueError, "beta must be finite and >= 0"),
    (lambda: metrics.lemma5_threshold(8, float("nan"), 1.0), ValueError, "beta must be finite"),
    (lambda: metrics.mg_pull_diag_gt_bound(1, 1, 0, 10, n=2.5, beta=0.5, kappa=1), TypeError, "n must be an integer"),
    (lambda: metrics.pull_diag_gt_bound(1, 1, 0, 10, n=0, C_A=1), ValueError, "n must be >= 1"),
    (lambda: metrics.perron_vector(np.eye(2)), TypeError, "A must be a MixingMatrix .* got ndarray"),
    (lambda: metrics.compute_metrics(np.full((2, 2), 0.5)), TypeError, "A must be a MixingMatrix"),
])
def test_rate_and_metric_arguments_are_named(call, error, fragment):
    with pytest.raises(error, match=fragment):
        call()
