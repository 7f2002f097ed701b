"""MixingMatrix: construction, validation errors, mixing."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from rowstoch_fast import MixingMatrix, _reference, topology
from conftest import random_primitive


def test_from_dense_sparse_and_copy_agree(rng):
    A = random_primitive(9, 0.3, rng)
    dense = A.toarray()
    for src in (dense, sp.csr_matrix(dense), sp.coo_array(dense), A, dense.tolist()):
        B = MixingMatrix(src)
        np.testing.assert_array_equal(B.toarray(), dense)
    assert A.n == 9 and A.nnz == np.count_nonzero(dense)


def test_csr_is_read_only(rng):
    A = random_primitive(5, 0.5, rng)
    with pytest.raises(ValueError):
        A.csr.data[0] = 2.0


def test_normalize_turns_weights_row_stochastic():
    A = MixingMatrix([[2.0, 2.0], [1.0, 3.0]], normalize=True)
    np.testing.assert_allclose(A.toarray(), [[0.5, 0.5], [0.25, 0.75]])


@pytest.mark.parametrize(
    "W, match",
    [
        ([[0.5, 0.5]], "square"),
        (np.ones((2, 2, 2)), "2-D"),
        ([[1.0, np.nan], [0.5, 0.5]], r"finite; W\[0, 1\]"),
        ([[1.5, -0.5], [0.5, 0.5]], r"non-negative; W\[0, 1\] = -0.5"),
        ([[0.5, 0.5], [0.5, 0.6]], "row 1 sums to"),
        ([[1.0, 0.0], [0.5, 0.5]], "strongly connected: node 1 cannot send"),
        ([[0.5, 0.5], [0.0, 1.0]], "strongly connected: node 1 never receives information from node 0"),
        ([[0.0, 1.0], [1.0, 0.0]], "period 2"),
        (np.zeros((0, 0)), "at least one node"),
    ],
)
def test_invalid_matrices_name_the_problem(W, match):
    with pytest.raises(ValueError, match=match):
        MixingMatrix(W)


@pytest.mark.parametrize("n, edges, node, word", [
    (6, [(0, 1), (1, 0), (1, 2), (2, 1), (4, 5), (5, 4)], 3, "never receives information"),
    (5, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 3)], 3, "cannot send information"),
    (4, [(0, 3), (3, 0), (1, 2), (2, 1)], 1, "never receives information"),
])
def test_the_first_node_cut_off_is_named(n, edges, node, word):
    """The node named is the smallest one cut off (found by a mask since ``np.setdiff1d`` took 179 s of a refusal of
    ``from_edges(10**8, [(0, 1), (1, 0)])``): the same node as before, in either direction."""
    with pytest.raises(ValueError, match=f"node {node} {word}"):
        MixingMatrix.from_edges(n, edges)


@pytest.mark.parametrize("dtype", [np.uint64, np.uint32, np.uint8, np.int16])
@pytest.mark.parametrize("weights, stochastic, self_loops", [("in-degree", "row", True), ("uniform", "column", True),
                                                            ("in-degree", "row", False), ([1.0, 2, 3, 4], "row", True)])
def test_edges_of_any_integer_type_build_the_same_matrix(dtype, weights, stochastic, self_loops):
    """Helper 199: uint64 node ids, valid, failed in the degree rule's int64 keys ("Cannot cast ufunc 'add' output
    from float64 to int64")."""
    edges = [(0, 1), (1, 2), (2, 0), (1, 0)]
    want = MixingMatrix.from_edges(3, np.array(edges, dtype=np.int64), weights, stochastic=stochastic,
                                   self_loops=self_loops).toarray()
    got = MixingMatrix.from_edges(3, np.array(edges, dtype=dtype), weights, stochastic=stochastic,
                                  self_loops=self_loops).toarray()
    np.testing.assert_array_equal(got, want)


def test_a_matrix_connected_only_through_weights_too_small_for_float64_is_warned_of():
    """Two blocks joined by weights of 2.5e-14 passed as strongly connected, and their Perron vector read kappa =
    1.0067 where it is 1 (the dense eigenvector too): float64 mixes them as a reducible matrix. A warning names
    the largest such weight; blocks joined also by a link of a usable weight, or by 1e-3, are not warned of."""
    import warnings

    def blocks(e, strong=False):
        W = np.zeros((8, 8))
        W[:4, :4] = W[4:, 4:] = 1.0
        W[0, 4] = W[4, 0] = e
        if strong:
            W[1, 5] = W[6, 2] = 0.5
        return W / W.sum(axis=1, keepdims=True)

    with pytest.warns(RuntimeWarning, match=r"strongly connected only through weights at or below 1e-12 "
                                            r"\(A\[0, 4\] = 2\.5e-14\)"):
        A = MixingMatrix(blocks(1e-13))
    assert A.csr[0, 4] == pytest.approx(2.5e-14) and A.csr[1, 0] == 0.25  # (the matrix's own arrays untouched)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MixingMatrix(blocks(1e-13, strong=True))
        MixingMatrix(blocks(1e-3))
        MixingMatrix(sp.csr_array(blocks(1e-3)))
        MixingMatrix(blocks(1e-2), dtype=np.float32)
    with pytest.warns(RuntimeWarning, match=r"at or below 0\.00054 .* float32 mixes it"):  # (float32's rounding)
        MixingMatrix(blocks(1e-9), dtype=np.float32)


def test_normalize_rejects_empty_row():
    with pytest.raises(ValueError, match="row 1 .* no positive weight"):
        MixingMatrix([[1.0, 1.0], [0.0, 0.0]], normalize=True)


def test_bad_types():
    with pytest.raises(TypeError, match="numeric"):
        MixingMatrix([["a", "b"], ["c", "d"]])
    with pytest.raises(TypeError, match="real"):
        MixingMatrix(np.eye(2, dtype=complex))
    with pytest.raises(TypeError, match="W must be real, got complex dtype complex128"):  # SciPy dropped the
        MixingMatrix(sp.csr_matrix(np.array([[0.5 + 1j, 0.5], [0.5, 0.5]])))  # imaginary parts, with a warning
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        MixingMatrix(np.eye(1), dtype=np.int32)
    with pytest.raises(ValueError, match=r"W must be a square matrix: its rows have different lengths \(\[1, 2\]\)"):
        MixingMatrix([[1.0], [0.5, 0.5]])  # (NumPy's "inhomogeneous shape" named no argument)
    with pytest.raises(ValueError, match="W must be a 2-D array of numbers: an entry of it is a sequence"):
        MixingMatrix([[1.0, 0.0], [0.5, [0.25, 0.25]]])
    with pytest.raises(ValueError, match="W must be a square matrix of numbers, its rows of equal length: "):
        MixingMatrix([[1.0, 0.0], 3])


def test_aperiodic_without_self_loops_is_accepted():
    # cycles of length 2 and 3 through node 0: gcd 1, primitive, no self loop
    A = MixingMatrix.from_edges(3, [(0, 1), (1, 0), (1, 2), (2, 0)], self_loops=False)
    m = A.metrics()
    assert not m.self_loops and m.nodes_without_self_loop == (0, 1, 2)


def test_from_edges_in_degree_rule():
    # 0 -> 1, 2 -> 1, 1 -> 0, 1 -> 2: node 1 has in-degree 2
    A = MixingMatrix.from_edges(3, [(0, 1), (2, 1), (1, 0), (1, 2), (0, 1)])
    np.testing.assert_allclose(A.toarray()[1], [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(A.toarray()[0], [1 / 2, 1 / 2, 0])


def test_from_edges_raw_weights():
    A = MixingMatrix.from_edges(2, [(0, 1), (1, 0)], weights=[3.0, 1.0])
    # row 1: self 1, from 0: 3 ; row 0: self 1, from 1: 1
    np.testing.assert_allclose(A.toarray(), [[0.5, 0.5], [0.75, 0.25]])


def test_from_edges_errors():
    with pytest.raises(ValueError, match=r"edges\[1\] = \(0, 5\)"):
        MixingMatrix.from_edges(3, [(0, 1), (0, 5)])
    with pytest.raises(ValueError, match="shape"):
        MixingMatrix.from_edges(3, [0, 1, 2])
    with pytest.raises(TypeError, match="integer"):
        MixingMatrix.from_edges(3, [(0.5, 1.0)])
    with pytest.raises(ValueError, match="weights has 1 entries"):
        MixingMatrix.from_edges(2, [(0, 1), (1, 0)], weights=[1.0])
    with pytest.raises(ValueError, match="weights must be"):
        MixingMatrix.from_edges(2, [(0, 1), (1, 0)], weights="metropolis")
    with pytest.raises(ValueError, match="n must be >= 1"):
        MixingMatrix.from_edges(0, [])


def test_from_networkx_matches_from_edges():
    G = nx.DiGraph([(0, 1), (1, 2), (2, 0), (0, 2)])
    A = MixingMatrix.from_networkx(G)
    B = MixingMatrix.from_edges(3, list(G.edges))
    np.testing.assert_array_equal(A.toarray(), B.toarray())
    H = nx.Graph()
    H.add_edge("a", "b", weight=3.0)
    H.add_edge("b", "c", weight=1.0)
    C = MixingMatrix.from_networkx(H, weights="weight")
    np.testing.assert_allclose(C.toarray()[1], [3 / 5, 1 / 5, 1 / 5])


@given(st.integers(2, 15), st.integers(1, 4), st.integers(0, 10**6))
def test_mix_and_power_match_reference(n, d, seed):
    rng = np.random.default_rng(seed)
    A = random_primitive(n, 0.3, rng)
    X = rng.standard_normal((n, d))
    np.testing.assert_allclose(A.mix(X), _reference.mix(A.toarray(), X), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(A.mix_power(X, 4), _reference.mix_power(A.toarray(), X, 4), rtol=1e-12, atol=1e-13)


def test_mix_vector_out_and_float32(rng):
    A = topology.exponential(16)
    x = rng.standard_normal(16)
    out = np.empty(16)
    res = A.mix(x, out=out)
    assert res is out
    np.testing.assert_allclose(out, A.toarray() @ x, rtol=1e-13)
    A32 = A.astype(np.float32)
    y32 = A32.mix(x)  # input converted once to the matrix dtype
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, A.toarray() @ x, rtol=1e-5, atol=1e-6)


def test_mix_errors(rng):
    A = topology.ring(4)
    with pytest.raises(ValueError, match="X has 3 rows but A has 4 nodes"):
        A.mix(np.ones(3))
    with pytest.raises(TypeError, match="out must have dtype float64"):
        A.mix(np.ones(4), out=np.empty(4, np.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        A.mix(np.ones((4, 2)), out=np.empty((4, 3)))
    with pytest.raises(ValueError, match="R must be >= 0"):
        A.mix_power(np.ones(4), -2)
    with pytest.raises(TypeError, match="R must be an integer"):
        A.mix_power(np.ones(4), 1.5)
    with pytest.raises(TypeError, match="numeric"):
        A.mix(np.array(["a"] * 4))


# ---------------------------------------------------------------------------- NumPy / SciPy / networkx habits
def test_matmul_shape_len_and_conversions_are_the_matrix(rng):
    A = random_primitive(9, 0.3, rng)
    X, v = rng.standard_normal((9, 4)), rng.standard_normal(9)
    np.testing.assert_array_equal(A @ X, A.csr @ X)
    np.testing.assert_array_equal(A @ v, A.csr @ v)
    np.testing.assert_allclose(X.T @ A, X.T @ A.toarray(), rtol=1e-14)
    np.testing.assert_allclose(v @ A, v @ A.toarray(), rtol=1e-14)
    dense = np.random.default_rng(1).random((9, 5))
    S = sp.csr_array(np.where(dense < 0.4, dense, 0.0))  # (sp.random_array: SciPy >= 1.12)
    assert sp.issparse(A @ S) and np.allclose((A @ S).toarray(), A.toarray() @ S.toarray())
    assert A.shape == (9, 9) and len(A) == 9 and A.ndim == 2 and A.nnz == A.csr.nnz
    assert A.tocsr() is A.csr
    left = S.T.tocsr() @ A  # (SciPy's product with A on the right: sparse, never A made dense)
    assert sp.issparse(left) and np.allclose(left.toarray(), S.T.toarray() @ A.toarray())
    A32 = A.astype(np.float32)
    assert (X.T @ A32).dtype == np.float64 and (A32 @ X).dtype == np.float32  # (mixing: in the matrix's dtype)
    copy = A.tocsr(copy=True)
    copy.data[0] = 7.0  # a writeable copy: A is unchanged
    assert A.csr.data[0] != 7.0
    with pytest.raises(ValueError, match="X has 4 rows but A has 9 nodes"):
        A @ np.ones((4, 2))
    with pytest.raises(ValueError, match="X has 4 columns but A has 9 nodes"):
        np.ones((2, 4)) @ A
    with pytest.raises(TypeError, match="two MixingMatrix"):
        A @ A


def test_networkx_graphs_of_four_kinds_are_accepted_directly():
    directed = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 1)])
    assert MixingMatrix(directed).toarray().tolist() == MixingMatrix.from_networkx(directed).toarray().tolist()
    undirected = nx.path_graph(4)
    np.testing.assert_array_equal(MixingMatrix(undirected).toarray(), MixingMatrix.from_networkx(undirected).toarray())
    weighted = nx.DiGraph()
    weighted.add_weighted_edges_from([(0, 0, 0.25), (1, 0, 0.75), (0, 1, 0.5), (1, 1, 0.5)])
    np.testing.assert_array_equal(MixingMatrix(weighted).toarray(), [[0.25, 0.75], [0.5, 0.5]])  # A[v, u] for u -> v
    raw = nx.Graph()
    raw.add_weighted_edges_from([(0, 0, 1.0), (0, 1, 3.0), (1, 1, 1.0), (1, 2, 1.0), (2, 2, 2.0)])
    got = MixingMatrix(raw, normalize=True).toarray()
    np.testing.assert_allclose(got, [[0.25, 0.75, 0], [0.6, 0.2, 0.2], [0, 1 / 3, 2 / 3]])
    with pytest.raises(ValueError, match="rows must sum to 1|row-stochastic"):
        MixingMatrix(raw)  # raw weights: normalize=True says to rescale them
    half = nx.DiGraph()
    half.add_edge(0, 1, weight=1.0)
    half.add_edge(1, 0)
    with pytest.raises(ValueError, match=r"edge \(1, 0\) has no 'weight' attribute"):
        MixingMatrix(half)
    labelled = nx.relabel_nodes(nx.cycle_graph(3, create_using=nx.DiGraph), {0: "a", 1: "b", 2: "c"})
    assert MixingMatrix(labelled).n == 3


@pytest.mark.parametrize("ext", ["npz", "mtx", "npy", "txt", "csv", "edges", "txt.gz", "csv.bz2", "xz"])
def test_save_matrix_and_load_matrix_round_trip_exactly(ext, tmp_path, rng):
    from rowstoch_fast import io

    path = tmp_path / f"A.{ext}"
    A = random_primitive(7, 0.4, rng)
    io.save_matrix(path, A)
    np.testing.assert_array_equal(io.load_matrix(path).toarray(), A.toarray())
    A32 = topology.erdos_renyi(10, 0.4, seed=1).astype(np.float32)  # (weights 1/3, 1/4, ...: float32's sums)
    io.save_matrix(path, A32)
    B = io.load_matrix(path, dtype=np.float32)
    assert B.dtype == np.float32
    np.testing.assert_array_equal(B.toarray(), A32.toarray())


@pytest.mark.parametrize("ext", ["npz", "txt"])
def test_a_column_stochastic_matrix_reads_back_as_one_and_is_not_normalized_into_another(ext, tmp_path):
    """Helper 185: a column-stochastic C saved by save_matrix was refused by load_matrix with "pass normalize=True",
    and normalize=True read back another matrix (0.27 off). It reads back with stochastic='column'; the refusal says
    what the file is (and a compressed name is written compressed: test above)."""
    from rowstoch_fast import io
    from rowstoch_fast.errors import UsageError

    C = topology.star(5, stochastic="column")
    path = tmp_path / f"C.{ext}"
    io.save_matrix(path, C)
    np.testing.assert_array_equal(io.load_matrix(path, stochastic="column").toarray(), C.toarray())
    with pytest.raises(UsageError, match=r"A must be row-stochastic: row 0 sums to 2\.2, not 1, but every column sums "
                                         r"to 1: it is column-stochastic \(read it as one with stochastic='column'; "
                                         r"normalize=True would rescale its rows into another matrix\)"):
        io.load_matrix(path)
    with pytest.raises(ValueError, match="stochastic must be 'row' or 'column', got 'doubly'"):
        io.load_matrix(path, stochastic="doubly")


def test_an_edge_list_with_a_byte_order_mark_or_a_gap_in_its_first_line_loses_no_edge(tmp_path):
    """A CSV edge list saved as Excel's "CSV UTF-8" (a byte-order mark first) lost its first edge, taken for a
    header, and the run went on, exit 0; so did a first line with a gap (``0,1,NA``)."""
    from rowstoch_fast import io
    from rowstoch_fast.errors import UsageError

    edges = b"0,2\n0,1\n1,2\n2,0\n"
    (tmp_path / "plain.csv").write_bytes(edges)
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + edges)
    (tmp_path / "bom_head.csv").write_bytes(b"\xef\xbb\xbfsrc,dst\n" + edges)
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + edges.replace(b",", b" "))
    want = io.load_matrix(str(tmp_path / "plain.csv")).toarray()
    assert want[0, 2] > 0
    for name in ("bom.csv", "bom_head.csv", "bom.txt"):
        np.testing.assert_array_equal(io.load_matrix(str(tmp_path / name)).toarray(), want)
    (tmp_path / "one_based.txt").write_bytes(b"1 2\n2 3\n3 1\n")
    with pytest.raises(UsageError, match=r"node 0 appears in no edge, the smallest id is 1: node ids are 0-based"):
        io.load_matrix(str(tmp_path / "one_based.txt"))
    (tmp_path / "gap.csv").write_bytes(b"0,1,NA\n1,0,1.0\n")
    with pytest.raises(UsageError, match="gap.csv' cannot be read: could not convert string (to float: )?'NA'"):
        io.load_matrix(str(tmp_path / "gap.csv"))
    # helper 189: a dense matrix written as text read as a bad edge list, and NumPy's advice to pass usecols
    (tmp_path / "dense.csv").write_bytes(b"0.5,0.5,0\n0,0.5,0.5\n0.5,0,0.5\n")
    (tmp_path / "dense.txt").write_bytes(b"0.5 0.5 0 0\n0 0.5 0.5 0\n0 0 0.5 0.5\n0.5 0 0 0.5\n")
    for name, shape in (("dense.csv", "3 x 3"), ("dense.txt", "4 x 4")):
        with pytest.raises(UsageError, match=f"; a dense {shape} matrix\\? save it as .npy \\(numpy.save\\), .mtx or "
                                             ".npz, which load_matrix reads as matrices$"):
            io.load_matrix(str(tmp_path / name))
    (tmp_path / "typo.txt").write_bytes(b"0 1 0.5\n1 2 0.5\n2 -1 1.0\n")  # (an edge list with one typo: not asked)
    with pytest.raises(UsageError, match=r"edge 2 \(2 -1\) is not a pair of non-negative integer node ids "
                                         r"\(0-based\)$"):
        io.load_matrix(str(tmp_path / "typo.txt"))
    (tmp_path / "mixed.txt").write_bytes(b"0 1\n1 2 0.5\n2 0\n")
    with pytest.raises(UsageError, match="mixed.txt' cannot be read: .*") as info:
        io.load_matrix(str(tmp_path / "mixed.txt"))
    assert "usecols" not in str(info.value)


def test_a_weighted_edge_list_that_lists_an_edge_twice_is_refused(tmp_path):
    """A repeated weighted edge had its weights added without a word: with normalize=True a different matrix than
    the one written (a file concatenated from two); an unweighted one is one edge, as documented."""
    from rowstoch_fast import io
    from rowstoch_fast.errors import UsageError

    (tmp_path / "twice.txt").write_bytes(b"# weights\n0 1 0.5\n1 0 0.5\n\n0 0 0.5\n1 1 0.5\n0 1 0.5\n")
    with pytest.raises(UsageError, match=r"twice.txt': the edge 0 -> 1 is listed 2 times \(lines 2, 7\): with "
                                         r"weights, list each edge once \(the weights of a repeated edge would be "
                                         r"added\)$"):
        io.load_matrix(str(tmp_path / "twice.txt"), normalize=True)
    (tmp_path / "thrice.csv").write_bytes(b"src,dst,w\n2,0,1\n0,1,1\n1,2,1\n2,0,1\n1,2,1\n2,0,1\n")
    with pytest.raises(UsageError, match=r"the edge 2 -> 0 is listed 3 times \(lines 2, 5, 7; 3 repeats in all\)"):
        io.load_matrix(str(tmp_path / "thrice.csv"), normalize=True)
    (tmp_path / "once.txt").write_bytes(b"0 1 0.5\n1 0 0.5\n0 0 0.5\n1 1 0.5\n")
    (tmp_path / "plain_twice.txt").write_bytes(b"0 1\n1 0\n0 1\n")
    (tmp_path / "plain.txt").write_bytes(b"0 1\n1 0\n")
    assert io.load_matrix(str(tmp_path / "once.txt")).toarray().tolist() == [[0.5, 0.5], [0.5, 0.5]]
    np.testing.assert_array_equal(io.load_matrix(str(tmp_path / "plain_twice.txt")).toarray(),
                                  io.load_matrix(str(tmp_path / "plain.txt")).toarray())


def test_a_matrix_market_file_with_nul_bytes_is_refused_not_a_crash(tmp_path):
    """SciPy's reader crashes the process on these (what SciPy 1.17 itself writes for float32 at precision 17)."""
    from rowstoch_fast import io
    from rowstoch_fast.errors import UsageError

    path = tmp_path / "A.mtx"
    path.write_bytes(b"%%MatrixMarket matrix coordinate real general\n%\n2 2 2\n1 1 5.0000\0\0\0\n2 2 5.0\0\0\n")
    with pytest.raises(UsageError, match="NUL byte at offset"):
        io.load_matrix(str(path))


# ---------------------------------------------------------------------------- draw
@pytest.fixture
def plt():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _arrows(ax):
    from matplotlib.patches import FancyArrowPatch

    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def test_draw_gives_an_arrow_per_edge_without_self_loops(plt, tmp_path):
    from matplotlib.axes import Axes

    A = MixingMatrix([[0.5, 0.5, 0.0, 0.0], [0.0, 0.2, 0.8, 0.0], [0.1, 0.0, 0.4, 0.5], [1.0, 0.0, 0.0, 0.0]])
    ax = A.draw()
    assert isinstance(ax, Axes)
    arrows = _arrows(ax)
    assert len(arrows) == 5  # 8 weights, 3 of them self loops
    assert len(ax.texts) == 4 and sorted(t.get_text() for t in ax.texts) == ["0", "1", "2", "3"]
    widths = sorted(a.get_linewidth() for a in arrows)
    assert widths[0] < widths[-1]  # a weight of 0.1 thinner than one of 1.0
    assert len(ax.collections) == 1 and len(ax.collections[0].get_offsets()) == 4  # the nodes
    ax = topology.ring(7).draw(labels=False)  # a ring's self loops omitted too
    assert len(_arrows(ax)) == 7 and not ax.texts


def test_draw_into_given_axes_with_layouts_and_saves_a_png(plt, tmp_path):
    A = topology.exponential(8)
    _, ax = plt.subplots()
    assert A.draw(ax=ax) is ax and len(_arrows(ax)) == A.nnz - 8
    pos = np.random.default_rng(0).normal(size=(8, 2))
    ax = A.draw(layout=pos, path=tmp_path / "exp.png")
    np.testing.assert_allclose(ax.collections[0].get_offsets(), pos)
    assert (tmp_path / "exp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = A.draw(layout="spring", seed=1, path=str(tmp_path / "spring.svg"))
    assert len(_arrows(ax)) == A.nnz - 8 and (tmp_path / "spring.svg").stat().st_size > 0
    again = A.draw(layout="spring", seed=1)
    np.testing.assert_array_equal(ax.collections[0].get_offsets(), again.collections[0].get_offsets())
    column = MixingMatrix(A, stochastic="column")  # (the exponential graph's A is doubly stochastic)
    assert len(_arrows(column.draw())) == A.nnz - 8


def test_draw_refuses_bad_inputs(plt, monkeypatch):
    A = topology.ring(5)
    with pytest.raises(ValueError, match="A has 201 nodes, more than max_nodes = 200 .*pass max_nodes=201 .*"
                                         r"or layout= an \(201, 2\) array of positions"):
        topology.ring(201).draw()
    with pytest.raises(ValueError, match="more than max_nodes = 4"):
        A.draw(max_nodes=4)
    assert len(_arrows(A.draw(max_nodes=5))) == 5
    assert len(_arrows(topology.ring(201).draw(layout=np.zeros((201, 2)) + np.arange(201)[:, None]))) == 201
    with pytest.raises(ValueError, match="max_nodes must be >= 1"):
        A.draw(max_nodes=0)
    with pytest.raises(ValueError, match="layout must be 'circular', 'spring' or an \\(n, 2\\) array .*got 'grid'"):
        A.draw(layout="grid")
    with pytest.raises(ValueError, match=r"layout positions must have shape \(5, 2\), .*got \(4, 2\)"):
        A.draw(layout=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="layout must be finite"):
        A.draw(layout=np.full((5, 2), np.nan))
    with pytest.raises(TypeError, match="layout must be a numeric array"):
        A.draw(layout=[["a", "b"]] * 5)
    monkeypatch.setitem(__import__("sys").modules, "networkx", None)
    with pytest.raises(ImportError, match="layout='spring' needs networkx"):
        A.draw(layout="spring")


def test_a_compressed_edge_list_is_read_and_refused_before_it_fills_memory(tmp_path, monkeypatch):
    """An edge list ending in .gz or .bz2 is decompressed (NumPy decompressed it but its header was looked for in
    the compressed bytes: a CSV header line failed as "could not convert string 'src,dst'"), and one holding
    more edges than fit is refused as it is read, naming it."""
    import bz2
    import gzip

    from rowstoch_fast.io import load_matrix

    with gzip.open(tmp_path / "ring.csv.gz", "wt") as f:
        f.write("src,dst\n0,1\n1,2\n2,0\n")
    with bz2.open(tmp_path / "ring.txt.bz2", "wt") as f:
        f.write("0 1\n1 2\n2 0\n")
    dense = [load_matrix(str(tmp_path / name)).toarray() for name in ("ring.csv.gz", "ring.txt.bz2")]
    np.testing.assert_array_equal(dense[0], dense[1])
    assert dense[0][1, 0] == 0.5 and dense[0][1, 1] == 0.5
    import lzma

    from rowstoch_fast.errors import UsageError

    with lzma.open(tmp_path / "ring.txt.xz", "wt") as f:  # (NumPy's reader decompressed it, the counted lines
        f.write("0 1\n1 2\n2 0\n")                        # read its compressed bytes: a reviewer's case)
    raw = (tmp_path / "ring.csv.gz").read_bytes()
    (tmp_path / "half.csv.gz").write_bytes(raw[:len(raw) // 2])  # (a traceback: EOFError)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(1 << 20))
    np.testing.assert_array_equal(load_matrix(str(tmp_path / "ring.txt.xz")).toarray(), dense[0])
    with pytest.raises(UsageError, match="half.csv.gz': EOFError: Compressed file ended"):
        load_matrix(str(tmp_path / "half.csv.gz"))
    with gzip.open(tmp_path / "bomb.txt.gz", "wt") as f:
        f.write("0 1\n" * 10**6)
    monkeypatch.setenv("ROWSTOCH_MEMORY_LIMIT", str(4 << 20))
    with pytest.raises(MemoryError, match="bomb.txt.gz holds at least 262,14[0-9] numbers"):
        load_matrix(str(tmp_path / "bomb.txt.gz"))


def test_from_edges_checks_normalize_where_it_ignores_it():
    """Helper 185: ``normalize='x'`` passed under the in-degree rule (which ignores normalize)."""
    with pytest.raises(TypeError, match="normalize must be True or False, got str 'x'"):
        MixingMatrix.from_edges(3, [(0, 1), (1, 2), (2, 0)], normalize="x")
    assert MixingMatrix.from_edges(3, [(0, 1), (1, 2), (2, 0)], normalize=False).n == 3


def test_a_power_past_the_limit_of_one_call_is_refused_naming_r(monkeypatch):
    """``A.mix_power(X, 10**12)`` had run without end (a warning, then 18 hours on a 16-node ring, years on a
    larger network): past ``MAX_GOSSIP`` multiply-adds it is refused before it runs, saying why (helper 218)."""
    import warnings

    from rowstoch_fast import mixing

    A, X = topology.ring(16), np.ones((16, 2))
    with pytest.raises(ValueError, match=r"R = 1000000000000 rounds of 32 weights x 2 columns is about 6e\+13 "
                                         r"multiply-adds, but the limit of one call is 1e\+13 .* 1 pi\^T X"):
        A.mix_power(X, 10**12)
    with pytest.raises(ValueError, match="R = 1000000000000 rounds"):
        A.mix(X, rounds=10**12)
    monkeypatch.setattr(mixing, "MAX_GOSSIP", 50 * A.nnz * 2)  # (at the limit: taken)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(A.mix_power(X, 50), X)
    with pytest.raises(ValueError, match="R = 51 rounds"):
        A.mix_power(X, 51)
