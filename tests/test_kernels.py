"""The compiled mixing kernels against scipy.sparse, and their argument checks."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rowstoch_fast import _core, _reference
from conftest import csr_and_block, tol


def _args(A):
    return A.indptr, A.indices, A.data


@given(csr_and_block())
def test_mix_matches_scipy(case):
    A, X = case
    Y = _core.mix(*_args(A), X)
    ref = A.astype(np.float64) @ X.astype(np.float64)
    assert Y.dtype == X.dtype
    np.testing.assert_allclose(Y, ref, rtol=tol(X.dtype), atol=tol(X.dtype) * (1 + np.abs(ref).max(initial=0)))


@given(csr_and_block(), st.integers(0, 6))
def test_mix_power_matches_repeated_products(case, R):
    A, X = case
    A = A.copy()
    A.data[:] = np.abs(A.data) / max(1.0, 3.0)  # keep powers bounded
    Y = _core.mix_power(*_args(A), X, R)
    ref = _reference.mix_power(A.toarray().astype(np.float64), X.astype(np.float64), R)
    scale = 1 + np.abs(ref).max(initial=0)
    np.testing.assert_allclose(Y, ref, rtol=tol(X.dtype) * 10, atol=tol(X.dtype) * 10 * scale)


@given(csr_and_block())
def test_mix_writes_into_out(case):
    A, X = case
    out = np.full_like(X, np.nan)
    Y = _core.mix(*_args(A), X, out)
    assert Y is out or np.shares_memory(Y, out)
    np.testing.assert_allclose(out, A.astype(np.float64) @ X.astype(np.float64), rtol=tol(X.dtype), atol=tol(X.dtype) * 10)


def test_mix_large_parallel_path_matches_scipy(rng):
    # big enough to take the OpenMP path (work above the serial threshold)
    n, d = 3000, 7
    nnz = int(0.005 * n * n)  # built by hand: sp.random_array is SciPy >= 1.12, sp.random's rng keyword varies
    A = sp.csr_array((rng.random(nnz), (rng.integers(0, n, nnz), rng.integers(0, n, nnz))), shape=(n, n))
    A.sum_duplicates()
    X = rng.standard_normal((n, d))
    np.testing.assert_allclose(_core.mix(*_args(A), X), A @ X, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_core.mix_power(*_args(A), X, 3), A @ (A @ (A @ X)), rtol=1e-12, atol=1e-12)


def test_build_info_reports_openmp():
    info = _core.build_info()
    assert info["openmp"] == _core.has_openmp()
    # (-O3 unless the build asked for another level: .ci/sanitize builds at -O0 and says so in the environment)
    assert f"-O{os.environ.get('ROWSTOCH_OPT_LEVEL', '3').strip() or '3'}" in info["flags"].split()
    assert "-march=native" not in info["flags"]


def test_set_num_threads_roundtrip():
    before = _core.get_num_threads()
    try:
        _core.set_num_threads(1)
        assert _core.get_num_threads() == 1 or not _core.has_openmp()
    finally:
        _core.set_num_threads(before)
    with pytest.raises(ValueError, match="threads"):
        _core.set_num_threads(0)


# ---------------------------------------------------------------------- negative tests
@pytest.fixture
def small():
    A = sp.csr_array(np.array([[0.5, 0.5], [0.25, 0.75]]))
    X = np.ones((2, 3))
    return A, X


def test_rejects_mixed_precision(small):
    A, X = small
    with pytest.raises(TypeError, match="X has dtype float32"):
        _core.mix(*_args(A), X.astype(np.float32))


def test_rejects_strided_out(small):
    A, X = small
    out = np.zeros((2, 6))[:, ::2]
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        _core.mix(*_args(A), X, out)


def test_rejects_strided_input(small):
    A, X = small
    with pytest.raises(ValueError, match="X must be C-contiguous"):
        _core.mix(*_args(A), np.ones((2, 6))[:, ::2])


def test_rejects_wrong_out_dtype_and_shape(small):
    A, X = small
    with pytest.raises(TypeError, match="out has dtype"):
        _core.mix(*_args(A), X, np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="out must have shape"):
        _core.mix(*_args(A), X, np.zeros((3, 3)))


def test_rejects_readonly_and_aliased_out(small):
    A, X = small
    out = np.zeros((2, 3))
    out.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        _core.mix(*_args(A), X, out)
    with pytest.raises(ValueError, match="shares memory with X"):
        _core.mix(*_args(A), X, X)


def test_rejects_wrong_row_count(small):
    A, _ = small
    with pytest.raises(ValueError, match="X has 3 rows but A is 2 x 2"):
        _core.mix(*_args(A), np.ones((3, 1)))
    with pytest.raises(ValueError, match="X must be 2-D"):
        _core.mix(*_args(A), np.ones(2))


@pytest.mark.parametrize("bad", [-1, 2, 100])
def test_rejects_out_of_range_index(small, bad):
    A, X = small
    indices = A.indices.copy()
    indices[1] = bad
    with pytest.raises(ValueError, match=r"indices\[1\] = .* out of range"):
        _core.mix(A.indptr, indices, A.data, X)


def test_rejects_bad_indptr(small):
    A, X = small
    with pytest.raises(ValueError, match="indptr\\[0\\] must be 0"):
        _core.mix(A.indptr + 1, A.indices, A.data, X)
    bad = A.indptr.copy()
    bad[1] = 5
    with pytest.raises(ValueError, match="non-decreasing"):
        _core.mix(bad, A.indices, A.data, X)
    with pytest.raises(ValueError, match="indptr\\[-1\\] must equal"):
        _core.mix(A.indptr[:-1], A.indices, A.data, np.ones((1, 3)))


def test_rejects_bad_csr_dtypes_and_sizes(small):
    A, X = small
    with pytest.raises(TypeError, match="indptr must be int32 or int64"):
        _core.mix(A.indptr.astype(np.float64), A.indices, A.data, X)
    with pytest.raises(TypeError, match="indices has dtype"):
        _core.mix(A.indptr.astype(np.int64), A.indices.astype(np.int32), A.data, X)
    with pytest.raises(TypeError, match="data must be float32 or float64"):
        _core.mix(A.indptr, A.indices, A.data.astype(np.int64), X)
    with pytest.raises(ValueError, match="data.size"):
        _core.mix(A.indptr, A.indices, A.data[:-1], X)


def test_mix_power_rejects_negative_R(small):
    A, X = small
    with pytest.raises(ValueError, match="R must be >= 0"):
        _core.mix_power(*_args(A), X, -1)


def test_a_mix_power_that_would_run_for_hours_is_said_before_it_runs(monkeypatch):
    """``A.mix_power(X, 10**12)`` on a 16-node ring ran about 18 hours without a word; past ``LONG_GOSSIP``
    multiply-adds (R x the weights x the columns) it warns first, at the caller's line (through ``A.mix`` too),
    after the arguments are checked, and still computes A^R X."""
    import warnings

    from rowstoch_fast import mixing, topology

    A, X = topology.ring(16), np.arange(32.0).reshape(16, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = A.mix_power(X, 50)
    monkeypatch.setattr(mixing, "LONG_GOSSIP", 50 * A.nnz * 2 - 1)
    with pytest.warns(RuntimeWarning, match=r"R = 50 rounds of 32 weights x 2 columns .* 1 pi\^T X .* Ctrl-C") as got:
        loud = A.mix_power(X, 50)
    np.testing.assert_array_equal(quiet, loud)
    assert got[0].filename == __file__  # (the caller's line, not the package's)
    with pytest.warns(RuntimeWarning, match="R = 50 rounds") as got:
        A.mix(X, rounds=50)
    assert got[0].filename == __file__
    with pytest.warns(RuntimeWarning, match="a rank-one limit"):  # (column-stochastic: not 1 pi^T X)
        mixing.out_degree_weights(A).mix_power(X, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A.mix_power(X[:, 0], 50)  # (one column: under the limit)
        with pytest.raises(ValueError, match="17 rows"):  # (refused first, not warned about)
            A.mix_power(np.ones((17, 2)), 50)


@given(csr_and_block(max_n=10, max_d=4), st.integers(1, 4), st.floats(1e-3, 1.0))
def test_gt_y_phase_matches_numpy(case, R, lr):
    A, X = case
    rng = np.random.default_rng(len(A.data))
    n, w = X.shape
    dt = X.dtype
    x, y, gn, go = (rng.standard_normal((n, w)).astype(dt) for _ in range(4))
    sn, so = (rng.uniform(0.5, 2.0, n).astype(dt) for _ in range(2))
    y_out, xw, psi, work = (np.empty((n, w), dt) for _ in range(4))
    finite = _core.gt_y_phase(*_args(A), R, lr, x, y, gn, go, sn, so, y_out, xw, psi, work)
    D = A.toarray().astype(np.float64)
    ref_y = np.linalg.matrix_power(D, R) @ (y + sn[:, None] * gn - so[:, None] * go).astype(np.float64)
    scale = 1 + np.abs(ref_y).max(initial=0) * max(1.0, np.abs(D).sum(1).max(initial=0)) ** R
    assert finite
    np.testing.assert_allclose(y_out, ref_y, rtol=tol(dt) * 10, atol=tol(dt) * 10 * scale)
    np.testing.assert_allclose(xw, x - np.asarray(lr, dt) * y_out, rtol=tol(dt), atol=tol(dt) * scale)


@given(csr_and_block(max_n=9, max_d=1), st.integers(1, 3), st.integers(1, 6), st.integers(1, 4))
def test_diag_powers_match_reference(case, stride, records, block):
    A, _ = case
    A = A.astype(np.float64)
    A.data[:] = np.abs(A.data) / 3.0
    diags, steps = _core.diag_powers(*_args(A), stride, records, block)
    ref = _reference.diag_powers(A.toarray(), records - 1, stride)
    np.testing.assert_allclose(diags, ref, rtol=1e-12, atol=1e-14)
    assert 0 <= steps <= (records - 1) * stride


def test_gt_y_phase_flags_non_finite():
    A = sp.csr_array(np.array([[0.5, 0.5], [0.25, 0.75]]))
    z = [np.zeros((2, 1)) for _ in range(8)]
    z[1][1, 0] = np.inf  # y
    assert not _core.gt_y_phase(*_args(A), 1, 0.1, z[0], z[1], z[2], z[3], np.ones(2), np.ones(2), z[4], z[5], z[6], z[7])


@given(st.integers(1, 300), st.integers(1, 12), st.integers(1, 4), st.sampled_from([np.float64, np.float32]),
       st.integers(0, 2**31), st.booleans())
def test_combine_matches_numpy(n, w, K, dtype, seed, in_place):
    """out <- sum_t c_t X_t, scalar, per-row, per-column (1, w) or per-entry (n, w) coefficients, out among the
    terms or not, its NaN/Inf flag."""
    rng = np.random.default_rng(seed)
    blocks = [rng.standard_normal((n, w)).astype(dtype) for _ in range(K)]
    shapes = [None, (n,), (1, w), (n, w)]
    coefs = [float(rng.standard_normal()) if shape is None else rng.standard_normal(shape).astype(dtype)
             for shape in (shapes[rng.integers(0, 4)] for _ in range(K))]
    terms = [(c[:, None] if isinstance(c, np.ndarray) and c.ndim == 1 else c if isinstance(c, np.ndarray)
              else dtype(c)) * X for c, X in zip(coefs, blocks)]
    expected = terms[0]
    for t in terms[1:]:
        expected = expected + t
    out = blocks[0] if in_place else np.empty((n, w), dtype)
    assert _core.combine(out, coefs, blocks) is True
    np.testing.assert_allclose(out, expected, rtol=tol(dtype) * 10, atol=tol(dtype) * 10)
    bad = rng.integers(0, n), rng.integers(0, w)
    blocks[-1][bad] = np.inf if rng.random() < 0.5 else np.nan
    assert _core.combine(np.empty((n, w), dtype), coefs, blocks) is False


def test_combine_refuses_partial_overlap_and_bad_terms():
    X = np.zeros((6, 3))
    with pytest.raises(ValueError, match="out shares memory with blocks\\[0\\]"):
        _core.combine(X[:3], [1.0], [X.ravel()[3:12].reshape(3, 3)])  # rows 1..3 of X: half inside out
    with pytest.raises(ValueError, match="1 to 4"):
        _core.combine(X, [1.0] * 5, [X] * 5)
    with pytest.raises(ValueError, match="must have the shape of out"):
        _core.combine(X, [1.0], [np.zeros((5, 3))])
    with pytest.raises(ValueError, match=r"coefs\[0\] must be a number, one value per row \(shape \(6,\)\), one per "
                                         r"column \(shape \(1, 3\)\) or one per entry \(shape \(6, 3\)\)"):
        _core.combine(np.zeros((6, 3)), [np.ones(5)], [X])
    with pytest.raises(ValueError, match=r"coefs\[1\] must be a number, one value per row"):
        _core.combine(np.zeros((6, 3)), [1.0, np.ones((2, 3))], [X, X])
    with pytest.raises(TypeError, match="dtype"):
        _core.combine(np.zeros((6, 3)), [1.0], [np.zeros((6, 3), np.float32)])


@given(csr_and_block(), st.integers(0, 2**63 - 1), st.integers(0, 2**40), st.integers(0, 5),
       st.floats(0.0, 1.0), st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_the_compiled_arrival_draws_equal_numpy_s(case, seed, t, r, p, with_ids, with_bad):
    """_core.lost_links (what Lossy.arrived and the running sums use) draws what the NumPy transcription draws,
    for any CSR (duplicates, empty rows), with an MPI share's global ids and Gilbert-Elliott gates."""
    from rowstoch_fast import _core, _reference

    csr, _ = case
    n = csr.shape[0]
    rng = np.random.default_rng(seed % 2**32)
    ids = {}
    if with_ids:  # a share: its rows are some nodes, its columns other ids (a halo)
        ids = {"row_ids": rng.permutation(10 * n)[:n].astype(np.int64),
               "col_ids": rng.permutation(10 * n)[:n].astype(np.int64)}
    bad = rng.integers(0, 2, csr.nnz).astype(np.uint8) if with_bad else None
    got = _core.lost_links(csr.indptr, csr.indices, seed, t, r, p, bad=bad, **ids).view(bool)
    want = _reference.lost_links(csr.indptr, csr.indices, seed, t, r, p, bad=bad, **ids)
    np.testing.assert_array_equal(got, want)


@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 3),
       st.sampled_from(["qsgd", "sign", "topk", "randk", "round", "noise"]), st.integers(1, 32), st.booleans(),
       st.integers(0, 2**63 - 1), st.integers(0, 2**40), st.integers(0, 4), st.booleans(), st.booleans(),
       st.booleans())
@settings(max_examples=80, deadline=None)
def test_the_compiled_messages_equal_numpy_s(n, d, reps, method, param, unbiased, seed, t, r, single, in_place, ids):
    """_core.compress (Compressed / Noisy) equals _reference.compress for any block (replicas side by side, zero
    and tied values), in place or not, in float32 and float64, on an MPI share's global ids; own gets X's rows."""
    from rowstoch_fast import _core, _reference

    rng = np.random.default_rng(seed % 2**32)
    dtype = np.float32 if single else np.float64
    X = rng.standard_normal((n, reps * d)).astype(dtype)
    X[rng.random(X.shape) < 0.2] = 0.0
    X[rng.random(X.shape) < 0.2] = 1.5  # (ties)
    kernel = {"qsgd": 0, "sign": 1, "topk": 2, "randk": 3, "round": 4, "noise": 5}[method]
    params = {"qsgd": {"bits": param, "unbiased": unbiased}, "sign": {}, "topk": {"k": min(param, d)},
              "randk": {"k": min(param, d), "unbiased": unbiased}, "round": {"bits": param},
              "noise": {"sigma": 0.3}}[method]
    node_ids = rng.permutation(10 * n)[:n].astype(np.int64) if ids else None
    out = X.copy() if in_place else np.empty_like(X)
    src = out if in_place else X
    own = np.empty_like(X)
    _core.compress(src, out, kernel, d, params.get("bits", params.get("k", 0)), params.get("sigma", 0.0),
                   params.get("unbiased", False), seed, t, r, row_ids=node_ids, own=None if in_place else own)
    want = np.array([[v for c0 in range(0, reps * d, d) for v in _reference.compress_message(
        X[i, c0:c0 + d], method, i if node_ids is None else node_ids[i], c0, seed, t, r, **params)]
        for i in range(n)], dtype=dtype)
    # (noise: v + sigma z, z a few ulp from libm's (simd.hpp's box_muller), which cancellation can leave as the
    # whole of a small sum: a few ulp of sigma |z| <= 0.3 Z_MAX = 2.6 in absolute terms)
    atol = (2e-6 if single else 1e-14) * 0.3 * 8.6 if method == "noise" else 1e-30
    np.testing.assert_allclose(out, want, rtol=2e-6 if single else 1e-14, atol=atol)
    if not in_place:
        np.testing.assert_array_equal(own, X)


@pytest.mark.parametrize("method,param", [("qsgd", 4), ("topk", 2), ("randk", 3), ("topk", 5)])
@pytest.mark.parametrize("reps", [1, 3])
def test_batched_messages_across_rows_and_threads_equal_numpy_s(method, param, reps):
    """The encoding compresses messages four at a time (their chains interleaved): batches that span rows, the
    messages left over at the end of each thread's rows, and a block large enough for every thread still send
    exactly the reference's messages (qsgd and top-k / rand-k with k <= 4 batched; top-5 one at a time)."""
    from rowstoch_fast import _core, _reference

    n, d = 2**13 + 3, 7
    X = np.random.default_rng(5).standard_normal((n, reps * d))
    out, own = np.empty_like(X), np.empty_like(X)
    params = {"qsgd": {"bits": param}, "topk": {"k": param}, "randk": {"k": param}}[method]
    kernel = {"qsgd": 0, "topk": 2, "randk": 3}[method]
    _core.compress(X, out, kernel, d, param, 0.0, True, 9, 4, 1, own=own)
    rows = np.r_[0:6, n // 2 - 3:n // 2 + 3, n - 6:n]  # (the first, a middle and the last rows)
    want = np.array([[v for c0 in range(0, reps * d, d) for v in _reference.compress_message(
        X[i, c0:c0 + d], method, i, c0, 9, 4, 1, **params)] for i in rows])
    np.testing.assert_allclose(out[rows], want, rtol=1e-14, atol=1e-300)
    np.testing.assert_array_equal(own, X)
    in_place = X.copy()  # (out = X: a row's own copy taken before its messages overwrite it)
    _core.compress(in_place, in_place, kernel, d, param, 0.0, True, 9, 4, 1)
    np.testing.assert_array_equal(in_place, out)



@pytest.mark.parametrize("L", [1, 2, 7, 10, 16, 17])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_top_k_sends_the_same_bits_at_every_vector_width(L, k):
    """Top-k of one message a row, eight rows at a time on AVX-512 and four on AVX2 where the CPU runs them, sends
    the bits of the scalar passes (width 2) whatever the values: zeros of both signs, ties, NaN (a NaN in the first
    column is taken first, elsewhere never; a signalling one sent quiet, as the scalar path's product by the scale
    1 sends it: helper 157), infinities; in place and with the own rows copied; a block whose rows are not a
    multiple of the width (and L = 17, past the vector path)."""
    from rowstoch_fast import _core

    rng = np.random.default_rng(10 * L + k)
    n = 8 * 37 + 5
    X = rng.standard_normal((n, L))
    for value, share in ((0.0, 0.1), (-0.0, 0.1), (1.5, 0.15), (-1.5, 0.05), (np.nan, 0.05), (np.inf, 0.02),
                         (-np.inf, 0.02)):
        X[rng.random(X.shape) < share] = value
    X.view(np.uint64)[rng.random(X.shape) < 0.05] = 0x7FF0_0000_0000_0001  # (signalling NaNs, a payload each)
    got = {}
    try:
        for width in _core.simd_widths():
            _core.set_simd_width(width)
            out, own, in_place = np.empty_like(X), np.empty_like(X), X.copy()
            _core.compress(X, out, 2, L, k, 0.0, False, 9, 4, 1, own=own)
            _core.compress(in_place, in_place, 2, L, k, 0.0, False, 9, 4, 1)
            got[width] = [a.view(np.uint64) for a in (out, own, in_place)]
    finally:
        _core.set_simd_width(0)
    for width, arrays in got.items():
        for name, a, b in zip(("out", "own", "in place"), arrays, got[2]):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} at width {width}")
    np.testing.assert_array_equal(got[2][1], X.view(np.uint64))


@given(st.integers(1, 12), st.integers(1, 6), st.integers(1, 3), st.sampled_from(["qsgd", "topk", "randk", "round",
                                                                                    "noise"]),
       st.lists(st.integers(1, 8), min_size=1, max_size=4), st.integers(0, 2**63 - 1), st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_the_compiled_messages_with_a_value_per_node_equal_numpy_s(n, d, reps, method, choices, seed, single, ids):
    """_core.compress with one bits / k / sigma per node (the sender's, by global id): each row's messages are the
    reference's with its node's value (batches of qsgd and small k split where the value changes)."""
    from rowstoch_fast import _core, _reference

    rng = np.random.default_rng(seed % 2**32)
    dtype = np.float32 if single else np.float64
    X = rng.standard_normal((n, reps * d)).astype(dtype)
    node_ids = rng.permutation(3 * n)[:n].astype(np.int64) if ids else np.arange(n, dtype=np.int64)
    values = rng.choice(choices, size=3 * n).astype(np.int64)  # (indexed by global id)
    key = {"qsgd": "bits", "topk": "k", "randk": "k", "round": "bits", "noise": "sigma"}[method]
    per_node = values / 10.0 if method == "noise" else np.minimum(values, d) if key == "k" else values
    out = np.empty_like(X)
    _core.compress(X, out, {"qsgd": 0, "topk": 2, "randk": 3, "round": 4, "noise": 5}[method], d,
                   0 if method == "noise" else per_node, per_node if method == "noise" else 0.0, True, seed, 7, 2,
                   row_ids=node_ids if ids else None)
    want = np.array([[v for c0 in range(0, reps * d, d) for v in _reference.compress_message(
        X[i, c0:c0 + d], method, node_ids[i], c0, seed, 7, 2, **{key: per_node[node_ids[i]].item()},
        **({"unbiased": True} if method in ("qsgd", "randk") else {}))] for i in range(n)], dtype=dtype)
    atol = (2e-6 if single else 1e-14) * per_node.max() * 8.6 if method == "noise" else 1e-30  # (a few ulp of
    # sigma |z|, which cancellation can leave as the whole of v + sigma z: test_the_compiled_messages_equal_numpy_s)
    np.testing.assert_allclose(out, want, rtol=2e-6 if single else 1e-14, atol=atol)


def test_batched_messages_with_a_value_per_node_across_threads_equal_one_value_s():
    """A block large enough for every thread, its nodes' bits alternating in runs of 1..5 rows (batches split at
    every change): each row's messages equal those of the same row compressed with one value for every node."""
    from rowstoch_fast import _core

    n, d = 2**13 + 3, 7
    X = np.random.default_rng(5).standard_normal((n, 2 * d))
    bits = np.repeat(np.resize([3, 5], n), np.resize([1, 2, 3, 4, 5], n))[:n]
    out = np.empty_like(X)
    _core.compress(X, out, 0, d, bits, 0.0, True, 9, 4, 1)
    for b in (3, 5):
        one = np.empty_like(X)
        _core.compress(X, one, 0, d, b, 0.0, True, 9, 4, 1)
        np.testing.assert_array_equal(out[bits == b], one[bits == b])


def test_the_compiled_messages_refuse_bad_input():
    from rowstoch_fast import _core

    X, out = np.ones((3, 4)), np.empty((3, 4))
    for kwargs, error, match in [
            ({"method": 6}, ValueError, "method must be 0..5"), ({"L": 3}, ValueError, "L must divide"),
            ({"method": 0, "param": 0}, ValueError, "bits must be in 1..32, got 0"),
            ({"method": 4, "param": 33}, ValueError, "bits must be in 1..32, got 33"),
            ({"method": 2, "param": 0}, ValueError, "k must be >= 1"),
            ({"sigma": -1.0}, ValueError, "sigma must be finite and >= 0"),
            ({"sigma": float("nan")}, ValueError, "sigma must be finite"),
            ({"out": np.empty((3, 5))}, ValueError, "out"), ({"out": np.empty((3, 4), np.float32)}, TypeError, "dtype"),
            ({"row_ids": np.arange(2)}, ValueError, "row_ids has 2 ids, expected 3"),
            ({"own": X}, ValueError, "own"), ({"X": np.ones((3, 4), np.int64)}, TypeError, "float32 or float64")]:
        args = {"X": X, "out": out, "method": 1, "L": 2, "param": 1, "sigma": 0.0, "unbiased": False, "seed": 0,
                "t": 0, "r": 0, **kwargs}
        with pytest.raises(error, match=match):
            _core.compress(**args)


@given(csr_and_block(), st.integers(0, 2**63 - 1), st.integers(0, 60), st.integers(0, 3), st.integers(0, 20),
       st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_the_compiled_delays_equal_numpy_s(case, seed, t, r, D, fixed, with_ids):
    """_core.delay_ages (Delayed) equals _reference.delay_ages for any CSR and window, with an MPI share's global
    ids; the stacked index reads each entry's own row or the slot of t - age of its sender."""
    from rowstoch_fast import _core, _reference

    csr, _ = case
    n = csr.shape[0]
    ids = {}
    if with_ids:
        rng = np.random.default_rng(seed % 2**32)
        ids = {"row_ids": rng.permutation(n).astype(np.int64), "col_ids": np.arange(n, dtype=np.int64)}
    ages = _core.delay_ages(csr.indptr, csr.indices, seed, t, r, D, fixed=fixed, **ids)
    rows = np.repeat(np.arange(n), np.diff(csr.indptr))
    if with_ids:  # the reference on the global matrix: rows permuted
        perm = ids["row_ids"]
        full = sp.csr_matrix((np.ones(csr.nnz), csr.indices, csr.indptr), shape=csr.shape)
        glob = sp.csr_matrix(full.shape)
        glob = sp.csr_matrix((full.data, full.indices, full.indptr), shape=full.shape)[np.argsort(perm)]
        glob.sort_indices()
        want_glob = _reference.delay_ages(glob.indptr, glob.indices, seed, t, r, D, fixed=fixed)
        g_rows = np.repeat(np.arange(n), np.diff(glob.indptr))
        lookup = {(int(i), int(j)): int(a) for i, j, a in zip(g_rows, glob.indices, want_glob)}
        want = np.array([lookup[(int(perm[i]), int(j))] for i, j in zip(rows, csr.indices)], dtype=np.int64)
    else:
        want = _reference.delay_ages(csr.indptr, csr.indices, seed, t, r, D, fixed=fixed)
    np.testing.assert_array_equal(ages, want)
    R = 4
    index = _core.delay_ages(csr.indptr, csr.indices, seed, t, r, D, fixed=fixed, layout=(n, n, R), **ids)
    gi = rows if not with_ids else ids["row_ids"][rows]
    own = gi == csr.indices
    expected = np.where(own, rows, n + csr.indices * (D + 1) * R + ((t - ages) % (D + 1)) * R + r)
    np.testing.assert_array_equal(index, expected)


@given(csr_and_block(), st.integers(0, 2**63 - 1), st.integers(0, 40), st.integers(0, 3), st.integers(0, 4),
       st.booleans(), st.booleans())
@settings(max_examples=40, deadline=None)
def test_the_compiled_link_noise_equals_numpy_s(case, seed, t, r, w, with_ages, single):
    """_core.link_noise (Noisy per="link") equals _reference.link_noise, keyed on the iteration each message was
    sent (ages) and on an MPI share's global ids."""
    from rowstoch_fast import _core, _reference

    csr, _ = case
    rng = np.random.default_rng(seed % 2**32)
    ages = rng.integers(0, t + 1, csr.nnz).astype(np.int32) if with_ages else None
    dtype = np.float32 if single else np.float64
    got = _core.link_noise(csr.indptr, csr.indices, seed, t, r, w, dtype=dtype, ages=ages)
    np.testing.assert_allclose(got, _reference.link_noise(csr.indptr, csr.indices, seed, t, r, w, ages=ages),
                               rtol=1e-6 if single else 1e-14, atol=1e-6 if single else 1e-14)
    n = csr.shape[0]
    perm = rng.permutation(n).astype(np.int64)  # the same links seen by a share whose row i is node perm[i]
    shared = _core.link_noise(csr.indptr, csr.indices, seed, t, r, w, dtype=dtype, ages=ages, row_ids=perm,
                              col_ids=np.arange(n, dtype=np.int64))
    rows = np.repeat(np.arange(n), np.diff(csr.indptr))
    for q in range(min(csr.nnz, 5)):  # (one link j -> i alone: a CSR whose row i holds it)
        i, j = int(perm[rows[q]]), int(csr.indices[q])
        one = _reference.link_noise(np.r_[np.zeros(i + 1, dtype=np.int64), 1], np.array([j]), seed,
                                    t - (0 if ages is None else int(ages[q])), r, w)[0]
        np.testing.assert_allclose(shared[q], one, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="ages has"):
        _core.link_noise(csr.indptr, csr.indices, seed, t, r, w, ages=np.zeros(csr.nnz + 1, np.int32))
    with pytest.raises(TypeError, match="float32 or float64"):
        _core.link_noise(csr.indptr, csr.indices, seed, t, r, w, dtype=np.int64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("per_node", [False, True])
def test_link_noise_scaled_into_a_block_equals_the_unit_draws_times_sigma(dtype, per_node):
    """_core.link_noise(..., sigma=, out=) (what link_noise_block asks for: the noise written into its block, no
    block of unit draws and no copy): the unit draws times each sender's sigma in the dtype, bit for bit, under an
    MPI share's global ids too; bad sigma or out refused, naming them."""
    from rowstoch_fast import topology

    csr = topology.erdos_renyi(11, 0.4, seed=2).tocsr()
    sigma = np.linspace(0.0, 0.3, 11) if per_node else 0.07
    ids = {"row_ids": np.arange(3, 14, dtype=np.int64), "col_ids": np.arange(3, 14, dtype=np.int64)}
    for kw, senders in (({}, csr.indices), (ids, csr.indices + 3)):
        unit = _core.link_noise(csr.indptr, csr.indices, 5, 4, 1, 6, dtype=dtype, **kw)
        scale = np.asarray(np.resize(sigma, 14)[senders] if per_node else sigma, dtype=dtype)
        want = unit * (scale[:, None] if per_node else scale)
        every = np.resize(sigma, 14) if per_node else sigma
        block = np.full((csr.nnz + 2, 6), np.nan, dtype=dtype)
        got = _core.link_noise(csr.indptr, csr.indices, 5, 4, 1, 6, dtype=dtype, sigma=every, out=block[2:], **kw)
        assert np.shares_memory(got, block)
        np.testing.assert_array_equal(block[2:], want)
        assert np.isnan(block[:2]).all()
        np.testing.assert_array_equal(_core.link_noise(csr.indptr, csr.indices, 5, 4, 1, 6, dtype=dtype, sigma=every,
                                                       **kw), want)
    args = (csr.indptr, csr.indices, 5, 4, 1, 6)
    with pytest.raises(ValueError, match="sigma has 10 values .one per node., but node 10 sends in this pass"):
        _core.link_noise(*args, dtype=dtype, sigma=np.ones(10))
    with pytest.raises(ValueError, match=r"sigma\[2\] must be finite and >= 0, got -1"):
        _core.link_noise(*args, dtype=dtype, sigma=[0.1, 0.1, -1.0] + [0.1] * 8)
    with pytest.raises(ValueError, match="sigma must be finite and >= 0, got inf"):
        _core.link_noise(*args, dtype=dtype, sigma=np.inf)
    with pytest.raises(ValueError, match=r"out must have shape \(%d,6,\)" % csr.nnz):
        _core.link_noise(*args, dtype=dtype, out=np.empty((csr.nnz, 5), dtype=dtype))
    with pytest.raises(TypeError, match="out must be"):
        _core.link_noise(*args, dtype=dtype, out=np.empty((csr.nnz, 6), dtype=np.float16))
    frozen = np.empty((csr.nnz, 6), dtype=dtype)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        _core.link_noise(*args, dtype=dtype, out=frozen)
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        _core.link_noise(*args, dtype=dtype, out=[[0.0] * 6] * csr.nnz)


def test_the_noises_normals_are_the_same_bits_at_every_vector_width_and_within_a_few_ulp_of_libm_s():
    """Link noise and message noise draw their Box-Muller normals W at a time with the package's own log and
    cosine (simd.hpp's box_muller: no libm): the same bits at every vector width the CPU runs (rows of 67 values:
    past a chunk of 64, not a multiple of any width), and within 8 ulp of ``math.sqrt(-2 math.log(u)) math.cos(2 pi
    u')`` (libm's own value is within 2.5 ulp of the exact one; the package's within 3.5: 3.43 the worst of 11M
    pairs)."""
    from rowstoch_fast import topology
    from rowstoch_fast.network import Noisy

    csr = topology.erdos_renyi(9, 0.5, seed=4).tocsr()
    X = np.zeros((9, 67))
    per_width = {}
    try:
        for width in _core.simd_widths():
            _core.set_simd_width(width)
            link = _core.link_noise(csr.indptr, csr.indices, 7, 3, 1, 67)
            message = Noisy(topology.ring(9), sigma=1.0, seed=7, per="message").encode(X, np.empty_like(X), 3, 1)
            per_width[width] = (link, message.copy())
    finally:
        _core.set_simd_width(0)
    link, message = per_width[2]
    for width, (other_link, other_message) in per_width.items():
        np.testing.assert_array_equal(other_link, link, err_msg=f"width {width}")
        np.testing.assert_array_equal(other_message, message, err_msg=f"width {width}")
    for got, want in ((link, _reference.link_noise(csr.indptr, csr.indices, 7, 3, 1, 67)),
                      (message, _reference.compress(X, "noise", 67, 7, 3, 1, sigma=1.0))):
        ulps = np.abs(got - want) / np.spacing(np.maximum(np.abs(got), np.abs(want)))
        assert ulps.max() <= 8, ulps.max()
        assert (got != want).any() or got.size < 100  # (a sweep of this size differs from libm somewhere)


@given(csr_and_block(max_d=20), st.integers(0, 2**63 - 1), st.integers(0, 40), st.integers(0, 20), st.booleans(),
       st.booleans(), st.booleans(), st.sampled_from([1, 2, 3, 11, 17, 40]),
       st.sampled_from(["static", "lossy", "asleep", "bursty-asleep", "column"]))
@settings(max_examples=80, deadline=None)
def test_the_fused_delayed_mix_equals_the_mix_over_the_delays_index(case, seed, t, D, fixed, node_major, with_ids,
                                                                     w, base):
    """_core.mix_delayed (the ages drawn in the mixing pass, each row's draws a row ahead of its gathers) gives
    the bits of _core.mix (or mix_lossy, with losses, sleep, Gilbert-Elliott gates, renormalised or not) over
    delay_ages' index: both orders of the history, fixed and uniform delays (masked windows up to 16, longer ones
    drawn one by one), widths 1 (two rows at a time), 2-16 and wider (chunks), an MPI share's global ids, the
    second of two rounds."""
    from rowstoch_fast import _core

    csr, _ = case
    n = csr.shape[0]
    rng = np.random.default_rng(seed % 2**32)
    ids = {}
    if with_ids:  # (a share: its rows are some nodes, its columns every node)
        ids = {"row_ids": rng.permutation(n).astype(np.int64), "col_ids": np.arange(n, dtype=np.int64)}
    R, r = 2, 1
    layout = (n, n, R, node_major)
    H = rng.standard_normal((n + (D + 1) * R * n, w)).astype(csr.dtype)
    index = _core.delay_ages(csr.indptr, csr.indices, seed, t, r, D, fixed=fixed, layout=layout, **ids)
    indptr = csr.indptr.astype(index.dtype)
    lossy = {}
    if base == "static":
        want = _core.mix(indptr, index, csr.data, H, np.empty((n, w), csr.dtype), check_indices=True, ncols=len(H))
    else:
        lossy = {"loss_seed": seed // 3, "p": 0.0 if base == "asleep" else 0.3, "renormalise": base != "column",
                 "awake": rng.random(n) < 0.7 if "asleep" in base else None,
                 "bad": rng.random(csr.nnz) < 0.5 if "bursty" in base else None}
        nodes = np.arange(n, dtype=np.int64)
        rows = ids.get("row_ids", nodes)
        senders = np.concatenate([rows, (np.repeat if node_major else np.tile)(nodes, (D + 1) * R)])
        want = _core.mix_lossy(indptr, index, csr.data, H, np.empty((n, w), csr.dtype), seed=lossy["loss_seed"],
                               t=t, r=r, p=lossy["p"], renormalise=lossy["renormalise"], awake=lossy["awake"],
                               row_ids=rows, col_ids=senders, ncols=len(H), bad=lossy["bad"])
    got = np.full((n, w), np.nan, csr.dtype)
    _core.mix_delayed(csr.indptr, csr.indices, csr.data, H, got, seed, t, r, D, fixed, layout, **ids, **lossy)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("node_major", [True, False])
def test_a_long_delay_window_indexes_the_history_as_a_short_one(node_major, fixed):
    """Windows past 4096 ages compute each age's place in the history instead of tabling it (a fixed delay's
    links all read age D = 5000; uniform ones read young ages, from the table): the layout's rows, through
    delay_ages' index and the fused pass."""
    from rowstoch_fast import _core, topology

    A = sp.csr_matrix(topology.exponential(6).csr)
    n, D, t, R, r = 6, 5000, 6123, 2, 1
    ages = _core.delay_ages(A.indptr, A.indices, 3, t, r, D, fixed=fixed)
    index = _core.delay_ages(A.indptr, A.indices, 3, t, r, D, fixed=fixed, layout=(n, n, R, node_major))
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    slot = ((t - ages) % (D + 1)) * R + r
    expected = np.where(rows == A.indices, rows, n + (A.indices * (D + 1) * R + slot if node_major
                                                      else slot * n + A.indices))
    np.testing.assert_array_equal(index, expected)
    assert (ages.max() > 4096) == fixed  # (the computed path taken)
    H = np.random.default_rng(0).standard_normal((n + (D + 1) * R * n, 2))
    got = np.empty((n, 2))
    _core.mix_delayed(A.indptr, A.indices, A.data, H, got, 3, t, r, D, fixed, (n, n, R, node_major))
    np.testing.assert_array_equal(got, _core.mix(A.indptr.astype(index.dtype), index, A.data, H, np.empty((n, 2)),
                                                 ncols=len(H)))


def test_the_fused_delayed_mix_refuses_bad_input():
    from rowstoch_fast import _core

    indptr, indices, data = np.array([0, 2, 3]), np.array([0, 1, 1]), np.ones(3)
    H, out = np.ones((2 + 3 * 2, 4)), np.empty((2, 4))
    args = {"indptr": indptr, "indices": indices, "data": data, "H": H, "out": out, "seed": 0, "t": 5, "r": 0,
            "max_delay": 2, "fixed": False, "layout": (2, 2, 1)}
    _core.mix_delayed(**args)
    for kwargs, error, match in [
            ({"max_delay": -1}, ValueError, "max_delay must be in 0..2"),
            ({"layout": (2, 2, 1, True, 0)}, ValueError, "layout must be"),
            ({"layout": (1, 2, 1)}, ValueError, "does not hold 2 rows"),
            ({"layout": (2, 2, 1), "r": 1}, ValueError, "round 1"),
            ({"H": np.ones((7, 4))}, ValueError, "H has 7 rows"),
            ({"H": np.ones((8, 4), np.float32)}, TypeError, "dtype"),
            ({"out": np.empty((2, 3))}, ValueError, "out"),
            ({"out": H[:2]}, ValueError, "out"),
            ({"data": np.ones(2)}, ValueError, "data.size"),
            ({"indices": np.array([0, 1, 5])}, ValueError, r"indices\[2\] = 5 is out of range"),
            ({"row_ids": np.arange(2)}, ValueError, "row_ids and col_ids go together"),
            ({"p": 1.5}, ValueError, r"p must be in \[0, 1\]"),
            ({"awake": np.ones(1, bool)}, ValueError, "awake has 1 entries, expected 2"),
            ({"bad": np.ones(2, bool)}, ValueError, "bad has 2 entries, expected 3")]:
        with pytest.raises(error, match=match):
            _core.mix_delayed(**{**args, **kwargs})


def test_the_compiled_delays_refuse_bad_input():
    from rowstoch_fast import _core

    indptr, indices = np.array([0, 2, 3]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match="max_delay must be in 0..2"):
        _core.delay_ages(indptr, indices, 0, 5, 0, -1)
    with pytest.raises(ValueError, match=r"indices\[2\] = 5 is out of range"):
        _core.delay_ages(indptr, np.array([0, 1, 5]), 0, 5, 0, 2)
    with pytest.raises(ValueError, match="row_ids and col_ids go together"):
        _core.delay_ages(indptr, indices, 0, 5, 0, 2, row_ids=np.arange(2))
    with pytest.raises(ValueError, match="layout"):
        _core.delay_ages(indptr, indices, 0, 5, 3, 2, layout=(2, 2, 2))  # round 3 of 2
    with pytest.raises(ValueError, match="layout"):
        _core.delay_ages(indptr, indices, 0, 5, 0, 2, layout=(2, 1, 1))  # a block narrower than the columns


def test_the_compiled_arrival_draws_refuse_bad_input():
    from rowstoch_fast import _core

    indptr, indices = np.array([0, 2, 3]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        _core.lost_links(indptr, indices, 0, 0, 0, 1.5)
    with pytest.raises(ValueError, match=r"indices\[2\] = 5 is out of range for 2 columns"):
        _core.lost_links(indptr, np.array([0, 1, 5]), 0, 0, 0, 0.1)
    with pytest.raises(ValueError, match="row_ids and col_ids go together"):
        _core.lost_links(indptr, indices, 0, 0, 0, 0.1, row_ids=np.arange(2))
    with pytest.raises(ValueError, match="bad has 2 entries, expected 3"):
        _core.lost_links(indptr, indices, 0, 0, 0, 0.1, bad=np.zeros(2, np.uint8))
    with pytest.raises(TypeError, match="must both be int32 or both int64"):
        _core.lost_links(indptr.astype(np.int32), indices, 0, 0, 0, 0.1)


# ---------------------------------------------------------------- per-link running sums in one sweep (issue 52)
def _two_pass_running_sums(indptr, indices, data, arrived, X, pending):
    """The round as the CPU backend took it before the sweep (two CSR passes, a clear, a fancy update): the
    definition the sweeps equal bit for bit."""
    nnz = len(indices)
    taken = np.ascontiguousarray(data * arrived)
    out = _core.mix(indptr, indices, taken, X, check_indices=False, ncols=X.shape[0])
    every = np.arange(nnz, dtype=indptr.dtype)
    out = out + _core.mix(indptr, every, arrived.astype(data.dtype), pending, check_indices=False, ncols=nnz)
    kept = np.flatnonzero(~arrived)
    new = np.zeros_like(pending)
    new[kept] = pending[kept] + data[kept, None] * X[indices[kept]]
    return out, new


def _dense_running_sums(indptr, indices, data, arrived, X, pending):
    """The round from its equation, link by link in float64: out_i = sum over arrived links of C_ij x_j + p_ij."""
    out, new = np.zeros((len(indptr) - 1, X.shape[1])), np.zeros(pending.shape)
    for i in range(len(indptr) - 1):
        for p in range(indptr[i], indptr[i + 1]):
            mass = pending[p].astype(np.float64) + float(data[p]) * X[indices[p]].astype(np.float64)
            if arrived[p]:
                out[i] += mass
            else:
                new[p] = mass
    return out, new


@settings(max_examples=40, deadline=None)
@given(csr_and_block(max_n=10, max_d=4), st.sampled_from([1, 2, 3, 17, 35]), st.integers(0, 2**32 - 1))
def test_running_sums_sweeps_equal_the_two_pass_form_round_after_round(A_X, w, seed):
    """Both sweeps (dense blocks with per-link flags; the mass held compactly by the links that hold any) equal the
    two-pass form bit for bit, round after round with fresh arrivals, two quantities in one sweep (widths on
    either side of the 16-column chunk), from a first round whose flags know nothing (all ones), and the
    equation link by link to rounding."""
    A, _ = A_X
    fdt = A.dtype
    indptr, indices, data = A.indptr, A.indices, np.abs(A.data)  # (column weights are >= 0)
    nnz, n = len(indices), A.shape[0]
    rng = np.random.default_rng(seed)
    widths = (w, 1)
    Xs = [rng.standard_normal((n, k)).astype(fdt) for k in widths]
    ref = [np.where(rng.random((nnz, 1)) < 0.5, rng.standard_normal((nnz, k)), 0).astype(fdt) for k in widths]
    dense = [[p.copy(), np.zeros_like(p)] for p in ref]  # (double-buffered, as the algorithms keep them)
    flags = [[np.ones(nnz, np.uint8), np.ones(nnz, np.uint8)] for _ in widths]
    compact = []
    for p in ref:
        ids = np.flatnonzero((p != 0).any(axis=1)).astype(np.int64)
        compact.append((ids, np.ascontiguousarray(p[ids])))
    for k in range(4):
        rows = np.repeat(np.arange(n), np.diff(indptr))
        arrived = (rng.random(nnz) < 0.6) | (rows == indices)
        a, b = k % 2, (k + 1) % 2
        outs_dense = [np.empty((n, x.shape[1]), dtype=fdt) for x in Xs]
        outs_compact = [np.empty((n, x.shape[1]), dtype=fdt) for x in Xs]
        rooms = [(np.empty(nnz, np.int64), np.empty((nnz, x.shape[1]), dtype=fdt)) for x in Xs]
        _core.running_sums(indptr, indices, data, arrived,
                           [(Xs[q], outs_dense[q], dense[q][a], dense[q][b], flags[q][a], flags[q][b])
                            for q in range(2)])
        held = _core.running_sums_compact(indptr, indices, data, arrived,
                                          [(Xs[q], outs_compact[q], *compact[q], *rooms[q]) for q in range(2)])
        assert held == int((~arrived).sum())
        for q in range(2):
            want_out, want_new = _two_pass_running_sums(indptr, indices, data, arrived, Xs[q], ref[q])
            exact_out, exact_new = _dense_running_sums(indptr, indices, data, arrived, Xs[q], ref[q])
            np.testing.assert_array_equal(outs_dense[q], want_out)
            np.testing.assert_array_equal(outs_compact[q], want_out)
            np.testing.assert_array_equal(dense[q][b], want_new)
            np.testing.assert_array_equal(flags[q][b], (~arrived).astype(np.uint8))
            np.testing.assert_array_equal(rooms[q][0][:held], np.flatnonzero(~arrived))
            np.testing.assert_array_equal(rooms[q][1][:held], want_new[~arrived])
            np.testing.assert_allclose(want_out, exact_out, rtol=tol(fdt), atol=tol(fdt) * 10)
            np.testing.assert_allclose(want_new, exact_new, rtol=tol(fdt), atol=tol(fdt) * 10)
            ref[q], compact[q] = want_new, (rooms[q][0][:held], rooms[q][1][:held])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**63 - 1), t=st.integers(0, 2**40), p=st.floats(0.0, 1.0),
       idt=st.sampled_from([np.int32, np.int64]), pattern=st.integers(0, 2**32 - 1))
def test_the_sweeps_own_draws_on_long_rows_are_the_definitions(n, seed, t, p, idt, pattern):
    """The compact sweep's own draws are the definition, link by link: arrived unless uniform_hash(seed, t, r, i, j)
    < p (j != i; a self loop always arrives), on rows of 0 to 40 links (duplicates, self loops, unsorted columns),
    int32 and int64 indices, and the sums of the sweep handed those arrivals."""
    from rowstoch_fast._hashing import uniform_hash

    rng = np.random.default_rng(pattern)
    counts = rng.integers(0, 41, n) * (rng.random(n) < 0.8)
    rows = np.repeat(np.arange(n), counts)
    cols = rng.integers(0, n, len(rows))
    selfish = rng.random(len(rows)) < 0.1  # (self loops)
    cols[selfish] = rows[selfish]
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(idt)
    indices, data = cols.astype(idt), rng.random(len(rows))
    X = rng.standard_normal((n, 3))
    drawn = np.empty(len(rows), dtype=bool)
    out, room = np.empty_like(X), (np.empty(len(rows), np.int64), np.empty((len(rows), 3)))
    none = (np.empty(0, np.int64), np.empty((0, 3)))
    held = _core.running_sums_compact(indptr, indices, data, drawn, [(X, out, *none, *room)], draw=(seed, t, 2, p))
    want = (rows == cols) | (uniform_hash(np.uint64(seed), np.uint64(t), np.uint64(2), rows.astype(np.uint64),
                                          cols.astype(np.uint64)) >= p)
    np.testing.assert_array_equal(drawn, want)
    assert held == int((~want).sum())
    given_out, given_room = np.empty_like(out), (np.empty(len(rows), np.int64), np.empty((len(rows), 3)))
    _core.running_sums_compact(indptr, indices, data, want, [(X, given_out, *none, *given_room)])
    np.testing.assert_array_equal(out, given_out)
    np.testing.assert_array_equal(room[1][:held], given_room[1][:held])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**63 - 1), p=st.sampled_from([0.05, 0.5, 1.0]),
       idt=st.sampled_from([np.int32, np.int64]), fdt=st.sampled_from([np.float64, np.float32]),
       w=st.sampled_from([1, 3, 10, 17]), renormalise=st.booleans(), pattern=st.integers(0, 2**32 - 1))
def test_the_lossy_pass_on_long_rows_is_the_reference_round_and_its_stacked_form(n, seed, p, idt, fdt, w, renormalise,
                                                                                 pattern):
    """The lossy pass's losses-only case on rows of 0 to 150 links (duplicates, self loops), widths in registers and
    not, both rules, both index and value types: the reference round bit for bit; over a stacked [own rows;
    messages] block (stacked=True, the same fast case) the bits of the general case over own_and_messages' index."""
    rng = np.random.default_rng(pattern)
    counts = rng.integers(0, 151, n) * (rng.random(n) < 0.8)
    rows = np.repeat(np.arange(n), counts)
    cols = rng.integers(0, n, len(rows))
    selfish = rng.random(len(rows)) < 0.05
    cols[selfish] = rows[selfish]
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(idt)
    indices, data = cols.astype(idt), rng.random(len(rows)).astype(fdt)
    X = rng.standard_normal((n, w)).astype(fdt)
    kw = dict(seed=seed, t=seed % 997, r=3, p=p, renormalise=renormalise)
    got = _core.mix_lossy(indptr, indices, data, X, None, **kw)
    want = _reference.lossy_round(indptr, indices, data, X, seed, seed % 997, 3, p, renormalise)
    np.testing.assert_array_equal(got, want)
    Q = rng.standard_normal((n, w)).astype(fdt)
    stacked = _core.mix_lossy(indptr, indices, data, np.concatenate([X, Q]), None, stacked=True, **kw)
    index = np.where(rows == cols, rows, cols + n).astype(idt)
    nodes = np.arange(n, dtype=np.int64)
    general = _core.mix_lossy(indptr, index, data, np.concatenate([X, Q]), None, ncols=2 * n, row_ids=nodes,
                              col_ids=np.concatenate([nodes, nodes]), **kw)
    np.testing.assert_array_equal(stacked, general)
    split = _core.mix_lossy(indptr, indices, data, X, None, messages=Q, **kw)  # (the own rows read from X)
    np.testing.assert_array_equal(split, stacked)


def test_running_sums_refuse_bad_arguments_clearly():
    """Wrong sizes, dtypes, strided or overlapping outputs and unsorted link ids raise, naming the argument."""
    indptr, indices = np.array([0, 2, 3], dtype=np.int64), np.array([0, 1, 1], dtype=np.int64)
    data, arrived = np.array([0.5, 0.5, 1.0]), np.array([True, False, True])
    X, out, P, Q = np.ones((2, 3)), np.empty((2, 3)), np.zeros((3, 3)), np.zeros((3, 3))
    h, g = np.ones(3, np.uint8), np.ones(3, np.uint8)
    _core.running_sums(indptr, indices, data, arrived, [(X, out, P, Q, h, g)])
    with pytest.raises(ValueError, match=r"blocks\[0\].pending must have shape"):
        _core.running_sums(indptr, indices, data, arrived, [(X, out, P[:2], Q, h, g)])
    with pytest.raises(TypeError, match=r"blocks\[0\].X must have dtype|X"):
        _core.running_sums(indptr, indices, data, arrived, [(X.astype(np.float32), out, P, Q, h, g)])
    with pytest.raises(ValueError, match=r"pending_out shares memory"):
        _core.running_sums(indptr, indices, data, arrived, [(X, out, P, P, h, g)])
    with pytest.raises(ValueError, match=r"contiguous"):
        _core.running_sums(indptr, indices, data, arrived, [(X, np.empty((2, 6))[:, ::2], P, Q, h, g)])
    with pytest.raises(ValueError, match=r"arrived has 2 entries"):
        _core.running_sums(indptr, indices, data, arrived[:2], [(X, out, P, Q, h, g)])
    with pytest.raises(ValueError, match=r"1 to 8"):
        _core.running_sums(indptr, indices, data, arrived, [])
    with pytest.raises(TypeError, match=r"blocks\[0\].held must be a bool"):
        _core.running_sums(indptr, indices, data, arrived, [(X, out, P, Q, None, g)])
    with pytest.raises(TypeError, match=r"blocks\[0\] must be a tuple"):
        _core.running_sums(indptr, indices, data, arrived, [[X, out, P, Q, h, g]])
    ids, room, rows = np.array([2, 1], dtype=np.int64), np.empty(3, np.int64), np.empty((3, 3))
    with pytest.raises(ValueError, match=r"increasing link ids"):
        _core.running_sums_compact(indptr, indices, data, arrived, [(X, out, ids, np.zeros((2, 3)), room, rows)])
    with pytest.raises(ValueError, match=r"room for every link"):
        _core.running_sums_compact(indptr, indices, data, arrived, [(X, out, ids[:0], np.zeros((0, 3)), room[:2],
                                                                     rows)])
    with pytest.raises(ValueError, match=r"pending must have shape"):
        _core.running_sums_compact(indptr, indices, data, arrived, [(X, out, ids[1:], np.zeros((2, 3)), room, rows)])
    with pytest.raises(TypeError, match=r"int64"):
        _core.running_sums_compact(indptr, indices, data, arrived, [(X, out, ids[1:].astype(np.int32),
                                                                     np.zeros((1, 3)), room, rows)])
    with pytest.raises(ValueError, match=r"blocks\[0\].X must have at least one column, got 0"):
        _core.running_sums_compact(indptr, indices, data, arrived, [(X[:, :0], out[:, :0], ids[:0],
                                                                     np.zeros((0, 0)), room, rows[:, :0])])


@settings(max_examples=25, deadline=None)
@given(csr_and_block(max_n=12, max_d=3), st.integers(0, 2**40), st.integers(0, 50), st.floats(0.0, 1.0))
def test_the_compact_sweep_draws_the_losses_of_lost_links(A_X, seed, t, p):
    """draw = (seed, t, r, p): the sweep draws the round's Bernoulli losses itself, the same as lost_links (a self
    loop always arriving) and the same sums as when it is handed them."""
    A, X = A_X
    indptr, indices, data = A.indptr, A.indices, np.abs(A.data)
    nnz, n, w = len(indices), A.shape[0], X.shape[1]
    drawn = np.empty(nnz, dtype=bool)
    out, room = np.empty((n, w), dtype=X.dtype), (np.empty(nnz, np.int64), np.empty((nnz, w), dtype=X.dtype))
    none = (np.empty(0, np.int64), np.empty((0, w), dtype=X.dtype))
    held = _core.running_sums_compact(indptr, indices, data, drawn, [(X, out, *none, *room)], draw=(seed, t, 1, p))
    arrived = ~_core.lost_links(indptr, indices, seed, t, 1, p).view(bool)
    np.testing.assert_array_equal(drawn, arrived)
    assert held == int((~arrived).sum())
    given_out, given_room = np.empty_like(out), (np.empty(nnz, np.int64), np.empty((nnz, w), dtype=X.dtype))
    _core.running_sums_compact(indptr, indices, data, arrived, [(X, given_out, *none, *given_room)])
    np.testing.assert_array_equal(out, given_out)
    np.testing.assert_array_equal(room[1][:held], given_room[1][:held])
    with pytest.raises(TypeError, match=r"draw must be a tuple"):
        _core.running_sums_compact(indptr, indices, data, drawn, [(X, out, *none, *room)], draw=[seed, t, 1, p])


# ------------------------------------------------------------------ a per-sample gradient table's entries
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40), st.integers(1, 3), st.integers(1, 7), st.sampled_from(["f4", "f8"]),
       st.sampled_from(["i4", "i8"]), st.booleans(), st.integers(0, 2**31))
def test_sample_rows_equal_the_definition(m, rows, reps, d, dtype, itype, flat, seed):
    """``block[i * reps + r] = table[idx[r, i], i, r]`` and its inverse, against a loop over the definition (the
    draws given as (reps, rows), or (rows,) for one replica); any thread count (the rows split over threads)."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((m, rows, reps, d)).astype(dtype)
    idx = rng.integers(0, m, (reps, rows)).astype(itype)
    if flat and reps == 1:
        idx = idx[0]
    want = np.empty((rows * reps, d), dtype)
    for i in range(rows):
        for r in range(reps):
            want[i * reps + r] = table[idx.reshape(reps, rows)[r, i], i, r]
    block = np.full((rows, reps * d), np.nan, dtype)  # (a node-major block, as an optimizer's)
    _core.sample_rows(table, idx, block, False)
    np.testing.assert_array_equal(block.reshape(-1, d), want)
    values = rng.standard_normal(block.shape).astype(dtype)
    expected = table.copy()
    for i in range(rows):
        for r in range(reps):
            expected[idx.reshape(reps, rows)[r, i], i, r] = values.reshape(-1, d)[i * reps + r]
    _core.sample_rows(table, idx, values, True)
    np.testing.assert_array_equal(table, expected)


def test_sample_rows_on_many_threads_equal_one():
    table = np.random.default_rng(0).standard_normal((4, 5000, 2, 10))
    idx = np.random.default_rng(1).integers(0, 4, (2, 5000))
    threads = _core.get_num_threads()
    try:
        blocks = []
        for t in (1, 3):
            _core.set_num_threads(t)
            block = np.empty((5000, 20))
            _core.sample_rows(table, idx, block, False)
            blocks.append(block)
    finally:
        _core.set_num_threads(threads)
    np.testing.assert_array_equal(blocks[0], blocks[1])
    np.testing.assert_array_equal(blocks[0].reshape(-1, 10), table[idx.T, np.arange(5000)[:, None], [0, 1]].reshape(-1, 10))


def test_sample_rows_refuse_what_they_cannot_read_naming_it():
    table, block = np.zeros((3, 4, 1, 2)), np.zeros((4, 2))
    with pytest.raises(ValueError, match="idx holds 3 at position 2: not a sample of the table's 3"):
        _core.sample_rows(table, np.array([0, 1, 3, 0]), block, False)
    with pytest.raises(ValueError, match="idx holds -1 at position 0"):
        _core.sample_rows(table, np.array([-1, 1, 2, 0]), block, True)
    with pytest.raises(ValueError, match=r"idx must hold one draw per node and replica \(4 x 1 = 4\), got 3"):
        _core.sample_rows(table, np.array([0, 1, 2]), block, False)
    with pytest.raises(ValueError, match=r"block must hold 4 entries of 2 values \(8\), got 6"):
        _core.sample_rows(table, np.zeros(4, np.int64), np.zeros((3, 2)), False)
    with pytest.raises(TypeError, match="block has dtype float32 but table has dtype float64"):
        _core.sample_rows(table, np.zeros(4, np.int64), block.astype(np.float32), False)
    with pytest.raises(TypeError, match="idx must be int32 or int64, got float64"):
        _core.sample_rows(table, np.zeros(4), block, False)
    with pytest.raises(ValueError, match="table must be 4-D"):
        _core.sample_rows(table[0], np.zeros(4, np.int64), block, False)
    frozen = table.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="table must be writeable"):
        _core.sample_rows(frozen, np.zeros(4, np.int64), block, True)
    with pytest.raises(ValueError, match="block must be C-contiguous"):
        _core.sample_rows(table, np.zeros(4, np.int64), np.zeros((2, 4)).T, False)


def test_the_cpu_backend_leaves_to_numpy_what_the_kernel_would_refuse():
    """Draws that are not integers (NumPy refuses them: no silent truncation) and a table of non-native byte order
    (NumPy reads it) go NumPy's way; unsigned draws are the compiled pass's."""
    from rowstoch_fast.backends.cpu import CpuBackend

    ops = CpuBackend()
    table = np.arange(24, dtype=np.float64).reshape(3, 4, 1, 2)
    block = np.empty((4, 2))
    with pytest.raises((IndexError, TypeError)):
        ops.take_samples(table, np.array([0.9, 1.5, 0.2, 2.0]), block)
    assert not CpuBackend._sample_rows(table.astype(">f8"), np.zeros(4, np.int64), block.astype(">f8"), False)
    swapped = np.empty((4, 2), ">f8")
    ops.take_samples(table.astype(">f8"), np.array([2, 0, 1, 2]), swapped)
    np.testing.assert_array_equal(swapped, table[[2, 0, 1, 2], np.arange(4), 0])
    ops.take_samples(table, np.array([2, 0, 1, 2], np.uint8), block)
    np.testing.assert_array_equal(block, table[[2, 0, 1, 2], np.arange(4), 0])
