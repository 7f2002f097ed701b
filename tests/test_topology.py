"""Topology builders: structure, Assumption 1, and the paper's published metrics."""

import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast import MixingMatrix, _reference, topology
from rowstoch_fast.mixing import out_degree_weights

BUILDERS = {
    "exponential": lambda: topology.exponential(13),
    "ring": lambda: topology.ring(7),
    "grid": lambda: topology.grid(3, 4),
    "geometric": lambda: topology.geometric(40, 0.3, seed=1),
    "nearest_neighbor": lambda: topology.nearest_neighbor(30, 3, seed=2),
    "erdos_renyi": lambda: topology.erdos_renyi(30, 0.02, seed=3),
    "complete": lambda: topology.complete(6),
    "star": lambda: topology.star(5),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builders_are_row_stochastic_with_self_loops(name):
    A = BUILDERS[name]()
    dense = A.toarray()
    np.testing.assert_allclose(dense.sum(axis=1), 1.0, rtol=1e-14)
    assert (np.diag(dense) > 0).all()
    # in-degree rule: each row is uniform over its support
    for row in dense:
        nz = row[row > 0]
        np.testing.assert_allclose(nz, 1.0 / nz.size)


def test_exponential_structure():
    A = topology.exponential(16).toarray()
    # node 0 sends to 1, 2, 4, 8, so row i receives from i-1, i-2, i-4, i-8
    assert set(np.flatnonzero(A[:, 0])) == {0, 1, 2, 4, 8}
    assert set(np.flatnonzero(A[8])) == {8, 7, 6, 4, 0}


@pytest.mark.parametrize("n, beta", [(8, 0.5), (16, 0.6)])
def test_exponential_published_metrics(n, beta):
    m = topology.exponential(n).metrics()
    assert m.beta == pytest.approx(beta, abs=1e-12)
    assert m.kappa == pytest.approx(1.0, abs=1e-12)
    assert m.beta == pytest.approx(_reference.beta(topology.exponential(n).toarray()), abs=1e-12)


# Values from shared/paper_graphs.md (rebuilt from the authors' code).
PAPER = {"ring": (2.0, 0.981), "grid": (6.2493, 0.8879), "geometric": (3.0, 0.9156), "nearest_neighbor": (1.7396, 0.9065)}


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_graphs_reproduce_published_values(name):
    A = topology.paper_graphs()[name]
    assert A.n == 16
    m = A.metrics()
    kappa, beta = PAPER[name]
    assert round(m.kappa, 4) == pytest.approx(kappa)
    assert round(m.beta, 3 if name == "ring" else 4) == pytest.approx(beta)


def test_paper_ring_of_any_size():
    """Figure 2's rings: the paper's 16-node ring on every size (kappa 2), built sparse; 2 and 3 nodes refused."""
    for n in (4, 5, 10, 16, 33):
        A = topology.paper_ring(n)
        np.testing.assert_array_equal(A.toarray(), topology._paper_ring(n))
        assert A.metrics().kappa == pytest.approx(2.0)
    np.testing.assert_array_equal(topology.paper_ring(1).toarray(), [[1.0]])
    np.testing.assert_array_equal(topology.paper_ring(16).toarray(), topology.paper_graphs()["ring"].toarray())
    for n in (2, 3):
        with pytest.raises(ValueError, match=f"paper_ring: n must be 1 or at least 4 .*got {n}"):
            topology.paper_ring(n)
    assert topology.paper_ring(10**6).nnz == 2 * 10**6 + 1  # sparse: no dense n x n


def test_paper_ring_diagonal_instability():
    # [A^k]_ii dips to ~2.5e-5 near k = 16: theta ~ 39,000 while 1/min(pi) ~ 24.5
    m = topology.paper_graphs()["ring"].metrics()
    assert 3.5e4 < m.theta(64) < 4.5e4
    assert 1.0 / m.pi.min() == pytest.approx(24.5, abs=0.5)


def test_large_erdos_renyi_checks_components_on_its_own_matrix():
    """n > 4096: the matrix is built once and its CSR gives the strongly connected components (no COO graph);
    a connected draw equals the validated in-degree matrix of the same edges, a disconnected one is repaired."""
    from scipy.sparse import csgraph

    n = 5000
    A = topology.erdos_renyi(n, 0.003, seed=1)
    rng = np.random.default_rng(1)  # the builder's draws, repeated
    m = rng.binomial(n * (n - 1), 0.003)
    src = rng.integers(0, n, m)
    dst = (src + rng.integers(1, n, m)) % n
    B = MixingMatrix.from_edges(n, np.stack([src, dst], axis=1), "in-degree")
    assert (A.csr != B.csr).nnz == 0 and np.array_equal(A.csr.data, B.csr.data)
    sparse = topology.erdos_renyi(n, 0.0004, seed=0)  # ~2 in-neighbours: many components before the repair
    assert csgraph.connected_components(sparse.csr, directed=True, connection="strong")[0] == 1
    MixingMatrix(sparse.csr)  # and it passes the full validation


def test_erdos_renyi_repairs_disconnected_draws():
    A = topology.erdos_renyi(50, 0.001, seed=0)  # almost no edges: repaired into a cycle of components
    assert A.n == 50
    A.metrics()  # primitive, so metrics exist


def test_erdos_renyi_default_p_is_the_command_lines():
    """``erdos_renyi(n, seed=...)`` draws with ``--topology erdos_renyi``'s edge probability (a new user had met
    "missing 1 required positional argument: 'p'"): the same matrix as by_name's."""
    A, B = topology.erdos_renyi(40, seed=3), topology.by_name("erdos_renyi", 40, seed=3)
    assert np.array_equal(A.toarray(), B.toarray())
    assert np.array_equal(A.toarray(), topology.erdos_renyi(40, 2 * np.log(40) / 40, seed=3).toarray())


@pytest.mark.parametrize("name", ["grid", "torus"])
def test_grid_with_one_side_says_both_and_where_n_is_built(name):
    """``grid(10)``, as ``--topology grid --n 10`` reads, names both sides and by_name (Python's own words had
    named only a missing 'cols')."""
    with pytest.raises(TypeError, match=rf"{name}\(rows, cols\) takes both sides.*by_name\('{name}', n\)"):
        getattr(topology, name)(10)
    assert getattr(topology, name)(3, 3).n == 9


def test_builder_argument_errors():
    with pytest.raises(ValueError, match="n must be >= 1"):
        topology.exponential(0)
    with pytest.raises(TypeError, match="n must be an integer"):
        topology.ring(2.5)
    with pytest.raises(ValueError, match="radius must be finite and > 0"):
        topology.geometric(10, -1.0)
    with pytest.raises(ValueError, match="stayed disconnected"):
        topology.geometric(50, 1e-6, seed=0)
    with pytest.raises(ValueError, match="k must be < n"):
        topology.nearest_neighbor(4, 4)
    with pytest.raises(ValueError, match="p must be in"):
        topology.erdos_renyi(4, 1.5)


def test_large_exponential_builds_in_seconds():
    t = time.perf_counter()
    A = topology.exponential(2**18)
    elapsed = time.perf_counter() - t
    assert A.nnz == 2**18 * 19
    assert elapsed < 60  # generous: guards against an accidental O(n^2) builder, not a speed claim


def _via_edges(n, hops):
    """The validated path the direct builders replaced: an edge list through MixingMatrix.from_edges."""
    src = np.repeat(np.arange(n, dtype=np.int64), len(hops))
    dst = (src + np.tile(np.asarray(hops, dtype=np.int64), n)) % n
    return MixingMatrix.from_edges(n, np.stack([src, dst], axis=1), "in-degree")


@pytest.mark.parametrize("n", list(range(1, 70)) + [127, 128, 129, 1000, 4097])
def test_direct_builders_equal_the_edge_list_path_bit_for_bit(n):
    hops = [h for h in (1 << np.arange(max(n - 1, 1).bit_length())) if h < n]
    for built, ref in ((topology.exponential(n), _via_edges(n, hops)), (topology.ring(n), _via_edges(n, [1] if n > 1 else []))):
        for name in ("indptr", "indices", "data"):
            got, want = getattr(built.csr, name), getattr(ref.csr, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), (n, name)
        assert not built.csr.indices.flags.writeable


@given(st.integers(2, 60), st.integers(0, 2**31), st.booleans(), st.sampled_from(["row", "column"]),
       st.sampled_from([np.float64, np.float32]), st.sampled_from([np.int64, np.int32]))
@settings(max_examples=40, deadline=None)
def test_degree_rule_fast_path_equals_the_general_path(n, seed, self_loops, stochastic, dtype, itype):
    """from_edges's O(m log m) key-sort path for the degree rule gives the CSR (structure, index and value types,
    bits) that normalising explicit unit weights gives."""
    rng = np.random.default_rng(seed)
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n], 1)
    extra = rng.integers(0, n, (int(rng.integers(0, 4 * n)), 2))
    E = np.unique(np.concatenate([ring, extra]), axis=0)
    E = E[rng.permutation(len(E))].astype(itype)  # unique edges (weights of duplicates would add up), shuffled
    try:
        fast = MixingMatrix.from_edges(n, E, self_loops=self_loops, stochastic=stochastic, dtype=dtype)
    except ValueError as exc:  # e.g. periodic without self loops: the general path must refuse it too
        with pytest.raises(ValueError, match=re.escape(str(exc).split(":")[0])):
            MixingMatrix.from_edges(n, E, np.ones(len(E)), self_loops=self_loops, stochastic=stochastic, dtype=dtype)
        return
    slow = MixingMatrix.from_edges(n, E, np.ones(len(E)), self_loops=self_loops, stochastic=stochastic, dtype=dtype)
    for a, b in zip((fast.csr.indptr, fast.csr.indices, fast.csr.data), (slow.csr.indptr, slow.csr.indices, slow.csr.data)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert fast.stochastic == stochastic


# ---------------------------------------------------------------- undirected networks, Metropolis weights
def _metropolis_dense(A):
    """w_ij = 1 / (1 + max(d_i, d_j)) on the edges, w_ii = 1 - sum: the definition, dense."""
    P = (A.toarray() > 0) & ~np.eye(A.n, dtype=bool)
    deg = P.sum(1)
    W = np.where(P, 1.0 / (1.0 + np.maximum.outer(deg, deg)), 0.0)
    return W + np.diag(1.0 - W.sum(1))


@pytest.mark.parametrize("build", [
    lambda **kw: topology.ring(9, directed=False, **kw),
    lambda **kw: topology.exponential(12, directed=False, **kw),
    lambda **kw: topology.erdos_renyi(25, 0.2, seed=3, directed=False, **kw),
    lambda **kw: topology.torus(3, 4, **kw),
    lambda **kw: topology.grid(3, 3, **kw),
    lambda **kw: topology.geometric(20, 0.45, seed=1, **kw),
    lambda **kw: topology.complete(5, **kw),
    lambda **kw: topology.star(6, **kw),
], ids=["ring", "exponential", "erdos_renyi", "torus", "grid", "geometric", "complete", "star"])
def test_undirected_forms_and_their_metropolis_matrices(build):
    A = build()
    P = A.toarray() > 0
    np.testing.assert_array_equal(P, P.T)  # every edge both ways
    W = build(weights="metropolis")
    assert W.doubly and W.stochastic == "row" and "doubly" in repr(W)
    np.testing.assert_allclose(W.toarray(), _metropolis_dense(A), atol=1e-15)
    np.testing.assert_allclose(W.toarray(), W.toarray().T, atol=1e-15)
    np.testing.assert_allclose(W.toarray().sum(0), 1, atol=1e-14)
    C = out_degree_weights(W)  # push-based methods of an undirected baseline run on W itself
    assert C.stochastic == "column" and np.array_equal(C.toarray(), W.toarray())


def test_undirected_ring_and_torus_have_the_textbook_weights():
    np.testing.assert_allclose(topology.ring(5, directed=False).toarray()[0], [1 / 3, 1 / 3, 0, 0, 1 / 3])
    assert (np.count_nonzero(topology.torus(4, 4).toarray(), axis=1) == 5).all()
    assert topology.ring(2, directed=False).nnz == 4 and topology.torus(1, 3).n == 3


def test_a_doubly_stochastic_matrix_is_checked_on_both_sums():
    W = MixingMatrix(np.array([[0.5, 0.5, 0], [0.25, 0.5, 0.25], [0, 0.5, 0.5]]), stochastic="row")
    assert not W.doubly
    with pytest.raises(ValueError, match="W must be doubly stochastic: column 0 sums to 0.75, not 1 \\(3 such columns\\)"):
        MixingMatrix(W.toarray(), stochastic="doubly")
    with pytest.raises(ValueError, match="W must be doubly stochastic: row 0 sums to"):
        MixingMatrix(W.toarray().T, stochastic="doubly")
    with pytest.raises(ValueError, match="normalize=True rescales rows or columns, not both"):
        MixingMatrix(W.toarray(), stochastic="doubly", normalize=True)
    with pytest.raises(ValueError, match="stochastic must be 'row', 'column' or 'doubly'"):
        MixingMatrix(W.toarray(), stochastic="both")
    D = MixingMatrix(np.full((3, 3), 1 / 3), stochastic="doubly")
    assert D.doubly and D.astype(np.float32).doubly
    import pickle

    assert pickle.loads(pickle.dumps(D)).doubly


def test_metropolis_and_directed_arguments_are_checked():
    with pytest.raises(ValueError, match="ring: weights='metropolis' needs an undirected graph: .* sends to .* but"):
        topology.ring(5, weights="metropolis")
    with pytest.raises(ValueError, match="weights must be one of 'in-degree', 'metropolis', got 'max-degree'"):
        topology.ring(5, weights="max-degree")
    with pytest.raises(ValueError, match="drop stochastic='column'"):
        topology.grid(2, 2, weights="metropolis", stochastic="column")
    with pytest.raises(TypeError, match="ring: directed must be True or False, got 'no'"):
        topology.ring(5, directed="no")


@pytest.mark.parametrize("name, n, fragment", [
    ("paper-ring", 5, "the paper's 16-node graph; it takes no other --n (got 5)"),
    ("grid", 16.0, "--n must be an integer, got float 16.0"),
    ("grid", True, "--n must be an integer, got bool True"),
    ("grid", -4, "--n must be >= 1, got -4"),
    ("torus", "16", "--n must be an integer, got str '16'"),
    ("nearest_neighbor", 1, "needs --n 2 or more"),
])
def test_by_name_checks_its_n(name, n, fragment):
    """Helper 199: ``by_name("paper-ring", 5)`` returned the paper's 16 nodes, n ignored; a grid's n = 16.0 and True
    built a 4 x 4 grid and one node; -4 failed in a square root; nearest_neighbor's n = 1 blamed a k not given."""
    from rowstoch_fast.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(fragment)):
        topology.by_name(name, n)
    assert topology.by_name("paper-ring", 16).n == 16 and topology.by_name("grid", np.int64(16)).n == 16
    assert "memory" in str(pytest.raises(MemoryError, topology.by_name, "grid", 10**40).value)


@pytest.mark.parametrize("make", [topology.ring, topology.exponential])
def test_a_network_past_int64_s_indices_is_refused_naming_n(make):
    """Helper 218: ``ring(2**63, directed=False)`` raised "Python int too large to convert to C long" (the nodes'
    indices overflowed before the memory check), where ``directed=True`` gave the memory refusal."""
    with pytest.raises(ValueError, match=r"n must be <= 2\^62, got 9223372036854775808"):
        make(2**63, directed=False)
    with pytest.raises(MemoryError, match="needs about"):
        make(2**40, directed=False)


@pytest.mark.parametrize("n", [1, 2, 5, 300])
def test_the_complete_graph_is_the_circulant_of_every_hop_in_its_memory(n):
    """Helper 231: ``complete(n)`` through an edge list peaked at about 82 bytes a weight where 48 were checked, and
    a second check counted the edges twice (complete(8000), which fits, refused); written as the circulant of every
    hop it is the same matrix, bit for bit, at the 24 bytes a weight it checks."""
    import tracemalloc

    from rowstoch_fast import MixingMatrix

    u, v = np.nonzero(~np.eye(n, dtype=bool))
    ref = MixingMatrix.from_edges(n, np.stack([u, v], axis=1).astype(np.int64), "in-degree")
    tracemalloc.start()
    try:
        A = topology.complete(n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    for name in ("indptr", "indices", "data"):
        got, want = getattr(A.csr, name), getattr(ref.csr, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert n < 300 or peak <= 32 * A.nnz, peak / A.nnz
